#!/usr/bin/env python3
"""Splits a callgrind dump of BF commands (recorded with --dump-instr=yes) into where the
instructions went, per item: Redis's own path, and within the module's command the filter
core's parts and the glue's.

    instructions_split.py MODULE.so ITEMS_PER_COMMAND COMMANDS DUMP

Every instruction the module executes is attributed by its address (callgrind records a
shared object's as offsets in its file): addr2line gives the
chain of functions inlined at it (the core's are nearly all inlined into one function, so
function names alone cannot split it), and the innermost function of the chain that names a
part decides. A call from the module into Redis (a module API function) or a C library
counts, inclusive, for the part its callee names (replies, replication, events, the key) or
else for the code that called it. Prints one markdown row: the parts, instructions per item.
"""
import re
import subprocess
import sys

# (part, pattern on a function name of the inline chain), tried innermost function first.
CORE = [
    ("hashing", r"xxh3|xxhash|ItemHash::of|murmur"),
    ("counting", r"count_item"),
    (
        "positions",
        r"block_index|prefetch|Positions::(new|next|mask)$|first_mask|Stream::(of|at)$"
        r"|avx512::block_mask$",
    ),
    (
        # `BlockedLayer>::`: the AVX-512 add's methods, in `impl BlockedLayer` of `avx512`.
        "bits",
        r"Block::(holds|set)$|BlockedLayer>?::(insert_new\w*|insert_past_first|insert|set_slots"
        r"|set_item_bits|contains|first_block_matches)(<.*>)?$|blocked_contains"
        r"|avx512::(load|store)$",
    ),
]
GLUE = [
    ("reply", r"reply::|RM_ReplyWith"),
    ("replication", r"RM_Replicate|replicate"),
    ("events", r"notify|RM_NotifyKeyspaceEvent"),
    ("statistics", r"stats::"),
    ("capacity", r"health::|LoadMark|layer_load|capacity_warnings|memory::Limits|RM_GetContextFlags"),
    ("key", r"RM_OpenKey|RM_CloseKey|RM_KeyType|RM_ModuleType|keys::|window::write|windowed::write"),
    ("arguments", r"RM_StringPtrLen|as_slice|slices|args::|dispatch::"),
]
CORE_MARK = re.compile(r"layerbloom_filter::|xxhash_rust::")
# The filter crate's code that the glue calls around an add, not the add itself: the capacity
# marks before and after, and the figures the statistics read.
GLUE_IN_FILTER = re.compile(r"health::|LoadMark|layer_load|stats::")


def classify(chain, rules, default):
    for name in chain:
        for part, pattern in rules:
            if re.search(pattern, name):
                return part
    return default


def main():
    module, per_command, commands, dump = sys.argv[1:5]
    per_command, commands = int(per_command), int(commands)
    self_cost = {}  # address in the module -> its own instructions
    calls_out = []  # (call site in the module, callee, inclusive instructions)
    dispatcher = timer = total = 0
    ob = fn = cfn = cob = None
    pending = None  # what the cost line after a calls= line is the inclusive cost of
    with open(dump) as f:
        for line in f:
            if line.startswith("summary:"):
                total = int(line.split()[1])
            elif line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("cob="):
                cob = line[4:].strip()
            elif line.startswith("cfn="):
                cfn = line[4:].strip()
            elif line.startswith("calls="):
                pending = (cob if cob is not None else ob, cfn)
                cob = None
            elif line[:1].isdigit() or line.startswith("+") or line.startswith("-"):
                fields = line.split()
                if len(fields) < 3:
                    continue
                address, cost = int(fields[0], 16), int(fields[2])
                if pending is not None:
                    callee_ob, callee = pending
                    pending = None
                    if callee == "RedisModuleCommandDispatcher" and fn != callee:
                        dispatcher += cost
                    if callee == "serverCron" and fn != callee:
                        timer += cost
                    if ob == module and callee_ob != module:
                        calls_out.append((address, callee, cost))
                elif ob == module:
                    self_cost[address] = self_cost.get(address, 0) + cost
    addresses = sorted(set(self_cost) | {a for a, _, _ in calls_out})
    chains = inline_chains(module, addresses)
    # Line tables name inlined functions without their paths ("mask", "next"): the parts'
    # patterns would miss them.
    inlined = (name for chain in chains.values() for name in chain[:-1])
    if any(re.fullmatch(r"[a-z_][a-z0-9_]*(<.*>)?", name) for name in inlined):
        sys.exit(
            f"{module}: no qualified names of inlined functions (a build with line tables "
            "only?); build with CARGO_PROFILE_RELEASE_DEBUG=full (make bench-instructions)"
        )
    parts = {}

    def count(part, cost):
        parts[part] = parts.get(part, 0) + cost

    def attribute(address, callee, cost):
        chain = chains.get(address, [])
        names = ([callee] if callee else []) + chain
        if any(CORE_MARK.search(n) for n in chain) and not any(
            GLUE_IN_FILTER.search(n) for n in chain
        ):
            count("core: " + classify(names, CORE, "batch path"), cost)
        else:
            count("glue: " + classify(names, GLUE, "handler"), cost)

    for address, cost in self_cost.items():
        attribute(address, None, cost)
    for address, callee, cost in calls_out:
        attribute(address, callee, cost)
    module_total = sum(parts.values())
    items = per_command * commands
    row = {
        "all": total - timer,
        "Redis's path": total - timer - dispatcher,
        "module context": dispatcher - module_total,
    }
    row.update(parts)
    core = sum(v for k, v in parts.items() if k.startswith("core: "))
    row["core"] = core
    row["glue"] = module_total - core
    columns = [
        "all", "Redis's path", "module context", "glue", "core",
        "core: hashing", "core: positions", "core: bits", "core: counting", "core: batch path",
        "glue: arguments", "glue: key", "glue: reply", "glue: replication", "glue: events",
        "glue: statistics", "glue: capacity", "glue: handler",
    ]
    print(" | ".join(str(round(row.get(c, 0) / items)) for c in columns))


def inline_chains(module, offsets):
    """The function names inlined at each offset, innermost first."""
    out = subprocess.run(
        ["addr2line", "-a", "-f", "-i", "-C", "-e", module],
        input="\n".join(hex(o) for o in offsets),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    chains, current, expect_name = {}, None, False
    for line in out:
        if re.fullmatch(r"0x[0-9a-f]{16}", line):
            current = int(line, 16)
            chains[current] = []
            expect_name = True
        elif expect_name:
            chains[current].append(line)
            expect_name = False
        else:
            # A file:line; another inlined frame's name may follow.
            expect_name = True
    return chains


if __name__ == "__main__":
    main()

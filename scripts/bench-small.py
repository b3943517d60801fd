#!/usr/bin/env python3
"""Memory per key of many small filters: two servers of the same binary side by side, one with
layerbloom and one with RedisBloom, receive the same commands (N keys of each shape), and the
growth of used_memory per key is printed for both with the ratio. Each shape runs on a fresh
pair of servers; after the fill, every second key is deleted and mem_fragmentation_ratio
(and the allocator's own fragmentation ratio) is printed. A few keys of each shape are then
probed with items never added, and the measured false-positive rate is printed next to the
asked one. A measurement, never a pass/fail. Commands are pipelined.

usage: scripts/bench-small.py [--keys N] [--server redis-server] [--module liblayerbloom.so]
                              [--redisbloom redisbloom.so] [--shapes name,name]
"""
import argparse, os, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resp  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--keys", type=int, default=20_000)
p.add_argument("--server", default="redis-server")
p.add_argument("--module", default="target/release/liblayerbloom.so")
p.add_argument("--redisbloom", default="target/servers/redis-7.4.1/redisbloom.so")
p.add_argument("--shapes", default="")
p.add_argument("--probe-keys", type=int, default=20)
p.add_argument("--probes", type=int, default=5_000)
ARGS = p.parse_args()

WINDOW = ["WINDOW", "2592000000", "SLICES", "2"]

# name, error rate asked (None: none), items added, the commands creating a key on layerbloom
# (key substituted for {k}; none: the first add creates it), and those on RedisBloom when they
# differ (None: the same; given, the filter is two keys {k}:a and {k}:b, items go to {k}:a).
SHAPES = [
    ("reserve 0.01 60", 0.01, 60, [["BF.RESERVE", "{k}", "0.01", "60"]], None),
    ("reserve 0.001 300", 0.001, 300, [["BF.RESERVE", "{k}", "0.001", "300"]], None),
    ("reserve 0.01 1800", 0.01, 1800, [["BF.RESERVE", "{k}", "0.01", "1800"]], None),
    ("madd (0.01/100) 60", 0.01, 60, [], None),
    ("madd (0.01/100) 1800", 0.01, 1800, [], None),
    ("reserve 0.01 60 NONSCALING", 0.01, 60, [["BF.RESERVE", "{k}", "0.01", "60", "NONSCALING"]], None),
    ("reserve 0.001 300 NONSCALING", 0.001, 300, [["BF.RESERVE", "{k}", "0.001", "300", "NONSCALING"]], None),
    ("reserve 0.01 1800 NONSCALING", 0.01, 1800, [["BF.RESERVE", "{k}", "0.01", "1800", "NONSCALING"]], None),
    # Windowed on layerbloom (each slice a filter of capacity / slices items, made when its
    # period begins); on RedisBloom the rotation it replaces: two plain filters of that
    # capacity, reserved up front, lookups asking both. One period's items (capacity / slices)
    # go to the current slice / key: the other slice is not made before the window moves on,
    # so a layerbloom window in its steady state holds one more slice than measured here.
    ("window 0.01 60 SLICES 2 / 2 keys of 30", 0.01, 30,
     [["BF.RESERVE", "{k}", "0.01", "60"] + WINDOW],
     [["BF.RESERVE", "{k}:a", "0.01", "30"], ["BF.RESERVE", "{k}:b", "0.01", "30"]]),
    ("window 0.001 300 SLICES 2 / 2 keys of 150", 0.001, 150,
     [["BF.RESERVE", "{k}", "0.001", "300"] + WINDOW],
     [["BF.RESERVE", "{k}:a", "0.001", "150"], ["BF.RESERVE", "{k}:b", "0.001", "150"]]),
    ("cf.reserve 60", None, 60, [["CF.RESERVE", "{k}", "60"]], None),
    ("cf.reserve 300", None, 300, [["CF.RESERVE", "{k}", "300"]], None),
    ("cf.reserve 1800", None, 1800, [["CF.RESERVE", "{k}", "1800"]], None),
]


def enc(args):
    return resp.enc(*args)


class Conn(resp.Conn):
    def pipe(self, cmds, batch=500):
        """Sends the commands in batches without waiting between them; raises on any error."""
        out = []
        for i in range(0, len(cmds), batch):
            part = cmds[i:i + batch]
            self.s.sendall(b"".join(enc(c) for c in part))
            out.extend(self.read() for _ in part)
        return out

    def send_raw(self, data, count):
        """Sends count commands already encoded; raises on any error reply."""
        self.s.sendall(data)
        for _ in range(count):
            self.read()

    def info(self, field):
        for line in self.q("INFO", "memory").decode().splitlines():
            if line.startswith(field + ":"):
                return float(line.split(":", 1)[1])
        raise KeyError(field)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, module):
        port = free_port()
        self.dir = tempfile.mkdtemp(prefix="bench-small-")
        self.p = subprocess.Popen([ARGS.server, "--port", str(port), "--dir", self.dir, "--save", "",
                                   "--appendonly", "no", "--loadmodule", os.path.abspath(module)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                self.c = Conn(port)
                self.c.q("PING")
                break
            except (OSError, RuntimeError):
                time.sleep(0.05)
        else:
            raise RuntimeError(f"{ARGS.server} did not start with {module}")
        # The server answering is the one started here (not another one on that port).
        pid = [l for l in self.c.q("INFO", "server").decode().splitlines() if l.startswith("process_id:")]
        if self.p.poll() is not None or pid != [f"process_id:{self.p.pid}"]:
            raise RuntimeError(f"port {port} is another server's")

    def stop(self):
        self.p.terminate()
        self.p.wait()


def items(n, tag="item"):
    """The same items go to every key but the probed ones (memory does not depend on which
    items), so each batch of them is encoded once."""
    return [f"{tag}:{i}" for i in range(n)]


def fill(c, shape, rb):
    name, _, n, create_lb, create_rb = shape
    create = create_rb if (rb and create_rb) else create_lb
    cuckoo = name.startswith("cf.")
    target = "{k}:a" if (rb and create_rb) else "{k}"
    extra = ["NOCREATE", "ITEMS"] if cuckoo else []

    def encoded(its):
        """Each add command: its head (the command, the key) encoded per key, the items once."""
        return [(2 + len(extra) + len(its[j:j + 100]),
                 b"".join(enc([a])[len(b"*1\r\n"):] for a in extra + its[j:j + 100]))
                for j in range(0, n, 100)]
    shared = encoded(items(n))
    add = "CF.INSERT" if cuckoo else "BF.MADD"
    buf, pending = [], 0
    for k in range(ARGS.keys):
        key = f"u{k}"
        for cmd in create:
            buf.append(enc([a.replace("{k}", key) for a in cmd]))
            pending += 1
        head = enc([add, target.replace("{k}", key)])[len(b"*2\r\n"):]
        # The keys probed for false positives get items of their own (distinct filters).
        for count, body in (encoded(items(n, f"item{k}")) if k < ARGS.probe_keys else shared):
            buf.append(b"*%d\r\n" % count + head + body)
            pending += 1
        if pending >= 1000 or k == ARGS.keys - 1:
            c.send_raw(b"".join(buf), pending)
            buf, pending = [], 0


def keys_of(shape, rb, k):
    return [f"u{k}:a", f"u{k}:b"] if (rb and shape[4]) else [f"u{k}"]


def fp_rate(c, shape, rb):
    cuckoo = shape[0].startswith("cf.")
    hits = total = 0
    for k in range(ARGS.probe_keys):
        probes = items(ARGS.probes, f"absent{k}")
        answers = [0] * len(probes)
        for key in keys_of(shape, rb, k):
            cmd = "CF.MEXISTS" if cuckoo else "BF.MEXISTS"
            for j in range(0, len(probes), 500):
                got = c.q(cmd, key, *probes[j:j + 500])
                for i, g in enumerate(got):
                    answers[j + i] |= g
        hits += sum(answers)
        total += len(answers)
    return hits / total


def run(shape):
    lb, rb = Server(ARGS.module), Server(ARGS.redisbloom)
    try:
        res = {}
        for side, srv in (("lb", lb), ("rb", rb)):
            c = srv.c
            base = c.info("used_memory")
            fill(c, shape, side == "rb")
            grown = c.info("used_memory") - base
            usage = c.q("MEMORY", "USAGE", keys_of(shape, side == "rb", 0)[0], "SAMPLES", "0")
            fpr = fp_rate(c, shape, side == "rb")
            dels = [["DEL"] + keys_of(shape, side == "rb", k) for k in range(0, ARGS.keys, 2)]
            c.pipe(dels)
            time.sleep(0.2)
            res[side] = (grown / ARGS.keys, usage, fpr, c.info("mem_fragmentation_ratio"),
                         c.info("allocator_frag_ratio"))
        return res
    finally:
        lb.stop()
        rb.stop()


def main():
    chosen = [s for s in SHAPES if not ARGS.shapes or s[0] in ARGS.shapes.split(",")]
    ver = subprocess.run([ARGS.server, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{ver}; {ARGS.keys} keys per shape; used_memory growth per key (B/key); "
          f"MEMORY USAGE of one key; frag = mem_fragmentation_ratio / allocator_frag_ratio "
          f"after deleting every second key; fp = measured false-positive rate over "
          f"{ARGS.probe_keys} keys x {ARGS.probes} absent items (asked rate in brackets)")
    print("| filter per key | RedisBloom B/key | layerbloom B/key | ratio | MEMORY USAGE rb / lb "
          "| frag rb | frag lb | fp rb | fp lb (asked) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in chosen:
        r = run(shape)
        lb, rb = r["lb"], r["rb"]
        asked = f"{shape[1]}" if shape[1] else "-"
        print(f"| {shape[0]}, {shape[2]} items | {rb[0]:.0f} | {lb[0]:.0f} | {lb[0] / rb[0]:.2f}x "
              f"| {rb[1]} / {lb[1]} | {rb[3]:.2f} / {rb[4]:.2f} | {lb[3]:.2f} / {lb[4]:.2f} "
              f"| {rb[2]:.4f} | {lb[2]:.4f} ({asked}) |", flush=True)


main()

#!/usr/bin/env python3
"""Replays hostile commands against a fresh server and prints, per attack, the slowest single
command the server saw (SLOWLOG, every command logged). A measurement, never a pass/fail.

usage: [ATTACKS=part of a name] scripts/bench-hostile.py [module.so] [redis-server]
"""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resp  # noqa: E402
from resp import enc  # noqa: E402

MODULE = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/liblayerbloom.so")
SERVER = sys.argv[2] if len(sys.argv) > 2 else "redis-server"
PORT = int(os.environ.get("BENCH_PORT", "6391"))


class Conn(resp.Conn):
    def __init__(self):
        super().__init__(PORT, raise_errors=False)

    def send(self, *args):
        self.s.sendall(enc(*args))

    def pipeline(self, cmds, window=1000):
        for i in range(0, len(cmds), window):
            part = cmds[i:i + window]
            self.s.sendall(b"".join(enc(*c) for c in part))
            for _ in part:
                self.read()


def start():
    d = tempfile.mkdtemp(prefix="bench-hostile-")
    p = subprocess.Popen([SERVER, "--port", str(PORT), "--dir", d, "--save", "", "--appendonly", "no",
                          "--loadmodule", MODULE, "--slowlog-log-slower-than", "0",
                          "--slowlog-max-len", "300000", "--logfile", os.path.join(d, "redis.log")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            c = Conn()
            c.q("PING")
            return p, c
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def slowest(c):
    entries = c.q("SLOWLOG", "GET", "-1")
    best = max(entries, key=lambda e: e[2])
    return best[2], b" ".join(a if len(a) < 30 else a[:20] + b"..." for a in best[3][:4]).decode(errors="replace")


def header_of(c, key):
    return c.q("BF.SCANDUMP", key, 0)[1]


def with_layers(h, count, blocks=None):
    """A layerbloom header with `count` copies of its first layer (blocks overridden)."""
    layer = bytearray(h[36:76])
    if blocks is not None:
        layer[24:32] = blocks.to_bytes(8, "little")
    out = bytearray(h[:36])
    out[32:36] = count.to_bytes(4, "little")
    return bytes(out) + bytes(layer) * count


def attack_reserve_3g(c):
    c.q("CONFIG", "SET", "bf.bf-max-filter-memory", "4gb")
    return c.q("BF.RESERVE", "k", 0.00001, 1000000000)


def attack_reserve_300m(c):
    return c.q("BF.RESERVE", "k", 0.01, 300000000)


def attack_madd_growth(c):
    c.q("CONFIG", "SET", "bf.bf-max-filter-memory", "4gb")
    c.q("BF.RESERVE", "k", 0.01, 40000, "EXPANSION", 32768)
    return c.q("BF.MADD", "k", *[f"i{i}" for i in range(40001)])[-1]


def attack_loadchunk_3g_header(c):
    c.q("CONFIG", "SET", "bf.bf-max-filter-memory", "4gb")
    c.q("BF.RESERVE", "src", 0.01, 1000, "NONSCALING")
    return c.q("BF.LOADCHUNK", "k", 1, with_layers(header_of(c, "src"), 1, blocks=50 << 20))


def attack_insert_50k_layers(c):
    r = c.q("BF.INSERT", "k", "CAPACITY", 1, "EXPANSION", 1, "ITEMS", *[f"i{i}" for i in range(20000)])
    c.q("BF.MEXISTS", "k", *[f"x{i}" for i in range(20000)])
    c.q("BF.INFO", "k", "FPR")
    return r[-1]


def attack_loadchunk_1m_layers(c):
    c.q("BF.RESERVE", "src", 0.01, 1, "EXPANSION", 1)
    r = c.q("BF.LOADCHUNK", "k", 1, with_layers(header_of(c, "src"), 1000000))
    c.q("BF.EXISTS", "k", "x")
    c.q("BF.INFO", "k")
    return r


def attack_maxcapacity_new_rates(c):
    for n in range(20):
        c.q("BF.RESERVE", f"k{n}", 0.0123457 + n * 1e-7, 1000, "EXPANSION", 1)
        c.q("BF.INFO", f"k{n}", "MAXCAPACITY")
    return "OK"


def attack_loadchunk_zero_chunk(c):
    c.q("BF.RESERVE", "k", 0.01, 100000000)
    it, data = c.q("BF.SCANDUMP", "k", 1)
    return c.q("BF.LOADCHUNK", "k", it, bytes(len(data)))


def attack_reserve_huge_with_maxmemory(c):
    c.q("CONFIG", "SET", "maxmemory", "1gb")
    c.q("CONFIG", "SET", "bf.bf-max-filter-memory", "4gb")
    return c.q("BF.RESERVE", "k", 0.00001, 1000000000)


def attack_100k_nonscaling_inserts(c):
    c.pipeline([("BF.INSERT", f"k{i}", "CAPACITY", 1, "NONSCALING", "ITEMS", "x") for i in range(100000)])
    return "OK"


def attack_cf_insert_nearly_full(c):
    # 1024 four-slot buckets, the longest walk, no growth, filled until an item does not fit:
    # each new item walks 65535 evictions (and back) and fails.
    c.q("CF.RESERVE", "k", 4096, "BUCKETSIZE", 4, "MAXITERATIONS", 65535, "EXPANSION", 0)
    n = 0
    while True:
        r = c.q("CF.INSERT", "k", "ITEMS", *[f"f{n + i}" for i in range(100)])
        n += 100
        if -1 in r or isinstance(r[-1], str):
            break
    r = c.q("CF.INSERT", "k", "ITEMS", *[f"x{i}" for i in range(20000)])
    return f"{len(r)} replies, last {r[-1]}"


def attack_cf_insert_growing(c):
    # Sub-filters of 16 buckets, each found full by a walk of 65535 evictions before it grows.
    c.q("CF.RESERVE", "k", 64, "BUCKETSIZE", 4, "MAXITERATIONS", 65535, "EXPANSION", 1)
    r = c.q("CF.INSERT", "k", "ITEMS", *[f"x{i}" for i in range(100000)])
    return f"{len(r)} replies, last {r[-1]}"


def attack_cf_long_walks(c):
    # 255-slot buckets, the longest walk, no growth: 510 copies of one item fill its two
    # buckets, so each further copy walks between them (and back) until its walk ends, while
    # the rest of the filter is empty. Then single adds and one CF.INSERT of 40 such items.
    c.q("CF.RESERVE", "k", 64 * 255, "BUCKETSIZE", 255, "MAXITERATIONS", 65535, "EXPANSION", 0)
    c.q("CF.INSERT", "k", "ITEMS", *["x"] * 510)
    adds = [c.q("CF.ADD", "k", "x") for i in range(10)]
    r = c.q("CF.INSERT", "k", "ITEMS", *["x"] * 40)
    return f"adds {adds[-1]}, {len(r)} replies, last {r[-1]}"


def attack_loadchunk_layers_under_1m(c):
    # 1024 layers of 1,048,512 bytes: each piece just under the old 1 MiB discard threshold.
    c.q("CONFIG", "SET", "bf.bf-max-filter-memory", "4gb")
    c.q("BF.RESERVE", "src", 0.01, 1000, "EXPANSION", 1)
    return c.q("BF.LOADCHUNK", "k", 1, with_layers(header_of(c, "src"), 1024, blocks=16383))


def cf_header(items, buckets, deletes, subs, bucket_size, iterations, expansion):
    out = b"".join(v.to_bytes(8, "little") for v in (items, buckets, deletes, subs))
    return out + b"".join(v.to_bytes(2, "little") for v in (bucket_size, iterations, expansion))


def attack_cf_loadchunk_subs_under_1m(c):
    # A 38-byte header: 1024 sub-filters of 4096 buckets of 255 slots (1,044,480 bytes each).
    return c.q("CF.LOADCHUNK", "k", 1, cf_header(0, 4096, 0, 1024, 255, 20, 1))


def attack_cf_compaction_past_full(c):
    # 1024 sub-filters of 256 buckets of 255 slots, every slot holding item x's fingerprint
    # but one hole at the end of sub-filter 0; the header says 1 item, so every CF.DEL
    # compacts. The fingerprint is read from a small filter's dump.
    c.q("CF.RESERVE", "probe", 2, "BUCKETSIZE", 1)
    c.q("CF.ADD", "probe", "x")
    fp = next(b for b in c.q("CF.SCANDUMP", "probe", 1)[1] if b)
    subs, buckets, bs = 1024, 256, 255
    c.q("CF.LOADCHUNK", "k", 1, cf_header(1, buckets, 0, subs, bs, 20, 1))
    sub = bytes([fp]) * (buckets * bs)
    it = 1
    for i in range(subs):
        data = sub if i else sub[:-1] + b"\0"
        it += len(data)
        c.q("CF.LOADCHUNK", "k", it, data)
    for _ in range(5):
        c.q("CF.DEL", "k", "x")
    return [c.q("CF.COMPACT", "k") for _ in range(5)][-1]


def attack_window_64_slices_of_layers(c):
    # 64 slices of 100 ms, capacity 1 a slice, EXPANSION 1: 1100 items a slice each make a
    # layer, for 6.5 s; then lookups over every layer held.
    c.q("BF.RESERVE", "w", 0.01, 64, "EXPANSION", 1, "WINDOW", 6400, "SLICES", 64)
    end = time.time() + 6.5
    n = 0
    while time.time() < end:
        c.q("BF.MADD", "w", *[f"i{n + i}" for i in range(1100)])
        n += 1100
        time.sleep(0.1)
    c.q("BF.EXISTS", "w", "absent")
    c.q("BF.MEXISTS", "w", *[f"x{i}" for i in range(100)])
    return c.q("BF.INFO", "w", "FILTERS")


# Issue 23, item 2.
def attack_merge_reserved_sources(c):
    # 24 reserved filters of 800 million items at 1% (1.3 GB each, nothing resident),
    # one item each, merged: the union reads what the sources hold, not their size.
    for i in range(24):
        c.q("BF.RESERVE", f"s{i}", 0.01, 800000000)
        c.q("BF.ADD", f"s{i}", f"item{i}")
    c.q("SLOWLOG", "RESET")
    return c.q("BF.MERGE", "d", *[f"s{i}" for i in range(24)])


def attack_merge_many_written_layers(c):
    # 8 filters of 1024 layers of 1,048,512 bytes (a header each), one byte set in every
    # layer by a BF.LOADCHUNK of its own, merged: one written page a layer to find and OR.
    c.q("CONFIG", "SET", "bf.bf-max-filter-memory", "4gb")
    c.q("BF.RESERVE", "src", 0.01, 1000, "EXPANSION", 1)
    h = with_layers(header_of(c, "src"), 1024, blocks=16383)
    for i in range(8):
        c.q("BF.LOADCHUNK", f"s{i}", 1, h)
        c.pipeline([("BF.LOADCHUNK", f"s{i}", l * 16383 * 64 + 2, b"\x01") for l in range(1024)])
    c.q("SLOWLOG", "RESET")
    return c.q("BF.MERGE", "d", *[f"s{i}" for i in range(8)])


# Issue 23, items 6 to 8.
def used_mib(c):
    info = c.q("INFO", "memory").decode()
    return int(info.split("used_memory:")[1].split()[0]) >> 20


def attack_copy_past_maxmemory(c):
    c.q("CONFIG", "SET", "maxmemory", "2gb")
    c.q("BF.RESERVE", "big", 0.001, 600000000)
    before = used_mib(c)
    r = c.q("COPY", "big", "big2")
    return f"used {before} -> {used_mib(c)} MiB; {r}"


def attack_volatile_nothing_to_evict(c):
    c.q("CONFIG", "SET", "maxmemory", "200mb")
    c.q("CONFIG", "SET", "maxmemory-policy", "volatile-lru")
    c.pipeline([("SET", f"plain:{i}", "v" * 1000) for i in range(140000)])
    c.q("SLOWLOG", "RESET")
    before = used_mib(c)
    r = c.q("BF.RESERVE", "mid", 0.01, 80000000)
    return f"used {before} -> {used_mib(c)} MiB; {r}"


def crc64_jones(data):
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
        table.append(crc)
    crc = 0
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def log_lines(c):
    d = c.q("CONFIG", "GET", "dir")[1].decode()
    with open(os.path.join(d, "redis.log"), errors="replace") as f:
        return sum(1 for line in f if "layerbloom:" in line)


def attack_refused_restores(c):
    c.q("CONFIG", "SET", "rdbcompression", "no")
    c.q("BF.RESERVE", "k", 0.01, 100)
    dump = c.q("DUMP", "k")
    magic = header_of(c, "k")[:8]
    at = dump.index(magic)
    body = bytearray(dump[:-8])
    body[at] ^= 0xFF  # a bad magic: the module refuses the value
    bad = bytes(body) + crc64_jones(bytes(body)).to_bytes(8, "little")
    before = log_lines(c)
    c.pipeline([("RESTORE", f"r{i}", 0, bad) for i in range(20000)])
    return f"{c.q('RESTORE', 'last', 0, bad)}; {log_lines(c) - before} log lines"


ATTACKS = [
    ("BF.RESERVE of a 3 GB filter", attack_reserve_3g),
    ("BF.RESERVE of 300M items", attack_reserve_300m),
    ("BF.MADD growth to 1.6 GB", attack_madd_growth),
    ("LOADCHUNK header of a 3.2 GB filter", attack_loadchunk_3g_header),
    ("BF.INSERT to 20 000 layers, MEXISTS, INFO FPR", attack_insert_50k_layers),
    ("LOADCHUNK header of 1M layers, EXISTS, INFO", attack_loadchunk_1m_layers),
    ("BF.INFO MAXCAPACITY, 20 new rates", attack_maxcapacity_new_rates),
    ("LOADCHUNK zero chunk (16 MiB)", attack_loadchunk_zero_chunk),
    ("BF.RESERVE 3 GB under maxmemory 1gb", attack_reserve_huge_with_maxmemory),
    ("100 000 BF.INSERT NONSCALING cap 1", attack_100k_nonscaling_inserts),
    ("CF.INSERT of 20 000 items, nearly full, 65535 iterations", attack_cf_insert_nearly_full),
    ("CF.INSERT of 100 000 items growing 16-bucket sub-filters", attack_cf_insert_growing),
    ("CF.ADD / CF.INSERT of 40 items walking 255-slot buckets, 65535 iterations", attack_cf_long_walks),
    ("LOADCHUNK header of 1024 layers of 1,048,512 bytes", attack_loadchunk_layers_under_1m),
    ("CF.LOADCHUNK 38-byte header of 1024 sub-filters of 1 MB", attack_cf_loadchunk_subs_under_1m),
    ("CF.DEL / CF.COMPACT past 1023 full 255-slot sub-filters", attack_cf_compaction_past_full),
    ("BF.MADD into 64 slices of one-item layers, EXISTS, MEXISTS", attack_window_64_slices_of_layers),
    ("COPY of a lazy 1.3 GB filter under maxmemory 2gb", attack_copy_past_maxmemory),
    ("BF.RESERVE 96 MB, volatile-lru, no TTL keys, 150 MB used of 200", attack_volatile_nothing_to_evict),
    ("20 000 refused RESTOREs", attack_refused_restores),
    ("BF.MERGE of 24 reserved 1.3 GB filters of one item each", attack_merge_reserved_sources),
    ("BF.MERGE of 8 filters of 1024 layers, one written page each", attack_merge_many_written_layers),
]


def main():
    only = os.environ.get("ATTACKS")
    print(f"module {MODULE}\nserver {SERVER}\n")
    print(f"| attack | slowest command (us) | command | last reply |\n|---|---|---|---|")
    for name, fn in ATTACKS:
        if only and only not in name and only not in fn.__name__:
            continue
        p, c = start()
        try:
            c.q("SLOWLOG", "RESET")
            reply = fn(c)
            us, what = slowest(c)
            reply = str(reply)[:60].replace("|", "/")
            print(f"| {name} | {us} | `{what}` | {reply} |", flush=True)
        finally:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()

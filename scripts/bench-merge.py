#!/usr/bin/env python3
"""Measures BF.MERGE: the server's time (SLOWLOG) for the union of two dense filters of the
same size, per MiB of the union, for blocked and classic layers. A measurement, never a
pass/fail. The sources are made dense (half their bits set, as at capacity) by BF.LOADCHUNK of
random bytes: filling them item by item would take minutes.

usage: scripts/bench-merge.py [module.so] [redis-server] [capacity]
"""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resp  # noqa: E402

MODULE = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/liblayerbloom.so")
SERVER = sys.argv[2] if len(sys.argv) > 2 else "redis-server"
CAPACITY = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000_000
PORT = 6393
RUNS = 5


class Conn(resp.Conn):
    def __init__(self):
        super().__init__(PORT)


def start():
    d = tempfile.mkdtemp(prefix="bench-merge-")
    p = subprocess.Popen([SERVER, "--port", str(PORT), "--dir", d, "--save", "", "--appendonly", "no",
                          "--loadmodule", MODULE, "--slowlog-log-slower-than", "0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            Conn().q("PING")
            return p
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not start")


def dense(c, key):
    """A non-scaling filter of CAPACITY items whose bits are random; its size in bytes."""
    c.q("BF.RESERVE", key, "0.01", CAPACITY, "NONSCALING")
    it, size = 1, 0
    while True:
        nxt, data = c.q("BF.SCANDUMP", key, it)
        if nxt == 0:
            return size
        c.q("BF.LOADCHUNK", key, nxt, os.urandom(len(data)))
        size += len(data)
        it = nxt


def merge_micros(c, *args):
    c.q("SLOWLOG", "RESET")
    c.q("BF.MERGE", *args)
    for entry in c.q("SLOWLOG", "GET", 10):
        if entry[3][0].upper() == b"BF.MERGE":
            return entry[2]
    raise RuntimeError("BF.MERGE not in the slow log")


def main():
    p = start()
    try:
        c = Conn()
        for layout in ("blocked", "classic"):
            c.q("FLUSHALL")
            c.q("CONFIG", "SET", "bf.bf-layout", layout)
            mib = dense(c, "a") / 2**20
            dense(c, "b")
            fresh, replace = [], []
            for _ in range(RUNS):
                c.q("DEL", "u")
                fresh.append(merge_micros(c, "u", "a", "b"))
                replace.append(merge_micros(c, "u", "a", "b"))
            for what, runs in (("new destination", fresh), ("replaced destination", replace)):
                best = min(runs) / 1000
                print(f"{layout:8} {mib:6.0f} MiB union of 2 sources, {what:20}: "
                      f"best {best:7.1f} ms, median {sorted(runs)[RUNS // 2] / 1000:7.1f} ms, "
                      f"{best / mib:.2f} ms per MiB of the union")
    finally:
        p.terminate()
        p.wait()


main()

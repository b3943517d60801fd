"""Drives layerbloom with redis-py's Bloom filter commands (`r.bf()`), as an application does.

Run by tests/clients.rs against a server it starts (or $REDIS_URL), in a virtualenv with
tests/clients/requirements.txt:

    python redis_py_bf.py redis://127.0.0.1:6379/ <key prefix>

Reports as tests/clients/checks.py says. Every key it makes starts with the prefix and is
deleted at the end.
"""

import redis
from redis.commands.bf.info import BFInfo
from checks import PREFIX, URL, check, run_protocols


def key(name):
    return f"{PREFIX}:{name}"


def field(info, name):
    """A BF.INFO field from BFInfo (RESP2, and RESP3 with unified replies) or a plain map."""
    attrs = {
        "Capacity": "capacity",
        "Size": "size",
        "Number of filters": "filterNum",
        "Number of items inserted": "insertedNum",
        "Expansion rate": "expansionRate",
    }
    if isinstance(info, BFInfo):
        return getattr(info, attrs[name])
    for k, v in info.items():
        if (k.decode() if isinstance(k, bytes) else k) == name:
            return v
    raise KeyError(name)


def run(protocol):
    r = redis.Redis.from_url(URL, protocol=protocol)
    bf = r.bf()
    tag = f"RESP{protocol}"
    k = lambda name: key(f"{tag}:{name}")

    # BF.RESERVE through create(), with and without options.
    check(f"{tag} create", bf.create(k("plain"), 0.01, 1000) in (True, b"OK", "OK"))
    check(f"{tag} create expansion", bf.create(k("wide"), 0.001, 500, expansion=4))
    check(f"{tag} create noScale", bf.create(k("fixed"), 0.01, 3, noScale=True))
    try:
        bf.create(k("plain"), 0.01, 1000)
        check(f"{tag} create on an existing key raises", False)
    except redis.ResponseError as e:
        check(f"{tag} create on an existing key raises", "item exists" in str(e), str(e))

    # BF.ADD / BF.MADD / BF.EXISTS / BF.MEXISTS / BF.CARD
    check(f"{tag} add new", bool(bf.add(k("plain"), "alice")))
    check(f"{tag} add again", not bf.add(k("plain"), "alice"))
    check(f"{tag} madd", [bool(x) for x in bf.madd(k("plain"), "bob", "carol", "alice")] == [True, True, False])
    check(f"{tag} exists", bool(bf.exists(k("plain"), "bob")))
    check(f"{tag} exists absent", not bf.exists(k("plain"), "zed"))
    check(f"{tag} mexists", [bool(x) for x in bf.mexists(k("plain"), "alice", "zed", "carol")] == [True, False, True])
    check(f"{tag} card", bf.card(k("plain")) == 3)
    check(f"{tag} card missing", bf.card(k("missing")) == 0)
    check(f"{tag} exists missing key", not bf.exists(k("missing"), "x"))

    # BF.INSERT with options, and NOCREATE.
    out = bf.insert(k("ins"), ["a", "b", "a"], capacity=50, error=0.001, expansion=3)
    check(f"{tag} insert", [bool(x) for x in out] == [True, True, False], str(out))
    try:
        bf.insert(k("nocreate"), ["a"], noCreate=True)
        check(f"{tag} insert noCreate on a missing key raises", False)
    except redis.ResponseError as e:
        check(f"{tag} insert noCreate on a missing key raises", "not found" in str(e), str(e))
    out = bf.insert(k("ins-fixed"), ["a"], capacity=10, noScale=True)
    check(f"{tag} insert noScale", [bool(x) for x in out] == [True])

    # BF.INFO through BFInfo: RedisBloom's five fields, whatever follows them.
    info = bf.info(k("ins"))
    check(f"{tag} info capacity", field(info, "Capacity") == 50, repr(info))
    check(f"{tag} info size", field(info, "Size") > 0)
    check(f"{tag} info filters", field(info, "Number of filters") == 1)
    check(f"{tag} info items", field(info, "Number of items inserted") == 2)
    check(f"{tag} info expansion", field(info, "Expansion rate") == 3)
    info = bf.info(k("ins-fixed"))
    check(f"{tag} info non-scaling expansion is None", field(info, "Expansion rate") is None)
    # The whole reply, raw (a client without r.bf()'s reply callbacks): exactly RedisBloom's
    # five fields; the health figures answer BF.INFO key HEALTH.
    plain = redis.Redis.from_url(URL, protocol=protocol)
    def names_of(raw):
        names = list(raw.keys()) if isinstance(raw, dict) else list(raw[::2])
        return [n.decode() if isinstance(n, bytes) else n for n in names]
    names = names_of(plain.execute_command("BF.INFO", k("ins")))
    check(f"{tag} info field order", names == [
            "Capacity", "Size", "Number of filters", "Number of items inserted",
            "Expansion rate"], repr(names))
    names = names_of(plain.execute_command("BF.INFO", k("ins"), "HEALTH"))
    check(f"{tag} info HEALTH field order", names == [
            "Error rate", "Fill ratio", "Estimated false positive rate",
            "Estimated distinct items", "Max capacity"], repr(names))
    # Single fields, as a client sends them.
    def single(word):
        v = plain.execute_command("BF.INFO", k("ins"), word)
        if isinstance(v, dict):
            (v,) = v.values()
        elif isinstance(v, list):
            (v,) = v
        return float(v.decode() if isinstance(v, bytes) else v)
    check(f"{tag} info ERROR", single("ERROR") == 0.001)
    check(f"{tag} info FILL", 0 < single("FILL") < 0.1)
    check(f"{tag} info FPR", 0 < single("FPR") < 0.001)
    check(f"{tag} info DISTINCT", single("DISTINCT") == 2)
    check(f"{tag} info MAXCAPACITY", single("MAXCAPACITY") > 50)
    check(f"{tag} info CAPACITY", single("CAPACITY") == 50)

    # A full non-scaling filter refuses new items with RedisBloom's error.
    bf.madd(k("fixed"), "1", "2", "3")
    try:
        bf.add(k("fixed"), "4")
        check(f"{tag} full filter raises", False)
    except redis.ResponseError as e:
        check(f"{tag} full filter raises", "non scaling filter is full" in str(e), str(e))

    # BF.SCANDUMP / BF.LOADCHUNK: copy a multi-layer filter chunk by chunk.
    items = [f"item-{i}" for i in range(5000)]
    for i in range(0, len(items), 1000):
        bf.madd(k("big"), *items[i:i + 1000])
    chunks = []
    it = 0
    while True:
        it, data = bf.scandump(k("big"), it)
        if it == 0:
            break
        chunks.append((it, data))
    check(f"{tag} scandump chunks", len(chunks) >= 2, str(len(chunks)))
    for it, data in chunks:
        bf.loadchunk(k("copy"), it, data)
    check(f"{tag} loadchunk copy answers alike",
          all(bool(x) for x in bf.mexists(k("copy"), *items)))
    probes = [f"absent-{i}" for i in range(2000)]
    check(f"{tag} loadchunk copy probes alike",
          [bool(x) for x in bf.mexists(k("copy"), *probes)]
          == [bool(x) for x in bf.mexists(k("big"), *probes)])
    check(f"{tag} copy info", field(bf.info(k("copy")), "Number of items inserted")
          == field(bf.info(k("big")), "Number of items inserted"))

    # Pipelines work as for any command.
    p = r.pipeline()
    p.bf().add(k("pipe"), "x")
    p.bf().exists(k("pipe"), "x")
    p.bf().card(k("pipe"))
    res = p.execute()
    check(f"{tag} pipeline", [bool(res[0]), bool(res[1]), res[2]] == [True, True, 1], str(res))
    plain.close()
    r.close()


run_protocols(run)

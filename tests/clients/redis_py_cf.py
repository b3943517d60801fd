"""Drives layerbloom with redis-py's cuckoo filter commands (`r.cf()`), as an application does.

Run by tests/clients.rs against a server it starts (or $REDIS_URL), in a virtualenv with
tests/clients/requirements.txt:

    python redis_py_cf.py redis://127.0.0.1:6379/ <key prefix>

Reports as tests/clients/checks.py says. Every key it makes starts with the prefix and is
deleted at the end.
"""

import redis
from redis.commands.bf.info import CFInfo
from checks import PREFIX, URL, check, raises, run_protocols


NAMES = {
    "size": "Size",
    "bucketNum": "Number of buckets",
    "filterNum": "Number of filters",
    "insertedNum": "Number of items inserted",
    "deletedNum": "Number of items deleted",
    "bucketSize": "Bucket size",
    "expansionRate": "Expansion rate",
    "maxIteration": "Max iterations",
}


def fields(info):
    """CF.INFO as redis-py hands it over: CFInfo over RESP2, the server's map over RESP3
    (byte-string names); read into CFInfo's attribute names, all eight required."""
    if isinstance(info, CFInfo):
        return {attr: getattr(info, attr) for attr in NAMES}
    check("RESP3 info is a map", isinstance(info, dict), repr(info))
    named = {(n.decode() if isinstance(n, bytes) else n): v for n, v in info.items()}
    return {attr: named[name] for attr, name in NAMES.items()}


def run(protocol):
    r = redis.Redis.from_url(URL, protocol=protocol)
    cf = r.cf()
    tag = f"RESP{protocol}"
    k = lambda name: f"{PREFIX}:{tag}:{name}"

    # The pattern of redis-py's own Bloom suite: cuckoo filters created next to Bloom filters,
    # each option of create() on its own.
    check(f"{tag} bf create beside", r.bf().create(k("bloom"), 0.01, 1000))
    check(f"{tag} create", cf.create(k("cuckoo"), 1000) is True)
    check(f"{tag} create expansion", cf.create(k("cuckoo_e"), 1000, expansion=1) is True)
    check(f"{tag} create bucket_size", cf.create(k("cuckoo_bs"), 1000, bucket_size=4) is True)
    check(f"{tag} create max_iterations", cf.create(k("cuckoo_mi"), 1000, max_iterations=10) is True)
    check(f"{tag} reserve all options",
          cf.reserve(k("opts"), 1000, expansion=2, bucket_size=4, max_iterations=10) is True)
    raises(f"{tag} create of an existing key", lambda: cf.create(k("cuckoo"), 10), "item exists")
    raises(f"{tag} create with bucket size 0", lambda: cf.create(k("bad"), 10, bucket_size=0),
           "BUCKETSIZE: value must be an integer between 1 and 255, inclusive.")

    # add / addnx / insert / insertnx, as redis-py's suite asserts them.
    check(f"{tag} add", cf.add(k("cuckoo"), "filter") == 1)
    check(f"{tag} addnx of a held item", cf.addnx(k("cuckoo"), "filter") == 0)
    check(f"{tag} addnx of a new item", cf.addnx(k("cuckoo"), "newItem") == 1)
    check(f"{tag} add again (duplicates allowed)", cf.add(k("cuckoo"), "filter") == 1)
    check(f"{tag} insert creates", cf.insert(k("captest"), ["foo"]) == [1])
    check(f"{tag} insert capacity", cf.insert(k("captest"), ["foo"], capacity=1000) == [1])
    check(f"{tag} insertnx", cf.insertnx(k("captest"), ["bar"]) == [1])
    check(f"{tag} insertnx nocreate", cf.insertnx(k("captest"), ["food"], nocreate="1") == [1])
    out = cf.insertnx(k("captest"), ["foo", "bar", "baz"])
    check(f"{tag} insertnx mixed", out == [0, 0, 1], repr(out))
    check(f"{tag} insertnx capacity", cf.insertnx(k("captest"), ["bar"], capacity=1000) == [0])
    check(f"{tag} insert into a new key with capacity", cf.insert(k("empty1"), ["foo"], capacity=1000) == [1])
    check(f"{tag} insertnx into a new key", cf.insertnx(k("empty2"), ["bar"], capacity=1000) == [1])
    raises(f"{tag} insert nocreate on a missing key",
           lambda: cf.insert(k("nocreate"), ["a"], nocreate=True), "not found")
    raises(f"{tag} add to a string key",
           lambda: (r.set(k("str"), "v"), cf.add(k("str"), "a")),
           "WRONGTYPE Operation against a key holding the wrong kind of value")

    # CF.INFO through CFInfo (RESP2's flat pairs and RESP3's map alike).
    raw = cf.info(k("captest"))
    check(f"{tag} info is CFInfo over RESP2", protocol == 3 or isinstance(raw, CFInfo), repr(raw))
    info = fields(raw)
    check(f"{tag} info inserted", info["insertedNum"] == 5, repr(info))
    check(f"{tag} info deleted", info["deletedNum"] == 0)
    check(f"{tag} info filters", info["filterNum"] == 1)
    info = fields(cf.info(k("opts")))
    check(f"{tag} info bucket size", info["bucketSize"] == 4, repr(info))
    check(f"{tag} info expansion", info["expansionRate"] == 2)
    check(f"{tag} info max iterations", info["maxIteration"] == 10)
    check(f"{tag} info buckets", info["bucketNum"] == 256, repr(info))
    check(f"{tag} info size", isinstance(info["size"], int) and info["size"] > 0)
    raises(f"{tag} info of a missing key", lambda: cf.info(k("missing")), "not found")
    raw = redis.Redis.from_url(URL, protocol=protocol).execute_command("CF.INFO", k("opts"))
    names = list(raw.keys()) if isinstance(raw, dict) else list(raw[::2])
    names = [n.decode() if isinstance(n, bytes) else n for n in names]
    check(f"{tag} info field order", names == [
        "Size", "Number of buckets", "Number of filters", "Number of items inserted",
        "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"], repr(names))

    # exists / mexists / count / delete.
    check(f"{tag} exists", cf.exists(k("cuckoo"), "filter") == 1)
    check(f"{tag} exists absent", cf.exists(k("cuckoo"), "notexist") == 0)
    check(f"{tag} exists on a missing key", cf.exists(k("missing"), "a") == 0)
    out = cf.mexists(k("cuckoo"), "filter", "notexist", "newItem")
    check(f"{tag} mexists", out == [1, 0, 1], repr(out))
    check(f"{tag} mexists on a missing key", cf.mexists(k("missing"), "a", "b") == [0, 0])
    check(f"{tag} count of a twice-added item", cf.count(k("cuckoo"), "filter") == 2)
    check(f"{tag} count absent", cf.count(k("cuckoo"), "notexist") == 0)
    check(f"{tag} delete", cf.delete(k("cuckoo"), "filter") == 1)
    check(f"{tag} count after one delete", cf.count(k("cuckoo"), "filter") == 1)
    check(f"{tag} delete the other copy", cf.delete(k("cuckoo"), "filter") == 1)
    check(f"{tag} exists after deletes", cf.exists(k("cuckoo"), "filter") == 0)
    check(f"{tag} delete of an absent item", cf.delete(k("cuckoo"), "filter") == 0)
    raises(f"{tag} delete on a missing key", lambda: cf.delete(k("missing"), "a"), "Not found")
    info = fields(cf.info(k("cuckoo")))
    check(f"{tag} info counts deletes", (info["insertedNum"], info["deletedNum"]) == (1, 2),
          repr(info))

    # A filter grown over several sub-filters, copied with scandump / loadchunk.
    items = [f"item-{i}" for i in range(3000)]
    check(f"{tag} reserve small", cf.create(k("big"), 500, bucket_size=2, expansion=1))
    for i in range(0, len(items), 500):
        out = cf.insert(k("big"), items[i:i + 500])
        check(f"{tag} insert batch {i}", out == [1] * 500, repr(out[:5]))
    deleted = items[:100]
    for item in deleted:
        cf.delete(k("big"), item)
    big = fields(cf.info(k("big")))
    check(f"{tag} grown", big["filterNum"] >= 2, repr(big))
    chunks = []
    it = 0
    for _ in range(10000):
        it, data = cf.scandump(k("big"), it)
        if it == 0:
            check(f"{tag} scandump ends with no data", not data, repr(data))
            break
        chunks.append((it, data))
    check(f"{tag} scandump chunks", len(chunks) >= 2, str(len(chunks)))
    for it, data in chunks:
        check(f"{tag} loadchunk {it}", r.cf().loadchunk(k("copy"), it, data) in (b"OK", "OK", True))
    kept = items[100:]
    check(f"{tag} copy holds every kept item", all(x == 1 for x in cf.mexists(k("copy"), *kept)))
    probes = deleted + [f"absent-{i}" for i in range(2000)]
    check(f"{tag} copy answers as the original",
          cf.mexists(k("copy"), *probes) == cf.mexists(k("big"), *probes))
    copy = fields(cf.info(k("copy")))
    check(f"{tag} copy info", copy == big, f"{copy} != {big}")
    check(f"{tag} copy count", cf.count(k("copy"), "item-500") == cf.count(k("big"), "item-500"))

    # Pipelines work as for any command.
    p = r.pipeline()
    p.cf().add(k("pipe"), "x")
    p.cf().exists(k("pipe"), "x")
    p.cf().count(k("pipe"), "x")
    p.cf().delete(k("pipe"), "x")
    res = p.execute()
    check(f"{tag} pipeline", res == [1, 1, 1, 1], repr(res))
    r.close()


run_protocols(run)

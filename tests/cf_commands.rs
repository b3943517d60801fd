//! The CF commands and the `MBbloomCF` type on a real server, through a real client: every
//! command, option and error layerbloom adds or decides itself (RedisBloom's recorded
//! replies are checked in `cf_compat.rs`), persistence (RDB, AOF rewrite, DUMP/RESTORE,
//! COPY), replication, keyspace events and memory limits.

use crate::common;
use crate::table;
use common::setting;

use std::time::Duration;

use common::{
    cf_field, cf_info, cf_insert, cf_items, cf_loadchunks, cf_scandump, digest, error_of, events,
    wait_for_aof_rewrite, wait_for_link, wait_until, Events, Exec, Server, Stop,
};
use redis::Value;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

// ---------------------------------------------------------------- the table

#[test]
fn every_cf_command_refuses_one_argument_too_few_or_too_many() {
    let s = Server::start();
    let mut con = s.conn();
    assert_eq!(table::cf::COMMANDS.len(), 14);
    for spec in table::cf::COMMANDS {
        let name = spec.name.to_ascii_uppercase();
        let mut counts = vec![spec.arity.min() - 1];
        counts.extend(spec.arity.max().map(|m| m + 1));
        for count in counts {
            let mut c = redis::cmd(&name);
            for i in 1..count {
                c.arg(if i == 1 { "arity:k" } else { "x" });
            }
            let e = con.err_text(&c);
            assert_eq!(
                e,
                format!("ERR wrong number of arguments for '{}' command", spec.name),
                "{}",
                common::show(&c)
            );
        }
    }
    let n: i64 = con.q(&cmd!("EXISTS", "arity:k"));
    assert_eq!(n, 0, "no refused call created the key");
    // CF.RESERVE takes option pairs: an even count is a wrong count too.
    for args in [
        vec!["k", "100", "BUCKETSIZE"],
        vec!["k", "100", "BUCKETSIZE", "2", "EXPANSION"],
    ] {
        let mut c = cmd!("CF.RESERVE");
        for a in args {
            c.arg(a);
        }
        assert!(con
            .err_text(&c)
            .starts_with("ERR wrong number of arguments"));
    }
}

#[test]
fn command_docs_and_acl_categories_come_from_the_cf_table() {
    let s = Server::start();
    let mut con = s.conn();
    for spec in table::cf::COMMANDS {
        let v = con.raw(&cmd!("COMMAND", "DOCS", spec.name));
        let text = format!("{v:?}");
        assert!(text.contains(spec.summary), "{}: {text}", spec.name);
        assert!(text.contains(spec.complexity), "{}: {text}", spec.name);
        let v = con.raw(&cmd!("COMMAND", "INFO", spec.name));
        let Value::Array(outer) = &v else {
            panic!("{v:?}")
        };
        let Value::Array(info) = &outer[0] else {
            panic!("{} is not registered: {v:?}", spec.name)
        };
        let arity: i64 = redis::from_redis_value(info[1].clone()).unwrap();
        assert_eq!(arity, i64::from(spec.arity.redis()), "{}", spec.name);
        if common::server().is_redis_at_least(7, 4) || common::server().is_valkey() {
            let cats: Vec<String> = redis::from_redis_value(info[6].clone()).unwrap();
            assert!(
                cats.iter().any(|c| c == "@cuckoo"),
                "{}: {cats:?}",
                spec.name
            );
            let rw = if spec.is_write() { "@write" } else { "@read" };
            assert!(cats.iter().any(|c| c == rw), "{}: {cats:?}", spec.name);
        }
    }
    assert_eq!(table::cf::CATEGORY, "cuckoo");
}

// ---------------------------------------------------------------- commands

#[test]
fn reserve_creates_redisbloom_s_shape_and_refuses_an_existing_key() {
    let s = Server::start();
    let ks = s.keys("reserve_shape");
    let mut con = s.conn();
    let k = ks.k("f");
    con.ok(&cmd!(
        "CF.RESERVE",
        &k,
        "1000",
        "BUCKETSIZE",
        "4",
        "MAXITERATIONS",
        "50",
        "EXPANSION",
        "3"
    ));
    assert_eq!(
        cf_info(&mut con, &k),
        [
            ("Size", 40 + 16 + 256 * 4),
            ("Number of buckets", 256),
            ("Number of filters", 1),
            ("Number of items inserted", 0),
            ("Number of items deleted", 0),
            ("Bucket size", 4),
            ("Expansion rate", 4),
            ("Max iterations", 50),
        ]
        .map(|(n, v)| (n.to_string(), v))
    );
    assert_eq!(
        con.err_text(&cmd!("CF.RESERVE", &k, "100")),
        "ERR item exists"
    );
    // Options come after the capacity: a key may be named like one.
    let named = ks.k("bucketsize");
    con.ok(&cmd!("CF.RESERVE", &named, "100"));
    con.ok(&cmd!("CF.RESERVE", ks.k("ok"), "100", "expansion", "0"));
    assert_eq!(cf_field(&mut con, &ks.k("ok"), "Expansion rate"), 0);
}

#[test]
fn ambiguous_options_are_refused_and_create_nothing() {
    let s = Server::start();
    let ks = s.keys("ambiguous");
    let mut con = s.conn();
    let k = ks.k("f");
    let cases: Vec<(redis::Cmd, &str)> = vec![
        (
            cmd!("CF.RESERVE", &k, "100", "FOO", "3"),
            "ERR Unknown argument received",
        ),
        (
            cmd!(
                "CF.RESERVE",
                &k,
                "100",
                "BUCKETSIZE",
                "2",
                "BUCKETSIZE",
                "4"
            ),
            "ERR option BUCKETSIZE given more than once",
        ),
        (
            cmd!(
                "CF.INSERT",
                &k,
                "CAPACITY",
                "100",
                "CAPACITY",
                "200",
                "ITEMS",
                "a"
            ),
            "ERR option CAPACITY given more than once",
        ),
        (
            cmd!("CF.INSERT", &k, "NOCREATE", "NOCREATE", "ITEMS", "a"),
            "ERR option NOCREATE given more than once",
        ),
        (
            cmd!("CF.INSERT", &k, "nx", "ITEMS", "a"),
            "Unknown argument received",
        ),
        (
            cmd!("CF.INSERTNX", &k, "cap", "100", "ITEMS", "a"),
            "Unknown argument received",
        ),
        (
            cmd!("CF.INSERT", &k, "EXPANSION", "2", "ITEMS", "a"),
            "Unknown argument received",
        ),
        (
            cmd!("CF.INSERT", &k, "CAPACITY", "3", "ITEMS", "a"),
            "Capacity must be at least (BucketSize * 2)",
        ),
        (
            cmd!("CF.INSERT", &k, "CAPACITY", "x", "ITEMS", "a"),
            "Bad capacity",
        ),
        (
            cmd!("CF.RESERVE", &k, "100", "MAXITERATIONS", "1.5"),
            "Couldn't parse MAXITERATIONS",
        ),
    ];
    for (c, want) in cases {
        assert_eq!(con.err_text(&c), want, "{}", common::show(&c));
    }
    let n: i64 = con.q(&cmd!("EXISTS", &k));
    assert_eq!(n, 0);
    // Every word after ITEMS is an item, option words included.
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("CF.INSERT", &k, "items", "NOCREATE", "ITEMS")),
        [1, 1]
    );
    assert_eq!(con.q::<i64>(&cmd!("CF.EXISTS", &k, "NOCREATE")), 1);
    assert_eq!(cf_field(&mut con, &k, "Number of buckets"), 512);
}

#[test]
fn adds_counts_deletes_and_compaction_follow_redisbloom_rules() {
    let s = Server::start();
    let ks = s.keys("rules");
    let mut con = s.conn();
    let k = ks.k("f");
    // Created by CF.ADD: capacity 1024, bucket size 2, 20 iterations, expansion 1.
    assert_eq!(con.q::<i64>(&cmd!("CF.ADD", &k, "a")), 1);
    assert_eq!(
        con.q::<String>(&cmd!("CF.DEBUG", &k)),
        "bktsize:2 buckets:512 items:1 deletes:0 filters:1 max_iterations:20 expansion:1"
    );
    assert_eq!(con.q::<i64>(&cmd!("CF.ADD", &k, "a")), 1);
    assert_eq!(con.q::<i64>(&cmd!("CF.ADDNX", &k, "a")), 0);
    assert_eq!(con.q::<i64>(&cmd!("CF.COUNT", &k, "a")), 2);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("CF.INSERTNX", &k, "ITEMS", "a", "b", "b")),
        [0, 1, 0]
    );
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("CF.MEXISTS", &k, "a", "b", "never")),
        [1, 1, 0]
    );
    assert_eq!(con.q::<i64>(&cmd!("CF.DEL", &k, "a")), 1);
    assert_eq!(con.q::<i64>(&cmd!("CF.COUNT", &k, "a")), 1);
    assert_eq!(con.q::<i64>(&cmd!("CF.DEL", &k, "never")), 0);
    assert_eq!(cf_field(&mut con, &k, "Number of items deleted"), 1);
    con.ok(&cmd!("CF.COMPACT", &k));
    assert_eq!(cf_field(&mut con, &k, "Number of items deleted"), 0);
    assert_eq!(
        con.err_text(&cmd!("CF.DEL", ks.k("missing"), "a")),
        "Not found"
    );
    assert_eq!(
        con.err_text(&cmd!("CF.COMPACT", ks.k("missing"))),
        "Cuckoo filter was not found"
    );
    assert_eq!(
        con.err_text(&cmd!(
            "CF.INSERT",
            ks.k("missing"),
            "NOCREATE",
            "ITEMS",
            "a"
        )),
        "ERR not found"
    );
    assert_eq!(con.q::<i64>(&cmd!("CF.EXISTS", ks.k("missing"), "a")), 0);
    assert_eq!(con.q::<i64>(&cmd!("CF.COUNT", ks.k("missing"), "a")), 0);
    for c in [
        cmd!("CF.INFO", ks.k("missing")),
        cmd!("CF.DEBUG", ks.k("missing")),
    ] {
        assert_eq!(con.err_text(&c), "ERR not found");
    }
}

#[test]
fn a_full_filter_refuses_adds_and_changes_nothing() {
    let s = Server::start();
    let ks = s.keys("full");
    let mut con = s.conn();
    let k = ks.k("f");
    con.ok(&cmd!(
        "CF.RESERVE",
        &k,
        "4",
        "BUCKETSIZE",
        "2",
        "EXPANSION",
        "0"
    ));
    let replies = cf_insert(&mut con, &k, &cf_items("i", 40));
    assert!(replies.contains(&-1), "{replies:?}");
    let stored = replies.iter().filter(|&&r| r == 1).count() as i64;
    assert_eq!(cf_field(&mut con, &k, "Number of items inserted"), stored);
    let before = cf_scandump(&mut con, &k);
    assert_eq!(con.err_text(&cmd!("CF.ADD", &k, "more")), "Filter is full");
    assert_eq!(
        cf_scandump(&mut con, &k),
        before,
        "a refused add changes nothing"
    );
    let v = con.raw(&cmd!("CF.INSERT", &k, "ITEMS", "more", "more2"));
    assert_eq!(v, Value::Array(vec![Value::Int(-1), Value::Int(-1)]));
    // RESP3: CF.INSERT's "did not fit" is false, CF.INSERTNX's stays -1.
    let mut c3 = s.conn_resp3();
    let v = c3.raw(&cmd!("CF.INSERT", &k, "ITEMS", "more"));
    assert_eq!(v, Value::Array(vec![Value::Boolean(false)]));
    let v = c3.raw(&cmd!("CF.INSERTNX", &k, "ITEMS", "more"));
    assert_eq!(v, Value::Array(vec![Value::Int(-1)]));
    assert_eq!(cf_scandump(&mut con, &k), before);
}

#[test]
fn maximum_expansions_refuse_every_add_before_any_item() {
    let s = Server::start();
    let ks = s.keys("maxexp");
    let mut con = s.conn();
    let k = ks.k("f");
    con.ok(&cmd!("CF.RESERVE", &k, "2", "BUCKETSIZE", "1"));
    let mut i = 0;
    while cf_field(&mut con, &k, "Number of filters") < 32 {
        let _ = con.raw(&cmd!("CF.ADD", &k, format!("x{i}")));
        i += 1;
        assert!(i < 10_000, "never reached 32 sub-filters");
    }
    for c in [
        cmd!("CF.ADD", &k, "y"),
        cmd!("CF.ADDNX", &k, "y"),
        cmd!("CF.INSERT", &k, "ITEMS", "y"),
        cmd!("CF.INSERTNX", &k, "ITEMS", "y"),
    ] {
        assert_eq!(con.err_text(&c), "Maximum expansions reached");
    }
    // Deletes still work.
    assert_eq!(con.q::<i64>(&cmd!("CF.DEL", &k, "x0")), 1);
}

#[test]
fn a_key_of_another_type_is_wrongtype_for_every_cf_command() {
    let s = Server::start();
    let ks = s.keys("wrongtype");
    let mut con = s.conn();
    let k = ks.k("s");
    con.ok(&cmd!("SET", &k, "v"));
    let bf = ks.k("bf");
    con.q::<i64>(&cmd!("BF.ADD", &bf, "x"));
    for key in [&k, &bf] {
        for c in [
            cmd!("CF.RESERVE", key, "100"),
            cmd!("CF.ADD", key, "a"),
            cmd!("CF.ADDNX", key, "a"),
            cmd!("CF.INSERT", key, "ITEMS", "a"),
            cmd!("CF.INSERTNX", key, "ITEMS", "a"),
            cmd!("CF.EXISTS", key, "a"),
            cmd!("CF.MEXISTS", key, "a"),
            cmd!("CF.DEL", key, "a"),
            cmd!("CF.COUNT", key, "a"),
            cmd!("CF.INFO", key),
            cmd!("CF.SCANDUMP", key, "0"),
            cmd!("CF.LOADCHUNK", key, "1", "x"),
            cmd!("CF.COMPACT", key),
            cmd!("CF.DEBUG", key),
        ] {
            assert_eq!(con.err_text(&c), WRONGTYPE, "{}", common::show(&c));
        }
    }
    let cf = ks.k("cf");
    con.q::<i64>(&cmd!("CF.ADD", &cf, "x"));
    assert_eq!(con.q::<String>(&cmd!("TYPE", &cf)), "MBbloomCF");
    for c in [
        cmd!("BF.ADD", &cf, "x"),
        cmd!("BF.EXISTS", &cf, "x"),
        cmd!("GET", &cf),
    ] {
        assert_eq!(con.err_text(&c), WRONGTYPE, "{}", common::show(&c));
    }
}

#[test]
fn scandump_and_loadchunk_copy_a_filter_and_never_overwrite_a_live_one() {
    let s = Server::start();
    let ks = s.keys("copy");
    let mut con = s.conn();
    let (a, b) = (ks.k("a"), ks.k("b"));
    con.ok(&cmd!("CF.RESERVE", &a, "64", "EXPANSION", "2"));
    let all = cf_items("c", 200);
    cf_insert(&mut con, &a, &all);
    let stream = cf_scandump(&mut con, &a);
    assert!(stream.len() > 3, "several sub-filters: {}", stream.len());
    cf_loadchunks(&mut con, &b, &stream);
    assert_eq!(cf_scandump(&mut con, &b), stream);
    assert_eq!(digest(&mut con, &a), digest(&mut con, &b));
    // A chunk that would replace fingerprints of a live filter is refused.
    let (it, data) = stream[1].clone();
    let data = data.unwrap();
    let other: Vec<u8> = data
        .iter()
        .map(|&x| if x == 0 { 0 } else { x ^ 1 | 1 })
        .collect();
    assert_eq!(
        con.err_text(&cmd!("CF.LOADCHUNK", &b, it, other.as_slice())),
        "Couldn't load chunk!"
    );
    assert_eq!(cf_scandump(&mut con, &b), stream);
    for (c, want) in [
        (cmd!("CF.LOADCHUNK", &b, "1", "x"), "ERR item exists"),
        (cmd!("CF.LOADCHUNK", ks.k("new"), "2", "x"), "ERR not found"),
        (
            cmd!("CF.LOADCHUNK", ks.k("new"), "1", "short"),
            "Invalid header",
        ),
        (cmd!("CF.LOADCHUNK", &b, "0", "x"), "Invalid position"),
        (cmd!("CF.LOADCHUNK", &b, "-5", "x"), "Couldn't load chunk!"),
        (cmd!("CF.SCANDUMP", &b, "-1"), "Invalid position"),
    ] {
        assert_eq!(con.err_text(&c), want, "{}", common::show(&c));
    }
}

// ---------------------------------------------------------------- the type

/// Keys of every kind: grown, deleted from, full, empty, emptied.
fn fill_variety(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let grown = format!("{prefix}:grown");
    con.ok(&cmd!(
        "CF.RESERVE",
        &grown,
        "64",
        "BUCKETSIZE",
        "4",
        "EXPANSION",
        "2"
    ));
    cf_insert(con, &grown, &cf_items("g", 600));
    for i in 0..30 {
        con.q::<i64>(&cmd!("CF.DEL", &grown, format!("g:{i}")));
    }
    let full = format!("{prefix}:full");
    con.ok(&cmd!(
        "CF.RESERVE",
        &full,
        "8",
        "BUCKETSIZE",
        "1",
        "EXPANSION",
        "0"
    ));
    cf_insert(con, &full, &cf_items("f", 20));
    let empty = format!("{prefix}:empty");
    con.ok(&cmd!("CF.RESERVE", &empty, "100"));
    let emptied = format!("{prefix}:emptied");
    con.q::<i64>(&cmd!("CF.ADD", &emptied, "x"));
    con.q::<i64>(&cmd!("CF.DEL", &emptied, "x"));
    vec![grown, full, empty, emptied]
}

fn digests(con: &mut redis::Connection, keys: &[String]) -> Vec<(String, String, String)> {
    keys.iter()
        .map(|k| {
            let debug: String = con.q(&cmd!("CF.DEBUG", k));
            (k.clone(), digest(con, k), debug)
        })
        .collect()
}

#[test]
fn rdb_and_aof_rewrite_keep_every_filter_exactly() {
    require_own_server!();
    let mut s = Server::builder().command_aof().start();
    let mut con = s.conn();
    let keys = fill_variety(&mut con, "persist");
    let before = digests(&mut con, &keys);
    con.q::<String>(&cmd!("BGREWRITEAOF"));
    wait_for_aof_rewrite(&mut con);
    drop(con);
    s.restart(Stop::NoSave);
    let mut con = s.conn();
    assert_eq!(
        digests(&mut con, &keys),
        before,
        "after the AOF rewrite and replay"
    );
    con.ok(&cmd!("DEBUG", "RELOAD"));
    assert_eq!(
        digests(&mut con, &keys),
        before,
        "after an RDB save and load"
    );
}

#[test]
fn dump_restore_copy_and_memory_usage_work_on_cuckoo_values() {
    let s = Server::start();
    let ks = s.keys("dump");
    let mut con = s.conn();
    let keys = fill_variety(&mut con, &ks.k("v"));
    for k in &keys {
        let payload: Vec<u8> = con.q(&cmd!("DUMP", k));
        let r = format!("{k}:restored");
        con.ok(&cmd!("RESTORE", &r, 0, payload.as_slice()));
        assert_eq!(digest(&mut con, k), digest(&mut con, &r), "{k}");
        let c = format!("{k}:copy");
        assert_eq!(con.q::<i64>(&cmd!("COPY", k, &c)), 1);
        assert_eq!(digest(&mut con, k), digest(&mut con, &c), "{k}");
        let usage: i64 = con.q(&cmd!("MEMORY", "USAGE", k));
        let size = cf_field(&mut con, k, "Size");
        assert!(usage >= size, "{k}: MEMORY USAGE {usage} < Size {size}");
    }
    // The copy is independent of its source.
    let grown = &keys[0];
    con.q::<i64>(&cmd!("CF.ADD", format!("{grown}:copy"), "only-in-copy"));
    assert_eq!(con.q::<i64>(&cmd!("CF.COUNT", grown, "only-in-copy")), 0);
}

#[test]
fn unlink_frees_a_large_cuckoo_filter_in_the_background() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("CF.RESERVE", "big", "20000000", "BUCKETSIZE", "4"));
    let before = common::lazyfreed_objects(&mut con);
    assert_eq!(con.q::<i64>(&cmd!("UNLINK", "big")), 1);
    wait_until(Duration::from_secs(10), "the lazy free", || {
        common::lazyfreed_objects(&mut con) > before
    });
}

#[test]
fn keyspace_events_name_every_cf_write() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let mut ev = Events::subscribe(&s, "cf.*");
    let mut con = s.conn();
    con.ok(&cmd!(
        "CF.RESERVE",
        "e",
        "4",
        "BUCKETSIZE",
        "1",
        "EXPANSION",
        "0"
    ));
    con.q::<i64>(&cmd!("CF.ADD", "e", "a"));
    con.q::<i64>(&cmd!("CF.DEL", "e", "a"));
    con.q::<i64>(&cmd!("CF.DEL", "e", "a"));
    con.ok(&cmd!("CF.COMPACT", "e"));
    con.q::<Vec<i64>>(&cmd!(
        "CF.INSERT",
        "e",
        "ITEMS",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6"
    ));
    con.q::<i64>(&cmd!("CF.ADD", "auto", "a"));
    let stream = cf_scandump(&mut con, "auto");
    cf_loadchunks(&mut con, "copied", &stream);
    let want = events(&[
        ("cf.reserve", "e"),
        ("cf.add", "e"),
        ("cf.del", "e"),
        ("cf.compact", "e"),
        ("cf.add", "e"),
        ("cf.capacity", "e"),
        ("cf.full", "e"),
        ("cf.reserve", "auto"),
        ("cf.add", "auto"),
        ("cf.reserve", "copied"),
        ("cf.loadchunk", "copied"),
        ("cf.loadchunk", "copied"),
    ]);
    assert_eq!(ev.drain(), want);
}

// ---------------------------------------------------------------- replication

#[test]
fn a_replica_ends_with_the_primary_s_buckets_after_every_kind_of_write() {
    require_own_server!();
    // The primary's per-filter limit stops a growing CF.INSERT part-way; the replica has no
    // such limit and must still build exactly what the primary kept.
    let primary = Server::builder()
        .module_args(&["bf-max-filter-memory", "64kb"])
        .start();
    let replica = Server::builder().replica_of(&primary).start();
    wait_for_link(&replica);
    let mut con = primary.conn();
    let mut keys = fill_variety(&mut con, "repl");
    con.q::<i64>(&cmd!("CF.ADD", "repl:auto", "a"));
    con.q::<Vec<i64>>(&cmd!(
        "CF.INSERTNX",
        "repl:created",
        "CAPACITY",
        "100",
        "ITEMS",
        "a",
        "a",
        "b"
    ));
    con.ok(&cmd!("CF.COMPACT", "repl:grown"));
    let stream = cf_scandump(&mut con, "repl:grown");
    cf_loadchunks(&mut con, "repl:copy", &stream);
    con.ok(&cmd!(
        "CF.RESERVE",
        "repl:limited",
        "1024",
        "BUCKETSIZE",
        "1",
        "EXPANSION",
        "2"
    ));
    let mut c = cmd!("CF.INSERT", "repl:limited", "ITEMS");
    for i in cf_items("l", 200_000) {
        c.arg(i);
    }
    let v = con.raw(&c);
    let Value::Array(replies) = &v else {
        panic!("{v:?}")
    };
    let last = replies.last().and_then(error_of).unwrap_or_default();
    assert!(
        last.starts_with("ERR problem inserting into filter: its next sub-filter"),
        "the limit stopped the insert: {last}"
    );
    keys.extend(["repl:auto", "repl:created", "repl:copy", "repl:limited"].map(String::from));
    con.q::<i64>(&cmd!("WAIT", 1, 10_000));
    let want = digests(&mut con, &keys);
    let mut rcon = replica.conn();
    wait_until(Duration::from_secs(20), "the replica to catch up", || {
        digests(&mut rcon, &keys) == want
    });
    for k in &keys {
        assert_eq!(cf_scandump(&mut rcon, k), cf_scandump(&mut con, k), "{k}");
    }
}

/// A CF.INSERT whose very last item is refused by the primary's limit must not reach the
/// replica or the AOF as it was sent: neither applies the limit, so both would add it.
#[test]
fn an_insert_refused_at_its_last_item_is_not_replayed_with_that_item() {
    require_own_server!();
    let mut primary = Server::builder()
        .module_args(&["bf-max-filter-memory", "64kb"])
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start();
    let replica = Server::builder().replica_of(&primary).start();
    wait_for_link(&replica);
    let mut con = primary.conn();
    let reserve = |con: &mut redis::Connection, key: &str| {
        con.ok(&cmd!(
            "CF.RESERVE",
            key,
            "1024",
            "BUCKETSIZE",
            "1",
            "EXPANSION",
            "2"
        ))
    };
    let all = cf_items("last", 200_000);
    let insert_all = |con: &mut redis::Connection, key: &str, items: &[Vec<u8>]| {
        let mut c = cmd!("CF.INSERT", key, "ITEMS");
        for i in items {
            c.arg(i.as_slice());
        }
        match con.raw(&c) {
            Value::Array(replies) => replies,
            v => panic!("{v:?}"),
        }
    };
    // The same filter and items on a throwaway key tell where the limit stops the insert.
    reserve(&mut con, "probe");
    let n = insert_all(&mut con, "probe", &all).len();
    assert!(n > 1 && n < all.len(), "the limit stopped the probe at {n}");
    con.q::<i64>(&cmd!("DEL", "probe"));

    reserve(&mut con, "k");
    let replies = insert_all(&mut con, "k", &all[..n]);
    assert_eq!(replies.len(), n);
    let last = replies.last().and_then(error_of).unwrap_or_default();
    assert!(
        last.starts_with("ERR problem inserting into filter: its next sub-filter"),
        "the limit refused exactly the last item: {last}"
    );
    assert_eq!(
        con.q::<i64>(&cmd!("CF.EXISTS", "k", all[n - 1].as_slice())),
        0
    );
    let keys = vec!["k".to_string()];
    con.q::<i64>(&cmd!("WAIT", 1, 10_000));
    let want = digests(&mut con, &keys);
    let dump = cf_scandump(&mut con, "k");
    let mut rcon = replica.conn();
    wait_until(Duration::from_secs(20), "the replica to catch up", || {
        con.q::<i64>(&cmd!("WAIT", 1, 1000));
        digests(&mut rcon, &keys) == want
    });
    assert_eq!(cf_scandump(&mut rcon, "k"), dump, "the replica's buckets");
    drop(con);
    primary.restart(Stop::NoSave);
    let mut con = primary.conn();
    assert_eq!(digests(&mut con, &keys), want, "after the AOF replay");
    assert_eq!(
        cf_scandump(&mut con, "k"),
        dump,
        "the buckets after the AOF replay"
    );
}

// ---------------------------------------------------------------- memory limits

#[test]
fn the_per_filter_limit_refuses_creation_growth_and_restore_before_allocating() {
    require_own_server!();
    let s = Server::builder()
        .module_args(&["bf-max-filter-memory", "64kb"])
        .start();
    let mut con = s.conn();
    let e = con.err_text(&cmd!("CF.RESERVE", "big", "1000000"));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter: it would need"),
        "{e}"
    );
    let e = con.err_text(&cmd!(
        "CF.INSERT",
        "big",
        "CAPACITY",
        "1000000",
        "ITEMS",
        "a"
    ));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "{e}"
    );
    let header: Vec<u8> = [
        0u64.to_le_bytes().as_slice(),
        &(1u64 << 20).to_le_bytes(),
        &0u64.to_le_bytes(),
        &1u64.to_le_bytes(),
        &2u16.to_le_bytes(),
        &20u16.to_le_bytes(),
        &1u16.to_le_bytes(),
    ]
    .concat();
    let e = con.err_text(&cmd!("CF.LOADCHUNK", "big", "1", header.as_slice()));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "{e}"
    );
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "big")), 0);

    // Growth: the filter keeps what it had when the next sub-filter is refused.
    con.ok(&cmd!(
        "CF.RESERVE",
        "g",
        "8192",
        "BUCKETSIZE",
        "2",
        "EXPANSION",
        "4"
    ));
    let mut refused = None;
    for i in 0..100_000 {
        let v = con.raw(&cmd!("CF.ADD", "g", format!("i{i}")));
        if let Some(e) = error_of(&v) {
            refused = Some((i, e));
            break;
        }
    }
    let (n, e) = refused.expect("the limit stopped growth");
    assert!(
        e.starts_with("ERR problem inserting into filter: its next sub-filter would bring it to"),
        "{e}"
    );
    assert_eq!(cf_field(&mut con, "g", "Number of items inserted"), n);

    // A client's RESTORE of a value over the limit is refused.
    let other = Server::start();
    let mut ocon = other.conn();
    ocon.ok(&cmd!("CF.RESERVE", "huge", "1000000"));
    ocon.q::<i64>(&cmd!("CF.ADD", "huge", "x"));
    let payload: Vec<u8> = ocon.q(&cmd!("DUMP", "huge"));
    let e = con.err_text(&cmd!("RESTORE", "huge", 0, payload.as_slice()));
    assert!(e.contains("Bad data format"), "{e}");
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "huge")), 0);
}

#[test]
fn maxmemory_refuses_a_filter_that_would_pass_it() {
    require_own_server!();
    let s = Server::builder().config("maxmemory", "20mb").start();
    let mut con = s.conn();
    let e = con.err_text(&cmd!("CF.RESERVE", "big", "100000000"));
    assert_eq!(e, "OOM command not allowed when used memory > 'maxmemory'.");
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "big")), 0);
    con.ok(&cmd!("CF.RESERVE", "small", "1000"));
    // Growth too: the next sub-filter (512 × 32768 buckets of 2 slots, 32 MiB) is refused,
    // by CF.INSERT after the items that fit and by CF.ADD, and the filter keeps its items.
    con.ok(&cmd!("CF.RESERVE", "g", "1024", "EXPANSION", "32768"));
    let mut c = cmd!("CF.INSERT", "g", "ITEMS");
    for i in cf_items("g", 5000) {
        c.arg(i);
    }
    let Value::Array(replies) = con.raw(&c) else {
        panic!("an array")
    };
    let oom = "OOM command not allowed when used memory > 'maxmemory'.";
    assert_eq!(replies.last().and_then(error_of).as_deref(), Some(oom));
    let added = replies.len() - 1;
    assert!(
        added > 500 && replies[..added].iter().all(|r| *r == Value::Int(1)),
        "{added} {:?}",
        &replies[replies.len().saturating_sub(3)..]
    );
    assert_eq!(cf_field(&mut con, "g", "Number of filters"), 1);
    assert_eq!(
        cf_field(&mut con, "g", "Number of items inserted"),
        added as i64
    );
    let e = con.err_text(&cmd!("CF.ADD", "g", format!("g:{added}")));
    assert_eq!(e, oom);
}

// ---------------------------------------------------------------- INFO bf

#[test]
fn info_bf_counts_cuckoo_filters_and_what_they_could_not_do() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let figure = |con: &mut redis::Connection, name: &str| common::info_i64(con, "bf", name);
    assert_eq!(figure(&mut con, "bf_cf_filters"), 0);
    con.ok(&cmd!(
        "CF.RESERVE",
        "a",
        "4",
        "BUCKETSIZE",
        "1",
        "EXPANSION",
        "0"
    ));
    con.ok(&cmd!("CF.RESERVE", "b", "64", "EXPANSION", "1"));
    cf_insert(&mut con, "b", &cf_items("b", 200));
    let v = con.raw(&cmd!(
        "CF.INSERT",
        "a",
        "ITEMS",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7"
    ));
    let refused = match &v {
        Value::Array(xs) => xs.iter().filter(|x| **x == Value::Int(-1)).count() as i64,
        other => panic!("{other:?}"),
    };
    assert!(refused > 0);
    let added_a = 7 - refused;
    con.q::<i64>(&cmd!("CF.DEL", "b", "never-added-1"));
    con.q::<i64>(&cmd!("CF.DEL", "b", "b:0"));
    let subs = cf_field(&mut con, "b", "Number of filters");
    assert!(subs > 1, "b grew");
    assert_eq!(figure(&mut con, "bf_cf_filters"), 2);
    assert_eq!(figure(&mut con, "bf_cf_sub_filters"), 1 + subs);
    assert_eq!(
        figure(&mut con, "bf_cf_items"),
        added_a + cf_field(&mut con, "b", "Number of items inserted")
    );
    assert!(figure(&mut con, "bf_cf_bytes") > 0);
    assert!(figure(&mut con, "bf_cf_deletes_not_found") >= 1);
    assert_eq!(figure(&mut con, "bf_cf_refused_full"), refused);
    let e = con.err_text(&cmd!("CF.ADD", "a", "more"));
    assert_eq!(e, "Filter is full");
    assert_eq!(figure(&mut con, "bf_cf_refused_full"), refused + 1);
    con.q::<i64>(&cmd!("DEL", "a", "b"));
    assert_eq!(figure(&mut con, "bf_cf_filters"), 0);
    assert_eq!(figure(&mut con, "bf_cf_sub_filters"), 0);
    assert_eq!(figure(&mut con, "bf_cf_items"), 0);
    assert_eq!(figure(&mut con, "bf_cf_bytes"), 0);
}

/// The running totals of `INFO bf` after writes that grow, delete from and compact filters
/// equal the totals a fresh server counts for copies of the same filters (each entered
/// whole), and fall back to zero when the filters are freed.
#[test]
fn info_bf_cuckoo_totals_follow_growth_deletes_and_compaction() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let totals = |con: &mut redis::Connection| -> Vec<i64> {
        [
            "bf_cf_filters",
            "bf_cf_sub_filters",
            "bf_cf_items",
            "bf_cf_bytes",
        ]
        .iter()
        .map(|f| common::info_i64(con, "bf", f))
        .collect()
    };
    // Growth by single adds, by a batch and by an auto-created filter; deletes that compact
    // (a tenth of the items deleted with several sub-filters), an explicit compaction.
    con.ok(&cmd!("CF.RESERVE", "single", "16", "EXPANSION", "2"));
    for i in cf_items("single", 300) {
        con.q::<i64>(&cmd!("CF.ADD", "single", i.as_slice()));
    }
    con.ok(&cmd!("CF.RESERVE", "batch", "16", "EXPANSION", "1"));
    cf_insert(&mut con, "batch", &cf_items("batch", 400));
    con.q::<Vec<i64>>(&cmd!(
        "CF.INSERT",
        "auto",
        "CAPACITY",
        "8",
        "ITEMS",
        "a",
        "b",
        "c"
    ));
    assert!(cf_field(&mut con, "single", "Number of filters") > 2);
    let subs = cf_field(&mut con, "batch", "Number of filters");
    assert!(subs > 2);
    for i in cf_items("batch", 400).iter().rev().take(120) {
        assert_eq!(con.q::<i64>(&cmd!("CF.DEL", "batch", i.as_slice())), 1);
    }
    assert!(
        cf_field(&mut con, "batch", "Number of filters") < subs,
        "deletes compacted the filter"
    );
    con.ok(&cmd!("CF.COMPACT", "single"));
    con.q::<i64>(&cmd!("CF.DEL", "auto", "a"));
    let written = totals(&mut con);
    assert_eq!(written[0], 3);
    let fresh = Server::start();
    let mut copy = fresh.conn();
    for k in ["single", "batch", "auto"] {
        let payload: Vec<u8> = con.q(&cmd!("DUMP", k));
        copy.ok(&cmd!("RESTORE", k, 0, payload.as_slice()));
    }
    assert_eq!(
        totals(&mut copy),
        written,
        "running totals against a fresh count"
    );
    // SYNC: Valkey 8 flushes in the background by default (lazyfree-lazy-user-flush), and
    // the totals fall only as the filters are freed.
    con.ok(&cmd!("FLUSHALL", "SYNC"));
    assert_eq!(totals(&mut con), [0, 0, 0, 0]);
}

// ---------------------------------------------------------------- crash recovery

/// With `appendfsync always`, a server killed with SIGKILL comes back with every
/// acknowledged CF write, deletes and compactions included, and nothing else: the same
/// buckets. Checked with the AOF rewritten both ways (RDB preamble, CF.LOADCHUNK commands)
/// before more writes.
#[test]
fn every_acknowledged_cf_write_survives_sigkill_with_appendfsync_always() {
    require_own_server!();
    for preamble in ["yes", "no"] {
        let mut s = Server::builder()
            .config("appendonly", "yes")
            .config("appendfsync", "always")
            .config("aof-use-rdb-preamble", preamble)
            .start();
        let mut con = s.conn();
        let mut keys = fill_variety(&mut con, "crash");
        con.q::<String>(&cmd!("BGREWRITEAOF"));
        wait_for_aof_rewrite(&mut con);
        let mut rng = common::Rng(7);
        for i in 0..2000 {
            let key = rng.pick(&keys).clone();
            let item = format!("w{}", rng.below(400));
            let c = match i % 7 {
                0..=2 => cmd!("CF.ADD", &key, &item),
                3 => cmd!("CF.INSERTNX", &key, "ITEMS", &item, format!("{item}:b")),
                4 | 5 => cmd!("CF.DEL", &key, &item),
                _ => cmd!("CF.COMPACT", &key),
            };
            // Refusals (a full filter) are answers too: they changed nothing.
            let _ = con.raw(&c);
        }
        con.q::<i64>(&cmd!("CF.ADD", "crash:late", "x"));
        keys.push("crash:late".into());
        let want: Vec<_> = keys.iter().map(|k| cf_scandump(&mut con, k)).collect();
        let digests_before = digests(&mut con, &keys);
        drop(con);
        s.restart(Stop::Kill);
        let mut con = s.conn();
        let got: Vec<_> = keys.iter().map(|k| cf_scandump(&mut con, k)).collect();
        assert!(
            got == want,
            "preamble {preamble}: the buckets after SIGKILL differ"
        );
        assert_eq!(
            digests(&mut con, &keys),
            digests_before,
            "preamble {preamble}"
        );
    }
}

// ---------------------------------------------------------------- health

fn text(v: &Value) -> String {
    match v {
        Value::SimpleString(t) => t.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not text: {other:?}"),
    }
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Double(f) => *f,
        Value::Int(n) => *n as f64,
        other => text(other).parse().unwrap(),
    }
}

const REDISBLOOM_CF_WORDS: [(&str, &str); 8] = [
    ("SIZE", "Size"),
    ("BUCKETS", "Number of buckets"),
    ("FILTERS", "Number of filters"),
    ("ITEMS", "Number of items inserted"),
    ("DELETED", "Number of items deleted"),
    ("BUCKETSIZE", "Bucket size"),
    ("EXPANSION", "Expansion rate"),
    ("MAXITERATIONS", "Max iterations"),
];
const HEALTH_CF_WORDS: [(&str, &str); 3] = [
    ("LOAD", "Load factors"),
    ("FPR", "Estimated false positive rate"),
    ("DELETESNOTFOUND", "Deletes not found"),
];

#[test]
fn info_field_words_answer_loads_the_estimated_rate_and_missed_deletes_in_resp2_and_resp3() {
    let s = Server::start();
    let ks = s.keys("cf_info_words");
    let k = ks.k("f");
    let mut con = s.conn();
    con.ok(&cmd!("CF.RESERVE", &k, 64, "EXPANSION", 2));
    cf_insert(&mut con, &k, &cf_items("h", 150));
    let mut missed = 0;
    for i in 0..20 {
        let found: i64 = con.q(&cmd!("CF.DEL", &k, format!("never:{i}")));
        missed += 1 - found;
    }
    assert!(missed > 15, "{missed}");
    // Without a word: RedisBloom's eight fields, nothing more.
    let full = cf_info(&mut con, &k);
    let names: Vec<&str> = full.iter().map(|(n, _)| n.as_str()).collect();
    let redisbloom: Vec<&str> = REDISBLOOM_CF_WORDS.iter().map(|w| w.1).collect();
    assert_eq!(names, redisbloom);
    let figure = |name: &str| full.iter().find(|(n, _)| n == name).unwrap().1;
    let filters = figure("Number of filters");
    assert!(filters >= 2, "{filters} sub-filters");
    // HEALTH over RESP2: a flat array; the loads an array of bulk-string doubles.
    let Value::Array(xs) = con.raw(&cmd!("CF.INFO", &k, "health")) else {
        panic!("CF.INFO HEALTH is not an array")
    };
    let health_names: Vec<String> = xs.iter().step_by(2).map(text).collect();
    let expected: Vec<&str> = HEALTH_CF_WORDS.iter().map(|w| w.1).collect();
    assert_eq!(health_names, expected);
    let Value::Array(loads) = &xs[1] else {
        panic!("loads: {:?}", xs[1])
    };
    assert!(matches!(loads[0], Value::BulkString(_)), "{loads:?}");
    let loads: Vec<f64> = loads.iter().map(number).collect();
    assert_eq!(loads.len() as i64, filters);
    assert!(loads.iter().all(|&l| l > 0.0 && l <= 1.0), "{loads:?}");
    // Occupied slots over slots: the occupied slots add up to the items the filter holds.
    let slots0 = (figure("Number of buckets") * figure("Bucket size")) as f64;
    let occupied: f64 = loads
        .iter()
        .enumerate()
        .map(|(i, l)| l * slots0 * 2f64.powi(i as i32))
        .sum();
    assert_eq!(occupied.round() as i64, figure("Number of items inserted"));
    let sum: f64 = loads.iter().sum();
    let fpr = number(&xs[3]);
    let want = 1.0 - (254.0f64 / 255.0).powf(2.0 * 2.0 * sum);
    assert!((fpr - want).abs() < 1e-9, "{fpr} {want}");
    assert_eq!(xs[5], Value::Int(missed));
    // HEALTH over RESP3: a map, doubles as doubles.
    let mut con3 = s.conn_resp3();
    let Value::Map(pairs) = con3.raw(&cmd!("CF.INFO", &k, "HEALTH")) else {
        panic!("CF.INFO HEALTH over RESP3 is not a map")
    };
    let names3: Vec<String> = pairs.iter().map(|(n, _)| text(n)).collect();
    assert_eq!(names3, health_names);
    let Value::Array(loads3) = &pairs[0].1 else {
        panic!("{:?}", pairs[0].1)
    };
    assert_eq!(loads3.iter().map(number).collect::<Vec<_>>(), loads);
    assert!(matches!(loads3[0], Value::Double(_)));
    assert_eq!(pairs[1].1, Value::Double(fpr));
    assert_eq!(pairs[2].1, Value::Int(missed));
    // Without a word over RESP3: RedisBloom's eight as a map.
    let Value::Map(full3) = con3.raw(&cmd!("CF.INFO", &k)) else {
        panic!("CF.INFO over RESP3 is not a map")
    };
    assert_eq!(
        full3.iter().map(|(n, _)| text(n)).collect::<Vec<_>>(),
        redisbloom
    );
    // Every word alone, in any case: RESP2 an array of its value, RESP3 a one-entry map.
    let all: Vec<(String, Value)> = full3
        .iter()
        .map(|(n, v)| (text(n), v.clone()))
        .chain(pairs.iter().map(|(n, v)| (text(n), v.clone())))
        .collect();
    for (word, name) in REDISBLOOM_CF_WORDS.iter().chain(&HEALTH_CF_WORDS) {
        let value3 = &all.iter().find(|(n, _)| n == name).unwrap().1;
        let Value::Map(one) = con3.raw(&cmd!("CF.INFO", &k, word.to_lowercase())) else {
            panic!("CF.INFO {word} over RESP3")
        };
        assert_eq!(one.len(), 1, "{word}");
        assert_eq!(text(&one[0].0), *name, "{word}");
        assert_eq!(&one[0].1, value3, "{word}");
        let Value::Array(v2) = con.raw(&cmd!("CF.INFO", &k, word)) else {
            panic!("CF.INFO {word}")
        };
        assert_eq!(v2.len(), 1, "{word}");
        match (&v2[0], value3) {
            (Value::Array(a), Value::Array(b)) => {
                assert_eq!(
                    a.iter().map(number).collect::<Vec<_>>(),
                    b.iter().map(number).collect::<Vec<_>>()
                )
            }
            (a, b) => assert_eq!(number(a), number(b), "{word}"),
        }
    }
    // A word that is not a field; a missing key is reported before the word.
    assert_eq!(
        con.err_text(&cmd!("CF.INFO", &k, "CAPACITY")),
        "Invalid information value"
    );
    assert_eq!(
        con.err_text(&cmd!("CF.INFO", ks.k("missing"), "CAPACITY")),
        con.err_text(&cmd!("CF.INFO", ks.k("missing")))
    );
    assert!(con
        .err_text(&cmd!("CF.INFO", &k, "LOAD", "FPR"))
        .starts_with("ERR wrong number of arguments"));
}

fn cf_capacity_events(ps: &mut redis::PubSub) -> usize {
    let mut n = 0;
    while ps.get_message().is_ok() {
        n += 1;
    }
    n
}

#[test]
fn the_capacity_warning_logs_and_notifies_once_per_crossing_of_the_newest_sub_filter() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let sub: &'static mut redis::Connection = Box::leak(Box::new(s.conn()));
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:cf.capacity").unwrap();
    ps.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut con = s.conn();
    // 32 buckets of 2: 64 slots, the 70% mark at 45 occupied.
    con.ok(&cmd!("CF.RESERVE", "w", 64, "EXPANSION", 2));
    let add = |con: &mut redis::Connection, range: std::ops::Range<u32>| {
        for i in range {
            assert_eq!(con.q::<i64>(&cmd!("CF.ADD", "w", format!("w:{i}"))), 1);
        }
    };
    add(&mut con, 0..44);
    assert_eq!(cf_capacity_events(&mut ps), 0, "under the mark");
    add(&mut con, 44..45);
    assert_eq!(
        cf_capacity_events(&mut ps),
        1,
        "the add that reaches the mark"
    );
    add(&mut con, 45..50);
    assert_eq!(cf_capacity_events(&mut ps), 0, "past the mark");
    assert_eq!(cf_field(&mut con, "w", "Number of filters"), 1);
    // Deletes take the sub-filter back under the mark; reaching it again is a crossing.
    for i in 44..50 {
        assert_eq!(con.q::<i64>(&cmd!("CF.DEL", "w", format!("w:{i}"))), 1);
    }
    add(&mut con, 44..45);
    assert_eq!(cf_capacity_events(&mut ps), 1, "crossed again");
    // Threshold 0: no warnings.
    for i in 44..45 {
        con.q::<i64>(&cmd!("CF.DEL", "w", format!("w:{i}")));
    }
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-capacity-warning"), 0));
    add(&mut con, 44..45);
    assert_eq!(cf_capacity_events(&mut ps), 0, "bf-capacity-warning 0");
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-capacity-warning"), 70));
    assert_eq!(
        common::info_i64(&mut con, "bf", "bf_cf_capacity_warnings"),
        2
    );
    let log = s.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cuckoo filter 'w' reached 70% load"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains("sub-filter 1 of 1 has 45 of 64 slots occupied"),
        "{}",
        lines[0]
    );
    // Not a Bloom warning: the Bloom counter is untouched.
    assert_eq!(common::info_i64(&mut con, "bf", "bf_capacity_warnings"), 0);
}

#[test]
fn cuckoo_capacity_warnings_are_rate_limited_in_the_log_and_every_event_arrives() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let sub: &'static mut redis::Connection = Box::leak(Box::new(s.conn()));
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:cf.capacity").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut con = s.conn();
    // Capacity 4: two buckets of 2 slots, the mark at 3; each filter crosses once.
    let n = 2000;
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("CF.INSERT")
            .arg(format!("k{i}"))
            .arg("CAPACITY")
            .arg(4)
            .arg("ITEMS")
            .arg("x")
            .arg("y")
            .arg("z");
    }
    let _: Vec<Value> = pipe.query(&mut con).unwrap();
    for _ in 0..n {
        ps.get_message()
            .expect("a cf.capacity event for every crossing");
    }
    let crossings = common::info_i64(&mut con, "bf", "bf_cf_capacity_warnings");
    assert_eq!(crossings, n);
    let suppressed = common::info_i64(&mut con, "bf", "bf_cf_capacity_warnings_suppressed");
    let lines = s
        .log()
        .lines()
        .filter(|l| l.contains("reached 70% load"))
        .count() as i64;
    assert_eq!(
        lines + suppressed,
        crossings,
        "every crossing is logged or counted"
    );
    assert!(
        lines <= crossings / 10,
        "{lines} warning lines for {crossings} crossings"
    );
}

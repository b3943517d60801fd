//! The cuckoo filter's ERROR extension (a false-positive rate of one's choosing) on a real
//! server: creation by CF.RESERVE and CF.INSERT, its errors, CF.INFO's layout words, every CF
//! command on such a key, persistence (SCANDUMP/LOADCHUNK, DEBUG RELOAD, DUMP/RESTORE, COPY,
//! AOF rewrite), replication, and RedisBloom refusing such data instead of misreading it.

use crate::common;

use std::time::Duration;

use common::{
    cf_field, cf_info, cf_insert, cf_items, cf_loadchunks, cf_scandump, digest,
    wait_for_aof_rewrite, wait_for_link, wait_until, Exec, Server, Stop, CF_INFO_FIELDS,
};
use redis::Value;

fn mexists(con: &mut redis::Connection, key: &str, items: &[Vec<u8>]) -> Vec<i64> {
    let mut out = Vec::new();
    for chunk in items.chunks(1000) {
        let mut c = cmd!("CF.MEXISTS", key);
        for i in chunk {
            c.arg(i.as_slice());
        }
        out.extend(con.q::<Vec<i64>>(&c));
    }
    out
}

/// `CF.INFO key <word>`'s value (RESP2 wraps it in a one-element array, as BF.INFO's).
fn info_word<T: redis::FromRedisValue>(con: &mut redis::Connection, key: &str, word: &str) -> T {
    let mut v: Vec<T> = con.q(&cmd!("CF.INFO", key, word));
    assert_eq!(v.len(), 1);
    v.pop().unwrap()
}

fn widths(con: &mut redis::Connection, key: &str) -> Vec<i64> {
    info_word(con, key, "FINGERPRINT")
}

fn key_type(con: &mut redis::Connection, key: &str) -> String {
    con.q(&cmd!("TYPE", key))
}

/// What identifies a filter exactly: its digest, CF.DEBUG line (with its widths) and type.
fn state(con: &mut redis::Connection, keys: &[&str]) -> Vec<(String, String, String)> {
    keys.iter()
        .map(|k| {
            let debug: String = con.q(&cmd!("CF.DEBUG", k));
            (digest(con, k), debug, key_type(con, k))
        })
        .collect()
}

/// Filters of the extension in several shapes: grown, compacted, emptied, created by
/// CF.INSERT. Returns their keys.
fn fill(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let k = |name: &str| format!("{prefix}:{name}");
    con.ok(&cmd!(
        "CF.RESERVE",
        k("grown"),
        "200",
        "ERROR",
        "0.001",
        "EXPANSION",
        "2"
    ));
    cf_insert(con, &k("grown"), &cf_items("g", 1500));
    for i in (0..1500).step_by(7) {
        con.q::<i64>(&cmd!("CF.DEL", k("grown"), format!("g:{i}")));
    }
    con.ok(&cmd!("CF.COMPACT", k("grown")));
    con.q::<Vec<i64>>(&cmd!(
        "CF.INSERT",
        k("inserted"),
        "CAPACITY",
        "300",
        "ERROR",
        "0.0001",
        "ITEMS",
        "a",
        "b",
        "c"
    ));
    con.ok(&cmd!("CF.RESERVE", k("empty"), "100", "ERROR", "0.05"));
    con.ok(&cmd!(
        "CF.RESERVE",
        k("emptied"),
        "100",
        "ERROR",
        "0.02",
        "BUCKETSIZE",
        "8"
    ));
    con.q::<i64>(&cmd!("CF.ADD", k("emptied"), "x"));
    con.q::<i64>(&cmd!("CF.DEL", k("emptied"), "x"));
    ["grown", "inserted", "empty", "emptied"]
        .iter()
        .map(|n| k(n))
        .collect()
}

#[test]
fn error_creates_a_filter_of_the_sized_layout_under_its_own_type() {
    let s = Server::start();
    let ks = s.keys("cferr:create");
    let mut con = s.conn();
    let (r, i, plain) = (ks.k("r"), ks.k("i"), ks.k("plain"));
    con.ok(&cmd!("CF.RESERVE", &r, "1000", "ERROR", "0.001"));
    assert_eq!(key_type(&mut con, &r), "LBcuckoo-");
    // The sizing's shape for 0.001: bucket size 4, 13-bit fingerprints, enough buckets for
    // 1000 items at the load bucket size 4 reaches, 500 eviction attempts.
    let got = cf_info(&mut con, &r);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, CF_INFO_FIELDS);
    assert_eq!(cf_field(&mut con, &r, "Number of buckets"), 512);
    assert_eq!(cf_field(&mut con, &r, "Bucket size"), 4);
    assert_eq!(cf_field(&mut con, &r, "Max iterations"), 500);
    assert_eq!(cf_field(&mut con, &r, "Expansion rate"), 1);
    // Size counts the packed slots: 512 × 4 × 13 bits.
    assert_eq!(cf_field(&mut con, &r, "Size"), 40 + 16 + 512 * 4 * 13 / 8);
    assert_eq!(widths(&mut con, &r), vec![13]);
    assert_eq!(info_word::<f64>(&mut con, &r, "ERROR"), 0.001);
    // Options given with ERROR are kept.
    con.ok(&cmd!(
        "CF.RESERVE",
        ks.k("opts"),
        "1000",
        "ERROR",
        "0.01",
        "BUCKETSIZE",
        "8",
        "MAXITERATIONS",
        "100",
        "EXPANSION",
        "3"
    ));
    let o = ks.k("opts");
    assert_eq!(cf_field(&mut con, &o, "Bucket size"), 8);
    assert_eq!(cf_field(&mut con, &o, "Max iterations"), 100);
    assert_eq!(cf_field(&mut con, &o, "Expansion rate"), 4);
    // CF.INSERT creates one too; CF.INSERTNX as well.
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!(
            "CF.INSERT",
            &i,
            "CAPACITY",
            "500",
            "ERROR",
            "0.01",
            "ITEMS",
            "a",
            "b"
        )),
        vec![1, 1]
    );
    assert_eq!(key_type(&mut con, &i), "LBcuckoo-");
    assert_eq!(widths(&mut con, &i), vec![10]);
    let nx = ks.k("nx");
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!(
            "CF.INSERTNX",
            &nx,
            "ERROR",
            "0.02",
            "ITEMS",
            "a",
            "a"
        )),
        vec![1, 0]
    );
    assert_eq!(key_type(&mut con, &nx), "LBcuckoo-");
    // ERROR on an existing key creates nothing and changes nothing (as CAPACITY).
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("CF.INSERT", &i, "ERROR", "0.5", "ITEMS", "c")),
        vec![1]
    );
    assert_eq!(widths(&mut con, &i), vec![10]);
    // Without ERROR: RedisBloom's type and layout.
    con.ok(&cmd!("CF.RESERVE", &plain, "1000"));
    assert_eq!(key_type(&mut con, &plain), "MBbloomCF");
    assert_eq!(widths(&mut con, &plain), vec![8]);
    assert_eq!(
        con.raw(&cmd!("CF.INFO", &plain, "ERROR")),
        Value::Array(vec![Value::Nil])
    );
    let debug: String = con.q(&cmd!("CF.DEBUG", &r));
    assert_eq!(
        debug,
        "bktsize:4 buckets:512 items:0 deletes:0 filters:1 max_iterations:500 expansion:1 \
         fingerprint:13 error:0.001"
    );
}

#[test]
fn error_arguments_are_refused_with_a_clear_error_and_create_nothing() {
    let s = Server::start();
    let ks = s.keys("cferr:args");
    let mut con = s.conn();
    let k = ks.k("k");
    let range = "ERR ERROR: value must be a number between 0 and 1, exclusive";
    let small = "ERR ERROR: no fingerprint of at most 32 bits reaches this rate (the smallest is \
                 about 1e-7)";
    let bucket = "ERR BUCKETSIZE: with ERROR, value must be 3, 4, 6 or 8";
    let cases: Vec<(redis::Cmd, &str)> = vec![
        (cmd!("CF.RESERVE", &k, "100", "ERROR", "0"), range),
        (cmd!("CF.RESERVE", &k, "100", "ERROR", "1"), range),
        (cmd!("CF.RESERVE", &k, "100", "ERROR", "-0.1"), range),
        (cmd!("CF.RESERVE", &k, "100", "ERROR", "abc"), range),
        (cmd!("CF.RESERVE", &k, "100", "ERROR", "nan"), range),
        (cmd!("CF.RESERVE", &k, "100", "ERROR", "1e-12"), small),
        (
            cmd!("CF.RESERVE", &k, "100", "ERROR", "0.01", "BUCKETSIZE", "2"),
            bucket,
        ),
        (
            cmd!("CF.RESERVE", &k, "100", "ERROR", "0.01", "BUCKETSIZE", "5"),
            bucket,
        ),
        (
            cmd!("CF.RESERVE", &k, "100", "ERROR", "0.01", "ERROR", "0.02"),
            "ERR option ERROR given more than once",
        ),
        (
            cmd!("CF.RESERVE", &k, "100", "ERROR"),
            "ERR wrong number of arguments for 'cf.reserve' command",
        ),
        (
            cmd!("CF.RESERVE", &k, "5", "ERROR", "0.01"),
            "Capacity must be at least (BucketSize * 2)",
        ),
        (
            cmd!(
                "CF.RESERVE",
                &k,
                "100",
                "ERROR",
                "0.01",
                "MAXITERATIONS",
                "0"
            ),
            "MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.",
        ),
        (cmd!("CF.INSERT", &k, "ERROR", "2", "ITEMS", "a"), range),
        (cmd!("CF.INSERT", &k, "ERROR", "1e-30", "ITEMS", "a"), small),
        (
            cmd!(
                "CF.INSERT",
                &k,
                "ERROR",
                "0.1",
                "ERROR",
                "0.2",
                "ITEMS",
                "a"
            ),
            "ERR option ERROR given more than once",
        ),
        (
            cmd!(
                "CF.INSERTNX",
                &k,
                "CAPACITY",
                "3",
                "ERROR",
                "0.1",
                "ITEMS",
                "a"
            ),
            "Capacity must be at least (BucketSize * 2)",
        ),
    ];
    for (c, want) in cases {
        let got = con.err_text(&c);
        assert_eq!(got, want, "{}", common::show(&c));
    }
    assert!(!common::key_exists(&mut con, &k));
    // ERROR on an existing key of either type is validated, then ignored.
    con.ok(&cmd!("CF.RESERVE", &k, "100"));
    assert_eq!(
        con.err_text(&cmd!("CF.INSERT", &k, "ERROR", "7", "ITEMS", "a")),
        range
    );
    assert_eq!(
        con.err_text(&cmd!("CF.RESERVE", &k, "100", "ERROR", "0.01")),
        "ERR item exists"
    );
    assert_eq!(key_type(&mut con, &k), "MBbloomCF");
}

#[test]
fn every_cf_command_works_on_an_extension_key_without_false_negatives() {
    let s = Server::start();
    let ks = s.keys("cferr:cmds");
    let mut con = s.conn();
    let k = ks.k("k");
    con.ok(&cmd!(
        "CF.RESERVE",
        &k,
        "500",
        "ERROR",
        "0.002",
        "EXPANSION",
        "2"
    ));
    let first = cf_items("i", 2000);
    assert!(cf_insert(&mut con, &k, &first).iter().all(|&r| r == 1));
    assert!(cf_field(&mut con, &k, "Number of filters") > 1);
    let w = widths(&mut con, &k);
    assert!(w.windows(2).all(|p| p[0] <= p[1]) && w[0] < w[1], "{w:?}");
    assert_eq!(con.q::<i64>(&cmd!("CF.ADD", &k, "one")), 1);
    assert_eq!(con.q::<i64>(&cmd!("CF.ADD", &k, "one")), 1);
    assert_eq!(con.q::<i64>(&cmd!("CF.COUNT", &k, "one")), 2);
    assert_eq!(con.q::<i64>(&cmd!("CF.ADDNX", &k, "one")), 0);
    assert_eq!(con.q::<i64>(&cmd!("CF.ADDNX", &k, "two")), 1);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("CF.INSERTNX", &k, "ITEMS", "two", "three")),
        vec![0, 1]
    );
    assert_eq!(con.q::<i64>(&cmd!("CF.EXISTS", &k, "three")), 1);
    assert!(mexists(&mut con, &k, &first).iter().all(|&r| r == 1));
    assert_eq!(cf_field(&mut con, &k, "Number of items inserted"), 2004);
    // Deletes: every deleted item's copy goes, the others stay found (all were added).
    for i in first.iter().step_by(3) {
        assert_eq!(con.q::<i64>(&cmd!("CF.DEL", &k, i.as_slice())), 1);
    }
    assert_eq!(con.q::<i64>(&cmd!("CF.DEL", &k, "one")), 1);
    assert_eq!(con.q::<i64>(&cmd!("CF.COUNT", &k, "one")), 1);
    con.ok(&cmd!("CF.COMPACT", &k));
    let kept: Vec<Vec<u8>> = first
        .iter()
        .enumerate()
        .filter(|(n, _)| n % 3 != 0)
        .map(|(_, i)| i.clone())
        .collect();
    assert!(mexists(&mut con, &k, &kept).iter().all(|&r| r == 1));
    assert_eq!(con.q::<i64>(&cmd!("CF.EXISTS", &k, "one")), 1);
    let loads: Vec<f64> = info_word(&mut con, &k, "LOAD");
    assert_eq!(
        loads.len() as i64,
        cf_field(&mut con, &k, "Number of filters")
    );
    let fpr: f64 = info_word(&mut con, &k, "FPR");
    assert!(fpr > 0.0 && fpr <= 0.002, "{fpr}");
    // A SCANDUMP / LOADCHUNK copy is the same filter, of the same type.
    let stream = cf_scandump(&mut con, &k);
    assert_eq!(stream[0].1.as_ref().map(Vec::len), Some(52));
    let copy = ks.k("copy");
    cf_loadchunks(&mut con, &copy, &stream);
    assert_eq!(digest(&mut con, &k), digest(&mut con, &copy));
    assert_eq!(key_type(&mut con, &copy), "LBcuckoo-");
    assert_eq!(cf_scandump(&mut con, &copy), stream);
    // A chunk of another filter over the copy's fingerprints is refused.
    let (it, data) = (stream[1].0, stream[1].1.clone().unwrap());
    let mut other = data.clone();
    other.iter_mut().for_each(|b| *b = b.wrapping_add(1));
    assert_eq!(
        con.err_text(&cmd!("CF.LOADCHUNK", &copy, it, other.as_slice())),
        "Couldn't load chunk!"
    );
    // A RedisBloom header with the extension's bytes cut off is a RedisBloom filter.
    let header = stream[0].1.clone().unwrap();
    let cut = ks.k("cut");
    con.ok(&cmd!("CF.LOADCHUNK", &cut, 1, &header[..38]));
    assert_eq!(key_type(&mut con, &cut), "MBbloomCF");
    assert_eq!(
        con.err_text(&cmd!("CF.LOADCHUNK", ks.k("bad"), 1, &header[..45])),
        "Invalid header"
    );
}

#[test]
fn the_measured_false_positive_rate_at_capacity_is_at_most_the_asked_one() {
    let s = Server::start();
    let ks = s.keys("cferr:fpr");
    let mut con = s.conn();
    for (n, error) in [(0, 0.01), (1, 0.001)] {
        let k = ks.k(&format!("{n}"));
        con.ok(&cmd!("CF.RESERVE", &k, "20000", "ERROR", error));
        assert!(cf_insert(&mut con, &k, &cf_items("in", 20_000))
            .iter()
            .all(|&r| r == 1));
        assert_eq!(cf_field(&mut con, &k, "Number of filters"), 1, "{error}");
        let probes = cf_items("out", 200_000);
        let hits: i64 = mexists(&mut con, &k, &probes).iter().sum();
        let measured = hits as f64 / probes.len() as f64;
        assert!(measured <= error, "{error}: measured {measured}");
    }
}

#[test]
fn extension_filters_survive_reload_dump_restore_copy_and_aof_rewrite() {
    require_own_server!();
    let mut s = Server::builder().command_aof().start();
    let mut con = s.conn();
    let keys = fill(&mut con, "persist");
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let before = state(&mut con, &keys);
    con.ok(&cmd!("DEBUG", "RELOAD"));
    assert_eq!(state(&mut con, &keys), before, "after DEBUG RELOAD");
    for k in &keys {
        let payload: Vec<u8> = con.q(&cmd!("DUMP", k));
        let r = format!("{k}:restored");
        con.ok(&cmd!("RESTORE", &r, 0, payload.as_slice()));
        assert_eq!(
            state(&mut con, &[&r]),
            state(&mut con, &[k]),
            "RESTORE of {k}"
        );
        let c = format!("{k}:copy");
        assert_eq!(con.q::<i64>(&cmd!("COPY", k, &c)), 1);
        assert_eq!(state(&mut con, &[&c]), state(&mut con, &[k]), "COPY of {k}");
        let usage: i64 = con.q(&cmd!("MEMORY", "USAGE", k));
        let size = cf_field(&mut con, k, "Size");
        assert!(usage >= size, "{k}: MEMORY USAGE {usage} < Size {size}");
    }
    con.q::<String>(&cmd!("BGREWRITEAOF"));
    wait_for_aof_rewrite(&mut con);
    // Traffic after the rewrite goes to the incr file.
    con.q::<i64>(&cmd!("CF.ADD", "persist:grown", "late"));
    let before = state(&mut con, &keys);
    drop(con);
    s.restart(Stop::NoSave);
    let mut con = s.conn();
    assert_eq!(
        state(&mut con, &keys),
        before,
        "after the AOF rewrite and replay"
    );
    assert_eq!(con.q::<i64>(&cmd!("CF.EXISTS", "persist:grown", "late")), 1);
}

#[test]
fn a_replica_builds_the_primary_s_extension_filters_exactly() {
    require_own_server!();
    let primary = Server::start();
    let replica = Server::builder().replica_of(&primary).start();
    wait_for_link(&replica);
    let mut con = primary.conn();
    let keys = fill(&mut con, "repl");
    let stream = cf_scandump(&mut con, "repl:grown");
    cf_loadchunks(&mut con, "repl:copy", &stream);
    let mut keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    keys.push("repl:copy");
    con.q::<i64>(&cmd!("WAIT", 1, 10_000));
    let want = state(&mut con, &keys);
    let mut rcon = replica.conn();
    wait_until(Duration::from_secs(20), "the replica to catch up", || {
        state(&mut rcon, &keys) == want
    });
    for k in &keys {
        assert_eq!(cf_scandump(&mut rcon, k), cf_scandump(&mut con, k), "{k}");
    }
}

/// `ERROR r` on a CF.INSERT / CF.INSERTNX to an existing key is checked and ignored, and the
/// command goes to replicas and the AOF as it came: both must read it as the primary did.
#[test]
fn an_insert_with_error_on_an_existing_key_reaches_a_replica_and_the_aof_intact() {
    require_own_server!();
    let mut primary = Server::builder()
        .config("appendonly", "yes")
        .config("aof-use-rdb-preamble", "no")
        .start();
    let replica = Server::builder().replica_of(&primary).start();
    wait_for_link(&replica);
    let mut con = primary.conn();
    wait_for_aof_rewrite(&mut con);
    con.ok(&cmd!("CF.RESERVE", "ext", "1000", "ERROR", "0.001"));
    con.ok(&cmd!("CF.RESERVE", "plain", "1000"));
    let keys = ["ext", "plain", "created"];
    let sent: [(&str, &[&str]); 4] = [
        ("CF.INSERT", &["ERROR", "0.001"]),
        ("CF.INSERTNX", &["CAPACITY", "500", "error", "0.01"]),
        ("CF.INSERT", &["ERROR", "0.05", "NOCREATE"]),
        ("CF.INSERTNX", &["NOCREATE", "ERROR", "0.02"]),
    ];
    let mut added = Vec::new();
    for key in keys {
        for (n, (command, options)) in sent.iter().enumerate() {
            let batch = cf_items(&format!("{key}{n}"), 40);
            let mut c = cmd!(*command, key);
            for o in *options {
                c.arg(*o);
            }
            c.arg("ITEMS");
            for i in &batch {
                c.arg(i.as_slice());
            }
            // The batch's first item again: CF.INSERTNX finds it, CF.INSERT adds it twice.
            c.arg(batch[0].as_slice());
            let replies: Vec<i64> = con.q(&c);
            assert_eq!(replies.len(), 41);
            assert!(replies[..40].iter().all(|&r| r == 1), "{key} {command}");
            added.push((key, batch));
        }
    }
    assert_eq!(key_type(&mut con, "created"), "LBcuckoo-");
    assert_eq!(key_type(&mut con, "plain"), "MBbloomCF");
    let want = state(&mut con, &keys);
    assert_eq!(con.q::<i64>(&cmd!("WAIT", 1, 10_000)), 1);
    let mut rcon = replica.conn();
    assert_eq!(state(&mut rcon, &keys), want, "on the replica");
    drop(rcon);
    drop(con);
    primary.restart(Stop::NoSave);
    let mut con = primary.conn();
    assert_eq!(state(&mut con, &keys), want, "after the AOF replay");
    for (key, batch) in &added {
        let held = mexists(&mut con, key, batch);
        assert!(
            held.iter().all(|&h| h == 1),
            "{key}: items lost by the replay"
        );
    }
}

#[test]
fn redisbloom_refuses_extension_data_instead_of_misreading_it() {
    require_own_server!();
    let Some((ours, theirs)) = common::ours_and_redisbloom() else {
        return;
    };
    let mut a = ours.conn();
    let mut b = theirs.conn();
    a.ok(&cmd!("CF.RESERVE", "x", "64", "ERROR", "0.01"));
    cf_insert(&mut a, "x", &cf_items("x", 40));
    let payload: Vec<u8> = a.q(&cmd!("DUMP", "x"));
    let refused = b.err_text(&cmd!("RESTORE", "x", 0, payload.as_slice()));
    assert!(
        refused.contains("Bad data format") || refused.contains("payload version"),
        "{refused}"
    );
    common::assert_pong(&mut b);
    assert!(!common::key_exists(&mut b, "x"));
    // Its SCANDUMP header is refused too, so its slots are never read as 8-bit ones.
    let stream = cf_scandump(&mut a, "x");
    let header = stream[0].1.clone().unwrap();
    assert_eq!(
        b.err_text(&cmd!("CF.LOADCHUNK", "y", 1, header.as_slice())),
        "Invalid header"
    );
    assert!(!common::key_exists(&mut b, "y"));
    common::assert_pong(&mut b);
    // A RedisBloom-layout filter still moves both ways.
    a.ok(&cmd!("CF.RESERVE", "plain", "64"));
    cf_insert(&mut a, "plain", &cf_items("p", 40));
    let payload: Vec<u8> = a.q(&cmd!("DUMP", "plain"));
    b.ok(&cmd!("RESTORE", "plain", 0, payload.as_slice()));
    assert_eq!(b.q::<i64>(&cmd!("CF.EXISTS", "plain", "p:7")), 1);
}

#[test]
fn the_memory_limit_refuses_extension_filters_before_allocating() {
    require_own_server!();
    let s = Server::builder()
        .module_args(&["bf-max-filter-memory", "64kb"])
        .start();
    let mut con = s.conn();
    // Creation: CF.RESERVE, CF.INSERT and a LOADCHUNK header over the limit create nothing.
    let created = con.err_text(&cmd!("CF.RESERVE", "big", "10000000", "ERROR", "0.001"));
    assert!(
        created.starts_with("ERR Insufficient memory to create filter: it would need"),
        "{created}"
    );
    let inserted = con.err_text(&cmd!(
        "CF.INSERT",
        "big",
        "CAPACITY",
        "10000000",
        "ERROR",
        "0.01",
        "ITEMS",
        "a"
    ));
    assert!(
        inserted.starts_with("ERR Insufficient memory"),
        "{inserted}"
    );
    assert!(!common::key_exists(&mut con, "big"));
    // Growth: a filter near the limit is refused its next sub-filter, and keeps its items.
    con.ok(&cmd!(
        "CF.RESERVE",
        "g",
        "20000",
        "ERROR",
        "0.01",
        "EXPANSION",
        "2"
    ));
    let mut c = cmd!("CF.INSERT", "g", "ITEMS");
    for i in cf_items("g", 60_000) {
        c.arg(i);
    }
    let v = con.raw(&c);
    let Value::Array(replies) = &v else {
        panic!("{v:?}")
    };
    let last = replies
        .last()
        .and_then(common::error_of)
        .unwrap_or_default();
    assert!(
        last.starts_with("ERR problem inserting into filter: its next sub-filter"),
        "{last}"
    );
    let added = replies.len() - 1;
    assert_eq!(
        cf_field(&mut con, "g", "Number of items inserted"),
        added as i64
    );
    assert!(mexists(&mut con, "g", &cf_items("g", added))
        .iter()
        .all(|&r| r == 1));
    let usage: i64 = con.q(&cmd!("MEMORY", "USAGE", "g"));
    assert!(usage <= 64 * 1024 + 1024, "{usage}");
    // A client's RESTORE of a larger extension filter is refused before it is built.
    let other = Server::start();
    let mut o = other.conn();
    o.ok(&cmd!("CF.RESERVE", "x", "200000", "ERROR", "0.001"));
    o.q::<i64>(&cmd!("CF.ADD", "x", "a"));
    let payload: Vec<u8> = o.q(&cmd!("DUMP", "x"));
    let refused = con.err_text(&cmd!("RESTORE", "x", 0, payload.as_slice()));
    assert!(refused.contains("Bad data format"), "{refused}");
    assert!(!common::key_exists(&mut con, "x"));
    let header = cf_scandump(&mut o, "x")[0].1.clone().unwrap();
    let loaded = con.err_text(&cmd!("CF.LOADCHUNK", "x", 1, header.as_slice()));
    assert!(loaded.starts_with("ERR Insufficient memory"), "{loaded}");
    assert!(!common::key_exists(&mut con, "x"));
}

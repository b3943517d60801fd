//! Filters survive every way Redis persists, copies and frees values: DEBUG RELOAD, RDB
//! save and restart, AOF (rewritten with and without the RDB preamble, and the plain command
//! log), COPY, DUMP/RESTORE; MEMORY USAGE is honest; big filters are freed in the background;
//! a corrupt DUMP payload is refused.

use crate::common;

use std::fs;
use std::time::Duration;

use common::{
    aof_file, bf_info, digest, error_of, items, key_exists, madd, mexists, used_memory, BfInfo,
    Exec, Keys, Server, Stop,
};
use redis::Value;

const FULL: &str = "ERR non scaling filter is full";

/// A filter built for the test, with the items offered to it.
struct Fixture {
    key: String,
    offered: Vec<Vec<u8>>,
}

/// Everything observable about a filter.
#[derive(Debug, PartialEq)]
struct Snapshot {
    type_name: String,
    info: BfInfo,
    card: i64,
    digest: String,
    offered: Vec<bool>,
    probes: Vec<bool>,
}

fn madd_raw(con: &mut redis::Connection, key: &str, list: &[Vec<u8>]) -> Value {
    let mut c = cmd!("BF.MADD", key);
    for i in list {
        c.arg(i.as_slice());
    }
    con.raw(&c)
}

/// Several kinds of filter: scaling with several layers, a wide expansion, non-scaling and
/// full, empty, binary items, auto-created with the defaults, a capped error rate.
fn build_fixtures(con: &mut redis::Connection, ks: &Keys) -> Vec<Fixture> {
    let mut out = Vec::new();

    let key = ks.k("scaling");
    con.ok(&cmd!("BF.RESERVE", &key, "0.01", 50, "EXPANSION", 2));
    let offered = items("scaling", 600);
    madd(con, &key, &offered);
    assert!(bf_info(con, &key).filters >= 4);
    out.push(Fixture { key, offered });

    let key = ks.k("wide");
    con.ok(&cmd!("BF.RESERVE", &key, "0.001", 10, "EXPANSION", 5));
    let offered = items("wide", 300);
    madd(con, &key, &offered);
    out.push(Fixture { key, offered });

    let key = ks.k("nonscaling-full");
    con.ok(&cmd!("BF.RESERVE", &key, "0.01", 20, "NONSCALING"));
    let offered = items("full", 30);
    let v = madd_raw(con, &key, &offered);
    assert!(
        matches!(&v, Value::Array(xs) if xs.last().and_then(error_of).as_deref() == Some(FULL)),
        "filling the non-scaling filter replied {v:?}"
    );
    out.push(Fixture { key, offered });

    let key = ks.k("empty");
    con.ok(&cmd!("BF.RESERVE", &key, "0.001", 1000));
    out.push(Fixture {
        key,
        offered: items("never-added", 10),
    });

    let key = ks.k("binary");
    let offered: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\0".to_vec(),
        b"a\0b".to_vec(),
        (0..=255u8).collect(),
        b"\r\n".to_vec(),
        vec![0xff; 1000],
    ];
    assert_eq!(madd(con, &key, &offered), vec![1; offered.len()]);
    out.push(Fixture { key, offered });

    let key = ks.k("auto");
    con.q::<i64>(&cmd!("BF.ADD", &key, "only"));
    out.push(Fixture {
        key,
        offered: vec![b"only".to_vec()],
    });

    let key = ks.k("capped");
    con.ok(&cmd!("BF.RESERVE", &key, "0.9", 1));
    let offered = items("capped", 20);
    madd(con, &key, &offered);
    out.push(Fixture { key, offered });

    out
}

fn snapshot(con: &mut redis::Connection, f: &Fixture) -> Snapshot {
    Snapshot {
        type_name: con.q(&cmd!("TYPE", &f.key)),
        info: bf_info(con, &f.key),
        card: con.q(&cmd!("BF.CARD", &f.key)),
        digest: digest(con, &f.key),
        offered: mexists(con, &f.key, &f.offered),
        probes: mexists(con, &f.key, &items("probe", 2000)),
    }
}

fn snapshots(con: &mut redis::Connection, fixtures: &[Fixture]) -> Vec<Snapshot> {
    fixtures.iter().map(|f| snapshot(con, f)).collect()
}

fn assert_unchanged(
    con: &mut redis::Connection,
    fixtures: &[Fixture],
    before: &[Snapshot],
    when: &str,
) {
    for (f, b) in fixtures.iter().zip(before) {
        assert!(key_exists(con, &f.key), "{} is gone after {when}", f.key);
        assert_eq!(&snapshot(con, f), b, "{} after {when}", f.key);
    }
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

#[test]
fn filters_survive_debug_reload() {
    require_own_server!();
    let s = Server::start();
    let ks = s.keys("reload");
    let mut con = s.conn();
    let fixtures = build_fixtures(&mut con, &ks);
    let before = snapshots(&mut con, &fixtures);
    con.ok(&cmd!("DEBUG", "RELOAD"));
    assert_unchanged(&mut con, &fixtures, &before, "DEBUG RELOAD");
}

#[test]
fn filters_survive_save_and_restart() {
    require_own_server!();
    let mut s = Server::start();
    let ks = s.keys("restart");
    let mut con = s.conn();
    let fixtures = build_fixtures(&mut con, &ks);
    let before = snapshots(&mut con, &fixtures);
    let dataset = con.q::<String>(&cmd!("DEBUG", "DIGEST"));
    s.restart(Stop::Save);
    assert!(s.dir().join("dump.rdb").is_file());
    let mut con = s.conn();
    assert_unchanged(&mut con, &fixtures, &before, "SAVE and restart");
    assert_eq!(con.q::<String>(&cmd!("DEBUG", "DIGEST")), dataset);
}

#[test]
fn filters_survive_an_aof_rewrite_without_rdb_preamble_and_restart() {
    require_own_server!();
    let mut s = Server::builder().command_aof().start();
    let ks = s.keys("aof");
    let mut con = s.conn();
    common::wait_for_aof_rewrite(&mut con);
    let fixtures = build_fixtures(&mut con, &ks);
    let before = snapshots(&mut con, &fixtures);
    con.raw(&cmd!("BGREWRITEAOF"));
    common::wait_for_aof_rewrite(&mut con);
    // The module's AOF rewrite wrote the filters as BF.LOADCHUNK commands.
    let base = aof_file(s.dir(), "b");
    let text = fs::read(&base).unwrap();
    assert!(
        base.to_string_lossy().ends_with(".base.aof"),
        "{}",
        base.display()
    );
    assert!(
        contains_ci(&text, b"BF.LOADCHUNK"),
        "no BF.LOADCHUNK in {}",
        base.display()
    );
    s.restart(Stop::NoSave);
    assert!(!s.dir().join("dump.rdb").exists());
    let mut con = s.conn();
    assert_unchanged(&mut con, &fixtures, &before, "AOF rewrite and restart");
}

/// The harness reads an AOF manifest's fields by name: Redis 7 writes `file <f> seq <n> type
/// <t>`, Redis 8 adds `startoffset` (and `endoffset` on history files) after the type.
#[test]
fn aof_manifests_of_every_server_name_their_files() {
    let dir = std::env::temp_dir().join(format!("layerbloom-manifest-{}", std::process::id()));
    let aof = dir.join("appendonlydir");
    fs::create_dir_all(&aof).unwrap();
    for (manifest, base, incr) in [
        (
            "file appendonly.aof.1.base.rdb seq 1 type b\n\
             file appendonly.aof.1.incr.aof seq 1 type i\n",
            "appendonly.aof.1.base.rdb",
            "appendonly.aof.1.incr.aof",
        ),
        (
            "file appendonly.aof.2.base.rdb seq 2 type b\n\
             file appendonly.aof.1.incr.aof seq 1 type h startoffset 0 endoffset 90\n\
             file appendonly.aof.2.incr.aof seq 2 type i startoffset 90\n\
             file appendonly.aof.3.incr.aof seq 3 type i startoffset 200\n",
            "appendonly.aof.2.base.rdb",
            "appendonly.aof.3.incr.aof",
        ),
    ] {
        fs::write(aof.join("appendonly.aof.manifest"), manifest).unwrap();
        assert_eq!(aof_file(&dir, "b"), aof.join(base), "{manifest}");
        assert_eq!(aof_file(&dir, "i"), aof.join(incr), "{manifest}");
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn filters_survive_an_aof_rewrite_with_rdb_preamble_and_restart() {
    require_own_server!();
    let mut s = Server::builder().config("appendonly", "yes").start();
    let ks = s.keys("aof-preamble");
    let mut con = s.conn();
    common::wait_for_aof_rewrite(&mut con);
    let fixtures = build_fixtures(&mut con, &ks);
    let before = snapshots(&mut con, &fixtures);
    con.raw(&cmd!("BGREWRITEAOF"));
    common::wait_for_aof_rewrite(&mut con);
    let base = aof_file(s.dir(), "b");
    assert!(fs::read(&base)
        .unwrap()
        .starts_with(common::server().rdb_magic()));
    s.restart(Stop::NoSave);
    let mut con = s.conn();
    assert_unchanged(
        &mut con,
        &fixtures,
        &before,
        "AOF (RDB preamble) and restart",
    );
}

#[test]
fn filters_survive_a_restart_from_the_aof_command_log() {
    require_own_server!();
    let mut s = Server::builder().config("appendonly", "yes").start();
    let ks = s.keys("aof-log");
    let mut con = s.conn();
    common::wait_for_aof_rewrite(&mut con);
    let fixtures = build_fixtures(&mut con, &ks);
    // LOADCHUNK and INSERT go to the log too.
    let chunks = common::scandump(&mut con, &fixtures[0].key);
    let copy = ks.k("loaded");
    common::loadchunks(&mut con, &copy, &chunks);
    let inserted = ks.k("inserted");
    con.q::<Vec<i64>>(&cmd!(
        "BF.INSERT",
        &inserted,
        "CAPACITY",
        30,
        "ERROR",
        "0.001",
        "EXPANSION",
        3,
        "ITEMS",
        "x",
        "y"
    ));
    let mut fixtures = fixtures;
    let offered = fixtures[0].offered.clone();
    fixtures.push(Fixture { key: copy, offered });
    fixtures.push(Fixture {
        key: inserted,
        offered: vec![b"x".to_vec(), b"y".to_vec()],
    });
    let before = snapshots(&mut con, &fixtures);
    s.restart(Stop::NoSave);
    let mut con = s.conn();
    assert_unchanged(&mut con, &fixtures, &before, "replaying the AOF");
}

/// The commands of an AOF command log, each as its arguments.
fn aof_commands(log: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut commands = Vec::new();
    let mut rest = log;
    let line = |rest: &mut &[u8]| -> Vec<u8> {
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a CRLF line");
        let l = rest[..end].to_vec();
        *rest = &rest[end + 2..];
        l
    };
    let number = |l: &[u8]| -> usize { std::str::from_utf8(&l[1..]).unwrap().parse().unwrap() };
    while !rest.is_empty() {
        let header = line(&mut rest);
        assert_eq!(
            header[0], b'*',
            "an AOF command starts with an array header"
        );
        let mut args = Vec::new();
        for _ in 0..number(&header) {
            let len = number(&line(&mut rest));
            args.push(rest[..len].to_vec());
            rest = &rest[len + 2..];
        }
        commands.push(args);
    }
    commands
}

#[test]
fn adds_are_logged_as_sent_only_when_every_item_changed_an_existing_filter() {
    require_own_server!();
    let mut s = Server::builder().config("appendonly", "yes").start();
    let mut con = s.conn();
    common::wait_for_aof_rewrite(&mut con);
    con.ok(&cmd!("BF.RESERVE", "f", "0.01", 100));
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "f", "a")), 1);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "f", "a")), 0);
    assert_eq!(madd(&mut con, "f", &items("all-new", 2)), vec![1, 1]);
    let partly: Vec<Vec<u8>> = vec![b"a".to_vec(), b"b".to_vec()];
    assert_eq!(madd(&mut con, "f", &partly), vec![0, 1]);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "created", "x")), 1);
    let fixtures = [
        Fixture {
            key: "f".into(),
            offered: [vec![b"a".to_vec()], items("all-new", 2), partly].concat(),
        },
        Fixture {
            key: "created".into(),
            offered: vec![b"x".to_vec()],
        },
    ];
    let before = snapshots(&mut con, &fixtures);
    assert!(before.iter().all(|b| b.offered.iter().all(|&found| found)));

    let log = fs::read(aof_file(s.dir(), "i")).unwrap();
    let bf: Vec<Vec<String>> = aof_commands(&log)
        .into_iter()
        .filter(|c| c[0].to_ascii_uppercase().starts_with(b"BF."))
        .map(|c| {
            c.iter()
                .take(4)
                .map(|a| String::from_utf8_lossy(a).to_uppercase())
                .collect()
        })
        .collect();
    let all_new = items("all-new", 2);
    let as_text = |b: &[u8]| String::from_utf8_lossy(b).to_uppercase();
    assert_eq!(bf[0][..2], ["BF.LOADCHUNK", "F"], "{bf:?}");
    // A new item of an existing filter: the command as sent.
    assert_eq!(bf[1], ["BF.ADD", "F", "A"], "{bf:?}");
    // The repeated add changed nothing and is not logged; all-new items go as sent.
    assert_eq!(
        bf[2],
        ["BF.MADD", "F", &as_text(&all_new[0]), &as_text(&all_new[1])],
        "{bf:?}"
    );
    // Partly new: only the new item.
    assert_eq!(bf[3], ["BF.MADD", "F", "B"], "{bf:?}");
    // A creating add: the new filter's header, then its item.
    assert_eq!(bf[4][..2], ["BF.LOADCHUNK", "CREATED"], "{bf:?}");
    assert_eq!(bf[5], ["BF.MADD", "CREATED", "X"], "{bf:?}");
    assert_eq!(bf.len(), 6, "{bf:?}");

    s.restart(Stop::NoSave);
    let mut con = s.conn();
    assert_unchanged(&mut con, &fixtures, &before, "replaying the command log");
}

#[test]
fn nonscaling_full_filter_stays_full_after_reload() {
    require_own_server!();
    let mut s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "k", "0.001", 5, "NONSCALING"));
    assert_eq!(madd(&mut con, "k", &items("x", 5)), vec![1; 5]);
    assert_eq!(con.err_text(&cmd!("BF.ADD", "k", "new")), FULL);
    con.ok(&cmd!("DEBUG", "RELOAD"));
    assert_eq!(con.err_text(&cmd!("BF.ADD", "k", "new")), FULL);
    assert_eq!(bf_info(&mut con, "k").expansion, None);
    s.restart(Stop::Save);
    let mut con = s.conn();
    assert_eq!(con.err_text(&cmd!("BF.ADD", "k", "new")), FULL);
    assert_eq!(bf_info(&mut con, "k").items, 5);
}

#[test]
fn copy_makes_an_independent_filter() {
    let s = Server::start();
    let ks = s.keys("copy_makes_an_independent_filter");
    let mut con = s.conn();
    let fixtures = build_fixtures(&mut con, &ks);
    for f in &fixtures {
        let before = snapshot(&mut con, f);
        let dst = Fixture {
            key: format!("{}-copy", f.key),
            offered: f.offered.clone(),
        };
        assert_eq!(con.q::<i64>(&cmd!("COPY", &f.key, &dst.key)), 1);
        assert_eq!(snapshot(&mut con, &dst), before, "copy of {}", f.key);
        // Changing the copy leaves the source alone.
        if before.info.expansion.is_some() {
            let extra = items("copy-extra", 200);
            madd(&mut con, &dst.key, &extra);
            assert!(bf_info(&mut con, &dst.key).items > before.info.items);
        }
        con.q::<i64>(&cmd!("DEL", &dst.key));
        assert_eq!(snapshot(&mut con, f), before, "source {} after copy", f.key);
    }
}

#[test]
fn dump_and_restore_round_trip() {
    let s = Server::start();
    let ks = s.keys("dump_and_restore_round_trip");
    let mut con = s.conn();
    let fixtures = build_fixtures(&mut con, &ks);
    for f in &fixtures {
        let before = snapshot(&mut con, f);
        let payload: Vec<u8> = con.q(&cmd!("DUMP", &f.key));
        let restored = Fixture {
            key: format!("{}-restored", f.key),
            offered: f.offered.clone(),
        };
        con.ok(&cmd!("RESTORE", &restored.key, 0, payload.as_slice()));
        assert_eq!(
            snapshot(&mut con, &restored),
            before,
            "RESTORE of {}",
            f.key
        );
        con.ok(&cmd!("RESTORE", &f.key, 0, payload.as_slice(), "REPLACE"));
        assert_eq!(
            snapshot(&mut con, f),
            before,
            "RESTORE REPLACE of {}",
            f.key
        );
    }
}

#[test]
fn corrupt_dump_payloads_are_refused_and_the_server_keeps_serving() {
    let s = Server::start();
    let ks = s.keys("corrupt_dump_payloads_are_refused");
    let mut con = s.conn();
    let k = ks.k("src");
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 100, "EXPANSION", 2));
    madd(&mut con, &k, &items("c", 300));
    let payload: Vec<u8> = con.q(&cmd!("DUMP", &k));
    let mut flipped = payload.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x5a;
    flipped[10] ^= 0x01;
    let truncated = payload[..payload.len() - 3].to_vec();
    let short = payload[..payload.len() / 3].to_vec();
    let dst = ks.k("dst");
    for (what, bad) in [
        ("flipped", flipped),
        ("truncated", truncated),
        ("short", short),
    ] {
        assert_eq!(
            con.err_text(&cmd!("RESTORE", &dst, 0, bad.as_slice())),
            "ERR DUMP payload version or checksum are wrong",
            "{what} payload"
        );
        assert!(!key_exists(&mut con, &dst));
        assert_eq!(con.raw(&cmd!("PING")), Value::SimpleString("PONG".into()));
    }
    con.ok(&cmd!("RESTORE", &dst, 0, payload.as_slice()));
    assert_eq!(digest(&mut con, &dst), digest(&mut con, &k));
}

/// Whether MEMORY USAGE (the allocator's usable sizes) can be below BF.INFO Size (the
/// jemalloc size-class model): under glibc's malloc (the Valkey builds') a class can be up to
/// a quarter above what glibc reserves.
fn size_at_most_memory_usage(usage: i64, size: i64) -> bool {
    if !common::server().uses_jemalloc() {
        size <= usage + usage / 4
    } else {
        usage >= size
    }
}

#[test]
fn memory_usage_is_at_least_the_reported_size() {
    let s = Server::start();
    let ks = s.keys("memory_usage_is_at_least_the_reported_size");
    let mut con = s.conn();
    let fixtures = build_fixtures(&mut con, &ks);
    for f in &fixtures {
        let size = bf_info(&mut con, &f.key).size;
        let usage: i64 = con.q(&cmd!("MEMORY", "USAGE", &f.key));
        assert!(
            size_at_most_memory_usage(usage, size),
            "{}: MEMORY USAGE {usage} < Size {size}",
            f.key
        );
    }
}

#[test]
fn memory_usage_of_a_large_filter_matches_the_growth_of_used_memory() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    // The first key and the first module writes of a process allocate a few hundred KB once
    // (measured: ~270 KB for the first BF.* write, ~50 KB for the first key): not the filter's.
    con.ok(&cmd!("SET", "warm-up-string", "x"));
    con.ok(&cmd!("BF.RESERVE", "warm-up", "0.01", 100));
    con.q::<i64>(&cmd!("BF.ADD", "warm-up-auto", "x"));
    let before = used_memory(&mut con);
    con.ok(&cmd!("BF.RESERVE", "big", "0.01", 10_000_000));
    let after = used_memory(&mut con);
    let growth = after - before;
    let usage: i64 = con.q(&cmd!("MEMORY", "USAGE", "big"));
    let size = bf_info(&mut con, "big").size;
    assert!(growth > 10_000_000, "used_memory grew by {growth} only");
    assert!(
        (usage - growth).abs() * 100 <= growth,
        "MEMORY USAGE {usage} vs used_memory growth {growth} (BF.INFO Size {size}): more than 1% apart"
    );
    assert!(size_at_most_memory_usage(usage, size), "{usage} vs {size}");
}

#[test]
fn unlink_of_a_big_filter_frees_it_in_the_background() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "huge", "0.01", 50_000_000));
    assert!(bf_info(&mut con, "huge").size > 50_000_000);
    let before = common::lazyfreed_objects(&mut con);
    assert_eq!(con.q::<i64>(&cmd!("UNLINK", "huge")), 1);
    assert!(!key_exists(&mut con, "huge"));
    common::wait_until(
        Duration::from_secs(30),
        "lazyfreed_objects to count the filter",
        || common::lazyfreed_objects(&mut con) == before + 1,
    );
    assert_eq!(con.raw(&cmd!("PING")), Value::SimpleString("PONG".into()));
}

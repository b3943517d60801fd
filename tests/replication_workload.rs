//! Replication under a large mixed workload: two replicas whose module settings all differ
//! from the primary's (and from each other's: other defaults, the other layer layout, a memory
//! limit of 1 KB) end with filters identical to the primary's, digest for digest. The workload
//! creates filters every way (with the primary's defaults changing midway), grows them, fills
//! non-scaling ones until they refuse, hits the primary's memory limit, copies filters with
//! SCANDUMP/LOADCHUNK, DUMP/RESTORE and COPY, renames and deletes them, writes in MULTI and in
//! scripts; one replica attaches in the middle of it and the other is restarted empty, so both
//! go through a full resync while writes go on. And an add that changes nothing is not
//! replicated at all.

use crate::common;
use common::setting;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{digest, error_of, info_i64, items, madd, wait_for_link, Exec, Rng, Server};
use redis::Value;

fn primary() -> Server {
    Server::builder()
        .config("repl-diskless-sync-delay", "0")
        // No replication PINGs while a test compares offsets.
        .config("repl-ping-replica-period", "60")
        .config("repl-timeout", "120")
        .start()
}

fn replica_of(primary: &Server, extra: &[(&str, &str)]) -> Server {
    let mut b = Server::builder()
        .replica_of(primary)
        .config("repl-timeout", "120");
    for (k, v) in extra {
        b = b.config(k, v);
    }
    b.start()
}

fn set_module_settings(con: &mut redis::Connection, settings: &[(&str, &str)]) {
    for (name, value) in settings {
        con.ok(&cmd!("CONFIG", "SET", setting(name), *value));
    }
}

const PRIMARY_SETTINGS: [(&str, &str); 5] = [
    ("bf-initial-size", "37"),
    ("bf-error-rate", "0.003"),
    ("bf-expansion-factor", "3"),
    ("bf-max-filter-memory", "2mb"),
    ("bf-layout", "blocked"),
];
const REPLICA_A_SETTINGS: [(&str, &str); 5] = [
    ("bf-initial-size", "1000"),
    ("bf-error-rate", "0.2"),
    ("bf-expansion-factor", "1"),
    ("bf-max-filter-memory", "1kb"),
    ("bf-layout", "classic"),
];
const REPLICA_B_SETTINGS: [(&str, &str); 5] = [
    ("bf-initial-size", "1"),
    ("bf-error-rate", "0.00001"),
    ("bf-expansion-factor", "0"),
    ("bf-max-filter-memory", "1kb"),
    ("bf-layout", "blocked"),
];

/// Error replies the workload may get: each is a refusal that changed nothing.
const EXPECTED_ERRORS: [&str; 9] = [
    "ERR source and destination objects are the same",
    "ERR item exists",
    "ERR non scaling filter is full",
    "ERR Insufficient memory to",
    "ERR not found",
    "ERR no such key",
    "ERR invalid offset",
    "ERR invalid chunk",
    "ERR problem inserting into filter",
];

/// How often each expected error was seen, and how many LOADCHUNK copies were made: the
/// workload must really have hit every case.
static SEEN: [AtomicU64; 10] = [const { AtomicU64::new(0) }; 10];
const LOADCHUNK_COPIES: usize = 9;

fn check_reply(v: &Value, what: &str) {
    let check = |e: &str| {
        let i = EXPECTED_ERRORS
            .iter()
            .position(|x| e.starts_with(x))
            .unwrap_or_else(|| panic!("{what}: unexpected error {e:?}"));
        SEEN[i].fetch_add(1, Ordering::Relaxed);
    };
    if let Some(e) = error_of(v) {
        check(&e);
    }
    if let Value::Array(xs) = v {
        for x in xs {
            if let Some(e) = error_of(x) {
                check(&e);
            }
        }
    }
}

/// One step of the mixed workload.
fn step(con: &mut redis::Connection, rng: &mut Rng, n: u64, prefix: &str) {
    let key = |rng: &mut Rng| format!("{prefix}:{}", rng.below(60));
    // Items: mostly fresh, some repeated (adds that change nothing).
    let item = |rng: &mut Rng| {
        if rng.chance(30) {
            format!("item-{}", rng.below(200)).into_bytes()
        } else {
            format!("item-{n}-{}", rng.next_u64() % 1_000_000).into_bytes()
        }
    };
    let k = key(rng);
    let c = match rng.below(100) {
        0..=9 => {
            let rates = ["0.1", "0.01", "0.001", "0.0001", "0.3"];
            let mut c = cmd!(
                "BF.RESERVE",
                &k,
                *rng.pick(&rates),
                1 + rng.below(3000)
            );
            match rng.below(4) {
                0 => {
                    c.arg("NONSCALING");
                }
                1 => {
                    c.arg("EXPANSION").arg(rng.below(5));
                }
                _ => {}
            }
            c
        }
        10..=29 => cmd!("BF.ADD", &k, item(rng)),
        30..=54 => {
            let mut c = cmd!("BF.MADD", &k);
            for _ in 0..1 + rng.below(60) {
                c.arg(item(rng));
            }
            c
        }
        55..=69 => {
            let mut c = cmd!("BF.INSERT", &k);
            if rng.chance(50) {
                c.arg("CAPACITY").arg(1 + rng.below(500));
            }
            if rng.chance(50) {
                c.arg("ERROR").arg(*rng.pick(&["0.05", "0.001", "0.4"]));
            }
            if rng.chance(30) {
                c.arg("EXPANSION").arg(rng.below(4));
            }
            if rng.chance(20) {
                c.arg("NONSCALING");
            }
            if rng.chance(15) {
                c.arg("NOCREATE");
            }
            c.arg("ITEMS");
            for _ in 0..1 + rng.below(40) {
                c.arg(item(rng));
            }
            c
        }
        70..=74 => {
            // A copy through SCANDUMP / LOADCHUNK, from the primary's own chunks.
            let to = key(rng);
            if common::key_exists(con, &k) && !common::key_exists(con, &to) {
                let chunks = common::scandump(con, &k);
                common::loadchunks(con, &to, &chunks);
                SEEN[LOADCHUNK_COPIES].fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        75..=77 => cmd!("COPY", &k, key(rng), "REPLACE"),
        78..=79 => {
            let payload: Option<Vec<u8>> = con.q(&cmd!("DUMP", &k));
            match payload {
                Some(p) => cmd!("RESTORE", key(rng), 0, p, "REPLACE"),
                None => return,
            }
        }
        80..=81 => cmd!("RENAME", &k, key(rng)),
        82..=84 => cmd!("UNLINK", &k),
        85..=87 => {
            // A transaction: its writes replicate as one.
            con.ok(&cmd!("MULTI"));
            for _ in 0..3 {
                let v = con.raw(&cmd!("BF.ADD", key(rng), item(rng)));
                assert!(matches!(&v, Value::SimpleString(s) if s == "QUEUED"), "{v:?}");
            }
            cmd!("EXEC")
        }
        88..=89 => cmd!(
            "EVAL",
            "redis.call('BF.ADD', KEYS[1], ARGV[1]); return redis.call('BF.MADD', KEYS[1], ARGV[2], ARGV[1])",
            1,
            &k,
            item(rng),
            item(rng)
        ),
        90..=91 => {
            // The primary's defaults change midway: auto-created filters follow them.
            let layout = *rng.pick(&["blocked", "classic"]);
            con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), layout));
            cmd!(
                "CONFIG",
                "SET",
                &setting("bf-initial-size"),
                1 + rng.below(200)
            )
        }
        92..=93 => {
            // Over the primary's 2 MB limit: refused, nothing replicated.
            cmd!("BF.RESERVE", &k, "0.0001", 2_000_000)
        }
        _ => {
            // Grow one filter a lot: several layers, and refusals at the memory limit.
            let mut c = cmd!("BF.MADD", format!("{prefix}:big"));
            for j in 0..2000 {
                c.arg(format!("big-{n}-{j}"));
            }
            c
        }
    };
    let v = con.raw(&c);
    check_reply(&v, &common::show(&c));
}

fn all_keys(con: &mut redis::Connection) -> BTreeSet<String> {
    let keys: Vec<String> = con.q(&cmd!("KEYS", "*"));
    keys.into_iter().collect()
}

/// The replica holds exactly the primary's keys, each with the same digest and BF.INFO.
fn assert_same_dataset(p: &mut redis::Connection, r: &mut redis::Connection, which: &str) {
    let keys = all_keys(p);
    assert_eq!(all_keys(r), keys, "{which}: the key sets differ");
    for k in &keys {
        assert_eq!(
            digest(r, k),
            digest(p, k),
            "{which}: DEBUG DIGEST-VALUE {k}"
        );
        // BF.INFO Size of a classic filter follows the server's own bf-layout (RedisBloom's
        // formula in classic mode): compare the rest, and the allocator's view of the size.
        let info = |c: &mut redis::Connection| {
            let i = common::bf_info(c, k);
            (i.capacity, i.filters, i.items, i.expansion)
        };
        assert_eq!(info(r), info(p), "{which}: BF.INFO {k}");
        // glibc's malloc (the Valkey builds') gives equal requests unequal usable sizes: the
        // allocator's view is compared where it is deterministic (jemalloc).
        if common::server().uses_jemalloc() {
            assert_eq!(
                r.q::<i64>(&cmd!("MEMORY", "USAGE", k)),
                p.q::<i64>(&cmd!("MEMORY", "USAGE", k)),
                "{which}: MEMORY USAGE {k}"
            );
        }
    }
    assert_eq!(
        r.q::<String>(&cmd!("DEBUG", "DIGEST")),
        p.q::<String>(&cmd!("DEBUG", "DIGEST")),
        "{which}: DEBUG DIGEST"
    );
}

fn wait_replicas(con: &mut redis::Connection, n: i64) {
    assert_eq!(
        con.q::<i64>(&cmd!("WAIT", n, 30_000)),
        n,
        "WAIT {n} replicas"
    );
}

#[test]
fn replicas_with_other_settings_end_identical_after_a_large_mixed_workload_and_full_resyncs() {
    require_own_server!();
    let primary = primary();
    let mut p = primary.conn();
    set_module_settings(&mut p, &PRIMARY_SETTINGS);
    let mut a = replica_of(&primary, &[]);
    set_module_settings(&mut a.conn(), &REPLICA_A_SETTINGS);
    wait_for_link(&a);

    // Phase 1: replica A follows the stream.
    let mut rng = Rng(0x5eed_0001);
    for n in 0..10_000 {
        step(&mut p, &mut rng, n, "w");
    }
    wait_replicas(&mut p, 1);
    assert_same_dataset(&mut p, &mut a.conn(), "replica A after phase 1");
    let filters = all_keys(&mut p).len();
    assert!(filters > 30, "the workload left {filters} keys");

    // Phase 2: while a writer goes on, replica B attaches (a full sync with diskless load)
    // and replica A is killed and restarted empty (a second full sync).
    let full_syncs = info_i64(&mut p, "stats", "sync_full");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let mut con = primary.conn();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rng = Rng(0x5eed_0002);
            let mut n = 10_000;
            // Bounded: at most 20 000 steps.
            while !stop.load(Ordering::Relaxed) && n < 30_000 {
                step(&mut con, &mut rng, n, "w");
                n += 1;
            }
            n - 10_000
        })
    };
    let b = replica_of(&primary, &[("repl-diskless-load", "swapdb")]);
    set_module_settings(&mut b.conn(), &REPLICA_B_SETTINGS);
    wait_for_link(&b);
    // Empty: without the RDB file its last sync left behind, whose replication id lets a
    // restarted replica continue with a partial resync (Valkey does).
    a.kill();
    for entry in std::fs::read_dir(a.dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rdb") {
            std::fs::remove_file(path).unwrap();
        }
    }
    a.start_again();
    set_module_settings(&mut a.conn(), &REPLICA_A_SETTINGS);
    wait_for_link(&a);
    stop.store(true, Ordering::Relaxed);
    let steps = writer.join().expect("writer");
    let after = info_i64(&mut p, "stats", "sync_full");
    assert!(
        after >= full_syncs + 2,
        "two full resyncs: sync_full went from {full_syncs} to {after} (partial: {})",
        info_i64(&mut p, "stats", "sync_partial_ok")
    );

    // Phase 3: more of the stream with both replicas attached.
    for n in 30_000..33_000 {
        step(&mut p, &mut rng, n, "w");
    }
    wait_replicas(&mut p, 2);
    assert_same_dataset(&mut p, &mut a.conn(), "replica A (restarted empty)");
    assert_same_dataset(&mut p, &mut b.conn(), "replica B (attached midway)");
    // The replicas' own settings were never used.
    let v: Vec<String> = a
        .conn()
        .q(&cmd!("CONFIG", "GET", &setting("bf-max-filter-memory")));
    assert_eq!(v[1], "1024");
    // The workload hit every case it is meant to.
    let seen: Vec<u64> = SEEN.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    for (i, what) in [
        (1, "ERR item exists"),
        (2, "ERR non scaling filter is full"),
        (LOADCHUNK_COPIES, "LOADCHUNK copies"),
    ] {
        assert!(seen[i] > 0, "the workload never produced {what}: {seen:?}");
    }
    assert!(
        seen[3] + seen[8] > 0,
        "the workload never passed the memory limit (create or grow): {seen:?}"
    );
    assert!(
        common::bf_info(&mut p, "w:big").filters >= 3,
        "w:big never grew"
    );
    eprintln!(
        "{} steps, {steps} during the full resyncs, {} keys compared; seen {:?}",
        13_000 + steps,
        all_keys(&mut p).len(),
        EXPECTED_ERRORS.iter().zip(&seen).collect::<Vec<_>>()
    );
    eprintln!("LOADCHUNK copies: {}", seen[LOADCHUNK_COPIES]);
}

/// Bytes the primary has sent down the replication stream so far.
fn repl_offset(con: &mut redis::Connection) -> i64 {
    info_i64(con, "replication", "master_repl_offset")
}

#[test]
fn adds_that_change_nothing_are_not_replicated() {
    require_own_server!();
    let primary = primary();
    let mut p = primary.conn();
    let replica = replica_of(&primary, &[]);
    wait_for_link(&replica);
    set_module_settings(&mut p, &[("bf-max-filter-memory", "64kb")]);
    let list = items("known", 300);
    p.ok(&cmd!("BF.RESERVE", "f", "0.01", 1000));
    madd(&mut p, "f", &list);
    p.ok(&cmd!("BF.RESERVE", "full", "0.01", 5, "NONSCALING"));
    madd(&mut p, "full", &items("full", 5));
    p.ok(&cmd!(
        "BF.RESERVE",
        "limited",
        "0.01",
        100,
        "EXPANSION",
        32768
    ));
    madd(&mut p, "limited", &items("limited", 100));
    wait_replicas(&mut p, 1);
    let before = repl_offset(&mut p);

    let mut madd_known = cmd!("BF.MADD", "f");
    let mut insert_known = cmd!("BF.INSERT", "f", "CAPACITY", 7, "NONSCALING", "ITEMS");
    for i in &list {
        madd_known.arg(i.as_slice());
        insert_known.arg(i.as_slice());
    }
    let fresh_over_limit = (0..)
        .map(|n| format!("fresh-{n}"))
        .find(|i| p.q::<i64>(&cmd!("BF.EXISTS", "limited", i)) == 0)
        .unwrap();
    let unchanged: Vec<redis::Cmd> = vec![
        cmd!("BF.ADD", "f", list[0].as_slice()),
        madd_known,
        insert_known,
        // Refused: a full non-scaling filter, growth past the memory limit, an existing key.
        cmd!("BF.ADD", "full", "one-more"),
        cmd!("BF.INSERT", "full", "ITEMS", "x", "y"),
        cmd!("BF.ADD", "limited", fresh_over_limit.as_str()),
        cmd!("BF.RESERVE", "f", "0.01", 10),
        cmd!("BF.INSERT", "missing", "NOCREATE", "ITEMS", "a"),
        cmd!("BF.RESERVE", "big", "0.0001", 10_000_000),
        cmd!("BF.LOADCHUNK", "f", 999_999, "xyz"),
        cmd!("BF.RESERVE", "bad", "2", 10),
        cmd!("BF.INSERT", "bad", "CAPACITY", 0, "ITEMS", "a"),
        // Reads.
        cmd!("BF.EXISTS", "f", "x"),
        cmd!("BF.MEXISTS", "f", "x", "y"),
        cmd!("BF.INFO", "f"),
        cmd!("BF.CARD", "f"),
        cmd!("BF.SCANDUMP", "f", 0),
    ];
    for c in &unchanged {
        let _ = p.raw(c);
    }
    for k in ["missing", "big", "bad"] {
        assert!(!common::key_exists(&mut p, k), "{k} was created");
    }
    assert_eq!(
        repl_offset(&mut p),
        before,
        "writes that changed nothing were sent to the replicas"
    );

    // A MADD of one new item among 300 known ones sends the one item only: far fewer bytes
    // than the command itself.
    let mut mixed = cmd!("BF.MADD", "f", "the-only-new-item");
    for i in &list {
        mixed.arg(i.as_slice());
    }
    let r: Vec<i64> = p.q(&mixed);
    assert_eq!(r.iter().sum::<i64>(), 1);
    let sent = repl_offset(&mut p) - before;
    assert!(
        sent > 0 && sent < 200,
        "{sent} bytes replicated for one new item (the command was {} bytes)",
        list.iter().map(|i| i.len() + 16).sum::<usize>()
    );
    wait_replicas(&mut p, 1);
    let mut r = replica.conn();
    assert_eq!(digest(&mut r, "f"), digest(&mut p, "f"));
    assert_eq!(r.q::<i64>(&cmd!("BF.EXISTS", "f", "the-only-new-item")), 1);
}

//! Crash recovery. With `appendonly yes` and `appendfsync always`, a server killed with SIGKILL
//! in the middle of a stream of writes restarts with every write it acknowledged (also when
//! killed during an AOF rewrite); a restart from an RDB preamble plus an AOF tail gives the
//! same filters, digest for digest; and whatever the module accepted, it can write to the AOF
//! in a form it reads back.

use crate::common;
use common::setting;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::{
    bf_info, digest, error_of, items, loadchunks, madd, mexists, scandump, Exec, RbChain, Rng,
    Server, Stop, REDISBLOOM_ENCVER,
};
use redis::{ConnectionLike, Value};

fn durable_server(preamble: bool) -> Server {
    Server::builder()
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .config("aof-use-rdb-preamble", if preamble { "yes" } else { "no" })
        .start()
}

/// What a writer saw acknowledged: per key, every item whose add was answered (1 or 0: either
/// way the filter says it holds it), and how many were answered 1.
#[derive(Debug, Default)]
struct Acked {
    present: HashMap<String, Vec<Vec<u8>>>,
    new: HashMap<String, u64>,
    commands: u64,
}

impl Acked {
    fn record(&mut self, key: &str, item: &[u8], reply: &Value) -> bool {
        match reply {
            Value::Int(n) => {
                self.present
                    .entry(key.to_string())
                    .or_default()
                    .push(item.to_vec());
                *self.new.entry(key.to_string()).or_default() += *n as u64;
                true
            }
            Value::Boolean(b) => self.record(key, item, &Value::Int(i64::from(*b))),
            _ => false,
        }
    }
}

/// Keys the writer streams to: a scaling filter that grows many layers, one auto-created with
/// the defaults, a non-scaling one that fills up and refuses, a classic (RedisBloom) one.
const STREAM_KEYS: [&str; 4] = ["scaling", "auto", "nonscaling", "classic"];

fn prepare_stream_keys(con: &mut redis::Connection) {
    con.ok(&cmd!("BF.RESERVE", "scaling", "0.01", 50, "EXPANSION", 2));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "classic"));
    con.ok(&cmd!("BF.RESERVE", "classic", "0.001", 100, "EXPANSION", 3));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "blocked"));
}

/// Streams adds until the connection fails (the server was killed) or `stop` is set; bounded
/// to 200 000 commands.
fn spawn_writer(s: &Server, progress: Arc<AtomicU64>, stop: Arc<AtomicBool>) -> JoinHandle<Acked> {
    let mut con = s.conn();
    std::thread::spawn(move || {
        let mut acked = Acked::default();
        let mut rng = Rng(0x1234);
        for n in 0..200_000u64 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let key = *rng.pick(&STREAM_KEYS);
            let batch: Vec<Vec<u8>> = (0..1 + rng.below(10))
                .map(|j| format!("{key}-{n}-{j}").into_bytes())
                .collect();
            let c = match (key, batch.len()) {
                (_, 1) => cmd!("BF.ADD", key, batch[0].as_slice()),
                ("nonscaling", _) => {
                    let mut c = cmd!("BF.INSERT", key, "CAPACITY", 3000, "NONSCALING", "ITEMS");
                    for i in &batch {
                        c.arg(i.as_slice());
                    }
                    c
                }
                _ => {
                    let mut c = cmd!("BF.MADD", key);
                    for i in &batch {
                        c.arg(i.as_slice());
                    }
                    c
                }
            };
            let Ok(reply) = con.req_command(&c) else {
                break;
            };
            match &reply {
                Value::Array(replies) => {
                    for (item, r) in batch.iter().zip(replies) {
                        if !acked.record(key, item, r) {
                            let e = error_of(r).unwrap_or_default();
                            assert_eq!(e, "ERR non scaling filter is full", "{key}");
                        }
                    }
                }
                r => {
                    if !acked.record(key, &batch[0], r) {
                        let e = error_of(r).unwrap_or_default();
                        assert_eq!(e, "ERR non scaling filter is full", "{key}");
                    }
                }
            }
            acked.commands += 1;
            progress.store(acked.commands, Ordering::Relaxed);
        }
        acked
    })
}

fn wait_progress(progress: &AtomicU64, at_least: u64) {
    common::wait_until(
        Duration::from_secs(120),
        "the writer to get acknowledgements",
        || progress.load(Ordering::Relaxed) >= at_least,
    );
}

/// Every acknowledged item is present after the restart, and the counts add up: at least the
/// acknowledged new items, at most those plus one unacknowledged command's.
fn assert_acked_present(con: &mut redis::Connection, acked: &Acked) {
    assert!(acked.commands > 0);
    for key in STREAM_KEYS {
        let Some(list) = acked.present.get(key) else {
            continue;
        };
        let found = mexists(con, key, list);
        let missing = found.iter().filter(|&&f| !f).count();
        assert_eq!(
            missing,
            0,
            "{key}: {missing} of {} acknowledged items lost in the crash",
            list.len()
        );
        let new = acked.new.get(key).copied().unwrap_or(0) as i64;
        let card: i64 = con.q(&cmd!("BF.CARD", key));
        assert!(
            (new..=new + 10).contains(&card),
            "{key}: BF.CARD {card} after the crash, {new} acknowledged new items"
        );
    }
}

#[test]
fn every_acknowledged_add_survives_sigkill_with_appendfsync_always() {
    require_own_server!();
    let mut s = durable_server(true);
    prepare_stream_keys(&mut s.conn());
    let progress = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(&s, progress.clone(), stop.clone());
    wait_progress(&progress, 4000);
    s.kill();
    let acked = writer.join().expect("writer");
    s.start_again();
    let mut con = s.conn();
    assert_acked_present(&mut con, &acked);
    assert!(
        bf_info(&mut con, "scaling").filters >= 4,
        "it grew while streaming"
    );
    let e = con.err_text(&cmd!("BF.ADD", "nonscaling", "one-more-after-restart"));
    assert_eq!(
        e, "ERR non scaling filter is full",
        "still full after the restart"
    );
    eprintln!("{} commands acknowledged before SIGKILL", acked.commands);
}

#[test]
fn every_acknowledged_add_survives_sigkill_during_an_aof_rewrite() {
    require_own_server!();
    // Without the RDB preamble the rewrite writes each filter as BF.LOADCHUNK commands.
    let mut s = durable_server(false);
    prepare_stream_keys(&mut s.conn());
    let progress = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(&s, progress.clone(), stop.clone());
    wait_progress(&progress, 2000);
    let mut con = s.conn();
    // One rewrite completes while the stream goes on; the kill lands during the next, which
    // is slowed down (3 s a key) so that it is still running.
    rewrite_aof(&mut con);
    con.ok(&cmd!("CONFIG", "SET", "rdb-key-save-delay", 3_000_000));
    let v = con.raw(&cmd!("BGREWRITEAOF"));
    assert!(error_of(&v).is_none(), "{v:?}");
    let rewriting = |con: &mut redis::Connection| {
        common::info_i64(con, "persistence", "aof_rewrite_in_progress") == 1
    };
    common::wait_until(Duration::from_secs(30), "the second rewrite", || {
        rewriting(&mut con)
    });
    wait_progress(&progress, progress.load(Ordering::Relaxed) + 200);
    assert!(rewriting(&mut con), "the rewrite ended before the kill");
    s.kill();
    let acked = writer.join().expect("writer");
    s.start_again();
    let mut con = s.conn();
    assert_acked_present(&mut con, &acked);
    eprintln!(
        "{} commands acknowledged before SIGKILL during a rewrite",
        acked.commands
    );
}

/// Runs BGREWRITEAOF and waits until it has completed successfully.
fn rewrite_aof(con: &mut redis::Connection) {
    let count = |con: &mut redis::Connection| common::info_i64(con, "persistence", "aof_rewrites");
    let before = count(con);
    let v = con.raw(&cmd!("BGREWRITEAOF"));
    assert!(error_of(&v).is_none(), "BGREWRITEAOF: {v:?}");
    common::wait_until(Duration::from_secs(60), "the AOF rewrite", || {
        let p = con.info_map("persistence");
        p.get("aof_rewrite_in_progress").map(String::as_str) == Some("0")
            && p.get("aof_rewrite_scheduled").map(String::as_str) == Some("0")
            && count(con) > before
    });
    let status = con.info_map("persistence")["aof_last_bgrewrite_status"].clone();
    assert_eq!(status, "ok", "the AOF rewrite failed");
}

fn aof_dir(dir: &Path) -> std::path::PathBuf {
    dir.join("appendonlydir")
}

/// Every key's digest and the whole dataset's.
fn digests(con: &mut redis::Connection, keys: &[String]) -> (Vec<String>, String) {
    (
        keys.iter().map(|k| digest(con, k)).collect(),
        con.q(&cmd!("DEBUG", "DIGEST")),
    )
}

#[test]
fn restart_from_an_rdb_preamble_and_an_aof_tail_gives_identical_digests() {
    require_own_server!();
    let mut s = durable_server(true);
    let mut con = s.conn();
    let mut keys = Vec::new();
    // Written before the rewrite: they end up in the RDB preamble.
    con.ok(&cmd!(
        "BF.RESERVE",
        "base:scaling",
        "0.01",
        100,
        "EXPANSION",
        3
    ));
    madd(&mut con, "base:scaling", &items("b", 2000));
    con.ok(&cmd!("BF.RESERVE", "base:ns", "0.001", 50, "NONSCALING"));
    madd(&mut con, "base:ns", &items("n", 50));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "classic"));
    madd(&mut con, "base:classic", &items("c", 500));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "blocked"));
    keys.extend(["base:scaling", "base:ns", "base:classic"].map(String::from));
    rewrite_aof(&mut con);
    let base = fs::read_dir(aof_dir(s.dir()))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".base.rdb"))
        .expect("an RDB base file");
    assert!(fs::read(base.path())
        .unwrap()
        .starts_with(common::server().rdb_magic()));

    // Written after it: the AOF tail, as commands, some changing the preamble's filters.
    madd(&mut con, "base:scaling", &items("tail", 3000));
    let v = con.raw(&cmd!("BF.ADD", "base:ns", "refused"));
    assert!(error_of(&v).is_some());
    madd(&mut con, "base:classic", &items("tail-c", 700));
    con.ok(&cmd!(
        "BF.RESERVE",
        "tail:reserved",
        "0.0001",
        1000,
        "EXPANSION",
        5
    ));
    madd(&mut con, "tail:reserved", &items("r", 1500));
    con.q::<Vec<i64>>(&cmd!(
        "BF.INSERT",
        "tail:inserted",
        "CAPACITY",
        10,
        "ERROR",
        "0.05",
        "ITEMS",
        "a",
        "b",
        "c"
    ));
    let chunks = scandump(&mut con, "base:scaling");
    loadchunks(&mut con, "tail:loaded", &chunks);
    let chunks = scandump(&mut con, "base:classic");
    loadchunks(&mut con, "tail:loaded-classic", &chunks);
    assert_eq!(con.q::<i64>(&cmd!("COPY", "base:ns", "tail:copied")), 1);
    keys.extend(
        [
            "tail:reserved",
            "tail:inserted",
            "tail:loaded",
            "tail:loaded-classic",
            "tail:copied",
        ]
        .map(String::from),
    );
    let before = digests(&mut con, &keys);
    drop(con);

    s.restart(Stop::Kill);
    assert_eq!(digests(&mut s.conn(), &keys), before, "after SIGKILL");
    s.restart(Stop::NoSave);
    assert_eq!(
        digests(&mut s.conn(), &keys),
        before,
        "after SHUTDOWN NOSAVE"
    );
}

#[test]
fn sigkill_during_a_stream_of_loadchunks_keeps_every_acknowledged_chunk() {
    require_own_server!();
    let mut s = durable_server(true);
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "source", "0.01", 100, "EXPANSION", 2));
    madd(&mut con, "source", &items("s", 20_000));
    let chunks = scandump(&mut con, "source");
    assert!(chunks.len() >= 8, "{} chunks", chunks.len());
    let source = digest(&mut con, "source");
    let progress = Arc::new(AtomicU64::new(0));
    let writer = {
        let mut con = s.conn();
        let chunks = chunks.clone();
        let progress = progress.clone();
        std::thread::spawn(move || {
            let mut acked: Vec<(String, i64, Vec<u8>)> = Vec::new();
            'copies: for copy in 0..10_000 {
                let key = format!("copy:{copy}");
                for (it, data) in &chunks {
                    match con.req_command(&cmd!("BF.LOADCHUNK", &key, *it, data.as_slice())) {
                        Ok(v) => {
                            assert!(error_of(&v).is_none(), "{key} {it}: {v:?}");
                            acked.push((key.clone(), *it, data.clone()));
                            progress.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => break 'copies,
                    }
                }
            }
            acked
        })
    };
    wait_progress(&progress, 1000);
    s.kill();
    let acked = writer.join().expect("writer");
    s.start_again();
    let mut con = s.conn();
    let mut complete = 0;
    for (key, it, data) in &acked {
        if *it == 1 {
            // The header: the filter exists with the same layer layout.
            let (next, header): (i64, Vec<u8>) = con.q(&cmd!("BF.SCANDUMP", key, 0));
            assert_eq!((next, &header), (1, data), "{key}: header after the crash");
        } else {
            let start = it - data.len() as i64;
            let (next, now): (i64, Vec<u8>) = con.q(&cmd!("BF.SCANDUMP", key, start));
            assert_eq!(next, *it, "{key}: chunk at {start}");
            assert_eq!(&now, data, "{key}: acknowledged chunk {it} lost");
            if *it == chunks.last().unwrap().0 {
                assert_eq!(digest(&mut con, key), source, "{key}: a complete copy");
                complete += 1;
            }
        }
    }
    assert!(complete > 0, "no copy was completed before the kill");
    eprintln!(
        "{} LOADCHUNKs acknowledged ({complete} complete copies)",
        acked.len()
    );
}

/// RedisBloom's RDB loader (and so layerbloom's) takes a value whose item total differs from
/// the sum of its layers' counts; RedisBloom's LOADCHUNK refuses such a header. An AOF rewrite
/// without the RDB preamble writes every filter as BF.LOADCHUNK commands, so such a filter must
/// still come back from the AOF.
#[test]
fn a_restored_redisbloom_filter_survives_an_aof_rewrite_without_rdb_preamble() {
    require_own_server!();
    let mut s = durable_server(false);
    let mut con = s.conn();
    let mut lax = RbChain::sample();
    lax.items = 5; // the layers hold 0 items
    let mut unknown_options = RbChain::sample();
    unknown_options.options |= 0x100;
    let mut keys = Vec::new();
    for (key, chain) in [("lax-items", &lax), ("unknown-options", &unknown_options)] {
        let v = con.raw(&cmd!("RESTORE", key, 0, chain.payload(REDISBLOOM_ENCVER)));
        if error_of(&v).is_none() {
            keys.push(key.to_string());
        }
    }
    assert!(!keys.is_empty(), "RedisBloom's lax values were refused");
    madd(&mut con, &keys[0], &items("x", 10));
    let before = digests(&mut con, &keys);
    rewrite_aof(&mut con);
    drop(con);
    s.restart(Stop::Kill);
    let mut con = s.conn();
    for k in &keys {
        assert!(
            common::key_exists(&mut con, k),
            "{k}: the filter was lost by the AOF rewrite + restart"
        );
    }
    assert_eq!(digests(&mut con, &keys), before);
}

#[test]
fn items_acknowledged_before_a_clean_shutdown_survive_without_an_aof() {
    require_own_server!();
    // The RDB path alone: SHUTDOWN SAVE, then every item present.
    let mut s = Server::builder().save("3600 1").start();
    let mut con = s.conn();
    let list = items("rdb", 5000);
    madd(&mut con, "f", &list);
    let d = digest(&mut con, "f");
    drop(con);
    s.restart(Stop::Save);
    let mut con = s.conn();
    assert_eq!(digest(&mut con, "f"), d);
    assert!(mexists(&mut con, "f", &list).iter().all(|&x| x));
}

/// A classic filter's error rate is not stored apart from its layers' (RedisBloom's format has
/// none): whatever the filter reports must be what a reload or a copy of it reports too, for
/// every rate a client may ask for, down to the smallest doubles.
#[test]
fn a_classic_filter_reports_the_same_error_rate_after_a_reload_or_a_copy() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "classic"));
    let rates = ["0.01", "1e-9", "1.5e-308", "1e-310", "3e-310"];
    for (n, rate) in rates.iter().enumerate() {
        con.ok(&cmd!("BF.RESERVE", format!("k{n}"), *rate, 100));
    }
    let error_rate = |con: &mut redis::Connection, key: &str| -> String {
        let v = con.raw(&cmd!("BF.INFO", key, "ERROR"));
        format!("{v:?}")
    };
    let before: Vec<String> = (0..rates.len())
        .map(|n| error_rate(&mut con, &format!("k{n}")))
        .collect();
    for n in 0..rates.len() {
        let chunks = scandump(&mut con, &format!("k{n}"));
        loadchunks(&mut con, &format!("copy{n}"), &chunks);
        assert_eq!(
            error_rate(&mut con, &format!("copy{n}")),
            before[n],
            "rate {}: SCANDUMP + LOADCHUNK copy",
            rates[n]
        );
    }
    con.ok(&cmd!("DEBUG", "RELOAD"));
    for (n, rate) in rates.iter().enumerate() {
        assert_eq!(
            error_rate(&mut con, &format!("k{n}")),
            before[n],
            "rate {rate}: after DEBUG RELOAD"
        );
    }
}

//! What one client with write access must not be able to do to the server: erase items
//! through BF.LOADCHUNK, allocate past `maxmemory` or the per-filter limit (by command or by a
//! small RESTORE payload), slip past the limit through the allocator's rounding, or fill the
//! disk through the log.

use crate::common;

use std::time::Duration;

use common::{
    bf_info, digest, error_of, items, key_exists, madd, scandump, used_memory, Exec, Server,
};
use redis::Value;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
const BAD_DATA_FORMAT: &str = "ERR Bad data format";

fn bf_stat(con: &mut redis::Connection, field: &str) -> i64 {
    con.info_map("bf")[&format!("bf_{field}")].parse().unwrap()
}

// ------------------------------------------------------------------------- LOADCHUNK

#[test]
fn an_add_made_while_a_copy_is_loaded_survives_the_remaining_chunks() {
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "src", "0.01", 1000));
    madd(&mut con, "src", &items("a", 500));
    let chunks = scandump(&mut con, "src");
    con.ok(&cmd!(
        "BF.LOADCHUNK",
        "dst",
        chunks[0].0,
        chunks[0].1.as_slice()
    ));
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "dst", "meanwhile")), 1);
    for (it, data) in &chunks[1..] {
        con.ok(&cmd!("BF.LOADCHUNK", "dst", *it, data.as_slice()));
    }
    assert_eq!(con.q::<i64>(&cmd!("BF.EXISTS", "dst", "meanwhile")), 1);
    assert_eq!(con.q::<i64>(&cmd!("BF.EXISTS", "dst", "a-7")), 1);
}

#[test]
fn a_chunk_of_zeros_erases_nothing_from_a_live_filter() {
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "f", "0.01", 1000));
    let all = items("z", 700);
    madd(&mut con, "f", &all);
    let before = digest(&mut con, "f");
    for (it, data) in &scandump(&mut con, "f")[1..] {
        con.ok(&cmd!(
            "BF.LOADCHUNK",
            "f",
            *it,
            vec![0u8; data.len()].as_slice()
        ));
    }
    assert_eq!(digest(&mut con, "f"), before);
    let found: Vec<i64> = con.q(&cmd!("BF.MEXISTS", "f").arg(&all).to_owned());
    assert!(found.iter().all(|&x| x == 1));
}

#[test]
fn a_copy_through_scandump_and_loadchunk_is_still_identical() {
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "src", "0.001", 100, "EXPANSION", 2));
    madd(&mut con, "src", &items("c", 2000));
    for (it, data) in scandump(&mut con, "src") {
        con.ok(&cmd!("BF.LOADCHUNK", "dst", it, data.as_slice()));
    }
    assert_eq!(digest(&mut con, "dst"), digest(&mut con, "src"));
}

// ------------------------------------------------------------------------- maxmemory

fn at_maxmemory(headroom: i64) -> (Server, redis::Connection) {
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", "maxmemory-policy", "noeviction"));
    let limit = used_memory(&mut con) + headroom;
    con.ok(&cmd!("CONFIG", "SET", "maxmemory", limit));
    (s, con)
}

#[test]
fn a_reserve_that_would_pass_maxmemory_is_refused_with_redis_oom_error() {
    let (_s, mut con) = at_maxmemory(16 << 20);
    let before = used_memory(&mut con);
    // About 60 MB of bits, under the 4 GiB per-filter default.
    let e = con.err_text(&cmd!("BF.RESERVE", "k", "0.01", 50_000_000));
    assert_eq!(e, OOM);
    let e = con.err_text(&cmd!(
        "BF.INSERT",
        "k2",
        "CAPACITY",
        50_000_000,
        "ITEMS",
        "x"
    ));
    assert_eq!(e, OOM);
    assert!(!key_exists(&mut con, "k") && !key_exists(&mut con, "k2"));
    assert!(
        used_memory(&mut con) < before + (4 << 20),
        "memory was allocated"
    );
    // What fits is still created.
    con.ok(&cmd!("BF.RESERVE", "small", "0.01", 1000));
}

#[test]
fn growth_that_would_pass_maxmemory_is_refused_and_changes_nothing() {
    let (_s, mut con) = at_maxmemory(16 << 20);
    // The second layer holds 1000 × 32768 items: about 40 MB.
    con.ok(&cmd!("BF.RESERVE", "g", "0.01", 1000, "EXPANSION", 32768));
    let mut i = 0;
    loop {
        let v = con.raw(&cmd!("BF.ADD", "g", format!("g{i}")));
        if let Some(e) = error_of(&v) {
            assert_eq!(e, OOM);
            break;
        }
        i += 1;
        assert!(i < 5000, "growth never refused");
    }
    assert_eq!(bf_info(&mut con, "g").items, 1000);
    let d = digest(&mut con, "g");
    let before = used_memory(&mut con);
    assert_eq!(con.err_text(&cmd!("BF.ADD", "g", "one-more")), OOM);
    let v = con.raw(&cmd!("BF.INSERT", "g", "ITEMS", "x", "y"));
    let Value::Array(r) = &v else { panic!("{v:?}") };
    assert_eq!(error_of(&r[0]).as_deref(), Some(OOM), "{v:?}");
    assert_eq!(digest(&mut con, "g"), d);
    assert_eq!(bf_info(&mut con, "g").filters, 1);
    assert!(
        used_memory(&mut con) < before + (4 << 20),
        "memory was allocated"
    );
}

// ------------------------------------------------------------------------- RESTORE

fn big_empty_dump() -> Vec<u8> {
    let s = Server::start();
    let mut con = s.conn();
    // About 24 MB of zero bits: the DUMP payload compresses them to a few hundred KB.
    con.ok(&cmd!("BF.RESERVE", "big", "0.01", 20_000_000));
    let payload: Vec<u8> = con.q(&cmd!("DUMP", "big"));
    assert!(payload.len() < 2 << 20, "{}", payload.len());
    payload
}

#[test]
fn a_restore_of_a_large_empty_filter_is_refused_over_the_filter_limit() {
    let payload = big_empty_dump();
    let s = Server::builder()
        .module_args(&["bf-max-filter-memory", "4mb"])
        .start();
    let mut con = s.conn();
    let before = used_memory(&mut con);
    let e = con.err_text(&cmd!("RESTORE", "big", 0, payload.as_slice()));
    assert_eq!(e, BAD_DATA_FORMAT);
    assert!(!key_exists(&mut con, "big"));
    assert!(
        used_memory(&mut con) < before + (4 << 20),
        "memory was allocated"
    );
    assert!(s.log().contains("over bf-max-filter-memory"), "{}", s.log());
}

#[test]
fn a_restore_of_a_large_empty_filter_is_refused_over_maxmemory() {
    let payload = big_empty_dump();
    let (s, mut con) = at_maxmemory(8 << 20);
    let before = used_memory(&mut con);
    let e = con.err_text(&cmd!("RESTORE", "big", 0, payload.as_slice()));
    assert_eq!(e, BAD_DATA_FORMAT);
    assert!(!key_exists(&mut con, "big"));
    assert!(
        used_memory(&mut con) < before + (4 << 20),
        "memory was allocated"
    );
    assert!(s.log().contains("what maxmemory leaves"), "{}", s.log());
}

// ------------------------------------------------------------------------- counting

#[test]
fn a_filter_of_many_one_block_layers_ends_within_the_filter_limit() {
    let limit: i64 = 2 << 20;
    let s = Server::builder()
        .module_args(&["bf-max-filter-memory", "2mb"])
        .start();
    let mut con = s.conn();
    let before = used_memory(&mut con);
    con.ok(&cmd!("BF.RESERVE", "f", "0.01", 1, "EXPANSION", 1));
    let mut n = 0;
    'outer: for batch in 0.. {
        let all = items(&format!("b{batch}"), 500);
        let v = con.raw(&cmd!("BF.MADD", "f").arg(&all).to_owned());
        let Value::Array(r) = &v else { panic!("{v:?}") };
        for x in r {
            if error_of(x).is_some() {
                break 'outer;
            }
            n += 1;
        }
        assert!(n < 1_000_000, "never refused");
    }
    let grown = used_memory(&mut con) - before;
    // 5% for the key, the client's buffers and allocator rounding the model does not see.
    assert!(
        grown <= limit + limit / 20,
        "{n} items in one-item layers took {grown} bytes under a limit of {limit}"
    );
}

#[test]
fn bf_info_size_is_equal_for_a_filter_its_copy_and_after_reload() {
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "f", "0.01", 100, "EXPANSION", 2));
    madd(&mut con, "f", &items("s", 3000));
    // The model, not the allocator's answer: the very figure INFO bf sums and the memory
    // limit counts, so it is the same on every server.
    let size = bf_info(&mut con, "f").size;
    assert_eq!(
        size,
        bf_stat(&mut con, "bytes"),
        "Size is what INFO bf counts"
    );
    // A copy built the way a replica builds it: the header, then the chunks.
    for (it, data) in scandump(&mut con, "f") {
        con.ok(&cmd!("BF.LOADCHUNK", "f-chunked", it, data.as_slice()));
    }
    assert_eq!(bf_info(&mut con, "f-chunked").size, size, "SCANDUMP copy");
    con.q::<i64>(&cmd!("DEL", "f-chunked"));
    con.ok(&cmd!("BF.RESERVE", "one", "0.01", 1, "EXPANSION", 1));
    madd(&mut con, "one", &items("o", 37));
    for key in ["f", "one"] {
        let size = bf_info(&mut con, key).size;
        let copy = format!("{key}-copy");
        assert_eq!(con.q::<i64>(&cmd!("COPY", key, &copy)), 1);
        assert_eq!(bf_info(&mut con, &copy).size, size, "{key}: COPY");
        con.ok(&cmd!("DEBUG", "RELOAD"));
        assert_eq!(bf_info(&mut con, key).size, size, "{key}: reload");
        assert_eq!(
            bf_info(&mut con, &copy).size,
            size,
            "{key}: reload of the copy"
        );
    }
}

#[test]
fn info_bf_bytes_follows_used_memory() {
    let s = Server::start();
    let mut con = s.conn();
    let before = used_memory(&mut con);
    for i in 0..20 {
        let key = format!("f{i}");
        con.ok(&cmd!("BF.RESERVE", &key, "0.01", 1, "EXPANSION", 1));
        madd(&mut con, &key, &items(&key, 300));
    }
    let grown = (used_memory(&mut con) - before) as f64;
    let bytes = bf_stat(&mut con, "bytes") as f64;
    assert!(
        (bytes / grown - 1.0).abs() < 0.10,
        "INFO bf bytes {bytes}, used_memory grew by {grown}"
    );
}

// ------------------------------------------------------------------------- the log

#[test]
fn capacity_warnings_are_rate_limited_in_the_log_and_every_event_arrives() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", "notify-keyspace-events", "Eg"));
    let mut sub = s.conn();
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:bf.capacity").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let n = 3000;
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("BF.INSERT")
            .arg(format!("k{i}"))
            .arg("CAPACITY")
            .arg(1)
            .arg("NONSCALING")
            .arg("ITEMS")
            .arg("x");
    }
    let _: Vec<Value> = pipe.query(&mut con).unwrap();
    // One filter with one-item layers: every add crosses the threshold.
    con.ok(&cmd!("BF.RESERVE", "chain", "0.01", 1, "EXPANSION", 1));
    madd(&mut con, "chain", &items("c", 1000));
    let mut events = 0;
    while events < n + 1000 {
        ps.get_message()
            .expect("a bf.capacity event for every crossing");
        events += 1;
    }
    let crossings = bf_stat(&mut con, "capacity_warnings");
    assert_eq!(crossings, (n + 1000) as i64);
    let suppressed = bf_stat(&mut con, "capacity_warnings_suppressed");
    let log = s.log();
    let lines = log
        .lines()
        .filter(|l| l.contains("of its capacity"))
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

/// A bit array of exactly a size class (16 MiB) stays in it: the module's allocator asks for
/// large over-aligned arrays unpadded first (jemalloc returns them page-aligned), where
/// padding by the 64-byte alignment used to push them into the next class (20 MiB).
#[test]
fn a_bit_array_of_exactly_a_size_class_takes_no_more_than_its_class() {
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "small", 0.01, 100, "NONSCALING"));
    let mut header = common::scandump(&mut con, "small")[0].1.clone();
    // layerbloom's header v1: the first layer's record starts at 36, its block count at +24.
    const BLOCKS_AT: usize = 36 + 24;
    let blocks: u64 = 16 << 20 >> 6;
    header[BLOCKS_AT..BLOCKS_AT + 8].copy_from_slice(&blocks.to_le_bytes());
    con.ok(&cmd!("BF.LOADCHUNK", "exact", 1, header.as_slice()));
    let usage: i64 = con.q(&cmd!("MEMORY", "USAGE", "exact"));
    assert!(
        usage < (16 << 20) + (1 << 20),
        "MEMORY USAGE {usage} for a 16 MiB bit array: padded into the next size class"
    );
    let size = common::bf_info(&mut con, "exact").size;
    assert!(size < (16 << 20) + (1 << 20), "BF.INFO Size {size}");
}

/// A client creating filters at an error rate above a quarter warns once per creation, with a
/// key name of its choosing: the lines are rate-limited and show at most 200 bytes of a key.
#[test]
fn error_rate_warnings_are_rate_limited_and_cut_long_key_names() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let long = "k".repeat(100_000);
    let started = std::time::Instant::now();
    con.ok(&cmd!("BF.RESERVE", &long, "0.5", 10));
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("BF.RESERVE")
            .arg(format!("e{i}"))
            .arg("0.5")
            .arg(10)
            .ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let seconds = started.elapsed().as_secs();
    let log = s.log();
    let lines = log
        .lines()
        .filter(|l| l.contains("asked for error rate"))
        .count() as u64;
    // At most 10 a second, whatever the run's speed.
    assert!(
        (1..=10 * (seconds + 2)).contains(&lines),
        "{lines} warning lines for 2001 creations in {seconds} s"
    );
    assert!(
        log.len() < 20_000,
        "the log holds {} bytes: a 100 000-byte key name was written whole",
        log.len()
    );
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "e1999")), 1);
}

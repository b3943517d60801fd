//! Large filters are backed by huge pages however they came to be: filled by adds, copied,
//! reloaded, restored, moved with SCANDUMP / LOADCHUNK. A lookup in a filter of hundreds of MB
//! waits for one random memory access; with 4 KiB pages it also waits for a page walk (a TLB
//! miss), which made single BF.EXISTS on a 10^8-item filter a quarter slower in one run
//! (docs/BENCHMARKS.md, "Against our own history"). Each test reads the server's
//! `AnonHugePages` in `/proc/<pid>/smaps`, never a time.
//!
//! Skipped (with the reason printed) where huge pages cannot be had: no THP on the kernel, the
//! system setting `never`, THP disabled for the server process (Redis does so when the setting
//! is `always`, `disable-thp yes`), a shared `REDIS_URL` server, or valgrind.

use crate::common;

use common::{under_valgrind, Exec, Server};

/// Huge pages that can back the server's module allocations, or why not.
fn huge_pages_possible(s: &Server) -> Result<(), String> {
    if under_valgrind() {
        return Err("valgrind backs no memory with huge pages".into());
    }
    let enabled = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map_err(|e| format!("no transparent huge pages on this kernel ({e})"))?;
    if !(enabled.contains("[madvise]") || enabled.contains("[always]")) {
        return Err(format!("THP setting is {}", enabled.trim()));
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid()))
        .map_err(|e| format!("no /proc status for the server ({e})"))?;
    if status
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["THP_enabled:", "0"])
    {
        return Err("THP disabled for the server process (disable-thp with THP always)".into());
    }
    Ok(())
}

/// The server's anonymous memory backed by huge pages, in bytes.
fn anon_huge_bytes(s: &Server) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{}/smaps", s.pid())).unwrap();
    smaps
        .lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .map(|v| {
            v.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap()
                * 1024
        })
        .sum()
}

/// The bytes of a filter's bit or slot arrays (MEMORY USAGE: the allocator's figure).
fn filter_bytes(con: &mut redis::Connection, key: &str) -> u64 {
    con.q(&cmd!("MEMORY", "USAGE", key))
}

/// Fills `key` with `items` new items, 1000 per command of `add` (`BF.MADD`, `CF.INSERT`).
fn fill(con: &mut redis::Connection, add: &str, key: &str, items: u64) {
    for start in (0..items).step_by(1000) {
        let batch: Vec<String> = (start..start + 1000).map(|i| format!("i:{i}")).collect();
        let mut c = redis::cmd(add);
        c.arg(key);
        if add == "CF.INSERT" {
            c.arg("ITEMS");
        }
        c.arg(&batch);
        let _: Vec<i64> = con.q(&c);
    }
}

/// After each step, at least this share of every large filter in the server is backed by huge
/// pages (a filter's unaligned ends and the kernel's occasional refusal leave a little in 4
/// KiB pages). Before the fix, a filter filled by adds had at most khugepaged's pace (16 MiB
/// per 10 s by default) of its 180 MB in huge pages, and a COPY of it none.
const SHARE: f64 = 0.7;

fn check(s: &Server, con: &mut redis::Connection, keys: &[&str], step: &str) {
    let total: u64 = keys.iter().map(|k| filter_bytes(con, k)).sum();
    let huge = anon_huge_bytes(s);
    assert!(
        huge as f64 >= SHARE * total as f64,
        "after {step}: {} MiB of the server's memory in huge pages for filters of {} MiB",
        huge >> 20,
        total >> 20
    );
}

/// One structure's walk: a filter of `reserve` filled by `add` past its dense mark, then
/// COPY, DEBUG RELOAD, RESTORE of its DUMP and a SCANDUMP / LOADCHUNK copy, each checked.
fn walk(reserve: &[&str], add: &str, scandump: &str, loadchunk: &str, items: u64) {
    let s = Server::start();
    if s.is_external() {
        eprintln!("skipped: needs its own server to read /proc/<pid>/smaps");
        return;
    }
    if let Err(why) = huge_pages_possible(&s) {
        eprintln!("skipped on {}: {why}", common::server());
        return;
    }
    let mut con = s.conn();
    let mut c = redis::cmd(reserve[0]);
    c.arg("f").arg(&reserve[1..]);
    con.ok(&c);
    fill(&mut con, add, "f", items);
    check(&s, &mut con, &["f"], &format!("{items} items added"));
    assert_eq!(con.q::<i64>(&cmd!("COPY", "f", "copy")), 1);
    check(&s, &mut con, &["f", "copy"], "COPY");
    con.ok(&cmd!("DEBUG", "RELOAD"));
    check(&s, &mut con, &["f", "copy"], "DEBUG RELOAD");
    let payload: Vec<u8> = con.q(&cmd!("DUMP", "f"));
    con.ok(&cmd!("RESTORE", "restored", 0, payload));
    check(&s, &mut con, &["f", "copy", "restored"], "RESTORE");
    let mut it = 0i64;
    loop {
        let (next, data): (i64, Vec<u8>) = con.q(&cmd!(scandump, "f", it));
        if next == 0 {
            break;
        }
        con.ok(&cmd!(loadchunk, "moved", next, data));
        it = next;
    }
    check(
        &s,
        &mut con,
        &["f", "copy", "restored", "moved"],
        "a SCANDUMP / LOADCHUNK copy",
    );
}

/// 10^8 items at 0.001: a 180 MB layer, dense (4 blocks per page) after about 190,000 items;
/// 400,000 leave room for every region's collapse after that (one per 1000 adds).
#[test]
fn a_large_bloom_filter_is_in_huge_pages_filled_copied_reloaded_restored_and_moved() {
    walk(
        &["BF.RESERVE", "0.001", "100000000"],
        "BF.MADD",
        "BF.SCANDUMP",
        "BF.LOADCHUNK",
        400_000,
    );
}

/// 10^8 items at bucket size 2: 128 MiB of slots, dense after about 131,000 fingerprints;
/// 260,000 leave room for its 64 regions' collapses.
#[test]
fn a_large_cuckoo_filter_is_in_huge_pages_filled_copied_reloaded_restored_and_moved() {
    walk(
        &["CF.RESERVE", "100000000"],
        "CF.INSERT",
        "CF.SCANDUMP",
        "CF.LOADCHUNK",
        260_000,
    );
}

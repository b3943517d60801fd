//! The glue's bounds a hostile client (or a RedisBloom primary) tests, issue 23 items 6 to 10:
//! error rates carried by a RedisBloom primary or its AOF, COPY held to the limits, eviction
//! policies that cannot make room, log lines a client can repeat, and the README's figures.

use crate::common;

use std::path::Path;

use common::{bf_info, copy_tree, error_of, redisbloom_path, Exec, Server};

// ---------------------------------------------------------------------------------------------
// 9. Error rates above a quarter from a RedisBloom primary or its AOF
// ---------------------------------------------------------------------------------------------

/// Creations with error rates RedisBloom 2.8 keeps and layerbloom lowers for its own clients,
/// then adds past the first layers (the tightened layers follow the rate too).
const RATES_ABOVE_A_QUARTER: [&str; 4] = [
    "BF.RESERVE r3 0.3 10 EXPANSION 1",
    "BF.INSERT i5 ERROR 0.5 ITEMS a b c",
    "BF.INSERT i9 CAPACITY 20 ERROR 0.9 EXPANSION 2 ITEMS a b c",
    "BF.INSERT n7 CAPACITY 50 ERROR 0.7 NONSCALING ITEMS a",
];
const RATE_KEYS: [&str; 4] = ["r3", "i5", "i9", "n7"];

fn words(line: &str) -> redis::Cmd {
    let mut c = redis::cmd(line.split(' ').next().unwrap());
    for w in line.split(' ').skip(1) {
        c.arg(w);
    }
    c
}

fn rate_items(key: &str) -> Vec<Vec<u8>> {
    common::items(&format!("{key}-item"), 60)
}

/// Runs the creations and adds of [`RATES_ABOVE_A_QUARTER`] on `con`.
fn write_high_rates(con: &mut redis::Connection) {
    for line in RATES_ABOVE_A_QUARTER {
        let v = con.raw(&words(line));
        assert!(error_of(&v).is_none(), "{line}: {v:?}");
    }
    for key in RATE_KEYS {
        // A non-scaling filter's refusals are part of what is compared.
        let _ = con.raw(&cmd!("BF.MADD", key, rate_items(key)));
    }
}

/// Everything a client can read of the filters: BF.DEBUG (each layer's rate, hashes and
/// bits), BF.INFO but its Size, the SCANDUMP stream and the answers to the items and to strangers.
fn rate_view(con: &mut redis::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for key in RATE_KEYS {
        out.push(format!("{key} {:?}", con.raw(&cmd!("BF.DEBUG", key))));
        // Size is RedisBloom's own figure only in classic mode (README), a server setting.
        let info = bf_info(con, key);
        out.push(format!("{key} {:?}", common::BfInfo { size: 0, ..info }));
        out.push(format!("{key} {:?}", common::scandump(con, key)));
        let mut probe = rate_items(key);
        probe.extend(common::items("stranger", 200));
        out.push(format!("{key} {:?}", common::mexists(con, key, &probe)));
    }
    out
}

fn redisbloom_or_skip(builder: common::Builder) -> Option<Server> {
    let Some(path) = redisbloom_path() else {
        eprintln!("skipped: RedisBloom's module is not available");
        return None;
    };
    match builder.module(&path).try_start() {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("skipped: RedisBloom does not load on this server: {e}");
            None
        }
    }
}

/// A RedisBloom 2.8 primary's creations above a quarter reach a layerbloom replica as the
/// commands the client sent: the replica builds them as RedisBloom did (classic, the rate
/// kept), not capped.
#[test]
fn a_replica_of_redisbloom_keeps_the_error_rates_it_is_sent() {
    require_own_server!();
    let Some(primary) = redisbloom_or_skip(Server::builder()) else {
        return;
    };
    let replica = Server::builder().replica_of(&primary).start();
    common::wait_for_link(&replica);
    let mut p = primary.conn();
    write_high_rates(&mut p);
    assert_eq!(p.q::<i64>(&cmd!("WAIT", 1, 10_000)), 1);
    let mut r = replica.conn();
    assert_eq!(rate_view(&mut r), rate_view(&mut p));
}

/// The same commands replayed from a RedisBloom AOF.
#[test]
fn a_redisbloom_aof_keeps_its_error_rates() {
    require_own_server!();
    let Some(rb) = redisbloom_or_skip(Server::builder().command_aof()) else {
        return;
    };
    let mut p = rb.conn();
    write_high_rates(&mut p);
    let aof_dir = rb.dir().join("appendonlydir");
    let mut lb = Server::builder().command_aof().start();
    lb.kill();
    let to = lb.dir().join("appendonlydir");
    let _ = std::fs::remove_dir_all(&to);
    copy_tree(Path::new(&aof_dir), &to);
    lb.start_again();
    let mut l = lb.conn();
    assert_eq!(rate_view(&mut l), rate_view(&mut p));
}

/// A layerbloom primary lowers a client's rate to a quarter and its replica and AOF hold the
/// rate it used (the creation is replicated as the new filter's header).
#[test]
fn a_layerbloom_primary_replicates_the_rate_it_used() {
    require_own_server!();
    let primary = Server::builder()
        .module_args(&["bf-layout", "classic"])
        .command_aof()
        .start();
    let replica = Server::builder().replica_of(&primary).start();
    common::wait_for_link(&replica);
    let mut p = primary.conn();
    write_high_rates(&mut p);
    assert_eq!(p.q::<i64>(&cmd!("WAIT", 1, 10_000)), 1);
    // The rate used: a quarter, tightened by half for the first layer of a scaling filter.
    let debug = format!("{:?}", p.raw(&cmd!("BF.DEBUG", "i5")));
    assert!(debug.contains("ratio:0.125"), "{debug}");
    let mut r = replica.conn();
    let view = rate_view(&mut p);
    assert_eq!(rate_view(&mut r), view);
    let mut aof = Server::builder().command_aof().start();
    aof.kill();
    let to = aof.dir().join("appendonlydir");
    let _ = std::fs::remove_dir_all(&to);
    copy_tree(&primary.dir().join("appendonlydir"), &to);
    aof.start_again();
    assert_eq!(rate_view(&mut aof.conn()), view);
}

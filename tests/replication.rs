//! A replica ends with filters identical to its primary's, whatever its own module settings:
//! writes replicate their effective parameters, and a full sync carries the filters whole.

use crate::common;
use common::setting;

use common::{
    bf_info, digest, error_of, items, loadchunks, madd, mexists, scandump, wait_for_link, Exec,
    Server,
};
use redis::Value;

const FULL: &str = "ERR non scaling filter is full";

fn primary() -> Server {
    Server::builder()
        .config("repl-diskless-sync-delay", "0")
        .start()
}

fn replica_of(primary: &Server) -> Server {
    Server::builder().replica_of(primary).start()
}

fn set_defaults(con: &mut redis::Connection, size: i64, error: &str, expansion: i64) {
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-initial-size"), size));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-error-rate"), error));
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-expansion-factor"),
        expansion
    ));
}

fn wait_replicated(con: &mut redis::Connection) {
    assert_eq!(con.q::<i64>(&cmd!("WAIT", 1, 5000)), 1, "WAIT 1 5000");
}

/// The filters on both servers answer alike: digest, BF.INFO, BF.CARD, probes.
fn assert_identical(p: &mut redis::Connection, r: &mut redis::Connection, keys: &[&str]) {
    let probes = items("probe", 3000);
    for &k in keys {
        assert_eq!(
            con_type(r, k),
            "MBbloom--",
            "{k} is missing or not a filter on the replica"
        );
        assert_eq!(digest(r, k), digest(p, k), "DEBUG DIGEST-VALUE {k}");
        assert_eq!(bf_info(r, k), bf_info(p, k), "BF.INFO {k}");
        assert_eq!(
            r.q::<i64>(&cmd!("BF.CARD", k)),
            p.q::<i64>(&cmd!("BF.CARD", k)),
            "BF.CARD {k}"
        );
        assert_eq!(mexists(r, k, &probes), mexists(p, k, &probes), "probes {k}");
    }
    assert_eq!(
        r.q::<String>(&cmd!("DEBUG", "DIGEST")),
        p.q::<String>(&cmd!("DEBUG", "DIGEST")),
        "dataset digest"
    );
}

fn con_type(con: &mut redis::Connection, k: &str) -> String {
    con.q(&cmd!("TYPE", k))
}

fn last_error(v: &Value) -> Option<String> {
    match v {
        Value::Array(xs) => xs.last().and_then(error_of),
        _ => None,
    }
}

/// Every kind of write, including auto-creation with the primary's non-default settings and
/// partial replies that end with the non-scaling error. Returns the keys written.
fn write_everything(p: &mut redis::Connection) -> Vec<&'static str> {
    p.ok(&cmd!("BF.RESERVE", "reserved", "0.01", 100, "EXPANSION", 3));
    madd(p, "reserved", &items("r", 1000));
    assert!(bf_info(p, "reserved").filters >= 3);

    // Auto-created with the primary's defaults, then grown past its first layer.
    assert_eq!(p.q::<i64>(&cmd!("BF.ADD", "auto-add", "x")), 1);
    madd(p, "auto-madd", &items("m", 500));
    assert!(bf_info(p, "auto-madd").filters >= 2);
    p.q::<Vec<i64>>(&cmd!("BF.INSERT", "auto-insert", "ITEMS", "a", "b"));
    p.q::<Vec<i64>>(&cmd!(
        "BF.INSERT",
        "auto-insert-partial",
        "ERROR",
        "0.02",
        "ITEMS",
        "a"
    ));

    // Non-scaling, filled past capacity: the replies end with the error.
    let mut c = cmd!(
        "BF.INSERT",
        "insert-ns",
        "CAPACITY",
        10,
        "ERROR",
        "0.001",
        "NONSCALING",
        "ITEMS"
    );
    for i in items("ns", 15) {
        c.arg(i);
    }
    let v = p.raw(&c);
    assert_eq!(last_error(&v).as_deref(), Some(FULL), "{v:?}");
    p.ok(&cmd!("BF.RESERVE", "reserved-ns", "0.01", 5, "NONSCALING"));
    let v = p.raw(&cmd!(
        "BF.MADD",
        "reserved-ns",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8"
    ));
    assert_eq!(last_error(&v).as_deref(), Some(FULL), "{v:?}");
    assert_eq!(p.err_text(&cmd!("BF.ADD", "reserved-ns", "9")), FULL);

    // Options of an existing filter are ignored; refused writes change nothing.
    p.q::<Vec<i64>>(&cmd!(
        "BF.INSERT",
        "reserved",
        "CAPACITY",
        7,
        "NONSCALING",
        "ITEMS",
        "extra"
    ));
    assert_eq!(
        p.err_text(&cmd!("BF.RESERVE", "reserved", "0.01", 10)),
        "ERR item exists"
    );

    // A filter rebuilt from SCANDUMP chunks.
    let chunks = scandump(p, "reserved");
    loadchunks(p, "loaded", &chunks);

    vec![
        "reserved",
        "auto-add",
        "auto-madd",
        "auto-insert",
        "auto-insert-partial",
        "insert-ns",
        "reserved-ns",
        "loaded",
    ]
}

#[test]
fn replica_ends_identical_to_its_primary_despite_other_settings() {
    require_own_server!();
    let primary = primary();
    let mut p = primary.conn();
    set_defaults(&mut p, 200, "0.001", 3);
    let replica = replica_of(&primary);
    let mut r = replica.conn();
    set_defaults(&mut r, 50, "0.05", 5);
    wait_for_link(&replica);

    let keys = write_everything(&mut p);
    wait_replicated(&mut p);
    assert_identical(&mut p, &mut r, &keys);
    // The replica really had other defaults: the auto-created filters carry the primary's.
    assert_eq!(bf_info(&mut r, "auto-add").capacity, 200);
    assert_eq!(bf_info(&mut r, "auto-add").expansion, Some(3));
    let v: Vec<String> = r.q(&cmd!("CONFIG", "GET", &setting("bf-initial-size")));
    assert_eq!(v[1], "50");
}

#[test]
fn replica_attached_after_the_data_exists_ends_identical() {
    require_own_server!();
    let primary = primary();
    let mut p = primary.conn();
    set_defaults(&mut p, 300, "0.002", 4);
    let keys = write_everything(&mut p);

    let replica = replica_of(&primary);
    let mut r = replica.conn();
    wait_for_link(&replica);
    wait_replicated(&mut p);
    assert_identical(&mut p, &mut r, &keys);

    // And it keeps following.
    madd(&mut p, "reserved", &items("later", 300));
    p.q::<i64>(&cmd!("BF.ADD", "after-sync", "x"));
    wait_replicated(&mut p);
    let mut keys = keys;
    keys.push("after-sync");
    assert_identical(&mut p, &mut r, &keys);
}

#[test]
fn replica_refuses_writes_but_answers_reads() {
    require_own_server!();
    let primary = primary();
    let mut p = primary.conn();
    let replica = replica_of(&primary);
    let mut r = replica.conn();
    wait_for_link(&replica);
    p.q::<i64>(&cmd!("BF.ADD", "k", "a"));
    wait_replicated(&mut p);
    assert_eq!(r.q::<i64>(&cmd!("BF.EXISTS", "k", "a")), 1);
    let e = r.err_text(&cmd!("BF.ADD", "k", "b"));
    assert!(e.starts_with("READONLY"), "BF.ADD on a replica: {e:?}");
    let e = r.err_text(&cmd!("BF.RESERVE", "k2", "0.01", 10));
    assert!(e.starts_with("READONLY"), "BF.RESERVE on a replica: {e:?}");
}

//! Operating layerbloom: settings, the memory guard, filter health in BF.INFO, capacity
//! warnings and keyspace events, `INFO bf`, ACL categories and COMMAND DOCS.
//!
//! Expected health figures are computed here from the filter's bits as `BF.SCANDUMP` returns
//! them and its geometry as `BF.DEBUG` reports it, not taken from the module.

use crate::common;
use crate::table;
use common::setting;

use std::collections::HashMap;
use std::time::Duration;

use common::{
    config_get, error_of, events, items, key_exists, madd, mexists, scandump, text_of,
    wait_for_link, wait_until, Events, Exec, Server, Stop,
};
use redis::Value;

/// Every setting (its name without the module prefix, see [`common::setting`]) and default.
const SETTINGS: [(&str, &str); 6] = [
    ("bf-error-rate", "0.01"),
    ("bf-initial-size", "100"),
    ("bf-expansion-factor", "2"),
    ("bf-max-filter-memory", "4294967296"),
    ("bf-layout", "blocked"),
    ("bf-capacity-warning", "70"),
];

fn config_set(con: &mut redis::Connection, name: &str, value: &str) {
    con.ok(&cmd!("CONFIG", "SET", name, value));
}

/// The server's version as (major, minor).
fn version(con: &mut redis::Connection) -> (u32, u32) {
    let v = con.info_map("server")["redis_version"].clone();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// `INFO bf` as a map (`bf_filters` -> "3").
fn info_bf(con: &mut redis::Connection) -> HashMap<String, String> {
    con.info_map("bf")
}

fn info_bf_i64(con: &mut redis::Connection, field: &str) -> i64 {
    info_bf(con)
        .get(field)
        .unwrap_or_else(|| panic!("no {field} in INFO bf"))
        .parse()
        .unwrap()
}

/// `BF.INFO key WORD` over RESP2: the one value.
fn info_value(con: &mut redis::Connection, key: &str, word: &str) -> Value {
    match con.raw(&cmd!("BF.INFO", key, word)) {
        Value::Array(mut xs) if xs.len() == 1 => xs.remove(0),
        other => panic!("BF.INFO {key} {word} replied {other:?}"),
    }
}

fn info_int(con: &mut redis::Connection, key: &str, word: &str) -> i64 {
    match info_value(con, key, word) {
        Value::Int(n) => n,
        other => panic!("BF.INFO {key} {word} is {other:?}, not an integer"),
    }
}

/// A double field over RESP2: a bulk string with a number.
fn info_f64(con: &mut redis::Connection, key: &str, word: &str) -> f64 {
    let v = info_value(con, key, word);
    let text = text_of(&v).unwrap_or_else(|| panic!("BF.INFO {key} {word} is {v:?}"));
    text.parse()
        .unwrap_or_else(|e| panic!("BF.INFO {key} {word} = {text:?}: {e}"))
}

/// BF.DEBUG's layer lines as `name -> value` maps (the first line, `size:N`, skipped).
fn debug_layers(con: &mut redis::Connection, key: &str) -> Vec<HashMap<String, String>> {
    let lines: Vec<String> = con.q(&cmd!("BF.DEBUG", key));
    lines[1..]
        .iter()
        .map(|line| {
            line.split_whitespace()
                .filter_map(|w| w.split_once(':'))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn field(layer: &HashMap<String, String>, name: &str) -> u64 {
    layer[name].parse().unwrap()
}

/// Each layer's bit array, from a SCANDUMP walk cut at BF.DEBUG's layer sizes.
fn layer_bits(con: &mut redis::Connection, key: &str) -> Vec<Vec<u8>> {
    let all: Vec<u8> = scandump(con, key)
        .into_iter()
        .skip(1)
        .flat_map(|(_, data)| data)
        .collect();
    let mut out = Vec::new();
    let mut at = 0;
    for layer in debug_layers(con, key) {
        let n = field(&layer, "bytes") as usize;
        out.push(all[at..at + n].to_vec());
        at += n;
    }
    assert_eq!(at, all.len(), "SCANDUMP bytes match BF.DEBUG's layer sizes");
    out
}

fn popcount(bytes: &[u8]) -> u64 {
    bytes.iter().map(|b| u64::from(b.count_ones())).sum()
}

/// Adds `n` fresh items (`<prefix>-<i>`) in batches; the number the filter counted as new.
fn add_n(con: &mut redis::Connection, key: &str, prefix: &str, n: usize) -> usize {
    let all = items(prefix, n);
    madd(con, key, &all).iter().filter(|&&r| r == 1).count()
}

// ---------------------------------------------------------------- settings

#[test]
fn every_setting_has_its_documented_default() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    for (name, default) in SETTINGS {
        let name = setting(name);
        assert_eq!(config_get(&mut con, &name), default, "{name}");
    }
    let all: Vec<String> = con.q(&cmd!("CONFIG", "GET", setting("bf-*")));
    assert_eq!(all.len(), 2 * SETTINGS.len(), "{all:?}");
}

#[test]
fn every_setting_refuses_invalid_values_with_a_clear_error() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let prefix =
        |name: &str| format!("ERR CONFIG SET failed (possibly related to argument '{name}') - ");
    let error_rate = "error rate must be a number in the open interval (0, 1)";
    for (name, value, why) in [
        (&setting("bf-error-rate"), "0", error_rate),
        (&setting("bf-error-rate"), "1", error_rate),
        (&setting("bf-error-rate"), "-0.5", error_rate),
        (&setting("bf-error-rate"), "abc", error_rate),
        (&setting("bf-error-rate"), "", error_rate),
        (
            &setting("bf-initial-size"),
            "0",
            "argument must be between 1 and 1073741824 inclusive",
        ),
        (
            &setting("bf-initial-size"),
            "1073741825",
            "argument must be between 1 and 1073741824 inclusive",
        ),
        (
            &setting("bf-initial-size"),
            "ten",
            "argument couldn't be parsed into an integer",
        ),
        (
            &setting("bf-expansion-factor"),
            "-1",
            "argument must be between 0 and 32768 inclusive",
        ),
        (
            &setting("bf-expansion-factor"),
            "32769",
            "argument must be between 0 and 32768 inclusive",
        ),
        (
            &setting("bf-max-filter-memory"),
            "1000",
            "argument must be between 1024 and 9223372036854775807 inclusive",
        ),
        (
            &setting("bf-max-filter-memory"),
            "lots",
            "argument must be a memory value",
        ),
        (
            &setting("bf-layout"),
            "sparse",
            "argument(s) must be one of the following: blocked, classic",
        ),
        (
            &setting("bf-capacity-warning"),
            "101",
            "argument must be between 0 and 100 inclusive",
        ),
        (
            &setting("bf-capacity-warning"),
            "-1",
            "argument must be between 0 and 100 inclusive",
        ),
        (
            &setting("bf-capacity-warning"),
            "0.7",
            "argument couldn't be parsed into an integer",
        ),
    ] {
        assert_eq!(
            con.err_text(&cmd!("CONFIG", "SET", name, value)),
            format!("{}{why}", prefix(name)),
            "CONFIG SET {name} {value:?}"
        );
    }
    for (name, default) in SETTINGS {
        let name = setting(name);
        assert_eq!(config_get(&mut con, &name), default, "{name} unchanged");
    }
}

#[test]
fn config_set_takes_effect_for_every_setting() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    // Defaults of auto-created filters.
    config_set(&mut con, &setting("bf-error-rate"), "0.002");
    config_set(&mut con, &setting("bf-initial-size"), "5000");
    config_set(&mut con, &setting("bf-expansion-factor"), "5");
    con.q::<i64>(&cmd!("BF.ADD", "auto", "x"));
    assert_eq!(info_f64(&mut con, "auto", "ERROR"), 0.002);
    assert_eq!(info_int(&mut con, "auto", "CAPACITY"), 5000);
    assert_eq!(info_int(&mut con, "auto", "EXPANSION"), 5);
    assert_eq!(config_get(&mut con, &setting("bf-error-rate")), "0.002");
    // BF.RESERVE without EXPANSION takes the default factor too.
    con.ok(&cmd!("BF.RESERVE", "reserved", "0.01", 10));
    assert_eq!(info_int(&mut con, "reserved", "EXPANSION"), 5);
    // Expansion 0: non-scaling.
    config_set(&mut con, &setting("bf-expansion-factor"), "0");
    con.q::<i64>(&cmd!("BF.ADD", "fixed", "x"));
    assert_eq!(info_value(&mut con, "fixed", "EXPANSION"), Value::Nil);
    // The memory limit.
    config_set(&mut con, &setting("bf-max-filter-memory"), "64kb");
    assert_eq!(
        config_get(&mut con, &setting("bf-max-filter-memory")),
        "65536"
    );
    let e = con.err_text(&cmd!("BF.RESERVE", "big", "0.01", 100_000));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter: it would need ")
            && e.ends_with(" bytes, over the per-filter limit bf-max-filter-memory of 65536 bytes"),
        "{e}"
    );
    config_set(&mut con, &setting("bf-max-filter-memory"), "1mb");
    con.ok(&cmd!("BF.RESERVE", "big", "0.01", 100_000));
    // The layout of new filters: BF.DEBUG shows RedisBloom's fields for a classic one.
    config_set(&mut con, &setting("bf-layout"), "classic");
    con.ok(&cmd!("BF.RESERVE", "classic", "0.01", 1000));
    assert!(debug_layers(&mut con, "classic")[0].contains_key("hashwidth"));
    assert!(debug_layers(&mut con, "big")[0].contains_key("blocksperitem"));
    config_set(&mut con, &setting("bf-layout"), "blocked");
    con.ok(&cmd!("BF.RESERVE", "blocked", "0.01", 1000));
    assert!(debug_layers(&mut con, "blocked")[0].contains_key("blocksperitem"));
    // The capacity-warning threshold: 50% of a 100-item layer warns at the 50th item.
    config_set(&mut con, &setting("bf-capacity-warning"), "50");
    con.ok(&cmd!("BF.RESERVE", "warn", "0.01", 100));
    add_n(&mut con, "warn", "w", 49);
    assert_eq!(info_bf_i64(&mut con, "bf_capacity_warnings"), 0);
    add_n(&mut con, "warn", "v", 1);
    assert_eq!(info_bf_i64(&mut con, "bf_capacity_warnings"), 1);
    assert!(s
        .log()
        .contains("Bloom filter 'warn' reached 50% of its capacity"));
}

#[test]
fn load_time_arguments_set_every_setting() {
    require_own_server!();
    let s = Server::builder()
        .module_args(&[
            "ERROR_RATE",
            "0.001",
            "INITIAL_SIZE",
            "1000",
            "EXPANSION",
            "4",
            "bf-max-filter-memory",
            "64mb",
            "bf-layout",
            "classic",
            "BF-CAPACITY-WARNING",
            "55",
        ])
        .start();
    let mut con = s.conn();
    for (name, value) in [
        (&setting("bf-error-rate"), "0.001"),
        (&setting("bf-initial-size"), "1000"),
        (&setting("bf-expansion-factor"), "4"),
        (&setting("bf-max-filter-memory"), "67108864"),
        (&setting("bf-layout"), "classic"),
        (&setting("bf-capacity-warning"), "55"),
    ] {
        assert_eq!(config_get(&mut con, name), value, "{name}");
    }
    let info = info_bf(&mut con);
    assert_eq!(info["bf_capacity_warning"], "55");
    assert_eq!(info["bf_layout"], "classic");
    assert_eq!(info["bf_max_filter_memory"], "67108864");
}

#[test]
fn settings_in_the_server_configuration_apply() {
    require_own_server!();
    let s = Server::builder()
        .config(&setting("bf-capacity-warning"), "90")
        .config(&setting("bf-max-filter-memory"), "2mb")
        .config(&setting("bf-error-rate"), "0.05")
        .start();
    let mut con = s.conn();
    assert_eq!(config_get(&mut con, &setting("bf-capacity-warning")), "90");
    assert_eq!(
        config_get(&mut con, &setting("bf-max-filter-memory")),
        "2097152"
    );
    con.q::<i64>(&cmd!("BF.ADD", "k", "x"));
    assert_eq!(info_f64(&mut con, "k", "ERROR"), 0.05);
}

/// Starts redis-server with the module and `module_args` and expects it to refuse to start;
/// returns its log.
fn failed_start_log(module_args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!(
        "layerbloom-badargs-{}-{}",
        std::process::id(),
        module_args.join("_").replace(['/', '.'], "")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("redis.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let status = std::process::Command::new("redis-server")
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--port")
        .arg(port.to_string())
        .arg("--dir")
        .arg(&dir)
        .arg("--logfile")
        .arg(&log)
        .arg("--save")
        .arg("")
        .arg("--loadmodule")
        .arg(common::module_path())
        .args(module_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("cannot run redis-server");
    assert!(
        !status.success(),
        "redis-server started with {module_args:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    text
}

#[test]
fn an_invalid_load_time_argument_stops_the_server_with_the_reason_logged() {
    require_own_server!();
    for (args, why) in [
        (
            &["bf-capacity-warning", "150"][..],
            "layerbloom: bf-capacity-warning 150: must be a percentage, 0 to 100",
        ),
        (
            &["ERROR_RATE", "2"][..],
            "layerbloom: error_rate 2: error rate must be a number in the open interval (0, 1)",
        ),
        (
            &["bf-max-filter-memory", "12"][..],
            "layerbloom: bf-max-filter-memory 12: must be a memory size of at least 1024 bytes",
        ),
        (
            &["NO_SUCH_THING", "1"][..],
            "layerbloom: unknown module argument 'no_such_thing'",
        ),
    ] {
        let log = failed_start_log(args);
        assert!(log.contains(why), "{args:?}: log lacks {why:?}:\n{log}");
    }
}

#[test]
fn settings_carry_the_module_prefix_only_where_the_server_requires_it() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let unprefixed: Vec<String> = con.q(&cmd!("CONFIG", "GET", "bf-error-rate"));
    let prefixed: Vec<String> = con.q(&cmd!("CONFIG", "GET", "bf.bf-error-rate"));
    if version(&mut con).0 >= 8 {
        assert_eq!(unprefixed, ["bf-error-rate", "0.01"]);
    } else {
        // Redis 7 has no unprefixed module settings.
        assert!(unprefixed.is_empty(), "{unprefixed:?}");
        assert_eq!(prefixed, ["bf.bf-error-rate", "0.01"]);
        assert!(s
            .log()
            .contains("settings are named bf.bf-error-rate, bf.bf-initial-size"));
    }
    // Valkey 8 reports version 8 to modules but has no unprefixed settings: the module must
    // not try a flag the server refuses (it would log a warning at every start).
    assert!(!s.log().contains("Invalid flag"), "{}", s.log());
}

// ---------------------------------------------------------------- memory guard

#[test]
fn the_default_limit_takes_100_million_items_at_a_tenth_of_a_percent() {
    let s = Server::start();
    let ks = s.keys("the_default_limit_takes_100_million_items");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.001", 100_000_000));
    let size = info_int(&mut con, &k, "SIZE");
    assert!(size > 150 << 20 && size < 400 << 20, "{size}");
    assert!(info_int(&mut con, &k, "MAXCAPACITY") > 100_000_000);
    con.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b"));
    assert_eq!(info_int(&mut con, &k, "ITEMS"), 2);
    con.q::<i64>(&cmd!("DEL", &k));
}

#[test]
fn growth_over_the_limit_is_refused_where_max_capacity_said() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    config_set(&mut con, &setting("bf-max-filter-memory"), "256kb");
    con.ok(&cmd!("BF.RESERVE", "k", "0.01", 1000, "EXPANSION", 2));
    let reachable = info_int(&mut con, "k", "MAXCAPACITY");
    // 1000 + 2000 + ... + 32000: the next layer (64000 items) would pass 256 KiB.
    assert_eq!(reachable, 63_000);
    let mut refusal = None;
    for batch in 0..1000 {
        let mut c = cmd!("BF.MADD", "k");
        for i in 0..1000 {
            c.arg(format!("g-{batch}-{i}"));
        }
        if let Value::Array(xs) = con.raw(&c) {
            if let Some(e) = xs.last().and_then(error_of) {
                refusal = Some(e);
                break;
            }
        }
    }
    let e = refusal.expect("the filter grew past 256kb");
    assert!(
        e.starts_with("ERR problem inserting into filter: its next layer would bring it to ")
            && e.ends_with(
                " bytes, over the per-filter limit bf-max-filter-memory of 262144 bytes"
            ),
        "{e}"
    );
    let needed: u64 = e
        .split_whitespace()
        .find_map(|w| w.parse().ok().filter(|&n| n > 262_144))
        .expect("the refusal names the size it needed");
    assert!(needed > 262_144);
    // It stopped exactly where BF.INFO said it would, and can reach no further.
    assert_eq!(info_int(&mut con, "k", "CAPACITY"), reachable);
    assert_eq!(info_int(&mut con, "k", "MAXCAPACITY"), reachable);
    // Refused again (an item that looks present is answered 0); nothing changes.
    let digest = common::digest(&mut con, "k");
    let items_before = info_int(&mut con, "k", "ITEMS");
    let mut fresh = 0;
    let e = loop {
        let v = con.raw(&cmd!("BF.ADD", "k", format!("fresh-{fresh}")));
        fresh += 1;
        if let Some(e) = error_of(&v) {
            break e;
        }
        assert_eq!(v, Value::Int(0));
        assert!(fresh < 1000);
    };
    assert!(e.starts_with("ERR problem inserting into filter"), "{e}");
    assert_eq!(info_int(&mut con, "k", "ITEMS"), items_before);
    assert_eq!(common::digest(&mut con, "k"), digest);
    // Raising the limit lets it grow again.
    config_set(&mut con, &setting("bf-max-filter-memory"), "4gb");
    assert!(info_int(&mut con, "k", "MAXCAPACITY") > reachable);
    let layers = info_int(&mut con, "k", "FILTERS");
    add_n(&mut con, "k", "after", 10);
    assert_eq!(info_int(&mut con, "k", "FILTERS"), layers + 1);
}

fn replica_of(primary: &Server, args: &[&str]) -> Server {
    Server::builder()
        .module_args(args)
        .config("replicaof", &format!("127.0.0.1 {}", primary.port()))
        .start()
}

#[test]
fn replicas_and_loading_apply_what_the_primary_accepted() {
    require_own_server!();
    // The primary accepts a filter of about 6 MB; the replica's own limit is 1 MB.
    let mut primary = Server::builder()
        .module_args(&["bf-max-filter-memory", "1mb"])
        .config("repl-diskless-sync-delay", "0")
        .command_aof()
        .save("")
        .start();
    let mut p = primary.conn();
    config_set(&mut p, &setting("bf-max-filter-memory"), "4gb");
    con_reserve_big(&mut p);
    let replica = replica_of(&primary, &["bf-max-filter-memory", "1mb"]);
    wait_for_link(&replica);
    let mut r = replica.conn();
    assert_eq!(
        config_get(&mut r, &setting("bf-max-filter-memory")),
        "1048576"
    );
    // Full sync (RDB) carried the filter; a write after it is replicated and applied too.
    con_reserve_other(&mut p);
    add_n(&mut p, "big", "item", 5000);
    assert_eq!(p.q::<i64>(&cmd!("WAIT", 1, 5000)), 1);
    for k in ["big", "other"] {
        assert!(info_int(&mut r, k, "SIZE") > 1 << 20, "{k} on the replica");
        assert_eq!(common::digest(&mut r, k), common::digest(&mut p, k), "{k}");
    }
    // Restarted with its 1 MB limit (the module argument), the primary reloads both from the
    // AOF, and then from an RDB file (DEBUG RELOAD saves one and loads it).
    let digest = common::digest(&mut p, "big");
    drop(r);
    drop(replica);
    primary.restart(Stop::NoSave);
    let mut p = primary.conn();
    assert_eq!(
        config_get(&mut p, &setting("bf-max-filter-memory")),
        "1048576"
    );
    assert_eq!(common::digest(&mut p, "big"), digest, "after AOF replay");
    p.ok(&cmd!("DEBUG", "RELOAD"));
    assert_eq!(common::digest(&mut p, "big"), digest, "after RDB load");
    assert!(key_exists(&mut p, "other"));
    // A client of that server is refused a filter that size.
    let e = p.err_text(&cmd!("BF.RESERVE", "again", "0.001", 5_000_000));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "{e}"
    );
}

fn con_reserve_big(con: &mut redis::Connection) {
    con.ok(&cmd!("BF.RESERVE", "big", "0.01", 5_000_000));
}

fn con_reserve_other(con: &mut redis::Connection) {
    con.ok(&cmd!("BF.RESERVE", "other", "0.001", 2_000_000));
}

// ---------------------------------------------------------------- health

const HEALTH_NAMES: [&str; 5] = [
    "Error rate",
    "Fill ratio",
    "Estimated false positive rate",
    "Estimated distinct items",
    "Max capacity",
];

#[test]
fn info_health_answers_the_five_health_fields_in_resp2_and_resp3() {
    let s = Server::start();
    let ks = s.keys("info_health_answers_the_five");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.001", 1000));
    add_n(&mut con, &k, "x", 300);
    let Value::Array(xs) = con.raw(&cmd!("BF.INFO", &k, "health")) else {
        panic!("BF.INFO HEALTH is not an array")
    };
    let names: Vec<String> = xs.iter().step_by(2).map(|v| text_of(v).unwrap()).collect();
    assert_eq!(names, HEALTH_NAMES);
    assert_eq!(xs.len(), 10);
    // RESP2: doubles as bulk strings with a plain number, counts as integers.
    assert_eq!(text_of(&xs[1]).as_deref(), Some("0.001"));
    for i in [3, 5] {
        let v: f64 = text_of(&xs[i]).unwrap().parse().unwrap();
        assert!(v > 0.0 && v < 1.0, "{names:?} {v}");
    }
    assert!(matches!(xs[7], Value::Int(n) if n > 250 && n < 350));
    assert!(matches!(xs[9], Value::Int(n) if n > 1000));
    // RESP3: a map in the same order, doubles as doubles.
    let mut con3 = s.conn_resp3();
    let Value::Map(pairs) = con3.raw(&cmd!("BF.INFO", &k, "HEALTH")) else {
        panic!("BF.INFO HEALTH over RESP3 is not a map")
    };
    let names3: Vec<String> = pairs.iter().map(|(n, _)| text_of(n).unwrap()).collect();
    assert_eq!(names3, names);
    assert_eq!(pairs[0].1, Value::Double(0.001));
    assert!(matches!(pairs[1].1, Value::Double(f) if f > 0.0));
    assert!(matches!(pairs[2].1, Value::Double(f) if f > 0.0));
    assert_eq!(pairs[3].1, xs[7]);
    assert_eq!(pairs[4].1, xs[9]);
    // Each is also a single-field query, in any case; RESP3 names the field.
    for (word, name) in [
        ("ERROR", "Error rate"),
        ("fill", "Fill ratio"),
        ("Fpr", "Estimated false positive rate"),
        ("DISTINCT", "Estimated distinct items"),
        ("maxcapacity", "Max capacity"),
        ("MAXSCALEDCAPACITY", "Max capacity"),
    ] {
        let Value::Map(one) = con3.raw(&cmd!("BF.INFO", &k, word)) else {
            panic!("BF.INFO {word} over RESP3")
        };
        assert_eq!(one.len(), 1);
        assert_eq!(text_of(&one[0].0).as_deref(), Some(name), "{word}");
        let i = names.iter().position(|n| n == name).unwrap();
        assert_eq!(one[0].1, pairs[i].1, "{word}");
        let Value::Array(v2) = con.raw(&cmd!("BF.INFO", &k, word)) else {
            panic!("BF.INFO {word}")
        };
        assert_eq!(v2, vec![xs[2 * i + 1].clone()], "{word}");
    }
}

/// The exact false-positive rate of a blocked layer's bits for a random absent item: an item
/// picks `b` blocks and `k` positions in each; a block with `s` bits set answers "present" with
/// probability `(s/512)^k`.
fn blocked_layer_fpr(bits: &[u8], b: u32, k: u32) -> f64 {
    let blocks: Vec<f64> = bits
        .chunks(64)
        .map(|block| (popcount(block) as f64 / 512.0).powi(k as i32))
        .collect();
    (blocks.iter().sum::<f64>() / blocks.len() as f64).powi(b as i32)
}

/// The documented distinct-items estimate of a blocked layer: the mean item-slots per block
/// `λ` that gives the observed fill, times blocks / blocks per item.
fn blocked_layer_distinct(bits: &[u8], b: u32, k: u32) -> f64 {
    let fill = popcount(bits) as f64 / (bits.len() * 8) as f64;
    let per_slot = 1.0 - (1.0 - 1.0 / 512.0f64).powi(k as i32);
    let load = -(1.0 - fill).ln() / per_slot;
    load * (bits.len() / 64) as f64 / f64::from(b)
}

#[test]
fn health_of_a_blocked_filter_matches_its_bits() {
    let s = Server::start();
    let ks = s.keys("health_of_a_blocked_filter");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 20_000, "EXPANSION", 2));
    let added = add_n(&mut con, &k, "h", 35_000);
    let layers = debug_layers(&mut con, &k);
    assert_eq!(layers.len(), 2);
    let bits = layer_bits(&mut con, &k);
    let shape: Vec<(u32, u32)> = layers
        .iter()
        .map(|l| {
            (
                field(l, "blocksperitem") as u32,
                field(l, "bitsperblock") as u32,
            )
        })
        .collect();
    // Error rate, as configured.
    assert_eq!(info_f64(&mut con, &k, "ERROR"), 0.01);
    // Fill ratio of the newest layer, exactly.
    let newest = bits.last().unwrap();
    let fill = popcount(newest) as f64 / (newest.len() * 8) as f64;
    assert_eq!(info_f64(&mut con, &k, "FILL"), fill);
    // Distinct items: the documented estimate from the bits, and close to what was added.
    let distinct: f64 = bits
        .iter()
        .zip(&shape)
        .map(|(b, &(bpi, kpb))| blocked_layer_distinct(b, bpi, kpb))
        .sum();
    let reported = info_int(&mut con, &k, "DISTINCT");
    assert!(
        (reported as f64 - distinct).abs() <= 1.0,
        "{reported} vs {distinct}"
    );
    assert!(
        (reported as f64 / 35_000.0 - 1.0).abs() < 0.02,
        "{reported}"
    );
    assert!(reported >= added as i64 - 700, "{reported} {added}");
    // False-positive rate: the estimate against the exact rate of these bits...
    let exact = 1.0
        - bits
            .iter()
            .zip(&shape)
            .map(|(b, &(bpi, kpb))| 1.0 - blocked_layer_fpr(b, bpi, kpb))
            .product::<f64>();
    let estimate = info_f64(&mut con, &k, "FPR");
    assert!(
        (estimate / exact - 1.0).abs() < 0.05,
        "estimate {estimate:e}, exact {exact:e}"
    );
    // ...and against what 200000 absent items measure.
    let probes = items("absent", 200_000);
    let positives = mexists(&mut con, &k, &probes)
        .iter()
        .filter(|&&b| b)
        .count();
    let expected = exact * probes.len() as f64;
    assert!(
        (positives as f64 - expected).abs() < 6.0 * expected.sqrt() + 5.0,
        "{positives} false positives, {expected:.0} expected"
    );
    assert!(
        estimate < 0.01,
        "the chain keeps its error rate: {estimate}"
    );
}

#[test]
fn health_of_a_classic_filter_matches_its_bits() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    config_set(&mut con, &setting("bf-layout"), "classic");
    con.ok(&cmd!("BF.RESERVE", "k", "0.01", 20_000, "EXPANSION", 2));
    add_n(&mut con, "k", "h", 60_000);
    let layers = debug_layers(&mut con, "k");
    assert!(layers.len() >= 2);
    let bits = layer_bits(&mut con, "k");
    let newest = bits.last().unwrap();
    let fill = popcount(newest) as f64 / (newest.len() * 8) as f64;
    assert_eq!(info_f64(&mut con, "k", "FILL"), fill);
    let mut pass = 1.0;
    let mut distinct = 0.0;
    for (b, layer) in bits.iter().zip(&layers) {
        let m = (b.len() * 8) as f64;
        let hashes = field(layer, "hashes") as f64;
        let f = popcount(b) as f64 / m;
        pass *= 1.0 - f.powf(hashes);
        distinct += (1.0 - f).ln() / (1.0 - hashes / m).ln();
    }
    let fpr = info_f64(&mut con, "k", "FPR");
    assert!(
        ((1.0 - pass) / fpr - 1.0).abs() < 1e-9,
        "{fpr} vs {}",
        1.0 - pass
    );
    let reported = info_int(&mut con, "k", "DISTINCT");
    assert!(
        (reported as f64 - distinct).abs() <= 1.0,
        "{reported} vs {distinct}"
    );
    assert!(
        (reported as f64 / 60_000.0 - 1.0).abs() < 0.02,
        "{reported}"
    );
    assert_eq!(info_f64(&mut con, "k", "ERROR"), 0.01);
}

#[test]
fn distinct_items_show_what_an_overfull_filter_swallowed() {
    let s = Server::start();
    let ks = s.keys("distinct_items_show");
    let k = ks.k("k");
    let mut con = s.conn();
    // A 25% non-scaling filter: many new items look present and are not counted, so its
    // counter reaches capacity long after the filter took that many distinct items.
    con.ok(&cmd!("BF.RESERVE", &k, "0.25", 10_000, "NONSCALING"));
    let mut offered = 0;
    'outer: for batch in 0..100 {
        let mut c = cmd!("BF.MADD", &k);
        for i in 0..500 {
            c.arg(format!("o-{batch}-{i}"));
        }
        let Value::Array(xs) = con.raw(&c) else {
            panic!()
        };
        for x in xs {
            if error_of(&x).is_some() {
                break 'outer;
            }
            offered += 1;
        }
    }
    let counted = info_int(&mut con, &k, "ITEMS");
    assert_eq!(counted, 10_000);
    let distinct = info_int(&mut con, &k, "DISTINCT");
    assert!(distinct > counted + 300, "{distinct} vs {counted}");
    assert!(
        (distinct as f64 / offered as f64 - 1.0).abs() < 0.03,
        "{distinct} vs {offered} offered"
    );
    // Its false-positive rate is what a full 25% filter has, and says so.
    let fpr = info_f64(&mut con, &k, "FPR");
    assert!(fpr > 0.15 && fpr <= 0.25, "{fpr}");
    assert!(info_f64(&mut con, &k, "FILL") > 0.4);
    assert_eq!(info_int(&mut con, &k, "MAXCAPACITY"), 10_000);
}

// ---------------------------------------------------------------- warnings and events

fn warning_lines(s: &Server, key: &str) -> usize {
    let needle = format!("Bloom filter '{key}' reached");
    s.log().lines().filter(|l| l.contains(&needle)).count()
}

#[test]
fn crossing_the_threshold_warns_once_per_layer_in_the_log_and_as_an_event() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let mut con = s.conn();
    let mut ev = Events::subscribe(&s, "bf.*");
    con.ok(&cmd!("BF.RESERVE", "k", "0.01", 100, "EXPANSION", 2));
    assert_eq!(ev.drain(), events(&[("bf.reserve", "k")]));
    add_n(&mut con, "k", "a", 69);
    assert_eq!(ev.drain(), events(&[("bf.add", "k")]));
    assert_eq!(warning_lines(&s, "k"), 0);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 0);
    // The 70th item of 100.
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "k", "the-70th")), 1);
    assert_eq!(ev.drain(), events(&[("bf.add", "k"), ("bf.capacity", "k")]));
    assert_eq!(warning_lines(&s, "k"), 1);
    let line = s
        .log()
        .lines()
        .find(|l| l.contains("Bloom filter 'k' reached"))
        .unwrap()
        .to_string();
    assert!(
        line.contains(
            "Bloom filter 'k' reached 70% of its capacity: layer 1 of 1 holds 70 of 100 items \
             (bf-capacity-warning 70); when it is full the filter adds a layer 2 times larger"
        ),
        "{line}"
    );
    assert!(line.contains(" # "), "logged as a warning: {line}");
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 1);
    assert_eq!(info_bf_i64(&mut con, "bf_capacity_warnings"), 1);
    // More items in the same layer: no second warning. A present item: no event at all.
    add_n(&mut con, "k", "b", 30);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "k", "the-70th")), 0);
    assert_eq!(ev.drain(), events(&[("bf.add", "k")]));
    assert_eq!(warning_lines(&s, "k"), 1);
    // The next layer (200 items) warns at its own 70%: 140.
    assert_eq!(info_int(&mut con, "k", "FILTERS"), 1);
    let mut n = 0;
    while info_int(&mut con, "k", "FILTERS") == 1 || n < 1 {
        add_n(&mut con, "k", &format!("c{n}"), 1);
        n += 1;
    }
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 0);
    ev.drain();
    let in_layer = |con: &mut redis::Connection| {
        let layers = debug_layers(con, "k");
        field(&layers[1], "size")
    };
    let mut i = 0;
    while in_layer(&mut con) < 139 {
        add_n(&mut con, "k", &format!("d{i}"), 1);
        i += 1;
    }
    assert_eq!(warning_lines(&s, "k"), 1);
    while in_layer(&mut con) < 140 {
        add_n(&mut con, "k", &format!("d{i}"), 1);
        i += 1;
    }
    assert_eq!(warning_lines(&s, "k"), 2);
    assert!(s.log().contains("layer 2 of 2 holds 140 of 200 items"));
    let got = ev.drain();
    assert_eq!(
        got.iter().filter(|(e, _)| e == "bf.capacity").count(),
        1,
        "{got:?}"
    );
    assert_eq!(info_bf_i64(&mut con, "bf_capacity_warnings"), 2);
}

#[test]
fn a_batch_that_crosses_several_layers_warns_for_each() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let mut con = s.conn();
    let mut ev = Events::subscribe(&s, "bf.*");
    // One BF.MADD: the first layer (100) fills, the second (200) passes 140.
    con.ok(&cmd!("BF.RESERVE", "k", "0.001", 100));
    ev.drain();
    let added = add_n(&mut con, "k", "x", 300);
    assert!(added > 290);
    assert_eq!(
        ev.drain(),
        events(&[("bf.add", "k"), ("bf.capacity", "k"), ("bf.capacity", "k")])
    );
    assert!(s.log().contains("layer 1 of 2 holds 100 of 100 items"));
    assert!(s.log().contains("layer 2 of 2 holds"));
}

#[test]
fn a_full_nonscaling_filter_emits_bf_full_and_counts_the_refusal() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let mut con = s.conn();
    let mut ev = Events::subscribe(&s, "bf.*");
    con.ok(&cmd!("BF.RESERVE", "k", "0.01", 3, "NONSCALING"));
    let v = con.raw(&cmd!("BF.INSERT", "k", "ITEMS", "a", "b", "c", "d"));
    let Value::Array(xs) = v else { panic!() };
    assert_eq!(
        error_of(&xs[3]).as_deref(),
        Some("ERR non scaling filter is full")
    );
    assert_eq!(
        ev.drain(),
        events(&[
            ("bf.reserve", "k"),
            ("bf.add", "k"),
            ("bf.capacity", "k"),
            ("bf.full", "k")
        ])
    );
    assert!(s
        .log()
        .contains("the filter is non-scaling: when it is full it refuses new items"));
    // A refused BF.ADD changes nothing else: only bf.full.
    assert_eq!(
        con.err_text(&cmd!("BF.ADD", "k", "e")),
        "ERR non scaling filter is full"
    );
    assert_eq!(ev.drain(), events(&[("bf.full", "k")]));
    // An item it holds is no refusal.
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "k", "a")), 0);
    assert_eq!(ev.drain(), events(&[]));
    let info = info_bf(&mut con);
    assert_eq!(info["bf_refused_full"], "2");
    assert_eq!(info["bf_refused_adds"], "2");
}

#[test]
fn creations_emit_bf_reserve_and_changing_adds_emit_bf_add() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let mut con = s.conn();
    let mut ev = Events::subscribe(&s, "bf.*");
    con.q::<i64>(&cmd!("BF.ADD", "a", "x"));
    con.q::<Vec<i64>>(&cmd!("BF.INSERT", "b", "ITEMS", "x"));
    con.q::<Vec<i64>>(&cmd!("BF.MADD", "a", "x"));
    con.q::<i64>(&cmd!("BF.EXISTS", "a", "x"));
    let chunks = scandump(&mut con, "a");
    common::loadchunks(&mut con, "c", &chunks);
    let mut want = vec![
        ("bf.reserve", "a"),
        ("bf.add", "a"),
        ("bf.reserve", "b"),
        ("bf.add", "b"),
        ("bf.reserve", "c"),
        ("bf.loadchunk", "c"),
    ];
    want.extend(chunks.iter().skip(1).map(|_| ("bf.loadchunk", "c")));
    assert_eq!(ev.drain(), events(&want));
}

#[test]
fn warnings_are_not_repeated_after_a_restart() {
    require_own_server!();
    let mut s = Server::builder().command_aof().start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "k", "0.01", 100));
    add_n(&mut con, "k", "a", 75);
    assert_eq!(warning_lines(&s, "k"), 1);
    // The AOF replays the adds at startup: the crossing was reported when they first ran.
    s.restart(Stop::NoSave);
    let mut con = s.conn();
    assert_eq!(info_int(&mut con, "k", "ITEMS"), 75);
    assert_eq!(warning_lines(&s, "k"), 1);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 1);
    add_n(&mut con, "k", "b", 10);
    assert_eq!(warning_lines(&s, "k"), 1);
    // From an RDB file (DEBUG RELOAD saves one and loads it), likewise.
    con.ok(&cmd!("DEBUG", "RELOAD"));
    add_n(&mut con, "k", "c", 5);
    assert_eq!(warning_lines(&s, "k"), 1);
    assert_eq!(
        info_bf_i64(&mut con, "bf_capacity_warnings"),
        0,
        "counted since start"
    );
}

#[test]
fn the_warning_threshold_can_be_changed_or_turned_off() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    config_set(&mut con, &setting("bf-capacity-warning"), "0");
    con.ok(&cmd!("BF.RESERVE", "off", "0.01", 100));
    add_n(&mut con, "off", "a", 100);
    assert_eq!(warning_lines(&s, "off"), 0);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 0);
    config_set(&mut con, &setting("bf-capacity-warning"), "100");
    con.ok(&cmd!("BF.RESERVE", "full", "0.01", 100));
    add_n(&mut con, "full", "a", 99);
    assert_eq!(warning_lines(&s, "full"), 0);
    add_n(&mut con, "full", "b", 1);
    assert_eq!(warning_lines(&s, "full"), 1);
    assert!(s
        .log()
        .contains("Bloom filter 'full' reached 100% of its capacity"));
}

/// `bf_filters_over_warning` counts each filter by the threshold in force at its last write:
/// a CONFIG SET moves a filter across only when it is next written, whichever side of the old
/// and new thresholds that write leaves it on.
#[test]
fn a_filter_is_counted_over_the_new_threshold_from_its_next_write() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "k", "0.01", 100));
    con.ok(&cmd!("BF.RESERVE", "other", "0.01", 100));
    add_n(&mut con, "k", "a", 75);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 1);
    // Now under the threshold, but counted as of its last write until the next.
    config_set(&mut con, &setting("bf-capacity-warning"), "90");
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 1);
    // A write that leaves it under 90%, as it found it.
    add_n(&mut con, "k", "b", 5);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 0);
    // And back: 80 of 100 is over 70% before and after this write.
    add_n(&mut con, "other", "a", 80);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 0);
    config_set(&mut con, &setting("bf-capacity-warning"), "70");
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 0);
    add_n(&mut con, "other", "b", 1);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 1);
    // A present item changes nothing but is a write all the same.
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "k", "a-0")), 0);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 2);
}

// ---------------------------------------------------------------- INFO bf

#[test]
fn info_bf_sums_the_filters_layers_items_and_bytes() {
    require_own_server!();
    let s = Server::builder()
        .config("lazyfree-lazy-user-del", "no")
        .start();
    let mut con = s.conn();
    let check = |con: &mut redis::Connection, keys: &[&str]| {
        let info = info_bf(con);
        let n = |f: &str| info[f].parse::<u64>().unwrap();
        assert_eq!(n("bf_filters"), keys.len() as u64, "{info:?}");
        let mut layers = 0;
        let mut items = 0;
        let mut bits_bytes = 0;
        for k in keys {
            layers += info_int(con, k, "FILTERS") as u64;
            items += info_int(con, k, "ITEMS") as u64;
            bits_bytes += debug_layers(con, k)
                .iter()
                .map(|l| field(l, "bytes"))
                .sum::<u64>();
        }
        assert_eq!(n("bf_layers"), layers);
        assert_eq!(n("bf_items"), items);
        // The bit arrays plus a little bookkeeping per filter and layer, each allocation
        // rounded up to its allocator size class (by at most a quarter).
        let bytes = n("bf_bytes");
        assert!(
            bytes >= bits_bytes
                && bytes <= bits_bytes + bits_bytes / 4 + 256 * (keys.len() as u64 + layers),
            "{bytes} vs {bits_bytes}"
        );
    };
    check(&mut con, &[]);
    con.ok(&cmd!("BF.RESERVE", "a", "0.01", 100));
    add_n(&mut con, "a", "x", 500);
    con.q::<i64>(&cmd!("BF.ADD", "b", "x"));
    config_set(&mut con, &setting("bf-layout"), "classic");
    con.ok(&cmd!("BF.RESERVE", "c", "0.001", 1000));
    add_n(&mut con, "c", "y", 3000);
    let chunks = scandump(&mut con, "a");
    common::loadchunks(&mut con, "d", &chunks);
    con.q::<i64>(&cmd!("COPY", "c", "e"));
    con.ok(&cmd!("BF.RESERVE", "big", "0.001", 10_000_000));
    check(&mut con, &["a", "b", "c", "d", "e", "big"]);
    // DUMP / RESTORE, DEBUG RELOAD, a restart-free reload.
    let payload: Vec<u8> = con.q(&cmd!("DUMP", "c"));
    con.q::<i64>(&cmd!("DEL", "c"));
    check(&mut con, &["a", "b", "d", "e", "big"]);
    con.ok(&cmd!("RESTORE", "c", 0, payload));
    con.ok(&cmd!("DEBUG", "RELOAD"));
    check(&mut con, &["a", "b", "c", "d", "e", "big"]);
    // Overwritten by another type, freed in the background (UNLINK of a large filter).
    con.ok(&cmd!("SET", "b", "string"));
    con.q::<i64>(&cmd!("UNLINK", "big"));
    wait_until(Duration::from_secs(10), "the background free", || {
        info_bf_i64(&mut con, "bf_filters") == 4
    });
    check(&mut con, &["a", "c", "d", "e"]);
    con.ok(&cmd!("FLUSHALL", "ASYNC"));
    wait_until(Duration::from_secs(10), "FLUSHALL ASYNC", || {
        info_bf_i64(&mut con, "bf_filters") == 0
    });
    check(&mut con, &[]);
    assert_eq!(info_bf_i64(&mut con, "bf_bytes"), 0);
    assert_eq!(info_bf_i64(&mut con, "bf_items"), 0);
}

/// Each structure counts its own refusals: a CF.RESERVE refused by the memory limit is a
/// cuckoo refusal, not one of Bloom's `bf_refused_create_over_limit` (which counted it once).
#[test]
fn a_refused_cf_reserve_is_not_counted_among_bloom_s_refusals() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    config_set(&mut con, &setting("bf-max-filter-memory"), "64kb");
    let refused = con.err_text(&cmd!("CF.RESERVE", "huge", 10_000_000));
    assert!(refused.starts_with("ERR"), "{refused}");
    let info = info_bf(&mut con);
    assert_eq!(info["bf_refused_create_over_limit"], "0");
    assert_eq!(info["bf_refused_adds"], "0");
    assert_eq!(info["bf_cf_filters"], "0");
    // A full non-scaling cuckoo filter's refusal is the cuckoo figures' alone.
    con.ok(&cmd!(
        "CF.RESERVE",
        "fixed",
        2,
        "EXPANSION",
        0,
        "BUCKETSIZE",
        1
    ));
    let mut full = 0;
    for i in 0..20 {
        if let Value::Array(xs) = con.raw(&cmd!("CF.INSERT", "fixed", "ITEMS", format!("i{i}"))) {
            full += xs.iter().filter(|x| **x == Value::Int(-1)).count();
        }
    }
    assert!(full > 0);
    let info = info_bf(&mut con);
    assert_eq!(info["bf_cf_refused_full"], full.to_string());
    assert_eq!(info["bf_refused_full"], "0");
    assert_eq!(info["bf_refused_create_over_limit"], "0");
    // Bloom's own refusals still count there.
    assert!(con
        .err_text(&cmd!("BF.RESERVE", "huge", "0.01", 1_000_000))
        .starts_with("ERR Insufficient memory to create filter"));
    assert_eq!(info_bf_i64(&mut con, "bf_refused_create_over_limit"), 1);
}

#[test]
fn info_bf_counts_refusals_and_filters_over_the_threshold() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    config_set(&mut con, &setting("bf-max-filter-memory"), "64kb");
    assert!(con
        .err_text(&cmd!("BF.RESERVE", "huge", "0.01", 1_000_000))
        .starts_with("ERR Insufficient memory to create filter"));
    let v = con.raw(&cmd!(
        "BF.INSERT",
        "huge",
        "CAPACITY",
        1_000_000,
        "ITEMS",
        "a"
    ));
    assert!(error_of(&v).is_some(), "{v:?}");
    con.ok(&cmd!("BF.RESERVE", "grow", "0.01", 10_000));
    let mut grow_refusals = 0;
    for i in 0..40 {
        let all = items(&format!("g{i}"), 1000);
        let mut c = cmd!("BF.MADD", "grow");
        for item in &all {
            c.arg(item.as_slice());
        }
        if let Value::Array(xs) = con.raw(&c) {
            if xs.last().and_then(error_of).is_some() {
                grow_refusals += 1;
            }
        }
    }
    assert!(grow_refusals > 0);
    con.ok(&cmd!("BF.RESERVE", "fixed", "0.01", 1, "NONSCALING"));
    con.q::<i64>(&cmd!("BF.ADD", "fixed", "a"));
    for i in 0..3 {
        con.err_text(&cmd!("BF.ADD", "fixed", format!("more-{i}")));
    }
    let info = info_bf(&mut con);
    assert_eq!(info["bf_refused_create_over_limit"], "2");
    assert_eq!(
        info["bf_refused_grow_over_limit"],
        grow_refusals.to_string()
    );
    assert_eq!(info["bf_refused_full"], "3");
    assert_eq!(info["bf_refused_adds"], (grow_refusals + 3).to_string());
    // Over the threshold: "grow" (full, its growth refused) and "fixed" (1 of 1).
    assert_eq!(info["bf_filters_over_warning"], "2");
    con.q::<i64>(&cmd!("DEL", "fixed"));
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 1);
    // Once it may grow, its next add makes a new, nearly empty layer.
    config_set(&mut con, &setting("bf-max-filter-memory"), "4gb");
    add_n(&mut con, "grow", "more", 10);
    assert_eq!(info_bf_i64(&mut con, "bf_filters_over_warning"), 0);
}

#[test]
fn info_bf_shows_the_settings_in_force() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let info = info_bf(&mut con);
    for (field, value) in [
        ("bf_error_rate", "0.01"),
        ("bf_initial_size", "100"),
        ("bf_expansion_factor", "2"),
        ("bf_max_filter_memory", "4294967296"),
        ("bf_layout", "blocked"),
        ("bf_capacity_warning", "70"),
    ] {
        assert_eq!(info[field], value, "{field}");
    }
    config_set(&mut con, &setting("bf-error-rate"), "0.0005");
    config_set(&mut con, &setting("bf-initial-size"), "777");
    config_set(&mut con, &setting("bf-expansion-factor"), "0");
    config_set(&mut con, &setting("bf-max-filter-memory"), "10mb");
    config_set(&mut con, &setting("bf-layout"), "classic");
    config_set(&mut con, &setting("bf-capacity-warning"), "85");
    let info = info_bf(&mut con);
    for (field, value) in [
        ("bf_error_rate", "0.0005"),
        ("bf_initial_size", "777"),
        ("bf_expansion_factor", "0"),
        ("bf_max_filter_memory", "10485760"),
        ("bf_layout", "classic"),
        ("bf_capacity_warning", "85"),
    ] {
        assert_eq!(info[field], value, "{field}");
    }
    // The sections: INFO bf shows both, each can be asked alone, plain INFO shows neither.
    let text: String = con.q(&cmd!("INFO", "bf"));
    assert!(
        text.contains("# bf_stats") && text.contains("# bf_settings"),
        "{text}"
    );
    let stats: String = con.q(&cmd!("INFO", "bf_stats"));
    assert!(
        stats.contains("bf_filters:") && !stats.contains("bf_layout:"),
        "{stats}"
    );
    let plain: String = con.q(&cmd!("INFO"));
    assert!(!plain.contains("bf_filters:"));
}

// ---------------------------------------------------------------- ACL

#[test]
fn acl_categories_follow_what_the_server_supports() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let (major, minor) = version(&mut con);
    let categories: Vec<String> = con.q(&cmd!("ACL", "CAT"));
    let as_user = |user: &str| {
        let mut c = s.conn();
        c.ok(&cmd!("AUTH", user, "pw"));
        c
    };
    // Redis 7.4 added module ACL categories; Valkey 8 has them too (it reports
    // redis_version 7.2.4 for compatibility, so it is asked by name).
    if (major, minor) >= (7, 4) || common::server().is_valkey() {
        // RedisBloom's documented category for the BF commands, the one users grant.
        assert_eq!(table::bf::CATEGORY, "bloom");
        for (category, _) in table::TABLES {
            assert!(categories.iter().any(|c| c == category), "{categories:?}");
        }
        // Each command's categories, as COMMAND INFO lists them (Redis 7.4's ACL CAT does not
        // list module commands under any category, though ACL rules apply them).
        let tables = table::TABLES.iter();
        for (category, spec) in tables.flat_map(|(c, specs)| specs.iter().map(move |s| (c, s))) {
            let name = spec.name.to_ascii_uppercase();
            let v = con.raw(&cmd!("COMMAND", "INFO", &name));
            let Value::Array(outer) = &v else {
                panic!("{v:?}")
            };
            let Value::Array(info) = &outer[0] else {
                panic!("{v:?}")
            };
            let cats: Vec<String> = redis::from_redis_value(info[6].clone()).unwrap();
            if name.starts_with("BF.") {
                assert!(cats.iter().any(|c| c == "@bloom"), "{name}: {cats:?}");
            }
            if name.starts_with("CF.") {
                assert!(cats.iter().any(|c| c == "@cuckoo"), "{name}: {cats:?}");
            }
            let rw = if spec.is_write() { "@write" } else { "@read" };
            let speed = if spec.is_fast() { "@fast" } else { "@slow" };
            let mut wanted = vec![format!("@{category}"), rw.into(), speed.into()];
            let mut got = cats.clone();
            wanted.sort();
            got.sort();
            assert_eq!(
                got, wanted,
                "{name}: its table's category and its flags' categories"
            );
        }
        con.ok(&cmd!(
            "ACL", "SETUSER", "nobloom", "on", ">pw", "~*", "+@all", "-@bloom"
        ));
        con.ok(&cmd!(
            "ACL",
            "SETUSER",
            "bloomonly",
            "on",
            ">pw",
            "~*",
            "+@bloom"
        ));
        let mut no = as_user("nobloom");
        let e = no.err_text(&cmd!("BF.ADD", "k", "x"));
        assert!(e.starts_with("NOPERM"), "{e}");
        no.ok(&cmd!("SET", "s", "v"));
        let mut only = as_user("bloomonly");
        assert_eq!(only.q::<i64>(&cmd!("BF.ADD", "k", "x")), 1);
        assert!(only.err_text(&cmd!("GET", "s")).starts_with("NOPERM"));
        // Each structure's category covers its own commands only.
        assert_eq!(no.q::<i64>(&cmd!("CF.ADD", "c", "x")), 1);
        assert!(only
            .err_text(&cmd!("CF.ADD", "c", "x"))
            .starts_with("NOPERM"));
        con.ok(&cmd!(
            "ACL", "SETUSER", "nocuckoo", "on", ">pw", "~*", "+@all", "-@cuckoo"
        ));
        let mut nocf = as_user("nocuckoo");
        let e = nocf.err_text(&cmd!("CF.EXISTS", "c", "x"));
        assert!(e.starts_with("NOPERM"), "{e}");
        assert_eq!(nocf.q::<i64>(&cmd!("BF.EXISTS", "k", "x")), 1);
    } else {
        // Redis 7.0 and 7.2: no @bloom; on 7.0 module commands are in no category at all,
        // so a user granted every category still cannot run them; granting by name works.
        for (category, _) in table::TABLES {
            assert!(!categories.iter().any(|c| c == category), "{categories:?}");
            let e = con.err_text(&cmd!("ACL", "SETUSER", "x", format!("+@{category}")));
            assert!(e.contains("Unknown command or category name in ACL"), "{e}");
        }
        let mut args = vec!["ACL", "SETUSER", "cats", "on", ">pw", "~*"];
        let grants: Vec<String> = categories.iter().map(|c| format!("+@{c}")).collect();
        args.extend(grants.iter().map(String::as_str));
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        con.ok(&c);
        con.ok(&cmd!(
            "ACL", "SETUSER", "byname", "on", ">pw", "~*", "+bf.add", "+bf.info"
        ));
        let mut cats = as_user("cats");
        cats.ok(&cmd!("SET", "s", "v"));
        let refused = cats.raw(&cmd!("BF.ADD", "k", "x"));
        if (major, minor) < (7, 2) {
            let e = error_of(&refused).unwrap_or_default();
            assert!(e.starts_with("NOPERM"), "{refused:?}");
        }
        let mut byname = as_user("byname");
        assert_eq!(byname.q::<i64>(&cmd!("BF.ADD", "k2", "x")), 1);
        assert!(byname
            .err_text(&cmd!("BF.EXISTS", "k2", "x"))
            .starts_with("NOPERM"));
        if (major, minor) < (7, 2) {
            assert!(s.log().contains("ACL categories: none"));
        }
    }
}

// ---------------------------------------------------------------- COMMAND DOCS / INFO

/// A RESP2 `[name, value, name, value...]` array as pairs.
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(xs) => xs
            .chunks(2)
            .map(|p| (text_of(&p[0]).unwrap_or_default(), p[1].clone()))
            .collect(),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| (text_of(k).unwrap_or_default(), v.clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

fn get<'a>(pairs: &'a [(String, Value)], name: &str) -> &'a Value {
    &pairs
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name} in {pairs:?}"))
        .1
}

/// The names of a command's top-level arguments, as its table lists them.
fn arg_names(spec: &table::CommandSpec) -> Vec<&'static str> {
    spec.args.iter().map(|a| a.name).collect()
}

/// What clients of RedisBloom see of each command, written out here rather than read from the
/// command table: its arity as `COMMAND INFO` reports it, its arguments as `COMMAND DOCS`
/// names them, whether it writes and whether it is fast. The tests below check the server
/// against the table; this pins the table itself, so a change to it that users would see
/// (a flag, an arity, an argument) fails a test. BF.MERGE and BF.WINDOWADVANCE are
/// layerbloom's own.
const WHAT_USERS_SEE: [(&str, i32, &[&str], bool, bool); 13] = [
    (
        "bf.reserve",
        -4,
        &[
            "key",
            "error_rate",
            "capacity",
            "expansion",
            "nonscaling",
            "window",
            "slices",
        ],
        true,
        false,
    ),
    ("bf.add", 3, &["key", "item"], true, false),
    ("bf.madd", -3, &["key", "item"], true, false),
    (
        "bf.insert",
        -4,
        &[
            "key",
            "capacity",
            "error",
            "expansion",
            "nocreate",
            "nonscaling",
            "window",
            "slices",
            "item",
        ],
        true,
        false,
    ),
    ("bf.exists", 3, &["key", "item"], false, true),
    ("bf.mexists", -3, &["key", "item"], false, true),
    ("bf.info", -2, &["key", "single_value"], false, true),
    ("bf.card", 2, &["key"], false, true),
    ("bf.scandump", 3, &["key", "iterator"], false, false),
    ("bf.loadchunk", 4, &["key", "iterator", "data"], true, false),
    ("bf.merge", -3, &["destination", "source"], true, false),
    ("bf.debug", 2, &["key"], false, false),
    ("bf.windowadvance", -2, &["key", "slice"], true, false),
];

/// The same for the CF commands (`error` is layerbloom's own: the ERROR extension).
const WHAT_CF_USERS_SEE: [(&str, i32, &[&str], bool, bool); 14] = [
    (
        "cf.reserve",
        -3,
        &[
            "key",
            "capacity",
            "bucketsize",
            "maxiterations",
            "expansion",
            "error",
        ],
        true,
        false,
    ),
    ("cf.add", 3, &["key", "item"], true, false),
    ("cf.addnx", 3, &["key", "item"], true, false),
    (
        "cf.insert",
        -4,
        &["key", "capacity", "error", "nocreate", "item"],
        true,
        false,
    ),
    (
        "cf.insertnx",
        -4,
        &["key", "capacity", "error", "nocreate", "item"],
        true,
        false,
    ),
    ("cf.exists", 3, &["key", "item"], false, true),
    ("cf.mexists", -3, &["key", "item"], false, true),
    ("cf.del", 3, &["key", "item"], true, true),
    ("cf.count", 3, &["key", "item"], false, true),
    ("cf.info", -2, &["key", "single_value"], false, true),
    ("cf.scandump", 3, &["key", "iterator"], false, false),
    ("cf.loadchunk", 4, &["key", "iterator", "data"], true, false),
    ("cf.compact", 2, &["key"], true, false),
    ("cf.debug", 2, &["key"], false, false),
];

/// A table as `(name, arity, argument names, writes, fast)` rows.
fn what_the_table_says(
    commands: &[table::CommandSpec],
) -> Vec<(&'static str, i32, Vec<&'static str>, bool, bool)> {
    commands
        .iter()
        .map(|c| {
            (
                c.name,
                c.arity.redis(),
                arg_names(c),
                c.is_write(),
                c.is_fast(),
            )
        })
        .collect()
}

#[test]
fn the_command_table_says_what_users_of_redisbloom_rely_on() {
    for (commands, pinned, category) in [
        (
            table::bf::COMMANDS,
            &WHAT_USERS_SEE[..],
            table::bf::CATEGORY,
        ),
        (
            table::cf::COMMANDS,
            &WHAT_CF_USERS_SEE[..],
            table::cf::CATEGORY,
        ),
    ] {
        let want: Vec<(&str, i32, Vec<&str>, bool, bool)> = pinned
            .iter()
            .map(|&(name, arity, args, write, fast)| (name, arity, args.to_vec(), write, fast))
            .collect();
        assert_eq!(what_the_table_says(commands), want, "{category}");
    }
    assert_eq!(table::bf::CATEGORY, "bloom", "RedisBloom's ACL category");
    assert_eq!(table::cf::CATEGORY, "cuckoo", "RedisBloom 8's ACL category");
    assert_eq!(
        table::TABLES.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        ["bloom", "cuckoo"],
        "every structure's table is in the tests' list"
    );
}

#[test]
fn command_docs_describe_every_bf_and_cf_command() {
    let s = Server::start();
    let mut con = s.conn();
    assert_eq!(
        table::commands().count(),
        13 + 14,
        "every BF and CF command is in the tables"
    );
    for spec in table::commands() {
        let name = spec.name.to_ascii_uppercase();
        let name = name.as_str();
        let args = arg_names(spec);
        let v = con.raw(&cmd!("COMMAND", "DOCS", name));
        let top = pairs(&v);
        assert_eq!(top.len(), 1, "COMMAND DOCS {name}: {v:?}");
        let doc = pairs(&top[0].1);
        let summary = text_of(get(&doc, "summary")).unwrap();
        assert!(summary.len() > 20, "{name}: {summary}");
        assert_eq!(summary, spec.summary, "{name}");
        let complexity = text_of(get(&doc, "complexity")).unwrap();
        assert!(complexity.starts_with("O("), "{name}: {complexity}");
        assert_eq!(complexity, spec.complexity, "{name}");
        assert_eq!(text_of(get(&doc, "group")).as_deref(), Some("module"));
        assert_eq!(text_of(get(&doc, "module")).as_deref(), Some("bf"));
        if let Some(want) = spec.since {
            let since = text_of(get(&doc, "since")).unwrap();
            assert!(since == "1.0.0" || since == "2.4.4", "{name}: {since}");
            assert_eq!(since, want, "{name}");
        } else {
            assert!(doc.iter().all(|(k, _)| k != "since"), "{name}: {doc:?}");
        }
        let Value::Array(arguments) = get(&doc, "arguments") else {
            panic!("{name}: no arguments")
        };
        let names: Vec<String> = arguments
            .iter()
            .map(|a| text_of(get(&pairs(a), "name")).unwrap())
            .collect();
        assert_eq!(names, args, "{name}");
        let first = pairs(&arguments[0]);
        assert_eq!(text_of(get(&first, "type")).as_deref(), Some("key"));
        assert_eq!(get(&first, "key_spec_index"), &Value::Int(0));
    }
    // Option words are tokens, repeated items are "multiple".
    let v = con.raw(&cmd!("COMMAND", "DOCS", "BF.INSERT"));
    let doc = pairs(&pairs(&v)[0].1);
    let Value::Array(arguments) = get(&doc, "arguments") else {
        panic!()
    };
    let items = pairs(arguments.last().unwrap());
    assert_eq!(text_of(get(&items, "token")).as_deref(), Some("ITEMS"));
    let flags: Vec<String> = redis::from_redis_value(get(&items, "flags").clone()).unwrap();
    assert_eq!(flags, ["multiple"]);
    let nocreate = pairs(&arguments[4]);
    assert_eq!(
        text_of(get(&nocreate, "type")).as_deref(),
        Some("pure-token")
    );
    let flags: Vec<String> = redis::from_redis_value(get(&nocreate, "flags").clone()).unwrap();
    assert_eq!(flags, ["optional"]);
}

#[test]
fn command_info_gives_arity_flags_and_key_specs() {
    let s = Server::start();
    let mut con = s.conn();
    for entry in table::commands() {
        let name = entry.name.to_ascii_uppercase();
        let name = name.as_str();
        let v = con.raw(&cmd!("COMMAND", "INFO", name));
        let Value::Array(outer) = &v else {
            panic!("{v:?}")
        };
        let Value::Array(info) = &outer[0] else {
            panic!("{name}: {v:?}")
        };
        assert_eq!(text_of(&info[0]).unwrap().to_uppercase(), name);
        assert_eq!(
            info[1],
            Value::Int(i64::from(entry.arity.redis())),
            "{name} arity"
        );
        let flags: Vec<String> = redis::from_redis_value(info[2].clone()).unwrap();
        let write = entry.is_write();
        // Every flag of the table, as COMMAND INFO spells it.
        for flag in entry.flags.split(' ') {
            let shown = flag.replace('-', "");
            assert!(flags.contains(&shown), "{name}: {flag} not in {flags:?}");
        }
        assert_eq!(
            flags.contains(&"write".to_string()),
            write,
            "{name} {flags:?}"
        );
        assert_eq!(
            flags.contains(&"readonly".to_string()),
            !write,
            "{name} {flags:?}"
        );
        // First key, last key, step.
        let (first, last, step) = entry.key.key_range();
        assert_eq!(
            info[3..6],
            [
                Value::Int(first.into()),
                Value::Int(last.into()),
                Value::Int(step.into())
            ],
            "{name}"
        );
        // The first key spec: the key at index 1, read-only, read-write, or overwritten
        // (BF.MERGE's destination; its sources' spec has a test of its own, tests/merge.rs).
        let Value::Array(specs) = &info[8] else {
            panic!("{name}: {info:?}")
        };
        let replace = entry.key == table::KeyAccess::Replace;
        assert_eq!(specs.len(), if replace { 2 } else { 1 }, "{name}");
        let spec = pairs(&specs[0]);
        let spec_flags: Vec<String> = redis::from_redis_value(get(&spec, "flags").clone()).unwrap();
        let access = match (write, replace) {
            (true, true) => "OW",
            (true, false) => "RW",
            (false, _) => "RO",
        };
        assert!(
            spec_flags.contains(&access.to_string()),
            "{name}: {spec_flags:?}"
        );
        assert_eq!(entry.key.writes(), write, "{name}");
        let detail = match entry.key {
            table::KeyAccess::Read => "access",
            table::KeyAccess::ReadMeta => "RO",
            table::KeyAccess::Insert => "insert",
            table::KeyAccess::Update | table::KeyAccess::Replace => "update",
        };
        assert!(
            spec_flags.iter().any(|f| f.eq_ignore_ascii_case(detail)),
            "{name}: {detail} not in {spec_flags:?}"
        );
        let begin = pairs(get(&spec, "begin_search"));
        assert_eq!(text_of(get(&begin, "type")).as_deref(), Some("index"));
        assert_eq!(get(&pairs(get(&begin, "spec")), "index"), &Value::Int(1));
    }
    let keys: Vec<String> = con.q(&cmd!("COMMAND", "GETKEYS", "BF.MADD", "the-key", "a", "b"));
    assert_eq!(keys, ["the-key"]);
    let keys: Vec<String> = con.q(&cmd!(
        "COMMAND",
        "GETKEYS",
        "CF.INSERT",
        "the-key",
        "CAPACITY",
        "9",
        "ITEMS",
        "a"
    ));
    assert_eq!(keys, ["the-key"]);
    // Redis checks the arity now; the reply is its standard one, naming the command as
    // registered (lower case, as RedisBloom registers it).
    assert_eq!(
        con.err_text(&cmd!("BF.MADD", "k")),
        "ERR wrong number of arguments for 'bf.madd' command"
    );
}

#[test]
fn key_names_with_format_characters_are_logged_verbatim() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    // The server log takes a printf format: a key name must never be read as one.
    let key = "pct%s%s%s%s%s%s%s%s%n%x";
    con.ok(&cmd!("BF.RESERVE", key, "0.5", 10));
    add_n(&mut con, key, "x", 9);
    common::assert_pong(&mut con);
    let log = s.log();
    assert!(
        log.contains(&format!("filter '{key}' asked for error rate 0.5")),
        "{log}"
    );
    assert!(
        log.contains(&format!("Bloom filter '{key}' reached 70% of its capacity")),
        "{log}"
    );
}

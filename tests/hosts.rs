//! What differs between the servers the module runs on, asked of each server: setting names
//! (Redis 8's unprefixed names and their Redis 7 aliases), numbers parsed as the host parses
//! them, and a second module named `bf`.

use crate::common;

use std::fs;

use common::{bf_info, config_get, server, Exec, Server};

/// Settings in the Redis 7 spelling, as a redis.conf written for Redis 7 has them.
const REDIS7_SETTINGS: [(&str, &str); 3] = [
    ("bf.bf-error-rate", "0.05"),
    ("bf.bf-max-filter-memory", "1gb"),
    ("bf.bf-initial-size", "777"),
];

/// Checks the settings of [`REDIS7_SETTINGS`] were applied, under every spelling the server
/// documents: the prefixed one everywhere, the unprefixed one too on Redis 8.
fn assert_redis7_settings_applied(s: &Server) {
    let mut con = s.conn();
    let mut spellings = vec!["bf."];
    if server().is_redis_at_least(8, 0) {
        spellings.push("");
    }
    for prefix in spellings {
        let get =
            |con: &mut redis::Connection, name: &str| config_get(con, &format!("{prefix}{name}"));
        assert_eq!(get(&mut con, "bf-error-rate"), "0.05");
        assert_eq!(get(&mut con, "bf-max-filter-memory"), "1073741824");
        assert_eq!(get(&mut con, "bf-initial-size"), "777");
    }
    // Applied, not only shown: an auto-created filter takes the default capacity.
    con.q::<i64>(&cmd!("BF.ADD", "auto", "x"));
    assert_eq!(bf_info(&mut con, "auto").capacity, 777);
}

#[test]
fn a_redis7_command_line_starts_every_server_with_its_settings() {
    require_own_server!();
    let mut b = Server::builder();
    for (name, value) in REDIS7_SETTINGS {
        b = b.config(name, value);
    }
    let s = b
        .try_start()
        .unwrap_or_else(|why| panic!("{} refused Redis 7 settings {why}", server()));
    assert_redis7_settings_applied(&s);
}

#[test]
fn a_redis7_config_file_starts_every_server_with_its_settings() {
    require_own_server!();
    let dir = std::env::temp_dir().join(format!("layerbloom-r7conf-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("redis7.conf");
    let text: String = REDIS7_SETTINGS
        .iter()
        .map(|(name, value)| format!("{name} {value}\n"))
        .collect();
    fs::write(&conf, text).unwrap();
    let started = Server::builder()
        .config("include", &conf.display().to_string())
        .try_start();
    let _ = fs::remove_dir_all(&dir);
    let s =
        started.unwrap_or_else(|why| panic!("{} refused a Redis 7 config file {why}", server()));
    assert_redis7_settings_applied(&s);
}

#[test]
fn redis8_takes_the_unprefixed_names_and_both_spellings_name_one_setting() {
    require_own_server!();
    skip_unless!(
        server().is_redis_at_least(8, 0),
        "unprefixed module settings are a Redis 8 feature (Redis 7 and Valkey prefix them)"
    );
    let s = Server::builder()
        .config("bf-error-rate", "0.02")
        .config("bf-max-filter-memory", "2mb")
        .start();
    let mut con = s.conn();
    assert_eq!(config_get(&mut con, "bf-error-rate"), "0.02");
    assert_eq!(config_get(&mut con, "bf.bf-error-rate"), "0.02");
    assert_eq!(config_get(&mut con, "bf.bf-max-filter-memory"), "2097152");
    // One setting under two names: a change under either shows under both.
    con.ok(&cmd!("CONFIG", "SET", "bf.bf-initial-size", "55"));
    assert_eq!(config_get(&mut con, "bf-initial-size"), "55");
    con.ok(&cmd!("CONFIG", "SET", "bf-layout", "classic"));
    assert_eq!(config_get(&mut con, "bf.bf-layout"), "classic");
}

/// Error-rate spellings in (0, 1) that servers' number parsers may read differently:
/// hexadecimal floats (Valkey 9 refuses them), a `+`, leading zeros, a bare `.5`.
const RATE_SPELLINGS: &[&str] = &[
    "0x1p-7",
    "0X1P-3",
    "0x.8",
    "-0x1p-7",
    "0.0078125",
    "+0.5",
    "00.1",
    ".5",
    "1e-3",
];

/// Whether the server's own double parser reads `text`: `ZADD` parses its score with the same
/// routine the module API's `StringToDouble` calls.
fn host_reads(con: &mut redis::Connection, text: &str) -> bool {
    let v = con.raw(&cmd!("ZADD", "host:probe", text, "m"));
    common::error_of(&v).is_none()
}

#[test]
fn error_rates_are_numbers_exactly_where_the_server_reads_them_as_numbers() {
    let s = Server::start();
    let mut con = s.conn();
    let keys = s.keys("hosts_rates");
    let mut differs = Vec::new();
    for (i, rate) in RATE_SPELLINGS.iter().enumerate() {
        let host = host_reads(&mut con, rate);
        let in_range = host && !rate.starts_with('-');
        let bf = keys.k(&format!("bf{i}"));
        let reserve = con.raw(&cmd!("BF.RESERVE", &bf, *rate, 100));
        let bf_ok = common::error_of(&reserve).is_none();
        let insert = con.raw(&cmd!(
            "BF.INSERT",
            keys.k(&format!("bi{i}")),
            "ERROR",
            *rate,
            "ITEMS",
            "a"
        ));
        let insert_ok = common::error_of(&insert).is_none();
        let cf = keys.k(&format!("cf{i}"));
        let cf_reply = con.raw(&cmd!("CF.RESERVE", &cf, 100, "ERROR", *rate));
        let cf_ok = common::error_of(&cf_reply).is_none();
        for (what, ok) in [
            ("BF.RESERVE", bf_ok),
            ("BF.INSERT", insert_ok),
            ("CF.RESERVE ERROR", cf_ok),
        ] {
            if ok != in_range {
                differs.push(format!(
                    "{what} {rate:?}: accepted {ok}, the server's parser reads it {host} \
                     ({reserve:?} / {insert:?} / {cf_reply:?})"
                ));
            }
        }
    }
    // Hexadecimal floats are where the servers differ: Valkey 9 refuses them.
    if server().is_valkey() && server().version.0 >= 9 {
        assert!(!host_reads(&mut con, "0x1p-7"), "Valkey 9 read a hex float");
    }
    assert!(
        differs.is_empty(),
        "on {}:\n{}",
        server(),
        differs.join("\n")
    );
}

#[test]
fn the_error_rate_setting_is_a_number_exactly_where_the_server_reads_one() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let name = if server().is_redis_at_least(8, 0) {
        "bf-error-rate"
    } else {
        "bf.bf-error-rate"
    };
    for rate in RATE_SPELLINGS.iter().filter(|r| !r.starts_with('-')) {
        let host = host_reads(&mut con, rate);
        let v = con.raw(&cmd!("CONFIG", "SET", name, *rate));
        assert_eq!(
            common::error_of(&v).is_none(),
            host,
            "CONFIG SET {name} {rate:?} on {}: {v:?}",
            server()
        );
    }
}

/// The line layerbloom logs when another module named `bf` (RedisBloom) is loaded already.
const NAME_TAKEN: &str = "layerbloom: not loading: another module named 'bf' is already loaded";

/// A server with RedisBloom loaded, or `None` (said on stderr) where RedisBloom's module is
/// missing or does not load on the server under test.
fn redisbloom_server() -> Option<Server> {
    let Some(path) = common::redisbloom_path() else {
        eprintln!("skipped: RedisBloom's module is not available");
        return None;
    };
    match Server::builder().module(&path).try_start() {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!(
                "skipped on {}: RedisBloom does not load here {why}",
                server()
            );
            None
        }
    }
}

#[test]
fn module_load_beside_redisbloom_is_refused_with_the_reason_in_the_log() {
    require_own_server!();
    let Some(s) = redisbloom_server() else {
        return;
    };
    let mut con = s.conn();
    let ours = common::module_path().display().to_string();
    let e = con.err_text(&cmd!("MODULE", "LOAD", &ours));
    assert!(e.contains("ERR"), "{e}");
    common::assert_pong(&mut con);
    let log = s.log();
    let line = log
        .lines()
        .find(|l| l.contains(NAME_TAKEN))
        .unwrap_or_else(|| panic!("no reason in the log:\n{log}"));
    for what in [
        "RedisBloom",
        "remove",
        "loadmodule",
        "load layerbloom alone",
    ] {
        assert!(line.contains(what), "{what}: {line}");
    }
    // RedisBloom still serves, alone.
    let modules = format!("{:?}", con.raw(&cmd!("MODULE", "LIST")));
    assert!(modules.contains("redisbloom"), "{modules}");
    assert!(!modules.contains("liblayerbloom"), "{modules}");
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "k", "x")), 1);
}

#[test]
fn a_server_starting_with_redisbloom_and_layerbloom_says_why_it_stops() {
    require_own_server!();
    // Only where RedisBloom loads on this server at all.
    if redisbloom_server().is_none() {
        return;
    }
    let path = common::redisbloom_path().unwrap();
    let ours = common::module_path().display().to_string();
    let started = Server::builder()
        .module(&path)
        .config("loadmodule", &ours)
        .try_start();
    let why = match started {
        Ok(_) => panic!("{} started with two modules named bf", server()),
        Err(why) => why,
    };
    assert!(why.contains(NAME_TAKEN), "no reason in the log:\n{why}");
}

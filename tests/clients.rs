//! The clients applications use, unchanged, against layerbloom:
//!
//! - redis-py's `r.bf()` (tests/clients/redis_py_bf.py) and `r.cf()`
//!   (tests/clients/redis_py_cf.py), in a virtualenv this test creates
//!   under `target/clients-venv` with the pinned tests/clients/requirements.txt (PyPI);
//! - node-redis's `client.bf.*` and `client.cf.*` (@redis/bloom; tests/clients/node_redis_bf.mjs
//!   and node_redis_cf.mjs), installed with
//!   `npm ci` under `target/clients-node` from the pinned tests/clients/node/package-lock.json;
//! - the Rust `redis` crate's Bloom commands (its `bloom` feature: `bf_*` methods, `BF.INFO`
//!   parsed into `BloomFilterInfoTypeResponse`s, `BloomFilterDumpIterator`); it has no cuckoo
//!   commands, only `ValueType::CuckooFilter` for TYPE's `MBbloomCF`;
//! - go-redis's BF.INFO contract (it cannot be fetched here): its `BFInfo` reader, mirrored
//!   from its documented behaviour, must read layerbloom's replies.
//!
//! All also run against `REDIS_URL` (a container, say), using keys under their own prefix.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{redisbloom_path, Exec, Server};
use redis::bloom::BloomFilterInfoTypeResponse;
use redis::bloom::{
    BloomFilterDumpIterator, BloomFilterInfoType, BloomFilterInsertOptions,
    BloomFilterScalingOptions,
};
use redis::{Commands, Value, ValueType};

/// `BF.INFO key` as the crate parses it: field name -> number.
type Info = std::collections::HashMap<String, BloomFilterInfoTypeResponse>;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `python3` can be run at all.
fn python3_exists() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The virtualenv with the pinned client, created (and the client installed) on first use or
/// when the requirements change. Once per run: the BF and CF tests run in parallel,
/// and two installs into one directory break each other on a fresh checkout.
fn client_venv() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(install_client_venv).clone()
}

fn install_client_venv() -> PathBuf {
    let venv = repo().join("target/clients-venv");
    let requirements = repo().join("tests/clients/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).expect("tests/clients/requirements.txt");
    let stamp = venv.join("installed-requirements.txt");
    let python = venv.join("bin/python");
    if python.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return venv;
    }
    let _ = std::fs::remove_dir_all(&venv);
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .expect("cannot run python3");
    assert!(
        made.status.success(),
        "python3 -m venv failed (on Debian/Ubuntu install python3-venv; .ci/run does):\n{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&requirements)
        .output()
        .expect("cannot run the virtualenv's python");
    assert!(
        pip.status.success(),
        "pip install -r tests/clients/requirements.txt failed:\n{}{}",
        String::from_utf8_lossy(&pip.stdout),
        String::from_utf8_lossy(&pip.stderr)
    );
    std::fs::write(&stamp, wanted).expect("cannot write the venv stamp");
    venv
}

/// Runs one of the redis-py scripts against a fresh server; `min_checks` guards against a
/// script that silently stopped checking.
fn run_redis_py(script: &str, prefix: &str, min_checks: usize) {
    if !python3_exists() {
        eprintln!(
            "skipped: python3 is not installed, so redis-py (the Python client) cannot be \
             tested; install python3 and python3-venv to run this test"
        );
        return;
    }
    let venv = client_venv();
    let s = Server::start();
    let _keys = s.keys(prefix);
    let out = Command::new(venv.join("bin/python"))
        .arg(repo().join("tests/clients").join(script))
        .arg(s.url())
        .arg(prefix)
        .output()
        .expect("cannot run the redis-py script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "redis-py script {script} failed:\n{stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("redis-py ") && last.ends_with(" passed, 0 failed"),
        "{stdout}"
    );
    let passed: usize = last
        .split_whitespace()
        .rev()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {last:?}"));
    assert!(passed >= min_checks, "only {passed} checks ran:\n{stdout}");
}

#[test]
fn redis_py_drives_every_bf_command() {
    run_redis_py("redis_py_bf.py", "clients:redis-py", 60);
}

/// redis-py's `r.cf()` over RESP2 and RESP3: every command it has, the cuckoo filters its own
/// Bloom suite creates beside Bloom filters, CFInfo, and a SCANDUMP/LOADCHUNK copy.
#[test]
fn redis_py_drives_every_cf_command() {
    run_redis_py("redis_py_cf.py", "clients:redis-py-cf", 140);
}

#[test]
fn the_rust_redis_crate_drives_every_bf_command() {
    let s = Server::start();
    let ks = s.keys("clients:rust");
    let (plain, wide, fixed, ins, big, copy) = (
        ks.k("plain"),
        ks.k("wide"),
        ks.k("fixed"),
        ks.k("ins"),
        ks.k("big"),
        ks.k("copy"),
    );
    let mut con = s.conn();

    // BF.RESERVE, with and without options.
    let () = con.bf_reserve(&plain, 0.01, 1000).unwrap();
    let () = con
        .bf_reserve_options(
            &wide,
            0.001,
            500,
            BloomFilterScalingOptions::ExpansionRate(4),
        )
        .unwrap();
    let () = con
        .bf_reserve_options(&fixed, 0.01, 3, BloomFilterScalingOptions::NonScaling)
        .unwrap();
    let e = con.bf_reserve::<_, ()>(&plain, 0.01, 1000).unwrap_err();
    assert!(e.to_string().contains("item exists"), "{e}");

    // Adds and lookups.
    assert!(con.bf_add::<_, _, bool>(&plain, "alice").unwrap());
    assert!(!con.bf_add::<_, _, bool>(&plain, "alice").unwrap());
    assert_eq!(
        con.bf_madd::<_, _, Vec<bool>>(&plain, &["bob", "carol", "alice"])
            .unwrap(),
        vec![true, true, false]
    );
    assert!(con.bf_exists::<_, _, bool>(&plain, "bob").unwrap());
    assert!(!con.bf_exists::<_, _, bool>(&plain, "zed").unwrap());
    assert_eq!(
        con.bf_mexists::<_, _, Vec<bool>>(&plain, &["alice", "zed", "carol"])
            .unwrap(),
        vec![true, false, true]
    );
    assert_eq!(con.bf_card::<_, usize>(&plain).unwrap(), 3);
    assert_eq!(con.bf_card::<_, usize>(ks.k("missing")).unwrap(), 0);
    assert_eq!(
        con.bf_insert::<_, _, Vec<bool>>(&plain, &["dave", "alice"])
            .unwrap(),
        vec![true, false]
    );
    let options = BloomFilterInsertOptions::default()
        .capacity(50)
        .error_rate(0.001)
        .expansion(BloomFilterScalingOptions::ExpansionRate(3));
    assert_eq!(
        con.bf_insert_options::<_, _, Vec<bool>>(&ins, &["a", "b", "a"], options)
            .unwrap(),
        vec![true, true, false]
    );
    let e = con
        .bf_insert_options::<_, _, Vec<bool>>(
            ks.k("nocreate"),
            &["a"],
            BloomFilterInsertOptions::default().nocreate(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("not found"), "{e}");
    let _: Vec<bool> = con.bf_madd(&fixed, &["1", "2", "3"]).unwrap();
    let e = con.bf_add::<_, _, bool>(&fixed, "4").unwrap_err();
    assert!(e.to_string().contains("non scaling filter is full"), "{e}");

    // BF.INFO: RedisBloom's five fields, and nothing else.
    let info: Info = con.bf_info(&ins).unwrap();
    assert_eq!(*info["Capacity"], 50.0);
    assert!(*info["Size"] > 0.0);
    assert_eq!(*info["Number of filters"], 1.0);
    assert_eq!(*info["Number of items inserted"], 2.0);
    assert_eq!(*info["Expansion rate"], 3.0);
    assert_eq!(info.len(), 5);
    let info: Info = con.bf_info(&fixed).unwrap();
    assert_eq!(*info["Expansion rate"], 0.0, "nil for a non-scaling filter");
    // Single fields, including the words valkey-bloom added that layerbloom answers.
    for (kind, want) in [
        (BloomFilterInfoType::Capacity, Some(50.0)),
        (BloomFilterInfoType::Items, Some(2.0)),
        (BloomFilterInfoType::Filters, Some(1.0)),
        (BloomFilterInfoType::Expansion, Some(3.0)),
        (BloomFilterInfoType::Error, Some(0.001)),
        (BloomFilterInfoType::Size, None),
        (BloomFilterInfoType::MaximumScaledCapacity, None),
    ] {
        let got = *con
            .bf_info_type::<_, BloomFilterInfoTypeResponse>(&ins, kind)
            .unwrap();
        match want {
            Some(v) => assert_eq!(got, v),
            None => assert!(got > 0.0),
        }
    }
    let max = *con
        .bf_info_type::<_, BloomFilterInfoTypeResponse>(
            &ins,
            BloomFilterInfoType::MaximumScaledCapacity,
        )
        .unwrap();
    let health: Vec<redis::Value> = redis::cmd("BF.INFO")
        .arg(&ins)
        .arg("HEALTH")
        .query(&mut con)
        .unwrap();
    let max_in_health: f64 = redis::from_redis_value(health[9].clone()).unwrap();
    assert_eq!(
        max, max_in_health,
        "MAXSCALEDCAPACITY is HEALTH's Max capacity"
    );

    // BF.SCANDUMP / BF.LOADCHUNK: a multi-layer filter copied chunk by chunk.
    let items: Vec<String> = (0..5000).map(|i| format!("item-{i}")).collect();
    for batch in items.chunks(1000) {
        let _: Vec<bool> = con.bf_madd(&big, batch).unwrap();
    }
    let chunks: Vec<_> = BloomFilterDumpIterator::new(&mut con, &big)
        .map(|c| c.unwrap())
        .collect();
    assert!(chunks.len() >= 2, "{}", chunks.len());
    for chunk in chunks {
        let () = con.bf_loadchunk(&copy, chunk).unwrap();
    }
    assert!(con
        .bf_mexists::<_, _, Vec<bool>>(&copy, &items)
        .unwrap()
        .iter()
        .all(|&b| b));
    let probes: Vec<String> = (0..2000).map(|i| format!("absent-{i}")).collect();
    assert_eq!(
        con.bf_mexists::<_, _, Vec<bool>>(&copy, &probes).unwrap(),
        con.bf_mexists::<_, _, Vec<bool>>(&big, &probes).unwrap()
    );
    assert_eq!(
        *con.bf_info::<_, Info>(&copy).unwrap()["Number of items inserted"],
        *con.bf_info::<_, Info>(&big).unwrap()["Number of items inserted"]
    );

    // Over RESP3 too.
    let mut con3 = s.conn_resp3();
    assert!(con3.bf_exists::<_, _, bool>(&plain, "alice").unwrap());
    let info3: Info = con3.bf_info(&ins).unwrap();
    assert_eq!(*info3["Capacity"], 50.0);
    assert_eq!(info3.len(), 5);
    assert_eq!(
        *con3
            .bf_info_type::<_, BloomFilterInfoTypeResponse>(&ins, BloomFilterInfoType::Error)
            .unwrap(),
        0.001
    );
    assert_eq!(
        *con3.bf_info::<_, Info>(&fixed).unwrap()["Expansion rate"],
        0.0
    );
}

/// Whether `node` and `npm` can be run at all.
fn node_exists() -> bool {
    ["node", "npm"].iter().all(|tool| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The directory with node-redis installed (`npm ci` from the pinned lock file, into target/,
/// not the source tree), installed on first use or when the lock file changes; once per test
/// binary, as `client_venv`.
fn node_client() -> PathBuf {
    static NODE: OnceLock<PathBuf> = OnceLock::new();
    NODE.get_or_init(install_node_client).clone()
}

fn install_node_client() -> PathBuf {
    let dir = repo().join("target/clients-node");
    let source = repo().join("tests/clients/node");
    let lock = std::fs::read_to_string(source.join("package-lock.json"))
        .expect("tests/clients/node/package-lock.json");
    let stamp = dir.join("installed-package-lock.json");
    if dir.join("node_modules/redis").is_dir()
        && std::fs::read_to_string(&stamp).ok().as_deref() == Some(lock.as_str())
    {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cannot create target/clients-node");
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), dir.join(file)).expect("cannot copy the npm manifest");
    }
    let npm = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .output()
        .expect("cannot run npm");
    assert!(
        npm.status.success(),
        "npm ci (tests/clients/node) failed:\n{}{}",
        String::from_utf8_lossy(&npm.stdout),
        String::from_utf8_lossy(&npm.stderr)
    );
    std::fs::write(&stamp, lock).expect("cannot write the npm stamp");
    dir
}

/// Runs one of the node-redis scripts against a fresh server; `min_checks` guards against a
/// script that silently stopped checking.
fn run_node_redis(script: &str, prefix: &str, min_checks: usize) {
    if !node_exists() {
        eprintln!(
            "skipped: node or npm is not installed, so node-redis (the Node.js client) cannot \
             be tested; install nodejs and npm to run this test"
        );
        return;
    }
    let dir = node_client();
    let s = Server::start();
    let _keys = s.keys(prefix);
    let out = Command::new("node")
        .arg(repo().join("tests/clients").join(script))
        .arg(s.url())
        .arg(prefix)
        .env("LAYERBLOOM_NODE_MODULES", dir.join("node_modules"))
        .output()
        .expect("cannot run the node-redis script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "node-redis script {script} failed:\n{stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("node-redis ") && last.ends_with(" passed, 0 failed"),
        "{stdout}"
    );
    let passed: usize = last
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {last:?}"));
    assert!(passed >= min_checks, "only {passed} checks ran:\n{stdout}");
}

#[test]
fn node_redis_drives_every_bf_command() {
    run_node_redis("node_redis_bf.mjs", "clients:node-redis", 100);
}

/// node-redis's `client.cf.*` over RESP2 and RESP3: each command with each option, CF.INFO's
/// eight fields as @redis/bloom reads them, and a SCANDUMP/LOADCHUNK copy in Buffers.
#[test]
fn node_redis_drives_every_cf_command() {
    run_node_redis("node_redis_cf.mjs", "clients:node-redis-cf", 110);
}

/// The Rust crate has no cuckoo commands; what it knows of them is TYPE's `MBbloomCF`, which it
/// reads as `ValueType::CuckooFilter` (over RESP2 and RESP3), and the Bloom type beside it as
/// RedisBloom's (`MBbloom--`).
#[test]
fn the_rust_redis_crate_reads_the_cuckoo_type() {
    let s = Server::start();
    let ks = s.keys("clients:rust-cf");
    let (cuckoo, bloom) = (ks.k("cuckoo"), ks.k("bloom"));
    let mut con = s.conn();
    con.ok(&cmd!("CF.RESERVE", &cuckoo, 100));
    let () = con.bf_reserve(&bloom, 0.01, 100).unwrap();
    for mut con in [s.conn(), s.conn_resp3()] {
        assert_eq!(
            con.key_type::<_, ValueType>(&cuckoo).unwrap(),
            ValueType::CuckooFilter
        );
        assert_eq!(
            con.key_type::<_, ValueType>(&bloom).unwrap(),
            ValueType::BloomFilterRedis
        );
    }
}

// ---------------------------------------------------------------------------------------------
// go-redis's BF.INFO contract
// ---------------------------------------------------------------------------------------------

/// What go-redis's `BFInfo` holds (all int64; a field not in the reply stays 0).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct GoBfInfo {
    capacity: i64,
    size: i64,
    filters: i64,
    items_inserted: i64,
    expansion_rate: i64,
}

/// go-redis's `redis.Nil`, which its reader returns for a nil value.
const GO_NIL: &str = "redis: nil";

/// go-redis's reading of a `BF.INFO key [field]` reply (`BFInfoCmd.readReply`), from its
/// documented behaviour:
/// - a field name or field word it does not know is the error `redis: BLOOM.INFO unexpected
///   key <name>`; the names are the five of BF.INFO and the words CAPACITY, SIZE, FILTERS,
///   ITEMS, EXPANSION (exact spellings);
/// - with a field word and an array reply, the array must hold one value, read as the word's
///   field;
/// - otherwise the reply is read as a map: a RESP3 map, or a RESP2 array of pairs (an odd
///   length is an error);
/// - names are read as strings (simple, bulk or verbatim), values as integers (an integer, or
///   a string holding one); a nil value is `redis.Nil`, which fails the whole command.
fn go_redis_bf_info(reply: &Value, word: Option<&str>) -> Result<GoBfInfo, String> {
    fn slot<'a>(info: &'a mut GoBfInfo, name: &str) -> Result<&'a mut i64, String> {
        Ok(match name {
            "Capacity" | "CAPACITY" => &mut info.capacity,
            "Size" | "SIZE" => &mut info.size,
            "Number of filters" | "FILTERS" => &mut info.filters,
            "Number of items inserted" | "ITEMS" => &mut info.items_inserted,
            "Expansion rate" | "EXPANSION" => &mut info.expansion_rate,
            other => return Err(format!("redis: BLOOM.INFO unexpected key {other}")),
        })
    }
    fn int(v: &Value) -> Result<i64, String> {
        match v {
            Value::Int(n) => Ok(*n),
            Value::Nil => Err(GO_NIL.into()),
            Value::BulkString(b) => String::from_utf8_lossy(b)
                .parse()
                .map_err(|e| format!("redis: can't parse int reply: {e}")),
            Value::SimpleString(s) => s
                .parse()
                .map_err(|e| format!("redis: can't parse int reply: {e}")),
            Value::ServerError(e) => Err(common::server_error_text(e)),
            other => Err(format!("redis: can't parse int reply: {other:?}")),
        }
    }
    fn string(v: &Value) -> Result<String, String> {
        match v {
            Value::SimpleString(s) => Ok(s.clone()),
            Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
            Value::VerbatimString { text, .. } => Ok(text.clone()),
            Value::Int(n) => Ok(n.to_string()),
            Value::Nil => Err(GO_NIL.into()),
            other => Err(format!("redis: can't parse reply={other:?} reading string")),
        }
    }
    let mut info = GoBfInfo::default();
    if let Value::ServerError(e) = reply {
        return Err(common::server_error_text(e));
    }
    if let (Some(word), Value::Array(items)) = (word, reply) {
        if items.len() != 1 {
            return Err("redis: BLOOM.INFO invalid argument key type".into());
        }
        let field = slot(&mut info, word)?;
        *field = int(&items[0])?;
        return Ok(info);
    }
    let pairs: Vec<(&Value, &Value)> = match reply {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(items) if items.len() % 2 == 0 => {
            items.chunks(2).map(|p| (&p[0], &p[1])).collect()
        }
        Value::Array(items) => {
            return Err(format!(
                "redis: the length of the array must be a multiple of 2, got: {}",
                items.len()
            ))
        }
        other => return Err(format!("redis: can't parse map reply: {other:?}")),
    };
    for (k, v) in pairs {
        let name = string(k)?;
        // The name is looked up before its value is read, as go-redis does.
        let field = slot(&mut info, &name)?;
        *field = int(v)?;
    }
    Ok(info)
}

#[test]
fn the_go_redis_bf_info_reader_mirror_reads_what_it_should_and_refuses_the_rest() {
    let five = |expansion: Value| {
        Value::Array(vec![
            Value::SimpleString("Capacity".into()),
            Value::Int(100),
            Value::BulkString(b"Size".to_vec()),
            Value::Int(240),
            Value::SimpleString("Number of filters".into()),
            Value::Int(1),
            Value::SimpleString("Number of items inserted".into()),
            Value::Int(7),
            Value::SimpleString("Expansion rate".into()),
            expansion,
        ])
    };
    let want = GoBfInfo {
        capacity: 100,
        size: 240,
        filters: 1,
        items_inserted: 7,
        expansion_rate: 2,
    };
    assert_eq!(go_redis_bf_info(&five(Value::Int(2)), None), Ok(want));
    assert_eq!(
        go_redis_bf_info(&five(Value::Nil), None),
        Err(GO_NIL.to_string())
    );
    let Value::Array(mut extra) = five(Value::Int(2)) else {
        unreachable!()
    };
    extra.extend([Value::BulkString(b"Error rate".to_vec()), Value::Int(0)]);
    assert_eq!(
        go_redis_bf_info(&Value::Array(extra), None),
        Err("redis: BLOOM.INFO unexpected key Error rate".to_string())
    );
    assert_eq!(
        go_redis_bf_info(&Value::Array(vec![Value::Int(5)]), Some("ITEMS")),
        Ok(GoBfInfo {
            items_inserted: 5,
            ..GoBfInfo::default()
        })
    );
    assert!(go_redis_bf_info(&Value::Array(vec![Value::Int(5)]), Some("items")).is_err());
}

/// go-redis's BFInfo of layerbloom's BF.INFO, whole and by each field word go-redis sends
/// (`BFInfoCapacity` ... `BFInfoExpansion`), for a scaling and a non-scaling filter, over RESP2
/// and RESP3. go-redis fails on any field name but BF.INFO's five, so this holds layerbloom's
/// BF.INFO to exactly RedisBloom's fields. A nil Expansion rate (non-scaling) is `redis.Nil`
/// in go-redis whichever server sends it: where RedisBloom's module is at hand, go-redis's
/// outcome on it is the expected one.
#[test]
fn go_redis_reads_bf_info_of_scaling_and_non_scaling_filters() {
    let s = Server::start();
    let ks = s.keys("clients:go-redis");
    let (scaling, fixed) = (ks.k("scaling"), ks.k("fixed"));
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &scaling, 0.01, 10, "EXPANSION", 3));
    let _: Vec<i64> = con.q(&cmd!("BF.MADD", &scaling, (0..25).collect::<Vec<_>>()));
    con.ok(&cmd!("BF.RESERVE", &fixed, 0.001, 50, "NONSCALING"));
    let _: Vec<i64> = con.q(&cmd!("BF.MADD", &fixed, "a", "b", "c"));
    let card = |con: &mut redis::Connection, k: &str| -> i64 { con.q(&cmd!("BF.CARD", k)) };
    let (scaling_items, fixed_items) = (card(&mut con, &scaling), card(&mut con, &fixed));

    // The same filters on RedisBloom, where it can be had.
    let oracle = if s.is_external() {
        None
    } else {
        redisbloom_path().and_then(|p| Server::builder().module(&p).try_start().ok())
    };
    if let Some(rb) = &oracle {
        let mut rc = rb.conn();
        rc.ok(&cmd!("BF.RESERVE", &scaling, 0.01, 10, "EXPANSION", 3));
        let _: Vec<i64> = rc.q(&cmd!("BF.MADD", &scaling, (0..25).collect::<Vec<_>>()));
        rc.ok(&cmd!("BF.RESERVE", &fixed, 0.001, 50, "NONSCALING"));
        let _: Vec<i64> = rc.q(&cmd!("BF.MADD", &fixed, "a", "b", "c"));
    } else {
        eprintln!("RedisBloom's module is not at hand: checking against go-redis's rules only");
    }

    for resp3 in [false, true] {
        let mut con = if resp3 { s.conn_resp3() } else { s.conn() };
        let mut rb = oracle
            .as_ref()
            .map(|rb| if resp3 { rb.conn_resp3() } else { rb.conn() });
        for (key, scaling_filter, items) in [
            (&scaling, true, scaling_items),
            (&fixed, false, fixed_items),
        ] {
            for word in [
                None,
                Some("CAPACITY"),
                Some("SIZE"),
                Some("FILTERS"),
                Some("ITEMS"),
                Some("EXPANSION"),
            ] {
                let mut c = cmd!("BF.INFO", key);
                if let Some(w) = word {
                    c.arg(w);
                }
                let got = go_redis_bf_info(&con.raw(&c), word);
                let what = format!("RESP{} BF.INFO {key} {word:?}", if resp3 { 3 } else { 2 });
                let nil_expansion = !scaling_filter && matches!(word, None | Some("EXPANSION"));
                match &got {
                    Ok(info) => {
                        assert!(
                            !nil_expansion,
                            "{what}: {info:?}, but go-redis reads nil as redis.Nil"
                        );
                        let full = word.is_none();
                        if full || word == Some("CAPACITY") {
                            assert_eq!(
                                info.capacity,
                                if scaling_filter { 10 + 30 } else { 50 },
                                "{what}"
                            );
                        }
                        if full || word == Some("SIZE") {
                            assert!(info.size > 0, "{what}: {info:?}");
                        }
                        if full || word == Some("FILTERS") {
                            assert_eq!(info.filters, if scaling_filter { 2 } else { 1 }, "{what}");
                        }
                        if full || word == Some("ITEMS") {
                            assert_eq!(info.items_inserted, items, "{what}");
                        }
                        if full || word == Some("EXPANSION") {
                            assert_eq!(info.expansion_rate, 3, "{what}");
                        }
                    }
                    Err(e) => assert!(
                        nil_expansion && e == GO_NIL,
                        "{what}: go-redis would fail with {e:?}"
                    ),
                }
                if let Some(rc) = rb.as_mut() {
                    let theirs = go_redis_bf_info(&rc.raw(&c), word);
                    // Size is each module's own memory; everything else must read the same.
                    let strip = |r: Result<GoBfInfo, String>| r.map(|i| GoBfInfo { size: 0, ..i });
                    assert_eq!(
                        strip(got.clone()),
                        strip(theirs),
                        "{what}: layerbloom vs RedisBloom"
                    );
                }
            }
        }
    }
}

//! The clients applications use, unchanged, against layerbloom:
//!
//! - redis-py's `r.bf()` (tests/clients/redis_py_bf.py), in a virtualenv this test creates
//!   under `target/clients-venv` with the pinned tests/clients/requirements.txt (PyPI);
//! - the Rust `redis` crate's Bloom commands (its `bloom` feature: `bf_*` methods, `BF.INFO`
//!   parsed into `BloomFilterInfoTypeResponse`s, `BloomFilterDumpIterator`).
//!
//! Both also run against `REDIS_URL` (a container, say), using keys under their own prefix.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Server;
use redis::bloom::BloomFilterInfoTypeResponse;
use redis::bloom::{
    BloomFilterDumpIterator, BloomFilterInfoType, BloomFilterInsertOptions,
    BloomFilterScalingOptions,
};
use redis::Commands;

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
/// when the requirements change.
fn client_venv() -> PathBuf {
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

#[test]
fn redis_py_drives_every_bf_command() {
    if !python3_exists() {
        eprintln!(
            "skipped: python3 is not installed, so redis-py (the Python client) cannot be \
             tested; install python3 and python3-venv to run this test"
        );
        return;
    }
    let venv = client_venv();
    let s = Server::start();
    let prefix = "clients:redis-py";
    let _keys = s.keys(prefix);
    let out = Command::new(venv.join("bin/python"))
        .arg(repo().join("tests/clients/redis_py_bf.py"))
        .arg(s.url())
        .arg(prefix)
        .output()
        .expect("cannot run the redis-py script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "redis-py script failed:\n{stdout}\n{stderr}"
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
    assert!(passed >= 60, "only {passed} checks ran:\n{stdout}");
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

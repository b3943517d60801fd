//! layerbloom answers exactly as RedisBloom did, fixture by fixture.
//!
//! The fixtures (`tests/fixtures/redisbloom`, described by its README.md) were written by
//! the real RedisBloom in redis-server 7.0.15, with every answer it gave about them. Each test
//! loads one source of RedisBloom data into a fresh server and checks every recorded answer:
//!
//! - `dump.rdb` loaded at start-up;
//! - every filter's `DUMP` payload through `RESTORE`;
//! - every `BF.SCANDUMP` stream replayed with `BF.LOADCHUNK` (and dumped back byte for byte);
//! - the multi-part AOF directory replayed at start-up;
//! - the legacy payloads (encoding versions 0 to 3), their later commands and RedisBloom's
//!   re-encodings of them;
//! - every filter's creation replayed in classic mode (`bf-layout classic`), where BF.INFO
//!   Size, BF.DEBUG and BF.SCANDUMP must equal RedisBloom's too;
//! - the data goes back: SCANDUMP/LOADCHUNK copies and an RDB save and restart (in
//!   layerbloom's own encoding) keep every answer.
//!
//! Outside classic mode BF.INFO Size is layerbloom's real memory, so it is not compared there;
//! MEMORY USAGE is never compared. Each test collects every discrepancy (naming the fixture,
//! the command, what RedisBloom answered and what layerbloom answered) and fails at the end
//! with all of them.

use crate::common;
use common::setting;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use common::{copy_tree, digest, server_error_text, text_of, wait_until, Exec, Server, Stop};
use redis::{Cmd, Value};
use serde_json::{json, Value as Json};

// ---------------------------------------------------------------------------------------------
// The fixtures
// ---------------------------------------------------------------------------------------------

/// `tests/fixtures/redisbloom`, in the repository.
fn fixtures_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redisbloom");
    if !dir.join("manifest.json").is_file() {
        panic!(
            "the RedisBloom fixtures are missing: expected {} (with manifest.json, dump.rdb, \
             scandump/, aof/, legacy/) next to the crate",
            dir.display()
        );
    }
    dir
}

/// A fixture file's bytes, by its path relative to the fixtures dir.
fn fixture_bytes(rel: &str) -> Vec<u8> {
    let path = fixtures_dir().join(rel);
    fs::read(&path).unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()))
}

/// manifest.json, parsed once.
fn manifest() -> &'static Json {
    static MANIFEST: OnceLock<Json> = OnceLock::new();
    MANIFEST.get_or_init(|| {
        let m: Json = serde_json::from_slice(&fixture_bytes("manifest.json"))
            .unwrap_or_else(|e| panic!("manifest.json does not parse: {e}"));
        assert_eq!(
            m["format"], "redisbloom-fixtures/1",
            "unknown fixture format"
        );
        m
    })
}

fn arr<'a>(v: &'a Json, what: &str) -> &'a [Json] {
    v.as_array()
        .unwrap_or_else(|| panic!("manifest: {what} is not a list: {v}"))
}

fn jstr<'a>(v: &'a Json, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("manifest: {what} is not a string: {v}"))
}

fn uint(v: &Json, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("manifest: {what} is not an unsigned integer: {v}"))
}

fn b64(text: &str) -> Vec<u8> {
    B64.decode(text)
        .unwrap_or_else(|e| panic!("bad base64 in the fixtures ({e}): {text:.40}"))
}

fn unhex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex string {text}");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("bad hex in the fixtures"))
        .collect()
}

/// Expands an item rule (`decimal`, `le32`, `b64list`) into its byte strings, in order.
fn expand(rule: &Json) -> Vec<Vec<u8>> {
    match jstr(&rule["rule"], "item rule") {
        "decimal" => {
            let prefix = jstr(&rule["prefix"], "decimal prefix");
            let start = uint(&rule["start"], "decimal start");
            (0..uint(&rule["count"], "decimal count"))
                .map(|i| format!("{prefix}{}", start + i).into_bytes())
                .collect()
        }
        "le32" => {
            let prefix = unhex(jstr(&rule["prefix_hex"], "le32 prefix"));
            let start = uint(&rule["start"], "le32 start");
            (0..uint(&rule["count"], "le32 count"))
                .map(|i| {
                    let n = u32::try_from(start + i).expect("le32 item beyond 32 bits");
                    let mut item = prefix.clone();
                    item.extend_from_slice(&n.to_le_bytes());
                    item
                })
                .collect()
        }
        "b64list" => arr(&rule["b64"], "b64list")
            .iter()
            .map(|e| b64(jstr(e, "b64list entry")))
            .collect(),
        other => panic!("unknown item rule {other:?}"),
    }
}

/// A step's `error_at`, if any.
fn error_at(step: &Json) -> Option<usize> {
    step["error_at"].as_u64().map(|n| n as usize)
}

/// The record named `key` among `records`.
fn record<'a>(records: &'a [Json], key: &str) -> &'a Json {
    records
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("manifest: no record for {key}"))
}

/// Every item a record's filter holds, in order: a legacy payload's built items, each step's
/// items up to its error, and for a `loadchunk_of` step the source filter's items.
fn inserted_items(rec: &Json, siblings: &[Json]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(built) = rec.get("built") {
        out.extend(expand(&built["items"]));
    }
    for step in arr(&rec["steps"], "steps") {
        if let Some(src) = step.get("loadchunk_of") {
            out.extend(inserted_items(
                record(siblings, jstr(src, "loadchunk_of")),
                siblings,
            ));
        } else if step.get("items").is_some() {
            let mut items = expand(&step["items"]);
            if let Some(e) = error_at(step) {
                items.truncate(e);
            }
            out.extend(items);
        }
    }
    out
}

/// A SCANDUMP stream file: every `[iterator, data]`, the final `[0, ""]` included.
fn stream_file(rel: &str) -> Vec<(i64, Vec<u8>)> {
    let v: Json = serde_json::from_slice(&fixture_bytes(rel))
        .unwrap_or_else(|e| panic!("{rel} does not parse: {e}"));
    let stream: Vec<(i64, Vec<u8>)> = arr(&v, rel)
        .iter()
        .map(|p| {
            let it = p[0]
                .as_i64()
                .unwrap_or_else(|| panic!("{rel}: bad iterator {p}"));
            (it, b64(jstr(&p[1], "stream data")))
        })
        .collect();
    assert_eq!(
        stream.first().map(|p| p.0),
        Some(1),
        "{rel}: must start at 1"
    );
    assert_eq!(
        stream.last(),
        Some(&(0, Vec::new())),
        "{rel}: must end with [0, \"\"]"
    );
    stream
}

// ---------------------------------------------------------------------------------------------
// Servers holding fixture files
// ---------------------------------------------------------------------------------------------

/// A server that starts on `dump.rdb` of the fixtures: started empty (no snapshots), the file
/// copied into its dir, then restarted without saving, so the start-up load reads it.
fn server_on_dump_rdb() -> Server {
    let mut s = Server::builder().start();
    copy_tree(&fixtures_dir().join("dump.rdb"), &s.dir().join("dump.rdb"));
    s.restart(Stop::NoSave);
    s
}

/// A server that starts on the fixtures' AOF directory, with the configuration that wrote it.
/// It first starts with its own (empty) AOF; AOF is switched off so that nothing touches the
/// files, the directory is replaced by the fixture's, and the restart (configured for AOF
/// again) replays it. `module_args` follow the module path.
fn server_on_aof(module_args: &[&str]) -> Server {
    let m = manifest();
    let mut b = Server::builder().module_args(module_args);
    let config = m["aof"]["config"]
        .as_object()
        .expect("manifest: aof.config");
    for (name, value) in config {
        b = b.config(name, jstr(value, "aof config value"));
    }
    let mut s = b.start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", "appendonly", "no"));
    wait_until(Duration::from_secs(10), "the AOF to stop", || {
        let info = con.info_map("persistence");
        info.get("aof_enabled").map(String::as_str) == Some("0")
            && info.get("aof_rewrite_in_progress").map(String::as_str) == Some("0")
    });
    drop(con);
    let dirname = jstr(&config["appenddirname"], "appenddirname").to_string();
    let target = s.dir().join(&dirname);
    if target.exists() {
        fs::remove_dir_all(&target).expect("remove the server's own AOF dir");
    }
    copy_tree(
        &fixtures_dir().join(jstr(&m["aof"]["dir"], "aof.dir")),
        &target,
    );
    s.restart(Stop::NoSave);
    s
}

// ---------------------------------------------------------------------------------------------
// Comparing replies
// ---------------------------------------------------------------------------------------------

/// A RESP2 reply in the manifest's notation: integers, strings, null, lists,
/// `{"error": text}`.
fn to_json(v: &Value) -> Json {
    match v {
        Value::Nil => Json::Null,
        Value::Int(n) => json!(n),
        Value::BulkString(b) => Json::String(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(t) => Json::String(t.clone()),
        Value::Okay => json!("OK"),
        Value::Array(xs) => Json::Array(xs.iter().map(to_json).collect()),
        Value::ServerError(e) => json!({ "error": server_error_text(e) }),
        other => json!(format!("unexpected reply {other:?}")),
    }
}

/// A manifest command (strings), its key (argument 1) renamed from `from` to `to`.
fn json_cmd(args: &[Json], from: &str, to: &str) -> Cmd {
    let mut c = redis::cmd(jstr(&args[0], "command name"));
    for (i, a) in args.iter().enumerate().skip(1) {
        let a = jstr(a, "command argument");
        if i == 1 && a == from {
            c.arg(to);
        } else {
            c.arg(a);
        }
    }
    c
}

fn show_json_cmd(args: &[Json], from: &str, to: &str) -> String {
    common::show(&json_cmd(args, from, to))
}

/// Up to `n` elements of a list, for messages.
fn some<T: Debug>(xs: &[T], n: usize) -> String {
    if xs.len() <= n {
        format!("{xs:?}")
    } else {
        format!("{:?} and {} more", &xs[..n], xs.len() - n)
    }
}

/// Whether BF.INFO Size is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    /// Size is layerbloom's real memory: compare every other field.
    Skip,
    /// Classic mode: Size must be RedisBloom's figure.
    Compare,
}

/// A connection and every discrepancy found so far.
struct Run {
    con: redis::Connection,
    fails: Vec<String>,
}

impl Run {
    fn new(s: &Server) -> Run {
        Run {
            con: s.conn(),
            fails: Vec::new(),
        }
    }

    fn fail(&mut self, label: &str, msg: String) {
        self.fails.push(format!("{label}: {msg}"));
    }

    /// Records a discrepancy unless `actual == expected`.
    fn same<T: PartialEq + Debug>(&mut self, label: &str, what: &str, expected: T, actual: T) {
        if expected != actual {
            self.fail(
                label,
                format!("{what}: RedisBloom answered {expected:?}, layerbloom {actual:?}"),
            );
        }
    }

    /// Runs a command whose reply must be `OK`; records it and returns false otherwise.
    fn expect_ok(&mut self, label: &str, c: &Cmd) -> bool {
        let v = self.con.raw(c);
        if to_json(&v) == json!("OK") {
            return true;
        }
        self.fail(
            label,
            format!("{}: expected OK, got {v:?}", common::show(c)),
        );
        false
    }

    /// Panics with every discrepancy, one per line.
    fn finish(self, test: &str) {
        if !self.fails.is_empty() {
            panic!(
                "{test}: {} discrepancies with RedisBloom:\n  {}",
                self.fails.len(),
                self.fails.join("\n  ")
            );
        }
    }

    /// `BF.MEXISTS` over many items, in batches: the indexes answering 1, or an error text.
    fn positives(&mut self, key: &str, items: &[Vec<u8>]) -> Result<Vec<u64>, String> {
        let mut out = Vec::new();
        for (b, batch) in items.chunks(2000).enumerate() {
            let mut c = cmd!("BF.MEXISTS", key);
            for item in batch {
                c.arg(item.as_slice());
            }
            let v = self.con.raw(&c);
            let Value::Array(replies) = &v else {
                return Err(format!("BF.MEXISTS {key} replied {v:?}"));
            };
            if replies.len() != batch.len() {
                return Err(format!(
                    "BF.MEXISTS {key} with {} items replied {} elements",
                    batch.len(),
                    replies.len()
                ));
            }
            for (i, r) in replies.iter().enumerate() {
                match r {
                    Value::Int(1) => out.push((b * 2000 + i) as u64),
                    Value::Int(0) => {}
                    other => return Err(format!("BF.MEXISTS {key} answered {other:?}")),
                }
            }
        }
        Ok(out)
    }

    /// Every `BF.SCANDUMP` reply of `key`, the final `[0, ""]` included.
    fn scandump_walk(&mut self, key: &str) -> Result<Vec<(i64, Vec<u8>)>, String> {
        let mut out = Vec::new();
        let mut it = 0i64;
        for _ in 0..100_000 {
            let v = self.con.raw(&cmd!("BF.SCANDUMP", key, it));
            let (next, data) = match &v {
                Value::Array(p) if p.len() == 2 => match (&p[0], &p[1]) {
                    (Value::Int(n), Value::BulkString(d)) => (*n, d.clone()),
                    _ => return Err(format!("BF.SCANDUMP {key} {it} replied {v:?}")),
                },
                _ => return Err(format!("BF.SCANDUMP {key} {it} replied {v:?}")),
            };
            out.push((next, data));
            if next == 0 {
                return Ok(out);
            }
            it = next;
        }
        Err(format!("BF.SCANDUMP {key} never returned iterator 0"))
    }

    /// Replays a stream (its final `[0, ""]` left out) with `BF.LOADCHUNK` into `key`.
    fn loadchunk_stream(&mut self, label: &str, key: &str, stream: &[(i64, Vec<u8>)]) -> bool {
        for (it, data) in stream.iter().filter(|p| p.0 != 0) {
            let v = self
                .con
                .raw(&cmd!("BF.LOADCHUNK", key, *it, data.as_slice()));
            if to_json(&v) != json!("OK") {
                self.fail(
                    label,
                    format!(
                        "BF.LOADCHUNK {key} {it} <{} bytes>: RedisBloom answered OK, \
                         layerbloom {v:?}",
                        data.len()
                    ),
                );
                return false;
            }
        }
        true
    }

    /// Compares two SCANDUMP streams element by element.
    fn same_stream(&mut self, label: &str, expected: &[(i64, Vec<u8>)], actual: &[(i64, Vec<u8>)]) {
        if expected == actual {
            return;
        }
        let its = |xs: &[(i64, Vec<u8>)]| xs.iter().map(|p| p.0).collect::<Vec<_>>();
        if its(expected) != its(actual) {
            self.fail(
                label,
                format!(
                    "BF.SCANDUMP iterators: RedisBloom {}, layerbloom {}",
                    some(&its(expected), 12),
                    some(&its(actual), 12)
                ),
            );
            return;
        }
        for (n, (e, a)) in expected.iter().zip(actual).enumerate() {
            if e.1 != a.1 {
                let at = e.1.iter().zip(&a.1).position(|(x, y)| x != y);
                self.fail(
                    label,
                    format!(
                        "BF.SCANDUMP reply {n} (iterator {}): RedisBloom sent {} bytes, \
                         layerbloom {} bytes, first difference at byte {at:?}",
                        e.0,
                        e.1.len(),
                        a.1.len()
                    ),
                );
            }
        }
    }

    /// `KEYS *` must be exactly `expected`.
    fn check_keys(&mut self, label: &str, expected: &Json) {
        let expected: BTreeSet<String> = arr(expected, "keys")
            .iter()
            .map(|k| jstr(k, "key").to_string())
            .collect();
        let actual: BTreeSet<String> = self
            .con
            .q::<Vec<String>>(&cmd!("KEYS", "*"))
            .into_iter()
            .collect();
        self.same(label, "KEYS *", expected, actual);
    }

    /// The plain (string and hash) keys hold their values.
    fn check_plain_keys(&mut self, label: &str, plain: &Json) {
        for p in arr(plain, "plain_keys") {
            let key = jstr(&p["key"], "plain key");
            let label = format!("{label} {key}");
            let kind = jstr(&p["type"], "plain key type");
            let ty = self.con.raw(&cmd!("TYPE", key));
            self.same(&label, "TYPE", json!(kind), to_json(&ty));
            match kind {
                "string" => {
                    let v = self.con.raw(&cmd!("GET", key));
                    self.same(&label, "GET", p["value"].clone(), to_json(&v));
                }
                "hash" => {
                    let expected: BTreeMap<String, String> = arr(&p["fields"], "hash fields")
                        .iter()
                        .map(|f| (jstr(&f[0], "field").into(), jstr(&f[1], "value").into()))
                        .collect();
                    let actual: BTreeMap<String, String> = self.con.q(&cmd!("HGETALL", key));
                    self.same(&label, "HGETALL", expected, actual);
                }
                other => panic!("manifest: unknown plain key type {other}"),
            }
        }
    }

    /// Every expectation of a filter record (`filters[]`, `aof.filters[]`, `legacy[]`) on
    /// `key`, which holds the fixture recorded under `rec.key`; `siblings` are the records the
    /// `loadchunk_of` steps refer to.
    fn check_filter(&mut self, label: &str, key: &str, rec: &Json, siblings: &[Json], size: Size) {
        let orig = jstr(&rec["key"], "key");
        let expect = &rec["expect"];

        let ty = self.con.raw(&cmd!("TYPE", key));
        self.same(label, "TYPE", expect["type"].clone(), to_json(&ty));
        let card = self.con.raw(&cmd!("BF.CARD", key));
        self.same(label, "BF.CARD", expect["card"].clone(), to_json(&card));
        self.check_info(label, key, rec, size);

        let debug = self.con.raw(&cmd!("BF.DEBUG", key));
        let debug = match &debug {
            Value::Array(xs) => Json::Array(
                xs.iter()
                    .map(|x| text_of(x).map_or_else(|| to_json(x), Json::String))
                    .collect(),
            ),
            other => to_json(other),
        };
        if debug != expect["debug"] {
            self.fail(
                label,
                format!(
                    "BF.DEBUG:\n    RedisBloom {}\n    layerbloom {debug}",
                    expect["debug"]
                ),
            );
        }

        // Every inserted item answers 1.
        let items = inserted_items(rec, siblings);
        self.same(
            label,
            "inserted items expanded from the steps (fixture reading)",
            uint(&expect["inserted_count"], "inserted_count") as usize,
            items.len(),
        );
        match self.positives(key, &items) {
            Err(e) => self.fail(label, e),
            Ok(pos) if pos.len() != items.len() => {
                let pos: BTreeSet<u64> = pos.into_iter().collect();
                let missing: Vec<u64> = (0..items.len() as u64)
                    .filter(|i| !pos.contains(i))
                    .collect();
                let shown: Vec<String> = missing
                    .iter()
                    .take(5)
                    .map(|&i| String::from_utf8_lossy(&items[i as usize]).into_owned())
                    .collect();
                self.fail(
                    label,
                    format!(
                        "BF.MEXISTS of the {} inserted items: RedisBloom answered 1 for all, \
                         layerbloom 0 for {} of them (indexes {}, items {shown:?})",
                        items.len(),
                        missing.len(),
                        some(&missing, 10)
                    ),
                );
            }
            Ok(_) => {}
        }

        // The probes answer exactly RedisBloom's false positives.
        let probes = &expect["probes"];
        let probe_items = expand(&probes["items"]);
        self.same(
            label,
            "probe count (fixture reading)",
            uint(&probes["count"], "probe count") as usize,
            probe_items.len(),
        );
        let expected: Vec<u64> = arr(&probes["positives"], "positives")
            .iter()
            .map(|p| uint(p, "positive"))
            .collect();
        match self.positives(key, &probe_items) {
            Err(e) => self.fail(label, e),
            Ok(actual) if actual != expected => {
                let e: BTreeSet<u64> = expected.iter().copied().collect();
                let a: BTreeSet<u64> = actual.iter().copied().collect();
                let only_rb: Vec<u64> = e.difference(&a).copied().collect();
                let only_lb: Vec<u64> = a.difference(&e).copied().collect();
                self.fail(
                    label,
                    format!(
                        "BF.MEXISTS of {} probes: RedisBloom answered 1 for {} of them, \
                         layerbloom for {}; 1 only from RedisBloom at {}, only from \
                         layerbloom at {}",
                        probe_items.len(),
                        expected.len(),
                        actual.len(),
                        some(&only_rb, 10),
                        some(&only_lb, 10)
                    ),
                );
            }
            Ok(_) => {}
        }

        self.run_checks(label, key, orig, expect, size);
    }

    /// `BF.INFO key`: every field, in order, with its value (Size only when asked).
    fn check_info(&mut self, label: &str, key: &str, rec: &Json, size: Size) {
        let hide = |pairs: Vec<Json>| -> Vec<Json> {
            pairs
                .into_iter()
                .map(|p| {
                    if size == Size::Skip && p[0] == "Size" && p[1].is_i64() {
                        json!(["Size", "(not compared)"])
                    } else {
                        p
                    }
                })
                .collect()
        };
        let expected = hide(arr(&rec["expect"]["info"], "info").to_vec());
        let v = self.con.raw(&cmd!("BF.INFO", key));
        // RedisBloom's five fields come first, in its order; layerbloom's health fields that
        // follow them have no RedisBloom counterpart (tests/operations.rs checks them).
        let actual = match &v {
            Value::Array(xs) if xs.len().is_multiple_of(2) => hide(
                xs.chunks(2)
                    .take(5)
                    .map(|p| json!([to_json(&p[0]), to_json(&p[1])]))
                    .collect(),
            ),
            other => vec![to_json(other)],
        };
        if expected != actual {
            self.fail(
                label,
                format!(
                    "BF.INFO{}:\n    RedisBloom {}\n    layerbloom {}",
                    if size == Size::Skip {
                        " (Size not compared)"
                    } else {
                        ""
                    },
                    Json::Array(expected),
                    Json::Array(actual)
                ),
            );
        }
    }

    /// The record's further commands (`expect.checks`), with their replies.
    fn run_checks(&mut self, label: &str, key: &str, orig: &str, expect: &Json, size: Size) {
        for check in arr(&expect["checks"], "checks") {
            let args = arr(&check["cmd"], "check cmd");
            let size_reply = jstr(&args[0], "cmd").eq_ignore_ascii_case("BF.INFO")
                && args.len() == 3
                && jstr(&args[2], "field").eq_ignore_ascii_case("SIZE");
            if size_reply && size == Size::Skip {
                continue;
            }
            let v = self.con.raw(&json_cmd(args, orig, key));
            let actual = to_json(&v);
            if actual != check["reply"] {
                self.fail(
                    label,
                    format!(
                        "{}: RedisBloom answered {}, layerbloom {actual}",
                        show_json_cmd(args, orig, key),
                        check["reply"]
                    ),
                );
            }
        }
    }

    /// Replays a record's steps on `key` (the record's own key renamed to it), comparing every
    /// reply with RedisBloom's. `restore_payload` steps are the caller's.
    fn replay_steps(&mut self, label: &str, key: &str, rec: &Json) {
        let orig = jstr(&rec["key"], "key");
        for step in arr(&rec["steps"], "steps") {
            if step.get("restore_payload").is_some() {
                continue;
            }
            if let Some(src) = step.get("loadchunk_of") {
                let src = jstr(src, "loadchunk_of");
                let stream = match step.get("scandump_file") {
                    Some(file) => stream_file(jstr(file, "scandump_file")),
                    // Taken from the source filter as it is now, as RedisBloom's was.
                    None => match self.scandump_walk(src) {
                        Ok(stream) => stream,
                        Err(e) => {
                            self.fail(label, format!("copying {src}: {e}"));
                            return;
                        }
                    },
                };
                if !self.loadchunk_stream(label, key, &stream) {
                    return;
                }
                continue;
            }
            let args = arr(&step["cmd"], "step cmd");
            if step.get("items").is_none() {
                let v = self.con.raw(&json_cmd(args, orig, key));
                let actual = to_json(&v);
                if actual != step["reply"] {
                    self.fail(
                        label,
                        format!(
                            "step {}: RedisBloom answered {}, layerbloom {actual}",
                            show_json_cmd(args, orig, key),
                            step["reply"]
                        ),
                    );
                }
                continue;
            }
            self.replay_item_step(label, key, orig, step);
        }
    }

    /// An item step: `cmd + items`, `batch` items at a time; each reply is 1 per item, 0 at
    /// `zeros`, the error at `error_at` (then nothing more).
    fn replay_item_step(&mut self, label: &str, key: &str, orig: &str, step: &Json) {
        let args = arr(&step["cmd"], "step cmd");
        let single = jstr(&args[0], "cmd").eq_ignore_ascii_case("BF.ADD");
        let items = expand(&step["items"]);
        let batch = uint(&step["batch"], "batch") as usize;
        let zeros: BTreeSet<usize> = arr(&step["zeros"], "zeros")
            .iter()
            .map(|z| uint(z, "zero") as usize)
            .collect();
        let err_at = error_at(step);
        let err_text = step["error"].clone();
        let mut mismatches = 0usize;
        let mut start = 0usize;
        while start < items.len() {
            let end = (start + batch).min(items.len());
            let mut c = json_cmd(args, orig, key);
            let mut expected = Vec::new();
            for (i, item) in items.iter().enumerate().take(end).skip(start) {
                c.arg(item.as_slice());
                if err_at == Some(i) {
                    expected.push(json!({ "error": err_text }));
                    break;
                }
                expected.push(json!(if zeros.contains(&i) { 0 } else { 1 }));
            }
            // Items after the error were sent too, but answered nothing.
            for item in items.iter().take(end).skip(start + expected.len()) {
                c.arg(item.as_slice());
            }
            let expected = if single {
                expected.pop().expect("a BF.ADD item")
            } else {
                Json::Array(expected)
            };
            let actual = to_json(&self.con.raw(&c));
            if actual != expected {
                mismatches += 1;
                if mismatches <= 5 {
                    let detail = match (&expected, &actual) {
                        (Json::Array(e), Json::Array(a)) if e.len() == a.len() => {
                            let diff: Vec<usize> = (0..e.len())
                                .filter(|&i| e[i] != a[i])
                                .map(|i| start + i)
                                .collect();
                            format!("differing at step item indexes {}", some(&diff, 10))
                        }
                        _ => format!("RedisBloom answered {expected}, layerbloom {actual}"),
                    };
                    self.fail(
                        label,
                        format!(
                            "step {} + items {start}..{end}: {detail}",
                            show_json_cmd(args, orig, key)
                        ),
                    );
                }
            }
            if err_at.is_some_and(|e| e < end) {
                break;
            }
            start = end;
        }
        if mismatches > 5 {
            self.fail(
                label,
                format!(
                    "step {}: {mismatches} replies differed in all",
                    show_json_cmd(args, orig, key)
                ),
            );
        }
    }

    /// In classic mode, BF.INFO (Size included) and the Size checks of a loaded filter.
    fn check_classic_size(&mut self, label: &str, key: &str, rec: &Json) {
        self.check_info(label, key, rec, Size::Compare);
        let orig = jstr(&rec["key"], "key");
        let expect = &rec["expect"];
        for check in arr(&expect["checks"], "checks") {
            let args = arr(&check["cmd"], "check cmd");
            if args.len() == 3
                && jstr(&args[0], "cmd").eq_ignore_ascii_case("BF.INFO")
                && jstr(&args[2], "field").eq_ignore_ascii_case("SIZE")
            {
                let actual = to_json(&self.con.raw(&json_cmd(args, orig, key)));
                if actual != check["reply"] {
                    self.fail(
                        label,
                        format!(
                            "{} in classic mode: RedisBloom answered {}, layerbloom {actual}",
                            show_json_cmd(args, orig, key),
                            check["reply"]
                        ),
                    );
                }
            }
        }
    }
}

fn filters() -> &'static [Json] {
    arr(&manifest()["filters"], "filters")
}

fn aof_filters() -> &'static [Json] {
    arr(&manifest()["aof"]["filters"], "aof.filters")
}

fn legacy() -> &'static [Json] {
    arr(&manifest()["legacy"], "legacy")
}

fn key_of(rec: &Json) -> &str {
    jstr(&rec["key"], "key")
}

/// RESTOREs a legacy record's payload into `key` and replays its later commands.
fn restore_legacy(run: &mut Run, label: &str, key: &str, rec: &Json) -> bool {
    let payload = fixture_bytes(jstr(&rec["payload_file"], "payload_file"));
    run.same(
        label,
        "payload size (fixture reading)",
        uint(&rec["payload_bytes"], "payload_bytes") as usize,
        payload.len(),
    );
    if !run.expect_ok(label, &cmd!("RESTORE", key, 0, payload)) {
        return false;
    }
    run.replay_steps(label, key, rec);
    true
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/// RedisBloom's `dump.rdb` loads at start-up and every key answers as RedisBloom did; in
/// classic mode the loaded filters also report RedisBloom's Size.
#[test]
fn dump_rdb_answers_like_redisbloom() {
    require_own_server!();
    let m = manifest();
    let server = server_on_dump_rdb();
    let mut run = Run::new(&server);
    run.check_keys("[dump.rdb]", &m["rdb"]["keys"]);
    run.check_plain_keys("[dump.rdb]", &m["rdb"]["plain_keys"]);
    for rec in filters() {
        let key = key_of(rec);
        run.check_filter(
            &format!("[dump.rdb] {key}"),
            key,
            rec,
            filters(),
            Size::Skip,
        );
    }
    run.con
        .ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "classic"));
    for rec in filters() {
        let key = key_of(rec);
        run.check_classic_size(&format!("[dump.rdb, classic mode] {key}"), key, rec);
    }
    run.finish("dump.rdb");
}

/// Every filter's RedisBloom `DUMP` payload RESTOREs and answers as RedisBloom did.
#[test]
fn dump_payloads_restore_like_redisbloom() {
    require_own_server!();
    let server = Server::start();
    let mut run = Run::new(&server);
    for rec in filters() {
        let orig = key_of(rec);
        let key = format!("restored:{orig}");
        let label = format!("[RESTORE dump_b64] {orig}");
        let payload = b64(jstr(&rec["dump_b64"], "dump_b64"));
        if run.expect_ok(&label, &cmd!("RESTORE", &key, 0, payload)) {
            run.check_filter(&label, &key, rec, filters(), Size::Skip);
        }
    }
    run.finish("DUMP payloads");
}

/// Every RedisBloom SCANDUMP stream rebuilds its filter through BF.LOADCHUNK, and the rebuilt
/// filter's SCANDUMP is RedisBloom's stream byte for byte.
#[test]
fn scandump_streams_load_like_redisbloom() {
    require_own_server!();
    let server = Server::start();
    let mut run = Run::new(&server);
    for rec in filters() {
        let orig = key_of(rec);
        let key = format!("loaded:{orig}");
        let label = format!("[LOADCHUNK scandump] {orig}");
        let stream = stream_file(jstr(&rec["scandump_file"], "scandump_file"));
        if !run.loadchunk_stream(&label, &key, &stream) {
            continue;
        }
        run.check_filter(&label, &key, rec, filters(), Size::Skip);
        match run.scandump_walk(&key) {
            Ok(again) => run.same_stream(&label, &stream, &again),
            Err(e) => run.fail(&label, e),
        }
    }
    run.finish("SCANDUMP streams");
}

/// RedisBloom's multi-part AOF directory (BF.LOADCHUNK in the base, traffic in the incr file)
/// replays at start-up into the state RedisBloom had.
#[test]
fn aof_replays_like_redisbloom() {
    require_own_server!();
    check_aof(&[], Size::Skip, "AOF");
}

/// The same AOF in classic mode: RedisBloom's creation commands in the incr file
/// (BF.RESERVE, BF.INSERT) make classic filters, so every answer is RedisBloom's, BF.INFO
/// Size included.
#[test]
fn aof_replays_like_redisbloom_in_classic_mode() {
    require_own_server!();
    check_aof(
        &["bf-layout", "classic"],
        Size::Compare,
        "AOF, classic mode",
    );
}

fn check_aof(module_args: &[&str], size: Size, what: &str) {
    let m = manifest();
    let server = server_on_aof(module_args);
    let mut run = Run::new(&server);
    let label = format!("[{what}]");
    run.check_keys(&label, &m["aof"]["keys"]);
    run.check_plain_keys(&label, &m["aof"]["plain_keys"]);
    for rec in aof_filters() {
        let key = key_of(rec);
        run.check_filter(&format!("{label} {key}"), key, rec, aof_filters(), size);
    }
    run.finish(what);
}

/// The legacy payloads (encoding versions 0 to 3: 32-bit hash, power-of-two layers, NOROUND,
/// non-scaling) RESTORE, take RedisBloom's later commands with its replies, and answer as
/// RedisBloom did; RedisBloom's re-encoding of each (`redump_b64`) does too.
#[test]
fn legacy_payloads_restore_like_redisbloom() {
    require_own_server!();
    assert!(
        arr(&manifest()["legacy_not_kept"], "legacy_not_kept").is_empty(),
        "the fixtures list legacy payloads RedisBloom refused: this test does not know them"
    );
    let server = Server::start();
    let mut run = Run::new(&server);
    for rec in legacy() {
        let key = key_of(rec);
        let name = jstr(&rec["name"], "name");
        let label = format!("[legacy {name}] {key}");
        if restore_legacy(&mut run, &label, key, rec) {
            run.check_filter(&label, key, rec, legacy(), Size::Skip);
        }
        let redump = format!("redump:{key}");
        let label = format!("[legacy {name}, RedisBloom's redump] {redump}");
        let payload = b64(jstr(&rec["redump_b64"], "redump_b64"));
        if run.expect_ok(&label, &cmd!("RESTORE", &redump, 0, payload)) {
            run.check_filter(&label, &redump, rec, legacy(), Size::Skip);
        }
    }
    run.finish("legacy payloads");
}

/// In classic mode (`bf-layout classic`) replaying each filter's creation gives RedisBloom's
/// replies, then RedisBloom's BF.INFO (Size included), BF.DEBUG, probe answers and SCANDUMP
/// stream, byte for byte. The AOF fixtures' traffic is replayed too.
#[test]
fn classic_mode_builds_what_redisbloom_built() {
    require_own_server!();
    let server = Server::builder()
        .module_args(&["bf-layout", "classic"])
        .start();
    let mut run = Run::new(&server);
    let layout: Vec<String> = run.con.q(&cmd!("CONFIG", "GET", &setting("bf-layout")));
    assert_eq!(
        layout,
        [setting("bf-layout"), "classic".to_string()],
        "the module argument"
    );
    for rec in filters() {
        let key = key_of(rec);
        let label = format!("[classic replay] {key}");
        run.replay_steps(&label, key, rec);
        run.check_filter(&label, key, rec, filters(), Size::Compare);
        let stream = stream_file(jstr(&rec["scandump_file"], "scandump_file"));
        match run.scandump_walk(key) {
            Ok(actual) => run.same_stream(&label, &stream, &actual),
            Err(e) => run.fail(&label, e),
        }
    }
    for rec in aof_filters() {
        let key = key_of(rec);
        let label = format!("[classic replay of the AOF traffic] {key}");
        run.replay_steps(&label, key, rec);
        run.check_filter(&label, key, rec, aof_filters(), Size::Compare);
    }
    run.finish("classic mode");
}

/// The data goes back: every RedisBloom filter (from dump.rdb, the legacy payloads and
/// RedisBloom's re-encodings of them) copies through BF.SCANDUMP / BF.LOADCHUNK into an
/// identical filter, and an RDB save (in layerbloom's own encoding) and restart keeps every
/// key and every answer.
#[test]
fn redisbloom_data_survives_copies_and_restarts() {
    require_own_server!();
    let m = manifest();
    let mut server = server_on_dump_rdb();
    let mut run = Run::new(&server);

    // Every kind of RedisBloom filter in one server: dump.rdb's, and the legacy ones.
    let mut recs: Vec<(String, &Json, &[Json])> = filters()
        .iter()
        .map(|r| (key_of(r).to_string(), r, filters()))
        .collect();
    for rec in legacy() {
        let key = key_of(rec);
        if restore_legacy(&mut run, &format!("[legacy {key}]"), key, rec) {
            recs.push((key.to_string(), rec, legacy()));
        }
        let redump = format!("redump:{key}");
        let payload = b64(jstr(&rec["redump_b64"], "redump_b64"));
        if run.expect_ok(
            &format!("[legacy redump] {redump}"),
            &cmd!("RESTORE", &redump, 0, payload),
        ) {
            recs.push((redump, rec, legacy()));
        }
    }

    // SCANDUMP, then LOADCHUNK into a new key: the same filter.
    let mut copies = Vec::new();
    for (key, rec, siblings) in &recs {
        let label = format!("[SCANDUMP/LOADCHUNK copy] {key}");
        let stream = match run.scandump_walk(key) {
            Ok(stream) => stream,
            Err(e) => {
                run.fail(&label, e);
                continue;
            }
        };
        let copy = format!("copy:{key}");
        if !run.loadchunk_stream(&label, &copy, &stream) {
            continue;
        }
        let (a, b) = (digest(&mut run.con, key), digest(&mut run.con, &copy));
        run.same(&label, "DEBUG DIGEST-VALUE of the copy", a, b);
        match run.scandump_walk(&copy) {
            Ok(again) => run.same_stream(&label, &stream, &again),
            Err(e) => run.fail(&label, e),
        }
        copies.push((copy, *rec, *siblings));
    }
    recs.extend(copies);

    // SAVE and restart on the same dir: every key comes back with every answer.
    let keys: Vec<String> = run.con.q(&cmd!("KEYS", "*"));
    let before: BTreeMap<String, String> = keys
        .iter()
        .map(|k| (k.clone(), digest(&mut run.con, k)))
        .collect();
    run.con.ok(&cmd!("SAVE"));
    drop(run);
    server.restart(Stop::NoSave);
    let mut run = Run::new(&server);
    let after: BTreeMap<String, String> = keys
        .iter()
        .map(|k| (k.clone(), digest(&mut run.con, k)))
        .collect();
    run.same(
        "[SAVE + restart]",
        "keys and DEBUG DIGEST-VALUE",
        before,
        after,
    );
    run.check_plain_keys("[SAVE + restart]", &m["rdb"]["plain_keys"]);
    for (key, rec, siblings) in &recs {
        run.check_filter(
            &format!("[SAVE + restart] {key}"),
            key,
            rec,
            siblings,
            Size::Skip,
        );
    }
    // What was saved is layerbloom's own encoding (DUMP writes the same as SAVE).
    let first = key_of(&filters()[0]);
    let dumped: Vec<u8> = run.con.q(&cmd!("DUMP", first));
    if dumped.len() > 10 && dumped[0] == 7 && dumped[1] == 0x81 {
        let id = u64::from_be_bytes(dumped[2..10].try_into().unwrap());
        eprintln!("layerbloom saves encoding version {}", id & 1023);
    }
    run.finish("copies and restarts");
}

//! `CF.*` helpers: SCANDUMP walks, the RedisBloom cuckoo fixtures' manifest notation (item
//! rules, run-length replies, commands with binary arguments) and SHA-256 (the fixtures pin
//! SCANDUMP streams by their hash; the cuckoo core's tests' own).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use redis::{Cmd, Value};
use serde_json::{json, Value as Json};

use super::conn::{server_error_text, Exec};

/// `tests/fixtures/redisbloom-cf`, in the repository.
pub fn cf_fixtures_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redisbloom-cf");
    assert!(
        dir.join("manifest.json").is_file(),
        "the RedisBloom cuckoo fixtures are missing: expected {}",
        dir.display()
    );
    dir
}

/// The cuckoo fixtures' manifest.json, parsed once.
pub fn cf_manifest() -> &'static Json {
    static MANIFEST: OnceLock<Json> = OnceLock::new();
    MANIFEST.get_or_init(|| {
        let bytes = std::fs::read(cf_fixtures_dir().join("manifest.json")).expect("manifest");
        let m: Json = serde_json::from_slice(&bytes).expect("manifest.json parses");
        assert_eq!(
            m["format"], "redisbloom-cf-fixtures/1",
            "unknown fixture format"
        );
        m
    })
}

pub fn b64(text: &str) -> Vec<u8> {
    B64.decode(text)
        .unwrap_or_else(|e| panic!("bad base64 ({e}): {text:.40}"))
}

pub fn to_b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// A manifest argument: a string, or `{"b64": ...}`.
pub fn json_arg(a: &Json) -> Vec<u8> {
    match a {
        Json::String(s) => s.clone().into_bytes(),
        Json::Object(o) => b64(o["b64"].as_str().expect("b64 argument")),
        Json::Number(n) => n.to_string().into_bytes(),
        other => panic!("manifest: bad argument {other}"),
    }
}

/// A manifest command (`cmd` list) plus extra arguments.
pub fn json_cmd(args: &[Json], extra: &[Vec<u8>]) -> Cmd {
    let mut c = redis::cmd(args[0].as_str().expect("command name"));
    for a in &args[1..] {
        c.arg(json_arg(a));
    }
    for e in extra {
        c.arg(e.as_slice());
    }
    c
}

/// Expands an item rule of the cuckoo manifest into its byte strings, in order.
pub fn expand_items(rule: &Json) -> Vec<Vec<u8>> {
    let num = |k: &str| {
        rule[k]
            .as_u64()
            .unwrap_or_else(|| panic!("rule {k}: {rule}"))
    };
    match rule["rule"].as_str().expect("rule name") {
        "decimal" => {
            let prefix = rule["prefix"].as_str().expect("prefix");
            (0..num("count"))
                .map(|i| format!("{prefix}{}", num("start") + i).into_bytes())
                .collect()
        }
        "le32" => {
            let hex = rule["prefix_hex"].as_str().expect("prefix_hex");
            let prefix: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            (0..num("count"))
                .map(|i| {
                    let mut item = prefix.clone();
                    item.extend_from_slice(&((num("start") + i) as u32).to_le_bytes());
                    item
                })
                .collect()
        }
        "b64list" => rule["b64"]
            .as_array()
            .expect("b64 list")
            .iter()
            .map(|e| b64(e.as_str().expect("b64 entry")))
            .collect(),
        "cycle" => {
            let of = expand_items(&rule["of"]);
            (0..num("times")).flat_map(|_| of.clone()).collect()
        }
        "concat" => rule["parts"]
            .as_array()
            .expect("parts")
            .iter()
            .flat_map(expand_items)
            .collect(),
        "pick" => {
            let of = expand_items(&rule["of"]);
            rule["indexes"]
                .as_array()
                .expect("indexes")
                .iter()
                .map(|i| of[i.as_u64().expect("index") as usize].clone())
                .collect()
        }
        "unique" => {
            let mut seen = std::collections::HashSet::new();
            expand_items(&rule["of"])
                .into_iter()
                .filter(|i| seen.insert(i.clone()))
                .collect()
        }
        other => panic!("unknown item rule {other}"),
    }
}

/// A run-length list `[[value, run], ...]` expanded.
pub fn expand_rle(rle: &Json) -> Vec<Json> {
    rle.as_array()
        .expect("rle")
        .iter()
        .flat_map(|pair| {
            let run = pair[1].as_u64().expect("run") as usize;
            std::iter::repeat_n(pair[0].clone(), run)
        })
        .collect()
}

/// A RESP2 reply in the manifest's notation: integers, strings (`{"b64"}` when not
/// printable ASCII), null, lists, `{"error": text}`.
pub fn reply_json(v: &Value) -> Json {
    match v {
        Value::Nil => Json::Null,
        Value::Int(n) => json!(n),
        Value::Boolean(b) => json!(i64::from(*b)),
        Value::BulkString(b) => {
            if b.iter().all(|c| (0x20..0x7f).contains(c)) {
                Json::String(String::from_utf8_lossy(b).into_owned())
            } else {
                json!({ "b64": to_b64(b) })
            }
        }
        Value::SimpleString(t) => Json::String(t.clone()),
        Value::Okay => json!("OK"),
        Value::Array(xs) => Json::Array(xs.iter().map(reply_json).collect()),
        Value::Map(kv) => Json::Array(
            kv.iter()
                .flat_map(|(k, v)| [reply_json(k), reply_json(v)])
                .collect(),
        ),
        Value::ServerError(e) => json!({ "error": server_error_text(e) }),
        other => json!(format!("unexpected reply {other:?}")),
    }
}

/// `n` distinct items `<prefix>:<i>`.
pub fn cf_items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}:{i}").into_bytes())
        .collect()
}

/// `CF.INSERT key ITEMS items...` in batches; the per-item replies.
pub fn cf_insert(con: &mut redis::Connection, key: &str, items: &[Vec<u8>]) -> Vec<i64> {
    let mut out = Vec::new();
    for chunk in items.chunks(500) {
        let mut c = crate::cmd!("CF.INSERT", key, "ITEMS");
        for i in chunk {
            c.arg(i.as_slice());
        }
        out.extend(con.q::<Vec<i64>>(&c));
    }
    out
}

/// `CF.INFO key`'s field names, in RedisBloom's order.
pub const CF_INFO_FIELDS: [&str; 8] = [
    "Size",
    "Number of buckets",
    "Number of filters",
    "Number of items inserted",
    "Number of items deleted",
    "Bucket size",
    "Expansion rate",
    "Max iterations",
];

/// `CF.INFO key`'s fields, by name.
pub fn cf_info(con: &mut redis::Connection, key: &str) -> Vec<(String, i64)> {
    let flat: Vec<Value> = con.q(&crate::cmd!("CF.INFO", key));
    cf_info_pairs(&flat)
}

/// A `CF.INFO` reply's flat name-value list as `(name, value)` pairs.
pub fn cf_info_pairs(flat: &[Value]) -> Vec<(String, i64)> {
    flat.chunks(2)
        .map(|p| {
            (
                redis::from_redis_value(p[0].clone()).unwrap(),
                redis::from_redis_value(p[1].clone()).unwrap(),
            )
        })
        .collect()
}

/// One field of `CF.INFO key`.
pub fn cf_field(con: &mut redis::Connection, key: &str, name: &str) -> i64 {
    cf_info(con, key)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in CF.INFO"))
        .1
}

/// The whole `CF.SCANDUMP` stream of a key: `(iterator, data)` until `(0, None)` (included).
pub fn cf_scandump(con: &mut redis::Connection, key: &str) -> Vec<(i64, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut it = 0i64;
    loop {
        let (next, data): (i64, Option<Vec<u8>>) = con.q(&crate::cmd!("CF.SCANDUMP", key, it));
        out.push((next, data));
        if next == 0 {
            return out;
        }
        assert!(out.len() < 100_000, "CF.SCANDUMP of {key} does not end");
        it = next;
    }
}

/// Replays a SCANDUMP stream into `key` (every element but the final `[0, nil]`).
pub fn cf_loadchunks(con: &mut redis::Connection, key: &str, stream: &[(i64, Option<Vec<u8>>)]) {
    for (it, data) in stream {
        if let Some(data) = data {
            con.ok(&crate::cmd!("CF.LOADCHUNK", key, *it, data.as_slice()));
        }
    }
}

/// A SCANDUMP stream written as the fixtures' compact JSON (`[[1,"<b64>"],...,[0,null]]`).
pub fn stream_json(stream: &[(i64, Option<Vec<u8>>)]) -> String {
    let parts: Vec<String> = stream
        .iter()
        .map(|(it, data)| match data {
            Some(d) => format!("[{it},\"{}\"]", to_b64(d)),
            None => format!("[{it},null]"),
        })
        .collect();
    format!("[{}]", parts.join(","))
}

#[path = "../../filter/src/cuckoo/tests/sha256.rs"]
mod sha256;
pub use sha256::sha256_hex;

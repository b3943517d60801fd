//! `CF.*` helpers: SCANDUMP walks, the RedisBloom cuckoo fixtures' manifest notation (item
//! rules, run-length replies, commands with binary arguments) and SHA-256 (the fixtures pin
//! SCANDUMP streams by their hash).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use redis::{Cmd, Value};
use serde_json::{json, Value as Json};

use super::conn::{server_error_text, Exec};

/// `../shared/fixtures/redisbloom-cf`, next to the crate.
pub fn cf_fixtures_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/redisbloom-cf");
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

/// SHA-256 as lowercase hex (FIPS 180-4).
pub fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(block[i * 4..i * 4 + 4].try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

//! layerbloom's CF commands answer exactly as RedisBloom's did, fixture by fixture.
//!
//! The fixtures (`tests/fixtures/redisbloom-cf`, described by its README.md) were written
//! by the real RedisBloom with every answer it gave. Each test loads one source of RedisBloom
//! cuckoo data into a fresh server and checks every recorded answer (TYPE, CF.INFO, CF.DEBUG,
//! CF.EXISTS / CF.MEXISTS / CF.COUNT of every tracked item, the probes and their counts, the
//! recorded checks, and the SCANDUMP stream by its SHA-256): `dump.rdb`, the `DUMP` payloads,
//! the SCANDUMP streams (LOADCHUNK), the AOF directory, the legacy payloads and their later
//! commands, the malformed payloads; every filter is also rebuilt from its command log. The
//! `errors` and `resp` tables are replayed, and RedisBloom 2.8.2 itself is run beside
//! layerbloom on a seeded random command stream.
//!
//! Where layerbloom answers otherwise on purpose, [`DIFFERENCES`] says so, once, with the
//! reason (docs/compatibility.md, "Cuckoo filters (CF.*)", lists the same differences).

use crate::common;

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use common::{
    cf_fixtures_dir, cf_loadchunks, cf_manifest, cf_scandump, copy_tree, expand_items, expand_rle,
    json_arg, json_cmd, reply_json, sha256_hex, stream_json, wait_until, Exec, Server, Stop,
};
use redis::{Cmd, Value};
use serde_json::{json, Value as Json};

// ---------------------------------------------------------------------------------------------
// The deliberate differences, in one place
// ---------------------------------------------------------------------------------------------

/// What layerbloom answers instead of RedisBloom's recorded reply.
enum Ours {
    /// Exactly this reply (manifest notation).
    Reply(Json),
    /// An error starting with this text (RedisBloom's text, then why).
    ErrorStartingWith(&'static str),
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The fixture commands layerbloom answers differently on purpose: the command (as the
/// manifest writes it, compact JSON), layerbloom's answer, and why. Commands after one of
/// these that see its effect are listed too.
fn differences() -> Vec<(&'static str, Ours, &'static str)> {
    use Ours::*;
    let wrongtype = || Reply(json!({ "error": WRONGTYPE }));
    let not_found = || Reply(json!({ "error": "ERR not found" }));
    vec![
        (
            r#"["CF.RESERVE","bucketsize","100"]"#,
            Reply(json!("OK")),
            "options are read after the capacity only: a key may be named like an option",
        ),
        (
            r#"["CF.RESERVE","pub:err:ok1","100","FOO","3"]"#,
            Reply(json!({"error": "ERR Unknown argument received"})),
            "an unknown option word is refused (RedisBloom ignores it, so a typo goes unseen)",
        ),
        (
            r#"["CF.INFO","pub:err:ok1"]"#,
            not_found(),
            "not created, above",
        ),
        (
            r#"["CF.INFO","pub:err:cf","CAPACITY"]"#,
            Reply(json!({"error": "Invalid information value"})),
            "CF.INFO takes a field word, as BF.INFO does (HEALTH, LOAD, FPR, ...); CAPACITY is none",
        ),
        (
            r#"["CF.SCANDUMP","pub:err:ok1","0"]"#,
            not_found(),
            "not created, above",
        ),
        (
            r#"["CF.RESERVE","pub:err:ok6","100","EXPANSION","2","EXPANSION","4"]"#,
            Reply(json!({"error": "ERR option EXPANSION given more than once"})),
            "a repeated option is refused (RedisBloom takes the first silently)",
        ),
        (
            r#"["CF.INFO","pub:err:ok6"]"#,
            not_found(),
            "not created, above",
        ),
        (
            r#"["CF.RESERVE","pub:err:missing","4611686018427387904"]"#,
            ErrorStartingWith("ERR Insufficient memory to create filter"),
            "the error says which limit and how much",
        ),
        (
            r#"["CF.RESERVE","pub:err:missing","9223372036854775807"]"#,
            ErrorStartingWith("ERR Insufficient memory to create filter"),
            "the error says which limit and how much",
        ),
        (
            r#"["CF.INSERT","pub:err:missing","CAPACITY","4611686018427387904","ITEMS","a"]"#,
            ErrorStartingWith("ERR Insufficient memory to create filter"),
            "the error says which limit and how much",
        ),
        (
            r#"["CF.EXISTS","pub:err:str","a"]"#,
            wrongtype(),
            "a key of another type is WRONGTYPE for every CF command, as for BF",
        ),
        (
            r#"["CF.EXISTS","pub:err:bf","a"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.MEXISTS","pub:err:str","a","b"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.MEXISTS","pub:err:bf","x"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.COUNT","pub:err:str","a"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.COUNT","pub:err:bf","x"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.DEL","pub:err:str","a"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.DEL","pub:err:bf","x"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.COMPACT","pub:err:str"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.COMPACT","pub:err:bf"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["CF.EXISTS","pub:resp:str","a"]"#,
            wrongtype(),
            "WRONGTYPE, as above",
        ),
        (
            r#"["BF.EXISTS","pub:err:cf","x"]"#,
            wrongtype(),
            "BF commands answer WRONGTYPE on another type (layerbloom's BF difference)",
        ),
        (
            r#"["CF.INSERT","pub:err:ok8","nx","ITEMS","a"]"#,
            Reply(json!({"error": "Unknown argument received"})),
            "CF.INSERT options are whole words (RedisBloom reads only their first letter)",
        ),
        (
            r#"["CF.INSERT","pub:err:ok9","cap","10","icecream","a","b"]"#,
            Reply(json!({"error": "Unknown argument received"})),
            "whole words, as above",
        ),
        (
            r#"["CF.INFO","pub:err:ok9"]"#,
            not_found(),
            "not created, above",
        ),
        (
            r#"["CF.INSERTNX","pub:err:ok9","ITEMS","a","zz"]"#,
            Reply(json!([1, 1])),
            "the filter does not hold `a`: see above",
        ),
        (
            r#"["CF.LOADCHUNK","pub:err:ok12","1",{"b64":"AAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAwAAAAAAAAACABQAAwA="}]"#,
            Reply(json!({"error": "Couldn't create filter!"})),
            "a header's expansion must be a power of two, as CF.RESERVE makes it",
        ),
        (
            r#"["CF.INFO","pub:err:ok12"]"#,
            not_found(),
            "not created, above",
        ),
        (
            r#"["CF.LOADCHUNK","pub:err:ok13","1",{"b64":"AAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAQABAAAAAAACABQAAQA="}]"#,
            Reply(json!({"error": "Couldn't create filter!"})),
            "a sub-filter count is not truncated to 16 bits (65537 is refused, over 1024)",
        ),
        (
            r#"["CF.INFO","pub:err:ok13"]"#,
            not_found(),
            "not created, above",
        ),
        (
            r#"["CF.LOADCHUNK","pub:err:missing","1",{"b64":"AAAAAAAAAAAAAAAAAAAAAQAAAAAAAAAAAQAAAAAAAAACABQAAQA="}]"#,
            ErrorStartingWith("ERR Insufficient memory to create filter"),
            "a header over the memory limit says which limit and how much",
        ),
    ]
}

/// The manifest notation of a command, as [`differences`] names it.
fn cmd_key(cmd: &Json) -> String {
    serde_json::to_string(cmd).expect("json")
}

/// Whether `got` is what layerbloom should answer to `cmd`, RedisBloom having answered
/// `redisbloom`.
fn agrees(diffs: &HashMap<String, &Ours>, cmd: &Json, redisbloom: &Json, got: &Json) -> bool {
    match diffs.get(&cmd_key(cmd)) {
        None => got == redisbloom,
        Some(Ours::Reply(r)) => got == r,
        Some(Ours::ErrorStartingWith(p)) => got["error"].as_str().is_some_and(|e| e.starts_with(p)),
    }
}

// ---------------------------------------------------------------------------------------------
// Checking a filter against a record
// ---------------------------------------------------------------------------------------------

/// A connection and every discrepancy found so far: a test fails at the end with all of them.
struct Run {
    con: redis::Connection,
    problems: Vec<String>,
}

impl Run {
    fn new(s: &Server) -> Self {
        Run {
            con: s.conn(),
            problems: Vec::new(),
        }
    }

    fn same(&mut self, what: &str, redisbloom: &Json, ours: &Json) {
        if redisbloom != ours {
            let show = |j: &Json| {
                let t = j.to_string();
                if t.len() > 300 {
                    format!("{}...", &t[..300])
                } else {
                    t
                }
            };
            self.problems.push(format!(
                "{what}: RedisBloom {}, layerbloom {}",
                show(redisbloom),
                show(ours)
            ));
        }
    }

    fn reply(&mut self, c: &Cmd) -> Json {
        reply_json(&self.con.raw(c))
    }

    fn finish(self, what: &str) {
        assert!(
            self.problems.is_empty(),
            "{what}: {} discrepancies:\n{}",
            self.problems.len(),
            self.problems.join("\n")
        );
    }

    /// Every expectation of `expect` for `key` (named `label` in messages).
    fn check(&mut self, label: &str, key: &str, expect: &Json) {
        let t = self.reply(&cmd!("TYPE", key));
        self.same(&format!("{label}: TYPE"), &expect["type"], &t);
        let info: Vec<Json> = expect["info"]
            .as_array()
            .expect("info")
            .iter()
            .flat_map(|p| [p[0].clone(), p[1].clone()])
            .collect();
        let got = self.reply(&cmd!("CF.INFO", key));
        self.same(&format!("{label}: CF.INFO"), &Json::Array(info), &got);
        let got = self.reply(&cmd!("CF.DEBUG", key));
        self.same(&format!("{label}: CF.DEBUG"), &expect["debug"], &got);

        let tracked = expand_items(&expect["tracked"]);
        self.same(
            &format!("{label}: tracked items"),
            &expect["tracked_count"],
            &json!(tracked.len()),
        );
        let exists = expand_rle(&expect["exists_rle"]);
        let counts = expand_rle(&expect["count_rle"]);
        let got_exists = self.per_item("CF.EXISTS", key, &tracked);
        let got_mexists = self.mexists(key, &tracked);
        let got_counts = self.per_item("CF.COUNT", key, &tracked);
        for (i, item) in tracked.iter().enumerate() {
            let name = String::from_utf8_lossy(item);
            self.same(
                &format!("{label}: CF.EXISTS {name}"),
                &exists[i],
                &got_exists[i],
            );
            self.same(
                &format!("{label}: CF.MEXISTS {name}"),
                &exists[i],
                &got_mexists[i],
            );
            self.same(
                &format!("{label}: CF.COUNT {name}"),
                &counts[i],
                &got_counts[i],
            );
        }

        let probes = &expect["probes"];
        let items = expand_items(&probes["items"]);
        self.same(
            &format!("{label}: probes"),
            &probes["count"],
            &json!(items.len()),
        );
        let found = self.mexists(key, &items);
        let positives: Vec<usize> = (0..items.len()).filter(|&i| found[i] == json!(1)).collect();
        self.same(
            &format!("{label}: probe positives"),
            &probes["positives"],
            &json!(positives),
        );
        let positive_items: Vec<Vec<u8>> = positives.iter().map(|&i| items[i].clone()).collect();
        let counts = self.per_item("CF.COUNT", key, &positive_items);
        self.same(
            &format!("{label}: probe positives' CF.COUNT"),
            &probes["positive_counts"],
            &Json::Array(counts),
        );

        for check in expect["checks"].as_array().into_iter().flatten() {
            let args = check["cmd"].as_array().expect("check cmd");
            let got = self.reply(&json_cmd(args, &[]));
            self.same(
                &format!("{label}: {}", cmd_key(&check["cmd"])),
                &check["reply"],
                &got,
            );
        }

        let stream = cf_scandump(&mut self.con, key);
        let sha = sha256_hex(stream_json(&stream).as_bytes());
        self.same(
            &format!("{label}: SCANDUMP stream's sha256"),
            &expect["scandump_sha256"],
            &json!(sha),
        );
    }

    /// One command per item, pipelined: `cmd key item`.
    fn per_item(&mut self, name: &str, key: &str, items: &[Vec<u8>]) -> Vec<Json> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(1000) {
            let mut p = redis::pipe();
            for item in chunk {
                p.cmd(name).arg(key).arg(item.as_slice());
            }
            let replies: Vec<Value> = p.query(&mut self.con).expect("pipeline");
            out.extend(replies.iter().map(reply_json));
        }
        out
    }

    /// CF.MEXISTS in batches of 2000.
    fn mexists(&mut self, key: &str, items: &[Vec<u8>]) -> Vec<Json> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(2000) {
            let mut c = cmd!("CF.MEXISTS", key);
            for item in chunk {
                c.arg(item.as_slice());
            }
            match self.reply(&c) {
                Json::Array(xs) => out.extend(xs),
                other => {
                    self.problems
                        .push(format!("CF.MEXISTS {key} replied {other}"));
                    out.extend(std::iter::repeat_n(Json::Null, chunk.len()));
                }
            }
        }
        out
    }

    /// Replays a record's steps (`cmd` + `items` in batches) and compares every reply and
    /// `debug_after`. `loadchunk_of` steps replay that filter's SCANDUMP file.
    fn replay_steps(&mut self, label: &str, key: &str, steps: &[Json]) {
        for (n, step) in steps.iter().enumerate() {
            let what = format!("{label}: step {n}");
            if step.get("restore_payload").is_some() {
                continue;
            }
            if let Some(source) = step["loadchunk_of"].as_str() {
                let file = filter_record(source)["scandump_file"]
                    .as_str()
                    .expect("file");
                let stream = stream_file(file);
                cf_loadchunks(&mut self.con, key, &stream);
            } else if step.get("items").is_some() {
                let args = step["cmd"].as_array().expect("cmd");
                let items = expand_items(&step["items"]);
                let batch = step["batch"].as_u64().expect("batch") as usize;
                let expected = expand_rle(&step["replies"]);
                let mut got = Vec::with_capacity(items.len());
                for chunk in items.chunks(batch) {
                    let reply = self.reply(&json_cmd(args, chunk));
                    match reply {
                        Json::Array(xs) => got.extend(xs),
                        Json::Object(e) if batch > 1 => got.extend(std::iter::repeat_n(
                            json!({ "command_error": e["error"] }),
                            chunk.len(),
                        )),
                        other => got.push(other),
                    }
                }
                self.same(&format!("{what} replies"), &json!(expected), &json!(got));
            } else {
                let args = step["cmd"].as_array().expect("cmd");
                let got = self.reply(&json_cmd(args, &[]));
                self.same(
                    &format!("{what} {}", cmd_key(&step["cmd"])),
                    &step["reply"],
                    &got,
                );
            }
            if let Some(debug) = step.get("debug_after") {
                let got = self.reply(&cmd!("CF.DEBUG", key));
                self.same(&format!("{what} CF.DEBUG after"), debug, &got);
            }
        }
    }
}

fn filters() -> &'static [Json] {
    cf_manifest()["filters"].as_array().expect("filters")
}

fn filter_record(key: &str) -> &'static Json {
    filters()
        .iter()
        .find(|f| f["key"] == key)
        .unwrap_or_else(|| panic!("no filter {key} in the manifest"))
}

fn key_of(rec: &Json) -> &str {
    rec["key"].as_str().expect("key")
}

/// A SCANDUMP file of the fixtures: `[[iterator, base64 or null], ...]`.
fn stream_file(rel: &str) -> Vec<(i64, Option<Vec<u8>>)> {
    let bytes = fs::read(cf_fixtures_dir().join(rel)).expect("scandump file");
    let json: Json = serde_json::from_slice(&bytes).expect("scandump json");
    json.as_array()
        .expect("stream")
        .iter()
        .map(|e| {
            (
                e[0].as_i64().expect("iterator"),
                e[1].as_str().map(common::b64),
            )
        })
        .collect()
}

fn is_empty_stream(stream: &[(i64, Option<Vec<u8>>)]) -> bool {
    stream.len() == 1 && stream[0] == (0, None)
}

// ---------------------------------------------------------------------------------------------
// Loading RedisBloom's data
// ---------------------------------------------------------------------------------------------

#[test]
fn sha256_helper_matches_the_standard_vectors() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn cf_dump_rdb_answers_like_redisbloom() {
    require_own_server!();
    let mut s = Server::builder().start();
    copy_tree(
        &cf_fixtures_dir().join("dump.rdb"),
        &s.dir().join("dump.rdb"),
    );
    s.restart(Stop::NoSave);
    let mut run = Run::new(&s);
    let mut keys: Vec<String> = run.con.q(&cmd!("KEYS", "*"));
    keys.sort();
    let want: Vec<String> = serde_json::from_value(cf_manifest()["rdb"]["keys"].clone()).unwrap();
    run.same("dump.rdb keys", &json!(want), &json!(keys));
    for rec in filters() {
        run.check(key_of(rec), key_of(rec), &rec["expect"]);
    }
    let v: String = run.con.q(&cmd!("GET", "pub:string"));
    run.same(
        "pub:string",
        &cf_manifest()["rdb"]["plain_keys"][0]["value"],
        &json!(v),
    );
    run.finish("dump.rdb");
}

#[test]
fn cf_dump_payloads_restore_like_redisbloom() {
    let s = Server::start();
    let mut run = Run::new(&s);
    for rec in filters() {
        let key = key_of(rec).to_string();
        let payload = common::b64(rec["dump_b64"].as_str().expect("dump_b64"));
        run.con.ok(&cmd!("RESTORE", &key, 0, payload.as_slice()));
        run.check(&format!("RESTORE of {}", key_of(rec)), &key, &rec["expect"]);
        // DUMP writes RedisBloom's encoding: restored again, it answers the same.
        let again: Vec<u8> = run.con.q(&cmd!("DUMP", &key));
        let key2 = format!("{key}:again");
        run.con.ok(&cmd!("RESTORE", &key2, 0, again.as_slice()));
        let d1: Vec<String> = run.con.q(&cmd!("DEBUG", "DIGEST-VALUE", &key, &key2));
        if d1[0] != d1[1] {
            run.problems
                .push(format!("{key}: DUMP/RESTORE changed the value"));
        }
    }
    run.finish("DUMP payloads");
}

#[test]
fn cf_scandump_streams_load_like_redisbloom() {
    let s = Server::start();
    let mut run = Run::new(&s);
    for rec in filters() {
        let key = key_of(rec).to_string();
        let stream = stream_file(rec["scandump_file"].as_str().expect("scandump_file"));
        cf_loadchunks(&mut run.con, &key, &stream);
        if rec["expect"]["scandump_empty"] == json!(true) {
            assert!(is_empty_stream(&stream), "{key}");
            let n: i64 = run.con.q(&cmd!("EXISTS", &key));
            run.same(
                &format!("{key}: an empty stream creates no key"),
                &json!(0),
                &json!(n),
            );
            continue;
        }
        let again = cf_scandump(&mut run.con, &key);
        if again != stream {
            run.problems.push(format!(
                "{key}: SCANDUMP after LOADCHUNK is not the stream loaded"
            ));
        }
        run.check(
            &format!("LOADCHUNK of {}", key_of(rec)),
            &key,
            &rec["expect"],
        );
    }
    run.finish("SCANDUMP streams");
}

#[test]
fn cf_aof_replays_like_redisbloom() {
    require_own_server!();
    let m = cf_manifest();
    let config = m["aof"]["config"].as_object().expect("aof config");
    let mut b = Server::builder();
    for (name, value) in config {
        b = b.config(name, value.as_str().expect("config value"));
    }
    let mut s = b.start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", "appendonly", "no"));
    wait_until(
        std::time::Duration::from_secs(10),
        "the AOF to stop",
        || {
            let info = con.info_map("persistence");
            info.get("aof_enabled").map(String::as_str) == Some("0")
                && info.get("aof_rewrite_in_progress").map(String::as_str) == Some("0")
        },
    );
    drop(con);
    let target = s
        .dir()
        .join(config["appenddirname"].as_str().expect("dirname"));
    if target.exists() {
        fs::remove_dir_all(&target).expect("remove the server's own AOF dir");
    }
    copy_tree(
        &cf_fixtures_dir().join(m["aof"]["dir"].as_str().expect("aof dir")),
        &target,
    );
    s.restart(Stop::NoSave);
    let mut run = Run::new(&s);
    let mut keys: Vec<String> = run.con.q(&cmd!("KEYS", "*"));
    keys.sort();
    run.same("AOF keys", &m["aof"]["keys"], &json!(keys));
    for rec in m["aof"]["filters"].as_array().expect("aof filters") {
        run.check(&format!("AOF {}", key_of(rec)), key_of(rec), &rec["expect"]);
    }
    run.finish("AOF replay");
}

#[test]
fn cf_legacy_payloads_restore_like_redisbloom() {
    let s = Server::start();
    let mut run = Run::new(&s);
    for rec in cf_manifest()["legacy"].as_array().expect("legacy") {
        let key = key_of(rec);
        let name = rec["name"].as_str().expect("name");
        let payload =
            fs::read(cf_fixtures_dir().join(rec["payload_file"].as_str().expect("payload_file")))
                .expect("payload");
        run.con.ok(&cmd!("RESTORE", key, 0, payload.as_slice()));
        let steps = rec["steps"].as_array().expect("steps");
        run.replay_steps(name, key, steps);
        run.check(name, key, &rec["expect"]);
        let redump = common::b64(rec["redump_b64"].as_str().expect("redump"));
        let key2 = format!("{key}:redump");
        run.con.ok(&cmd!("RESTORE", &key2, 0, redump.as_slice()));
        run.check(
            &format!("{name} (RedisBloom's re-encoding)"),
            &key2,
            &rec["expect"],
        );
    }
    run.finish("legacy payloads");
}

#[test]
fn cf_malformed_payloads_are_refused_without_harm() {
    let s = Server::start();
    let mut run = Run::new(&s);
    for rec in cf_manifest()["malformed"].as_array().expect("malformed") {
        let name = rec["name"].as_str().expect("name");
        let payload = common::b64(rec["payload_b64"].as_str().expect("payload"));
        let key = format!("malformed:{name}");
        let got = run.reply(&cmd!("RESTORE", &key, 0, payload.as_slice()));
        // RedisBloom's verified replies must be ours; where it crashed or accepted what its
        // own commands refuse (bucket size 0, slot strings of the wrong length, a bucket
        // count that is not a power of two), layerbloom refuses the payload.
        let want = if rec["verified"] == json!(true) {
            rec["replies"][0]["reply"].clone()
        } else {
            json!({"error": "ERR Bad data format"})
        };
        run.same(&format!("RESTORE of {name}"), &want, &got);
        common::assert_pong(&mut run.con);
    }
    run.finish("malformed payloads");
}

#[test]
fn cf_every_fixture_rebuilds_from_its_command_log_like_redisbloom() {
    let s = Server::start();
    let mut run = Run::new(&s);
    let m = cf_manifest();
    let records = m["filters"]
        .as_array()
        .unwrap()
        .iter()
        .chain(m["aof"]["filters"].as_array().unwrap())
        // The client-made copy's expected state is RedisBloom's replay, not its commands'.
        .filter(|r| r.get("live_differs").is_none());
    for rec in records {
        let key = key_of(rec);
        let steps = rec["steps"].as_array().expect("steps");
        run.replay_steps(key, key, steps);
        run.check(&format!("rebuilt {key}"), key, &rec["expect"]);
    }
    run.finish("rebuilt fixtures");
}

// ---------------------------------------------------------------------------------------------
// RedisBloom's exact replies
// ---------------------------------------------------------------------------------------------

#[test]
fn cf_error_table_answers_like_redisbloom_but_for_listed_differences() {
    let s = Server::start();
    let mut run = Run::new(&s);
    let diffs = differences();
    let diffs: HashMap<String, &Ours> = diffs
        .iter()
        .map(|(cmd, ours, _)| (cmd.to_string(), ours))
        .collect();
    let errors = &cf_manifest()["errors"];
    for step in errors["setup"].as_array().expect("setup") {
        let args = step["cmd"].as_array().expect("cmd");
        let got = run.reply(&json_cmd(args, &[]));
        run.same(
            &format!("setup {}", cmd_key(&step["cmd"])),
            &step["reply"],
            &got,
        );
    }
    let mut used = 0;
    for case in errors["cases"].as_array().expect("cases") {
        let args = case["cmd"].as_array().expect("cmd");
        let got = run.reply(&json_cmd(args, &[]));
        if diffs.contains_key(&cmd_key(&case["cmd"])) {
            used += 1;
        }
        if !agrees(&diffs, &case["cmd"], &case["reply"], &got) {
            run.problems.push(format!(
                "{}: RedisBloom {}, layerbloom {} (listed difference: {})",
                cmd_key(&case["cmd"]),
                case["reply"],
                got,
                diffs.contains_key(&cmd_key(&case["cmd"]))
            ));
        }
    }
    assert!(
        used >= 25,
        "the differences table names commands the table has: {used}"
    );
    run.finish("error table");
}

/// Sends one command and reads exactly one reply's bytes.
fn raw_roundtrip(stream: &mut BufReader<TcpStream>, args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).as_bytes());
        out.extend(a);
        out.extend(b"\r\n");
    }
    stream.get_mut().write_all(&out).expect("write");
    let mut reply = Vec::new();
    read_value(stream, &mut reply);
    reply
}

/// Reads one RESP2/RESP3 value into `out`, bytes as received.
fn read_value(stream: &mut BufReader<TcpStream>, out: &mut Vec<u8>) {
    let mut line = Vec::new();
    stream.read_until(b'\n', &mut line).expect("read");
    out.extend(&line);
    let head = line[0];
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    match head {
        b'$' | b'=' | b'!' if n >= 0 => {
            let mut body = vec![0u8; n as usize + 2];
            stream.read_exact(&mut body).expect("read bulk");
            out.extend(body);
        }
        b'*' | b'~' | b'>' => (0..n.max(0)).for_each(|_| read_value(stream, out)),
        b'%' | b'|' => (0..2 * n.max(0)).for_each(|_| read_value(stream, out)),
        _ => {}
    }
}

#[test]
fn cf_resp2_and_resp3_bytes_are_redisbloom_s() {
    let s = Server::start();
    let diffs = differences();
    let diffs: HashMap<String, &Ours> = diffs
        .iter()
        .map(|(cmd, ours, _)| (cmd.to_string(), ours))
        .collect();
    let mut problems = Vec::new();
    for (protocol, field) in [(2, "resp2"), (3, "resp3")] {
        let tcp = TcpStream::connect(("127.0.0.1", s.port())).expect("connect");
        let mut stream = BufReader::new(tcp);
        raw_roundtrip(&mut stream, &[b"FLUSHALL".to_vec()]);
        if protocol == 3 {
            raw_roundtrip(&mut stream, &[b"HELLO".to_vec(), b"3".to_vec()]);
        }
        for case in cf_manifest()["resp"].as_array().expect("resp") {
            let args: Vec<Vec<u8>> = case["cmd"]
                .as_array()
                .expect("cmd")
                .iter()
                .map(json_arg)
                .collect();
            let got = raw_roundtrip(&mut stream, &args);
            if diffs.contains_key(&cmd_key(&case["cmd"])) {
                assert!(
                    got.starts_with(b"-WRONGTYPE"),
                    "{:?}",
                    String::from_utf8_lossy(&got)
                );
                continue;
            }
            let want = match &case[field] {
                Json::String(t) => t.clone().into_bytes(),
                Json::Object(o) => common::b64(o["b64"].as_str().expect("b64")),
                other => panic!("resp: {other}"),
            };
            if got != want {
                problems.push(format!(
                    "{field} {}: RedisBloom {:?}, layerbloom {:?}",
                    cmd_key(&case["cmd"]),
                    String::from_utf8_lossy(&want),
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// RedisBloom itself as the oracle
// ---------------------------------------------------------------------------------------------

/// A seeded random command stream over a few small filters (adds, NX adds, batches,
/// deletes, compactions, full non-scaling filters, many sub-filters), sent to layerbloom and
/// to RedisBloom: every reply and each filter's final SCANDUMP stream must be equal.
#[test]
fn cf_random_command_streams_answer_like_redisbloom() {
    require_own_server!();
    let Some((ours, theirs)) = common::ours_and_redisbloom() else {
        return;
    };
    let mut a = ours.conn();
    let mut b = theirs.conn();
    let mut problems = Vec::new();
    for seed in 1..=4u64 {
        let mut rng = common::Rng(seed * 0x9e37_79b9_7f4a_7c15);
        let keys: Vec<String> = (0..4).map(|i| format!("s{seed}:k{i}")).collect();
        let reserves = [
            vec!["64"],
            vec!["8", "BUCKETSIZE", "1", "EXPANSION", "2"],
            vec![
                "16",
                "BUCKETSIZE",
                "4",
                "MAXITERATIONS",
                "5",
                "EXPANSION",
                "0",
            ],
            vec![
                "4",
                "BUCKETSIZE",
                "2",
                "MAXITERATIONS",
                "3",
                "EXPANSION",
                "1",
            ],
        ];
        for (key, opts) in keys.iter().zip(&reserves) {
            let mut c = cmd!("CF.RESERVE", key);
            for o in opts {
                c.arg(*o);
            }
            let (x, y) = (reply_json(&a.raw(&c)), reply_json(&b.raw(&c)));
            if x != y {
                problems.push(format!("{}: {y} vs {x}", common::show(&c)));
            }
        }
        let item = |rng: &mut common::Rng| format!("i{}", rng.below(300)).into_bytes();
        for _ in 0..3000 {
            let key = rng.pick(&keys).clone();
            let c = match rng.below(10) {
                0..=2 => cmd!(
                    if rng.chance(50) { "CF.ADD" } else { "CF.ADDNX" },
                    &key,
                    item(&mut rng)
                ),
                3 => {
                    let mut c = cmd!(
                        if rng.chance(50) {
                            "CF.INSERT"
                        } else {
                            "CF.INSERTNX"
                        },
                        &key,
                        "ITEMS"
                    );
                    for _ in 0..=rng.below(20) {
                        c.arg(item(&mut rng));
                    }
                    c
                }
                4..=5 => cmd!("CF.DEL", &key, item(&mut rng)),
                6 => cmd!("CF.COUNT", &key, item(&mut rng)),
                7 => {
                    let mut c = cmd!("CF.MEXISTS", &key);
                    for _ in 0..=rng.below(10) {
                        c.arg(item(&mut rng));
                    }
                    c
                }
                8 if rng.chance(10) => cmd!("CF.COMPACT", &key),
                8 => cmd!("CF.INFO", &key),
                _ => cmd!("CF.DEBUG", &key),
            };
            let (x, y) = (reply_json(&a.raw(&c)), reply_json(&b.raw(&c)));
            if x != y {
                problems.push(format!(
                    "seed {seed}: {}: RedisBloom {y}, layerbloom {x}",
                    common::show(&c)
                ));
            }
        }
        for key in &keys {
            if cf_scandump(&mut a, key) != cf_scandump(&mut b, key) {
                problems.push(format!("seed {seed}: {key}: SCANDUMP streams differ"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems[..problems.len().min(30)].join("\n")
    );
}

/// A layerbloom replica of a RedisBloom primary (so also a RedisBloom AOF replayed) reads the
/// commands in RedisBloom's own syntax, the one they were accepted in, and builds the same
/// filters: unknown and repeated CF.RESERVE options, CF.INSERT options by their first letter.
#[test]
fn cf_a_replica_of_redisbloom_reads_its_commands_as_redisbloom_did() {
    require_own_server!();
    let Some(path) = common::redisbloom_path() else {
        eprintln!("skipped: RedisBloom's module is not available");
        return;
    };
    let primary = Server::builder().module(&path).start();
    let mut p = primary.conn();
    // Before the link: these come to the replica in the full sync's RDB.
    p.ok(&cmd!("CF.RESERVE", "synced", "100", "BUCKETSIZE", "4"));
    p.q::<i64>(&cmd!("CF.ADD", "synced", "x"));
    let replica = Server::builder().replica_of(&primary).start();
    common::wait_for_link(&replica);
    let commands = [
        cmd!(
            "CF.RESERVE",
            "r1",
            "100",
            "FOO",
            "3",
            "EXPANSION",
            "2",
            "EXPANSION",
            "4"
        ),
        cmd!("CF.INSERT", "r2", "cap", "10", "icecream", "a", "b"),
        cmd!("CF.INSERTNX", "r2", "n", "i", "a", "c"),
        cmd!("CF.ADD", "r1", "a"),
        cmd!("CF.ADD", "r3", "a"),
        cmd!("CF.DEL", "r3", "a"),
        cmd!("CF.COMPACT", "r3"),
    ];
    for c in &commands {
        let v = p.raw(c);
        assert!(common::error_of(&v).is_none(), "{}: {v:?}", common::show(c));
    }
    p.q::<i64>(&cmd!("WAIT", 1, 10_000));
    let mut r = replica.conn();
    for key in ["synced", "r1", "r2", "r3"] {
        wait_until(std::time::Duration::from_secs(10), "the replica", || {
            r.raw(&cmd!("CF.DEBUG", key)) == p.raw(&cmd!("CF.DEBUG", key))
        });
        assert_eq!(cf_scandump(&mut r, key), cf_scandump(&mut p, key), "{key}");
    }
}

//! The core against data written by RedisBloom itself (`tests/fixtures/redisbloom-cf`,
//! described by its README.md): every recorded command is replayed through a small command
//! interpreter over `CuckooFilter`, and every answer RedisBloom gave is compared: replies,
//! CF.DEBUG after each step, CF.INFO, the SCANDUMP stream byte for byte, CF.EXISTS /
//! CF.COUNT of every tracked item, the probes' false positives. The DUMP payloads, SCANDUMP
//! streams, AOF files and legacy payloads are decoded by the codecs and compared with the
//! replayed filters. Each test collects every discrepancy, naming the fixture, and fails at
//! the end with all of them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value as Json;

use super::support::{sha256_hex, DumpValue};
use crate::cuckoo::codec::{self, Header};
use crate::cuckoo::{params, CuckooError, CuckooFilter, Limits, Params};
use crate::format::Strictness;

// ---------------------------------------------------------------------------------------------
// The fixtures
// ---------------------------------------------------------------------------------------------

fn fixtures_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/redisbloom-cf"
    ));
    dir.join("manifest.json").is_file().then_some(dir)
}

/// The manifest, or `None` (with a message) when the fixtures are absent.
fn manifest() -> Option<&'static Json> {
    static M: OnceLock<Option<Json>> = OnceLock::new();
    let m = M.get_or_init(|| {
        let dir = fixtures_dir()?;
        let m: Json = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap())
            .expect("manifest.json parses");
        assert_eq!(
            m["format"], "redisbloom-cf-fixtures/1",
            "unknown fixture format"
        );
        Some(m)
    });
    if m.is_none() {
        eprintln!(
            "SKIPPED: the RedisBloom cuckoo fixtures are absent (expected {}/../tests/\
             fixtures/redisbloom-cf/manifest.json)",
            env!("CARGO_MANIFEST_DIR")
        );
    }
    m.as_ref()
}

fn fixture_bytes(rel: &str) -> Vec<u8> {
    let path = fixtures_dir().unwrap().join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn arr(v: &Json) -> &[Json] {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .as_slice()
}

fn b64(text: &str) -> Vec<u8> {
    B64.decode(text).expect("base64")
}

/// A command argument or item: a string, or `{"b64": ...}`.
fn arg_bytes(v: &Json) -> Vec<u8> {
    match v {
        Json::String(s) => s.as_bytes().to_vec(),
        Json::Object(o) => b64(o["b64"].as_str().unwrap()),
        _ => panic!("not an argument: {v}"),
    }
}

/// Expands an item rule (README "Item rules").
fn expand(rule: &Json) -> Vec<Vec<u8>> {
    let n = |k: &str| rule[k].as_u64().unwrap();
    match rule["rule"].as_str().unwrap() {
        "decimal" => {
            let p = rule["prefix"].as_str().unwrap();
            (0..n("count"))
                .map(|i| format!("{p}{}", n("start") + i).into_bytes())
                .collect()
        }
        "le32" => {
            let prefix: Vec<u8> = (0..rule["prefix_hex"].as_str().unwrap().len() / 2)
                .map(|i| {
                    u8::from_str_radix(&rule["prefix_hex"].as_str().unwrap()[2 * i..2 * i + 2], 16)
                        .unwrap()
                })
                .collect();
            (0..n("count"))
                .map(|i| {
                    let mut v = prefix.clone();
                    v.extend_from_slice(&((n("start") + i) as u32).to_le_bytes());
                    v
                })
                .collect()
        }
        "b64list" => arr(&rule["b64"])
            .iter()
            .map(|s| b64(s.as_str().unwrap()))
            .collect(),
        "cycle" => {
            let of = expand(&rule["of"]);
            (0..n("times")).flat_map(|_| of.clone()).collect()
        }
        "concat" => arr(&rule["parts"]).iter().flat_map(expand).collect(),
        "pick" => {
            let of = expand(&rule["of"]);
            arr(&rule["indexes"])
                .iter()
                .map(|i| of[i.as_u64().unwrap() as usize].clone())
                .collect()
        }
        "unique" => {
            let mut seen = std::collections::HashSet::new();
            expand(&rule["of"])
                .into_iter()
                .filter(|x| seen.insert(x.clone()))
                .collect()
        }
        other => panic!("unknown item rule {other}"),
    }
}

/// A run-length encoded list `[[value, run], ...]`.
fn unrle(rle: &Json) -> Vec<Json> {
    arr(rle)
        .iter()
        .flat_map(|pair| {
            let p = arr(pair);
            std::iter::repeat_n(p[0].clone(), p[1].as_u64().unwrap() as usize)
        })
        .collect()
}

/// A SCANDUMP stream file: `[[iterator, base64 or null], ...]`.
fn stream_file(rel: &str) -> Vec<(u64, Option<Vec<u8>>)> {
    let v: Json = serde_json::from_slice(&fixture_bytes(rel)).unwrap();
    arr(&v)
        .iter()
        .map(|e| {
            let e = arr(e);
            (e[0].as_u64().unwrap(), e[1].as_str().map(b64))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// A command interpreter over the core, with RedisBloom's replies
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Int(i64),
    Status(&'static str),
    Error(String),
    Nil,
    Bulk(Vec<u8>),
    Array(Vec<Reply>),
}

/// Whether a reply is the one recorded in JSON (README "Replies in JSON").
fn same_reply(expected: &Json, actual: &Reply) -> bool {
    match (expected, actual) {
        (Json::Number(n), Reply::Int(i)) => n.as_i64() == Some(*i),
        (Json::String(s), Reply::Status(t)) => s == t,
        (Json::String(s), Reply::Bulk(b)) => s.as_bytes() == b.as_slice(),
        (Json::Null, Reply::Nil) => true,
        (Json::Object(o), Reply::Error(e)) if o.contains_key("error") => o["error"] == *e,
        (Json::Object(o), Reply::Bulk(b)) if o.contains_key("b64") => {
            b64(o["b64"].as_str().unwrap()) == *b
        }
        (Json::Array(xs), Reply::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_reply(x, y))
        }
        _ => false,
    }
}

fn int(v: bool) -> Reply {
    Reply::Int(i64::from(v))
}

fn err(text: &str) -> Reply {
    Reply::Error(text.to_string())
}

fn add_error(e: &CuckooError) -> Reply {
    match e {
        CuckooError::Full => err("Filter is full"),
        CuckooError::MaxExpansions => err("Maximum expansions reached"),
        other => err(&format!("ERR {other}")),
    }
}

fn parse_i64(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// Every key's filter, and how strictly LOADCHUNK headers are checked (a client's or a
/// replay's).
struct Model {
    keys: BTreeMap<Vec<u8>, CuckooFilter>,
    strictness: Strictness,
    limits: Limits,
}

impl Model {
    fn new(strictness: Strictness) -> Self {
        Model {
            keys: BTreeMap::new(),
            strictness,
            limits: Limits::default(),
        }
    }

    fn create(&mut self, key: &[u8], capacity: i64, p: Params) -> Result<(), Reply> {
        let buckets =
            params::buckets_for(capacity, p.bucket_size).map_err(|e| err(&e.to_string()))?;
        let f = CuckooFilter::new(buckets, p, u64::MAX)
            .map_err(|_| err("ERR Insufficient memory to create filter"))?;
        self.keys.insert(key.to_vec(), f);
        Ok(())
    }

    fn exec(&mut self, args: &[Vec<u8>]) -> Reply {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        let key = args.get(1).cloned().unwrap_or_default();
        let limits = self.limits;
        match name.as_str() {
            "CF.RESERVE" => {
                if self.keys.contains_key(&key) {
                    return err("ERR item exists");
                }
                let capacity = parse_i64(&args[2]).unwrap();
                let mut p = Params::default();
                for pair in args[3..].chunks(2) {
                    let v = parse_i64(&pair[1]).unwrap();
                    match String::from_utf8_lossy(&pair[0])
                        .to_ascii_uppercase()
                        .as_str()
                    {
                        "BUCKETSIZE" => p.bucket_size = params::bucket_size(v).unwrap(),
                        "MAXITERATIONS" => p.max_iterations = params::max_iterations(v).unwrap(),
                        "EXPANSION" => p.expansion = params::expansion(v).unwrap(),
                        other => panic!("option {other}"),
                    }
                }
                match self.create(&key, capacity, p) {
                    Ok(()) => Reply::Status("OK"),
                    Err(r) => r,
                }
            }
            "CF.ADD" | "CF.ADDNX" => {
                if !self.keys.contains_key(&key) {
                    if let Err(r) =
                        self.create(&key, params::DEFAULT_CAPACITY as i64, Params::default())
                    {
                        return r;
                    }
                }
                let f = self.keys.get_mut(&key).unwrap();
                let r = if name == "CF.ADD" {
                    f.add(&args[2], &limits).map(|()| true)
                } else {
                    f.add_nx(&args[2], &limits)
                };
                match r {
                    Ok(added) => int(added),
                    Err(e) => add_error(&e),
                }
            }
            "CF.INSERT" | "CF.INSERTNX" => {
                let nx = name == "CF.INSERTNX";
                let (mut capacity, mut nocreate, mut i) =
                    (params::DEFAULT_CAPACITY as i64, false, 2);
                while i < args.len() {
                    match String::from_utf8_lossy(&args[i])
                        .to_ascii_uppercase()
                        .as_str()
                    {
                        "CAPACITY" => {
                            capacity = parse_i64(&args[i + 1]).unwrap();
                            i += 2;
                        }
                        "NOCREATE" => {
                            nocreate = true;
                            i += 1;
                        }
                        "ITEMS" => {
                            i += 1;
                            break;
                        }
                        other => panic!("option {other}"),
                    }
                }
                if !self.keys.contains_key(&key) {
                    if nocreate {
                        return err("ERR not found");
                    }
                    if let Err(r) = self.create(&key, capacity, Params::default()) {
                        return r;
                    }
                }
                let items: Vec<&[u8]> = args[i..].iter().map(Vec::as_slice).collect();
                let f = self.keys.get_mut(&key).unwrap();
                match f.insert_many(&items, nx, &limits) {
                    Err(e) => add_error(&e),
                    Ok(results) => Reply::Array(
                        results
                            .iter()
                            .map(|r| match r {
                                Ok(added) => int(*added),
                                Err(CuckooError::Full) => Reply::Int(-1),
                                Err(e) => add_error(e),
                            })
                            .collect(),
                    ),
                }
            }
            "CF.DEL" => match self.keys.get_mut(&key) {
                None => err("Not found"),
                Some(f) => int(f.delete(&args[2])),
            },
            "CF.COMPACT" => match self.keys.get_mut(&key) {
                None => err("Cuckoo filter was not found"),
                Some(f) => {
                    f.compact();
                    Reply::Status("OK")
                }
            },
            "CF.EXISTS" => int(self.keys.get(&key).is_some_and(|f| f.contains(&args[2]))),
            "CF.MEXISTS" => {
                let items: Vec<&[u8]> = args[2..].iter().map(Vec::as_slice).collect();
                let found = match self.keys.get(&key) {
                    Some(f) => f.contains_many(&items),
                    None => vec![false; items.len()],
                };
                Reply::Array(found.into_iter().map(int).collect())
            }
            "CF.COUNT" => Reply::Int(self.keys.get(&key).map_or(0, |f| f.count(&args[2])) as i64),
            "CF.INFO" => match self.keys.get(&key) {
                None => err("ERR not found"),
                Some(f) => {
                    let i = f.info();
                    let mut out = Vec::new();
                    for (name, v) in [
                        ("Size", i.size),
                        ("Number of buckets", i.buckets),
                        ("Number of filters", i.filters),
                        ("Number of items inserted", i.items),
                        ("Number of items deleted", i.deletes),
                        ("Bucket size", i.bucket_size),
                        ("Expansion rate", i.expansion),
                        ("Max iterations", i.max_iterations),
                    ] {
                        out.push(Reply::Bulk(name.as_bytes().to_vec()));
                        out.push(Reply::Int(v as i64));
                    }
                    Reply::Array(out)
                }
            },
            "CF.DEBUG" => match self.keys.get(&key) {
                None => err("ERR not found"),
                Some(f) => Reply::Bulk(f.debug_line().into_bytes()),
            },
            "CF.SCANDUMP" => match self.keys.get(&key) {
                None => err("ERR not found"),
                Some(f) => {
                    let it = parse_i64(&args[2]).unwrap() as u64;
                    match codec::dump_chunk(f, it) {
                        None => Reply::Array(vec![Reply::Int(0), Reply::Nil]),
                        Some((next, data)) => Reply::Array(vec![
                            Reply::Int(next as i64),
                            Reply::Bulk(data.into_owned()),
                        ]),
                    }
                }
            },
            "CF.LOADCHUNK" => {
                let it = parse_i64(&args[2]).unwrap() as u64;
                if it == 1 {
                    if self.keys.contains_key(&key) {
                        return err("ERR item exists");
                    }
                    let made = Header::decode(&args[3])
                        .and_then(|h| codec::filter_from_header(&h, self.strictness, u64::MAX));
                    match made {
                        Ok(f) => {
                            self.keys.insert(key, f);
                            Reply::Status("OK")
                        }
                        Err(_) => err("Couldn't create filter!"),
                    }
                } else {
                    match self.keys.get_mut(&key) {
                        None => err("ERR not found"),
                        Some(f) => match codec::load_chunk(f, it, &args[3]) {
                            Ok(()) => Reply::Status("OK"),
                            Err(_) => err("Couldn't load chunk!"),
                        },
                    }
                }
            }
            // The AOF's other commands (SELECT, plain keys) do not touch filters.
            _ => Reply::Status("OK"),
        }
    }
}

/// A filter's whole SCANDUMP stream, as the fixtures write it.
fn scandump(f: &CuckooFilter) -> Vec<(u64, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut it = 0;
    while let Some((next, data)) = codec::dump_chunk(f, it) {
        out.push((next, Some(data.into_owned())));
        it = next;
    }
    out.push((0, None));
    out
}

/// The stream as compact JSON (`expect.scandump_sha256` hashes this).
fn stream_json(stream: &[(u64, Option<Vec<u8>>)]) -> String {
    let parts: Vec<String> = stream
        .iter()
        .map(|(it, data)| match data {
            Some(d) => format!("[{it},\"{}\"]", B64.encode(d)),
            None => format!("[{it},null]"),
        })
        .collect();
    format!("[{}]", parts.join(","))
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, label: &str, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(format!("{label}: {}", what()));
        }
    }

    fn finish(self, test: &str) {
        if !self.0.is_empty() {
            let shown: Vec<&String> = self.0.iter().take(40).collect();
            panic!(
                "{test}: {} discrepancies with RedisBloom's answers:\n{}",
                self.0.len(),
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

/// Replays one step (README "A step is one of") and compares its replies and CF.DEBUG.
fn replay_step(model: &mut Model, key: &[u8], step: &Json, label: &str, fails: &mut Failures) {
    if let Some(src) = step.get("loadchunk_of") {
        let src = src.as_str().unwrap();
        let stream = stream_file(&format!("scandump/{}.json", src.replace(':', "_")));
        let mut replies = Vec::new();
        for (it, data) in &stream {
            if let Some(d) = data {
                replies.push(model.exec(&[
                    b"CF.LOADCHUNK".to_vec(),
                    key.to_vec(),
                    it.to_string().into_bytes(),
                    d.clone(),
                ]));
            }
        }
        let expected = unrle(&step["replies"]);
        fails.check(
            expected.len() == replies.len()
                && expected.iter().zip(&replies).all(|(e, a)| same_reply(e, a)),
            label,
            || format!("LOADCHUNK of {src}: {replies:?}, RedisBloom {expected:?}"),
        );
    } else if step.get("restore_payload").is_some() {
        // Handled by the caller (legacy fixtures).
    } else {
        let cmd: Vec<Vec<u8>> = arr(&step["cmd"]).iter().map(arg_bytes).collect();
        if let Some(rule) = step.get("items") {
            let items = expand(rule);
            let batch = step["batch"].as_u64().unwrap() as usize;
            let multi = cmd[0].starts_with(b"CF.INSERT");
            let mut replies: Vec<Reply> = Vec::new();
            for chunk in items.chunks(batch) {
                let mut args = cmd.clone();
                args.extend(chunk.iter().cloned());
                match model.exec(&args) {
                    Reply::Array(rs) => replies.extend(rs),
                    Reply::Error(e) if multi => {
                        replies.extend(chunk.iter().map(|_| Reply::Error(format!("cmd:{e}"))))
                    }
                    r => replies.push(r),
                }
            }
            let expected = unrle(&step["replies"]);
            let same = |e: &Json, a: &Reply| match (e.get("command_error"), a) {
                (Some(t), Reply::Error(x)) => x.strip_prefix("cmd:") == t.as_str(),
                _ => same_reply(e, a),
            };
            let first_diff = expected.iter().zip(&replies).position(|(e, a)| !same(e, a));
            fails.check(
                expected.len() == replies.len() && first_diff.is_none(),
                label,
                || {
                    let i = first_diff.unwrap_or(0);
                    format!(
                        "{:?}: {} replies, RedisBloom {}; first difference at item {i}: {:?} vs {:?}",
                        String::from_utf8_lossy(&cmd[0]),
                        replies.len(),
                        expected.len(),
                        replies.get(i),
                        expected.get(i)
                    )
                },
            );
        } else {
            let r = model.exec(&cmd);
            fails.check(same_reply(&step["reply"], &r), label, || {
                format!("{cmd:?}: {r:?}, RedisBloom {}", step["reply"])
            });
        }
    }
    if let Some(d) = step.get("debug_after") {
        let actual = model.keys.get(key).map(CuckooFilter::debug_line);
        fails.check(actual.as_deref() == d.as_str(), label, || {
            format!("CF.DEBUG after a step: {actual:?}, RedisBloom {d}")
        });
    }
}

/// Compares a filter's every recorded answer (`expect`): CF.INFO, CF.DEBUG, the SCANDUMP
/// stream, exists and count of every tracked item, the probes, the extra checks.
fn check_expect(model: &mut Model, key: &[u8], expect: &Json, label: &str, fails: &mut Failures) {
    let Some(f) = model.keys.get(key) else {
        fails.check(false, label, || "the model has no such key".into());
        return;
    };
    let f = f.clone();
    let info = model.exec(&[b"CF.INFO".to_vec(), key.to_vec()]);
    let flat: Vec<Json> = arr(&expect["info"])
        .iter()
        .flat_map(|p| arr(p).to_vec())
        .collect();
    fails.check(same_reply(&Json::Array(flat.clone()), &info), label, || {
        format!("CF.INFO {info:?}, RedisBloom {flat:?}")
    });
    fails.check(expect["debug"] == f.debug_line(), label, || {
        format!(
            "CF.DEBUG {}, RedisBloom {}",
            f.debug_line(),
            expect["debug"]
        )
    });

    let stream = scandump(&f);
    let digest = sha256_hex(stream_json(&stream).as_bytes());
    fails.check(expect["scandump_sha256"] == digest, label, || {
        "the SCANDUMP stream differs (sha256)".into()
    });
    if expect["scandump_empty"] == Json::Bool(true) {
        fails.check(stream == [(0, None)], label, || {
            "SCANDUMP is not empty".into()
        });
    }

    let tracked = expand(&expect["tracked"]);
    fails.check(
        tracked.len() as u64 == expect["tracked_count"].as_u64().unwrap(),
        label,
        || "tracked_count".into(),
    );
    let refs: Vec<&[u8]> = tracked.iter().map(Vec::as_slice).collect();
    let one_by_one: Vec<bool> = refs.iter().map(|i| f.contains(i)).collect();
    let batched = f.contains_many(&refs);
    fails.check(one_by_one == batched, label, || {
        "contains_many differs from contains".into()
    });
    let exists: Vec<Json> = unrle(&expect["exists_rle"]);
    let bad = exists
        .iter()
        .zip(&one_by_one)
        .filter(|(e, a)| e.as_u64() != Some(u64::from(**a)))
        .count();
    fails.check(exists.len() == tracked.len() && bad == 0, label, || {
        format!(
            "CF.EXISTS differs for {bad} of {} tracked items",
            tracked.len()
        )
    });
    let counts: Vec<Json> = unrle(&expect["count_rle"]);
    let bad = counts
        .iter()
        .zip(&refs)
        .filter(|(e, i)| e.as_u64() != Some(f.count(i)))
        .count();
    fails.check(counts.len() == tracked.len() && bad == 0, label, || {
        format!(
            "CF.COUNT differs for {bad} of {} tracked items",
            tracked.len()
        )
    });

    let probes = expand(&expect["probes"]["items"]);
    let refs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
    let positives: Vec<u64> = f
        .contains_many(&refs)
        .iter()
        .enumerate()
        .filter(|(_, &p)| p)
        .map(|(i, _)| i as u64)
        .collect();
    let expected: Vec<u64> = arr(&expect["probes"]["positives"])
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    fails.check(positives == expected, label, || {
        format!(
            "probe positives: {} found, RedisBloom {}",
            positives.len(),
            expected.len()
        )
    });
    let pc: Vec<u64> = positives
        .iter()
        .map(|&i| f.count(refs[i as usize]))
        .collect();
    let epc: Vec<u64> = arr(&expect["probes"]["positive_counts"])
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    fails.check(pc == epc, label, || "probe positives' CF.COUNT".into());

    if let Some(checks) = expect.get("checks") {
        for c in arr(checks) {
            let cmd: Vec<Vec<u8>> = arr(&c["cmd"]).iter().map(arg_bytes).collect();
            let r = model.exec(&cmd);
            fails.check(same_reply(&c["reply"], &r), label, || {
                format!("check {}: {r:?}, RedisBloom {}", c["cmd"], c["reply"])
            });
        }
        fails.check(model.keys.get(key) == Some(&f), label, || {
            "the checks changed the filter".into()
        });
    }
}

/// Every `filters` record replayed from its steps, once.
fn replayed() -> &'static BTreeMap<String, (CuckooFilter, Vec<String>)> {
    static R: OnceLock<BTreeMap<String, (CuckooFilter, Vec<String>)>> = OnceLock::new();
    R.get_or_init(|| {
        let m = manifest().unwrap();
        let mut out = BTreeMap::new();
        for rec in arr(&m["filters"]) {
            let key = rec["key"].as_str().unwrap();
            let mut model = Model::new(Strictness::LoadChunk);
            let mut fails = Failures::default();
            for (i, step) in arr(&rec["steps"]).iter().enumerate() {
                replay_step(
                    &mut model,
                    key.as_bytes(),
                    step,
                    &format!("{key} step {i}"),
                    &mut fails,
                );
            }
            check_expect(&mut model, key.as_bytes(), &rec["expect"], key, &mut fails);
            let f = model.keys.remove(key.as_bytes()).unwrap();
            out.insert(key.to_string(), (f, fails.0));
        }
        out
    })
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[test]
fn every_fixture_filter_replays_to_redisbloom_answers() {
    let Some(m) = manifest() else { return };
    let mut fails = Failures::default();
    for rec in arr(&m["filters"]) {
        assert_eq!(rec["model_check"], "agrees");
    }
    for (_, errors) in replayed().values() {
        fails.0.extend(errors.iter().cloned());
    }
    assert_eq!(replayed().len(), arr(&m["filters"]).len());
    fails.finish("steps");
}

#[test]
fn every_dump_payload_decodes_to_the_replayed_filter_and_encodes_back() {
    let Some(m) = manifest() else { return };
    let mut fails = Failures::default();
    for rec in arr(&m["filters"]) {
        let key = rec["key"].as_str().unwrap();
        let (model, _) = &replayed()[key];
        let dump = DumpValue::parse(&b64(rec["dump_b64"].as_str().unwrap()));
        fails.check(dump.encver == 4 && dump.complete, key, || {
            format!("DUMP encver {} complete {}", dump.encver, dump.complete)
        });
        match codec::decode_rdb(&mut dump.source(), dump.encver, None) {
            Ok(f) => fails.check(&f == model, key, || {
                format!(
                    "decoded {} vs replayed {}",
                    f.debug_line(),
                    model.debug_line()
                )
            }),
            Err(e) => fails.check(false, key, || format!("DUMP refused: {e}")),
        }
        let fields = DumpValue::from_fields(codec::rdb_fields(model));
        fails.check(fields == dump.fields, key, || {
            "encode-to-fields differs from RedisBloom's DUMP fields".into()
        });
        // With a budget under the filter's footprint, the payload is refused.
        let tight = model.memory_usage() - 1;
        fails.check(
            codec::decode_rdb(&mut dump.source(), dump.encver, Some(tight)).is_err(),
            key,
            || "a budget below the footprint was not enforced".into(),
        );
    }
    fails.finish("dump payloads");
}

#[test]
fn every_scandump_stream_loads_back_to_the_replayed_filter() {
    let Some(m) = manifest() else { return };
    let mut fails = Failures::default();
    for rec in arr(&m["filters"]) {
        let key = rec["key"].as_str().unwrap();
        let (model, _) = &replayed()[key];
        let stream = stream_file(rec["scandump_file"].as_str().unwrap());
        fails.check(scandump(model) == stream, key, || {
            "the model's SCANDUMP stream differs from RedisBloom's file".into()
        });
        let mut loader = Model::new(Strictness::LoadChunk);
        for (it, data) in &stream {
            if let Some(d) = data {
                let r = loader.exec(&[
                    b"CF.LOADCHUNK".to_vec(),
                    key.as_bytes().to_vec(),
                    it.to_string().into_bytes(),
                    d.clone(),
                ]);
                fails.check(r == Reply::Status("OK"), key, || {
                    format!("LOADCHUNK {it}: {r:?}")
                });
            }
        }
        if rec["expect"]["scandump_empty"] == Json::Bool(true) {
            fails.check(loader.keys.is_empty(), key, || {
                "an empty stream made a key".into()
            });
        } else {
            fails.check(loader.keys.get(key.as_bytes()) == Some(model), key, || {
                "LOADCHUNK rebuilt another filter".into()
            });
            // Replaying a chunk again is harmless; a chunk over other fingerprints is not.
            if let (Some(f), Some((it, Some(d)))) =
                (loader.keys.get_mut(key.as_bytes()), stream.get(1))
            {
                fails.check(codec::load_chunk(f, *it, d).is_ok(), key, || {
                    "a repeated chunk was refused".into()
                });
                let mut other = d.clone();
                other.iter_mut().for_each(|b| *b = b.wrapping_add(1));
                if d.iter().any(|&b| b != 0 && b != 255) {
                    let before = f.clone();
                    fails.check(codec::load_chunk(f, *it, &other).is_err(), key, || {
                        "a chunk over live fingerprints was accepted".into()
                    });
                    fails.check(*f == before, key, || {
                        "a refused chunk changed the filter".into()
                    });
                }
            }
        }
    }
    fails.finish("scandump streams");
}

/// Parses a RESP command log (the AOF) into commands.
fn resp_commands(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line<'a>(b: &'a [u8], pos: &mut usize) -> &'a [u8] {
        let end = *pos + b[*pos..].windows(2).position(|w| w == b"\r\n").unwrap();
        let l = &b[*pos..end];
        *pos = end + 2;
        l
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let head = line(bytes, &mut pos);
        assert_eq!(head[0], b'*', "an AOF command is an array");
        let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
        let mut cmd = Vec::new();
        for _ in 0..n {
            let h = line(bytes, &mut pos);
            let len: usize = std::str::from_utf8(&h[1..]).unwrap().parse().unwrap();
            cmd.push(bytes[pos..pos + len].to_vec());
            pos += len + 2;
        }
        out.push(cmd);
    }
    out
}

#[test]
fn the_aof_replays_to_redisbloom_state() {
    let Some(m) = manifest() else { return };
    let mut fails = Failures::default();
    let mut model = Model::new(Strictness::Rdb);
    let mut loadchunks = 0;
    for file in arr(&m["aof"]["files"]) {
        if file["kind"] == "manifest" {
            continue;
        }
        let bytes = fixture_bytes(&format!(
            "aof/appendonlydir/{}",
            file["name"].as_str().unwrap()
        ));
        for cmd in resp_commands(&bytes) {
            if file["kind"] == "base" && cmd[0].eq_ignore_ascii_case(b"CF.LOADCHUNK") {
                loadchunks += 1;
            }
            let r = model.exec(&cmd);
            // The log holds commands as the server executed them: "does not fit" answers
            // inside CF.INSERT are replies, not errors.
            fails.check(!matches!(r, Reply::Error(_)), "aof", || {
                format!("{:?} replied {r:?}", String::from_utf8_lossy(&cmd[0]))
            });
        }
    }
    fails.check(
        loadchunks == m["aof"]["base_loadchunk_commands"].as_u64().unwrap(),
        "aof",
        || format!("{loadchunks} LOADCHUNK commands in the base"),
    );
    for rec in arr(&m["aof"]["filters"]) {
        let key = rec["key"].as_str().unwrap();
        check_expect(&mut model, key.as_bytes(), &rec["expect"], key, &mut fails);
    }
    fails.finish("aof");
}

#[test]
fn legacy_payloads_load_and_answer_as_recorded() {
    let Some(m) = manifest() else { return };
    let mut fails = Failures::default();
    for rec in arr(&m["legacy"]) {
        let name = rec["name"].as_str().unwrap();
        let key = rec["key"].as_str().unwrap();
        let payload = fixture_bytes(rec["payload_file"].as_str().unwrap());
        let dump = DumpValue::parse(&payload);
        fails.check(
            dump.encver == rec["encver"].as_i64().unwrap() as i32,
            name,
            || "encoding version".into(),
        );
        let mut model = Model::new(Strictness::LoadChunk);
        match codec::decode_rdb(&mut dump.source(), dump.encver, None) {
            Ok(f) => {
                model.keys.insert(key.as_bytes().to_vec(), f);
            }
            Err(e) => {
                fails.check(false, name, || format!("refused: {e}"));
                continue;
            }
        }
        for (i, step) in arr(&rec["steps"]).iter().enumerate() {
            replay_step(
                &mut model,
                key.as_bytes(),
                step,
                &format!("{name} step {i}"),
                &mut fails,
            );
        }
        check_expect(&mut model, key.as_bytes(), &rec["expect"], name, &mut fails);
        // RedisBloom's re-encoding at version 4 is the same filter, and ours is its bytes.
        let redump = DumpValue::parse(&b64(rec["redump_b64"].as_str().unwrap()));
        let f = &model.keys[key.as_bytes()];
        match codec::decode_rdb(&mut redump.source(), redump.encver, None) {
            Ok(g) => fails.check(&g == f, name, || {
                "the re-encoding decodes differently".into()
            }),
            Err(e) => fails.check(false, name, || format!("re-encoding refused: {e}")),
        }
        fails.check(
            DumpValue::from_fields(codec::rdb_fields(f)) == redump.fields,
            name,
            || "our encoding differs from RedisBloom's re-encoding".into(),
        );
    }
    fails.finish("legacy");
}

#[test]
fn malformed_payloads_are_refused_and_the_control_loads() {
    let Some(m) = manifest() else { return };
    let mut fails = Failures::default();
    for rec in arr(&m["malformed"]) {
        let name = rec["name"].as_str().unwrap();
        let restore = &arr(&rec["replies"])[0];
        let payload = arg_bytes(&arr(&restore["cmd"])[3]);
        let dump = DumpValue::parse(&payload);
        let decoded = codec::decode_rdb(&mut dump.source(), dump.encver, None);
        // RedisBloom accepted `control` (and, for information, garbage it then crashed on or
        // answered oddly): here only the control loads.
        let want_ok = name == "control";
        fails.check(decoded.is_ok() == want_ok, name, || {
            format!("{}: {decoded:?}", rec["what"])
        });
    }
    fails.finish("malformed");
}

/// RedisBloom 1.x / 2.0 placed items with a 32-bit hash (README: MurmurHash2 seed 0,
/// fingerprint the top byte or 7 when that is 0, bucket `hash mod n`, alternate `(bucket XOR
/// fp·0x5bd1e995 mod 2^32) mod n`). The slots of such a payload are intact: every one of its
/// items is there under that scheme, though RedisBloom 2.2+ (and this core, answering as it
/// does) looks them up with the 64-bit one.
#[test]
fn old_hash_payload_slots_hold_every_item_under_the_32_bit_scheme() {
    let Some(m) = manifest() else { return };
    let rec = arr(&m["legacy"])
        .iter()
        .find(|r| r["name"] == "v3_oldhash")
        .expect("the v3_oldhash fixture");
    let dump = DumpValue::parse(&fixture_bytes(rec["payload_file"].as_str().unwrap()));
    let f = codec::decode_rdb(&mut dump.source(), dump.encver, None).unwrap();
    let sub = &f.sub_filters()[0];
    let (n, bs) = (sub.buckets(), usize::from(f.params().bucket_size));
    let items = expand(&rec["expect"]["tracked"]);
    let found_old = items
        .iter()
        .filter(|item| {
            let h = crate::hash::murmur2_32(item, 0);
            let fp = match (h >> 24) as u8 {
                0 => 7,
                b => b,
            };
            let b1 = u64::from(h) % n;
            let b2 = (u64::from(h) ^ u64::from(u32::from(fp).wrapping_mul(0x5bd1_e995))) % n;
            [b1, b2]
                .iter()
                .any(|&b| sub.as_bytes()[b as usize * bs..(b as usize + 1) * bs].contains(&fp))
        })
        .count();
    let found_new = items.iter().filter(|i| f.contains(i)).count();
    assert_eq!(found_old, items.len(), "the 32-bit scheme finds every item");
    assert_eq!(found_new, 0, "RedisBloom's answer: none found");
}

//! RedisBloom itself as the oracle: its module (2.8.2, `common::redisbloom_path()`) and
//! layerbloom run side by side on the server under test, are driven with the same seeded
//! command streams, and every reply is compared.
//!
//! - The streams cover every BF command with valid and invalid arguments (bad numbers, out of
//!   range values, unknown words, missing values, wrong arity), missing keys, a key of another
//!   type, full non-scaling filters and growth over several layers, each command over RESP2 or
//!   RESP3 at random (the same on both servers).
//! - With `bf-layout classic` layerbloom builds RedisBloom's own layers, so every reply must be
//!   equal, false positives included. With the default blocked layout the answers that depend
//!   on false positives are not compared (see [`Pair::blocked_view`]).
//! - RedisBloom changed a few texts and behaviours after 2.8; layerbloom follows the newest,
//!   and [`version_rule`] / [`NEWEST_TEXTS`] map 2.8's to them in one place. The deliberate
//!   differences docs/compatibility.md lists are handled once each in [`deliberate`] and the views.
//! - Data written by RedisBloom at test time (an RDB file, DUMP payloads, SCANDUMP streams, an
//!   AOF) must load into layerbloom and answer identically; SCANDUMP streams go back too.
//!
//! Every test collects all discrepancies (with the seed, the command and both replies) and
//! fails at the end listing them.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

use common::{copy_tree, redisbloom_path, server_error_text, Exec, Rng, Server};
use redis::Value;

/// The seeds of the random streams; printed with every discrepancy.
const SEEDS: [u64; 3] = [0x0bac_1e01, 0x0bac_1e02, 0x0bac_1e03];
/// Commands per seed.
const STEPS: usize = 500;
/// At most this many discrepancies are printed in full.
const SHOWN: usize = 100000;

// ---------------------------------------------------------------------------------------------
// Replies, comparable across servers
// ---------------------------------------------------------------------------------------------

/// A reply as a client sees it; `Okay` and `+OK` are the same, errors are their full text.
#[derive(Clone, Debug, PartialEq)]
enum R {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Simple(String),
    Err(String),
    Arr(Vec<R>),
    Map(Vec<(R, R)>),
    Bool(bool),
    Double(String),
    /// A part of a reply deliberately left out of the comparison.
    Masked(&'static str),
    Other(String),
}

fn r(v: &Value) -> R {
    match v {
        Value::Nil => R::Nil,
        Value::Int(n) => R::Int(*n),
        Value::BulkString(b) => R::Bulk(b.clone()),
        Value::SimpleString(s) => R::Simple(s.clone()),
        Value::Okay => R::Simple("OK".into()),
        Value::Array(xs) => R::Arr(xs.iter().map(r).collect()),
        Value::Map(ps) => R::Map(ps.iter().map(|(k, v)| (r(k), r(v))).collect()),
        Value::Boolean(b) => R::Bool(*b),
        Value::Double(d) => R::Double(format!("{d:?}")),
        Value::ServerError(e) => R::Err(server_error_text(e)),
        other => R::Other(format!("{other:?}")),
    }
}

impl R {
    fn err(text: &str) -> R {
        R::Err(text.to_string())
    }

    fn is_err(&self) -> bool {
        matches!(self, R::Err(_))
    }

    /// An add's or a lookup's yes (RESP2 integer 1, RESP3 true).
    fn yes(&self) -> Option<bool> {
        match self {
            R::Int(n) => Some(*n == 1),
            R::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn text(&self) -> Option<String> {
        match self {
            R::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            R::Simple(s) => Some(s.clone()),
            _ => None,
        }
    }
}

impl fmt::Display for R {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            R::Nil => write!(f, "nil"),
            R::Int(n) => write!(f, "{n}"),
            R::Bulk(b) if b.len() > 48 => write!(f, "<{} bytes>", b.len()),
            R::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            R::Simple(s) => write!(f, "+{s}"),
            R::Err(e) => write!(f, "(error) {e:?}"),
            R::Arr(xs) => {
                write!(f, "[")?;
                for (i, x) in xs.iter().enumerate() {
                    write!(f, "{}{x}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, "]")
            }
            R::Map(ps) => {
                write!(f, "{{")?;
                for (i, (k, v)) in ps.iter().enumerate() {
                    write!(f, "{}{k}: {v}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, "}}")
            }
            R::Bool(b) => write!(f, "{b}"),
            R::Double(d) => write!(f, "{d}"),
            R::Masked(why) => write!(f, "<{why}>"),
            R::Other(s) => write!(f, "{s}"),
        }
    }
}

/// A command for messages: its arguments, binary ones escaped, long ones shortened.
fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            if a.len() > 48 {
                format!("<{} bytes>", a.len())
            } else if a.is_empty() {
                "\"\"".into()
            } else if a.iter().all(|b| b.is_ascii_graphic()) {
                String::from_utf8_lossy(a).into_owned()
            } else {
                format!("{:?}", String::from_utf8_lossy(a))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| {
            if w == "''" {
                Vec::new()
            } else {
                w.as_bytes().to_vec()
            }
        })
        .collect()
}

fn upper(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_uppercase()
}

// ---------------------------------------------------------------------------------------------
// RedisBloom 2.8 against its newest versions: the one table
// ---------------------------------------------------------------------------------------------

/// Texts RedisBloom 2.8 answers where its newest versions answer another
/// (REDISBLOOM_COMPAT.md, "RedisBloom versions differ"); layerbloom keeps the newest.
const NEWEST_TEXTS: [(&str, &str); 3] = [
    (
        "ERR (0 < error rate range < 1)",
        "ERR error rate must be in the range (0.000000, 1.000000)",
    ),
    (
        "ERR (capacity should be larger than 0)",
        "ERR capacity must be in the range [1, 1073741824]",
    ),
    // A negative EXPANSION of BF.RESERVE (EXPANSION 0 is rewritten, see `version_rule`).
    (
        "ERR expansion should be greater or equal to 1",
        "ERR expansion must be in the range [0, 32768]",
    ),
];

/// BF.INSERT in 2.8 answers `Bad argument received` for an out-of-range CAPACITY, ERROR or
/// EXPANSION value; the newest name the option. The first such option is the culprit.
fn newest_insert_text(args: &[Vec<u8>]) -> Option<&'static str> {
    let mut i = 2;
    while i + 1 < args.len() {
        let value = String::from_utf8_lossy(&args[i + 1]).into_owned();
        match upper(&args[i]).as_str() {
            "ITEMS" => return None,
            "CAPACITY" if value.parse::<i64>().is_ok_and(|c| c < 1) => return Some("Bad capacity"),
            "ERROR" if value.parse::<f64>().is_ok_and(|e| !(e > 0.0 && e < 1.0)) => {
                return Some("Bad error rate")
            }
            "EXPANSION" if value.parse::<i64>().is_ok_and(|n| n < 0) => {
                return Some("Bad expansion")
            }
            "CAPACITY" | "ERROR" | "EXPANSION" => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// Tokens the streams use only for an upper bound 2.8 lacks: 2.8 accepts a capacity over 2^30
/// (and would allocate gigabytes) and an expansion over 32768; the newest refuse both.
const OVER_MAX_CAPACITY: &[u8] = b"1073741825";
const OVER_MAX_EXPANSION: &[u8] = b"32769";

/// How a command's expected reply is had from RedisBloom 2.8.
enum Rule {
    /// Ask RedisBloom these arguments (the command itself, or 2.8's spelling of it).
    Ask(Vec<Vec<u8>>),
    /// 2.8 would accept what the newest refuse: this is the newest reply, RedisBloom is not
    /// asked (the streams send these tokens only with otherwise valid arguments).
    Newest(R),
}

fn version_rule(args: &[Vec<u8>]) -> Rule {
    let name = upper(&args[0]);
    let reserve = name == "BF.RESERVE";
    let insert = name == "BF.INSERT";
    if !(reserve || insert) {
        return Rule::Ask(args.to_vec());
    }
    // BF.INSERT checks ranges once its options are read, and the last of a repeated option
    // is the one that counts (measured on 2.8: `CAPACITY 0 CAPACITY 3` creates capacity 3).
    let items_at = args
        .iter()
        .position(|a| upper(a) == "ITEMS")
        .unwrap_or(args.len());
    let last_value_of = |option: &str, i: usize| {
        i > 0
            && i < items_at
            && upper(&args[i - 1]) == option
            && !(i + 1..items_at).any(|j| upper(&args[j - 1]) == option && j > i)
    };
    let over_capacity = |i: usize| {
        if reserve {
            i == 3
        } else {
            last_value_of("CAPACITY", i)
        }
    };
    let over_expansion = |i: usize| {
        if reserve {
            i > 0 && upper(&args[i - 1]) == "EXPANSION"
        } else {
            last_value_of("EXPANSION", i)
        }
    };
    for (i, a) in args.iter().enumerate() {
        if a == OVER_MAX_CAPACITY && over_capacity(i) {
            return Rule::Newest(R::err(if reserve {
                "ERR capacity must be in the range [1, 1073741824]"
            } else {
                "Bad capacity"
            }));
        }
        if a == OVER_MAX_EXPANSION && over_expansion(i) {
            return Rule::Newest(R::err(if reserve {
                "ERR expansion must be in the range [0, 32768]"
            } else {
                "Bad expansion"
            }));
        }
    }
    // EXPANSION 0 is the newest's spelling of NONSCALING; 2.8 refuses it. And the newest use
    // an error rate above 0.25 as 0.25 (REDISBLOOM_COMPAT.md, "Defaults and ranges"); 2.8
    // uses it as given: 2.8 is asked with 0.25 there.
    let capped = |a: &[u8]| {
        let over = std::str::from_utf8(a)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .is_some_and(|e| e > 0.25 && e < 1.0);
        if over {
            b"0.25".to_vec()
        } else {
            a.to_vec()
        }
    };
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    let has_nonscaling = args.iter().any(|a| upper(a) == "NONSCALING");
    let options_from = if reserve { 4 } else { 2 };
    while i < args.len() {
        if i >= options_from
            && upper(&args[i]) == "EXPANSION"
            && args.get(i + 1).map(Vec::as_slice) == Some(b"0")
        {
            if !has_nonscaling || insert {
                out.push(b"NONSCALING".to_vec());
            }
            i += 2;
            continue;
        }
        if insert && upper(&args[i]) == "ITEMS" {
            out.extend_from_slice(&args[i..]);
            break;
        }
        let is_rate = if reserve {
            i == 2
        } else {
            i > 2 && upper(&args[i - 1]) == "ERROR"
        };
        out.push(if is_rate {
            capped(&args[i])
        } else {
            args[i].clone()
        });
        i += 1;
    }
    Rule::Ask(out)
}

/// RedisBloom 2.8's reply in the newest versions' words.
fn newest_texts(args: &[Vec<u8>], reply: R) -> R {
    match reply {
        R::Err(e) => {
            if let Some((_, new)) = NEWEST_TEXTS
                .iter()
                .find(|(old, _)| e.trim_end() == old.trim_end())
            {
                return R::err(new);
            }
            // 2.8 refuses EXPANSION with NONSCALING before reading the value; the newest accept
            // EXPANSION 0 NONSCALING, so they read the value first, and a value that is no
            // integer is a bad expansion.
            if e == "Nonscaling filters cannot expand" && upper(&args[0]) == "BF.RESERVE" {
                let value = args
                    .iter()
                    .position(|a| upper(a) == "EXPANSION")
                    .and_then(|i| args.get(i + 1));
                let integer = |v: &[u8]| {
                    std::str::from_utf8(v)
                        .is_ok_and(|t| !t.starts_with('+') && t.parse::<i64>().is_ok())
                };
                if value.is_some_and(|v| !integer(v)) {
                    return R::err("ERR bad expansion");
                }
            }
            if e == "Bad argument received" && upper(&args[0]) == "BF.INSERT" {
                if let Some(new) = newest_insert_text(args) {
                    return R::err(new);
                }
            }
            R::Err(e)
        }
        R::Arr(xs) => R::Arr(xs.into_iter().map(|x| newest_texts(args, x)).collect()),
        other => other,
    }
}

// ---------------------------------------------------------------------------------------------
// The two servers
// ---------------------------------------------------------------------------------------------

struct Side {
    server: Server,
    c2: redis::Connection,
    c3: redis::Connection,
}

impl Side {
    fn new(server: Server) -> Side {
        let c2 = server.conn();
        let c3 = server.conn_resp3();
        Side { server, c2, c3 }
    }

    fn reconnect(&mut self) {
        self.c2 = self.server.conn();
        self.c3 = self.server.conn_resp3();
    }

    fn run(&mut self, resp3: bool, args: &[Vec<u8>]) -> R {
        let mut c = redis::cmd(&String::from_utf8_lossy(&args[0]));
        for a in &args[1..] {
            c.arg(a.as_slice());
        }
        let con = if resp3 { &mut self.c3 } else { &mut self.c2 };
        r(&con.raw(&c))
    }

    fn line(&mut self, resp3: bool, line: &str) -> R {
        self.run(resp3, &words(line))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Classic,
    Blocked,
}

/// RedisBloom's server, or why the test cannot run here.
fn redisbloom_server(builder: common::Builder) -> Result<Server, String> {
    let path = redisbloom_path().ok_or_else(|| {
        "RedisBloom's module is not there (scripts/servers.sh unpacks it; or set \
         $LAYERBLOOM_REDISBLOOM)"
            .to_string()
    })?;
    builder
        .module(&path)
        .try_start()
        .map_err(|e| format!("RedisBloom 2.8.2 does not load on this server: {e}"))
}

fn layerbloom_builder(layout: Layout) -> common::Builder {
    match layout {
        Layout::Classic => Server::builder().module_args(&["bf-layout", "classic"]),
        Layout::Blocked => Server::builder(),
    }
}

/// Starts RedisBloom's server, returning from the test (with the reason) where it cannot run.
macro_rules! oracle {
    ($builder:expr) => {{
        require_own_server!();
        let rb = redisbloom_server($builder);
        let why = rb.as_ref().err().cloned().unwrap_or_default();
        skip_unless!(rb.is_ok(), why);
        rb.unwrap()
    }};
}

/// Discrepancies, printed together at the end.
#[derive(Default)]
struct Diffs {
    list: Vec<String>,
}

impl Diffs {
    fn push(&mut self, what: String) {
        self.list.push(what);
    }

    fn check(&mut self, context: &str, want: &R, got: &R) {
        if want != got {
            self.push(format!(
                "{context}\n      RedisBloom: {want}\n      layerbloom: {got}"
            ));
        }
    }

    fn assert_none(self, test: &str) {
        if self.list.is_empty() {
            return;
        }
        let n = self.list.len();
        let shown: Vec<String> = self.list.into_iter().take(SHOWN).collect();
        panic!(
            "{test}: {n} discrepancies with RedisBloom (first {}):\n  {}",
            shown.len(),
            shown.join("\n  ")
        );
    }
}

/// Per key, the items known added (blocked layout: what may be compared).
type Model = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;

struct Pair {
    rb: Side,
    lb: Side,
    layout: Layout,
    seed: u64,
    step: usize,
    diffs: Diffs,
    model: Model,
    /// Commands compared, and keys dropped after a false positive (blocked layout).
    compared: usize,
    dropped: usize,
    /// What the streams met: command names and RedisBloom's error texts, with counts.
    seen: BTreeMap<String, usize>,
}

impl Pair {
    fn new(rb: Server, layout: Layout) -> Pair {
        let lb = layerbloom_builder(layout).start();
        Pair {
            rb: Side::new(rb),
            lb: Side::new(lb),
            layout,
            seed: 0,
            step: 0,
            diffs: Diffs::default(),
            model: Model::new(),
            compared: 0,
            dropped: 0,
            seen: BTreeMap::new(),
        }
    }

    fn context(&self, resp3: bool, args: &[Vec<u8>]) -> String {
        format!(
            "[{:?} seed {:#x} step {} RESP{}] {}",
            self.layout,
            self.seed,
            self.step,
            if resp3 { 3 } else { 2 },
            show(args)
        )
    }

    /// Runs a command on both servers and compares the replies; returns them (RedisBloom's
    /// in the newest words).
    fn check(&mut self, resp3: bool, args: Vec<Vec<u8>>) -> (R, R) {
        let mut want = match version_rule(&args) {
            Rule::Ask(rb_args) => {
                let rb_args = chunk_ored_for_redisbloom(&rb_args, &mut self.rb);
                let v = self.rb.run(resp3, &rb_args);
                newest_texts(&args, v)
            }
            Rule::Newest(v) => v,
        };
        deliberate(&args, &mut want, &mut self.rb);
        let got = self.lb.run(resp3, &args);
        self.compared += 1;
        self.note(&args, &want);
        let context = self.context(resp3, &args);
        let before = self.diffs.list.len();
        match self.layout {
            Layout::Classic => self.diffs.check(&context, &want, &got),
            Layout::Blocked => {
                let (w, g) = self.blocked_view(&args, &want, &got);
                self.diffs.check(&context, &w, &g);
            }
        }
        self.track(&args, &want, &got);
        let writes = [
            "BF.RESERVE",
            "BF.ADD",
            "BF.MADD",
            "BF.INSERT",
            "BF.LOADCHUNK",
        ];
        if self.diffs.list.len() > before
            && args.len() > 1
            && writes.contains(&upper(&args[0]).as_str())
        {
            self.resync(&args[1].clone());
        }
        (want, got)
    }

    fn note(&mut self, args: &[Vec<u8>], want: &R) {
        *self.seen.entry(upper(&args[0])).or_default() += 1;
        let errors: Vec<&R> = match want {
            R::Arr(xs) => xs.iter().filter(|x| x.is_err()).collect(),
            e if e.is_err() => vec![e],
            _ => Vec::new(),
        };
        for e in errors {
            if let R::Err(text) = e {
                *self.seen.entry(text.clone()).or_default() += 1;
            }
        }
    }

    /// After a discrepancy in a write the key may differ between the servers: drop it from both, so
    /// that every later discrepancy is a new one.
    fn resync(&mut self, key: &[u8]) {
        let del = [b"DEL".to_vec(), key.to_vec()];
        self.rb.run(false, &del);
        self.lb.run(false, &del);
        self.model.remove(key);
        if key == STRING_KEY.as_bytes() {
            let set = words(&format!("SET {STRING_KEY} v"));
            self.rb.run(false, &set);
            self.lb.run(false, &set);
        }
    }

    fn line(&mut self, resp3: bool, line: &str) -> (R, R) {
        self.check(resp3, words(line))
    }

    /// Keeps the per-key model of added items (used by the blocked layout's view).
    fn track(&mut self, args: &[Vec<u8>], want: &R, got: &R) {
        let name = upper(&args[0]);
        let key = args.get(1).cloned().unwrap_or_default();
        match name.as_str() {
            "DEL" | "FLUSHALL" => {
                self.model.remove(&key);
            }
            "BF.RESERVE" if want == got && !got.is_err() => {
                self.model.insert(key, BTreeSet::new());
            }
            "BF.LOADCHUNK" if args.get(2).map(Vec::as_slice) == Some(b"1") && !got.is_err() => {
                self.model.insert(key, BTreeSet::new());
            }
            "BF.ADD" | "BF.MADD" | "BF.INSERT" => {
                let items = add_items(args);
                let flags: Vec<&R> = match got {
                    R::Arr(xs) => xs.iter().collect(),
                    single => vec![single],
                };
                for (item, flag) in items.iter().zip(flags) {
                    if flag.yes().is_some() {
                        self.model.entry(key.clone()).or_default();
                    }
                    if flag.yes() == Some(true) {
                        self.model
                            .entry(key.clone())
                            .or_default()
                            .insert(item.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// The parts of the replies the blocked layout can be held to: false positives differ
    /// between layouts, so lookups of items not known added are not compared, and an add that
    /// one side finds falsely present drops the key from both (it would diverge from there);
    /// BF.INFO Size is layerbloom's real memory (docs/compatibility.md, "Moving from RedisBloom"); BF.DEBUG
    /// lines have the blocked layout's own geometry words (docs/commands/bloom.md, BF.DEBUG), so only the items and
    /// each layer's capacity, size and ratio are compared; SCANDUMP data is layerbloom's own
    /// format (docs/commands/bloom.md, BF.SCANDUMP).
    fn blocked_view(&mut self, args: &[Vec<u8>], want: &R, got: &R) -> (R, R) {
        let name = upper(&args[0]);
        let key = args.get(1).cloned().unwrap_or_default();
        let known = self.model.get(&key).cloned().unwrap_or_default();
        let same = (want.clone(), got.clone());
        if want.is_err() || got.is_err() {
            return same;
        }
        match name.as_str() {
            "BF.EXISTS" if args.len() == 3 => {
                if known.contains(&args[2]) {
                    same
                } else {
                    (R::Masked("not added"), R::Masked("not added"))
                }
            }
            "BF.MEXISTS" => match (want, got) {
                (R::Arr(w), R::Arr(g)) if w.len() == g.len() && w.len() + 2 == args.len() => {
                    let mask = |xs: &[R]| {
                        R::Arr(
                            xs.iter()
                                .zip(&args[2..])
                                .map(|(x, item)| {
                                    if known.contains(item) || x.is_err() {
                                        x.clone()
                                    } else {
                                        R::Masked("not added")
                                    }
                                })
                                .collect(),
                        )
                    };
                    (mask(w), mask(g))
                }
                _ => same,
            },
            "BF.ADD" | "BF.MADD" | "BF.INSERT" => {
                let items = add_items(args);
                let flags = |v: &R| -> Vec<R> {
                    match v {
                        R::Arr(xs) => xs.clone(),
                        single => vec![single.clone()],
                    }
                };
                let (w, g) = (flags(want), flags(got));
                let mut seen = known.clone();
                for (i, item) in items.iter().enumerate() {
                    let (Some(a), Some(b)) = (w.get(i), g.get(i)) else {
                        break;
                    };
                    if seen.contains(item) || a.is_err() || b.is_err() {
                        continue;
                    }
                    if a.yes() == Some(false) || b.yes() == Some(false) {
                        // A false positive on one side: drop the key from both.
                        self.dropped += 1;
                        self.rb.run(false, &[b"DEL".to_vec(), key.clone()]);
                        self.lb.run(false, &[b"DEL".to_vec(), key.clone()]);
                        self.model.remove(&key);
                        return (R::Masked("false positive"), R::Masked("false positive"));
                    }
                    seen.insert(item.clone());
                }
                same
            }
            "BF.INFO" => (mask_size(args, want), mask_size(args, got)),
            "BF.DEBUG" => (debug_view(want), debug_view(got)),
            "BF.SCANDUMP" => (scandump_view(want), scandump_view(got)),
            _ => same,
        }
    }
}

/// The items of an add command (BF.ADD / BF.MADD key items..., BF.INSERT ... ITEMS items...).
fn add_items(args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    match upper(&args[0]).as_str() {
        "BF.INSERT" => match args.iter().position(|a| upper(a) == "ITEMS") {
            Some(p) => args[p + 1..].to_vec(),
            None => Vec::new(),
        },
        _ => args.get(2..).map(<[Vec<u8>]>::to_vec).unwrap_or_default(),
    }
}

/// Copies the rest of a SCANDUMP walk of `src` from iterator `it` into `dst` on one server;
/// why it stopped early, if it did.
fn finish_copy(
    side: &mut Side,
    resp3: bool,
    src: &[u8],
    dst: &[u8],
    mut it: i64,
) -> Result<(), String> {
    for _ in 0..10_000 {
        let v = side.run(
            resp3,
            &[
                b"BF.SCANDUMP".to_vec(),
                src.to_vec(),
                it.to_string().into_bytes(),
            ],
        );
        let Some((next, data)) = chunk(&v) else {
            return Err(format!("SCANDUMP {} {it}: {v}", show(&[src.to_vec()])));
        };
        if next == 0 {
            return Ok(());
        }
        let ok = side.run(
            resp3,
            &[
                b"BF.LOADCHUNK".to_vec(),
                dst.to_vec(),
                next.to_string().into_bytes(),
                data,
            ],
        );
        if ok.is_err() {
            return Err(format!("refused its own chunk {next}: {ok}"));
        }
        it = next;
    }
    Ok(())
}

/// docs/commands/bloom.md, BF.SCANDUMP / BF.LOADCHUNK: a chunk is ORed into the filter's bits, where
/// RedisBloom overwrites them (so that no chunk can erase a live filter's items). RedisBloom
/// is sent the chunk ORed with its own bytes at that offset: both servers then end with the
/// same bits, and every later reply is compared exactly. Chunks that cannot apply (no key,
/// bad iterator, past a layer) go as they are: both refuse them.
fn chunk_ored_for_redisbloom(args: &[Vec<u8>], rb: &mut Side) -> Vec<Vec<u8>> {
    let unchanged = || args.to_vec();
    if args.len() != 4 || upper(&args[0]) != "BF.LOADCHUNK" || args[3].is_empty() {
        return unchanged();
    }
    let Some(end) = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
        .and_then(|it| it.checked_sub(1))
    else {
        return unchanged();
    };
    let data = &args[3];
    let Some(offset) = end.checked_sub(data.len() as u64).filter(|_| end > 0) else {
        return unchanged();
    };
    // RedisBloom's bit arrays, concatenated, from its own SCANDUMP (iterator 0 is the header).
    let mut bits = Vec::new();
    let mut it = 0i64;
    loop {
        let v = rb.run(
            false,
            &[
                b"BF.SCANDUMP".to_vec(),
                args[1].clone(),
                it.to_string().into_bytes(),
            ],
        );
        let R::Arr(pair) = v else {
            return unchanged();
        };
        match (pair.first(), pair.get(1)) {
            (Some(R::Int(0)), _) => break,
            (Some(R::Int(next)), Some(R::Bulk(d))) => {
                if it != 0 {
                    bits.extend_from_slice(d);
                }
                it = *next;
            }
            _ => return unchanged(),
        }
    }
    let range = offset as usize..offset as usize + data.len();
    let Some(current) = bits.get(range) else {
        return unchanged();
    };
    let ored = current.iter().zip(data).map(|(a, b)| a | b).collect();
    vec![args[0].clone(), args[1].clone(), args[2].clone(), ored]
}

/// docs/compatibility.md's deliberate differences from RedisBloom that a stream meets, each in one place.
fn deliberate(args: &[Vec<u8>], want: &mut R, rb: &mut Side) {
    let name = upper(&args[0]);
    // docs/commands/bloom.md: "Every command answers WRONGTYPE ... on a key of another type
    // ... (RedisBloom answers 0 from BF.EXISTS there ...)".
    if (name == "BF.EXISTS" || name == "BF.MEXISTS") && args.len() >= 3 {
        let kind = rb.run(false, &[b"TYPE".to_vec(), args[1].clone()]);
        if kind != R::Simple("none".into()) && kind != R::Simple("MBbloom--".into()) {
            *want = R::err("WRONGTYPE Operation against a key holding the wrong kind of value");
        }
    }
    // docs/commands/bloom.md, BF.RESERVE: "ERR Unknown argument received (an unknown word,
    // which RedisBloom ignores ...)". layerbloom checks the words before the key.
    if name == "BF.RESERVE" && args.len() > 4 {
        let unknown = args[4..].iter().enumerate().any(|(i, a)| {
            let w = upper(a);
            w != "NONSCALING"
                && w != "EXPANSION"
                && !(i > 0 && upper(&args[4 + i - 1]) == "EXPANSION")
        });
        if unknown && (*want == R::Simple("OK".into()) || *want == R::err("ERR item exists")) {
            if *want == R::Simple("OK".into()) {
                rb.run(false, &[b"DEL".to_vec(), args[1].clone()]);
            }
            *want = R::err("ERR Unknown argument received");
        }
    }
}

/// BF.INFO's Size left out (blocked filters: layerbloom's real memory, docs/compatibility.md).
fn mask_size(args: &[Vec<u8>], v: &R) -> R {
    if args.len() == 3 && upper(&args[2]) == "SIZE" {
        return R::Masked("Size");
    }
    let is_size = |k: &R| k.text().as_deref() == Some("Size");
    match v {
        R::Arr(xs) if args.len() == 2 => {
            let mut out = xs.clone();
            for i in (0..out.len().saturating_sub(1)).step_by(2) {
                if is_size(&out[i]) {
                    out[i + 1] = R::Masked("Size");
                }
            }
            R::Arr(out)
        }
        R::Map(ps) if args.len() == 2 => R::Map(
            ps.iter()
                .map(|(k, v)| {
                    let v = if is_size(k) {
                        R::Masked("Size")
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        R::Map(ps) => R::Map(
            ps.iter()
                .map(|(k, v)| {
                    let v = if is_size(k) {
                        R::Masked("Size")
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// BF.DEBUG reduced to what both layouts share: `size:<items>`, then per layer its capacity,
/// items and ratio.
fn debug_view(v: &R) -> R {
    let R::Arr(lines) = v else { return v.clone() };
    R::Arr(
        lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let Some(text) = line.text() else {
                    return line.clone();
                };
                if i == 0 {
                    return R::Simple(text);
                }
                let kept: Vec<&str> = text
                    .split(' ')
                    .filter(|w| {
                        w.starts_with("capacity:")
                            || w.starts_with("size:")
                            || w.starts_with("ratio:")
                    })
                    .collect();
                R::Simple(kept.join(" "))
            })
            .collect(),
    )
}

/// A successful SCANDUMP reply reduced to its shape. Whether an iterator past the header
/// still names a chunk or the end depends on the layers' sizes, which differ between the
/// layouts: only success itself is compared.
fn scandump_view(v: &R) -> R {
    match v {
        R::Arr(p) if p.len() == 2 => match (&p[0], &p[1]) {
            (R::Int(_), R::Bulk(_)) => R::Masked("scandump reply"),
            _ => v.clone(),
        },
        _ => v.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// The command streams
// ---------------------------------------------------------------------------------------------

const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];
/// A key holding a string.
const STRING_KEY: &str = "str";
/// Items: `i0`..`i159`, the empty string and a binary one.
const UNIVERSE: u64 = 162;

fn item(rng: &mut Rng) -> Vec<u8> {
    match rng.below(UNIVERSE) {
        160 => Vec::new(),
        161 => b"\x00\xff\r\n bin".to_vec(),
        n => format!("i{n}").into_bytes(),
    }
}

fn any_case(rng: &mut Rng, word: &str) -> Vec<u8> {
    match rng.below(4) {
        0 => word.to_ascii_lowercase().into_bytes(),
        1 => {
            let mut w = word.to_ascii_lowercase().into_bytes();
            w[0] = w[0].to_ascii_uppercase();
            w
        }
        _ => word.as_bytes().to_vec(),
    }
}

fn pick_bytes(rng: &mut Rng, xs: &[&str]) -> Vec<u8> {
    let s = *rng.pick(xs);
    if s == "''" {
        Vec::new()
    } else {
        s.as_bytes().to_vec()
    }
}

/// Valid error rates (hex floats and exponents are numbers to Redis's parser). The blocked
/// layout's streams keep false positives rare, so that few keys are dropped.
const ERRORS_CLASSIC: &[&str] = &[
    "0.01", "0.001", "0.1", "0.5", "0.25", "0x1p-7", "1e-3", "0.0001",
];
const ERRORS_BLOCKED: &[&str] = &["0.001", "0.0001", "0x1p-10", "1e-4", "0.01"];
const BAD_ERRORS: &[&str] = &[
    "0", "1", "-0.01", "1.5", "x", "''", "1e309", "1e-400", "nan", "inf", "0.01x", "-inf",
];
const CAPACITIES: &[&str] = &["1", "2", "3", "5", "10", "100", "1000"];
const BAD_CAPACITIES: &[&str] = &[
    "0",
    "-1",
    "x",
    "1.5",
    "''",
    "9223372036854775808",
    "+5",
    "007",
];
const EXPANSIONS: &[&str] = &["1", "2", "3", "4"];
const BAD_EXPANSIONS: &[&str] = &["x", "-1", "1.5", "''", "-0"];
const INFO_WORDS: &[&str] = &["CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"];
/// Unknown BF.INFO words. layerbloom's own health words (ERROR, FILL, FPR, DISTINCT,
/// MAXCAPACITY) are its documented extension (docs/commands/bloom.md, BF.INFO), which RedisBloom refuses:
/// the streams do not send them.
const BAD_INFO_WORDS: &[&str] = &["FOO", "''", "ITEM", "CAPACITYX", "1"];
const ITERATORS: &[&str] = &[
    "0", "1", "2", "9", "17", "100", "-1", "x", "''", "1.5", "999999",
];

struct Gen {
    rng: Rng,
    layout: Layout,
}

impl Gen {
    fn key(&mut self) -> Vec<u8> {
        if self.rng.chance(6) {
            STRING_KEY.as_bytes().to_vec()
        } else {
            self.rng.pick(&KEYS).as_bytes().to_vec()
        }
    }

    fn error_rate(&mut self) -> Vec<u8> {
        if self.rng.chance(15) {
            pick_bytes(&mut self.rng, BAD_ERRORS)
        } else {
            let pool = match self.layout {
                Layout::Classic => ERRORS_CLASSIC,
                Layout::Blocked => ERRORS_BLOCKED,
            };
            pick_bytes(&mut self.rng, pool)
        }
    }

    fn capacity(&mut self) -> Vec<u8> {
        if self.rng.chance(15) {
            pick_bytes(&mut self.rng, BAD_CAPACITIES)
        } else {
            pick_bytes(&mut self.rng, CAPACITIES)
        }
    }

    /// An expansion value; `Some(true)` when it is the largest (the filter's capacity must
    /// then be 1 to stay small).
    fn expansion(&mut self) -> (Vec<u8>, bool) {
        match self.rng.below(100) {
            0..=69 => (pick_bytes(&mut self.rng, EXPANSIONS), false),
            70..=84 => (pick_bytes(&mut self.rng, BAD_EXPANSIONS), false),
            85..=94 => (b"0".to_vec(), false),
            _ => (b"32768".to_vec(), true),
        }
    }

    fn items(&mut self, max: u64) -> Vec<Vec<u8>> {
        let n = 1 + self.rng.below(max);
        (0..n).map(|_| item(&mut self.rng)).collect()
    }

    fn reserve(&mut self) -> Vec<Vec<u8>> {
        let key = self.key();
        let mut a = vec![b"BF.RESERVE".to_vec(), key];
        match self.rng.below(100) {
            0..=2 => {
                a.extend(words(&format!(
                    "0.01 {}",
                    String::from_utf8_lossy(OVER_MAX_CAPACITY)
                )));
                return a;
            }
            3..=5 => {
                a.extend(words("0.01 10 EXPANSION"));
                a.push(OVER_MAX_EXPANSION.to_vec());
                return a;
            }
            _ => {}
        }
        a.push(self.error_rate());
        a.push(self.capacity());
        let mut force_one = false;
        match self.rng.below(100) {
            0..=39 => {}
            40..=54 => a.push(any_case(&mut self.rng, "NONSCALING")),
            55..=79 => {
                a.push(any_case(&mut self.rng, "EXPANSION"));
                let (v, big) = self.expansion();
                force_one = big;
                a.push(v);
            }
            80..=86 => {
                a.push(any_case(&mut self.rng, "EXPANSION"));
                let (v, big) = self.expansion();
                force_one = big;
                a.push(v);
                a.push(any_case(&mut self.rng, "NONSCALING"));
            }
            87..=89 => {
                a.push(any_case(&mut self.rng, "NONSCALING"));
                a.push(any_case(&mut self.rng, "EXPANSION"));
                let (v, big) = self.expansion();
                force_one = big;
                a.push(v);
            }
            90..=94 => a.push(any_case(&mut self.rng, "EXPANSION")),
            _ => a.push(pick_bytes(&mut self.rng, &["FOO", "NONSCALNG", "ITEMS"])),
        }
        if force_one {
            a[3] = b"1".to_vec();
        }
        a
    }

    fn insert(&mut self) -> Vec<Vec<u8>> {
        let key = self.key();
        let mut a = vec![b"BF.INSERT".to_vec(), key];
        let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut force_one = false;
        if self.rng.chance(30) {
            options.push(vec![any_case(&mut self.rng, "CAPACITY"), self.capacity()]);
        }
        if self.rng.chance(30) {
            options.push(vec![any_case(&mut self.rng, "ERROR"), self.error_rate()]);
        }
        if self.rng.chance(25) {
            let (v, big) = self.expansion();
            force_one = big;
            options.push(vec![any_case(&mut self.rng, "EXPANSION"), v]);
        }
        if self.rng.chance(15) {
            options.push(vec![any_case(&mut self.rng, "NOCREATE")]);
        }
        if self.rng.chance(15) {
            options.push(vec![any_case(&mut self.rng, "NONSCALING")]);
        }
        if self.rng.chance(3) {
            options.push(vec![b"FOO".to_vec()]);
        }
        if self.rng.chance(3) {
            options.push(vec![b"CAPACITY".to_vec(), OVER_MAX_CAPACITY.to_vec()]);
        }
        if self.rng.chance(3) {
            options.push(vec![b"EXPANSION".to_vec(), OVER_MAX_EXPANSION.to_vec()]);
        }
        // Shuffle the options (Fisher-Yates).
        for i in (1..options.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            options.swap(i, j);
        }
        if force_one {
            options.retain(|o| upper(&o[0]) != "CAPACITY");
            options.push(vec![b"CAPACITY".to_vec(), b"1".to_vec()]);
        }
        for o in options {
            a.extend(o);
        }
        match self.rng.below(100) {
            0..=2 => {}                                        // no ITEMS at all
            3..=5 => a.push(any_case(&mut self.rng, "ITEMS")), // ITEMS and nothing
            6..=7 => a.push(b"CAPACITY".to_vec()),             // a value missing
            _ => {
                a.push(any_case(&mut self.rng, "ITEMS"));
                a.extend(self.items(6));
            }
        }
        a
    }

    fn info(&mut self) -> Vec<Vec<u8>> {
        let mut a = vec![b"BF.INFO".to_vec(), self.key()];
        match self.rng.below(100) {
            0..=29 => {}
            30..=89 => {
                let w = self.rng.pick(INFO_WORDS).to_string();
                a.push(any_case(&mut self.rng, &w));
            }
            _ => a.push(pick_bytes(&mut self.rng, BAD_INFO_WORDS)),
        }
        a
    }

    /// BF.LOADCHUNK with garbage or a copied header. In the blocked layout a data chunk
    /// (iterator > 1) goes only to a missing key or the string key: layerbloom's blocked
    /// filters lay their bytes out differently, so an offset into one means something else.
    fn loadchunk(&mut self) -> Vec<Vec<u8>> {
        let mut key = self.key();
        let it = pick_bytes(&mut self.rng, ITERATORS);
        if self.layout == Layout::Blocked && it != b"1" && key != STRING_KEY.as_bytes() {
            key = b"never-created".to_vec();
        }
        let data: Vec<u8> = match self.rng.below(4) {
            0 => Vec::new(),
            1 => b"garbage".to_vec(),
            2 => vec![0u8; 20 + 53],
            _ => (0..self.rng.below(200)).map(|i| (i * 37) as u8).collect(),
        };
        vec![b"BF.LOADCHUNK".to_vec(), key, it, data]
    }

    fn wrong_arity(&mut self) -> Vec<Vec<u8>> {
        const LINES: &[&str] = &[
            "BF.ADD k0",
            "BF.ADD k0 a b",
            "BF.EXISTS k0",
            "BF.EXISTS k0 a b",
            "BF.MADD k0",
            "BF.MEXISTS k0",
            "BF.INFO",
            "BF.INFO k0 ITEMS CAPACITY",
            "BF.CARD",
            "BF.CARD k0 x",
            "BF.SCANDUMP k0",
            "BF.SCANDUMP k0 0 x",
            "BF.LOADCHUNK k0 1",
            "BF.LOADCHUNK k0 1 d e",
            "BF.DEBUG",
            "BF.DEBUG k0 x",
            "BF.RESERVE k0 0.01",
            "BF.RESERVE k0",
            "BF.RESERVE k9 0.01 10 EXPANSION 2 NONSCALING x",
            "BF.INSERT k0",
            "BF.INSERT k0 ITEMS",
            "BF.INSERT k0 ERROR",
        ];
        let line: &str = LINES[self.rng.below(LINES.len() as u64) as usize];
        words(line)
    }

    fn next(&mut self) -> Vec<Vec<u8>> {
        let r = self.rng.below(100);
        match r {
            0..=9 => self.reserve(),
            10..=24 => {
                let key = self.key();
                let it = item(&mut self.rng);
                vec![b"BF.ADD".to_vec(), key, it]
            }
            25..=34 => {
                let mut a = vec![b"BF.MADD".to_vec(), self.key()];
                a.extend(self.items(8));
                a
            }
            35..=45 => self.insert(),
            46..=55 => {
                let key = self.key();
                let it = item(&mut self.rng);
                vec![b"BF.EXISTS".to_vec(), key, it]
            }
            56..=63 => {
                let mut a = vec![b"BF.MEXISTS".to_vec(), self.key()];
                a.extend(self.items(10));
                a
            }
            64..=71 => self.info(),
            72..=75 => vec![b"BF.CARD".to_vec(), self.key()],
            76..=79 => vec![b"BF.DEBUG".to_vec(), self.key()],
            80..=84 => {
                let key = self.key();
                let it = pick_bytes(&mut self.rng, ITERATORS);
                vec![b"BF.SCANDUMP".to_vec(), key, it]
            }
            85..=88 => self.loadchunk(),
            89..=91 => vec![b"DEL".to_vec(), self.key()],
            92..=95 => self.wrong_arity(),
            _ => vec![b"COPY-VIA-SCANDUMP".to_vec(), self.key(), self.key()],
        }
    }
}

impl Pair {
    /// Copies `src` to `dst` on each server with its own SCANDUMP / LOADCHUNK, comparing every
    /// reply, stopping at the first error.
    fn copy_via_scandump(&mut self, resp3: bool, src: &[u8], dst: &[u8]) {
        let mut it: Vec<u8> = b"0".to_vec();
        for _ in 0..10_000 {
            let dump = vec![b"BF.SCANDUMP".to_vec(), src.to_vec(), it.clone()];
            let (rbv, lbv) = self.check(resp3, dump.clone());
            let (Some(rb_chunk), Some(lb_chunk)) = (chunk(&rbv), chunk(&lbv)) else {
                return;
            };
            if rb_chunk.0 == 0 || lb_chunk.0 == 0 {
                return;
            }
            // Each server loads its own chunk; in the classic layout they are equal (compared
            // above), in the blocked one each is its server's own format.
            let load = |c: &(i64, Vec<u8>)| {
                vec![
                    b"BF.LOADCHUNK".to_vec(),
                    dst.to_vec(),
                    c.0.to_string().into_bytes(),
                    c.1.clone(),
                ]
            };
            let want = newest_texts(&load(&rb_chunk), self.rb.run(resp3, &load(&rb_chunk)));
            let got = self.lb.run(resp3, &load(&lb_chunk));
            self.compared += 1;
            let context = format!(
                "{} (copying {})",
                self.context(resp3, &load(&rb_chunk)),
                show(&dump)
            );
            let before = self.diffs.list.len();
            self.diffs.check(&context, &want, &got);
            if self.diffs.list.len() > before {
                self.resync(dst);
            }
            if want.is_err() || got.is_err() {
                return;
            }
            if rb_chunk.0 == 1 {
                let known = self.model.get(src).cloned().unwrap_or_default();
                self.model.insert(dst.to_vec(), known);
            }
            if rb_chunk.0 != lb_chunk.0 && self.layout == Layout::Classic {
                return;
            }
            it = lb_chunk.0.to_string().into_bytes();
            if self.layout == Layout::Blocked {
                // Iterators differ between formats: walk layerbloom's, then finish RedisBloom's.
                self.finish_rb_copy(resp3, src, dst, rb_chunk.0);
                self.finish_lb_copy(resp3, src, dst, lb_chunk.0);
                return;
            }
        }
    }

    fn finish_rb_copy(&mut self, resp3: bool, src: &[u8], dst: &[u8], it: i64) {
        let what = format!("[{:?} seed {:#x}] RedisBloom", self.layout, self.seed);
        if let Err(e) = finish_copy(&mut self.rb, resp3, src, dst, it) {
            self.diffs.push(format!("{what}: {e}"));
        }
    }

    fn finish_lb_copy(&mut self, resp3: bool, src: &[u8], dst: &[u8], it: i64) {
        let what = format!("[{:?} seed {:#x}] layerbloom", self.layout, self.seed);
        if let Err(e) = finish_copy(&mut self.lb, resp3, src, dst, it) {
            self.diffs.push(format!("{what}: {e}"));
        }
    }

    /// One seeded stream from an empty database.
    fn run_stream(&mut self, seed: u64) {
        self.seed = seed;
        self.model.clear();
        for side in [&mut self.rb, &mut self.lb] {
            side.line(false, "FLUSHALL");
            side.line(false, &format!("SET {STRING_KEY} v"));
        }
        let mut g = Gen {
            rng: Rng(seed),
            layout: self.layout,
        };
        for step in 0..STEPS {
            self.step = step;
            let resp3 = g.rng.chance(50);
            let args = g.next();
            if args[0] == b"COPY-VIA-SCANDUMP" {
                let (src, dst) = (args[1].clone(), args[2].clone());
                self.copy_via_scandump(resp3, &src, &dst);
            } else {
                self.check(resp3, args);
            }
        }
        // The end state, key by key.
        for key in KEYS {
            for resp3 in [false, true] {
                self.check(resp3, words(&format!("BF.CARD {key}")));
                self.check(resp3, words(&format!("BF.INFO {key}")));
                self.check(resp3, words(&format!("BF.DEBUG {key}")));
                let known: Vec<Vec<u8>> = self
                    .model
                    .get(key.as_bytes())
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default();
                if !known.is_empty() {
                    let mut a = vec![b"BF.MEXISTS".to_vec(), key.as_bytes().to_vec()];
                    a.extend(known);
                    self.check(resp3, a);
                }
            }
        }
    }
}

fn chunk(v: &R) -> Option<(i64, Vec<u8>)> {
    match v {
        R::Arr(p) if p.len() == 2 => match (&p[0], &p[1]) {
            (R::Int(n), R::Bulk(d)) => Some((*n, d.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// Every case the streams draw from, once each, in a fixed order: the documented errors,
/// the edges of every range, full non-scaling filters, growth, missing keys, the string key.
const FIXED: &[&str] = &[
    "SET fx:str v",
    "BF.RESERVE fx:a 0 10",
    "BF.RESERVE fx:a 1 10",
    "BF.RESERVE fx:a -0.5 10",
    "BF.RESERVE fx:a inf 10",
    "BF.RESERVE fx:a nan 10",
    "BF.RESERVE fx:a x 10",
    "BF.RESERVE fx:a '' 10",
    "BF.RESERVE fx:a 1e309 10",
    "BF.RESERVE fx:a 1e-400 10",
    "BF.RESERVE fx:a 0.01 0",
    "BF.RESERVE fx:a 0.01 -5",
    "BF.RESERVE fx:a 0.01 x",
    "BF.RESERVE fx:a 0.01 1.5",
    "BF.RESERVE fx:a 0.01 1073741825",
    "BF.RESERVE fx:a 0.01 10 EXPANSION",
    "BF.RESERVE fx:a 0.01 10 EXPANSION x",
    "BF.RESERVE fx:a 0.01 10 EXPANSION -1",
    "BF.RESERVE fx:a 0.01 10 EXPANSION 1.5",
    "BF.RESERVE fx:a 0.01 10 EXPANSION 32769",
    "BF.RESERVE fx:a 0.01 10 EXPANSION 2 NONSCALING",
    "BF.RESERVE fx:a 0.01 10 nonscaling expansion 2",
    "BF.RESERVE fx:a 0.01 10 FOO",
    "BF.RESERVE fx:a 0.01 10 EXPANSION 2 FOO",
    "BF.RESERVE fx:zero 0.01 3 EXPANSION 0",
    "BF.RESERVE fx:zero2 0.01 3 EXPANSION 0 NONSCALING",
    "BF.INFO fx:zero",
    "BF.MADD fx:zero a b c d",
    "BF.RESERVE fx:hex 0x1p-7 10",
    "BF.DEBUG fx:hex",
    "BF.RESERVE fx:half 0.5 10",
    "BF.DEBUG fx:half",
    "BF.RESERVE fx:big 0.01 1 EXPANSION 32768",
    "BF.MADD fx:big a b c",
    "BF.DEBUG fx:big",
    "BF.RESERVE fx:str 0.01 10",
    "BF.RESERVE fx:g 0.01 2 EXPANSION 1",
    "BF.MADD fx:g a b c d e f g",
    "BF.RESERVE fx:g 0.01 2",
    "BF.INFO fx:g",
    "BF.DEBUG fx:g",
    "BF.RESERVE fx:ns 0.01 3 NONSCALING",
    "BF.INSERT fx:ns ITEMS a b c d d",
    "BF.MADD fx:ns a e",
    "BF.ADD fx:ns a",
    "BF.ADD fx:ns e",
    "BF.INFO fx:ns",
    "BF.INFO fx:ns EXPANSION",
    "BF.INFO fx:ns capacity",
    "BF.INSERT fx:i CAPACITY 0 ITEMS x",
    "BF.INSERT fx:i CAPACITY -3 ITEMS x",
    "BF.INSERT fx:i CAPACITY x ITEMS x",
    "BF.INSERT fx:i CAPACITY 1073741825 ITEMS x",
    "BF.INSERT fx:i ERROR 2 ITEMS x",
    "BF.INSERT fx:i ERROR 0 ITEMS x",
    "BF.INSERT fx:i ERROR x ITEMS x",
    "BF.INSERT fx:i ERROR 1e309 ITEMS x",
    "BF.INSERT fx:i EXPANSION x ITEMS x",
    "BF.INSERT fx:i EXPANSION -1 ITEMS x",
    "BF.INSERT fx:i EXPANSION 32769 ITEMS x",
    "BF.INSERT fx:i FOO ITEMS x",
    "BF.INSERT fx:i CAPACITY 0 FOO ITEMS x",
    "BF.INSERT fx:i ERROR 2 FOO ITEMS x",
    "BF.INSERT fx:i EXPANSION -1 FOO ITEMS x",
    "BF.INSERT fx:i CAPACITY x FOO ITEMS x",
    "BF.INSERT fx:i FOO CAPACITY x ITEMS x",
    "BF.INSERT fx:i CAPACITY",
    "BF.INSERT fx:i CAPACITY 10 ITEMS",
    "BF.INSERT fx:i CAPACITY 10",
    "BF.INSERT fx:i NOCREATE ITEMS x",
    "BF.INSERT fx:i ERROR 0x1p-7 CAPACITY 5 EXPANSION 3 ITEMS x y z x",
    "BF.INSERT fx:i CAPACITY 99 NOCREATE ITEMS w",
    "BF.INFO fx:i",
    "BF.INSERT fx:iz EXPANSION 0 CAPACITY 2 ITEMS a b c",
    "BF.INFO fx:iz",
    "BF.INSERT fx:in NONSCALING EXPANSION 3 CAPACITY 2 ITEMS a b c",
    "BF.INFO fx:in",
    "BF.INSERT fx:str ITEMS a",
    "BF.ADD fx:str a",
    "BF.MADD fx:str a",
    "BF.EXISTS fx:str a",
    "BF.MEXISTS fx:str a b",
    "BF.INFO fx:str",
    "BF.CARD fx:str",
    "BF.DEBUG fx:str",
    "BF.SCANDUMP fx:str 0",
    "BF.LOADCHUNK fx:str 1 x",
    "BF.EXISTS fx:none a",
    "BF.MEXISTS fx:none a b",
    "BF.CARD fx:none",
    "BF.INFO fx:none",
    "BF.INFO fx:none ITEMS",
    "BF.DEBUG fx:none",
    "BF.SCANDUMP fx:none 0",
    "BF.LOADCHUNK fx:none 5 garbage",
    "BF.LOADCHUNK fx:none 1 garbage",
    "BF.LOADCHUNK fx:none x garbage",
    "BF.ADD fx:d a",
    "BF.INFO fx:d",
    "BF.INFO fx:d CAPACITY",
    "BF.INFO fx:d SIZE",
    "BF.INFO fx:d FILTERS",
    "BF.INFO fx:d ITEMS",
    "BF.INFO fx:d EXPANSION",
    "BF.INFO fx:d items",
    "BF.INFO fx:d FOO",
    "BF.INFO fx:d ''",
    "BF.INFO fx:d ITEMS x",
    "BF.CARD fx:d",
    "BF.DEBUG fx:d",
    "BF.SCANDUMP fx:d x",
    "BF.SCANDUMP fx:d -1",
    "BF.SCANDUMP fx:d 0",
    "BF.SCANDUMP fx:d 1",
    "BF.SCANDUMP fx:d 2",
    "BF.SCANDUMP fx:d 999999",
    "BF.LOADCHUNK fx:d 1 garbage",
    "BF.LOADCHUNK fx:d x garbage",
    "BF.LOADCHUNK fx:d 999999 ''",
    "BF.LOADCHUNK fx:d 999999 abc",
    "BF.LOADCHUNK fx:d 0 abc",
    "BF.LOADCHUNK fx:d -1 ''",
];

/// Cases whose answers depend on the classic layout's byte layout: a chunk that runs past the
/// end of a layer (a default filter's layer is 144 bytes there).
const FIXED_CLASSIC: &[&str] = &[
    "BF.ADD fx:c a",
    "BF.LOADCHUNK fx:c 161 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "BF.LOADCHUNK fx:c 145 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "BF.LOADCHUNK fx:c 146 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "BF.LOADCHUNK fx:c 3 xy",
    "BF.LOADCHUNK fx:c 2 xy",
    "BF.LOADCHUNK fx:c 145 ''",
    "BF.LOADCHUNK fx:c 146 ''",
    "BF.DEBUG fx:c",
    "BF.EXISTS fx:c a",
    "BF.SCANDUMP fx:c 1",
];

fn run_fixed(p: &mut Pair) {
    for resp3 in [false, true] {
        p.seed = 0;
        for side in [&mut p.rb, &mut p.lb] {
            side.line(false, "FLUSHALL");
        }
        p.model.clear();
        let classic = if p.layout == Layout::Classic {
            FIXED_CLASSIC
        } else {
            &[]
        };
        for (i, line) in FIXED.iter().chain(classic).enumerate() {
            p.step = i;
            p.line(resp3, line);
        }
    }
}

/// Errors every run must meet (RedisBloom's texts, in the newest words): the streams are
/// checked to reach them, so that a change to the generator cannot quietly stop testing them.
const MUST_MEET: &[&str] = &[
    "ERR bad error rate",
    "ERR error rate must be in the range (0.000000, 1.000000)",
    "ERR bad capacity",
    "ERR capacity must be in the range [1, 1073741824]",
    "ERR no expansion",
    "ERR bad expansion",
    "ERR expansion must be in the range [0, 32768]",
    "Nonscaling filters cannot expand",
    "ERR item exists",
    "ERR Unknown argument received",
    "Bad capacity",
    "Bad error rate",
    "Bad expansion",
    "Unknown argument received",
    "ERR not found",
    "ERR non scaling filter is full",
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "Invalid information value",
    "Second argument must be numeric",
    "ERR Second argument must be numeric",
    "ERR received bad data",
    "ERR invalid offset - no link found",
    "ERR wrong number of arguments for 'bf.insert' command",
];

fn differential(layout: Layout) {
    let rb = oracle!(Server::builder());
    let mut p = Pair::new(rb, layout);
    run_fixed(&mut p);
    for seed in SEEDS {
        p.run_stream(seed);
    }
    eprintln!(
        "{layout:?}: {} commands compared, {} keys dropped after a false positive",
        p.compared, p.dropped
    );
    let counts: Vec<String> = p.seen.iter().map(|(k, n)| format!("{n:5} {k}")).collect();
    eprintln!("{layout:?}: met\n{}", counts.join("\n"));
    for want in MUST_MEET {
        assert!(p.seen.contains_key(*want), "the streams never met {want:?}");
    }
    if layout == Layout::Classic {
        let too_big = "ERR invalid chunk - Too big for current filter";
        assert!(p.seen.contains_key(too_big), "never met {too_big:?}");
    }
    for name in [
        "RESERVE",
        "ADD",
        "MADD",
        "INSERT",
        "EXISTS",
        "MEXISTS",
        "INFO",
        "CARD",
        "SCANDUMP",
        "LOADCHUNK",
        "DEBUG",
    ] {
        let n = p.seen.get(&format!("BF.{name}")).copied().unwrap_or(0);
        assert!(n >= 50, "BF.{name} compared only {n} times");
    }
    // The false-positive exclusion must leave the streams testing something.
    assert!(
        p.dropped * 20 < SEEDS.len() * STEPS,
        "{} keys dropped",
        p.dropped
    );
    p.diffs.assert_none(&format!("{layout:?} layout"));
}

#[test]
fn every_reply_matches_redisbloom_in_the_classic_layout() {
    differential(Layout::Classic);
}

#[test]
fn every_reply_not_hanging_on_false_positives_matches_redisbloom_in_the_blocked_layout() {
    differential(Layout::Blocked);
}

// ---------------------------------------------------------------------------------------------
// RedisBloom's data, written at test time, loaded by layerbloom
// ---------------------------------------------------------------------------------------------

/// One filter the population makes, and what went into it.
struct Filter {
    key: String,
    added: Vec<Vec<u8>>,
}

/// Filters of every shape RedisBloom makes: scaling over several layers, non-scaling and
/// full, expansion 1 and 3, a hex-float error rate, default-created, binary items, empty.
/// `con` is either server; the same commands make the same classic filters on both.
fn populate(side: &mut Side, prefix: &str) -> Vec<Filter> {
    let specs: [(&str, &str, usize); 7] = [
        ("grow", "BF.RESERVE {k} 0.01 10", 150),
        ("ns", "BF.RESERVE {k} 0.001 20 NONSCALING", 25),
        ("e1", "BF.RESERVE {k} 0.05 4 EXPANSION 1", 30),
        ("e3", "BF.RESERVE {k} 0.002 7 EXPANSION 3", 80),
        ("dflt", "", 60),
        ("bin", "BF.RESERVE {k} 0.2 50", 40),
        ("empty", "BF.RESERVE {k} 0.01 1000", 0),
    ];
    let mut out = Vec::new();
    for (name, reserve, n) in specs {
        let key = format!("{prefix}{name}");
        if !reserve.is_empty() {
            let v = side.line(false, &reserve.replace("{k}", &key));
            assert_eq!(v, R::Simple("OK".into()), "{reserve} on {key}");
        }
        let added: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                if name == "bin" {
                    vec![i as u8, 0, 255, b'\n', (i * 7) as u8]
                } else {
                    format!("{name}-{i}").into_bytes()
                }
            })
            .collect();
        for batch in added.chunks(16) {
            let mut a = vec![b"BF.MADD".to_vec(), key.clone().into_bytes()];
            a.extend(batch.iter().cloned());
            side.run(false, &a);
        }
        out.push(Filter { key, added });
    }
    out
}

/// Lookups of items never added, the same for every comparison.
fn probes() -> Vec<Vec<u8>> {
    (0..400)
        .map(|i| format!("absent-{i}").into_bytes())
        .collect()
}

/// Compares a filter on RedisBloom with one on layerbloom: lookups of added and absent items
/// (exact: RedisBloom's data is classic in layerbloom), CARD, INFO (whole and by field, Size
/// excepted when `size` is false: layerbloom's real memory, docs/compatibility.md "Moving from RedisBloom"),
/// DEBUG and the SCANDUMP stream, over RESP2 and RESP3.
#[allow(clippy::too_many_arguments)]
fn compare_filter(
    diffs: &mut Diffs,
    what: &str,
    rb: &mut Side,
    rb_key: &str,
    lb: &mut Side,
    lb_key: &str,
    added: &[Vec<u8>],
    size: bool,
) {
    let absent = probes();
    for resp3 in [false, true] {
        let ctx = |c: &str| {
            format!(
                "[{what} RESP{}] {c} ({rb_key} vs {lb_key})",
                if resp3 { 3 } else { 2 }
            )
        };
        for items in [added, absent.as_slice()] {
            for batch in items.chunks(100) {
                let mk = |k: &str| {
                    let mut a = vec![b"BF.MEXISTS".to_vec(), k.as_bytes().to_vec()];
                    a.extend(batch.iter().cloned());
                    a
                };
                diffs.check(
                    &ctx("BF.MEXISTS"),
                    &rb.run(resp3, &mk(rb_key)),
                    &lb.run(resp3, &mk(lb_key)),
                );
            }
        }
        if let Some(first) = added.first() {
            let mk = |k: &str| vec![b"BF.EXISTS".to_vec(), k.as_bytes().to_vec(), first.clone()];
            diffs.check(
                &ctx("BF.EXISTS"),
                &rb.run(resp3, &mk(rb_key)),
                &lb.run(resp3, &mk(lb_key)),
            );
        }
        for tail in ["", " CAPACITY", " SIZE", " FILTERS", " ITEMS", " EXPANSION"] {
            let want = rb.line(resp3, &format!("BF.INFO {rb_key}{tail}"));
            let got = lb.line(resp3, &format!("BF.INFO {lb_key}{tail}"));
            let args = words(&format!("BF.INFO {lb_key}{tail}"));
            let (want, got) = if size {
                (want, got)
            } else {
                (mask_size(&args, &want), mask_size(&args, &got))
            };
            diffs.check(&ctx(&format!("BF.INFO{tail}")), &want, &got);
        }
        for c in ["BF.CARD", "BF.DEBUG"] {
            let want = rb.line(resp3, &format!("{c} {rb_key}"));
            let got = lb.line(resp3, &format!("{c} {lb_key}"));
            diffs.check(&ctx(c), &want, &got);
        }
    }
    let want = scandump_all(rb, rb_key);
    let got = scandump_all(lb, lb_key);
    if want != got {
        diffs.push(format!(
            "[{what}] BF.SCANDUMP streams differ ({rb_key} vs {lb_key}): {} vs {} chunks, sizes {:?} vs {:?}",
            want.len(),
            got.len(),
            want.iter().map(|c| (c.0, c.1.len())).collect::<Vec<_>>(),
            got.iter().map(|c| (c.0, c.1.len())).collect::<Vec<_>>(),
        ));
    }
}

fn scandump_all(side: &mut Side, key: &str) -> Vec<(i64, Vec<u8>)> {
    common::scandump(&mut side.c2, key)
}

fn loadchunks(
    side: &mut Side,
    key: &str,
    chunks: &[(i64, Vec<u8>)],
    diffs: &mut Diffs,
    what: &str,
) {
    for (it, data) in chunks {
        let v = side.run(
            false,
            &[
                b"BF.LOADCHUNK".to_vec(),
                key.as_bytes().to_vec(),
                it.to_string().into_bytes(),
                data.clone(),
            ],
        );
        if v != R::Simple("OK".into()) {
            diffs.push(format!(
                "[{what}] BF.LOADCHUNK {key} {it} <{} bytes>: {v}",
                data.len()
            ));
            return;
        }
    }
}

/// After loading, both keep behaving alike: more items (growing the scaling filters, refused
/// by the full one) and lookups.
fn continue_alike(diffs: &mut Diffs, what: &str, rb: &mut Side, lb: &mut Side, filters: &[Filter]) {
    for f in filters {
        for resp3 in [false, true] {
            let mut a = vec![b"BF.MADD".to_vec(), f.key.clone().into_bytes()];
            a.extend((0..30).map(|i| format!("more-{resp3}-{i}").into_bytes()));
            diffs.check(
                &format!(
                    "[{what} RESP{}] {}",
                    if resp3 { 3 } else { 2 },
                    show(&a[..3])
                ),
                &rb.run(resp3, &a),
                &lb.run(resp3, &a),
            );
            let d = words(&format!("BF.DEBUG {}", f.key));
            diffs.check(
                &format!("[{what}] BF.DEBUG {} after more adds", f.key),
                &rb.run(resp3, &d),
                &lb.run(resp3, &d),
            );
        }
    }
}

#[test]
fn redisbloom_scandump_streams_load_into_layerbloom_and_back() {
    let rb = oracle!(Server::builder());
    let mut rb = Side::new(rb);
    let mut lb = Side::new(layerbloom_builder(Layout::Classic).start());
    let mut lb_blocked = Side::new(layerbloom_builder(Layout::Blocked).start());
    let mut diffs = Diffs::default();
    let filters = populate(&mut rb, "rb:");
    let lb_made = populate(&mut lb, "lb:");
    for f in &filters {
        let chunks = scandump_all(&mut rb, &f.key);
        // RedisBloom -> layerbloom, in both layouts (RedisBloom's data is classic in each).
        for (side, what) in [(&mut lb, "classic"), (&mut lb_blocked, "blocked")] {
            let what = format!("RedisBloom SCANDUMP -> layerbloom ({what}) LOADCHUNK");
            loadchunks(
                side,
                &format!("from-rb:{}", f.key),
                &chunks,
                &mut diffs,
                &what,
            );
            compare_filter(
                &mut diffs,
                &what,
                &mut rb,
                &f.key,
                side,
                &format!("from-rb:{}", f.key),
                &f.added,
                false,
            );
        }
        // ... and back to RedisBloom from layerbloom's copy.
        let back = scandump_all(&mut lb, &format!("from-rb:{}", f.key));
        let what = "RedisBloom -> layerbloom -> RedisBloom";
        loadchunks(&mut rb, &format!("back:{}", f.key), &back, &mut diffs, what);
        compare_filter(
            &mut diffs,
            what,
            &mut rb,
            &format!("back:{}", f.key),
            &mut lb,
            &format!("from-rb:{}", f.key),
            &f.added,
            true,
        );
    }
    // layerbloom (classic) -> RedisBloom: what layerbloom made, RedisBloom loads and answers.
    for (f, theirs) in lb_made.iter().zip(&filters) {
        let chunks = scandump_all(&mut lb, &f.key);
        let what = "layerbloom (classic) SCANDUMP -> RedisBloom LOADCHUNK";
        loadchunks(
            &mut rb,
            &format!("from-lb:{}", f.key),
            &chunks,
            &mut diffs,
            what,
        );
        compare_filter(
            &mut diffs,
            what,
            &mut rb,
            &format!("from-lb:{}", f.key),
            &mut lb,
            &f.key,
            &f.added,
            true,
        );
        // The same commands made the same filters on both (classic: Size included).
        compare_filter(
            &mut diffs,
            "made by the same commands",
            &mut rb,
            &theirs.key,
            &mut lb,
            &f.key,
            &f.added,
            true,
        );
    }
    diffs.assert_none("SCANDUMP streams");
}

#[test]
fn redisbloom_dump_payloads_restore_into_layerbloom() {
    let rb = oracle!(Server::builder());
    let mut rb = Side::new(rb);
    let mut lb = Side::new(Server::start());
    let mut diffs = Diffs::default();
    let filters = populate(&mut rb, "");
    for f in &filters {
        let payload = match rb.line(false, &format!("DUMP {}", f.key)) {
            R::Bulk(p) => p,
            other => panic!("DUMP {} on RedisBloom replied {other}", f.key),
        };
        let v = lb.run(
            false,
            &[
                b"RESTORE".to_vec(),
                f.key.clone().into_bytes(),
                b"0".to_vec(),
                payload,
            ],
        );
        diffs.check(
            &format!("RESTORE {} <RedisBloom's DUMP>", f.key),
            &R::Simple("OK".into()),
            &v,
        );
        compare_filter(
            &mut diffs,
            "DUMP -> RESTORE",
            &mut rb,
            &f.key,
            &mut lb,
            &f.key,
            &f.added,
            false,
        );
    }
    continue_alike(&mut diffs, "DUMP -> RESTORE", &mut rb, &mut lb, &filters);
    diffs.assert_none("DUMP payloads");
}

/// Starts layerbloom on a copy of `files` (from RedisBloom's dir) with `config`.
fn layerbloom_on(files: &[PathBuf], config: &[(&str, &str)]) -> Side {
    let mut b = Server::builder();
    for (k, v) in config {
        b = b.config(k, v);
    }
    let mut s = b.start();
    s.kill();
    for f in files {
        let to = s.dir().join(f.file_name().unwrap());
        let _ = std::fs::remove_dir_all(&to);
        copy_tree(f, &to);
    }
    s.start_again();
    Side::new(s)
}

#[test]
fn a_redisbloom_rdb_file_loads_into_layerbloom() {
    let rb = oracle!(Server::builder());
    let mut rb = Side::new(rb);
    let mut diffs = Diffs::default();
    let filters = populate(&mut rb, "");
    assert_eq!(rb.line(false, "SAVE"), R::Simple("OK".into()));
    let mut lb = layerbloom_on(&[rb.server.dir().join("dump.rdb")], &[]);
    assert_eq!(
        lb.line(false, "DBSIZE"),
        R::Int(filters.len() as i64),
        "keys loaded"
    );
    for f in &filters {
        compare_filter(
            &mut diffs, "RDB", &mut rb, &f.key, &mut lb, &f.key, &f.added, false,
        );
    }
    continue_alike(&mut diffs, "RDB", &mut rb, &mut lb, &filters);
    diffs.assert_none("RDB file");
}

#[test]
fn a_redisbloom_aof_replays_into_layerbloom() {
    let aof = [
        ("appendonly", "yes"),
        ("aof-use-rdb-preamble", "no"),
        ("appendfsync", "always"),
    ];
    let mut b = Server::builder();
    for (k, v) in aof {
        b = b.config(k, v);
    }
    let rb = oracle!(b);
    let mut rb = Side::new(rb);
    let mut diffs = Diffs::default();
    let mut filters = populate(&mut rb, "");
    assert!(rb.line(false, "BGREWRITEAOF").text().is_some());
    let mut con = rb.server.conn();
    common::wait_for_aof_rewrite(&mut con);
    // Commands after the rewrite: replayed from the incremental file.
    let late = [
        ("late:r", "BF.RESERVE late:r 0.001 5 EXPANSION 2"),
        (
            "late:i",
            "BF.INSERT late:i CAPACITY 3 ERROR 0.01 NONSCALING ITEMS",
        ),
        ("late:a", "BF.ADD late:a"),
    ];
    for (key, line) in late {
        let mut added = Vec::new();
        if line.starts_with("BF.RESERVE") {
            rb.line(false, line);
        }
        for i in 0..12 {
            let it = format!("{key}-{i}");
            let a = if line.starts_with("BF.RESERVE") {
                format!("BF.ADD {key} {it}")
            } else {
                format!("{line} {it}")
            };
            rb.line(false, &a);
            added.push(it.into_bytes());
        }
        filters.push(Filter {
            key: key.to_string(),
            added,
        });
    }
    for f in filters.iter().take(3) {
        rb.line(
            false,
            &format!("BF.MADD {} after-rewrite-1 after-rewrite-2", f.key),
        );
    }
    let dir = rb.server.dir().join("appendonlydir");
    assert!(dir.is_dir(), "no appendonlydir in RedisBloom's dir");
    let mut lb = layerbloom_on(&[dir], &[("appendonly", "yes")]);
    assert_eq!(
        lb.line(false, "DBSIZE"),
        R::Int(filters.len() as i64),
        "keys replayed"
    );
    for f in &filters {
        compare_filter(
            &mut diffs, "AOF", &mut rb, &f.key, &mut lb, &f.key, &f.added, false,
        );
    }
    continue_alike(&mut diffs, "AOF", &mut rb, &mut lb, &filters);
    lb.reconnect();
    diffs.assert_none("AOF");
}

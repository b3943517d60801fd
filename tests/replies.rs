//! Argument parsing and error texts, side by side with RedisBloom's own module: each command
//! goes to a layerbloom server and to a server running RedisBloom 2.8 (the oracle,
//! `common::redisbloom_path()`), and the answers must be the same, except where RedisBloom's
//! newest texts differ from 2.8's (REDISBLOOM_COMPAT.md's version table): there the oracle
//! must still answer the 2.8 text recorded here and layerbloom the newest one.
//!
//! Every filter made here is small: RedisBloom 2.8 on Redis 7.0 aborts the server when a huge
//! allocation fails.

use crate::common;

use common::{error_of, Exec, Server};
use redis::{Cmd, Value};

/// What the newest RedisBloom answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    /// Success (`OK`, or an array of add results).
    Done,
    /// This exact error text.
    Error(&'static str),
}

/// One command and how the oracle's answer relates to the newest.
struct Case {
    args: Vec<Vec<u8>>,
    /// `None`: the oracle's answer is the newest; compare live. `Some((text, newest))`: the
    /// oracle answers 2.8's `text`, the newest RedisBloom (and layerbloom) `newest`.
    differs: Option<(&'static str, Answer)>,
}

fn case(args: &[&[u8]], differs: Option<(&'static str, Answer)>) -> Case {
    Case {
        args: args.iter().map(|a| a.to_vec()).collect(),
        differs,
    }
}

fn command(args: &[Vec<u8>]) -> Cmd {
    let mut c = redis::cmd(std::str::from_utf8(&args[0]).unwrap());
    for a in &args[1..] {
        c.arg(a.as_slice());
    }
    c
}

fn answer_of(v: &Value) -> Answer {
    match error_of(v) {
        // The texts are compared through the table's `&'static str`s; leak the few there are.
        Some(e) => Answer::Error(Box::leak(e.into_boxed_str())),
        None => Answer::Done,
    }
}

/// Error rates: numbers the server's strtod-based parser reads (hexadecimal floats, a `+`,
/// leading zeros, subnormals) and the ones it refuses (spaces, NaN, overflow, underflow, a
/// NUL, nothing).
const RATES_SAME: &[&str] = &[
    "0.01", "+0.1", "00.1", ".5", "0x1p-7", "0X1P-7", "0x1.8p-3", "1e-320", "1e-310", "1e-308",
    "4.9e-324", "1e309", "-1e309", "1e-400", "nan", "NaN", " 0.1", "\t0.1", "0.1 ", "0.1\n", "",
    "0.1x", "0x", "1e", "0.01\0", "abc",
];
/// Error rates that are numbers outside (0, 1): RedisBloom 2.8 words the range error
/// differently.
const RATES_OUT_OF_RANGE: &[&str] = &["inf", "-inf", "infinity", "-0", "0", "1", "5.", "2", "-0.1"];
/// Integers (capacity, expansion) that are not Redis integers, or that both accept.
const INTEGERS_SAME: &[&str] = &[
    "10",
    "+10",
    "010",
    " 10",
    "10 ",
    "",
    "-0",
    "1e3",
    "10.0",
    "0x10",
    "10\0",
    "9223372036854775808",
    "-9223372036854775809",
];

const RANGE_28: &str = "ERR (0 < error rate range < 1) ";
const RANGE: &str = "ERR error rate must be in the range (0.000000, 1.000000)";
const INSERT_28: &str = "Bad argument received";
const CAPACITY_28: &str = "ERR (capacity should be larger than 0)";
const CAPACITY: &str = "ERR capacity must be in the range [1, 1073741824]";
const EXPANSION_28: &str = "ERR expansion should be greater or equal to 1";
const EXPANSION: &str = "ERR expansion must be in the range [0, 32768]";

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for rate in RATES_SAME {
        let r = rate.as_bytes();
        out.push(case(&[b"BF.RESERVE", b"k", r, b"100"], None));
        out.push(case(&[b"BF.RESERVE", b"k", r, b"100", b"NONSCALING"], None));
        out.push(case(
            &[b"BF.INSERT", b"k", b"ERROR", r, b"ITEMS", b"a"],
            None,
        ));
    }
    for rate in RATES_OUT_OF_RANGE {
        let r = rate.as_bytes();
        let reserve = Some((RANGE_28, Answer::Error(RANGE)));
        out.push(case(&[b"BF.RESERVE", b"k", r, b"100"], reserve));
        out.push(case(
            &[b"BF.RESERVE", b"k", r, b"100", b"NONSCALING"],
            reserve,
        ));
        let insert = Some((INSERT_28, Answer::Error("Bad error rate")));
        out.push(case(
            &[b"BF.INSERT", b"k", b"ERROR", r, b"ITEMS", b"a"],
            insert,
        ));
    }
    for n in INTEGERS_SAME {
        let n = n.as_bytes();
        out.push(case(&[b"BF.RESERVE", b"k", b"0.01", n], None));
        out.push(case(
            &[b"BF.INSERT", b"k", b"CAPACITY", n, b"ITEMS", b"a"],
            None,
        ));
        out.push(case(
            &[b"BF.RESERVE", b"k", b"0.01", b"10", b"EXPANSION", n],
            None,
        ));
        out.push(case(
            &[b"BF.INSERT", b"k", b"EXPANSION", n, b"ITEMS", b"a"],
            None,
        ));
    }
    for n in ["0", "-1", "-9223372036854775808"] {
        let n = n.as_bytes();
        let reserve = Some((CAPACITY_28, Answer::Error(CAPACITY)));
        out.push(case(&[b"BF.RESERVE", b"k", b"0.01", n], reserve));
        let insert = Some((INSERT_28, Answer::Error("Bad capacity")));
        out.push(case(
            &[b"BF.INSERT", b"k", b"CAPACITY", n, b"ITEMS", b"a"],
            insert,
        ));
    }
    // EXPANSION 0: non-scaling in the newest; refused by 2.8. Negative: a range error.
    let zero = Some((EXPANSION_28, Answer::Done));
    out.push(case(
        &[b"BF.RESERVE", b"k", b"0.01", b"10", b"EXPANSION", b"0"],
        zero,
    ));
    let zero = Some((INSERT_28, Answer::Done));
    out.push(case(
        &[b"BF.INSERT", b"k", b"EXPANSION", b"0", b"ITEMS", b"a"],
        zero,
    ));
    let negative = Some((EXPANSION_28, Answer::Error(EXPANSION)));
    out.push(case(
        &[b"BF.RESERVE", b"k", b"0.01", b"10", b"EXPANSION", b"-1"],
        negative,
    ));
    let negative = Some((INSERT_28, Answer::Error("Bad expansion")));
    out.push(case(
        &[b"BF.INSERT", b"k", b"EXPANSION", b"-1", b"ITEMS", b"a"],
        negative,
    ));
    out
}

#[test]
fn numbers_and_their_errors_answer_as_redisbloom_answers() {
    require_own_server!();
    let Some((layerbloom, oracle)) = common::ours_and_redisbloom() else {
        return;
    };
    let (mut lb, mut rb) = (layerbloom.conn(), oracle.conn());
    let mut wrong = Vec::new();
    let cases = cases();
    for c in &cases {
        for con in [&mut lb, &mut rb] {
            con.ok(&redis::cmd("FLUSHALL"));
        }
        let cmd = command(&c.args);
        let (got, oracle_said) = (answer_of(&lb.raw(&cmd)), answer_of(&rb.raw(&cmd)));
        let want = match c.differs {
            None => oracle_said,
            Some((text_28, newest)) => {
                if oracle_said != Answer::Error(text_28) {
                    wrong.push(format!(
                        "{}: RedisBloom answered {oracle_said:?}, not 2.8's {text_28:?}",
                        common::show(&cmd)
                    ));
                }
                newest
            }
        };
        if got != want {
            wrong.push(format!(
                "{}: layerbloom answered {got:?}, the newest RedisBloom {want:?}",
                common::show(&cmd)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

/// `4.9e-324` (the smallest double) halves to zero for a scaling filter's first layer: no
/// filter can be sized, and RedisBloom 2.8 says so in the same words. Non-scaling, it works.
#[test]
fn the_smallest_error_rate_creates_only_a_nonscaling_filter_as_in_redisbloom() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    for cmd in [
        common_cmd(&["BF.RESERVE", "a", "4.9e-324", "100"]),
        common_cmd(&["BF.INSERT", "b", "ERROR", "4.9e-324", "ITEMS", "x"]),
    ] {
        assert_eq!(con.err_text(&cmd), "ERR could not create filter");
    }
    assert!(!common::key_exists(&mut con, "a") && !common::key_exists(&mut con, "b"));
    con.ok(&common_cmd(&[
        "BF.RESERVE",
        "c",
        "4.9e-324",
        "100",
        "NONSCALING",
    ]));
    assert_eq!(con.q::<i64>(&common_cmd(&["BF.ADD", "c", "x"])), 1);
    assert_eq!(con.q::<i64>(&common_cmd(&["BF.EXISTS", "c", "x"])), 1);
}

fn common_cmd(args: &[&str]) -> Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

//! Windowed Bloom filters (`BF.RESERVE ... WINDOW ms [SLICES n]`): options and errors, what
//! answers within the window and what is forgotten after it, growth and refusals, memory
//! returned, every BF command on a windowed key, persistence and replication after expiries.
//!
//! Time moves by the test clock (`make test-clock-module`: the module's clock plus the setting
//! `bf-test-clock-offset-ms`), in steps of whole slices of a window far longer than any test
//! runs: no assertion depends on how fast the machine is.

use crate::common;
use common::setting;

use common::{
    bf_info, digest, error_of, info_i64, module_type_id, scandump, test_clock_module_path, text_of,
    wait_for_aof_rewrite, wait_for_link, Events, Exec, Field, Payload, Server, Stop,
};
use redis::Value;

/// The window of the tests: 4 slices of 1000 s. A test runs far less than a slice, so the
/// real clock never crosses a slice boundary the test did not make.
const WINDOW: u64 = 4_000_000;
const SLICE: u64 = 1_000_000;
const SLICES: u64 = 4;

fn builder() -> common::Builder {
    Server::builder().module(&test_clock_module_path())
}

fn server() -> Server {
    builder().start()
}

/// The test clock's setting as this server names module settings.
fn clock_setting(con: &mut redis::Connection) -> &'static str {
    for name in ["bf.bf-test-clock-offset-ms", "bf-test-clock-offset-ms"] {
        let v: Vec<String> = con.q(&cmd!("CONFIG", "GET", name));
        if !v.is_empty() {
            return name;
        }
    }
    panic!("the test clock's setting is missing: is this the test-clock module?")
}

/// Moves the server's clock forward by `ms`.
fn advance(con: &mut redis::Connection, ms: u64) {
    let name = clock_setting(con);
    let v: Vec<String> = con.q(&cmd!("CONFIG", "GET", name));
    let now: u64 = v[1].parse().unwrap();
    con.ok(&cmd!("CONFIG", "SET", name, now + ms));
}

fn reserve(con: &mut redis::Connection, key: &str, capacity: u64) {
    con.ok(&cmd!(
        "BF.RESERVE",
        key,
        "0.01",
        capacity,
        "WINDOW",
        WINDOW,
        "SLICES",
        SLICES
    ));
}

fn exists(con: &mut redis::Connection, key: &str, item: &str) -> bool {
    con.q::<i64>(&cmd!("BF.EXISTS", key, item)) == 1
}

fn memory_usage(con: &mut redis::Connection, key: &str) -> i64 {
    con.q(&cmd!("MEMORY", "USAGE", key))
}

fn info_word(con: &mut redis::Connection, key: &str, word: &str) -> Value {
    match con.raw(&cmd!("BF.INFO", key, word)) {
        Value::Array(mut xs) if xs.len() == 1 => xs.remove(0),
        other => panic!("BF.INFO {key} {word} replied {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn slice_items(con: &mut redis::Connection, key: &str) -> Vec<i64> {
    match info_word(con, key, "SLICEITEMS") {
        Value::Array(xs) => xs.iter().map(int).collect(),
        other => panic!("SLICEITEMS replied {other:?}"),
    }
}

fn debug_lines(con: &mut redis::Connection, key: &str) -> Vec<String> {
    con.q(&cmd!("BF.DEBUG", key))
}

// ---------------------------------------------------------------- creation and options

#[test]
fn reserve_and_insert_create_windowed_filters_with_redisbloom_s_five_info_fields() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1000);
    assert_eq!(con.q::<String>(&cmd!("TYPE", "w")), "LBbloomW-");
    let info = bf_info(&mut con, "w");
    assert_eq!(info.capacity, 1000, "capacity is items per window");
    assert_eq!(info.filters, 0, "no slice until the first add");
    assert_eq!(info.items, 0);
    assert_eq!(info.expansion, Some(2));
    assert!(info.size > 0);
    assert_eq!(int(&info_word(&mut con, "w", "WINDOW")), WINDOW as i64);
    assert_eq!(int(&info_word(&mut con, "w", "SLICES")), SLICES as i64);
    assert_eq!(info_word(&mut con, "w", "OLDEST"), Value::Nil);
    // A second creation is refused as for any filter.
    assert_eq!(
        con.err_text(&cmd!("BF.RESERVE", "w", "0.01", 10, "WINDOW", 1000)),
        "ERR item exists"
    );
    // SLICES defaults to 4; BF.INSERT creates one with its items.
    con.ok(&cmd!("BF.RESERVE", "d", "0.01", 10, "WINDOW", 1000));
    assert_eq!(int(&info_word(&mut con, "d", "SLICES")), 4);
    let v: Vec<i64> = con.q(&cmd!(
        "BF.INSERT",
        "i",
        "CAPACITY",
        100,
        "WINDOW",
        9000,
        "SLICES",
        3,
        "ITEMS",
        "a",
        "b",
        "a"
    ));
    assert_eq!(v, [1, 1, 0]);
    assert_eq!(con.q::<String>(&cmd!("TYPE", "i")), "LBbloomW-");
    assert_eq!(int(&info_word(&mut con, "i", "WINDOW")), 9000);
    assert_eq!(int(&info_word(&mut con, "i", "SLICES")), 3);
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "i")), 2);
    // Creation options only matter for a missing key, as for the others.
    let v: Vec<i64> = con.q(&cmd!("BF.INSERT", "i", "WINDOW", 5, "ITEMS", "c"));
    assert_eq!(v, [1]);
    assert_eq!(int(&info_word(&mut con, "i", "WINDOW")), 9000);
    // A plain filter has no window: the window's words answer null.
    con.ok(&cmd!("BF.RESERVE", "plain", "0.01", 10));
    for word in ["WINDOW", "SLICES", "OLDEST", "SLICEITEMS"] {
        assert_eq!(info_word(&mut con, "plain", word), Value::Nil, "{word}");
    }
    assert_eq!(info_i64(&mut con, "bf", "bf_windowed_filters"), 3);
}

#[test]
fn window_options_are_refused_with_clear_errors() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    let reserve_errors: &[(&[&str], &str)] = &[
        (&["WINDOW"], "ERR no window"),
        (&["WINDOW", "x"], "ERR bad window"),
        (&["WINDOW", "1.5"], "ERR bad window"),
        (
            &["WINDOW", "0"],
            "ERR window must be in the range [1, 1000000000000] milliseconds",
        ),
        (
            &["WINDOW", "1000000000001"],
            "ERR window must be in the range [1, 1000000000000] milliseconds",
        ),
        (&["WINDOW", "10", "SLICES"], "ERR no slices"),
        (&["WINDOW", "10", "SLICES", "x"], "ERR bad slices"),
        (
            &["WINDOW", "10", "SLICES", "0"],
            "ERR slices must be in the range [1, 64]",
        ),
        (
            &["WINDOW", "100", "SLICES", "65"],
            "ERR slices must be in the range [1, 64]",
        ),
        (&["SLICES", "4"], "ERR SLICES needs WINDOW"),
        (
            &["WINDOW", "3", "SLICES", "4"],
            "ERR window must be at least one millisecond per slice",
        ),
        (&["WINDOW", "10", "FOO"], "ERR Unknown argument received"),
    ];
    for (options, want) in reserve_errors {
        let mut c = cmd!("BF.RESERVE", "k", "0.01", 100);
        for o in *options {
            c.arg(*o);
        }
        assert_eq!(con.err_text(&c), *want, "BF.RESERVE ... {options:?}");
    }
    let insert_errors: &[(&[&str], &str)] = &[
        (&["WINDOW", "x"], "Bad window"),
        (&["WINDOW", "0"], "Bad window"),
        (&["WINDOW", "10", "SLICES", "x"], "Bad slices"),
        (&["WINDOW", "10", "SLICES", "99"], "Bad slices"),
        (&["SLICES", "2"], "ERR SLICES needs WINDOW"),
        (
            &["WINDOW", "1", "SLICES", "2"],
            "ERR window must be at least one millisecond per slice",
        ),
    ];
    for (options, want) in insert_errors {
        let mut c = cmd!("BF.INSERT", "k");
        for o in *options {
            c.arg(*o);
        }
        c.arg("ITEMS").arg("a");
        assert_eq!(con.err_text(&c), *want, "BF.INSERT ... {options:?}");
    }
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "k")), 0, "nothing was created");
}

#[test]
fn a_release_build_has_no_test_clock() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    for name in ["bf.bf-test-clock-offset-ms", "bf-test-clock-offset-ms"] {
        let v: Vec<String> = con.q(&cmd!("CONFIG", "GET", name));
        assert!(v.is_empty(), "{name}: {v:?}");
        assert!(error_of(&con.raw(&cmd!("CONFIG", "SET", name, 1000))).is_some());
    }
    assert!(!s.log().contains("test build"));
}

// ---------------------------------------------------------------- the window

#[test]
fn an_item_answers_through_its_window_and_is_forgotten_one_slice_later() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1000);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "w", "a")), 1);
    advance(&mut con, SLICE);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "w", "b")), 1);
    // Slice 4 begins `WINDOW` after the add: "a" still answers, on reads and after writes.
    advance(&mut con, 3 * SLICE);
    assert!(exists(&mut con, "w", "a"));
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "w", "c")), 1);
    assert!(exists(&mut con, "w", "a"));
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MEXISTS", "w", "a", "b", "c", "x")),
        [1, 1, 1, 0]
    );
    // Adding an item that still answers is no news, but renews it.
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "w", "a")), 0);
    // One slice later the first add is forgotten, the others are not.
    advance(&mut con, SLICE);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MEXISTS", "w", "b", "c", "a")),
        [1, 1, 1],
        "a was renewed in slice 4"
    );
    advance(&mut con, SLICE);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MEXISTS", "w", "b", "c", "a")),
        [0, 1, 1]
    );
    advance(&mut con, 4 * SLICE);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MEXISTS", "w", "b", "c", "a")),
        [0, 0, 0]
    );
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "w")), 0);
}

#[test]
fn reads_answer_by_the_clock_and_writes_return_expired_memory_with_events() {
    require_own_server!();
    let s = builder().config("notify-keyspace-events", "gE").start();
    let mut con = s.conn();
    let mut ev = Events::subscribe(&s, "bf.*");
    reserve(&mut con, "w", 100_000);
    let empty = memory_usage(&mut con, "w");
    let mut add = cmd!("BF.MADD", "w");
    for i in 0..5000 {
        add.arg(format!("old-{i}"));
    }
    con.q::<Vec<i64>>(&add);
    advance(&mut con, SLICE);
    con.q::<i64>(&cmd!("BF.ADD", "w", "mid"));
    let two_slices = memory_usage(&mut con, "w");
    assert!(two_slices > empty + 20_000, "{two_slices} vs {empty}");
    assert_eq!(slice_items(&mut con, "w"), [0, 0, 0, 5000, 1]);
    ev.drain_names();
    // Both slices leave the window: a read answers without them but writes nothing.
    advance(&mut con, (SLICES + 1) * SLICE);
    assert!(!exists(&mut con, "w", "old-1"));
    assert!(!exists(&mut con, "w", "mid"));
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "w")), 0);
    assert_eq!(slice_items(&mut con, "w"), [0, 0, 0, 0, 0]);
    assert_eq!(
        memory_usage(&mut con, "w"),
        two_slices,
        "a read frees nothing"
    );
    assert!(debug_lines(&mut con, "w")[1].starts_with("slice:0 "));
    assert_eq!(ev.drain_names(), Vec::<String>::new());
    // The next write drops them, one bf.expire each, and makes one new slice.
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "w", "new")), 1);
    let one_slice = memory_usage(&mut con, "w");
    assert!(
        one_slice < two_slices - 10_000,
        "{one_slice} vs {two_slices}"
    );
    assert_eq!(ev.drain_names(), ["bf.expire", "bf.expire", "bf.add"]);
    assert_eq!(info_i64(&mut con, "bf", "bf_window_slices_expired"), 2);
    assert_eq!(slice_items(&mut con, "w"), [0, 0, 0, 0, 1]);
    // An idle filter forgets at once on BF.WINDOWADVANCE, which is idempotent.
    advance(&mut con, 10 * SLICE);
    assert_eq!(con.q::<i64>(&cmd!("BF.WINDOWADVANCE", "w")), 1);
    assert_eq!(con.q::<i64>(&cmd!("BF.WINDOWADVANCE", "w")), 0);
    assert_eq!(ev.drain_names(), ["bf.expire"]);
    assert_eq!(memory_usage(&mut con, "w"), empty);
    assert_eq!(bf_info(&mut con, "w").filters, 0);
}

#[test]
fn reads_of_an_expired_slice_write_nothing_so_they_run_in_pauses_and_read_only_scripts() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1000);
    con.q::<i64>(&cmd!("BF.ADD", "w", "a"));
    advance(&mut con, (SLICES + 1) * SLICE);
    let before = digest(&mut con, "w");
    // A read that replicated during CLIENT PAUSE WRITE would trip the server's assertion
    // that nothing propagates during a failover's pause.
    con.ok(&cmd!("CLIENT", "PAUSE", 10_000, "WRITE"));
    assert!(!exists(&mut con, "w", "a"));
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "w")), 0);
    assert_eq!(slice_items(&mut con, "w"), [0, 0, 0, 0, 0]);
    con.ok(&cmd!("CLIENT", "UNPAUSE"));
    let script = "return redis.call('BF.MEXISTS', KEYS[1], ARGV[1])";
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("EVAL_RO", script, 1, "w", "a")),
        [0]
    );
    assert_eq!(digest(&mut con, "w"), before, "no read changed the filter");
    common::assert_pong(&mut con);
}

#[test]
fn windowadvance_from_a_client_cannot_pass_the_clock() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1000);
    con.q::<i64>(&cmd!("BF.ADD", "w", "a"));
    assert_eq!(
        con.err_text(&cmd!("BF.WINDOWADVANCE", "w", 1)),
        "ERR the slice is later than the current one"
    );
    assert!(exists(&mut con, "w", "a"));
    advance(&mut con, 5 * SLICE);
    assert_eq!(con.q::<i64>(&cmd!("BF.WINDOWADVANCE", "w", 3)), 0);
    assert_eq!(con.q::<i64>(&cmd!("BF.WINDOWADVANCE", "w", 5)), 1);
    assert_eq!(
        con.q::<i64>(&cmd!("BF.WINDOWADVANCE", "w", 4)),
        0,
        "never back"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.WINDOWADVANCE", "w", -1)),
        "ERR bad slice"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.WINDOWADVANCE", "w", "x")),
        "ERR bad slice"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.WINDOWADVANCE", "none")),
        "ERR not found"
    );
    con.ok(&cmd!("BF.RESERVE", "plain", "0.01", 10));
    assert_eq!(
        con.err_text(&cmd!("BF.WINDOWADVANCE", "plain")),
        "ERR the filter has no window"
    );
    con.ok(&cmd!("SET", "str", "x"));
    assert_eq!(
        con.err_text(&cmd!("BF.WINDOWADVANCE", "str")),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn a_busier_slice_grows_and_a_nonscaling_one_refuses() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    // 8 items per window: 2 per slice.
    con.ok(&cmd!(
        "BF.RESERVE",
        "g",
        "0.01",
        8,
        "WINDOW",
        WINDOW,
        "SLICES",
        4
    ));
    con.ok(&cmd!(
        "BF.RESERVE",
        "n",
        "0.01",
        8,
        "NONSCALING",
        "WINDOW",
        WINDOW,
        "SLICES",
        4
    ));
    let mut grow = cmd!("BF.MADD", "g");
    let mut fixed = cmd!("BF.INSERT", "n", "ITEMS");
    for i in 0..50 {
        grow.arg(format!("i{i}"));
        fixed.arg(format!("i{i}"));
    }
    let added: Vec<i64> = con.q(&grow);
    assert_eq!(added.len(), 50);
    assert!(bf_info(&mut con, "g").filters > 1, "the head slice grew");
    for i in 0..50 {
        assert!(exists(&mut con, "g", &format!("i{i}")), "no false negative");
    }
    let Value::Array(replies) = con.raw(&fixed) else {
        panic!()
    };
    let last = replies.last().unwrap();
    assert_eq!(
        error_of(last).as_deref(),
        Some("ERR non scaling filter is full")
    );
    assert!(replies.len() < 50, "the refusal ends the command");
    assert_eq!(bf_info(&mut con, "n").filters, 1);
    assert_eq!(bf_info(&mut con, "n").expansion, None);
    // The next slice has room again.
    advance(&mut con, SLICE);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "n", "later")), 1);
}

/// Issue 23, item 5: a window is one filter, held to the 1024 layers one filter may have over
/// all its slices, refused as a plain filter's growth past the cap is. 64 slices of one-item
/// layers used to build 64 × 1024 layers, and every lookup probed them all.
#[test]
fn a_window_holds_at_most_the_layers_of_one_filter() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    let slices = 64u64;
    con.ok(&cmd!(
        "BF.RESERVE",
        "w",
        "0.01",
        slices,
        "EXPANSION",
        1,
        "WINDOW",
        slices * SLICE,
        "SLICES",
        slices
    ));
    let cap =
        "ERR problem inserting into filter: the filter has reached its maximum of 1024 layers";
    let mut refused = 0;
    for slice in 0..slices {
        let mut madd = cmd!("BF.MADD", "w");
        for i in 0..40 {
            madd.arg(format!("s{slice}:{i}"));
        }
        let Value::Array(replies) = con.raw(&madd) else {
            panic!("BF.MADD did not answer an array")
        };
        if let Some(e) = replies.last().and_then(error_of) {
            assert_eq!(e, cap, "slice {slice}");
            refused += 1;
        }
        let layers = bf_info(&mut con, "w").filters;
        assert!(layers <= 1024, "slice {slice}: {layers} layers");
        advance(&mut con, SLICE);
    }
    assert!(refused > 30, "{refused}");
    assert_eq!(bf_info(&mut con, "w").filters, 1024);
    assert!(exists(&mut con, "w", "s0:0"));
    assert_eq!(con.err_text(&cmd!("BF.ADD", "w", "fresh")), cap);
    // Its header is at the cap: a client may load it.
    let header = scandump(&mut con, "w")[0].1.clone();
    con.ok(&cmd!("BF.LOADCHUNK", "copy", 1, header.as_slice()));
    assert_eq!(bf_info(&mut con, "copy").filters, 1024);
}

/// Adds items to `key` one layer at a time (capacity 1, EXPANSION 1) until it holds `layers`.
fn grow_to_layers(con: &mut redis::Connection, key: &str, tag: &str, layers: i64) {
    let mut next = 0;
    while bf_info(con, key).filters < layers {
        let missing = layers - bf_info(con, key).filters;
        let mut madd = cmd!("BF.MADD", key);
        for i in next..next + missing {
            madd.arg(format!("{tag}:{i}"));
        }
        next += missing;
        let _: Value = con.raw(&madd);
    }
    assert_eq!(bf_info(con, key).filters, layers, "{key}");
}

/// Issue 23, items 2 and 5: a merge is held to the same cap. Two windows each within it,
/// whose long slices are different slices of the union, would build a union of more layers
/// than one filter may have: refused with the cap's error, nothing stored.
#[test]
fn a_merge_of_windows_holds_at_most_the_layers_of_one_filter() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    con.ok(&cmd!(
        "BF.RESERVE",
        "a",
        "0.01",
        1,
        "EXPANSION",
        1,
        "WINDOW",
        SLICES * SLICE,
        "SLICES",
        SLICES
    ));
    // One origin: copies of the empty window.
    for copy in ["b", "c"] {
        assert_eq!(con.q::<i64>(&cmd!("COPY", "a", copy)), 1);
    }
    grow_to_layers(&mut con, "a", "a", 600);
    advance(&mut con, SLICE);
    grow_to_layers(&mut con, "b", "b", 600);
    grow_to_layers(&mut con, "c", "c", 424);
    let cap =
        "ERR problem inserting into filter: the filter has reached its maximum of 1024 layers";
    assert_eq!(con.err_text(&cmd!("BF.MERGE", "u", "a", "b")), cap);
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "u")), 0);
    // At the cap exactly, taken; and b's slice meets c's in one.
    con.ok(&cmd!("BF.MERGE", "u", "a", "c"));
    assert_eq!(bf_info(&mut con, "u").filters, 1024);
    con.ok(&cmd!("BF.MERGE", "v", "b", "c"));
    assert_eq!(bf_info(&mut con, "v").filters, 600);
    for (key, item) in [("u", "a:0"), ("u", "c:0"), ("v", "b:0"), ("v", "c:0")] {
        assert!(exists(&mut con, key, item), "{key} {item}");
    }
}

// ---------------------------------------------------------------- every command

#[test]
fn every_bf_command_answers_on_a_windowed_key() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1000);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "w", "a")), 1);
    assert_eq!(con.q::<Vec<i64>>(&cmd!("BF.MADD", "w", "a", "b")), [0, 1]);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.INSERT", "w", "NOCREATE", "ITEMS", "c")),
        [1]
    );
    assert_eq!(con.q::<i64>(&cmd!("BF.EXISTS", "w", "c")), 1);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MEXISTS", "w", "a", "z")),
        [1, 0]
    );
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "w")), 3);
    let info = bf_info(&mut con, "w");
    assert_eq!((info.capacity, info.filters, info.items), (1000, 1, 3));
    assert_eq!(int(&info_word(&mut con, "w", "ITEMS")), 3);
    assert_eq!(int(&info_word(&mut con, "w", "CAPACITY")), 1000);
    assert_eq!(slice_items(&mut con, "w"), [0, 0, 0, 0, 3]);
    advance(&mut con, SLICE + 500);
    // The age counts the real milliseconds the test took too.
    let oldest = int(&info_word(&mut con, "w", "OLDEST"));
    assert!(
        (SLICE as i64 + 500..SLICE as i64 + 60_500).contains(&oldest),
        "{oldest}"
    );
    // The health figures, over the live slices.
    let Value::Array(health) = con.raw(&cmd!("BF.INFO", "w", "HEALTH")) else {
        panic!()
    };
    let names: Vec<String> = health.iter().step_by(2).filter_map(text_of).collect();
    assert_eq!(
        names,
        [
            "Error rate",
            "Fill ratio",
            "Estimated false positive rate",
            "Estimated distinct items",
            "Max capacity"
        ]
    );
    assert_eq!(text_of(&health[1]).as_deref(), Some("0.01"));
    assert!((2..=4).contains(&int(&health[7])), "{health:?}");
    let lines = debug_lines(&mut con, "w");
    assert!(
        lines[0].starts_with("size:3 window_ms:4000000 slices:4"),
        "{lines:?}"
    );
    assert!(lines[1].starts_with("slice:0 "), "{lines:?}");
    assert_eq!(
        con.err_text(&cmd!("BF.INFO", "w", "bogus")),
        "Invalid information value"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.INSERT", "missing", "NOCREATE", "ITEMS", "a")),
        "ERR not found"
    );
    // Another type's key is refused by every command.
    con.ok(&cmd!("SET", "str", "x"));
    assert_eq!(
        con.err_text(&cmd!("BF.RESERVE", "str", "0.01", 10, "WINDOW", 100)),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // SCANDUMP / LOADCHUNK copy the filter exactly.
    let chunks = scandump(&mut con, "w");
    for (it, data) in &chunks {
        con.ok(&cmd!("BF.LOADCHUNK", "copy", *it, data.as_slice()));
    }
    assert_eq!(digest(&mut con, "copy"), digest(&mut con, "w"));
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MEXISTS", "copy", "a", "b", "c")),
        [1, 1, 1]
    );
    assert_eq!(con.q::<String>(&cmd!("TYPE", "copy")), "LBbloomW-");
}

// ---------------------------------------------------------------- persistence and copies

/// A windowed filter with items in two slices, one of them expired by a write.
fn filter_with_history(con: &mut redis::Connection, key: &str) {
    reserve(con, key, 10_000);
    let mut add = cmd!("BF.MADD", key);
    for i in 0..300 {
        add.arg(format!("first-{i}"));
    }
    con.q::<Vec<i64>>(&add);
    advance(con, SLICE);
    con.q::<Vec<i64>>(&cmd!("BF.MADD", key, "second-1", "second-2"));
    advance(con, SLICES * SLICE);
    con.q::<i64>(&cmd!("BF.ADD", key, "third"));
}

/// The answers that tell the history apart: slice 0 gone, slices 1 and 5 live.
fn assert_history(con: &mut redis::Connection, key: &str) {
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MEXISTS", key, "first-7", "second-2", "third")),
        [0, 1, 1],
        "{key}"
    );
    let lines = debug_lines(con, key);
    assert!(lines[0].ends_with(" head:5"), "{key}: {lines:?}");
    assert!(lines[1].starts_with("slice:1 "), "{key}: {lines:?}");
}

#[test]
fn dump_restore_copy_and_debug_reload_keep_slices_ids_and_origin() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    filter_with_history(&mut con, "w");
    let want = digest(&mut con, "w");
    let dump: Vec<u8> = con.q(&cmd!("DUMP", "w"));
    con.ok(&cmd!("RESTORE", "restored", 0, dump.as_slice()));
    assert_eq!(con.q::<i64>(&cmd!("COPY", "w", "copied")), 1);
    for key in ["restored", "copied"] {
        assert_eq!(digest(&mut con, key), want, "{key}");
        assert_history(&mut con, key);
    }
    assert_eq!(info_i64(&mut con, "bf", "bf_windowed_filters"), 3);
    // The restored copy keeps expiring by the same origin: slice 1 leaves at slice 6.
    advance(&mut con, SLICE);
    con.q::<i64>(&cmd!("BF.ADD", "restored", "fourth"));
    assert!(!exists(&mut con, "restored", "second-1"));
    assert!(exists(&mut con, "restored", "third"));
    let restored = digest(&mut con, "restored");
    // Far past every slice: a loader that read the clock would drop them all.
    advance(&mut con, 100 * SLICE);
    con.ok(&cmd!("DEBUG", "RELOAD"));
    for (key, want) in [("w", &want), ("copied", &want), ("restored", &restored)] {
        assert_eq!(&digest(&mut con, key), want, "{key} after DEBUG RELOAD");
    }
    let lines = debug_lines(&mut con, "w");
    assert!(lines[0].ends_with(" head:5"), "{lines:?}");
    // The dataset DEBUG RELOAD replaced may be freed in the background (Valkey 9 does), so
    // its three filters leave the count a moment after the reload answers.
    common::wait_until(
        std::time::Duration::from_secs(10),
        "the replaced dataset's windowed filters to be freed",
        || info_i64(&mut con, "bf", "bf_windowed_filters") == 3,
    );
    // Lazy free takes the filter too.
    assert_eq!(con.q::<i64>(&cmd!("UNLINK", "w", "copied")), 2);
    assert_eq!(info_i64(&mut con, "bf", "bf_windowed_filters"), 1);
}

#[test]
fn a_client_restore_is_held_to_the_memory_limit() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1_000_000);
    con.q::<i64>(&cmd!("BF.ADD", "w", "a"));
    let size = bf_info(&mut con, "w").size;
    let dump: Vec<u8> = con.q(&cmd!("DUMP", "w"));
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        size / 2
    ));
    let e = con.err_text(&cmd!("RESTORE", "r", 0, dump.as_slice()));
    assert_eq!(e, "ERR Bad data format");
    assert!(s.log().contains("cannot load a windowed Bloom filter"));
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "r")), 0);
}

/// A DUMP payload of a windowed filter holding no slice: its header is the whole value.
fn empty_window_payload(header: &[u8]) -> Vec<u8> {
    let mut payload = Payload::new(1, vec![Field::Str(header.to_vec())]);
    payload.module_id = module_type_id(b"LBbloomW-", 1);
    payload.bytes()
}

/// The header of `key` (a windowed filter) with the u64 at `at` replaced.
fn patched_header(con: &mut redis::Connection, key: &str, at: usize, value: u64) -> Vec<u8> {
    let mut header = scandump(con, key).swap_remove(0).1;
    header[at..at + 8].copy_from_slice(&value.to_le_bytes());
    header
}

/// Offsets in the windowed header (the core's codec notes give the layout).
const VERSION_AT: usize = 8;
const WINDOW_AT: usize = 20;
const ORIGIN_AT: usize = 44;
const HEAD_AT: usize = 52;

#[test]
fn a_corrupt_restore_payload_reaches_the_module_and_is_refused() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1000);
    let header = scandump(&mut con, "w").swap_remove(0).1;
    // The payload as built here loads: the checksum and framing are right.
    con.ok(&cmd!(
        "RESTORE",
        "ok",
        0,
        empty_window_payload(&header).as_slice()
    ));
    assert_eq!(digest(&mut con, "ok"), digest(&mut con, "w"));
    let mut bad = header.clone();
    bad[VERSION_AT] ^= 0xff;
    let e = con.err_text(&cmd!(
        "RESTORE",
        "r",
        0,
        empty_window_payload(&bad).as_slice()
    ));
    assert_eq!(e, "ERR Bad data format");
    assert!(s.log().contains("unknown windowed header version"));
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "r")), 0);
}

#[test]
fn a_clients_header_that_would_never_forget_is_refused() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 1000);
    // The clock's slice is 0 (the filter was just made): a head up to a window on is what a
    // primary whose clock runs a little ahead sends.
    let ahead = patched_header(&mut con, "w", HEAD_AT, SLICES);
    let refused = [
        patched_header(&mut con, "w", HEAD_AT, SLICES + 1),
        patched_header(&mut con, "w", HEAD_AT, u64::MAX),
        patched_header(&mut con, "w", ORIGIN_AT, u64::MAX),
        patched_header(&mut con, "w", WINDOW_AT, 1_000_000_000_001),
        patched_header(&mut con, "w", WINDOW_AT, u64::MAX),
    ];
    for (i, header) in refused.iter().enumerate() {
        let e = con.err_text(&cmd!("BF.LOADCHUNK", "k", 1, header.as_slice()));
        assert_eq!(e, "ERR received bad data", "header {i}");
        let e = con.err_text(&cmd!(
            "RESTORE",
            "k",
            0,
            empty_window_payload(header).as_slice()
        ));
        assert_eq!(e, "ERR Bad data format", "payload {i}");
        assert_eq!(con.q::<i64>(&cmd!("EXISTS", "k")), 0, "header {i}");
    }
    con.ok(&cmd!("BF.LOADCHUNK", "ahead", 1, ahead.as_slice()));
    con.ok(&cmd!(
        "RESTORE",
        "ahead2",
        0,
        empty_window_payload(&ahead).as_slice()
    ));
}

#[test]
fn a_new_slice_over_the_memory_limit_is_refused_and_changes_nothing() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "w", 400_000);
    con.q::<i64>(&cmd!("BF.ADD", "w", "a"));
    let one_slice = bf_info(&mut con, "w").size;
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        one_slice + 1000
    ));
    advance(&mut con, SLICE);
    let e = con.err_text(&cmd!("BF.ADD", "w", "b"));
    assert!(
        e.starts_with("ERR problem inserting into filter") && e.contains("bf-max-filter-memory"),
        "{e}"
    );
    assert_eq!(bf_info(&mut con, "w").size, one_slice);
    assert!(!exists(&mut con, "w", "b"));
    assert!(exists(&mut con, "w", "a"));
    // Once the first slice has left the window there is room again.
    advance(&mut con, SLICES * SLICE);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "w", "b")), 1);
    assert!(!exists(&mut con, "w", "a"));
    // Creating a window whose first slice could never fit is refused.
    let e = con.err_text(&cmd!(
        "BF.RESERVE",
        "big",
        "0.0001",
        100_000_000,
        "WINDOW",
        1000
    ));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "{e}"
    );
    // Creation covers the steady window, slices + 1 slices: room for two slices refuses a
    // window of four, which would refuse adds at its planned load; room for six takes it,
    // and then every generation takes its add.
    let limit = |con: &mut redis::Connection, bytes: i64| {
        con.ok(&cmd!(
            "CONFIG",
            "SET",
            &setting("bf-max-filter-memory"),
            bytes
        ));
    };
    limit(&mut con, 2 * one_slice);
    let e = con.err_text(&cmd!(
        "BF.RESERVE",
        "steady",
        "0.01",
        400_000,
        "WINDOW",
        WINDOW,
        "SLICES",
        SLICES
    ));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "{e}"
    );
    limit(&mut con, 6 * one_slice);
    reserve(&mut con, "steady", 400_000);
    for slice in 0..=SLICES {
        if slice > 0 {
            advance(&mut con, SLICE);
        }
        assert_eq!(
            con.q::<i64>(&cmd!("BF.ADD", "steady", slice)),
            1,
            "slice {slice}"
        );
    }
    assert_eq!(slice_items(&mut con, "steady"), [1; SLICES as usize + 1]);
}

#[test]
fn an_aof_rewrite_replays_the_same_slices_ids_and_origin() {
    require_own_server!();
    for preamble in ["no", "yes"] {
        let mut s = builder()
            .config("appendonly", "yes")
            .config("aof-use-rdb-preamble", preamble)
            .start();
        let mut con = s.conn();
        filter_with_history(&mut con, "w");
        con.ok(&cmd!("BF.RESERVE", "empty", "0.01", 10, "WINDOW", 1000));
        let want = digest(&mut con, "w");
        let empty = digest(&mut con, "empty");
        con.q::<String>(&cmd!("BGREWRITEAOF"));
        wait_for_aof_rewrite(&mut con);
        restart_with_clock_far_ahead(&mut s, &mut con, Stop::Kill);
        let mut con = s.conn();
        assert_eq!(digest(&mut con, "w"), want, "preamble {preamble}");
        assert_eq!(digest(&mut con, "empty"), empty, "preamble {preamble}");
        let lines = debug_lines(&mut con, "w");
        assert!(
            lines[0].ends_with(" head:5"),
            "preamble {preamble}: {lines:?}"
        );
    }
}

// ---------------------------------------------------------------- replication

#[test]
fn a_replica_and_aof_replay_agree_with_the_primary_after_expiries() {
    require_own_server!();
    let mut p = builder()
        .config("repl-diskless-sync-delay", "0")
        .config("appendonly", "yes")
        .start();
    // Writable, so that a client's BF.WINDOWADVANCE reaches the module (not READONLY).
    let r = builder()
        .config("replica-read-only", "no")
        .replica_of(&p)
        .start();
    wait_for_link(&r);
    let mut pc = p.conn();
    let mut rc = r.conn();
    let sync = |pc: &mut redis::Connection| {
        assert_eq!(pc.q::<i64>(&cmd!("WAIT", 1, 5000)), 1, "WAIT 1 5000");
    };
    // The replica's clock moves too: it must not matter.
    advance(&mut rc, 100 * SLICE);
    reserve(&mut pc, "w", 10_000);
    con_madd(&mut pc, "w", &["a", "b"]);
    advance(&mut pc, SLICE);
    con_madd(&mut pc, "w", &["c"]);
    // "b" is renewed into slice 1: no news to the client (0), a change to replicate.
    assert_eq!(pc.q::<i64>(&cmd!("BF.ADD", "w", "b")), 0);
    assert_eq!(pc.q::<Vec<i64>>(&cmd!("BF.MADD", "w", "b", "e")), [0, 1]);
    sync(&mut pc);
    assert_eq!(digest(&mut rc, "w"), digest(&mut pc, "w"));
    // Slice 0 leaves the primary's window. Until the primary writes the key, the replica
    // still holds slice 0 and answers from it; the primary answers by its clock.
    advance(&mut pc, SLICES * SLICE);
    assert!(!exists(&mut pc, "w", "a"));
    assert!(
        exists(&mut rc, "w", "a"),
        "the replica holds what the primary holds"
    );
    assert_eq!(rc.q::<i64>(&cmd!("BF.CARD", "w")), 5);
    assert_eq!(pc.q::<i64>(&cmd!("BF.CARD", "w")), 3);
    // The primary's next write expires slice 0 and replicates that first.
    con_madd(&mut pc, "w", &["d"]);
    sync(&mut pc);
    assert!(!exists(&mut rc, "w", "a"));
    assert!(exists(&mut rc, "w", "c") && exists(&mut rc, "w", "d"));
    assert!(exists(&mut rc, "w", "b"), "renewed on the replica too");
    assert_eq!(digest(&mut rc, "w"), digest(&mut pc, "w"));
    // An idle filter expires on the primary's BF.WINDOWADVANCE, replicated as it.
    advance(&mut pc, 10 * SLICE);
    assert_eq!(pc.q::<i64>(&cmd!("BF.WINDOWADVANCE", "w")), 2);
    sync(&mut pc);
    assert!(!exists(&mut rc, "w", "c"));
    assert_eq!(digest(&mut rc, "w"), digest(&mut pc, "w"));
    // A replica refuses an advance without a slice: it has no clock of its own to use.
    assert_eq!(
        rc.err_text(&cmd!("BF.WINDOWADVANCE", "w")),
        "ERR without a clock (a replica, AOF replay) BF.WINDOWADVANCE needs a slice"
    );
    // The AOF replays the same history, without a clock: the restarted server's runs far
    // ahead, which a replay that read it would show. A shutdown, not a kill: with
    // `appendfsync everysec` the last write may not have reached the file yet.
    con_madd(&mut pc, "w", &["e"]);
    let want = digest(&mut pc, "w");
    restart_with_clock_far_ahead(&mut p, &mut pc, Stop::NoSave);
    let mut pc = p.conn();
    assert_eq!(digest(&mut pc, "w"), want, "after AOF replay");
}

/// Stops `s` as asked and starts it again with its clock 100 windows past where it was.
fn restart_with_clock_far_ahead(s: &mut Server, con: &mut redis::Connection, how: Stop) {
    let name = clock_setting(con);
    let v: Vec<String> = con.q(&cmd!("CONFIG", "GET", name));
    let now: u64 = v[1].parse().unwrap();
    s.config_on_restart(name, &(now + 100 * WINDOW).to_string());
    s.restart(how);
}

fn con_madd(con: &mut redis::Connection, key: &str, items: &[&str]) {
    let mut c = cmd!("BF.MADD", key);
    for i in items {
        c.arg(*i);
    }
    con.q::<Vec<i64>>(&c);
}

// ---------------------------------------------------------------- BF.MERGE

fn madd_tagged(con: &mut redis::Connection, key: &str, tag: &str, n: usize) -> Vec<String> {
    let items: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
    let strs: Vec<&str> = items.iter().map(String::as_str).collect();
    con_madd(con, key, &strs);
    items
}

fn count_present(con: &mut redis::Connection, key: &str, items: &[String]) -> usize {
    let mut c = cmd!("BF.MEXISTS", key);
    for i in items {
        c.arg(i.as_str());
    }
    con.q::<Vec<i64>>(&c).iter().filter(|&&f| f == 1).count()
}

/// Two windows of one spec and origin (`b` a copy of `a` made empty), with items in several
/// slices: `a` in slices 0 and 1, `b` in slices 1 and 4. The clock is left in slice 5, where
/// `a`'s slice 0 has expired but is still held. Returns the items of the live slices (a's and
/// b's of slice 1, then b's of slice 4), and those of the expired one.
fn two_windows(con: &mut redis::Connection) -> (Vec<String>, Vec<String>) {
    reserve(con, "a", 4000);
    assert_eq!(con.q::<i64>(&cmd!("COPY", "a", "b")), 1);
    let expired = madd_tagged(con, "a", "a0", 300);
    advance(con, SLICE);
    let mut live = madd_tagged(con, "a", "a1", 300);
    live.extend(madd_tagged(con, "b", "b1", 300));
    advance(con, 3 * SLICE);
    live.extend(madd_tagged(con, "b", "b4", 1500));
    advance(con, SLICE);
    (live, expired)
}

#[test]
fn merging_windows_keeps_every_live_item_and_no_expired_slice() {
    require_own_server!();
    let s = builder().config("notify-keyspace-events", "gE").start();
    let mut con = s.conn();
    let mut ev = Events::subscribe(&s, "bf.*");
    let (live, expired) = two_windows(&mut con);
    ev.drain_names();
    con.ok(&cmd!("BF.MERGE", "u", "a", "b"));
    assert_eq!(con.q::<String>(&cmd!("TYPE", "u")), "LBbloomW-");
    assert_eq!(
        count_present(&mut con, "u", &live),
        live.len(),
        "a false negative"
    );
    assert!(
        count_present(&mut con, "u", &expired) < 10,
        "an expired slice came back"
    );
    // The sources were advanced first (a dropped its slice 0: one bf.expire), then merged.
    assert_eq!(ev.drain_names(), ["bf.expire", "bf.merge"]);
    assert!(debug_lines(&mut con, "a")[0].ends_with(" head:5"));
    assert!(debug_lines(&mut con, "a")[1].starts_with("slice:1 "));
    assert_eq!(
        count_present(&mut con, "a", &live[..300]),
        300,
        "a kept its items"
    );
    // The union's slices: the window's 1 (a's and b's) and 4 (b's); it expires as they do.
    let lines = debug_lines(&mut con, "u");
    let slices: Vec<&String> = lines.iter().filter(|l| l.starts_with("slice:")).collect();
    assert_eq!(slices.len(), 2, "{lines:?}");
    // Slice 1's count is the estimate of a union (600 distinct items), slice 4's b's own.
    let counts = slice_items(&mut con, "u");
    assert!((580..=600).contains(&counts[0]), "{counts:?}");
    assert_eq!(counts[1..], [0, 0, slice_items(&mut con, "b")[3], 0]);
    let (ua, ub, uu) = (
        memory_usage(&mut con, "a"),
        memory_usage(&mut con, "b"),
        memory_usage(&mut con, "u"),
    );
    assert!(ua.max(ub) <= uu && uu <= ua + ub, "{ua} {ub} {uu}");
    // It survives a reload exactly.
    let want = digest(&mut con, "u");
    con.ok(&cmd!("DEBUG", "RELOAD"));
    assert_eq!(digest(&mut con, "u"), want);
    advance(&mut con, SLICE);
    assert!(
        count_present(&mut con, "u", &live[..600]) < 10,
        "slice 1 left the window"
    );
    assert_eq!(count_present(&mut con, "u", &live[600..]), 1500);
    // The destination may be a source; merging a window with itself changes nothing but
    // what it would expire anyway.
    assert_eq!(con.q::<i64>(&cmd!("BF.WINDOWADVANCE", "b")), 1);
    let before = digest(&mut con, "b");
    con.ok(&cmd!("BF.MERGE", "b", "b"));
    assert_eq!(digest(&mut con, "b"), before);
    // a's only slice has left the window: it adds nothing.
    let card: i64 = con.q(&cmd!("BF.CARD", "b"));
    con.ok(&cmd!("BF.MERGE", "b", "a", "b"));
    assert_eq!(count_present(&mut con, "b", &live[600..]), 1500);
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "b")), card);
    assert_eq!(digest(&mut con, "b"), before);
    // A destination of the other kind is replaced, as any filter.
    con.ok(&cmd!("BF.RESERVE", "plain", "0.01", 100));
    con.ok(&cmd!("BF.MERGE", "plain", "u"));
    assert_eq!(con.q::<String>(&cmd!("TYPE", "plain")), "LBbloomW-");
    assert_eq!(digest(&mut con, "plain"), digest(&mut con, "u"));
    con.ok(&cmd!("BF.RESERVE", "p2", "0.01", 100));
    con.ok(&cmd!("BF.MERGE", "u", "p2"));
    assert_eq!(con.q::<String>(&cmd!("TYPE", "u")), "MBbloom--");
    assert_eq!(info_i64(&mut con, "bf", "bf_windowed_filters"), 3);
}

#[test]
fn refused_window_merges_create_and_change_nothing() {
    require_own_server!();
    let s = server();
    let mut con = s.conn();
    reserve(&mut con, "a", 200_000);
    con_madd(&mut con, "a", &["x"]);
    con.ok(&cmd!("BF.RESERVE", "plain", "0.01", 1000));
    con.ok(&cmd!(
        "BF.RESERVE",
        "long",
        "0.01",
        200_000,
        "WINDOW",
        2 * WINDOW,
        "SLICES",
        4
    ));
    con.ok(&cmd!(
        "BF.RESERVE",
        "few",
        "0.01",
        200_000,
        "WINDOW",
        WINDOW,
        "SLICES",
        2
    ));
    con.ok(&cmd!(
        "BF.RESERVE",
        "rate",
        "0.001",
        200_000,
        "WINDOW",
        WINDOW,
        "SLICES",
        4
    ));
    // Half a slice later: boundaries that cannot line up.
    advance(&mut con, SLICE / 2);
    reserve(&mut con, "off", 200_000);
    reserve(&mut con, "dest", 200_000);
    con_madd(&mut con, "dest", &["d"]);
    // Every source is due for an advance: a refusal must not make it. `off` gets a live
    // slice, too large for the limit below.
    advance(&mut con, 5 * SLICE);
    con_madd(&mut con, "off", &["y"]);
    let watched = ["a", "dest", "off"];
    let before: Vec<String> = watched.iter().map(|k| digest(&mut con, k)).collect();
    let cases: &[(&[&str], &str)] = &[
        (
            &["a", "plain"],
            "ERR incompatible filters: source 2 has no window, source 1 has a window of \
             4000000 ms",
        ),
        (
            &["plain", "a"],
            "ERR incompatible filters: source 2 has a window of 4000000 ms, source 1 has none",
        ),
        (
            &["a", "a", "long"],
            "ERR incompatible filters: source 3 has a window of 8000000 ms, source 1 of \
             4000000 ms",
        ),
        (
            &["a", "few"],
            "ERR incompatible filters: source 2 has 2 slices, source 1 has 4 slices",
        ),
        (
            &["a", "rate"],
            "ERR incompatible filters: source 2 has error rate 0.001, source 1 has error rate \
             0.01",
        ),
        (&["a", "missing"], "ERR not found"),
    ];
    for (sources, error) in cases {
        for dest in ["dest", "new"] {
            let mut c = cmd!("BF.MERGE", dest);
            for src in *sources {
                c.arg(*src);
            }
            assert_eq!(con.err_text(&c), *error, "BF.MERGE {dest} {sources:?}");
        }
    }
    let e = con.err_text(&cmd!("BF.MERGE", "new", "a", "off"));
    assert!(
        e.starts_with(
            "ERR incompatible filters: the slices of source 2 do not line up with those of \
             source 1: their windows began "
        ) && e.ends_with(" ms apart, not a whole number of slices of 1000000 ms"),
        "{e}"
    );
    // Over the per-filter limit.
    let size = bf_info(&mut con, "off").size;
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        size / 2
    ));
    let e = con.err_text(&cmd!("BF.MERGE", "new", "off"));
    assert!(
        e.starts_with("ERR the merged filter would need ") && e.contains("bf-max-filter-memory"),
        "{e}"
    );
    assert_eq!(con.err_text(&cmd!("BF.MERGE", "dest", "off")), e);
    let after: Vec<String> = watched.iter().map(|k| digest(&mut con, k)).collect();
    assert_eq!(after, before, "a refused merge changed a key");
    assert!(
        debug_lines(&mut con, "a")[0].ends_with(" head:0"),
        "not advanced"
    );
    assert_eq!(
        con.q::<i64>(&cmd!("EXISTS", "new")),
        0,
        "a refused merge created its key"
    );
}

#[test]
fn a_replica_and_an_aof_replay_merge_the_same_slices_after_expiries() {
    require_own_server!();
    let mut p = builder()
        .config("repl-diskless-sync-delay", "0")
        .config("appendonly", "yes")
        // Written before each reply: the SIGKILL below must not race an everysec write that
        // Redis postpones while a background fsync runs.
        .config("appendfsync", "always")
        .config("aof-use-rdb-preamble", "no")
        .start();
    let r = builder().replica_of(&p).start();
    wait_for_link(&r);
    let mut pc = p.conn();
    let mut rc = r.conn();
    wait_for_aof_rewrite(&mut pc);
    // The replica's clock is far ahead: it must not matter.
    advance(&mut rc, 100 * SLICE);
    let (live, _) = two_windows(&mut pc);
    // The merge needs a's slice 0 expired first; the destination is also a source.
    pc.ok(&cmd!("BF.MERGE", "u", "a", "b"));
    advance(&mut pc, SLICE);
    pc.ok(&cmd!("BF.MERGE", "b", "b", "a"));
    assert_eq!(count_present(&mut pc, "b", &live[600..]), 1500);
    assert_eq!(pc.q::<i64>(&cmd!("WAIT", 1, 5000)), 1);
    let keys = ["a", "b", "u"];
    let want: Vec<String> = keys.iter().map(|k| digest(&mut pc, k)).collect();
    let got: Vec<String> = keys.iter().map(|k| digest(&mut rc, k)).collect();
    assert_eq!(got, want, "the replica");
    assert_eq!(count_present(&mut rc, "u", &live), live.len());
    let dataset: String = pc.q(&cmd!("DEBUG", "DIGEST"));
    p.restart(Stop::Kill);
    let mut pc = p.conn();
    let replayed: Vec<String> = keys.iter().map(|k| digest(&mut pc, k)).collect();
    assert_eq!(replayed, want, "after AOF replay");
    assert_eq!(pc.q::<String>(&cmd!("DEBUG", "DIGEST")), dataset);
}

//! The BF.* commands through a real client against a real redis-server: replies, options,
//! every documented error text, RESP2 and RESP3, module settings and the memory limit.
//! The behaviour is REDISBLOOM_COMPAT.md plus layerbloom's documented decisions.

use crate::common;
use crate::table;
use common::setting;

use common::{
    bf_info, config_get, digest, error_of, items, key_exists, loadchunks, madd, mexists, scandump,
    text_of, BfInfo, Exec, Server,
};
use redis::Value;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const FULL: &str = "ERR non scaling filter is full";

/// Redis names the command as the module registered it: upper case, as RedisBloom does.
/// Redis's wrong-arity error names the command as registered: in lower case, as RedisBloom
/// registers it.
fn arity(cmd: &str) -> String {
    format!(
        "ERR wrong number of arguments for '{}' command",
        cmd.to_ascii_lowercase()
    )
}

fn int_array(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(xs) => xs
            .iter()
            .map(|x| match x {
                Value::Int(n) => *n,
                other => panic!("expected an integer in {v:?}, got {other:?}"),
            })
            .collect(),
        _ => panic!("expected an array, got {v:?}"),
    }
}

// ---------------------------------------------------------------- module and type

#[test]
fn module_list_shows_a_module_named_bf() {
    let s = Server::start();
    let mut con = s.conn();
    let v = con.raw(&cmd!("MODULE", "LIST"));
    let Value::Array(modules) = &v else {
        panic!("MODULE LIST replied {v:?}")
    };
    let names: Vec<String> = modules
        .iter()
        .filter_map(|m| match m {
            Value::Array(fields) => fields
                .chunks(2)
                .find(|p| text_of(&p[0]).as_deref() == Some("name"))
                .and_then(|p| text_of(&p[1])),
            _ => None,
        })
        .collect();
    assert!(
        names.iter().any(|n| n == "bf"),
        "no module named bf in {names:?}"
    );
}

#[test]
fn filter_key_has_redis_type_mbbloom() {
    let s = Server::start();
    let ks = s.keys("filter_key_has_redis_type_mbbloom");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", ks.k("r"), "0.01", 100));
    con.q::<i64>(&cmd!("BF.ADD", ks.k("a"), "x"));
    for k in [ks.k("r"), ks.k("a")] {
        let t = con.raw(&cmd!("TYPE", &k));
        assert_eq!(text_of(&t).as_deref(), Some("MBbloom--"), "TYPE {k}");
    }
}

// ---------------------------------------------------------------- arity

#[test]
fn wrong_arity_gives_the_standard_redis_error_and_creates_nothing() {
    let s = Server::start();
    let ks = s.keys("wrong_arity_gives_the_standard_redis_error");
    let k = ks.k("k");
    let mut con = s.conn();
    let cases: Vec<(&str, redis::Cmd)> = vec![
        ("bf.reserve", cmd!("BF.RESERVE", &k, "0.01")),
        (
            "bf.reserve",
            cmd!(
                "BF.RESERVE",
                &k,
                "0.01",
                100,
                "EXPANSION",
                2,
                "NONSCALING",
                "x"
            ),
        ),
        ("bf.add", cmd!("BF.ADD", &k)),
        ("bf.add", cmd!("BF.ADD", &k, "a", "b")),
        ("bf.madd", cmd!("BF.MADD", &k)),
        ("bf.insert", cmd!("BF.INSERT", &k, "ITEMS")),
        ("bf.exists", cmd!("BF.EXISTS", &k)),
        ("bf.exists", cmd!("BF.EXISTS", &k, "a", "b")),
        ("bf.mexists", cmd!("BF.MEXISTS", &k)),
        ("bf.info", cmd!("BF.INFO")),
        ("bf.info", cmd!("BF.INFO", &k, "ITEMS", "x")),
        ("bf.card", cmd!("BF.CARD")),
        ("bf.card", cmd!("BF.CARD", &k, "x")),
        ("bf.scandump", cmd!("BF.SCANDUMP", &k)),
        ("bf.scandump", cmd!("BF.SCANDUMP", &k, 0, "x")),
        ("bf.loadchunk", cmd!("BF.LOADCHUNK", &k, 1)),
        ("bf.loadchunk", cmd!("BF.LOADCHUNK", &k, 1, "d", "x")),
    ];
    for (name, c) in &cases {
        assert_eq!(con.err_text(c), arity(name), "{}", common::show(c));
        assert!(
            !key_exists(&mut con, &k),
            "{} created the key",
            common::show(c)
        );
    }
}

/// A call of `name` with `count` arguments in all (the name included): the key, then fillers.
fn call_with(name: &str, key: &str, count: usize) -> redis::Cmd {
    let mut c = redis::cmd(name);
    for i in 1..count {
        if i == 1 {
            c.arg(key);
        } else {
            c.arg("x");
        }
    }
    c
}

#[test]
fn every_command_refuses_one_argument_too_few_or_too_many_as_its_table_says() {
    let s = Server::start();
    let ks = s.keys("every_command_refuses_one_argument_too_few_or_too_many");
    let mut con = s.conn();
    for spec in table::commands() {
        let name = spec.name.to_ascii_uppercase();
        let k = ks.k(spec.name);
        let mut wrong = vec![spec.arity.min() - 1];
        wrong.extend(spec.arity.max().map(|m| m + 1));
        for count in wrong {
            let c = call_with(&name, &k, count);
            assert_eq!(con.err_text(&c), arity(spec.name), "{}", common::show(&c));
            assert!(
                !key_exists(&mut con, &k),
                "{} created the key",
                common::show(&c)
            );
        }
        // The counts at the ends are not refused for their count (the fillers may be bad
        // arguments all the same).
        let mut right = vec![spec.arity.min()];
        right.extend(spec.arity.max());
        for count in right {
            // BF.RESERVE takes more than RedisBloom's 7 arguments only with WINDOW / SLICES.
            let c = if spec.name == "bf.reserve" && count > 7 {
                let mut c = call_with(&name, &k, count - 1);
                c.arg("WINDOW");
                c
            } else {
                call_with(&name, &k, count)
            };
            let v = con.raw(&c);
            assert_ne!(error_of(&v), Some(arity(spec.name)), "{}", common::show(&c));
        }
    }
}

// ---------------------------------------------------------------- BF.RESERVE

#[test]
fn reserve_creates_an_empty_scaling_filter_with_the_given_capacity() {
    let s = Server::start();
    let ks = s.keys("reserve_creates_an_empty_scaling_filter");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 1000));
    let info = bf_info(&mut con, &k);
    assert_eq!(info.capacity, 1000);
    assert_eq!(info.filters, 1);
    assert_eq!(info.items, 0);
    assert_eq!(info.expansion, Some(2));
    assert!(info.size > 0, "size {}", info.size);
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", &k)), 0);
}

#[test]
fn reserve_checks_the_error_rate_first() {
    let s = Server::start();
    let ks = s.keys("reserve_checks_the_error_rate_first");
    let k = ks.k("k");
    let mut con = s.conn();
    let range = "ERR error rate must be in the range (0.000000, 1.000000)";
    for (args, want) in [
        (vec!["abc", "100"], "ERR bad error rate"),
        (vec!["abc", "abc"], "ERR bad error rate"),
        (vec!["", "100"], "ERR bad error rate"),
        (vec!["0.01x", "100"], "ERR bad error rate"),
        (vec!["0", "100"], range),
        (vec!["1", "100"], range),
        (vec!["-0.5", "100"], range),
        (vec!["1.5", "100"], range),
        (vec!["0", "abc"], range),
        (vec!["2", "0", "EXPANSION"], range),
    ] {
        let c = cmd!("BF.RESERVE", &k, &args);
        assert_eq!(con.err_text(&c), want, "{}", common::show(&c));
        assert!(!key_exists(&mut con, &k));
    }
}

#[test]
fn reserve_checks_the_capacity_after_the_error_rate() {
    let s = Server::start();
    let ks = s.keys("reserve_checks_the_capacity");
    let k = ks.k("k");
    let mut con = s.conn();
    let range = "ERR capacity must be in the range [1, 1073741824]";
    for (args, want) in [
        (vec!["0.01", "abc"], "ERR bad capacity"),
        (vec!["0.01", "1.5"], "ERR bad capacity"),
        (vec!["0.01", ""], "ERR bad capacity"),
        (vec!["0.01", "abc", "EXPANSION", "x"], "ERR bad capacity"),
        (vec!["0.01", "0"], range),
        (vec!["0.01", "-1"], range),
        (vec!["0.01", "1073741825"], range),
        (vec!["0.01", "0", "FOO"], range),
    ] {
        let c = cmd!("BF.RESERVE", &k, &args);
        assert_eq!(con.err_text(&c), want, "{}", common::show(&c));
        assert!(!key_exists(&mut con, &k));
    }
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 1));
    assert_eq!(bf_info(&mut con, &k).capacity, 1);
}

#[test]
fn reserve_caps_an_error_rate_above_a_quarter() {
    let s = Server::start();
    let ks = s.keys("reserve_caps_an_error_rate_above_a_quarter");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", ks.k("half"), "0.5", 1000));
    con.ok(&cmd!("BF.RESERVE", ks.k("almost1"), "0.999", 1000));
    con.ok(&cmd!("BF.RESERVE", ks.k("quarter"), "0.25", 1000));
    con.ok(&cmd!("BF.RESERVE", ks.k("tenth"), "0.1", 1000));
    let quarter = bf_info(&mut con, &ks.k("quarter"));
    assert_eq!(bf_info(&mut con, &ks.k("half")), quarter);
    assert_eq!(bf_info(&mut con, &ks.k("almost1")), quarter);
    // The cap is real: a lower rate needs more memory.
    assert!(bf_info(&mut con, &ks.k("tenth")).size > quarter.size);
}

#[test]
fn an_error_rate_above_a_quarter_logs_a_warning() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    // Warning-level lines from a module: `<bf>`, or `<module>` when logged without a context.
    let module_warnings = |log: &str| {
        log.lines()
            .filter(|l| l.contains(" # <bf> ") || l.contains(" # <module> "))
            .count()
    };
    let before = module_warnings(&s.log());
    con.ok(&cmd!("BF.RESERVE", "k", "0.5", 100));
    let after_reserve = module_warnings(&s.log());
    assert!(
        after_reserve > before,
        "no warning in the log after BF.RESERVE k 0.5 100:\n{}",
        s.log()
    );
    con.q::<Vec<i64>>(&cmd!("BF.INSERT", "k2", "ERROR", "0.9", "ITEMS", "a"));
    assert!(module_warnings(&s.log()) > after_reserve);
}

#[test]
fn reserve_expansion_option_errors() {
    let s = Server::start();
    let ks = s.keys("reserve_expansion_option_errors");
    let k = ks.k("k");
    let mut con = s.conn();
    let range = "ERR expansion must be in the range [0, 32768]";
    for (opts, want) in [
        (vec!["EXPANSION"], "ERR no expansion"),
        (vec!["NONSCALING", "EXPANSION"], "ERR no expansion"),
        (vec!["EXPANSION", "abc"], "ERR bad expansion"),
        (vec!["EXPANSION", "1.5"], "ERR bad expansion"),
        (vec!["EXPANSION", "32769"], range),
        (vec!["EXPANSION", "-1"], range),
        (
            vec!["EXPANSION", "2", "NONSCALING"],
            "Nonscaling filters cannot expand",
        ),
        (
            vec!["NONSCALING", "EXPANSION", "2"],
            "Nonscaling filters cannot expand",
        ),
    ] {
        let c = cmd!("BF.RESERVE", &k, "0.01", 100, &opts);
        assert_eq!(con.err_text(&c), want, "{}", common::show(&c));
        assert!(
            !key_exists(&mut con, &k),
            "{} created the key",
            common::show(&c)
        );
    }
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 100, "EXPANSION", 32768));
    assert_eq!(bf_info(&mut con, &k).expansion, Some(32768));
}

#[test]
fn reserve_expansion_zero_makes_a_nonscaling_filter() {
    let s = Server::start();
    let ks = s.keys("reserve_expansion_zero_makes_a_nonscaling_filter");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", ks.k("e0"), "0.01", 2, "EXPANSION", 0));
    con.ok(&cmd!(
        "BF.RESERVE",
        ks.k("ns_e0"),
        "0.01",
        2,
        "NONSCALING",
        "EXPANSION",
        0
    ));
    con.ok(&cmd!("BF.RESERVE", ks.k("ns"), "0.01", 2, "NONSCALING"));
    for k in [ks.k("e0"), ks.k("ns_e0"), ks.k("ns")] {
        assert_eq!(bf_info(&mut con, &k).expansion, None, "{k}");
        assert_eq!(con.q::<i64>(&cmd!("BF.ADD", &k, "a")), 1);
        assert_eq!(con.q::<i64>(&cmd!("BF.ADD", &k, "b")), 1);
        assert_eq!(con.err_text(&cmd!("BF.ADD", &k, "c")), FULL, "{k}");
        let info = bf_info(&mut con, &k);
        assert_eq!((info.filters, info.items, info.capacity), (1, 2, 2), "{k}");
    }
    // A non-scaling layer gets the full error rate, a scaling one half of it: the scaling
    // filter of the same capacity needs at least as much memory.
    con.ok(&cmd!("BF.RESERVE", ks.k("scaling"), "0.01", 100_000));
    con.ok(&cmd!(
        "BF.RESERVE",
        ks.k("flat"),
        "0.01",
        100_000,
        "NONSCALING"
    ));
    assert!(bf_info(&mut con, &ks.k("scaling")).size > bf_info(&mut con, &ks.k("flat")).size);
}

#[test]
fn reserve_refuses_an_unknown_argument() {
    let s = Server::start();
    let ks = s.keys("reserve_refuses_an_unknown_argument");
    let k = ks.k("k");
    let mut con = s.conn();
    for opts in [
        vec!["NONSCALNG"],
        vec!["EXPANSION", "2", "FOO"],
        vec!["ITEMS"],
        vec!["NONSCALING", "NONSCALING", "X"],
    ] {
        let c = cmd!("BF.RESERVE", &k, "0.01", 100, &opts);
        assert_eq!(
            con.err_text(&c),
            "ERR Unknown argument received",
            "{}",
            common::show(&c)
        );
        assert!(!key_exists(&mut con, &k));
    }
}

#[test]
fn reserve_refuses_an_existing_key_and_leaves_it_unchanged() {
    let s = Server::start();
    let ks = s.keys("reserve_refuses_an_existing_key");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 100));
    con.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b", "c"));
    let before = bf_info(&mut con, &k);
    let d = digest(&mut con, &k);
    assert_eq!(
        con.err_text(&cmd!("BF.RESERVE", &k, "0.001", 5000)),
        "ERR item exists"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.RESERVE", &k, "0.001", 5000, "NONSCALING")),
        "ERR item exists"
    );
    assert_eq!(bf_info(&mut con, &k), before);
    assert_eq!(digest(&mut con, &k), d);
}

#[test]
fn reserve_option_words_are_case_insensitive() {
    let s = Server::start();
    let ks = s.keys("reserve_option_words_are_case_insensitive");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", ks.k("a"), "0.01", 100, "expansion", 3));
    con.ok(&cmd!("BF.RESERVE", ks.k("b"), "0.01", 100, "ExPaNsIoN", 5));
    con.ok(&cmd!("BF.RESERVE", ks.k("c"), "0.01", 100, "nonscaling"));
    con.ok(&cmd!("BF.RESERVE", ks.k("d"), "0.01", 100, "NonScaling"));
    con.ok(&cmd!("bf.reserve", ks.k("e"), "0.01", 100));
    assert_eq!(bf_info(&mut con, &ks.k("a")).expansion, Some(3));
    assert_eq!(bf_info(&mut con, &ks.k("b")).expansion, Some(5));
    assert_eq!(bf_info(&mut con, &ks.k("c")).expansion, None);
    assert_eq!(bf_info(&mut con, &ks.k("d")).expansion, None);
    assert_eq!(bf_info(&mut con, &ks.k("e")).expansion, Some(2));
}

#[test]
fn reserve_on_a_string_key_is_wrongtype() {
    let s = Server::start();
    let ks = s.keys("reserve_on_a_string_key_is_wrongtype");
    let k = ks.k("s");
    let mut con = s.conn();
    con.ok(&cmd!("SET", &k, "v"));
    assert_eq!(
        con.err_text(&cmd!("BF.RESERVE", &k, "0.01", 100)),
        WRONGTYPE
    );
    assert_eq!(con.q::<String>(&cmd!("GET", &k)), "v");
}

// ---------------------------------------------------------------- BF.ADD / MADD / EXISTS

#[test]
fn add_reports_a_new_item_then_a_known_one() {
    let s = Server::start();
    let ks = s.keys("add_reports_a_new_item_then_a_known_one");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.0001", 1000));
    assert_eq!(con.raw(&cmd!("BF.ADD", &k, "apple")), Value::Int(1));
    assert_eq!(con.raw(&cmd!("BF.ADD", &k, "apple")), Value::Int(0));
    assert_eq!(con.raw(&cmd!("BF.EXISTS", &k, "apple")), Value::Int(1));
    assert_eq!(con.raw(&cmd!("BF.EXISTS", &k, "pear")), Value::Int(0));
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", &k)), 1);
    assert_eq!(bf_info(&mut con, &k).items, 1);
}

#[test]
fn add_on_a_missing_key_creates_a_filter_with_the_defaults() {
    let s = Server::start();
    let ks = s.keys("add_on_a_missing_key_creates_a_filter_with_the_defaults");
    let mut con = s.conn();
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", ks.k("add"), "x")), 1);
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MADD", ks.k("madd"), "x", "y")),
        vec![1, 1]
    );
    con.ok(&cmd!(
        "BF.RESERVE",
        ks.k("ref"),
        "0.01",
        100,
        "EXPANSION",
        2
    ));
    let reference = bf_info(&mut con, &ks.k("ref"));
    for (k, n) in [(ks.k("add"), 1), (ks.k("madd"), 2)] {
        let info = bf_info(&mut con, &k);
        assert_eq!(
            info,
            BfInfo {
                items: n,
                ..reference.clone()
            },
            "{k}"
        );
    }
}

#[test]
fn madd_replies_per_item_in_order() {
    let s = Server::start();
    let ks = s.keys("madd_replies_per_item_in_order");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.0001", 1000));
    let v = con.raw(&cmd!("BF.MADD", &k, "a", "b", "a", "c", "b"));
    assert_eq!(int_array(&v), vec![1, 1, 0, 1, 0]);
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", &k)), 3);
    let v = con.raw(&cmd!("BF.MEXISTS", &k, "c", "zz", "a", "b", "yy"));
    assert_eq!(int_array(&v), vec![1, 0, 1, 1, 0]);
}

#[test]
fn a_missing_key_answers_zeros_to_reads_and_is_not_created() {
    let s = Server::start();
    let ks = s.keys("a_missing_key_answers_zeros_to_reads");
    let k = ks.k("missing");
    let mut con = s.conn();
    assert_eq!(con.raw(&cmd!("BF.EXISTS", &k, "a")), Value::Int(0));
    assert_eq!(
        int_array(&con.raw(&cmd!("BF.MEXISTS", &k, "a", "b"))),
        vec![0, 0]
    );
    assert_eq!(con.raw(&cmd!("BF.CARD", &k)), Value::Int(0));
    assert_eq!(con.err_text(&cmd!("BF.INFO", &k)), "ERR not found");
    assert_eq!(con.err_text(&cmd!("BF.INFO", &k, "ITEMS")), "ERR not found");
    assert_eq!(con.err_text(&cmd!("BF.SCANDUMP", &k, 0)), "ERR not found");
    assert_eq!(con.err_text(&cmd!("BF.SCANDUMP", &k, 1)), "ERR not found");
    assert_eq!(
        con.err_text(&cmd!("BF.LOADCHUNK", &k, 9, "abcdefgh")),
        "ERR not found"
    );
    assert!(!key_exists(&mut con, &k));
}

#[test]
fn binary_items_including_empty_and_nul_bytes_are_distinct() {
    let s = Server::start();
    let ks = s.keys("binary_items_including_empty_and_nul_bytes");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.00001", 1000));
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let added: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\0".to_vec(),
        b"a\0b".to_vec(),
        all_bytes,
        vec![0xff, 0xfe, 0x00],
    ];
    let absent: Vec<Vec<u8>> = vec![
        b"\0\0".to_vec(),
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"ab".to_vec(),
        vec![0xff, 0xfe],
        b" ".to_vec(),
    ];
    assert_eq!(madd(&mut con, &k, &added), vec![1; added.len()]);
    assert_eq!(mexists(&mut con, &k, &added), vec![true; added.len()]);
    assert_eq!(mexists(&mut con, &k, &absent), vec![false; absent.len()]);
    assert_eq!(con.raw(&cmd!("BF.EXISTS", &k, b"")), Value::Int(1));
    assert_eq!(con.raw(&cmd!("BF.ADD", &k, b"\0")), Value::Int(0));
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", &k)), added.len() as i64);
}

#[test]
fn nonscaling_filter_refuses_the_item_past_capacity() {
    let s = Server::start();
    let ks = s.keys("nonscaling_filter_refuses_the_item_past_capacity");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.0001", 3, "NONSCALING"));
    for item in ["a", "b", "c"] {
        assert_eq!(con.raw(&cmd!("BF.ADD", &k, item)), Value::Int(1));
    }
    assert_eq!(con.err_text(&cmd!("BF.ADD", &k, "d")), FULL);
    // A known item is still answered: nothing needs to be added.
    assert_eq!(con.raw(&cmd!("BF.ADD", &k, "a")), Value::Int(0));
    assert_eq!(con.raw(&cmd!("BF.EXISTS", &k, "d")), Value::Int(0));
    let info = bf_info(&mut con, &k);
    assert_eq!((info.items, info.filters, info.capacity), (3, 1, 3));
}

#[test]
fn insert_into_a_full_nonscaling_filter_ends_its_reply_with_the_error() {
    let s = Server::start();
    let ks = s.keys("insert_into_a_full_nonscaling_filter");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 3, "NONSCALING"));
    con.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b", "c"));
    // The example of the compat doc.
    let v = con.raw(&cmd!("BF.INSERT", &k, "ITEMS", "a", "b", "c", "d", "d"));
    let Value::Array(xs) = &v else {
        panic!("BF.INSERT replied {v:?}")
    };
    assert_eq!(xs.len(), 4, "{v:?}");
    assert_eq!(&xs[..3], &[Value::Int(0), Value::Int(0), Value::Int(0)]);
    assert_eq!(error_of(&xs[3]).as_deref(), Some(FULL), "{v:?}");
    assert_eq!(bf_info(&mut con, &k).items, 3);
}

#[test]
fn madd_into_a_filter_that_becomes_full_stops_at_the_error() {
    let s = Server::start();
    let ks = s.keys("madd_into_a_filter_that_becomes_full");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.00001", 3, "NONSCALING"));
    con.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b"));
    let v = con.raw(&cmd!("BF.MADD", &k, "a", "c", "d", "e"));
    let Value::Array(xs) = &v else {
        panic!("BF.MADD replied {v:?}")
    };
    assert_eq!(xs.len(), 3, "{v:?}");
    assert_eq!(&xs[..2], &[Value::Int(0), Value::Int(1)]);
    assert_eq!(error_of(&xs[2]).as_deref(), Some(FULL), "{v:?}");
    assert_eq!(bf_info(&mut con, &k).items, 3);
    assert_eq!(
        int_array(&con.raw(&cmd!("BF.MEXISTS", &k, "a", "b", "c", "d", "e"))),
        vec![1, 1, 1, 0, 0]
    );
    // BF.INSERT on the full filter: the first new item is the error.
    let v = con.raw(&cmd!("BF.INSERT", &k, "ITEMS", "f", "a"));
    let Value::Array(xs) = &v else {
        panic!("BF.INSERT replied {v:?}")
    };
    assert_eq!(xs.len(), 1, "{v:?}");
    assert_eq!(error_of(&xs[0]).as_deref(), Some(FULL));
    assert_eq!(bf_info(&mut con, &k).items, 3);
}

#[test]
fn every_bf_command_on_a_string_key_is_wrongtype() {
    let s = Server::start();
    let ks = s.keys("every_bf_command_on_a_string_key_is_wrongtype");
    let k = ks.k("s");
    let mut con = s.conn();
    // A genuine header, so that only the key's type is wrong.
    con.ok(&cmd!("BF.RESERVE", ks.k("f"), "0.01", 100));
    let header = scandump(&mut con, &ks.k("f")).remove(0);
    con.ok(&cmd!("SET", &k, "v"));
    let cases = vec![
        cmd!("BF.RESERVE", &k, "0.01", 100),
        cmd!("BF.ADD", &k, "a"),
        cmd!("BF.MADD", &k, "a", "b"),
        cmd!("BF.INSERT", &k, "ITEMS", "a"),
        cmd!("BF.INSERT", &k, "NOCREATE", "ITEMS", "a"),
        cmd!("BF.EXISTS", &k, "a"),
        cmd!("BF.MEXISTS", &k, "a", "b"),
        cmd!("BF.INFO", &k),
        cmd!("BF.INFO", &k, "ITEMS"),
        cmd!("BF.CARD", &k),
        cmd!("BF.SCANDUMP", &k, 0),
        cmd!("BF.LOADCHUNK", &k, 1, header.1.as_slice()),
        cmd!("BF.LOADCHUNK", &k, 9, "abcdefgh"),
    ];
    for c in &cases {
        assert_eq!(con.err_text(c), WRONGTYPE, "{}", common::show(c));
    }
    assert_eq!(con.q::<String>(&cmd!("GET", &k)), "v");
    assert_eq!(con.q::<String>(&cmd!("TYPE", &k)), "string");
}

// ---------------------------------------------------------------- BF.INSERT

#[test]
fn insert_creates_the_filter_with_its_options() {
    let s = Server::start();
    let ks = s.keys("insert_creates_the_filter_with_its_options");
    let mut con = s.conn();
    let v = con.raw(&cmd!(
        "BF.INSERT",
        ks.k("k"),
        "CAPACITY",
        50,
        "ERROR",
        "0.001",
        "EXPANSION",
        4,
        "ITEMS",
        "a",
        "b",
        "a"
    ));
    assert_eq!(int_array(&v), vec![1, 1, 0]);
    con.ok(&cmd!(
        "BF.RESERVE",
        ks.k("ref"),
        "0.001",
        50,
        "EXPANSION",
        4
    ));
    let reference = bf_info(&mut con, &ks.k("ref"));
    assert_eq!(
        bf_info(&mut con, &ks.k("k")),
        BfInfo {
            items: 2,
            ..reference
        }
    );
}

#[test]
fn insert_without_options_uses_the_defaults() {
    let s = Server::start();
    let ks = s.keys("insert_without_options_uses_the_defaults");
    let mut con = s.conn();
    assert_eq!(
        int_array(&con.raw(&cmd!("BF.INSERT", ks.k("k"), "ITEMS", "a"))),
        vec![1]
    );
    // Only some options given: the others are the defaults.
    con.q::<Vec<i64>>(&cmd!(
        "BF.INSERT",
        ks.k("cap"),
        "CAPACITY",
        300,
        "ITEMS",
        "a"
    ));
    con.q::<Vec<i64>>(&cmd!(
        "BF.INSERT",
        ks.k("err"),
        "ERROR",
        "0.001",
        "ITEMS",
        "a"
    ));
    con.ok(&cmd!("BF.RESERVE", ks.k("ref"), "0.01", 100));
    con.ok(&cmd!("BF.RESERVE", ks.k("ref_cap"), "0.01", 300));
    con.ok(&cmd!("BF.RESERVE", ks.k("ref_err"), "0.001", 100));
    for (k, r) in [("k", "ref"), ("cap", "ref_cap"), ("err", "ref_err")] {
        let reference = bf_info(&mut con, &ks.k(r));
        assert_eq!(
            bf_info(&mut con, &ks.k(k)),
            BfInfo {
                items: 1,
                ..reference
            },
            "{k}"
        );
    }
}

#[test]
fn insert_nocreate_on_a_missing_key_is_not_found() {
    let s = Server::start();
    let ks = s.keys("insert_nocreate_on_a_missing_key_is_not_found");
    let k = ks.k("k");
    let mut con = s.conn();
    assert_eq!(
        con.err_text(&cmd!("BF.INSERT", &k, "NOCREATE", "ITEMS", "a")),
        "ERR not found"
    );
    assert_eq!(
        con.err_text(&cmd!(
            "BF.INSERT",
            &k,
            "CAPACITY",
            10,
            "nocreate",
            "ITEMS",
            "a"
        )),
        "ERR not found"
    );
    assert!(!key_exists(&mut con, &k));
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 10));
    assert_eq!(
        int_array(&con.raw(&cmd!("BF.INSERT", &k, "NOCREATE", "ITEMS", "a"))),
        vec![1]
    );
}

#[test]
fn insert_nonscaling_option_and_expansion_zero_make_nonscaling_filters() {
    let s = Server::start();
    let ks = s.keys("insert_nonscaling_option");
    let mut con = s.conn();
    let variants: Vec<(&str, Vec<&str>)> = vec![
        ("ns", vec!["NONSCALING"]),
        ("e0", vec!["EXPANSION", "0"]),
        ("ns_e3", vec!["NONSCALING", "EXPANSION", "3"]),
        ("e3_ns", vec!["EXPANSION", "3", "NONSCALING"]),
        ("lower", vec!["nonscaling"]),
    ];
    for (name, opts) in &variants {
        let k = ks.k(name);
        let v = con.raw(&cmd!(
            "BF.INSERT",
            &k,
            "CAPACITY",
            2,
            opts,
            "ITEMS",
            "a",
            "b",
            "c"
        ));
        let Value::Array(xs) = &v else {
            panic!("{name}: {v:?}")
        };
        assert_eq!(&xs[..2], &[Value::Int(1), Value::Int(1)], "{name}");
        assert_eq!(error_of(&xs[2]).as_deref(), Some(FULL), "{name}: {v:?}");
        let info = bf_info(&mut con, &k);
        assert_eq!(info.expansion, None, "{name}");
        assert_eq!((info.items, info.filters), (2, 1), "{name}");
    }
}

#[test]
fn insert_rejects_bad_options_without_creating_the_key() {
    let s = Server::start();
    let ks = s.keys("insert_rejects_bad_options");
    let k = ks.k("k");
    let mut con = s.conn();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["ERROR", "abc"], "Bad error rate"),
        (vec!["ERROR", "0"], "Bad error rate"),
        (vec!["ERROR", "1"], "Bad error rate"),
        (vec!["ERROR", "-0.1"], "Bad error rate"),
        (vec!["ERROR", "2"], "Bad error rate"),
        (vec!["CAPACITY", "abc"], "Bad capacity"),
        (vec!["CAPACITY", "0"], "Bad capacity"),
        (vec!["CAPACITY", "-5"], "Bad capacity"),
        (vec!["CAPACITY", "1073741825"], "Bad capacity"),
        (vec!["EXPANSION", "abc"], "Bad expansion"),
        (vec!["EXPANSION", "-1"], "Bad expansion"),
        (vec!["EXPANSION", "32769"], "Bad expansion"),
        (vec!["FOO"], "Unknown argument received"),
        (
            vec!["CAPACITY", "10", "NONSCALNG"],
            "Unknown argument received",
        ),
    ];
    for (opts, want) in &cases {
        let c = cmd!("BF.INSERT", &k, opts, "ITEMS", "a");
        assert_eq!(con.err_text(&c), *want, "{}", common::show(&c));
        assert!(
            !key_exists(&mut con, &k),
            "{} created the key",
            common::show(&c)
        );
    }
    // The limits themselves are accepted.
    let v = con.raw(&cmd!(
        "BF.INSERT",
        &k,
        "CAPACITY",
        1,
        "EXPANSION",
        32768,
        "ITEMS",
        "a"
    ));
    assert_eq!(int_array(&v), vec![1]);
    assert_eq!(bf_info(&mut con, &k).expansion, Some(32768));
}

#[test]
fn insert_caps_an_error_rate_above_a_quarter() {
    let s = Server::start();
    let ks = s.keys("insert_caps_an_error_rate_above_a_quarter");
    let mut con = s.conn();
    for (name, rate) in [("half", "0.5"), ("quarter", "0.25")] {
        con.q::<Vec<i64>>(&cmd!(
            "BF.INSERT",
            ks.k(name),
            "CAPACITY",
            1000,
            "ERROR",
            rate,
            "ITEMS",
            "a"
        ));
    }
    assert_eq!(
        bf_info(&mut con, &ks.k("half")),
        bf_info(&mut con, &ks.k("quarter"))
    );
}

#[test]
fn insert_with_a_missing_value_or_no_items_is_a_wrong_arity_error() {
    let s = Server::start();
    let ks = s.keys("insert_with_a_missing_value_or_no_items");
    let k = ks.k("k");
    let mut con = s.conn();
    let cases = vec![
        cmd!("BF.INSERT", &k, "CAPACITY"),
        cmd!("BF.INSERT", &k, "CAPACITY", 100, "ITEMS"),
        cmd!("BF.INSERT", &k, "ERROR", "0.01", "CAPACITY"),
        cmd!("BF.INSERT", &k, "CAPACITY", 100, "EXPANSION"),
        cmd!("BF.INSERT", &k, "CAPACITY", 100, "NOCREATE"),
        cmd!("BF.INSERT", &k, "NONSCALING", "NOCREATE"),
        cmd!("BF.INSERT", &k, "NONSCALING", "ITEMS"),
    ];
    for c in &cases {
        assert_eq!(con.err_text(c), arity("bf.insert"), "{}", common::show(c));
        assert!(
            !key_exists(&mut con, &k),
            "{} created the key",
            common::show(c)
        );
    }
}

#[test]
fn insert_ignores_the_options_of_an_existing_filter() {
    let s = Server::start();
    let ks = s.keys("insert_ignores_the_options_of_an_existing_filter");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 10, "EXPANSION", 3));
    let before = bf_info(&mut con, &k);
    let v = con.raw(&cmd!(
        "BF.INSERT",
        &k,
        "CAPACITY",
        5000,
        "ERROR",
        "0.2",
        "NONSCALING",
        "ITEMS",
        "a"
    ));
    assert_eq!(int_array(&v), vec![1]);
    assert_eq!(bf_info(&mut con, &k), BfInfo { items: 1, ..before });
}

#[test]
fn insert_with_a_malformed_option_on_an_existing_filter_adds_nothing() {
    let s = Server::start();
    let ks = s.keys("insert_with_a_malformed_option_on_an_existing_filter");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.0001", 1000));
    con.q::<i64>(&cmd!("BF.ADD", &k, "a"));
    let d = digest(&mut con, &k);
    for (opts, want) in [
        (vec!["CAPACITY", "abc"], "Bad capacity"),
        (vec!["ERROR", "5"], "Bad error rate"),
        (vec!["EXPANSION", "x"], "Bad expansion"),
        (vec!["BOGUS"], "Unknown argument received"),
    ] {
        let c = cmd!("BF.INSERT", &k, &opts, "ITEMS", "new-item", "other");
        assert_eq!(con.err_text(&c), want, "{}", common::show(&c));
    }
    assert_eq!(bf_info(&mut con, &k).items, 1);
    assert_eq!(digest(&mut con, &k), d);
    assert_eq!(
        int_array(&con.raw(&cmd!("BF.MEXISTS", &k, "new-item", "other"))),
        vec![0, 0]
    );
}

#[test]
fn insert_option_words_are_case_insensitive() {
    let s = Server::start();
    let ks = s.keys("insert_option_words_are_case_insensitive");
    let mut con = s.conn();
    let v = con.raw(&cmd!(
        "BF.INSERT",
        ks.k("k"),
        "capacity",
        20,
        "Error",
        "0.001",
        "expansion",
        3,
        "items",
        "a"
    ));
    assert_eq!(int_array(&v), vec![1]);
    con.ok(&cmd!(
        "BF.RESERVE",
        ks.k("ref"),
        "0.001",
        20,
        "EXPANSION",
        3
    ));
    let reference = bf_info(&mut con, &ks.k("ref"));
    assert_eq!(
        bf_info(&mut con, &ks.k("k")),
        BfInfo {
            items: 1,
            ..reference
        }
    );
    let v = con.raw(&cmd!("BF.INSERT", ks.k("k"), "NoCreate", "ItEmS", "b"));
    assert_eq!(int_array(&v), vec![1]);
}

// ---------------------------------------------------------------- BF.INFO

fn info_names() -> [&'static str; 5] {
    [
        "Capacity",
        "Size",
        "Number of filters",
        "Number of items inserted",
        "Expansion rate",
    ]
}

#[test]
fn info_resp2_is_a_flat_array_of_exactly_redisbloom_s_five_fields() {
    let s = Server::start();
    let ks = s.keys("info_resp2_is_a_flat_array_in_redisbloom_order");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 500, "EXPANSION", 4));
    con.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b", "c"));
    let v = con.raw(&cmd!("BF.INFO", &k));
    let Value::Array(xs) = &v else {
        panic!("BF.INFO replied {v:?}")
    };
    // Exactly RedisBloom's five fields, in its order: go-redis fails on any other name
    // (the health fields answer BF.INFO key HEALTH, tests/operations.rs).
    assert_eq!(xs.len(), 10, "{v:?}");
    let names: Vec<String> = xs.iter().step_by(2).map(|x| text_of(x).unwrap()).collect();
    assert_eq!(names, info_names());
    let size = match xs[3] {
        Value::Int(n) => n,
        ref other => panic!("Size is {other:?}"),
    };
    assert!(size > 0);
    let values: Vec<&Value> = xs.iter().skip(1).step_by(2).collect();
    assert_eq!(
        values,
        vec![
            &Value::Int(500),
            &Value::Int(size),
            &Value::Int(1),
            &Value::Int(3),
            &Value::Int(4)
        ]
    );
}

#[test]
fn info_resp3_is_a_map_of_exactly_redisbloom_s_five_fields() {
    let s = Server::start();
    let ks = s.keys("info_resp3_is_a_map_in_redisbloom_order");
    let k = ks.k("k");
    let mut con2 = s.conn();
    con2.ok(&cmd!("BF.RESERVE", &k, "0.01", 500, "EXPANSION", 4));
    con2.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b", "c"));
    let expected = bf_info(&mut con2, &k);
    let mut con = s.conn_resp3();
    let v = con.raw(&cmd!("BF.INFO", &k));
    let Value::Map(pairs) = &v else {
        panic!("BF.INFO over RESP3 replied {v:?}, not a map")
    };
    let names: Vec<String> = pairs.iter().map(|(k, _)| text_of(k).unwrap()).collect();
    assert_eq!(names, info_names());
    let values: Vec<Value> = pairs.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(
        values,
        vec![
            Value::Int(expected.capacity),
            Value::Int(expected.size),
            Value::Int(expected.filters),
            Value::Int(expected.items),
            Value::Int(4)
        ]
    );

    con2.ok(&cmd!("BF.RESERVE", ks.k("ns"), "0.01", 500, "NONSCALING"));
    let v = con.raw(&cmd!("BF.INFO", ks.k("ns")));
    let Value::Map(pairs) = &v else {
        panic!("BF.INFO over RESP3 replied {v:?}, not a map")
    };
    let names: Vec<String> = pairs.iter().map(|(k, _)| text_of(k).unwrap()).collect();
    assert_eq!(names, info_names());
    assert_eq!(pairs[4].1, Value::Nil);
    // RESP2 likewise: a nil last.
    let v = con2.raw(&cmd!("BF.INFO", ks.k("ns")));
    let Value::Array(xs) = &v else {
        panic!("BF.INFO replied {v:?}")
    };
    assert_eq!(xs.len(), 10, "{v:?}");
    assert_eq!(text_of(&xs[8]).as_deref(), Some("Expansion rate"));
    assert_eq!(xs[9], Value::Nil);
}

#[test]
fn info_single_field_resp2_is_an_array_of_one_value() {
    let s = Server::start();
    let ks = s.keys("info_single_field_resp2");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 500, "EXPANSION", 4));
    con.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b", "c"));
    let info = bf_info(&mut con, &k);
    for (word, want) in [
        ("CAPACITY", Value::Int(info.capacity)),
        ("capacity", Value::Int(info.capacity)),
        ("SIZE", Value::Int(info.size)),
        ("Size", Value::Int(info.size)),
        ("FILTERS", Value::Int(info.filters)),
        ("filters", Value::Int(info.filters)),
        ("ITEMS", Value::Int(3)),
        ("items", Value::Int(3)),
        ("EXPANSION", Value::Int(4)),
        ("expansion", Value::Int(4)),
    ] {
        assert_eq!(
            con.raw(&cmd!("BF.INFO", &k, word)),
            Value::Array(vec![want]),
            "BF.INFO k {word}"
        );
    }
    con.ok(&cmd!("BF.RESERVE", ks.k("ns"), "0.01", 500, "NONSCALING"));
    assert_eq!(
        con.raw(&cmd!("BF.INFO", ks.k("ns"), "EXPANSION")),
        Value::Array(vec![Value::Nil])
    );
}

#[test]
fn info_single_field_resp3_is_a_one_entry_map() {
    let s = Server::start();
    let ks = s.keys("info_single_field_resp3");
    let k = ks.k("k");
    let mut con2 = s.conn();
    con2.ok(&cmd!("BF.RESERVE", &k, "0.01", 500, "EXPANSION", 4));
    con2.q::<Vec<i64>>(&cmd!("BF.MADD", &k, "a", "b", "c"));
    con2.ok(&cmd!("BF.RESERVE", ks.k("ns"), "0.01", 500, "NONSCALING"));
    let info = bf_info(&mut con2, &k);
    let mut con = s.conn_resp3();
    for (word, name, want) in [
        ("CAPACITY", "Capacity", Value::Int(info.capacity)),
        ("size", "Size", Value::Int(info.size)),
        ("FILTERS", "Number of filters", Value::Int(info.filters)),
        ("Items", "Number of items inserted", Value::Int(3)),
        ("EXPANSION", "Expansion rate", Value::Int(4)),
    ] {
        let v = con.raw(&cmd!("BF.INFO", &k, word));
        let Value::Map(pairs) = &v else {
            panic!("BF.INFO k {word} over RESP3 replied {v:?}")
        };
        assert_eq!(pairs.len(), 1, "{v:?}");
        assert_eq!(text_of(&pairs[0].0).as_deref(), Some(name), "{v:?}");
        assert_eq!(pairs[0].1, want, "BF.INFO k {word}");
    }
    let v = con.raw(&cmd!("BF.INFO", ks.k("ns"), "expansion"));
    let Value::Map(pairs) = &v else {
        panic!("replied {v:?}")
    };
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0].1, Value::Nil);
}

#[test]
fn info_unknown_field_is_an_invalid_information_value() {
    let s = Server::start();
    let ks = s.keys("info_unknown_field");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 100));
    for word in ["BOGUS", "", "CAPACITYX", "ITEM"] {
        assert_eq!(
            con.err_text(&cmd!("BF.INFO", &k, word)),
            "Invalid information value",
            "BF.INFO k {word:?}"
        );
    }
}

#[test]
fn info_size_is_positive_and_grows_with_layers() {
    let s = Server::start();
    let ks = s.keys("info_size_is_positive_and_grows_with_layers");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 100, "EXPANSION", 2));
    let mut last = bf_info(&mut con, &k);
    assert!(last.size > 0);
    let all = items("grow", 1000);
    for batch in all.chunks(50) {
        madd(&mut con, &k, batch);
        let now = bf_info(&mut con, &k);
        if now.filters > last.filters {
            assert!(now.size > last.size, "{last:?} -> {now:?}");
        } else {
            assert_eq!(now.size, last.size, "size changed without a new layer");
        }
        last = now;
    }
    assert!(last.filters >= 3, "{last:?}");
}

// ---------------------------------------------------------------- RESP3

#[test]
fn resp3_replies_are_booleans() {
    let s = Server::start();
    let ks = s.keys("resp3_replies_are_booleans");
    let k = ks.k("k");
    let mut con = s.conn_resp3();
    con.ok(&cmd!("BF.RESERVE", &k, "0.0001", 1000));
    assert_eq!(con.raw(&cmd!("BF.ADD", &k, "a")), Value::Boolean(true));
    assert_eq!(con.raw(&cmd!("BF.ADD", &k, "a")), Value::Boolean(false));
    assert_eq!(con.raw(&cmd!("BF.EXISTS", &k, "a")), Value::Boolean(true));
    assert_eq!(con.raw(&cmd!("BF.EXISTS", &k, "b")), Value::Boolean(false));
    assert_eq!(
        con.raw(&cmd!("BF.MADD", &k, "b", "a", "c")),
        Value::Array(vec![
            Value::Boolean(true),
            Value::Boolean(false),
            Value::Boolean(true)
        ])
    );
    assert_eq!(
        con.raw(&cmd!("BF.MEXISTS", &k, "a", "zz")),
        Value::Array(vec![Value::Boolean(true), Value::Boolean(false)])
    );
    assert_eq!(
        con.raw(&cmd!("BF.INSERT", &k, "ITEMS", "c", "d")),
        Value::Array(vec![Value::Boolean(false), Value::Boolean(true)])
    );
    assert_eq!(con.raw(&cmd!("BF.CARD", &k)), Value::Int(4));
    // A missing key too.
    assert_eq!(
        con.raw(&cmd!("BF.EXISTS", ks.k("missing"), "a")),
        Value::Boolean(false)
    );
    assert_eq!(
        con.raw(&cmd!("BF.MEXISTS", ks.k("missing"), "a")),
        Value::Array(vec![Value::Boolean(false)])
    );
    // The error after the results so far.
    con.ok(&cmd!("BF.RESERVE", ks.k("ns"), "0.0001", 1, "NONSCALING"));
    let v = con.raw(&cmd!("BF.MADD", ks.k("ns"), "a", "b"));
    let Value::Array(xs) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(xs.len(), 2, "{v:?}");
    assert_eq!(xs[0], Value::Boolean(true));
    assert_eq!(error_of(&xs[1]).as_deref(), Some(FULL));
}

// ---------------------------------------------------------------- scaling

#[test]
fn scaling_filter_grows_by_its_expansion_and_never_forgets_an_item() {
    let s = Server::start();
    let ks = s.keys("scaling_filter_grows_by_its_expansion");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 10, "EXPANSION", 3));
    let all = items("scale", 200);
    let mut ones = 0;
    let mut filters_seen = vec![];
    for item in &all {
        let r: i64 = con.q(&cmd!("BF.ADD", &k, item.as_slice()));
        ones += r;
        let f = bf_info(&mut con, &k).filters;
        if filters_seen.last() != Some(&f) {
            filters_seen.push(f);
        }
    }
    assert_eq!(
        filters_seen,
        vec![1, 2, 3, 4],
        "layers appear one at a time"
    );
    let info = bf_info(&mut con, &k);
    assert_eq!(info.capacity, 10 + 30 + 90 + 270);
    assert_eq!(info.filters, 4);
    assert_eq!(info.items, ones);
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", &k)), ones);
    assert!(
        ones > 180,
        "only {ones} of 200 distinct items counted as new"
    );
    assert_eq!(mexists(&mut con, &k, &all), vec![true; all.len()]);
}

#[test]
fn card_counts_the_items_inserted() {
    let s = Server::start();
    let ks = s.keys("card_counts_the_items_inserted");
    let k = ks.k("k");
    let mut con = s.conn();
    let all = items("card", 3000);
    let replies = madd(&mut con, &k, &all);
    let ones: i64 = replies.iter().sum();
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", &k)), ones);
    assert_eq!(bf_info(&mut con, &k).items, ones);
    // Re-adding changes nothing.
    assert_eq!(madd(&mut con, &k, &all[..500]), vec![0; 500]);
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", &k)), ones);
}

// ---------------------------------------------------------------- settings

#[test]
fn config_settings_change_the_auto_create_defaults() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-initial-size"), 1000));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-error-rate"), "0.001"));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-expansion-factor"), 4));
    assert_eq!(config_get(&mut con, &setting("bf-initial-size")), "1000");
    assert_eq!(
        config_get(&mut con, &setting("bf-error-rate"))
            .parse::<f64>()
            .ok(),
        Some(0.001)
    );
    assert_eq!(config_get(&mut con, &setting("bf-expansion-factor")), "4");
    con.q::<i64>(&cmd!("BF.ADD", "add", "x"));
    con.q::<Vec<i64>>(&cmd!("BF.MADD", "madd", "x"));
    con.q::<Vec<i64>>(&cmd!("BF.INSERT", "insert", "ITEMS", "x"));
    con.ok(&cmd!("BF.RESERVE", "ref", "0.001", 1000, "EXPANSION", 4));
    let reference = bf_info(&mut con, "ref");
    assert_eq!(reference.capacity, 1000);
    for k in ["add", "madd", "insert"] {
        assert_eq!(
            bf_info(&mut con, k),
            BfInfo {
                items: 1,
                ..reference.clone()
            },
            "{k}"
        );
    }
}

#[test]
fn expansion_factor_zero_makes_new_filters_nonscaling() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-expansion-factor"), 0));
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-initial-size"), 2));
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MADD", "k", "a", "b")),
        vec![1, 1]
    );
    assert_eq!(bf_info(&mut con, "k").expansion, None);
    assert_eq!(con.err_text(&cmd!("BF.ADD", "k", "c")), FULL);
}

#[test]
fn legacy_load_time_arguments_set_the_defaults() {
    require_own_server!();
    let s = Server::builder()
        .module_args(&["ERROR_RATE", "0.001", "INITIAL_SIZE", "1000"])
        .start();
    let mut con = s.conn();
    assert_eq!(
        config_get(&mut con, &setting("bf-error-rate"))
            .parse::<f64>()
            .ok(),
        Some(0.001)
    );
    assert_eq!(config_get(&mut con, &setting("bf-initial-size")), "1000");
    con.q::<i64>(&cmd!("BF.ADD", "k", "x"));
    con.ok(&cmd!("BF.RESERVE", "ref", "0.001", 1000));
    let reference = bf_info(&mut con, "ref");
    assert_eq!(
        bf_info(&mut con, "k"),
        BfInfo {
            items: 1,
            ..reference
        }
    );
}

#[test]
fn settings_given_on_the_command_line_apply() {
    require_own_server!();
    let s = Server::builder()
        .config(&setting("bf-initial-size"), "500")
        .config(&setting("bf-expansion-factor"), "3")
        .start();
    let mut con = s.conn();
    con.q::<i64>(&cmd!("BF.ADD", "k", "x"));
    let info = bf_info(&mut con, "k");
    assert_eq!((info.capacity, info.expansion), (500, Some(3)));
}

#[test]
fn config_refuses_values_outside_the_documented_ranges() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    for (name, value) in [
        (&setting("bf-error-rate"), "0"),
        (&setting("bf-error-rate"), "1"),
        (&setting("bf-error-rate"), "abc"),
        (&setting("bf-initial-size"), "0"),
        (&setting("bf-initial-size"), "1073741825"),
        (&setting("bf-expansion-factor"), "32769"),
        (&setting("bf-expansion-factor"), "-1"),
    ] {
        let v = con.raw(&cmd!("CONFIG", "SET", name, value));
        assert!(
            error_of(&v).is_some(),
            "CONFIG SET {name} {value} replied {v:?}"
        );
    }
    // Nothing changed.
    con.q::<i64>(&cmd!("BF.ADD", "k", "x"));
    let info = bf_info(&mut con, "k");
    assert_eq!((info.capacity, info.expansion), (100, Some(2)));
}

// ---------------------------------------------------------------- memory limit

#[test]
fn reserve_over_the_memory_limit_is_refused() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        "1mb"
    ));
    assert_eq!(
        config_get(&mut con, &setting("bf-max-filter-memory")),
        "1048576"
    );
    let e = con.err_text(&cmd!("BF.RESERVE", "big", "0.01", 10_000_000));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "got {e:?}"
    );
    assert!(!key_exists(&mut con, "big"));
    let v = con.raw(&cmd!(
        "BF.INSERT",
        "big2",
        "CAPACITY",
        10_000_000,
        "ITEMS",
        "a"
    ));
    let e = error_of(&v)
        .or_else(|| match &v {
            Value::Array(xs) => xs.iter().find_map(error_of),
            _ => None,
        })
        .unwrap_or_else(|| panic!("BF.INSERT over the limit replied {v:?}"));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "got {e:?}"
    );
    assert!(!key_exists(&mut con, "big2"));
    // Below the limit is fine.
    con.ok(&cmd!("BF.RESERVE", "small", "0.01", 10_000));
}

#[test]
fn growth_over_the_memory_limit_is_refused_and_leaves_the_filter_unchanged() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        "1mb"
    ));
    con.ok(&cmd!("BF.RESERVE", "k", "0.01", 100_000, "EXPANSION", 8));
    let mut added: Vec<Vec<u8>> = Vec::new();
    let mut next = 0usize;
    // Fill the first layer in batches, staying clear of its capacity...
    loop {
        let items_now = bf_info(&mut con, "k").items;
        if items_now + 1000 > 100_000 {
            break;
        }
        let batch: Vec<Vec<u8>> = (next..next + 1000)
            .map(|i| format!("mem-{i}").into_bytes())
            .collect();
        next += 1000;
        for (item, r) in batch.iter().zip(madd(&mut con, "k", &batch)) {
            if r == 1 {
                added.push(item.clone());
            }
        }
    }
    // ...then one at a time until the growth is refused.
    let mut error = None;
    for _ in 0..5000 {
        let item = format!("mem-{next}").into_bytes();
        next += 1;
        let v = con.raw(&cmd!("BF.ADD", "k", item.as_slice()));
        match v {
            Value::Int(1) => added.push(item),
            Value::Int(0) => {}
            ref other => {
                error = Some(error_of(other).unwrap_or_else(|| panic!("BF.ADD replied {v:?}")));
                break;
            }
        }
    }
    let e = error.expect("the filter grew past a 1mb limit");
    assert!(
        e.starts_with("ERR problem inserting into filter"),
        "got {e:?}"
    );
    let before = bf_info(&mut con, "k");
    assert_eq!(before.filters, 1);
    assert_eq!(before.items, added.len() as i64);
    let d = digest(&mut con, "k");
    // Refused again, and nothing changes.
    let e = con.err_text(&cmd!("BF.ADD", "k", "one-more-item"));
    assert!(e.starts_with("ERR problem inserting into filter"));
    assert_eq!(bf_info(&mut con, "k"), before);
    assert_eq!(digest(&mut con, "k"), d);
    assert!(mexists(&mut con, "k", &added).iter().all(|&b| b));
}

#[test]
fn a_huge_reserve_is_refused_under_the_default_limit() {
    let s = Server::start();
    let ks = s.keys("a_huge_reserve_is_refused");
    let k = ks.k("k");
    let mut con = s.conn();
    let e = con.err_text(&cmd!("BF.RESERVE", &k, "1e-9", 1_073_741_824));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "got {e:?}"
    );
    assert!(!key_exists(&mut con, &k));
    assert_eq!(con.raw(&cmd!("PING")), Value::SimpleString("PONG".into()));
    if s.is_external() {
        return;
    }
    assert_eq!(
        config_get(&mut con, &setting("bf-max-filter-memory")),
        (4u64 << 30).to_string()
    );
}

// ---------------------------------------------------------------- SCANDUMP / LOADCHUNK

/// Asserts `b` answers like `a`: BF.INFO, digest, and BF.MEXISTS on the added items and
/// 10000 absent probes.
fn assert_same_filter(con: &mut redis::Connection, a: &str, b: &str, added: &[Vec<u8>]) {
    assert_eq!(bf_info(con, b), bf_info(con, a), "BF.INFO of {b} vs {a}");
    assert_eq!(digest(con, b), digest(con, a), "DEBUG DIGEST-VALUE");
    let in_a = mexists(con, a, added);
    assert!(in_a.iter().all(|&x| x), "{a} forgot an added item");
    assert_eq!(mexists(con, b, added), in_a, "added items");
    let probes = items("absent-probe", 10_000);
    assert_eq!(mexists(con, b, &probes), mexists(con, a, &probes), "probes");
}

#[test]
fn scandump_and_loadchunk_rebuild_a_multi_layer_filter() {
    let s = Server::start();
    let ks = s.keys("scandump_and_loadchunk_rebuild_a_multi_layer_filter");
    let (src, dst) = (ks.k("src"), ks.k("dst"));
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &src, "0.01", 100, "EXPANSION", 2));
    let added = items("multi", 1000);
    madd(&mut con, &src, &added);
    let layers = bf_info(&mut con, &src).filters;
    assert!(layers >= 4, "{layers} layers");
    let chunks = scandump(&mut con, &src);
    assert!(
        chunks.len() as i64 > layers,
        "a header and at least one chunk per layer: {} pairs for {layers} layers",
        chunks.len()
    );
    loadchunks(&mut con, &dst, &chunks);
    assert_same_filter(&mut con, &src, &dst, &added);
    // The copy is a working filter.
    assert_eq!(
        con.q::<i64>(&cmd!("BF.ADD", &dst, "after-load")),
        1 - con.q::<i64>(&cmd!("BF.EXISTS", &src, "after-load"))
    );

    // Replaying into the same key after DEL.
    let before = (bf_info(&mut con, &src), digest(&mut con, &src));
    con.q::<i64>(&cmd!("DEL", &src));
    loadchunks(&mut con, &src, &chunks);
    assert_eq!((bf_info(&mut con, &src), digest(&mut con, &src)), before);
    assert!(mexists(&mut con, &src, &added).iter().all(|&b| b));
}

#[test]
fn scandump_and_loadchunk_rebuild_nonscaling_and_empty_filters() {
    let s = Server::start();
    let ks = s.keys("scandump_and_loadchunk_rebuild_nonscaling_and_empty");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", ks.k("empty"), "0.001", 1000));
    con.ok(&cmd!("BF.RESERVE", ks.k("full"), "0.01", 50, "NONSCALING"));
    let full_items = items("full", 60);
    let v = {
        let mut c = cmd!("BF.MADD", ks.k("full"));
        for i in &full_items {
            c.arg(i.as_slice());
        }
        con.raw(&c)
    };
    assert!(
        matches!(&v, Value::Array(xs) if xs.last().and_then(error_of).as_deref() == Some(FULL))
    );
    for (name, added) in [("empty", vec![]), ("full", full_items[..50].to_vec())] {
        let (src, dst) = (ks.k(name), ks.k(&format!("{name}-copy")));
        let chunks = scandump(&mut con, &src);
        loadchunks(&mut con, &dst, &chunks);
        let added: Vec<Vec<u8>> = added
            .into_iter()
            .filter(|i| mexists(&mut con, &src, std::slice::from_ref(i))[0])
            .collect();
        assert_same_filter(&mut con, &src, &dst, &added);
    }
    assert_eq!(
        con.err_text(&cmd!("BF.ADD", ks.k("full-copy"), "one-more")),
        FULL
    );
}

#[test]
fn scandump_splits_a_large_filter_into_chunks_of_at_most_16_mib() {
    let s = Server::start();
    let ks = s.keys("scandump_splits_a_large_filter");
    let (src, dst) = (ks.k("src"), ks.k("dst"));
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &src, "0.001", 10_000_000));
    let added = items("large", 20_000);
    madd(&mut con, &src, &added);
    let chunks = scandump(&mut con, &src);
    let data = &chunks[1..];
    assert!(data.len() >= 2, "{} data chunks", data.len());
    let mut offset: i64 = 0;
    for (it, bytes) in data {
        assert!(!bytes.is_empty());
        assert!(bytes.len() <= 16 * 1024 * 1024, "chunk of {}", bytes.len());
        offset += bytes.len() as i64;
        assert_eq!(*it, 1 + offset, "iterator = 1 + offset + length");
    }
    assert!(offset <= bf_info(&mut con, &src).size);
    assert!(offset > 16 * 1024 * 1024);
    loadchunks(&mut con, &dst, &chunks);
    assert_same_filter(&mut con, &src, &dst, &added);
}

#[test]
fn scandump_and_loadchunk_refuse_a_non_numeric_iterator() {
    let s = Server::start();
    let ks = s.keys("scandump_and_loadchunk_refuse_a_non_numeric_iterator");
    let k = ks.k("k");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &k, "0.01", 100));
    assert_eq!(
        con.err_text(&cmd!("BF.SCANDUMP", &k, "notanumber")),
        "Second argument must be numeric"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.LOADCHUNK", &k, "notanumber", "data")),
        "ERR Second argument must be numeric"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.LOADCHUNK", ks.k("new"), "notanumber", "data")),
        "ERR Second argument must be numeric"
    );
    assert!(!key_exists(&mut con, &ks.k("new")));
}

#[test]
fn loadchunk_refuses_a_bad_header_and_creates_nothing() {
    let s = Server::start();
    let ks = s.keys("loadchunk_refuses_a_bad_header");
    let mut con = s.conn();
    con.ok(&cmd!(
        "BF.RESERVE",
        ks.k("src"),
        "0.01",
        100,
        "EXPANSION",
        2
    ));
    madd(&mut con, &ks.k("src"), &items("hdr", 400));
    let header = scandump(&mut con, &ks.k("src")).remove(0).1;
    let new = ks.k("new");
    for bad in [
        b"garbage".to_vec(),
        header[..header.len() - 1].to_vec(),
        header[..5].to_vec(),
        Vec::new(),
    ] {
        let c = cmd!("BF.LOADCHUNK", &new, 1, bad.as_slice());
        assert_eq!(
            con.err_text(&c),
            "ERR received bad data",
            "header of {} bytes",
            bad.len()
        );
        assert!(!key_exists(&mut con, &new));
    }
    con.ok(&cmd!("BF.LOADCHUNK", &new, 1, header.as_slice()));
    assert_eq!(
        bf_info(&mut con, &new).capacity,
        bf_info(&mut con, &ks.k("src")).capacity
    );
}

#[test]
fn loadchunk_refuses_chunks_at_wrong_offsets() {
    let s = Server::start();
    let ks = s.keys("loadchunk_refuses_chunks_at_wrong_offsets");
    let (src, dst) = (ks.k("src"), ks.k("dst"));
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", &src, "0.01", 100, "EXPANSION", 2));
    let added = items("offsets", 250);
    madd(&mut con, &src, &added);
    assert_eq!(bf_info(&mut con, &src).filters, 2);
    let chunks = scandump(&mut con, &src);
    assert_eq!(chunks.len(), 3, "header + one chunk per layer");
    let (l0, l1) = (chunks[1].1.len() as i64, chunks[2].1.len() as i64);
    assert_eq!(chunks[1].0, 1 + l0);
    assert_eq!(chunks[2].0, 1 + l0 + l1);
    con.ok(&cmd!("BF.LOADCHUNK", &dst, 1, chunks[0].1.as_slice()));

    // Beyond every layer.
    let data = &chunks[2].1;
    let it = 1 + l0 + l1 + 1000 + data.len() as i64;
    assert_eq!(
        con.err_text(&cmd!("BF.LOADCHUNK", &dst, it, data.as_slice())),
        "ERR invalid offset - no link found"
    );
    // Starting in layer 0 and crossing into layer 1.
    let mut crossing = chunks[1].1[chunks[1].1.len() - 8..].to_vec();
    crossing.extend_from_slice(&chunks[2].1[..8]);
    let it = 1 + (l0 - 8) + 16;
    assert_eq!(
        con.err_text(&cmd!("BF.LOADCHUNK", &dst, it, crossing.as_slice())),
        "ERR invalid chunk - Too big for current filter"
    );
    // The right chunks still rebuild the filter exactly.
    loadchunks(&mut con, &dst, &chunks[1..]);
    assert_same_filter(&mut con, &src, &dst, &added);
}

#[test]
fn loadchunk_header_over_the_memory_limit_is_refused() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "src", "0.01", 2_000_000));
    assert!(bf_info(&mut con, "src").size > 2 * 1024 * 1024);
    let header = scandump(&mut con, "src").remove(0).1;
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        "1mb"
    ));
    let e = con.err_text(&cmd!("BF.LOADCHUNK", "dst", 1, header.as_slice()));
    assert!(
        e.starts_with("ERR Insufficient memory to create filter"),
        "got {e:?}"
    );
    assert!(!key_exists(&mut con, "dst"));
}

#[test]
fn loadchunk_data_before_a_header_is_not_found() {
    let s = Server::start();
    let ks = s.keys("loadchunk_data_before_a_header");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", ks.k("src"), "0.01", 100));
    let chunks = scandump(&mut con, &ks.k("src"));
    let (it, data) = &chunks[1];
    assert_eq!(
        con.err_text(&cmd!("BF.LOADCHUNK", ks.k("dst"), *it, data.as_slice())),
        "ERR not found"
    );
    assert!(!key_exists(&mut con, &ks.k("dst")));
}

#[test]
fn keys_with_the_same_items_have_the_same_digest() {
    // DEBUG DIGEST-VALUE is what the persistence and replication tests compare: it must see
    // the filter's contents, not just its shape.
    let s = Server::start();
    let ks = s.keys("keys_with_the_same_items_have_the_same_digest");
    let mut con = s.conn();
    for k in ["a", "b", "c"] {
        con.ok(&cmd!("BF.RESERVE", ks.k(k), "0.01", 100));
    }
    madd(&mut con, &ks.k("a"), &items("d", 10));
    madd(&mut con, &ks.k("b"), &items("d", 10));
    madd(&mut con, &ks.k("c"), &items("e", 10));
    assert_eq!(digest(&mut con, &ks.k("a")), digest(&mut con, &ks.k("b")));
    assert_ne!(digest(&mut con, &ks.k("a")), digest(&mut con, &ks.k("c")));
}

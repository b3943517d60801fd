//! BF.MERGE through a real server: the union holds every item of every source, refusals
//! change and create nothing, the destination is created or replaced (and may be a source),
//! the memory limits apply before anything is allocated, a replica and an AOF replay end with
//! the same filter, the keyspace event names the destination, and the replies are the same in
//! RESP2 and RESP3. RedisBloom reads a merged classic filter back (the oracle test).

use crate::common;
use common::setting;

use common::{
    bf_info, digest, events, items, key_exists, madd, mexists, redisbloom_path, scandump,
    used_memory, wait_for_link, Events, Exec, Server, Stop,
};
use redis::Value;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Three filters of one spec holding overlapping sets (`a` grows to several layers, `c` stays
/// in its first), and every item offered to each.
fn three_sources(con: &mut redis::Connection, spec: &[&str]) -> Vec<Vec<Vec<u8>>> {
    let sets = [
        items("shared", 300)
            .into_iter()
            .chain(items("a", 3000))
            .collect::<Vec<_>>(),
        items("shared", 300)
            .into_iter()
            .chain(items("b", 700))
            .collect(),
        items("c", 40),
    ];
    for (name, set) in ["a", "b", "c"].iter().zip(&sets) {
        let mut c = cmd!("BF.RESERVE", *name);
        for arg in spec {
            c.arg(*arg);
        }
        con.ok(&c);
        madd(con, name, set);
    }
    sets.to_vec()
}

/// Distinct items of the sets above: 300 shared + 3000 + 700 + 40.
const DISTINCT: f64 = 4040.0;

fn assert_union_holds(con: &mut redis::Connection, dest: &str, sets: &[Vec<Vec<u8>>]) {
    for set in sets {
        let found = mexists(con, dest, set);
        assert!(found.iter().all(|&f| f), "an item of a source is missing");
    }
}

/// Each layer's `(capacity, items)`, from `BF.DEBUG`.
fn layer_loads(con: &mut redis::Connection, key: &str) -> Vec<(u64, u64)> {
    let lines: Vec<String> = con.q(&cmd!("BF.DEBUG", key));
    lines[1..]
        .iter()
        .map(|line| {
            let field = |name: &str| -> u64 {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            };
            (field("capacity:"), field("size:"))
        })
        .collect()
}

/// `BF.INFO key FPR`: the estimated false-positive rate (a one-element array in RESP2).
fn fpr(con: &mut redis::Connection, key: &str) -> f64 {
    let v: Vec<f64> = con.q(&cmd!("BF.INFO", key, "FPR"));
    v[0]
}

/// Each merge of `cases` is refused with its error into "dest" (an existing filter) and into
/// "new" (a missing key), and neither key changes.
fn assert_refused_into_dest_and_new(
    con: &mut redis::Connection,
    cases: &[(&[&str], &str)],
    before: &str,
) {
    for (sources, error) in cases {
        for dest in ["dest", "new"] {
            let mut c = cmd!("BF.MERGE", dest);
            for src in *sources {
                c.arg(*src);
            }
            assert_eq!(con.err_text(&c), *error, "BF.MERGE {dest} {sources:?}");
        }
    }
    assert_eq!(digest(con, "dest"), before, "a refused merge changed dest");
    assert!(!key_exists(con, "new"), "a refused merge created its key");
}

#[test]
fn the_union_holds_every_item_of_every_source_and_estimates_its_count() {
    for layout in ["blocked", "classic"] {
        let s = Server::start();
        let mut con = s.conn();
        con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), layout));
        let sets = three_sources(&mut con, &["0.01", "200"]);
        con.ok(&cmd!("BF.MERGE", "u", "a", "b", "c"));
        assert_union_holds(&mut con, "u", &sets);
        let (a, u) = (bf_info(&mut con, "a"), bf_info(&mut con, "u"));
        // The longest source's layers, so its capacity and size.
        assert_eq!(
            (u.filters, u.capacity, u.size, u.expansion),
            (a.filters, a.capacity, a.size, a.expansion),
            "{layout}"
        );
        assert!(a.filters >= 4, "{layout}: {a:?}");
        // The count is an estimate of the distinct items, within a few percent; a blocked
        // layer counts at most its capacity (layerbloom's format holds no more), so there it
        // undercounts the layers several sources filled.
        let card: i64 = con.q(&cmd!("BF.CARD", "u"));
        assert_eq!(card, u.items, "{layout}");
        let loads = layer_loads(&mut con, "u");
        assert_eq!(
            loads.iter().map(|&(_, n)| n as i64).sum::<i64>(),
            card,
            "{layout}"
        );
        if layout == "blocked" {
            assert!(loads.iter().all(|&(c, n)| n <= c), "{layout}: {loads:?}");
            assert!(
                card >= a.items && (card as f64) < DISTINCT,
                "{layout}: {card}"
            );
        } else {
            assert!(
                (card as f64 / DISTINCT - 1.0).abs() < 0.03,
                "{layout}: BF.CARD {card}, distinct {DISTINCT}"
            );
        }
        // Each layer of the union holds the items of that layer of every source, more than
        // it was sized for: its false-positive rate is higher than the sources', and BF.INFO
        // FPR estimates it from the bits.
        let probes = 20_000.0;
        let absent = mexists(&mut con, "u", &items("absent", probes as usize));
        let measured = absent.iter().filter(|&&f| f).count() as f64 / probes;
        let estimated = fpr(&mut con, "u");
        let sd = (estimated / probes).sqrt();
        assert!(
            (measured - estimated).abs() < 4.0 * sd + 0.002,
            "{layout}: measured {measured}, estimated {estimated}"
        );
        let source_rate = fpr(&mut con, "a");
        assert!(
            estimated > source_rate,
            "{layout}: {estimated} {source_rate}"
        );
        // It is a filter like any: it grows on adds, and its items stay.
        madd(&mut con, "u", &items("later", 5000));
        assert_union_holds(&mut con, "u", &sets);
        assert!(bf_info(&mut con, "u").filters > u.filters, "{layout}");
        // The sources are untouched.
        assert_eq!(bf_info(&mut con, "a"), a, "{layout}");
    }
}

#[test]
fn refused_merges_change_and_create_nothing() {
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "a", "0.01", 100));
    madd(&mut con, "a", &items("a", 500));
    con.ok(&cmd!("BF.RESERVE", "rate", "0.001", 100));
    con.ok(&cmd!("BF.RESERVE", "cap", "0.01", 1000));
    con.ok(&cmd!("BF.RESERVE", "exp", "0.01", 100, "EXPANSION", 4));
    con.ok(&cmd!("BF.RESERVE", "ns", "0.01", 100, "NONSCALING"));
    con.ok(&cmd!("SET", "str", "x"));
    con.ok(&cmd!("BF.RESERVE", "dest", "0.01", 100));
    madd(&mut con, "dest", &items("d", 50));
    let before = digest(&mut con, "dest");

    let cases: &[(&[&str], &str)] = &[
        (
            &["a", "rate"],
            "ERR incompatible filters: source 2 has error rate 0.001, source 1 has error rate \
             0.01",
        ),
        (
            &["a", "a", "cap"],
            "ERR incompatible filters: source 3 has capacity 1000, source 1 has capacity 100",
        ),
        (
            &["a", "exp"],
            "ERR incompatible filters: source 2 has expansion 4, source 1 has expansion 2",
        ),
        (
            &["ns", "a"],
            "ERR incompatible filters: source 2 has expansion 2, source 1 is non-scaling",
        ),
        (&["a", "missing"], "ERR not found"),
        (
            &["a", "str"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ];
    assert_refused_into_dest_and_new(&mut con, cases, &before);

    // A destination of another type is refused, not overwritten.
    assert_eq!(
        con.err_text(&cmd!("BF.MERGE", "str", "a")),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(con.q::<String>(&cmd!("GET", "str")), "x");
    // At least one source.
    assert_eq!(
        con.err_text(&cmd!("BF.MERGE", "dest")),
        "ERR wrong number of arguments for 'bf.merge' command"
    );
    // A classic filter and a blocked one do not merge.
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "classic"));
    con.ok(&cmd!("BF.RESERVE", "classic", "0.01", 100));
    assert_eq!(
        con.err_text(&cmd!("BF.MERGE", "new", "a", "classic")),
        "ERR incompatible filters: source 2 has classic (RedisBloom) layers, source 1 has \
         blocked layers"
    );
    assert!(!key_exists(&mut con, "new"));
}

/// Three classic filters loaded from headers a client wrote (RedisBloom's format lets each
/// layer have any plan): the second and third agree with the one-layer first on its layer and
/// differ from each other on their second. Refused whatever the order, creating nothing.
#[test]
fn sources_that_differ_past_the_first_source_s_layers_are_refused() {
    const CHAIN: usize = 20;
    const LAYER: usize = 53;
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "classic"));
    for (key, n) in [("one", 50), ("two", 300)] {
        con.ok(&cmd!("BF.RESERVE", key, "0.01", 100));
        madd(&mut con, key, &items(key, n));
    }
    // A layer planned for 600 items at the second layer's rate (0.005).
    con.ok(&cmd!("BF.RESERVE", "plan", "0.005", 600));
    let two = scandump(&mut con, "two");
    let plan = scandump(&mut con, "plan");
    assert_eq!(two[0].1.len(), CHAIN + 2 * LAYER);
    let second_size = u64::from_le_bytes(two[0].1[CHAIN + LAYER + 16..][..8].try_into().unwrap());
    // "two" with its second layer replaced by that plan, empty; the total follows.
    let mut header = two[0].1.clone();
    header[CHAIN + LAYER..].copy_from_slice(&plan[0].1[CHAIN..]);
    let items_of = |h: &[u8]| u64::from_le_bytes(h[..8].try_into().unwrap());
    let total = items_of(&header) - second_size;
    header[..8].copy_from_slice(&total.to_le_bytes());
    let mut odd = vec![(1, header)];
    odd.push(two[1].clone());
    common::loadchunks(&mut con, "odd", &odd);
    let capacities = |con: &mut redis::Connection, key: &str| -> Vec<u64> {
        layer_loads(con, key).iter().map(|&(c, _)| c).collect()
    };
    assert_eq!(capacities(&mut con, "two"), [100, 200]);
    assert_eq!(capacities(&mut con, "odd"), [100, 600]);
    con.ok(&cmd!("BF.RESERVE", "dest", "0.01", 100));
    let before = digest(&mut con, "dest");
    let cases: &[(&[&str], &str)] = &[
        (
            &["one", "two", "odd"],
            "ERR incompatible filters: layer 2 of source 3 has capacity 600, of source 2 200",
        ),
        (
            &["one", "odd", "two"],
            "ERR incompatible filters: layer 2 of source 3 has capacity 200, of source 2 600",
        ),
        (
            &["two", "one", "odd"],
            "ERR incompatible filters: layer 2 of source 3 has capacity 600, of source 1 200",
        ),
    ];
    assert_refused_into_dest_and_new(&mut con, cases, &before);
    // A pair that agrees still merges: "odd" holds the first layer of "two".
    con.ok(&cmd!("BF.MERGE", "new", "one", "odd"));
    let held: Vec<Vec<u8>> = items("one", 50)
        .into_iter()
        .chain(items("two", 100))
        .collect();
    assert!(mexists(&mut con, "new", &held).iter().all(|&f| f));
}

#[test]
fn the_destination_is_replaced_and_may_be_a_source() {
    let s = Server::start();
    let mut con = s.conn();
    let x = items("x", 400);
    let y = items("y", 900);
    con.ok(&cmd!("BF.RESERVE", "d", "0.01", 100));
    madd(&mut con, "d", &x);
    con.ok(&cmd!("BF.RESERVE", "y", "0.01", 100));
    madd(&mut con, "y", &y);
    // The destination as a source: the union of its own items and the other's.
    con.ok(&cmd!("BF.MERGE", "d", "d", "y"));
    assert!(mexists(&mut con, "d", &x).iter().all(|&f| f));
    assert!(mexists(&mut con, "d", &y).iter().all(|&f| f));
    // Merging a filter with itself leaves it exactly as it was, counts included.
    let before = (digest(&mut con, "d"), bf_info(&mut con, "d"));
    con.ok(&cmd!("BF.MERGE", "d", "d"));
    con.ok(&cmd!("BF.MERGE", "d", "d", "d"));
    assert_eq!((digest(&mut con, "d"), bf_info(&mut con, "d")), before);
    // A copy through BF.MERGE is the same filter.
    con.ok(&cmd!("BF.MERGE", "copy", "y"));
    assert_eq!(digest(&mut con, "copy"), digest(&mut con, "y"));

    // A destination that is not a source is replaced whole, whatever its parameters, and
    // loses its time to live as any overwritten key does.
    con.ok(&cmd!("BF.RESERVE", "old", "0.001", 50_000, "NONSCALING"));
    con.q::<i64>(&cmd!("EXPIRE", "old", 1000));
    con.ok(&cmd!("BF.MERGE", "old", "y"));
    assert_eq!(bf_info(&mut con, "old"), bf_info(&mut con, "y"));
    assert_eq!(digest(&mut con, "old"), digest(&mut con, "y"));
    assert_eq!(con.q::<i64>(&cmd!("TTL", "old")), -1);
}

#[test]
fn a_merge_over_the_per_filter_limit_or_maxmemory_is_refused_before_allocating() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    // About 12 MB of bits: more than the limit below.
    con.ok(&cmd!("BF.RESERVE", "big", "0.01", 10_000_000));
    madd(&mut con, "big", &items("b", 100));
    let size = bf_info(&mut con, "big").size;
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        1 << 20
    ));
    assert_eq!(
        con.err_text(&cmd!("BF.MERGE", "u", "big")),
        format!(
            "ERR the merged filter would need {size} bytes, over the per-filter limit \
             bf-max-filter-memory of {} bytes",
            1 << 20
        )
    );
    assert!(!key_exists(&mut con, "u"));
    con.ok(&cmd!(
        "CONFIG",
        "SET",
        &setting("bf-max-filter-memory"),
        "4gb"
    ));

    // maxmemory: room for much less than the union.
    con.ok(&cmd!("CONFIG", "SET", "maxmemory-policy", "noeviction"));
    let used = used_memory(&mut con);
    con.ok(&cmd!("CONFIG", "SET", "maxmemory", used + (2 << 20)));
    assert_eq!(con.err_text(&cmd!("BF.MERGE", "u", "big")), OOM);
    assert!(!key_exists(&mut con, "u"));
    assert!(
        used_memory(&mut con) < used + (1 << 20),
        "a refused merge allocated memory"
    );
    // What fits is merged.
    con.ok(&cmd!("BF.RESERVE", "small", "0.01", 1000));
    con.ok(&cmd!("BF.MERGE", "u", "small"));
    con.ok(&cmd!("CONFIG", "SET", "maxmemory", 0));
}

#[test]
fn a_replica_and_an_aof_replay_end_with_the_same_merged_filters() {
    require_own_server!();
    let mut primary = Server::builder()
        .config("repl-diskless-sync-delay", "0")
        .command_aof()
        .start();
    let replica = Server::builder().replica_of(&primary).start();
    wait_for_link(&replica);
    let mut p = primary.conn();
    common::wait_for_aof_rewrite(&mut p);
    for layout in ["blocked", "classic"] {
        p.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), layout));
        for k in ["a", "b", "c"] {
            p.q::<i64>(&cmd!("DEL", k));
        }
        let sets = three_sources(&mut p, &["0.01", "150"]);
        let dest = format!("u-{layout}");
        p.ok(&cmd!("BF.MERGE", &dest, "a", "b", "c"));
        // Into an existing destination that is also a source.
        p.ok(&cmd!("BF.MERGE", "a", "c", "a"));
        assert_union_holds(&mut p, &dest, &sets);
        assert_eq!(p.q::<i64>(&cmd!("WAIT", 1, 5000)), 1);
        let mut r = replica.conn();
        for k in [dest.as_str(), "a"] {
            assert_eq!(digest(&mut r, k), digest(&mut p, k), "{layout}: {k}");
            // BF.INFO's Size follows each server's bf-layout setting (RedisBloom's figure in
            // classic mode): the rest is the filter's.
            let figures = |i: common::BfInfo| (i.capacity, i.filters, i.items, i.expansion);
            assert_eq!(
                figures(bf_info(&mut r, k)),
                figures(bf_info(&mut p, k)),
                "{layout}: {k}"
            );
        }
    }
    let keys = ["u-blocked", "u-classic", "a"];
    let before: Vec<String> = keys.iter().map(|k| digest(&mut p, k)).collect();
    let dataset: String = p.q(&cmd!("DEBUG", "DIGEST"));
    // The AOF holds the BF.MERGE commands themselves; replayed, they build the same bits.
    primary.restart(Stop::NoSave);
    let mut p = primary.conn();
    let after: Vec<String> = keys.iter().map(|k| digest(&mut p, k)).collect();
    assert_eq!(after, before, "AOF replay");
    assert_eq!(p.q::<String>(&cmd!("DEBUG", "DIGEST")), dataset);
}

/// A union of sources that filled the same layers, checked after every way a filter is
/// loaded: each must rebuild it whole, answering every item alike.
#[test]
fn a_union_of_full_sources_survives_reload_restore_full_sync_aof_rewrite_and_loadchunk() {
    require_own_server!();
    let mut s = Server::builder()
        .config("appendonly", "yes")
        .config("aof-use-rdb-preamble", "no")
        .start();
    let mut con = s.conn();
    common::wait_for_aof_rewrite(&mut con);
    let mut probes = Vec::new();
    let mut unions = Vec::new();
    for layout in ["blocked", "classic"] {
        con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), layout));
        for source in ["a", "b"] {
            let (key, set) = (format!("{layout}:{source}"), items(source, 1000));
            con.ok(&cmd!("BF.RESERVE", &key, "0.01", 100));
            madd(&mut con, &key, &set);
            probes.extend(set);
        }
        let union = format!("{layout}:u");
        con.ok(&cmd!(
            "BF.MERGE",
            &union,
            format!("{layout}:a"),
            format!("{layout}:b")
        ));
        // Both sources filled the first layers: a blocked layer counts its capacity, a
        // classic one (RedisBloom's data) keeps the estimate, over its capacity.
        let loads = layer_loads(&mut con, &union);
        assert!(loads.len() >= 4, "{layout}: {loads:?}");
        let over = loads.iter().any(|&(capacity, n)| n > capacity);
        assert_eq!(over, layout == "classic", "{layout}: {loads:?}");
        unions.push(union);
    }
    // The setting's default, as after the restart and on the replica: BF.INFO's Size of a
    // classic filter follows it.
    con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "blocked"));
    probes.extend(items("absent", 5000));
    let state = |con: &mut redis::Connection, key: &str| {
        assert!(key_exists(con, key), "{key} is gone");
        (bf_info(con, key), mexists(con, key, &probes))
    };
    let want: Vec<_> = unions.iter().map(|u| state(&mut con, u)).collect();
    let digests: Vec<String> = unions.iter().map(|u| digest(&mut con, u)).collect();
    let check = |con: &mut redis::Connection, suffix: &str, how: &str| {
        for ((u, want), d) in unions.iter().zip(&want).zip(&digests) {
            let key = format!("{u}{suffix}");
            assert_eq!(&state(con, &key), want, "{how}: {key}");
            assert_eq!(&digest(con, &key), d, "{how}: {key}");
        }
    };

    con.ok(&cmd!("DEBUG", "RELOAD"));
    check(&mut con, "", "DEBUG RELOAD");
    for u in &unions {
        let payload: Vec<u8> = con.q(&cmd!("DUMP", u));
        con.ok(&cmd!(
            "RESTORE",
            format!("{u}:restored"),
            0,
            payload.as_slice()
        ));
        let chunks = scandump(&mut con, u);
        common::loadchunks(&mut con, &format!("{u}:loaded"), &chunks);
    }
    check(&mut con, ":restored", "DUMP + RESTORE");
    check(&mut con, ":loaded", "SCANDUMP + LOADCHUNK");
    {
        // A full sync sends the RDB.
        let replica = Server::builder().replica_of(&s).start();
        wait_for_link(&replica);
        check(&mut replica.conn(), "", "full sync");
    }
    con.q::<String>(&cmd!("BGREWRITEAOF"));
    common::wait_for_aof_rewrite(&mut con);
    drop(con);
    s.restart(Stop::NoSave);
    let mut con = s.conn();
    check(&mut con, "", "BGREWRITEAOF + restart");
    check(&mut con, ":loaded", "BGREWRITEAOF + restart");
}

#[test]
fn a_merge_sends_a_bf_merge_event_for_the_destination() {
    require_own_server!();
    let s = Server::builder()
        .config("notify-keyspace-events", "gE")
        .start();
    let mut ev = Events::subscribe(&s, "bf.*");
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "a", "0.01", 100));
    con.ok(&cmd!("BF.MERGE", "d", "a"));
    con.ok(&cmd!("BF.MERGE", "d", "d", "a"));
    // A refused merge sends nothing.
    con.err_text(&cmd!("BF.MERGE", "d", "missing"));
    let want = events(&[("bf.reserve", "a"), ("bf.merge", "d"), ("bf.merge", "d")]);
    assert_eq!(ev.drain(), want);
}

#[test]
fn replies_are_ok_in_resp2_and_resp3() {
    let s = Server::start();
    let mut two = s.conn();
    let mut three = s.conn_resp3();
    two.ok(&cmd!("BF.RESERVE", "a", "0.01", 100));
    for con in [&mut two, &mut three] {
        let v = con.raw(&cmd!("BF.MERGE", "d", "a"));
        let ok = matches!(&v, Value::Okay) || matches!(&v, Value::SimpleString(t) if t == "OK");
        assert!(ok, "{v:?}");
        let e = con.raw(&cmd!("BF.MERGE", "d", "missing"));
        assert_eq!(common::error_of(&e).as_deref(), Some("ERR not found"));
    }
}

/// The fields of a map reply (RESP2: a flat array).
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(xs) => xs
            .chunks(2)
            .map(|p| (common::text_of(&p[0]).unwrap_or_default(), p[1].clone()))
            .collect(),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| (common::text_of(k).unwrap_or_default(), v.clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

#[test]
fn command_getkeys_names_the_destination_and_every_source() {
    let s = Server::start();
    let mut con = s.conn();
    let keys: Vec<String> = con.q(&cmd!("COMMAND", "GETKEYS", "BF.MERGE", "d", "s1", "s2"));
    assert_eq!(keys, ["d", "s1", "s2"]);
    // COMMAND INFO: keys from 1 to the last; the destination overwritten, the sources read.
    let v = con.raw(&cmd!("COMMAND", "INFO", "BF.MERGE"));
    let Value::Array(outer) = &v else {
        panic!("{v:?}")
    };
    let Value::Array(info) = &outer[0] else {
        panic!("{v:?}")
    };
    assert_eq!(info[3..6], [Value::Int(1), Value::Int(-1), Value::Int(1)]);
    let Value::Array(specs) = &info[8] else {
        panic!("{info:?}")
    };
    assert_eq!(specs.len(), 2, "{specs:?}");
    let flags = |spec: &Value| -> Vec<String> {
        let pairs = pairs(spec);
        let flags = pairs.iter().find(|(k, _)| k == "flags").unwrap().1.clone();
        redis::from_redis_value(flags).unwrap()
    };
    assert_eq!(flags(&specs[0]), ["OW", "update"]);
    assert_eq!(flags(&specs[1]), ["RO", "access"]);
    // COMMAND DOCS: each key argument points at its key spec; the sources repeat.
    let v = con.raw(&cmd!("COMMAND", "DOCS", "BF.MERGE"));
    let doc = pairs(&pairs(&v)[0].1);
    let Some((_, Value::Array(arguments))) = doc.iter().find(|(k, _)| k == "arguments") else {
        panic!("{doc:?}")
    };
    let field = |arg: &Value, name: &str| -> Value {
        pairs(arg).into_iter().find(|(k, _)| k == name).unwrap().1
    };
    assert_eq!(field(&arguments[0], "key_spec_index"), Value::Int(0));
    assert_eq!(field(&arguments[1], "key_spec_index"), Value::Int(1));
    let source_flags: Vec<String> = redis::from_redis_value(field(&arguments[1], "flags")).unwrap();
    assert_eq!(source_flags, ["multiple"]);
}

/// A merged classic filter is RedisBloom's data: dumped with BF.SCANDUMP and loaded into
/// RedisBloom 2.8.2 with BF.LOADCHUNK, it answers every item as layerbloom does.
#[test]
fn a_merged_classic_filter_loads_into_redisbloom_and_answers_the_same() {
    require_own_server!();
    let Some(path) = redisbloom_path() else {
        eprintln!("skipped: RedisBloom's module is not there");
        return;
    };
    let rb = match Server::builder().module(&path).try_start() {
        Ok(rb) => rb,
        Err(e) => {
            eprintln!("skipped: RedisBloom does not load on this server: {e}");
            return;
        }
    };
    let s = Server::builder()
        .module_args(&["bf-layout", "classic"])
        .start();
    let mut con = s.conn();
    let sets = three_sources(&mut con, &["0.01", "100"]);
    con.ok(&cmd!("BF.MERGE", "u", "a", "b", "c"));
    let chunks = scandump(&mut con, "u");
    let mut theirs = rb.conn();
    common::loadchunks(&mut theirs, "u", &chunks);
    // Layers that several sources filled count more than their capacity, which RedisBloom's
    // loader takes.
    assert!(layer_loads(&mut con, "u").iter().any(|&(c, n)| n > c));
    let ours = bf_info(&mut con, "u");
    let rb_info = bf_info(&mut theirs, "u");
    assert_eq!(
        (
            rb_info.capacity,
            rb_info.filters,
            rb_info.items,
            rb_info.expansion
        ),
        (ours.capacity, ours.filters, ours.items, ours.expansion)
    );
    assert_eq!(
        theirs.q::<i64>(&cmd!("BF.CARD", "u")),
        con.q::<i64>(&cmd!("BF.CARD", "u"))
    );
    let mut probes: Vec<Vec<u8>> = sets.concat();
    probes.extend(items("absent", 20_000));
    assert_eq!(
        mexists(&mut theirs, "u", &probes),
        mexists(&mut con, "u", &probes)
    );
    assert_union_holds(&mut theirs, "u", &sets);
}

/// A union's layer may hold more items than it was sized for (each source filled it): such a
/// filter (a classic one counts them all, a blocked one its capacity) reloads from the RDB and
/// copies through BF.SCANDUMP / BF.LOADCHUNK exactly.
#[test]
fn a_union_fuller_than_its_layers_reloads_and_copies_exactly() {
    require_own_server!();
    for layout in ["blocked", "classic"] {
        let s = Server::start();
        let mut con = s.conn();
        con.ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), layout));
        con.ok(&cmd!("BF.RESERVE", "a", "0.01", 100));
        con.ok(&cmd!("BF.RESERVE", "b", "0.01", 100));
        madd(&mut con, "a", &items("a", 90));
        madd(&mut con, "b", &items("b", 90));
        con.ok(&cmd!("BF.MERGE", "u", "a", "b"));
        let info = bf_info(&mut con, "u");
        assert_eq!(info.filters, 1, "{layout}");
        if layout == "classic" {
            assert!(info.items > info.capacity, "{layout}: {info:?}");
        } else {
            // A blocked layer counts at most its capacity (see the core's merge notes).
            assert_eq!(info.items, info.capacity, "{layout}: {info:?}");
        }
        let want = digest(&mut con, "u");
        con.ok(&cmd!("DEBUG", "RELOAD"));
        assert_eq!(digest(&mut con, "u"), want, "{layout}: after DEBUG RELOAD");
        let chunks = scandump(&mut con, "u");
        common::loadchunks(&mut con, "copy", &chunks);
        assert_eq!(digest(&mut con, "copy"), want, "{layout}: a SCANDUMP copy");
        assert_eq!(
            bf_info(&mut con, "copy"),
            bf_info(&mut con, "u"),
            "{layout}"
        );
    }
}

//! The glue's bounds a hostile client (or a RedisBloom primary) tests, issue 23 items 6 to 10:
//! error rates carried by a RedisBloom primary or its AOF, COPY held to the limits, eviction
//! policies that cannot make room, log lines a client can repeat, and the README's figures.

use crate::common;

use std::path::Path;

use common::{bf_info, copy_tree, error_of, redisbloom_path, Exec, Server};

// ---------------------------------------------------------------------------------------------
// 9. Error rates above a quarter from a RedisBloom primary or its AOF
// ---------------------------------------------------------------------------------------------

/// Creations with error rates RedisBloom 2.8 keeps and layerbloom lowers for its own clients,
/// then adds past the first layers (the tightened layers follow the rate too).
const RATES_ABOVE_A_QUARTER: [&str; 4] = [
    "BF.RESERVE r3 0.3 10 EXPANSION 1",
    "BF.INSERT i5 ERROR 0.5 ITEMS a b c",
    "BF.INSERT i9 CAPACITY 20 ERROR 0.9 EXPANSION 2 ITEMS a b c",
    "BF.INSERT n7 CAPACITY 50 ERROR 0.7 NONSCALING ITEMS a",
];
const RATE_KEYS: [&str; 4] = ["r3", "i5", "i9", "n7"];

fn words(line: &str) -> redis::Cmd {
    let mut c = redis::cmd(line.split(' ').next().unwrap());
    for w in line.split(' ').skip(1) {
        c.arg(w);
    }
    c
}

fn rate_items(key: &str) -> Vec<Vec<u8>> {
    common::items(&format!("{key}-item"), 60)
}

/// Runs the creations and adds of [`RATES_ABOVE_A_QUARTER`] on `con`.
fn write_high_rates(con: &mut redis::Connection) {
    for line in RATES_ABOVE_A_QUARTER {
        let v = con.raw(&words(line));
        assert!(error_of(&v).is_none(), "{line}: {v:?}");
    }
    for key in RATE_KEYS {
        // A non-scaling filter's refusals are part of what is compared.
        let _ = con.raw(&cmd!("BF.MADD", key, rate_items(key)));
    }
}

/// Everything a client can read of the filters: BF.DEBUG (each layer's rate, hashes and
/// bits), BF.INFO but its Size, the SCANDUMP stream and the answers to the items and to strangers.
fn rate_view(con: &mut redis::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for key in RATE_KEYS {
        out.push(format!("{key} {:?}", con.raw(&cmd!("BF.DEBUG", key))));
        // Size is RedisBloom's own figure only in classic mode (docs/compatibility.md), a server setting.
        let info = bf_info(con, key);
        out.push(format!("{key} {:?}", common::BfInfo { size: 0, ..info }));
        out.push(format!("{key} {:?}", common::scandump(con, key)));
        let mut probe = rate_items(key);
        probe.extend(common::items("stranger", 200));
        out.push(format!("{key} {:?}", common::mexists(con, key, &probe)));
    }
    out
}

fn redisbloom_or_skip(builder: common::Builder) -> Option<Server> {
    let Some(path) = redisbloom_path() else {
        eprintln!("skipped: RedisBloom's module is not available");
        return None;
    };
    match builder.module(&path).try_start() {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("skipped: RedisBloom does not load on this server: {e}");
            None
        }
    }
}

/// A RedisBloom 2.8 primary's creations above a quarter reach a layerbloom replica as the
/// commands the client sent: the replica builds them as RedisBloom did (classic, the rate
/// kept), not capped.
#[test]
fn a_replica_of_redisbloom_keeps_the_error_rates_it_is_sent() {
    require_own_server!();
    let Some(primary) = redisbloom_or_skip(Server::builder()) else {
        return;
    };
    let replica = Server::builder().replica_of(&primary).start();
    common::wait_for_link(&replica);
    let mut p = primary.conn();
    write_high_rates(&mut p);
    assert_eq!(p.q::<i64>(&cmd!("WAIT", 1, 10_000)), 1);
    let mut r = replica.conn();
    assert_eq!(rate_view(&mut r), rate_view(&mut p));
}

/// The same commands replayed from a RedisBloom AOF.
#[test]
fn a_redisbloom_aof_keeps_its_error_rates() {
    require_own_server!();
    let Some(rb) = redisbloom_or_skip(
        Server::builder()
            .command_aof()
            .config("appendfsync", "always"),
    ) else {
        return;
    };
    let mut p = rb.conn();
    write_high_rates(&mut p);
    let aof_dir = rb.dir().join("appendonlydir");
    let mut lb = Server::builder().command_aof().start();
    lb.kill();
    let to = lb.dir().join("appendonlydir");
    let _ = std::fs::remove_dir_all(&to);
    copy_tree(Path::new(&aof_dir), &to);
    lb.start_again();
    let mut l = lb.conn();
    assert_eq!(rate_view(&mut l), rate_view(&mut p));
}

/// A layerbloom primary lowers a client's rate to a quarter and its replica and AOF hold the
/// rate it used (the creation is replicated as the new filter's header).
#[test]
fn a_layerbloom_primary_replicates_the_rate_it_used() {
    require_own_server!();
    // appendfsync always: the AOF is on disk when it is copied (everysec may hold writes).
    let primary = Server::builder()
        .module_args(&["bf-layout", "classic"])
        .command_aof()
        .config("appendfsync", "always")
        .start();
    let replica = Server::builder().replica_of(&primary).start();
    common::wait_for_link(&replica);
    let mut p = primary.conn();
    write_high_rates(&mut p);
    assert_eq!(p.q::<i64>(&cmd!("WAIT", 1, 10_000)), 1);
    // The rate used: a quarter, tightened by half for the first layer of a scaling filter.
    let debug = format!("{:?}", p.raw(&cmd!("BF.DEBUG", "i5")));
    assert!(debug.contains("ratio:0.125"), "{debug}");
    let mut r = replica.conn();
    let view = rate_view(&mut p);
    assert_eq!(rate_view(&mut r), view);
    let mut aof = Server::builder().command_aof().start();
    aof.kill();
    let to = aof.dir().join("appendonlydir");
    let _ = std::fs::remove_dir_all(&to);
    copy_tree(&primary.dir().join("appendonlydir"), &to);
    aof.start_again();
    assert_eq!(rate_view(&mut aof.conn()), view);
}

// ---------------------------------------------------------------------------------------------
// 6. COPY held to maxmemory and the per-filter limit, and as lazy as its source
// ---------------------------------------------------------------------------------------------

fn rss(con: &mut redis::Connection) -> i64 {
    common::info_i64(con, "memory", "used_memory_rss")
}

/// A COPY the server has no room for is refused (the server's own error: a module's copy
/// callback cannot choose it), creates nothing and allocates nothing; the log says why.
#[test]
fn a_copy_past_maxmemory_is_refused() {
    require_own_server!();
    let s = Server::builder()
        .config("maxmemory-policy", "noeviction")
        .start();
    let mut con = s.conn();
    // Hundreds of MB, never touched (nothing resident); then 50 MB left under maxmemory.
    con.ok(&cmd!("BF.RESERVE", "big", 0.001, 200_000_000u64));
    con.ok(&cmd!("CF.RESERVE", "cbig", 100_000_000u64));
    let used = common::used_memory(&mut con);
    con.ok(&cmd!("CONFIG", "SET", "maxmemory", used + (50 << 20)));
    for (source, copy) in [("big", "big2"), ("cbig", "cbig2")] {
        let err = con.err_text(&cmd!("COPY", source, copy));
        assert!(err.contains("copy"), "COPY {source}: {err}");
        assert!(!common::key_exists(&mut con, copy));
    }
    let grown = common::used_memory(&mut con) - used;
    assert!(grown < 1 << 20, "used_memory grew by {grown} bytes");
    assert!(
        s.log().contains("COPY refused") && s.log().contains("maxmemory"),
        "the log does not say why"
    );
    // A copy that fits is made.
    con.ok(&cmd!("BF.RESERVE", "small", 0.01, 1000));
    assert_eq!(con.q::<i64>(&cmd!("COPY", "small", "small2")), 1);
}

/// A copy of a filter over `bf-max-filter-memory` (lowered after the source was made) is
/// refused as its creation would be.
#[test]
fn a_copy_past_the_filter_limit_is_refused() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "f", 0.01, 1_000_000));
    con.ok(&cmd!("CF.RESERVE", "c", 1_000_000));
    con.ok(&cmd!("CONFIG", "SET", "bf.bf-max-filter-memory", "64kb"));
    for (source, copy) in [("f", "f2"), ("c", "c2")] {
        con.err_text(&cmd!("COPY", source, copy));
        assert!(!common::key_exists(&mut con, copy));
    }
    assert!(s.log().contains("bf-max-filter-memory"));
    con.ok(&cmd!("CONFIG", "SET", "bf.bf-max-filter-memory", "4gb"));
    assert_eq!(con.q::<i64>(&cmd!("COPY", "f", "f2")), 1);
}

/// The copy of a reserved filter with a few items is as lazy as its source: its untouched
/// pages are not written (used to make the whole copy resident), and it answers alike.
#[test]
fn a_copy_stays_as_lazy_as_its_source() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    con.ok(&cmd!("BF.RESERVE", "big", 0.001, 150_000_000u64));
    con.ok(&cmd!("CF.RESERVE", "cbig", 200_000_000u64));
    let items = common::items("lazy", 100);
    common::madd(&mut con, "big", &items);
    for it in &items {
        con.q::<i64>(&cmd!("CF.ADD", "cbig", it.as_slice()));
    }
    let before = rss(&mut con);
    let start = std::time::Instant::now();
    assert_eq!(con.q::<i64>(&cmd!("COPY", "big", "big2")), 1);
    assert_eq!(con.q::<i64>(&cmd!("COPY", "cbig", "cbig2")), 1);
    let took = start.elapsed();
    let grown = rss(&mut con) - before;
    // 270 MB and 200 MB copied; 100 items touch at most 200 pages each.
    assert!(grown < 20 << 20, "used_memory_rss grew by {grown} bytes");
    eprintln!("two copies: {took:?}, {grown} bytes resident");
    assert_eq!(
        common::digest(&mut con, "big2"),
        common::digest(&mut con, "big")
    );
    assert_eq!(
        common::digest(&mut con, "cbig2"),
        common::digest(&mut con, "cbig")
    );
    let mut probe = items.clone();
    probe.extend(common::items("stranger", 100));
    assert_eq!(
        common::mexists(&mut con, "big2", &probe),
        common::mexists(&mut con, "big", &probe)
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Eviction policies with nothing to evict
// ---------------------------------------------------------------------------------------------

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Under `volatile-*` with no key that has a TTL, Redis can evict nothing: a creation past
/// what is left under `maxmemory` is refused as under `noeviction` (it used to be accepted,
/// taking used memory far past maxmemory). With a key that has a TTL, or under `allkeys-*`,
/// Redis makes room as for any write, and the creation is accepted.
#[test]
fn a_creation_is_refused_when_the_eviction_policy_has_nothing_to_evict() {
    require_own_server!();
    let s = Server::builder()
        .config("maxmemory", "200mb")
        .config("maxmemory-policy", "volatile-lru")
        .start();
    let mut con = s.conn();
    // About 150 MB of keys without a TTL.
    con.ok(&cmd!("DEBUG", "POPULATE", 140_000, "plain", 1000));
    let used = common::used_memory(&mut con);
    assert!(used > 140 << 20, "used_memory {used}");
    // About 96 MB and 128 MB: past what is left.
    let creations = [
        cmd!("BF.RESERVE", "mid", 0.01, 80_000_000u64),
        cmd!("BF.INSERT", "ins", "CAPACITY", 80_000_000u64, "ITEMS", "a"),
        cmd!("CF.RESERVE", "cmid", 120_000_000u64),
    ];
    for policy in [
        "volatile-lru",
        "volatile-ttl",
        "volatile-random",
        "noeviction",
    ] {
        con.ok(&cmd!("CONFIG", "SET", "maxmemory-policy", policy));
        for c in &creations {
            let err = con.err_text(c);
            assert_eq!(err, OOM, "{policy}: {}", common::show(c));
        }
        assert_eq!(con.q::<i64>(&cmd!("EXISTS", "mid", "ins", "cmid")), 0);
    }
    let grown = common::used_memory(&mut con) - used;
    assert!(grown < 4 << 20, "used_memory grew by {grown} bytes");
    // Small creations still fit.
    con.ok(&cmd!("BF.RESERVE", "small", 0.01, 1000));
    // A key with a TTL: Redis can evict, as under allkeys-*: accepted (Redis evicts after).
    for (policy, ttl_key) in [("volatile-lru", true), ("allkeys-lru", false)] {
        con.ok(&cmd!("CONFIG", "SET", "maxmemory-policy", policy));
        if ttl_key {
            con.ok(&cmd!("SET", "ttl", "v", "EX", 1000));
        }
        con.ok(&cmd!(
            "BF.RESERVE",
            format!("mid-{policy}"),
            0.01,
            80_000_000u64
        ));
        con.q::<i64>(&cmd!("DEL", format!("mid-{policy}")));
    }
}

// ---------------------------------------------------------------------------------------------
// 8. Log lines a client can repeat
// ---------------------------------------------------------------------------------------------

/// Lines of the server log that contain `text`.
fn log_lines(s: &Server, text: &str) -> usize {
    s.log().lines().filter(|l| l.contains(text)).count()
}

/// Refused RESTOREs and accepted RESTOREs whose item total is repaired each wrote a line:
/// thousands of them wrote thousands of lines. They go through a rate limit now (at most 10
/// a second of each kind, and one line saying how many were left out).
#[test]
fn restores_a_client_repeats_write_a_bounded_number_of_log_lines() {
    require_own_server!();
    let s = Server::start();
    let mut con = s.conn();
    let chain = common::RbChain::sample();
    // Refused: 0 layers.
    let mut refused = chain.clone();
    refused.layers.clear();
    let refused = refused.payload(4);
    // Accepted, with an item total that is not the layers' sum (RedisBloom's loader keeps it;
    // layerbloom recounts and says so).
    let mut odd = chain.clone();
    odd.items = 7;
    let odd = odd.payload(4);
    let n = 2000;
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("RESTORE")
            .arg(format!("bad{i}"))
            .arg(0)
            .arg(refused.as_slice())
            .ignore();
        pipe.cmd("RESTORE")
            .arg(format!("odd{i}"))
            .arg(0)
            .arg(odd.as_slice())
            .ignore();
    }
    let _: redis::RedisResult<()> = pipe.query(&mut con);
    assert_eq!(con.q::<i64>(&cmd!("EXISTS", "bad0", "odd0")), 1, "premise");
    common::assert_pong(&mut con);
    let lines = log_lines(&s, "layerbloom:");
    // At most 10 a second per kind; the run takes a few seconds at most.
    assert!(lines < 200, "{lines} log lines for {} RESTOREs", 2 * n);
    eprintln!("{lines} log lines for {} RESTOREs", 2 * n);
}

// ---------------------------------------------------------------------------------------------
// 10. Small things
// ---------------------------------------------------------------------------------------------

/// CF.SCANDUMP checks its iterator before the key, as RedisBloom does: `CF.SCANDUMP <missing>
/// -1` is `Invalid position` (it was `not found`), on a key of another type too.
#[test]
fn cf_scandump_checks_the_iterator_before_the_key_as_redisbloom_does() {
    require_own_server!();
    let Some(rb) = redisbloom_or_skip(Server::builder()) else {
        return;
    };
    let lb = Server::start();
    let mut answers = Vec::new();
    for s in [&rb, &lb] {
        let mut con = s.conn();
        con.ok(&cmd!("SET", "str", "v"));
        con.ok(&cmd!("CF.RESERVE", "c", 100));
        let mut got = Vec::new();
        for key in ["missing", "str", "c"] {
            for it in ["-1", "abc", "0", "99999999"] {
                let v = con.raw(&cmd!("CF.SCANDUMP", key, it));
                got.push(format!(
                    "{key} {it}: {:?}",
                    error_of(&v).unwrap_or_default()
                ));
            }
        }
        answers.push(got);
    }
    assert_eq!(answers[1], answers[0]);
    assert!(
        answers[1][0].contains("Invalid position"),
        "{:?}",
        answers[1]
    );
}

/// The README's example session (the fenced block that starts with `$ redis-cli`), run
/// command by command through `redis-cli` against a fresh server: every reply must read as
/// the README shows it, so its figures (Size, HEALTH) cannot drift.
#[test]
fn the_readme_session_answers_as_the_readme_shows() {
    require_own_server!();
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let block: Vec<&str> = readme
        .split("```")
        .skip(1)
        .step_by(2)
        .find(|b| b.trim_start().starts_with("$ redis-cli"))
        .expect("the README has a session starting with `$ redis-cli`")
        .lines()
        .skip_while(|l| !l.starts_with("127.0.0.1:6379> "))
        .collect();
    let s = Server::start();
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in block {
        match line.strip_prefix("127.0.0.1:6379> ") {
            Some(command) => steps.push((command.to_string(), Vec::new())),
            None if !line.is_empty() => steps.last_mut().unwrap().1.push(line.to_string()),
            None => {}
        }
    }
    assert!(steps.len() >= 10, "{} commands found", steps.len());
    let mut diffs = Vec::new();
    for (command, shown) in &steps {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &s.port().to_string(), "--no-raw"])
            .args(command.split_whitespace())
            .output()
            .expect("redis-cli runs");
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        if &got != shown {
            diffs.push(format!(
                "{command}\nREADME:\n{}\nserver:\n{}",
                shown.join("\n"),
                got.join("\n")
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "README session differs:\n{}",
        diffs.join("\n\n")
    );
}

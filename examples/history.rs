//! Side by side against our own history: the working tree's module and an earlier build of it
//! (by default the last release, `RELEASE`), each in its own server of the same binary, the
//! same filters filled by the same adds in each, the same command streams, the server's CPU
//! time per call, interleaved rounds; then again with fresh servers, `--runs` times.
//! Prints each workload's ratio (working tree over earlier build, >1 is faster) per run, its
//! median and its spread across runs. A measurement: it never passes or fails on a timing.
//!
//! `scripts/bench-history.sh` builds the earlier commit and runs this (`make bench-history`).
//! Directly: `cargo run --release --example history -- --base old.so --ours new.so
//! [--server redis-server] [--items N] [--fill N] [--runs R] [--rounds K] [--commands C]`
//! (defaults: large filters of capacity 10^8, filled with 10^7 items by adds; their bit and
//! slot arrays are the size of 10^8 items', which is what a lookup's TLB and cache misses see;
//! 5 runs of 5 rounds, 2000 calls per batch stream and 20000 per single-item stream).
//!
//! The large filters are filled by adds, as a user fills them, never loaded from chunks: how
//! an array filled in place is backed (4 KiB or 2 MiB pages) is what once made single lookups
//! a quarter slower (docs/BENCHMARKS.md). Workloads the earlier build has no command for (CF,
//! WINDOW before they existed) are shown as such.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Opts {
    base: PathBuf,
    ours: PathBuf,
    server: String,
    items: u64,
    fill: u64,
    runs: usize,
    rounds: usize,
    commands: usize,
    label: String,
}

fn opts() -> Opts {
    let mut o = Opts {
        base: PathBuf::new(),
        ours: PathBuf::from("target/release/liblayerbloom.so"),
        server: "redis-server".into(),
        items: 100_000_000,
        fill: 10_000_000,
        runs: 5,
        rounds: 5,
        commands: 2000,
        label: "earlier build".into(),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--base" => o.base = v.into(),
            "--ours" => o.ours = v.into(),
            "--server" => o.server = v,
            "--items" => o.items = v.parse().expect("--items N"),
            "--fill" => o.fill = v.parse().expect("--fill N"),
            "--runs" => o.runs = v.parse().expect("--runs R"),
            "--rounds" => o.rounds = v.parse().expect("--rounds K"),
            "--commands" => o.commands = v.parse().expect("--commands C"),
            "--label" => o.label = v,
            other => panic!("unknown argument {other}"),
        }
    }
    for m in [&mut o.base, &mut o.ours] {
        *m = std::fs::canonicalize(&*m).unwrap_or_else(|_| panic!("no module at {}", m.display()));
    }
    o
}

/// A server of the chosen binary with one module, on a free loopback port, killed on drop.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Server {
    fn start(binary: &str, module: &std::path::Path) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("layerbloom-history-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--loadmodule")
            .arg(module)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e}"));
        let s = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(s.addr()).is_err() {
            assert!(Instant::now() < deadline, "{binary} did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    /// The process's memory in huge pages (`AnonHugePages` of `/proc/<pid>/smaps`), MiB.
    fn huge_mib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/smaps", self.child.id()))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("AnonHugePages:"))
            .filter_map(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .sum::<u64>()
            >> 10
    }

    /// The main thread's time on a CPU so far, ns (it runs every command).
    fn cpu_ns(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/schedstat", self.child.id()))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .expect("/proc/<pid>/schedstat")
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// One command's reply, as text lines (enough for status, integers, INFO and errors).
    fn call(&self, args: &[&[u8]]) -> String {
        let mut stream = Vec::new();
        encode(&mut stream, args);
        let mut con = TcpStream::connect(self.addr()).unwrap();
        con.write_all(&stream).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 1 << 16];
        loop {
            let n = con.read(&mut buf).unwrap();
            out.extend_from_slice(&buf[..n]);
            if n == 0 || complete(&out) {
                break;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn info(&self, section: &str, field: &str) -> f64 {
        let text = self.call(&[b"INFO", section.as_bytes()]);
        let prefix = format!("{field}:");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `out` holds one whole reply (a bulk string or a single line).
fn complete(out: &[u8]) -> bool {
    if out.first() == Some(&b'$') {
        let Some(end) = out.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let len: i64 = std::str::from_utf8(&out[1..end]).unwrap().parse().unwrap();
        return len < 0 || out.len() >= end + 2 + len as usize + 2;
    }
    out.ends_with(b"\r\n")
}

fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Sends a stream of commands while a second thread reads `lines` reply lines; panics on an
/// error reply.
fn blast(addr: &str, stream: &[u8], lines: usize) {
    let mut writer = TcpStream::connect(addr).unwrap();
    writer.set_nodelay(true).unwrap();
    let mut reader = writer.try_clone().unwrap();
    let replies = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let (mut read, mut line_start) = (0, true);
        while read < lines {
            let n = reader.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed the connection");
            for &b in &buf[..n] {
                if line_start && b == b'-' {
                    let end = buf[..n].len().min(200);
                    panic!("an error reply: {}", String::from_utf8_lossy(&buf[..end]));
                }
                line_start = b == b'\n';
                read += usize::from(line_start);
            }
        }
    });
    writer.write_all(stream).unwrap();
    replies.join().expect("every reply read");
}

/// Calls per second of the server's CPU time for a stream: the main thread's time on a CPU
/// (`/proc/<pid>/schedstat`, ns) across the stream over the calls. Not `INFO commandstats`:
/// its `usec` is wall time, which on a loaded machine counts every preemption in the middle
/// of a command (measured here at a load of 12 on 2 cores: rounds of one run 0.2x to 8x
/// apart). CPU time includes reading and parsing the commands and writing the replies,
/// the same work in both servers.
fn server_rate(s: &Server, stream: &[u8], lines: usize, calls: usize) -> f64 {
    let before = s.cpu_ns();
    blast(&s.addr(), stream, lines);
    calls as f64 / (s.cpu_ns() - before) as f64 * 1e9
}

/// A stream of `calls` commands `command key [ITEMS] items...`, `per_call` items each from
/// `item`, and the reply lines it gets.
fn stream(
    command: &str,
    key: &str,
    per_call: usize,
    calls: usize,
    item: &mut dyn FnMut() -> Vec<u8>,
) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    for _ in 0..calls {
        let items: Vec<Vec<u8>> = (0..per_call).map(|_| item()).collect();
        let mut args: Vec<&[u8]> = vec![command.as_bytes(), key.as_bytes()];
        if command.ends_with(".INSERT") {
            args.push(b"ITEMS");
        }
        args.extend(items.iter().map(Vec::as_slice));
        encode(&mut out, &args);
    }
    let lines = calls * if per_call > 1 { per_call + 1 } else { 1 };
    (out, lines)
}

fn present(i: u64) -> Vec<u8> {
    format!("in:{i:012}").into_bytes()
}

/// The filters of one run, created and filled alike in each server.
struct Filter {
    key: &'static str,
    create: Vec<String>,
    add: &'static str,
    fill: u64,
}

fn filters(o: &Opts, headroom: u64) -> Vec<Filter> {
    let f = |key, create: &[&str], add, fill| Filter {
        key,
        create: create.iter().map(|s| s.to_string()).collect(),
        add,
        fill,
    };
    let big = (o.items + headroom).to_string();
    let cf_big = (o.items + headroom).to_string();
    vec![
        f(
            "big",
            &["BF.RESERVE", "big", "0.001", &big],
            "BF.MADD",
            o.fill,
        ),
        f(
            "small",
            &["BF.RESERVE", "small", "0.01", "1000000"],
            "BF.MADD",
            500_000,
        ),
        // EXPANSION 2 from 1000: 10 layers hold up to 1,023,000 items.
        f(
            "chain",
            &["BF.RESERVE", "chain", "0.01", "1000", "EXPANSION", "2"],
            "BF.MADD",
            600_000,
        ),
        f(
            "win",
            &["BF.RESERVE", "win", "0.01", "2000000", "WINDOW", "3600000"],
            "BF.MADD",
            500_000,
        ),
        f(
            "cfbig",
            &["CF.RESERVE", "cfbig", &cf_big],
            "CF.INSERT",
            o.fill,
        ),
        f(
            "cfsmall",
            &["CF.RESERVE", "cfsmall", "1000000"],
            "CF.INSERT",
            500_000,
        ),
    ]
}

/// One workload: a command on a filter, `per_call` items per call.
struct Workload {
    name: &'static str,
    command: &'static str,
    key: &'static str,
    per_call: usize,
    /// Items: 'p' present, 'a' absent, 'm' mixed (63% present), 'n' new.
    kind: char,
}

fn workloads() -> Vec<Workload> {
    let w = |name, command, key, per_call, kind| Workload {
        name,
        command,
        key,
        per_call,
        kind,
    };
    vec![
        w(
            "BF.EXISTS, large filter, present",
            "BF.EXISTS",
            "big",
            1,
            'p',
        ),
        w(
            "BF.EXISTS, large filter, absent",
            "BF.EXISTS",
            "big",
            1,
            'a',
        ),
        w(
            "BF.MEXISTS 100, large, mixed",
            "BF.MEXISTS",
            "big",
            100,
            'm',
        ),
        w(
            "BF.MEXISTS 100, large, absent",
            "BF.MEXISTS",
            "big",
            100,
            'a',
        ),
        w("BF.ADD, large filter, new", "BF.ADD", "big", 1, 'n'),
        w("BF.MADD 100, large, new", "BF.MADD", "big", 100, 'n'),
        w(
            "BF.EXISTS, small filter, present",
            "BF.EXISTS",
            "small",
            1,
            'p',
        ),
        w(
            "BF.MEXISTS 100, small, mixed",
            "BF.MEXISTS",
            "small",
            100,
            'm',
        ),
        w("BF.ADD, small filter, new", "BF.ADD", "small", 1, 'n'),
        w(
            "BF.MEXISTS 100, 10-layer chain, absent",
            "BF.MEXISTS",
            "chain",
            100,
            'a',
        ),
        w(
            "BF.EXISTS, 10-layer chain, present",
            "BF.EXISTS",
            "chain",
            1,
            'p',
        ),
        w("BF.EXISTS, windowed, present", "BF.EXISTS", "win", 1, 'p'),
        w("BF.MADD 100, windowed, new", "BF.MADD", "win", 100, 'n'),
        w(
            "CF.EXISTS, large filter, present",
            "CF.EXISTS",
            "cfbig",
            1,
            'p',
        ),
        w(
            "CF.MEXISTS 100, large, mixed",
            "CF.MEXISTS",
            "cfbig",
            100,
            'm',
        ),
        w("CF.ADD, large filter, new", "CF.ADD", "cfbig", 1, 'n'),
        w("CF.INSERT 100, large, new", "CF.INSERT", "cfbig", 100, 'n'),
        w(
            "CF.EXISTS, small filter, present",
            "CF.EXISTS",
            "cfsmall",
            1,
            'p',
        ),
    ]
}

/// How many times `--commands` each single-item stream is.
const SINGLE_FACTOR: usize = 10;

/// Creates and fills a filter in a server; false if the server refuses to create it (an
/// earlier build without the command or option).
fn create_and_fill(s: &Server, f: &Filter) -> bool {
    let args: Vec<&[u8]> = f.create.iter().map(|a| a.as_bytes()).collect();
    if s.call(&args).starts_with('-') {
        return false;
    }
    let mut next = 0u64;
    while next < f.fill {
        // 100 commands of up to 1000 items per stream.
        let end = (next + 100_000).min(f.fill);
        let mut out = Vec::new();
        let mut lines = 0;
        let mut i = next;
        while i < end {
            let take = (end - i).min(1000);
            let items: Vec<Vec<u8>> = (i..i + take).map(present).collect();
            let mut args: Vec<&[u8]> = vec![f.add.as_bytes(), f.key.as_bytes()];
            if f.add == "CF.INSERT" {
                args.push(b"ITEMS");
            }
            args.extend(items.iter().map(Vec::as_slice));
            encode(&mut out, &args);
            lines += take as usize + 1;
            i += take;
        }
        blast(&s.addr(), &out, lines);
        next = end;
    }
    true
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let o = opts();
    let singles = o.commands * SINGLE_FACTOR;
    let headroom = (o.rounds * (o.commands * 100 + singles)) as u64;
    let work = workloads();
    // Per workload, per run: the median over rounds of ours / base; memory rows apart.
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); work.len()];
    let mut spreads: Vec<Vec<(f64, f64)>> = vec![Vec::new(); work.len()];
    let mut missing = vec![false; work.len()];
    let memory_rows = [
        "memory of the large Bloom filter",
        "memory of the large cuckoo filter",
    ];
    let mut memory: Vec<Vec<f64>> = vec![Vec::new(); memory_rows.len()];
    println!(
        "# {} (working tree) against {} ({}), server {}: large filters of capacity {} filled with {} items by adds, {} runs of {} rounds, {} calls per batch stream, {} per single-item stream\n",
        o.ours.display(),
        o.base.display(),
        o.label,
        o.server,
        o.items,
        o.fill,
        o.runs,
        o.rounds,
        o.commands,
        singles
    );
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for run in 0..o.runs {
        let before = load();
        let t = Instant::now();
        let (ours, base) = (
            Server::start(&o.server, &o.ours),
            Server::start(&o.server, &o.base),
        );
        let fs = filters(&o, headroom);
        let mut supported = Vec::new();
        let mut used = Vec::new();
        for f in &fs {
            // Both servers filled at once, each by its own client thread.
            let (a, b) = std::thread::scope(|sc| {
                let ta = sc.spawn(|| {
                    let m = ours.info("memory", "used_memory");
                    (
                        create_and_fill(&ours, f),
                        ours.info("memory", "used_memory") - m,
                    )
                });
                let tb = sc.spawn(|| {
                    let m = base.info("memory", "used_memory");
                    (
                        create_and_fill(&base, f),
                        base.info("memory", "used_memory") - m,
                    )
                });
                (ta.join().unwrap(), tb.join().unwrap())
            });
            if a.0 && b.0 {
                supported.push(f.key);
            } else {
                // A filter only one build can make is not measured: drop it there, so both
                // servers hold the same keys (a lookup's cost in the key space depends on it).
                for s in [&ours, &base] {
                    s.call(&[b"DEL", f.key.as_bytes()]);
                }
            }
            used.push((f.key, a.1, b.1));
        }
        for (row, key) in memory_rows.iter().zip(["big", "cfbig"]) {
            let i = memory_rows.iter().position(|r| r == row).unwrap();
            if supported.contains(&key) {
                let (_, ours_m, base_m) = used.iter().find(|u| u.0 == key).unwrap();
                memory[i].push(base_m / ours_m);
            }
        }
        let filled = t.elapsed().as_secs_f64();
        let huge_filled = (ours.huge_mib(), base.huge_mib());
        let mut rates: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); work.len()];
        let mut fresh = 0u64;
        for round in 0..o.rounds {
            for (wi, w) in work.iter().enumerate() {
                if !supported.contains(&w.key) {
                    missing[wi] = true;
                    continue;
                }
                let fill = fs.iter().find(|f| f.key == w.key).unwrap().fill;
                let calls = if w.per_call > 1 { o.commands } else { singles };
                let mut item = || -> Vec<u8> {
                    let r = next();
                    match w.kind {
                        'p' => present(r % fill),
                        'a' => format!("out:{r}").into_bytes(),
                        'm' if r % 100 < 63 => present((r >> 8) % fill),
                        'm' => format!("out:{r}").into_bytes(),
                        _ => {
                            fresh += 1;
                            format!("new:{run}:{fresh}").into_bytes()
                        }
                    }
                };
                let (bytes, lines) = stream(w.command, w.key, w.per_call, calls, &mut item);
                let (ro, rb) = &mut rates[wi];
                let on = |s: &Server, into: &mut Vec<f64>| {
                    into.push(server_rate(s, &bytes, lines, calls));
                };
                if round % 2 == 0 {
                    on(&ours, ro);
                    on(&base, rb);
                } else {
                    on(&base, rb);
                    on(&ours, ro);
                }
            }
        }
        for (wi, (ro, rb)) in rates.iter().enumerate() {
            if ro.is_empty() {
                continue;
            }
            let per_round: Vec<f64> = ro.iter().zip(rb).map(|(a, b)| a / b).collect();
            ratios[wi].push(median(ro) / median(rb));
            let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per_round.iter().copied().fold(0.0, f64::max);
            spreads[wi].push((lo, hi));
        }
        println!(
            "run {}: load {before} before, {} after; filled in {filled:.0} s, {:.0} s in all; \
             MiB in huge pages (working tree / earlier) {} / {} once filled, {} / {} at the end",
            run + 1,
            load(),
            t.elapsed().as_secs_f64(),
            huge_filled.0,
            huge_filled.1,
            ours.huge_mib(),
            base.huge_mib()
        );
        drop((ours, base));
    }
    println!(
        "\n| workload | median ratio over runs | spread across runs | each run (rounds' range) |"
    );
    println!("|---|---|---|---|");
    for (wi, w) in work.iter().enumerate() {
        if ratios[wi].is_empty() {
            println!(
                "| {} | n/a: the {} has no such filter | | |",
                w.name, o.label
            );
            continue;
        }
        let r = &ratios[wi];
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(0.0, f64::max);
        let each: Vec<String> = r
            .iter()
            .zip(&spreads[wi])
            .map(|(x, (a, b))| format!("{x:.2} ({a:.2}-{b:.2})"))
            .collect();
        let flag = if missing[wi] && r.len() < o.runs {
            " (some runs)"
        } else {
            ""
        };
        println!(
            "| {}{flag} | {:.2}x | {lo:.2}-{hi:.2} | {} |",
            w.name,
            median(r),
            each.join(", ")
        );
    }
    for (row, m) in memory_rows.iter().zip(&memory) {
        if m.is_empty() {
            println!("| {row} (used_memory, earlier / ours) | n/a | | |");
            continue;
        }
        let lo = m.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = m.iter().copied().fold(0.0, f64::max);
        println!(
            "| {row} (used_memory, earlier / ours) | {:.3}x | {lo:.3}-{hi:.3} | |",
            median(m)
        );
    }
    println!(
        "\nratio: working tree over {}, server CPU time per call (>1: faster; memory >1: smaller)",
        o.label
    );
}

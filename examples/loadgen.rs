//! A load generator for layerbloom through Redis over loopback: each measurement interleaved
//! between a blocked filter (layerbloom's layout) and a classic one (RedisBloom's layer, the
//! baseline) in the same server, or between a BF command and a built-in reference command;
//! medians over rounds, ratios printed. Commands go as streams encoded beforehand and written
//! to a raw socket while a second thread reads the replies, so the server never waits for the
//! client and the rates are the server's.
//!
//! `make bench` runs it against a server it starts itself. Directly:
//! `cargo run --release --example loadgen -- [--items N] [--error P] [--rounds R] [--url URL]
//! [--commands N] [--rdb-only yes]` (defaults: 100000000 items at 0.001, 7 rounds, 20000
//! commands of 100 items per batch measurement and 10 times as many single-item commands, a
//! server it starts on a free port; the RDB timing starts servers of its own).
//! Filters are built in-process with the core crate and shipped with BF.LOADCHUNK, which is
//! far faster than adding 100 million items through the network.
//!
//! `--peer path/to/redisbloom.so` compares layerbloom with RedisBloom itself instead: two
//! servers of the same binary, one with each module, the same filter in each (RedisBloom's
//! loaded from layerbloom's classic layout, its own format), and the same command streams;
//! the rate is the server's time from `INFO commandstats` (microseconds per call), not the
//! client's, in interleaved rounds (`--rounds`, medians).
//!
//! `--structure cf` (with `--peer`) does the same for cuckoo filters: one filter of `--items`
//! items at RedisBloom's default layout (bucket size 2), built in-process and shipped to both
//! servers with CF.LOADCHUNK (the same bytes: RedisBloom's format); CF.MEXISTS and CF.INSERT of
//! 100 items per call, single CF.ADD, CF.EXISTS and CF.DEL; and MEMORY USAGE per item of each.
//! `make bench-peer-cf` runs it at 10^7 items; `--items 100000000` is the size the targets
//! are stated for (128 MiB of slots per server at bucket size 2). `--cf-error e` then runs
//! the same workloads on an extension filter (`CF.RESERVE ... ERROR e`'s shape for `--items`,
//! filled to that capacity) in layerbloom's server, beside RedisBloom's rates on its own
//! layout, with its bits per item (MEMORY USAGE) and false-positive rate measured at capacity.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use layerbloom_filter::{bloom::codec, FilterSpec, Layout, ScalableFilter};

struct Options {
    items: u64,
    error: f64,
    rounds: usize,
    url: Option<String>,
    commands: usize,
    /// `--rdb-only yes`: only the RDB timing (after loading the filters).
    rdb_only: bool,
    /// `--peer path`: RedisBloom's module, compared side by side in server time.
    peer: Option<std::path::PathBuf>,
    /// `--structure cf`: cuckoo filters against the peer instead of Bloom filters.
    cuckoo: bool,
    /// `--cf-error e` (with `--structure cf`): also an extension filter (`ERROR e`).
    cf_error: Option<f64>,
}

fn options() -> Options {
    let mut o = Options {
        items: 100_000_000,
        error: 0.001,
        rounds: 7,
        url: None,
        commands: 20_000,
        rdb_only: false,
        peer: None,
        cuckoo: false,
        cf_error: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--items" => o.items = value.parse().expect("--items N"),
            "--error" => o.error = value.parse().expect("--error P"),
            "--rounds" => o.rounds = value.parse().expect("--rounds R"),
            "--url" => o.url = Some(value),
            "--commands" => o.commands = value.parse().expect("--commands N"),
            "--rdb-only" => o.rdb_only = value == "yes",
            "--peer" => o.peer = Some(value.into()),
            "--structure" => {
                o.cuckoo = match value.as_str() {
                    "bf" => false,
                    "cf" => true,
                    other => panic!("--structure bf|cf, not {other}"),
                }
            }
            "--cf-error" => o.cf_error = Some(value.parse().expect("--cf-error P")),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    o
}

/// A redis-server with the module, on a free loopback port, killed on drop.
struct Server {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Server {
    /// A server with the module and `extra` arguments (`--name value` pairs).
    fn start(extra: &[&str]) -> Server {
        let module = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/release/liblayerbloom.so");
        assert!(module.exists(), "build the module first: make build");
        Server::start_with(&module, extra)
    }

    /// A server with the module at `module` and `extra` arguments.
    fn start_with(module: &std::path::Path, extra: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir =
            std::env::temp_dir().join(format!("layerbloom-loadgen-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(module.exists(), "no module at {}", module.display());
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
                // The RDB timing moves `dir` to tmpfs and back.
                "--enable-protected-configs",
                "yes",
            ])
            .arg("--dir")
            .arg(&dir)
            .arg("--loadmodule")
            .arg(module)
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let s = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis::Client::open(s.url())
            .unwrap()
            .get_connection()
            .is_err()
        {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn item(tag: u64, i: u64) -> Vec<u8> {
    format!("{tag}:item:{i:012}").into_bytes()
}

/// Room for every item the run adds, so that no filter grows a second layer during the
/// measurements: BF.MADD adds 100 items per command, and the single-item BF.ADD streams
/// (`SINGLE_STREAM_FACTOR` times longer) run against two references.
fn headroom(o: &Options) -> u64 {
    // Against the peer: BF.MADD and BF.INSERT of 100 new items, one BF.ADD stream.
    let per_command = if o.peer.is_some() {
        200 + SINGLE_STREAM_FACTOR
    } else {
        100 + 2 * SINGLE_STREAM_FACTOR + 1
    };
    (o.rounds * o.commands * per_command) as u64
}

/// How many times `--commands` each single-item stream is.
const SINGLE_STREAM_FACTOR: usize = 10;

/// Builds a filter of `items + headroom` capacity in-process, fills it with `items` items and
/// ships it with BF.LOADCHUNK.
fn load(con: &mut redis::Connection, key: &str, layout: Layout, o: &Options) {
    let spec = FilterSpec {
        layout,
        ..FilterSpec::new(o.items + headroom(o), o.error, 2)
    };
    let mut f = ScalableFilter::new(spec, u64::MAX).unwrap();
    let mut i = 0;
    while f.items() < o.items {
        let take = (o.items - f.items()).min(1000);
        let batch: Vec<Vec<u8>> = (i..i + take).map(|j| item(1, j)).collect();
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        f.add_many(&refs, u64::MAX);
        i += take;
    }
    let _: () = redis::cmd("DEL").arg(key).query(con).unwrap();
    let _: () = redis::cmd("BF.LOADCHUNK")
        .arg(key)
        .arg(1)
        .arg(codec::encode_header(&f))
        .query(con)
        .unwrap();
    let mut it = 1;
    loop {
        let (next, data) = codec::dump_chunk(&f, it);
        if next == 0 {
            break;
        }
        let _: () = redis::cmd("BF.LOADCHUNK")
            .arg(key)
            .arg(next)
            .arg(data)
            .query(con)
            .unwrap();
        it = next;
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let o = options();
    if let Some(peer) = &o.peer {
        if o.cuckoo {
            cuckoo_versus_peer(peer, &o);
        } else {
            versus_peer(peer, &o);
        }
        return;
    }
    assert!(!o.cuckoo, "--structure cf needs --peer");
    let server = if o.url.is_none() {
        Some(Server::start(&[]))
    } else {
        None
    };
    let url = o
        .url
        .clone()
        .unwrap_or_else(|| server.as_ref().unwrap().url());
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let t = Instant::now();
    load(&mut con, "lb:blocked", Layout::Blocked, &o);
    load(&mut con, "lb:classic", Layout::Classic, &o);
    let size = |con: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("BF.INFO")
            .arg(key)
            .arg("SIZE")
            .query::<Vec<i64>>(con)
            .unwrap()[0]
    };
    println!(
        "## Through Redis: {} items at {} per filter (capacity {}: room for the run's adds), built and loaded in {:.0} s",
        o.items,
        o.error,
        o.items + headroom(&o),
        t.elapsed().as_secs_f64()
    );
    println!(
        "\nblocked {} MiB, classic (baseline) {} MiB\n",
        size(&mut con, "lb:blocked") >> 20,
        size(&mut con, "lb:classic") >> 20,
    );
    if o.rdb_only {
        rdb_speed(&mut con);
        return;
    }
    let address = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_string();
    let mut rng = 0x1234_5678_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let items = o.items;
    let mut present =
        |n: usize| -> Vec<Vec<u8>> { (0..n).map(|_| item(1, next() % items)).collect() };
    batches(&address, &o, &mut present);
    singles(&mut con, &address, &o, &mut present);
    if server.is_some() {
        rdb_speed(&mut con);
    }
    drop(server);
}

/// BF.MEXISTS and BF.MADD of 100 items per call on the classic (baseline) and the blocked
/// filter, as pre-encoded streams like the single items (see `singles`), interleaved.
fn batches(address: &str, o: &Options, present: &mut impl FnMut(usize) -> Vec<Vec<u8>>) {
    println!(
        "{} commands of 100 items per stream, written ahead on one connection, {} interleaved rounds, medians\n",
        o.commands, o.rounds
    );
    println!("| workload | baseline (classic) items/s | layerbloom items/s | ratio |");
    println!("|---|---|---|---|");
    let row = |name: &str, (base, ours): (f64, f64)| {
        println!(
            "| {name} | {:.0} | {:.0} | {:.2}x |",
            base * 100.0,
            ours * 100.0,
            ours / base
        );
    };
    // A reply is an array header and 100 integers: 101 lines a command.
    let lines = o.commands * 101;
    let commands_per_s = |stream: &[u8]| blast(address, stream, lines) / 101.0;
    let stream = |command: &[u8], key: &[u8], batch: &mut dyn FnMut(usize) -> Vec<Vec<u8>>| {
        let mut out = Vec::new();
        for n in 0..o.commands {
            let mut args = vec![command.to_vec(), key.to_vec()];
            args.extend(batch(n));
            encode(&mut out, &args);
        }
        out
    };
    let interleaved = |base: &[Vec<u8>], ours: &[Vec<u8>]| {
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        for round in 0..o.rounds {
            let (b, u) = (&base[round % base.len()], &ours[round % ours.len()]);
            if round % 2 == 0 {
                ra.push(commands_per_s(b));
                rb.push(commands_per_s(u));
            } else {
                rb.push(commands_per_s(u));
                ra.push(commands_per_s(b));
            }
        }
        (median(ra), median(rb))
    };
    let probes: Vec<Vec<Vec<u8>>> = (0..o.commands).map(|_| present(100)).collect();
    let base_q = stream(b"BF.MEXISTS", b"lb:classic", &mut |n| probes[n].clone());
    let ours_q = stream(b"BF.MEXISTS", b"lb:blocked", &mut |n| probes[n].clone());
    row(
        "BF.MEXISTS, 100 present items per call",
        interleaved(std::slice::from_ref(&base_q), std::slice::from_ref(&ours_q)),
    );
    let mut counter = 0u64;
    let mut fresh = |_| {
        (0..100)
            .map(|_| {
                counter += 1;
                item(2, counter)
            })
            .collect()
    };
    let base_a: Vec<Vec<u8>> = (0..o.rounds)
        .map(|_| stream(b"BF.MADD", b"lb:classic", &mut fresh))
        .collect();
    let ours_a: Vec<Vec<u8>> = (0..o.rounds)
        .map(|_| stream(b"BF.MADD", b"lb:blocked", &mut fresh))
        .collect();
    row(
        "BF.MADD, 100 new items per call",
        interleaved(&base_a, &ours_a),
    );
}

/// Single-item commands beside built-in commands that cost Redis the same or less: PING does
/// nothing; EXISTS looks the key up; GETBIT / SETBIT also touch one random cache line of a
/// value as large as the filter, which is a one-line filter probe done by Redis itself.
///
/// A client that builds and parses every command (as the batch measurements do) tops out
/// near 600,000 commands/s here, below what the server does with single items; so these
/// streams are encoded beforehand and written to a raw socket while a second thread reads the
/// replies: the server never waits for the client, and the rate is the server's.
fn singles(
    con: &mut redis::Connection,
    address: &str,
    o: &Options,
    present: &mut impl FnMut(usize) -> Vec<Vec<u8>>,
) {
    let bytes: i64 = redis::cmd("BF.INFO")
        .arg("lb:blocked")
        .arg("SIZE")
        .query::<Vec<i64>>(con)
        .unwrap()[0];
    // GETBIT/SETBIT offsets stop at 2^32 - 1.
    let bits = (bytes as u64 * 8).min(u64::from(u32::MAX));
    let _: i64 = redis::cmd("SETBIT")
        .arg("lb:bits")
        .arg(bits - 1)
        .arg(1)
        .query(con)
        .unwrap();
    let small = 1000u64;
    let _: () = redis::cmd("BF.RESERVE")
        .arg("lb:small")
        .arg(o.error)
        .arg(small)
        .query(con)
        .unwrap();
    let _: Vec<i64> = redis::cmd("BF.MADD")
        .arg("lb:small")
        .arg((0..small).map(|i| item(1, i)).collect::<Vec<_>>())
        .query(con)
        .unwrap();
    let commands = o.commands * SINGLE_STREAM_FACTOR;
    println!(
        "\n{commands} commands per stream, written ahead on one connection, {} interleaved rounds, medians\n",
        o.rounds
    );
    println!(
        "| single-item command (layerbloom) | commands/s | reference command | reference commands/s | ratio to the reference |"
    );
    println!("|---|---|---|---|---|");
    let mut rng = 0x9e37_79b9_u64;
    let mut offset = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % bits).to_string().into_bytes()
    };
    let items = present(commands);
    let small_items: Vec<Vec<u8>> = (0..commands as u64).map(|i| item(1, i % small)).collect();
    let stream = |make: &mut dyn FnMut(usize) -> Vec<Vec<u8>>| -> Vec<u8> {
        let mut out = Vec::new();
        for n in 0..commands {
            encode(&mut out, &make(n));
        }
        out
    };
    let args = |words: &[&[u8]]| words.iter().map(|w| w.to_vec()).collect::<Vec<_>>();
    let ping = stream(&mut |_| args(&[b"PING"]));
    let exists_big = stream(&mut |_| args(&[b"EXISTS", b"lb:blocked"]));
    let exists_small = stream(&mut |_| args(&[b"EXISTS", b"lb:small"]));
    let bf_exists_big = stream(&mut |n| args(&[b"BF.EXISTS", b"lb:blocked", &items[n]]));
    let bf_exists_small = stream(&mut |n| args(&[b"BF.EXISTS", b"lb:small", &small_items[n]]));
    let getbit = stream(&mut |_| args(&[b"GETBIT", b"lb:bits", &offset()]));
    let setbit = stream(&mut |_| args(&[b"SETBIT", b"lb:bits", &offset(), b"1"]));
    let mut next_new = 1u64 << 40;
    let mut bf_add = || {
        stream(&mut |_| {
            next_new += 1;
            args(&[b"BF.ADD", b"lb:blocked", &item(3, next_new)])
        })
    };
    let adds: Vec<Vec<u8>> = (0..o.rounds * 2).map(|_| bf_add()).collect();
    let show = |name: &str, reference: &str, (r, ours): (f64, f64)| {
        println!(
            "| {name} | {ours:.0} | {reference} | {r:.0} | {:.2} |",
            ours / r
        );
    };
    let ab = |reference: &[u8], ours: &[Vec<u8>]| -> (f64, f64) {
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        for round in 0..o.rounds {
            let ours = &ours[round % ours.len()];
            if round % 2 == 0 {
                ra.push(blast(address, reference, commands));
                rb.push(blast(address, ours, commands));
            } else {
                rb.push(blast(address, ours, commands));
                ra.push(blast(address, reference, commands));
            }
        }
        (median(ra), median(rb))
    };
    let big = format!("BF.EXISTS, present item, {}-item filter", o.items);
    let big = big.as_str();
    let one = std::slice::from_ref;
    show(big, "PING", ab(&ping, one(&bf_exists_big)));
    show(
        big,
        "EXISTS of the same key",
        ab(&exists_big, one(&bf_exists_big)),
    );
    show(
        big,
        "GETBIT at a random offset of a string as large as the filter",
        ab(&getbit, one(&bf_exists_big)),
    );
    let cached = "BF.EXISTS, present item, 1000-item filter (in cache)";
    show(cached, "PING", ab(&ping, one(&bf_exists_small)));
    show(
        cached,
        "EXISTS of the same key",
        ab(&exists_small, one(&bf_exists_small)),
    );
    let add = format!("BF.ADD, new item, {}-item filter", o.items);
    let add = add.as_str();
    show(add, "PING", ab(&ping, &adds[..o.rounds]));
    show(
        add,
        "SETBIT at a random offset of a string as large as the filter",
        ab(&setbit, &adds[o.rounds..o.rounds * 2]),
    );
    let _: () = redis::cmd("DEL")
        .arg("lb:bits")
        .arg("lb:small")
        .query(con)
        .unwrap();
}

/// Appends one command in RESP.
fn encode(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Writes a stream of commands to a new connection while a second thread reads the replies,
/// `lines` reply lines in all (replies without bulk strings: one line per integer, status or
/// array header); reply lines per second from the first byte written to the last line read
/// (commands per second for single-line replies). Panics on an error reply.
fn blast(address: &str, stream: &[u8], lines: usize) -> f64 {
    use std::io::{Read, Write};
    let mut writer = std::net::TcpStream::connect(address).unwrap();
    writer.set_nodelay(true).unwrap();
    let mut reader = writer.try_clone().unwrap();
    let start = Instant::now();
    let replies = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut read = 0;
        let mut line_start = true;
        while read < lines {
            let n = reader.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed the connection");
            for &b in &buf[..n] {
                assert!(!(line_start && b == b'-'), "an error reply");
                line_start = b == b'\n';
                read += usize::from(line_start);
            }
        }
        start.elapsed()
    });
    writer.write_all(stream).unwrap();
    let elapsed = replies.join().expect("every reply read");
    lines as f64 / elapsed.as_secs_f64()
}

/// One BF.SCANDUMP chunk: the iterator to load it with, and its data.
type Chunk = (i64, Vec<u8>);

/// Copies of each loaded filter in the RDB timing: about 1.3 GiB of filters with the defaults.
const RDB_COPIES: usize = 3;

/// Times SAVE and a reload (DEBUG RELOAD NOSAVE) of about 1.3 GiB of filters (copies of the
/// two loaded ones, moved with SCANDUMP / BF.LOADCHUNK into a fresh server per setting), on
/// the server's directory and on tmpfs, with and without RDB compression and checksum (the
/// checksum is fixed when a server starts), in seconds per GiB, beside an in-process memory
/// copy of 1 GiB.
fn rdb_speed(source: &mut redis::Connection) {
    let chunks: Vec<(String, Vec<Chunk>)> = ["lb:blocked", "lb:classic"]
        .iter()
        .map(|key| {
            let mut chunks = Vec::new();
            let mut it = 0i64;
            loop {
                let (next, data): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
                    .arg(*key)
                    .arg(it)
                    .query(source)
                    .unwrap();
                if next == 0 {
                    break;
                }
                chunks.push((next, data));
                it = next;
            }
            (key.to_string(), chunks)
        })
        .collect();
    let copy = {
        let src = vec![1u8; 1 << 30];
        let mut dst = vec![0u8; 1 << 30];
        let t = Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&dst);
        t.elapsed().as_secs_f64()
    };
    let mut header_printed = false;
    for checksum in ["yes", "no"] {
        let server = Server::start(&["--rdbchecksum", checksum]);
        let con = &mut redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        for n in 0..RDB_COPIES {
            for (key, key_chunks) in &chunks {
                for (it, data) in key_chunks {
                    let _: () = redis::cmd("BF.LOADCHUNK")
                        .arg(format!("{key}:{n}"))
                        .arg(*it)
                        .arg(data.as_slice())
                        .query(con)
                        .unwrap();
                }
            }
        }
        let mut bytes = 0i64;
        for n in 0..RDB_COPIES {
            for (key, _) in &chunks {
                bytes += redis::cmd("BF.INFO")
                    .arg(format!("{key}:{n}"))
                    .arg("SIZE")
                    .query::<Vec<i64>>(con)
                    .unwrap()[0];
            }
        }
        let gib = bytes as f64 / (1u64 << 30) as f64;
        if !header_printed {
            println!("\n| RDB, {gib:.2} GiB of filters | SAVE s/GiB | load s/GiB |");
            println!("|---|---|---|");
            println!("| memory copy of 1 GiB in process (reference) | {copy:.3} | |");
            header_printed = true;
        }
        let set = |con: &mut redis::Connection, name: &str, value: &str| {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(value)
                .query(con)
                .unwrap();
        };
        let shm = std::path::Path::new("/dev/shm");
        let tmpfs_dir = shm
            .is_dir()
            .then(|| shm.join(format!("layerbloom-loadgen-{}", server.port)));
        let mut places = vec![("disk", server.dir.to_string_lossy().into_owned())];
        if let Some(d) = &tmpfs_dir {
            std::fs::create_dir_all(d).unwrap();
            places.push(("tmpfs", d.to_string_lossy().into_owned()));
        }
        for (place, dir) in &places {
            set(con, "dir", dir);
            for compression in ["no", "yes"] {
                set(con, "rdbcompression", compression);
                let t = Instant::now();
                let _: () = redis::cmd("SAVE").query(con).unwrap();
                let save = t.elapsed().as_secs_f64() / gib;
                let t = Instant::now();
                let _: () = redis::cmd("DEBUG")
                    .arg("RELOAD")
                    .arg("NOSAVE")
                    .query(con)
                    .unwrap();
                let load = t.elapsed().as_secs_f64() / gib;
                println!(
                    "| {place}, rdbchecksum {checksum}, rdbcompression {compression} | {save:.3} | {load:.3} |"
                );
            }
        }
        set(con, "dir", &server.dir.to_string_lossy());
        if let Some(d) = tmpfs_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Server time of a stream: the command's `usec` over its `calls` in `INFO commandstats`
/// (zeroed first), in calls per second.
fn server_rate(
    con: &mut redis::Connection,
    address: &str,
    stream: &[u8],
    lines: usize,
    name: &str,
) -> f64 {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).unwrap();
    blast(address, stream, lines);
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let prefix = format!("cmdstat_{name}:");
    let line = info
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in INFO commandstats"));
    let field = |f: &str| -> f64 {
        line[prefix.len()..]
            .split(',')
            .find_map(|kv| kv.strip_prefix(f))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {f} in {line}"))
    };
    field("calls=") / field("usec=") * 1e6
}

/// layerbloom against RedisBloom, each in its own server of the same binary, the same filter
/// (`--items` at `--error`) in both, 100 items per batch call; server time, interleaved rounds.
fn versus_peer(peer: &std::path::Path, o: &Options) {
    let ours = Server::start(&[]);
    let theirs = Server::start_with(peer, &[]);
    let connect = |s: &Server| {
        redis::Client::open(s.url())
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let (mut ours_con, mut theirs_con) = (connect(&ours), connect(&theirs));
    let t = Instant::now();
    load(&mut ours_con, "f", Layout::Blocked, o);
    // RedisBloom's own format: layerbloom's classic layout is its layers bit for bit.
    load(&mut theirs_con, "f", Layout::Classic, o);
    let size = |con: &mut redis::Connection| -> i64 {
        redis::cmd("BF.INFO")
            .arg("f")
            .arg("SIZE")
            .query::<Vec<i64>>(con)
            .unwrap()[0]
    };
    println!(
        "## Against RedisBloom: {} items at {} per filter (capacity {}), built and loaded in {:.0} s\n",
        o.items,
        o.error,
        o.items + headroom(o),
        t.elapsed().as_secs_f64()
    );
    println!(
        "layerbloom {} MiB, RedisBloom {} MiB (BF.INFO SIZE); {} commands per stream ({} of single items), {} interleaved rounds, medians of server time (INFO commandstats)\n",
        size(&mut ours_con) >> 20,
        size(&mut theirs_con) >> 20,
        o.commands,
        o.commands * SINGLE_STREAM_FACTOR,
        o.rounds
    );
    let address = |s: &Server| format!("127.0.0.1:{}", s.port);
    let (ours_at, theirs_at) = (address(&ours), address(&theirs));
    let mut rng = 0x9e37_79b9_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let stream = |command: &[u8], calls: usize, per_call: &mut dyn FnMut() -> Vec<Vec<u8>>| {
        let mut out = Vec::new();
        for _ in 0..calls {
            let mut args = vec![command.to_vec(), b"f".to_vec()];
            if command == b"BF.INSERT" {
                args.push(b"ITEMS".to_vec());
            }
            args.extend(per_call());
            encode(&mut out, &args);
        }
        out
    };
    let items = o.items;
    let mut fresh = 0u64;
    let singles = o.commands * SINGLE_STREAM_FACTOR;
    // One stream per round, sent to both servers (each has its own filter).
    struct Workload {
        name: &'static str,
        command: &'static str,
        per_call: usize,
        calls: usize,
        streams: Vec<Vec<u8>>,
    }
    let mut workloads = Vec::new();
    let mut add =
        |name, command: &'static str, per_call, calls, gen: &mut dyn FnMut() -> Vec<u8>| {
            let streams = (0..o.rounds)
                .map(|_| {
                    stream(command.as_bytes(), calls, &mut || {
                        (0..per_call).map(|_| gen()).collect()
                    })
                })
                .collect();
            workloads.push(Workload {
                name,
                command,
                per_call,
                calls,
                streams,
            });
        };
    // Mixed: each item present with probability 0.63 (1 - 1/e, as when probing as many
    // random items as the filter holds).
    add(
        "BF.MEXISTS, 100 items, ~63% present",
        "BF.MEXISTS",
        100,
        o.commands,
        &mut || {
            let r = next();
            if r % 100 < 63 {
                item(1, (r >> 8) % items)
            } else {
                item(9, r >> 8)
            }
        },
    );
    add(
        "BF.MEXISTS, 100 absent items",
        "BF.MEXISTS",
        100,
        o.commands,
        &mut || item(8, next()),
    );
    add(
        "BF.MADD, 100 new items",
        "BF.MADD",
        100,
        o.commands,
        &mut || {
            fresh += 1;
            item(2, fresh)
        },
    );
    add(
        "BF.INSERT, 100 new items",
        "BF.INSERT",
        100,
        o.commands,
        &mut || {
            fresh += 1;
            item(2, fresh)
        },
    );
    add(
        "BF.EXISTS, present item",
        "BF.EXISTS",
        1,
        singles,
        &mut || item(1, next() % items),
    );
    add("BF.ADD, new item", "BF.ADD", 1, singles, &mut || {
        fresh += 1;
        item(2, fresh)
    });
    let mut rates: Vec<(Vec<f64>, Vec<f64>)> =
        workloads.iter().map(|_| (Vec::new(), Vec::new())).collect();
    for round in 0..o.rounds {
        for (w, (ours_r, theirs_r)) in workloads.iter().zip(&mut rates) {
            // A multi reply is an array header and one line per item.
            let lines = w.calls * if w.per_call > 1 { w.per_call + 1 } else { 1 };
            let name = w.command.to_lowercase();
            let mut run_ours = || {
                ours_r.push(server_rate(
                    &mut ours_con,
                    &ours_at,
                    &w.streams[round],
                    lines,
                    &name,
                ))
            };
            let mut run_theirs = || {
                theirs_r.push(server_rate(
                    &mut theirs_con,
                    &theirs_at,
                    &w.streams[round],
                    lines,
                    &name,
                ))
            };
            if round % 2 == 0 {
                run_ours();
                run_theirs();
            } else {
                run_theirs();
                run_ours();
            }
        }
    }
    println!("| workload | RedisBloom 2.8 items/s | layerbloom items/s | ratio |");
    println!("|---|---|---|---|");
    let mut ours_rates = Vec::new();
    for (w, (ours_r, theirs_r)) in workloads.iter().zip(rates) {
        let per = w.per_call as f64;
        let (a, b) = (median(theirs_r) * per, median(ours_r) * per);
        println!("| {} | {a:.0} | {b:.0} | {:.2}x |", w.name, b / a);
        ours_rates.push((w.command, w.name, b));
    }
    // The other bound: an add of new items within 1.3x of a lookup of absent ones.
    let absent = ours_rates
        .iter()
        .find(|(_, name, _)| name.contains("absent"))
        .map(|&(_, _, rate)| rate);
    if let Some(absent) = absent {
        println!();
        for (command, _, rate) in &ours_rates {
            if matches!(*command, "BF.MADD" | "BF.INSERT") {
                println!(
                    "layerbloom's {command} of new items costs {:.2}x its BF.MEXISTS of absent items per item (server time)",
                    absent / rate
                );
            }
        }
    }
}

/// Builds a cuckoo filter of `capacity` at RedisBloom's defaults in-process, adds `items`
/// items (`item(1, i)`) and ships it to `con` under `key` with CF.LOADCHUNK.
fn load_cuckoo(cons: &mut [&mut redis::Connection], key: &str, capacity: u64, items: u64) {
    use layerbloom_filter::cuckoo::{codec as cf_codec, params, CuckooFilter, Limits, Params};
    let p = Params::default();
    let buckets = params::buckets_for(capacity as i64, p.bucket_size).unwrap();
    let mut f = CuckooFilter::new(buckets, p, u64::MAX).unwrap();
    let limits = Limits::default();
    let mut i = 0;
    while i < items {
        let take = (items - i).min(1000);
        let batch: Vec<Vec<u8>> = (i..i + take).map(|j| item(1, j)).collect();
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        for r in f.insert_many(&refs, false, &limits).unwrap() {
            r.unwrap();
        }
        i += take;
    }
    for con in cons.iter_mut() {
        let _: () = redis::cmd("DEL").arg(key).query(*con).unwrap();
    }
    let mut it = 0;
    while let Some((next, data)) = cf_codec::dump_chunk(&f, it) {
        for con in cons.iter_mut() {
            let _: () = redis::cmd("CF.LOADCHUNK")
                .arg(key)
                .arg(next)
                .arg(data.as_ref())
                .query(*con)
                .unwrap();
        }
        it = next;
    }
}

/// layerbloom against RedisBloom for cuckoo filters: the same filter of `--items` items in
/// both servers (RedisBloom's layout), 100 items per batch call; server time, interleaved
/// rounds; then MEMORY USAGE per item.
fn cuckoo_versus_peer(peer: &std::path::Path, o: &Options) {
    let ours = Server::start(&[]);
    let theirs = Server::start_with(peer, &[]);
    let connect = |s: &Server| {
        redis::Client::open(s.url())
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let (mut ours_con, mut theirs_con) = (connect(&ours), connect(&theirs));
    let singles = o.commands * SINGLE_STREAM_FACTOR;
    // The filter is reserved for the items it is loaded with, as a user reserves one; it grows
    // a sub-filter where RedisBloom's kicks give up, identically in both servers (the same
    // buckets), which the header reports.
    assert!(
        (o.rounds * singles) as u64 <= o.items,
        "CF.DEL deletes loaded items: --items must be at least rounds x commands x {SINGLE_STREAM_FACTOR}"
    );
    let capacity = o.items;
    let t = Instant::now();
    load_cuckoo(
        &mut [&mut ours_con, &mut theirs_con],
        "f",
        capacity,
        o.items,
    );
    let info = |con: &mut redis::Connection| -> Vec<redis::Value> {
        redis::cmd("CF.INFO").arg("f").query(con).unwrap()
    };
    let figure = |info: &[redis::Value], at: usize| -> i64 {
        redis::from_redis_value(info[at].clone()).unwrap()
    };
    let loaded = info(&mut ours_con);
    let (buckets, filters) = (figure(&loaded, 3), figure(&loaded, 5));
    assert_eq!(
        info(&mut ours_con),
        info(&mut theirs_con),
        "the same filter in both"
    );
    let memory = |con: &mut redis::Connection| -> i64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg("f")
            .query(con)
            .unwrap()
    };
    let (ours_mem, theirs_mem) = (memory(&mut ours_con), memory(&mut theirs_con));
    println!(
        "## Cuckoo filters against RedisBloom: {} items per filter (CF.RESERVE capacity {capacity}: {buckets} buckets of 2, {filters} sub-filter(s) once loaded), built and loaded in {:.0} s\n",
        o.items,
        t.elapsed().as_secs_f64()
    );
    println!(
        "MEMORY USAGE: layerbloom {ours_mem} bytes ({:.3} bytes per item), RedisBloom {theirs_mem} bytes ({:.3} bytes per item); {} commands per batch stream, {singles} per single-item stream, {} interleaved rounds, medians of server time (INFO commandstats)\n",
        ours_mem as f64 / o.items as f64,
        theirs_mem as f64 / o.items as f64,
        o.commands,
        o.rounds
    );
    let address = |s: &Server| format!("127.0.0.1:{}", s.port);
    let (ours_at, theirs_at) = (address(&ours), address(&theirs));
    let mut rng = 0x2545_f491_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    struct Workload {
        name: &'static str,
        command: &'static str,
        per_call: usize,
        calls: usize,
        streams: Vec<Vec<u8>>,
    }
    let mut workloads = Vec::new();
    let mut add =
        |name, command: &'static str, per_call, calls, gen: &mut dyn FnMut() -> Vec<u8>| {
            let streams = (0..o.rounds)
                .map(|_| {
                    let mut out = Vec::new();
                    for _ in 0..calls {
                        let mut args = vec![command.as_bytes().to_vec(), b"f".to_vec()];
                        if command == "CF.INSERT" {
                            args.push(b"ITEMS".to_vec());
                        }
                        args.extend((0..per_call).map(|_| gen()));
                        encode(&mut out, &args);
                    }
                    out
                })
                .collect();
            workloads.push(Workload {
                name,
                command,
                per_call,
                calls,
                streams,
            });
        };
    let items = o.items;
    let mut fresh = 0u64;
    // Deleted items are loaded ones taken in order from the top, never twice, so that every
    // CF.DEL finds its item; lookups of "present" items meet a deleted one rarely (rounds x
    // singles of --items), alike in both servers.
    let mut doomed = items;
    add(
        "CF.MEXISTS, 100 items, ~63% present",
        "CF.MEXISTS",
        100,
        o.commands,
        &mut || {
            let r = next();
            if r % 100 < 63 {
                item(1, (r >> 8) % items)
            } else {
                item(9, r >> 8)
            }
        },
    );
    add(
        "CF.MEXISTS, 100 absent items",
        "CF.MEXISTS",
        100,
        o.commands,
        &mut || item(8, next()),
    );
    add(
        "CF.INSERT, 100 new items",
        "CF.INSERT",
        100,
        o.commands,
        &mut || {
            fresh += 1;
            item(2, fresh)
        },
    );
    add(
        "CF.EXISTS, present item",
        "CF.EXISTS",
        1,
        singles,
        &mut || item(1, next() % items),
    );
    add("CF.ADD, new item", "CF.ADD", 1, singles, &mut || {
        fresh += 1;
        item(2, fresh)
    });
    add("CF.DEL, present item", "CF.DEL", 1, singles, &mut || {
        doomed -= 1;
        item(1, doomed)
    });
    let mut rates: Vec<(Vec<f64>, Vec<f64>)> =
        workloads.iter().map(|_| (Vec::new(), Vec::new())).collect();
    for round in 0..o.rounds {
        for (w, (ours_r, theirs_r)) in workloads.iter().zip(&mut rates) {
            let lines = w.calls * if w.per_call > 1 { w.per_call + 1 } else { 1 };
            let name = w.command.to_lowercase();
            let stream = &w.streams[round];
            let run = |con: &mut redis::Connection, at: &str, into: &mut Vec<f64>| {
                into.push(server_rate(con, at, stream, lines, &name))
            };
            if round % 2 == 0 {
                run(&mut ours_con, &ours_at, ours_r);
                run(&mut theirs_con, &theirs_at, theirs_r);
            } else {
                run(&mut theirs_con, &theirs_at, theirs_r);
                run(&mut ours_con, &ours_at, ours_r);
            }
        }
    }
    let (end_ours, end_theirs) = (info(&mut ours_con), info(&mut theirs_con));
    assert_eq!(
        (figure(&end_ours, 5), figure(&end_ours, 7)),
        (figure(&end_theirs, 5), figure(&end_theirs, 7)),
        "both filters grew alike and saw the same adds"
    );
    println!(
        "After the run: {} sub-filter(s), {} items in each.\n",
        figure(&end_ours, 5),
        figure(&end_ours, 7)
    );
    println!("| workload | RedisBloom 2.8 items/s | layerbloom items/s | ratio |");
    println!("|---|---|---|---|");
    let mut theirs_rates = Vec::new();
    for (w, (ours_r, theirs_r)) in workloads.iter().zip(rates) {
        let per = w.per_call as f64;
        let (a, b) = (median(theirs_r) * per, median(ours_r) * per);
        println!("| {} | {a:.0} | {b:.0} | {:.2}x |", w.name, b / a);
        theirs_rates.push((w.name, a));
    }
    if let Some(error) = o.cf_error {
        cuckoo_extension_rows(o, error, &mut ours_con, &ours_at, &theirs_rates);
    }
}

/// `--cf-error e`: an extension filter of the shape `CF.RESERVE w <items> ERROR e` creates,
/// built in-process with `--items` items (its capacity) and shipped with CF.LOADCHUNK to
/// layerbloom's server; its bits per item and its false-positive rate (10^6 absent items)
/// at capacity; then the workloads of the table above on it, beside RedisBloom's rates on its
/// own layout from that table (RedisBloom has no such filter).
fn cuckoo_extension_rows(
    o: &Options,
    error: f64,
    con: &mut redis::Connection,
    at: &str,
    theirs: &[(&str, f64)],
) {
    use layerbloom_filter::cuckoo::rate::{self, Extension, SIZING_MAX_ITERATIONS};
    use layerbloom_filter::cuckoo::{params, rated_codec, Limits, Params, RatedFilter};
    let t = Instant::now();
    let ext = Extension::for_rate(error, None).expect("a rate the extension reaches");
    let buckets = ext.buckets_for(o.items).expect("a filter that fits");
    let p = Params {
        bucket_size: ext.bucket_size,
        max_iterations: SIZING_MAX_ITERATIONS,
        expansion: params::DEFAULT_EXPANSION,
    };
    let mut f = RatedFilter::new(buckets, p, ext.widths, error, u64::MAX).unwrap();
    let limits = Limits::default();
    let mut i = 0;
    while i < o.items {
        let take = (o.items - i).min(1000);
        let batch: Vec<Vec<u8>> = (i..i + take).map(|j| item(1, j)).collect();
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        for r in f.insert_many(&refs, false, &limits).unwrap() {
            r.unwrap();
        }
        i += take;
    }
    let (subs, slots) = (
        f.sub_filters().len(),
        f.sub_filters().iter().map(|s| s.slots()).sum::<u64>(),
    );
    let _: () = redis::cmd("DEL").arg("w").query(con).unwrap();
    let mut it = 0;
    while let Some((next, data)) = rated_codec::dump_chunk(&f, it) {
        let _: () = redis::cmd("CF.LOADCHUNK")
            .arg("w")
            .arg(next)
            .arg(data.as_ref())
            .query(con)
            .unwrap();
        it = next;
    }
    drop(f);
    let memory: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("w")
        .query(con)
        .unwrap();
    let probes = 1_000_000u64;
    let mut positives = 0u64;
    for call in 0..probes / 1000 {
        let found: Vec<bool> = redis::cmd("CF.MEXISTS")
            .arg("w")
            .arg(
                (0..1000)
                    .map(|j| item(7, call * 1000 + j))
                    .collect::<Vec<_>>(),
            )
            .query(con)
            .unwrap();
        positives += found.iter().filter(|&&b| b).count() as u64;
    }
    let load = o.items as f64 / slots as f64;
    let bits = memory as f64 * 8.0 / o.items as f64;
    let fewest = rate::bits_lower_bound(ext.bucket_size, load, error);
    println!(
        "\n## Extension filter: ERROR {error}, {} items ({buckets} buckets of {} slots of {} bits, {subs} sub-filter(s), load {load:.3}), built and loaded in {:.0} s\n",
        o.items,
        ext.bucket_size,
        ext.widths.first,
        t.elapsed().as_secs_f64()
    );
    println!(
        "MEMORY USAGE {memory} bytes: {bits:.2} bits per item; the fewest for this rate at this load, log2(2b/e)/load, {fewest:.2} ({:+.1}%); false-positive rate at capacity {:.6} ({positives} of {probes} absent items), asked {error}\n",
        (bits / fewest - 1.0) * 100.0,
        positives as f64 / probes as f64
    );
    let singles = o.commands * SINGLE_STREAM_FACTOR;
    let mut rng = 0x3c6e_f372_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let items = o.items;
    // New items for CF.INSERT and CF.ADD, never repeated across rounds and workloads.
    let mut fresh = 0u64;
    let mut new_item = move || {
        fresh += 1;
        item(2, fresh)
    };
    let mut rows = Vec::new();
    for (name, command, per_call, calls) in [
        (
            "CF.MEXISTS, 100 items, ~63% present",
            "CF.MEXISTS",
            100,
            o.commands,
        ),
        (
            "CF.MEXISTS, 100 absent items",
            "CF.MEXISTS",
            100,
            o.commands,
        ),
        ("CF.INSERT, 100 new items", "CF.INSERT", 100, o.commands),
        ("CF.EXISTS, present item", "CF.EXISTS", 1, singles),
        ("CF.ADD, new item", "CF.ADD", 1, singles),
    ] {
        let lines = calls * if per_call > 1 { per_call + 1 } else { 1 };
        let cmd = command.to_lowercase();
        let mut rates = Vec::new();
        for _ in 0..o.rounds {
            let mut out = Vec::new();
            for _ in 0..calls {
                let mut args = vec![command.as_bytes().to_vec(), b"w".to_vec()];
                if command == "CF.INSERT" {
                    args.push(b"ITEMS".to_vec());
                }
                for _ in 0..per_call {
                    let r = next();
                    args.push(match name {
                        "CF.MEXISTS, 100 items, ~63% present" if r % 100 < 63 => {
                            item(1, (r >> 8) % items)
                        }
                        "CF.MEXISTS, 100 items, ~63% present" => item(9, r >> 8),
                        "CF.MEXISTS, 100 absent items" => item(8, r),
                        "CF.EXISTS, present item" => item(1, r % items),
                        _ => new_item(),
                    });
                }
                encode(&mut out, &args);
            }
            rates.push(server_rate(con, at, &out, lines, &cmd) * per_call as f64);
        }
        rows.push((name, median(rates)));
    }
    println!(
        "| workload | RedisBloom 2.8 items/s (its layout, above) | layerbloom ERROR {error} items/s | ratio |"
    );
    println!("|---|---|---|---|");
    for (name, ours) in rows {
        let theirs = theirs
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(f64::NAN, |&(_, r)| r);
        println!(
            "| {name} | {theirs:.0} | {ours:.0} | {:.2}x |",
            ours / theirs
        );
    }
}

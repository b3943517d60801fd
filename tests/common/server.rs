//! Test harness: a real `redis-server` with the layerbloom module, one per test.
//!
//! [`Server::start`] spawns `redis-server --loadmodule <liblayerbloom.so>` on a free loopback
//! port in a fresh temp dir and kills it (and removes the dir) on drop. With the environment
//! variable `REDIS_URL` set, it hands out that server instead (a container, a cluster node...):
//! tests that need to restart the server, read its log, touch its files or change module-wide
//! settings call [`require_own_server!`] first and are skipped in that mode. Every test names
//! its keys through [`Keys`], which prefixes them with the test's name and deletes them
//! afterwards on a shared server. A shared server must allow `DEBUG` and `MODULE`
//! (`enable-debug-command yes`, `enable-module-command yes`, or `local`): the tests compare
//! filters with `DEBUG DIGEST-VALUE` and check `MODULE LIST`.
//!
//! The module is `$LAYERBLOOM_MODULE` or `target/release/liblayerbloom.so`; build it first
//! (`cargo build --release`, which `make test` does).
//!
//! The server is `$LAYERBLOOM_SERVER` (a path or a command name), `redis-server` by default:
//! `make test` runs every suite on each server of the matrix (scripts/servers.sh). A test that
//! cannot apply to a server asks [`server()`] which one it is and says why it skips.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionLike, FromRedisValue, Value};

/// How long a server may take to answer PING after it was spawned.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SHUTDOWN or SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Spawn attempts (each on a new port) before giving up.
const START_ATTEMPTS: usize = 5;

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Builds a command from a name and arguments of any `ToRedisArgs` type:
/// `cmd!("BF.ADD", &key, b"item\0")`.
#[macro_export]
macro_rules! cmd {
    ($name:expr $(, $arg:expr)* $(,)?) => {{
        #[allow(unused_mut)]
        let mut c = redis::cmd($name);
        $( c.arg($arg); )*
        c
    }};
}

/// Returns early from a test (printing why) when the suite targets a shared `REDIS_URL`
/// server: for tests that restart the server, read its log, touch its files or change
/// module-wide settings.
#[macro_export]
macro_rules! require_own_server {
    () => {
        if !$crate::common::restartable() {
            eprintln!("skipped: needs its own server");
            return;
        }
    };
}

/// Returns early from a test (printing why) when the server under test is not the one the test
/// is about: `skip_unless!(server().is_redis(), "Valkey has its own ACL category")`.
#[macro_export]
macro_rules! skip_unless {
    ($cond:expr, $why:expr) => {
        if !$cond {
            eprintln!("skipped on {}: {}", $crate::common::server(), $why);
            return;
        }
    };
}

/// The server binary the suite spawns: `$LAYERBLOOM_SERVER` or `redis-server`.
pub fn server_binary() -> String {
    std::env::var("LAYERBLOOM_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".to_string())
}

/// Which server the suite runs on, from its `--version` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerKind {
    /// `redis` or `valkey`.
    pub name: String,
    /// Major, minor, patch.
    pub version: (u32, u32, u32),
    /// The allocator it was built with (`jemalloc-5.3.0`, `libc`).
    pub malloc: String,
}

impl ServerKind {
    pub fn is_redis(&self) -> bool {
        self.name == "redis"
    }

    pub fn is_valkey(&self) -> bool {
        self.name == "valkey"
    }

    /// Whether this is Redis at or above `major.minor` (false for Valkey).
    pub fn is_redis_at_least(&self, major: u32, minor: u32) -> bool {
        self.is_redis() && (self.version.0, self.version.1) >= (major, minor)
    }

    /// The RDB format version in the footer of the DUMP payloads it writes (each server
    /// accepts its own and older ones).
    pub fn rdb_version(&self) -> u16 {
        match (self.is_valkey(), self.version) {
            (true, _) => 11,
            (false, (7, 0..=1, _)) => 10,
            (false, (7, 2..=3, _)) => 11,
            _ => 12,
        }
    }
}

impl std::fmt::Display for ServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b, c) = self.version;
        write!(f, "{} {a}.{b}.{c} ({})", self.name, self.malloc)
    }
}

/// The server under test (asked once per test binary).
pub fn server() -> &'static ServerKind {
    static KIND: std::sync::OnceLock<ServerKind> = std::sync::OnceLock::new();
    KIND.get_or_init(|| {
        let out = Command::new(server_binary())
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} --version: {e}", server_binary()));
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        parse_server_version(&line)
            .unwrap_or_else(|| panic!("unrecognised server version line: {line:?}"))
    })
}

/// `Redis server v=7.4.1 sha=... malloc=jemalloc-5.3.0 ...` -> its kind.
fn parse_server_version(line: &str) -> Option<ServerKind> {
    let name = line.split_whitespace().next()?.to_ascii_lowercase();
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
    };
    let mut parts = field("v=")?
        .split('.')
        .map(|p| p.parse::<u32>().ok())
        .collect::<Vec<_>>()
        .into_iter();
    let mut next = || parts.next().flatten().unwrap_or(0);
    let version = (next(), next(), next());
    Some(ServerKind {
        name,
        version,
        malloc: field("malloc=").unwrap_or_default(),
    })
}

/// RedisBloom's own module (the oracle): `$LAYERBLOOM_REDISBLOOM`, or the one
/// scripts/servers.sh unpacks; `None` when neither exists.
pub fn redisbloom_path() -> Option<PathBuf> {
    let path = match std::env::var_os("LAYERBLOOM_REDISBLOOM") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/servers/redis-7.4.1/redisbloom.so"),
    };
    path.is_file()
        .then(|| fs::canonicalize(&path).unwrap_or(path))
}

/// The external server's URL, when the suite runs against one.
pub fn external_url() -> Option<String> {
    std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty())
}

/// Whether tests get servers of their own (false in `REDIS_URL` mode).
pub fn restartable() -> bool {
    external_url().is_none()
}

/// Absolute path of the module library.
pub fn module_path() -> PathBuf {
    let path = match std::env::var_os("LAYERBLOOM_MODULE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/liblayerbloom.so"),
    };
    if !path.is_file() {
        panic!(
            "module not found at {}: run `cargo build --release` first (make test does)",
            path.display()
        );
    }
    fs::canonicalize(&path).unwrap_or(path)
}

/// How [`Server::restart`] stops the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `SHUTDOWN SAVE`: write the RDB file first.
    Save,
    /// `SHUTDOWN NOSAVE`: no RDB file (an AOF is still flushed).
    NoSave,
    /// SIGKILL: no chance to write anything.
    Kill,
}

/// Options for a spawned server.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    config: Vec<(String, String)>,
    module_args: Vec<String>,
    save: Option<String>,
    module: Option<PathBuf>,
}

impl Builder {
    /// A server config directive, e.g. `("appendonly", "yes")` or
    /// `("replicaof", "127.0.0.1 6379")` (the value is split on whitespace).
    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.config.push((name.to_string(), value.to_string()));
        self
    }

    /// Arguments after the module path on the `--loadmodule` line.
    pub fn module_args(mut self, args: &[&str]) -> Self {
        self.module_args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Loads another module instead of layerbloom (RedisBloom's, for the oracle tests).
    pub fn module(mut self, path: &Path) -> Self {
        self.module = Some(path.to_path_buf());
        self
    }

    /// The `save` directive (default `""`, no automatic snapshots).
    pub fn save(mut self, value: &str) -> Self {
        self.save = Some(value.to_string());
        self
    }

    /// Spawns the server. In `REDIS_URL` mode a builder with no options returns the external
    /// server; one with options panics (the test should have called `require_own_server!()`).
    pub fn start(self) -> Server {
        if let Some(url) = external_url() {
            assert!(
                self.config.is_empty()
                    && self.module_args.is_empty()
                    && self.save.is_none()
                    && self.module.is_none(),
                "this test configures its server: call require_own_server!() first"
            );
            return Server {
                url,
                port: 0,
                child: None,
                dir: None,
                builder: self,
            };
        }
        self.try_start()
            .unwrap_or_else(|failure| panic!("redis-server did not start {failure}"))
    }

    /// Spawns the server, or says why it did not start (the log tails; the dir is kept):
    /// for a test that skips where a module cannot load on the server under test.
    pub fn try_start(self) -> Result<Server, String> {
        assert!(restartable(), "try_start() needs its own server");
        let dir = fresh_dir();
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            match spawn(&self, &dir, port) {
                Ok(child) => {
                    return Ok(Server {
                        url: format!("redis://127.0.0.1:{port}/"),
                        port,
                        child: Some(child),
                        dir: Some(dir),
                        builder: self,
                    })
                }
                Err(failure) => last_failure = failure,
            }
        }
        Err(format!("(dir kept: {}):\n{last_failure}", dir.display()))
    }
}

/// A running redis-server with the module loaded.
pub struct Server {
    url: String,
    port: u16,
    child: Option<Child>,
    dir: Option<PathBuf>,
    builder: Builder,
}

impl Server {
    /// A server with default options (or the `REDIS_URL` one).
    pub fn start() -> Server {
        Builder::default().start()
    }

    /// Options for a server of the test's own.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Whether this handle is the shared `REDIS_URL` server.
    pub fn is_external(&self) -> bool {
        self.child.is_none()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (own servers only).
    pub fn dir(&self) -> &Path {
        self.dir
            .as_deref()
            .expect("dir() of an external server: call require_own_server!() first")
    }

    /// The server log so far (own servers only).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir().join("redis.log")).unwrap_or_default()
    }

    /// A RESP2 connection.
    pub fn conn(&self) -> redis::Connection {
        open(&self.url)
    }

    /// A RESP3 connection (the client sends `HELLO 3`).
    pub fn conn_resp3(&self) -> redis::Connection {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        let url = format!("{}{sep}protocol=resp3", self.url);
        open(&url)
    }

    /// A key-name space for one test: see [`Keys`].
    pub fn keys(&self, test: &str) -> Keys {
        Keys {
            prefix: test.to_string(),
            url: self.is_external().then(|| self.url.clone()),
        }
    }

    /// Stops the server as asked and starts it again with the same options, dir and port.
    pub fn restart(&mut self, how: Stop) {
        let mut child = self.child.take().expect("restart() of an external server");
        match how {
            Stop::Save | Stop::NoSave => {
                let word = if how == Stop::Save { "SAVE" } else { "NOSAVE" };
                let mut con = self.conn();
                // A successful SHUTDOWN closes the connection: the reply is an I/O error.
                if let Ok(Value::ServerError(e)) = con.req_command(&cmd!("SHUTDOWN", word)) {
                    panic!("SHUTDOWN {word} refused: {}", server_error_text(&e));
                }
                wait_exit(&mut child, stop_timeout());
            }
            Stop::Kill => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        self.spawn_again("restart");
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, SIGTERM);
            wait_exit(&mut child, stop_timeout());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = &self.dir {
            valgrind_verdict(dir);
            if std::thread::panicking() {
                eprintln!("server dir kept for inspection: {}", dir.display());
            } else {
                let _ = fs::remove_dir_all(dir);
            }
        }
    }
}

/// Names keys for one test (`<test>:<name>`) and, on a shared server, deletes them on drop.
pub struct Keys {
    prefix: String,
    url: Option<String>,
}

impl Keys {
    /// The key `<test>:<name>`.
    pub fn k(&self, name: &str) -> String {
        format!("{}:{}", self.prefix, name)
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let Some(url) = &self.url else { return };
        let Ok(client) = redis::Client::open(url.as_str()) else {
            return;
        };
        let Ok(mut con) = client.get_connection() else {
            return;
        };
        let mut cursor: u64 = 0;
        loop {
            let page: redis::RedisResult<(u64, Vec<Vec<u8>>)> = cmd!(
                "SCAN",
                cursor,
                "MATCH",
                format!("{}:*", self.prefix),
                "COUNT",
                1000
            )
            .query(&mut con);
            let Ok((next, keys)) = page else { return };
            if !keys.is_empty() {
                let _ = cmd!("UNLINK", keys).query::<i64>(&mut con);
            }
            if next == 0 {
                return;
            }
            cursor = next;
        }
    }
}

fn open(url: &str) -> redis::Connection {
    let client = redis::Client::open(url).unwrap_or_else(|e| panic!("bad URL {url}: {e}"));
    client
        .get_connection()
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

fn fresh_dir() -> PathBuf {
    loop {
        let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("layerbloom-test-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create {}: {e}", dir.display()),
        }
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("no free port");
    listener.local_addr().unwrap().port()
}

fn args(builder: &Builder, dir: &Path, port: u16) -> Vec<String> {
    let module = builder.module.clone().unwrap_or_else(module_path);
    let mut args: Vec<String> = vec!["--loadmodule".into(), module.display().to_string()];
    args.extend(builder.module_args.iter().cloned());
    let mut push = |name: &str, value: &str| {
        args.push(format!("--{name}"));
        if value.is_empty() {
            args.push(String::new());
        } else {
            args.extend(value.split_whitespace().map(str::to_string));
        }
    };
    let dir_s = dir.display().to_string();
    let log = dir.join("redis.log").display().to_string();
    let port_s = port.to_string();
    for (name, value) in [
        ("port", port_s.as_str()),
        ("bind", "127.0.0.1"),
        ("dir", dir_s.as_str()),
        ("save", builder.save.as_deref().unwrap_or("")),
        ("enable-debug-command", "yes"),
        ("enable-module-command", "yes"),
        ("appendonly", "no"),
        ("daemonize", "no"),
        ("logfile", log.as_str()),
    ] {
        push(name, value);
    }
    // Later directives win: the test's own come last.
    for (name, value) in &builder.config {
        push(name, value);
    }
    args
}

/// Spawns one server and waits until it answers PING; `Err` (with the log tail) if it exits
/// or does not answer in time.
fn spawn(builder: &Builder, dir: &Path, port: u16) -> Result<Child, String> {
    let stderr_path = dir.join("stderr.log");
    let stderr = fs::File::create(&stderr_path).expect("cannot create stderr.log");
    let mut child = server_command(dir)
        .args(args(builder, dir, port))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run redis-server: {e}"));
    let deadline = Instant::now() + start_timeout();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "redis-server exited ({status}) on port {port}\n{}",
                tails(dir)
            ));
        }
        if answers_ping(port, child.id()) {
            return Ok(child);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "redis-server did not answer PING within {:?} on port {port}\n{}",
                start_timeout(),
                tails(dir)
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the server on `port` answers PING and is the process we spawned (another test's
/// server could have taken the port first).
fn answers_ping(port: u16, pid: u32) -> bool {
    if TcpStream::connect(("127.0.0.1", port)).is_err() {
        return false;
    }
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return false;
    };
    let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return false;
    };
    if !matches!(con.req_command(&cmd!("PING")), Ok(Value::SimpleString(ref s)) if s == "PONG") {
        return false;
    }
    con.info_map("server").get("process_id") == Some(&pid.to_string())
}

fn tails(dir: &Path) -> String {
    let mut out = String::new();
    for name in ["stderr.log", "redis.log"] {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(dir.join(name)) {
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(30)..];
        out.push_str(&format!(
            "--- {name} (last lines) ---\n{}\n",
            tail.join("\n")
        ));
    }
    out
}

const SIGTERM: i32 = 15;

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) takes two integers and touches no memory of ours; the pid is our own
    // child, not yet reaped (we hold its `Child`), so it cannot name another process.
    unsafe {
        kill(child.id() as i32, sig);
    }
}

fn wait_exit(child: &mut Child, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Polls `done` until it holds, panicking with `what` after `timeout`. A bound on waiting,
/// not an assertion on speed.
pub fn wait_until(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a replica's link to its primary is up (bounded, not a speed assertion).
/// Waits until no AOF rewrite runs or is scheduled, then checks that the last one succeeded.
pub fn wait_for_aof_rewrite(con: &mut redis::Connection) {
    wait_until(Duration::from_secs(120), "the AOF rewrite", || {
        let info = con.info_map("persistence");
        info.get("aof_rewrite_in_progress").map(String::as_str) == Some("0")
            && info.get("aof_rewrite_scheduled").map(String::as_str) == Some("0")
    });
    let info = con.info_map("persistence");
    assert_eq!(
        info.get("aof_last_bgrewrite_status").map(String::as_str),
        Some("ok"),
        "the last AOF rewrite failed"
    );
}

pub fn wait_for_link(replica: &Server) {
    let mut con = replica.conn();
    wait_until(Duration::from_secs(60), "master_link_status:up", || {
        con.info_map("replication")
            .get("master_link_status")
            .map(String::as_str)
            == Some("up")
    });
}

/// `CONFIG GET name`: the value, after checking the reply names the setting asked for.
pub fn config_get(con: &mut redis::Connection, name: &str) -> String {
    let v: Vec<String> = con.q(&cmd!("CONFIG", "GET", name));
    assert_eq!(v.len(), 2, "CONFIG GET {name} replied {v:?}");
    assert_eq!(v[0], name);
    v[1].clone()
}

/// The server's count of objects freed in the background. Redis 7.0 reports it under INFO
/// memory; later versions may move it to INFO stats.
pub fn lazyfreed_objects(con: &mut redis::Connection) -> i64 {
    let mut info = con.info_map("stats");
    info.extend(con.info_map("memory"));
    info.get("lazyfreed_objects")
        .expect("no lazyfreed_objects in INFO stats or memory")
        .parse()
        .unwrap()
}

/// The full text of a server error as the server sent it (`ERR not found`, `Bad capacity`).
/// The client splits the line at the first space into a code and details: join them back.
pub fn server_error_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {d}", e.code()),
        None => e.code().to_string(),
    }
}

/// The error text of a reply value, if it is an error.
pub fn error_of(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(server_error_text(e)),
        _ => None,
    }
}

/// The text of a string-like reply (simple, bulk or verbatim string).
pub fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::SimpleString(s) => Some(s.clone()),
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

/// Commands on a connection that panic with the command in the message instead of returning
/// `Result`s, and return raw replies (errors included) where a test checks them exactly.
pub trait Exec {
    /// The reply exactly as received, nested errors included. Panics on I/O errors only.
    fn raw(&mut self, cmd: &Cmd) -> Value;
    /// The full text of the error the command must fail with.
    fn err_text(&mut self, cmd: &Cmd) -> String;
    /// The reply converted to `T`; panics if it is an error.
    fn q<T: FromRedisValue>(&mut self, cmd: &Cmd) -> T;
    /// Asserts the reply is `OK`.
    fn ok(&mut self, cmd: &Cmd);
    /// `INFO <section>` as a field map.
    fn info_map(&mut self, section: &str) -> HashMap<String, String>;
}

impl Exec for redis::Connection {
    fn raw(&mut self, cmd: &Cmd) -> Value {
        self.req_command(cmd)
            .unwrap_or_else(|e| panic!("{} failed on the wire: {e}", show(cmd)))
    }

    fn err_text(&mut self, cmd: &Cmd) -> String {
        let v = self.raw(cmd);
        error_of(&v).unwrap_or_else(|| panic!("{} should fail, got {v:?}", show(cmd)))
    }

    fn q<T: FromRedisValue>(&mut self, cmd: &Cmd) -> T {
        let v = self.raw(cmd);
        if let Some(e) = error_of(&v) {
            panic!("{} failed: {e}", show(cmd));
        }
        if let Value::Array(items) = &v {
            if let Some(e) = items.iter().find_map(error_of) {
                panic!("{} failed inside its reply: {e} (reply {v:?})", show(cmd));
            }
        }
        redis::from_redis_value(v.clone())
            .unwrap_or_else(|e| panic!("{} replied {v:?}, not convertible: {e}", show(cmd)))
    }

    fn ok(&mut self, cmd: &Cmd) {
        let v = self.raw(cmd);
        assert!(
            matches!(&v, Value::Okay) || matches!(&v, Value::SimpleString(s) if s == "OK"),
            "{} should reply OK, got {v:?}",
            show(cmd)
        );
    }

    fn info_map(&mut self, section: &str) -> HashMap<String, String> {
        let v = self.raw(&cmd!("INFO", section));
        let text = text_of(&v).unwrap_or_else(|| panic!("INFO {section} replied {v:?}"));
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect()
    }
}

/// A command for messages: its arguments, long binary ones shortened.
pub fn show(cmd: &Cmd) -> String {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) if b.len() > 64 => format!("<{} bytes>", b.len()),
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Arg::Cursor => "<cursor>".into(),
            _ => "<arg>".into(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The five fields of `BF.INFO key`, looked up by name (the exact reply shape has its own
/// tests; this parser only needs the values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfInfo {
    pub capacity: i64,
    pub size: i64,
    pub filters: i64,
    pub items: i64,
    /// `None` for a non-scaling filter.
    pub expansion: Option<i64>,
}

/// `BF.INFO key` over a RESP2 connection.
pub fn bf_info(con: &mut redis::Connection, key: &str) -> BfInfo {
    let v = con.raw(&cmd!("BF.INFO", key));
    let pairs: Vec<(String, Value)> = match &v {
        Value::Array(items) if items.len() % 2 == 0 => items
            .chunks(2)
            .map(|p| (text_of(&p[0]).unwrap_or_default(), p[1].clone()))
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| (text_of(k).unwrap_or_default(), v.clone()))
            .collect(),
        _ => panic!("BF.INFO {key} replied {v:?}"),
    };
    let field = |name: &str| -> Value {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("BF.INFO {key} has no {name:?}: {v:?}"))
    };
    let int = |name: &str| -> i64 {
        match field(name) {
            Value::Int(n) => n,
            other => panic!("BF.INFO {key} field {name:?} is {other:?}, not an integer"),
        }
    };
    BfInfo {
        capacity: int("Capacity"),
        size: int("Size"),
        filters: int("Number of filters"),
        items: int("Number of items inserted"),
        expansion: match field("Expansion rate") {
            Value::Nil => None,
            Value::Int(n) => Some(n),
            other => panic!("BF.INFO {key} expansion is {other:?}"),
        },
    }
}

/// `DEBUG DIGEST-VALUE key` (hex).
pub fn digest(con: &mut redis::Connection, key: &str) -> String {
    let v: Vec<String> = con.q(&cmd!("DEBUG", "DIGEST-VALUE", key));
    v.into_iter()
        .next()
        .expect("DEBUG DIGEST-VALUE replied nothing")
}

/// `BF.MEXISTS` over many items, in batches; one bool per item.
pub fn mexists(con: &mut redis::Connection, key: &str, items: &[Vec<u8>]) -> Vec<bool> {
    let mut out = Vec::with_capacity(items.len());
    for batch in items.chunks(1000) {
        let mut c = cmd!("BF.MEXISTS", key);
        for item in batch {
            c.arg(item.as_slice());
        }
        let r: Vec<i64> = con.q(&c);
        assert_eq!(r.len(), batch.len(), "BF.MEXISTS reply length");
        out.extend(r.into_iter().map(|x| x == 1));
    }
    out
}

/// `BF.MADD` over many items, in batches; the replies (1/0) per item. Panics on any error.
pub fn madd(con: &mut redis::Connection, key: &str, items: &[Vec<u8>]) -> Vec<i64> {
    let mut out = Vec::with_capacity(items.len());
    for batch in items.chunks(1000) {
        let mut c = cmd!("BF.MADD", key);
        for item in batch {
            c.arg(item.as_slice());
        }
        let r: Vec<i64> = con.q(&c);
        assert_eq!(r.len(), batch.len(), "BF.MADD reply length");
        out.extend(r);
    }
    out
}

/// `n` distinct items `<prefix>-<i>`.
pub fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .collect()
}

/// Every `(iterator, data)` pair of a `BF.SCANDUMP` walk, the final `[0, ""]` excluded.
/// Checks the walk's shape: the first reply is `[1, header]`, the last `[0, ""]`.
pub fn scandump(con: &mut redis::Connection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it: i64 = 0;
    for _ in 0..100_000 {
        let v = con.raw(&cmd!("BF.SCANDUMP", key, it));
        let (next, data) = match &v {
            Value::Array(p) if p.len() == 2 => match (&p[0], &p[1]) {
                (Value::Int(n), Value::BulkString(d)) => (*n, d.clone()),
                _ => panic!("BF.SCANDUMP {key} {it} replied {v:?}"),
            },
            _ => panic!("BF.SCANDUMP {key} {it} replied {v:?}"),
        };
        if it == 0 {
            assert_eq!(next, 1, "BF.SCANDUMP {key} 0 must return iterator 1");
            assert!(
                !data.is_empty(),
                "BF.SCANDUMP {key} 0 returned an empty header"
            );
        }
        if next == 0 {
            assert!(
                data.is_empty(),
                "the final SCANDUMP reply must be [0, \"\"]"
            );
            return out;
        }
        out.push((next, data));
        it = next;
    }
    panic!("BF.SCANDUMP {key} never returned iterator 0");
}

/// Replays a SCANDUMP walk with `BF.LOADCHUNK` into `key`.
pub fn loadchunks(con: &mut redis::Connection, key: &str, chunks: &[(i64, Vec<u8>)]) {
    for (it, data) in chunks {
        con.ok(&cmd!("BF.LOADCHUNK", key, *it, data.as_slice()));
    }
}

/// Whether `key` exists (Redis `EXISTS`).
pub fn key_exists(con: &mut redis::Connection, key: &str) -> bool {
    con.q::<i64>(&cmd!("EXISTS", key)) == 1
}

// ---------------------------------------------------------------------------------------------
// Running the servers under valgrind, and small helpers for the reliability tests.
// ---------------------------------------------------------------------------------------------

/// Whether the servers run under valgrind (`LAYERBLOOM_VALGRIND=1`): every spawn is prefixed
/// with `valgrind --error-exitcode=99`, the start and stop timeouts grow, and dropping a
/// [`Server`] fails the test unless each valgrind log of its processes reports no error.
pub fn under_valgrind() -> bool {
    std::env::var("LAYERBLOOM_VALGRIND").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn start_timeout() -> Duration {
    if under_valgrind() {
        Duration::from_secs(180)
    } else {
        START_TIMEOUT
    }
}

fn stop_timeout() -> Duration {
    if under_valgrind() {
        Duration::from_secs(120)
    } else {
        STOP_TIMEOUT
    }
}

/// `redis-server`, or `valgrind ... redis-server` under [`under_valgrind`]. Valgrind keeps
/// the process id, so the PING check of [`spawn`] still recognises the server.
fn server_command(dir: &Path) -> Command {
    if !under_valgrind() {
        return Command::new(server_binary());
    }
    let mut c = Command::new("valgrind");
    c.arg("--tool=memcheck")
        .arg("--leak-check=no")
        .arg("--error-exitcode=99")
        // Debian's redis-server takes malloc from the system jemalloc: intercept it there.
        .arg("--soname-synonyms=somalloc=libjemalloc.so*")
        .arg(format!("--log-file={}/valgrind.%p.log", dir.display()))
        .arg(format!(
            "--suppressions={}",
            valgrind_suppressions(dir).display()
        ))
        .arg("--track-origins=yes")
        .arg(server_binary());
    c
}

/// Writes the suppression file into the server's dir. LZF compression (RDB and DUMP strings)
/// probes a hash table it deliberately leaves uninitialised: a known, harmless report that
/// Redis's own `src/valgrind.sup` suppresses the same way.
fn valgrind_suppressions(dir: &Path) -> PathBuf {
    let path = dir.join("valgrind.supp");
    let text = "{\n   lzf-uninitialised-hash-table-cond\n   Memcheck:Cond\n   fun:lzf_compress\n}\n\
                {\n   lzf-uninitialised-hash-table-value8\n   Memcheck:Value8\n   fun:lzf_compress\n}\n";
    fs::write(&path, text).expect("cannot write valgrind.supp");
    path
}

/// Lines valgrind writes when it reports an error (also in the log of a killed process,
/// which has no final summary).
const VALGRIND_ERROR_MARKS: [&str; 8] = [
    "Invalid read",
    "Invalid write",
    "Invalid free",
    "Mismatched free",
    "uninitialised",
    "Syscall param",
    "overlap",
    "Process terminating with default action of signal 11",
];

/// Under valgrind: copies the logs to `$LAYERBLOOM_VALGRIND_LOGS` (if set) and panics unless
/// every log of the dir reports zero errors.
fn valgrind_verdict(dir: &Path) {
    if !under_valgrind() || std::thread::panicking() {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut bad = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("valgrind.") && name.ends_with(".log")) {
            continue;
        }
        let text = fs::read_to_string(entry.path()).unwrap_or_default();
        if let Some(keep) = std::env::var_os("LAYERBLOOM_VALGRIND_LOGS") {
            let keep = PathBuf::from(keep);
            let _ = fs::create_dir_all(&keep);
            let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
            let _ = fs::write(
                keep.join(format!("{}-{n}-{name}", std::process::id())),
                &text,
            );
        }
        let clean = if text.contains("ERROR SUMMARY:") {
            text.contains("ERROR SUMMARY: 0 errors")
        } else {
            // Killed (SIGKILL) before the summary: no error may have been reported.
            !VALGRIND_ERROR_MARKS.iter().any(|m| text.contains(m))
        };
        if !clean {
            bad.push(format!("{name}:\n{text}"));
        }
    }
    if !bad.is_empty() {
        panic!(
            "valgrind reported errors (dir kept: {}):\n{}",
            dir.display(),
            bad.join("\n")
        );
    }
}

impl Server {
    /// Whether the spawned process is still running (always true for an external server).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// The spawned process's id (own servers only).
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .expect("pid() of an external server")
            .id()
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Kills the process with SIGKILL and leaves it dead (own servers only); a later
    /// [`Server::restart`] is not possible, but [`Server::start_again`] is.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a server killed by [`Server::kill`] again, with the same options, dir and port.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "start_again() of a running server");
        self.spawn_again("start again");
    }

    /// Spawns the server on its dir and port, retrying while the old process's port is
    /// still being released.
    fn spawn_again(&mut self, what: &str) {
        let port = self.port;
        let dir = self.dir().to_path_buf();
        let deadline = Instant::now() + start_timeout();
        loop {
            match spawn(&self.builder, &dir, port) {
                Ok(child) => {
                    self.child = Some(child);
                    return;
                }
                Err(failure) if Instant::now() > deadline => {
                    panic!("redis-server did not {what} on port {port}:\n{failure}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

/// Asserts the server answers PING with PONG.
pub fn assert_pong(con: &mut redis::Connection) {
    assert_eq!(
        con.raw(&cmd!("PING")),
        Value::SimpleString("PONG".into()),
        "PING"
    );
}

/// One numeric field of `INFO <section>`.
pub fn info_i64(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let info = con.info_map(section);
    info.get(field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .parse()
        .unwrap_or_else(|e| panic!("INFO {section} {field}: {e}"))
}

/// A small deterministic pseudo-random generator (SplitMix64) for reproducible workloads.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// An element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------------------------
// DUMP payloads built field by field, with a valid CRC-64: the module's decoders are attacked,
// not Redis's checksum (tests/hostile.rs, tests/recovery.rs).
// ---------------------------------------------------------------------------------------------

/// CRC-64 as Redis computes DUMP and RDB checksums ("Jones": polynomial 0xad93d23594c935a9,
/// reflected input and output, initial value 0, no final xor).
pub fn crc64(bytes: &[u8]) -> u64 {
    const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    (c >> 1) ^ POLY_REFLECTED
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        t
    });
    bytes.iter().fold(0u64, |crc, &b| {
        table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// An RDB length: 6-bit, 14-bit, 32-bit or 64-bit form, the shortest that fits.
pub fn rdb_len(n: u64) -> Vec<u8> {
    if n < 1 << 6 {
        vec![n as u8]
    } else if n < 1 << 14 {
        vec![0x40 | (n >> 8) as u8, n as u8]
    } else if n <= u64::from(u32::MAX) {
        let mut v = vec![0x80];
        v.extend_from_slice(&(n as u32).to_be_bytes());
        v
    } else {
        let mut v = vec![0x81];
        v.extend_from_slice(&n.to_be_bytes());
        v
    }
}

/// The 64-bit id Redis gives a module data type: its 9-character name at 6 bits a character,
/// then the 10-bit encoding version.
pub fn module_type_id(name: &[u8; 9], encver: u64) -> u64 {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = name.iter().fold(0u64, |id, c| {
        let pos = CHARSET.iter().position(|x| x == c).expect("name charset") as u64;
        (id << 6) | pos
    });
    (id << 10) | (encver & 1023)
}

pub const RDB_TYPE_MODULE_2: u8 = 7;
pub const OP_EOF: u8 = 0;
pub const OP_UINT: u8 = 2;
pub const OP_FLOAT: u8 = 3;
pub const OP_DOUBLE: u8 = 4;
pub const OP_STRING: u8 = 5;
/// The data type's encoding version for layerbloom's own values.
pub const LAYERBLOOM_ENCVER: u64 = 100;
/// RedisBloom's current encoding version.
pub const REDISBLOOM_ENCVER: u64 = 4;

/// One field of a module value as the module API saves it.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    Uint(u64),
    Double(f64),
    Str(Vec<u8>),
    /// Bytes written as they are: an opcode-level attack.
    Raw(Vec<u8>),
}

impl Field {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Field::Uint(n) => {
                out.push(OP_UINT);
                out.extend(rdb_len(*n));
            }
            Field::Double(x) => {
                out.push(OP_DOUBLE);
                out.extend_from_slice(&x.to_le_bytes());
            }
            Field::Str(s) => {
                out.push(OP_STRING);
                out.extend(rdb_len(s.len() as u64));
                out.extend_from_slice(s);
            }
            Field::Raw(b) => out.extend_from_slice(b),
        }
    }

    pub fn str(&self) -> &[u8] {
        match self {
            Field::Str(s) => s,
            other => panic!("expected a string field, got {other:?}"),
        }
    }
}

/// A DUMP payload of a module value.
#[derive(Debug, Clone)]
pub struct Payload {
    pub type_byte: u8,
    pub module_id: u64,
    pub fields: Vec<Field>,
    pub eof: bool,
    pub rdb_version: u16,
}

impl Payload {
    pub fn new(encver: u64, fields: Vec<Field>) -> Self {
        Payload {
            type_byte: RDB_TYPE_MODULE_2,
            module_id: module_type_id(b"MBbloom--", encver),
            fields,
            eof: true,
            rdb_version: server().rdb_version(),
        }
    }

    /// A layerbloom value: the header string, then the bit array pieces.
    pub fn layerbloom(header: &[u8], pieces: &[Vec<u8>]) -> Self {
        let mut fields = vec![Field::Str(header.to_vec())];
        fields.extend(pieces.iter().map(|p| Field::Str(p.clone())));
        Payload::new(LAYERBLOOM_ENCVER, fields)
    }

    pub fn body(&self) -> Vec<u8> {
        let mut out = vec![self.type_byte];
        out.extend(rdb_len(self.module_id));
        for f in &self.fields {
            f.encode(&mut out);
        }
        if self.eof {
            out.push(OP_EOF);
        }
        out
    }

    /// The payload bytes, footer and valid checksum included.
    pub fn bytes(&self) -> Vec<u8> {
        seal(self.body(), self.rdb_version)
    }
}

/// Appends the RDB version and the CRC-64 of everything before it.
pub fn seal(mut body: Vec<u8>, rdb_version: u16) -> Vec<u8> {
    body.extend_from_slice(&rdb_version.to_le_bytes());
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// One layer of a RedisBloom value.
#[derive(Debug, Clone)]
pub struct RbLayer {
    pub entries: u64,
    pub error: f64,
    pub hashes: u64,
    pub bpe: f64,
    pub bits: u64,
    pub n2: u64,
    pub bytes: Vec<u8>,
    pub size: u64,
}

/// RedisBloom's layer sizing (REDISBLOOM_COMPAT.md), NOROUND: an empty layer.
// RedisBloom's own rounded ln(2) and ln(2)^2 decide its sizes, not the exact constants.
#[allow(clippy::approx_constant)]
pub fn rb_layer(entries: u64, error: f64) -> RbLayer {
    let bpe = -error.ln() / 0.480453013918201;
    let hashes = (0.693147180559945 * bpe).ceil() as u64;
    let bits = ((entries as f64 * bpe) as u64).max(1);
    let bytes = bits.div_ceil(64) * 8;
    RbLayer {
        entries,
        error,
        hashes,
        bpe,
        bits: bytes * 8,
        n2: 0,
        bytes: vec![0; bytes as usize],
        size: 0,
    }
}

/// A RedisBloom chain.
#[derive(Debug, Clone)]
pub struct RbChain {
    pub items: u64,
    pub options: u64,
    pub growth: u64,
    pub layers: Vec<RbLayer>,
}

impl RbChain {
    /// A scaling 64-bit-hash chain of two empty layers (options NOROUND | FORCE64).
    pub fn sample() -> Self {
        RbChain {
            items: 0,
            options: 5,
            growth: 2,
            layers: vec![rb_layer(100, 0.005), rb_layer(200, 0.0025)],
        }
    }

    /// The value's fields at an encoding version, as RedisBloom's field order has it.
    pub fn fields(&self, encver: u64) -> Vec<Field> {
        let mut f = vec![
            Field::Uint(self.items),
            Field::Uint(self.layers.len() as u64),
        ];
        if encver >= 2 {
            f.push(Field::Uint(self.options));
        }
        if encver >= 4 {
            f.push(Field::Uint(self.growth));
        }
        for l in &self.layers {
            f.push(Field::Uint(l.entries));
            f.push(Field::Double(l.error));
            f.push(Field::Uint(l.hashes));
            f.push(Field::Double(l.bpe));
            if encver >= 1 {
                f.push(Field::Uint(l.bits));
                f.push(Field::Uint(l.n2));
            }
            f.push(Field::Str(l.bytes.clone()));
            f.push(Field::Uint(l.size));
        }
        f
    }

    pub fn payload(&self, encver: u64) -> Vec<u8> {
        Payload::new(encver, self.fields(encver)).bytes()
    }

    /// RedisBloom's SCANDUMP header.
    pub fn scandump_header(&self) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&self.items.to_le_bytes());
        h.extend_from_slice(&(self.layers.len() as u32).to_le_bytes());
        h.extend_from_slice(&(self.options as u32).to_le_bytes());
        h.extend_from_slice(&(self.growth as u32).to_le_bytes());
        for l in &self.layers {
            h.extend_from_slice(&(l.bytes.len() as u64).to_le_bytes());
            h.extend_from_slice(&l.bits.to_le_bytes());
            h.extend_from_slice(&l.size.to_le_bytes());
            h.extend_from_slice(&l.error.to_le_bytes());
            h.extend_from_slice(&l.bpe.to_le_bytes());
            h.extend_from_slice(&(l.hashes as u32).to_le_bytes());
            h.extend_from_slice(&l.entries.to_le_bytes());
            h.push(l.n2 as u8);
        }
        h
    }
}

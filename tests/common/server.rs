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

use std::fs;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};

use super::conn::{server_error_text, Exec};
use super::kind::module_path;
use super::valgrind::{server_command, under_valgrind, valgrind_verdict};

/// How long a server may take to answer PING after it was spawned.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SHUTDOWN or SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Spawn attempts (each on a new port) before giving up.
const START_ATTEMPTS: usize = 5;

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The external server's URL, when the suite runs against one.
pub fn external_url() -> Option<String> {
    std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty())
}

/// Whether tests get servers of their own (false in `REDIS_URL` mode).
pub fn restartable() -> bool {
    external_url().is_none()
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

    /// An AOF of commands alone (`appendonly yes`, no RDB preamble): a rewrite writes each
    /// value as the commands that rebuild it.
    pub fn command_aof(self) -> Self {
        self.config("appendonly", "yes")
            .config("aof-use-rdb-preamble", "no")
    }

    /// The `replicaof` directive: a replica of `primary` (one of the test's own servers).
    pub fn replica_of(self, primary: &Server) -> Self {
        self.config("replicaof", &format!("127.0.0.1 {}", primary.port()))
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

    /// Sets a config directive for the next `restart()` (replacing one of the same name): a
    /// server that comes back different, e.g. with its test clock moved on.
    pub fn config_on_restart(&mut self, name: &str, value: &str) {
        let config = &mut self.builder.config;
        config.retain(|(n, _)| n != name);
        config.push((name.to_string(), value.to_string()));
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

/// A layerbloom server and a RedisBloom one (the oracle), or `None`, said on stderr, when
/// RedisBloom's module is not available: the caller skips.
pub fn ours_and_redisbloom() -> Option<(Server, Server)> {
    let Some(path) = super::kind::redisbloom_path() else {
        eprintln!("skipped: RedisBloom's module is not available");
        return None;
    };
    Some((Server::start(), Server::builder().module(&path).start()))
}

/// The newest AOF file of a type (`b` base, `i` incremental) the manifest in a server's dir
/// names. A manifest line is key-value pairs, `file <name> seq <n> type <t>`, to which servers
/// add fields of their own (Redis 8: `startoffset <n>`, `endoffset <n>`): the fields are read
/// by name, never by position.
pub fn aof_file(dir: &Path, kind: &str) -> PathBuf {
    let aof_dir = dir.join("appendonlydir");
    let manifest = fs::read_to_string(aof_dir.join("appendonly.aof.manifest"))
        .expect("no AOF manifest in appendonlydir");
    let field = |line: &str, key: &str| -> Option<String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        words
            .chunks(2)
            .find(|pair| pair[0] == key)
            .and_then(|pair| pair.get(1))
            .map(|v| v.to_string())
    };
    let name = manifest
        .lines()
        .rev()
        .filter(|l| field(l, "type").as_deref() == Some(kind))
        .find_map(|l| field(l, "file"))
        .unwrap_or_else(|| panic!("no file of type {kind} in the manifest:\n{manifest}"));
    aof_dir.join(name)
}

/// Copies `from` to `to` (a file or a directory tree), leaving the copies writable (fixtures
/// may be read-only; a server appends to its AOF and replaces its RDB file).
pub fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
        for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
            let entry = entry.expect("readdir");
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        fs::copy(from, to)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
        fs::set_permissions(to, fs::Permissions::from_mode(0o644)).expect("chmod copy");
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

/// A loopback port nobody listens on now (another process may take it first: spawns retry).
pub fn free_port() -> u16 {
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

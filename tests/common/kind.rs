//! Which server binary and module the suite runs (`$LAYERBLOOM_SERVER`, `$LAYERBLOOM_MODULE`,
//! `$LAYERBLOOM_REDISBLOOM`), and which server that is: a test that cannot apply to one asks
//! [`server()`] and says why it skips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// The server under test (asked once per run).
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

/// The module built with the test clock (`make test-clock-module`):
/// `$LAYERBLOOM_TEST_CLOCK_MODULE` or `target/test-clock/liblayerbloom.so`. Panics, saying
/// how to build it, when it is missing or older than the sources (a stale module would test
/// old code).
pub fn test_clock_module_path() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = match std::env::var_os("LAYERBLOOM_TEST_CLOCK_MODULE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => root.join("target/test-clock/liblayerbloom.so"),
    };
    let built = fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "the test-clock module is not at {}: run `make test-clock-module` (make test \
                 does)",
                path.display()
            )
        });
    let newest_source = ["src", "filter/src"]
        .iter()
        .filter_map(|dir| newest_mtime(&root.join(dir)))
        .max();
    if let Some(source) = newest_source {
        assert!(
            built >= source,
            "the test-clock module at {} is older than the sources: run `make test-clock-module`",
            path.display()
        );
    }
    fs::canonicalize(&path).unwrap_or(path)
}

fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(time);
    }
    newest
}

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

    /// Whether it allocates with jemalloc (its `--version` line's `malloc=`): the allocator
    /// whose size classes make usable sizes deterministic; the PyPI Valkey builds use glibc's.
    pub fn uses_jemalloc(&self) -> bool {
        self.malloc.starts_with("jemalloc")
    }

    /// Whether this is Redis at or above `major.minor` (false for Valkey).
    pub fn is_redis_at_least(&self, major: u32, minor: u32) -> bool {
        self.is_redis() && (self.version.0, self.version.1) >= (major, minor)
    }

    /// The RDB format version in the footer of the DUMP payloads it writes (each server
    /// accepts its own and older ones): asked of the server (see [`asked`]).
    pub fn rdb_version(&self) -> u16 {
        asked().rdb_version
    }

    /// The magic an RDB file of this server starts with: `REDIS` then four digits, or
    /// `VALKEY` then three (Valkey 9 and later): asked of the server (see [`asked`]).
    pub fn rdb_magic(&self) -> &'static [u8] {
        &asked().rdb_magic
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

/// What the suite asks a live server once per run, rather than assume from its version.
#[derive(Debug)]
pub struct Asked {
    /// The module's settings are named without the `bf.` prefix (`bf-error-rate`: Redis 8).
    pub unprefixed_settings: bool,
    /// The RDB version in the footer of its DUMP payloads (Redis 7.4 and 8: 12, Valkey 8:
    /// 11, Valkey 9: 80).
    pub rdb_version: u16,
    /// The start of its RDB files (`REDIS0012`, `VALKEY080`).
    pub rdb_magic: Vec<u8>,
}

/// Asks a server of the run (one of the suite's own, or the `REDIS_URL` one) once: whether
/// `CONFIG GET bf-error-rate` names the unprefixed setting, the footer of a `DUMP` payload,
/// the first bytes of the RDB file `SAVE` writes (own servers only; on a shared server the
/// magic follows from the DUMP version, the one thing it depends on).
pub fn asked() -> &'static Asked {
    static ASKED: std::sync::OnceLock<Asked> = std::sync::OnceLock::new();
    ASKED.get_or_init(|| {
        use super::conn::Exec;
        let s = super::server::Server::start();
        let mut con = s.conn();
        let unprefixed = {
            let v: Vec<String> = con.q(redis::cmd("CONFIG").arg("GET").arg("bf-error-rate"));
            v.first().map(String::as_str) == Some("bf-error-rate")
        };
        let key = "layerbloom-suite:probe";
        con.ok(redis::cmd("SET").arg(key).arg("v"));
        let dump: Vec<u8> = con.q(redis::cmd("DUMP").arg(key));
        let _: i64 = con.q(redis::cmd("DEL").arg(key));
        assert!(dump.len() >= 10, "DUMP replied {dump:?}");
        let footer = &dump[dump.len() - 10..dump.len() - 8];
        let rdb_version = u16::from_le_bytes([footer[0], footer[1]]);
        let rdb_magic = if s.is_external() {
            // Valkey 9 marks its files VALKEY from version 80 on.
            if rdb_version >= 80 {
                format!("VALKEY{rdb_version:03}")
            } else {
                format!("REDIS{rdb_version:04}")
            }
            .into_bytes()
        } else {
            con.ok(&redis::cmd("SAVE"));
            let file = std::fs::read(s.dir().join("dump.rdb")).expect("SAVE wrote no dump.rdb");
            // The magic is letters and digits; an opcode (0xFA, an AUX field) follows.
            file.iter()
                .take(16)
                .copied()
                .take_while(u8::is_ascii_alphanumeric)
                .collect()
        };
        Asked {
            unprefixed_settings: unprefixed,
            rdb_version,
            rdb_magic,
        }
    })
}

/// The name the server under test gives one of the module's settings, `name` unprefixed
/// (`bf-error-rate`): `bf-error-rate` where the module registered its settings without the
/// module's prefix (Redis 8), `bf.bf-error-rate` elsewhere. Asked of the server ([`asked`]).
pub fn setting(name: &str) -> String {
    let name = name.strip_prefix("bf.").unwrap_or(name);
    if asked().unprefixed_settings {
        name.to_string()
    } else {
        format!("bf.{name}")
    }
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

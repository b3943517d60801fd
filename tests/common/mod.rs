//! The integration tests' shared harness, split by concern; each test file (a module of the
//! one integration binary, `tests/integration.rs`) uses what it needs through the re-exports
//! below.
//!
//! - [`server`]: spawning and stopping servers of the tests' own, or the shared `REDIS_URL` one.
//! - [`kind`]: which server binary and module the suite runs, and which server that is.
//! - [`valgrind`]: running the spawned servers under valgrind memcheck.
//! - [`conn`]: commands on a connection, reply texts, `INFO` and `CONFIG`, bounded waits.
//! - [`cf`]: `CF.*` helpers and the RedisBloom cuckoo fixtures' notation.
//! - [`bf`]: `BF.*` helpers (`BF.INFO`, batched adds and probes, SCANDUMP walks) and workloads.
//! - [`payloads`]: DUMP payloads and RDB values built field by field, with valid checksums.

// A part of the harness may serve only tests that are ignored or not compiled here.
#![allow(dead_code, unused_imports)]

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

mod bf;
mod cf;
mod conn;
mod kind;
mod payloads;
mod server;
mod valgrind;

pub use bf::*;
pub use cf::*;
pub use conn::*;
pub use kind::*;
pub use payloads::*;
pub use server::*;
pub use valgrind::under_valgrind;

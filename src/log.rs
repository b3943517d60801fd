//! Writing to the server log safely. `RedisModule_Log` takes a printf format, and the
//! `redis-module` crate's helpers (`Context::log_warning`, `logging::log_warning`) pass the
//! message itself as that format: a `%` in it, from a key name a client chose, would be read
//! as a conversion and crash the server (or worse, `%n` writes memory). Here the format is
//! always `"%s"` and the message its argument; NUL bytes, which would cut it short, are shown
//! as `\0`.

use std::ffi::CString;

use redis_module::Context;

use crate::raw_api;

fn write(ctx: Option<&Context>, level: &std::ffi::CStr, message: &str) {
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    raw_api::log(ctx, level, &text);
}

/// A warning (`#` in the log), with the module's name when a context is given.
pub fn warning(ctx: Option<&Context>, message: &str) {
    write(ctx, c"warning", message);
}

/// A notice (`*` in the log).
pub fn notice(ctx: Option<&Context>, message: &str) {
    write(ctx, c"notice", message);
}

/// At most this many bytes of a key name go into a log line: a client chooses its length.
const LOGGED_KEY_BYTES: usize = 200;

/// A key name as a log line shows it: its first `LOGGED_KEY_BYTES` bytes, `...` if cut.
pub fn key_name(name: &[u8]) -> String {
    let shown = String::from_utf8_lossy(&name[..name.len().min(LOGGED_KEY_BYTES)]);
    if name.len() > LOGGED_KEY_BYTES {
        format!("{shown}...")
    } else {
        shown.into_owned()
    }
}

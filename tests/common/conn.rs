//! Commands on a connection that panic with the command in the message ([`Exec`]), the texts
//! of replies and errors, `INFO` and `CONFIG` fields, and bounded waits for server state.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionLike, FromRedisValue, Value};

use super::server::Server;

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

/// Waits until a replica's link to its primary is up (bounded, not a speed assertion).
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

/// `used_memory` of `INFO memory`: the bytes the server's allocator counts as in use.
pub fn used_memory(con: &mut redis::Connection) -> i64 {
    info_i64(con, "memory", "used_memory")
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

/// Messages on a pattern subscription to keyspace events of db 0, collected until none arrives
/// for a moment.
pub struct Events {
    // The subscription lives as long as this value; its connection is leaked (one per test).
    ps: redis::PubSub<'static>,
}

impl Events {
    /// Subscribes to the events `pattern` matches (`bf.*`: every `bf.` event).
    pub fn subscribe(s: &Server, pattern: &str) -> Events {
        let con: &'static mut redis::Connection = Box::leak(Box::new(s.conn()));
        let mut ps = con.as_pubsub();
        ps.psubscribe(format!("__keyevent@0__:{pattern}")).unwrap();
        ps.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        Events { ps }
    }

    /// `(event, key)` pairs received since the last call.
    pub fn drain(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(msg) = self.ps.get_message() {
            out.push((event_name(&msg), msg.get_payload::<String>().unwrap()));
        }
        out
    }

    /// The events received since the last call, without their keys.
    pub fn drain_names(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(msg) = self.ps.get_message() {
            out.push(event_name(&msg));
        }
        out
    }
}

fn event_name(msg: &redis::Msg) -> String {
    msg.get_channel_name()
        .trim_start_matches("__keyevent@0__:")
        .to_string()
}

/// `(event, key)` pairs as `Events::drain` returns them.
pub fn events(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(e, k)| (e.to_string(), k.to_string()))
        .collect()
}

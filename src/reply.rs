//! Replies written through the raw API: the crate's map reply does not keep field order
//! (BF.INFO's order is part of the protocol), and booleans must become integers for RESP2.

use std::ffi::{c_char, c_long, c_longlong};

use redis_module::{raw, Context, ContextFlags};

use crate::error::BfError;
use crate::raw_api;
use crate::stats;

/// Writes the reply of one command.
pub struct Reply<'a> {
    ctx: &'a Context,
}

impl<'a> Reply<'a> {
    pub fn new(ctx: &'a Context) -> Self {
        Reply { ctx }
    }

    /// Whether the client speaks RESP3.
    pub fn is_resp3(&self) -> bool {
        self.ctx.get_flags().contains(ContextFlags::FLAGS_RESP3)
    }

    pub fn ok(&self) {
        raw::reply_with_simple_string(self.ctx.get_raw(), c"OK".as_ptr());
    }

    /// A simple string (`+text`), as RedisBloom sends field names.
    pub fn simple(&self, text: &std::ffi::CStr) {
        raw::reply_with_simple_string(self.ctx.get_raw(), text.as_ptr());
    }

    pub fn int(&self, value: i64) {
        raw::reply_with_long_long(self.ctx.get_raw(), value as c_longlong);
    }

    /// A boolean in RESP3; Redis sends `:1` / `:0` to RESP2 clients.
    pub fn boolean(&self, value: bool) {
        raw::reply_with_bool(self.ctx.get_raw(), i32::from(value));
    }

    pub fn null(&self) {
        raw::reply_with_null(self.ctx.get_raw());
    }

    /// A double in RESP3; a bulk string with the shortest text that reads back as the same
    /// double for RESP2 (`0.01`, `1e-9`), where Redis 7.0 would write 17 digits.
    pub fn double(&self, value: f64) {
        if self.is_resp3() {
            raw::reply_with_double(self.ctx.get_raw(), value);
        } else {
            self.bulk(format!("{value:?}").as_bytes());
        }
    }

    pub fn bulk(&self, bytes: &[u8]) {
        raw::reply_with_string_buffer(
            self.ctx.get_raw(),
            bytes.as_ptr().cast::<c_char>(),
            bytes.len(),
        );
    }

    pub fn array(&self, len: usize) {
        raw::reply_with_array(self.ctx.get_raw(), len as c_long);
    }

    /// A map of `len` pairs; Redis flattens it into an array for RESP2 clients.
    pub fn map(&self, len: usize) {
        raw::reply_with_map(self.ctx.get_raw(), len as c_long);
    }

    /// An error reply with the error's exact text. Every error a client sees passes here, so
    /// refusals (full, over the memory limit) are counted here for `INFO bf`.
    pub fn error(&self, error: &BfError) {
        stats::refused(error);
        if *error == BfError::WrongArity {
            raw_api::reply_wrong_arity(self.ctx);
            return;
        }
        let text = std::ffi::CString::new(error.to_string()).expect("error texts have no NUL");
        raw_api::reply_error(self.ctx, &text);
    }
}

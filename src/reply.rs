//! Replies written through the raw API: the crate's map reply does not keep field order
//! (BF.INFO's order is part of the protocol), and booleans must become integers for RESP2.

use std::ffi::{c_char, c_long, c_longlong};

use redis_module::{raw, Context, ContextFlags};

use crate::error::BfError;
use crate::info_request::InfoRequest;
use crate::raw_api;

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

    /// A double in RESP3; for RESP2 a bulk string, [`double_text`], where Redis 7.0 would
    /// write 17 digits (`0.01000000000000000021`).
    pub fn double(&self, value: f64) {
        if self.is_resp3() {
            raw::reply_with_double(self.ctx.get_raw(), value);
        } else {
            self.bulk(double_text(value).as_bytes());
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

    /// An error reply with the error's exact text (every error a client sees passes here).
    pub fn error(&self, error: &BfError) {
        if *error == BfError::WrongArity {
            raw_api::reply_wrong_arity(self.ctx);
            return;
        }
        let text = std::ffi::CString::new(error.to_string()).expect("error texts have no NUL");
        raw_api::reply_error(self.ctx, &text);
    }
}

/// The reply of an INFO command (BF.INFO, CF.INFO): the `(full, health)` fields as a map
/// (RESP2: a flat array), or one field, in RESP2 an array of its value, in RESP3 a one-entry
/// map. `title` names a field, `value` replies its value.
pub fn info<F: Copy>(
    reply: &Reply,
    request: InfoRequest<F>,
    (full, health): (&[F], &[F]),
    title: impl Fn(F) -> &'static std::ffi::CStr,
    value: impl Fn(F),
) {
    let fields = match request {
        InfoRequest::Full => full,
        InfoRequest::Health => health,
        InfoRequest::One(field) => {
            if reply.is_resp3() {
                reply.map(1);
                reply.simple(title(field));
            } else {
                reply.array(1);
            }
            value(field);
            return;
        }
    };
    reply.map(fields.len());
    for &field in fields {
        reply.simple(title(field));
        value(field);
    }
}

/// Magnitudes from which, and below which, a double is written with an exponent.
const EXPONENT_FROM: f64 = 1e16;
const EXPONENT_BELOW: f64 = 1e-4;

/// The text of a double in a RESP2 reply: the shortest digits that read back as the same
/// double; positional with at least one decimal (`0.01`, `3.0`) for magnitudes in [1e-4, 1e16)
/// and zero, else with an exponent (`1e-5`, `2.5e-7`, `1e16`); `inf`, `-inf`, `NaN`. (The
/// format layerbloom has always replied; clients parse any of these.)
pub fn double_text(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    let magnitude = value.abs();
    if value.is_infinite()
        || magnitude == 0.0
        || (EXPONENT_BELOW..EXPONENT_FROM).contains(&magnitude)
    {
        // Display: the shortest round-trip digits, positional (`inf` for infinities).
        let mut text = value.to_string();
        if value.is_finite() && !text.contains('.') {
            text.push_str(".0");
        }
        text
    } else {
        // LowerExp: the shortest round-trip digits, one before the point.
        format!("{value:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::double_text;

    #[test]
    fn resp2_doubles_are_the_shortest_round_trip_text_with_a_decimal_or_an_exponent() {
        let cases: [(f64, &str); 27] = [
            (0.01, "0.01"),
            (0.001, "0.001"),
            (0.25, "0.25"),
            (0.5, "0.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (0.0001, "0.0001"),
            (0.00009999, "9.999e-5"),
            (1e-5, "1e-5"),
            (2.5e-7, "2.5e-7"),
            (1e-9, "1e-9"),
            (1e-300, "1e-300"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (1.5e-310, "1.5e-310"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (3.0, "3.0"),
            (100.0, "100.0"),
            (-2.0, "-2.0"),
            (1e15, "1000000000000000.0"),
            (9007199254740993.0, "9007199254740992.0"),
            (1e16, "1e16"),
            (1.7976931348623157e308, "1.7976931348623157e308"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "NaN"),
        ];
        for (value, text) in cases {
            assert_eq!(double_text(value), text, "{value:e}");
            if value.is_finite() {
                assert_eq!(
                    text.parse::<f64>().unwrap().to_bits(),
                    value.to_bits(),
                    "{text}"
                );
            }
        }
    }
}

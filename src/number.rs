//! Numbers in arguments and settings, parsed by Redis's own rules
//! (`RedisModule_StringToLongLong` / `StringToDouble`), on plain byte slices.
//!
//! Doubles follow the host: servers differ (Valkey 9's parser refuses hexadecimal floats such
//! as `0x1p-7`, which Redis 7/8 and Valkey 8 read through `strtod`), and a drop-in must refuse
//! what RedisBloom on the same server refuses. Once the module is loaded ([`follow_host`]),
//! arguments are handed to the server's own `RedisModule_StringToDouble`; the local `strtod`
//! rules below serve unit tests and arguments too long to copy, with hexadecimal floats
//! allowed only where the host allows them.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether doubles are parsed by the server's own parser (set at load).
static HOST_PARSER: AtomicBool = AtomicBool::new(false);
/// Whether the host reads hexadecimal floats (probed at load; `strtod` does).
static HOST_READS_HEX: AtomicBool = AtomicBool::new(true);
/// The longest argument handed to the host's parser (it is copied into a server string first):
/// every number a client means is far shorter; a longer one is read by the local rules.
const HOST_PARSE_MAX: usize = 4096;

/// An integer as Redis parses one: optional `-`, digits, no leading zeros, no spaces or `+`,
/// within `i64`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits[0] == b'0' && (digits.len() > 1 || negative))
    {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    text.parse::<i64>().ok()
}

/// A double as Redis parses one (`RedisModule_StringToDouble`, which RedisBloom uses): C's
/// `strtod` over the whole string, so decimal and hexadecimal floats (`0x1p-7`), `inf` and
/// `infinity` are numbers; refused are leading whitespace, anything `strtod` leaves unread
/// (trailing spaces, a NUL), NaN, and results that overflow to infinity or underflow to zero
/// (`1e309`, `1e-400`: a bad number, not one out of range). Subnormal results are kept, as
/// Redis keeps them.
pub fn parse_f64(bytes: &[u8]) -> Option<f64> {
    if HOST_PARSER.load(Ordering::Relaxed) && bytes.len() <= HOST_PARSE_MAX {
        if let Ok(parsed) = crate::raw_api::host_string_to_double(bytes) {
            return parsed;
        }
    }
    if !HOST_READS_HEX.load(Ordering::Relaxed) && is_hex_float(bytes) {
        return None;
    }
    parse_f64_strtod(bytes)
}

/// Makes [`parse_f64`] follow the server's parser, and learns whether it reads hexadecimal
/// floats (for arguments too long to hand it). Returns whether it does.
pub fn follow_host() -> bool {
    let Ok(hex) = crate::raw_api::host_string_to_double(b"0x1p-7") else {
        return true;
    };
    HOST_READS_HEX.store(hex.is_some(), Ordering::Relaxed);
    HOST_PARSER.store(true, Ordering::Relaxed);
    hex.is_some()
}

/// Whether `bytes` spell a hexadecimal float (`0x...`, signed or not).
fn is_hex_float(bytes: &[u8]) -> bool {
    let unsigned = bytes
        .strip_prefix(b"-")
        .or(bytes.strip_prefix(b"+"))
        .unwrap_or(bytes);
    matches!(unsigned.get(..2), Some(b"0x" | b"0X"))
}

/// A double by `strtod`'s rules and Redis 7's checks (see [`parse_f64`]).
fn parse_f64_strtod(bytes: &[u8]) -> Option<f64> {
    // C's isspace, which also counts the vertical tab.
    let space = |c: &u8| c.is_ascii_whitespace() || *c == 0x0b;
    if bytes.first().is_none_or(space) || bytes.contains(&0) {
        return None;
    }
    // Only ASCII can be a number.
    if !bytes.is_ascii() {
        return None;
    }
    // strtod wants a NUL-terminated copy: on the stack for any ordinary number, else in a
    // fallible allocation (an argument can be as long as the client likes, and a failed
    // infallible allocation would abort the server).
    let mut short = [0u8; 128];
    let mut long = Vec::new();
    let text: &[u8] = if bytes.len() < short.len() {
        short[..bytes.len()].copy_from_slice(bytes);
        &short[..=bytes.len()]
    } else {
        long.try_reserve_exact(bytes.len() + 1).ok()?;
        long.extend_from_slice(bytes);
        long.push(0);
        &long
    };
    let start = text.as_ptr().cast::<std::ffi::c_char>();
    let mut end: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: `text` is NUL-terminated (no NUL before it: checked above) and outlives the
    // call; strtod writes only `end`.
    let value = unsafe { strtod(start, &mut end) };
    // SAFETY: strtod sets `end` inside `text` (at most at its NUL).
    let read = unsafe { end.cast_const().offset_from(start) };
    if usize::try_from(read).ok() != Some(bytes.len()) || value.is_nan() {
        return None;
    }
    // strtod's ERANGE, told without errno: an infinity not spelled as one is an overflow, a
    // zero whose digits are not all zero an underflow.
    let unsigned = bytes
        .strip_prefix(b"-")
        .or(bytes.strip_prefix(b"+"))
        .unwrap_or(bytes);
    if value.is_infinite() && !unsigned[0].eq_ignore_ascii_case(&b'i') {
        return None;
    }
    if value == 0.0 && !mantissa_is_zero(unsigned) {
        return None;
    }
    Some(value)
}

/// Whether the digits before the exponent of a number `strtod` read whole are all zero.
fn mantissa_is_zero(unsigned: &[u8]) -> bool {
    let (digits, exponent) = match unsigned.get(..2) {
        Some(b"0x" | b"0X") => (&unsigned[2..], b'p'),
        _ => (unsigned, b'e'),
    };
    digits
        .iter()
        .take_while(|c| !c.eq_ignore_ascii_case(&exponent))
        .all(|&c| c == b'0' || c == b'.')
}

extern "C" {
    /// The C library's, which Redis's own number parser calls: the process runs in the "C"
    /// numeric locale (Redis never changes it), so `.` is the decimal point.
    fn strtod(text: *const std::ffi::c_char, end: *mut *mut std::ffi::c_char) -> f64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_redis_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [
            "",
            "-",
            "01",
            "-0",
            "+1",
            " 1",
            "1 ",
            "1.5",
            "1e3",
            "9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad.as_bytes()), None, "{bad:?}");
        }
    }

    /// Each input with what Redis's `StringToDouble` (strtod, then its checks) makes of it:
    /// checked against RedisBloom 2.8 on Redis 7.4.1 (tests/compat.rs repeats this live).
    #[test]
    fn hexadecimal_floats_are_told_by_their_prefix() {
        for hex in ["0x1p-7", "0X1P-7", "-0x.8", "+0x1"] {
            assert!(is_hex_float(hex.as_bytes()), "{hex}");
        }
        for not in ["0.01", "x1", "-1e3", "0", ""] {
            assert!(!is_hex_float(not.as_bytes()), "{not}");
        }
    }

    #[test]
    fn long_numbers_parse_like_short_ones() {
        // Past the stack buffer the copy is a fallible allocation; the result is the same.
        for zeros in [100, 125, 126, 127, 128, 300] {
            let text = format!("0.{}1", "0".repeat(zeros));
            let expected: f64 = text.parse().unwrap();
            assert_eq!(parse_f64(text.as_bytes()), Some(expected), "{zeros} zeros");
            assert_eq!(parse_f64(format!("{text} ").as_bytes()), None);
        }
    }

    #[test]
    fn doubles_follow_redis_rules() {
        let table: &[(&str, Option<f64>)] = &[
            ("0.01", Some(0.01)),
            ("1e-9", Some(1e-9)),
            (".5", Some(0.5)),
            ("+0.1", Some(0.1)),
            ("00.1", Some(0.1)),
            ("5.", Some(5.0)),
            ("-0", Some(-0.0)),
            ("0", Some(0.0)),
            ("0e-400", Some(0.0)),
            ("0x1p-7", Some(0.0078125)),
            ("0X1P-7", Some(0.0078125)),
            ("0x1.8p-3", Some(0.1875)),
            ("-0x.8", Some(-0.5)),
            ("inf", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("1e-320", Some(1e-320)),
            ("4.9e-324", Some(4.9e-324)),
            ("1.7976931348623157e308", Some(f64::MAX)),
            // Overflow and underflow: bad numbers, not out of range.
            ("1e309", None),
            ("-1e309", None),
            ("1e-400", None),
            ("0x1p-1080", None),
            ("0x1p1024", None),
            ("", None),
            (" 0.1", None),
            ("\t0.1", None),
            ("\x0b0.1", None),
            ("0.1 ", None),
            ("0.1\n", None),
            ("0.01\0", None),
            ("nan", None),
            ("-NaN", None),
            ("0.1x", None),
            ("0x", None),
            ("1e", None),
            ("abc", None),
            ("0,5", None),
            ("\u{663}", None),
        ];
        for &(text, expected) in table {
            let got = parse_f64(text.as_bytes());
            assert_eq!(
                got.map(f64::to_bits),
                expected.map(f64::to_bits),
                "{text:?}: {got:?}"
            );
        }
    }
}

//! The command argument parser of the module crate (`src/bloom/args.rs`, with `src/number.rs`),
//! compiled here on its own: `BF.RESERVE` and `BF.INSERT` options, Redis-style integers and
//! doubles, `BF.INFO` fields.
//!
//! Input: the arguments, separated by spaces (so seeds read like commands); the first byte
//! picks the module's default expansion.

#![no_main]

#[allow(dead_code)]
#[path = "../../../src/error.rs"]
mod error;

#[allow(dead_code)]
#[path = "../../../src/number.rs"]
mod number;

#[allow(dead_code)]
#[path = "../../../src/info_request.rs"]
mod info_request;

/// The module's raw API, absent here: no server parser to follow, so numbers are read by the
/// module's own rules (`number::parse_f64_strtod`), as on a server without one.
mod raw_api {
    pub struct Missing;

    pub fn host_string_to_double(_bytes: &[u8]) -> Result<Option<f64>, Missing> {
        Err(Missing)
    }
}

#[allow(dead_code)]
#[path = "../../../src/bloom/args.rs"]
mod args;

use layerbloom_filter::FilterSpec;
use libfuzzer_sys::fuzz_target;

fn check_spec(spec: &FilterSpec) {
    assert!((1..=args::MAX_CAPACITY).contains(&spec.capacity));
    assert!(spec.error > 0.0 && spec.error < 1.0, "error {}", spec.error);
    assert!(spec.expansion <= args::MAX_EXPANSION);
    assert!(
        spec.nonscaling || spec.expansion > 0,
        "a scaling filter that cannot grow"
    );
}

fn check_window(w: args::Window) {
    assert!((1..=args::MAX_WINDOW_MS).contains(&w.window_ms));
    assert!((1..=args::MAX_SLICES).contains(&w.slices));
    assert!(
        w.window_ms >= u64::from(w.slices),
        "a slice of no milliseconds"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let default_expansion = u32::from(first) % 4;
    let words: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();

    for &w in &words {
        // Redis integers have one spelling: the canonical one.
        if let Some(n) = number::parse_i64(w) {
            assert_eq!(n.to_string().as_bytes(), w);
        }
        if let Some(x) = number::parse_f64(w) {
            assert!(!x.is_nan());
            let text = std::str::from_utf8(w).expect("a parsed double is text");
            assert_eq!(text.trim(), text);
        }
        if let Ok(field) = args::InfoField::parse(w) {
            assert!(args::InfoField::ALL.contains(&field));
        }
    }

    if let Ok((spec, window)) = args::parse_reserve(&words, default_expansion) {
        check_spec(&spec);
        if let Some(w) = window {
            check_window(w);
        }
        assert!(words.len() >= 2);
        assert_eq!(Some(spec.error), number::parse_f64(words[0]));
        assert_eq!(Some(spec.capacity as i64), number::parse_i64(words[1]));
    }

    let defaults = FilterSpec::new(100, 0.01, 2);
    if let Ok(parsed) = args::parse_insert(&words, defaults) {
        check_spec(&parsed.spec);
        if let Some(w) = parsed.window {
            check_window(w);
        }
        assert!(!parsed.items.is_empty());
        // The items are the words after the first ITEMS.
        let at = words.len() - parsed.items.len();
        assert!(args::is_word(words[at - 1], "ITEMS"));
        assert_eq!(parsed.items, &words[at..]);
        assert_eq!(
            parsed.nocreate,
            words[..at].iter().any(|w| args::is_word(w, "NOCREATE"))
        );
    }
});

//! Argument parsing for the BF commands, on plain byte slices so it is unit tested without
//! Redis. Numbers follow Redis's own rules (`crate::number`), so a value RedisBloom accepts is
//! accepted here and vice versa.

use layerbloom_filter::{FilterSpec, Layout};

use crate::error::BfError;
pub use crate::info_request::InfoRequest;
use crate::number::{parse_f64, parse_i64};

/// Largest capacity a filter may be created with.
pub const MAX_CAPACITY: u64 = 1 << 30;
/// Largest expansion factor.
pub const MAX_EXPANSION: u32 = layerbloom_filter::bloom::codec::MAX_EXPANSION;
/// Error rates above this are lowered to it when a filter is created (RedisBloom's behaviour).
pub const MAX_ERROR_RATE: f64 = 0.25;

/// Longest window, in milliseconds (the error text `WindowRange` names it).
pub const MAX_WINDOW_MS: u64 = layerbloom_filter::window::MAX_WINDOW_MS;
/// Most slices a window may be cut into (the error text `SlicesRange` names it).
pub const MAX_SLICES: u32 = layerbloom_filter::window::MAX_SLICES;
/// Slices of a window created without SLICES.
pub const DEFAULT_SLICES: u32 = layerbloom_filter::window::DEFAULT_SLICES;

/// The time window of a windowed filter (`WINDOW ms [SLICES n]`), checked: `window_ms` in
/// `1..=MAX_WINDOW_MS`, `slices` in `1..=MAX_SLICES`, at least one millisecond per slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub window_ms: u64,
    pub slices: u32,
}

/// WINDOW and SLICES as given (the last of each counts), checked once every option is read.
/// `bad_window` / `bad_slices`: the command's error for a value that is not a number or out
/// of range.
fn window_of(
    window: Option<i64>,
    slices: Option<i64>,
    (bad_window, bad_slices): (BfError, BfError),
) -> Result<Option<Window>, BfError> {
    let Some(window) = window else {
        return match slices {
            Some(_) => Err(BfError::SlicesWithoutWindow),
            None => Ok(None),
        };
    };
    let window_ms = u64::try_from(window)
        .ok()
        .filter(|w| (1..=MAX_WINDOW_MS).contains(w))
        .ok_or(bad_window)?;
    let slices = match slices {
        None => DEFAULT_SLICES,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_SLICES).contains(n))
            .ok_or(bad_slices)?,
    };
    if window_ms < u64::from(slices) {
        return Err(BfError::WindowShorterThanSlices);
    }
    Ok(Some(Window { window_ms, slices }))
}

/// Whether an argument is the option word `word` (ASCII case-insensitive).
pub fn is_word(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// An error rate, checked to lie in (0, 1). Capping at `MAX_ERROR_RATE` happens when the
/// filter is created, where it is logged.
fn error_rate(value: f64) -> Option<f64> {
    (value > 0.0 && value < 1.0).then_some(value)
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [WINDOW ms [SLICES n]]`;
/// `args` are the arguments after the key. `default_expansion` applies when EXPANSION is not
/// given (0: non-scaling). The layout is left at its default for the caller to set. The
/// window, when given, makes the filter a windowed one (capacity: items per window).
pub fn parse_reserve(
    args: &[&[u8]],
    default_expansion: u32,
) -> Result<(FilterSpec, Option<Window>), BfError> {
    let (rate, rest) = args.split_first().ok_or(BfError::WrongArity)?;
    let (capacity, options) = rest.split_first().ok_or(BfError::WrongArity)?;
    // RedisBloom's arity (at most 3 option words) holds for filters without a window.
    let windowed = options
        .iter()
        .any(|w| is_word(w, "WINDOW") || is_word(w, "SLICES"));
    if options.len() > 3 && !windowed {
        return Err(BfError::WrongArity);
    }
    let error = parse_f64(rate).ok_or(BfError::BadErrorRate)?;
    let error = error_rate(error).ok_or(BfError::ErrorRateRange)?;
    let capacity = parse_i64(capacity).ok_or(BfError::BadCapacity)?;
    if !(1..=MAX_CAPACITY as i64).contains(&capacity) {
        return Err(BfError::CapacityRange);
    }

    let mut nonscaling_word = false;
    let mut expansion: Option<&[u8]> = None;
    let mut window: Option<&[u8]> = None;
    let mut slices: Option<&[u8]> = None;
    let mut unknown = false;
    let mut i = 0;
    while i < options.len() {
        let word = options[i];
        if is_word(word, "NONSCALING") {
            nonscaling_word = true;
        } else if is_word(word, "EXPANSION") {
            let value = options.get(i + 1).ok_or(BfError::NoExpansion)?;
            expansion.get_or_insert(value);
            i += 1;
        } else if is_word(word, "WINDOW") {
            window = Some(options.get(i + 1).ok_or(BfError::NoWindow)?);
            i += 1;
        } else if is_word(word, "SLICES") {
            slices = Some(options.get(i + 1).ok_or(BfError::NoSlices)?);
            i += 1;
        } else {
            unknown = true;
        }
        i += 1;
    }
    let (expansion, nonscaling) = match expansion {
        None => (default_expansion, nonscaling_word || default_expansion == 0),
        Some(value) => {
            let n = parse_i64(value).ok_or(BfError::BadExpansion)?;
            if n != 0 && nonscaling_word {
                return Err(BfError::NonscalingCannotExpand);
            }
            if !(0..=i64::from(MAX_EXPANSION)).contains(&n) {
                return Err(BfError::ExpansionRange);
            }
            (n as u32, n == 0 || nonscaling_word)
        }
    };
    let number =
        |value: Option<&[u8]>, bad: BfError| value.map(|v| parse_i64(v).ok_or(bad)).transpose();
    let window = window_of(
        number(window, BfError::BadWindow)?,
        number(slices, BfError::BadSlices)?,
        (BfError::WindowRange, BfError::SlicesRange),
    )?;
    if unknown {
        return Err(BfError::ReserveUnknownArgument);
    }
    let spec = FilterSpec {
        capacity: capacity as u64,
        error,
        expansion,
        nonscaling,
        layout: Layout::Blocked,
    };
    Ok((spec, window))
}

/// The parsed options of `BF.INSERT`.
#[derive(Debug, Clone, PartialEq)]
pub struct InsertArgs<'a> {
    /// The filter to create if the key is missing.
    pub spec: FilterSpec,
    /// NOCREATE: a missing key is an error.
    pub nocreate: bool,
    /// The items, at least one.
    pub items: &'a [&'a [u8]],
    /// WINDOW / SLICES: a filter created by the command is a windowed one.
    pub window: Option<Window>,
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING]
/// [WINDOW ms [SLICES n]] ITEMS item...`; `args` are the arguments after the key, `defaults`
/// the module's settings. Like the other creation options, WINDOW and SLICES only matter when
/// the command creates the filter.
pub fn parse_insert<'a>(
    args: &'a [&'a [u8]],
    defaults: FilterSpec,
) -> Result<InsertArgs<'a>, BfError> {
    // As in RedisBloom, a value that is not a number is refused where it stands, but ranges
    // are checked once every option is read: an unknown word anywhere wins over a value out
    // of range, and the last of a repeated option is the one that counts.
    let mut capacity = None;
    let mut error = None;
    let mut expansion = None;
    let mut nonscaling = false;
    let mut nocreate = false;
    let mut window = None;
    let mut slices = None;
    let mut i = 0;
    let items = loop {
        let word = *args.get(i).ok_or(BfError::WrongArity)?;
        let value = || args.get(i + 1).copied().ok_or(BfError::WrongArity);
        if is_word(word, "ITEMS") {
            let items = &args[i + 1..];
            if items.is_empty() {
                return Err(BfError::WrongArity);
            }
            break items;
        } else if is_word(word, "CAPACITY") {
            capacity = Some(parse_i64(value()?).ok_or(BfError::InsertBadCapacity)?);
            i += 2;
        } else if is_word(word, "ERROR") {
            error = Some(parse_f64(value()?).ok_or(BfError::InsertBadErrorRate)?);
            i += 2;
        } else if is_word(word, "EXPANSION") {
            expansion = Some(parse_i64(value()?).ok_or(BfError::InsertBadExpansion)?);
            i += 2;
        } else if is_word(word, "WINDOW") {
            window = Some(parse_i64(value()?).ok_or(BfError::InsertBadWindow)?);
            i += 2;
        } else if is_word(word, "SLICES") {
            slices = Some(parse_i64(value()?).ok_or(BfError::InsertBadSlices)?);
            i += 2;
        } else if is_word(word, "NOCREATE") {
            nocreate = true;
            i += 1;
        } else if is_word(word, "NONSCALING") {
            nonscaling = true;
            i += 1;
        } else {
            return Err(BfError::InsertUnknownArgument);
        }
    };
    let mut spec = defaults;
    if let Some(c) = capacity {
        if !(1..=MAX_CAPACITY as i64).contains(&c) {
            return Err(BfError::InsertBadCapacity);
        }
        spec.capacity = c as u64;
    }
    if let Some(e) = error {
        spec.error = error_rate(e).ok_or(BfError::InsertBadErrorRate)?;
    }
    if let Some(n) = expansion {
        if !(0..=i64::from(MAX_EXPANSION)).contains(&n) {
            return Err(BfError::InsertBadExpansion);
        }
        spec.expansion = n as u32;
        spec.nonscaling = n == 0;
    }
    spec.nonscaling |= nonscaling;
    let window = window_of(
        window,
        slices,
        (BfError::InsertBadWindow, BfError::InsertBadSlices),
    )?;
    Ok(InsertArgs {
        spec,
        nocreate,
        items,
        window,
    })
}

/// One field of `BF.INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoField {
    Capacity,
    Size,
    Filters,
    Items,
    Expansion,
    /// The error rate the filter was created with.
    ErrorRate,
    /// Set bits / bits of the newest layer.
    FillRatio,
    /// The chain's false-positive rate estimated from its layers' fill.
    EstimatedFpr,
    /// The distinct items its bits account for.
    EstimatedDistinct,
    /// The capacity it can reach under the memory limit.
    MaxCapacity,
    /// A windowed filter's window, in milliseconds.
    Window,
    /// The slices its window is cut into.
    Slices,
    /// The age in milliseconds of its oldest live slice.
    Oldest,
    /// The items of each slice of the window, oldest first.
    SliceItems,
}

impl InfoField {
    /// RedisBloom's five fields, in its order: the whole reply of `BF.INFO key`. Clients
    /// (go-redis) accept no other name there.
    pub const REDISBLOOM: [InfoField; 5] = [
        InfoField::Capacity,
        InfoField::Size,
        InfoField::Filters,
        InfoField::Items,
        InfoField::Expansion,
    ];

    /// layerbloom's health figures, in order: the reply of `BF.INFO key HEALTH`.
    pub const HEALTH: [InfoField; 5] = [
        InfoField::ErrorRate,
        InfoField::FillRatio,
        InfoField::EstimatedFpr,
        InfoField::EstimatedDistinct,
        InfoField::MaxCapacity,
    ];

    /// Every field, RedisBloom's first (the fuzz target checks parsed words against it).
    #[allow(dead_code)]
    pub const ALL: [InfoField; 14] = [
        InfoField::Capacity,
        InfoField::Size,
        InfoField::Filters,
        InfoField::Items,
        InfoField::Expansion,
        InfoField::ErrorRate,
        InfoField::FillRatio,
        InfoField::EstimatedFpr,
        InfoField::EstimatedDistinct,
        InfoField::MaxCapacity,
        InfoField::Window,
        InfoField::Slices,
        InfoField::Oldest,
        InfoField::SliceItems,
    ];

    /// The field's name in replies.
    /// The field's name as a C string: RedisBloom sends the names as simple strings
    /// (`+Capacity`), which the reply API takes NUL-terminated.
    pub fn title_c(self) -> &'static std::ffi::CStr {
        match self {
            InfoField::Capacity => c"Capacity",
            InfoField::Size => c"Size",
            InfoField::Filters => c"Number of filters",
            InfoField::Items => c"Number of items inserted",
            InfoField::Expansion => c"Expansion rate",
            InfoField::ErrorRate => c"Error rate",
            InfoField::FillRatio => c"Fill ratio",
            InfoField::EstimatedFpr => c"Estimated false positive rate",
            InfoField::EstimatedDistinct => c"Estimated distinct items",
            InfoField::MaxCapacity => c"Max capacity",
            InfoField::Window => c"Window",
            InfoField::Slices => c"Slices",
            InfoField::Oldest => c"Oldest slice age",
            InfoField::SliceItems => c"Items per slice",
        }
    }

    /// The field a `BF.INFO key <word>` asks for. `MAXSCALEDCAPACITY` is valkey-bloom's word
    /// for the same figure (the Rust `redis` crate sends it).
    pub fn parse(word: &[u8]) -> Result<Self, BfError> {
        let all = [
            ("CAPACITY", InfoField::Capacity),
            ("SIZE", InfoField::Size),
            ("FILTERS", InfoField::Filters),
            ("ITEMS", InfoField::Items),
            ("EXPANSION", InfoField::Expansion),
            ("ERROR", InfoField::ErrorRate),
            ("FILL", InfoField::FillRatio),
            ("FPR", InfoField::EstimatedFpr),
            ("DISTINCT", InfoField::EstimatedDistinct),
            ("MAXCAPACITY", InfoField::MaxCapacity),
            ("MAXSCALEDCAPACITY", InfoField::MaxCapacity),
            ("WINDOW", InfoField::Window),
            ("SLICES", InfoField::Slices),
            ("OLDEST", InfoField::Oldest),
            ("SLICEITEMS", InfoField::SliceItems),
        ];
        all.iter()
            .find(|(name, _)| is_word(word, name))
            .map(|&(_, f)| f)
            .ok_or(BfError::InvalidInfo)
    }
}

impl InfoRequest<InfoField> {
    /// The request of `BF.INFO key [word]`.
    pub fn parse(word: Option<&[u8]>) -> Result<Self, BfError> {
        Self::parse_with(word, InfoField::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: FilterSpec = FilterSpec {
        capacity: 100,
        error: 0.01,
        expansion: 2,
        nonscaling: false,
        layout: Layout::Blocked,
    };

    fn reserve(args: &[&str]) -> Result<FilterSpec, BfError> {
        reserve_windowed(args).map(|(spec, _)| spec)
    }

    fn reserve_windowed(args: &[&str]) -> Result<(FilterSpec, Option<Window>), BfError> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_reserve(&bytes, 2)
    }

    fn window(window_ms: u64, slices: u32) -> Option<Window> {
        Some(Window { window_ms, slices })
    }

    fn insert(args: &[&str]) -> Result<(FilterSpec, bool, usize), BfError> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_insert(&bytes, DEFAULTS).map(|a| (a.spec, a.nocreate, a.items.len()))
    }

    fn spec(capacity: u64, error: f64, expansion: u32) -> FilterSpec {
        FilterSpec::new(capacity, error, expansion)
    }

    /// A non-scaling spec that keeps `growth` (RedisBloom records it all the same).
    fn fixed(capacity: u64, error: f64, growth: u32) -> FilterSpec {
        FilterSpec {
            nonscaling: true,
            ..FilterSpec::new(capacity, error, growth)
        }
    }

    #[test]
    fn reserve_parses_options_in_any_case_and_order() {
        assert_eq!(reserve(&["0.01", "100"]), Ok(spec(100, 0.01, 2)));
        assert_eq!(
            reserve(&["0.01", "100", "expansion", "4"]),
            Ok(spec(100, 0.01, 4))
        );
        assert_eq!(
            reserve(&["0.01", "100", "NonScaling"]),
            Ok(fixed(100, 0.01, 2))
        );
        assert_eq!(
            reserve(&["0.01", "100", "EXPANSION", "0"]),
            Ok(spec(100, 0.01, 0))
        );
        assert_eq!(
            reserve(&["0.01", "100", "NONSCALING", "EXPANSION", "0"]),
            Ok(spec(100, 0.01, 0))
        );
        assert_eq!(
            reserve(&["0.5", "100"]),
            Ok(spec(100, 0.5, 2)),
            "capped on creation"
        );
    }

    #[test]
    fn reserve_follows_a_nonscaling_module_default_unless_told_otherwise() {
        let parse = |args: &[&str]| {
            let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            parse_reserve(&bytes, 0).map(|(spec, _)| spec)
        };
        assert_eq!(parse(&["0.01", "100"]), Ok(spec(100, 0.01, 0)));
        assert_eq!(
            parse(&["0.01", "100", "EXPANSION", "3"]),
            Ok(spec(100, 0.01, 3))
        );
        assert_eq!(
            parse(&["0.01", "100", "NONSCALING"]),
            Ok(spec(100, 0.01, 0))
        );
    }

    #[test]
    fn reserve_reports_redisbloom_errors_in_redisbloom_order() {
        assert_eq!(reserve(&["x", "y"]), Err(BfError::BadErrorRate));
        assert_eq!(reserve(&["1", "y"]), Err(BfError::ErrorRateRange));
        assert_eq!(reserve(&["0", "100"]), Err(BfError::ErrorRateRange));
        assert_eq!(reserve(&["-0.1", "100"]), Err(BfError::ErrorRateRange));
        assert_eq!(reserve(&["inf", "100"]), Err(BfError::ErrorRateRange));
        assert_eq!(reserve(&["0.01", "y"]), Err(BfError::BadCapacity));
        assert_eq!(reserve(&["0.01", "0"]), Err(BfError::CapacityRange));
        assert_eq!(
            reserve(&["0.01", "1073741825"]),
            Err(BfError::CapacityRange)
        );
        assert_eq!(reserve(&["0.01", "1073741824"]), Ok(spec(1 << 30, 0.01, 2)));
        assert_eq!(
            reserve(&["0.01", "10", "EXPANSION"]),
            Err(BfError::NoExpansion)
        );
        assert_eq!(
            reserve(&["0.01", "10", "EXPANSION", "x"]),
            Err(BfError::BadExpansion)
        );
        assert_eq!(
            reserve(&["0.01", "10", "EXPANSION", "2", "NONSCALING"]),
            Err(BfError::NonscalingCannotExpand)
        );
        assert_eq!(
            reserve(&["0.01", "10", "NONSCALING", "EXPANSION", "2"]),
            Err(BfError::NonscalingCannotExpand)
        );
        assert_eq!(
            reserve(&["0.01", "10", "EXPANSION", "-1"]),
            Err(BfError::ExpansionRange)
        );
        assert_eq!(
            reserve(&["0.01", "10", "EXPANSION", "32769"]),
            Err(BfError::ExpansionRange)
        );
        assert_eq!(
            reserve(&["0.01", "10", "NONSCALNG"]),
            Err(BfError::ReserveUnknownArgument)
        );
    }

    #[test]
    fn reserve_takes_a_window_and_its_slices() {
        assert_eq!(
            reserve_windowed(&["0.01", "100"]),
            Ok((spec(100, 0.01, 2), None))
        );
        assert_eq!(
            reserve_windowed(&["0.01", "100", "window", "60000"]),
            Ok((spec(100, 0.01, 2), window(60000, DEFAULT_SLICES)))
        );
        assert_eq!(
            reserve_windowed(&["0.01", "100", "SLICES", "6", "NONSCALING", "WINDOW", "600"]),
            Ok((fixed(100, 0.01, 2), window(600, 6)))
        );
        assert_eq!(
            reserve_windowed(&["0.01", "100", "WINDOW", "3", "SLICES", "3"]),
            Ok((spec(100, 0.01, 2), window(3, 3))),
            "one millisecond per slice"
        );
        assert_eq!(
            reserve_windowed(&["0.01", "100", "WINDOW", "1000000000000", "SLICES", "64"]),
            Ok((spec(100, 0.01, 2), window(MAX_WINDOW_MS, MAX_SLICES)))
        );
    }

    #[test]
    fn reserve_keeps_redisbloom_s_arity_without_a_window() {
        assert_eq!(
            reserve(&["0.01", "100", "EXPANSION", "2", "NONSCALING", "x"]),
            Err(BfError::WrongArity)
        );
        assert_eq!(
            reserve_windowed(&["0.01", "100", "EXPANSION", "2", "NONSCALING", "WINDOW", "9"]),
            Err(BfError::NonscalingCannotExpand)
        );
        assert_eq!(
            reserve_windowed(&[
                "0.01",
                "100",
                "EXPANSION",
                "2",
                "WINDOW",
                "9",
                "SLICES",
                "3"
            ]),
            Ok((spec(100, 0.01, 2), window(9, 3)))
        );
    }

    #[test]
    fn reserve_refuses_bad_windows_with_clear_errors() {
        assert_eq!(MAX_SLICES, 64, "BfError::SlicesRange names it");
        let refused = |args: &[&str]| reserve_windowed(args).unwrap_err();
        assert_eq!(refused(&["0.01", "100", "WINDOW"]), BfError::NoWindow);
        assert_eq!(
            refused(&["0.01", "100", "WINDOW", "1000", "SLICES"]),
            BfError::NoSlices
        );
        for bad in ["x", "1.5", "", " 10"] {
            assert_eq!(
                refused(&["0.01", "100", "WINDOW", bad]),
                BfError::BadWindow,
                "{bad:?}"
            );
            assert_eq!(
                refused(&["0.01", "100", "WINDOW", "10", "SLICES", bad]),
                BfError::BadSlices,
                "{bad:?}"
            );
        }
        for out in ["0", "-1", "1000000000001"] {
            assert_eq!(
                refused(&["0.01", "100", "WINDOW", out]),
                BfError::WindowRange,
                "{out}"
            );
        }
        for out in ["0", "-1", "65"] {
            assert_eq!(
                refused(&["0.01", "100", "WINDOW", "1000", "SLICES", out]),
                BfError::SlicesRange,
                "{out}"
            );
        }
        assert_eq!(
            refused(&["0.01", "100", "SLICES", "4"]),
            BfError::SlicesWithoutWindow
        );
        assert_eq!(
            refused(&["0.01", "100", "WINDOW", "3", "SLICES", "4"]),
            BfError::WindowShorterThanSlices
        );
        // A number that is not one is refused before a word that is not known.
        assert_eq!(
            refused(&["0.01", "100", "FOO", "WINDOW", "x"]),
            BfError::BadWindow
        );
        assert_eq!(
            refused(&["0.01", "100", "FOO", "WINDOW", "10"]),
            BfError::ReserveUnknownArgument
        );
    }

    #[test]
    fn insert_takes_a_window_for_the_filter_it_creates() {
        let parse = |args: &[&str]| {
            let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            parse_insert(&bytes, DEFAULTS).map(|a| (a.window, a.items.len()))
        };
        assert_eq!(parse(&["ITEMS", "a"]), Ok((None, 1)));
        assert_eq!(
            parse(&["WINDOW", "500", "ITEMS", "a", "WINDOW"]),
            Ok((window(500, DEFAULT_SLICES), 2))
        );
        assert_eq!(
            parse(&["SLICES", "2", "WINDOW", "500", "NOCREATE", "ITEMS", "a"]),
            Ok((window(500, 2), 1))
        );
        assert_eq!(
            parse(&["WINDOW", "ITEMS", "a"]),
            Err(BfError::InsertBadWindow)
        );
        assert_eq!(parse(&["WINDOW"]), Err(BfError::WrongArity));
        assert_eq!(
            parse(&["WINDOW", "0", "ITEMS", "a"]),
            Err(BfError::InsertBadWindow)
        );
        assert_eq!(
            parse(&["WINDOW", "10", "SLICES", "x", "ITEMS", "a"]),
            Err(BfError::InsertBadSlices)
        );
        assert_eq!(
            parse(&["WINDOW", "10", "SLICES", "0", "ITEMS", "a"]),
            Err(BfError::InsertBadSlices)
        );
        assert_eq!(
            parse(&["SLICES", "2", "ITEMS", "a"]),
            Err(BfError::SlicesWithoutWindow)
        );
        assert_eq!(
            parse(&["WINDOW", "1", "SLICES", "2", "ITEMS", "a"]),
            Err(BfError::WindowShorterThanSlices)
        );
    }

    #[test]
    fn insert_takes_options_until_items() {
        assert_eq!(insert(&["ITEMS", "a", "b"]), Ok((DEFAULTS, false, 2)));
        assert_eq!(
            insert(&[
                "capacity",
                "5",
                "error",
                "0.1",
                "expansion",
                "3",
                "nocreate",
                "items",
                "a"
            ]),
            Ok((spec(5, 0.1, 3), true, 1))
        );
        assert_eq!(
            insert(&["NONSCALING", "ITEMS", "a"]),
            Ok((fixed(100, 0.01, 2), false, 1))
        );
        assert_eq!(
            insert(&["NONSCALING", "EXPANSION", "4", "ITEMS", "a"]),
            Ok((fixed(100, 0.01, 4), false, 1)),
            "NONSCALING wins"
        );
        assert_eq!(
            insert(&["EXPANSION", "0", "ITEMS", "a"]),
            Ok((spec(100, 0.01, 0), false, 1))
        );
        assert_eq!(
            insert(&["ERROR", "0.9", "ITEMS", "a"]),
            Ok((spec(100, 0.9, 2), false, 1)),
            "capped on creation"
        );
        // Words after ITEMS are items.
        assert_eq!(
            insert(&["ITEMS", "CAPACITY", "x"]),
            Ok((DEFAULTS, false, 2))
        );
    }

    #[test]
    fn insert_errors() {
        assert_eq!(insert(&[]), Err(BfError::WrongArity));
        assert_eq!(insert(&["ITEMS"]), Err(BfError::WrongArity));
        assert_eq!(insert(&["CAPACITY"]), Err(BfError::WrongArity));
        assert_eq!(insert(&["CAPACITY", "10"]), Err(BfError::WrongArity));
        assert_eq!(
            insert(&["CAPACITY", "0", "ITEMS", "a"]),
            Err(BfError::InsertBadCapacity)
        );
        assert_eq!(
            insert(&["CAPACITY", "x", "ITEMS", "a"]),
            Err(BfError::InsertBadCapacity)
        );
        assert_eq!(
            insert(&["CAPACITY", "1073741825", "ITEMS", "a"]),
            Err(BfError::InsertBadCapacity)
        );
        assert_eq!(
            insert(&["ERROR", "2", "ITEMS", "a"]),
            Err(BfError::InsertBadErrorRate)
        );
        assert_eq!(
            insert(&["ERROR", "x", "ITEMS", "a"]),
            Err(BfError::InsertBadErrorRate)
        );
        assert_eq!(
            insert(&["EXPANSION", "-1", "ITEMS", "a"]),
            Err(BfError::InsertBadExpansion)
        );
        assert_eq!(
            insert(&["EXPANSION", "x", "ITEMS", "a"]),
            Err(BfError::InsertBadExpansion)
        );
        assert_eq!(
            insert(&["BOGUS", "ITEMS", "a"]),
            Err(BfError::InsertUnknownArgument)
        );
    }

    #[test]
    fn insert_checks_ranges_after_every_option_is_read_as_redisbloom_does() {
        // An unknown word wins over a value out of range, wherever it stands...
        for opt in [["CAPACITY", "0"], ["ERROR", "2"], ["EXPANSION", "-1"]] {
            assert_eq!(
                insert(&[opt[0], opt[1], "FOO", "ITEMS", "a"]),
                Err(BfError::InsertUnknownArgument),
                "{opt:?}"
            );
        }
        // ...but not over a value that is not a number at all.
        assert_eq!(
            insert(&["CAPACITY", "x", "FOO", "ITEMS", "a"]),
            Err(BfError::InsertBadCapacity)
        );
        // The last of a repeated option counts.
        let (spec, _, _) = insert(&["CAPACITY", "0", "CAPACITY", "7", "ITEMS", "a"]).unwrap();
        assert_eq!(spec.capacity, 7);
    }

    #[test]
    fn info_fields_parse_case_insensitively() {
        assert_eq!(InfoField::parse(b"items"), Ok(InfoField::Items));
        assert_eq!(InfoField::parse(b"Capacity"), Ok(InfoField::Capacity));
        assert_eq!(InfoField::parse(b"bogus"), Err(BfError::InvalidInfo));
        assert_eq!(InfoField::parse(b"fpr"), Ok(InfoField::EstimatedFpr));
        assert_eq!(InfoField::parse(b"Fill"), Ok(InfoField::FillRatio));
        assert_eq!(InfoField::parse(b"ERROR"), Ok(InfoField::ErrorRate));
        assert_eq!(
            InfoField::parse(b"distinct"),
            Ok(InfoField::EstimatedDistinct)
        );
        assert_eq!(InfoField::parse(b"maxcapacity"), Ok(InfoField::MaxCapacity));
        assert_eq!(
            InfoField::parse(b"MAXSCALEDCAPACITY"),
            Ok(InfoField::MaxCapacity)
        );
        let titles = |fields: &[InfoField]| -> Vec<&str> {
            fields
                .iter()
                .map(|f| f.title_c().to_str().unwrap())
                .collect()
        };
        assert_eq!(
            titles(&InfoField::REDISBLOOM),
            [
                "Capacity",
                "Size",
                "Number of filters",
                "Number of items inserted",
                "Expansion rate",
            ]
        );
        assert_eq!(
            titles(&InfoField::HEALTH),
            [
                "Error rate",
                "Fill ratio",
                "Estimated false positive rate",
                "Estimated distinct items",
                "Max capacity"
            ]
        );
        assert_eq!(
            titles(&InfoField::ALL),
            [
                titles(&InfoField::REDISBLOOM),
                titles(&InfoField::HEALTH),
                vec!["Window", "Slices", "Oldest slice age", "Items per slice"]
            ]
            .concat()
        );
        assert_eq!(InfoField::parse(b"window"), Ok(InfoField::Window));
        assert_eq!(InfoField::parse(b"Slices"), Ok(InfoField::Slices));
        assert_eq!(InfoField::parse(b"OLDEST"), Ok(InfoField::Oldest));
        assert_eq!(InfoField::parse(b"sliceitems"), Ok(InfoField::SliceItems));
    }

    #[test]
    fn info_without_a_word_is_redisbloom_s_reply_and_health_is_one_word() {
        assert_eq!(InfoRequest::parse(None), Ok(InfoRequest::Full));
        assert_eq!(InfoRequest::parse(Some(b"health")), Ok(InfoRequest::Health));
        assert_eq!(InfoRequest::parse(Some(b"HEALTH")), Ok(InfoRequest::Health));
        assert_eq!(
            InfoRequest::parse(Some(b"Fill")),
            Ok(InfoRequest::One(InfoField::FillRatio))
        );
        assert_eq!(
            InfoRequest::parse(Some(b"healthy")),
            Err(BfError::InvalidInfo)
        );
    }
}

//! Parsing of the CF commands' arguments: RedisBloom's syntax, errors and order of errors,
//! except where its parser is ambiguous. RedisBloom searches `CF.RESERVE`'s option words
//! from the command name on (a key named `bucketsize` is read as the option), ignores words
//! it does not know, takes the first of a repeated option and tells `CF.INSERT`'s options
//! apart by their first letter (`nx` means NOCREATE). Here options are whole words
//! (case-insensitive) after the fixed arguments; an unknown word or a repeated option is
//! refused with an error.

use layerbloom_filter::cuckoo::params::{self, ParamError};
use layerbloom_filter::cuckoo::rate::{self, Extension, Widths};
use layerbloom_filter::cuckoo::Params;

use crate::error::BfError;
use crate::number;

/// A new filter's spec: the first sub-filter's bucket count and the settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    pub buckets: u64,
    pub params: Params,
    /// `ERROR e` (the extension): the asked rate and the widths sized for it; `None` for
    /// RedisBloom's layout.
    pub rate: Option<AskedRate>,
}

/// The rate of an extension filter and its sub-filters' fingerprint widths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AskedRate {
    pub error: f64,
    pub widths: Widths,
}

/// An `ERROR` argument: a rate in (0, 1).
fn error_rate(text: &[u8]) -> Result<f64, BfError> {
    number::parse_f64(text)
        .filter(|&e| e > 0.0 && e < 1.0)
        .ok_or(BfError::CfErrorRange)
}

/// The spec of an extension filter for `capacity` items at `error`: the bucket size the
/// sizing picks unless `BUCKETSIZE` names one of its sizes, 500 eviction attempts unless
/// `MAXITERATIONS` says otherwise (the sizing's loads are reached with them), RedisBloom's
/// expansion unless `EXPANSION` says otherwise. Buckets are enough for `capacity` at the
/// load the bucket size reaches.
fn extension_spec(
    capacity: i64,
    error: f64,
    bucket_size: Option<u8>,
    max_iterations: Option<u16>,
    expansion: Option<u16>,
) -> Result<Spec, BfError> {
    let ext = Extension::for_rate(error, bucket_size).ok_or(match bucket_size {
        Some(b) if rate::reached_load(b).is_none() => BfError::CfErrorBucketSize,
        _ => BfError::CfErrorTooSmall,
    })?;
    if capacity < 2 * i64::from(ext.bucket_size) {
        return Err(BfError::CfCapacityTooSmall);
    }
    // Too many buckets to exist: the allocation is then refused like any too large one.
    let buckets = ext.buckets_for(capacity as u64).unwrap_or(1 << 63);
    Ok(Spec {
        buckets,
        params: Params {
            bucket_size: ext.bucket_size,
            max_iterations: max_iterations.unwrap_or(rate::SIZING_MAX_ITERATIONS),
            expansion: expansion.unwrap_or(params::DEFAULT_EXPANSION),
        },
        rate: Some(AskedRate {
            error,
            widths: ext.widths,
        }),
    })
}

/// The filter `CF.ADD` / `CF.INSERT` create on a missing key without `CAPACITY`.
pub fn default_spec() -> Spec {
    spec_for(params::DEFAULT_CAPACITY as i64, Params::default())
        .expect("the default capacity is valid")
}

fn spec_for(capacity: i64, params: Params) -> Result<Spec, BfError> {
    let buckets = params::buckets_for(capacity, params.bucket_size).map_err(param_error)?;
    Ok(Spec {
        buckets,
        params,
        rate: None,
    })
}

fn param_error(e: ParamError) -> BfError {
    match e {
        ParamError::CapacityTooSmall => BfError::CfCapacityTooSmall,
        ParamError::BucketSize => BfError::CfBucketSizeRange,
        ParamError::MaxIterations => BfError::CfMaxIterationsRange,
        ParamError::Expansion => BfError::CfExpansionRange,
        ParamError::Buckets => BfError::Internal,
    }
}

fn capacity(text: &[u8]) -> Result<i64, BfError> {
    number::parse_i64(text).ok_or(BfError::InsertBadCapacity)
}

/// The options of `CF.RESERVE`, in the order RedisBloom checks them (then layerbloom's ERROR).
const RESERVE_OPTIONS: [&str; 4] = ["MAXITERATIONS", "BUCKETSIZE", "EXPANSION", "ERROR"];

/// `CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e] [ERROR r]`:
/// `args` are the arguments after the key. Errors come in RedisBloom's order: the
/// capacity's number, then MAXITERATIONS, BUCKETSIZE and EXPANSION (each parsed, then its
/// range), then ERROR, then the capacity's minimum.
pub fn parse_reserve(args: &[&[u8]]) -> Result<Spec, BfError> {
    let (cap, options) = args.split_first().ok_or(BfError::WrongArity)?;
    let cap = capacity(cap)?;
    if options.len() % 2 != 0 {
        return Err(BfError::WrongArity);
    }
    let mut values: [Option<&[u8]>; 4] = [None; 4];
    for pair in options.chunks_exact(2) {
        let index = RESERVE_OPTIONS
            .iter()
            .position(|o| o.as_bytes().eq_ignore_ascii_case(pair[0]))
            .ok_or(BfError::ReserveUnknownArgument)?;
        if values[index].replace(pair[1]).is_some() {
            return Err(BfError::CfRepeatedOption(RESERVE_OPTIONS[index]));
        }
    }
    let mut p = Params::default();
    if let Some(v) = values[0] {
        let v = number::parse_i64(v).ok_or(BfError::CfMaxIterationsNotNumeric)?;
        p.max_iterations = params::max_iterations(v).map_err(param_error)?;
    }
    if let Some(v) = values[1] {
        let v = number::parse_i64(v).ok_or(BfError::CfBucketSizeNotNumeric)?;
        p.bucket_size = params::bucket_size(v).map_err(param_error)?;
    }
    if let Some(v) = values[2] {
        let v = number::parse_i64(v).ok_or(BfError::CfExpansionNotNumeric)?;
        p.expansion = params::expansion(v).map_err(param_error)?;
    }
    if let Some(v) = values[3] {
        let given = |i: usize| values[i].is_some();
        return extension_spec(
            cap,
            error_rate(v)?,
            given(1).then_some(p.bucket_size),
            given(0).then_some(p.max_iterations),
            given(2).then_some(p.expansion),
        );
    }
    spec_for(cap, p)
}

/// A parsed `CF.INSERT` / `CF.INSERTNX`.
#[derive(Debug)]
pub struct Insert<'a> {
    /// The filter to create on a missing key; `None` with NOCREATE.
    pub create: Option<Spec>,
    pub items: &'a [&'a [u8]],
}

/// `CF.INSERT key [CAPACITY c] [ERROR r] [NOCREATE] ITEMS item...`: `args` are the arguments
/// after the key. Every word after `ITEMS` is an item. The capacity (and the rate) are
/// checked even when the key exists (RedisBloom checks the capacity).
pub fn parse_insert<'a>(args: &'a [&'a [u8]]) -> Result<Insert<'a>, BfError> {
    let mut cap: Option<i64> = None;
    let mut error_rate_arg: Option<f64> = None;
    let mut nocreate = false;
    // RedisBloom answers a wrong argument count to a command without `ITEMS` and an item,
    // whatever else is wrong: errors of the options wait for `ITEMS`.
    let mut error: Option<BfError> = None;
    let mut keep = |e: BfError| {
        error.get_or_insert(e);
    };
    let mut i = 0;
    while i < args.len() {
        let word = args[i];
        if word.eq_ignore_ascii_case(b"ITEMS") {
            let items = &args[i + 1..];
            if items.is_empty() {
                return Err(BfError::WrongArity);
            }
            if let Some(e) = error {
                return Err(e);
            }
            // The capacity is checked with NOCREATE too, as RedisBloom checks it.
            let cap = cap.unwrap_or(params::DEFAULT_CAPACITY as i64);
            let spec = match error_rate_arg {
                Some(e) => extension_spec(cap, e, None, None, None)?,
                None => spec_for(cap, Params::default())?,
            };
            let create = (!nocreate).then_some(spec);
            return Ok(Insert { create, items });
        } else if word.eq_ignore_ascii_case(b"CAPACITY") {
            let Some(value) = args.get(i + 1) else {
                break;
            };
            match capacity(value) {
                Ok(c) if cap.replace(c).is_some() => keep(BfError::CfRepeatedOption("CAPACITY")),
                Ok(_) => {}
                Err(e) => keep(e),
            }
            i += 2;
        } else if word.eq_ignore_ascii_case(b"ERROR") {
            let Some(value) = args.get(i + 1) else {
                break;
            };
            match error_rate(value) {
                Ok(e) if error_rate_arg.replace(e).is_some() => {
                    keep(BfError::CfRepeatedOption("ERROR"))
                }
                Ok(_) => {}
                Err(e) => keep(e),
            }
            i += 2;
        } else if word.eq_ignore_ascii_case(b"NOCREATE") {
            if nocreate {
                keep(BfError::CfRepeatedOption("NOCREATE"));
            }
            nocreate = true;
            i += 1;
        } else {
            return Err(BfError::InsertUnknownArgument);
        }
    }
    Err(BfError::WrongArity)
}

/// Which syntax a command is read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// A client's command: layerbloom's, which refuses what is ambiguous.
    Strict,
    /// A command replayed from the AOF or sent by a primary, which may have been written by
    /// RedisBloom: its own parser's reading, so that its AOF and its replication stream
    /// rebuild the filters it built. (layerbloom's own primaries send creations as
    /// `CF.LOADCHUNK` headers, and their other commands read the same either way.)
    RedisBloom,
}

/// `CF.RESERVE` as RedisBloom reads it: `args` are the arguments after the command name
/// (the key first); each option word is searched from the key on, the first occurrence
/// counting, and other words are ignored.
pub fn parse_reserve_redisbloom(args: &[&[u8]]) -> Result<Spec, BfError> {
    let cap = capacity(args.get(1).ok_or(BfError::WrongArity)?)?;
    let value = |name: &str| {
        let at = args
            .iter()
            .position(|a| a.eq_ignore_ascii_case(name.as_bytes()))?;
        args.get(at + 1).copied()
    };
    let mut p = Params::default();
    if let Some(v) = value("MAXITERATIONS") {
        let v = number::parse_i64(v).ok_or(BfError::CfMaxIterationsNotNumeric)?;
        p.max_iterations = params::max_iterations(v).map_err(param_error)?;
    }
    if let Some(v) = value("BUCKETSIZE") {
        let v = number::parse_i64(v).ok_or(BfError::CfBucketSizeNotNumeric)?;
        p.bucket_size = params::bucket_size(v).map_err(param_error)?;
    }
    if let Some(v) = value("EXPANSION") {
        let v = number::parse_i64(v).ok_or(BfError::CfExpansionNotNumeric)?;
        p.expansion = params::expansion(v).map_err(param_error)?;
    }
    spec_for(cap, p)
}

/// `CF.INSERT` as RedisBloom reads it: options told apart by their first letter (`c...`
/// CAPACITY, `n...` NOCREATE, `i...` ITEMS, after which every word is an item), and the word
/// `ERROR r`, layerbloom's: its primaries and its AOF send a CF.INSERT with `ERROR` on an
/// existing key as it came, and RedisBloom refuses the word, so no command of its has it.
pub fn parse_insert_redisbloom<'a>(args: &'a [&'a [u8]]) -> Result<Insert<'a>, BfError> {
    let mut cap = params::DEFAULT_CAPACITY as i64;
    let mut rate: Option<f64> = None;
    let mut nocreate = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].first().map(u8::to_ascii_uppercase) {
            Some(b'C') => {
                cap = capacity(args.get(i + 1).ok_or(BfError::WrongArity)?)?;
                i += 2;
            }
            Some(b'E') if args[i].eq_ignore_ascii_case(b"ERROR") => {
                rate = Some(error_rate(args.get(i + 1).ok_or(BfError::WrongArity)?)?);
                i += 2;
            }
            Some(b'N') => {
                nocreate = true;
                i += 1;
            }
            Some(b'I') => {
                let items = &args[i + 1..];
                if items.is_empty() {
                    return Err(BfError::WrongArity);
                }
                // The spec the strict parser checked on the primary, even for an existing key.
                let spec = match rate {
                    Some(e) => extension_spec(cap, e, None, None, None)?,
                    None => spec_for(cap, Params::default())?,
                };
                return Ok(Insert {
                    create: (!nocreate).then_some(spec),
                    items,
                });
            }
            _ => return Err(BfError::InsertUnknownArgument),
        }
    }
    Err(BfError::WrongArity)
}

/// An iterator of `CF.SCANDUMP` (at least `min`).
pub fn position(text: &[u8], min: i64) -> Result<u64, BfError> {
    number::parse_i64(text)
        .filter(|&v| v >= min)
        .map(|v| v as u64)
        .ok_or(BfError::CfInvalidPosition)
}

/// One field of `CF.INFO`: RedisBloom's eight, then layerbloom's health figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoField {
    Size,
    Buckets,
    Filters,
    Items,
    Deleted,
    BucketSize,
    Expansion,
    MaxIterations,
    /// Occupied slots / slots of each sub-filter, oldest first.
    Load,
    /// The whole filter's false-positive rate estimated from its sub-filters' loads.
    EstimatedFpr,
    /// CF.DEL calls that found nothing since the filter was created or loaded here.
    DeletesNotFound,
    /// Bits per fingerprint of each sub-filter, oldest first (8 for RedisBloom's layout).
    Fingerprint,
    /// The rate asked for with `ERROR` (nil for RedisBloom's layout).
    Error,
}

impl InfoField {
    /// RedisBloom's eight fields, in its order: the whole reply of `CF.INFO key`.
    pub const REDISBLOOM: [InfoField; 8] = [
        InfoField::Size,
        InfoField::Buckets,
        InfoField::Filters,
        InfoField::Items,
        InfoField::Deleted,
        InfoField::BucketSize,
        InfoField::Expansion,
        InfoField::MaxIterations,
    ];

    /// The reply of `CF.INFO key HEALTH`.
    pub const HEALTH: [InfoField; 3] = [
        InfoField::Load,
        InfoField::EstimatedFpr,
        InfoField::DeletesNotFound,
    ];

    /// Each field's word and name in replies (RedisBloom's names for its eight; the health
    /// ones named as BF.INFO's where the figure is the same).
    const WORDS: [(&'static str, InfoField, &'static std::ffi::CStr); 13] = [
        ("SIZE", InfoField::Size, c"Size"),
        ("BUCKETS", InfoField::Buckets, c"Number of buckets"),
        ("FILTERS", InfoField::Filters, c"Number of filters"),
        ("ITEMS", InfoField::Items, c"Number of items inserted"),
        ("DELETED", InfoField::Deleted, c"Number of items deleted"),
        ("BUCKETSIZE", InfoField::BucketSize, c"Bucket size"),
        ("EXPANSION", InfoField::Expansion, c"Expansion rate"),
        ("MAXITERATIONS", InfoField::MaxIterations, c"Max iterations"),
        ("LOAD", InfoField::Load, c"Load factors"),
        (
            "FPR",
            InfoField::EstimatedFpr,
            c"Estimated false positive rate",
        ),
        (
            "DELETESNOTFOUND",
            InfoField::DeletesNotFound,
            c"Deletes not found",
        ),
        ("FINGERPRINT", InfoField::Fingerprint, c"Fingerprint bits"),
        ("ERROR", InfoField::Error, c"Error rate"),
    ];

    pub fn title_c(self) -> &'static std::ffi::CStr {
        Self::WORDS
            .iter()
            .find(|(_, f, _)| *f == self)
            .map_or(c"", |&(_, _, title)| title)
    }

    /// The field a `CF.INFO key <word>` asks for.
    pub fn parse(word: &[u8]) -> Result<Self, BfError> {
        Self::WORDS
            .iter()
            .find(|(name, _, _)| word.eq_ignore_ascii_case(name.as_bytes()))
            .map(|&(_, f, _)| f)
            .ok_or(BfError::InvalidInfo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserve(words: &[&str]) -> Result<Spec, BfError> {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        parse_reserve(&args)
    }

    fn insert(words: &[&str]) -> Result<(Option<Spec>, usize), BfError> {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        parse_insert(&args).map(|i| (i.create, i.items.len()))
    }

    #[test]
    fn reserve_reads_redisbloom_options_and_rounds_expansion() {
        let s = reserve(&[
            "100",
            "bucketsize",
            "4",
            "maxiterations",
            "7",
            "expansion",
            "3",
        ]);
        let s = s.unwrap();
        assert_eq!(s.buckets, 32);
        assert_eq!(
            s.params,
            Params {
                bucket_size: 4,
                max_iterations: 7,
                expansion: 4
            }
        );
        assert_eq!(reserve(&["1000"]).unwrap().buckets, 512);
    }

    #[test]
    fn reserve_errors_come_in_redisbloom_order() {
        assert_eq!(
            reserve(&["abc", "BUCKETSIZE", "0"]),
            Err(BfError::InsertBadCapacity)
        );
        assert_eq!(
            reserve(&["100", "BUCKETSIZE", "0", "MAXITERATIONS", "0"]),
            Err(BfError::CfMaxIterationsRange)
        );
        assert_eq!(
            reserve(&["100", "EXPANSION", "-1", "BUCKETSIZE", "0"]),
            Err(BfError::CfBucketSizeRange)
        );
        assert_eq!(
            reserve(&["1", "EXPANSION", "-1"]),
            Err(BfError::CfExpansionRange)
        );
        assert_eq!(reserve(&["3"]), Err(BfError::CfCapacityTooSmall));
        assert_eq!(
            reserve(&["100", "BUCKETSIZE", "1.5"]),
            Err(BfError::CfBucketSizeNotNumeric)
        );
    }

    #[test]
    fn reserve_refuses_unknown_and_repeated_words() {
        assert_eq!(
            reserve(&["100", "FOO", "3"]),
            Err(BfError::ReserveUnknownArgument)
        );
        assert_eq!(
            reserve(&["100", "EXPANSION", "2", "EXPANSION", "4"]),
            Err(BfError::CfRepeatedOption("EXPANSION"))
        );
        assert_eq!(reserve(&["100", "EXPANSION"]), Err(BfError::WrongArity));
    }

    #[test]
    fn insert_takes_whole_words_and_every_word_after_items() {
        assert_eq!(
            insert(&["ITEMS", "ITEMS", "NOCREATE"]).unwrap(),
            (Some(default_spec()), 2)
        );
        assert_eq!(insert(&["NOCREATE", "ITEMS", "a"]).unwrap(), (None, 1));
        let (spec, n) = insert(&["capacity", "10", "items", "a", "b"]).unwrap();
        assert_eq!((spec.unwrap().buckets, n), (8, 2));
        assert_eq!(
            insert(&["nx", "ITEMS", "a"]),
            Err(BfError::InsertUnknownArgument)
        );
        assert_eq!(
            insert(&["cap", "10", "ITEMS", "a"]),
            Err(BfError::InsertUnknownArgument)
        );
        assert_eq!(
            insert(&["EXPANSION", "2", "ITEMS", "a"]),
            Err(BfError::InsertUnknownArgument)
        );
        assert_eq!(
            insert(&["CAPACITY", "abc", "ITEMS", "a"]),
            Err(BfError::InsertBadCapacity)
        );
        assert_eq!(
            insert(&["NOCREATE", "CAPACITY", "3", "ITEMS", "a"]),
            Err(BfError::CfCapacityTooSmall)
        );
        assert_eq!(insert(&["CAPACITY", "100"]), Err(BfError::WrongArity));
        assert_eq!(insert(&["NOCREATE", "ITEMS"]), Err(BfError::WrongArity));
        assert_eq!(insert(&["NOCREATE", "NOCREATE"]), Err(BfError::WrongArity));
        assert_eq!(
            insert(&["NOCREATE", "NOCREATE", "ITEMS", "a"]),
            Err(BfError::CfRepeatedOption("NOCREATE"))
        );
    }

    #[test]
    fn redisbloom_s_reading_is_kept_for_its_aof_and_primaries() {
        let words = |w: &[&'static str]| w.iter().map(|x| x.as_bytes()).collect::<Vec<_>>();
        let s = parse_reserve_redisbloom(&words(&[
            "k",
            "100",
            "FOO",
            "3",
            "EXPANSION",
            "2",
            "expansion",
            "8",
        ]));
        assert_eq!(
            s.unwrap().params.expansion,
            2,
            "the first occurrence counts"
        );
        assert_eq!(
            parse_reserve_redisbloom(&words(&["bucketsize", "100"])),
            Err(BfError::CfCapacityTooSmall),
            "a key named like an option is read as one, as RedisBloom reads it"
        );
        let args = words(&["cap", "10", "nx", "icecream", "a", "b"]);
        let i = parse_insert_redisbloom(&args).unwrap();
        assert_eq!((i.create, i.items.len()), (None, 2));
        let args = words(&["CAPACITY", "10", "ITEMS", "a"]);
        let i = parse_insert_redisbloom(&args).unwrap();
        assert_eq!((i.create.unwrap().buckets, i.items.len()), (8, 1));
        assert_eq!(
            parse_insert_redisbloom(&words(&["EXPANSION", "2", "ITEMS", "a"])).unwrap_err(),
            BfError::InsertUnknownArgument
        );
    }

    #[test]
    fn the_replayed_reading_takes_error_as_a_layerbloom_primary_sends_it() {
        let words =
            |w: &[&'static str]| -> Vec<&'static [u8]> { w.iter().map(|w| w.as_bytes()).collect() };
        for sent in [
            &["ERROR", "0.001", "ITEMS", "a", "b"][..],
            &[
                "CAPACITY", "300", "error", "0.0001", "NOCREATE", "ITEMS", "a", "b",
            ],
        ] {
            let args = words(sent);
            let replayed = parse_insert_redisbloom(&args).unwrap();
            let strict = parse_insert(&args).unwrap();
            assert_eq!(
                (replayed.create, replayed.items),
                (strict.create, strict.items),
                "{sent:?}"
            );
        }
        // Only the whole word, with a valid rate.
        for (sent, refused) in [
            (
                &["ERR", "0.01", "ITEMS", "a"][..],
                BfError::InsertUnknownArgument,
            ),
            (&["ERROR", "2", "ITEMS", "a"], BfError::CfErrorRange),
            (&["ERROR"], BfError::WrongArity),
        ] {
            assert_eq!(
                parse_insert_redisbloom(&words(sent)).unwrap_err(),
                refused,
                "{sent:?}"
            );
        }
    }

    #[test]
    fn error_sizes_an_extension_shape_and_keeps_the_options_given() {
        let s = reserve(&["1000", "ERROR", "0.01"]).unwrap();
        let rate = s.rate.unwrap();
        assert_eq!((rate.error, rate.widths.first), (0.01, 10));
        assert_eq!(s.buckets, 512);
        assert_eq!(
            s.params,
            Params {
                bucket_size: 4,
                max_iterations: 500,
                expansion: 1
            }
        );
        let s = reserve(&[
            "1000",
            "expansion",
            "0",
            "error",
            "0.001",
            "bucketsize",
            "8",
        ]);
        let s = s.unwrap();
        assert_eq!((s.params.bucket_size, s.params.expansion), (8, 0));
        assert_eq!(reserve(&["1000"]).unwrap().rate, None);
        assert_eq!(
            reserve(&["1000", "ERROR", "0.01", "BUCKETSIZE", "2"]),
            Err(BfError::CfErrorBucketSize)
        );
        assert_eq!(
            reserve(&["1000", "ERROR", "1e-300"]),
            Err(BfError::CfErrorTooSmall)
        );
        for bad in ["0", "1", "-1", "x", "inf", "nan"] {
            assert_eq!(
                reserve(&["1000", "ERROR", bad]),
                Err(BfError::CfErrorRange),
                "{bad}"
            );
        }
        // Huge capacities make a spec the allocation then refuses.
        assert!(reserve(&["9223372036854775807", "ERROR", "0.01"]).is_ok());
        let (spec, _) = insert(&["ERROR", "0.001", "CAPACITY", "100", "ITEMS", "a"]).unwrap();
        assert_eq!(spec.unwrap().rate.unwrap().widths.first, 13);
        let (spec, _) = insert(&["NOCREATE", "ERROR", "0.5", "ITEMS", "a"]).unwrap();
        assert_eq!(spec, None);
        assert_eq!(
            insert(&["ERROR", "2", "ITEMS", "a"]),
            Err(BfError::CfErrorRange)
        );
        assert_eq!(insert(&["ERROR"]), Err(BfError::WrongArity));
    }

    #[test]
    fn positions_are_non_negative_integers() {
        assert_eq!(position(b"0", 0), Ok(0));
        assert_eq!(position(b"0", 1), Err(BfError::CfInvalidPosition));
        assert_eq!(position(b"-1", 0), Err(BfError::CfInvalidPosition));
        assert_eq!(position(b"abc", 0), Err(BfError::CfInvalidPosition));
    }

    #[test]
    fn info_words_name_each_field_once_in_any_case_and_health_is_the_set() {
        use crate::info_request::InfoRequest;
        let parse = |w: &str| InfoRequest::parse_with(Some(w.as_bytes()), InfoField::parse);
        for (word, field, title) in InfoField::WORDS {
            assert_eq!(parse(word), Ok(InfoRequest::One(field)));
            assert_eq!(
                parse(&word.to_ascii_lowercase()),
                Ok(InfoRequest::One(field))
            );
            assert_eq!(field.title_c(), title);
            let named = InfoField::WORDS.iter().filter(|w| w.1 == field).count();
            assert_eq!(named, 1, "{word}");
        }
        assert_eq!(parse("health"), Ok(InfoRequest::Health));
        assert_eq!(parse("ERRORS"), Err(BfError::InvalidInfo));
        assert_eq!(parse(""), Err(BfError::InvalidInfo));
        assert_eq!(
            InfoRequest::parse_with(None, InfoField::parse),
            Ok(InfoRequest::Full)
        );
        let all: Vec<InfoField> = InfoField::REDISBLOOM
            .iter()
            .chain(&InfoField::HEALTH)
            .chain(&[InfoField::Fingerprint, InfoField::Error])
            .copied()
            .collect();
        let listed: Vec<InfoField> = InfoField::WORDS.iter().map(|w| w.1).collect();
        assert_eq!(all, listed);
    }
}

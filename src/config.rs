//! Module settings, declared as one table: each setting is a [`Setting`] (its name, its
//! default, its range, what it applies to), declared where it belongs: the memory limit and the
//! capacity-warning threshold here (they apply to every structure), a structure's own in its
//! folder (`bloom/settings.rs`), the test clock's offset in `clock.rs`. A structure's entry in
//! the registry (`lib.rs`) lists the settings that apply to it; [`register`] registers each
//! once, and load-time arguments, `CONFIG GET` / `CONFIG SET` and the `INFO bf_settings`
//! fields all follow from the table.
//!
//! Registered through the module config API, so they are set in redis.conf or with
//! `CONFIG SET` and read with `CONFIG GET`. RedisBloom's names are kept: `bf-error-rate`,
//! `bf-initial-size`, `bf-expansion-factor`; `bf-max-filter-memory`, `bf-layout` and
//! `bf-capacity-warning` are layerbloom's. Where the server allows unprefixed module settings
//! (Redis 8 and later) they are registered under exactly these names, as RedisBloom 8 does;
//! elsewhere (Redis 7) every module setting carries the module's name as prefix:
//! `bf.bf-error-rate`. On Redis 8 each setting also answers to that Redis 7 spelling (an alias,
//! `"name|alias"` in Redis 8's config API), so a redis.conf or command line written for Redis 7
//! still starts Redis 8 with its settings applied.
//! Load-time arguments (`--loadmodule liblayerbloom.so ERROR_RATE 0.001 INITIAL_SIZE 1000`)
//! accept RedisBloom's legacy names and these names.
//!
//! An error rate is a string setting registered through the raw API: the crate's string
//! settings allocate a new string on every `CONFIG GET` and never free it.

use std::borrow::Cow;
use std::ffi::{c_char, c_int, c_longlong, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering};

use redis_module::{raw, Context, ContextFlags, RedisString};

use crate::number;
use crate::raw_api::{self, EnumConfig, NumericConfig, StringConfig};

/// What values a setting takes.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// An integer in `min..=max`.
    Integer { min: i64, max: i64 },
    /// A percentage, 0 to 100.
    Percentage,
    /// A number of bytes, at least `min`, with Redis's units (`4gb`).
    Memory { min: i64 },
    /// An error rate, in the open interval (0, 1), kept as the text it was set with; above
    /// `cap` the filters use `cap`, and the log says so.
    Rate { cap: f64 },
    /// One of these words (case-insensitive), held as its index.
    Choice(&'static [&'static CStr]),
}

/// One module setting: a row of the table.
pub struct Setting {
    /// Its name (`bf-error-rate`); on Redis 7 the server prefixes it (`bf.bf-error-rate`).
    pub name: &'static str,
    /// RedisBloom's load-time argument name for it (`error_rate`), if it has one.
    pub legacy: Option<&'static str>,
    /// What it applies to, in a few words (for whoever reads the table; the tests hold every
    /// setting to saying it).
    #[allow(dead_code)]
    pub applies: &'static str,
    pub kind: Kind,
    /// The default: an integer, a choice's index, a rate's bits.
    default: i64,
    /// A rate's default as `CONFIG GET` shows it.
    default_text: &'static CStr,
    /// The value: an integer, a choice's index, a rate's bits.
    value: AtomicI64,
    /// A rate as last set, returned by `CONFIG GET`; owned by the module.
    text: AtomicPtr<raw::RedisModuleString>,
    /// How many times `CONFIG SET` changed the value.
    changes: AtomicU64,
}

impl Setting {
    const fn new(name: &'static str, applies: &'static str, kind: Kind, default: i64) -> Self {
        Setting {
            name,
            legacy: None,
            applies,
            kind,
            default,
            default_text: c"",
            value: AtomicI64::new(default),
            text: AtomicPtr::new(std::ptr::null_mut()),
            changes: AtomicU64::new(0),
        }
    }

    pub const fn integer(
        name: &'static str,
        applies: &'static str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Self {
        Self::new(name, applies, Kind::Integer { min, max }, default)
    }

    pub const fn percentage(name: &'static str, applies: &'static str, default: i64) -> Self {
        Self::new(name, applies, Kind::Percentage, default)
    }

    pub const fn memory(name: &'static str, applies: &'static str, default: i64, min: i64) -> Self {
        Self::new(name, applies, Kind::Memory { min }, default)
    }

    /// An error rate whose default is `default`, written `text`.
    pub const fn rate(
        name: &'static str,
        applies: &'static str,
        (default, text): (f64, &'static CStr),
        cap: f64,
    ) -> Self {
        Setting {
            default_text: text,
            ..Self::new(name, applies, Kind::Rate { cap }, default.to_bits() as i64)
        }
    }

    /// One of `choices`, `default` the index of the default.
    pub const fn choice(
        name: &'static str,
        applies: &'static str,
        choices: &'static [&'static CStr],
        default: i64,
    ) -> Self {
        Self::new(name, applies, Kind::Choice(choices), default)
    }

    /// The same setting, also read from RedisBloom's load-time argument `legacy`.
    pub const fn legacy(self, legacy: &'static str) -> Self {
        Setting {
            legacy: Some(legacy),
            ..self
        }
    }

    /// The value of an integer, percentage, memory or choice setting (a choice's index).
    pub fn integer_value(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }

    /// The value of a rate setting.
    pub fn rate_value(&self) -> f64 {
        f64::from_bits(self.value.load(Ordering::Relaxed) as u64)
    }

    /// How many times `CONFIG SET` has changed it since the module loaded.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// Sets an integer-held value, counting a change.
    fn store(&self, value: i64) {
        if self.value.swap(value, Ordering::Relaxed) != value {
            self.changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The value as `CONFIG GET` shows it (a rate as set, a choice by its word).
    pub fn text(&self) -> String {
        match self.kind {
            Kind::Rate { .. } => {
                let text = self.text.load(Ordering::Acquire);
                if text.is_null() {
                    return self.default_text.to_string_lossy().into_owned();
                }
                String::from_utf8_lossy(RedisString::string_as_slice(text)).into_owned()
            }
            Kind::Choice(choices) => choices
                .get(self.integer_value() as usize)
                .map_or_else(String::new, |c| c.to_string_lossy().into_owned()),
            _ => self.integer_value().to_string(),
        }
    }

    /// Its field in `INFO bf_settings`: the name without `bf-`, in underscores.
    pub fn info_field(&self) -> Cow<'static, str> {
        let bare = self.name.strip_prefix("bf-").unwrap_or(self.name);
        Cow::Owned(bare.replace('-', "_"))
    }

    /// What a value must be, as the refusal of a bad one says.
    fn must(&self) -> String {
        match self.kind {
            Kind::Integer { min, max } => format!("must be an integer in [{min}, {max}]"),
            Kind::Percentage => "must be a percentage, 0 to 100".into(),
            Kind::Memory { min } => format!("must be a memory size of at least {min} bytes"),
            Kind::Rate { .. } => RATE_RANGE.into(),
            Kind::Choice(choices) => format!(
                "must be {}",
                choices
                    .iter()
                    .map(|c| c.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        }
    }

    /// Reads a value from its text (a load-time argument): what to store, or why not.
    fn parse(&self, text: &[u8]) -> Option<i64> {
        match self.kind {
            Kind::Integer { min, max } => {
                number::parse_i64(text).filter(|n| (min..=max).contains(n))
            }
            Kind::Percentage => number::parse_i64(text).filter(|n| (0..=100).contains(n)),
            Kind::Memory { min } => parse_memory(text).filter(|&n| n >= min),
            Kind::Rate { .. } => check_rate(text).ok().map(|r| r.to_bits() as i64),
            Kind::Choice(choices) => {
                let word = text.to_ascii_lowercase();
                let index = choices
                    .iter()
                    .position(|c| c.to_bytes() == word.as_slice())?;
                Some(index as i64)
            }
        }
    }

    /// Sets a rate and the text `CONFIG GET` answers.
    fn store_rate(&self, rate: f64, text: &[u8]) {
        if let Kind::Rate { cap } = self.kind {
            if rate > cap {
                // CONFIG SET may be repeated: the same budget as a creation's lowered rate.
                crate::log_limit::error_rate_warning(
                    None,
                    &format!(
                        "layerbloom: error rate {rate} is above {cap}; filters will use {cap}"
                    ),
                );
            }
        }
        self.store(rate.to_bits() as i64);
        // Configs are only read and written on the main thread: the old string, once swapped
        // out, is reachable from nowhere else.
        let old = self
            .text
            .swap(raw_api::create_string(text), Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: made by `create_string` here, and no longer reachable.
            unsafe { raw_api::free_string(old) };
        }
    }

    /// The setting a callback serves, from its private data.
    ///
    /// # Safety
    /// `privdata` is what `register_one` registered: a `&'static Setting`.
    unsafe fn of(privdata: *mut c_void) -> &'static Setting {
        // SAFETY: the caller's contract.
        unsafe { &*privdata.cast::<Setting>() }
    }
}

/// Default per-filter memory limit: far above what users run (100 million items at 0.1%
/// take 180 MB), low enough that one command cannot take the machine's memory.
pub const DEFAULT_MAX_FILTER_MEMORY: i64 = 4 << 30;
/// The smallest memory limit accepted: one small filter.
const MIN_MAX_FILTER_MEMORY: i64 = 1024;
/// Default capacity-warning threshold: a percentage of the newest layer's capacity.
pub const DEFAULT_CAPACITY_WARNING: i64 = 70;

/// The per-filter memory limit.
pub static MAX_FILTER_MEMORY: Setting = Setting::memory(
    "bf-max-filter-memory",
    "every filter a client creates or grows, of every structure",
    DEFAULT_MAX_FILTER_MEMORY,
    MIN_MAX_FILTER_MEMORY,
);

/// The capacity-warning threshold.
pub static CAPACITY_WARNING: Setting = Setting::percentage(
    "bf-capacity-warning",
    "every filter's newest layer or sub-filter: the fill that warns (0: never)",
    DEFAULT_CAPACITY_WARNING,
);

/// Redis 8's flag for a module setting registered without the module-name prefix
/// (`REDISMODULE_CONFIG_UNPREFIXED`); Redis 7 refuses a registration that carries it.
const CONFIG_UNPREFIXED: u32 = 1 << 9;
/// The first server version (`0x00MMmmpp`) with unprefixed module settings.
const UNPREFIXED_SINCE: i32 = 0x0008_0000;
/// What an error rate must be.
const RATE_RANGE: &str = "error rate must be a number in the open interval (0, 1)";

/// Whether the settings were registered without the `bf.` prefix (Redis 8).
static UNPREFIXED: AtomicBool = AtomicBool::new(false);

/// The server's number of databases (`databases`, fixed at startup), read when the module
/// loads; 16, the server's default, if it cannot be read.
static DATABASES: AtomicI64 = AtomicI64::new(16);

/// How many databases INFO keyspace may list (`memory`'s eviction check sums them).
pub fn databases() -> i64 {
    DATABASES.load(Ordering::Relaxed)
}

/// Reads `databases` from the server (at load; the setting cannot change afterwards).
pub fn read_databases(ctx: &redis_module::Context) {
    use redis_module::RedisValue;
    let Ok(RedisValue::Array(reply)) = ctx.call("CONFIG", &["GET", "databases"]) else {
        return;
    };
    let value = match reply.get(1) {
        Some(RedisValue::SimpleString(s)) => s.parse::<i64>().ok(),
        Some(RedisValue::BulkString(s)) => s.parse::<i64>().ok(),
        Some(RedisValue::BulkRedisString(s)) => s.to_string().parse::<i64>().ok(),
        Some(RedisValue::StringBuffer(b)) => {
            std::str::from_utf8(b).ok().and_then(|s| s.parse().ok())
        }
        _ => None,
    };
    if let Some(n) = value.filter(|&n| n > 0) {
        DATABASES.store(n, Ordering::Relaxed);
    }
}

/// The capacity-warning threshold, a percentage of a layer's capacity (0: no warnings).
pub fn capacity_warning() -> u32 {
    CAPACITY_WARNING.integer_value() as u32
}

/// The configured per-filter memory limit (whatever the context).
pub fn max_filter_memory() -> u64 {
    MAX_FILTER_MEMORY.integer_value() as u64
}

/// The name to register a setting under: on Redis 8 (`flags` carry `CONFIG_UNPREFIXED`) the
/// unprefixed name with the Redis 7 spelling `bf.<name>` as its alias; elsewhere the bare name,
/// which the server prefixes itself.
pub fn registered_name(name: &str, flags: u32) -> CString {
    let text = if flags & CONFIG_UNPREFIXED != 0 {
        format!("{name}|bf.{name}")
    } else {
        name.to_string()
    };
    CString::new(text).expect("no NUL in setting names")
}

/// The name of a setting as `CONFIG SET` / `CONFIG GET` take it on this server.
pub fn setting_name(name: &str) -> String {
    if UNPREFIXED.load(Ordering::Relaxed) {
        name.to_string()
    } else {
        format!("bf.{name}")
    }
}

/// The memory limit for a command's filter. Commands from the primary or replayed from the
/// AOF were already accepted once; refusing them here would make the copies diverge.
pub fn max_filter_bytes(flags: &ContextFlags) -> u64 {
    if flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) {
        u64::MAX
    } else {
        max_filter_memory()
    }
}

fn check_rate(text: &[u8]) -> Result<f64, &'static str> {
    match number::parse_f64(text) {
        Some(r) if r > 0.0 && r < 1.0 => Ok(r),
        _ => Err(RATE_RANGE),
    }
}

/// Writes a config error message for Redis to report.
fn set_error(err: *mut *mut raw::RedisModuleString, message: &str) -> c_int {
    if !err.is_null() {
        // SAFETY: Redis passes a valid out-pointer and takes ownership of the string.
        unsafe { *err = raw_api::create_string(message.as_bytes()) };
    }
    raw::REDISMODULE_ERR as c_int
}

extern "C" fn get_rate(_name: *const c_char, privdata: *mut c_void) -> *mut raw::RedisModuleString {
    // SAFETY: registered with a `&'static Setting` (`register_one`).
    unsafe { Setting::of(privdata) }
        .text
        .load(Ordering::Acquire)
}

extern "C" fn set_rate(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: registered with a `&'static Setting` (`register_one`).
    let setting = unsafe { Setting::of(privdata) };
    let text = RedisString::string_as_slice(value);
    match check_rate(text) {
        Ok(rate) => {
            setting.store_rate(rate, text);
            raw::REDISMODULE_OK as c_int
        }
        Err(message) => set_error(err, message),
    }
}

extern "C" fn get_numeric(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    // SAFETY: registered with a `&'static Setting` (`register_one`).
    unsafe { Setting::of(privdata) }.integer_value()
}

extern "C" fn set_numeric(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // Redis has already checked the registered bounds.
    // SAFETY: registered with a `&'static Setting` (`register_one`).
    unsafe { Setting::of(privdata) }.store(value);
    raw::REDISMODULE_OK as c_int
}

extern "C" fn get_choice(_name: *const c_char, privdata: *mut c_void) -> c_int {
    // SAFETY: registered with a `&'static Setting` (`register_one`).
    unsafe { Setting::of(privdata) }.integer_value() as c_int
}

extern "C" fn set_choice(
    _name: *const c_char,
    value: c_int,
    privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // Redis accepts only the registered choices.
    // SAFETY: registered with a `&'static Setting` (`register_one`).
    unsafe { Setting::of(privdata) }.store(i64::from(value));
    raw::REDISMODULE_OK as c_int
}

/// The server's version as `0x00MMmmpp`, or 0 where the API to ask is missing.
pub fn server_version() -> i32 {
    raw_api::server_version()
}

/// Whether the server may accept unprefixed setting names: Redis 8 and later. Valkey reports
/// its own version (8.x) through the same call but has no such flag, and logs a warning for
/// the attempt, so it is told apart by its `server_name`.
fn unprefixed_names_possible(ctx: &Context) -> bool {
    if server_version() < UNPREFIXED_SINCE {
        return false;
    }
    let name = ctx.server_info("server").field("server_name");
    !name.is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case("valkey"))
}

/// Registers one setting with the server, under `extra` flags (`CONFIG_UNPREFIXED` or 0);
/// whether the server accepted it.
fn register_one(
    ctx: &Context,
    setting: &'static Setting,
    extra: u32,
) -> Result<bool, &'static str> {
    let privdata = std::ptr::from_ref(setting) as usize;
    let no_api = |_| "no module config API";
    let base = match setting.kind {
        Kind::Memory { .. } => raw::REDISMODULE_CONFIG_MEMORY,
        _ => raw::REDISMODULE_CONFIG_DEFAULT,
    };
    let flags = base | extra;
    let name = registered_name(setting.name, flags);
    match setting.kind {
        Kind::Rate { .. } => {
            let callbacks = StringConfig {
                get: Some(get_rate),
                set: Some(set_rate),
                privdata,
            };
            raw_api::register_string_config(ctx, &name, setting.default_text, flags, callbacks)
        }
        Kind::Choice(choices) => {
            let callbacks = EnumConfig {
                get: Some(get_choice),
                set: Some(set_choice),
                privdata,
            };
            let pairs: Vec<(&CStr, c_int)> =
                choices.iter().zip(0..).map(|(&c, i)| (c, i)).collect();
            raw_api::register_enum_config(
                ctx,
                &name,
                setting.default as c_int,
                flags,
                &pairs,
                callbacks,
            )
        }
        Kind::Integer { min, max } => numeric(ctx, setting, &name, flags, (min, max), privdata),
        Kind::Percentage => numeric(ctx, setting, &name, flags, (0, 100), privdata),
        Kind::Memory { min } => numeric(ctx, setting, &name, flags, (min, i64::MAX), privdata),
    }
    .map_err(no_api)
}

fn numeric(
    ctx: &Context,
    setting: &Setting,
    name: &CStr,
    flags: u32,
    (min, max): (i64, i64),
    privdata: usize,
) -> Result<bool, raw_api::Missing> {
    let callbacks = NumericConfig {
        get: Some(get_numeric),
        set: Some(set_numeric),
        privdata,
    };
    raw_api::register_numeric_config(ctx, name, (setting.default, min, max), flags, callbacks)
}

/// Every setting of `settings` once, in their order (a setting that applies to several
/// structures is listed by each).
pub fn distinct(settings: &[&'static Setting]) -> Vec<&'static Setting> {
    let mut seen: Vec<&'static Setting> = Vec::with_capacity(settings.len());
    for &setting in settings {
        if !seen.iter().any(|s| std::ptr::eq(*s, setting)) {
            seen.push(setting);
        }
    }
    seen
}

/// Registers the settings (each once) and loads their values from the server's
/// configuration. The first is registered unprefixed where the server may have such names;
/// should it refuse the flag after all, every setting keeps the prefixed name.
pub fn register(ctx: &Context, settings: &[&'static Setting]) -> Result<(), String> {
    let settings = distinct(settings);
    for setting in &settings {
        if let Kind::Rate { .. } = setting.kind {
            setting.store_rate(setting.rate_value(), setting.default_text.to_bytes());
        }
    }
    let Some((first, rest)) = settings.split_first() else {
        return Ok(());
    };
    let mut extra = 0;
    if unprefixed_names_possible(ctx) && register_one(ctx, first, CONFIG_UNPREFIXED)? {
        extra = CONFIG_UNPREFIXED;
        UNPREFIXED.store(true, Ordering::Relaxed);
    } else if !register_one(ctx, first, 0)? {
        return Err(format!("could not register {}", first.name));
    }
    for setting in rest {
        if !register_one(ctx, setting, extra)? {
            return Err(format!("could not register {}", setting.name));
        }
    }
    if !raw_api::load_configs(ctx).map_err(|_| "no module config API")? {
        return Err("the bf settings in the server configuration are invalid".into());
    }
    Ok(())
}

/// The `INFO bf_settings` fields of `settings` (each once): each as `CONFIG GET` shows it.
pub fn info_fields(settings: &[&'static Setting]) -> Vec<(Cow<'static, str>, String)> {
    distinct(settings)
        .into_iter()
        .map(|s| (s.info_field(), s.text()))
        .collect()
}

/// Parses a memory amount as Redis does: a number with an optional unit (`k`, `kb`, `m`, `mb`,
/// `g`, `gb`; the `b` forms are powers of 1024).
pub fn parse_memory(text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.to_ascii_lowercase();
    let units: [(&str, i64); 7] = [
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1_000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("b", 1),
    ];
    let (digits, unit) = units
        .iter()
        .find_map(|&(suffix, unit)| text.strip_suffix(suffix).map(|d| (d, unit)))
        .unwrap_or((text.as_str(), 1));
    number::parse_i64(digits.as_bytes())?.checked_mul(unit)
}

/// Applies load-time arguments to `settings`: `NAME VALUE` pairs, names (a setting's, or
/// RedisBloom's legacy one) case-insensitive.
pub fn apply_module_args(
    settings: &[&'static Setting],
    module_args: &[RedisString],
) -> Result<(), String> {
    if !module_args.len().is_multiple_of(2) {
        return Err("module arguments come in NAME VALUE pairs".into());
    }
    for pair in module_args.chunks_exact(2) {
        let name = pair[0].to_string_lossy().to_ascii_lowercase();
        let value = pair[1].as_slice();
        let shown = String::from_utf8_lossy(value);
        let setting = settings
            .iter()
            .find(|s| s.name == name || s.legacy == Some(name.as_str()))
            .ok_or_else(|| format!("unknown module argument '{name}'"))?;
        let parsed = setting
            .parse(value)
            .ok_or_else(|| format!("{name} {shown}: {}", setting.must()))?;
        match setting.kind {
            Kind::Rate { .. } => setting.store_rate(f64::from_bits(parsed as u64), value),
            _ => setting.store(parsed),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_its_values_and_says_what_it_must_be() {
        let size = Setting::integer("bf-n", "tests", 100, 1, 1 << 30).legacy("n");
        assert_eq!(size.parse(b"1"), Some(1));
        assert_eq!(size.parse(b"0"), None);
        assert_eq!(size.must(), "must be an integer in [1, 1073741824]");
        assert_eq!(size.legacy, Some("n"));
        let percent = Setting::percentage("bf-p", "tests", 70);
        assert_eq!(
            (percent.parse(b"100"), percent.parse(b"101")),
            (Some(100), None)
        );
        assert_eq!(percent.must(), "must be a percentage, 0 to 100");
        assert_eq!(percent.integer_value(), 70);
        let memory = Setting::memory("bf-m", "tests", 4 << 30, 1024);
        assert_eq!(
            (memory.parse(b"1kb"), memory.parse(b"1k")),
            (Some(1024), None)
        );
        assert_eq!(
            memory.must(),
            "must be a memory size of at least 1024 bytes"
        );
        let rate = Setting::rate("bf-r", "tests", (0.01, c"0.01"), 0.25);
        assert_eq!(rate.rate_value(), 0.01);
        assert_eq!(rate.text(), "0.01", "the default's text until set");
        assert_eq!(rate.parse(b"0.5"), Some(0.5f64.to_bits() as i64));
        assert_eq!(rate.parse(b"1"), None);
        assert_eq!(
            rate.must(),
            "error rate must be a number in the open interval (0, 1)"
        );
        let choice = Setting::choice("bf-c", "tests", &[c"blocked", c"classic"], 0);
        assert_eq!(
            (choice.parse(b"CLASSIC"), choice.parse(b"x")),
            (Some(1), None)
        );
        assert_eq!(choice.must(), "must be blocked or classic");
        assert_eq!(choice.text(), "blocked");
        choice.store(1);
        assert_eq!((choice.text(), choice.changes()), ("classic".into(), 1));
        choice.store(1);
        assert_eq!(
            choice.changes(),
            1,
            "setting the same value changes nothing"
        );
        assert_eq!(choice.info_field(), "c");
        assert_eq!(
            Setting::integer("bf-expansion-factor", "tests", 2, 0, 32).info_field(),
            "expansion_factor"
        );
    }

    #[test]
    fn a_setting_listed_by_several_structures_is_one_setting() {
        let table = [&MAX_FILTER_MEMORY, &CAPACITY_WARNING, &MAX_FILTER_MEMORY];
        let names: Vec<_> = distinct(&table).iter().map(|s| s.name).collect();
        assert_eq!(names, ["bf-max-filter-memory", "bf-capacity-warning"]);
    }

    #[test]
    fn memory_amounts_parse_like_redis() {
        assert_eq!(parse_memory(b"1024"), Some(1024));
        assert_eq!(parse_memory(b"4gb"), Some(4 << 30));
        assert_eq!(parse_memory(b"4GB"), Some(4 << 30));
        assert_eq!(parse_memory(b"64mb"), Some(64 << 20));
        assert_eq!(parse_memory(b"2k"), Some(2000));
        assert_eq!(parse_memory(b"10b"), Some(10));
        assert_eq!(parse_memory(b"x"), None);
        assert_eq!(parse_memory(b"99999999999gb"), None);
    }

    #[test]
    fn error_rates_must_be_in_the_open_unit_interval() {
        assert_eq!(check_rate(b"0.001"), Ok(0.001));
        assert_eq!(check_rate(b"0.5"), Ok(0.5));
        assert!(check_rate(b"0").is_err());
        assert!(check_rate(b"1").is_err());
        assert!(check_rate(b"abc").is_err());
    }
}

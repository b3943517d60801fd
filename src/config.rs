//! Module settings: the defaults of auto-created filters, the per-filter memory limit, the
//! layout of new filters and the capacity-warning threshold.
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
//! The error rate is a string setting registered through the raw API: the crate's string
//! settings allocate a new string on every `CONFIG GET` and never free it.

use std::ffi::{c_char, c_int, c_longlong, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU64, Ordering};

use layerbloom_filter::{FilterSpec, Layout};
use redis_module::{raw, Context, ContextFlags, RedisString};

use crate::bloom::args::{MAX_CAPACITY, MAX_ERROR_RATE, MAX_EXPANSION};
use crate::number;
use crate::raw_api::{self, EnumConfig, NumericConfig, StringConfig};

/// Default error rate of auto-created filters.
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
/// Default capacity of auto-created filters.
pub const DEFAULT_INITIAL_SIZE: i64 = 100;
/// Default growth factor of new filters.
pub const DEFAULT_EXPANSION: i64 = 2;
/// Default per-filter memory limit: far above what users run (100 million items at 0.1%
/// take 180 MB), low enough that one command cannot take the machine's memory.
pub const DEFAULT_MAX_FILTER_MEMORY: i64 = 4 << 30;
/// The smallest memory limit accepted: one small filter.
const MIN_MAX_FILTER_MEMORY: i64 = 1024;
/// Default capacity-warning threshold: a percentage of the newest layer's capacity.
pub const DEFAULT_CAPACITY_WARNING: i64 = 70;
/// Redis 8's flag for a module setting registered without the module-name prefix
/// (`REDISMODULE_CONFIG_UNPREFIXED`); Redis 7 refuses a registration that carries it.
const CONFIG_UNPREFIXED: u32 = 1 << 9;
/// The first server version (`0x00MMmmpp`) with unprefixed module settings.
const UNPREFIXED_SINCE: i32 = 0x0008_0000;

static ERROR_RATE: AtomicU64 = AtomicU64::new(DEFAULT_ERROR_RATE.to_bits());
static INITIAL_SIZE: AtomicI64 = AtomicI64::new(DEFAULT_INITIAL_SIZE);
static EXPANSION: AtomicI64 = AtomicI64::new(DEFAULT_EXPANSION);
static MAX_FILTER_MEMORY: AtomicI64 = AtomicI64::new(DEFAULT_MAX_FILTER_MEMORY);
static CAPACITY_WARNING: AtomicI64 = AtomicI64::new(DEFAULT_CAPACITY_WARNING);
/// Whether the settings were registered without the `bf.` prefix (Redis 8).
static UNPREFIXED: AtomicBool = AtomicBool::new(false);
/// Layout of new filters: 0 blocked, 1 classic (RedisBloom's layers).
static LAYOUT: AtomicI32 = AtomicI32::new(0);
/// The error rate as last set, returned by `CONFIG GET`; owned by the module.
static ERROR_RATE_TEXT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// The parameters of a filter created without explicit ones.
pub fn default_spec() -> FilterSpec {
    let expansion = EXPANSION.load(Ordering::Relaxed) as u32;
    FilterSpec {
        capacity: INITIAL_SIZE.load(Ordering::Relaxed) as u64,
        error: f64::from_bits(ERROR_RATE.load(Ordering::Relaxed)).min(MAX_ERROR_RATE),
        expansion,
        nonscaling: expansion == 0,
        layout: layout(),
    }
}

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

/// The layout of new filters.
pub fn layout() -> Layout {
    if LAYOUT.load(Ordering::Relaxed) == 1 {
        Layout::Classic
    } else {
        Layout::Blocked
    }
}

/// Whether new filters are RedisBloom's classic ones, reporting RedisBloom's figures.
pub fn classic_mode() -> bool {
    layout() == Layout::Classic
}

extern "C" fn get_layout(_name: *const c_char, _privdata: *mut c_void) -> c_int {
    LAYOUT.load(Ordering::Relaxed)
}

extern "C" fn set_layout(
    _name: *const c_char,
    value: c_int,
    _privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    LAYOUT.store(value, Ordering::Relaxed);
    raw::REDISMODULE_OK as c_int
}

/// The growth factor of filters created without one.
pub fn default_expansion() -> u32 {
    EXPANSION.load(Ordering::Relaxed) as u32
}

/// The capacity-warning threshold, a percentage of a layer's capacity (0: no warnings).
pub fn capacity_warning() -> u32 {
    CAPACITY_WARNING.load(Ordering::Relaxed) as u32
}

/// The configured per-filter memory limit (whatever the context).
pub fn max_filter_memory() -> u64 {
    MAX_FILTER_MEMORY.load(Ordering::Relaxed) as u64
}

/// The default capacity of auto-created filters.
pub fn initial_size() -> u64 {
    INITIAL_SIZE.load(Ordering::Relaxed) as u64
}

/// The default error rate as `CONFIG GET` shows it.
pub fn error_rate_text() -> String {
    let text = ERROR_RATE_TEXT.load(Ordering::Acquire);
    if text.is_null() {
        return format!("{DEFAULT_ERROR_RATE}");
    }
    String::from_utf8_lossy(RedisString::string_as_slice(text)).into_owned()
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
        MAX_FILTER_MEMORY.load(Ordering::Relaxed) as u64
    }
}

fn check_error_rate(text: &[u8]) -> Result<f64, &'static str> {
    match number::parse_f64(text) {
        Some(r) if r > 0.0 && r < 1.0 => Ok(r),
        _ => Err("error rate must be a number in the open interval (0, 1)"),
    }
}

/// Sets the error rate and the text `CONFIG GET` answers.
fn store_error_rate(rate: f64, text: &[u8]) {
    if rate > MAX_ERROR_RATE {
        // CONFIG SET may be repeated: the same budget as a creation's lowered rate.
        crate::log_limit::error_rate_warning(
            None,
            &format!(
                "layerbloom: error rate {rate} is above {MAX_ERROR_RATE}; filters will use \
                 {MAX_ERROR_RATE}"
            ),
        );
    }
    ERROR_RATE.store(rate.to_bits(), Ordering::Relaxed);
    // Configs are only read and written on the main thread: the old string, once swapped
    // out, is reachable from nowhere else.
    let old = ERROR_RATE_TEXT.swap(raw_api::create_string(text), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: made by `create_string` here, and no longer reachable.
        unsafe { raw_api::free_string(old) };
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

extern "C" fn get_error_rate(
    _name: *const c_char,
    _privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    ERROR_RATE_TEXT.load(Ordering::Acquire)
}

extern "C" fn set_error_rate(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let text = RedisString::string_as_slice(value);
    match check_error_rate(text) {
        Ok(rate) => {
            store_error_rate(rate, text);
            raw::REDISMODULE_OK as c_int
        }
        Err(message) => set_error(err, message),
    }
}

/// Which numeric setting a callback serves (passed as the callbacks' private data).
#[derive(Clone, Copy)]
#[repr(usize)]
enum Numeric {
    InitialSize = 1,
    Expansion = 2,
    MaxFilterMemory = 3,
    CapacityWarning = 4,
}

impl Numeric {
    fn from_privdata(p: *mut c_void) -> Option<Self> {
        match p as usize {
            1 => Some(Numeric::InitialSize),
            2 => Some(Numeric::Expansion),
            3 => Some(Numeric::MaxFilterMemory),
            4 => Some(Numeric::CapacityWarning),
            _ => None,
        }
    }

    fn cell(self) -> &'static AtomicI64 {
        match self {
            Numeric::InitialSize => &INITIAL_SIZE,
            Numeric::Expansion => &EXPANSION,
            Numeric::MaxFilterMemory => &MAX_FILTER_MEMORY,
            Numeric::CapacityWarning => &CAPACITY_WARNING,
        }
    }
}

extern "C" fn get_numeric(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    Numeric::from_privdata(privdata).map_or(0, |n| n.cell().load(Ordering::Relaxed))
}

extern "C" fn set_numeric(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    match Numeric::from_privdata(privdata) {
        // Redis has already checked the registered bounds.
        Some(n) => {
            let old = n.cell().swap(value, Ordering::Relaxed);
            if matches!(n, Numeric::CapacityWarning) && old != value {
                crate::bloom::stats::warning_threshold_changed();
            }
            raw::REDISMODULE_OK as c_int
        }
        None => set_error(err, "unknown setting"),
    }
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

/// Registers the settings and loads their values from the server's configuration.
pub fn register(ctx: &Context) -> Result<(), String> {
    store_error_rate(DEFAULT_ERROR_RATE, b"0.01");
    let no_api = |_| "no module config API";
    let register_error_rate = |flags: u32| {
        let callbacks = StringConfig {
            get: Some(get_error_rate),
            set: Some(set_error_rate),
            privdata: 0,
        };
        let name = registered_name("bf-error-rate", flags);
        raw_api::register_string_config(ctx, &name, c"0.01", flags, callbacks)
    };
    // Unprefixed names where the server has them; should it refuse the flag after all,
    // the prefixed names still work.
    let mut extra = 0;
    if unprefixed_names_possible(ctx) && register_error_rate(CONFIG_UNPREFIXED).map_err(no_api)? {
        extra = CONFIG_UNPREFIXED;
        UNPREFIXED.store(true, Ordering::Relaxed);
    } else if !register_error_rate(raw::REDISMODULE_CONFIG_DEFAULT).map_err(no_api)? {
        return Err("could not register bf-error-rate".into());
    }
    let numerics: [(&str, i64, u32, i64, i64, Numeric); 4] = [
        (
            "bf-initial-size",
            DEFAULT_INITIAL_SIZE,
            raw::REDISMODULE_CONFIG_DEFAULT,
            1,
            MAX_CAPACITY as i64,
            Numeric::InitialSize,
        ),
        (
            "bf-expansion-factor",
            DEFAULT_EXPANSION,
            raw::REDISMODULE_CONFIG_DEFAULT,
            0,
            i64::from(MAX_EXPANSION),
            Numeric::Expansion,
        ),
        (
            "bf-max-filter-memory",
            DEFAULT_MAX_FILTER_MEMORY,
            raw::REDISMODULE_CONFIG_MEMORY,
            MIN_MAX_FILTER_MEMORY,
            i64::MAX,
            Numeric::MaxFilterMemory,
        ),
        (
            "bf-capacity-warning",
            DEFAULT_CAPACITY_WARNING,
            raw::REDISMODULE_CONFIG_DEFAULT,
            0,
            100,
            Numeric::CapacityWarning,
        ),
    ];
    for (setting, default, flags, min, max, which) in numerics {
        let callbacks = NumericConfig {
            get: Some(get_numeric),
            set: Some(set_numeric),
            privdata: which as usize,
        };
        let accepted = raw_api::register_numeric_config(
            ctx,
            &registered_name(setting, flags | extra),
            (default, min, max),
            flags | extra,
            callbacks,
        );
        if !accepted.map_err(no_api)? {
            return Err(format!("could not register {setting}"));
        }
    }
    let callbacks = EnumConfig {
        get: Some(get_layout),
        set: Some(set_layout),
        privdata: 0,
    };
    let accepted = raw_api::register_enum_config(
        ctx,
        &registered_name("bf-layout", extra),
        0,
        raw::REDISMODULE_CONFIG_DEFAULT | extra,
        &[(c"blocked", 0), (c"classic", 1)],
        callbacks,
    );
    if !accepted.map_err(no_api)? {
        return Err("could not register bf-layout".into());
    }
    crate::clock::register(ctx, extra)?;
    if !raw_api::load_configs(ctx).map_err(no_api)? {
        return Err("the bf settings in the server configuration are invalid".into());
    }
    Ok(())
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

/// Applies load-time arguments: `NAME VALUE` pairs, names case-insensitive.
pub fn apply_module_args(module_args: &[RedisString]) -> Result<(), String> {
    if !module_args.len().is_multiple_of(2) {
        return Err("module arguments come in NAME VALUE pairs".into());
    }
    for pair in module_args.chunks_exact(2) {
        let name = pair[0].to_string_lossy().to_ascii_lowercase();
        let value = pair[1].as_slice();
        let shown = String::from_utf8_lossy(value);
        match name.as_str() {
            "error_rate" | "bf-error-rate" => {
                let rate = check_error_rate(value).map_err(|m| format!("{name} {shown}: {m}"))?;
                store_error_rate(rate, value);
            }
            "initial_size" | "bf-initial-size" => {
                let n = number::parse_i64(value)
                    .filter(|n| (1..=MAX_CAPACITY as i64).contains(n))
                    .ok_or_else(|| {
                        format!("{name} {shown}: must be an integer in [1, {MAX_CAPACITY}]")
                    })?;
                INITIAL_SIZE.store(n, Ordering::Relaxed);
            }
            "expansion" | "bf-expansion-factor" => {
                let n = number::parse_i64(value)
                    .filter(|n| (0..=i64::from(MAX_EXPANSION)).contains(n))
                    .ok_or_else(|| {
                        format!("{name} {shown}: must be an integer in [0, {MAX_EXPANSION}]")
                    })?;
                EXPANSION.store(n, Ordering::Relaxed);
            }
            "bf-layout" => {
                let value = match value.to_ascii_lowercase().as_slice() {
                    b"blocked" => 0,
                    b"classic" => 1,
                    _ => return Err(format!("{name} {shown}: must be blocked or classic")),
                };
                LAYOUT.store(value, Ordering::Relaxed);
            }
            "bf-capacity-warning" => {
                let n = number::parse_i64(value)
                    .filter(|n| (0..=100).contains(n))
                    .ok_or_else(|| format!("{name} {shown}: must be a percentage, 0 to 100"))?;
                CAPACITY_WARNING.store(n, Ordering::Relaxed);
            }
            "bf-max-filter-memory" => {
                let n = parse_memory(value)
                    .filter(|&n| n >= MIN_MAX_FILTER_MEMORY)
                    .ok_or_else(|| format!("{name} {shown}: must be a memory size of at least {MIN_MAX_FILTER_MEMORY} bytes"))?;
                MAX_FILTER_MEMORY.store(n, Ordering::Relaxed);
            }
            _ => return Err(format!("unknown module argument '{name}'")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(check_error_rate(b"0.001"), Ok(0.001));
        assert_eq!(check_error_rate(b"0.5"), Ok(0.5));
        assert!(check_error_rate(b"0").is_err());
        assert!(check_error_rate(b"1").is_err());
        assert!(check_error_rate(b"abc").is_err());
    }
}

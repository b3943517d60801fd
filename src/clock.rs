//! The clock windowed filters expire by: the primary's milliseconds (`RedisModule_Milliseconds`).
//! Only a command running on the primary for a client reads it; a replica, a command from the
//! primary and AOF replay never do (they apply the explicit `BF.WINDOWADVANCE` the primary
//! propagated), so every copy holds the same slices whatever its own clock says.
//!
//! Builds with the cargo feature `test-clock` (the integration tests' module, never a release)
//! add a setting `bf-test-clock-offset-ms` (`CONFIG SET bf.bf-test-clock-offset-ms 5000` on
//! Redis 7), added to the clock, so tests move time forward without waiting on it. A production
//! build has no such setting: `CONFIG SET` refuses the name.

use redis_module::{raw, Context, ContextFlags};

/// Flags under which a command must not read the clock or expire anything: its outcome was
/// decided on the primary (or when the command first ran, for the AOF), and a replica must hold
/// what its primary holds.
pub const NO_CLOCK: ContextFlags = ContextFlags::REPLICATED
    .union(ContextFlags::LOADING)
    .union(ContextFlags::ASYNC_LOADING)
    .union(ContextFlags::SLAVE);

/// Whether a command under `flags` may read the clock and expire slices.
pub fn applies(flags: &ContextFlags) -> bool {
    !flags.intersects(NO_CLOCK)
}

/// The primary's time in milliseconds since the epoch (plus the test offset in test builds).
pub fn now_ms() -> u64 {
    // SAFETY: a plain call of the module API, filled before OnLoad, on the main thread.
    let ms = unsafe { raw::RedisModule_Milliseconds.map_or(0, |f| f()) };
    u64::try_from(ms)
        .unwrap_or(0)
        .saturating_add(test::offset())
}

/// Registers the test clock's setting where the build has it (before the settings load).
pub fn register(ctx: &Context, flags: u32) -> Result<(), String> {
    test::register(ctx, flags)
}

#[cfg(feature = "test-clock")]
mod test {
    use std::ffi::{c_char, c_longlong, c_void};
    use std::sync::atomic::{AtomicI64, Ordering};

    use redis_module::{raw, Context};

    use crate::raw_api::{self, NumericConfig};

    static OFFSET: AtomicI64 = AtomicI64::new(0);

    pub fn offset() -> u64 {
        OFFSET.load(Ordering::Relaxed) as u64
    }

    extern "C" fn get(_name: *const c_char, _privdata: *mut c_void) -> c_longlong {
        OFFSET.load(Ordering::Relaxed)
    }

    extern "C" fn set(
        _name: *const c_char,
        value: c_longlong,
        _privdata: *mut c_void,
        _err: *mut *mut raw::RedisModuleString,
    ) -> std::ffi::c_int {
        OFFSET.store(value, Ordering::Relaxed);
        raw::REDISMODULE_OK as std::ffi::c_int
    }

    pub fn register(ctx: &Context, flags: u32) -> Result<(), String> {
        let callbacks = NumericConfig {
            get: Some(get),
            set: Some(set),
            privdata: 0,
        };
        // Up to about 30 years ahead: far past any window, far from overflowing the clock.
        let max = 1_000_000_000_000;
        let accepted = raw_api::register_numeric_config(
            ctx,
            &crate::config::registered_name("bf-test-clock-offset-ms", flags),
            (0, 0, max),
            raw::REDISMODULE_CONFIG_DEFAULT | flags,
            callbacks,
        );
        match accepted {
            Ok(true) => Ok(()),
            _ => Err("could not register bf-test-clock-offset-ms".into()),
        }
    }
}

#[cfg(not(feature = "test-clock"))]
mod test {
    use redis_module::Context;

    pub fn offset() -> u64 {
        0
    }

    pub fn register(_ctx: &Context, _flags: u32) -> Result<(), String> {
        Ok(())
    }
}

/// Whether this build has the test clock (logged at load, so a test module is never mistaken
/// for a release).
pub const TEST_CLOCK: bool = cfg!(feature = "test-clock");

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

use crate::config::Setting;

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

/// The primary's time for a command (`now_ms`), or `None` where it must not read a clock
/// (a replica, a command from the primary, AOF replay).
pub fn read(ctx: &Context) -> Option<u64> {
    applies(&crate::raw_api::context_flags(ctx)).then(now_ms)
}

/// The clock's settings: the test offset where the build has it (never in a release).
pub static SETTINGS: &[&Setting] = test::SETTINGS;

#[cfg(feature = "test-clock")]
mod test {
    use crate::config::Setting;

    /// Added to the clock: up to about 30 years ahead, far past any window, far from
    /// overflowing the clock.
    pub static OFFSET: Setting = Setting::integer(
        "bf-test-clock-offset-ms",
        "the windowed filters' clock, moved ahead (test builds only)",
        0,
        0,
        1_000_000_000_000,
    );

    pub static SETTINGS: &[&Setting] = &[&OFFSET];

    pub fn offset() -> u64 {
        OFFSET.integer_value() as u64
    }
}

#[cfg(not(feature = "test-clock"))]
mod test {
    use crate::config::Setting;

    pub static SETTINGS: &[&Setting] = &[];

    pub fn offset() -> u64 {
        0
    }
}

/// Whether this build has the test clock (logged at load, so a test module is never mistaken
/// for a release).
pub const TEST_CLOCK: bool = cfg!(feature = "test-clock");

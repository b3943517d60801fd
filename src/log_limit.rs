//! A server-wide budget for the capacity warnings in the log. Every crossing of the warning
//! threshold is a keyspace event and is counted in `INFO bf`, but a client that fills many
//! tiny filters (or one filter with EXPANSION 1) crosses once per add: a line each would let
//! it fill the disk. At most [`LINES_PER_SECOND`] warnings are written in a second; the rest
//! are counted, and the next second's first warning is preceded by a line saying how many were
//! left out. Only the main thread logs warnings, but atomics keep this safe anyway.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use redis_module::Context;

/// Capacity-warning lines written per second, server-wide.
pub const LINES_PER_SECOND: u64 = 10;

/// The second (since the first warning) that `LINES` counts.
static WINDOW: AtomicU64 = AtomicU64::new(u64::MAX);
/// Warnings written in the current second.
static LINES: AtomicU64 = AtomicU64::new(0);
/// Warnings left out since the last line that reported them.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// Warnings left out since the server started (`INFO bf` `capacity_warnings_suppressed`).
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

fn second_now() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs()
}

/// Writes a capacity warning if this second's budget allows, else counts it as suppressed.
pub fn capacity_warning(ctx: &Context, message: &str) {
    let now = second_now();
    if WINDOW.swap(now, Ordering::Relaxed) != now {
        LINES.store(0, Ordering::Relaxed);
        let pending = PENDING.swap(0, Ordering::Relaxed);
        if pending > 0 {
            crate::log::warning(
                Some(ctx),
                &format!(
                    "layerbloom: {pending} capacity warnings were not logged (at most \
                     {LINES_PER_SECOND} a second are; INFO bf capacity_warnings_suppressed \
                     counts them all, the bf.capacity keyspace events report each)"
                ),
            );
        }
    }
    if LINES.fetch_add(1, Ordering::Relaxed) < LINES_PER_SECOND {
        crate::log::warning(Some(ctx), message);
    } else {
        PENDING.fetch_add(1, Ordering::Relaxed);
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Capacity warnings left out of the log since the server started.
pub fn suppressed() -> u64 {
    SUPPRESSED.load(Ordering::Relaxed)
}

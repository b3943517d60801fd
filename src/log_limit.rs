//! Server-wide budgets for the warnings a client can cause in the log: error rates lowered to
//! the maximum, refused COPY commands, values a client's RESTORE brought (refused or
//! repaired), internal errors; and each structure's own [`Budget`]s (its capacity warnings).
//! Every crossing of a warning threshold is a keyspace event and is counted in `INFO bf`, but a client that fills many tiny filters (or one filter
//! with EXPANSION 1) crosses once per add, and one that creates filters at an error rate of
//! 0.5 warns once per creation: a line each would let it fill the disk. At most
//! [`LINES_PER_SECOND`] warnings of each kind are written in a second; the rest are counted,
//! and the next second's first warning is preceded by a line saying how many were left out.
//! Only the main thread logs warnings, but atomics keep this safe anyway.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use redis_module::Context;

/// Lines of one kind of warning written per second, server-wide.
pub const LINES_PER_SECOND: u64 = 10;

/// The log budget of one kind of warning.
pub struct Budget {
    /// What the warnings are, for the line that reports the ones left out.
    what: &'static str,
    /// The second (since the first warning) that `lines` counts.
    window: AtomicU64,
    /// Warnings written in the current second.
    lines: AtomicU64,
    /// Warnings left out since the last line that reported them.
    pending: AtomicU64,
    /// Warnings left out since the server started.
    suppressed: AtomicU64,
}

impl Budget {
    /// A budget for warnings of `what` (as the line reporting those left out names them).
    pub const fn new(what: &'static str) -> Self {
        Budget {
            what,
            window: AtomicU64::new(u64::MAX),
            lines: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Warnings left out of the log since the server started.
    pub fn suppressed(&self) -> u64 {
        self.suppressed.load(Ordering::Relaxed)
    }

    /// Writes `message` if this second's budget allows, else counts it as left out.
    pub fn warning(&self, ctx: Option<&Context>, message: &str) {
        let now = second_now();
        if self.window.swap(now, Ordering::Relaxed) != now {
            self.lines.store(0, Ordering::Relaxed);
            let pending = self.pending.swap(0, Ordering::Relaxed);
            if pending > 0 {
                crate::log::warning(
                    ctx,
                    &format!(
                        "layerbloom: {pending} {} were not logged (at most {LINES_PER_SECOND} a \
                         second are)",
                        self.what
                    ),
                );
            }
        }
        if self.lines.fetch_add(1, Ordering::Relaxed) < LINES_PER_SECOND {
            crate::log::warning(ctx, message);
        } else {
            self.pending.fetch_add(1, Ordering::Relaxed);
            self.suppressed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

static ERROR_RATE: Budget = Budget::new("warnings of error rates above a quarter");
static COPY: Budget = Budget::new("warnings of refused COPY commands");
static INTERNAL: Budget = Budget::new("lines about internal errors (panics caught)");
static LOAD: Budget =
    Budget::new("warnings of values a client's RESTORE brought (refused, or items recounted)");

fn second_now() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs()
}

/// Writes a warning that an error rate was lowered to the maximum, within its own budget.
pub fn error_rate_warning(ctx: Option<&Context>, message: &str) {
    ERROR_RATE.warning(ctx, message);
}

/// Writes why a COPY was refused, within its own budget (the copy callback has no context).
pub fn copy_refused(message: &str) {
    COPY.warning(None, message);
}

/// Writes a line about a value a load brought (refused, or repaired), within its own budget
/// when a client's RESTORE caused it; a load from disk, the AOF or a primary writes every
/// line (their count follows what the server was given to load, not a client's say-so).
pub fn load_warning(from_client: bool, message: &str) {
    if from_client {
        LOAD.warning(None, message);
    } else {
        crate::log::warning(None, message);
    }
}

/// Writes a line about a caught panic within its own budget: if a client's input could cause
/// one (a bug), repeating it must not fill the disk.
pub fn internal_error(message: &str) {
    INTERNAL.warning(None, message);
}

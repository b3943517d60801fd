//! Replication and keyspace events of every write, in one place.
//!
//! A replica (and the AOF) must build a filter identical to the primary's whatever its own
//! settings and version, so a write is not replicated verbatim when its outcome depended on
//! this server's state. A filter created by a command is replicated as `BF.LOADCHUNK key 1
//! <header>`: the header of the new, empty filter pins every parameter, the layout and each
//! layer's geometry. Only the items that changed the filter are replicated (`BF.MADD`, or the
//! BF.ADD / BF.MADD itself when all its items changed an existing filter); an add that changed
//! nothing is not replicated at all. `BF.LOADCHUNK` is deterministic and goes
//! verbatim.
//!
//! Keyspace events (class `g`, generic: `notify-keyspace-events` must include `g` or `A`):
//! - `bf.reserve`: a filter was created (BF.RESERVE, an add to a missing key, a BF.LOADCHUNK
//!   header);
//! - `bf.add`: an add changed the filter (at least one item was new);
//! - `bf.loadchunk`: a BF.LOADCHUNK was applied;
//! - `bf.capacity`: an add took the newest layer to the capacity-warning threshold
//!   (`bf-capacity-warning`, 70% by default), once per layer; the server log gets a warning
//!   naming the key;
//! - `bf.full`: a non-scaling filter refused an item.
//!
//! "Once per layer" needs no stored state: a layer's items only grow, so the add that takes
//! them from under the threshold to at or over it happens once in the layer's life. Nothing is
//! persisted: after a restart a layer that had crossed is still past its mark and does not
//! warn again, and AOF replay at startup (the server is loading) does not re-issue warnings for
//! crossings that were reported when the commands first ran. A replica replaying its primary's
//! adds crosses too, and logs and notifies for its own copy. Raising the threshold above a
//! layer's fill makes that layer warn again when it reaches the new threshold; lowering it
//! below a layer's fill warns only from the next layer.

use layerbloom_filter::health::{self, LoadMark};
use layerbloom_filter::{FilterError, ScalableFilter};
use redis_module::{Context, ContextFlags, NotifyEvent, RedisString};

use crate::config;
use crate::log;
use crate::stats::{self, Figures};

/// A filter's state before a write, to tell what the write changed.
#[derive(Debug, Clone, Copy)]
pub struct Before {
    mark: LoadMark,
    figures: Figures,
}

impl Before {
    pub fn of(filter: &ScalableFilter) -> Self {
        Before {
            mark: LoadMark::of(filter),
            figures: Figures::of(filter),
        }
    }
}

/// What a write command did to its key.
pub enum Change<'a> {
    /// A filter was created empty (BF.RESERVE); the header of the new filter.
    Reserved(&'a [u8]),
    /// Items were added; `created` holds the new filter's header if the command created it,
    /// `refused` the error that ended the command, if one did. `verbatim`: the command's
    /// arguments are the key and exactly the items that changed the filter, so it can be
    /// replicated as it came (cheaper than building a BF.MADD).
    Added {
        created: Option<&'a [u8]>,
        items: &'a [&'a [u8]],
        verbatim: bool,
        filter: &'a ScalableFilter,
        before: Before,
        refused: Option<&'a FilterError>,
    },
    /// A BF.LOADCHUNK was applied; `created` when it was the header.
    Loaded { created: bool },
}

/// Replicates and notifies a write.
pub fn after_write(ctx: &Context, key: &RedisString, change: Change) {
    match change {
        Change::Reserved(header) => {
            replicate_creation(ctx, key, header);
            ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
        }
        Change::Added {
            created,
            items,
            verbatim,
            filter,
            before,
            refused,
        } => {
            if let Some(header) = created {
                replicate_creation(ctx, key, header);
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
            }
            if verbatim && !items.is_empty() {
                ctx.replicate_verbatim();
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.add", key);
            } else if !items.is_empty() {
                let mut args: Vec<&[u8]> = Vec::with_capacity(items.len() + 1);
                args.push(key.as_slice());
                args.extend_from_slice(items);
                ctx.replicate("BF.MADD", args.as_slice());
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.add", key);
            }
            stats::changed(before.figures, filter);
            capacity_warnings(ctx, key, before.mark, filter);
            if matches!(refused, Some(FilterError::Full)) {
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.full", key);
            }
        }
        Change::Loaded { created } => {
            ctx.replicate_verbatim();
            if created {
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
            }
            ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.loadchunk", key);
        }
    }
}

fn replicate_creation(ctx: &Context, key: &RedisString, header: &[u8]) {
    let args: [&[u8]; 3] = [key.as_slice(), b"1", header];
    ctx.replicate("BF.LOADCHUNK", &args[..]);
}

/// At most this many bytes of a key name go into a log line.
const LOGGED_KEY_BYTES: usize = 200;

/// Logs and notifies every layer the write took to the warning threshold.
fn capacity_warnings(ctx: &Context, key: &RedisString, before: LoadMark, filter: &ScalableFilter) {
    let percent = config::capacity_warning();
    let crossed = health::crossings(before, filter, percent);
    if crossed.is_empty() || ctx.get_flags().contains(ContextFlags::LOADING) {
        return;
    }
    let name = key.as_slice();
    let shown = String::from_utf8_lossy(&name[..name.len().min(LOGGED_KEY_BYTES)]);
    let more = if name.len() > LOGGED_KEY_BYTES {
        "..."
    } else {
        ""
    };
    let next = match filter.expansion() {
        Some(e) => format!("when it is full the filter adds a layer {e} times larger"),
        None => "the filter is non-scaling: when it is full it refuses new items".to_string(),
    };
    for c in crossed {
        log::warning(
            Some(ctx),
            &format!(
                "layerbloom: Bloom filter '{shown}{more}' reached {percent}% of its capacity: \
             layer {} of {} holds {} of {} items (bf-capacity-warning {percent}); {next}",
                c.layer + 1,
                filter.layer_count(),
                c.items,
                c.capacity,
            ),
        );
        ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.capacity", key);
        stats::warned();
    }
}

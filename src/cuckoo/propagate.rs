//! Replication and keyspace events of every cuckoo write, in one place.
//!
//! See [`after_write`] for the events and [`Change`] for how each write is replicated.

use layerbloom_filter::cuckoo::health::{self, LoadMark};
use layerbloom_filter::cuckoo::AnyFilter;
use redis_module::{Context, ContextFlags, RedisString};

use crate::config;
use crate::cuckoo::stats;
use crate::keys::notify;

/// What a CF write did to its key. CF writes are deterministic (no setting changes their
/// outcome, and evictions depend only on the item and the filter), so a command replicates
/// verbatim, except when the filter was created (replicated as its `CF.LOADCHUNK` header,
/// which pins every setting and reads the same in RedisBloom's syntax, which replicas and
/// AOF replay use) or an add stopped before its last item (a memory limit that a replica does
/// not apply): then only the items that changed the filter are sent, as `CF.INSERT key
/// NOCREATE ITEMS ...`, which has the same effect on the same filter.
pub enum Change<'a> {
    /// A filter was created empty by CF.RESERVE; the new filter's header.
    Reserved(&'a [u8]),
    /// Items were offered: `changed[i]` tells whether `items[i]` was added; items past
    /// `changed` were not processed. `created`: the header of a filter the command created.
    /// `full`: some item did not fit a non-scaling filter. `before`: the filter's load
    /// before the command, for the capacity warning.
    Added {
        created: Option<&'a [u8]>,
        items: &'a [RedisString],
        changed: &'a [bool],
        full: bool,
        filter: &'a AnyFilter,
        before: LoadMark,
    },
    /// A CF.DEL that removed a fingerprint.
    Deleted,
    /// CF.COMPACT.
    Compacted,
    /// A CF.LOADCHUNK was applied; `created` when it was the header.
    Loaded { created: bool },
}

/// Replicates and notifies a CF write. Events (class `g`): `cf.reserve` (a filter was
/// created), `cf.add`, `cf.del`, `cf.compact`, `cf.loadchunk`, `cf.full` (an item did not
/// fit a non-scaling filter), `cf.capacity` (an add took the newest sub-filter's load to
/// `bf-capacity-warning` percent: once per crossing, see `capacity_warnings`).
pub fn after_write(ctx: &Context, key: &RedisString, change: Change) {
    match change {
        Change::Reserved(header) => {
            replicate_creation(ctx, key, header);
            notify(ctx, c"cf.reserve", key);
        }
        Change::Added {
            created,
            items,
            changed,
            full,
            filter,
            before,
        } => {
            if let Some(header) = created {
                replicate_creation(ctx, key, header);
                notify(ctx, c"cf.reserve", key);
            }
            if changed.iter().any(|&c| c) {
                if created.is_none() && changed.len() == items.len() {
                    ctx.replicate_verbatim();
                } else {
                    let mut args: Vec<&[u8]> = Vec::with_capacity(items.len() + 3);
                    args.extend([key.as_slice(), b"NOCREATE", b"ITEMS"]);
                    args.extend(
                        items
                            .iter()
                            .zip(changed)
                            .filter(|(_, &c)| c)
                            .map(|(item, _)| item.as_slice()),
                    );
                    ctx.replicate("CF.INSERT", &args[..]);
                }
                notify(ctx, c"cf.add", key);
            }
            capacity_warnings(ctx, key, before, filter);
            if full {
                notify(ctx, c"cf.full", key);
            }
        }
        Change::Deleted => {
            ctx.replicate_verbatim();
            notify(ctx, c"cf.del", key);
        }
        Change::Compacted => {
            ctx.replicate_verbatim();
            notify(ctx, c"cf.compact", key);
        }
        Change::Loaded { created } => {
            ctx.replicate_verbatim();
            if created {
                notify(ctx, c"cf.reserve", key);
            }
            notify(ctx, c"cf.loadchunk", key);
        }
    }
}

/// Logs and notifies every sub-filter an add took to the warning threshold. As for Bloom
/// filters, nothing is stored: the crossing is read from the load before and after the add,
/// so it depends only on the filter and the setting, a replica replaying the add crosses with
/// its own copy, and AOF replay at startup repeats no warning. Unlike a Bloom layer's, a
/// sub-filter's load falls with deletes: one taken back under the mark warns again when an
/// add reaches it (another crossing).
fn capacity_warnings(ctx: &Context, key: &RedisString, before: LoadMark, filter: &AnyFilter) {
    let percent = config::capacity_warning();
    let crossed = health::crossings(before, filter, percent);
    if crossed.is_empty() || ctx.get_flags().contains(ContextFlags::LOADING) {
        return;
    }
    let shown = crate::log::key_name(key.as_slice());
    let next = match filter.params().expansion {
        0 => "the filter is non-scaling: when it is full it refuses new items".to_string(),
        e => format!("when an item finds no room the filter adds a sub-filter {e} times larger"),
    };
    for c in crossed {
        stats::CAPACITY_LOG.warning(
            Some(ctx),
            &format!(
                "layerbloom: cuckoo filter '{shown}' reached {percent}% load: sub-filter {} of \
                 {} has {} of {} slots occupied (bf-capacity-warning {percent}); {next}",
                c.sub_filter + 1,
                filter.sub_filter_count(),
                c.occupied,
                c.slots,
            ),
        );
        notify(ctx, c"cf.capacity", key);
        stats::warned();
    }
}

fn replicate_creation(ctx: &Context, key: &RedisString, header: &[u8]) {
    let args: [&[u8]; 3] = [key.as_slice(), b"1", header];
    ctx.replicate("CF.LOADCHUNK", &args[..]);
}

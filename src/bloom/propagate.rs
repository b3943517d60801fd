//! Replication and keyspace events of every Bloom write, in one place: the plain filter's
//! and the windowed filter's, its slices' expiry included.
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
//! - `bf.merge`: BF.MERGE stored the union of its sources in its destination key;
//! - `bf.capacity`: an add took the newest layer to the capacity-warning threshold
//!   (`bf-capacity-warning`, 70% by default), once per layer; the server log gets a warning
//!   naming the key (at most `log_limit::LINES_PER_SECOND` such lines a second server-wide,
//!   the rest counted in `INFO bf`; the event is sent for every crossing);
//! - `bf.full`: a non-scaling filter refused an item;
//! - `bf.expire`: a windowed filter dropped a slice that left its window (one event per
//!   slice; on the primary at the write that found it due or at BF.WINDOWADVANCE, on a
//!   replica and in AOF replay at the propagated BF.WINDOWADVANCE).
//!
//! An advance of a windowed filter (`window::advance_to`) is replicated as `BF.WINDOWADVANCE
//! key <slice>` before the write that needed it (`after_advance`), so a replica and the AOF
//! hold the same slices, ids and head; Redis keeps the two in order.
//!
//! "Once per layer" needs no stored state: a layer's items only grow, so the add that takes
//! them from under the threshold to at or over it happens once in the layer's life. Nothing is
//! persisted: after a restart a layer that had crossed is still past its mark and does not
//! warn again, and AOF replay at startup (the server is loading) does not re-issue warnings for
//! crossings that were reported when the commands first ran. A replica replaying its primary's
//! adds crosses too, and logs and notifies for its own copy. Raising the threshold above a
//! layer's fill makes that layer warn again when it reaches the new threshold; lowering it
//! below a layer's fill warns only from the next layer.

use layerbloom_filter::bloom::health::Load;
use layerbloom_filter::{FilterError, ScalableFilter};
use redis_module::{Context, ContextFlags, RedisString};

use crate::bloom::stats;
use crate::config;
use crate::keys::notify;
use crate::raw_api;

/// A filter's state before a write, to tell what the write changed.
#[derive(Debug, Clone, Copy)]
pub struct Before {
    load: Load,
}

impl Before {
    pub fn of(filter: &ScalableFilter) -> Self {
        Before {
            load: Load::of(filter),
        }
    }

    /// The filter's counts before the write.
    pub fn load(&self) -> &Load {
        &self.load
    }
}

/// What a write command did to its key.
pub enum Change<'a> {
    /// A filter was created empty (BF.RESERVE); the header of the new filter.
    Reserved(&'a [u8]),
    /// Items were added: `results[i]` is the outcome of `items[i]` (`true`: it changed the
    /// filter); items past the results were not processed. `created` holds the new filter's
    /// header if the command created it. `verbatim`: the command's arguments are the key and
    /// the items, so when every item changed an existing filter it replicates as it came
    /// (cheaper than building a BF.MADD).
    Added {
        created: Option<&'a [u8]>,
        items: &'a [RedisString],
        results: &'a [Result<bool, FilterError>],
        verbatim: bool,
        filter: &'a ScalableFilter,
        before: Before,
    },
    /// A BF.LOADCHUNK was applied; `created` when it was the header.
    Loaded { created: bool },
    /// BF.MERGE stored a union under the key. Replicated verbatim: the union depends only on
    /// the sources, which the replica (and the AOF) hold identically, not on any setting (the
    /// limits that could refuse it do not apply to replicated and replayed commands).
    Merged,
}

/// Replicates and notifies a write.
pub fn after_write(ctx: &Context, key: &RedisString, change: Change) {
    match change {
        Change::Reserved(header) => {
            replicate_creation(ctx, key, header);
            notify(ctx, c"bf.reserve", key);
        }
        Change::Added {
            created,
            items,
            results,
            verbatim,
            filter,
            before,
        } => {
            replicate_adds(
                ctx,
                key,
                WindowAdd {
                    created,
                    items,
                    results,
                    verbatim,
                },
            );
            let after = Load::of(filter);
            stats::changed(&before.load, &after, filter);
            capacity_warnings(ctx, key, &before.load, &after, filter);
            notify_full(ctx, key, results);
        }
        Change::Loaded { created } => {
            ctx.replicate_verbatim();
            if created {
                notify(ctx, c"bf.reserve", key);
            }
            notify(ctx, c"bf.loadchunk", key);
        }
        Change::Merged => {
            ctx.replicate_verbatim();
            notify(ctx, c"bf.merge", key);
        }
    }
}

/// An add to a windowed filter (the fields of `Change::Added` without the plain filter's).
/// An advance the add needed was replicated before it (`after_advance`).
pub struct WindowAdd<'a> {
    pub created: Option<&'a [u8]>,
    pub items: &'a [RedisString],
    pub results: &'a [Result<bool, FilterError>],
    pub verbatim: bool,
}

/// Replicates and notifies an add to a windowed filter: as a plain filter's add (creation as
/// its `BF.LOADCHUNK` header, then the items that changed it), without capacity warnings.
pub fn after_window_add(ctx: &Context, key: &RedisString, add: WindowAdd) {
    let results = add.results;
    replicate_adds(ctx, key, add);
    notify_full(ctx, key, results);
}

/// The replication and the `bf.reserve` / `bf.add` events of an add, of either
/// kind of filter.
fn replicate_adds(ctx: &Context, key: &RedisString, add: WindowAdd) {
    let WindowAdd {
        created,
        items,
        results,
        verbatim,
    } = add;
    if let Some(header) = created {
        replicate_creation(ctx, key, header);
        notify(ctx, c"bf.reserve", key);
    }
    let changed = |r: &Result<bool, FilterError>| matches!(r, Ok(true));
    let all_changed = results.len() == items.len() && results.iter().all(changed);
    if verbatim && all_changed && created.is_none() {
        ctx.replicate_verbatim();
        notify(ctx, c"bf.add", key);
    } else if results.iter().any(changed) {
        // The command's own strings, which Redis keeps a reference to: copying each
        // item into a new string cost more than adding it.
        let mut argv = raw_api::Argv::with_capacity(items.len() + 1);
        argv.push(key);
        if all_changed {
            argv.extend(items);
        } else {
            for (item, _) in items.iter().zip(results).filter(|(_, r)| changed(r)) {
                argv.push(item);
            }
        }
        raw_api::replicate(ctx, c"BF.MADD", &argv);
        notify(ctx, c"bf.add", key);
    }
}

/// `bf.full` when an add ended on a non-scaling filter's refusal (after every other event of
/// the add).
fn notify_full(ctx: &Context, key: &RedisString, results: &[Result<bool, FilterError>]) {
    if matches!(results.last(), Some(Err(FilterError::Full))) {
        notify(ctx, c"bf.full", key);
    }
}

/// A windowed filter moved to slice `current`, dropping `expired` slices that had left its
/// window: replicated as `BF.WINDOWADVANCE key current`, and `bf.expire` per slice dropped.
pub fn after_advance(ctx: &Context, key: &RedisString, current: u64, expired: u32) {
    let slice = current.to_string();
    ctx.replicate("BF.WINDOWADVANCE", &[key.as_slice(), slice.as_bytes()][..]);
    for _ in 0..expired {
        notify(ctx, c"bf.expire", key);
    }
    stats::slices_expired(expired);
}

fn replicate_creation(ctx: &Context, key: &RedisString, header: &[u8]) {
    let args: [&[u8]; 3] = [key.as_slice(), b"1", header];
    ctx.replicate("BF.LOADCHUNK", &args[..]);
}

/// Logs and notifies every layer the write took to the warning threshold.
fn capacity_warnings(
    ctx: &Context,
    key: &RedisString,
    before: &Load,
    after: &Load,
    filter: &ScalableFilter,
) {
    let percent = config::capacity_warning();
    let crossed = before.crossings(after, filter, percent);
    if crossed.is_empty() || ctx.get_flags().contains(ContextFlags::LOADING) {
        return;
    }
    let shown = crate::log::key_name(key.as_slice());
    let next = match filter.expansion() {
        Some(e) => format!("when it is full the filter adds a layer {e} times larger"),
        None => "the filter is non-scaling: when it is full it refuses new items".to_string(),
    };
    for c in crossed {
        stats::CAPACITY_LOG.warning(
            Some(ctx),
            &format!(
                "layerbloom: Bloom filter '{shown}' reached {percent}% of its capacity: \
             layer {} of {} holds {} of {} items (bf-capacity-warning {percent}); {next}",
                c.layer + 1,
                filter.layer_count(),
                c.items,
                c.capacity,
            ),
        );
        notify(ctx, c"bf.capacity", key);
        stats::warned();
    }
}

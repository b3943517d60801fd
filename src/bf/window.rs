//! Windowed Bloom filters (`WINDOW ms [SLICES n]`) in the BF commands: the value of a BF key
//! is either kind ([`Value`]), and each handler of `handlers.rs` answers for both.
//!
//! Expiry happens by the primary's clock (`clock.rs`), lazily, and is replicated explicitly:
//! - A write (BF.ADD, BF.MADD, BF.INSERT) on the primary first moves the filter to the current
//!   slice (`advance_to`), which frees the slices that left the window, and propagates that as
//!   `BF.WINDOWADVANCE key <slice>` before its own effect, so a replica and the AOF hold the
//!   same slices, ids and head. Each slice dropped raises the keyspace event `bf.expire`.
//! - A read (BF.EXISTS, BF.MEXISTS, BF.CARD, BF.INFO) never writes: on the primary it answers
//!   by the clock, from the slices live now, without dropping the others (a read-only command
//!   that replicated would break `CLIENT PAUSE WRITE`, which failovers rely on, and read-only
//!   scripts). Their memory is returned at the next write, or by `BF.WINDOWADVANCE key`.
//! - On a replica, for commands from the primary and during AOF replay nothing reads a clock:
//!   reads answer from the slices held, which are the primary's as of its last advance. A
//!   replica may so remember an item longer than its primary (until the primary's next write
//!   or BF.WINDOWADVANCE of that key reaches it), never shorter.
//!
//! `BF.WINDOWADVANCE key [slice]` is the propagated form and safe for clients: from a client
//! on the primary the slice may not be later than the clock's (omitted: the clock's), so it
//! only does what the next access would have done.

use std::sync::atomic::{AtomicI64, Ordering};

use layerbloom_filter::bloom::health;
use layerbloom_filter::window::{WindowSpec, WindowedFilter};
use layerbloom_filter::{FilterSpec, ScalableFilter};
use redis_module::key::RedisKeyWritable;
use redis_module::{Context, ContextFlags, RedisString};

use crate::bf::args::Window;
use crate::clock;
use crate::datatype::BLOOM_TYPE;
use crate::datatype_window::WINDOW_TYPE;
use crate::dispatch::CommandResult;
use crate::error::BfError;
use crate::keys;
use crate::memory::Limits;
use crate::number;
use crate::propagate;
use crate::reply::Reply;

/// The value under a BF key, opened for reading.
pub enum Value<'a> {
    Plain(&'a ScalableFilter),
    Windowed(&'a WindowedFilter),
}

/// The value under a BF key, opened for writing.
pub enum ValueMut<'a> {
    Plain(&'a mut ScalableFilter),
    Windowed(&'a mut WindowedFilter),
}

/// The filter of either kind under a key opened for reading; `None` when the key is missing.
/// Plain filters are asked for first: they are most keys.
pub fn read(key: &keys::ReadKey) -> Result<Option<Value<'_>>, BfError> {
    match keys::read::<ScalableFilter>(key, &BLOOM_TYPE) {
        Err(BfError::WrongType) => {
            Ok(keys::read::<WindowedFilter>(key, &WINDOW_TYPE)?.map(Value::Windowed))
        }
        other => Ok(other?.map(Value::Plain)),
    }
}

/// The filter of either kind under a key opened for writing; `None` when the key is missing.
pub fn write(key: &RedisKeyWritable) -> Result<Option<ValueMut<'_>>, BfError> {
    match keys::write::<ScalableFilter>(key, &BLOOM_TYPE) {
        Err(BfError::WrongType) => {
            Ok(keys::write::<WindowedFilter>(key, &WINDOW_TYPE)?.map(ValueMut::Windowed))
        }
        other => Ok(other?.map(ValueMut::Plain)),
    }
}

/// Stores a new windowed filter under an empty key and returns it.
pub fn store(
    key: &RedisKeyWritable,
    filter: WindowedFilter,
) -> Result<&mut WindowedFilter, BfError> {
    let stored = keys::store(key, &WINDOW_TYPE, filter)?;
    entered();
    Ok(stored)
}

/// The slice the primary's clock is in for `filter`, or `None` where no clock is read (a
/// replica, a command from the primary, AOF replay).
pub fn clock_slice(ctx: &Context, filter: &WindowedFilter) -> Option<u64> {
    clock::applies(&crate::raw_api::context_flags(ctx)).then(|| filter.slice_of(clock::now_ms()))
}

/// The slices a read answers from: those live at `at` (the clock's slice), or every slice
/// held where no clock is read.
pub fn live(
    filter: &WindowedFilter,
    at: Option<u64>,
) -> impl Iterator<Item = (u64, &ScalableFilter)> + '_ {
    let oldest = at.map_or(0, |c| c.saturating_sub(u64::from(filter.slices())));
    filter.slice_filters().filter(move |&(id, _)| id >= oldest)
}

/// Items added to the live slices (an estimate of the window's: an item added in two slices
/// counts twice).
pub fn items(filter: &WindowedFilter, at: Option<u64>) -> u64 {
    live(filter, at).fold(0u64, |sum, (_, f)| sum.saturating_add(f.items()))
}

/// Whether each item answers present in a read.
pub fn contains_many(filter: &WindowedFilter, items: &[&[u8]], at: Option<u64>) -> Vec<bool> {
    match at {
        Some(current) => filter.contains_many_at(items, current),
        None => filter.contains_many(items),
    }
}

/// Whether an item answers present in a read.
pub fn contains(filter: &WindowedFilter, item: &[u8], at: Option<u64>) -> bool {
    match at {
        Some(current) => filter.contains_at(item, current),
        None => filter.contains(item),
    }
}

/// Creates a windowed filter under an empty key, at the primary's time; returns it with the
/// header that rebuilds it (what the creation replicates as).
pub fn create<'k>(
    key: &'k RedisKeyWritable,
    spec: FilterSpec,
    window: Window,
    flags: &ContextFlags,
) -> Result<(&'k mut WindowedFilter, Vec<u8>), BfError> {
    let spec = WindowSpec {
        window_ms: window.window_ms,
        slices: window.slices,
        filter: spec,
    };
    let limits = Limits::for_creation(flags, crate::config::max_filter_bytes(flags));
    // Creations replicate as their header, which carries the origin; a creating command can
    // reach a replica or the AOF only from a build that replicated it as sent, and then the
    // local clock is the only one there is.
    let filter = WindowedFilter::new(spec, clock::now_ms(), limits.bytes())
        .map_err(|e| limits.create_error(e))?;
    let header = crate::datatype_window::creation_header(&filter);
    Ok((store(key, filter)?, header))
}

/// On the primary, moves a filter about to be written to the clock's slice, replicating the
/// move. Returns the slices dropped.
pub fn expire_due(ctx: &Context, key: &RedisString, filter: &mut WindowedFilter) -> u32 {
    match clock_slice(ctx, filter) {
        Some(current) => advance_to(ctx, key, filter, current),
        None => 0,
    }
}

/// `expire_due` by a time the caller read once (a command that decided by it must advance by
/// it: the clock may pass a slice boundary between two reads). Returns the slices dropped.
pub fn expire_at(
    ctx: &Context,
    key: &RedisString,
    filter: &mut WindowedFilter,
    now_ms: u64,
) -> u32 {
    advance_to(ctx, key, filter, filter.slice_of(now_ms))
}

/// Moves `filter` to slice `current` if that changes anything: frees what left the window,
/// replicates `BF.WINDOWADVANCE key current` and raises `bf.expire` per slice dropped.
fn advance_to(ctx: &Context, key: &RedisString, filter: &mut WindowedFilter, current: u64) -> u32 {
    if !filter.due(current) {
        return 0;
    }
    let advance = filter.advance_to(current);
    let slice = current.to_string();
    ctx.replicate("BF.WINDOWADVANCE", &[key.as_slice(), slice.as_bytes()][..]);
    for _ in 0..advance.expired {
        propagate::notify(ctx, c"bf.expire", key);
    }
    SLICES_EXPIRED.fetch_add(i64::from(advance.expired), Ordering::Relaxed);
    advance.expired
}

/// BF.ADD / BF.MADD / BF.INSERT on a windowed filter: expires what is due, adds into the head
/// slice, replies as for a plain filter and replicates. `created`: the header of a filter the
/// command created.
pub fn add_items(
    ctx: &Context,
    key_name: &RedisString,
    filter: &mut WindowedFilter,
    created: Option<&[u8]>,
    (items, item_args): (&[&[u8]], &[RedisString]),
    multi: bool,
    verbatim: bool,
) -> CommandResult {
    let flags = crate::raw_api::context_flags(ctx);
    // Replicated before the add's own command, which Redis keeps in order (both through
    // `RedisModule_Replicate` or `ReplicateVerbatim`).
    if created.is_none() {
        expire_due(ctx, key_name, filter);
    }
    let limits = if filter.may_allocate(items.len()) {
        Limits::for_window_add(&flags, filter.memory_usage())
    } else {
        Limits::NONE
    };
    let outcomes = if let [item] = items {
        vec![filter.add_detailed(item, limits.bytes())]
    } else {
        filter.add_many_detailed(items, limits.bytes())
    };
    let reply = Reply::new(ctx);
    if multi {
        reply.array(outcomes.len());
    }
    // The reply says whether the item was new to the window; replication follows what
    // changed the filter: an item held only by an older slice is renewed into the head slice,
    // and a replica must renew it too.
    for outcome in &outcomes {
        match outcome {
            Ok(added) => reply.boolean(!added.in_window),
            Err(e) => reply.error(&limits.add_error(e.clone())),
        }
    }
    let results: Vec<_> = outcomes
        .into_iter()
        .map(|outcome| outcome.map(|added| added.changed))
        .collect();
    propagate::after_window_add(
        ctx,
        key_name,
        propagate::WindowAdd {
            created,
            items: item_args,
            results: &results,
            verbatim,
        },
    );
    Ok(())
}

/// `BF.WINDOWADVANCE key [slice]`: replies the number of slices dropped.
pub fn advance(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let asked = match args.get(2) {
        Some(arg) => Some(
            number::parse_i64(arg.as_slice())
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(BfError::BadSlice)?,
        ),
        None => None,
    };
    let key = ctx.open_key_writable(&args[1]);
    let filter = match write(&key)? {
        Some(ValueMut::Windowed(f)) => f,
        Some(ValueMut::Plain(_)) => return Err(BfError::NotWindowed),
        None => return Err(BfError::NotFound),
    };
    let target = match (clock_slice(ctx, filter), asked) {
        (Some(now), None) => now,
        (Some(now), Some(slice)) if slice <= now => slice,
        (Some(_), Some(_)) => return Err(BfError::SliceInFuture),
        (None, Some(slice)) => slice,
        // Without a clock (a replica's own client, AOF replay) only an explicit slice can be
        // applied; what the primary propagates always has one.
        (None, None) => return Err(BfError::NoSliceWithoutClock),
    };
    let expired = advance_to(ctx, &args[1], filter, target);
    Reply::new(ctx).int(i64::from(expired));
    Ok(())
}

/// BF.INFO's figures of a windowed filter, as a read sees it.
pub struct InfoView<'a> {
    pub filter: &'a WindowedFilter,
    /// The clock's slice (primary) or `None` (the slices held are the answer).
    pub at: Option<u64>,
}

impl InfoView<'_> {
    /// Layers of the live slices.
    pub fn layers(&self) -> u64 {
        live(self.filter, self.at)
            .map(|(_, f)| f.layer_count() as u64)
            .sum()
    }

    pub fn items(&self) -> u64 {
        items(self.filter, self.at)
    }

    /// The newest live slice's newest layer's fill (0 when no slice holds anything).
    pub fn fill_ratio(&self) -> f64 {
        live(self.filter, self.at)
            .last()
            .and_then(|(_, f)| f.layer_summaries().last().map(health::fill_ratio))
            .unwrap_or(0.0)
    }

    /// The live slices' union: one minus the chance that every slice answers absent.
    pub fn estimated_fpr(&self) -> f64 {
        let absent =
            live(self.filter, self.at).fold(1.0, |p, (_, f)| p * (1.0 - health::estimated_fpr(f)));
        1.0 - absent
    }

    /// The distinct items of the live slices' bits, summed (an item in two slices counts
    /// twice).
    pub fn estimated_distinct(&self) -> u64 {
        live(self.filter, self.at).fold(0u64, |sum, (_, f)| {
            sum.saturating_add(health::estimated_distinct(f))
        })
    }

    /// The age in milliseconds of the oldest live slice: to the primary's clock, or on a
    /// replica (which reads no clock) to the start of the newest slice it holds. `None` when
    /// no slice holds anything.
    pub fn oldest_age_ms(&self) -> Option<u64> {
        let (oldest, _) = live(self.filter, self.at).next()?;
        let now = match self.at {
            Some(_) => clock::now_ms(),
            None => self.filter.slice_start_ms(self.filter.head()),
        };
        Some(now.saturating_sub(self.filter.slice_start_ms(oldest)))
    }

    /// The items of each generation of the window, oldest first: `slices + 1` counts, from
    /// the slice `slices` before the current one (the head, on a replica) to it; generations
    /// before the filter's origin, and slices never written, count 0.
    pub fn slice_items(&self) -> Vec<u64> {
        let newest = self.at.unwrap_or(0).max(self.filter.head());
        let span = u64::from(self.filter.slices());
        let mut counts = vec![0u64; span as usize + 1];
        for (id, f) in live(self.filter, Some(newest)) {
            // `id` is within `newest - span ..= newest`: its place counts back from the end.
            if let Some(back) = newest.checked_sub(id).filter(|&b| b <= span) {
                counts[(span - back) as usize] = f.items();
            }
        }
        counts
    }
}

static WINDOWED_FILTERS: AtomicI64 = AtomicI64::new(0);
static SLICES_EXPIRED: AtomicI64 = AtomicI64::new(0);

/// A windowed filter entered the keyspace (created, loaded, copied).
pub fn entered() {
    WINDOWED_FILTERS.fetch_add(1, Ordering::Relaxed);
}

/// A windowed filter is being freed (on the main thread or Redis's lazy-free thread).
pub fn freed() {
    WINDOWED_FILTERS.fetch_sub(1, Ordering::Relaxed);
}

/// `INFO bf` fields of windowed filters.
pub fn info_fields() -> [(&'static str, String); 2] {
    [
        (
            "windowed_filters",
            WINDOWED_FILTERS.load(Ordering::Relaxed).to_string(),
        ),
        (
            "window_slices_expired",
            SLICES_EXPIRED.load(Ordering::Relaxed).to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter() -> WindowedFilter {
        let spec = WindowSpec {
            window_ms: 400,
            slices: 4,
            filter: FilterSpec::new(1000, 0.01, 2),
        };
        WindowedFilter::new(spec, 0, u64::MAX).unwrap()
    }

    #[test]
    fn a_read_counts_the_generations_live_at_its_slice_oldest_first() {
        let mut f = filter();
        f.add(b"a", u64::MAX).unwrap();
        f.advance_to(2);
        let added = f.add_many(&[b"b", b"c"], u64::MAX);
        assert_eq!(added, [Ok(true), Ok(true)]);
        let view = |at| InfoView { filter: &f, at };
        assert_eq!(view(Some(2)).slice_items(), [0, 0, 1, 0, 2]);
        assert_eq!(
            view(None).slice_items(),
            [0, 0, 1, 0, 2],
            "without a clock, back from the head"
        );
        // By slice 5 the first slice has left the window, though it is still held.
        assert_eq!(view(Some(5)).slice_items(), [0, 2, 0, 0, 0]);
        assert_eq!((items(&f, Some(5)), items(&f, None)), (2, 3));
        assert_eq!((view(Some(5)).layers(), view(None).layers()), (1, 2));
        assert!(!contains(&f, b"a", Some(5)) && contains(&f, b"a", None));
        assert_eq!(
            contains_many(&f, &[b"a", b"b"], Some(5)),
            [false, true],
            "the batch agrees"
        );
        assert_eq!(view(Some(7)).slice_items(), [0; 5]);
        assert_eq!(view(Some(7)).oldest_age_ms(), None);
        assert_eq!(view(Some(7)).estimated_fpr(), 0.0);
    }
}

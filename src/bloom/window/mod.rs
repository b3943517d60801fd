//! Windowed Bloom filters (`WINDOW ms [SLICES n]`) in the BF commands: their creation, their
//! adds and their expiry, in one place ([`advance_to`]); what a read sees is the core's
//! (`layerbloom_filter::window::view`), read at the primary's clock (`read_view`); the type
//! and its callbacks are `datatype.rs`. The value of a BF key is either kind
//! (`bloom::value`), and each handler of `handlers.rs` answers for both.
//!
//! Expiry happens by the primary's clock (`clock.rs`), lazily, and is replicated explicitly
//! (`propagate::after_advance`):
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

pub mod datatype;

use layerbloom_filter::window::view::ReadView;
use layerbloom_filter::window::{WindowSpec, WindowedFilter};
use layerbloom_filter::FilterSpec;
use redis_module::key::RedisKeyWritable;
use redis_module::{Context, ContextFlags, RedisString};

use crate::bloom::args::Window;
use crate::bloom::limits::Refusals;
use crate::bloom::propagate;
use crate::bloom::value::{self, ValueMut};
use crate::clock;
use crate::dispatch::CommandResult;
use crate::error::BfError;
use crate::memory::Limits;
use crate::number;
use crate::reply::Reply;

/// What a read sees: the slices live by the primary's clock, or every slice held where no
/// clock is read (a replica, a command from the primary, AOF replay).
pub fn read_view<'f>(ctx: &Context, filter: &'f WindowedFilter) -> ReadView<'f> {
    ReadView::new(filter, clock::read(ctx))
}

/// The slice the primary's clock is in for `filter`, or `None` where no clock is read (a
/// replica, a command from the primary, AOF replay).
pub fn clock_slice(ctx: &Context, filter: &WindowedFilter) -> Option<u64> {
    clock::read(ctx).map(|now_ms| filter.slice_of(now_ms))
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
    let header = crate::bloom::window::datatype::creation_header(&filter);
    Ok((value::store_windowed(key, filter)?, header))
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
/// and replicates the advance (`propagate::after_advance`). The only place slices expire.
fn advance_to(ctx: &Context, key: &RedisString, filter: &mut WindowedFilter, current: u64) -> u32 {
    if !filter.due(current) {
        return 0;
    }
    let advance = filter.advance_to(current);
    propagate::after_advance(ctx, key, current, advance.expired);
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
        Limits::for_growth(&flags, filter.memory_usage())
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
            Err(e) => limits.reply_add_error(&reply, e.clone()),
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
    let filter = match value::write(&key)? {
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

//! `BF.MERGE destination source [source ...]`: stores the union of compatible Bloom filters
//! (`layerbloom_filter::bloom::merge`), or of compatible windowed filters slice by slice
//! (`layerbloom_filter::window` `union`), under the destination, creating or replacing it.
//!
//! Everything that can refuse the command is checked before anything is written: the
//! destination holds no other type (its value is never replaced by a filter: a typo must not
//! destroy a key; a filter of either kind is replaced), every source exists and is a filter,
//! the sources are all plain or all windowed and compatible, and the union fits the
//! per-filter limit and `maxmemory`. The union is built whole before it is stored: the
//! destination may be a source, and the old filter goes only once the new one exists. Its
//! memory counts against `maxmemory` in full, as both exist for a moment.
//!
//! Windowed sources merge as they stand at the primary's clock, read once: the union is built
//! from the sources as advanced to it (without advancing them, so a refusal changes nothing),
//! then each windowed source and a windowed destination is advanced for real, replicating
//! `BF.WINDOWADVANCE` (with its `bf.expire` events) before the merge itself, which replicates
//! as it came: a replica or an AOF replay, which reads no clock, merges the same slices.

use layerbloom_filter::bloom::merge::{Incompatible, MergeError, Mismatch};
use layerbloom_filter::{FilterError, ScalableFilter, WindowedFilter};
use redis_module::{Context, RedisString};

use crate::bloom::datatype::BLOOM_TYPE;
use crate::bloom::propagate::{self, Change};
use crate::bloom::stats;
use crate::bloom::value::{self, Value, ValueMut};
use crate::bloom::window;
use crate::clock;
use crate::config;
use crate::dispatch::CommandResult;
use crate::error::BfError;
use crate::keys::{self, ReadKey};
use crate::memory::Limits;
use crate::reply::Reply;

/// The union to store, of the sources' kind.
enum Union {
    Plain(ScalableFilter),
    Windowed(WindowedFilter),
}

/// `BF.MERGE destination source [source ...]`
pub fn merge(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let destination = &args[1];
    let names = &args[2..];
    let held = match value::read(&ReadKey::open(ctx, destination))? {
        None => None,
        Some(Value::Plain(_)) => Some(false),
        Some(Value::Windowed(_)) => Some(true),
    };
    let flags = crate::raw_api::context_flags(ctx);
    let limits = Limits::for_creation(&flags, config::max_filter_bytes(&flags));
    // Read once: the union and the advances below must agree on the slice.
    let now = clock::applies(&flags).then(clock::now_ms);
    let union = {
        let mut opened: Vec<ReadKey> = Vec::new();
        opened
            .try_reserve_exact(names.len())
            .map_err(|_| BfError::ArgumentsOutOfMemory)?;
        opened.extend(names.iter().map(|name| ReadKey::open(ctx, name)));
        let mut sources: Vec<Value> = Vec::new();
        sources
            .try_reserve_exact(names.len())
            .map_err(|_| BfError::ArgumentsOutOfMemory)?;
        for key in &opened {
            sources.push(value::read(key)?.ok_or(BfError::NotFound)?);
        }
        union_of(&sources, now, &limits)?
    };
    if let (Union::Windowed(_), Some(now)) = (&union, now) {
        for name in names.iter().chain([destination]) {
            advance(ctx, name, now)?;
        }
    }
    // Opened after the advances: a key handle keeps the value it found.
    let key = ctx.open_key_writable(destination);
    match union {
        Union::Plain(union) => {
            if held == Some(true) {
                key.delete().map_err(|_| BfError::Internal)?;
            }
            stats::entered(keys::store(&key, &BLOOM_TYPE, union)?);
        }
        Union::Windowed(union) => {
            if held == Some(false) {
                key.delete().map_err(|_| BfError::Internal)?;
            }
            value::store_windowed(&key, union)?;
        }
    }
    propagate::after_write(ctx, destination, Change::Merged);
    Reply::new(ctx).ok();
    Ok(())
}

/// The union of the sources, all plain or all windowed (`now`: the primary's clock).
fn union_of(sources: &[Value], now: Option<u64>, limits: &Limits) -> Result<Union, BfError> {
    let window_of = |v: &Value| match v {
        Value::Plain(_) => None,
        Value::Windowed(w) => Some(w.window_ms()),
    };
    let first = sources.first().map(window_of).ok_or(BfError::WrongArity)?;
    if let Some((source, other)) = sources
        .iter()
        .enumerate()
        .find(|(_, v)| window_of(v).is_some() != first.is_some())
    {
        return Err(BfError::MergeIncompatible(Incompatible {
            source,
            against: 0,
            mismatch: Mismatch::Window {
                first,
                this: window_of(other),
            },
        }));
    }
    let refused = |e| merge_error(limits, e);
    if first.is_none() {
        let plain = collect(sources, |v| match v {
            Value::Plain(f) => Some(*f),
            Value::Windowed(_) => None,
        })?;
        let union = ScalableFilter::union(&plain, limits.bytes()).map_err(refused)?;
        return Ok(Union::Plain(union));
    }
    let windowed = collect(sources, |v| match v {
        Value::Windowed(w) => Some(*w),
        Value::Plain(_) => None,
    })?;
    let union = WindowedFilter::union(&windowed, now, limits.bytes()).map_err(refused)?;
    Ok(Union::Windowed(union))
}

/// The sources' filters of one kind (checked to be all of it).
fn collect<'a, T>(
    sources: &[Value<'a>],
    pick: impl Fn(&Value<'a>) -> Option<&'a T>,
) -> Result<Vec<&'a T>, BfError> {
    let mut out = Vec::new();
    out.try_reserve_exact(sources.len())
        .map_err(|_| BfError::ArgumentsOutOfMemory)?;
    out.extend(sources.iter().filter_map(pick));
    Ok(out)
}

/// Moves a windowed filter under `name` to the slice of `now`, replicating that; anything
/// else under it is left alone.
fn advance(ctx: &Context, name: &RedisString, now: u64) -> Result<(), BfError> {
    let key = ctx.open_key_writable(name);
    if let Some(ValueMut::Windowed(filter)) = value::write(&key)? {
        window::expire_at(ctx, name, filter, now);
    }
    Ok(())
}

/// A refusal at `maxmemory` is Redis's own OOM error, as for every other write.
fn merge_error(limits: &Limits, e: MergeError) -> BfError {
    match e {
        MergeError::Filter(FilterError::OverLimit { limit, .. }) if limits.is_memory(limit) => {
            BfError::OverMaxmemory
        }
        e => BfError::from_merge(e),
    }
}

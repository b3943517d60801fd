//! `BF.MERGE destination source [source ...]`: stores the union of compatible Bloom filters
//! (`layerbloom_filter::bloom::merge`) under the destination, creating or replacing it.
//!
//! Everything that can refuse the command is checked before anything is written: the
//! destination holds no other type (its value is never replaced by a filter: a typo must not
//! destroy a key), every source exists and is a filter, the sources are compatible, and the
//! union fits the per-filter limit and `maxmemory`. The union is built whole before it is
//! stored: the destination may be a source, and the old filter goes only once the new one
//! exists. Its memory counts against `maxmemory` in full, as both exist for a moment.

use layerbloom_filter::bloom::merge::MergeError;
use layerbloom_filter::{FilterError, ScalableFilter};
use redis_module::key::RedisKey;
use redis_module::{Context, RedisString};

use crate::config;
use crate::datatype::BLOOM_TYPE;
use crate::dispatch::CommandResult;
use crate::error::BfError;
use crate::keys;
use crate::memory::Limits;
use crate::propagate::{self, Change};
use crate::reply::Reply;
use crate::stats;

/// `BF.MERGE destination source [source ...]`
pub fn merge(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let destination = &args[1];
    let names = &args[2..];
    keys::read::<ScalableFilter>(&ctx.open_key(destination), &BLOOM_TYPE)?;
    let union = {
        let mut opened: Vec<RedisKey> = Vec::new();
        opened
            .try_reserve_exact(names.len())
            .map_err(|_| BfError::ArgumentsOutOfMemory)?;
        opened.extend(names.iter().map(|name| ctx.open_key(name)));
        let mut sources: Vec<&ScalableFilter> = Vec::new();
        sources
            .try_reserve_exact(names.len())
            .map_err(|_| BfError::ArgumentsOutOfMemory)?;
        for key in &opened {
            sources.push(keys::read(key, &BLOOM_TYPE)?.ok_or(BfError::NotFound)?);
        }
        let flags = ctx.get_flags();
        let limits = Limits::for_creation(&flags, config::max_filter_bytes(&flags));
        ScalableFilter::union(&sources, limits.bytes()).map_err(|e| merge_error(&limits, e))?
    };
    let key = ctx.open_key_writable(destination);
    let stored = keys::store(&key, &BLOOM_TYPE, union)?;
    stats::entered(stored);
    propagate::after_write(ctx, destination, Change::Merged);
    Reply::new(ctx).ok();
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

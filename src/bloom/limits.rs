//! The memory limits (`memory.rs`) as Bloom filters meet them: when an add may grow a filter,
//! and the error a client sees for each core refusal (counted in `INFO bf_stats` when
//! replied, `stats::refused`).

use layerbloom_filter::bloom::chain::MAX_LAYERS;
use layerbloom_filter::bloom::codec::CodecError;
use layerbloom_filter::bloom::health::Load;
use layerbloom_filter::{FilterError, ScalableFilter};
use redis_module::ContextFlags;

use crate::bloom::stats;
use crate::error::BfError;
use crate::memory::Limits;
use crate::reply::Reply;

/// The limits of an add of `items` items to `current`, under the command's context `flags`
/// (read only when the add may grow the filter). An add that cannot grow it gets no limits:
/// only growth allocates, so the core never consults them and the errors of such an add (a
/// full non-scaling filter, the layer cap) are not about them. `load`: the filter's counts
/// now.
pub fn for_add<'f>(
    flags: impl FnOnce() -> &'f ContextFlags,
    current: &ScalableFilter,
    load: &Load,
    items: usize,
) -> Limits {
    if !may_grow(load, items) {
        return Limits::NONE;
    }
    Limits::for_growth(flags(), current.memory_usage())
}

/// Whether adding `items` items could fill the newest layer and so grow the filter (never a
/// non-scaling filter, or one at the layer cap: their adds are refused without allocating).
fn may_grow(load: &Load, items: usize) -> bool {
    if load.expansion == 0 || load.layers >= MAX_LAYERS {
        return false;
    }
    load.newest_capacity.saturating_sub(load.newest_items) < items as u64
}

/// The errors of the Bloom core's refusals under a command's limits.
pub trait Refusals {
    /// The error of a failed creation.
    fn create_error(&self, e: FilterError) -> BfError;
    /// The error of a failed add.
    fn add_error(&self, e: FilterError) -> BfError;
    /// The error of a refused BF.LOADCHUNK.
    fn codec_error(&self, e: CodecError) -> BfError;
    /// Replies an add's refusal of one item (inside an array reply, or as BF.ADD's reply),
    /// counting it.
    fn reply_add_error(&self, reply: &Reply, e: FilterError) {
        let error = self.add_error(e);
        stats::refused(&error);
        reply.error(&error);
    }
}

impl Refusals for Limits {
    fn create_error(&self, e: FilterError) -> BfError {
        match e {
            FilterError::OverLimit { limit, .. } if self.is_memory(limit) => BfError::OverMaxmemory,
            e => BfError::from_create(e),
        }
    }

    fn add_error(&self, e: FilterError) -> BfError {
        match e {
            FilterError::OverLimit { limit, .. } if self.is_memory(limit) => BfError::OverMaxmemory,
            e => BfError::from_add(e),
        }
    }

    fn codec_error(&self, e: CodecError) -> BfError {
        match e {
            CodecError::Filter(f) => self.create_error(f),
            e => BfError::from_codec(e),
        }
    }
}

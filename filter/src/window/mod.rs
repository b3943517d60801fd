//! The windowed Bloom filter: "was x added in the last window?", as a ring of slices.
//!
//! # Semantics
//! Time is cut into slices of `slice_ms = ceil(window_ms / slices)` milliseconds, numbered
//! from the filter's origin (its creation time on the primary, persisted):
//! `slice_of(now) = (now - origin) / slice_ms`, saturating at 0 before the origin. Adds go into
//! the head slice; a slice `k` answers while the current slice is at most `k + slices` and is
//! dropped once it is past that, so the live slices are `current - slices ..= current`
//! (`slices + 1` generations). An item added at `t` answers present until at least
//! `t + window` and is forgotten by `t + slices · slice_ms + slice_ms` (the window rounded up
//! to whole slices, plus one slice).
//!
//! Each slice is an ordinary [`ScalableFilter`] of capacity `ceil(capacity / slices)` (its
//! planned share of the window) at `error / (slices + 1)`, so the union of the live
//! generations stays under `error` at the planned load (a union's rate is at most the sum of its parts').
//! A slice busier than planned grows like any scaling filter; a non-scaling one refuses with
//! `FilterError::Full`. Slices are created by the first add into them: moving the head
//! allocates nothing, empty slices cost nothing, and a refused creation changes nothing.
//!
//! # The core never reads a clock
//! Every time is an argument. Rotation is one idempotent operation, [`WindowedFilter::advance_to`]
//! (current slice id): it drops slices older than `current - slices` (freeing them) and moves
//! the head forward; an id at or before the head is a no-op. The glue calls it on the primary
//! and propagates it, so a replica holds what its primary holds and answers from that
//! ([`WindowedFilter::contains`]); a primary that cannot write answers by its clock without
//! mutating ([`WindowedFilter::contains_at`]).
//!
//! # API (the contract with the glue)
//! * [`WindowSpec`] (`window_ms`, `slices`, the `FilterSpec` the user asked for: capacity per
//!   window, error over the window, expansion / non-scaling, layout) with `validate`
//!   (refused: `slices` outside `1..=MAX_SLICES`, `window_ms < slices`, as
//!   `FilterError::Sizing(SizingError::BadSlices | BadWindow)`) and `slice_ms`, `slice_spec`.
//! * [`WindowedFilter::new`]`(spec, now_ms, max_bytes)`: validates, refuses (`OverLimit`) a
//!   filter whose steady state (`slices + 1` initial slices and their table) could never fit
//!   in `max_bytes`, allocates no slice.
//! * `slice_of`, `head`, `due(current)`, `advance_to(current) -> Advance { expired, moved }`.
//! * `contains`, `contains_many` (the slices held), `contains_at`, `contains_many_at` (the
//!   slices live at `current`). A single lookup hashes once for all blocked slices and
//!   overlaps their cache misses; it costs about one line per live slice when absent.
//! * `add`, `add_many` with `ScalableFilter`'s results and errors: `Ok(true)` exactly when the
//!   filter changed, i.e. the head slice did not hold the item. An item held only by an older
//!   slice is put into the head slice (so it lives a full window from now) and answers
//!   `Ok(true)`: the glue's rule "replicate what changed the filter" stays right, and a
//!   replica refreshes it too. A batch's results stop after its first error.
//! * `add_detailed`, `add_many_detailed` -> [`Added`] `{ changed, in_window }`: the same add,
//!   also telling whether the item answered present in the window before (a lookup in every
//!   older slice, one cache line each). A reply "1 = new to the window" is `!in_window`;
//!   replication must still follow `changed`, never that reply.
//! * `may_allocate(items)`: whether adding that many items could allocate (create the head
//!   slice or grow it): the glue's memory limits apply only then.
//! * Figures: `items` (the sum of the live slices' counts: an estimate, since an item added in
//!   two slices counts twice), `capacity` (items per window, as asked), `error`, `expansion`,
//!   `window_ms`, `slices`, `slice_ms`, `origin_ms`, `slice_summaries` (id, start, items,
//!   capacity, bytes, layers), `layer_count` (over all slices), `memory_usage` (the allocator
//!   model of `footprint`, the value's box included), `allocations` (every heap block but the
//!   box), `try_clone`, `debug_lines`; `spec`, `slice_start_ms(id)`, and `slice_filters` (each
//!   slice's id and `ScalableFilter`, for per-slice health figures).
//! * `union(sources, now_ms, max_bytes)`, `union_bytes(sources, now_ms)`, `mismatch(other)`:
//!   BF.MERGE, slice by slice, of windows alike whose slices line up; with `now_ms`, of the
//!   sources as advanced to it, without advancing them (`merge.rs` gives the mapping).
//! * Byte formats ([`codec`], its notes give the layout): `encode_header` (BF.SCANDUMP's first
//!   chunk, the RDB value's first string), `is_window_header` (a BF.LOADCHUNK header's magic,
//!   to be checked before the plain decoders), `decode_header(bytes, Strictness)` (validated,
//!   with the lax load's warnings), `filter_from_header(header, max_bytes)` (every slice
//!   zeroed; `WindowHeader::memory_bytes` is its figure before allocating), `dump_chunk` and
//!   `load_chunk` (the plain filter's iterators and errors over every slice's layers),
//!   `rdb_pieces`, `WindowLoader` (piece by piece) or `load_rdb(src, budget, clock)` (an
//!   `RdbSource`; with a budget, a client's RESTORE: strict and held to it before allocating),
//!   `ENCODING_VERSION` for the module type.
//! * [`view::ReadView`]: what a read sees at a time (or, with none, of the slices held), and
//!   the figures of the live slices' union.

pub mod codec;
pub(crate) mod filter;
mod merge;
#[cfg(test)]
mod tests;
pub mod view;

pub use filter::{Added, Advance, SliceSummary, WindowedFilter};

use crate::bloom::filter::FilterSpec;
use crate::bloom::sizing::SizingError;
use crate::error::FilterError;

/// The most slices a window may have: every lookup probes `slices + 1` generations.
pub const MAX_SLICES: u32 = 64;
/// The longest window a command accepts, in milliseconds (about 31 years): far past any use,
/// far from overflowing the clock arithmetic. A client's stream or RESTORE is held to it too.
pub const MAX_WINDOW_MS: u64 = 1_000_000_000_000;
/// The slices of a window when none are asked for (see docs/BENCHMARKS.md, "Windowed filters").
pub const DEFAULT_SLICES: u32 = 4;

/// What a new windowed filter is asked to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowSpec {
    /// How long an item is remembered, at least.
    pub window_ms: u64,
    /// Slices the window is cut into.
    pub slices: u32,
    /// The filter as asked: `capacity` items per window, `error` over the whole window.
    pub filter: FilterSpec,
}

impl WindowSpec {
    /// Refuses windows no slice can be cut for.
    pub fn validate(&self) -> Result<(), FilterError> {
        if self.slices == 0 || self.slices > MAX_SLICES {
            return Err(SizingError::BadSlices.into());
        }
        if self.window_ms < u64::from(self.slices) {
            return Err(SizingError::BadWindow.into());
        }
        if self.filter.capacity == 0 {
            return Err(SizingError::BadCapacity.into());
        }
        if !(self.filter.error > 0.0 && self.filter.error < 1.0) {
            return Err(SizingError::BadErrorRate.into());
        }
        Ok(())
    }

    /// A slice's length, rounded up so that no item is forgotten before its window ends.
    pub fn slice_ms(&self) -> u64 {
        self.window_ms
            .div_ceil(u64::from(self.slices.max(1)))
            .max(1)
    }

    /// What each slice's filter is: its share of the capacity, at a rate that keeps the union
    /// of the `slices + 1` live generations under the window's.
    pub fn slice_spec(&self) -> FilterSpec {
        let slices = u64::from(self.slices.max(1));
        FilterSpec {
            capacity: self.filter.capacity.div_ceil(slices).max(1),
            error: self.filter.error / (slices + 1) as f64,
            ..self.filter
        }
    }
}

//! Cuckoo filters, RedisBloom's exactly: the same fingerprints in the same buckets, so data
//! moves both ways and every answer (false positives included) is the one RedisBloom gives.
//!
//! # The math
//! An item is hashed once to 64 bits, `h = MurmurHash64A(item, seed 0)`. Its fingerprint is
//! `fp = h mod 255 + 1` (1..=255; 0 marks an empty slot), and its two candidate buckets in a
//! sub-filter of `n` buckets (a power of two) are
//!
//! ```text
//! b1 = h mod n,    b2 = (h XOR fp·0x5bd1e995) mod n
//! ```
//!
//! Since `n` is a power of two, `b1 = b2 XOR (fp·0x5bd1e995 mod n)`: a fingerprint alone
//! finds its other bucket, which is what lets inserts evict ("kick") fingerprints to their
//! alternate bucket without knowing their items. A bucket has `b` slots (the bucket size).
//!
//! A lookup compares the query's fingerprint with the `2b` slots of its two buckets. Each
//! occupied slot holding another item's fingerprint matches with probability `1/255`
//! (fingerprints are uniform over 255 values), so at load `α` (occupied slots / all slots) a
//! sub-filter answers a false positive with probability
//!
//! ```text
//! ε_sub = 1 − (1 − 1/255)^(2bα) ≈ 2bα/255 ≤ 2b/(2^f − 1)      (f = 8 bits here)
//! ```
//!
//! and a filter of `k` sub-filters about `Σ ε_sub` — 1.6% at the default bucket size 2 for
//! one full sub-filter, more with every expansion. Cuckoo filters of bucket size 2 fill to
//! about 84% before an insert fails, size 4 to 95%, size 8 to 98%.
//!
//! # Scaling
//! When an item finds no empty slot in any sub-filter and `max_iterations` evictions in the
//! newest one fail (they are then undone: a failed insert changes nothing), a new sub-filter
//! of `expansion` times the newest one's buckets is added; expansion 0 means the filter is
//! full instead. Sub-filter `i` has `buckets × expansion^i` buckets. An adding command is
//! refused before any item once the filter has `max_expansions` (RedisBloom: 32)
//! sub-filters; one `CF.INSERT` may still grow past it, up to [`params::MAX_SUB_FILTERS`].
//! A walk is cut to what [`WALK_BUDGET`] pays ([`walk_limit`]: only over buckets of more
//! than 64 slots), and the walks of one batch share that budget, counted in work (bucket
//! probes of their slots), as compaction's: an item whose walk could need more than is left
//! is refused before it walks ([`CuckooError::KickBudget`]) and ends the batch.
//!
//! # Deletes
//! A delete removes one slot equal to the fingerprint from the item's buckets, newest
//! sub-filter first. An item never added can share a fingerprint and a bucket with one that
//! was: deleting it removes that item's slot, a false negative. With several sub-filters,
//! deletes above a tenth of the items compact the filter: fingerprints move back to older
//! sub-filters and an emptied newest sub-filter is dropped.
//!
//! # Deliberate differences from RedisBloom
//! - Bucket offsets are 64-bit (RedisBloom computes them in 32 bits, wrapping in sub-filters
//!   over 4 GiB, where its filters index the wrong buckets).
//! - Persisted data is validated and refused with an error where RedisBloom asserts,
//!   divides by zero or truncates ([`codec`]); `CF.LOADCHUNK` never overwrites a fingerprint.
//! - Sub-filters are capped at [`params::MAX_SUB_FILTERS`]; counters saturate.
//! - A batch stops at its eviction budget ([`WALK_BUDGET`]); RedisBloom walks every item.
//! - A walk over buckets of more than 64 slots stops at [`walk_limit`] swaps where
//!   `max_iterations` is higher (26,296 at 255 slots); RedisBloom walks `max_iterations`.
//! - Items of RedisBloom's oldest encodings (1.x / 2.0, encoding versions 0..3) that were
//!   placed with its former 32-bit hash are looked up with the 64-bit scheme, as RedisBloom
//!   2.2+ does: the data cannot tell which hash placed it, and the recorded answers of
//!   RedisBloom for such data are these.
//!
//! # A false-positive rate of one's choosing (the extension, [`rated`])
//! RedisBloom's layout fixes `f = 8` bits per fingerprint. An extension filter is created for
//! a rate `ε`: [`rate::shape_for_rate`] picks the bucket size `b` with the fewest bits per
//! item `f / α(b)` at the load `α(b)` inserts reach, and [`rate::widths_for`] the fingerprint
//! width of each sub-filter (the first sized for most of `ε`, the others for what is left, a
//! bit wider each), so that the whole filter stays at or under `ε`. Its fingerprints are
//! packed `f`-bit fields and are cut from the item hash differently ([`rated`]); it persists
//! under a module type of its own with its own encoding and a 52-byte SCANDUMP header
//! ([`rated_codec`]), which RedisBloom refuses instead of misreading. Filters created without
//! the extension are RedisBloom's layout bit for bit. [`AnyFilter`] is either.

mod any;
mod budget;
mod chain;
pub mod codec;
mod filter;
pub mod health;
pub mod params;
pub mod rate;
pub mod rated;
pub mod rated_codec;
mod slots;
mod stream;

pub use any::{AnyFilter, HeaderError};
pub use budget::{walk_limit, Limits, WALK_BUDGET};
pub use chain::Filter;
pub use filter::{CuckooFilter, CuckooHash, Info, SubFilter, ALT_MULTIPLIER};
pub use params::{ParamError, Params};
pub use rated::{RatedFilter, RatedSub};

use crate::error::FilterError;

/// Why a cuckoo operation did not happen. Every variant leaves the filter unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CuckooError {
    /// A non-scaling filter (expansion 0) has no room for the item.
    #[error("Filter is full")]
    Full,
    /// The filter has reached the sub-filter count at which adding commands are refused.
    #[error("Maximum expansions reached")]
    MaxExpansions,
    /// The adding command spent its eviction budget (`WALK_BUDGET`) before this item's walk:
    /// this item and the ones after it are not tried.
    #[error("the command's eviction budget is spent")]
    KickBudget,
    /// Settings out of range.
    #[error(transparent)]
    Params(ParamError),
    /// Memory: over a limit, refused by the allocator, or too many sub-filters.
    #[error(transparent)]
    Filter(#[from] FilterError),
}

#[cfg(test)]
mod tests;

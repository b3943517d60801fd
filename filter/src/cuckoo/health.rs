//! Health figures of a cuckoo filter (`CF.INFO key LOAD | FPR | DELETESNOTFOUND | HEALTH`)
//! and the capacity-warning crossings, beside the Bloom ones (`bloom::health`).
//!
//! A lookup compares its fingerprint with the `2b` slots of its two buckets in every
//! sub-filter; each occupied slot matches another item's fingerprint with probability
//! `1/255`. With `o_i` occupied slots of `s_i` in sub-filter `i` (load `α_i = o_i / s_i`), it
//! meets about `2b·α_i` occupied slots there, so the whole filter answers a false positive
//! with probability
//!
//! ```text
//! 1 − Π_i (1 − 1/255)^(2b·α_i) = 1 − (1 − 1/255)^(2b·Σα_i)
//! ```
//!
//! (per sub-filter `rate::false_positive_rate`; about `Σ 2b·α_i / 255` while small).

use super::slots::Slots;
use super::{rate, CuckooFilter, Filter};
use crate::bloom::health::warning_mark;

/// The fill of a filter's sub-filters, whatever their layout.
pub trait Occupancy {
    fn sub_filter_count(&self) -> usize;
    /// Sub-filter `i`'s occupied slots and all its slots (`i` below the count).
    fn sub_occupancy(&self, i: usize) -> (u64, u64);
}

impl<S: Slots> Occupancy for Filter<S> {
    fn sub_filter_count(&self) -> usize {
        self.sub_filters().len()
    }

    fn sub_occupancy(&self, i: usize) -> (u64, u64) {
        let s = &self.sub_filters()[i];
        (
            s.occupied(),
            s.buckets() * u64::from(self.params().bucket_size),
        )
    }
}

/// The width of RedisBloom's layout (an extension filter estimates its own rate:
/// `RatedFilter::estimated_fpr`).
const FINGERPRINT_BITS: u8 = 8;

/// Each sub-filter's load (occupied slots / slots), oldest first.
pub fn loads<F: Occupancy + ?Sized>(filter: &F) -> Vec<f64> {
    (0..filter.sub_filter_count())
        .map(|i| match filter.sub_occupancy(i) {
            (_, 0) => 0.0,
            (occupied, slots) => occupied as f64 / slots as f64,
        })
        .collect()
}

/// The estimated false-positive rate of a lookup in the whole filter.
pub fn estimated_fpr(filter: &CuckooFilter) -> f64 {
    let total_load: f64 = filter.sub_filters().iter().map(|s| s.load()).sum();
    rate::false_positive_rate(FINGERPRINT_BITS, filter.params().bucket_size, total_load)
}

/// The newest sub-filter's fill before a write: what `crossings` compares with afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadMark {
    sub_filters: usize,
    newest_occupied: u64,
}

impl LoadMark {
    pub fn of<F: Occupancy + ?Sized>(filter: &F) -> Self {
        let count = filter.sub_filter_count();
        LoadMark {
            sub_filters: count,
            newest_occupied: match count {
                0 => 0,
                n => filter.sub_occupancy(n - 1).0,
            },
        }
    }
}

/// A sub-filter that an add took from under its warning mark to at or past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    /// The sub-filter's index, oldest first.
    pub sub_filter: usize,
    /// Its occupied slots after the write, and all its slots.
    pub occupied: u64,
    pub slots: u64,
}

/// The sub-filters an add took to `percent`% of their slots since `before`: the newest one of
/// then and every one added since (an add may fill the newest and grow). Only newest
/// sub-filters are watched: older ones only take fingerprints back after deletes. A deletion
/// that takes a sub-filter back under its mark re-arms it: the next add that reaches the mark
/// is another crossing. Empty when `percent` is 0, or when the write removed sub-filters (a
/// delete's compaction).
pub fn crossings<F: Occupancy + ?Sized>(
    before: LoadMark,
    filter: &F,
    percent: u32,
) -> Vec<Crossing> {
    let count = filter.sub_filter_count();
    if percent == 0 || before.sub_filters == 0 || count < before.sub_filters {
        return Vec::new();
    }
    let first = before.sub_filters - 1;
    let mut crossed = Vec::new();
    for i in first..count {
        let (occupied, slots) = filter.sub_occupancy(i);
        let was = if i == first {
            before.newest_occupied
        } else {
            0
        };
        let mark = warning_mark(slots, percent);
        if was < mark && occupied >= mark {
            crossed.push(Crossing {
                sub_filter: i,
                occupied,
                slots,
            });
        }
    }
    crossed
}

//! Sizing for a false-positive rate of one's choosing (the extension; RedisBloom's layout is
//! `f = 8`, any bucket size).
//!
//! A lookup compares its fingerprint with the `2b` slots of its two buckets; at load `α`
//! each holds another item's fingerprint uniform over `2^f − 1` values, so one sub-filter
//! answers a false positive with probability
//!
//! ```text
//! ε(f, b, α) = 1 − (1 − 1/(2^f − 1))^(2bα)  ≈  2bα / 2^f
//! ```
//!
//! A filter filled to the load `α(b)` its inserts reach costs `f / α(b)` bits per item, and
//! the least any cuckoo filter of rate `ε` can cost is about `log2(2b/ε) / α(b)`. For a
//! target `ε`, [`shape_for_rate`] takes, for each bucket size of [`REACHED_LOAD`], the
//! narrowest `f` with `ε(f, b, α(b)) ≤ ε`, and keeps the one with the fewest bits per item.
//! The fingerprint widths of the sub-filters ([`widths_for`]) keep the rate of the whole
//! filter under `ε` with every sub-filter full (`α = 1`), not at `α(b)`: deletes, the adds
//! after them and compaction fill a sub-filter past the load inserts first reach.

/// The fewest buckets an extension sub-filter has (a whole number of bytes and of 8-slot
/// groups whatever the width and bucket size).
pub const MIN_BUCKETS: u64 = 8;

/// Eviction attempts an extension filter gets, so that its inserts reach `REACHED_LOAD`.
pub const SIZING_MAX_ITERATIONS: u16 = 500;

/// The load (occupied / all slots) inserts reach before the first one fails, per bucket
/// size, with RedisBloom's eviction walk at `SIZING_MAX_ITERATIONS`: the lowest of several
/// measured fills, rounded down. Bucket sizes 1 and 2 are left out: the walk's fixed victim
/// order cycles early there (about 41% and 51%), whatever the iterations.
pub const REACHED_LOAD: &[(u8, f64)] = &[(3, 0.94), (4, 0.955), (6, 0.978), (8, 0.985)];

/// Fingerprint widths the extension may choose.
pub const FINGERPRINT_BITS: std::ops::RangeInclusive<u8> = 4..=32;

/// A fingerprint width and bucket size for a rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateShape {
    pub fingerprint_bits: u8,
    pub bucket_size: u8,
    /// The load this bucket size reaches (`REACHED_LOAD`).
    pub load: f64,
}

impl RateShape {
    /// Bits each item costs at the reached load.
    pub fn bits_per_item(&self) -> f64 {
        f64::from(self.fingerprint_bits) / self.load
    }

    /// The false-positive rate of one sub-filter at the reached load.
    pub fn rate(&self) -> f64 {
        false_positive_rate(self.fingerprint_bits, self.bucket_size, self.load)
    }

    /// Buckets (a power of two) for `capacity` items at the reached load, if they fit.
    pub fn buckets_for(&self, capacity: u64) -> Option<u64> {
        let slots = (capacity as f64 / self.load).ceil();
        let buckets = (slots / f64::from(self.bucket_size)).ceil().max(2.0);
        if buckets >= 2f64.powi(62) {
            return None;
        }
        (buckets as u64).checked_next_power_of_two()
    }
}

/// `ε(f, b, α)` of the module documentation.
pub fn false_positive_rate(fingerprint_bits: u8, bucket_size: u8, load: f64) -> f64 {
    let values = 2f64.powi(i32::from(fingerprint_bits)) - 1.0;
    let comparisons = 2.0 * f64::from(bucket_size) * load;
    // 1 − (1 − 1/v)^c, computed without cancellation for wide fingerprints.
    -f64::exp_m1(comparisons * f64::ln_1p(-1.0 / values))
}

/// The least bits per item a cuckoo filter of bucket size `b` and rate `rate` needs:
/// `log2(2b / rate) / α(b)`.
pub fn bits_lower_bound(bucket_size: u8, load: f64, rate: f64) -> f64 {
    (2.0 * f64::from(bucket_size) / rate).log2() / load
}

/// The shape with the fewest bits per item whose rate is at most `rate`; `None` for a rate
/// outside `(0, 1)` or one no width up to 32 bits reaches.
pub fn shape_for_rate(rate: f64) -> Option<RateShape> {
    if !(rate > 0.0 && rate < 1.0) {
        return None;
    }
    REACHED_LOAD
        .iter()
        .filter_map(|&(bucket_size, load)| {
            FINGERPRINT_BITS
                .map(|fingerprint_bits| RateShape {
                    fingerprint_bits,
                    bucket_size,
                    load,
                })
                .find(|s| s.rate() <= rate)
        })
        .min_by(|a, b| a.bits_per_item().total_cmp(&b.bits_per_item()))
}

/// The load a bucket size of the sizing's set reaches (`REACHED_LOAD`).
pub fn reached_load(bucket_size: u8) -> Option<f64> {
    REACHED_LOAD
        .iter()
        .find(|&&(b, _)| b == bucket_size)
        .map(|&(_, load)| load)
}

/// The fingerprint width of each sub-filter of an extension filter: `first` for sub-filter 0,
/// `second` for sub-filter 1, then one bit more per sub-filter up to 32. Persisted with the
/// filter, so growth never recomputes a rate in floating point (replicas and the AOF would
/// depend on their math library).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Widths {
    pub first: u8,
    pub second: u8,
}

impl Widths {
    /// The width of sub-filter `index`.
    pub fn of(&self, index: usize) -> u8 {
        match index {
            0 => self.first,
            i => (usize::from(self.second) + i - 1).min(usize::from(*FINGERPRINT_BITS.end())) as u8,
        }
    }

    /// Whether the widths are in range and never narrow (compaction narrows a fingerprint
    /// into an older sub-filter, it cannot widen one).
    pub fn is_valid(&self) -> bool {
        FINGERPRINT_BITS.contains(&self.first)
            && FINGERPRINT_BITS.contains(&self.second)
            && self.first <= self.second
    }
}

/// The rate of sub-filters `1..sub_filters`, full, when sub-filter 1 has `second` bits: each
/// later one a bit wider, up to 32.
fn tail_rate(second: u8, bucket_size: u8, sub_filters: usize) -> f64 {
    let widths = Widths {
        first: second,
        second,
    };
    let mut sum = 0.0;
    let mut i = 1;
    while i < sub_filters {
        let bits = widths.of(i);
        if bits == *FINGERPRINT_BITS.end() {
            // Every later sub-filter has the same width.
            return sum + (sub_filters - i) as f64 * false_positive_rate(bits, bucket_size, FULL);
        }
        sum += false_positive_rate(bits, bucket_size, FULL);
        i += 1;
    }
    sum
}

/// The load the widths are sized at: full. Inserts stop near `REACHED_LOAD`, but a
/// fingerprint deleted from an older sub-filter leaves a slot that a later add (when the
/// newer sub-filters' buckets are full) or a compaction (any fingerprint of a newer
/// sub-filter whose bucket it is) fills without a walk, so every sub-filter may end full.
const FULL: f64 = 1.0;

/// The widths of a filter of bucket size `b` for `rate`: the narrowest first width whose
/// sub-filter, full, meets the rate with room left, then the narrowest second width such
/// that all `sub_filters` sub-filters together (at most the cap a filter may have), every one
/// full, stay at or under `rate`. Sub-filter 0 holds most items, so it gets the most of the
/// rate; `None` when no widths up to 32 bits reach it. Filters are sized for
/// `params::DEFAULT_MAX_EXPANSIONS` sub-filters, where adding commands are refused: a filter
/// that one `CF.INSERT` takes past them adds 32-bit sub-filters' rates (about 2e-9 each).
pub fn widths_for(rate: f64, bucket_size: u8, sub_filters: usize) -> Option<Widths> {
    if !(rate > 0.0 && rate < 1.0) {
        return None;
    }
    FINGERPRINT_BITS.into_iter().find_map(|first| {
        let left = rate - false_positive_rate(first, bucket_size, FULL);
        if left <= 0.0 {
            return None;
        }
        (first..=*FINGERPRINT_BITS.end())
            .find(|&second| tail_rate(second, bucket_size, sub_filters) <= left)
            .map(|second| Widths { first, second })
    })
}

/// How an extension filter is built for a rate: its bucket size, the load that size reaches
/// and the fingerprint widths of its sub-filters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extension {
    pub bucket_size: u8,
    pub load: f64,
    pub widths: Widths,
}

impl Extension {
    /// The shape for `rate` with the fewest bits per item, or with `bucket_size` when given
    /// (one of `REACHED_LOAD`'s sizes); `None` for a rate outside `(0, 1)`, one no width
    /// reaches, or another bucket size.
    pub fn for_rate(rate: f64, bucket_size: Option<u8>) -> Option<Self> {
        let (bucket_size, load) = match bucket_size {
            Some(b) => (b, reached_load(b)?),
            None => {
                let s = shape_for_rate(rate)?;
                (s.bucket_size, s.load)
            }
        };
        let widths = widths_for(rate, bucket_size, super::params::DEFAULT_MAX_EXPANSIONS)?;
        Some(Extension {
            bucket_size,
            load,
            widths,
        })
    }

    /// Buckets (a power of two, at least `MIN_BUCKETS`) for `capacity` items at the
    /// reached load, if they fit.
    pub fn buckets_for(&self, capacity: u64) -> Option<u64> {
        let shape = RateShape {
            fingerprint_bits: self.widths.first,
            bucket_size: self.bucket_size,
            load: self.load,
        };
        shape.buckets_for(capacity).map(|b| b.max(MIN_BUCKETS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_formula_is_redisbloom_s_for_8_bits() {
        // RedisBloom's bucket size 2, full: about 2·2/255.
        let r = false_positive_rate(8, 2, 1.0);
        assert!((r - 4.0 / 255.0).abs() < 1e-4, "{r}");
        assert!(false_positive_rate(32, 4, 1.0) > 0.0);
        assert!(false_positive_rate(9, 4, 0.9) < false_positive_rate(8, 4, 0.9));
    }

    #[test]
    fn the_chosen_shape_meets_the_rate_with_the_fewest_bits() {
        let mut rate = 0.5;
        while rate > 1e-9 {
            let s = shape_for_rate(rate).unwrap();
            assert!(s.rate() <= rate, "{rate}: {s:?}");
            // No candidate is cheaper, and one bit less would miss the rate.
            for &(b, load) in REACHED_LOAD {
                for f in FINGERPRINT_BITS {
                    let other = RateShape {
                        fingerprint_bits: f,
                        bucket_size: b,
                        load,
                    };
                    if other.rate() <= rate {
                        assert!(other.bits_per_item() >= s.bits_per_item() - 1e-12);
                    }
                }
            }
            if s.fingerprint_bits > *FINGERPRINT_BITS.start() {
                let narrower = RateShape {
                    fingerprint_bits: s.fingerprint_bits - 1,
                    ..s
                };
                assert!(narrower.rate() > rate);
            }
            // Within one fingerprint bit (spread over the load) of the bound.
            let bound = bits_lower_bound(s.bucket_size, s.load, rate);
            assert!(
                s.bits_per_item() <= bound + 1.0 / s.load + 1e-9,
                "{rate}: {s:?}"
            );
            rate /= 1.7;
        }
    }

    #[test]
    fn known_rates_pick_known_shapes() {
        let s = shape_for_rate(0.01).unwrap();
        assert_eq!((s.fingerprint_bits, s.bucket_size), (10, 4));
        let s = shape_for_rate(0.001).unwrap();
        assert_eq!((s.fingerprint_bits, s.bucket_size), (13, 4));
        for bad in [0.0, 1.0, -0.1, f64::NAN, 1e-12] {
            assert_eq!(shape_for_rate(bad), None, "{bad}");
        }
        assert_eq!(s.buckets_for(1000), Some(512));
        assert_eq!(s.buckets_for(u64::MAX), None);
    }

    #[test]
    fn widths_keep_the_whole_filter_under_the_rate() {
        let mut rate = 0.5;
        while rate > 1e-8 {
            for &(b, load) in REACHED_LOAD {
                let Some(w) = widths_for(rate, b, 32) else {
                    // 31 sub-filters of 32 bits alone take about 1e-7 (b = 8) of the rate.
                    assert!(rate < 3e-7, "{rate} {b}");
                    continue;
                };
                assert!(w.is_valid(), "{rate} {b}: {w:?}");
                let total: f64 = (0..32).map(|i| false_positive_rate(w.of(i), b, load)).sum();
                assert!(total <= rate * (1.0 + 1e-9), "{rate} {b}: {w:?} {total}");
                // No first width is narrower than the one that meets the rate alone.
                let alone = FINGERPRINT_BITS
                    .into_iter()
                    .find(|&f| false_positive_rate(f, b, load) <= rate)
                    .unwrap();
                assert!(w.first >= alone, "{rate} {b}: {w:?}");
                if rate > 1e-5 {
                    assert!(w.first <= alone + 1, "{rate} {b}: {w:?}");
                }
            }
            if rate >= 1e-7 {
                assert!(Extension::for_rate(rate, None).is_some(), "{rate}");
            }
            rate /= 1.9;
        }
        let w = widths_for(0.01, 4, 32).unwrap();
        assert_eq!((w.first, w.of(1) >= 12, w.of(2) - w.of(1)), (10, true, 1));
        assert_eq!(w.of(1000), 32);
        assert_eq!(widths_for(1e-12, 4, 32), None);
        assert_eq!(widths_for(0.0, 4, 32), None);
        assert_eq!(reached_load(4), Some(0.955));
        assert_eq!(reached_load(2), None);
    }

    /// Deletes and compaction fill older sub-filters past the load inserts reach (a
    /// fingerprint moves into any empty slot of its buckets there, no walk needed), up to
    /// full: the widths must keep the rate with every sub-filter full.
    #[test]
    fn widths_keep_the_rate_with_every_sub_filter_full() {
        let mut rate = 0.5;
        while rate > 1e-8 {
            for &(b, _) in REACHED_LOAD {
                let Some(w) = widths_for(rate, b, 32) else {
                    continue;
                };
                let full: f64 = (0..32).map(|i| false_positive_rate(w.of(i), b, 1.0)).sum();
                assert!(full <= rate * (1.0 + 1e-9), "{rate} {b}: {w:?} {full}");
            }
            rate /= 1.3;
        }
        for rate in [0.05, 0.01, 0.001] {
            let e = Extension::for_rate(rate, None).unwrap();
            let full: f64 = (0..32)
                .map(|i| false_positive_rate(e.widths.of(i), e.bucket_size, 1.0))
                .sum();
            assert!(full <= rate, "{rate}: {e:?} {full}");
        }
    }
}

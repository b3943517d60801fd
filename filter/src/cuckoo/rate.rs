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
//! Sub-filter `i` of a scaling filter would be sized for `ε·2^-(i+1)` (each expansion one
//! bit wider), so the rate of the whole filter stays under `ε`.

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
}

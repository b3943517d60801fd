//! A cuckoo filter's settings, their bounds, and the bucket count `CF.RESERVE` gives a
//! capacity: RedisBloom's rules, so a filter created here has the shape RedisBloom would give
//! it.

/// Capacity of a filter created by `CF.ADD` / `CF.INSERT` on a missing key.
pub const DEFAULT_CAPACITY: u64 = 1024;
/// Slots per bucket unless `BUCKETSIZE` says otherwise.
pub const DEFAULT_BUCKET_SIZE: u8 = 2;
/// Eviction attempts unless `MAXITERATIONS` says otherwise.
pub const DEFAULT_MAX_ITERATIONS: u16 = 20;
/// Growth factor unless `EXPANSION` says otherwise.
pub const DEFAULT_EXPANSION: u16 = 1;
/// The largest bucket size (slot indexes and the persisted field are bytes in RedisBloom).
pub const MAX_BUCKET_SIZE: u8 = 255;
/// The largest expansion `CF.RESERVE` accepts.
pub const MAX_EXPANSION: u16 = 32768;
/// RedisBloom's `CF_MAX_EXPANSIONS`: a command that adds is refused, before any item, once a
/// filter has this many sub-filters.
pub const DEFAULT_MAX_EXPANSIONS: usize = 32;
/// The most sub-filters a filter may ever have, whatever the soft limit above: one
/// `CF.INSERT` may grow past the soft limit (RedisBloom checks it once per command), and
/// loaded data may hold more. RedisBloom keeps the count in 16 bits, so none of its filters
/// has more than 65535; past a thousand, every lookup would probe thousands of buckets.
pub const MAX_SUB_FILTERS: usize = 1024;

/// The settings of a filter, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Slots per bucket, 1..=255.
    pub bucket_size: u8,
    /// Eviction attempts before an insert grows the filter (or fails), 1..=65535.
    pub max_iterations: u16,
    /// Each new sub-filter has this many times the buckets of the previous one: 0 (never
    /// grows) or a power of two up to 32768.
    pub expansion: u16,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            bucket_size: DEFAULT_BUCKET_SIZE,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            expansion: DEFAULT_EXPANSION,
        }
    }
}

impl Params {
    /// Whether every setting is in its range (what the decoders require of persisted data).
    pub fn check(&self) -> Result<(), ParamError> {
        if self.bucket_size == 0 {
            return Err(ParamError::BucketSize);
        }
        if self.max_iterations == 0 {
            return Err(ParamError::MaxIterations);
        }
        if self.expansion > MAX_EXPANSION
            || (self.expansion != 0 && !self.expansion.is_power_of_two())
        {
            return Err(ParamError::Expansion);
        }
        Ok(())
    }
}

/// A setting out of range. The texts are RedisBloom's replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("Capacity must be at least (BucketSize * 2)")]
    CapacityTooSmall,
    #[error("BUCKETSIZE: value must be an integer between 1 and 255, inclusive.")]
    BucketSize,
    #[error("MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.")]
    MaxIterations,
    #[error("EXPANSION: value must be an integer between 0 and 32768, inclusive.")]
    Expansion,
    /// Not reachable from `buckets_for`, which rounds: a bucket count given directly.
    #[error("the bucket count must be a power of two")]
    Buckets,
}

/// A `BUCKETSIZE` argument.
pub fn bucket_size(value: i64) -> Result<u8, ParamError> {
    u8::try_from(value)
        .ok()
        .filter(|&b| b >= 1)
        .ok_or(ParamError::BucketSize)
}

/// A `MAXITERATIONS` argument.
pub fn max_iterations(value: i64) -> Result<u16, ParamError> {
    u16::try_from(value)
        .ok()
        .filter(|&m| m >= 1)
        .ok_or(ParamError::MaxIterations)
}

/// An `EXPANSION` argument, rounded up to a power of two as RedisBloom does (0 stays 0: the
/// filter never grows).
pub fn expansion(value: i64) -> Result<u16, ParamError> {
    let e = u16::try_from(value)
        .ok()
        .filter(|&e| e <= MAX_EXPANSION)
        .ok_or(ParamError::Expansion)?;
    Ok(if e == 0 { 0 } else { e.next_power_of_two() })
}

/// The first sub-filter's bucket count for a capacity: the next power of two at or above
/// `capacity / bucket_size`. A capacity under two buckets' worth is refused.
pub fn buckets_for(capacity: i64, bucket_size: u8) -> Result<u64, ParamError> {
    let bs = i64::from(bucket_size.max(1));
    if capacity < bs * 2 {
        return Err(ParamError::CapacityTooSmall);
    }
    // capacity / bs < 2^63, whose next power of two still fits.
    Ok(((capacity / bs) as u64).next_power_of_two())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_rounds_like_redisbloom() {
        assert_eq!(buckets_for(1000, 2), Ok(512));
        assert_eq!(buckets_for(1024, 2), Ok(512));
        assert_eq!(buckets_for(1025, 2), Ok(512));
        assert_eq!(buckets_for(1026, 2), Ok(1024));
        assert_eq!(buckets_for(2, 1), Ok(2));
        assert_eq!(buckets_for(4, 2), Ok(2));
        assert_eq!(buckets_for(2000, 255), Ok(8));
        assert_eq!(buckets_for(100, 4), Ok(32));
        assert_eq!(buckets_for(i64::MAX, 1), Ok(1 << 63));
        for (cap, bs) in [
            (3, 2),
            (1, 1),
            (7, 4),
            (100, 255),
            (0, 2),
            (-5, 2),
            (i64::MIN, 1),
        ] {
            assert_eq!(
                buckets_for(cap, bs),
                Err(ParamError::CapacityTooSmall),
                "{cap}"
            );
        }
    }

    #[test]
    fn settings_are_bounded_and_expansion_rounds_up() {
        assert_eq!(bucket_size(1), Ok(1));
        assert_eq!(bucket_size(255), Ok(255));
        assert!(bucket_size(0).is_err() && bucket_size(256).is_err() && bucket_size(-1).is_err());
        assert_eq!(max_iterations(65535), Ok(65535));
        assert!(max_iterations(0).is_err() && max_iterations(65536).is_err());
        assert_eq!(expansion(0), Ok(0));
        assert_eq!(expansion(3), Ok(4));
        assert_eq!(expansion(32768), Ok(32768));
        assert_eq!(expansion(32767), Ok(32768));
        assert!(expansion(32769).is_err() && expansion(-1).is_err());
        assert!(Params::default().check().is_ok());
        let bad = |p: Params| p.check().is_err();
        assert!(bad(Params {
            bucket_size: 0,
            ..Params::default()
        }));
        assert!(bad(Params {
            max_iterations: 0,
            ..Params::default()
        }));
        assert!(bad(Params {
            expansion: 3,
            ..Params::default()
        }));
        assert!(bad(Params {
            expansion: 65535,
            ..Params::default()
        }));
    }
}

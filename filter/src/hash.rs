//! Item hashing: every item is hashed exactly once, to 128 bits, and every layer of a chain
//! derives its probes from that one hash.
//!
//! xxh3-128 is used because it is fast on short keys and passes SMHasher; the two 64-bit
//! halves are independent enough to drive block selection (`lo`) and in-block bit positions
//! (`hi`) separately.

use xxhash_rust::xxh3::xxh3_128;

/// The 128-bit hash of one item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemHash {
    /// Chooses the blocks an item lives in.
    pub lo: u64,
    /// Seeds the stream of in-block bit positions.
    pub hi: u64,
}

impl ItemHash {
    /// Hashes an item's bytes.
    #[inline]
    pub fn of(item: &[u8]) -> Self {
        let h = xxh3_128(item);
        ItemHash {
            lo: h as u64,
            hi: (h >> 64) as u64,
        }
    }
}

/// The odd constant of the golden ratio, used to step through hash streams.
pub(crate) const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A 64-bit finaliser (Stafford's mix13, as used by SplitMix64): every input bit affects
/// every output bit, so `mix64(x + i * GOLDEN_GAMMA)` gives independent-looking words.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_is_deterministic_and_splits_the_128_bits() {
        let h = ItemHash::of(b"layerbloom");
        let full = xxh3_128(b"layerbloom");
        assert_eq!(h.lo, full as u64);
        assert_eq!(h.hi, (full >> 64) as u64);
        assert_eq!(h, ItemHash::of(b"layerbloom"));
        assert_ne!(h, ItemHash::of(b"layerbloom "));
    }

    #[test]
    fn empty_and_binary_items_hash() {
        assert_ne!(ItemHash::of(b""), ItemHash::of(b"\0"));
        assert_ne!(ItemHash::of(b"\0"), ItemHash::of(b"\0\0"));
    }

    #[test]
    fn mix64_is_a_bijection_on_samples() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000u64 {
            assert!(seen.insert(mix64(i)));
        }
    }
}

//! Item hashing: every item is hashed exactly once, to 128 bits, and every layer of a chain
//! derives its probes from that one hash.
//!
//! xxh3-128 is used because it is fast on short keys and passes SMHasher; the two 64-bit
//! halves are independent enough to drive block selection (`lo`) and in-block bit positions
//! (`hi`) separately.

use xxhash_rust::xxh3::xxh3_128;

/// The 128-bit hash of one item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// MurmurHash64A (Austin Appleby, public domain), RedisBloom's 64-bit item hash.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("8-byte block"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// MurmurHash2, 32-bit (Austin Appleby, public domain), the item hash of RedisBloom filters
/// written before it forced 64-bit hashing.
pub fn murmur2_32(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = seed ^ data.len() as u32;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes(block.try_into().expect("4-byte block"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u32::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
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

//! The add of a new item with AVX-512: the bits an item sets in a block are built as one
//! 512-bit register (a shift per position, as every lane shifts `1` by the position less its
//! first bit, which leaves `0` in every lane but the position's), then tested, set and counted
//! in a few instructions per block instead of a few per bit. The bits and counts are the
//! position-wise add's (`BlockedLayer::insert_new_as`): a position drawn twice is one bit of
//! the mask, as the second draw finds it set there; slots that share a block are applied one
//! after the other.

use std::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_andnot_si512, _mm512_load_si512, _mm512_or_si512,
    _mm512_popcnt_epi64, _mm512_reduce_add_epi64, _mm512_set1_epi64, _mm512_setr_epi64,
    _mm512_setzero_si512, _mm512_sllv_epi64, _mm512_store_si512, _mm512_sub_epi64,
    _mm512_test_epi64_mask,
};

use std::sync::atomic::{AtomicU8, Ordering};

use super::{block_index, Block, BlockedLayer, Stream};
use crate::hash::ItemHash;

/// Proof that this CPU has AVX-512F and AVX-512 VPOPCNTDQ: only `detect` makes one.
#[derive(Clone, Copy)]
pub(super) struct Avx512(());

/// What `detect` found: `UNKNOWN` until it first looks.
static FOUND: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const ABSENT: u8 = 1;
const PRESENT: u8 = 2;

impl Avx512 {
    /// The proof, where the CPU has both. Asked once an add: one load of what was found.
    #[inline(always)]
    pub(super) fn detect() -> Option<Avx512> {
        match FOUND.load(Ordering::Relaxed) {
            PRESENT => Some(Avx512(())),
            ABSENT => None,
            _ => Self::look(),
        }
    }

    #[cold]
    fn look() -> Option<Avx512> {
        let present = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vpopcntdq");
        FOUND.store(if present { PRESENT } else { ABSENT }, Ordering::Relaxed);
        present.then_some(Avx512(()))
    }
}

impl BlockedLayer {
    /// `insert_new_shaped` with the blocks' bits in 512-bit registers.
    #[inline(always)]
    pub(super) fn insert_new_avx512<const B: u32, const K: u32>(
        &mut self,
        hash: &ItemHash,
        _: Avx512,
    ) -> u32 {
        // SAFETY: an `Avx512` exists only where the CPU has both features.
        unsafe { self.insert_new_avx512_unchecked::<B, K>(hash) }
    }

    #[target_feature(enable = "avx512f,avx512vpopcntdq")]
    #[inline(never)]
    fn insert_new_avx512_unchecked<const B: u32, const K: u32>(&mut self, hash: &ItemHash) -> u32 {
        let stream = Stream::of(hash.hi, B * K);
        let blocks = self.meta.geometry.blocks;
        let first = block_index(hash, 0, blocks);
        let mask = block_mask(&stream, 0, K);
        let bits = load(&self.blocks[first]);
        let missing = _mm512_andnot_si512(bits, mask);
        if _mm512_test_epi64_mask(missing, missing) == 0 {
            return self.insert_past_first(hash, B, K);
        }
        store(&mut self.blocks[first], _mm512_or_si512(bits, mask));
        let mut flipped = _mm512_popcnt_epi64(missing);
        for slot in 1..B {
            let index = block_index(hash, slot, blocks);
            let mask = block_mask(&stream, slot * K, K);
            let bits = load(&self.blocks[index]);
            let missing = _mm512_andnot_si512(bits, mask);
            flipped = _mm512_add_epi64(flipped, _mm512_popcnt_epi64(missing));
            store(&mut self.blocks[index], _mm512_or_si512(bits, mask));
        }
        let flipped = _mm512_reduce_add_epi64(flipped) as u32;
        self.count_item(flipped);
        flipped
    }
}

/// The bits of the stream's positions `from..from + k` in one block, lane `i` holding the
/// block's word `i`: a variable shift by a count of 64 or more (or a "negative" one, which is
/// a large unsigned count) gives `0`.
#[target_feature(enable = "avx512f")]
#[inline]
fn block_mask(stream: &Stream, from: u32, k: u32) -> __m512i {
    let first_bits = _mm512_setr_epi64(0, 64, 128, 192, 256, 320, 384, 448);
    let one = _mm512_set1_epi64(1);
    let mut mask = _mm512_setzero_si512();
    for j in from..from + k {
        let pos = _mm512_set1_epi64(i64::from(stream.at(j)));
        mask = _mm512_or_si512(
            mask,
            _mm512_sllv_epi64(one, _mm512_sub_epi64(pos, first_bits)),
        );
    }
    mask
}

#[target_feature(enable = "avx512f")]
#[inline]
fn load(block: &Block) -> __m512i {
    // SAFETY: a `Block` is 64 bytes aligned to 64, as the aligned load needs.
    unsafe { _mm512_load_si512(block.0.as_ptr().cast()) }
}

#[target_feature(enable = "avx512f")]
#[inline]
fn store(block: &mut Block, bits: __m512i) {
    // SAFETY: as in `load`, and the block is borrowed mutably.
    unsafe { _mm512_store_si512(block.0.as_mut_ptr().cast(), bits) }
}

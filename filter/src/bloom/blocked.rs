//! The cache-local ("blocked") layer.
//!
//! # Layout and probes
//! Bits live in 64-byte, cache-line-aligned blocks of 512 bits. An item touches `b` blocks
//! (1 to 4, fixed per layer) and sets `k` bits in each:
//!
//! * block of slot 0: `lo` of the item's 128-bit hash; block of slot `s > 0`:
//!   `mix64(lo + s·γ)`. Each word is reduced to a block index by multiply-shift,
//!   `(word · blocks) >> 64`, which is uniform without a division.
//! * bit positions: 9-bit fields taken from a stream of words, the first being `hi`, the n-th
//!   after it `mix64(hi + n·γ)`; 7 positions per word. Positions are independent and uniform
//!   with replacement, exactly the model `sizing` solves.
//!
//! A lookup builds the `k` positions of one block as a 512-bit mask, then tests the whole mask
//! at once: eight AND/compare pairs with no data-dependent branch inside a block. An add
//! tests and sets position by position instead (`k` is small against the block's 512 bits,
//! and an add must also count the bits it flips), except on CPUs with AVX-512, where a
//! block's mask fits one register and is built, tested, set and counted at once (`avx512`):
//! the same bits either way.
//!
//! The layer also counts its set bits (an insert knows which bits it flipped), so its fill
//! ratio and current false-positive rate come free.

use crate::bloom::layer::{format_g, Allocation, Layer, LayerPlan, LayerSummary};
use crate::bloom::math;
use crate::bloom::sizing::{
    self, Geometry, BLOCK_BYTES, MAX_BLOCKS_PER_ITEM, MAX_HASHES_PER_BLOCK, MIN_SIZING_ERROR,
};
use crate::bloom::spec::{FilterSpec, Layout};
use crate::error::FilterError;
use crate::hash::{mix64, ItemHash, GOLDEN_GAMMA};
use crate::zeroed::{advise_huge_pages, HugeSchedule, HUGE_PAGE};

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Words in a block.
const WORDS: usize = 8;
/// Bit positions drawn from one 64-bit word of the position stream (9 bits each).
const POSITIONS_PER_WORD: u32 = 7;

/// One cache line of filter bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Block(pub [u64; WORDS]);

const _: () = assert!(std::mem::size_of::<Block>() as u64 == BLOCK_BYTES);
const _: () = assert!(std::mem::align_of::<Block>() == 64);

// SAFETY: a `Block` is eight `u64` words and nothing else; all-zero is the empty block.
unsafe impl crate::zeroed::Zeroable for Block {}

// Persisted bit arrays are the blocks' bytes with each word little-endian; the byte views
// below reinterpret memory directly, which matches that only on little-endian targets.
#[cfg(not(target_endian = "little"))]
compile_error!("layerbloom's persisted formats assume a little-endian target");

/// A 512-bit probe mask for one block.
pub type Mask = [u64; WORDS];

/// The mask of an item's first block in any layer setting `k` bits per block (the position
/// stream depends only on the hash): a chain computes it once for all its layers of that `k`.
#[inline]
pub fn first_mask(hash: &ItemHash, k: u32) -> Mask {
    Positions::new(hash.hi).mask(k)
}

/// The stream of 9-bit in-block positions of one item.
struct Positions {
    seed: u64,
    word: u64,
    left: u32,
    refills: u64,
}

impl Positions {
    #[inline]
    fn new(hi: u64) -> Self {
        Positions {
            seed: hi,
            word: hi,
            left: POSITIONS_PER_WORD,
            refills: 0,
        }
    }

    #[inline]
    fn next(&mut self) -> u32 {
        if self.left == 0 {
            self.refills += 1;
            self.word = mix64(
                self.seed
                    .wrapping_add(self.refills.wrapping_mul(GOLDEN_GAMMA)),
            );
            self.left = POSITIONS_PER_WORD;
        }
        let pos = (self.word & 511) as u32;
        self.word >>= 9;
        self.left -= 1;
        pos
    }

    #[inline]
    fn mask(&mut self, k: u32) -> Mask {
        let mut mask = [0u64; WORDS];
        for _ in 0..k {
            let pos = self.next();
            mask[(pos >> 6) as usize] |= 1u64 << (pos & 63);
        }
        mask
    }
}

/// The most words of the position stream one item draws (`MAX_BLOCKS_PER_ITEM` blocks of
/// `MAX_HASHES_PER_BLOCK` positions).
const MAX_STREAM_WORDS: usize =
    (MAX_BLOCKS_PER_ITEM * MAX_HASHES_PER_BLOCK).div_ceil(POSITIONS_PER_WORD) as usize;

/// An item's whole position stream, drawn at once (the same positions as `Positions`): an add
/// reads the positions of a block twice, to check it and to set it, and a shape known when
/// compiling (`insert_new_shaped`) turns every position into a fixed shift of a word.
struct Stream([u64; MAX_STREAM_WORDS]);

impl Stream {
    /// The words that `positions` positions take.
    #[inline(always)]
    fn of(hi: u64, positions: u32) -> Self {
        let mut words = [0u64; MAX_STREAM_WORDS];
        words[0] = hi;
        for n in 1..positions.div_ceil(POSITIONS_PER_WORD) {
            words[n as usize] = mix64(hi.wrapping_add(u64::from(n).wrapping_mul(GOLDEN_GAMMA)));
        }
        Stream(words)
    }

    /// The stream's `j`-th position.
    #[inline(always)]
    fn at(&self, j: u32) -> u32 {
        let word = self.0[(j / POSITIONS_PER_WORD) as usize];
        ((word >> (9 * (j % POSITIONS_PER_WORD))) & 511) as u32
    }
}

impl Block {
    /// Whether the block holds the bits of the stream's positions `from..from + k`. Every bit
    /// is tested, without an exit on the first clear one: for a new item the answer is nearly
    /// always "no" at the first block, which one branch predicts, where a branch per bit would
    /// not be.
    #[inline(always)]
    fn holds(&self, stream: &Stream, from: u32, k: u32) -> bool {
        let mut all = 1u64;
        for j in from..from + k {
            let pos = stream.at(j);
            all &= self.0[(pos >> 6) as usize] >> (pos & 63);
        }
        all & 1 == 1
    }

    /// Sets the bits of the stream's positions `from..from + k`, one at a time, and returns
    /// how many were clear. An item sets few bits in a block (`k` of 512), so this is a few
    /// instructions a bit, where building and applying a 512-bit mask in 64-bit words costs a
    /// pass over eight of them; a position drawn twice is set (and counted) once, as the second
    /// finds it set.
    #[inline(always)]
    fn set(&mut self, stream: &Stream, from: u32, k: u32) -> u32 {
        let mut flipped = 0;
        for j in from..from + k {
            let pos = stream.at(j);
            let word = &mut self.0[(pos >> 6) as usize];
            flipped += ((!*word >> (pos & 63)) & 1) as u32;
            *word |= 1u64 << (pos & 63);
        }
        flipped
    }
}

/// Asks the CPU to start loading a cache line; it never faults, whatever the address.
#[inline(always)]
pub(crate) fn prefetch(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint with no architectural effect; any address is allowed.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// The block an item's slot `slot` lives in.
#[inline]
fn block_index(hash: &ItemHash, slot: u32, blocks: u64) -> usize {
    let word = if slot == 0 {
        hash.lo
    } else {
        mix64(
            hash.lo
                .wrapping_add(u64::from(slot).wrapping_mul(GOLDEN_GAMMA)),
        )
    };
    ((u128::from(word) * u128::from(blocks)) >> 64) as usize
}

/// Appends the blocks held in `bytes` (whole blocks, as persisted) to `blocks`, which has
/// room for them: one bulk copy, as the persisted bytes are the blocks' memory on this
/// little-endian target.
pub(crate) fn extend_from_bytes(blocks: &mut Vec<Block>, bytes: &[u8]) {
    let count = bytes.len() / BLOCK_BYTES as usize;
    assert!(
        bytes.len().is_multiple_of(BLOCK_BYTES as usize)
            && blocks.capacity() - blocks.len() >= count,
        "whole blocks, with room reserved"
    );
    // SAFETY: the destination is reserved and uninitialised room for `count` blocks; any
    // byte pattern is a valid `Block` (eight u64 words), so after the copy the blocks are
    // initialised; the source is a distinct slice of exactly `count` blocks' bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            blocks.as_mut_ptr().add(blocks.len()).cast::<u8>(),
            bytes.len(),
        );
        blocks.set_len(blocks.len() + count);
    }
}

/// The metadata of a layer: everything but the bits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerMeta {
    /// Items the layer was sized for.
    pub capacity: u64,
    /// The false-positive rate it was sized for.
    pub error: f64,
    /// Items added to it.
    pub items: u64,
    /// Its geometry.
    pub geometry: Geometry,
}

/// One layer of a scalable filter.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockedLayer {
    meta: LayerMeta,
    blocks: Vec<Block>,
    set_bits: u64,
    estimate: FprEstimate,
    /// When the blocks get huge pages: from `dense_mark`, for a layer filled by its adds.
    huge: HugeSchedule,
}

/// A layer's estimated false-positive rate (`math::blocked_fpr`, a sum over a Poisson window:
/// microseconds) as of a set-bit count. Kept for layers that no longer change, so that BF.INFO
/// of a long chain reads one number per layer instead of recomputing every layer.
#[derive(Debug, Clone, Copy)]
struct FprEstimate {
    set_bits: u64,
    fpr: f64,
}

impl FprEstimate {
    /// An estimate that matches no count (so is recomputed when asked).
    const STALE: FprEstimate = FprEstimate {
        set_bits: u64::MAX,
        fpr: 0.0,
    };
}

/// A cache says nothing about the layer: two layers with the same bits are equal whatever
/// their caches hold.
impl PartialEq for FprEstimate {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Allocates `count` zeroed blocks, reporting failure instead of aborting.
///
/// The memory comes from the allocator's `alloc_zeroed` (calloc underneath, or the module
/// allocator's own, which discards large ranges instead of writing them): its cost does not
/// grow with `count`, and pages nothing writes to are never made resident. A filter of
/// gigabytes is a few page faults until items are added, not seconds of zero-filling.
///
/// No huge-page hint here: with it every first touch of a 2 MiB range faults in the whole
/// range (measured: 100 items added to a new 1.9 GB filter made 356 MB resident, 1000 items
/// 1.4 GB; without it a few hundred KB). The hint is given once the layer is dense anyway
/// (`DENSE_TOUCHES`), and its 4 KiB pages are then collapsed (`HugeSchedule`).
pub(crate) fn zeroed_blocks(count: u64) -> Result<Vec<Block>, FilterError> {
    crate::zeroed::try_zeroed_vec::<Block>(count)
}

/// A layer whose items have touched this many blocks per 4 KiB page (on average) has nearly
/// every page resident (all but `e^-4`, 2%): from then on huge pages cost no memory, only
/// speed lookups up, so the hint is given when the layer's item count gets there.
const DENSE_TOUCHES: u64 = 4;

/// The item count at which a layer of this geometry is dense (`u64::MAX`: never advised, too
/// small for a huge page).
fn dense_mark(g: &Geometry) -> u64 {
    if g.bytes() < HUGE_PAGE as u64 {
        return u64::MAX;
    }
    (g.bytes() / 4096 * DENSE_TOUCHES).div_ceil(u64::from(g.blocks_per_item.max(1)))
}

impl BlockedLayer {
    /// A new, empty layer for `capacity` items at `error`.
    pub fn new(capacity: u64, error: f64) -> Result<Self, FilterError> {
        let geometry = sizing::plan_layer(capacity, error)?;
        Self::with_geometry(capacity, error, geometry)
    }

    /// A new, empty layer with a given geometry.
    pub(crate) fn with_geometry(
        capacity: u64,
        error: f64,
        geometry: Geometry,
    ) -> Result<Self, FilterError> {
        let blocks = zeroed_blocks(geometry.blocks)?;
        Ok(BlockedLayer {
            meta: LayerMeta {
                capacity,
                error,
                items: 0,
                geometry,
            },
            blocks,
            set_bits: 0,
            estimate: FprEstimate::STALE,
            huge: HugeSchedule::dense_at(dense_mark(&geometry)),
        })
    }

    /// A layer of persisted metadata whose bits are all zero (a `BF.LOADCHUNK` header's, to be
    /// filled by chunks): nothing to count, so its untouched pages are never read.
    pub(crate) fn zeroed_with_meta(meta: LayerMeta) -> Result<Self, FilterError> {
        let mut layer = BlockedLayer {
            meta,
            blocks: zeroed_blocks(meta.geometry.blocks)?,
            set_bits: 0,
            estimate: FprEstimate::STALE,
            huge: HugeSchedule::dense_at(dense_mark(&meta.geometry)),
        };
        // The chunks that follow a layer with items write every page: huge pages cost no
        // memory there. A layer without items is a creation (how a replica and the AOF
        // receive BF.RESERVE) or has no chunks: its sparse adds must not fault 2 MiB pages in,
        // so it is hinted once dense, as a new layer is.
        if meta.items > 0 {
            advise_huge_pages(&layer.blocks);
            layer.huge = HugeSchedule::DONE;
        }
        layer.refresh_estimate();
        Ok(layer)
    }

    /// A layer from persisted parts. The caller has checked that `blocks` matches the
    /// geometry; the set-bit count is recomputed rather than trusted.
    pub(crate) fn from_parts(meta: LayerMeta, blocks: Vec<Block>) -> Self {
        debug_assert_eq!(blocks.len() as u64, meta.geometry.blocks);
        let mut layer = BlockedLayer {
            meta,
            blocks,
            set_bits: 0,
            estimate: FprEstimate::STALE,
            huge: HugeSchedule::dense_at(dense_mark(&meta.geometry)),
        };
        layer.set_bits = crate::bits::count_ones(layer.as_bytes());
        layer.refresh_estimate();
        layer
    }

    /// A deep copy as lazy as the layer (`zeroed::try_copy_sparse`), reporting allocation
    /// failure instead of aborting; a dense layer's copy is in huge pages at once.
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let (hint, huge) = self.huge.for_copy(self.meta.items);
        let blocks = crate::zeroed::try_copy_sparse(&self.blocks, self.set_bits == 0, hint)?;
        Ok(BlockedLayer {
            meta: self.meta,
            blocks,
            set_bits: self.set_bits,
            estimate: self.estimate,
            huge,
        })
    }

    /// The layer's metadata.
    pub fn meta(&self) -> &LayerMeta {
        &self.meta
    }

    /// Sets the item count, which a merge estimates from the bits (`merge`). The layer's
    /// huge-page hint was given when its bits were written, so nothing else follows from it.
    pub(crate) fn set_items(&mut self, items: u64) {
        self.meta.items = items;
    }

    /// Items added to this layer.
    pub fn items(&self) -> u64 {
        self.meta.items
    }

    /// Items this layer was sized for.
    pub fn capacity(&self) -> u64 {
        self.meta.capacity
    }

    /// The error rate this layer was sized for.
    pub fn error(&self) -> f64 {
        self.meta.error
    }

    /// The layer's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.meta.geometry
    }

    /// Whether the layer holds as many items as it was sized for.
    pub fn is_full(&self) -> bool {
        self.meta.items >= self.meta.capacity
    }

    /// Bits currently set.
    pub fn set_bits(&self) -> u64 {
        self.set_bits
    }

    /// Bits in the layer.
    pub fn total_bits(&self) -> u64 {
        self.meta.geometry.blocks * u64::from(sizing::BLOCK_BITS)
    }

    /// Bytes of the bit array.
    pub fn bytes(&self) -> u64 {
        self.blocks.capacity() as u64 * BLOCK_BYTES
    }

    /// Starts loading the blocks an item will probe, so that several items' (or layers') cache
    /// misses overlap instead of queueing.
    #[inline]
    pub fn prefetch(&self, hash: &ItemHash) {
        let g = &self.meta.geometry;
        for slot in 0..g.blocks_per_item {
            let index = block_index(hash, slot, g.blocks);
            prefetch(self.blocks[index].0.as_ptr().cast());
        }
    }

    /// Starts loading the first block an item probes: the one an absent item is usually
    /// refused by.
    #[inline]
    pub fn prefetch_first(&self, hash: &ItemHash) {
        let index = block_index(hash, 0, self.meta.geometry.blocks);
        prefetch(self.blocks[index].0.as_ptr().cast());
    }

    /// Whether the item's first block holds all of `mask0` (its `first_mask` for this layer's
    /// `k`); `false` proves the item absent from this layer.
    #[inline]
    pub fn first_block_matches(&self, hash: &ItemHash, mask0: &Mask) -> bool {
        let block = &self.blocks[block_index(hash, 0, self.meta.geometry.blocks)];
        mask0
            .iter()
            .zip(&block.0)
            .fold(0u64, |acc, (m, b)| acc | (m & !b))
            == 0
    }

    /// Whether every bit of the item's probe is set. A layer of a shape the sizing table gives
    /// runs a check compiled for that shape (`contains_shaped`: each position a fixed shift of
    /// a fixed word of the stream, tested in place, no 512-bit mask built); any other shape the
    /// same code with the shape read at run time.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        self.contains_by_shape(hash)
    }

    /// `contains` for layers of `B` blocks per item and `K` bits per block.
    #[inline(never)]
    fn contains_shaped<const B: u32, const K: u32>(&self, hash: &ItemHash) -> bool {
        self.contains_as(hash, B, K)
    }

    /// `contains` for a shape outside the sizing table.
    #[inline(never)]
    fn contains_unshaped(&self, hash: &ItemHash, b: u32, k: u32) -> bool {
        self.contains_as(hash, b, k)
    }

    /// Slot by slot, stopping at the first block that lacks a bit (for an absent item nearly
    /// always the first).
    #[inline(always)]
    fn contains_as(&self, hash: &ItemHash, b: u32, k: u32) -> bool {
        let stream = Stream::of(hash.hi, b * k);
        let blocks = self.meta.geometry.blocks;
        (0..b).all(|slot| self.blocks[block_index(hash, slot, blocks)].holds(&stream, slot * k, k))
    }

    /// Sets the item's bits and counts it, whether or not its bits were already set (the
    /// chain decides what counts as new). Returns the number of bits that flipped.
    #[inline]
    pub fn insert(&mut self, hash: &ItemHash) -> u32 {
        let flipped = self.set_item_bits(hash);
        self.count_item(flipped);
        flipped
    }

    /// Sets every bit of the item's probe, slot after slot (two slots can land in the same
    /// block: the second then finds the first's bits set), and returns how many flipped.
    #[inline(always)]
    fn set_item_bits(&mut self, hash: &ItemHash) -> u32 {
        let g = self.meta.geometry;
        let stream = Stream::of(hash.hi, g.blocks_per_item * g.hashes_per_block);
        self.set_slots(hash, &stream, 0, g.blocks_per_item, g.hashes_per_block)
    }

    /// Sets the bits of the item's slots `from..b` (of `k` bits each) and returns how many
    /// flipped.
    #[inline(always)]
    fn set_slots(&mut self, hash: &ItemHash, stream: &Stream, from: u32, b: u32, k: u32) -> u32 {
        debug_assert!(b <= MAX_BLOCKS_PER_ITEM && k <= MAX_HASHES_PER_BLOCK);
        let blocks = self.meta.geometry.blocks;
        let mut flipped = 0;
        for slot in from..b {
            flipped += self.blocks[block_index(hash, slot, blocks)].set(stream, slot * k, k);
        }
        flipped
    }

    /// Counts one item whose insert flipped `flipped` bits.
    #[inline(always)]
    fn count_item(&mut self, flipped: u32) {
        self.set_bits += u64::from(flipped);
        // Saturating: counts loaded from other writers can sit at the top of the range.
        self.meta.items = self.meta.items.saturating_add(1);
        if self.huge.due(self.meta.items) {
            self.huge.step(&self.blocks, self.meta.items);
        }
    }

    /// Sets the item's bits unless every one is set already. Returns the number of bits that
    /// flipped; 0 means the layer held the item, and then nothing changed (no block is
    /// written, so no page is dirtied) and nothing is counted. Otherwise the item is counted
    /// exactly as by `insert`.
    ///
    /// A layer of a shape the sizing table gives runs an add compiled for that shape: with
    /// AVX-512 where the CPU has it (`insert_new_avx512`), else position by position
    /// (`insert_new_shaped`); any other shape (a decoded geometry outside the table) the
    /// position-wise code with the shape read at run time.
    #[inline(always)]
    pub(crate) fn insert_new(&mut self, hash: &ItemHash) -> u32 {
        #[cfg(target_arch = "x86_64")]
        let avx512 = avx512::Avx512::detect();
        #[cfg(not(target_arch = "x86_64"))]
        let avx512 = None;
        self.insert_new_by_shape(hash, avx512)
    }

    /// `insert_new` for layers of `B` blocks per item and `K` bits per block: every position
    /// is a fixed shift of a fixed word of the stream, and the loops are unrolled.
    #[inline(never)]
    fn insert_new_shaped<const B: u32, const K: u32>(&mut self, hash: &ItemHash) -> u32 {
        self.insert_new_as(hash, B, K)
    }

    /// `insert_new` for a shape outside the sizing table.
    #[inline(never)]
    fn insert_new_any(&mut self, hash: &ItemHash, b: u32, k: u32) -> u32 {
        self.insert_new_as(hash, b, k)
    }

    /// The check reads the blocks slot by slot and stops at the first that lacks a bit (for a
    /// new item nearly always the first); the bits are set from that slot on, as the blocks
    /// before it hold theirs already. The bits and counts are those of checking, then
    /// inserting.
    #[inline(always)]
    fn insert_new_as(&mut self, hash: &ItemHash, b: u32, k: u32) -> u32 {
        let stream = Stream::of(hash.hi, b * k);
        let first = block_index(hash, 0, self.meta.geometry.blocks);
        if self.blocks[first].holds(&stream, 0, k) {
            return self.insert_past_first(hash, b, k);
        }
        let flipped = self.set_slots(hash, &stream, 0, b, k);
        self.count_item(flipped);
        flipped
    }

    /// The rest of `insert_new` for an item whose first block holds its bits (an item
    /// present, or one of the few new items whose first block is full of its bits): apart, so
    /// that the common path's check is compiled for slot 0 alone (and its stream stays in
    /// registers). Counts the item as `insert_new` does.
    #[cold]
    #[inline(never)]
    fn insert_past_first(&mut self, hash: &ItemHash, b: u32, k: u32) -> u32 {
        let stream = &Stream::of(hash.hi, b * k);
        let blocks = self.meta.geometry.blocks;
        for slot in 1..b {
            if !self.blocks[block_index(hash, slot, blocks)].holds(stream, slot * k, k) {
                let flipped = self.set_slots(hash, stream, slot, b, k);
                self.count_item(flipped);
                return flipped;
            }
        }
        0
    }

    /// The bit array as bytes (each 64-bit word little-endian).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `Block` is `repr(C)` over `[u64; 8]` with no padding (size 64 asserted above),
        // so the vector's initialised elements are `len * 64` initialised bytes, and `u8` has
        // no alignment requirement. The slice borrows `self`, so it cannot outlive the data.
        unsafe {
            std::slice::from_raw_parts(
                self.blocks.as_ptr().cast::<u8>(),
                self.blocks.len() * BLOCK_BYTES as usize,
            )
        }
    }

    /// ORs bytes into the bit array at `offset` (the caller has checked the range) and keeps
    /// the set-bit count exact by recounting the range. A chunk never clears a bit: an item
    /// added while a copy is loaded stays, and a chunk of zeros erases nothing.
    pub(crate) fn or_bytes(&mut self, offset: usize, data: &[u8]) {
        let bytes = self.as_bytes_mut();
        let set = crate::bits::or_into(&mut bytes[offset..offset + data.len()], data);
        self.set_bits += set;
        if set > 0 {
            self.refresh_estimate();
        }
    }

    /// ORs the bits of `other`, a layer of the same plan, in (BF.MERGE), reading only the
    /// pages of `other` that were written (`zeroed::or_written`): the cost follows what it
    /// holds, not its size.
    pub(crate) fn or_layer(&mut self, other: &BlockedLayer) {
        debug_assert_eq!(self.blocks.len(), other.blocks.len());
        if other.set_bits == 0 {
            return;
        }
        let set = crate::zeroed::or_written(self.as_bytes_mut(), other.as_bytes());
        self.set_bits += set;
        if set > 0 {
            self.refresh_estimate();
        }
    }

    /// Recomputes the kept false-positive estimate for the current bits.
    pub(crate) fn refresh_estimate(&mut self) {
        self.estimate = FprEstimate {
            set_bits: self.set_bits,
            fpr: math::blocked_fpr(&self.summary()),
        };
    }

    /// The estimated false-positive rate of the layer's bits (`math::blocked_fpr`): the kept
    /// one when no bit changed since it was computed.
    pub fn estimated_fpr(&self) -> f64 {
        if self.estimate.set_bits == self.set_bits {
            self.estimate.fpr
        } else {
            math::blocked_fpr(&self.summary())
        }
    }

    /// The layer's figures.
    pub fn summary(&self) -> LayerSummary {
        let g = &self.meta.geometry;
        LayerSummary {
            capacity: self.capacity(),
            error: self.error(),
            items: self.items(),
            bytes: g.bytes(),
            set_bits: self.set_bits,
            total_bits: self.total_bits(),
            hashes: g.blocks_per_item * g.hashes_per_block,
            blocks_per_item: g.blocks_per_item,
        }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`; every byte pattern is a valid `u64`, so writes through the
        // byte view cannot create an invalid `Block`. The exclusive borrow of `self` prevents
        // aliasing.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.blocks.as_mut_ptr().cast::<u8>(),
                self.blocks.len() * BLOCK_BYTES as usize,
            )
        }
    }

    /// The false-positive rate expected from the layer's current item count.
    pub fn expected_fpr(&self) -> f64 {
        sizing::expected_fpr(self.meta.items, &self.meta.geometry)
    }

    /// The exact false-positive rate of this layer's current bits for a random absent item:
    /// the mean over blocks of `(set/512)^k`, raised to `b` (slots pick blocks independently).
    pub fn state_fpr(&self) -> f64 {
        let g = &self.meta.geometry;
        let k = g.hashes_per_block as i32;
        let per_block: f64 = self
            .blocks
            .iter()
            .map(|b| {
                let set: u32 = b.0.iter().map(|w| w.count_ones()).sum();
                (f64::from(set) / 512.0).powi(k)
            })
            .sum::<f64>()
            / self.blocks.len() as f64;
        per_block.powi(g.blocks_per_item as i32)
    }
}

/// What makes the AVX-512 adds (`avx512`) possible: nothing where there are none.
#[cfg(target_arch = "x86_64")]
type Avx512 = avx512::Avx512;
#[cfg(not(target_arch = "x86_64"))]
type Avx512 = std::convert::Infallible;

/// Defines `insert_new_by_shape`, which calls the `insert_new_shaped` of the layer's shape
/// when it is one of those listed (and `insert_new_any` otherwise), and, for the tests, the
/// list.
macro_rules! shaped_inserts {
    ($(($b:literal, $k:literal)),* $(,)?) => {
        /// The shapes with an add compiled for them.
        #[cfg(test)]
        const SHAPED: &[(u32, u32)] = &[$(($b, $k)),*];

        impl BlockedLayer {
            /// `avx512`: the CPU's AVX-512, where it has it (`avx512::Avx512::detect`).
            #[inline(always)]
            fn insert_new_by_shape(&mut self, hash: &ItemHash, avx512: Option<Avx512>) -> u32 {
                let g = &self.meta.geometry;
                match (g.blocks_per_item, g.hashes_per_block) {
                    $(($b, $k) => match avx512 {
                        #[cfg(target_arch = "x86_64")]
                        Some(proof) => self.insert_new_avx512::<$b, $k>(hash, proof),
                        _ => self.insert_new_shaped::<$b, $k>(hash),
                    },)*
                    (b, k) => self.insert_new_any(hash, b, k),
                }
            }

            /// `contains` compiled for the layer's shape when it is one of those listed.
            #[inline(always)]
            fn contains_by_shape(&self, hash: &ItemHash) -> bool {
                let g = &self.meta.geometry;
                match (g.blocks_per_item, g.hashes_per_block) {
                    $(($b, $k) => self.contains_shaped::<$b, $k>(hash),)*
                    (b, k) => self.contains_unshaped(hash, b, k),
                }
            }
        }
    };
}

// Every shape of the sizing table (`sizing::table_shapes`; a test checks that none is missing).
shaped_inserts! {
    (1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 6), (1, 7),
    (2, 3), (2, 4), (2, 5), (2, 6), (2, 7),
    (3, 5), (3, 6), (3, 7),
    (4, 5), (4, 6), (4, 7), (4, 8), (4, 9), (4, 10), (4, 11),
}

impl LayerPlan for LayerMeta {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn error(&self) -> f64 {
        self.error
    }

    fn bytes(&self) -> u64 {
        self.geometry.bytes()
    }
}

/// Whether any layer holds a hash. With several layers, every layer's first block is
/// requested before any is tested, so a chain's cache misses overlap (an item absent from a
/// layer is almost always refused by its first block); newest layer first, as it is the
/// largest and most likely to answer.
///
/// Layers of a chain that set the same number of bits per block share the item's first-block
/// mask, so it is computed once per distinct shape: a layer that does not hold the item then
/// costs one multiply, one load and eight AND/compares.
#[inline]
fn blocked_contains(layers: &[BlockedLayer], hash: &ItemHash) -> bool {
    if let [only] = layers {
        return only.contains(hash);
    }
    for layer in layers {
        layer.prefetch_first(hash);
    }
    // First pass without data-dependent branches: which layers' first blocks match, as bits
    // of a word, so the CPU keeps every layer's load in flight at once. Second pass: the full
    // check of those layers only, newest first.
    let mut k = 0;
    let mut mask0 = [0u64; 8];
    for (chunk_start, chunk) in layers.chunks(64).enumerate().rev() {
        let mut matches = 0u64;
        for (i, layer) in chunk.iter().enumerate() {
            let layer_k = layer.geometry().hashes_per_block;
            if layer_k != k {
                k = layer_k;
                mask0 = first_mask(hash, k);
            }
            matches |= u64::from(layer.first_block_matches(hash, &mask0)) << i;
        }
        while matches != 0 {
            let i = 63 - matches.leading_zeros() as usize;
            if layers[chunk_start * 64 + i].contains(hash) {
                return true;
            }
            matches &= !(1u64 << i);
        }
    }
    false
}

/// Every method forwards to the inherent one of the same name, or is the blocked layout's
/// answer to what a chain asks.
impl Layer for BlockedLayer {
    const LAYOUT: Layout = Layout::Blocked;
    const BITS_ALIGN: u64 = std::mem::align_of::<Block>() as u64;
    const COUNTS_WORDS: bool = true;

    type Params = ();
    type Hash = ItemHash;
    type Meta = LayerMeta;

    fn params_for(_: &FilterSpec) {}

    #[inline(always)]
    fn hash(item: &[u8], _: &()) -> ItemHash {
        ItemHash::of(item)
    }

    fn plan(capacity: u64, error: f64, _: &()) -> Result<LayerMeta, sizing::SizingError> {
        Ok(LayerMeta {
            capacity,
            error,
            items: 0,
            geometry: sizing::plan_layer(capacity, error)?,
        })
    }

    /// Halving forever would reach zero after ~1075 layers; sizing treats rates below its
    /// floor alike, so flooring here changes nothing but keeps the rate valid.
    fn floor_error(error: f64) -> f64 {
        error.max(f64::MIN_POSITIVE)
    }

    /// Under the sizing floor every rate is sized alike (`sizing::MIN_SIZING_ERROR`).
    fn plans_repeat(plan: &LayerMeta) -> bool {
        plan.error < MIN_SIZING_ERROR
    }

    fn empty(plan: LayerMeta) -> Result<Self, FilterError> {
        Self::with_geometry(plan.capacity, plan.error, plan.geometry)
    }

    fn meta(&self) -> &LayerMeta {
        &self.meta
    }

    #[inline(always)]
    fn contains(&self, hash: &ItemHash) -> bool {
        BlockedLayer::contains(self, hash)
    }

    #[inline(always)]
    fn contains_any(layers: &[Self], hash: &ItemHash) -> bool {
        blocked_contains(layers, hash)
    }

    #[inline(always)]
    fn insert(&mut self, hash: &ItemHash) {
        BlockedLayer::insert(self, hash);
    }

    #[inline(always)]
    fn insert_new(&mut self, hash: &ItemHash) -> bool {
        BlockedLayer::insert_new(self, hash) != 0
    }

    #[inline(always)]
    fn is_full(&self) -> bool {
        BlockedLayer::is_full(self)
    }

    /// A layer that no longer changes keeps its false-positive estimate.
    fn seal(&mut self) {
        self.refresh_estimate();
    }

    #[inline(always)]
    fn prefetch(&self, hash: &ItemHash) {
        BlockedLayer::prefetch(self, hash)
    }

    #[inline(always)]
    fn prefetch_first(&self, hash: &ItemHash) {
        BlockedLayer::prefetch_first(self, hash)
    }

    fn summary(&self) -> LayerSummary {
        BlockedLayer::summary(self)
    }

    fn fpr_of(summary: &LayerSummary) -> f64 {
        math::blocked_fpr(summary)
    }

    fn distinct_of(summary: &LayerSummary) -> f64 {
        math::blocked_distinct(summary)
    }

    fn estimated_fpr(&self) -> f64 {
        BlockedLayer::estimated_fpr(self)
    }

    /// RedisBloom's shape with the blocked layout's facts: blocks, blocks per item, bits set
    /// per block.
    fn debug_line(&self, _: &()) -> String {
        let m = &self.meta;
        format!(
            "bytes:{} blocks:{} blocksperitem:{} bitsperblock:{} capacity:{} size:{} ratio:{}",
            m.geometry.bytes(),
            m.geometry.blocks,
            m.geometry.blocks_per_item,
            m.geometry.hashes_per_block,
            m.capacity,
            m.items,
            format_g(m.error)
        )
    }

    fn as_bytes(&self) -> &[u8] {
        BlockedLayer::as_bytes(self)
    }

    fn or_bytes(&mut self, offset: usize, data: &[u8]) {
        BlockedLayer::or_bytes(self, offset, data)
    }

    fn bytes(&self) -> u64 {
        BlockedLayer::bytes(self)
    }

    fn allocation(&self) -> Option<Allocation<'_>> {
        Allocation::of_vec(&self.blocks)
    }

    fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator) {
        crate::relocate::relocate_vec(&mut self.blocks, to);
    }

    fn try_clone(&self) -> Result<Self, FilterError> {
        BlockedLayer::try_clone(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(seed: u64, n: u64) -> impl Iterator<Item = ItemHash> {
        (0..n).map(move |i| ItemHash {
            lo: mix64(seed ^ i.wrapping_mul(0xa076_1d64_78bd_642f)),
            hi: mix64(!seed ^ i.wrapping_mul(0xe703_7ed1_a0b4_28db)),
        })
    }

    #[test]
    fn an_added_item_is_always_found() {
        for &p in &[0.25, 0.01, 1e-4, 1e-9] {
            let mut layer = BlockedLayer::new(5000, p).unwrap();
            for h in hashes(1, 5000) {
                layer.insert(&h);
            }
            assert!(hashes(1, 5000).all(|h| layer.contains(&h)), "p={p}");
            assert_eq!(layer.items(), 5000);
            assert!(layer.is_full());
        }
    }

    /// A header's layer with items is about to be written whole (its chunks follow): huge
    /// pages at once. One without items (a replicated BF.RESERVE) stays sparse until dense.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_loaded_layer_asks_for_huge_pages_at_once_and_a_created_one_only_once_dense() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("no transparent huge pages on this kernel: nothing to check");
            return;
        }
        let advised = |layer: &BlockedLayer| {
            let start = layer.blocks.as_ptr() as usize;
            let inside = start.next_multiple_of(HUGE_PAGE);
            assert!(inside + HUGE_PAGE <= start + layer.blocks.len() * BLOCK_BYTES as usize);
            crate::zeroed::huge_pages_advised(inside as *const u8)
        };
        // 4 * 10^7 items at 1%: ~48 MiB of blocks, over glibc's largest mmap threshold, so a
        // fresh mapping no other test advised.
        let created = BlockedLayer::new(40_000_000, 0.01).unwrap();
        let mut meta = *created.meta();
        assert_eq!(
            advised(&BlockedLayer::zeroed_with_meta(meta).unwrap()),
            Some(false)
        );
        meta.items = 1;
        assert_eq!(
            advised(&BlockedLayer::zeroed_with_meta(meta).unwrap()),
            Some(true)
        );
    }

    /// A layer filled by its adds is in huge pages once past its dense mark and one collapse
    /// step per region after it, not left in 4 KiB pages for khugepaged's slow background
    /// pass (it was: lookups in such a layer paid a page walk each).
    #[test]
    #[cfg(target_os = "linux")]
    fn a_layer_filled_by_adds_is_collapsed_into_huge_pages() {
        if let Some(why) = crate::zeroed::no_huge_pages_here() {
            eprintln!("skipped: {why}");
            return;
        }
        // ~48 MiB of blocks, a fresh mapping of its own (over glibc's mmap threshold).
        let mut layer = BlockedLayer::new(40_000_000, 0.01).unwrap();
        let regions = layer.bytes() / HUGE_PAGE as u64;
        let items =
            dense_mark(layer.geometry()) + crate::zeroed::WRITES_PER_COLLAPSE * (regions + 1);
        for h in hashes(7, items) {
            layer.insert(&h);
        }
        let start = layer.blocks.as_ptr() as usize;
        let inside = start.next_multiple_of(HUGE_PAGE) as *const u8;
        let (huge, size) = crate::zeroed::huge_bytes_of_mapping(inside).unwrap();
        assert!(
            huge * 10 >= size * 9,
            "{} of {} MiB in huge pages after {items} items",
            huge >> 20,
            size >> 20
        );
        // A copy is written whole: in huge pages at once.
        let copy = layer.try_clone().unwrap();
        let inside = (copy.blocks.as_ptr() as usize).next_multiple_of(HUGE_PAGE) as *const u8;
        let (huge, size) = crate::zeroed::huge_bytes_of_mapping(inside).unwrap();
        assert!(huge * 10 >= size * 9, "copy: {huge} of {size} bytes");
    }

    #[test]
    fn an_empty_layer_contains_nothing() {
        let layer = BlockedLayer::new(100, 0.01).unwrap();
        assert!(hashes(2, 1000).all(|h| !layer.contains(&h)));
        assert_eq!(layer.set_bits(), 0);
    }

    #[test]
    fn set_bits_count_matches_the_bits() {
        let mut layer = BlockedLayer::new(1000, 0.001).unwrap();
        let mut flipped = 0u64;
        for h in hashes(3, 1000) {
            flipped += u64::from(layer.insert(&h));
        }
        let counted: u64 = layer
            .as_bytes()
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum();
        assert_eq!(layer.set_bits(), counted);
        assert_eq!(flipped, counted);
        // Inserting again flips nothing.
        let again: u32 = hashes(3, 10).map(|h| layer.insert(&h)).sum();
        assert_eq!(again, 0);
    }

    #[test]
    fn or_of_bytes_keeps_the_count_exact_and_clears_nothing() {
        let mut layer = BlockedLayer::new(1000, 0.01).unwrap();
        layer.or_bytes(3, &[0xff, 0x0f, 0x00]);
        assert_eq!(layer.set_bits(), 12);
        layer.or_bytes(4, &[0x00]);
        assert_eq!(layer.set_bits(), 12);
        layer.or_bytes(4, &[0xf1]);
        assert_eq!(layer.set_bits(), 16);
        assert_eq!(&layer.as_bytes()[3..6], &[0xff, 0xff, 0x00]);
    }

    #[test]
    fn from_parts_recounts_bits() {
        let mut layer = BlockedLayer::new(100, 0.01).unwrap();
        for h in hashes(4, 50) {
            layer.insert(&h);
        }
        let rebuilt = BlockedLayer::from_parts(*layer.meta(), layer.blocks.clone());
        assert_eq!(rebuilt, layer);
    }

    #[test]
    fn blocks_are_cache_line_aligned() {
        let layer = BlockedLayer::new(100_000, 0.01).unwrap();
        assert_eq!(layer.blocks.as_ptr() as usize % 64, 0);
    }

    /// The insert as it was written with masks: each slot's `k` positions ORed into a 512-bit
    /// mask, then its clear bits counted and the mask ORed into the block. The bits and
    /// counts of the position-wise insert must be these.
    fn mask_insert(layer: &mut BlockedLayer, hash: &ItemHash) -> u32 {
        let g = layer.meta.geometry;
        let mut positions = Positions::new(hash.hi);
        let mut flipped = 0;
        for slot in 0..g.blocks_per_item {
            let block = &mut layer.blocks[block_index(hash, slot, g.blocks)];
            let mask = positions.mask(g.hashes_per_block);
            for (word, m) in block.0.iter_mut().zip(&mask) {
                flipped += (m & !*word).count_ones();
                *word |= m;
            }
        }
        layer.set_bits += u64::from(flipped);
        layer.meta.items += 1;
        flipped
    }

    #[test]
    fn position_wise_inserts_set_the_bits_and_counts_of_mask_inserts() {
        // Few blocks, so that an item's slots share blocks and items share bits; every
        // blocks-per-item, every bit count of the sizing table's shapes (each with an add
        // compiled for it, `SHAPED`) and some past it, up to the most a block may take
        // (positions repeat), which take the add of any shape. Each add as it runs here:
        // position by position, and with AVX-512 where this CPU has it.
        #[cfg(target_arch = "x86_64")]
        let avx512s = [None, avx512::Avx512::detect()];
        if avx512s[1..].iter().all(Option::is_none) {
            eprintln!("this CPU has no AVX-512 (F and VPOPCNTDQ): the AVX-512 add is not tested");
        }
        #[cfg(not(target_arch = "x86_64"))]
        let avx512s = [None];
        for blocks in [1, 3, 64] {
            for b in 1..=MAX_BLOCKS_PER_ITEM {
                for k in (1..=12).chain([15, 33, MAX_HASHES_PER_BLOCK]) {
                    for avx512 in avx512s {
                        let geometry = Geometry {
                            blocks,
                            blocks_per_item: b,
                            hashes_per_block: k,
                        };
                        let what =
                            format!("blocks {blocks} b {b} k {k} avx512 {}", avx512.is_some());
                        let new = || BlockedLayer::with_geometry(1 << 20, 0.01, geometry).unwrap();
                        let (mut fused, mut reference) = (new(), new());
                        let (mut plain, mut plain_reference) = (new(), new());
                        // 600 draws from 200 hashes: repeats, which must change nothing.
                        let all: Vec<ItemHash> = hashes(u64::from(b * 100 + k), 200).collect();
                        let mut seen_present = false;
                        for i in 0..600u64 {
                            let h = &all[(mix64(i) % 200) as usize];
                            let expected = if reference.contains(h) {
                                seen_present = true;
                                0
                            } else {
                                mask_insert(&mut reference, h)
                            };
                            assert_eq!(fused.insert_new_by_shape(h, avx512), expected, "{what}");
                            assert_eq!(plain.insert(h), mask_insert(&mut plain_reference, h));
                        }
                        assert!(seen_present, "{what}");
                        for (got, want) in [(&fused, &reference), (&plain, &plain_reference)] {
                            assert_eq!(got.blocks, want.blocks, "{what}");
                            assert_eq!(got.set_bits(), want.set_bits(), "{what}");
                            assert_eq!(got.items(), want.items(), "{what}");
                            assert_eq!(got.set_bits(), crate::bits::count_ones(got.as_bytes()));
                        }
                    }
                }
            }
        }
    }

    /// The check as it was written with masks: each slot's `k` positions ORed into a 512-bit
    /// mask, which the block must hold whole. The position-wise check must answer the same.
    fn mask_contains(layer: &BlockedLayer, hash: &ItemHash) -> bool {
        let g = layer.meta.geometry;
        let mut positions = Positions::new(hash.hi);
        (0..g.blocks_per_item).all(|slot| {
            let block = &layer.blocks[block_index(hash, slot, g.blocks)];
            let mask = positions.mask(g.hashes_per_block);
            mask.iter().zip(&block.0).all(|(m, b)| m & !b == 0)
        })
    }

    #[test]
    fn position_wise_checks_answer_as_mask_checks() {
        // Every shape with a check compiled for it (`SHAPED`) and some past the table's; few
        // blocks, filled so far that absent items are refused at every slot, some pass their
        // first block and fail a later one, and some are false positives.
        let mut false_positives = 0;
        for blocks in [1, 3, 64] {
            for b in 1..=MAX_BLOCKS_PER_ITEM {
                for k in (1..=12).chain([15, 33, MAX_HASHES_PER_BLOCK]) {
                    let geometry = Geometry {
                        blocks,
                        blocks_per_item: b,
                        hashes_per_block: k,
                    };
                    let what = format!("blocks {blocks} b {b} k {k}");
                    let mut layer = BlockedLayer::with_geometry(1 << 20, 0.01, geometry).unwrap();
                    let added: Vec<ItemHash> = hashes(u64::from(b * 100 + k), 40).collect();
                    let probes: Vec<ItemHash> = hashes(u64::from(b * 100 + k) + 7, 400).collect();
                    let (mut yes, mut no) = (0, 0);
                    for (i, h) in added.iter().enumerate() {
                        layer.insert(h);
                        assert!(layer.contains(h), "{what}");
                        for p in &probes[..(i + 1) * 10] {
                            let want = mask_contains(&layer, p);
                            assert_eq!(layer.contains(p), want, "{what}");
                            if want {
                                yes += 1;
                            } else {
                                no += 1;
                            }
                        }
                    }
                    assert!(no > 0, "{what}: some probe refused");
                    false_positives += yes;
                }
            }
        }
        assert!(
            false_positives > 0,
            "some probe passed every block it was not added to"
        );
    }

    #[test]
    fn every_shape_of_the_sizing_table_has_an_add_compiled_for_it() {
        let missing: Vec<(u32, u32)> = sizing::table_shapes()
            .filter(|shape| !SHAPED.contains(shape))
            .collect();
        assert!(missing.is_empty(), "add {missing:?} to `shaped_inserts!`");
    }

    #[test]
    fn the_whole_stream_is_the_position_stream() {
        for hi in [0, 1, 0x1234_5678_9abc_def0, u64::MAX] {
            let count = MAX_BLOCKS_PER_ITEM * MAX_HASHES_PER_BLOCK;
            let stream = Stream::of(hi, count);
            let mut positions = Positions::new(hi);
            for j in 0..count {
                assert_eq!(stream.at(j), positions.next(), "hi {hi:#x} position {j}");
            }
        }
    }

    #[test]
    fn position_stream_refills_past_seven_positions() {
        let mut p = Positions::new(0x1234_5678_9abc_def0);
        let first: Vec<u32> = (0..20).map(|_| p.next()).collect();
        assert!(first.iter().all(|&x| x < 512));
        assert_eq!(first[0], 0x0f0);
        // The refilled words differ from a plain shift of `hi`.
        assert_ne!(first[7..14], first[0..7]);
    }
}

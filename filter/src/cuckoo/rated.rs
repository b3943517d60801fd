//! Extension filters (`CF.RESERVE ... ERROR e`): cuckoo filters whose fingerprints have any
//! width from 4 to 32 bits, packed, with RedisBloom's placement, eviction, delete and
//! compaction rules generalized. Filters without the extension are [`CuckooFilter`]s,
//! RedisBloom's layout; the two meet in [`super::AnyFilter`].
//!
//! # Fingerprints
//! An item is hashed once to 64 bits, `h = MurmurHash64A(item, seed 0)`, as RedisBloom's. Its
//! tag is the high half of `h · 0x9e3779b97f4a7c15` (so that it does not repeat the low bits
//! that pick buckets), and its fingerprint in a sub-filter of `f`-bit slots is the tag's top
//! `f` bits, 0 read as 1 (0 marks an empty slot):
//!
//! ```text
//! fp_f = max(tag >> (32 − f), 1)
//! ```
//!
//! So a narrower fingerprint is a prefix of a wider one (`fp_g = max(fp_f >> (f − g), 1)`):
//! compaction moves a fingerprint into an older, narrower sub-filter without the item. The
//! two buckets of the item in a sub-filter of `n` buckets (a power of two) are
//!
//! ```text
//! b1 = h mod n,    b2 = (h XOR fp_f0 · 0x5bd1e995) mod n
//! ```
//!
//! with `fp_f0` the fingerprint at the first sub-filter's width, derived from any stored one:
//! every sub-filter's alternate bucket is an involution of the stored fingerprint alone, and
//! an item's buckets in an older sub-filter are its buckets here masked.
//!
//! # Layout
//! A sub-filter's slots are `f`-bit fields packed little-endian, bucket after bucket (bit `k`
//! of slot `s` of bucket `j` is bit `(j·b + s)·f + k` of the array), followed by 8 bytes of
//! padding so that every slot is read or written as one unaligned 64-bit word. Sub-filters
//! have at least 8 buckets, so a sub-filter is a whole number of bytes and of `f`-byte
//! groups (8 slots), the unit of `CF.SCANDUMP` pieces.
//!
//! # Widths
//! Sub-filter `i` has the width [`Widths::of`] gives: the first two were sized at creation
//! ([`rate::widths_for`]) and persisted, every later one a bit wider (to 32).

use super::filter::{BATCH, COMPACT_BUDGET, WALK_BUDGET};
use super::params::{Params, MAX_SUB_FILTERS};
use super::rate::{self, Widths};
use super::slots::{self, Batch, Chain, Slots, Tally};
use super::{CuckooError, ALT_MULTIPLIER};
use crate::error::FilterError;
use crate::fallible::{try_push, try_vec};
use crate::hash::murmur64a;

/// Mixes the item hash into the tag the fingerprints are cut from.
const TAG_MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// Bytes after a sub-filter's slots: a slot starting in its last byte is still read as a
/// whole 64-bit word.
pub(crate) const PAD_BYTES: u64 = 8;

/// The fewest buckets an extension sub-filter has (a whole number of bytes and of 8-slot
/// groups whatever the width and bucket size).
pub const MIN_BUCKETS: u64 = 8;

/// An item's buckets and the tag its fingerprints are cut from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RatedHash {
    pub h1: u64,
    pub h2: u64,
    pub tag: u32,
}

impl RatedHash {
    /// Hashes an item for a filter whose first sub-filter has `first` bits.
    #[inline]
    pub fn of(item: &[u8], first: u8) -> Self {
        Self::from_hash(murmur64a(item, 0), first)
    }

    #[inline]
    pub fn from_hash(hash: u64, first: u8) -> Self {
        let tag = (hash.wrapping_mul(TAG_MULTIPLIER) >> 32) as u32;
        RatedHash {
            h1: hash,
            h2: hash ^ alt_offset(fingerprint(tag, first)),
            tag,
        }
    }
}

/// The `bits`-wide fingerprint of a tag (1..2^bits).
#[inline]
pub fn fingerprint(tag: u32, bits: u8) -> u32 {
    (tag >> (32 - u32::from(bits))).max(1)
}

/// A `from`-bit fingerprint cut to `to <= from` bits: the fingerprint of the same tag.
#[inline]
fn narrow(fp: u32, from: u8, to: u8) -> u32 {
    (fp >> (from - to)).max(1)
}

/// The XOR distance between a fingerprint's two buckets (below 2^63).
#[inline]
fn alt_offset(fp: u32) -> u64 {
    u64::from(fp) * ALT_MULTIPLIER
}

/// Bytes of a sub-filter's slots (without padding), if they fit in memory.
pub(crate) fn slot_bytes(buckets: u64, bucket_size: u8, bits: u8) -> Option<u64> {
    buckets
        .checked_mul(u64::from(bucket_size))?
        .checked_mul(u64::from(bits))
        .map(|b| b.div_ceil(8))
        .filter(|&b| b <= (isize::MAX as u64) - PAD_BYTES)
}

/// One sub-filter: `buckets` buckets of `bucket_size` slots of `bits` bits. Equality is of
/// the slots.
#[derive(Debug, Clone, Eq)]
pub struct RatedSub {
    buckets: u64,
    bucket_size: u8,
    bits: u8,
    /// The packed slots, then `PAD_BYTES` zero bytes.
    bytes: Vec<u8>,
    occupied: u64,
    /// `SubFilter::huge`: when the slots get huge pages.
    huge: crate::zeroed::HugeSchedule,
    /// Derived from the bucket size and width.
    lanes: Lanes,
}

/// The constants of a bucket's compare in one 64-bit word: its fingerprint broadcast to
/// every slot and XORed in, a slot is a match when its field is zero, and the classic test
/// for a zero field (`(x - low) & !x & high`) finds them all at once, exactly for the first
/// one (a borrow may mark fields above it). This replaces a loop over the slots, each cut
/// out with its own shift and mask, whose trip count the compiler does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lanes {
    /// Bits per bucket (bucket size × width).
    bucket_bits: u64,
    /// The bucket's bits, or 0 for a bucket over 57 bits (which, at a bit offset of up to
    /// 7, may not fit in the word read at its first byte): those are read slot by slot.
    whole: u64,
    /// The lowest bit of each slot's field.
    low: u64,
    /// The highest bit of each slot's field.
    high: u64,
}

impl Lanes {
    fn of(bucket_size: u8, bits: u8) -> Self {
        let bucket_bits = u64::from(bucket_size) * u64::from(bits);
        if bucket_bits > 57 {
            return Lanes {
                bucket_bits,
                whole: 0,
                low: 0,
                high: 0,
            };
        }
        let low = (0..u64::from(bucket_size)).fold(0u64, |l, s| l | 1 << (s * u64::from(bits)));
        Lanes {
            bucket_bits,
            whole: (1u64 << bucket_bits) - 1,
            low,
            high: low << (bits - 1),
        }
    }
}

impl PartialEq for RatedSub {
    fn eq(&self, other: &Self) -> bool {
        (self.buckets, self.bucket_size, self.bits, self.occupied)
            == (other.buckets, other.bucket_size, other.bits, other.occupied)
            && self.bytes == other.bytes
    }
}

impl RatedSub {
    pub(crate) fn zeroed(buckets: u64, bucket_size: u8, bits: u8) -> Result<Self, FilterError> {
        let oom = FilterError::OutOfMemory { bytes: u64::MAX };
        let len = slot_bytes(buckets, bucket_size, bits).ok_or(oom)?;
        Ok(RatedSub {
            buckets,
            bucket_size,
            bits,
            bytes: crate::zeroed::try_zeroed_vec(len + PAD_BYTES)?,
            occupied: 0,
            huge: crate::zeroed::HugeSchedule::dense_at(crate::zeroed::dense_after_writes(len)),
            lanes: Lanes::of(bucket_size, bits),
        })
    }

    /// An empty sub-filter whose every slot is about to be written (chunks after a header,
    /// or persisted bytes): huge pages from the start cost no memory.
    pub(crate) fn zeroed_for_load(
        buckets: u64,
        bucket_size: u8,
        bits: u8,
    ) -> Result<Self, FilterError> {
        let mut sub = Self::zeroed(buckets, bucket_size, bits)?;
        sub.advise_huge_pages();
        Ok(sub)
    }

    /// Asks for huge pages over the slots, once.
    fn advise_huge_pages(&mut self) {
        crate::zeroed::advise_huge_pages(&self.bytes);
        self.huge = crate::zeroed::HugeSchedule::DONE;
    }

    /// A sub-filter from its persisted slot bytes (`data.len()` checked by the caller).
    pub(crate) fn from_bytes(
        buckets: u64,
        bucket_size: u8,
        bits: u8,
        data: &[u8],
    ) -> Result<Self, FilterError> {
        let mut sub = Self::zeroed_for_load(buckets, bucket_size, bits)?;
        sub.bytes[..data.len()].copy_from_slice(data);
        sub.occupied = (0..sub.slots()).filter(|&i| sub.get(i) != 0).count() as u64;
        Ok(sub)
    }

    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Bits per fingerprint.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// The packed slots, as `CF.SCANDUMP` and the RDB value carry them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.bytes.len() - PAD_BYTES as usize]
    }

    pub fn occupied(&self) -> u64 {
        self.occupied
    }

    /// All slots: buckets × bucket size.
    pub fn slots(&self) -> u64 {
        self.buckets * u64::from(self.bucket_size)
    }

    pub fn load(&self) -> f64 {
        self.occupied as f64 / self.slots() as f64
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.occupied == self.slots()
    }

    #[inline]
    fn mask(&self) -> u64 {
        self.buckets - 1
    }

    /// The word holding slot `index` from its first bit, and that bit's shift in it.
    #[inline]
    fn word_at(&self, index: u64) -> (usize, u32, u64) {
        let bit = index * u64::from(self.bits);
        let at = (bit >> 3) as usize;
        let word = u64::from_le_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"));
        (at, (bit & 7) as u32, word)
    }

    #[inline]
    fn field_mask(&self) -> u64 {
        (1u64 << self.bits) - 1
    }

    /// Slot `index` (below `slots()`).
    #[inline]
    pub fn get(&self, index: u64) -> u32 {
        let (_, shift, word) = self.word_at(index);
        ((word >> shift) & self.field_mask()) as u32
    }

    /// Writes slot `index`, returning what it held. Occupancy is the caller's.
    #[inline]
    fn set(&mut self, index: u64, fp: u32) -> u32 {
        let (at, shift, word) = self.word_at(index);
        let mask = self.field_mask() << shift;
        let old = ((word & mask) >> shift) as u32;
        let new = (word & !mask) | (u64::from(fp) << shift);
        self.bytes[at..at + 8].copy_from_slice(&new.to_le_bytes());
        old
    }

    #[inline]
    fn slot(&self, bucket: u64, s: u64) -> u64 {
        bucket * u64::from(self.bucket_size) + s
    }

    /// Whether the bucket is compared in one word (`Lanes`): at most 57 bits (4 slots of up
    /// to 14 bits, 3 of up to 19: the usual shapes).
    #[inline]
    fn one_word(&self) -> bool {
        self.lanes.whole != 0
    }

    /// For a `one_word` sub-filter: the highest bit of each slot of bucket `b` holding `fp`
    /// set, exactly for the first such slot (others above it may be marked too); 0 if none.
    #[inline]
    fn matches(&self, b: u64, fp: u32) -> u64 {
        let l = &self.lanes;
        let bit = b * l.bucket_bits;
        let at = (bit >> 3) as usize;
        let word = u64::from_le_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"));
        let x = ((word >> (bit & 7)) & l.whole) ^ (u64::from(fp) * l.low);
        x.wrapping_sub(l.low) & !x & l.high
    }

    /// The first slot of bucket `b` holding `fp`.
    #[inline]
    fn find(&self, b: u64, fp: u32) -> Option<u64> {
        if self.one_word() {
            let hit = self.matches(b, fp);
            return (hit != 0).then(|| u64::from(hit.trailing_zeros()) / u64::from(self.bits));
        }
        (0..u64::from(self.bucket_size)).find(|&s| self.get(self.slot(b, s)) == fp)
    }

    /// Starts loading both candidate buckets of an item: the line of each one's first byte,
    /// and of its last when it crosses into the next line.
    #[inline]
    fn prefetch(&self, h: &RatedHash) {
        let m = self.mask();
        let bits = self.lanes.bucket_bits;
        for b in [h.h1 & m, h.h2 & m] {
            let first = b * bits;
            let (at, last) = ((first >> 3) as usize, ((first + bits - 1) >> 3) as usize);
            super::filter::prefetch(self.bytes[at..].as_ptr());
            if last >> 6 != at >> 6 {
                super::filter::prefetch(self.bytes[last..].as_ptr());
            }
        }
    }

    #[inline]
    fn holds(&self, h: &RatedHash) -> bool {
        let fp = fingerprint(h.tag, self.bits);
        let m = self.mask();
        if self.one_word() {
            // Both buckets without a branch between them: their loads overlap.
            return self.matches(h.h1 & m, fp) | self.matches(h.h2 & m, fp) != 0;
        }
        self.find(h.h1 & m, fp).is_some() || self.find(h.h2 & m, fp).is_some()
    }

    fn count_in(&self, b: u64, fp: u32) -> u64 {
        (0..u64::from(self.bucket_size))
            .filter(|&s| self.get(self.slot(b & self.mask(), s)) == fp)
            .count() as u64
    }

    /// Writes persisted slot bytes `data` from byte `at`, whole slots only (the caller checked
    /// the range and alignment), and recounts the slots it changed.
    pub(crate) fn write_bytes(&mut self, at: u64, data: &[u8]) {
        let first = at * 8 / u64::from(self.bits);
        let count = data.len() as u64 * 8 / u64::from(self.bits);
        let was = (first..first + count).filter(|&i| self.get(i) != 0).count() as u64;
        self.bytes[at as usize..at as usize + data.len()].copy_from_slice(data);
        let now = (first..first + count).filter(|&i| self.get(i) != 0).count() as u64;
        self.occupied = self.occupied - was + now;
    }
}

impl Slots for RatedSub {
    type Fp = u32;
    type Hash = RatedHash;
    /// The first sub-filter's width, whose fingerprints place the alternate bucket.
    type Ctx = u8;
    const EMPTY: u32 = 0;

    #[inline]
    fn buckets(&self) -> u64 {
        self.buckets
    }

    #[inline]
    fn occupied(&self) -> u64 {
        self.occupied
    }

    #[inline]
    fn is_full(&self) -> bool {
        RatedSub::is_full(self)
    }

    #[inline]
    fn fp(&self, h: &RatedHash) -> u32 {
        fingerprint(h.tag, self.bits)
    }

    #[inline]
    fn hashes(h: &RatedHash) -> (u64, u64) {
        (h.h1, h.h2)
    }

    #[inline]
    fn alt(&self, first: u8, b: u64, fp: u32) -> u64 {
        b ^ alt_offset(narrow(fp, self.bits, first))
    }

    #[inline]
    fn cut_for(&self, fp: u32, older: &Self) -> u32 {
        narrow(fp, self.bits, older.bits)
    }

    #[inline]
    fn slot_at(&self, _: u64, b: u64, slot: u64) -> u32 {
        self.get(self.slot(b, slot))
    }

    #[inline]
    fn replace_at(&mut self, _: u64, b: u64, slot: u64, fp: u32) -> u32 {
        self.set(self.slot(b, slot), fp)
    }

    #[inline]
    fn find_in(&self, _: u64, b: u64, fp: u32) -> Option<u64> {
        self.find(b, fp)
    }

    #[inline]
    fn put_in(&mut self, _: u64, b: u64, fp: u32) -> bool {
        match self.find(b, 0) {
            Some(s) => {
                self.set(self.slot(b, s), fp);
                self.occupied += 1;
                if self.huge.due(self.occupied) {
                    self.huge.step(&self.bytes, self.occupied);
                }
                true
            }
            None => false,
        }
    }

    #[inline]
    fn clear_at(&mut self, _: u64, b: u64, slot: u64) {
        self.set(self.slot(b, slot), 0);
        self.occupied -= 1;
    }
}

/// An extension filter: sub-filter `i` has `buckets × expansion^i` buckets of `Widths::of(i)`
/// bits. Equality is of what persists (`deletes_not_found` is a local figure).
#[derive(Debug, Clone)]
pub struct RatedFilter {
    subs: Vec<RatedSub>,
    items: u64,
    deletes: u64,
    params: Params,
    widths: Widths,
    /// The rate asked for at creation (CF.INFO's `ERROR`), kept as persisted.
    error: f64,
    deletes_not_found: u64,
}

impl PartialEq for RatedFilter {
    fn eq(&self, other: &Self) -> bool {
        self.subs == other.subs
            && self.items == other.items
            && self.deletes == other.deletes
            && self.params == other.params
            && self.widths == other.widths
            && self.error.to_bits() == other.error.to_bits()
    }
}

impl Eq for RatedFilter {}

/// Why a new extension filter's shape is refused.
fn check_shape(buckets: u64, params: &Params, widths: &Widths) -> Result<(), CuckooError> {
    params.check().map_err(CuckooError::Params)?;
    if !buckets.is_power_of_two() || buckets < MIN_BUCKETS || !widths.is_valid() {
        return Err(CuckooError::Params(super::ParamError::Buckets));
    }
    Ok(())
}

impl RatedFilter {
    /// An empty filter of one sub-filter, refused over `max_bytes` by the allocator model.
    pub fn new(
        buckets: u64,
        params: Params,
        widths: Widths,
        error: f64,
        max_bytes: u64,
    ) -> Result<Self, CuckooError> {
        check_shape(buckets, &params, &widths)?;
        let oom = FilterError::OutOfMemory { bytes: u64::MAX };
        let bytes = slot_bytes(buckets, params.bucket_size, widths.first).ok_or(oom)?;
        let needed = Self::modelled_bytes(1, [bytes]);
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            }
            .into());
        }
        let mut subs = try_vec(1)?;
        subs.push(RatedSub::zeroed(buckets, params.bucket_size, widths.first)?);
        Ok(RatedFilter {
            subs,
            items: 0,
            deletes: 0,
            params,
            widths,
            error,
            deletes_not_found: 0,
        })
    }

    pub(crate) fn from_parts(
        subs: Vec<RatedSub>,
        items: u64,
        deletes: u64,
        params: Params,
        widths: Widths,
        error: f64,
    ) -> Self {
        RatedFilter {
            subs,
            items,
            deletes,
            params,
            widths,
            error,
            deletes_not_found: 0,
        }
    }

    pub fn params(&self) -> Params {
        self.params
    }

    pub fn widths(&self) -> Widths {
        self.widths
    }

    /// The rate asked for at creation.
    pub fn error(&self) -> f64 {
        self.error
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    pub fn deletes_not_found(&self) -> u64 {
        self.deletes_not_found
    }

    pub fn buckets(&self) -> u64 {
        self.subs[0].buckets
    }

    pub fn sub_filters(&self) -> &[RatedSub] {
        &self.subs
    }

    pub(crate) fn sub_filters_mut(&mut self) -> &mut [RatedSub] {
        &mut self.subs
    }

    /// Bytes of all sub-filters' slots, as persisted.
    pub fn slot_bytes(&self) -> u64 {
        self.subs.iter().map(|s| s.as_bytes().len() as u64).sum()
    }

    /// `memory_usage` of a filter of `count` sub-filters with these slot byte counts.
    pub fn modelled_bytes(count: usize, slot_arrays: impl IntoIterator<Item = u64>) -> u64 {
        use crate::footprint::allocation;
        use std::mem::size_of;
        // The value Redis holds is `AnyFilter::Rated(Box<RatedFilter>)`: its box, this box.
        let boxed = allocation(size_of::<super::AnyFilter>() as u64, 8)
            .saturating_add(allocation(size_of::<RatedFilter>() as u64, 8));
        let table = allocation(
            (count as u64).saturating_mul(size_of::<RatedSub>() as u64),
            8,
        );
        slot_arrays
            .into_iter()
            .fold(boxed.saturating_add(table), |sum, bytes| {
                sum.saturating_add(allocation(bytes.saturating_add(PAD_BYTES), 1))
            })
    }

    pub fn memory_usage(&self) -> u64 {
        self.memory_usage_of_first(self.subs.len())
    }

    /// `memory_usage` of the filter's oldest `count` sub-filters alone: what it was before
    /// the newer ones were added (at most all of them).
    pub fn memory_usage_of_first(&self, count: usize) -> u64 {
        let subs = &self.subs[..count.min(self.subs.len())];
        Self::modelled_bytes(subs.len(), subs.iter().map(|s| s.as_bytes().len() as u64))
    }

    /// Offers every heap block the filter holds to `to` (active defragmentation): each
    /// sub-filter's slots, then the sub-filter table.
    pub fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator) {
        for s in &mut self.subs {
            crate::relocate::relocate_vec(&mut s.bytes, to);
        }
        crate::relocate::relocate_vec(&mut self.subs, to);
    }

    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let mut subs = try_vec(self.subs.len())?;
        for s in &self.subs {
            // As lazy as the source, in huge pages at once if the source is dense.
            let (hint, huge) = s.huge.for_copy(s.occupied);
            let bytes = crate::zeroed::try_copy_sparse(&s.bytes, s.occupied == 0, hint)?;
            subs.push(RatedSub { bytes, huge, ..*s });
        }
        Ok(RatedFilter { subs, ..*self })
    }

    /// The estimated false-positive rate of a lookup: each sub-filter's at its load.
    pub fn estimated_fpr(&self) -> f64 {
        let pass: f64 = self
            .subs
            .iter()
            .map(|s| 1.0 - rate::false_positive_rate(s.bits, self.params.bucket_size, s.load()))
            .product();
        1.0 - pass
    }

    #[inline]
    fn hash(&self, item: &[u8]) -> RatedHash {
        RatedHash::of(item, self.widths.first)
    }

    // ---- lookups ------------------------------------------------------------------------

    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(&self.hash(item))
    }

    #[inline]
    pub fn contains_hash(&self, h: &RatedHash) -> bool {
        self.subs.iter().rev().any(|s| s.holds(h))
    }

    /// Slots holding the item's fingerprint in both buckets of every sub-filter (a bucket
    /// twice when both are the same bucket, as for RedisBloom's layout).
    pub fn count(&self, item: &[u8]) -> u64 {
        let h = self.hash(item);
        self.subs
            .iter()
            .map(|s| {
                let fp = fingerprint(h.tag, s.bits);
                s.count_in(h.h1, fp) + s.count_in(h.h2, fp)
            })
            .sum()
    }

    /// `contains` for many items: each batch hashed and its buckets requested in every
    /// sub-filter before any is probed, as for RedisBloom's layout.
    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        let mut out = Vec::with_capacity(items.len());
        let mut batch = [RatedHash::from_hash(0, self.widths.first); BATCH];
        for chunk in items.chunks(BATCH) {
            let hashes = self.hash_batch(chunk, &mut batch);
            self.prefetch_batch(hashes, self.subs.len());
            out.extend(hashes.iter().map(|h| self.contains_hash(h)));
        }
        out
    }

    /// Hashes up to `BATCH` items into `batch`. A hash depends on the item and the first
    /// width alone, so it stays valid while earlier items of the batch grow the filter.
    #[inline]
    fn hash_batch<'b>(
        &self,
        chunk: &[&[u8]],
        batch: &'b mut [RatedHash; BATCH],
    ) -> &'b [RatedHash] {
        for (h, item) in batch.iter_mut().zip(chunk) {
            *h = self.hash(item);
        }
        &batch[..chunk.len()]
    }

    /// Starts loading both buckets of every hash in the newest `subs` sub-filters.
    #[inline]
    fn prefetch_batch(&self, hashes: &[RatedHash], subs: usize) {
        for s in self.subs.iter().rev().take(subs) {
            hashes.iter().for_each(|h| s.prefetch(h));
        }
    }

    // ---- inserts (written once for both layouts: `slots`) ------------------------------

    pub fn check_expansions(&self, limits: &super::Limits) -> Result<(), CuckooError> {
        slots::check_expansions(self, limits)
    }

    pub fn add(&mut self, item: &[u8], limits: &super::Limits) -> Result<(), CuckooError> {
        slots::add(self, item, limits)
    }

    pub fn add_nx(&mut self, item: &[u8], limits: &super::Limits) -> Result<bool, CuckooError> {
        slots::add_nx(self, item, limits)
    }

    /// `CuckooFilter::insert_many`'s contract.
    pub fn insert_many(&mut self, items: &[&[u8]], nx: bool, limits: &super::Limits) -> Batch {
        self.insert_many_within(items, nx, limits, &mut WALK_BUDGET.clone())
    }

    /// `CuckooFilter::insert_many_within`'s contract.
    pub fn insert_many_within(
        &mut self,
        items: &[&[u8]],
        nx: bool,
        limits: &super::Limits,
        kicks: &mut u64,
    ) -> Batch {
        slots::insert_many_within(self, items, nx, limits, kicks)
    }

    #[cfg(test)]
    fn insert_hash(
        &mut self,
        h: &RatedHash,
        max_bytes: u64,
        kicks: &mut u64,
    ) -> Result<(), CuckooError> {
        slots::insert_hash(self, h, max_bytes, kicks)
    }

    fn grow(&mut self, max_bytes: u64) -> Result<(), CuckooError> {
        if self.subs.len() >= MAX_SUB_FILTERS {
            return Err(FilterError::TooManyLayers {
                limit: MAX_SUB_FILTERS,
            }
            .into());
        }
        let oom = FilterError::OutOfMemory { bytes: u64::MAX };
        let last = self.subs.last().map_or(1, |s| s.buckets);
        let buckets = last
            .checked_mul(u64::from(self.params.expansion))
            .ok_or(oom.clone())?;
        let bits = self.widths.of(self.subs.len());
        let bytes = slot_bytes(buckets, self.params.bucket_size, bits).ok_or(oom)?;
        let needed = Self::modelled_bytes(
            self.subs.len() + 1,
            self.subs
                .iter()
                .map(|s| s.as_bytes().len() as u64)
                .chain([bytes]),
        );
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            }
            .into());
        }
        let sub = RatedSub::zeroed(buckets, self.params.bucket_size, bits)?;
        try_push(&mut self.subs, sub)?;
        Ok(())
    }

    // ---- deletes ------------------------------------------------------------------------

    /// `CuckooFilter::delete`'s rules (`slots::delete_hash`).
    pub fn delete(&mut self, item: &[u8]) -> bool {
        let h = self.hash(item);
        slots::delete_hash(self, &h)
    }

    pub fn compact(&mut self) {
        self.compact_with(true, COMPACT_BUDGET);
    }

    /// `slots::compact_chain`: a fingerprint moved into an older sub-filter is cut to its
    /// width.
    pub(crate) fn compact_with(&mut self, past_full: bool, budget: u64) -> u64 {
        slots::compact_chain(self, past_full, budget)
    }
}

impl Chain for RatedFilter {
    type Sub = RatedSub;
    type Hash = RatedHash;

    #[inline]
    fn subs(&self) -> &[RatedSub] {
        &self.subs
    }

    #[inline]
    fn params(&self) -> Params {
        self.params
    }

    #[inline]
    fn ctx(&self) -> u8 {
        self.widths.first
    }

    #[inline]
    fn hash(&self, item: &[u8]) -> RatedHash {
        RatedFilter::hash(self, item)
    }

    #[inline]
    fn blank(&self) -> RatedHash {
        RatedHash::from_hash(0, self.widths.first)
    }

    #[inline]
    fn contains_hash(&self, h: &RatedHash) -> bool {
        RatedFilter::contains_hash(self, h)
    }

    #[inline]
    fn prefetch_batch(&self, hashes: &[RatedHash], subs: usize) {
        RatedFilter::prefetch_batch(self, hashes, subs)
    }

    #[inline]
    fn tally(&mut self) -> Tally<'_, RatedSub> {
        Tally {
            subs: &mut self.subs,
            items: &mut self.items,
            deletes: &mut self.deletes,
            deletes_not_found: &mut self.deletes_not_found,
        }
    }

    fn grow(&mut self, max_bytes: u64) -> Result<(), CuckooError> {
        RatedFilter::grow(self, max_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuckoo::Limits;

    type Batch = Result<Vec<Result<bool, CuckooError>>, CuckooError>;

    /// The item-by-item loop the batch path replaced: the reference it must match.
    fn one_by_one(
        f: &mut RatedFilter,
        items: &[&[u8]],
        nx: bool,
        limits: &Limits,
        kicks: &mut u64,
    ) -> Batch {
        f.check_expansions(limits)?;
        let mut out = Vec::new();
        for item in items {
            let h = f.hash(item);
            let result = if nx && f.contains_hash(&h) {
                Ok(false)
            } else {
                f.insert_hash(&h, limits.max_bytes, kicks).map(|()| true)
            };
            let stop = matches!(&result, Err(e) if *e != CuckooError::Full);
            out.push(result);
            if stop {
                break;
            }
        }
        Ok(out)
    }

    /// Outcomes the random batches must reach for the comparison to mean something.
    #[derive(Default)]
    struct Seen {
        added: u64,
        present: u64,
        full: u64,
        kick_budget: u64,
        over_limit: u64,
        max_expansions: u64,
        grown: u64,
    }

    /// The batch path (hashed and prefetched 32 at a time) leaves every slot, count and kick
    /// budget as inserting the items one after another does, and answers each item alike,
    /// through growth, NX duplicates, full non-scaling filters, spent eviction budgets, the
    /// memory limit and the expansion limit, on widths and bucket sizes on both sides of the
    /// one-word compare.
    #[test]
    fn batch_inserts_match_item_by_item_inserts_exactly() {
        let mut rng = 0x5eed_u64;
        let mut next = move || {
            rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            crate::hash::mix64(rng)
        };
        // (bucket size, first width, second width): one-word buckets and wider ones.
        let shapes = [
            (2, 8, 9),
            (4, 12, 13),
            (3, 17, 18),
            (1, 5, 6),
            (6, 12, 12),
            (4, 20, 24),
        ];
        let mut seen = Seen::default();
        for (round, &(bucket_size, first, second)) in shapes.iter().cycle().take(60).enumerate() {
            let params = Params {
                bucket_size,
                max_iterations: [1, 5, 40][round % 3],
                expansion: [0, 1, 2, 4][(round / 3) % 4],
            };
            let widths = Widths { first, second };
            let mut batched = RatedFilter::new(8, params, widths, 0.01, u64::MAX).unwrap();
            let mut single = batched.clone();
            // Room for a few sub-filters, so that growth ends on the memory limit or on the
            // expansion limit, whichever comes first.
            let limits = Limits {
                max_expansions: 2 + (next() % 4) as usize,
                max_bytes: batched.memory_usage() + next() % 2048,
            };
            let mut kicks_batched = 50 + next() % 400;
            let mut kicks_single = kicks_batched;
            let pool = 40 + next() % 400;
            for _ in 0..12 {
                let nx = next() % 2 == 0;
                let len = (next() % 100) as usize;
                let keys: Vec<[u8; 8]> = (0..len).map(|_| (next() % pool).to_le_bytes()).collect();
                let items: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
                let subs = batched.subs.len();
                let b = batched.insert_many_within(&items, nx, &limits, &mut kicks_batched);
                let r = one_by_one(&mut single, &items, nx, &limits, &mut kicks_single);
                assert_eq!(b, r, "round {round}");
                assert_eq!(kicks_batched, kicks_single, "round {round}");
                assert_eq!(batched, single, "round {round}");
                assert_eq!(batched.items, single.items);
                seen.grown += (batched.subs.len() - subs) as u64;
                match &b {
                    Err(CuckooError::MaxExpansions) => seen.max_expansions += 1,
                    Err(e) => panic!("{e:?}"),
                    Ok(results) => {
                        for result in results {
                            match result {
                                Ok(true) => seen.added += 1,
                                Ok(false) => seen.present += 1,
                                Err(CuckooError::Full) => seen.full += 1,
                                Err(CuckooError::KickBudget) => seen.kick_budget += 1,
                                Err(CuckooError::Filter(FilterError::OverLimit { .. })) => {
                                    seen.over_limit += 1
                                }
                                Err(e) => panic!("{e:?}"),
                            }
                        }
                    }
                }
            }
        }
        let Seen {
            added,
            present,
            full,
            kick_budget,
            over_limit,
            max_expansions,
            grown,
        } = seen;
        let all = [
            added,
            present,
            full,
            kick_budget,
            over_limit,
            max_expansions,
            grown,
        ];
        assert!(all.iter().all(|&n| n > 0), "{all:?}");
    }

    /// The word-at-a-time compare finds exactly the first slot a slot-by-slot scan finds, for
    /// every width and the bucket sizes on both sides of the one-word limit, with repeated
    /// fingerprints, empty slots among full ones and fields of all ones.
    #[test]
    fn a_bucket_compared_in_one_word_finds_the_first_slot_a_scan_finds() {
        let mut rng = 0x1234_5678_u64;
        let mut next = move || {
            rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            crate::hash::mix64(rng)
        };
        let mut one_word_shapes = 0;
        for bits in 4u8..=32 {
            for bucket_size in 1u8..=9 {
                let mut sub = RatedSub::zeroed(16, bucket_size, bits).unwrap();
                one_word_shapes += u32::from(sub.one_word());
                let top = (1u64 << bits) - 1;
                // Few distinct values, so that buckets repeat them; 1 and all ones are the
                // fields a borrow of the zero test could confuse.
                let values = [0, 1, 2, top, top - 1, next() & top, next() & top];
                for i in 0..sub.slots() {
                    sub.set(i, values[(next() % values.len() as u64) as usize] as u32);
                }
                for b in 0..16 {
                    for &fp in &values {
                        let fp = fp as u32;
                        let scan =
                            (0..u64::from(bucket_size)).find(|&s| sub.get(sub.slot(b, s)) == fp);
                        assert_eq!(
                            sub.find(b, fp),
                            scan,
                            "bits {bits} size {bucket_size} bucket {b}"
                        );
                        if sub.one_word() {
                            assert_eq!(sub.matches(b, fp) != 0, scan.is_some());
                        }
                    }
                }
            }
        }
        assert!(one_word_shapes > 100, "{one_word_shapes}");
    }
}

//! Extension filters (`CF.RESERVE ... ERROR e`): cuckoo filters whose fingerprints have any
//! width from 4 to 32 bits, packed, with RedisBloom's placement, eviction, delete and
//! compaction rules generalized. Filters without the extension are
//! [`super::CuckooFilter`]s, RedisBloom's layout; the two meet in [`super::AnyFilter`].
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

use super::chain::Filter;
use super::params::Params;
use super::rate::{self, Widths};
use super::slots::Slots;
use super::{CuckooError, ALT_MULTIPLIER};
use crate::error::FilterError;
use crate::hash::murmur64a;

/// Mixes the item hash into the tag the fingerprints are cut from.
const TAG_MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// Bytes after a sub-filter's slots: a slot starting in its last byte is still read as a
/// whole 64-bit word.
pub(crate) const PAD_BYTES: u64 = 8;

pub use super::rate::MIN_BUCKETS;

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

    type Shape = RatedShape;
    const PAD_BYTES: u64 = PAD_BYTES;

    #[inline]
    fn params(shape: &RatedShape) -> Params {
        shape.params
    }

    #[inline]
    fn ctx(shape: &RatedShape) -> u8 {
        shape.widths.first
    }

    #[inline]
    fn hash(shape: &RatedShape, item: &[u8]) -> RatedHash {
        RatedHash::of(item, shape.widths.first)
    }

    #[inline]
    fn blank(shape: &RatedShape) -> RatedHash {
        RatedHash::from_hash(0, shape.widths.first)
    }

    fn persisted_bytes(shape: &RatedShape, index: usize, buckets: u64) -> Option<u64> {
        slot_bytes(buckets, shape.params.bucket_size, shape.widths.of(index))
    }

    fn new_sub(shape: &RatedShape, index: usize, buckets: u64) -> Result<Self, FilterError> {
        RatedSub::zeroed(buckets, shape.params.bucket_size, shape.widths.of(index))
    }

    /// The value Redis holds is `AnyFilter::Rated(Box<RatedFilter>)`: its box, this box.
    fn boxes(filter: u64) -> u64 {
        let any = std::mem::size_of::<super::AnyFilter>() as u64;
        crate::footprint::allocation(any, 8).saturating_add(filter)
    }

    fn persisted(&self) -> &[u8] {
        self.as_bytes()
    }

    fn heap_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    fn try_copy(&self) -> Result<Self, FilterError> {
        // As lazy as the source, in huge pages at once if the source is dense.
        let (hint, huge) = self.huge.for_copy(self.occupied);
        let bytes = crate::zeroed::try_copy_sparse(&self.bytes, self.occupied == 0, hint)?;
        Ok(RatedSub {
            bytes,
            huge,
            ..*self
        })
    }

    #[inline]
    fn holds_item(&self, h: &RatedHash, _: usize) -> bool {
        self.holds(h)
    }

    fn count_item(&self, h: &RatedHash, _: usize) -> u64 {
        let fp = fingerprint(h.tag, self.bits);
        self.count_in(h.h1, fp) + self.count_in(h.h2, fp)
    }

    #[inline]
    fn prefetch_item(&self, h: &RatedHash, _: usize) {
        self.prefetch(h)
    }
}

/// What an extension filter keeps of its shape: its settings, its widths and the rate asked
/// for. Equality is of the rate's bits, as persisted.
#[derive(Debug, Clone, Copy)]
pub struct RatedShape {
    params: Params,
    widths: Widths,
    /// The rate asked for at creation (CF.INFO's `ERROR`), kept as persisted.
    error: f64,
}

impl PartialEq for RatedShape {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
            && self.widths == other.widths
            && self.error.to_bits() == other.error.to_bits()
    }
}

/// An extension filter: sub-filter `i` has `buckets × expansion^i` buckets of `Widths::of(i)`
/// bits (`chain::Filter`). Its value is boxed in `AnyFilter`: 64 bytes, as before the
/// layouts shared the filter.
pub type RatedFilter = Filter<RatedSub>;

const _: () = assert!(std::mem::size_of::<RatedFilter>() == 64);

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
        let shape = RatedShape {
            params,
            widths,
            error,
        };
        Filter::empty(buckets, shape, max_bytes)
    }

    pub(crate) fn from_parts(
        subs: Vec<RatedSub>,
        items: u64,
        deletes: u64,
        params: Params,
        widths: Widths,
        error: f64,
    ) -> Self {
        let shape = RatedShape {
            params,
            widths,
            error,
        };
        Filter::of(subs, items, deletes, shape)
    }

    pub fn widths(&self) -> Widths {
        self.shape.widths
    }

    /// The rate asked for at creation.
    pub fn error(&self) -> f64 {
        self.shape.error
    }

    /// The estimated false-positive rate of a lookup: each sub-filter's at its load.
    pub fn estimated_fpr(&self) -> f64 {
        let bucket_size = self.params().bucket_size;
        let pass: f64 = self
            .subs
            .iter()
            .map(|s| 1.0 - rate::false_positive_rate(s.bits, bucket_size, s.load()))
            .product();
        1.0 - pass
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

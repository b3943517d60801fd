//! The filter: sub-filters of buckets of one-byte fingerprints, and every operation with
//! RedisBloom's exact placement rules (see the module documentation).

use super::budget::first_empty;
use super::chain::Filter;
use super::params::Params;
use super::slots::Slots;
use super::CuckooError;
use crate::error::FilterError;
use crate::hash::murmur64a;

/// The odd constant that turns a fingerprint into the XOR distance between its two buckets.
pub const ALT_MULTIPLIER: u64 = 0x5bd1_e995;

/// An item's fingerprint and its two candidate bucket hashes. A sub-filter of `n` buckets
/// (a power of two) keeps the fingerprint in bucket `h1 mod n` or `h2 mod n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuckooHash {
    /// 1..=255; 0 marks an empty slot.
    pub fp: u8,
    pub h1: u64,
    pub h2: u64,
}

impl CuckooHash {
    /// Hashes an item as RedisBloom does (MurmurHash64A, seed 0).
    #[inline]
    pub fn of(item: &[u8]) -> Self {
        Self::from_hash(murmur64a(item, 0))
    }

    /// The fingerprint and buckets of a 64-bit item hash.
    #[inline]
    pub fn from_hash(hash: u64) -> Self {
        let fp = (hash % 255 + 1) as u8;
        CuckooHash {
            fp,
            h1: hash,
            h2: hash ^ alt_offset(fp),
        }
    }
}

/// The XOR distance between a fingerprint's two buckets. Below 2^40, so it never overflows.
#[inline]
fn alt_offset(fp: u8) -> u64 {
    u64::from(fp) * ALT_MULTIPLIER
}

/// One sub-filter: `buckets` (a power of two) buckets of `bucket size` one-byte slots, laid
/// out bucket after bucket exactly as RedisBloom persists them. Equality is of the slots.
#[derive(Debug, Clone, Eq)]
pub struct SubFilter {
    buckets: u64,
    slots: Vec<u8>,
    /// Non-zero slots, kept by every write so that the load (health figures, the capacity
    /// warning after each add) costs no scan.
    occupied: u64,
    /// When the slots get huge pages: from the occupied count at which they are dense
    /// (`zeroed::dense_after_writes`), for a sub-filter filled by its adds.
    huge: crate::zeroed::HugeSchedule,
}

impl PartialEq for SubFilter {
    fn eq(&self, other: &Self) -> bool {
        self.buckets == other.buckets
            && self.occupied == other.occupied
            && self.slots == other.slots
    }
}

impl SubFilter {
    /// An empty sub-filter; its zeroed memory costs nothing until written.
    pub(crate) fn zeroed(buckets: u64, bucket_size: u8) -> Result<Self, FilterError> {
        let bytes =
            slot_bytes(buckets, bucket_size).ok_or(FilterError::OutOfMemory { bytes: u64::MAX })?;
        Ok(SubFilter {
            buckets,
            slots: crate::zeroed::try_zeroed_vec(bytes)?,
            occupied: 0,
            huge: crate::zeroed::HugeSchedule::dense_at(crate::zeroed::dense_after_writes(bytes)),
        })
    }

    /// An empty sub-filter whose every slot is about to be written (`CF.LOADCHUNK`'s
    /// chunks after a header): huge pages from the start cost no memory.
    pub(crate) fn zeroed_for_load(buckets: u64, bucket_size: u8) -> Result<Self, FilterError> {
        let mut sub = Self::zeroed(buckets, bucket_size)?;
        sub.advise_huge_pages();
        Ok(sub)
    }

    /// A sub-filter from persisted slots (the caller checked `slots.len()`). Every page is
    /// written already, so the huge-page hint is the caller's, before it wrote them (a hint
    /// after only lets the kernel collapse the pages slowly in the background).
    pub(crate) fn from_slots(buckets: u64, slots: Vec<u8>) -> Self {
        let occupied = count_occupied(&slots);
        SubFilter {
            buckets,
            slots,
            occupied,
            huge: crate::zeroed::HugeSchedule::DONE,
        }
    }

    /// Asks for huge pages over the slots, once.
    fn advise_huge_pages(&mut self) {
        crate::zeroed::advise_huge_pages(&self.slots);
        self.huge = crate::zeroed::HugeSchedule::DONE;
    }

    /// Its bucket count.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Its slot bytes, as `CF.SCANDUMP` and the RDB value carry them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.slots
    }

    /// Writes `data` over the slots from byte `at` (the caller checked the range) and
    /// recounts the occupied slots it changed.
    pub(crate) fn write_slots(&mut self, at: usize, data: &[u8]) {
        let target = &mut self.slots[at..at + data.len()];
        let was = count_occupied(target);
        target.copy_from_slice(data);
        self.occupied = self.occupied - was + count_occupied(data);
    }

    /// Occupied slots.
    pub fn occupied(&self) -> u64 {
        self.occupied
    }

    /// All slots: buckets × bucket size.
    pub fn slots(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Occupied slots / slots.
    pub fn load(&self) -> f64 {
        if self.slots.is_empty() {
            0.0
        } else {
            self.occupied as f64 / self.slots.len() as f64
        }
    }

    /// Whether no slot is empty.
    #[inline]
    fn is_full(&self) -> bool {
        self.occupied == self.slots.len() as u64
    }

    #[inline]
    fn mask(&self) -> u64 {
        self.buckets - 1
    }

    /// Bucket `b` (below `buckets`). Offsets are computed in 64 bits: RedisBloom computes
    /// them in 32, which wraps in sub-filters over 4 GiB.
    #[inline]
    fn bucket(&self, b: u64, bs: usize) -> &[u8] {
        let start = b as usize * bs;
        &self.slots[start..start + bs]
    }

    #[inline]
    fn bucket_mut(&mut self, b: u64, bs: usize) -> &mut [u8] {
        let start = b as usize * bs;
        &mut self.slots[start..start + bs]
    }

    /// Whether either candidate bucket holds the fingerprint.
    #[inline]
    fn holds(&self, h: &CuckooHash, bs: usize) -> bool {
        let m = self.mask();
        self.bucket(h.h1 & m, bs).contains(&h.fp) || self.bucket(h.h2 & m, bs).contains(&h.fp)
    }

    /// Starts loading both candidate buckets.
    #[inline]
    fn prefetch(&self, h: &CuckooHash, bs: usize) {
        let m = self.mask();
        prefetch(self.slots[(h.h1 & m) as usize * bs..].as_ptr());
        prefetch(self.slots[(h.h2 & m) as usize * bs..].as_ptr());
    }
}

impl Slots for SubFilter {
    type Fp = u8;
    type Hash = CuckooHash;
    type Ctx = ();
    const EMPTY: u8 = 0;

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
        SubFilter::is_full(self)
    }

    #[inline]
    fn fp(&self, h: &CuckooHash) -> u8 {
        h.fp
    }

    #[inline]
    fn hashes(h: &CuckooHash) -> (u64, u64) {
        (h.h1, h.h2)
    }

    #[inline]
    fn alt(&self, (): (), b: u64, fp: u8) -> u64 {
        b ^ alt_offset(fp)
    }

    #[inline]
    fn cut_for(&self, fp: u8, _: &Self) -> u8 {
        fp
    }

    #[inline]
    fn slot_at(&self, bs: u64, b: u64, slot: u64) -> u8 {
        self.bucket(b, bs as usize)[slot as usize]
    }

    #[inline]
    fn replace_at(&mut self, bs: u64, b: u64, slot: u64, fp: u8) -> u8 {
        std::mem::replace(&mut self.bucket_mut(b, bs as usize)[slot as usize], fp)
    }

    #[inline]
    fn find_in(&self, bs: u64, b: u64, fp: u8) -> Option<u64> {
        let at = self.bucket(b, bs as usize).iter().position(|&x| x == fp);
        at.map(|i| i as u64)
    }

    #[inline]
    fn put_in(&mut self, bs: u64, b: u64, fp: u8) -> bool {
        let bucket = self.bucket_mut(b, bs as usize);
        match first_empty(bucket) {
            Some(i) => {
                bucket[i] = fp;
                self.occupied += 1;
                if self.huge.due(self.occupied) {
                    self.huge.step(&self.slots, self.occupied);
                }
                true
            }
            None => false,
        }
    }

    #[inline]
    fn clear_at(&mut self, bs: u64, b: u64, slot: u64) {
        self.bucket_mut(b, bs as usize)[slot as usize] = 0;
        self.occupied -= 1;
    }

    type Shape = Params;
    const PAD_BYTES: u64 = 0;

    #[inline]
    fn params(shape: &Params) -> Params {
        *shape
    }

    #[inline]
    fn ctx(_: &Params) {}

    #[inline]
    fn hash(_: &Params, item: &[u8]) -> CuckooHash {
        CuckooHash::of(item)
    }

    #[inline]
    fn blank(_: &Params) -> CuckooHash {
        CuckooHash::from_hash(0)
    }

    fn persisted_bytes(shape: &Params, _: usize, buckets: u64) -> Option<u64> {
        slot_bytes(buckets, shape.bucket_size)
    }

    fn new_sub(shape: &Params, _: usize, buckets: u64) -> Result<Self, FilterError> {
        SubFilter::zeroed(buckets, shape.bucket_size)
    }

    fn boxes(filter: u64) -> u64 {
        filter
    }

    fn persisted(&self) -> &[u8] {
        &self.slots
    }

    fn heap_mut(&mut self) -> &mut Vec<u8> {
        &mut self.slots
    }

    fn try_copy(&self) -> Result<Self, FilterError> {
        // As lazy as the source, in huge pages at once if the source is dense.
        let (hint, huge) = self.huge.for_copy(self.occupied);
        let slots = crate::zeroed::try_copy_sparse(&self.slots, self.occupied == 0, hint)?;
        Ok(SubFilter {
            slots,
            huge,
            ..*self
        })
    }

    #[inline]
    fn holds_item(&self, h: &CuckooHash, bs: usize) -> bool {
        self.holds(h, bs)
    }

    fn count_item(&self, h: &CuckooHash, bs: usize) -> u64 {
        let in_bucket = |b: u64| {
            self.bucket(b & self.mask(), bs)
                .iter()
                .filter(|&&x| x == h.fp)
                .count()
        };
        (in_bucket(h.h1) + in_bucket(h.h2)) as u64
    }

    #[inline]
    fn prefetch_item(&self, h: &CuckooHash, bs: usize) {
        self.prefetch(h, bs)
    }
}

fn count_occupied(slots: &[u8]) -> u64 {
    slots.iter().filter(|&&s| s != 0).count() as u64
}

/// Bytes of a sub-filter's slots, if they fit in memory at all.
pub(crate) fn slot_bytes(buckets: u64, bucket_size: u8) -> Option<u64> {
    buckets
        .checked_mul(u64::from(bucket_size))
        .filter(|&b| b <= isize::MAX as u64)
}

#[inline]
pub(crate) fn prefetch(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint with no architectural effect; any address is allowed.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// `CF.INFO`'s figures, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// RedisBloom's own size figure (`CuckooFilter::info_size`).
    pub size: u64,
    /// The first sub-filter's bucket count.
    pub buckets: u64,
    pub filters: u64,
    pub items: u64,
    pub deletes: u64,
    pub bucket_size: u64,
    pub expansion: u64,
    pub max_iterations: u64,
}

/// RedisBloom's layout: sub-filters of one-byte fingerprints (`chain::Filter`). Its value
/// is the filter itself (boxed once by Redis), 56 bytes as before the layouts shared it.
pub type CuckooFilter = Filter<SubFilter>;

const _: () = assert!(std::mem::size_of::<CuckooFilter>() == 56);

impl CuckooFilter {
    /// An empty filter of one sub-filter of `buckets` buckets (a power of two), refused if
    /// it would take more than `max_bytes` by the allocator model.
    pub fn new(buckets: u64, params: Params, max_bytes: u64) -> Result<Self, CuckooError> {
        params.check().map_err(CuckooError::Params)?;
        if !buckets.is_power_of_two() {
            return Err(CuckooError::Params(super::ParamError::Buckets));
        }
        Filter::empty(buckets, params, max_bytes)
    }

    /// A filter from validated persisted parts.
    pub(crate) fn from_parts(
        subs: Vec<SubFilter>,
        items: u64,
        deletes: u64,
        params: Params,
    ) -> Self {
        Filter::of(subs, items, deletes, params)
    }

    /// `CF.INFO`'s `Size`: RedisBloom's struct (40 bytes), a 16-byte entry per sub-filter and
    /// the slots. Not the real allocation (`memory_usage`), but RedisBloom's figure exactly.
    pub fn info_size(&self) -> u64 {
        40u64
            .saturating_add(16u64.saturating_mul(self.subs.len() as u64))
            .saturating_add(self.slot_bytes())
    }

    /// Every `CF.INFO` figure.
    pub fn info(&self) -> Info {
        let params = self.params();
        Info {
            size: self.info_size(),
            buckets: self.buckets(),
            filters: self.subs.len() as u64,
            items: self.items,
            deletes: self.deletes,
            bucket_size: u64::from(params.bucket_size),
            expansion: u64::from(params.expansion),
            max_iterations: u64::from(params.max_iterations),
        }
    }

    /// `CF.DEBUG`'s line.
    pub fn debug_line(&self) -> String {
        let params = self.params();
        format!(
            "bktsize:{} buckets:{} items:{} deletes:{} filters:{} max_iterations:{} expansion:{}",
            params.bucket_size,
            self.buckets(),
            self.items,
            self.deletes,
            self.subs.len(),
            params.max_iterations,
            params.expansion
        )
    }
}

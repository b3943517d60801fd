//! What one command may spend, in units of work rather than time, so that a primary, its
//! replicas and an AOF replay stop at the same point: the budgets of eviction walks and of
//! compaction, the cost of a bucket probe, and the limits an adding command is held to.
//! A leaf: both slot layouts and the generic filter read it.

/// Items hashed and prefetched together by the batch paths: enough to overlap the cache
/// misses of many items, few enough that their buckets stay in L1 until probed.
pub(crate) const BATCH: usize = 32;

/// Work one compaction may spend: `CF.COMPACT`, or the automatic one inside `CF.DEL`. Counted
/// in units of work, not time, so a primary, its replicas and an AOF replay stop at the same
/// point: each bucket probe (a source bucket read, or a bucket searched for an empty slot)
/// costs [`probe_cost`], its slots plus a cache miss. Compaction otherwise costs up to slots ×
/// sub-filters × 2 probes of up to 255 bytes, which a loaded filter can make hours; counted
/// in probes alone (2^20 of them) it still took 0.2 s over 255-slot buckets, and walking past
/// full sub-filters, uncounted, 1 s. 2^22 units take a few milliseconds at any bucket size.
pub const COMPACT_BUDGET: u64 = 1 << 22;

/// The cost of one compaction probe of a bucket of `bucket_size` slots: its slots, plus 64
/// for the cache miss of reaching it (which dominates small buckets).
pub(crate) fn probe_cost(bucket_size: u64) -> u64 {
    bucket_size + 64
}

/// The sub-filters a fingerprint may move into during compaction, oldest first: those with
/// an empty slot. Kept so that full sub-filters cost nothing per fingerprint (a filter of 1024
/// full sub-filters used to be walked past for every slot). Empty when the list cannot be
/// allocated: compaction then moves nothing, which is always correct.
pub(crate) fn open_subs(full: impl Iterator<Item = bool>) -> Vec<usize> {
    let full: Vec<bool> = full.collect();
    let mut open = Vec::new();
    if open.try_reserve_exact(full.len()).is_ok() {
        open.extend((0..full.len()).filter(|&j| !full[j]));
    }
    open
}

/// Work one adding command may spend on eviction walks, over all its items, in compaction's
/// units (`probe_cost`): each swap of a walk moves the evicted fingerprint into the next
/// bucket, a probe of its slots; a walk that fails is undone swap by swap, as many probes
/// again. Counted in work, not time, for the same reason as `COMPACT_BUDGET`: the primary,
/// its replicas and an AOF replay stop at the same item. Counted in swaps alone (2^20 of
/// them) a batch over 255-slot buckets took 0.2-0.3 s, and one walk of 65535 swaps 16 ms.
/// 2^24 units pay a whole walk of 65535 swaps and its undo at any bucket size up to 64, so
/// such filters walk exactly as RedisBloom's; a walk over larger buckets is cut to what the
/// budget pays (`walk_limit`), a few milliseconds.
pub const WALK_BUDGET: u64 = 1 << 24;

/// The longest eviction walk of a filter: `max_iterations` swaps, or fewer where a walk of
/// that many and its undo would cost more than `WALK_BUDGET` (bucket sizes over 64 at the
/// highest `max_iterations`: at 255 slots, 26,296 swaps). A walk cut there fails, and is
/// undone, as one that reached `max_iterations`. The same on every server, so replicas and
/// the AOF place every item where the primary did.
pub fn walk_limit(max_iterations: u16, bucket_size: u8) -> u64 {
    u64::from(max_iterations).min(WALK_BUDGET / (2 * probe_cost(u64::from(bucket_size))))
}

/// The first empty (zero) slot of a bucket: eight slots a step, so that an eviction walk
/// over 255-slot buckets, which probes one bucket a swap, is not a byte-at-a-time scan.
#[inline]
pub(crate) fn first_empty(bucket: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = bucket.chunks_exact(8);
    for (k, word) in (&mut words).enumerate() {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        // The lowest set bit marks the first zero byte (bits above it may be false).
        let zero = w.wrapping_sub(ONES) & !w & HIGHS;
        if zero != 0 {
            return Some(k * 8 + zero.trailing_zeros() as usize / 8);
        }
    }
    let rest = words.remainder();
    let done = bucket.len() - rest.len();
    rest.iter().position(|&s| s == 0).map(|i| done + i)
}

/// What an adding command may do: the sub-filter count at which it is refused before any
/// item (RedisBloom's `CF_MAX_EXPANSIONS`) and the bytes growth may take the filter to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_expansions: usize,
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expansions: super::params::DEFAULT_MAX_EXPANSIONS,
            max_bytes: u64::MAX,
        }
    }
}

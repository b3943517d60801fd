//! What the two cuckoo layouts share: a sub-filter's slot layout as a trait ([`Slots`]:
//! RedisBloom's one-byte slots, or the packed fields of a chosen rate), and the algorithms
//! written once over it: placing an item, the eviction walk and its undo, deletes, and
//! compaction within its budget of work.

use super::budget::{open_subs, probe_cost, walk_limit, BATCH, COMPACT_BUDGET, WALK_BUDGET};
use super::params::Params;
use super::{CuckooError, Limits};
use crate::error::FilterError;

/// A sub-filter's slots: buckets of `bs` slots (the filter's bucket size, passed in: the
/// layout of RedisBloom's sub-filters does not keep it), a fingerprint in each, `EMPTY` in
/// none. Occupancy is kept by `put` and `clear`.
pub trait Slots: Sized {
    /// A stored fingerprint.
    type Fp: Copy + PartialEq;
    /// An item's hash: its two bucket hashes and what its fingerprints are cut from.
    type Hash: Copy;
    /// What a filter of this layout keeps of its shape: its settings, and for packed fields
    /// the widths and the rate asked for.
    type Shape: Copy + std::fmt::Debug + PartialEq;
    /// Zero bytes allocated after the persisted slots (`Filter::modelled_bytes`).
    const PAD_BYTES: u64;
    /// What finds a stored fingerprint's other bucket besides the fingerprint (the first
    /// sub-filter's width for packed fields; nothing for RedisBloom's).
    type Ctx: Copy;
    /// The value of an empty slot.
    const EMPTY: Self::Fp;

    fn buckets(&self) -> u64;
    /// Occupied slots.
    fn occupied(&self) -> u64;
    /// Whether no slot is empty.
    fn is_full(&self) -> bool;
    #[inline]
    fn mask(&self) -> u64 {
        self.buckets() - 1
    }
    /// The item's fingerprint as this sub-filter stores it.
    fn fp(&self, h: &Self::Hash) -> Self::Fp;
    /// The item's two bucket hashes (masked by each sub-filter).
    fn hashes(h: &Self::Hash) -> (u64, u64);
    /// The other bucket of fingerprint `fp` stored in bucket `b` (unmasked).
    fn alt(&self, ctx: Self::Ctx, b: u64, fp: Self::Fp) -> u64;
    /// Fingerprint `fp` of this sub-filter as `older` stores it.
    fn cut_for(&self, fp: Self::Fp, older: &Self) -> Self::Fp;
    /// Slot `slot` of bucket `b`.
    fn slot_at(&self, bs: u64, b: u64, slot: u64) -> Self::Fp;
    /// Writes slot `slot` of bucket `b`, returning what it held (occupancy unchanged).
    fn replace_at(&mut self, bs: u64, b: u64, slot: u64, fp: Self::Fp) -> Self::Fp;
    /// The first slot of bucket `b` holding `fp`.
    fn find_in(&self, bs: u64, b: u64, fp: Self::Fp) -> Option<u64>;
    /// Stores `fp` in the first empty slot of bucket `b`, if it has one.
    fn put_in(&mut self, bs: u64, b: u64, fp: Self::Fp) -> bool;
    /// Empties slot `slot` of bucket `b`, which holds a fingerprint.
    fn clear_at(&mut self, bs: u64, b: u64, slot: u64);

    // ---- what the filter (`chain::Filter`) asks of its layout ------------------------------

    fn params(shape: &Self::Shape) -> Params;
    fn ctx(shape: &Self::Shape) -> Self::Ctx;
    /// An item's hash in a filter of this shape.
    fn hash(shape: &Self::Shape, item: &[u8]) -> Self::Hash;
    /// A hash to fill a batch's array with before its items' are written.
    fn blank(shape: &Self::Shape) -> Self::Hash;
    /// Persisted slot bytes of sub-filter `index` of `buckets` buckets, if they fit in memory.
    fn persisted_bytes(shape: &Self::Shape, index: usize, buckets: u64) -> Option<u64>;
    /// An empty sub-filter `index` of `buckets` buckets.
    fn new_sub(shape: &Self::Shape, index: usize, buckets: u64) -> Result<Self, FilterError>;
    /// The allocator model's bytes of the boxes holding a filter whose struct takes
    /// `filter` (its own allocation, and any the value Redis holds adds around it).
    fn boxes(filter: u64) -> u64;
    /// The slots as persisted.
    fn persisted(&self) -> &[u8];
    /// The slots' heap block, to relocate.
    fn heap_mut(&mut self) -> &mut Vec<u8>;
    /// A deep copy, as lazy as the source (`zeroed::try_copy_sparse`).
    fn try_copy(&self) -> Result<Self, FilterError>;
    /// Whether either candidate bucket holds the item's fingerprint.
    fn holds_item(&self, h: &Self::Hash, bs: usize) -> bool;
    /// Slots holding the item's fingerprint in its two buckets (a bucket twice when both
    /// are the same one).
    fn count_item(&self, h: &Self::Hash, bs: usize) -> u64;
    /// Starts loading both candidate buckets.
    fn prefetch_item(&self, h: &Self::Hash, bs: usize);
}

/// Stores the item in the first empty slot of its buckets, bucket `h1` before `h2`, from the
/// newest sub-filter to the oldest.
#[inline]
pub(crate) fn place<S: Slots>(subs: &mut [S], bs: u64, h: &S::Hash) -> bool {
    let (h1, h2) = S::hashes(h);
    subs.iter_mut().rev().any(|s| {
        let fp = s.fp(h);
        let m = s.mask();
        s.put_in(bs, h1 & m, fp) || s.put_in(bs, h2 & m, fp)
    })
}

/// The eviction walk (`kick`) in the newest of `subs`, skipped when it has no empty slot:
/// swaps keep the count of fingerprints, so every walk there ends undone and changes nothing,
/// after up to `walk_limit` swaps over buckets of up to 255 slots (milliseconds per item).
/// Refused with `KickBudget`, before any swap, when `kicks` could not pay a failed walk of
/// `walk_limit` swaps: a walk cut short by the command's budget would fail (or grow the
/// filter) where one item alone succeeds. Its work is taken from `kicks` (`walk_within`).
pub(crate) fn kick_within<S: Slots>(
    subs: &mut [S],
    params: &Params,
    ctx: S::Ctx,
    h: &S::Hash,
    kicks: &mut u64,
) -> Result<bool, CuckooError> {
    let room = subs.last().is_some_and(|s| !s.is_full());
    let limit = walk_limit(params.max_iterations, params.bucket_size);
    let bs = u64::from(params.bucket_size);
    walk_within(room, limit, bs, kicks, || {
        subs.last_mut().and_then(|s| kick(s, bs, ctx, h, limit))
    })
}

/// The eviction budget's rule, the same for both layouts (`kick_within`): no walk
/// where the newest sub-filter has no `room` (an empty slot); `KickBudget`, before any swap,
/// where `budget` could not pay a failed walk of `limit` swaps (`walk_limit`) and its undo;
/// else the `walk` (`Some(swaps)` when it placed the item, `None` after `limit` swaps undone),
/// paid from `budget`: a probe of `bucket_size` slots a swap, twice for a failed walk.
fn walk_within(
    room: bool,
    limit: u64,
    bucket_size: u64,
    budget: &mut u64,
    walk: impl FnOnce() -> Option<u64>,
) -> Result<bool, CuckooError> {
    if !room {
        return Ok(false);
    }
    let probe = probe_cost(bucket_size);
    let worst = 2 * limit * probe;
    if *budget < worst {
        return Err(CuckooError::KickBudget);
    }
    let swaps = walk();
    *budget -= swaps.map_or(worst, |n| n * probe);
    Ok(swaps.is_some())
}

/// The eviction walk in sub-filter `s`, from bucket `h1`: swap the fingerprint in hand with
/// the victim slot (0, 1, ... cycling), carry the evicted one to its other bucket, stop at the
/// first empty slot. Deterministic: it depends only on the item and the filter. When it fails
/// after `limit` swaps (`None`), the swaps are undone in reverse, which needs no log: with a
/// power-of-two bucket count, a fingerprint's previous bucket is its current one XOR its
/// offset. `Some(swaps)` when it placed it.
pub(crate) fn kick<S: Slots>(
    s: &mut S,
    bs: u64,
    ctx: S::Ctx,
    h: &S::Hash,
    limit: u64,
) -> Option<u64> {
    let mask = s.mask();
    let mut b = S::hashes(h).0 & mask;
    let mut hand = s.fp(h);
    for i in 0..limit {
        hand = s.replace_at(bs, b, i % bs, hand);
        let next = s.alt(ctx, b, hand) & mask;
        if s.put_in(bs, next, hand) {
            return Some(i + 1);
        }
        if i + 1 < limit {
            b = next;
        }
    }
    // `b` is the bucket of the last swap; walk back.
    for j in (0..limit).rev() {
        hand = s.replace_at(bs, b, j % bs, hand);
        if j > 0 {
            b = s.alt(ctx, b, hand) & mask;
        }
    }
    debug_assert!(
        hand == s.fp(h),
        "the undo gives back the item's fingerprint"
    );
    None
}

/// Removes one slot holding the item's fingerprint: newest sub-filter first, bucket `h1`
/// before `h2`. Whether it found one.
pub(crate) fn remove<S: Slots>(subs: &mut [S], bs: u64, h: &S::Hash) -> bool {
    let (h1, h2) = S::hashes(h);
    subs.iter_mut().rev().any(|s| {
        let fp = s.fp(h);
        let m = s.mask();
        [h1 & m, h2 & m]
            .into_iter()
            .any(|b| match s.find_in(bs, b, fp) {
                Some(slot) => {
                    s.clear_at(bs, b, slot);
                    true
                }
                None => false,
            })
    })
}

/// Compaction: for each sub-filter from the newest down to the second, each fingerprint
/// (bucket by bucket, slot by slot) moves to the first empty slot of its two buckets in the
/// oldest sub-filter that has one (cut to that one's width). The two buckets come from its
/// current bucket index: every older sub-filter's bucket count divides this one's, so they
/// are the item's own. An emptied newest sub-filter is dropped. `past_full` continues past a
/// sub-filter that could not be emptied (`CF.COMPACT`); the automatic compaction stops there.
///
/// Sub-filters without an empty slot are skipped (a put there fails anyway), and so are the
/// rest of a sub-filter's buckets once it is empty: the results are RedisBloom's. It stops
/// where it is once `budget` units of work are spent (a probe of a bucket read or searched
/// costs `probe_cost`), checked before every probe; the fingerprints moved so far stay moved
/// and the sub-filter it was on stays. Returns the work spent.
pub(crate) fn compact<S: Slots>(
    subs: &mut Vec<S>,
    bs: u64,
    ctx: S::Ctx,
    past_full: bool,
    budget: u64,
) -> u64 {
    let probe = probe_cost(bs);
    let mut spent = 0u64;
    let mut open = open_subs(subs.iter().map(S::is_full));
    'subs: for i in (1..subs.len()).rev() {
        while open.last().is_some_and(|&j| j >= i) {
            open.pop();
        }
        let (older, rest) = subs.split_at_mut(i);
        let sub = &mut rest[0];
        for b in 0..sub.buckets() {
            if sub.occupied() == 0 || open.is_empty() {
                break;
            }
            if spent >= budget {
                break 'subs;
            }
            spent += probe;
            for slot in 0..bs {
                let fp = sub.slot_at(bs, b, slot);
                if fp == S::EMPTY {
                    continue;
                }
                let alt = sub.alt(ctx, b, fp);
                let mut moved = false;
                let mut k = 0;
                while k < open.len() {
                    // Checked per fingerprint: one bucket's fingerprints may each probe
                    // every older sub-filter.
                    if spent >= budget {
                        break 'subs;
                    }
                    let o = &mut older[open[k]];
                    let m = o.mask();
                    let cut = sub.cut_for(fp, o);
                    spent += probe;
                    moved = o.put_in(bs, b & m, cut);
                    if !moved {
                        spent += probe;
                        moved = o.put_in(bs, alt & m, cut);
                    }
                    if moved {
                        if o.is_full() {
                            open.remove(k);
                        }
                        break;
                    }
                    k += 1;
                }
                if moved {
                    sub.clear_at(bs, b, slot);
                }
            }
        }
        if sub.occupied() == 0 {
            if i == subs.len() - 1 {
                subs.pop();
            }
        } else if !past_full {
            break;
        }
    }
    spent
}

/// A filter's counters and sub-filters, borrowed together for an update.
pub(crate) struct Tally<'a, S> {
    pub subs: &'a mut Vec<S>,
    pub items: &'a mut u64,
    pub deletes: &'a mut u64,
    pub deletes_not_found: &'a mut u64,
}

/// A filter of sub-filters of one layout, as the adding, deleting and compacting paths below
/// need it: they are written once for both layouts, as Bloom's `Chain` is over its `Layer`.
pub(crate) trait Chain {
    type Sub: Slots<Hash = Self::Hash>;
    type Hash: Copy;
    fn subs(&self) -> &[Self::Sub];
    fn params(&self) -> Params;
    fn ctx(&self) -> <Self::Sub as Slots>::Ctx;
    /// The item's hash.
    fn hash(&self, item: &[u8]) -> Self::Hash;
    /// A hash to fill a batch's array with before its items' are written.
    fn blank(&self) -> Self::Hash;
    fn contains_hash(&self, h: &Self::Hash) -> bool;
    /// Starts loading both buckets of every hash in the newest `subs` sub-filters.
    fn prefetch_batch(&self, hashes: &[Self::Hash], subs: usize);
    fn tally(&mut self) -> Tally<'_, Self::Sub>;
    /// Appends a sub-filter `expansion` times the newest one's size, within `max_bytes`.
    fn grow(&mut self, max_bytes: u64) -> Result<(), CuckooError>;
}

/// Refuses an adding command once the filter has `limits.max_expansions` sub-filters,
/// whether or not its items would fit (RedisBloom's rule, checked once per command).
pub(crate) fn check_expansions<C: Chain>(c: &C, limits: &Limits) -> Result<(), CuckooError> {
    if c.subs().len() >= limits.max_expansions {
        return Err(CuckooError::MaxExpansions);
    }
    Ok(())
}

/// `CF.ADD`: adds the item even if present (a duplicate takes another slot).
pub(crate) fn add<C: Chain>(c: &mut C, item: &[u8], limits: &Limits) -> Result<(), CuckooError> {
    check_expansions(c, limits)?;
    let h = c.hash(item);
    insert_hash(c, &h, limits.max_bytes, &mut WALK_BUDGET.clone())
}

/// `CF.ADDNX`: adds the item unless it looks present; `Ok(false)` changed nothing.
pub(crate) fn add_nx<C: Chain>(
    c: &mut C,
    item: &[u8],
    limits: &Limits,
) -> Result<bool, CuckooError> {
    check_expansions(c, limits)?;
    let h = c.hash(item);
    if c.contains_hash(&h) {
        return Ok(false);
    }
    insert_hash(c, &h, limits.max_bytes, &mut WALK_BUDGET.clone()).map(|()| true)
}

/// One result per item of a batch: added, present (NX), or did not fit.
pub(crate) type Batch = Result<Vec<Result<bool, CuckooError>>, CuckooError>;

/// `CF.INSERT` / `CF.INSERTNX`: the expansion limit is checked once, before any item
/// (`Err`); then one result per item, as if added one by one: `Ok(true)` added,
/// `Ok(false)` present (NX only), `Err(Full)` did not fit (the next items are still
/// tried). Any other error stops the batch: the results end there. `kicks` is what is
/// left of the command's eviction budget (`WALK_BUDGET`, in units of work), spent by each
/// walk; an item whose walk could need more than is left is refused with
/// `Err(KickBudget)` before it walks.
pub(crate) fn insert_many_within<C: Chain>(
    c: &mut C,
    items: &[&[u8]],
    nx: bool,
    limits: &Limits,
    kicks: &mut u64,
) -> Batch {
    check_expansions(c, limits)?;
    let mut out = Vec::with_capacity(items.len());
    let mut batch = [c.blank(); BATCH];
    for chunk in items.chunks(BATCH) {
        // A hash depends on the item (and the first width) alone, so it stays valid while
        // earlier items of the batch grow the filter.
        for (h, item) in batch.iter_mut().zip(chunk) {
            *h = c.hash(item);
        }
        let hashes = &batch[..chunk.len()];
        // Only a hint: earlier inserts of the batch may grow the filter, which changes
        // nothing about the results. An insert looks for room in the newest sub-filter
        // first and seldom looks further, so only its buckets are asked for (memory
        // bandwidth, not latency, bounds a batch); an NX insert's lookup reads them all.
        c.prefetch_batch(hashes, if nx { c.subs().len() } else { 1 });
        for h in hashes {
            let result = if nx && c.contains_hash(h) {
                Ok(false)
            } else {
                insert_hash(c, h, limits.max_bytes, kicks).map(|()| true)
            };
            let stop = matches!(&result, Err(e) if *e != CuckooError::Full);
            out.push(result);
            if stop {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// Adds a fingerprint: the first empty slot of its buckets from the newest sub-filter to
/// the oldest, else evictions in the newest (within `kicks`), else a new sub-filter. A
/// failure changes nothing.
#[inline]
pub(crate) fn insert_hash<C: Chain>(
    c: &mut C,
    h: &C::Hash,
    max_bytes: u64,
    kicks: &mut u64,
) -> Result<(), CuckooError> {
    let (params, ctx) = (c.params(), c.ctx());
    let bs = u64::from(params.bucket_size);
    let t = c.tally();
    if place(t.subs, bs, h) {
        *t.items = t.items.saturating_add(1);
        return Ok(());
    }
    let budget = *kicks;
    if !kick_within(t.subs, &params, ctx, h, kicks)? {
        if params.expansion == 0 {
            return Err(CuckooError::Full);
        }
        // A growth refused leaves the item unprocessed (the batch stops at it, to be
        // resumed under other limits): its undone walk is not paid for.
        c.grow(max_bytes).inspect_err(|_| *kicks = budget)?;
        let placed = place(c.tally().subs, bs, h);
        debug_assert!(placed, "a new sub-filter is empty");
    }
    let items = c.tally().items;
    *items = items.saturating_add(1);
    Ok(())
}

/// `CF.DEL`: removes one copy of the fingerprint (`remove`). An item never added may remove
/// another item's equal fingerprint: that item is then a false negative. With several
/// sub-filters, once deletes exceed a tenth of the items the filter compacts itself
/// (`compact_chain`, stopping at the first sub-filter it cannot empty).
pub(crate) fn delete_hash<C: Chain>(c: &mut C, h: &C::Hash) -> bool {
    let bs = u64::from(c.params().bucket_size);
    let t = c.tally();
    if !remove(t.subs, bs, h) {
        *t.deletes_not_found = t.deletes_not_found.saturating_add(1);
        return false;
    }
    *t.items = t.items.saturating_sub(1);
    *t.deletes = t.deletes.saturating_add(1);
    if t.subs.len() > 1 && u128::from(*t.deletes) * 10 > u128::from(*t.items) {
        compact_chain(c, false, COMPACT_BUDGET);
    }
    true
}

/// Compaction within `budget` units of work (`compact`); the delete count restarts at 0.
/// Returns the work spent.
pub(crate) fn compact_chain<C: Chain>(c: &mut C, past_full: bool, budget: u64) -> u64 {
    let (bs, ctx) = (u64::from(c.params().bucket_size), c.ctx());
    let t = c.tally();
    let spent = compact(t.subs, bs, ctx, past_full, budget);
    *t.deletes = 0;
    spent
}

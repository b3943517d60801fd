//! The filter both layouts share: a chain of sub-filters of one slot layout ([`Slots`]),
//! their counters and the layout's shape. Lookups, counts, prefetching, growth, the memory
//! model, copies and the accessors are written here once; what differs between the layouts
//! (how an item hashes, how a sub-filter is sized, what their values cost beyond this struct)
//! is the layout's. [`super::CuckooFilter`] (RedisBloom's layout) and
//! [`super::RatedFilter`] (the extension's) are this struct over their sub-filters.

use super::budget::{BATCH, COMPACT_BUDGET, WALK_BUDGET};
use super::params::{Params, MAX_SUB_FILTERS};
use super::slots::{self, Batch, Chain, Slots, Tally};
use super::{CuckooError, Limits};
use crate::error::FilterError;
use crate::fallible::{try_push, try_vec};

/// A scalable cuckoo filter: one or more sub-filters, sub-filter `i` having `buckets ×
/// expansion^i` buckets. Equality is of what persists: `deletes_not_found` is a local figure.
#[derive(Debug, Clone)]
pub struct Filter<S: Slots> {
    pub(super) subs: Vec<S>,
    pub(super) items: u64,
    pub(super) deletes: u64,
    /// Deletes that found no copy of their fingerprint since the filter was created or
    /// loaded on this server: neither persisted nor replicated (such a delete changes
    /// nothing, so it is not sent).
    pub(super) deletes_not_found: u64,
    /// The settings and whatever else the layout keeps of its shape.
    pub(super) shape: S::Shape,
}

impl<S: Slots + PartialEq> PartialEq for Filter<S> {
    fn eq(&self, other: &Self) -> bool {
        self.subs == other.subs
            && self.items == other.items
            && self.deletes == other.deletes
            && self.shape == other.shape
    }
}

impl<S: Slots + Eq> Eq for Filter<S> {}

impl<S: Slots> Filter<S> {
    /// A filter of these sub-filters and counters (new, or from validated persisted parts).
    pub(super) fn of(subs: Vec<S>, items: u64, deletes: u64, shape: S::Shape) -> Self {
        Filter {
            subs,
            items,
            deletes,
            deletes_not_found: 0,
            shape,
        }
    }

    /// An empty filter of one sub-filter of `buckets` buckets (checked by the caller),
    /// refused if it would take more than `max_bytes` by the allocator model.
    pub(super) fn empty(
        buckets: u64,
        shape: S::Shape,
        max_bytes: u64,
    ) -> Result<Self, CuckooError> {
        let oom = FilterError::OutOfMemory { bytes: u64::MAX };
        let bytes = S::persisted_bytes(&shape, 0, buckets).ok_or(oom)?;
        let needed = Self::modelled_bytes(1, [bytes]);
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            }
            .into());
        }
        let mut subs = try_vec(1)?;
        subs.push(S::new_sub(&shape, 0, buckets)?);
        Ok(Self::of(subs, 0, 0, shape))
    }

    pub fn params(&self) -> Params {
        S::params(&self.shape)
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    /// Deletes that found nothing since the filter was created or loaded here.
    pub fn deletes_not_found(&self) -> u64 {
        self.deletes_not_found
    }

    /// The first sub-filter's bucket count.
    pub fn buckets(&self) -> u64 {
        self.subs[0].buckets()
    }

    pub fn sub_filters(&self) -> &[S] {
        &self.subs
    }

    pub(crate) fn sub_filters_mut(&mut self) -> &mut [S] {
        &mut self.subs
    }

    /// Bytes of all sub-filters' slots, as persisted.
    pub fn slot_bytes(&self) -> u64 {
        self.subs.iter().map(|s| s.persisted().len() as u64).sum()
    }

    /// Bytes the filter takes by the allocator model (`footprint`): the boxes holding it, its
    /// sub-filter table and every slot array. Equal filters give equal figures everywhere.
    pub fn memory_usage(&self) -> u64 {
        self.memory_usage_of_first(self.subs.len())
    }

    /// `memory_usage` of the filter's oldest `count` sub-filters alone: what it was before
    /// the newer ones were added (at most all of them).
    pub fn memory_usage_of_first(&self, count: usize) -> u64 {
        let subs = &self.subs[..count.min(self.subs.len())];
        Self::modelled_bytes(subs.len(), subs.iter().map(|s| s.persisted().len() as u64))
    }

    /// `memory_usage` of a filter of `count` sub-filters with these persisted slot byte
    /// counts.
    pub fn modelled_bytes(count: usize, slot_arrays: impl IntoIterator<Item = u64>) -> u64 {
        use crate::footprint::allocation;
        use std::mem::size_of;
        let boxed = S::boxes(allocation(size_of::<Self>() as u64, 8));
        let table = allocation((count as u64).saturating_mul(size_of::<S>() as u64), 8);
        slot_arrays
            .into_iter()
            .fold(boxed.saturating_add(table), |sum, bytes| {
                sum.saturating_add(allocation(bytes.saturating_add(S::PAD_BYTES), 1))
            })
    }

    /// Offers every heap block the filter holds to `to` (active defragmentation): each
    /// sub-filter's slots, then the sub-filter table.
    pub fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator) {
        for s in &mut self.subs {
            crate::relocate::relocate_vec(s.heap_mut(), to);
        }
        crate::relocate::relocate_vec(&mut self.subs, to);
    }

    /// A deep copy, reporting allocation failure instead of aborting.
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let mut subs = try_vec(self.subs.len())?;
        for s in &self.subs {
            subs.push(s.try_copy()?);
        }
        Ok(Filter { subs, ..*self })
    }

    #[inline]
    fn bs(&self) -> usize {
        usize::from(S::params(&self.shape).bucket_size)
    }

    /// The item's hash in this filter.
    #[inline]
    pub(super) fn hash(&self, item: &[u8]) -> S::Hash {
        S::hash(&self.shape, item)
    }

    // ---- lookups ------------------------------------------------------------------------

    /// Whether some sub-filter holds the item's fingerprint in one of its buckets.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(&self.hash(item))
    }

    #[inline]
    pub fn contains_hash(&self, h: &S::Hash) -> bool {
        let bs = self.bs();
        self.subs.iter().rev().any(|s| s.holds_item(h, bs))
    }

    /// Slots holding the item's fingerprint in both buckets of every sub-filter; a bucket
    /// is counted twice when both candidates are the same bucket, as RedisBloom does.
    pub fn count(&self, item: &[u8]) -> u64 {
        self.count_hash(&self.hash(item))
    }

    pub fn count_hash(&self, h: &S::Hash) -> u64 {
        let bs = self.bs();
        self.subs.iter().map(|s| s.count_item(h, bs)).sum()
    }

    /// Starts loading every bucket a batch will probe in the newest `subs` sub-filters.
    #[inline]
    fn prefetch_batch(&self, hashes: &[S::Hash], subs: usize) {
        let bs = self.bs();
        for s in self.subs.iter().rev().take(subs) {
            for h in hashes {
                s.prefetch_item(h, bs);
            }
        }
    }

    /// `contains` for many items, in order: each batch is hashed and all its candidate
    /// buckets requested before any is probed, so the misses overlap. A hash depends on the
    /// item and the shape alone.
    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        let mut out = Vec::with_capacity(items.len());
        let mut batch = [S::blank(&self.shape); BATCH];
        for chunk in items.chunks(BATCH) {
            for (h, item) in batch.iter_mut().zip(chunk) {
                *h = self.hash(item);
            }
            let hashes = &batch[..chunk.len()];
            self.prefetch_batch(hashes, self.subs.len());
            out.extend(hashes.iter().map(|h| self.contains_hash(h)));
        }
        out
    }

    // ---- inserts (`slots`) --------------------------------------------------------------

    /// `slots::check_expansions`.
    pub fn check_expansions(&self, limits: &Limits) -> Result<(), CuckooError> {
        slots::check_expansions(self, limits)
    }

    /// `CF.ADD`: adds the item even if present (a duplicate takes another slot).
    pub fn add(&mut self, item: &[u8], limits: &Limits) -> Result<(), CuckooError> {
        slots::add(self, item, limits)
    }

    /// `CF.ADDNX`: adds the item unless it looks present; `Ok(false)` changed nothing.
    pub fn add_nx(&mut self, item: &[u8], limits: &Limits) -> Result<bool, CuckooError> {
        slots::add_nx(self, item, limits)
    }

    /// `CF.INSERT` (`nx` false) and `CF.INSERTNX` (`nx` true) within a fresh `WALK_BUDGET`:
    /// `insert_many_within`.
    pub fn insert_many(&mut self, items: &[&[u8]], nx: bool, limits: &Limits) -> Batch {
        self.insert_many_within(items, nx, limits, &mut WALK_BUDGET.clone())
    }

    /// `CF.INSERT` / `CF.INSERTNX` within what is left of the command's eviction budget
    /// (`slots::insert_many_within`).
    pub fn insert_many_within(
        &mut self,
        items: &[&[u8]],
        nx: bool,
        limits: &Limits,
        kicks: &mut u64,
    ) -> Batch {
        slots::insert_many_within(self, items, nx, limits, kicks)
    }

    /// Appends a sub-filter `expansion` times the newest one's buckets, within `max_bytes`.
    fn grow(&mut self, max_bytes: u64) -> Result<(), CuckooError> {
        if self.subs.len() >= MAX_SUB_FILTERS {
            return Err(FilterError::TooManyLayers {
                limit: MAX_SUB_FILTERS,
            }
            .into());
        }
        let oom = FilterError::OutOfMemory { bytes: u64::MAX };
        let last = self.subs.last().map_or(1, |s| s.buckets());
        let buckets = last
            .checked_mul(u64::from(self.params().expansion))
            .ok_or(oom.clone())?;
        let index = self.subs.len();
        let bytes = S::persisted_bytes(&self.shape, index, buckets).ok_or(oom)?;
        let needed = Self::modelled_bytes(
            index + 1,
            self.subs
                .iter()
                .map(|s| s.persisted().len() as u64)
                .chain([bytes]),
        );
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            }
            .into());
        }
        let sub = S::new_sub(&self.shape, index, buckets)?;
        try_push(&mut self.subs, sub)?;
        Ok(())
    }

    // ---- deletes ------------------------------------------------------------------------

    /// `CF.DEL` (`slots::delete_hash`): newest sub-filter first, bucket `h1` before `h2`, and
    /// the automatic compaction past a tenth of the items.
    pub fn delete(&mut self, item: &[u8]) -> bool {
        let h = self.hash(item);
        self.delete_hash(&h)
    }

    pub fn delete_hash(&mut self, h: &S::Hash) -> bool {
        slots::delete_hash(self, h)
    }

    /// `CF.COMPACT`: moves fingerprints from newer sub-filters into older ones and drops the
    /// newest while it empties; the delete count restarts at 0. It stops after
    /// `COMPACT_BUDGET` units of work: a filter that needs more compacts over several calls.
    pub fn compact(&mut self) {
        self.compact_with(true, COMPACT_BUDGET);
    }

    /// `slots::compact_chain`: compaction within `budget` units of work.
    pub(crate) fn compact_with(&mut self, past_full: bool, budget: u64) -> u64 {
        slots::compact_chain(self, past_full, budget)
    }

    #[cfg(test)]
    pub(super) fn insert_hash(
        &mut self,
        h: &S::Hash,
        max_bytes: u64,
        kicks: &mut u64,
    ) -> Result<(), CuckooError> {
        slots::insert_hash(self, h, max_bytes, kicks)
    }
}

impl<S: Slots> Chain for Filter<S> {
    type Sub = S;
    type Hash = S::Hash;

    #[inline]
    fn subs(&self) -> &[S] {
        &self.subs
    }

    #[inline]
    fn params(&self) -> Params {
        S::params(&self.shape)
    }

    #[inline]
    fn ctx(&self) -> S::Ctx {
        S::ctx(&self.shape)
    }

    #[inline]
    fn hash(&self, item: &[u8]) -> S::Hash {
        Filter::hash(self, item)
    }

    #[inline]
    fn blank(&self) -> S::Hash {
        S::blank(&self.shape)
    }

    #[inline]
    fn contains_hash(&self, h: &S::Hash) -> bool {
        Filter::contains_hash(self, h)
    }

    #[inline]
    fn prefetch_batch(&self, hashes: &[S::Hash], subs: usize) {
        Filter::prefetch_batch(self, hashes, subs)
    }

    #[inline]
    fn tally(&mut self) -> Tally<'_, S> {
        Tally {
            subs: &mut self.subs,
            items: &mut self.items,
            deletes: &mut self.deletes,
            deletes_not_found: &mut self.deletes_not_found,
        }
    }

    fn grow(&mut self, max_bytes: u64) -> Result<(), CuckooError> {
        Filter::grow(self, max_bytes)
    }
}

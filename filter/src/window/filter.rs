//! The ring of slices: a windowed filter's state and everything it does (see the module notes
//! in `window/mod.rs` for the semantics).

use crate::bloom::blocked::BlockedLayer;
use crate::bloom::chain::MAX_LAYERS;
use crate::bloom::filter::{FilterSpec, ScalableFilter};
use crate::bloom::layer::{Allocation, Layer};
use crate::error::FilterError;
use crate::fallible::try_vec;
use crate::footprint::allocation;
use crate::window::WindowSpec;

/// One live slice: its absolute id and its filter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Slice {
    pub(crate) id: u64,
    pub(crate) filter: ScalableFilter,
}

/// What `advance_to` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Advance {
    /// Slices dropped (each one a keyspace event for the glue).
    pub expired: u32,
    /// Whether the head moved.
    pub moved: bool,
}

/// What an add did, and what the window held before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Added {
    /// The filter changed (the head slice did not hold the item): replicate it.
    pub changed: bool,
    /// The item answered present in the window before the add (the reply of a "was it
    /// new?" add: 0 when true).
    pub in_window: bool,
}

/// One live slice's figures (BF.INFO's per-slice items, the oldest slice's age).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SliceSummary {
    pub id: u64,
    /// When the slice began, by the primary's clock (saturating).
    pub start_ms: u64,
    pub items: u64,
    /// The sum of its layers' capacities.
    pub capacity: u64,
    /// Its filter's bytes by the allocator model (without the value's box).
    pub bytes: u64,
    pub layers: usize,
}

/// A Bloom filter that forgets: a ring of `ScalableFilter` slices by absolute slice id.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowedFilter {
    spec: WindowSpec,
    /// `spec.slice_spec()`, kept: every slice is created from it.
    slice_spec: FilterSpec,
    origin_ms: u64,
    head: u64,
    /// Oldest first, ids strictly increasing, all within `head - slices ..= head`. The table
    /// is kept at exactly its length, so the memory model is the allocator's truth and equal
    /// filters (a replica, a reload) report equal figures.
    slices: Vec<Slice>,
}

/// The model's bytes for a slice filter held in the table (its figure counts a box the table
/// entry replaces).
fn unboxed_bytes(filter: &ScalableFilter) -> u64 {
    filter
        .memory_usage()
        .saturating_sub(boxed_bytes::<ScalableFilter>())
}

fn boxed_bytes<T>() -> u64 {
    allocation(
        std::mem::size_of::<T>() as u64,
        std::mem::align_of::<T>() as u64,
    )
}

fn table_bytes(len: usize) -> u64 {
    allocation((len * std::mem::size_of::<Slice>()) as u64, 8)
}

/// Whether adding `items` items to `filter` could grow it (the glue's rule for a plain filter).
fn may_grow(filter: &ScalableFilter, items: usize) -> bool {
    if filter.expansion().is_none() || filter.layer_count() >= MAX_LAYERS {
        return false;
    }
    let newest = filter.layer_count().saturating_sub(1);
    let (held, capacity) = filter.layer_load(newest).unwrap_or((0, 0));
    capacity.saturating_sub(held) < items as u64
}

impl WindowedFilter {
    /// A new filter with no slice, created at `now_ms` (its origin). Refused when the spec is
    /// invalid or its steady state could never fit in `max_bytes`: a window written in every
    /// slice holds `slices + 1` slices, so a filter that fits only fewer would be accepted and
    /// then refuse adds at its planned load (as a plain filter's creation covers its planned
    /// capacity).
    pub fn new(spec: WindowSpec, now_ms: u64, max_bytes: u64) -> Result<Self, FilterError> {
        spec.validate()?;
        let slice_spec = spec.slice_spec();
        let first = slice_spec.initial_bytes()?;
        let generations = spec.slices as usize + 1;
        let needed = Self::modelled_bytes(generations, std::iter::repeat_n(first, generations));
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            });
        }
        Ok(WindowedFilter {
            spec,
            slice_spec,
            origin_ms: now_ms,
            head: 0,
            slices: Vec::new(),
        })
    }

    /// A filter from decoded parts; the codec has checked the ids against the head and the
    /// slices' kind against the spec.
    pub(crate) fn from_parts(
        spec: WindowSpec,
        origin_ms: u64,
        head: u64,
        slices: Vec<Slice>,
    ) -> Self {
        WindowedFilter {
            slice_spec: spec.slice_spec(),
            spec,
            origin_ms,
            head,
            slices,
        }
    }

    /// The model's bytes of a filter holding no slice: its box.
    fn empty_bytes() -> u64 {
        boxed_bytes::<WindowedFilter>()
    }

    /// The slice id `now_ms` falls in (0 before the origin).
    pub fn slice_of(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.origin_ms) / self.spec.slice_ms()
    }

    /// The id of the slice adds go into.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Whether `advance_to(current)` would change anything.
    pub fn due(&self, current: u64) -> bool {
        current > self.head
    }

    /// Makes `current` the head and drops the slices it leaves behind, freeing them. Idempotent;
    /// an id at or before the head changes nothing (held slices are never older than
    /// `head - slices`).
    pub fn advance_to(&mut self, current: u64) -> Advance {
        if !self.due(current) {
            return Advance::default();
        }
        self.head = current;
        let oldest_live = current.saturating_sub(u64::from(self.spec.slices));
        let expired = self.slices.partition_point(|s| s.id < oldest_live);
        if expired > 0 {
            self.slices.drain(..expired);
            self.shrink_table();
        }
        Advance {
            expired: expired as u32,
            moved: true,
        }
    }

    /// Gives the table back its exact length (the model counts its length); under memory
    /// pressure a table too large is kept, never lost.
    fn shrink_table(&mut self) {
        if self.slices.is_empty() {
            self.slices = Vec::new();
            return;
        }
        if let Ok(mut exact) = try_vec(self.slices.len()) {
            exact.append(&mut self.slices);
            self.slices = exact;
        }
    }

    /// The slices live at slice `current`.
    fn live_at(&self, current: u64) -> &[Slice] {
        let oldest_live = current.saturating_sub(u64::from(self.spec.slices));
        let start = self.slices.partition_point(|s| s.id < oldest_live);
        &self.slices[start..]
    }

    /// Whether any slice held answers present.
    pub fn contains(&self, item: &[u8]) -> bool {
        Self::contains_in(&self.slices, item)
    }

    /// Whether any of `slices` answers present. Blocked slices share one hash (their layers
    /// hash alike), and every slice's first block is requested before any is tested, so
    /// their cache misses overlap instead of waiting for each other.
    fn contains_in(slices: &[Slice], item: &[u8]) -> bool {
        fn blocked(s: &Slice) -> Option<&[BlockedLayer]> {
            match &s.filter {
                ScalableFilter::Blocked(chain) => Some(chain.layers()),
                ScalableFilter::Classic(_) => None,
            }
        }
        if slices.len() < 2 || !slices.iter().all(|s| blocked(s).is_some()) {
            return slices.iter().rev().any(|s| s.filter.contains(item));
        }
        let hash = BlockedLayer::hash(item, &());
        for layers in slices.iter().filter_map(blocked) {
            for layer in layers {
                layer.prefetch_first(&hash);
            }
        }
        slices
            .iter()
            .rev()
            .filter_map(blocked)
            .any(|layers| BlockedLayer::contains_any(layers, &hash))
    }

    /// `contains` for many items, in order.
    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        Self::contains_many_in(&self.slices, items)
    }

    /// Whether any slice live at `current` answers present, without dropping the others.
    pub fn contains_at(&self, item: &[u8], current: u64) -> bool {
        Self::contains_in(self.live_at(current), item)
    }

    /// `contains_at` for many items, in order.
    pub fn contains_many_at(&self, items: &[&[u8]], current: u64) -> Vec<bool> {
        Self::contains_many_in(self.live_at(current), items)
    }

    fn contains_many_in(slices: &[Slice], items: &[&[u8]]) -> Vec<bool> {
        let mut out = vec![false; items.len()];
        // Newest first: each slice's batch path overlaps its misses; later slices are asked
        // only about what is still absent.
        for slice in slices.iter().rev() {
            let pending: Vec<usize> = (0..items.len()).filter(|&i| !out[i]).collect();
            if pending.is_empty() {
                break;
            }
            let asked: Vec<&[u8]> = pending.iter().map(|&i| items[i]).collect();
            for (i, hit) in pending.into_iter().zip(slice.filter.contains_many(&asked)) {
                out[i] = hit;
            }
        }
        out
    }

    /// The head slice, created if absent, within `max_bytes` for the whole filter. A refused
    /// creation changes nothing.
    fn ensure_head(&mut self, max_bytes: u64) -> Result<(), FilterError> {
        if self.slices.last().is_none_or(|s| s.id != self.head) {
            // A new slice is one more layer: refused, as a plain filter's growth is, once the
            // slices hold the layers one filter may.
            if self.layer_count() >= MAX_LAYERS {
                return Err(FilterError::TooManyLayers { limit: MAX_LAYERS });
            }
            let len = self.slices.len();
            let others = self.memory_usage();
            let room = max_bytes.saturating_sub(
                others
                    .saturating_sub(table_bytes(len))
                    .saturating_add(table_bytes(len + 1)),
            );
            let filter = ScalableFilter::new(
                self.slice_spec,
                room.saturating_add(boxed_bytes::<ScalableFilter>()),
            )
            .map_err(|e| self.whole_filter_error(e, 0, max_bytes))?;
            let mut table = try_vec(len + 1)?;
            table.append(&mut self.slices);
            table.push(Slice {
                id: self.head,
                filter,
            });
            self.slices = table;
        }
        Ok(())
    }

    /// A slice's `OverLimit` restated for the whole filter: `needed` counts the other
    /// slices, `limit` is the caller's.
    fn whole_filter_error(&self, e: FilterError, head_bytes: u64, max_bytes: u64) -> FilterError {
        match e {
            FilterError::OverLimit { needed, .. } => {
                let others = self.memory_usage().saturating_sub(head_bytes);
                let needed = needed
                    .saturating_sub(boxed_bytes::<ScalableFilter>())
                    .saturating_add(others);
                FilterError::OverLimit {
                    needed: needed.max(max_bytes.saturating_add(1)),
                    limit: max_bytes,
                }
            }
            e => e,
        }
    }

    /// What the head slice may grow to under `max_bytes` for the whole filter, in its own
    /// model's terms (with its box).
    fn head_budget(&self, max_bytes: u64) -> (u64, u64) {
        let head = unboxed_bytes(&self.slices.last().expect("the head slice").filter);
        let others = self.memory_usage().saturating_sub(head);
        let budget = max_bytes
            .saturating_sub(others)
            .saturating_add(boxed_bytes::<ScalableFilter>());
        (head, budget)
    }

    /// Adds an item to the head slice (created if absent). `Ok(true)` exactly when the filter
    /// changed (the head slice did not hold the item), as `ScalableFilter::add`: an item held
    /// only by an older slice is put into the head slice, so it lives a full window from now,
    /// and that is a change to replicate. Errors as `ScalableFilter::add`'s, for the whole
    /// filter's `max_bytes`. `add_detailed` also tells whether the window held it before.
    pub fn add(&mut self, item: &[u8], max_bytes: u64) -> Result<bool, FilterError> {
        self.ensure_head(max_bytes)?;
        let (head, budget) = self.head_budget(max_bytes);
        let layers = self.head_layer_room();
        let result = self.head_mut().add_capped(item, budget, layers);
        result.map_err(|e| self.whole_filter_error(e, head, max_bytes))
    }

    /// `add`, also telling whether the item answered present in the window before (which
    /// costs a lookup in every older slice).
    pub fn add_detailed(&mut self, item: &[u8], max_bytes: u64) -> Result<Added, FilterError> {
        let earlier = self.older_contains(item);
        let changed = self.add(item, max_bytes)?;
        Ok(Added {
            changed,
            in_window: earlier || !changed,
        })
    }

    /// The layers the head slice may have: what the older slices leave of the one cap a
    /// filter has (`MAX_LAYERS` over all slices), so that a window never holds more layers
    /// than a plain filter may, and every lookup stays within them.
    fn head_layer_room(&self) -> usize {
        let older: usize = self.older().iter().map(|s| s.filter.layer_count()).sum();
        MAX_LAYERS.saturating_sub(older)
    }

    /// The head slice's filter, once `ensure_head` has made it.
    fn head_mut(&mut self) -> &mut ScalableFilter {
        &mut self.slices.last_mut().expect("the head slice").filter
    }

    /// The slices before the head.
    fn older(&self) -> &[Slice] {
        match self.slices.last() {
            Some(s) if s.id == self.head => &self.slices[..self.slices.len() - 1],
            _ => &self.slices[..],
        }
    }

    /// Whether a slice before the head answers present.
    fn older_contains(&self, item: &[u8]) -> bool {
        Self::contains_in(self.older(), item)
    }

    /// `add` for many items, with exactly the effect of adding them one by one in order; the
    /// results stop after the first error.
    pub fn add_many(&mut self, items: &[&[u8]], max_bytes: u64) -> Vec<Result<bool, FilterError>> {
        if items.is_empty() {
            return Vec::new();
        }
        if let Err(e) = self.ensure_head(max_bytes) {
            return vec![Err(e)];
        }
        let (head, budget) = self.head_budget(max_bytes);
        let layers = self.head_layer_room();
        let results = self.head_mut().add_many_capped(items, budget, layers);
        results
            .into_iter()
            .map(|r| r.map_err(|e| self.whole_filter_error(e, head, max_bytes)))
            .collect()
    }

    /// `add_detailed` for many items, as `add_many` (an item repeated in the batch is in the
    /// window from its second time on).
    pub fn add_many_detailed(
        &mut self,
        items: &[&[u8]],
        max_bytes: u64,
    ) -> Vec<Result<Added, FilterError>> {
        let earlier = Self::contains_many_in(self.older(), items);
        self.add_many(items, max_bytes)
            .into_iter()
            .zip(earlier)
            .map(|(r, earlier)| {
                r.map(|changed| Added {
                    changed,
                    in_window: earlier || !changed,
                })
            })
            .collect()
    }

    /// Whether adding `items` items could allocate: create the head slice or grow it. Only
    /// then do the memory limits apply.
    pub fn may_allocate(&self, items: usize) -> bool {
        if items == 0 {
            return false;
        }
        match self.slices.last() {
            Some(s) if s.id == self.head => may_grow(&s.filter, items),
            _ => true,
        }
    }

    /// Items counted over the live slices: an estimate of the window's, since an item added in
    /// two slices counts in each.
    pub fn items(&self) -> u64 {
        self.slices
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.filter.items()))
    }

    /// Items per window, as asked.
    pub fn capacity(&self) -> u64 {
        self.spec.filter.capacity
    }

    /// The false-positive rate over the window, as asked.
    pub fn error(&self) -> f64 {
        self.spec.filter.error
    }

    /// The slices' growth factor, or `None` when they do not scale.
    pub fn expansion(&self) -> Option<u32> {
        (!self.spec.filter.nonscaling && self.spec.filter.expansion != 0)
            .then_some(self.spec.filter.expansion)
    }

    pub fn spec(&self) -> &WindowSpec {
        &self.spec
    }

    pub fn window_ms(&self) -> u64 {
        self.spec.window_ms
    }

    pub fn slices(&self) -> u32 {
        self.spec.slices
    }

    pub fn slice_ms(&self) -> u64 {
        self.spec.slice_ms()
    }

    /// The creation time on the primary, in its clock's milliseconds.
    pub fn origin_ms(&self) -> u64 {
        self.origin_ms
    }

    /// The slices held, oldest first.
    pub fn slice_filters(&self) -> impl ExactSizeIterator<Item = (u64, &ScalableFilter)> {
        self.slices.iter().map(|s| (s.id, &s.filter))
    }

    /// When slice `id` begins (saturating).
    pub fn slice_start_ms(&self, id: u64) -> u64 {
        self.origin_ms
            .saturating_add(id.saturating_mul(self.spec.slice_ms()))
    }

    /// Each slice held, oldest first.
    pub fn slice_summaries(&self) -> Vec<SliceSummary> {
        self.slices
            .iter()
            .map(|s| SliceSummary {
                id: s.id,
                start_ms: self.slice_start_ms(s.id),
                items: s.filter.items(),
                capacity: s.filter.capacity(),
                bytes: unboxed_bytes(&s.filter),
                layers: s.filter.layer_count(),
            })
            .collect()
    }

    /// Layers over all slices.
    pub fn layer_count(&self) -> usize {
        self.slices.iter().map(|s| s.filter.layer_count()).sum()
    }

    /// Bytes the filter takes by the allocator model: its box, its slice table and each
    /// slice's layers.
    pub fn memory_usage(&self) -> u64 {
        Self::modelled_bytes(
            self.slices.len(),
            self.slices.iter().map(|s| s.filter.memory_usage()),
        )
    }

    /// Calls `each` with every heap block the filter's box holds: the slice table, then each
    /// slice's blocks (`ScalableFilter::allocations`).
    pub fn allocations<'a>(&'a self, mut each: impl FnMut(Allocation<'a>)) {
        if let Some(table) = Allocation::of_vec(&self.slices) {
            each(table);
        }
        for s in &self.slices {
            s.filter.allocations(&mut each);
        }
    }

    /// Offers every heap block the filter's box holds to `to` (active defragmentation): each
    /// slice's blocks, then the slice table.
    pub fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator) {
        for s in &mut self.slices {
            s.filter.relocate(to);
        }
        crate::relocate::relocate_vec(&mut self.slices, to);
    }

    /// A deep copy, reporting allocation failure instead of aborting.
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let mut slices = try_vec(self.slices.len())?;
        for s in &self.slices {
            slices.push(Slice {
                id: s.id,
                filter: s.filter.try_clone()?,
            });
        }
        Ok(WindowedFilter {
            spec: self.spec,
            slice_spec: self.slice_spec,
            origin_ms: self.origin_ms,
            head: self.head,
            slices,
        })
    }

    /// `BF.DEBUG`'s lines: one per slice, then its layers' lines.
    pub fn debug_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.slices {
            out.push(format!(
                "slice:{} start_ms:{} items:{}",
                s.id,
                self.slice_start_ms(s.id),
                s.filter.items()
            ));
            out.extend(s.filter.debug_lines());
        }
        out
    }

    /// The slices, for the codec.
    pub(crate) fn slice_table(&self) -> &[Slice] {
        &self.slices
    }

    pub(crate) fn slice_table_mut(&mut self) -> &mut [Slice] {
        &mut self.slices
    }

    /// Bytes a filter of `held` slices whose chains take these bytes (each as
    /// `ScalableFilter::memory_usage` counts it) takes by the model.
    pub(crate) fn modelled_bytes(held: usize, chains: impl IntoIterator<Item = u64>) -> u64 {
        let boxed = boxed_bytes::<ScalableFilter>();
        chains.into_iter().fold(
            Self::empty_bytes().saturating_add(table_bytes(held)),
            |sum, chain| sum.saturating_add(chain.saturating_sub(boxed)),
        )
    }
}

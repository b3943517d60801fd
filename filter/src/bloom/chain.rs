//! The scalable filter's chain: layers of one kind that grow when the newest layer is full.
//!
//! Layer `i` of a scaling filter holds `capacity · expansion^i` items at `error · 0.5^(i+1)`,
//! so the chain's total false-positive rate stays under `error` (the layers' rates sum to at
//! most `error`). A non-scaling filter has one layer at the full `error` and refuses new items
//! once that layer is full.
//!
//! A chain is made of one kind of layer (`Layer`): blocked (layerbloom's own, the default) or
//! classic (RedisBloom's, for filters loaded from RedisBloom data or created in classic mode).
//! Mixing kinds would change how items hash between layers; one kind per chain never changes
//! an answer.

use crate::bloom::layer::{Allocation, Layer, LayerPlan, LayerSummary};
pub use crate::bloom::spec::TIGHTENING;
use crate::bloom::spec::{FilterSpec, SizingError};
use crate::error::FilterError;
use crate::fallible::{try_push, try_vec};
use crate::relocate::{relocate_vec, Relocator};

/// The allocator model's size class (`footprint`) of the box a filter holds its chain in
/// (`filter::ScalableFilter`, which holds its size to this class by a compile-time check): an
/// 80-byte block, as since filters were one struct.
pub(crate) const BOX_CLASS: u64 = 80;

/// The most layers a filter may grow to: growth past it is refused, and so are a client's
/// `BF.LOADCHUNK` headers and RESTOREs with more. A filter that already has more (an RDB file
/// or AOF written by RedisBloom, which sets no bound, or by an older layerbloom) still loads
/// from disk, a primary or the AOF, and answers; it cannot grow. A lookup probes every layer (a
/// cache miss each in a large filter), and BF.INFO, SCANDUMP and the AOF rewrite walk them;
/// at this bound a lookup of an absent item in the longest chain of small layers costs 5 to
/// 14 µs (5 to 14 ns a layer, measured by `make bench-hostile`), while a realistic chain
/// never comes near it: with expansion 2 the capacity overflows 64 bits after 64 layers, and
/// an EXPANSION 1 filter of capacity 1000 holds a million items.
pub const MAX_LAYERS: usize = 1024;

/// Why the growth rule gives no next layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum NoNextLayer {
    /// Its capacity would overflow 64 bits.
    CapacityOverflow,
    /// No layer can be sized for its capacity and rate.
    Sizing(SizingError),
}

/// The chain's growth rule: the layer after one of plan `newest` holds `expansion` times its
/// capacity at `TIGHTENING` times its rate. Growth (`Chain::grow`) and the replay of every
/// growth a filter has left (`health::max_capacity`) both take their layers from here, so the
/// capacity BF.INFO promises is the one growth reaches.
pub(crate) fn next_layer<L: Layer>(
    newest: &L::Meta,
    expansion: u64,
    params: &L::Params,
) -> Result<L::Meta, NoNextLayer> {
    let capacity = newest
        .capacity()
        .checked_mul(expansion)
        .ok_or(NoNextLayer::CapacityOverflow)?;
    let error = L::floor_error(newest.error() * TIGHTENING);
    L::plan(capacity, error, params).map_err(NoNextLayer::Sizing)
}

/// Items hashed and prefetched together by the batch paths: enough to overlap many cache
/// misses, few enough that their lines stay in L1 until probed.
const BATCH: usize = 32;

/// Hashes a chunk of at most `BATCH` items into `out` (on the caller's stack, so a batch
/// allocates nothing); the hashes are the returned prefix.
#[inline(always)]
fn hash_batch<'a, L: Layer>(
    items: &[&[u8]],
    params: &L::Params,
    out: &'a mut [L::Hash; BATCH],
) -> &'a [L::Hash] {
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = L::hash(item, params);
    }
    &out[..items.len()]
}

/// The cumulative ends of bit arrays of these byte lengths.
fn cumulative_ends(lengths: impl Iterator<Item = u64>) -> Vec<u64> {
    lengths
        .scan(0u64, |end, len| {
            *end = end.saturating_add(len);
            Some(*end)
        })
        .collect()
}

/// A scalable Bloom filter made of one kind of layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain<L: Layer> {
    /// Oldest first; never empty.
    layers: Vec<L>,
    /// Where each layer's bit array ends in the concatenation of all of them (SCANDUMP's
    /// offsets): a chunk is found by binary search, so a dump or a load of a long chain costs
    /// O(layers · log layers) rather than O(layers²).
    ends: Vec<u64>,
    items: u64,
    error: f64,
    /// Growth factor of each new layer; 0 means non-scaling.
    expansion: u32,
    params: L::Params,
}

impl<L: Layer> Chain<L> {
    /// Bytes a new chain of this spec takes, without allocating.
    pub(crate) fn initial_bytes(spec: &FilterSpec) -> Result<u64, FilterError> {
        let params = L::params_for(spec);
        let plan = L::plan(spec.capacity, spec.first_layer_error(), &params)?;
        Ok(Self::modelled_bytes(1, [plan.bytes()]))
    }

    /// A new, empty chain, refused if it would take more than `max_bytes`.
    pub(crate) fn new(spec: &FilterSpec, max_bytes: u64) -> Result<Self, FilterError> {
        let needed = Self::initial_bytes(spec)?;
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            });
        }
        let params = L::params_for(spec);
        let error = spec.first_layer_error();
        let mut layers = try_vec(1)?;
        layers.push(L::empty(L::plan(spec.capacity, error, &params)?)?);
        // A rate the kind derives on load (its formats persist none) is derived the same way
        // here, or a rate whose half is inexact (below 2^-1021) would change on reload.
        let error = L::derived_error(&params, error).unwrap_or(spec.error);
        // One layer: its end is its length.
        let mut ends = try_vec(1)?;
        ends.push(layers[0].as_bytes().len() as u64);
        Ok(Chain {
            layers,
            ends,
            items: 0,
            error,
            expansion: if spec.nonscaling { 0 } else { spec.expansion },
            params,
        })
    }

    /// A chain from persisted parts (the codec has validated them; at least one layer).
    pub(crate) fn from_parts(
        layers: Vec<L>,
        items: u64,
        error: f64,
        expansion: u32,
        params: L::Params,
    ) -> Self {
        let ends = cumulative_ends(layers.iter().map(|l| l.as_bytes().len() as u64));
        Chain {
            layers,
            ends,
            items,
            error,
            expansion,
            params,
        }
    }

    /// Where byte `offset` of the concatenated bit arrays lies: `(layer, offset within it,
    /// that layer's length)`, found by binary search.
    pub fn locate(&self, offset: u64) -> Option<(usize, u64, u64)> {
        let index = self.ends.partition_point(|&end| end <= offset);
        let end = *self.ends.get(index)?;
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        Some((index, offset - start, end - start))
    }

    /// Bytes of all its bit arrays together.
    pub fn bits_bytes(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Bytes a chain of this kind takes by the allocator model (`footprint`): the filter's
    /// box, a layer table of `table_len` entries with as many end offsets, and each of its
    /// bit arrays.
    pub(crate) fn modelled_bytes(
        table_len: usize,
        bit_arrays: impl IntoIterator<Item = u64>,
    ) -> u64 {
        use crate::footprint::allocation;
        use std::mem::size_of;
        // The layer table and the layers' cumulative byte offsets (`ends`), one entry each.
        let table = allocation((table_len * size_of::<L>()) as u64, 8)
            .saturating_add(allocation((table_len * size_of::<u64>()) as u64, 8));
        let boxed = allocation(BOX_CLASS, 8);
        bit_arrays
            .into_iter()
            .fold(boxed.saturating_add(table), |sum, bytes| {
                sum.saturating_add(allocation(bytes, L::BITS_ALIGN))
            })
    }

    /// What a chain of `count` layers that takes `memory` (by the model) takes once it has
    /// `more` more layers of `bits` bytes each: its table that much longer and one more bit
    /// array each. Growth checks its limit against this, and so does the replay of growth.
    pub(crate) fn grown_memory(memory: u64, count: usize, more: usize, bits: u64) -> u64 {
        let without_bits = |n: usize| Self::modelled_bytes(n, []);
        let bit_array = crate::footprint::allocation(bits, L::BITS_ALIGN);
        memory
            .saturating_sub(without_bits(count))
            .saturating_add(without_bits(count + more))
            .saturating_add(bit_array.saturating_mul(more as u64))
    }

    /// Whether any layer holds the item.
    #[inline]
    pub fn contains(&self, item: &[u8]) -> bool {
        L::contains_any(&self.layers, &L::hash(item, &self.params))
    }

    /// Adds an item. `Ok(false)` when it was (or looked) present already: nothing changes and
    /// nothing is counted. Growth that would take the filter past `max_bytes` is refused.
    #[inline]
    pub fn add(&mut self, item: &[u8], max_bytes: u64) -> Result<bool, FilterError> {
        self.add_capped(item, max_bytes, MAX_LAYERS)
    }

    /// `add`, growing to at most `max_layers` layers (never past `MAX_LAYERS`): a windowed
    /// filter's slice may have only what the other slices leave of the cap.
    #[inline]
    pub fn add_capped(
        &mut self,
        item: &[u8],
        max_bytes: u64,
        max_layers: usize,
    ) -> Result<bool, FilterError> {
        let hash = L::hash(item, &self.params);
        #[cfg(target_arch = "x86_64")]
        if L::COUNTS_WORDS && std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has just been seen to support POPCNT.
            return unsafe { self.add_hash_popcnt(&hash, max_bytes, max_layers) };
        }
        self.add_hash(&hash, max_bytes, max_layers, true)
    }

    /// `add_hash` compiled for CPUs with POPCNT (see `Layer::COUNTS_WORDS`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn add_hash_popcnt(
        &mut self,
        hash: &L::Hash,
        max_bytes: u64,
        max_layers: usize,
    ) -> Result<bool, FilterError> {
        self.add_hash(hash, max_bytes, max_layers, true)
    }

    /// `contains` for many items at once, in order. Hashes a batch, starts loading every cache
    /// line the batch will touch, then probes: the memory accesses of a batch overlap instead
    /// of waiting for each other.
    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        let mut out = Vec::with_capacity(items.len());
        if self.layers.len() > 1 {
            // A chain: `contains_any` already overlaps the layers' misses where the kind can
            // (blocked layers share the first-block mask too); probing every layer in full
            // cost 50 ns a layer.
            out.extend(items.iter().map(|item| self.contains(item)));
            return out;
        }
        let mut batch = [L::Hash::default(); BATCH];
        for chunk in items.chunks(BATCH) {
            let hashes = hash_batch::<L>(chunk, &self.params, &mut batch);
            for layer in self.layers.iter().rev() {
                for h in hashes {
                    layer.prefetch(h);
                }
            }
            out.extend(
                hashes
                    .iter()
                    .map(|h| self.layers.iter().rev().any(|l| l.contains(h))),
            );
        }
        out
    }

    /// `add` for many items, with exactly the effect of adding them one by one in order (an
    /// item repeated in the batch is new only the first time). The results stop after the
    /// first error, and the items after it are not added. Like `contains_many`, a batch's
    /// cache lines are loaded before it is probed.
    pub fn add_many(&mut self, items: &[&[u8]], max_bytes: u64) -> Vec<Result<bool, FilterError>> {
        self.add_many_capped(items, max_bytes, MAX_LAYERS)
    }

    /// `add_many`, growing to at most `max_layers` layers (as `add_capped`).
    pub fn add_many_capped(
        &mut self,
        items: &[&[u8]],
        max_bytes: u64,
        max_layers: usize,
    ) -> Vec<Result<bool, FilterError>> {
        let mut out = Vec::with_capacity(items.len());
        #[cfg(target_arch = "x86_64")]
        if L::COUNTS_WORDS && std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has just been seen to support POPCNT.
            unsafe { self.add_many_popcnt(items, max_bytes, max_layers, &mut out) };
            return out;
        }
        self.add_many_batched(items, max_bytes, max_layers, &mut out);
        out
    }

    /// `add_many_batched` compiled for CPUs with POPCNT (see `Layer::COUNTS_WORDS`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn add_many_popcnt(
        &mut self,
        items: &[&[u8]],
        max_bytes: u64,
        max_layers: usize,
        out: &mut Vec<Result<bool, FilterError>>,
    ) {
        self.add_many_batched(items, max_bytes, max_layers, out)
    }

    /// The batch add: each batch's cache lines in every layer are requested before any item
    /// of it is added.
    #[inline(always)]
    pub(crate) fn add_many_batched(
        &mut self,
        items: &[&[u8]],
        max_bytes: u64,
        max_layers: usize,
        out: &mut Vec<Result<bool, FilterError>>,
    ) {
        let mut batch = [L::Hash::default(); BATCH];
        for chunk in items.chunks(BATCH) {
            let hashes = hash_batch::<L>(chunk, &self.params, &mut batch);
            for layer in self.layers.iter().rev() {
                for h in hashes {
                    layer.prefetch(h);
                }
            }
            for h in hashes {
                let result = self.add_hash(h, max_bytes, max_layers, false);
                let failed = result.is_err();
                out.push(result);
                if failed {
                    return;
                }
            }
        }
    }

    /// Adds a hash, with exactly the effect of checking every layer for it and, if none holds
    /// it, inserting it into the newest (grown first if full). The older layers are checked
    /// first; the newest one's check is its insert (`insert_new`), which changes nothing when
    /// it holds the item. `prefetch`: request the item's lines first (the batch path has
    /// already).
    #[inline(always)]
    fn add_hash(
        &mut self,
        hash: &L::Hash,
        max_bytes: u64,
        max_layers: usize,
        prefetch: bool,
    ) -> Result<bool, FilterError> {
        let (newest, older) = self.layers.split_last_mut().expect("at least one layer");
        if prefetch {
            // Every line the add may touch, so that the older layers' misses overlap the
            // newest one's.
            newest.prefetch(hash);
            for layer in older.iter() {
                layer.prefetch_first(hash);
            }
        }
        if !older.is_empty() && L::contains_any(older, hash) {
            return Ok(false);
        }
        if !newest.is_full() {
            if !newest.insert_new(hash) {
                return Ok(false);
            }
        } else {
            if newest.contains(hash) {
                return Ok(false);
            }
            self.grow(max_bytes, max_layers)?;
            self.layers
                .last_mut()
                .expect("at least one layer")
                .insert(hash);
        }
        self.items = self.items.saturating_add(1);
        Ok(true)
    }

    /// Appends the next layer, or says why it cannot be: past `max_layers` (at most
    /// `MAX_LAYERS`), the cap's error.
    pub(crate) fn grow(&mut self, max_bytes: u64, max_layers: usize) -> Result<(), FilterError> {
        if self.expansion == 0 {
            return Err(FilterError::Full);
        }
        if self.layers.len() >= max_layers.min(MAX_LAYERS) {
            return Err(FilterError::TooManyLayers { limit: MAX_LAYERS });
        }
        // Room for the new layer's end offset first, so that nothing fails after the push.
        self.ends
            .try_reserve_exact(1)
            .map_err(|_| FilterError::OutOfMemory { bytes: 8 })?;
        let end = self.ends.last().copied().unwrap_or(0);
        let newest = self.layers.last().expect("at least one layer");
        let plan = next_layer::<L>(newest.meta(), u64::from(self.expansion), &self.params)
            .map_err(|why| match why {
                NoNextLayer::CapacityOverflow => FilterError::OverLimit {
                    needed: u64::MAX,
                    limit: max_bytes,
                },
                NoNextLayer::Sizing(e) => e.into(),
            })?;
        let needed = Self::grown_memory(self.memory_usage(), self.layers.len(), 1, plan.bytes());
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            });
        }
        let layer = L::empty(plan)?;
        let len = layer.as_bytes().len() as u64;
        try_push(&mut self.layers, layer)?;
        let sealed = self.layers.len() - 2;
        self.layers[sealed].seal();
        self.ends.push(end.saturating_add(len));
        Ok(())
    }

    /// The layers, oldest first.
    pub fn layers(&self) -> &[L] {
        &self.layers
    }

    /// What the layers share.
    pub fn params(&self) -> &L::Params {
        &self.params
    }

    /// Number of layers.
    pub fn layer_count(&self) -> usize {
        self.layers.len()
    }

    /// Each layer's figures, oldest first.
    pub fn layer_summaries(&self) -> Vec<LayerSummary> {
        self.layers.iter().map(L::summary).collect()
    }

    /// Items and capacity of layer `index` (oldest first).
    pub fn layer_load(&self, index: usize) -> Option<(u64, u64)> {
        let summary = self.layers.get(index)?.summary();
        Some((summary.items, summary.capacity))
    }

    /// Each layer's bit array as bytes, oldest first.
    pub fn layer_bytes(&self) -> Vec<&[u8]> {
        self.layers.iter().map(L::as_bytes).collect()
    }

    /// Layer `index`'s bit array as bytes.
    pub fn layer_bytes_at(&self, index: usize) -> &[u8] {
        self.layers[index].as_bytes()
    }

    /// ORs bytes into layer `index` at `offset`; the caller has checked the range.
    pub(crate) fn or_layer_bytes(&mut self, index: usize, offset: usize, data: &[u8]) {
        self.layers[index].or_bytes(offset, data)
    }

    /// Items added (an add that found the item present does not count).
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The sum of the layers' capacities.
    pub fn capacity(&self) -> u64 {
        self.layers
            .iter()
            .fold(0u64, |sum, l| sum.saturating_add(l.meta().capacity()))
    }

    /// The error rate the filter was created with (or derived from its first layer).
    pub fn error(&self) -> f64 {
        self.error
    }

    /// The raw growth factor (0 for non-scaling), as persisted.
    pub fn expansion_raw(&self) -> u32 {
        self.expansion
    }

    /// Bytes the chain takes by the allocator model (`modelled_bytes`).
    pub fn memory_usage(&self) -> u64 {
        self.memory_usage_of_layers(self.layers.len())
    }

    /// `memory_usage` of the chain cut to its first `count` layers: what it took before its
    /// later layers were added (layers are only appended, and a layer's size never changes).
    pub fn memory_usage_of_layers(&self, count: usize) -> u64 {
        let layers = &self.layers[..count.min(self.layers.len())];
        Self::modelled_bytes(layers.len(), layers.iter().map(L::bytes))
    }

    /// Calls `each` with every heap block the chain's layers live in: the layer table, then
    /// each bit array (not the end offsets, which the allocator is not asked about).
    pub fn allocations<'a>(&'a self, each: &mut impl FnMut(Allocation<'a>)) {
        Allocation::of_vec(&self.layers)
            .into_iter()
            .chain(self.layers.iter().filter_map(L::allocation))
            .for_each(each);
    }

    /// Offers every heap block the chain owns to `to` (active defragmentation): each bit
    /// array, then the layer table and the end offsets.
    pub fn relocate(&mut self, to: &mut dyn Relocator) {
        for layer in &mut self.layers {
            layer.relocate(to);
        }
        relocate_vec(&mut self.layers, to);
        relocate_vec(&mut self.ends, to);
    }

    /// `BF.DEBUG`'s line for each layer.
    pub fn debug_lines(&self) -> impl Iterator<Item = String> + '_ {
        self.layers.iter().map(|l| l.debug_line(&self.params))
    }

    /// A deep copy, reporting allocation failure instead of aborting.
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let mut layers = try_vec(self.layers.len())?;
        for l in &self.layers {
            layers.push(l.try_clone()?);
        }
        let mut ends = try_vec(self.ends.len())?;
        ends.extend_from_slice(&self.ends);
        Ok(Chain {
            layers,
            ends,
            ..*self
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bloom::blocked::{BlockedLayer, LayerMeta};
    use crate::bloom::classic::ClassicParams;
    use crate::bloom::filter::ScalableFilter;
    use crate::bloom::sizing;
    use crate::bloom::spec::Layout;
    use crate::hash::ItemHash;

    /// The chain of a blocked filter.
    fn blocked(f: &ScalableFilter) -> &Chain<BlockedLayer> {
        match f {
            ScalableFilter::Blocked(c) => c,
            ScalableFilter::Classic(_) => panic!("blocked"),
        }
    }

    fn blocked_mut(f: &mut ScalableFilter) -> &mut Chain<BlockedLayer> {
        match f {
            ScalableFilter::Blocked(c) => c,
            ScalableFilter::Classic(_) => panic!("blocked"),
        }
    }

    const NO_LIMIT: u64 = u64::MAX;

    fn item(i: u64) -> Vec<u8> {
        format!("item:{i}").into_bytes()
    }

    fn spec(capacity: u64, error: f64, expansion: u32) -> FilterSpec {
        FilterSpec::new(capacity, error, expansion)
    }

    fn classic(capacity: u64, error: f64, expansion: u32) -> FilterSpec {
        FilterSpec {
            layout: Layout::Classic,
            ..FilterSpec::new(capacity, error, expansion)
        }
    }

    fn capacities(f: &ScalableFilter) -> Vec<u64> {
        f.layer_summaries().iter().map(|l| l.capacity).collect()
    }

    fn errors(f: &ScalableFilter) -> Vec<f64> {
        f.layer_summaries().iter().map(|l| l.error).collect()
    }

    #[test]
    fn adding_twice_counts_once() {
        for s in [spec(100, 0.01, 2), classic(100, 0.01, 2)] {
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            assert_eq!(f.add(&item(1), NO_LIMIT), Ok(true));
            assert_eq!(f.add(&item(1), NO_LIMIT), Ok(false));
            assert_eq!(f.items(), 1);
            assert!(f.contains(&item(1)));
        }
    }

    #[test]
    fn a_scaling_filter_grows_by_expansion_with_tightening_error() {
        for s in [spec(10, 0.01, 3), classic(10, 0.01, 3)] {
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            let mut added = 0;
            for i in 0..200 {
                if f.add(&item(i), NO_LIMIT).unwrap() {
                    added += 1;
                }
            }
            assert_eq!(f.items(), added);
            assert_eq!(capacities(&f), vec![10, 30, 90, 270]);
            assert_eq!(errors(&f), vec![0.005, 0.0025, 0.00125, 0.000625]);
            assert_eq!(f.capacity(), 400);
            assert!((0..200).all(|i| f.contains(&item(i))));
            for l in &f.layer_summaries()[..3] {
                assert_eq!(l.items, l.capacity);
            }
        }
    }

    #[test]
    fn nonscaling_filter_refuses_the_item_past_capacity_and_keeps_the_rest() {
        for s in [spec(50, 0.001, 0), classic(50, 0.001, 0)] {
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            assert_eq!(errors(&f), vec![0.001]);
            let mut i = 0;
            while f.items() < 50 {
                f.add(&item(i), NO_LIMIT).unwrap();
                i += 1;
            }
            let before = f.clone();
            let fresh = (1000..).map(item).find(|h| !f.contains(h)).unwrap();
            assert_eq!(f.add(&fresh, NO_LIMIT), Err(FilterError::Full));
            assert_eq!(f, before);
            assert!((0..i).all(|j| f.contains(&item(j))));
            assert_eq!(f.add(&item(0), NO_LIMIT), Ok(false));
            assert_eq!(f.expansion(), None);
        }
    }

    #[test]
    fn growth_past_the_memory_limit_is_refused_without_change() {
        for s in [spec(100, 0.01, 2), classic(100, 0.01, 2)] {
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            let limit = f.memory_usage() + 100;
            let mut i = 0;
            while f.items() < 100 {
                f.add(&item(i), limit).unwrap();
                i += 1;
            }
            let before = f.clone();
            let fresh = (1000..).map(item).find(|h| !f.contains(h)).unwrap();
            match f.add(&fresh, limit) {
                Err(FilterError::OverLimit { needed, limit: l }) => {
                    assert_eq!(l, limit);
                    assert!(needed > limit);
                }
                other => panic!("expected OverLimit, got {other:?}"),
            }
            assert_eq!(f, before);
        }
    }

    #[test]
    fn creation_past_the_memory_limit_is_refused() {
        let err = ScalableFilter::new(spec(1 << 30, 1e-9, 2), 1 << 30).unwrap_err();
        assert!(matches!(err, FilterError::OverLimit { .. }), "{err:?}");
    }

    #[test]
    fn capacity_overflow_on_growth_is_an_error_not_a_wrap() {
        let geometry = sizing::plan_layer(1, 0.005).unwrap();
        let huge = u64::MAX / 2 + 1;
        let meta = LayerMeta {
            capacity: huge,
            error: 0.005,
            items: huge,
            geometry,
        };
        let layer =
            BlockedLayer::from_parts(meta, crate::bloom::blocked::zeroed_blocks(1).unwrap());
        let mut f = ScalableFilter::Blocked(Chain::from_parts(vec![layer], huge, 0.01, 2, ()));
        let before = f.clone();
        let fresh = (0..).map(item).find(|h| !f.contains(h)).unwrap();
        assert!(matches!(
            f.add(&fresh, NO_LIMIT),
            Err(FilterError::OverLimit { .. })
        ));
        assert_eq!(f, before);
    }

    /// A filter of `MAX_LAYERS` one-item layers (capacity 1, EXPANSION 1).
    pub(crate) fn longest_chain(layout: Layout) -> ScalableFilter {
        let s = FilterSpec {
            layout,
            ..FilterSpec::new(1, 0.01, 1)
        };
        let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
        let mut i = 0;
        while f.layer_count() < MAX_LAYERS || !f.layers_full() {
            f.add(&item(i), NO_LIMIT).unwrap();
            i += 1;
        }
        f
    }

    impl ScalableFilter {
        fn layers_full(&self) -> bool {
            let (items, capacity) = self.layer_load(self.layer_count() - 1).unwrap();
            items >= capacity
        }
    }

    #[test]
    fn growth_past_the_layer_cap_is_refused_with_the_filter_unchanged() {
        for layout in [Layout::Blocked, Layout::Classic] {
            let mut f = longest_chain(layout);
            assert_eq!(f.layer_count(), MAX_LAYERS);
            let before = f.clone();
            let fresh = (1 << 40..).map(item).find(|h| !f.contains(h)).unwrap();
            assert_eq!(
                f.add(&fresh, NO_LIMIT),
                Err(FilterError::TooManyLayers { limit: MAX_LAYERS })
            );
            assert_eq!(
                f.add_many(&[&fresh[..]], NO_LIMIT),
                vec![Err(FilterError::TooManyLayers { limit: MAX_LAYERS })]
            );
            assert_eq!(f, before);
            assert!(!f.contains(&fresh));
            // Items already present still answer as present.
            assert_eq!(f.add(&item(0), NO_LIMIT), Ok(false));
        }
    }

    #[test]
    fn byte_offsets_are_located_by_binary_search_exactly_as_by_a_walk() {
        // Layers of growing, unequal sizes (classic ones are not multiples of 64).
        for s in [spec(3, 0.01, 3), classic(3, 0.01, 3)] {
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            for i in 0..2000 {
                f.add(&item(i), NO_LIMIT).unwrap();
            }
            let lengths: Vec<u64> = f.layer_bytes().iter().map(|b| b.len() as u64).collect();
            assert!(lengths.len() >= 5, "{lengths:?}");
            let total: u64 = lengths.iter().sum();
            let walk = |offset: u64| {
                let mut start = 0;
                for (i, &len) in lengths.iter().enumerate() {
                    if offset < start + len {
                        return Some((i, offset - start, len));
                    }
                    start += len;
                }
                None
            };
            for offset in 0..total + 3 {
                assert_eq!(f.locate(offset), walk(offset), "offset {offset}");
            }
            assert_eq!(f.locate(u64::MAX), None);
            // A clone locates alike.
            assert_eq!(f.try_clone().unwrap().locate(total - 1), walk(total - 1));
        }
    }

    #[test]
    fn batches_answer_exactly_like_one_by_one() {
        for s in [spec(50, 0.01, 2), classic(50, 0.01, 2), spec(50, 0.01, 0)] {
            let items: Vec<Vec<u8>> = (0..300).map(|i| item(i % 170)).collect();
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let mut one = ScalableFilter::new(s, NO_LIMIT).unwrap();
            let mut expected = Vec::new();
            for r in &refs {
                let result = one.add(r, NO_LIMIT);
                let failed = result.is_err();
                expected.push(result);
                if failed {
                    break;
                }
            }
            let mut many = ScalableFilter::new(s, NO_LIMIT).unwrap();
            assert_eq!(many.add_many(&refs, NO_LIMIT), expected);
            assert_eq!(many, one);
            let probes: Vec<Vec<u8>> = (0..400).map(item).collect();
            let probe_refs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
            let singles: Vec<bool> = probe_refs.iter().map(|p| one.contains(p)).collect();
            assert_eq!(many.contains_many(&probe_refs), singles);
        }
    }

    /// The blocked add as it was before the newest layer's presence check and insert were
    /// fused: every layer checked by `blocked_contains`, then `insert` into the newest (grown
    /// first when full).
    fn unfused_add(
        f: &mut ScalableFilter,
        hash: &ItemHash,
        max_bytes: u64,
    ) -> Result<bool, FilterError> {
        let c = blocked_mut(f);
        if BlockedLayer::contains_any(&c.layers, hash) {
            return Ok(false);
        }
        if c.layers.last().unwrap().is_full() {
            c.grow(max_bytes, MAX_LAYERS)?;
        }
        c.layers.last_mut().unwrap().insert(hash);
        c.items += 1;
        Ok(true)
    }

    #[test]
    fn fused_adds_set_the_same_bits_and_counts_as_unfused_ones() {
        use crate::hash::mix64;
        let mut shapes = std::collections::BTreeSet::new();
        for error in [0.25, 0.01, 0.001, 1e-5, 1e-9] {
            for expansion in [2, 0] {
                let s = spec(100, error, expansion);
                // A second run where growth is refused by the memory limit part-way.
                let first = ScalableFilter::new(s, NO_LIMIT).unwrap().memory_usage();
                for limit in [NO_LIMIT, first * 5] {
                    // 3000 draws from 1200 items: many repeats, within and across batches.
                    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ error.to_bits();
                    let items: Vec<Vec<u8>> = (0..3000)
                        .map(|_| {
                            state = mix64(state);
                            item(state % 1200)
                        })
                        .collect();
                    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();

                    let mut unfused = ScalableFilter::new(s, NO_LIMIT).unwrap();
                    let mut expected = Vec::new();
                    for r in &refs {
                        let result = unfused_add(&mut unfused, &ItemHash::of(r), limit);
                        let failed = result.is_err();
                        expected.push(result);
                        if failed {
                            break;
                        }
                    }
                    let what = format!("error {error} expansion {expansion} limit {limit}");

                    // The batch path as dispatched (POPCNT where the CPU has it), in batches
                    // of uneven sizes.
                    let mut many = ScalableFilter::new(s, NO_LIMIT).unwrap();
                    let mut got = Vec::new();
                    for chunk in refs.chunks(77) {
                        got.extend(many.add_many(chunk, limit));
                        if got.last().is_some_and(Result::is_err) {
                            break;
                        }
                    }
                    // The batch path compiled for baseline x86-64 (software popcount).
                    let mut baseline = ScalableFilter::new(s, NO_LIMIT).unwrap();
                    let mut baseline_got = Vec::new();
                    blocked_mut(&mut baseline).add_many_batched(
                        &refs,
                        limit,
                        MAX_LAYERS,
                        &mut baseline_got,
                    );
                    // One by one.
                    let mut single = ScalableFilter::new(s, NO_LIMIT).unwrap();
                    let mut single_got = Vec::new();
                    for r in &refs {
                        let result = single.add(r, limit);
                        let failed = result.is_err();
                        single_got.push(result);
                        if failed {
                            break;
                        }
                    }

                    assert!(unfused.layer_count() > 1 || expansion == 0, "{what}");
                    assert!(expected.iter().any(|r| r == &Ok(false)), "{what}");
                    for (name, f, results) in [
                        ("add_many", &many, &got),
                        ("baseline add_many", &baseline, &baseline_got),
                        ("add", &single, &single_got),
                    ] {
                        assert_eq!(results, &expected, "{name}: {what}");
                        assert_eq!(f, &unfused, "{name}: {what}");
                        assert_eq!(f.items(), unfused.items(), "{name}: {what}");
                        for (a, b) in f.layer_summaries().iter().zip(unfused.layer_summaries()) {
                            assert_eq!(a.set_bits, b.set_bits, "{name}: {what}");
                            assert_eq!(a.items, b.items, "{name}: {what}");
                        }
                        for (layer, bytes) in blocked(f).layers().iter().zip(f.layer_bytes()) {
                            assert_eq!(
                                layer.set_bits(),
                                crate::bits::count_ones(bytes),
                                "{name}: {what}"
                            );
                        }
                    }
                    for layer in blocked(&unfused).layers() {
                        shapes.insert(layer.geometry().blocks_per_item);
                    }
                }
            }
        }
        // Items of one block and of several, where two slots may share a block.
        assert!(shapes.len() >= 3, "blocks per item covered: {shapes:?}");
    }

    #[test]
    fn try_clone_is_deep_and_equal() {
        for s in [spec(10, 0.01, 2), classic(10, 0.01, 2)] {
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            for i in 0..50 {
                f.add(&item(i), NO_LIMIT).unwrap();
            }
            let mut g = f.try_clone().unwrap();
            assert_eq!(g, f);
            assert_eq!(g.memory_usage(), f.memory_usage());
            g.add(&item(1000), NO_LIMIT).unwrap();
            assert_ne!(g, f);
        }
    }

    #[test]
    fn memory_usage_counts_every_bit_array() {
        let mut f = ScalableFilter::new(spec(1000, 0.01, 2), NO_LIMIT).unwrap();
        for i in 0..5000 {
            f.add(&item(i), NO_LIMIT).unwrap();
        }
        let bits: u64 = f.layer_summaries().iter().map(|l| l.bytes).sum();
        assert!(f.memory_usage() >= bits);
        assert!(f.memory_usage() < bits + 4096);
    }

    #[test]
    fn memory_usage_of_the_older_layers_is_what_the_filter_took_before_it_grew() {
        for s in [spec(100, 0.01, 2), classic(100, 0.01, 2)] {
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            let mut before = vec![f.memory_usage()];
            for i in 0..2000 {
                let layers = f.layer_count();
                f.add(&item(i), NO_LIMIT).unwrap();
                if f.layer_count() > layers {
                    before.push(f.memory_usage());
                }
            }
            assert!(before.len() > 3, "the filter grew");
            for (count, bytes) in before.iter().enumerate() {
                assert_eq!(f.memory_usage_of_layers(count + 1), *bytes, "{count}");
            }
            assert_eq!(f.memory_usage_of_layers(usize::MAX), f.memory_usage());
        }
    }

    #[test]
    fn classic_filters_report_redisbloom_facts() {
        let mut f = ScalableFilter::new(classic(10, 0.01, 2), NO_LIMIT).unwrap();
        for i in 0..100 {
            f.add(format!("{i}").as_bytes(), NO_LIMIT).unwrap();
        }
        assert!(f.is_classic());
        assert_eq!(f.classic_hash_width(), Some(64));
        let ScalableFilter::Classic(c) = &f else {
            panic!("classic")
        };
        let ClassicParams { options, growth } = *c.params();
        assert_eq!((options, growth), (5, 2));
        let bytes: Vec<u64> = f.layer_summaries().iter().map(|l| l.bytes).collect();
        assert_eq!(bytes, vec![16, 32, 72, 160]);
    }

    /// Measures the false-positive rate of a filter filled to capacity: both the exact rate of
    /// its bits (a deterministic bound) and the rate over `probes` absent items.
    fn measure(error: f64, capacity: u64, probes: u64, seed: u64) -> (f64, f64) {
        use crate::hash::mix64;
        let mut f = ScalableFilter::new(spec(capacity, error, 0), NO_LIMIT).unwrap();
        let hash = |n: u64| ItemHash {
            lo: mix64(seed ^ n),
            hi: mix64(seed.rotate_left(17) ^ n),
        };
        let c = blocked_mut(&mut f);
        let mut i = 0u64;
        while c.items() < capacity {
            c.add_hash(&hash(2 * i), NO_LIMIT, MAX_LAYERS, true)
                .unwrap();
            i += 1;
        }
        let state = c.layers()[0].state_fpr();
        // Odd indexes: never an inserted item.
        let positives = (0..probes)
            .filter(|&j| BlockedLayer::contains_any(c.layers(), &hash(2 * j + 1)))
            .count();
        (state, positives as f64 / probes as f64)
    }

    /// Fills a filter to capacity and checks both its exact rate and a measured one.
    fn assert_rate_at_capacity_is_at_or_under(error: f64, capacity: u64, probes: u64) {
        let (state, measured) = measure(error, capacity, probes, 0x5eed);
        assert!(
            state <= error,
            "error {error}: exact rate of the bits {state}"
        );
        // The measured rate is a count of random events: it may exceed the exact rate of the
        // bits by chance, by rarely more than three standard deviations.
        let sd = (error / probes as f64).sqrt();
        assert!(
            measured <= error + 3.0 * sd,
            "error {error}: measured {measured} over {probes} probes (exact {state})"
        );
    }

    #[test]
    fn false_positive_rate_at_capacity_is_at_or_under_the_target() {
        // Probes chosen so that the expected count of false positives is at least ~1000.
        for (error, capacity, probes) in [
            (0.1, 200_000, 2_000_000),
            (0.01, 200_000, 10_000_000),
            (0.001, 200_000, 20_000_000),
            (1e-4, 200_000, 40_000_000),
        ] {
            assert_rate_at_capacity_is_at_or_under(error, capacity, probes);
        }
    }

    /// A test of its own so that it runs beside the others: at 10^-6 even ~250 expected false
    /// positives take 2.5 * 10^8 probes, most of the core's test time.
    #[test]
    fn false_positive_rate_at_capacity_is_at_or_under_a_one_in_a_million_target() {
        assert_rate_at_capacity_is_at_or_under(1e-6, 100_000, 250_000_000);
    }

    #[test]
    fn real_item_hashes_behave_like_the_model() {
        let capacity = 100_000;
        let error = 0.01;
        let mut f = ScalableFilter::new(spec(capacity, error, 0), NO_LIMIT).unwrap();
        for i in 0..capacity {
            f.add(format!("user:{i}").as_bytes(), NO_LIMIT).unwrap();
        }
        let probes = 2_000_000u64;
        let positives = (0..probes)
            .filter(|j| f.contains(format!("absent:{j}").as_bytes()))
            .count() as f64;
        let measured = positives / probes as f64;
        let exact = blocked(&f).layers()[0].state_fpr();
        let sd = (exact / probes as f64).sqrt();
        assert!(
            (measured - exact).abs() < 5.0 * sd,
            "measured {measured} exact {exact}"
        );
        assert!(measured <= error);
    }
}

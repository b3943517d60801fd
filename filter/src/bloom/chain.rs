//! The scalable filter: a chain of layers that grows when its newest layer is full.
//!
//! Layer `i` of a scaling filter holds `capacity · expansion^i` items at `error · 0.5^(i+1)`,
//! so the chain's total false-positive rate stays under `error` (the layers' rates sum to at
//! most `error`). A non-scaling filter has one layer at the full `error` and refuses new items
//! once that layer is full.
//!
//! A filter is made of one kind of layer: blocked (layerbloom's own, the default) or classic
//! (RedisBloom's, for filters loaded from RedisBloom data or created in classic mode). Mixing
//! kinds would change how items hash between layers; one kind per filter never changes an
//! answer.

use crate::bloom::blocked::BlockedLayer;
use crate::bloom::classic::{ClassicHash, ClassicLayer, ClassicMeta, OPT_FORCE64, OPT_NO_SCALING};
use crate::bloom::sizing;
use crate::error::FilterError;
use crate::fallible::{try_push, try_vec};
use crate::hash::ItemHash;

/// How much tighter each new layer's error rate is than the previous one's.
pub const TIGHTENING: f64 = 0.5;

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

/// The kind of layers a new filter is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Cache-local blocked layers (layerbloom's).
    #[default]
    Blocked,
    /// RedisBloom's layers, bit for bit: data can move back to RedisBloom.
    Classic,
}

/// What a new filter is asked to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterSpec {
    /// Items the first layer holds.
    pub capacity: u64,
    /// The false-positive rate the whole filter keeps under.
    pub error: f64,
    /// Growth factor of each new layer.
    pub expansion: u32,
    /// The filter refuses new items once its first layer is full.
    pub nonscaling: bool,
    pub layout: Layout,
}

impl FilterSpec {
    /// A scaling blocked filter.
    pub fn new(capacity: u64, error: f64, expansion: u32) -> Self {
        FilterSpec {
            capacity,
            error,
            expansion,
            nonscaling: expansion == 0,
            layout: Layout::Blocked,
        }
    }

    /// The error rate of the first layer.
    pub fn first_layer_error(&self) -> f64 {
        if self.nonscaling {
            self.error
        } else {
            self.error * TIGHTENING
        }
    }

    /// RedisBloom's option bits for a classic filter of this spec.
    fn classic_options(&self) -> u32 {
        crate::bloom::classic::DEFAULT_OPTIONS | if self.nonscaling { OPT_NO_SCALING } else { 0 }
    }

    /// Bytes a filter of this spec takes when created, without allocating.
    pub fn initial_bytes(&self) -> Result<u64, FilterError> {
        let bits = match self.layout {
            Layout::Blocked => sizing::plan_layer(self.capacity, self.first_layer_error())?.bytes(),
            Layout::Classic => ClassicMeta::plan(
                self.capacity,
                self.first_layer_error(),
                self.classic_options(),
            )?
            .bytes(),
        };
        Ok(ScalableFilter::modelled_bytes(
            self.layout == Layout::Classic,
            1,
            [bits],
        ))
    }
}

/// The layers of a filter: all of one kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Layers {
    Blocked(Vec<BlockedLayer>),
    Classic {
        /// RedisBloom's option bits (hash width, rounding, non-scaling).
        options: u32,
        /// RedisBloom's growth factor, kept as loaded even for a non-scaling filter.
        growth: u32,
        layers: Vec<ClassicLayer>,
    },
}

/// A scalable Bloom filter.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalableFilter {
    layers: Layers,
    /// Where each layer's bit array ends in the concatenation of all of them (SCANDUMP's
    /// offsets): a chunk is found by binary search, so a dump or a load of a long chain costs
    /// O(layers · log layers) rather than O(layers²).
    ends: Vec<u64>,
    items: u64,
    error: f64,
    /// Growth factor of each new layer; 0 means non-scaling.
    expansion: u32,
}

/// One layer's figures, whatever its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerSummary {
    pub capacity: u64,
    pub error: f64,
    pub items: u64,
    pub bytes: u64,
    pub set_bits: u64,
    pub total_bits: u64,
    /// Bit positions each item sets (blocked: blocks per item × bits per block).
    pub hashes: u32,
    /// Blocks each item touches (1 for a classic layer, which has no blocks).
    pub blocks_per_item: u32,
}

/// Items hashed and prefetched together by the batch paths: enough to overlap many cache
/// misses, few enough that their lines stay in L1 until probed.
const BATCH: usize = 32;

/// Hashes a chunk of at most `BATCH` items into `out` (on the caller's stack, so a batch
/// allocates nothing); the hashes are the returned prefix.
fn hash_batch<'a>(items: &[&[u8]], out: &'a mut [ItemHash; BATCH]) -> &'a [ItemHash] {
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = ItemHash::of(item);
    }
    &out[..items.len()]
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
                mask0 = crate::bloom::blocked::first_mask(hash, k);
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

/// The cumulative ends of bit arrays of these byte lengths.
fn cumulative_ends(lengths: impl Iterator<Item = u64>) -> Vec<u64> {
    lengths
        .scan(0u64, |end, len| {
            *end = end.saturating_add(len);
            Some(*end)
        })
        .collect()
}

impl ScalableFilter {
    /// A new, empty filter, refused if it would take more than `max_bytes`.
    pub fn new(spec: FilterSpec, max_bytes: u64) -> Result<Self, FilterError> {
        let needed = spec.initial_bytes()?;
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            });
        }
        let error = spec.first_layer_error();
        let layers = match spec.layout {
            Layout::Blocked => {
                let mut layers = try_vec(1)?;
                layers.push(BlockedLayer::new(spec.capacity, error)?);
                Layers::Blocked(layers)
            }
            Layout::Classic => {
                let options = spec.classic_options();
                let mut layers = try_vec(1)?;
                layers.push(ClassicLayer::new(ClassicMeta::plan(
                    spec.capacity,
                    error,
                    options,
                )?)?);
                Layers::Classic {
                    options,
                    growth: spec.expansion,
                    layers,
                }
            }
        };
        // A classic filter's chain rate is not persisted (RedisBloom's formats have none): it
        // is derived from the first layer when loaded, so derive it the same way here, or a
        // rate whose half is inexact (below 2^-1021) would change on reload.
        let error = match (spec.layout, spec.nonscaling) {
            (Layout::Classic, false) => error / TIGHTENING,
            _ => spec.error,
        };
        let mut filter = ScalableFilter {
            layers,
            ends: Vec::new(),
            items: 0,
            error,
            expansion: if spec.nonscaling { 0 } else { spec.expansion },
        };
        // One layer: its end is its length.
        filter.ends = try_vec(1)?;
        filter.ends.push(filter.layer_bytes()[0].len() as u64);
        Ok(filter)
    }

    /// Where byte `offset` of the concatenated bit arrays lies: `(layer, offset within it,
    /// that layer's length)`, found by binary search.
    pub fn locate(&self, offset: u64) -> Option<(usize, u64, u64)> {
        let index = self.ends.partition_point(|&end| end <= offset);
        let end = *self.ends.get(index)?;
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        Some((index, offset - start, end - start))
    }

    /// A blocked filter from persisted parts (the codec has validated them).
    pub(crate) fn from_blocked(
        layers: Vec<BlockedLayer>,
        items: u64,
        error: f64,
        expansion: u32,
    ) -> Self {
        let ends = cumulative_ends(layers.iter().map(|l| l.as_bytes().len() as u64));
        ScalableFilter {
            layers: Layers::Blocked(layers),
            ends,
            items,
            error,
            expansion,
        }
    }

    /// A classic filter from persisted parts (the codec has validated them).
    pub(crate) fn from_classic(
        layers: Vec<ClassicLayer>,
        items: u64,
        options: u32,
        growth: u32,
    ) -> Self {
        let nonscaling = options & OPT_NO_SCALING != 0;
        let first = layers.first().map_or(0.01, |l| l.meta().error);
        let ends = cumulative_ends(layers.iter().map(|l| l.as_bytes().len() as u64));
        ScalableFilter {
            ends,
            layers: Layers::Classic {
                options,
                growth,
                layers,
            },
            items,
            error: if nonscaling {
                first
            } else {
                first / TIGHTENING
            },
            expansion: if nonscaling { 0 } else { growth },
        }
    }

    /// Bytes a filter takes by the allocator model (`footprint`): its box, its layer table of
    /// `table_len` entries and each of its bit arrays.
    pub(crate) fn modelled_bytes(
        classic: bool,
        table_len: usize,
        bit_arrays: impl IntoIterator<Item = u64>,
    ) -> u64 {
        use crate::footprint::allocation;
        use std::mem::{align_of, size_of};
        let (entry, bits_align) = if classic {
            (size_of::<ClassicLayer>(), 1)
        } else {
            (
                size_of::<BlockedLayer>(),
                align_of::<crate::bloom::blocked::Block>() as u64,
            )
        };
        // The layer table and the layers' cumulative byte offsets (`ends`), one entry each.
        let table = allocation((table_len * entry) as u64, 8)
            .saturating_add(allocation((table_len * size_of::<u64>()) as u64, 8));
        let boxed = allocation(
            size_of::<ScalableFilter>() as u64,
            align_of::<ScalableFilter>() as u64,
        );
        bit_arrays
            .into_iter()
            .fold(boxed.saturating_add(table), |sum, bytes| {
                sum.saturating_add(allocation(bytes, bits_align))
            })
    }

    /// Whether any layer holds the item.
    pub fn contains(&self, item: &[u8]) -> bool {
        // Newest first: it is the largest and holds the most items.
        match &self.layers {
            Layers::Blocked(layers) => blocked_contains(layers, &ItemHash::of(item)),
            Layers::Classic {
                options, layers, ..
            } => {
                let hash = ClassicHash::of(item, *options);
                layers.iter().rev().any(|l| l.contains(&hash))
            }
        }
    }

    /// Adds an item. `Ok(false)` when it was (or looked) present already: nothing changes and
    /// nothing is counted. Growth that would take the filter past `max_bytes` is refused.
    pub fn add(&mut self, item: &[u8], max_bytes: u64) -> Result<bool, FilterError> {
        match &self.layers {
            Layers::Blocked(_) => self.add_blocked(&ItemHash::of(item), max_bytes),
            Layers::Classic { options, .. } => {
                let hash = ClassicHash::of(item, *options);
                self.add_classic(&hash, max_bytes)
            }
        }
    }

    /// `contains` for many items at once, in order. Hashes a batch, starts loading every cache
    /// line the batch will touch in every layer, then probes: the memory accesses of a batch
    /// overlap instead of waiting for each other.
    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        let mut out = Vec::with_capacity(items.len());
        match &self.layers {
            // A chain: `blocked_contains` already overlaps the layers' misses and shares the
            // first-block mask; probing every layer in full cost 50 ns a layer.
            Layers::Blocked(layers) if layers.len() > 1 => out.extend(
                items
                    .iter()
                    .map(|item| blocked_contains(layers, &ItemHash::of(item))),
            ),
            Layers::Blocked(layers) => {
                let mut batch = [ItemHash { lo: 0, hi: 0 }; BATCH];
                for chunk in items.chunks(BATCH) {
                    let hashes = hash_batch(chunk, &mut batch);
                    for layer in layers.iter().rev() {
                        for h in hashes {
                            layer.prefetch(h);
                        }
                    }
                    out.extend(
                        hashes
                            .iter()
                            .map(|h| layers.iter().rev().any(|l| l.contains(h))),
                    );
                }
            }
            Layers::Classic { .. } => out.extend(items.iter().map(|item| self.contains(item))),
        }
        out
    }

    /// `add` for many items, with exactly the effect of adding them one by one in order (an
    /// item repeated in the batch is new only the first time). The results stop after the
    /// first error, and the items after it are not added. Like `contains_many`, a batch's
    /// cache lines are loaded before it is probed.
    pub fn add_many(&mut self, items: &[&[u8]], max_bytes: u64) -> Vec<Result<bool, FilterError>> {
        let mut out = Vec::with_capacity(items.len());
        if !matches!(self.layers, Layers::Blocked(_)) {
            for item in items {
                let result = self.add(item, max_bytes);
                let failed = result.is_err();
                out.push(result);
                if failed {
                    break;
                }
            }
            return out;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has just been seen to support POPCNT.
            unsafe { self.add_many_blocked_popcnt(items, max_bytes, &mut out) };
            return out;
        }
        self.add_many_blocked(items, max_bytes, &mut out);
        out
    }

    /// `add_many_blocked` compiled for CPUs with POPCNT: the crate is built for baseline
    /// x86-64, where counting an insert's flipped bits is a software popcount per word.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn add_many_blocked_popcnt(
        &mut self,
        items: &[&[u8]],
        max_bytes: u64,
        out: &mut Vec<Result<bool, FilterError>>,
    ) {
        self.add_many_blocked(items, max_bytes, out)
    }

    /// The batch add of a blocked filter: each batch's cache lines in every layer are
    /// requested before any item of it is added.
    #[inline(always)]
    fn add_many_blocked(
        &mut self,
        items: &[&[u8]],
        max_bytes: u64,
        out: &mut Vec<Result<bool, FilterError>>,
    ) {
        let mut batch = [ItemHash { lo: 0, hi: 0 }; BATCH];
        for chunk in items.chunks(BATCH) {
            let hashes = hash_batch(chunk, &mut batch);
            if let Layers::Blocked(layers) = &self.layers {
                for layer in layers.iter().rev() {
                    for h in hashes {
                        layer.prefetch(h);
                    }
                }
            }
            for h in hashes {
                let result = self.add_blocked_fused(h, max_bytes, false);
                let failed = result.is_err();
                out.push(result);
                if failed {
                    return;
                }
            }
        }
    }

    /// `add` with a precomputed hash, for blocked filters (`Ok(false)` on a classic one).
    pub fn add_hashed(&mut self, hash: &ItemHash, max_bytes: u64) -> Result<bool, FilterError> {
        match self.layers {
            Layers::Blocked(_) => self.add_blocked(hash, max_bytes),
            Layers::Classic { .. } => Ok(false),
        }
    }

    /// `contains` with a precomputed hash, for blocked filters (`false` on a classic one).
    pub fn contains_hashed(&self, hash: &ItemHash) -> bool {
        match &self.layers {
            Layers::Blocked(layers) => blocked_contains(layers, hash),
            Layers::Classic { .. } => false,
        }
    }

    fn add_blocked(&mut self, hash: &ItemHash, max_bytes: u64) -> Result<bool, FilterError> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has just been seen to support POPCNT.
            return unsafe { self.add_blocked_popcnt(hash, max_bytes) };
        }
        self.add_blocked_fused(hash, max_bytes, true)
    }

    /// `add_blocked_fused` compiled for CPUs with POPCNT (see `add_many_blocked_popcnt`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn add_blocked_popcnt(&mut self, hash: &ItemHash, max_bytes: u64) -> Result<bool, FilterError> {
        self.add_blocked_fused(hash, max_bytes, true)
    }

    /// Adds a hash to a blocked filter, with exactly the effect of checking every layer for it
    /// and, if none holds it, inserting it into the newest (grown first if full). The older
    /// layers are checked first; the newest one's check is its insert (`insert_new`), which
    /// changes nothing when it holds the item. `prefetch`: request the item's lines first
    /// (the batch path has already).
    #[inline(always)]
    fn add_blocked_fused(
        &mut self,
        hash: &ItemHash,
        max_bytes: u64,
        prefetch: bool,
    ) -> Result<bool, FilterError> {
        let Layers::Blocked(layers) = &mut self.layers else {
            unreachable!("called for blocked filters only")
        };
        let (newest, older) = layers.split_last_mut().expect("at least one layer");
        if prefetch {
            // Every line the add may touch, so that the older layers' misses overlap the
            // newest one's.
            newest.prefetch(hash);
            for layer in older.iter() {
                layer.prefetch_first(hash);
            }
        }
        if !older.is_empty() && blocked_contains(older, hash) {
            return Ok(false);
        }
        if !newest.is_full() {
            if newest.insert_new(hash) == 0 {
                return Ok(false);
            }
        } else {
            if newest.contains(hash) {
                return Ok(false);
            }
            self.grow(max_bytes)?;
            let Layers::Blocked(layers) = &mut self.layers else {
                unreachable!("the kind never changes")
            };
            layers.last_mut().expect("at least one layer").insert(hash);
        }
        self.items = self.items.saturating_add(1);
        Ok(true)
    }

    fn add_classic(&mut self, hash: &ClassicHash, max_bytes: u64) -> Result<bool, FilterError> {
        let Layers::Classic { layers, .. } = &self.layers else {
            unreachable!("called for classic filters only")
        };
        if layers.iter().rev().any(|l| l.contains(hash)) {
            return Ok(false);
        }
        if layers.last().expect("at least one layer").is_full() {
            self.grow(max_bytes)?;
        }
        let Layers::Classic { layers, .. } = &mut self.layers else {
            unreachable!("the kind never changes")
        };
        layers.last_mut().expect("at least one layer").insert(hash);
        self.items = self.items.saturating_add(1);
        Ok(true)
    }

    /// Appends the next layer, or says why it cannot be.
    fn grow(&mut self, max_bytes: u64) -> Result<(), FilterError> {
        if self.expansion == 0 {
            return Err(FilterError::Full);
        }
        if self.layer_count() >= MAX_LAYERS {
            return Err(FilterError::TooManyLayers { limit: MAX_LAYERS });
        }
        // Room for the new layer's end offset first, so that nothing fails after the push.
        self.ends
            .try_reserve_exact(1)
            .map_err(|_| FilterError::OutOfMemory { bytes: 8 })?;
        let end = self.ends.last().copied().unwrap_or(0);
        let too_big = FilterError::OverLimit {
            needed: u64::MAX,
            limit: max_bytes,
        };
        // What the filter will take with one more layer, by the same model as `memory_usage`.
        let classic = self.is_classic();
        let count = self.layer_count();
        let current = self.memory_usage();
        let without_bits = Self::modelled_bytes(classic, count, []);
        let check = |current: u64, bits_bytes: u64| {
            let needed = current
                .saturating_sub(without_bits)
                .saturating_add(Self::modelled_bytes(classic, count + 1, [bits_bytes]));
            if needed > max_bytes {
                Err(FilterError::OverLimit {
                    needed,
                    limit: max_bytes,
                })
            } else {
                Ok(())
            }
        };
        let expansion = u64::from(self.expansion);
        match &mut self.layers {
            Layers::Blocked(layers) => {
                let newest = layers.last().expect("at least one layer");
                let capacity = newest.capacity().checked_mul(expansion).ok_or(too_big)?;
                // Halving forever would reach zero after ~1075 layers; sizing treats rates
                // below its floor alike, so flooring here changes nothing but keeps it valid.
                let error = (newest.error() * TIGHTENING).max(f64::MIN_POSITIVE);
                let geometry = sizing::plan_layer(capacity, error)?;
                check(current, geometry.bytes())?;
                let layer = BlockedLayer::with_geometry(capacity, error, geometry)?;
                let len = layer.as_bytes().len() as u64;
                try_push(layers, layer)?;
                // The layer that stops taking items keeps its false-positive estimate.
                let sealed = layers.len() - 2;
                layers[sealed].refresh_estimate();
                self.ends.push(end.saturating_add(len));
                Ok(())
            }
            Layers::Classic {
                options, layers, ..
            } => {
                let newest = layers.last().expect("at least one layer").meta();
                let entries = newest.entries.checked_mul(expansion).ok_or(too_big)?;
                let meta = ClassicMeta::plan(entries, newest.error * TIGHTENING, *options)?;
                check(current, meta.bytes())?;
                let layer = ClassicLayer::new(meta)?;
                let len = layer.as_bytes().len() as u64;
                try_push(layers, layer)?;
                self.ends.push(end.saturating_add(len));
                Ok(())
            }
        }
    }

    /// The layers.
    pub fn layers(&self) -> &Layers {
        &self.layers
    }

    /// The blocked layers, or `None` for a classic filter.
    pub fn blocked_layers(&self) -> Option<&[BlockedLayer]> {
        match &self.layers {
            Layers::Blocked(layers) => Some(layers),
            Layers::Classic { .. } => None,
        }
    }

    /// Number of layers.
    pub fn layer_count(&self) -> usize {
        match &self.layers {
            Layers::Blocked(l) => l.len(),
            Layers::Classic { layers, .. } => layers.len(),
        }
    }

    /// Each layer's figures, oldest first.
    pub fn layer_summaries(&self) -> Vec<LayerSummary> {
        match &self.layers {
            Layers::Blocked(layers) => layers.iter().map(BlockedLayer::summary).collect(),
            Layers::Classic { layers, .. } => layers
                .iter()
                .map(|l| LayerSummary {
                    capacity: l.meta().entries,
                    error: l.meta().error,
                    items: l.meta().size,
                    bytes: l.meta().bytes(),
                    set_bits: l.set_bits(),
                    total_bits: l.meta().bits,
                    hashes: l.meta().hashes,
                    blocks_per_item: 1,
                })
                .collect(),
        }
    }

    /// Each layer's bit array as bytes, oldest first.
    pub fn layer_bytes(&self) -> Vec<&[u8]> {
        match &self.layers {
            Layers::Blocked(layers) => layers.iter().map(BlockedLayer::as_bytes).collect(),
            Layers::Classic { layers, .. } => layers.iter().map(ClassicLayer::as_bytes).collect(),
        }
    }

    /// Layer `index`'s bit array as bytes.
    pub fn layer_bytes_at(&self, index: usize) -> &[u8] {
        match &self.layers {
            Layers::Blocked(layers) => layers[index].as_bytes(),
            Layers::Classic { layers, .. } => layers[index].as_bytes(),
        }
    }

    /// ORs bytes into layer `index` at `offset`; the caller has checked the range.
    pub(crate) fn or_layer_bytes(&mut self, index: usize, offset: usize, data: &[u8]) {
        match &mut self.layers {
            Layers::Blocked(layers) => layers[index].or_bytes(offset, data),
            Layers::Classic { layers, .. } => layers[index].or_bytes(offset, data),
        }
    }

    /// Items added (an add that found the item present does not count).
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The sum of the layers' capacities.
    pub fn capacity(&self) -> u64 {
        self.layer_summaries()
            .iter()
            .fold(0u64, |sum, l| sum.saturating_add(l.capacity))
    }

    /// The error rate the filter was created with (for a classic filter loaded from
    /// RedisBloom, derived from its first layer).
    pub fn error(&self) -> f64 {
        self.error
    }

    /// The growth factor, or `None` for a non-scaling filter.
    pub fn expansion(&self) -> Option<u32> {
        (self.expansion != 0).then_some(self.expansion)
    }

    /// The raw growth factor (0 for non-scaling), as persisted.
    pub fn expansion_raw(&self) -> u32 {
        self.expansion
    }

    /// Whether the layers are RedisBloom's.
    pub fn is_classic(&self) -> bool {
        matches!(self.layers, Layers::Classic { .. })
    }

    /// The hash width RedisBloom reports (BF.DEBUG `hashwidth`).
    pub fn classic_hash_width(&self) -> Option<u32> {
        match &self.layers {
            Layers::Classic { options, .. } => {
                Some(if options & OPT_FORCE64 != 0 { 64 } else { 32 })
            }
            Layers::Blocked(_) => None,
        }
    }

    /// Bytes the filter takes: its struct, its layer table and its bit arrays, each as the
    /// allocator model (`footprint`) counts it. Deterministic: equal filters report equal
    /// figures on every server.
    pub fn memory_usage(&self) -> u64 {
        match &self.layers {
            Layers::Blocked(l) => {
                Self::modelled_bytes(false, l.len(), l.iter().map(BlockedLayer::bytes))
            }
            Layers::Classic { layers, .. } => {
                Self::modelled_bytes(true, layers.len(), layers.iter().map(ClassicLayer::bytes))
            }
        }
    }

    /// A deep copy, reporting allocation failure instead of aborting.
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let layers = match &self.layers {
            Layers::Blocked(layers) => {
                let mut copy = try_vec(layers.len())?;
                for l in layers {
                    copy.push(l.try_clone()?);
                }
                Layers::Blocked(copy)
            }
            Layers::Classic {
                options,
                growth,
                layers,
            } => {
                let mut copy = try_vec(layers.len())?;
                for l in layers {
                    copy.push(l.try_clone()?);
                }
                Layers::Classic {
                    options: *options,
                    growth: *growth,
                    layers: copy,
                }
            }
        };
        let mut ends = try_vec(self.ends.len())?;
        ends.extend_from_slice(&self.ends);
        Ok(ScalableFilter {
            layers,
            ends,
            ..*self
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bloom::blocked::LayerMeta;

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
        let mut f = ScalableFilter::from_blocked(vec![layer], huge, 0.01, 2);
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
            match &self.layers {
                Layers::Blocked(l) => l.last().unwrap().is_full(),
                Layers::Classic { layers, .. } => layers.last().unwrap().is_full(),
            }
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
        let Layers::Blocked(layers) = &f.layers else {
            panic!("blocked")
        };
        if blocked_contains(layers, hash) {
            return Ok(false);
        }
        if layers.last().unwrap().is_full() {
            f.grow(max_bytes)?;
        }
        let Layers::Blocked(layers) = &mut f.layers else {
            panic!("blocked")
        };
        layers.last_mut().unwrap().insert(hash);
        f.items += 1;
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
                    baseline.add_many_blocked(&refs, limit, &mut baseline_got);
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
                        for (layer, bytes) in
                            f.blocked_layers().unwrap().iter().zip(f.layer_bytes())
                        {
                            assert_eq!(
                                layer.set_bits(),
                                crate::bits::count_ones(bytes),
                                "{name}: {what}"
                            );
                        }
                    }
                    for layer in unfused.blocked_layers().unwrap() {
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
    fn classic_filters_report_redisbloom_facts() {
        let mut f = ScalableFilter::new(classic(10, 0.01, 2), NO_LIMIT).unwrap();
        for i in 0..100 {
            f.add(format!("{i}").as_bytes(), NO_LIMIT).unwrap();
        }
        assert!(f.is_classic());
        assert_eq!(f.classic_hash_width(), Some(64));
        let Layers::Classic {
            options, growth, ..
        } = f.layers()
        else {
            panic!("classic")
        };
        assert_eq!((*options, *growth), (5, 2));
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
        let mut i = 0u64;
        while f.items() < capacity {
            f.add_hashed(&hash(2 * i), NO_LIMIT).unwrap();
            i += 1;
        }
        let state = f.blocked_layers().unwrap()[0].state_fpr();
        // Odd indexes: never an inserted item.
        let positives = (0..probes)
            .filter(|&j| f.contains_hashed(&hash(2 * j + 1)))
            .count();
        (state, positives as f64 / probes as f64)
    }

    #[test]
    fn false_positive_rate_at_capacity_is_at_or_under_the_target() {
        // Probes chosen so that the expected count of false positives is at least ~1000.
        for (error, capacity, probes) in [
            (0.1, 200_000, 2_000_000),
            (0.01, 200_000, 10_000_000),
            (0.001, 200_000, 20_000_000),
            (1e-4, 200_000, 40_000_000),
            (1e-6, 100_000, 1_000_000_000),
        ] {
            let (state, measured) = measure(error, capacity, probes, 0x5eed);
            assert!(
                state <= error,
                "error {error}: exact rate of the bits {state}"
            );
            // The measured rate is a count of ~1000 random events: it may exceed the exact
            // rate of the bits by chance, by rarely more than three standard deviations.
            let sd = (error / probes as f64).sqrt();
            assert!(
                measured <= error + 3.0 * sd,
                "error {error}: measured {measured} over {probes} probes (exact {state})"
            );
        }
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
        let exact = f.blocked_layers().unwrap()[0].state_fpr();
        let sd = (exact / probes as f64).sqrt();
        assert!(
            (measured - exact).abs() < 5.0 * sd,
            "measured {measured} exact {exact}"
        );
        assert!(measured <= error);
    }
}

//! The scalable filter: a chain of layers that grows when its newest layer is full.
//!
//! Layer `i` of a scaling filter holds `capacity · expansion^i` items at `error · 0.5^(i+1)`,
//! so the chain's total false-positive rate stays under `error` (the geometric series of the
//! layers' rates sums to at most `error`). A non-scaling filter has one layer at the full
//! `error` and refuses new items once that layer is full.

use crate::blocked::BlockedLayer;
use crate::error::FilterError;
use crate::hash::ItemHash;

/// How much tighter each new layer's error rate is than the previous one's.
pub const TIGHTENING: f64 = 0.5;

/// A scalable Bloom filter.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalableFilter {
    layers: Vec<BlockedLayer>,
    items: u64,
    error: f64,
    /// Growth factor of each new layer's capacity; 0 means non-scaling.
    expansion: u32,
}

/// What a new filter is asked to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterSpec {
    /// Items the first layer holds.
    pub capacity: u64,
    /// The false-positive rate the whole filter keeps under.
    pub error: f64,
    /// Growth factor of each new layer; 0 makes the filter non-scaling.
    pub expansion: u32,
}

impl FilterSpec {
    /// The error rate of the first layer.
    pub fn first_layer_error(&self) -> f64 {
        if self.expansion == 0 {
            self.error
        } else {
            self.error * TIGHTENING
        }
    }

    /// Bytes a filter of this spec takes when created (before any growth), without allocating.
    pub fn initial_bytes(&self) -> Result<u64, FilterError> {
        let geometry = crate::sizing::plan_layer(self.capacity, self.first_layer_error())?;
        Ok(geometry
            .bytes()
            .saturating_add(ScalableFilter::overhead_bytes(1)))
    }
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
        let layer = BlockedLayer::new(spec.capacity, spec.first_layer_error())?;
        let mut layers = Vec::new();
        layers
            .try_reserve_exact(1)
            .map_err(|_| FilterError::OutOfMemory { bytes: 1 })?;
        layers.push(layer);
        Ok(ScalableFilter {
            layers,
            items: 0,
            error: spec.error,
            expansion: spec.expansion,
        })
    }

    /// A filter from persisted parts (the codec has validated them).
    pub(crate) fn from_parts(
        layers: Vec<BlockedLayer>,
        items: u64,
        error: f64,
        expansion: u32,
    ) -> Self {
        ScalableFilter {
            layers,
            items,
            error,
            expansion,
        }
    }

    /// Bytes of bookkeeping for a filter of `layers` layers (the bit arrays excluded).
    pub(crate) fn overhead_bytes(layers: usize) -> u64 {
        (std::mem::size_of::<ScalableFilter>() + layers * std::mem::size_of::<BlockedLayer>())
            as u64
    }

    /// Whether any layer holds the item.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        // Newest first: it is the largest and holds the most items.
        self.layers.iter().rev().any(|layer| layer.contains(hash))
    }

    /// Adds an item. `Ok(false)` when it was (or looked) present already: nothing changes and
    /// nothing is counted. Growth that would take the filter past `max_bytes` is refused.
    pub fn add(&mut self, hash: &ItemHash, max_bytes: u64) -> Result<bool, FilterError> {
        if self.contains(hash) {
            return Ok(false);
        }
        if self.newest().is_full() {
            self.grow(max_bytes)?;
        }
        let newest = self
            .layers
            .last_mut()
            .expect("a filter has at least one layer");
        newest.insert(hash);
        self.items += 1;
        Ok(true)
    }

    /// Appends the next layer, or says why it cannot be.
    fn grow(&mut self, max_bytes: u64) -> Result<(), FilterError> {
        if self.expansion == 0 {
            return Err(FilterError::Full);
        }
        let newest = self.newest();
        let capacity = newest
            .capacity()
            .checked_mul(u64::from(self.expansion))
            .ok_or(FilterError::OverLimit {
                needed: u64::MAX,
                limit: max_bytes,
            })?;
        // Halving forever would reach zero after ~1075 layers; sizing treats rates below its
        // floor alike, so flooring here changes nothing but keeps the rate valid.
        let error = (newest.error() * TIGHTENING).max(f64::MIN_POSITIVE);
        let geometry = crate::sizing::plan_layer(capacity, error)?;
        let needed = self
            .memory_usage()
            .saturating_add(geometry.bytes())
            .saturating_add(std::mem::size_of::<BlockedLayer>() as u64);
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            });
        }
        // Exact, so the layer table's size is the same however the filter was built.
        self.layers
            .try_reserve_exact(1)
            .map_err(|_| FilterError::OutOfMemory {
                bytes: std::mem::size_of::<BlockedLayer>() as u64,
            })?;
        let layer = BlockedLayer::with_geometry(capacity, error, geometry)?;
        self.layers.push(layer);
        Ok(())
    }

    fn newest(&self) -> &BlockedLayer {
        self.layers.last().expect("a filter has at least one layer")
    }

    /// A deep copy, reporting allocation failure instead of aborting.
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let mut layers = Vec::new();
        layers
            .try_reserve_exact(self.layers.len())
            .map_err(|_| FilterError::OutOfMemory {
                bytes: Self::overhead_bytes(self.layers.len()),
            })?;
        for layer in &self.layers {
            layers.push(layer.try_clone()?);
        }
        Ok(ScalableFilter { layers, ..*self })
    }

    /// The layers, oldest first.
    pub fn layers(&self) -> &[BlockedLayer] {
        &self.layers
    }

    pub(crate) fn layers_mut(&mut self) -> &mut [BlockedLayer] {
        &mut self.layers
    }

    /// Items added (an add that found the item present does not count).
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The sum of the layers' capacities.
    pub fn capacity(&self) -> u64 {
        self.layers
            .iter()
            .fold(0u64, |sum, l| sum.saturating_add(l.capacity()))
    }

    /// The error rate the filter was created with.
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

    /// Bytes allocated for the filter: its struct, its layer table and its bit arrays.
    pub fn memory_usage(&self) -> u64 {
        let table = (self.layers.capacity() * std::mem::size_of::<BlockedLayer>()) as u64;
        let bits: u64 = self.layers.iter().map(BlockedLayer::bytes).sum();
        std::mem::size_of::<ScalableFilter>() as u64 + table + bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::mix64;

    const NO_LIMIT: u64 = u64::MAX;

    fn item(i: u64) -> ItemHash {
        ItemHash::of(format!("item:{i}").as_bytes())
    }

    fn spec(capacity: u64, error: f64, expansion: u32) -> FilterSpec {
        FilterSpec {
            capacity,
            error,
            expansion,
        }
    }

    #[test]
    fn adding_twice_counts_once() {
        let mut f = ScalableFilter::new(spec(100, 0.01, 2), NO_LIMIT).unwrap();
        assert_eq!(f.add(&item(1), NO_LIMIT), Ok(true));
        assert_eq!(f.add(&item(1), NO_LIMIT), Ok(false));
        assert_eq!(f.items(), 1);
        assert!(f.contains(&item(1)));
    }

    #[test]
    fn a_scaling_filter_grows_by_expansion_with_tightening_error() {
        let mut f = ScalableFilter::new(spec(10, 0.01, 3), NO_LIMIT).unwrap();
        let mut added = 0;
        for i in 0..200 {
            if f.add(&item(i), NO_LIMIT).unwrap() {
                added += 1;
            }
        }
        assert_eq!(f.items(), added);
        let caps: Vec<u64> = f.layers().iter().map(|l| l.capacity()).collect();
        assert_eq!(caps, vec![10, 30, 90, 270]);
        let errors: Vec<f64> = f.layers().iter().map(|l| l.error()).collect();
        assert_eq!(errors, vec![0.005, 0.0025, 0.00125, 0.000625]);
        assert_eq!(f.capacity(), 400);
        assert!((0..200).all(|i| f.contains(&item(i))));
        // Every layer but the newest is exactly full.
        for l in &f.layers()[..3] {
            assert_eq!(l.items(), l.capacity());
        }
    }

    #[test]
    fn nonscaling_filter_refuses_the_item_past_capacity_and_keeps_the_rest() {
        let mut f = ScalableFilter::new(spec(50, 0.001, 0), NO_LIMIT).unwrap();
        assert_eq!(f.layers()[0].error(), 0.001);
        let mut i = 0;
        while f.items() < 50 {
            f.add(&item(i), NO_LIMIT).unwrap();
            i += 1;
        }
        let before = f.clone();
        // Find an item that is not (falsely) present, then add it.
        let fresh = (1000..).map(item).find(|h| !f.contains(h)).unwrap();
        assert_eq!(f.add(&fresh, NO_LIMIT), Err(FilterError::Full));
        assert_eq!(f, before);
        assert!((0..i).all(|j| f.contains(&item(j))));
        // A present item is still answered, not refused.
        assert_eq!(f.add(&item(0), NO_LIMIT), Ok(false));
        assert_eq!(f.expansion(), None);
    }

    #[test]
    fn growth_past_the_memory_limit_is_refused_without_change() {
        let mut f = ScalableFilter::new(spec(100, 0.01, 2), NO_LIMIT).unwrap();
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

    #[test]
    fn creation_past_the_memory_limit_is_refused() {
        let err = ScalableFilter::new(spec(1 << 30, 1e-9, 2), 1 << 30).unwrap_err();
        assert!(matches!(err, FilterError::OverLimit { .. }), "{err:?}");
    }

    #[test]
    fn capacity_overflow_on_growth_is_an_error_not_a_wrap() {
        use crate::blocked::LayerMeta;
        let geometry = crate::sizing::plan_layer(1, 0.005).unwrap();
        let huge = u64::MAX / 2 + 1;
        let meta = LayerMeta {
            capacity: huge,
            error: 0.005,
            items: huge,
            geometry,
        };
        let layer = BlockedLayer::from_parts(meta, crate::blocked::zeroed_blocks(1).unwrap());
        let mut f = ScalableFilter::from_parts(vec![layer], huge, 0.01, 2);
        let before = f.clone();
        let fresh = (0..).map(item).find(|h| !f.contains(h)).unwrap();
        assert!(matches!(
            f.add(&fresh, NO_LIMIT),
            Err(FilterError::OverLimit { .. })
        ));
        assert_eq!(f, before);
    }

    #[test]
    fn try_clone_is_deep_and_equal() {
        let mut f = ScalableFilter::new(spec(10, 0.01, 2), NO_LIMIT).unwrap();
        for i in 0..50 {
            f.add(&item(i), NO_LIMIT).unwrap();
        }
        let mut g = f.try_clone().unwrap();
        assert_eq!(g, f);
        assert_eq!(g.memory_usage(), f.memory_usage());
        g.add(&item(1000), NO_LIMIT).unwrap();
        assert_ne!(g, f);
    }

    #[test]
    fn memory_usage_counts_every_bit_array() {
        let mut f = ScalableFilter::new(spec(1000, 0.01, 2), NO_LIMIT).unwrap();
        for i in 0..5000 {
            f.add(&item(i), NO_LIMIT).unwrap();
        }
        let bits: u64 = f.layers().iter().map(|l| l.geometry().bytes()).sum();
        assert!(f.memory_usage() >= bits);
        assert!(f.memory_usage() < bits + 4096);
    }

    /// Measures the false-positive rate of a filter filled to capacity: both the exact rate of
    /// its bits (a deterministic bound) and the rate over `probes` absent items.
    fn measure(error: f64, capacity: u64, probes: u64, seed: u64) -> (f64, f64) {
        let mut f = ScalableFilter::new(spec(capacity, error, 0), NO_LIMIT).unwrap();
        let mut i = 0u64;
        while f.items() < capacity {
            let h = ItemHash {
                lo: mix64(seed ^ (2 * i)),
                hi: mix64(seed.rotate_left(17) ^ (2 * i)),
            };
            f.add(&h, NO_LIMIT).unwrap();
            i += 1;
        }
        let state = f.layers()[0].state_fpr();
        let mut positives = 0u64;
        for j in 0..probes {
            // Odd indexes: never an inserted item.
            let h = ItemHash {
                lo: mix64(seed ^ (2 * j + 1)),
                hi: mix64(seed.rotate_left(17) ^ (2 * j + 1)),
            };
            positives += u64::from(f.contains(&h));
        }
        (state, positives as f64 / probes as f64)
    }

    #[test]
    fn false_positive_rate_at_capacity_is_at_or_under_the_target() {
        // probes chosen so that the expected count of false positives is at least ~1000.
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
            assert!(
                measured <= error,
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
            f.add(&ItemHash::of(format!("user:{i}").as_bytes()), NO_LIMIT)
                .unwrap();
        }
        let probes = 2_000_000u64;
        let positives = (0..probes)
            .filter(|j| f.contains(&ItemHash::of(format!("absent:{j}").as_bytes())))
            .count() as f64;
        let measured = positives / probes as f64;
        let exact = f.layers()[0].state_fpr();
        // Within 5 standard deviations of the rate the bits imply.
        let sd = (exact / probes as f64).sqrt();
        assert!(
            (measured - exact).abs() < 5.0 * sd,
            "measured {measured} exact {exact}"
        );
        assert!(measured <= error);
    }
}

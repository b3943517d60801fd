//! Filter health: what a filter's bits say about it, beyond what its counters say.
//!
//! A Bloom filter fails silently: past its capacity it keeps answering, with a false-positive
//! rate that climbs without an error. These figures make that visible. All of them come from
//! counts the layers keep anyway (set bits, items, capacity), so computing them costs a few
//! microseconds whatever the filter's size.
//!
//! # The estimators
//! Notation for one layer: `m` bits, `X` of them set, fill `f = X/m`, `h` bit positions set per
//! item (`h = b·k` for a blocked layer: `b` blocks of `B = 512` bits, `k` bits in each).
//!
//! * **Fill ratio**: `f` of the newest layer (the one that takes new items).
//! * **Classic layer false-positive rate**: `f^h`. An absent item is a false positive when all
//!   its `h` positions are set; each is set with probability `f` given the bits.
//! * **Blocked layer false-positive rate**: the bits of a blocked layer are not spread evenly:
//!   a block that received more items than average is fuller, and `(fill)^k` is convex, so
//!   `f^h` underestimates (by 10 to 40% at capacity). The estimate follows the layout's model
//!   (see `sizing`): a block receives a Poisson(`λ`) number `j` of item-slots, where `λ` is
//!   solved from the observed fill, `f = 1 − exp(−λ·(1 − q^k))` with `q = 1 − 1/B` (the
//!   expected fill of a Poisson mixture of blocks); a block with `j` slots has had `t = k·j`
//!   uniform throws and answers "present" with probability `E[(S_t/B)^k]`, taken to second
//!   order, `μ^k + C(k,2)·μ^(k−2)·σ²`, from the mean `μ = 1 − q^t` and variance `σ²` of its
//!   fill; then `fpr = (Σ_j Poisson(j; λ)·E[(S_{kj}/B)^k])^b`. Unit tests hold it within 2% of
//!   the exact rate of the actual bits (`BlockedLayer::state_fpr`, which reads every block).
//! * **Chain false-positive rate**: `1 − Π(1 − fpr_i)`: a query probes every layer.
//! * **Distinct items**: the number of items whose bits would give the observed fill, inverted
//!   from the same expectations: `ln(1 − f) / ln(1 − h/m)` for a classic layer (its `h`
//!   positions are distinct), `λ·blocks/b` for a blocked one; summed over layers. An add that
//!   found its item already (falsely) present sets no bit and is not counted, but the bits look
//!   as if it had been added: the estimate counts the distinct items *offered*, so it exceeds
//!   `Number of items inserted` by the items the false positives swallowed, and it exposes a
//!   filter whose counter and bits disagree. A saturated layer (every bit set) is estimated as
//!   if one bit were still clear: a lower bound.
//! * **Max capacity**: the capacity the chain reaches if it grows until the next layer would
//!   take it past a memory limit, simulating exactly the growth rule of `chain` (the same
//!   sizing functions, the same limit check); a non-scaling filter's is its capacity.

use crate::bloom::blocked::BlockedLayer;
use crate::bloom::chain::{LayerSummary, Layers, ScalableFilter, MAX_LAYERS, TIGHTENING};
use crate::bloom::classic::{ClassicLayer, ClassicMeta};
use crate::bloom::sizing::{self, BLOCK_BITS, MIN_SIZING_ERROR};

/// The health figures of a filter, in `BF.INFO` order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Health {
    /// The error rate the filter was created with.
    pub error: f64,
    /// Set bits / bits of the newest layer.
    pub fill_ratio: f64,
    /// The whole chain's false-positive rate estimated from its layers' fill.
    pub estimated_fpr: f64,
    /// The distinct items the bits account for.
    pub estimated_distinct: u64,
    /// The capacity the filter can reach under the memory limit.
    pub max_capacity: u64,
}

/// Every health figure of a filter; `max_bytes` is the per-filter memory limit in force.
pub fn health(filter: &ScalableFilter, max_bytes: u64) -> Health {
    let layers = filter.layer_summaries();
    let classic = filter.is_classic();
    Health {
        error: filter.error(),
        fill_ratio: layers.last().map_or(0.0, fill_ratio),
        estimated_fpr: estimated_fpr(filter),
        estimated_distinct: distinct_items(&layers, classic),
        max_capacity: max_capacity(filter, max_bytes),
    }
}

/// The whole chain's estimated false-positive rate. A blocked layer's estimate costs a
/// Poisson sum: the ones the layers keep are used; a classic layer's is `f^k`.
pub fn estimated_fpr(filter: &ScalableFilter) -> f64 {
    match filter.layers() {
        Layers::Blocked(blocked) => combine_fprs(blocked.iter().map(BlockedLayer::estimated_fpr)),
        Layers::Classic { .. } => chain_fpr(&filter.layer_summaries(), true),
    }
}

/// Set bits / bits of a layer.
pub fn fill_ratio(layer: &LayerSummary) -> f64 {
    if layer.total_bits == 0 {
        return 0.0;
    }
    layer.set_bits as f64 / layer.total_bits as f64
}

/// The estimated false-positive rate of one layer from its fill (see the module notes).
pub fn layer_fpr(layer: &LayerSummary, classic: bool) -> f64 {
    let f = fill_ratio(layer);
    if f <= 0.0 || layer.hashes == 0 {
        return 0.0;
    }
    if f >= 1.0 {
        return 1.0;
    }
    if classic {
        return f.powi(layer.hashes as i32);
    }
    let b = layer.blocks_per_item.max(1);
    let k = (layer.hashes / b).max(1);
    let load = block_load(f, k);
    let per_block = poisson_mix(load, |j| block_positive(k, j));
    per_block.clamp(0.0, 1.0).powi(b as i32)
}

/// `1 − Π(1 − fpr_i)` over the layers.
pub fn chain_fpr(layers: &[LayerSummary], classic: bool) -> f64 {
    combine_fprs(layers.iter().map(|l| layer_fpr(l, classic)))
}

/// `1 − Π(1 − p_i)`: the rate of a query that probes layers of rates `p_i`.
fn combine_fprs(rates: impl Iterator<Item = f64>) -> f64 {
    // In logs: `1 − Π(1 − p)` directly would round rates under 1e-16 away.
    let ln_pass: f64 = rates.map(|p| (-p).ln_1p()).sum();
    (-ln_pass.exp_m1()).clamp(0.0, 1.0)
}

/// The distinct items one layer's bits account for (see the module notes).
pub fn layer_distinct(layer: &LayerSummary, classic: bool) -> f64 {
    let m = layer.total_bits as f64;
    if layer.set_bits == 0 || layer.total_bits == 0 || layer.hashes == 0 {
        return 0.0;
    }
    // A saturated layer: estimate as if one bit were still clear (a lower bound).
    let set = layer.set_bits.min(layer.total_bits - 1) as f64;
    let f = set / m;
    if classic {
        let h = f64::from(layer.hashes);
        if h >= m {
            return set;
        }
        (-f).ln_1p() / (-h / m).ln_1p()
    } else {
        let b = layer.blocks_per_item.max(1);
        let k = (layer.hashes / b).max(1);
        let blocks = m / f64::from(BLOCK_BITS);
        block_load(f, k) * blocks / f64::from(b)
    }
}

/// The distinct items the whole chain's bits account for, rounded.
pub fn distinct_items(layers: &[LayerSummary], classic: bool) -> u64 {
    let total: f64 = layers.iter().map(|l| layer_distinct(l, classic)).sum();
    total.round() as u64
}

/// `q = 1 − 1/B`, the chance one throw misses a given bit of a block.
fn miss() -> f64 {
    1.0 - 1.0 / f64::from(BLOCK_BITS)
}

/// The mean item-slots per block `λ` that gives fill `f` with `k` bits per slot:
/// `f = 1 − exp(−λ·(1 − q^k))` under Poisson block loads.
fn block_load(f: f64, k: u32) -> f64 {
    let per_slot = 1.0 - miss().powi(k as i32);
    -(-f).ln_1p() / per_slot
}

/// `E[(S_t/B)^k]` for a block that received `j` item-slots (`t = k·j` uniform throws), to
/// second order in the spread of its fill.
fn block_positive(k: u32, j: u64) -> f64 {
    let t = (f64::from(k) * j as f64) as i32;
    let bits = f64::from(BLOCK_BITS);
    let q = miss();
    let mean = 1.0 - q.powi(t);
    if mean <= 0.0 {
        return 0.0;
    }
    // Var(S_t) = B(B−1)(1−2/B)^t + B·q^t − B²·q^(2t), for the fill S_t/B divide by B².
    let var_s = bits * (bits - 1.0) * (1.0 - 2.0 / bits).powi(t) + bits * q.powi(t)
        - bits * bits * q.powi(2 * t);
    let var = (var_s / (bits * bits)).max(0.0);
    let kf = f64::from(k);
    let pairs = kf * (kf - 1.0) / 2.0;
    mean.powi(k as i32) + pairs * mean.powi(k as i32 - 2) * var
}

/// `Σ_j Poisson(j; λ)·g(j)` over a window holding all but a negligible part of the mass.
fn poisson_mix(load: f64, g: impl Fn(u64) -> f64) -> f64 {
    if !load.is_finite() || load <= 0.0 {
        return g(0);
    }
    let sd = load.sqrt();
    let lo = (load - 12.0 * sd - 12.0).max(0.0).floor() as u64;
    let hi = (load + 12.0 * sd + 30.0).ceil() as u64;
    let ln_load = load.ln();
    let mut ln_fact = ln_factorial(lo);
    let mut sum = 0.0;
    for j in lo..=hi {
        if j > lo {
            ln_fact += (j as f64).ln();
        }
        let pmf = (j as f64 * ln_load - load - ln_fact).exp();
        sum += pmf * g(j);
    }
    sum
}

/// `ln(n!)`: exact summation for small `n`, Stirling's series beyond (error below 1e-12).
fn ln_factorial(n: u64) -> f64 {
    if n < 64 {
        return (2..=n).map(|i| (i as f64).ln()).sum();
    }
    let x = n as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x * x * x)
}

/// The item count at which a layer of `capacity` items reaches `percent`% of its capacity:
/// `ceil(capacity · percent / 100)`, at least 1.
pub fn warning_mark(capacity: u64, percent: u32) -> u64 {
    let mark = (u128::from(capacity) * u128::from(percent)).div_ceil(100);
    u64::try_from(mark).unwrap_or(u64::MAX).max(1)
}

/// Items and capacity of layer `index` (oldest first).
pub fn layer_load(filter: &ScalableFilter, index: usize) -> Option<(u64, u64)> {
    match filter.layers() {
        Layers::Blocked(layers) => layers.get(index).map(|l| (l.items(), l.capacity())),
        Layers::Classic { layers, .. } => {
            layers.get(index).map(|l| (l.meta().size, l.meta().entries))
        }
    }
}

/// Whether the newest layer is at or past `percent`% of its capacity (`percent` 0: never).
pub fn over_warning(filter: &ScalableFilter, percent: u32) -> bool {
    let newest = filter.layer_count().saturating_sub(1);
    percent > 0
        && layer_load(filter, newest)
            .is_some_and(|(items, capacity)| items >= warning_mark(capacity, percent))
}

/// A filter's load before a write: what `crossings` compares the filter with afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadMark {
    layers: usize,
    newest_items: u64,
}

impl LoadMark {
    pub fn of(filter: &ScalableFilter) -> Self {
        let layers = filter.layer_count();
        LoadMark {
            layers,
            newest_items: layer_load(filter, layers.saturating_sub(1)).map_or(0, |(i, _)| i),
        }
    }
}

/// A layer that a write took from under its warning mark to at or past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    /// The layer's index, oldest first.
    pub layer: usize,
    /// Its items after the write.
    pub items: u64,
    pub capacity: u64,
}

/// The layers that crossed `percent`% of their capacity since `before`: the newest layer of
/// then and every layer added since, each at most once (a layer's items only grow, so each
/// crosses once in its life). Empty when `percent` is 0.
pub fn crossings(before: LoadMark, filter: &ScalableFilter, percent: u32) -> Vec<Crossing> {
    if percent == 0 {
        return Vec::new();
    }
    let first = before.layers.saturating_sub(1);
    (first..filter.layer_count())
        .filter_map(|layer| {
            let (items, capacity) = layer_load(filter, layer)?;
            let was = if layer == first && before.layers > 0 {
                before.newest_items
            } else {
                0
            };
            let mark = warning_mark(capacity, percent);
            (was < mark && items >= mark).then_some(Crossing {
                layer,
                items,
                capacity,
            })
        })
        .collect()
}

/// The capacity the filter reaches if it grows until its next layer would take it past
/// `max_bytes`: its capacity plus that of every layer it can still add. Follows the chain's
/// growth rule exactly (`ScalableFilter::add` refuses the growth this stops at).
///
/// A blocked layer's geometry comes from `sizing::plan_layer`, a table lookup: at most about
/// 64 steps (the capacity overflows, or with expansion 1 the rate reaches the sizing floor and
/// the rest is counted at once), each constant time, whatever rate the filter was made with.
pub fn max_capacity(filter: &ScalableFilter, max_bytes: u64) -> u64 {
    let mut capacity = filter.capacity();
    let expansion = u64::from(filter.expansion_raw());
    let Some(mut next) = NextLayer::after_newest(filter) else {
        return capacity;
    };
    if expansion == 0 {
        return capacity;
    }
    // The same arithmetic as the growth check: the allocator model of the filter with one
    // more layer (its table one entry longer, one more bit array).
    let classic = filter.is_classic();
    let mut count = filter.layer_count();
    let mut memory = filter.memory_usage();
    let grown = |memory: u64, count: usize, more: usize, bytes: u64| {
        let table = |n: usize| ScalableFilter::modelled_bytes(classic, n, []);
        let bits = ScalableFilter::modelled_bytes(classic, 0, [bytes]) - table(0);
        memory
            .saturating_sub(table(count))
            .saturating_add(table(count + more))
            .saturating_add(bits.saturating_mul(more as u64))
    };
    // Growth also stops at the most layers a filter may have.
    while let Some((layer_capacity, bytes)) = next.step(expansion) {
        if count >= MAX_LAYERS || grown(memory, count, 1, bytes) > max_bytes {
            break;
        }
        memory = grown(memory, count, 1, bytes);
        count += 1;
        capacity = capacity.saturating_add(layer_capacity);
        if expansion == 1 && next.is_constant() {
            // Every further layer is this one again (same capacity, error under the sizing
            // floor): count them at once instead of one by one (there can be millions). The
            // memory grows monotonically with their number: search for the most that fit.
            let room = MAX_LAYERS.saturating_sub(count);
            let (mut fit, mut over) = (0usize, 1usize);
            while over <= room && grown(memory, count, over, bytes) <= max_bytes {
                fit = over;
                over *= 2;
            }
            while over - fit > 1 {
                let mid = fit + (over - fit) / 2;
                if mid <= room && grown(memory, count, mid, bytes) <= max_bytes {
                    fit = mid;
                } else {
                    over = mid;
                }
            }
            capacity = capacity.saturating_add(layer_capacity.saturating_mul(fit as u64));
            break;
        }
    }
    capacity
}

/// The chain's growth rule, one layer at a time: capacity × expansion, error × `TIGHTENING`.
enum NextLayer {
    Blocked {
        capacity: u64,
        error: f64,
    },
    Classic {
        entries: u64,
        error: f64,
        options: u32,
    },
}

impl NextLayer {
    fn after_newest(filter: &ScalableFilter) -> Option<Self> {
        Some(match filter.layers() {
            Layers::Blocked(layers) => {
                let newest = layers.last().map(BlockedLayer::meta)?;
                NextLayer::Blocked {
                    capacity: newest.capacity,
                    error: newest.error,
                }
            }
            Layers::Classic {
                options, layers, ..
            } => {
                let newest = layers.last().map(ClassicLayer::meta)?;
                NextLayer::Classic {
                    entries: newest.entries,
                    error: newest.error,
                    options: *options,
                }
            }
        })
    }

    /// The next layer's capacity and bit-array bytes, or `None` where growth stops anyway
    /// (capacity overflow, a layer no sizing can build).
    fn step(&mut self, expansion: u64) -> Option<(u64, u64)> {
        match self {
            NextLayer::Blocked { capacity, error } => {
                *capacity = capacity.checked_mul(expansion)?;
                *error = (*error * TIGHTENING).max(f64::MIN_POSITIVE);
                let bytes = sizing::plan_layer(*capacity, *error).ok()?.bytes();
                Some((*capacity, bytes))
            }
            NextLayer::Classic {
                entries,
                error,
                options,
            } => {
                let meta = ClassicMeta::plan(
                    entries.checked_mul(expansion)?,
                    *error * TIGHTENING,
                    *options,
                )
                .ok()?;
                *entries = meta.entries;
                *error = meta.error;
                Some((meta.entries, meta.bytes()))
            }
        }
    }

    /// Whether every later layer has this one's geometry when the capacity does not grow: a
    /// blocked layer whose error is under the sizing floor. (A classic layer's error keeps
    /// halving until no layer can be planned, at most about 1075 layers.)
    fn is_constant(&self) -> bool {
        matches!(self, NextLayer::Blocked { error, .. } if *error < MIN_SIZING_ERROR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::chain::FilterSpec;
    use crate::hash::ItemHash;
    use crate::FilterError;

    fn item(i: u64) -> Vec<u8> {
        format!("health-{i}").into_bytes()
    }

    fn summary_of(layer: &BlockedLayer) -> LayerSummary {
        let g = layer.geometry();
        LayerSummary {
            capacity: layer.capacity(),
            error: layer.error(),
            items: layer.items(),
            bytes: g.bytes(),
            set_bits: layer.set_bits(),
            total_bits: layer.total_bits(),
            hashes: g.blocks_per_item * g.hashes_per_block,
            blocks_per_item: g.blocks_per_item,
        }
    }

    fn blocked_layer(capacity: u64, error: f64, items: u64) -> BlockedLayer {
        let mut layer = BlockedLayer::new(capacity, error).unwrap();
        for i in 0..items {
            layer.insert(&ItemHash::of(&item(i)));
        }
        layer
    }

    fn spec(capacity: u64, error: f64, expansion: u32) -> FilterSpec {
        FilterSpec::new(capacity, error, expansion)
    }

    fn classic(capacity: u64, error: f64, expansion: u32) -> FilterSpec {
        FilterSpec {
            layout: crate::Layout::Classic,
            ..spec(capacity, error, expansion)
        }
    }

    #[test]
    fn blocked_fpr_estimate_tracks_the_exact_rate_of_the_bits() {
        // The exact rate of the actual bits (`state_fpr` reads every block) against the
        // estimate from the set-bit count alone, from a quarter of capacity to three times it.
        for p in [0.25, 0.1, 0.01, 0.001, 1e-4, 1e-6] {
            for load in [0.5, 1.0, 3.0] {
                let capacity = 100_000;
                let layer = blocked_layer(capacity, p, (capacity as f64 * load) as u64);
                let s = summary_of(&layer);
                let exact = layer.state_fpr();
                let estimate = layer_fpr(&s, false);
                assert!(
                    (estimate / exact - 1.0).abs() < 0.03,
                    "p={p} load={load}: estimate {estimate:e}, exact {exact:e}"
                );
                if load <= 1.0 && p <= 0.01 {
                    // Why the plain `fill^hashes` is not used: uneven blocks make it low.
                    let naive = fill_ratio(&s).powi(s.hashes as i32);
                    assert!(
                        naive < exact * 0.9,
                        "p={p} load={load}: {naive:e} {exact:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn classic_fpr_is_the_fill_to_the_number_of_hashes() {
        let mut f = ScalableFilter::new(classic(10_000, 0.01, 0), u64::MAX).unwrap();
        for i in 0..8000 {
            f.add(&item(i), u64::MAX).unwrap();
        }
        let s = f.layer_summaries()[0];
        let fill = s.set_bits as f64 / s.total_bits as f64;
        assert_eq!(fill_ratio(&s), fill);
        assert_eq!(layer_fpr(&s, true), fill.powi(s.hashes as i32));
        assert!(fill > 0.3 && fill < 0.6, "{fill}");
    }

    #[test]
    fn empty_and_saturated_layers_have_rates_zero_and_one() {
        let empty = summary_of(&BlockedLayer::new(100, 0.01).unwrap());
        assert_eq!(layer_fpr(&empty, false), 0.0);
        assert_eq!(layer_fpr(&empty, true), 0.0);
        assert_eq!(layer_distinct(&empty, false), 0.0);
        let full = LayerSummary {
            set_bits: empty.total_bits,
            ..empty
        };
        assert_eq!(layer_fpr(&full, false), 1.0);
        assert_eq!(layer_fpr(&full, true), 1.0);
        // Saturated: a finite lower bound, the estimate with one bit clear.
        let one_clear = LayerSummary {
            set_bits: empty.total_bits - 1,
            ..empty
        };
        let d = layer_distinct(&full, false);
        assert!(d.is_finite() && d > 0.0);
        assert_eq!(d, layer_distinct(&one_clear, false));
    }

    #[test]
    fn the_chain_rate_combines_the_layers() {
        let a = summary_of(&blocked_layer(1000, 0.01, 1000));
        let b = summary_of(&blocked_layer(2000, 0.005, 700));
        let (pa, pb) = (layer_fpr(&a, false), layer_fpr(&b, false));
        let chain = chain_fpr(&[a, b], false);
        assert!((chain - (1.0 - (1.0 - pa) * (1.0 - pb))).abs() < 1e-15);
        // Tiny rates are not rounded away.
        let tiny = summary_of(&blocked_layer(100_000, 0.01, 10));
        let p = layer_fpr(&tiny, false);
        assert!(p > 0.0 && p < 1e-12, "{p:e}");
        assert!((chain_fpr(&[tiny, tiny], false) / (2.0 * p) - 1.0).abs() < 1e-9);
        assert!(chain > pa.max(pb) && chain < pa + pb);
        assert_eq!(chain_fpr(&[], false), 0.0);
    }

    #[test]
    fn distinct_items_are_estimated_within_a_percent() {
        for p in [0.1, 0.01, 1e-4] {
            for n in [10_000u64, 50_000, 150_000] {
                let layer = blocked_layer(50_000, p, n);
                let d = layer_distinct(&summary_of(&layer), false);
                assert!((d / n as f64 - 1.0).abs() < 0.01, "p={p} n={n}: {d}");
            }
        }
        let mut f = ScalableFilter::new(classic(50_000, 0.01, 0), u64::MAX).unwrap();
        for i in 0..40_000 {
            f.add(&item(i), u64::MAX).unwrap();
        }
        let d = distinct_items(&f.layer_summaries(), true);
        // Counted items exclude the few the filter wrongly found present; the bits include them.
        assert!(
            d as f64 >= f.items() as f64 * 0.99 && d as f64 <= 40_000.0 * 1.01,
            "{d}"
        );
    }

    #[test]
    fn distinct_items_count_the_items_false_positives_swallowed() {
        // A 25% filter filled to three times its capacity refuses many new items as present:
        // the counter misses them, the bits do not.
        let mut f = ScalableFilter::new(spec(10_000, 0.25, 0), u64::MAX).unwrap();
        let mut offered = 0u64;
        for i in 0..1_000_000 {
            offered += 1;
            if f.add(&item(i), u64::MAX) == Err(FilterError::Full) {
                break;
            }
        }
        let d = distinct_items(&f.layer_summaries(), false) as f64;
        assert!(d > f.items() as f64 * 1.02, "{d} vs {}", f.items());
        assert!(
            (d / (offered - 1) as f64 - 1.0).abs() < 0.05,
            "{d} vs {offered}"
        );
    }

    /// Grows a filter under `limit` until growth is refused; its capacity then.
    fn grown_capacity(s: FilterSpec, limit: u64) -> u64 {
        let mut f = ScalableFilter::new(s, u64::MAX).unwrap();
        let predicted = max_capacity(&f, limit);
        let mut i = 0;
        loop {
            match f.add(&item(i), limit) {
                Ok(_) => i += 1,
                Err(FilterError::OverLimit { .. }) | Err(FilterError::Full) => break,
                Err(e) => panic!("{e}"),
            }
            assert!(i < 10_000_000, "never refused");
        }
        assert_eq!(predicted, f.capacity(), "{s:?} limit {limit}");
        // Once grown, the filter can reach no further.
        assert_eq!(max_capacity(&f, limit), f.capacity());
        predicted
    }

    #[test]
    fn max_capacity_is_where_growth_is_refused() {
        for limit in [2_000, 20_000, 200_000, 1 << 20] {
            for s in [
                spec(100, 0.01, 2),
                classic(100, 0.01, 2),
                spec(50, 0.001, 3),
            ] {
                let reached = grown_capacity(s, limit);
                assert!(reached >= s.capacity, "{s:?}");
            }
        }
        // EXPANSION 1 under a limit that would allow millions of layers: growth stops at the
        // layer cap, and so does the figure (1024 layers of 1000 items).
        let f = ScalableFilter::new(spec(1000, 0.01, 1), u64::MAX).unwrap();
        assert_eq!(max_capacity(&f, 4 << 30), 1000 * MAX_LAYERS as u64);
        // A limit below the filter's memory: no growth at all.
        let f = ScalableFilter::new(spec(1000, 0.01, 2), u64::MAX).unwrap();
        assert_eq!(max_capacity(&f, 10), 1000);
        // Non-scaling: its capacity, whatever the limit.
        let f = ScalableFilter::new(spec(1000, 0.01, 0), u64::MAX).unwrap();
        assert_eq!(max_capacity(&f, u64::MAX), 1000);
        // Unlimited: growth stops where capacities overflow, not in an endless loop.
        let f = ScalableFilter::new(spec(1 << 30, 0.01, 32768), u64::MAX).unwrap();
        assert!(max_capacity(&f, u64::MAX) > 1 << 30);
    }

    #[test]
    fn max_capacity_counts_constant_layers_at_once() {
        // Expansion 1 and capacity 1: the error halves each layer until it is under the
        // sizing floor, then every layer is the same: counted in one step, and exactly what
        // growth reaches.
        let reached = grown_capacity(spec(1, 0.01, 1), 40_000);
        assert!(reached > 60, "{reached}");
        let reached = grown_capacity(classic(1, 0.01, 1), 40_000);
        assert!(reached > 30, "{reached}");
    }

    #[test]
    fn warning_marks_round_up() {
        assert_eq!(warning_mark(100, 70), 70);
        assert_eq!(warning_mark(3, 70), 3);
        assert_eq!(warning_mark(10, 1), 1);
        assert_eq!(warning_mark(1, 100), 1);
        assert_eq!(warning_mark(u64::MAX, 100), u64::MAX);
    }

    #[test]
    fn each_layer_crosses_its_warning_mark_once() {
        for s in [spec(100, 0.01, 2), classic(100, 0.01, 2)] {
            let mut f = ScalableFilter::new(s, u64::MAX).unwrap();
            let cap0 = f.capacity();
            let mut next = 0u64;
            let mut add_until = |f: &mut ScalableFilter, items: u64| {
                let before = LoadMark::of(f);
                while f.items() < items {
                    f.add(&item(next), u64::MAX).unwrap();
                    next += 1;
                }
                crossings(before, f, 70)
            };
            let mark0 = warning_mark(cap0, 70);
            assert_eq!(add_until(&mut f, mark0 - 1), vec![]);
            assert!(!over_warning(&f, 70));
            assert_eq!(
                add_until(&mut f, mark0),
                vec![Crossing {
                    layer: 0,
                    items: mark0,
                    capacity: cap0
                }]
            );
            assert!(over_warning(&f, 70));
            assert_eq!(add_until(&mut f, cap0), vec![]);
            // One write that grows a layer and takes it past its mark reports that layer.
            let (_, cap1) = layer_load(&f, 1).unwrap_or((0, 0));
            assert_eq!(cap1, 0, "no second layer yet");
            let crossed = add_until(&mut f, cap0 + cap0 * 2 * 8 / 10);
            assert_eq!(crossed.len(), 1, "{crossed:?}");
            assert_eq!(crossed[0].layer, 1);
            assert!(over_warning(&f, 70));
            // Percent 0 is off.
            assert_eq!(crossings(LoadMark::of(&f), &f, 0), vec![]);
            assert!(!over_warning(&f, 0));
        }
        // A batch that crosses the first layer's mark and fills the next past its own.
        let mut f = ScalableFilter::new(spec(100, 0.01, 2), u64::MAX).unwrap();
        let before = LoadMark::of(&f);
        let mut i = 0;
        while f.layer_count() < 2 || layer_load(&f, 1).unwrap().0 < 150 {
            f.add(&item(i), u64::MAX).unwrap();
            i += 1;
        }
        let layers: Vec<usize> = crossings(before, &f, 70).iter().map(|c| c.layer).collect();
        assert_eq!(layers, vec![0, 1]);
    }

    #[test]
    fn health_reports_every_figure() {
        let mut f = ScalableFilter::new(spec(1000, 0.01, 2), u64::MAX).unwrap();
        for i in 0..1500 {
            f.add(&item(i), u64::MAX).unwrap();
        }
        let h = health(&f, 1 << 20);
        let layers = f.layer_summaries();
        assert_eq!(h.error, 0.01);
        assert_eq!(h.fill_ratio, fill_ratio(&layers[1]));
        assert_eq!(h.estimated_fpr, chain_fpr(&layers, false));
        assert_eq!(h.estimated_distinct, distinct_items(&layers, false));
        assert_eq!(h.max_capacity, max_capacity(&f, 1 << 20));
        assert!(h.estimated_fpr > 0.0 && h.estimated_fpr < 0.01);
        assert!((h.estimated_distinct as f64 / 1500.0 - 1.0).abs() < 0.03);
    }
}

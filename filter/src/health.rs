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

use crate::blocked::BlockedLayer;
use crate::chain::{Layers, LayerSummary, ScalableFilter, TIGHTENING};
use crate::classic::{ClassicLayer, ClassicMeta};
use crate::sizing::{self, BLOCK_BITS, MIN_SIZING_ERROR};

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
        estimated_fpr: chain_fpr(&layers, classic),
        estimated_distinct: distinct_items(&layers, classic),
        max_capacity: max_capacity(filter, max_bytes),
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
    let pass: f64 = layers.iter().map(|l| 1.0 - layer_fpr(l, classic)).product();
    (1.0 - pass).clamp(0.0, 1.0)
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
    let var_s =
        bits * (bits - 1.0) * (1.0 - 2.0 / bits).powi(t) + bits * q.powi(t) - bits * bits * q.powi(2 * t);
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

/// The capacity the filter reaches if it grows until its next layer would take it past
/// `max_bytes`: its capacity plus that of every layer it can still add. Follows the chain's
/// growth rule exactly (`ScalableFilter::add` refuses the growth this stops at).
pub fn max_capacity(filter: &ScalableFilter, max_bytes: u64) -> u64 {
    let mut capacity = filter.capacity();
    let expansion = u64::from(filter.expansion_raw());
    if expansion == 0 {
        return capacity;
    }
    let per_layer = ScalableFilter::overhead_bytes(1) - ScalableFilter::overhead_bytes(0);
    let mut memory = filter.memory_usage();
    // The next layer's capacity and error from the newest one's, and its bytes.
    let mut next: Box<dyn FnMut() -> Option<(u64, u64, f64)>> = match filter.layers() {
        Layers::Blocked(layers) => {
            let newest = layers.last().map(BlockedLayer::meta)?;
            let (mut cap, mut err) = (newest.capacity, newest.error);
            Box::new(move || {
                cap = cap.checked_mul(expansion)?;
                err = (err * TIGHTENING).max(f64::MIN_POSITIVE);
                let bytes = sizing::plan_layer(cap, err).ok()?.bytes();
                Some((cap, bytes, err))
            })
        }
        Layers::Classic {
            options, layers, ..
        } => {
            let newest = layers.last().map(ClassicLayer::meta)?;
            let (mut entries, mut err, options) = (newest.entries, newest.error, *options);
            Box::new(move || {
                let meta = ClassicMeta::plan(entries.checked_mul(expansion)?, err * TIGHTENING, options)
                    .ok()?;
                entries = meta.entries;
                err = meta.error;
                Some((entries, meta.bytes(), err))
            })
        }
    };
    while let Some((cap, bytes, err)) = next() {
        let needed = memory.saturating_add(bytes).saturating_add(per_layer);
        if needed > max_bytes {
            break;
        }
        memory = needed;
        capacity = capacity.saturating_add(cap);
        // With expansion 1 and the error under the sizing floor every further layer is the
        // same: count them at once instead of one by one (there can be millions).
        if expansion == 1 && !filter.is_classic() && err < MIN_SIZING_ERROR {
            let more = (max_bytes - memory) / (bytes + per_layer).max(1);
            capacity = capacity.saturating_add(cap.saturating_mul(more));
            break;
        }
    }
    Some(capacity)
}

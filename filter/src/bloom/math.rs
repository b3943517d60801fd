//! The Bloom core's math, one formula a function: every estimate a layer, a chain or sizing
//! reads, with the formula it computes and where that formula comes from.
//!
//! Notation for one layer: `m` bits, `X` of them set, fill `f = X/m`, `h` bit positions set per
//! item. A classic layer (RedisBloom's) sets `h` positions over its whole bit array. A blocked
//! layer is `m/B` blocks of `B = 512` bits (one cache line each); an item picks `b` blocks and
//! sets `k` bits in each (`h = b·k`), each position drawn uniformly and independently.
//!
//! The blocked layout's exact model, which sizing solves offline into its table (the
//! occupancy distribution of a block, the counted load), is stated in `sizing`; the estimates
//! here are the closed forms read from a layer's counts, which cost microseconds whatever the
//! filter's size. All of them read counts a layer keeps anyway (`LayerSummary`).
//!
//! Sources named below:
//! * [BM04] A. Broder, M. Mitzenmacher, "Network Applications of Bloom Filters: A Survey",
//!   Internet Mathematics 1(4), 2004, section 2.1.
//! * [PSS07] F. Putze, P. Sanders, J. Singler, "Cache-, Hash- and Space-Efficient Bloom
//!   Filters", WEA 2007 (Journal of Experimental Algorithmics 14, 2009): blocked Bloom filters
//!   as a Poisson mixture of block loads.
//! * [SB07] S. J. Swamidass, P. Baldi, "Mathematical Correction for Fingerprint Similarity
//!   Measures to Improve Chemical Retrieval", J. Chem. Inf. Model. 47(3), 2007: the number of
//!   items a Bloom filter's fill accounts for.
//! * [ABPH07] P. S. Almeida, C. Baquero, N. Preguiça, D. Hutchison, "Scalable Bloom Filters",
//!   Information Processing Letters 101(6), 2007: a chain of layers with tightening rates.
//! * [F68] W. Feller, "An Introduction to Probability Theory and Its Applications", vol. 1,
//!   3rd ed., 1968, chapters II and IV (occupancy of cells by random throws).
//! * [AS64] M. Abramowitz, I. Stegun, "Handbook of Mathematical Functions", 1964, 6.1.41
//!   (Stirling's series).
//! * [RB] RedisBloom's sizing of a layer, as its source computes it (the formula is described,
//!   never copied; `classic` holds the rest of its layout).

use crate::bloom::layer::LayerSummary;

/// Bits in one block of a blocked layer, `B`: one 64-byte cache line.
pub const BLOCK_BITS: u32 = 512;

/// RedisBloom's `ln(2)^2`, as rounded in its source ([RB]): it decides the last bit of `bpe`.
pub(crate) const REDISBLOOM_LN2_SQUARED: f64 = 0.480453013918201;
/// RedisBloom's `ln(2)`, as rounded in its source ([RB]; one ulp-level digit short of `LN_2`,
/// which can move `ceil` at a boundary).
#[allow(clippy::approx_constant)]
pub(crate) const REDISBLOOM_LN2: f64 = 0.693147180559945;

// ---- Sizing ----

/// The classic Bloom filter's optimal bits per item for an error rate: `-ln(p) / ln(2)^2`,
/// with `k = ln(2)·m/n` hashes [BM04]. Blocked sizing measures its memory against it.
pub fn classic_bits_per_item(error: f64) -> f64 {
    -error.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2)
}

/// RedisBloom's bits per entry for an error rate: `bpe = |−ln(p) / ln(2)^2|`, with its rounded
/// constant [RB].
#[inline]
pub(crate) fn redisbloom_bits_per_entry(error: f64) -> f64 {
    (-(error.ln()) / REDISBLOOM_LN2_SQUARED).abs()
}

/// RedisBloom's hash count for `bpe` bits per entry: `k = ceil(ln(2)·bpe)`, with its rounded
/// constant [RB] (the optimum `k = ln(2)·m/n` of [BM04], rounded up).
#[inline]
pub(crate) fn redisbloom_hashes(bpe: f64) -> f64 {
    (REDISBLOOM_LN2 * bpe).ceil()
}

/// The item count at which a layer of `capacity` items reaches `percent`% of its capacity:
/// `ceil(capacity · percent / 100)`, at least 1 (layerbloom's own warning mark).
#[inline]
pub fn warning_mark(capacity: u64, percent: u32) -> u64 {
    // In u64 when the product fits (every real capacity): a u128 division is a call into the
    // compiler's runtime on every add, a constant u64 one a multiply.
    let mark = match capacity.checked_mul(u64::from(percent)) {
        Some(product) => product.div_ceil(100),
        None => {
            let mark = (u128::from(capacity) * u128::from(percent)).div_ceil(100);
            u64::try_from(mark).unwrap_or(u64::MAX)
        }
    };
    mark.max(1)
}

// ---- Fill ----

/// A layer's fill `f = X/m` (0 for a layer of no bits).
pub fn fill_ratio(layer: &LayerSummary) -> f64 {
    if layer.total_bits == 0 {
        return 0.0;
    }
    layer.set_bits as f64 / layer.total_bits as f64
}

/// The fill of a layer whose rate is neither 0 (no bit set) nor 1 (every bit), else that rate.
fn fill_between(layer: &LayerSummary) -> Result<f64, f64> {
    let f = fill_ratio(layer);
    if f <= 0.0 || layer.hashes == 0 {
        return Err(0.0);
    }
    if f >= 1.0 {
        return Err(1.0);
    }
    Ok(f)
}

// ---- False-positive rates from the fill ----

/// A classic layer's false-positive rate from its fill: `f^h`. An absent item is a false
/// positive when all its `h` positions are set, each with probability `f` given the bits
/// [BM04].
pub fn classic_fpr(layer: &LayerSummary) -> f64 {
    fill_between(layer).map_or_else(|rate| rate, |f| f.powi(layer.hashes as i32))
}

/// A blocked layer's false-positive rate from its fill, `(Σ_j Poisson(j; λ)·E[(S_{kj}/B)^k])^b`:
/// a block receives a Poisson(`λ`) number `j` of item-slots [PSS07], `λ` solved from the fill
/// (`block_load`), and a block with `j` slots answers "present" with probability
/// `block_positive(k, j)`. `f^h` would underestimate (by 10 to 40% at capacity): the bits of a
/// blocked layer are not spread evenly, and a fuller block's `(fill)^k` counts more. Unit tests
/// (`health`) hold it within 2% of the exact rate of the actual bits
/// (`BlockedLayer::state_fpr`, which reads every block).
pub fn blocked_fpr(layer: &LayerSummary) -> f64 {
    let f = match fill_between(layer) {
        Ok(f) => f,
        Err(rate) => return rate,
    };
    let b = layer.blocks_per_item.max(1);
    let k = (layer.hashes / b).max(1);
    let load = block_load(f, k);
    let per_block = poisson_mix(load, |j| block_positive(k, j));
    per_block.clamp(0.0, 1.0).powi(b as i32)
}

/// The rate of a query that probes layers of rates `p_i` (a chain): `1 − Π(1 − p_i)`
/// [ABPH07], summed in logarithms so that rates under 1e-16 are not rounded away.
pub(crate) fn combine_fprs(rates: impl Iterator<Item = f64>) -> f64 {
    // In logs: `1 − Π(1 − p)` directly would round rates under 1e-16 away.
    let ln_pass: f64 = rates.map(|p| (-p).ln_1p()).sum();
    (-ln_pass.exp_m1()).clamp(0.0, 1.0)
}

// ---- Distinct items from the fill ----

/// A layer's bits (`m`) and set bits (`X`) for the distinct-item estimates, `None` when
/// they account for no item. A saturated layer is estimated as if one bit were still clear
/// (a lower bound).
fn bits_and_set(layer: &LayerSummary) -> Option<(f64, f64)> {
    if layer.set_bits == 0 || layer.total_bits == 0 || layer.hashes == 0 {
        return None;
    }
    let set = layer.set_bits.min(layer.total_bits - 1) as f64;
    Some((layer.total_bits as f64, set))
}

/// The distinct items a classic layer's bits account for: `ln(1 − X/m) / ln(1 − h/m)`, the
/// count `n` whose expected fill `1 − (1 − h/m)^n` is the observed one (its `h` positions are
/// distinct). It is the estimate `−(m/h)·ln(1 − X/m)` of [SB07] without the approximation
/// `ln(1 − h/m) ≈ −h/m`.
///
/// Like every distinct-item estimate here it counts the items *offered*: an add that found
/// its item already (falsely) present sets no bit and is not counted, but the bits look as if
/// it had been added, so the estimate exceeds the counter by the items the false positives
/// swallowed, and it exposes a filter whose counter and bits disagree.
pub fn classic_distinct(layer: &LayerSummary) -> f64 {
    let Some((m, set)) = bits_and_set(layer) else {
        return 0.0;
    };
    let h = f64::from(layer.hashes);
    if h >= m {
        return set;
    }
    (-(set / m)).ln_1p() / (-h / m).ln_1p()
}

/// The distinct items a blocked layer's bits account for: `λ·(m/B)/b`, with `λ` the load
/// whose expected fill is the observed one (`block_load`), as [SB07] does for a classic layer.
pub fn blocked_distinct(layer: &LayerSummary) -> f64 {
    let Some((m, set)) = bits_and_set(layer) else {
        return 0.0;
    };
    let b = layer.blocks_per_item.max(1);
    let k = (layer.hashes / b).max(1);
    let blocks = m / f64::from(BLOCK_BITS);
    block_load(set / m, k) * blocks / f64::from(b)
}

// ---- The blocked layer's block model ----

/// `q = 1 − 1/B`, the chance one throw misses a given bit of a block [F68].
fn miss() -> f64 {
    1.0 - 1.0 / f64::from(BLOCK_BITS)
}

/// The mean item-slots per block `λ` that gives fill `f` with `k` bits per slot:
/// `λ = −ln(1 − f) / (1 − q^k)`, inverting `f = 1 − exp(−λ·(1 − q^k))`, the expected fill of a
/// Poisson mixture of blocks (`E[q^(kJ)] = exp(−λ(1 − q^k))` for `J ~ Poisson(λ)`, its
/// generating function) [PSS07].
fn block_load(f: f64, k: u32) -> f64 {
    let per_slot = 1.0 - miss().powi(k as i32);
    -(-f).ln_1p() / per_slot
}

/// `E[(S_t/B)^k]` for a block that received `j` item-slots (`t = k·j` uniform throws), to
/// second order in the spread of its fill: `μ^k + C(k,2)·μ^(k−2)·σ²`, with the mean
/// `μ = 1 − q^t` and variance `σ² = (B(B−1)(1−2/B)^t + B·q^t − B²·q^(2t)) / B²` of the fill
/// `S_t/B` after `t` throws (the occupancy problem [F68]); the expansion is a second-order
/// Taylor series of `x^k` around `μ` (layerbloom's own, tested against the bits in `health`).
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

/// `Σ_j Poisson(j; λ)·g(j)` over a window of ±12 standard deviations (and more below small
/// loads), which holds all but a negligible part of the mass.
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

/// `ln(n!)`: exact summation for `n < 64`, Stirling's series
/// `n·ln n − n + ln(2πn)/2 + 1/(12n) − 1/(360n³)` beyond (error below 1e-12) [AS64].
fn ln_factorial(n: u64) -> f64 {
    if n < 64 {
        return (2..=n).map(|i| (i as f64).ln()).sum();
    }
    let x = n as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x * x * x)
}

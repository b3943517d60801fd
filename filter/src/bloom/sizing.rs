//! Layer sizing: from a (capacity, error rate) pair to the geometry of a blocked layer.
//!
//! # The model
//! A blocked layer is an array of `m` blocks of `B = 512` bits (one cache line each). An item
//! picks `b` blocks uniformly at random and sets `k` bits in each, every bit position drawn
//! uniformly and independently (so with replacement). A query for an absent item is a false
//! positive when all `k` of its positions are set in each of its `b` blocks.
//!
//! With `n` items in `m` blocks, a block receives on average `λ = n·b/m` item-slots, and the
//! number it actually receives is Poisson(λ) to excellent approximation. A block that received
//! `j` slots has had `k·j` uniform throws; if `S` of its bits ended up set, a query position is
//! set with probability `S/B`, so the block answers "present" with probability `E[(S/B)^k]`.
//! We compute that expectation exactly over the occupancy distribution of `S` after `k·j`
//! throws (no "fill is its mean" shortcut: that shortcut under-estimates the rate by several
//! percent for small blocks). So:
//!
//! ```text
//! fpr(λ; b, k) = ( Σ_j Poisson(j; λ) · g_k(k·j) )^b,    g_k(t) = E[(S_t / B)^k]
//! ```
//!
//! One more effect matters at high error rates: a filter only counts an item it did not
//! already (falsely) find, and such an item always sets at least one new bit. The bits after
//! `n` counted items are therefore those of the `N > n` items *attempted*, the rejected
//! attempts having changed nothing. In load terms, attempts at load `Λ` leave
//! `accepted(Λ) = ∫₀^Λ (1 − fpr(u)) du` counted item-slots per block (2.5% fewer than `Λ` at a
//! 10% rate, 0.1% at 1%).
//!
//! Sizing picks, for a target error `p`, the `(b, k)` and the largest attempt load `Λ` with
//! `fpr(Λ; b, k) ≤ SIZING_MARGIN · p`; a layer of capacity `c` then gets `ceil(c·b/accepted(Λ))`
//! blocks, so the expected false-positive rate at capacity is at or under the target. Among block
//! counts, the fewest (fastest: one cache miss per block) is taken whose memory is within
//! `MEMORY_SLACK` of the classic Bloom filter optimum `-ln(p)/ln(2)^2` bits per item.

use std::sync::OnceLock;

pub use crate::bloom::math::{classic_bits_per_item, BLOCK_BITS};
pub use crate::bloom::spec::SizingError;

/// Bytes in one block.
pub const BLOCK_BYTES: u64 = 64;
const _: () = assert!(BLOCK_BYTES * 8 == BLOCK_BITS as u64);
/// Most blocks one item may touch. Rates down to 1e-6 need at most three (three cache misses per
/// layer); four keep memory within 5% of the classic optimum from 1e-7 to 1e-9.
pub const MAX_BLOCKS_PER_ITEM: u32 = 4;
/// Most bits set per block by one item (decoders accept up to this).
pub const MAX_HASHES_PER_BLOCK: u32 = 64;
/// Size for a slightly lower rate than asked so that a measured rate (a random quantity) lands
/// at or under the target, not around it. Costs 0.06 bits per item.
pub const SIZING_MARGIN: f64 = 0.97;
/// Memory allowed over the classic optimum before more blocks per item are used.
pub const MEMORY_SLACK: f64 = 1.045;
/// Where no block count is within `MEMORY_SLACK` of the classic optimum (high error rates,
/// where the counting effect below costs every layout alike), fewer blocks are still preferred
/// while within this factor of the least memory.
pub const NEAR_LEAST: f64 = 1.01;
/// Targets below this are sized as this. Deep layers of a long chain halve their rate at every
/// layer (a 100-layer chain reaches 1e-32); below 1e-15 a false positive is unobservable (one
/// in a million billion lookups), while each halving would still cost every later layer more
/// bits and more probes. The chain's total rate moves by less than 1e-13.
pub const MIN_SIZING_ERROR: f64 = 1e-15;

/// Sizing rates are rounded down to a grid of this many points per halving: `2^(-i/64)`. The
/// shapes of the grid are solved once, offline, into `shapes.in` (checked against the solver
/// by a unit test), so sizing a layer costs a table lookup, never the solver, on any command.
/// Rounding down sizes for at most 1.1% less than asked: at most 0.8% more memory (at a 25%
/// rate; 0.2% at 1%), and always at or under the target.
pub const GRID_PER_OCTAVE: u32 = 64;
/// Grid points from `2^(-1/64)` down to the first under `MIN_SIZING_ERROR`.
const GRID_POINTS: u32 = 3190;
const _: () = assert!((GRID_POINTS as f64 / GRID_PER_OCTAVE as f64) > 49.83);

/// The grid rate of index `i >= 1`.
fn grid_error(i: u32) -> f64 {
    (-(f64::from(i)) / f64::from(GRID_PER_OCTAVE)).exp2()
}

/// The index of the largest grid rate at or under `error` (in `(0, 1)`, at least the floor).
fn grid_index(error: f64) -> u32 {
    let mut i = ((-error.log2() * f64::from(GRID_PER_OCTAVE)).ceil() as u32).clamp(1, GRID_POINTS);
    // The logarithm can round either way: step to the exact boundary.
    while i < GRID_POINTS && grid_error(i) > error {
        i += 1;
    }
    while i > 1 && grid_error(i - 1) <= error {
        i -= 1;
    }
    i
}

/// The solved shapes of the grid, index `i` at `i - 1`: (b, k, bits of max_load).
static SHAPES: [(u32, u32, u64); GRID_POINTS as usize] = include!("shapes.in");

/// Largest number of throws into one block for which the occupancy moments are tabulated.
const MAX_THROWS: usize = 2048;

/// The per-item shape of a blocked layer for one error rate, independent of capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockedShape {
    /// Blocks each item touches (`b`).
    pub blocks_per_item: u32,
    /// Bits set per block by each item (`k`).
    pub hashes_per_block: u32,
    /// The largest mean number of item-slots per block (`λ`) that meets the target.
    pub max_load: f64,
}

impl BlockedShape {
    /// Bits of memory per item at capacity.
    pub fn bits_per_item(&self) -> f64 {
        f64::from(BLOCK_BITS) * f64::from(self.blocks_per_item) / self.max_load
    }
}

/// The complete geometry of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Number of 512-bit blocks.
    pub blocks: u64,
    /// Blocks each item touches (`b`).
    pub blocks_per_item: u32,
    /// Bits set per block by each item (`k`).
    pub hashes_per_block: u32,
}

impl Geometry {
    /// Bytes of the layer's bit array.
    pub fn bytes(&self) -> u64 {
        self.blocks * BLOCK_BYTES
    }

    /// Whether the fields are in the ranges a layer can work with.
    pub fn is_valid(&self) -> bool {
        self.blocks >= 1
            && self.blocks <= max_blocks()
            && (1..=MAX_BLOCKS_PER_ITEM).contains(&self.blocks_per_item)
            && (1..=MAX_HASHES_PER_BLOCK).contains(&self.hashes_per_block)
    }
}

/// The most blocks a layer may have: its byte size must fit in `isize` (Rust's allocation bound).
pub fn max_blocks() -> u64 {
    (isize::MAX as u64) / BLOCK_BYTES
}

/// Plans a layer that holds `capacity` items at or under `error`.
pub fn plan_layer(capacity: u64, error: f64) -> Result<Geometry, SizingError> {
    if capacity == 0 {
        return Err(SizingError::BadCapacity);
    }
    let shape = shape_for(error)?;
    let blocks = (capacity as f64 * f64::from(shape.blocks_per_item) / shape.max_load)
        .ceil()
        .max(1.0);
    if blocks.is_nan() || blocks > max_blocks() as f64 {
        return Err(SizingError::TooLarge);
    }
    Ok(Geometry {
        blocks: blocks as u64,
        blocks_per_item: shape.blocks_per_item,
        hashes_per_block: shape.hashes_per_block,
    })
}

/// The shape for an error rate: that of the largest grid rate at or under it, from the table
/// (see `GRID_PER_OCTAVE`). Constant time.
pub fn shape_for(error: f64) -> Result<BlockedShape, SizingError> {
    if !(error > 0.0 && error < 1.0) {
        return Err(SizingError::BadErrorRate);
    }
    // Every rate under the floor is sized alike.
    let i = grid_index(error.max(MIN_SIZING_ERROR));
    let (blocks_per_item, hashes_per_block, load) = SHAPES[i as usize - 1];
    Ok(BlockedShape {
        blocks_per_item,
        hashes_per_block,
        max_load: f64::from_bits(load),
    })
}

/// The (blocks per item, bits per block) of every shape the table gives a new layer.
#[cfg(test)]
pub(crate) fn table_shapes() -> impl Iterator<Item = (u32, u32)> {
    SHAPES.iter().map(|&(b, k, _)| (b, k))
}

/// Solves the shape of a grid rate (what `shapes.in` holds); milliseconds.
pub fn solve_grid_shape(error: f64) -> Result<BlockedShape, SizingError> {
    if !(error > 0.0 && error < 1.0) {
        return Err(SizingError::BadErrorRate);
    }
    Ok(compute_shape(grid_error(grid_index(
        error.max(MIN_SIZING_ERROR),
    ))))
}

/// Times the solver ran (tests bound the work of commands with it).
#[cfg(test)]
pub(crate) static SOLVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn compute_shape(error: f64) -> BlockedShape {
    #[cfg(test)]
    SOLVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let error = error.max(MIN_SIZING_ERROR);
    let target = error * SIZING_MARGIN;
    let classic_k = -target.log2();
    let mut best_per_b: Vec<BlockedShape> = Vec::new();
    for b in 1..=MAX_BLOCKS_PER_ITEM {
        let k_center = classic_k / f64::from(b);
        let k_hi = ((k_center.ceil() as i64 + 2) as u32).min(MAX_HASHES_PER_BLOCK);
        let k_lo = ((k_center.floor() as i64 - 2).max(1) as u32).min(k_hi);
        let best = (k_lo..=k_hi)
            .map(|k| BlockedShape {
                blocks_per_item: b,
                hashes_per_block: k,
                max_load: max_load(target, b, k),
            })
            .max_by(|x, y| x.max_load.total_cmp(&y.max_load))
            .expect("the k range is never empty");
        best_per_b.push(best);
    }
    let least = best_per_b
        .iter()
        .map(BlockedShape::bits_per_item)
        .fold(f64::INFINITY, f64::min);
    let budget = (classic_bits_per_item(error) * MEMORY_SLACK).max(least * NEAR_LEAST);
    *best_per_b
        .iter()
        .find(|s| s.bits_per_item() <= budget)
        .expect("the least-memory shape is always within budget")
}

/// The largest counted load with `fpr <= target` at capacity: bisect for the attempt load
/// `Λ` (fpr grows with it), then convert to counted item-slots per block.
fn max_load(target: f64, b: u32, k: u32) -> f64 {
    let table = occupancy_moments(k);
    let hi_limit = max_tabulated_load(k);
    let attempts = if expected_fpr_at_load(table, hi_limit, b, k) <= target {
        hi_limit
    } else {
        largest_load_under(table, hi_limit, b, k, target)
    };
    accepted_load(table, attempts, b, k).max(1e-9)
}

/// The largest load in `(0, hi)` with `fpr <= target`, where `fpr(hi) > target`. The Illinois
/// variant of regula falsi on `ln fpr − ln target` (smooth and increasing in the load)
/// converges in about ten evaluations where bisection needs forty; the answer is always the
/// bracket's lower end, so it meets the target.
fn largest_load_under(table: &[f64], hi: f64, b: u32, k: u32, target: f64) -> f64 {
    let g = |load: f64| {
        let fpr = expected_fpr_at_load(table, load, b, k);
        if fpr > 0.0 {
            fpr.ln() - target.ln()
        } else {
            -1e3
        }
    };
    let (mut lo, mut hi) = (hi * 1e-9, hi);
    let (mut g_lo, mut g_hi) = (g(lo), g(hi));
    if g_lo > 0.0 {
        return lo;
    }
    let mut side = 0i8;
    for _ in 0..100 {
        if hi - lo <= hi * 1e-12 {
            break;
        }
        let mut mid = (lo * g_hi - hi * g_lo) / (g_hi - g_lo);
        if !(mid > lo && mid < hi) {
            mid = 0.5 * (lo + hi);
        }
        let g_mid = g(mid);
        if g_mid <= 0.0 {
            lo = mid;
            g_lo = g_mid;
            if side == -1 {
                g_hi *= 0.5;
            }
            side = -1;
        } else {
            hi = mid;
            g_hi = g_mid;
            if side == 1 {
                g_lo *= 0.5;
            }
            side = 1;
        }
    }
    lo
}

/// `accepted(Λ) = ∫₀^Λ (1 − fpr(u)) du`, by Simpson's rule (fpr is smooth and increasing).
fn accepted_load(moments: &[f64], attempts: f64, b: u32, k: u32) -> f64 {
    const INTERVALS: usize = 16;
    let h = attempts / INTERVALS as f64;
    let mut sum = 0.0;
    for i in 0..=INTERVALS {
        let weight = if i == 0 || i == INTERVALS {
            1.0
        } else if i % 2 == 1 {
            4.0
        } else {
            2.0
        };
        sum += weight * expected_fpr_at_load(moments, i as f64 * h, b, k);
    }
    attempts - sum * h / 3.0
}

/// The attempt load that leaves `counted` item-slots per block (inverse of `accepted_load`).
fn attempt_load(moments: &[f64], counted: f64, b: u32, k: u32) -> f64 {
    let hi_limit = max_tabulated_load(k);
    if accepted_load(moments, hi_limit, b, k) <= counted {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (counted, hi_limit);
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if accepted_load(moments, mid, b, k) <= counted {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The Poisson window summed around a mean λ: wide enough that the mass outside is below 1e-40.
fn poisson_window(load: f64) -> (usize, usize) {
    let sd = load.sqrt();
    let lo = (load - 15.0 * sd - 15.0).max(0.0) as usize;
    let hi = (load + 15.0 * sd + 40.0).ceil() as usize;
    (lo, hi)
}

/// The largest λ whose Poisson window stays inside the tabulated number of throws.
fn max_tabulated_load(k: u32) -> f64 {
    let max_j = MAX_THROWS / k as usize;
    let (mut lo, mut hi) = (0.0_f64, max_j as f64);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if poisson_window(mid).1 <= max_j {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `fpr(λ; b, k)` from the tabulated moments.
fn expected_fpr_at_load(moments: &[f64], load: f64, b: u32, k: u32) -> f64 {
    let (lo, hi) = poisson_window(load);
    let ln_load = load.ln();
    let lnfact = ln_factorials();
    let mut block = 0.0;
    for (j, ln_j_fact) in lnfact.iter().enumerate().take(hi + 1).skip(lo) {
        let throws = j * k as usize;
        if throws >= moments.len() {
            break;
        }
        let pmf = if load == 0.0 {
            if j == 0 {
                1.0
            } else {
                0.0
            }
        } else {
            (j as f64 * ln_load - load - ln_j_fact).exp()
        };
        block += pmf * moments[throws];
    }
    block.min(1.0).powi(b as i32)
}

/// The expected false-positive rate of a layer with `items` counted items.
pub fn expected_fpr(items: u64, geometry: &Geometry) -> f64 {
    let counted = items as f64 * f64::from(geometry.blocks_per_item) / geometry.blocks as f64;
    let k = geometry.hashes_per_block;
    let moments = occupancy_moments(k);
    let load = attempt_load(moments, counted, geometry.blocks_per_item, k);
    if load > max_tabulated_load(k) {
        // Past the table the layer is overfull; fall back to the mean-fill approximation,
        // which is close when blocks are nearly saturated.
        let load = counted;
        let fill = 1.0 - (-(load * f64::from(k)) / f64::from(BLOCK_BITS)).exp();
        return fill.powi(k as i32).powi(geometry.blocks_per_item as i32);
    }
    expected_fpr_at_load(moments, load, geometry.blocks_per_item, k)
}

/// `ln(j!)` for j up to `MAX_THROWS`.
fn ln_factorials() -> &'static [f64] {
    static TABLE: OnceLock<Vec<f64>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Vec::with_capacity(MAX_THROWS + 1);
        let mut acc = 0.0;
        t.push(0.0);
        for j in 1..=MAX_THROWS {
            acc += (j as f64).ln();
            t.push(acc);
        }
        t
    })
}

/// `g_k(t) = E[(S_t/B)^k]` for `t` in `0..=MAX_THROWS`, where `S_t` is the number of distinct
/// bits set by `t` uniform throws into a block. Computed once per `k` by a dynamic program over
/// the occupancy distribution.
fn occupancy_moments(k: u32) -> &'static [f64] {
    static TABLES: OnceLock<Vec<OnceLock<Vec<f64>>>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        (0..=MAX_HASHES_PER_BLOCK)
            .map(|_| OnceLock::new())
            .collect()
    });
    tables[k as usize].get_or_init(|| {
        let bits = BLOCK_BITS as usize;
        let powers: Vec<f64> = (0..=bits)
            .map(|s| (s as f64 / bits as f64).powi(k as i32))
            .collect();
        let mut dist = vec![0.0f64; bits + 1];
        dist[0] = 1.0;
        let mut moments = Vec::with_capacity(MAX_THROWS + 1);
        let mut max_s = 0usize;
        // Below `min_s` the mass has underflowed to nothing; skipping it keeps the work to the
        // distribution's narrow support.
        let mut min_s = 0usize;
        for _t in 0..=MAX_THROWS {
            moments.push((min_s..=max_s).map(|s| dist[s] * powers[s]).sum());
            // One more throw: it lands on a set bit with probability s/B.
            let top = (max_s + 1).min(bits);
            for s in (min_s..=top).rev() {
                let stay = dist[s] * (s as f64 / bits as f64);
                let grow = if s > 0 {
                    dist[s - 1] * ((bits - (s - 1)) as f64 / bits as f64)
                } else {
                    0.0
                };
                dist[s] = stay + grow;
            }
            max_s = top;
            while min_s < max_s && dist[min_s] < 1e-300 {
                dist[min_s] = 0.0;
                min_s += 1;
            }
        }
        moments
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATES: [f64; 12] = [
        0.25, 0.1, 0.05, 0.01, 0.001, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-12,
    ];

    #[test]
    fn the_shape_table_holds_exactly_what_the_solver_gives_for_every_grid_rate() {
        for i in 1..=GRID_POINTS {
            let solved = compute_shape(grid_error(i));
            let (b, k, load) = SHAPES[i as usize - 1];
            assert_eq!(
                (b, k, load),
                (
                    solved.blocks_per_item,
                    solved.hashes_per_block,
                    solved.max_load.to_bits()
                ),
                "grid point {i} (rate {})",
                grid_error(i)
            );
        }
    }

    #[test]
    fn planned_layers_are_those_of_the_solver_over_a_grid_of_capacities_and_rates() {
        let mut rate = 0.9;
        while rate > 1e-17 {
            let solved = solve_grid_shape(rate).unwrap();
            assert_eq!(shape_for(rate).unwrap(), solved, "rate {rate}");
            for capacity in [1u64, 7, 1000, 123_456, 1 << 30, 1 << 40] {
                let expected = (capacity as f64 * f64::from(solved.blocks_per_item)
                    / solved.max_load)
                    .ceil()
                    .max(1.0) as u64;
                let g = plan_layer(capacity, rate).unwrap();
                assert_eq!(g.blocks, expected, "capacity {capacity} rate {rate}");
                assert_eq!(g.blocks_per_item, solved.blocks_per_item);
                assert_eq!(g.hashes_per_block, solved.hashes_per_block);
            }
            rate *= 0.37;
        }
    }

    #[test]
    fn grid_rates_are_the_largest_at_or_under_the_rate_asked() {
        let mut rate = 0.999;
        while rate > MIN_SIZING_ERROR {
            let i = grid_index(rate);
            assert!(grid_error(i) <= rate, "{rate}");
            assert!(i == 1 || grid_error(i - 1) > rate, "{rate}");
            // Never more than one grid step (1.1%) under.
            assert!(grid_error(i) > rate * 0.989, "{rate}");
            rate *= 0.913;
        }
        assert_eq!(grid_index(0.5), 64);
        assert_eq!(grid_index(1e-300), GRID_POINTS);
    }

    #[test]
    fn sizing_never_runs_the_solver() {
        use std::sync::atomic::Ordering;
        // Rates never seen before (distinct, odd) and a chain's future layers.
        let before = SOLVES.load(Ordering::Relaxed);
        let mut work = 0u64;
        for n in 0..10_000u32 {
            let rate = 0.0123 + f64::from(n) * 1.37e-7;
            work += plan_layer(1000, rate).unwrap().blocks;
        }
        let f = crate::ScalableFilter::new(crate::FilterSpec::new(1, 0.0321, 1), u64::MAX).unwrap();
        work += crate::bloom::health::max_capacity(&f, 1 << 40);
        assert!(work > 0);
        // Other tests of this process may run the solver concurrently, but only the table
        // tests do, at most once per grid point each.
        let solves = SOLVES.load(Ordering::Relaxed) - before;
        assert!(
            solves <= 2 * u64::from(GRID_POINTS) + 200,
            "{solves} solves"
        );
    }

    #[test]
    fn occupancy_moments_match_known_values() {
        let g1 = occupancy_moments(1);
        // One throw sets exactly one bit.
        assert!((g1[1] - 1.0 / 512.0).abs() < 1e-15);
        // E[S_t] = B (1 - (1 - 1/B)^t) for k = 1.
        for t in [10usize, 300, 2000] {
            let exact = 1.0 - (1.0 - 1.0 / 512.0f64).powi(t as i32);
            assert!((g1[t] - exact).abs() < 1e-12, "t={t}");
        }
        // Zero throws: nothing set.
        assert_eq!(occupancy_moments(7)[0], 0.0);
    }

    #[test]
    fn every_rate_from_a_quarter_to_1e_minus_9_gets_a_shape_that_meets_it() {
        for &p in &RATES {
            let shape = shape_for(p).unwrap();
            let g = plan_layer(1_000_000, p).unwrap();
            assert!(g.is_valid());
            let fpr = expected_fpr(1_000_000, &g);
            assert!(
                fpr <= p * SIZING_MARGIN * 1.000_001,
                "p={p} fpr={fpr} {shape:?}"
            );
            // And not wastefully under it: the next smaller layer would miss.
            let smaller = Geometry {
                blocks: g.blocks - g.blocks / 100,
                ..g
            };
            assert!(
                expected_fpr(1_000_000, &smaller) > p * SIZING_MARGIN,
                "p={p}"
            );
        }
    }

    #[test]
    fn memory_stays_within_five_percent_of_the_classic_optimum_from_1e_minus_2_to_1e_minus_7() {
        for &p in RATES.iter().filter(|&&p| (1e-7..=0.01).contains(&p)) {
            let shape = shape_for(p).unwrap();
            let ratio = shape.bits_per_item() / classic_bits_per_item(p);
            assert!(ratio <= 1.05, "p={p} ratio={ratio} {shape:?}");
        }
    }

    #[test]
    fn high_rates_pay_only_for_the_rejected_attempts() {
        // At 25% and 10% about 10% and 3% of attempts are rejected as already present; the
        // bits must hold those attempts too. Against the classic formula evaluated for the
        // attempts, memory is within 5% here as well.
        for (p, attempts_per_item) in [(0.25, 1.103), (0.1, 1.030)] {
            let shape = shape_for(p).unwrap();
            let ratio = shape.bits_per_item() / (classic_bits_per_item(p) * attempts_per_item);
            assert!(ratio <= 1.05, "p={p} ratio={ratio} {shape:?}");
        }
    }

    #[test]
    fn one_block_per_item_is_used_where_it_is_cheap() {
        assert_eq!(shape_for(0.01).unwrap().blocks_per_item, 1);
        assert_eq!(shape_for(0.1).unwrap().blocks_per_item, 1);
        assert!(shape_for(1e-6).unwrap().blocks_per_item >= 2);
    }

    #[test]
    fn tiny_and_huge_capacities_plan() {
        let g = plan_layer(1, 0.01).unwrap();
        assert_eq!(g.blocks, 1);
        let g = plan_layer(1 << 30, 1e-9).unwrap();
        assert!(
            g.bytes() > 5_000_000_000 && g.bytes() < 7_000_000_000,
            "{g:?}"
        );
        assert_eq!(plan_layer(u64::MAX, 1e-30), Err(SizingError::TooLarge));
    }

    #[test]
    fn bad_parameters_are_refused() {
        for p in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY, 2.0] {
            assert_eq!(plan_layer(10, p), Err(SizingError::BadErrorRate), "{p}");
        }
        assert_eq!(plan_layer(0, 0.01), Err(SizingError::BadCapacity));
    }

    #[test]
    fn extremely_small_rates_are_sized_at_the_floor() {
        let g = plan_layer(1000, 1e-40).unwrap();
        assert!(g.is_valid());
        assert_eq!(g, plan_layer(1000, MIN_SIZING_ERROR).unwrap());
        assert!(expected_fpr(1000, &g) <= MIN_SIZING_ERROR);
    }
}
#[cfg(test)]
mod generate {
    /// Writes the shape table: `cargo test --release -p layerbloom-filter write_shape_table --
    /// --ignored`, then `cargo fmt`.
    #[test]
    #[ignore]
    fn write_shape_table() {
        use std::fmt::Write;
        let mut out = String::from("[\n");
        for i in 1..=super::GRID_POINTS {
            let s = super::compute_shape(super::grid_error(i));
            writeln!(
                out,
                "    ({}, {}, {:#018x}),",
                s.blocks_per_item,
                s.hashes_per_block,
                s.max_load.to_bits()
            )
            .unwrap();
        }
        out.push_str("]\n");
        std::fs::write(
            concat!(env!("CARGO_MANIFEST_DIR"), "/src/bloom/shapes.in"),
            out,
        )
        .unwrap();
    }
}

#[cfg(test)]
mod table {
    /// Prints the best shape per block count beside the chosen one:
    /// `cargo test --release -p layerbloom-filter sizing_table -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn sizing_table() {
        for p in [0.25, 0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9] {
            let classic = super::classic_bits_per_item(p);
            let target = p * super::SIZING_MARGIN;
            for b in 1..=super::MAX_BLOCKS_PER_ITEM {
                let (load, k) = (1..=40u32)
                    .map(|k| (super::max_load(target, b, k), k))
                    .max_by(|x, y| x.0.total_cmp(&y.0))
                    .unwrap();
                let bits = 512.0 * f64::from(b) / load;
                print!("b{b} k{k} {:.3} | ", bits / classic);
            }
            println!("p={p} chosen {:?}", super::shape_for(p).unwrap());
        }
    }
}

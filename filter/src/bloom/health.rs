//! Filter health: what a filter's bits say about it, beyond what its counters say.
//!
//! A Bloom filter fails silently: past its capacity it keeps answering, with a false-positive
//! rate that climbs without an error. These figures make that visible. All of them come from
//! counts the layers keep anyway (set bits, items, capacity), so computing them costs a few
//! microseconds whatever the filter's size.
//!
//! # What it reports
//! * **Fill ratio** of the newest layer (the one that takes new items), and each layer's.
//! * **False-positive rate** of the chain: each layer's estimate from its fill, by its kind
//!   (`Layer::fpr_of`), combined over the layers a query probes.
//! * **Distinct items** the chain's bits account for: each layer's estimate by its kind
//!   (`Layer::distinct_of`), summed.
//! * **Max capacity**: the capacity the chain reaches if it grows until the next layer would
//!   take it past a memory limit, replaying the chain's own growth rule (`chain::next_layer`,
//!   `Chain::grown_memory`, the layer cap); a non-scaling filter's is its capacity.
//! * **Warning marks**: the layers a write took past a share of their capacity.
//!
//! The formulas, and where each comes from, are in `math`; this module applies them to a
//! filter.

use crate::bloom::chain::{next_layer, Chain, MAX_LAYERS};
use crate::bloom::filter::{on_layout, ScalableFilter};
use crate::bloom::layer::{Layer, LayerPlan, LayerSummary};
use crate::bloom::math::combine_fprs;
pub use crate::bloom::math::{
    blocked_distinct, blocked_fpr, classic_distinct, classic_fpr, fill_ratio, warning_mark,
};

/// The whole chain's estimated false-positive rate. A blocked layer's estimate costs a
/// Poisson sum: the ones the layers keep are used; a classic layer's is `f^k`.
pub fn estimated_fpr(filter: &ScalableFilter) -> f64 {
    fn of<L: Layer>(chain: &Chain<L>) -> f64 {
        combine_fprs(chain.layers().iter().map(L::estimated_fpr))
    }
    on_layout!(filter, ScalableFilter, c => of(c))
}

/// The distinct items the whole chain's bits account for, rounded.
pub fn estimated_distinct(filter: &ScalableFilter) -> u64 {
    fn of<L: Layer>(chain: &Chain<L>) -> u64 {
        distinct_items::<L>(&chain.layer_summaries())
    }
    on_layout!(filter, ScalableFilter, c => of(c))
}

/// `1 − Π(1 − fpr_i)` over layers of kind `L`.
pub fn chain_fpr<L: Layer>(layers: &[LayerSummary]) -> f64 {
    combine_fprs(layers.iter().map(L::fpr_of))
}

/// The distinct items the bits of layers of kind `L` account for, rounded.
pub fn distinct_items<L: Layer>(layers: &[LayerSummary]) -> u64 {
    let total: f64 = layers.iter().map(L::distinct_of).sum();
    total.round() as u64
}

/// Whether the newest layer is at or past `percent`% of its capacity (`percent` 0: never).
pub fn over_warning(filter: &ScalableFilter, percent: u32) -> bool {
    let newest = filter.layer_count().saturating_sub(1);
    percent > 0
        && filter
            .layer_load(newest)
            .is_some_and(|(items, capacity)| items >= warning_mark(capacity, percent))
}

/// The counts of a filter that the checks around a write read (its capacity marks, the
/// statistics, whether it may grow), taken in one call: an add reads them before and after,
/// and those are the only calls the common add (below its marks, no layer added) makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Its layers.
    pub layers: usize,
    /// Its items.
    pub items: u64,
    /// The newest layer's items.
    pub newest_items: u64,
    /// The newest layer's capacity.
    pub newest_capacity: u64,
    /// Its growth factor, 0 for non-scaling.
    pub expansion: u32,
}

impl Load {
    #[inline]
    pub fn of(filter: &ScalableFilter) -> Self {
        on_layout!(filter, ScalableFilter, c => chain_load(c))
    }

    /// Whether the newest layer is at or past `percent`% of its capacity (`percent` 0:
    /// never): `over_warning` of the filter these counts are of.
    #[inline]
    pub fn over_warning(&self, percent: u32) -> bool {
        percent > 0 && self.newest_items >= warning_mark(self.newest_capacity, percent)
    }

    /// The layers that crossed `percent`% of their capacity between these counts (before a
    /// write) and `after`, of the same filter as `filter` is now: `crossings`, without reading
    /// the filter again when no layer was added.
    #[inline]
    pub fn crossings(&self, after: &Load, filter: &ScalableFilter, percent: u32) -> Vec<Crossing> {
        if percent == 0 {
            return Vec::new();
        }
        if after.layers != self.layers {
            let before = LoadMark {
                layers: self.layers,
                newest_items: self.newest_items,
            };
            return crossings(before, filter, percent);
        }
        let mark = warning_mark(after.newest_capacity, percent);
        if self.newest_items < mark && after.newest_items >= mark {
            vec![Crossing {
                layer: after.layers.saturating_sub(1),
                items: after.newest_items,
                capacity: after.newest_capacity,
            }]
        } else {
            Vec::new()
        }
    }
}

#[inline]
fn chain_load<L: Layer>(chain: &Chain<L>) -> Load {
    let (newest_items, newest_capacity) = chain.layers().last().map_or((0, 0), |l| {
        let summary = l.summary();
        (summary.items, summary.capacity)
    });
    Load {
        layers: chain.layer_count(),
        items: chain.items(),
        newest_items,
        newest_capacity,
        expansion: chain.expansion_raw(),
    }
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
            newest_items: filter
                .layer_load(layers.saturating_sub(1))
                .map_or(0, |(i, _)| i),
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
    // A plain loop: on every add, usually over one layer that crossed nothing, collecting a
    // `filter_map` cost several times the comparison.
    let mut crossed = Vec::new();
    for layer in first..filter.layer_count() {
        let Some((items, capacity)) = filter.layer_load(layer) else {
            continue;
        };
        let was = if layer == first && before.layers > 0 {
            before.newest_items
        } else {
            0
        };
        let mark = warning_mark(capacity, percent);
        if was < mark && items >= mark {
            crossed.push(Crossing {
                layer,
                items,
                capacity,
            });
        }
    }
    crossed
}

/// The capacity the filter reaches if it grows until its next layer would take it past
/// `max_bytes`: its capacity plus that of every layer it can still add. Replays the chain's
/// growth (`chain::next_layer`, the same memory model and layer cap), so it is where
/// `ScalableFilter::add` refuses to grow.
///
/// A blocked layer's geometry comes from `sizing::plan_layer`, a table lookup: at most about
/// 64 steps (the capacity overflows, or with expansion 1 the rate reaches the sizing floor and
/// the rest is counted at once), each constant time, whatever rate the filter was made with.
pub fn max_capacity(filter: &ScalableFilter, max_bytes: u64) -> u64 {
    on_layout!(filter, ScalableFilter, c => chain_max_capacity(c, max_bytes))
}

fn chain_max_capacity<L: Layer>(chain: &Chain<L>, max_bytes: u64) -> u64 {
    let mut capacity = chain.capacity();
    let expansion = u64::from(chain.expansion_raw());
    let Some(newest) = chain.layers().last() else {
        return capacity;
    };
    if expansion == 0 {
        return capacity;
    }
    let mut plan = *newest.meta();
    let mut count = chain.layer_count();
    let mut memory = chain.memory_usage();
    let grown = Chain::<L>::grown_memory;
    // Growth stops where no next layer can be built, at the most layers a filter may have,
    // and where the next layer would take the filter past the limit.
    while let Ok(next) = next_layer::<L>(&plan, expansion, chain.params()) {
        let bytes = next.bytes();
        if count >= MAX_LAYERS || grown(memory, count, 1, bytes) > max_bytes {
            break;
        }
        memory = grown(memory, count, 1, bytes);
        count += 1;
        capacity = capacity.saturating_add(next.capacity());
        plan = next;
        if expansion == 1 && L::plans_repeat(&plan) {
            // Every further layer is this one again (same capacity, same size): count them at
            // once instead of one by one (there can be millions). The memory grows
            // monotonically with their number: search for the most that fit.
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
            capacity = capacity.saturating_add(plan.capacity().saturating_mul(fit as u64));
            break;
        }
    }
    capacity
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::blocked::BlockedLayer;
    use crate::bloom::classic::ClassicLayer;
    use crate::bloom::filter::FilterSpec;
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
                let estimate = blocked_fpr(&s);
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
        assert_eq!(classic_fpr(&s), fill.powi(s.hashes as i32));
        assert!(fill > 0.3 && fill < 0.6, "{fill}");
    }

    #[test]
    fn empty_and_saturated_layers_have_rates_zero_and_one() {
        let empty = summary_of(&BlockedLayer::new(100, 0.01).unwrap());
        assert_eq!(blocked_fpr(&empty), 0.0);
        assert_eq!(classic_fpr(&empty), 0.0);
        assert_eq!(blocked_distinct(&empty), 0.0);
        let full = LayerSummary {
            set_bits: empty.total_bits,
            ..empty
        };
        assert_eq!(blocked_fpr(&full), 1.0);
        assert_eq!(classic_fpr(&full), 1.0);
        // Saturated: a finite lower bound, the estimate with one bit clear.
        let one_clear = LayerSummary {
            set_bits: empty.total_bits - 1,
            ..empty
        };
        let d = blocked_distinct(&full);
        assert!(d.is_finite() && d > 0.0);
        assert_eq!(d, blocked_distinct(&one_clear));
    }

    #[test]
    fn the_chain_rate_combines_the_layers() {
        let a = summary_of(&blocked_layer(1000, 0.01, 1000));
        let b = summary_of(&blocked_layer(2000, 0.005, 700));
        let (pa, pb) = (blocked_fpr(&a), blocked_fpr(&b));
        let chain = chain_fpr::<BlockedLayer>(&[a, b]);
        assert!((chain - (1.0 - (1.0 - pa) * (1.0 - pb))).abs() < 1e-15);
        // Tiny rates are not rounded away.
        let tiny = summary_of(&blocked_layer(100_000, 0.01, 10));
        let p = blocked_fpr(&tiny);
        assert!(p > 0.0 && p < 1e-12, "{p:e}");
        assert!((chain_fpr::<BlockedLayer>(&[tiny, tiny]) / (2.0 * p) - 1.0).abs() < 1e-9);
        assert!(chain > pa.max(pb) && chain < pa + pb);
        assert_eq!(chain_fpr::<BlockedLayer>(&[]), 0.0);
    }

    #[test]
    fn distinct_items_are_estimated_within_a_percent() {
        for p in [0.1, 0.01, 1e-4] {
            for n in [10_000u64, 50_000, 150_000] {
                let layer = blocked_layer(50_000, p, n);
                let d = blocked_distinct(&summary_of(&layer));
                assert!((d / n as f64 - 1.0).abs() < 0.01, "p={p} n={n}: {d}");
            }
        }
        let mut f = ScalableFilter::new(classic(50_000, 0.01, 0), u64::MAX).unwrap();
        for i in 0..40_000 {
            f.add(&item(i), u64::MAX).unwrap();
        }
        let d = distinct_items::<ClassicLayer>(&f.layer_summaries());
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
        let d = distinct_items::<BlockedLayer>(&f.layer_summaries()) as f64;
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
        // Both sides of the u64 fast path agree with the exact formula.
        for capacity in [
            u64::MAX / 70,
            u64::MAX / 70 + 1,
            u64::MAX / 2,
            12345678901234567,
        ] {
            let exact = (u128::from(capacity) * 70).div_ceil(100);
            assert_eq!(u128::from(warning_mark(capacity, 70)), exact, "{capacity}");
        }
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
            let (_, cap1) = f.layer_load(1).unwrap_or((0, 0));
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
        while f.layer_count() < 2 || f.layer_load(1).unwrap().0 < 150 {
            f.add(&item(i), u64::MAX).unwrap();
            i += 1;
        }
        let layers: Vec<usize> = crossings(before, &f, 70).iter().map(|c| c.layer).collect();
        assert_eq!(layers, vec![0, 1]);
    }

    #[test]
    fn the_filter_figures_are_its_layers_estimates() {
        let mut f = ScalableFilter::new(spec(1000, 0.01, 2), u64::MAX).unwrap();
        for i in 0..1500 {
            f.add(&item(i), u64::MAX).unwrap();
        }
        let layers = f.layer_summaries();
        assert_eq!(f.error(), 0.01);
        assert_eq!(layers.len(), 2);
        let fpr = estimated_fpr(&f);
        let distinct = estimated_distinct(&f);
        assert_eq!(fpr, chain_fpr::<BlockedLayer>(&layers));
        assert_eq!(distinct, distinct_items::<BlockedLayer>(&layers));
        assert!(fpr > 0.0 && fpr < 0.01);
        assert!((distinct as f64 / 1500.0 - 1.0).abs() < 0.03);
        // A classic filter's figures are its layers' `f^k` and distinct-item estimates.
        let mut c = ScalableFilter::new(classic(1000, 0.01, 2), u64::MAX).unwrap();
        for i in 0..1500 {
            c.add(&item(i), u64::MAX).unwrap();
        }
        let layers = c.layer_summaries();
        assert_eq!(estimated_fpr(&c), chain_fpr::<ClassicLayer>(&layers));
        assert_eq!(
            estimated_distinct(&c),
            distinct_items::<ClassicLayer>(&layers)
        );
    }
}

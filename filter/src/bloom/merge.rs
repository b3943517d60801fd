//! The union of compatible Bloom filters (BF.MERGE).
//!
//! # Why OR-ing bits is a union
//! Two chains of one kind, made with the same parameters, hash an item alike and grow by the
//! same rule, so their layer `i` has the same size and probe scheme in both: an item added to
//! layer `i` of either sets the same bits of that layer. The bitwise OR of the two layers is
//! then exactly the layer both sets of items would have built, and the OR of every layer pair
//! answers "present" for every item of either filter (no false negative). A source with fewer
//! layers contributes to the layers it has; the union has the most layers of any source, and
//! a query probes all of them, as it probes every layer of any chain.
//!
//! Compatibility is checked on what decides where an item's bits go: the kind of layer, the
//! hashing (RedisBloom's option bits for classic layers), the growth factor, the error rate,
//! and the plan (capacity, rate, geometry) of every layer: each source's layers are compared
//! with the first source's and with the longest source's (the union's) at the same place,
//! since two sources that each agree with a shorter first one may differ from each other past
//! its layers. A filter loaded from another writer may have layers that its parameters would
//! not grow; comparing the layers themselves refuses those too.
//!
//! # Item counts are estimates
//! The bits do not say how many items the sources shared. Each layer's count starts from the
//! largest count any source has for it (a counted add was a new item, and the union holds
//! every item of every source: the union has at least that many) and adds the items the
//! other sources bring, estimated as the difference between the distinct items the union's
//! bits account for and those that source's bits account for (`health`: `ln(1 − f) /
//! ln(1 − h/m)` for a classic layer, the Poisson block-load inversion for a blocked one). Both
//! estimates count the items false positives swallowed alike, so the difference does not;
//! the count never exceeds the sum of the sources' counts (all of them distinct). A blocked
//! layer counts at most its capacity, as layerbloom's header requires (a union of full layers
//! then undercounts); a classic layer may count more, as RedisBloom's formats allow. A filter
//! merged with itself or with empty filters keeps its counts exactly. The filter's total is
//! the sum of its layers' counts, below `u64::MAX`, as the strict `BF.LOADCHUNK` header check
//! requires (a later layer's count is cut to keep it so).
//!
//! # For filters made of several chains
//! A structure holding several chains (a time-windowed filter's slices, `window::merge`)
//! merges chain by chain: `ScalableFilter::mismatch` per pair, `ScalableFilter::union_bytes`
//! summed to check a memory limit once, then `ScalableFilter::union` of each. Its own
//! differences (the window, the slices, their alignment) are `Mismatch` variants too, so every
//! refusal reads alike.

use std::fmt;

use crate::bloom::blocked::{BlockedLayer, LayerMeta};
use crate::bloom::chain::Chain;
use crate::bloom::classic::{ClassicLayer, ClassicMeta, ClassicParams, OPT_NO_SCALING};
use crate::bloom::codec::LayerCodec;
use crate::bloom::filter::{Layout, ScalableFilter};
use crate::bloom::layer::{Layer, LayerPlan};
use crate::error::FilterError;
use crate::fallible::try_vec;

/// The largest item total a union may have: strict `BF.LOADCHUNK` refuses an all-ones one.
const MAX_TOTAL: u64 = u64::MAX - 1;

/// What a merge needs of a kind of layer beyond `LayerCodec`.
pub(crate) trait MergeLayer: LayerCodec {
    /// Whether chains with these parameters hash an item alike. Non-scaling is compared as
    /// the expansion, so a kind's parameters that only restate it are not compared here.
    fn same_hashing(a: &Self::Params, b: &Self::Params) -> bool;
    /// RedisBloom's option bits of the parameters (0 for a kind without them), for messages.
    fn options_of(params: &Self::Params) -> u32;
    /// A layer's plan with its item count set to zero: what two layers must share.
    fn plan_of(meta: &Self::Meta) -> Self::Meta;
    /// Items counted in the layer.
    fn items_of(meta: &Self::Meta) -> u64;
    /// Sets the layer's item count.
    fn set_items(&mut self, items: u64);
    /// ORs the bits of a layer of the same plan in, at a cost that follows the pages of
    /// `other` that were written, not its size.
    fn or_layer(&mut self, other: &Self);
    /// The largest item count a layer of this plan may have and still load.
    fn max_items(meta: &Self::Meta) -> u64;
}

impl MergeLayer for BlockedLayer {
    fn same_hashing(_: &(), _: &()) -> bool {
        true
    }

    fn options_of(_: &()) -> u32 {
        0
    }

    fn plan_of(meta: &LayerMeta) -> LayerMeta {
        LayerMeta { items: 0, ..*meta }
    }

    fn items_of(meta: &LayerMeta) -> u64 {
        meta.items
    }

    fn set_items(&mut self, items: u64) {
        BlockedLayer::set_items(self, items)
    }

    fn or_layer(&mut self, other: &Self) {
        BlockedLayer::or_layer(self, other)
    }

    /// layerbloom's header refuses a count over the capacity, at every strictness.
    fn max_items(meta: &LayerMeta) -> u64 {
        meta.capacity
    }
}

impl MergeLayer for ClassicLayer {
    fn same_hashing(a: &ClassicParams, b: &ClassicParams) -> bool {
        // The hash width (FORCE64) decides the probes and NOROUND the layers' sizes: filters
        // that differ in either are refused under the name of their option bits.
        a.options & !OPT_NO_SCALING == b.options & !OPT_NO_SCALING
    }

    fn options_of(params: &ClassicParams) -> u32 {
        params.options
    }

    fn plan_of(meta: &ClassicMeta) -> ClassicMeta {
        ClassicMeta { size: 0, ..*meta }
    }

    fn items_of(meta: &ClassicMeta) -> u64 {
        meta.size
    }

    fn set_items(&mut self, items: u64) {
        ClassicLayer::set_items(self, items)
    }

    fn or_layer(&mut self, other: &Self) {
        ClassicLayer::or_layer(self, other)
    }

    /// Neither RedisBloom's loaders nor ours bound a link's count by its capacity, so the
    /// estimate stands.
    fn max_items(_: &ClassicMeta) -> u64 {
        u64::MAX
    }
}

/// How a source differs from the one it was compared with (see `Incompatible`).
#[derive(Debug, Clone, PartialEq)]
pub enum Mismatch {
    /// The kind of layers (blocked or classic).
    Layout { first: Layout, this: Layout },
    /// The hashing: RedisBloom's option bits of classic layers.
    Hashing { first: u32, this: u32 },
    /// The growth factor (0: non-scaling).
    Expansion { first: u32, this: u32 },
    /// The error rate.
    ErrorRate { first: f64, this: f64 },
    /// The first layer's capacity.
    Capacity { first: u64, this: u64 },
    /// Layer `layer` (0-based) of both has another plan although the parameters agree.
    Layer { layer: usize, what: LayerDifference },
    /// The time window in milliseconds (`None`: a plain filter, without one).
    Window {
        first: Option<u64>,
        this: Option<u64>,
    },
    /// The slices a window is cut into.
    Slices { first: u32, this: u32 },
    /// Windows whose slices begin at other times: their origins are `apart_ms` apart, not a
    /// whole number of `slice_ms` slices.
    Misaligned { apart_ms: u64, slice_ms: u64 },
    /// Windows so far apart in time that one filter cannot number both's slices.
    TooFarApart,
    /// The slices of two windows that start together (at `start_ms`) differ as `what` says;
    /// `first` is the other source (0-based), which `what`'s text calls the first.
    Slice {
        start_ms: u64,
        first: usize,
        what: Box<Mismatch>,
    },
}

/// What differs between two layers at the same place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LayerDifference {
    Capacity {
        first: u64,
        this: u64,
    },
    ErrorRate {
        first: f64,
        this: f64,
    },
    /// Same capacity and rate, another size or number of hashes.
    Geometry {
        first_bytes: u64,
        this_bytes: u64,
    },
}

fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::Blocked => "blocked",
        Layout::Classic => "classic (RedisBloom)",
    }
}

fn expansion_text(expansion: u32) -> String {
    if expansion == 0 {
        "is non-scaling".to_string()
    } else {
        format!("has expansion {expansion}")
    }
}

impl Mismatch {
    /// The sentence saying how source `this` differs from source `other` (both 1-based).
    fn describe(&self, f: &mut fmt::Formatter<'_>, this: usize, other: usize) -> fmt::Result {
        match self {
            Mismatch::Layout { first, this: got } => write!(
                f,
                "source {this} has {} layers, source {other} has {} layers",
                layout_name(*got),
                layout_name(*first)
            ),
            Mismatch::Hashing { first, this: got } => write!(
                f,
                "source {this} hashes items differently (RedisBloom options {got}), source \
                 {other} has options {first}"
            ),
            Mismatch::Expansion { first, this: got } => write!(
                f,
                "source {this} {}, source {other} {}",
                expansion_text(*got),
                expansion_text(*first)
            ),
            Mismatch::ErrorRate { first, this: got } => write!(
                f,
                "source {this} has error rate {got}, source {other} has error rate {first}"
            ),
            Mismatch::Capacity { first, this: got } => write!(
                f,
                "source {this} has capacity {got}, source {other} has capacity {first}"
            ),
            Mismatch::Layer { layer, what } => {
                let n = layer + 1;
                match *what {
                    LayerDifference::Capacity { first, this: got } => write!(
                        f,
                        "layer {n} of source {this} has capacity {got}, of source {other} {first}"
                    ),
                    LayerDifference::ErrorRate { first, this: got } => write!(
                        f,
                        "layer {n} of source {this} has error rate {got}, of source {other} \
                         {first}"
                    ),
                    LayerDifference::Geometry {
                        first_bytes,
                        this_bytes,
                    } => write!(
                        f,
                        "layer {n} of source {this} is laid out differently ({this_bytes} \
                         bytes, source {other}'s {first_bytes} bytes)"
                    ),
                }
            }
            Mismatch::Window { first, this: got } => match (first, got) {
                (Some(first), Some(got)) => write!(
                    f,
                    "source {this} has a window of {got} ms, source {other} of {first} ms"
                ),
                (Some(first), None) => write!(
                    f,
                    "source {this} has no window, source {other} has a window of {first} ms"
                ),
                (None, Some(got)) => write!(
                    f,
                    "source {this} has a window of {got} ms, source {other} has none"
                ),
                (None, None) => write!(f, "source {this} and source {other} have no window"),
            },
            Mismatch::Slices { first, this: got } => write!(
                f,
                "source {this} has {got} slices, source {other} has {first} slices"
            ),
            Mismatch::Misaligned { apart_ms, slice_ms } => write!(
                f,
                "the slices of source {this} do not line up with those of source {other}: \
                 their windows began {apart_ms} ms apart, not a whole number of slices of \
                 {slice_ms} ms"
            ),
            Mismatch::TooFarApart => write!(
                f,
                "the windows of source {this} and source {other} are too far apart in time to \
                 be numbered in one filter"
            ),
            Mismatch::Slice {
                start_ms,
                first,
                what,
            } => {
                write!(f, "in their slices starting at {start_ms} ms, ")?;
                what.describe(f, this, first + 1)
            }
        }
    }
}

/// A source that cannot be merged: its index among the sources (0-based), the index of the
/// source it differs from (the first; for a layer the first lacks, the longest source) and
/// how it differs.
#[derive(Debug, Clone, PartialEq)]
pub struct Incompatible {
    pub source: usize,
    pub against: usize,
    pub mismatch: Mismatch,
}

/// `source 2 has error rate 0.001, source 1 has error rate 0.01` (sources counted from 1).
impl fmt::Display for Incompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.mismatch.describe(f, self.source + 1, self.against + 1)
    }
}

/// Why a union was not made. Nothing was allocated for it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// A union of nothing.
    #[error("no filter to merge")]
    NoSources,
    #[error("incompatible filters: {0}")]
    Incompatible(Incompatible),
    /// The union would take more than the limit, or its memory was refused.
    #[error(transparent)]
    Filter(#[from] FilterError),
}

/// How `b` differs from `a`, if it does (the first difference in the order of `Mismatch`).
fn chain_mismatch<L: MergeLayer>(a: &Chain<L>, b: &Chain<L>) -> Option<Mismatch> {
    let (pa, pb) = (a.params(), b.params());
    if !L::same_hashing(pa, pb) {
        return Some(Mismatch::Hashing {
            first: L::options_of(pa),
            this: L::options_of(pb),
        });
    }
    if a.expansion_raw() != b.expansion_raw() {
        return Some(Mismatch::Expansion {
            first: a.expansion_raw(),
            this: b.expansion_raw(),
        });
    }
    if a.error() != b.error() {
        return Some(Mismatch::ErrorRate {
            first: a.error(),
            this: b.error(),
        });
    }
    layer_mismatch(a, b)
}

/// How the plan of a layer of `b` differs from that of `a`'s layer at the same place, over
/// the layers both have.
fn layer_mismatch<L: MergeLayer>(a: &Chain<L>, b: &Chain<L>) -> Option<Mismatch> {
    for (layer, (la, lb)) in a.layers().iter().zip(b.layers()).enumerate() {
        let (ma, mb) = (L::plan_of(la.meta()), L::plan_of(lb.meta()));
        if ma == mb {
            continue;
        }
        if layer == 0 && ma.capacity() != mb.capacity() {
            return Some(Mismatch::Capacity {
                first: ma.capacity(),
                this: mb.capacity(),
            });
        }
        let what = if ma.capacity() != mb.capacity() {
            LayerDifference::Capacity {
                first: ma.capacity(),
                this: mb.capacity(),
            }
        } else if ma.error() != mb.error() {
            LayerDifference::ErrorRate {
                first: ma.error(),
                this: mb.error(),
            }
        } else {
            LayerDifference::Geometry {
                first_bytes: ma.bytes(),
                this_bytes: mb.bytes(),
            }
        };
        return Some(Mismatch::Layer { layer, what });
    }
    None
}

/// The sources' chains, checked compatible; the index of the longest (the first of them).
///
/// Each source is compared with the first, then each of its layers with that layer of the
/// longest, whose layers the union takes. Comparing with the first alone is not enough: two
/// sources may agree with it on every layer it has and differ from each other past them.
fn check<L: MergeLayer>(sources: &[&Chain<L>]) -> Result<usize, MergeError> {
    let first = sources.first().ok_or(MergeError::NoSources)?;
    let refuse = |source, against, mismatch| {
        MergeError::Incompatible(Incompatible {
            source,
            against,
            mismatch,
        })
    };
    let mut longest = 0;
    for (source, chain) in sources.iter().enumerate().skip(1) {
        if let Some(mismatch) = chain_mismatch(first, chain) {
            return Err(refuse(source, 0, mismatch));
        }
        if chain.layer_count() > sources[longest].layer_count() {
            longest = source;
        }
    }
    let template = sources[longest];
    for (source, chain) in sources.iter().enumerate() {
        if let Some(mismatch) = layer_mismatch(template, chain) {
            return Err(refuse(source, longest, mismatch));
        }
    }
    Ok(longest)
}

/// The sources without repeats (the same filter named twice, `BF.MERGE d a a`), in their
/// order: a repeat adds no bit, and ORing it again would cost its whole size each time a
/// client lists it.
fn distinct<'a, L: Layer>(sources: &[&'a Chain<L>]) -> Result<Vec<&'a Chain<L>>, MergeError> {
    let mut seen: Vec<(usize, usize)> = try_vec(sources.len())?;
    seen.extend(
        sources
            .iter()
            .enumerate()
            .map(|(i, c)| (*c as *const Chain<L> as usize, i)),
    );
    seen.sort_unstable();
    seen.dedup_by_key(|(address, _)| *address);
    seen.sort_unstable_by_key(|&(_, i)| i);
    let mut out = try_vec(seen.len())?;
    out.extend(seen.iter().map(|&(_, i)| sources[i]));
    Ok(out)
}

/// Bytes the union of `sources` takes (the allocator model), without allocating; the sources
/// are checked compatible.
fn union_bytes<L: MergeLayer>(sources: &[&Chain<L>]) -> Result<u64, MergeError> {
    Ok(result_bytes(sources[check(sources)?]))
}

/// Bytes a union whose longest source is `longest` takes: that many layers of its plans.
fn result_bytes<L: MergeLayer>(longest: &Chain<L>) -> u64 {
    let plans = longest.layers().iter().map(|l| l.meta().bytes());
    Chain::<L>::modelled_bytes(longest.layer_count(), plans)
}

/// The union of compatible chains, refused before anything is allocated if it would take more
/// than `max_bytes`.
fn union<L: MergeLayer>(sources: &[&Chain<L>], max_bytes: u64) -> Result<Chain<L>, MergeError> {
    let longest = sources[check(sources)?];
    let needed = result_bytes(longest);
    if needed > max_bytes {
        return Err(FilterError::OverLimit {
            needed,
            limit: max_bytes,
        }
        .into());
    }
    let sources = distinct(sources)?;
    let mut layers = try_vec(longest.layer_count())?;
    let mut items = 0u64;
    for (index, template) in longest.layers().iter().enumerate() {
        let mut layer = L::zeroed(L::plan_of(template.meta()))?;
        // The source with the most items here, and what its bits alone account for.
        let (mut most, mut most_bits, mut sum) = (0u64, 0.0f64, 0u64);
        for source in &sources {
            let Some(part) = source.layers().get(index) else {
                continue;
            };
            layer.or_layer(part);
            let items = L::items_of(part.meta());
            if items > most || sum == 0 {
                most = items;
                most_bits = L::distinct_of(&part.summary());
            }
            sum = sum.saturating_add(items);
        }
        // The items the other sources add, estimated as the difference of two estimates of
        // the same bias (both count the items that false positives swallowed).
        let added = (L::distinct_of(&layer.summary()) - most_bits)
            .max(0.0)
            .round();
        // `as` saturates a float past u64's range, and the bounds hold it anyway. A count the
        // loaders refuse would make the union unloadable (RDB, AOF, RESTORE, LOADCHUNK), and
        // the total must stay the exact sum of the counts, below the all-ones value strict
        // LOADCHUNK refuses.
        let count = most
            .saturating_add(added as u64)
            .min(sum)
            .min(L::max_items(template.meta()))
            .min(MAX_TOTAL - items);
        layer.set_items(count);
        items += count;
        layers.push(layer);
    }
    Ok(Chain::from_parts(
        layers,
        items,
        longest.error(),
        longest.expansion_raw(),
        *longest.params(),
    ))
}

/// The chains of sources that are all of kind `L` (`pick` gives a filter's chain of that
/// kind), or the first source of another kind.
fn chains_of<'a, L: Layer>(
    sources: &[&'a ScalableFilter],
    pick: impl Fn(&'a ScalableFilter) -> Option<&'a Chain<L>>,
) -> Result<Vec<&'a Chain<L>>, MergeError> {
    let mut chains = try_vec(sources.len())?;
    for (source, filter) in sources.iter().enumerate() {
        match pick(filter) {
            Some(chain) => chains.push(chain),
            None => {
                return Err(MergeError::Incompatible(Incompatible {
                    source,
                    against: 0,
                    mismatch: Mismatch::Layout {
                        first: L::LAYOUT,
                        this: filter.layout(),
                    },
                }))
            }
        }
    }
    Ok(chains)
}

fn blocked(f: &ScalableFilter) -> Option<&Chain<BlockedLayer>> {
    match f {
        ScalableFilter::Blocked(c) => Some(c),
        ScalableFilter::Classic(_) => None,
    }
}

fn classic(f: &ScalableFilter) -> Option<&Chain<ClassicLayer>> {
    match f {
        ScalableFilter::Classic(c) => Some(c),
        ScalableFilter::Blocked(_) => None,
    }
}

impl ScalableFilter {
    /// How `other` differs from this filter in what a union needs them to share, if it
    /// does.
    pub fn mismatch(&self, other: &ScalableFilter) -> Option<Mismatch> {
        match (self, other) {
            (ScalableFilter::Blocked(a), ScalableFilter::Blocked(b)) => chain_mismatch(a, b),
            (ScalableFilter::Classic(a), ScalableFilter::Classic(b)) => chain_mismatch(a, b),
            _ => Some(Mismatch::Layout {
                first: self.layout(),
                this: other.layout(),
            }),
        }
    }

    /// Bytes the union of `sources` would take, by the model `memory_usage` follows, without
    /// allocating: what a memory limit is checked against. The sources are checked
    /// compatible.
    pub fn union_bytes(sources: &[&ScalableFilter]) -> Result<u64, MergeError> {
        let first = sources.first().ok_or(MergeError::NoSources)?;
        match first.layout() {
            Layout::Blocked => union_bytes(&chains_of(sources, blocked)?),
            Layout::Classic => union_bytes(&chains_of(sources, classic)?),
        }
    }

    /// The union of compatible filters: every item of every source is present in it. Its
    /// item counts are estimates (see the module notes). Refused, with nothing allocated, when
    /// the sources differ in what a union needs them to share or the union would take more
    /// than `max_bytes`.
    pub fn union(sources: &[&ScalableFilter], max_bytes: u64) -> Result<Self, MergeError> {
        let first = sources.first().ok_or(MergeError::NoSources)?;
        Ok(match first.layout() {
            Layout::Blocked => {
                ScalableFilter::Blocked(union(&chains_of(sources, blocked)?, max_bytes)?)
            }
            Layout::Classic => {
                ScalableFilter::Classic(union(&chains_of(sources, classic)?, max_bytes)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::codec::{self, Strictness};
    use crate::bloom::filter::FilterSpec;
    use crate::hash::mix64;

    const NO_LIMIT: u64 = u64::MAX;

    fn spec(capacity: u64, error: f64, expansion: u32, layout: Layout) -> FilterSpec {
        FilterSpec {
            layout,
            ..FilterSpec::new(capacity, error, expansion)
        }
    }

    /// Items drawn from a seeded stream: `count` of them, from a universe where two sources
    /// drawn with nearby seeds overlap (`mix64(seed·…)` of small numbers).
    fn items(seed: u64, count: usize, universe: u64) -> Vec<Vec<u8>> {
        let mut state = seed;
        (0..count)
            .map(|_| {
                state = mix64(state);
                format!("item:{}", state % universe).into_bytes()
            })
            .collect()
    }

    /// A filter of `spec` with `items` added (a non-scaling one up to its capacity).
    fn filled(spec: FilterSpec, items: &[Vec<u8>]) -> ScalableFilter {
        let mut f = ScalableFilter::new(spec, NO_LIMIT).unwrap();
        for item in items {
            if f.add(item, NO_LIMIT) == Err(FilterError::Full) {
                break;
            }
        }
        f
    }

    /// A filter built from `header` and then `f`'s SCANDUMP chunks, as BF.LOADCHUNK does.
    fn replayed(f: &ScalableFilter, header: &codec::Header) -> ScalableFilter {
        let mut copy = codec::filter_from_header(header, NO_LIMIT).unwrap();
        let mut it = 1;
        loop {
            let (next, chunk) = codec::dump_chunk(f, it);
            if next == 0 {
                return copy;
            }
            codec::load_chunk(&mut copy, next, chunk).unwrap();
            it = next;
        }
    }

    fn layer_items(f: &ScalableFilter) -> Vec<u64> {
        f.layer_summaries().iter().map(|l| l.items).collect()
    }

    #[test]
    fn every_item_of_every_source_is_present_in_the_union() {
        for layout in [Layout::Blocked, Layout::Classic] {
            for (error, expansion) in [(0.01, 2), (0.001, 1), (0.05, 4), (0.01, 0)] {
                let s = spec(300, error, expansion, layout);
                // Sources of 0 to 4000 items: from an empty one to several layers.
                let sets: Vec<Vec<Vec<u8>>> = [0usize, 50, 700, 4000, 1500]
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| items(0x5eed ^ (i as u64) << 7 ^ error.to_bits(), n, 6000))
                    .collect();
                let filters: Vec<ScalableFilter> = sets.iter().map(|set| filled(s, set)).collect();
                let sources: Vec<&ScalableFilter> = filters.iter().collect();
                let union = ScalableFilter::union(&sources, NO_LIMIT).unwrap();
                let what = format!("{layout:?} error {error} expansion {expansion}");
                let most_layers = filters.iter().map(ScalableFilter::layer_count).max();
                assert_eq!(Some(union.layer_count()), most_layers, "{what}");
                if expansion != 0 {
                    assert!(union.layer_count() >= 3, "{what}");
                }
                for (f, set) in filters.iter().zip(&sets) {
                    for item in set.iter().filter(|i| f.contains(i)) {
                        assert!(union.contains(item), "{what}: lost {item:?}");
                    }
                }
                // The batch lookup answers alike.
                let all: Vec<&[u8]> = sets.iter().flatten().map(Vec::as_slice).collect();
                let expected: Vec<bool> = all.iter().map(|i| union.contains(i)).collect();
                assert_eq!(union.contains_many(&all), expected, "{what}");
                assert_eq!(union.error(), filters[0].error(), "{what}");
                assert_eq!(union.expansion(), filters[0].expansion(), "{what}");
            }
        }
    }

    #[test]
    fn each_layer_of_the_union_is_the_or_of_the_sources_layers() {
        for layout in [Layout::Blocked, Layout::Classic] {
            let s = spec(100, 0.01, 2, layout);
            let a = filled(s, &items(1, 900, 100_000));
            let b = filled(s, &items(2, 150, 100_000));
            let union = ScalableFilter::union(&[&a, &b], NO_LIMIT).unwrap();
            assert!(a.layer_count() > b.layer_count(), "{layout:?}");
            for (i, bytes) in union.layer_bytes().iter().enumerate() {
                let want: Vec<u8> = match b.layer_bytes().get(i) {
                    Some(bb) => a.layer_bytes()[i]
                        .iter()
                        .zip(*bb)
                        .map(|(x, y)| x | y)
                        .collect(),
                    None => a.layer_bytes()[i].to_vec(),
                };
                assert_eq!(*bytes, &want[..], "{layout:?} layer {i}");
                assert_eq!(
                    union.layer_summaries()[i].set_bits,
                    crate::bits::count_ones(bytes),
                    "{layout:?} layer {i}"
                );
            }
            // Same plans as the longest source: the union is that filter's shape.
            let plans = |f: &ScalableFilter| -> Vec<(u64, u64, u32)> {
                f.layer_summaries()
                    .iter()
                    .map(|l| (l.capacity, l.bytes, l.hashes))
                    .collect()
            };
            assert_eq!(plans(&union), plans(&a));
            assert_eq!(union.memory_usage(), a.memory_usage());
        }
    }

    #[test]
    fn a_union_of_one_layer_filters_is_the_filter_of_all_their_items() {
        for layout in [Layout::Blocked, Layout::Classic] {
            let s = spec(10_000, 0.01, 2, layout);
            let (x, y) = (items(3, 3000, 1 << 40), items(4, 2000, 1 << 40));
            let union = ScalableFilter::union(&[&filled(s, &x), &filled(s, &y)], NO_LIMIT).unwrap();
            let both: Vec<Vec<u8>> = x.iter().chain(&y).cloned().collect();
            let direct = filled(s, &both);
            assert_eq!(union.layer_bytes(), direct.layer_bytes(), "{layout:?}");
        }
    }

    #[test]
    fn merging_a_filter_with_itself_or_an_empty_one_keeps_its_counts() {
        for layout in [Layout::Blocked, Layout::Classic] {
            let s = spec(200, 0.01, 2, layout);
            let f = filled(s, &items(5, 2500, 1 << 40));
            let empty = ScalableFilter::new(s, NO_LIMIT).unwrap();
            for sources in [
                vec![&f, &f],
                vec![&f],
                vec![&empty, &f, &empty],
                vec![&f, &f, &f],
            ] {
                let union = ScalableFilter::union(&sources, NO_LIMIT).unwrap();
                assert_eq!(union, f, "{layout:?}");
                assert_eq!(union.items(), f.items());
                assert_eq!(layer_items(&union), layer_items(&f));
            }
            let union = ScalableFilter::union(&[&empty, &empty], NO_LIMIT).unwrap();
            assert_eq!(union, empty);
        }
    }

    #[test]
    fn estimated_counts_are_close_to_the_distinct_items() {
        for layout in [Layout::Blocked, Layout::Classic] {
            for (error, overlap) in [(0.01, 0.0), (0.01, 0.5), (0.001, 0.9), (0.1, 0.3)] {
                // Two sets of 40,000 sharing `overlap` of their items, in one layer each.
                let n = 40_000u64;
                let shared = (n as f64 * overlap) as u64;
                let x: Vec<Vec<u8>> = (0..n).map(|i| format!("x{i}").into_bytes()).collect();
                let y: Vec<Vec<u8>> = (0..n)
                    .map(|i| {
                        if i < shared {
                            format!("x{i}")
                        } else {
                            format!("y{i}")
                        }
                        .into_bytes()
                    })
                    .collect();
                let s = spec(100_000, error, 2, layout);
                let (a, b) = (filled(s, &x), filled(s, &y));
                let union = ScalableFilter::union(&[&a, &b], NO_LIMIT).unwrap();
                let truth = (2 * n - shared) as f64;
                let got = union.items() as f64;
                let what = format!("{layout:?} error {error} overlap {overlap}: {got} vs {truth}");
                assert!((got / truth - 1.0).abs() < 0.02, "{what}");
                assert!(union.items() >= a.items().max(b.items()), "{what}");
                assert!(union.items() <= a.items() + b.items(), "{what}");
                assert_eq!(layer_items(&union).iter().sum::<u64>(), union.items());
            }
        }
    }

    #[test]
    fn a_source_named_again_adds_nothing_and_is_read_once() {
        let s = spec(100, 0.01, 2, Layout::Classic);
        let (a, b) = (
            filled(s, &items(11, 700, 1 << 40)),
            filled(s, &items(12, 90, 1 << 40)),
        );
        let chains = |fs: &[&ScalableFilter]| -> Vec<*const Chain<ClassicLayer>> {
            let picked = chains_of(fs, classic).unwrap();
            distinct(&picked)
                .unwrap()
                .into_iter()
                .map(|c| c as *const _)
                .collect()
        };
        let once = chains(&[&a, &b]);
        assert_eq!(chains(&[&a, &b, &a, &a, &b]), once);
        assert_eq!(chains(&[&b, &a, &b]), [once[1], once[0]]);
        let union = ScalableFilter::union(&[&a, &b], NO_LIMIT).unwrap();
        assert_eq!(
            ScalableFilter::union(&[&a, &b, &a, &b, &b], NO_LIMIT).unwrap(),
            union
        );
    }

    #[test]
    fn a_saturated_layer_keeps_its_source_count() {
        // A saturated layer's bits account for fewer items than were added to it: the
        // estimate is raised to the source's own count.
        for layout in [Layout::Blocked, Layout::Classic] {
            let s = spec(50, 0.25, 0, layout);
            let mut f = ScalableFilter::new(s, NO_LIMIT).unwrap();
            let mut i = 0u64;
            while f.items() < 50 {
                f.add(format!("{i}").as_bytes(), NO_LIMIT).unwrap();
                i += 1;
            }
            let union = ScalableFilter::union(&[&f, &f], NO_LIMIT).unwrap();
            assert_eq!(union.items(), 50, "{layout:?}");
        }
    }

    #[test]
    fn incompatible_sources_are_refused_saying_what_differs() {
        let base = spec(1000, 0.01, 2, Layout::Blocked);
        let first = ScalableFilter::new(base, NO_LIMIT).unwrap();
        let refused = |other: FilterSpec| {
            let other = ScalableFilter::new(other, NO_LIMIT).unwrap();
            let err = ScalableFilter::union(&[&first, &first, &other], NO_LIMIT).unwrap_err();
            assert_eq!(
                ScalableFilter::union_bytes(&[&first, &first, &other]),
                Err(err.clone())
            );
            assert_eq!(
                first.mismatch(&other),
                match &err {
                    MergeError::Incompatible(i) => Some(i.mismatch.clone()),
                    _ => None,
                }
            );
            err.to_string()
        };
        assert_eq!(
            refused(FilterSpec {
                error: 0.001,
                ..base
            }),
            "incompatible filters: source 3 has error rate 0.001, source 1 has error rate 0.01"
        );
        assert_eq!(
            refused(FilterSpec {
                capacity: 999,
                ..base
            }),
            "incompatible filters: source 3 has capacity 999, source 1 has capacity 1000"
        );
        assert_eq!(
            refused(FilterSpec {
                expansion: 4,
                ..base
            }),
            "incompatible filters: source 3 has expansion 4, source 1 has expansion 2"
        );
        assert_eq!(
            refused(spec(1000, 0.01, 0, Layout::Blocked)),
            "incompatible filters: source 3 is non-scaling, source 1 has expansion 2"
        );
        assert_eq!(
            refused(FilterSpec {
                layout: Layout::Classic,
                ..base
            }),
            "incompatible filters: source 3 has classic (RedisBloom) layers, source 1 has \
             blocked layers"
        );
        assert_eq!(first.mismatch(&first), None);
    }

    #[test]
    fn classic_filters_hashed_otherwise_or_with_other_layers_are_refused() {
        let s = spec(100, 0.01, 2, Layout::Classic);
        let f = filled(s, &items(6, 500, 1 << 40));
        let ScalableFilter::Classic(c) = &f else {
            panic!("classic")
        };
        // The same filter, as if written by an old RedisBloom with 32-bit hashes.
        let params = ClassicParams {
            options: c.params().options & !crate::bloom::classic::OPT_FORCE64,
            ..*c.params()
        };
        let layers: Vec<ClassicLayer> = c.layers().to_vec();
        let old = ScalableFilter::Classic(Chain::from_parts(
            layers.clone(),
            f.items(),
            f.error(),
            2,
            params,
        ));
        let err = ScalableFilter::union(&[&f, &old], NO_LIMIT).unwrap_err();
        assert_eq!(
            err.to_string(),
            "incompatible filters: source 2 hashes items differently (RedisBloom options 1), \
             source 1 has options 5"
        );
        // A second layer of another capacity than growth gives (RedisBloom loads such).
        let mut odd = layers;
        let plan = ClassicMeta::plan(333, odd[1].meta().error, params.options | 4).unwrap();
        odd[1] = ClassicLayer::new(plan).unwrap();
        let odd = ScalableFilter::Classic(Chain::from_parts(odd, 0, f.error(), 2, *c.params()));
        assert_eq!(
            ScalableFilter::union(&[&f, &odd], NO_LIMIT)
                .unwrap_err()
                .to_string(),
            "incompatible filters: layer 2 of source 2 has capacity 333, of source 1 200"
        );
        assert_eq!(
            ScalableFilter::union(&[], NO_LIMIT),
            Err(MergeError::NoSources)
        );
    }

    /// The classic chain of a filter.
    fn chain_of(f: &ScalableFilter) -> &Chain<ClassicLayer> {
        classic(f).expect("a classic filter")
    }

    #[test]
    fn every_source_s_layers_are_checked_against_the_longest_source_s() {
        let s = spec(100, 0.01, 2, Layout::Classic);
        let short = filled(s, &items(13, 50, 1 << 40));
        let grown = filled(s, &items(14, 300, 1 << 40));
        assert_eq!((short.layer_count(), grown.layer_count()), (1, 2));
        // `grown` with a second layer of another plan (a client's LOADCHUNK header can say
        // so): larger, whose bytes would overrun the union's layer, and smaller, whose items
        // the union would lose.
        let c = chain_of(&grown);
        let second = c.layers()[1].meta().entries;
        let other = |capacity: u64| {
            let mut layers = c.layers().to_vec();
            let plan =
                ClassicMeta::plan(capacity, layers[1].meta().error, c.params().options).unwrap();
            assert!(plan.bytes() != layers[1].meta().bytes());
            layers[1] = ClassicLayer::new(plan).unwrap();
            let odd = Chain::from_parts(layers, 0, c.error(), 2, *c.params());
            (ScalableFilter::Classic(odd), plan.entries)
        };
        for (odd, odd_capacity) in [other(second * 3), other(second / 4)] {
            let odd = &odd;
            // It agrees with the one-layer first source on the layer that one has.
            assert_eq!(short.mismatch(odd), None);
            let refused = |sources: &[&ScalableFilter]| {
                let err = ScalableFilter::union(sources, NO_LIMIT).unwrap_err();
                assert_eq!(ScalableFilter::union_bytes(sources), Err(err.clone()));
                err.to_string()
            };
            assert_eq!(
                refused(&[&short, &grown, odd]),
                format!(
                    "incompatible filters: layer 2 of source 3 has capacity {odd_capacity}, \
                     of source 2 {second}"
                )
            );
            // The longest first: source 2 is compared with it.
            assert_eq!(
                refused(&[&short, odd, &grown]),
                format!(
                    "incompatible filters: layer 2 of source 3 has capacity {second}, of \
                     source 2 {odd_capacity}"
                )
            );
            assert_eq!(
                refused(&[&grown, &short, odd]),
                format!(
                    "incompatible filters: layer 2 of source 3 has capacity {odd_capacity}, \
                     of source 1 {second}"
                )
            );
        }
    }

    #[test]
    fn a_blocked_union_of_full_layers_counts_each_at_most_its_capacity_and_reloads() {
        for layout in [Layout::Blocked, Layout::Classic] {
            let s = spec(100, 0.01, 2, layout);
            let (a, b) = (
                filled(s, &items(15, 1000, 1 << 40)),
                filled(s, &items(16, 1000, 1 << 40)),
            );
            let union = ScalableFilter::union(&[&a, &b], NO_LIMIT).unwrap();
            let layers = union.layer_summaries();
            assert_eq!(
                union.items(),
                layers.iter().map(|l| l.items).sum::<u64>(),
                "{layout:?}"
            );
            let over = layers.iter().filter(|l| l.items > l.capacity).count();
            match layout {
                Layout::Blocked => assert_eq!(over, 0, "{layout:?}: {layers:?}"),
                // RedisBloom's formats hold such counts: the estimate stands.
                Layout::Classic => assert!(over > 0, "{layout:?}: {layers:?}"),
            }
            // Its header loads at both strictnesses, and the chunks rebuild it.
            let header = codec::encode_header(&union);
            for strictness in [Strictness::LoadChunk, Strictness::Rdb] {
                codec::decode_header_with(&header, strictness).unwrap();
            }
            let decoded = codec::decode_header(&header).unwrap();
            assert_eq!(replayed(&union, &decoded), union, "{layout:?}");
            let (rdb, _) = codec::decode_rdb_header(&codec::encode_rdb_header(&union)).unwrap();
            assert_eq!(rdb, decoded, "{layout:?}");
        }
    }

    #[test]
    fn the_union_s_total_stays_below_all_ones_and_loads_strictly() {
        // Counts only a lax RDB load gives: the first layer's near u64's end.
        let s = spec(100, 0.01, 2, Layout::Classic);
        let (empty, grown) = (
            ScalableFilter::new(s, NO_LIMIT).unwrap(),
            filled(s, &items(17, 300, 1 << 40)),
        );
        let recount = |f: &ScalableFilter, counts: &[u64]| {
            let c = chain_of(f);
            let mut layers = c.layers().to_vec();
            for (layer, &count) in layers.iter_mut().zip(counts) {
                layer.set_items(count);
            }
            let total = counts.iter().fold(0u64, |t, &n| t.saturating_add(n));
            ScalableFilter::Classic(Chain::from_parts(layers, total, c.error(), 2, *c.params()))
        };
        let huge = recount(&empty, &[u64::MAX - 5]);
        let union = ScalableFilter::union(&[&huge, &recount(&grown, &[0, 100])], NO_LIMIT).unwrap();
        assert_eq!(layer_items(&union), [u64::MAX - 5, 4]);
        assert_eq!(union.items(), u64::MAX - 1);
        codec::decode_header(&codec::encode_header(&union)).unwrap();
    }

    #[test]
    fn a_union_over_the_limit_is_refused_before_anything_is_allocated() {
        for layout in [Layout::Blocked, Layout::Classic] {
            let s = spec(100, 0.01, 2, layout);
            let (a, b) = (
                filled(s, &items(7, 1000, 1 << 40)),
                filled(s, &items(8, 100, 1 << 40)),
            );
            let needed = ScalableFilter::union_bytes(&[&b, &a]).unwrap();
            assert_eq!(needed, a.memory_usage(), "{layout:?}");
            assert_eq!(
                ScalableFilter::union(&[&b, &a], needed - 1),
                Err(MergeError::Filter(FilterError::OverLimit {
                    needed,
                    limit: needed - 1
                }))
            );
            let union = ScalableFilter::union(&[&b, &a], needed).unwrap();
            assert_eq!(union.memory_usage(), needed);
        }
    }

    #[test]
    fn a_classic_union_stays_loadable_by_redisbloom_s_strict_header_check() {
        let s = spec(100, 0.01, 2, Layout::Classic);
        let (a, b) = (
            filled(s, &items(9, 800, 1 << 40)),
            filled(s, &items(10, 300, 1 << 40)),
        );
        let union = ScalableFilter::union(&[&a, &b], NO_LIMIT).unwrap();
        let header = codec::encode_header(&union);
        let decoded = codec::decode_header_with(&header, Strictness::LoadChunk).unwrap();
        assert_eq!(replayed(&union, &decoded), union);
    }
}

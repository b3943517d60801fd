//! The union of compatible windowed filters (BF.MERGE), slice by slice.
//!
//! # Why slices map by their start
//! Two windows with the same length, slices and slice spec, whose origins are a whole number of
//! slices apart, cut time at the same instants: each slice of one begins when a slice of the
//! other does and holds the items added in that same interval. So the union's slice that starts
//! at `t` is the `ScalableFilter::union` of every source's slice starting at `t` (the chains
//! of one spec match layer by layer, see `bloom::merge`), and an item of any source's slice
//! answers in the union for exactly as long as it did in that source.
//!
//! The union's origin is the earliest source's (every source's slice then has an id in it, and
//! the boundaries are every source's), its head the latest source's head. A source's slice that
//! head has left behind is not taken: by the union's time it has expired, and an expired slice
//! never comes back.
//!
//! # Time is an argument
//! With `now_ms`, the union is that of the sources each advanced to `slice_of(now_ms)` (what a
//! write on the primary does first), without advancing them: the primary can refuse the merge
//! before changing anything, then advance the sources, replicating that, and store the union; a
//! replica or an AOF replay, merging the advanced sources without a clock (`None`), builds the
//! same filter.
//!
//! # Checks before anything is allocated
//! The windows must agree (`WindowedFilter::mismatch`), and so must the slices that meet in one
//! slice of the union (`ScalableFilter::mismatch`: a filter loaded from another writer may have
//! layers its spec would not grow). The memory limit is checked once, over the sum of the
//! slices' `ScalableFilter::union_bytes`, before any slice is built, and so is the layer cap:
//! the union's slices together hold at most `MAX_LAYERS` layers, as any window does.

use crate::bloom::chain::MAX_LAYERS;
use crate::bloom::filter::ScalableFilter;
use crate::bloom::merge::{Incompatible, MergeError, Mismatch};
use crate::error::FilterError;
use crate::fallible::try_vec;
use crate::window::filter::{Slice, WindowedFilter};

/// A source's slice where the union puts it.
struct Part<'a> {
    /// The id of the union's slice it goes into.
    id: u64,
    /// Its source's index among the sources.
    source: usize,
    filter: &'a ScalableFilter,
}

/// What the union of some sources is made of, checked: no slice is built yet.
struct Plan<'a> {
    origin_ms: u64,
    head: u64,
    /// Ordered by the union's slice id, then by source.
    parts: Vec<Part<'a>>,
}

impl Plan<'_> {
    /// The parts of each slice of the union, oldest first.
    fn groups(&self) -> impl Iterator<Item = &[Part<'_>]> {
        self.parts.chunk_by(|a, b| a.id == b.id)
    }

    /// The filters of one slice's parts.
    fn filters<'p>(group: &'p [Part<'p>]) -> Result<Vec<&'p ScalableFilter>, MergeError> {
        let mut out = try_vec(group.len())?;
        out.extend(group.iter().map(|p| p.filter));
        Ok(out)
    }

    /// Bytes the union takes by the model `memory_usage` follows.
    fn bytes(&self) -> Result<u64, MergeError> {
        let mut chains = try_vec(self.groups().count())?;
        for group in self.groups() {
            chains.push(ScalableFilter::union_bytes(&Self::filters(group)?)?);
        }
        Ok(WindowedFilter::modelled_bytes(chains.len(), chains))
    }
}

/// The windows' spec as a union must share: their slices' growth (0: non-scaling).
fn growth(filter: &WindowedFilter) -> u32 {
    filter.expansion().unwrap_or(0)
}

/// The sources checked compatible, their slices placed in the union (see the module notes).
fn plan<'a>(sources: &[&'a WindowedFilter], now_ms: Option<u64>) -> Result<Plan<'a>, MergeError> {
    let first = sources.first().ok_or(MergeError::NoSources)?;
    let incompatible = |source, mismatch| {
        MergeError::Incompatible(Incompatible {
            source,
            against: 0,
            mismatch,
        })
    };
    for (source, filter) in sources.iter().enumerate().skip(1) {
        if let Some(mismatch) = first.mismatch(filter) {
            return Err(incompatible(source, mismatch));
        }
    }
    let slice_ms = first.slice_ms();
    let (earliest, origin_ms) = sources
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.origin_ms()))
        .min_by_key(|&(_, origin)| origin)
        .expect("at least one source");
    // Exact: the origins are a whole number of slices apart.
    let offset = |f: &WindowedFilter| (f.origin_ms() - origin_ms) / slice_ms;
    let mut head = 0u64;
    for (source, filter) in sources.iter().enumerate() {
        // `advance_to` never moves a head back.
        let own = now_ms.map_or(filter.head(), |now| filter.head().max(filter.slice_of(now)));
        let Some(id) = offset(filter).checked_add(own) else {
            // The earliest source has offset 0 and never overflows: when the first does, the
            // message names the earliest against it.
            let named = if source == 0 { earliest } else { source };
            return Err(incompatible(named, Mismatch::TooFarApart));
        };
        head = head.max(id);
    }
    let oldest_live = head.saturating_sub(u64::from(first.slices()));
    let held = sources.iter().map(|f| f.slice_filters().len()).sum();
    let mut parts = try_vec(held)?;
    for (source, filter) in sources.iter().enumerate() {
        for (id, slice) in filter.slice_filters() {
            // No overflow: a slice's id is at most its filter's head, checked above.
            let id = offset(filter) + id;
            if id >= oldest_live {
                parts.push(Part {
                    id,
                    source,
                    filter: slice,
                });
            }
        }
    }
    parts.sort_unstable_by_key(|p| (p.id, p.source));
    let plan = Plan {
        origin_ms,
        head,
        parts,
    };
    for group in plan.groups() {
        let lead = &group[0];
        for part in &group[1..] {
            if let Some(what) = lead.filter.mismatch(part.filter) {
                let start_ms = origin_ms.saturating_add(part.id.saturating_mul(slice_ms));
                let mismatch = Mismatch::Slice {
                    start_ms,
                    first: lead.source,
                    what: Box::new(what),
                };
                return Err(incompatible(part.source, mismatch));
            }
        }
    }
    // Each slice of the union has the layers of its longest part: over all slices, at most
    // what one filter may have, as a window's growth and a client's header are held.
    let layers: usize = plan
        .groups()
        .map(|g| g.iter().map(|p| p.filter.layer_count()).max().unwrap_or(0))
        .sum();
    if layers > MAX_LAYERS {
        return Err(FilterError::TooManyLayers { limit: MAX_LAYERS }.into());
    }
    Ok(plan)
}

impl WindowedFilter {
    /// How `other`'s window differs from this one's in what a union needs them to share, if it
    /// does: the window, the slices, the slices' spec (layout, growth, error rate and capacity,
    /// the window's as asked) and slice boundaries that line up.
    pub fn mismatch(&self, other: &WindowedFilter) -> Option<Mismatch> {
        let (a, b) = (self.spec(), other.spec());
        if a.window_ms != b.window_ms {
            return Some(Mismatch::Window {
                first: Some(a.window_ms),
                this: Some(b.window_ms),
            });
        }
        if a.slices != b.slices {
            return Some(Mismatch::Slices {
                first: a.slices,
                this: b.slices,
            });
        }
        if a.filter.layout != b.filter.layout {
            return Some(Mismatch::Layout {
                first: a.filter.layout,
                this: b.filter.layout,
            });
        }
        if growth(self) != growth(other) {
            return Some(Mismatch::Expansion {
                first: growth(self),
                this: growth(other),
            });
        }
        if a.filter.error != b.filter.error {
            return Some(Mismatch::ErrorRate {
                first: a.filter.error,
                this: b.filter.error,
            });
        }
        if a.filter.capacity != b.filter.capacity {
            return Some(Mismatch::Capacity {
                first: a.filter.capacity,
                this: b.filter.capacity,
            });
        }
        let apart_ms = self.origin_ms().abs_diff(other.origin_ms());
        let slice_ms = self.slice_ms();
        (!apart_ms.is_multiple_of(slice_ms)).then_some(Mismatch::Misaligned { apart_ms, slice_ms })
    }

    /// Bytes the union of `sources` (advanced to `now_ms`, if given) would take, by the model
    /// `memory_usage` follows, without allocating. The sources are checked compatible.
    pub fn union_bytes(
        sources: &[&WindowedFilter],
        now_ms: Option<u64>,
    ) -> Result<u64, MergeError> {
        plan(sources, now_ms)?.bytes()
    }

    /// The union of compatible windowed filters, slice by slice (see the module notes): every
    /// item of every slice live in a source (at `now_ms`, if given) is present in it for as
    /// long as it was there. Item counts are estimates, as a plain union's. Refused, with
    /// nothing allocated, when the sources differ in what a union needs them to share or the
    /// union would take more than `max_bytes`. The sources are not changed.
    pub fn union(
        sources: &[&WindowedFilter],
        now_ms: Option<u64>,
        max_bytes: u64,
    ) -> Result<WindowedFilter, MergeError> {
        let plan = plan(sources, now_ms)?;
        let needed = plan.bytes()?;
        if needed > max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: max_bytes,
            }
            .into());
        }
        let mut slices = try_vec(plan.groups().count())?;
        for group in plan.groups() {
            slices.push(Slice {
                id: group[0].id,
                // Checked above, as the sum of every slice's.
                filter: ScalableFilter::union(&Plan::filters(group)?, u64::MAX)?,
            });
        }
        Ok(WindowedFilter::from_parts(
            *sources[0].spec(),
            plan.origin_ms,
            plan.head,
            slices,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::filter::FilterSpec;
    use crate::window::codec;
    use crate::window::tests::{wspec, NO_LIMIT};
    use crate::window::WindowSpec;

    const SLICE: u64 = 1000;
    const T0: u64 = 1_700_000_000_000;

    /// A window of 4 slices of 1 s created at `origin`, with `per_slice` items added to each of
    /// the slices `heads` (advancing to each), items numbered by `tag` and the slice's start.
    fn window(origin: u64, heads: &[u64], tag: u64, per_slice: u64) -> WindowedFilter {
        let mut f = WindowedFilter::new(wspec(4 * SLICE, 4, 200, 2), origin, NO_LIMIT).unwrap();
        for &head in heads {
            f.advance_to(head);
            for i in 0..per_slice {
                f.add(&tagged(tag, f.slice_start_ms(head), i), NO_LIMIT)
                    .unwrap();
            }
        }
        f
    }

    fn tagged(tag: u64, start_ms: u64, i: u64) -> Vec<u8> {
        format!("{tag}:{start_ms}:{i}").into_bytes()
    }

    /// The items added to each slice `f` holds, with their slice's start.
    fn held_items(f: &WindowedFilter, tag: u64, per_slice: u64) -> Vec<(u64, Vec<u8>)> {
        f.slice_filters()
            .flat_map(|(id, _)| {
                let start = f.slice_start_ms(id);
                (0..per_slice).map(move |i| (start, tagged(tag, start, i)))
            })
            .collect()
    }

    /// The union's slice starting at `start_ms`, if it holds one.
    fn slice_at(f: &WindowedFilter, start_ms: u64) -> Option<&ScalableFilter> {
        f.slice_filters()
            .find(|&(id, _)| f.slice_start_ms(id) == start_ms)
            .map(|(_, s)| s)
    }

    #[test]
    fn slices_map_by_their_start_time_and_each_is_the_union_of_those_starting_then() {
        // b began two slices after a: its slice k starts with a's slice k + 2.
        let a = window(T0, &[0, 1, 2, 3], 1, 150);
        let b = window(T0 + 2 * SLICE, &[0, 1], 2, 400);
        let union = WindowedFilter::union(&[&b, &a], None, NO_LIMIT).unwrap();
        assert_eq!(union.origin_ms(), T0, "the earliest origin");
        assert_eq!(union.head(), 3, "the latest head");
        assert_eq!(union.spec(), a.spec());
        let starts: Vec<u64> = union.slice_filters().map(|(id, _)| id).collect();
        assert_eq!(starts, [0, 1, 2, 3]);
        for (id, slice) in union.slice_filters() {
            let start = union.slice_start_ms(id);
            // In the sources' order, which the estimated counts follow.
            let parts: Vec<&ScalableFilter> = [slice_at(&b, start), slice_at(&a, start)]
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(
                *slice,
                ScalableFilter::union(&parts, NO_LIMIT).unwrap(),
                "{id}"
            );
        }
        // Slices 2 and 3 grew in b: the union's take the longest chain.
        assert!(slice_at(&union, T0 + 2 * SLICE).unwrap().layer_count() > 1);
        for (source, tag, n) in [(&a, 1, 150), (&b, 2, 400)] {
            let (mut after_expiry, held) = (0, held_items(source, tag, n));
            for (start, item) in &held {
                let (start, item) = (*start, item.as_slice());
                assert!(union.contains(item), "lost {item:?} of slice {start}");
                // It expires with its slice, as in its source (but for false positives of
                // the slices still live).
                let expiry = (start - T0) / SLICE + 5;
                assert!(union.contains_at(item, expiry - 1));
                after_expiry += usize::from(union.contains_at(item, expiry));
            }
            assert!(
                after_expiry * 33 < held.len(),
                "{after_expiry} of {}",
                held.len()
            );
        }
        assert!(union.items() >= a.items().max(b.items()));
        assert!(union.items() <= a.items() + b.items());
        // A valid filter: its byte formats read it back.
        let header = codec::encode_header(&union);
        let copy = codec::decode_value(&header, codec::rdb_pieces(&union)).unwrap();
        assert_eq!(copy, union);
    }

    #[test]
    fn slices_the_latest_head_left_behind_are_not_taken() {
        // a moved on to slice 6 (slices 2 to 6 live); b, not advanced, still holds slices 0
        // to 3 by the same boundaries.
        let a = window(T0, &[0, 2, 5, 6], 1, 50);
        let b = window(T0, &[0, 1, 2, 3], 2, 50);
        let union = WindowedFilter::union(&[&a, &b], None, NO_LIMIT).unwrap();
        assert_eq!(union.head(), 6);
        let ids: Vec<u64> = union.slice_filters().map(|(id, _)| id).collect();
        assert_eq!(ids, [2, 3, 5, 6]);
        for (start, item) in held_items(&b, 2, 50) {
            let live = start >= T0 + 2 * SLICE;
            if live {
                assert!(union.contains(&item), "{item:?}");
            }
        }
        let gone: Vec<bool> = (0..50)
            .map(|i| union.contains(&tagged(2, T0, i)) || union.contains(&tagged(2, T0 + SLICE, i)))
            .collect();
        assert!(
            gone.iter().filter(|&&g| g).count() <= 2,
            "expired slices came back"
        );
        assert_eq!(union.slice_filters().len(), 4);
    }

    #[test]
    fn a_union_at_a_time_is_the_union_of_the_sources_advanced_to_it() {
        let a = window(T0, &[0, 1, 3], 1, 80);
        let b = window(T0 + 3 * SLICE, &[0, 1], 2, 80);
        let c = window(T0 + SLICE, &[0], 3, 80);
        for now in [
            T0,
            T0 + 4 * SLICE + 10,
            T0 + 6 * SLICE,
            T0 + 40 * SLICE,
            T0 - 5,
        ] {
            let mut advanced = [a.clone(), b.clone(), c.clone()];
            for f in &mut advanced {
                f.advance_to(f.slice_of(now));
            }
            let want = WindowedFilter::union(&advanced.iter().collect::<Vec<_>>(), None, NO_LIMIT)
                .unwrap();
            let got = WindowedFilter::union(&[&a, &b, &c], Some(now), NO_LIMIT).unwrap();
            assert_eq!(got, want, "now {now}");
            assert_eq!(
                WindowedFilter::union_bytes(&[&a, &b, &c], Some(now)).unwrap(),
                got.memory_usage()
            );
        }
        // The sources are not changed.
        assert_eq!(a, window(T0, &[0, 1, 3], 1, 80));
    }

    #[test]
    fn a_window_merged_with_itself_or_an_empty_one_keeps_its_slices_and_counts() {
        let a = window(T0, &[0, 1, 3, 4], 1, 300);
        let empty = WindowedFilter::new(*a.spec(), T0, NO_LIMIT).unwrap();
        for sources in [vec![&a], vec![&a, &a], vec![&empty, &a, &a]] {
            let union = WindowedFilter::union(&sources, None, NO_LIMIT).unwrap();
            assert_eq!(union, a);
            assert_eq!(union.memory_usage(), a.memory_usage());
            assert_eq!(union.slice_summaries(), a.slice_summaries());
        }
        let union = WindowedFilter::union(&[&empty, &empty], None, NO_LIMIT).unwrap();
        assert_eq!(union, empty);
        assert_eq!(union.memory_usage(), empty.memory_usage());
    }

    #[test]
    fn incompatible_windows_are_refused_saying_what_differs() {
        let base = wspec(4 * SLICE, 4, 200, 2);
        let first = WindowedFilter::new(base, T0, NO_LIMIT).unwrap();
        let refused = |other: WindowedFilter| {
            let err = WindowedFilter::union(&[&first, &first, &other], None, NO_LIMIT).unwrap_err();
            assert_eq!(
                WindowedFilter::union_bytes(&[&first, &first, &other], None),
                Err(err.clone())
            );
            err.to_string()
        };
        let made = |spec: WindowSpec, origin| WindowedFilter::new(spec, origin, NO_LIMIT).unwrap();
        assert_eq!(
            refused(made(wspec(8 * SLICE, 4, 200, 2), T0)),
            "incompatible filters: source 3 has a window of 8000 ms, source 1 of 4000 ms"
        );
        assert_eq!(
            refused(made(wspec(4 * SLICE, 2, 200, 2), T0)),
            "incompatible filters: source 3 has 2 slices, source 1 has 4 slices"
        );
        assert_eq!(
            refused(made(wspec(4 * SLICE, 4, 200, 0), T0)),
            "incompatible filters: source 3 is non-scaling, source 1 has expansion 2"
        );
        assert_eq!(
            refused(made(wspec(4 * SLICE, 4, 300, 2), T0)),
            "incompatible filters: source 3 has capacity 300, source 1 has capacity 200"
        );
        let rate = WindowSpec {
            filter: FilterSpec {
                error: 0.001,
                ..base.filter
            },
            ..base
        };
        assert_eq!(
            refused(made(rate, T0)),
            "incompatible filters: source 3 has error rate 0.001, source 1 has error rate 0.01"
        );
        assert_eq!(
            refused(made(base, T0 + 2 * SLICE + 250)),
            "incompatible filters: the slices of source 3 do not line up with those of source \
             1: their windows began 2250 ms apart, not a whole number of slices of 1000 ms"
        );
        // Whole slices apart, either way, is aligned.
        for origin in [T0 + 7 * SLICE, T0 - 3 * SLICE] {
            assert_eq!(first.mismatch(&made(base, origin)), None);
        }
        assert_eq!(
            WindowedFilter::union(&[], None, NO_LIMIT),
            Err(MergeError::NoSources)
        );
    }

    #[test]
    fn slices_meeting_in_one_must_have_the_same_layers() {
        // A slice loaded from another writer, with a first layer its spec would not make.
        let a = window(T0, &[0, 1], 1, 10);
        let odd = ScalableFilter::new(
            FilterSpec::new(999, a.spec().slice_spec().error, 2),
            NO_LIMIT,
        )
        .unwrap();
        let b = WindowedFilter::from_parts(*a.spec(), T0, 1, vec![Slice { id: 1, filter: odd }]);
        assert_eq!(a.mismatch(&b), None, "the windows agree");
        let err = WindowedFilter::union(&[&a, &b], None, NO_LIMIT).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "incompatible filters: in their slices starting at {} ms, source 2 has capacity \
                 999, source 1 has capacity 50",
                T0 + SLICE
            )
        );
        // Where they do not meet, nothing is compared.
        let c = WindowedFilter::from_parts(*a.spec(), T0, 3, Vec::new());
        assert!(WindowedFilter::union(&[&b, &c], None, NO_LIMIT).is_ok());
    }

    #[test]
    fn windows_too_far_apart_to_number_are_refused() {
        let spec = wspec(4 * SLICE, 4, 200, 2);
        let near = WindowedFilter::from_parts(spec, 0, 0, Vec::new());
        let far = WindowedFilter::from_parts(spec, 1000 * SLICE, u64::MAX, Vec::new());
        for (sources, source) in [([&near, &far], 2), ([&far, &near], 2)] {
            let err = WindowedFilter::union(&sources, None, NO_LIMIT).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "incompatible filters: the windows of source {source} and source 1 are too \
                     far apart in time to be numbered in one filter"
                )
            );
        }
    }

    /// Issue 23, items 2 and 5: two windows each within the cap, whose long slices lie in
    /// different slices of the union, would make a union of more layers than one filter may
    /// have: refused with the cap's error before anything is built.
    #[test]
    fn a_union_holds_at_most_the_layers_of_one_filter_over_its_slices() {
        use crate::window::tests::item;
        // 64 slices of capacity 1, EXPANSION 1: every new item is a new layer.
        let spec = wspec(64_000, 64, 1, 1);
        let grown = |slice: u64, layers: usize, tag: u64| {
            let mut f = WindowedFilter::new(spec, T0, NO_LIMIT).unwrap();
            f.advance_to(slice);
            let mut i = 0;
            while f.layer_count() < layers {
                f.add(&item(tag << 32 | i), NO_LIMIT).unwrap();
                i += 1;
            }
            f
        };
        let (a, b) = (grown(1, 600, 1), grown(2, 600, 2));
        let too_many = MergeError::Filter(FilterError::TooManyLayers { limit: MAX_LAYERS });
        assert_eq!(
            WindowedFilter::union(&[&a, &b], None, NO_LIMIT),
            Err(too_many.clone())
        );
        assert_eq!(WindowedFilter::union_bytes(&[&b, &a], None), Err(too_many));
        // Meeting in one slice, the union takes the longest part's layers: within the cap.
        let c = grown(2, 400, 3);
        let union = WindowedFilter::union(&[&a, &c], None, NO_LIMIT).unwrap();
        assert_eq!(union.layer_count(), 1000);
        let d = grown(2, 424, 4);
        let union = WindowedFilter::union(&[&d, &c, &a], None, NO_LIMIT).unwrap();
        assert_eq!(union.layer_count(), MAX_LAYERS);
    }

    #[test]
    fn a_union_over_the_limit_is_refused_before_anything_is_allocated() {
        let a = window(T0, &[0, 1, 2], 1, 500);
        let b = window(T0 + SLICE, &[0, 1, 2], 2, 100);
        let needed = WindowedFilter::union_bytes(&[&a, &b], None).unwrap();
        assert_eq!(
            WindowedFilter::union(&[&a, &b], None, needed - 1),
            Err(MergeError::Filter(FilterError::OverLimit {
                needed,
                limit: needed - 1
            }))
        );
        let union = WindowedFilter::union(&[&a, &b], None, needed).unwrap();
        assert_eq!(union.memory_usage(), needed);
        // Four slices: a's three, b's last (its first two start with a's last two).
        assert_eq!(union.slice_filters().len(), 4);
    }
}

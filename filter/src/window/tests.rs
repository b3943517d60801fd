use super::*;
use crate::bloom::filter::Layout;
use crate::bloom::sizing::SizingError;

pub(crate) const NO_LIMIT: u64 = u64::MAX;

pub(crate) fn item(i: u64) -> Vec<u8> {
    format!("item:{i}").into_bytes()
}

pub(crate) fn wspec(window_ms: u64, slices: u32, capacity: u64, expansion: u32) -> WindowSpec {
    WindowSpec {
        window_ms,
        slices,
        filter: FilterSpec::new(capacity, 0.01, expansion),
    }
}

#[test]
fn windows_that_cannot_be_sliced_are_refused() {
    let bad = |w: WindowSpec| WindowedFilter::new(w, 0, NO_LIMIT).unwrap_err();
    assert_eq!(
        bad(wspec(1000, 0, 100, 2)),
        FilterError::Sizing(SizingError::BadSlices)
    );
    assert_eq!(
        bad(wspec(1000, MAX_SLICES + 1, 100, 2)),
        FilterError::Sizing(SizingError::BadSlices)
    );
    assert_eq!(
        bad(wspec(3, 4, 100, 2)),
        FilterError::Sizing(SizingError::BadWindow)
    );
    assert_eq!(
        bad(wspec(1000, 4, 0, 2)),
        FilterError::Sizing(SizingError::BadCapacity)
    );
    let mut nan = wspec(1000, 4, 100, 2);
    nan.filter.error = f64::NAN;
    assert_eq!(bad(nan), FilterError::Sizing(SizingError::BadErrorRate));
    assert!(WindowedFilter::new(wspec(4, 4, 100, 2), 0, NO_LIMIT).is_ok());
    assert!(WindowedFilter::new(wspec(1000, MAX_SLICES, 100, 2), 0, NO_LIMIT).is_ok());
}

#[test]
fn slices_are_rounded_up_and_share_the_capacity_and_the_rate() {
    let w = wspec(1000, 3, 100, 2);
    assert_eq!(w.slice_ms(), 334);
    let s = w.slice_spec();
    assert_eq!(s.capacity, 34);
    assert_eq!(s.error, 0.01 / 4.0);
    assert_eq!(s.expansion, 2);
    assert_eq!(wspec(1000, 4, 1, 2).slice_spec().capacity, 1);
}

#[test]
fn slice_ids_count_from_the_origin_and_never_before_it() {
    let f = WindowedFilter::new(wspec(1000, 4, 100, 2), 5000, NO_LIMIT).unwrap();
    assert_eq!(f.origin_ms(), 5000);
    assert_eq!(f.slice_of(0), 0);
    assert_eq!(f.slice_of(5249), 0);
    assert_eq!(f.slice_of(5250), 1);
    assert_eq!(f.slice_of(u64::MAX), (u64::MAX - 5000) / 250);
    assert_eq!(f.slice_start_ms(2), 5500);
    assert_eq!(f.slice_start_ms(u64::MAX), u64::MAX);
}

#[test]
fn a_new_filter_and_a_moved_head_allocate_nothing() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 1000, 2), 0, NO_LIMIT).unwrap();
    let empty = f.memory_usage();
    assert_eq!(f.layer_count(), 0);
    assert!(f.slice_summaries().is_empty());
    let mut blocks = 0;
    f.allocations(|_| blocks += 1);
    assert_eq!(blocks, 0);
    assert_eq!(
        f.advance_to(7),
        Advance {
            expired: 0,
            moved: true
        }
    );
    assert_eq!(f.memory_usage(), empty);
    assert!(f.may_allocate(1));
    assert_eq!(f.add(&item(1), NO_LIMIT), Ok(true));
    assert!(f.memory_usage() > empty);
    assert_eq!(f.slice_summaries()[0].id, 7);
    assert!(!f.may_allocate(1));
}

#[test]
fn an_item_answers_for_its_window_and_is_forgotten_one_slice_later() {
    // 4 slices of 250 ms.
    let mut f = WindowedFilter::new(wspec(1000, 4, 1000, 2), 10_000, NO_LIMIT).unwrap();
    let t = 10_000 + 600; // slice 2
    f.advance_to(f.slice_of(t));
    assert_eq!(f.add(&item(1), NO_LIMIT), Ok(true));
    for now in (t..t + 1000).step_by(7).chain([t + 1000]) {
        f.advance_to(f.slice_of(now));
        assert!(f.contains(&item(1)), "forgotten at {}", now - t);
        assert!(f.contains_at(&item(1), f.slice_of(now)));
    }
    // Slice 2 lives while the current slice is at most 6: until 10_000 + 7 * 250.
    let gone = 10_000 + 7 * 250;
    assert!(gone <= t + 1000 + 250);
    assert_eq!(f.advance_to(f.slice_of(gone - 1)).expired, 0);
    assert!(f.contains(&item(1)));
    assert_eq!(
        f.advance_to(f.slice_of(gone)),
        Advance {
            expired: 1,
            moved: true
        }
    );
    assert!(!f.contains(&item(1)));
    assert_eq!(f.layer_count(), 0);
    assert_eq!(f.items(), 0);
}

#[test]
fn advancing_is_idempotent_and_never_goes_back() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 100, 2), 0, NO_LIMIT).unwrap();
    for head in 0..6u64 {
        f.advance_to(head);
        f.add(&item(head), NO_LIMIT).unwrap();
    }
    // Slice ids 1..=5 are live (0 expired when the head reached 5).
    let ids: Vec<u64> = f.slice_summaries().iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    let before = f.clone();
    assert!(!f.due(5));
    assert!(!f.due(2));
    assert_eq!(f.advance_to(5), Advance::default());
    assert_eq!(f.advance_to(0), Advance::default());
    assert_eq!(f, before);
    assert!(f.due(6));
    assert_eq!(f.advance_to(8).expired, 3);
    assert_eq!(f.advance_to(8), Advance::default());
    assert_eq!(f.head(), 8);
    let ids: Vec<u64> = f.slice_summaries().iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![4, 5]);
    assert_eq!(f.advance_to(u64::MAX).expired, 2);
    assert_eq!(f.memory_usage(), before.clone_empty_bytes());
}

impl WindowedFilter {
    fn clone_empty_bytes(&self) -> u64 {
        WindowedFilter::new(*self.spec(), 0, NO_LIMIT)
            .unwrap()
            .memory_usage()
    }
}

#[test]
fn lookups_by_a_clock_skip_expired_slices_without_dropping_them() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 100, 2), 0, NO_LIMIT).unwrap();
    f.add(&item(0), NO_LIMIT).unwrap();
    f.advance_to(3);
    f.add(&item(3), NO_LIMIT).unwrap();
    let probes = [&item(0)[..], &item(3)[..], &item(99)[..]];
    assert_eq!(f.contains_many_at(&probes, 4), vec![true, true, false]);
    assert_eq!(f.contains_many_at(&probes, 5), vec![false, true, false]);
    assert!(!f.contains_at(&item(0), 5));
    assert!(!f.contains_at(&item(3), 8));
    // What the filter holds still answers (a replica between two expiries).
    assert_eq!(f.contains_many(&probes), vec![true, true, false]);
    assert!(f.contains(&item(0)));
}

#[test]
fn an_add_of_an_item_from_an_older_slice_reports_it_present_and_refreshes_it() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 100, 2), 0, NO_LIMIT).unwrap();
    assert_eq!(f.add(&item(1), NO_LIMIT), Ok(true));
    f.advance_to(3);
    assert_eq!(f.add(&item(1), NO_LIMIT), Ok(false));
    assert_eq!(
        f.add_many(&[&item(1)[..], &item(2)[..], &item(2)[..]], NO_LIMIT),
        vec![Ok(false), Ok(true), Ok(false)]
    );
    // Slice 0 expires at 5; the refreshed copy in slice 3 lives on.
    assert_eq!(f.advance_to(5).expired, 1);
    assert!(f.contains(&item(1)));
    assert_eq!(f.items(), 2);
}

#[test]
fn batches_answer_exactly_like_one_by_one() {
    for expansion in [2, 0] {
        let mut one = WindowedFilter::new(wspec(1000, 4, 80, expansion), 0, NO_LIMIT).unwrap();
        let mut many = one.clone();
        for head in 0..7u64 {
            one.advance_to(head);
            many.advance_to(head);
            let items: Vec<Vec<u8>> = (0..60).map(|i| item(head * 13 + i % 40)).collect();
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let mut expected = Vec::new();
            for r in &refs {
                let result = one.add(r, NO_LIMIT);
                let failed = result.is_err();
                expected.push(result);
                if failed {
                    break;
                }
            }
            assert_eq!(many.add_many(&refs, NO_LIMIT), expected, "head {head}");
            assert_eq!(many, one);
            let probes: Vec<Vec<u8>> = (0..200).map(item).collect();
            let probe_refs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
            let singles: Vec<bool> = probe_refs.iter().map(|p| one.contains(p)).collect();
            assert_eq!(many.contains_many(&probe_refs), singles);
            let at: Vec<bool> = probe_refs
                .iter()
                .map(|p| one.contains_at(p, head + 2))
                .collect();
            assert_eq!(many.contains_many_at(&probe_refs, head + 2), at);
        }
    }
}

#[test]
fn a_busy_slice_grows_unless_nonscaling() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 40, 2), 0, NO_LIMIT).unwrap();
    for i in 0..100 {
        assert_eq!(f.add(&item(i), NO_LIMIT), Ok(true), "{i}");
    }
    assert!(f.layer_count() > 1);
    let mut n = WindowedFilter::new(wspec(1000, 4, 40, 0), 0, NO_LIMIT).unwrap();
    assert_eq!(n.expansion(), None);
    let mut full = None;
    for i in 0..100 {
        if let Err(e) = n.add(&item(i), NO_LIMIT) {
            full = Some((i, e));
            break;
        }
    }
    let (at, e) = full.expect("a non-scaling slice fills");
    assert_eq!(e, FilterError::Full);
    assert_eq!(at, 10);
    assert_eq!(n.layer_count(), 1);
    // The next slice takes items again.
    n.advance_to(1);
    assert_eq!(n.add(&item(1000), NO_LIMIT), Ok(true));
}

#[test]
fn limits_count_the_whole_filter_and_a_refusal_changes_nothing() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 400, 2), 0, NO_LIMIT).unwrap();
    f.add(&item(0), NO_LIMIT).unwrap();
    let one_slice = f.memory_usage();
    f.advance_to(1);
    // Room for the slice held, not for a second one.
    let before = f.clone();
    let limit = one_slice + 16;
    let e = f.add(&item(1), limit).unwrap_err();
    let FilterError::OverLimit { needed, limit: l } = e else {
        panic!("{e:?}")
    };
    assert_eq!(l, limit);
    assert!(needed > limit);
    assert_eq!(f, before);
    assert_eq!(f.add_many(&[&item(1)[..]], limit), vec![Err(e)]);
    assert_eq!(f, before);
    // A slice that would grow past the limit is refused the same way.
    let mut g = WindowedFilter::new(wspec(1000, 1, 20, 2), 0, NO_LIMIT).unwrap();
    g.add(&item(0), NO_LIMIT).unwrap();
    let limit = g.memory_usage() + 8;
    let mut refused = None;
    for i in 1..100 {
        let snapshot = g.clone();
        match g.add(&item(i), limit) {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(g, snapshot);
                refused = Some(e);
                break;
            }
        }
    }
    assert!(matches!(
        refused,
        Some(FilterError::OverLimit { limit: l, needed }) if l == limit && needed > limit
    ));
    // A filter whose first slice can never fit is refused at creation.
    let tiny = WindowedFilter::new(wspec(1000, 4, 100_000, 2), 0, 1000).unwrap_err();
    assert!(matches!(tiny, FilterError::OverLimit { limit: 1000, .. }));
}

#[test]
fn memory_usage_is_the_box_the_table_and_the_slices() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 1000, 2), 0, NO_LIMIT).unwrap();
    let empty = f.memory_usage();
    for head in 0..4u64 {
        f.advance_to(head);
        for i in 0..300 {
            f.add(&item(head * 1000 + i), NO_LIMIT).unwrap();
        }
    }
    let slices: u64 = f.slice_summaries().iter().map(|s| s.bytes).sum();
    let table = crate::footprint::allocation((4 * std::mem::size_of::<filter::Slice>()) as u64, 8);
    assert_eq!(f.memory_usage(), empty + table + slices);
    let mut blocks = 0;
    f.allocations(|_| blocks += 1);
    // The table, and per slice its layer table and its bit arrays.
    assert_eq!(blocks, 1 + 4 + f.layer_count());
    // After expiry the table is exact again: the figure is the one a reload gives.
    f.advance_to(6);
    let slices: u64 = f.slice_summaries().iter().map(|s| s.bytes).sum();
    let table = crate::footprint::allocation((2 * std::mem::size_of::<filter::Slice>()) as u64, 8);
    assert_eq!(f.memory_usage(), empty + table + slices);
}

#[test]
fn try_clone_is_deep_and_equal() {
    for layout in [Layout::Blocked, Layout::Classic] {
        let mut w = wspec(1000, 4, 50, 2);
        w.filter.layout = layout;
        let mut f = WindowedFilter::new(w, 123, NO_LIMIT).unwrap();
        for head in 0..3 {
            f.advance_to(head);
            for i in 0..80 {
                f.add(&item(head * 100 + i), NO_LIMIT).unwrap();
            }
        }
        let mut g = f.try_clone().unwrap();
        assert_eq!(g, f);
        assert_eq!(g.memory_usage(), f.memory_usage());
        g.add(&item(100_000), NO_LIMIT).unwrap();
        assert_ne!(g, f);
    }
}

#[test]
fn figures_describe_the_window() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 100, 2), 50, NO_LIMIT).unwrap();
    f.add_many(&[&item(1)[..], &item(2)[..]], NO_LIMIT);
    f.advance_to(2);
    f.add(&item(3), NO_LIMIT).unwrap();
    assert_eq!(f.capacity(), 100);
    assert_eq!(f.error(), 0.01);
    assert_eq!(f.expansion(), Some(2));
    assert_eq!((f.window_ms(), f.slices(), f.slice_ms()), (1000, 4, 250));
    assert_eq!(f.items(), 3);
    let s = f.slice_summaries();
    assert_eq!(s.len(), 2);
    assert_eq!((s[0].id, s[0].start_ms, s[0].items), (0, 50, 2));
    assert_eq!((s[1].id, s[1].start_ms, s[1].items), (2, 550, 1));
    assert_eq!(s[0].capacity, 25);
    assert_eq!(s[0].layers, 1);
    let lines = f.debug_lines();
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].starts_with("slice:0 start_ms:50 items:2"),
        "{lines:?}"
    );
    assert!(lines[2].starts_with("slice:2 "), "{lines:?}");
}

#[test]
fn the_union_of_live_slices_keeps_under_the_windows_rate_at_the_planned_load() {
    // A window filled at its planned rate: `capacity / slices` items per slice, measured with
    // every generation live (the worst moment).
    let (capacity, slices) = (20_000u64, 4u32);
    let mut f = WindowedFilter::new(wspec(1000, slices, capacity, 2), 0, NO_LIMIT).unwrap();
    let per_slice = capacity / u64::from(slices);
    for head in 0..=u64::from(slices) {
        f.advance_to(head);
        for i in 0..per_slice {
            f.add(&item(head * per_slice + i), NO_LIMIT).unwrap();
        }
    }
    assert_eq!(f.slice_summaries().len(), slices as usize + 1);
    let probes = 400_000u64;
    let positives = (0..probes)
        .filter(|j| f.contains(format!("absent:{j}").as_bytes()))
        .count() as f64;
    let measured = positives / probes as f64;
    let sd = (0.01 / probes as f64).sqrt();
    assert!(measured <= 0.01 + 3.0 * sd, "measured {measured}");
}

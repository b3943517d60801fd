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
fn an_add_of_an_item_from_an_older_slice_refreshes_it_and_says_it_was_in_the_window() {
    let mut f = WindowedFilter::new(wspec(1000, 4, 100, 2), 0, NO_LIMIT).unwrap();
    let added = |changed, in_window| Ok(Added { changed, in_window });
    assert_eq!(f.add_detailed(&item(1), NO_LIMIT), added(true, false));
    assert_eq!(f.add_detailed(&item(1), NO_LIMIT), added(false, true));
    f.advance_to(3);
    // Held by slice 0 only: the head slice takes it, a change to replicate.
    assert_eq!(f.add_detailed(&item(1), NO_LIMIT), added(true, true));
    assert_eq!(f.add(&item(1), NO_LIMIT), Ok(false));
    assert_eq!(
        f.add_many_detailed(&[&item(1)[..], &item(2)[..], &item(2)[..]], NO_LIMIT),
        vec![added(false, true), added(true, false), added(false, true)]
    );
    f.advance_to(4);
    assert_eq!(f.add(&item(2), NO_LIMIT), Ok(true));
    // Slice 0 expires at 5; the refreshed copy in slice 3 lives on.
    assert_eq!(f.advance_to(5).expired, 1);
    assert!(f.contains(&item(1)));
    assert_eq!(f.items(), 3);
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
            let mut detailed = one.clone();
            let mut singles = one.clone();
            let got = detailed.add_many_detailed(&refs, NO_LIMIT);
            let want: Vec<_> = refs
                .iter()
                .map(|r| singles.add_detailed(r, NO_LIMIT))
                .take(got.len())
                .collect();
            assert_eq!(got, want, "head {head}");
            assert_eq!(detailed, singles);
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

mod formats {
    use super::*;
    use crate::bloom::codec::{CodecError, Strictness};
    use crate::window::codec::{self, WindowLoader};

    /// Filters of both layouts, scaling and not, with expired, empty and grown slices.
    pub(crate) fn samples() -> Vec<WindowedFilter> {
        let mut out = Vec::new();
        for layout in [Layout::Blocked, Layout::Classic] {
            for expansion in [2, 0] {
                let mut w = wspec(10_000, 4, 60, expansion);
                w.filter.layout = layout;
                let empty = WindowedFilter::new(w, 1_700_000_000_000, NO_LIMIT).unwrap();
                out.push(empty.clone());
                let mut f = empty;
                for head in [0u64, 1, 3, 4, 6, 7] {
                    f.advance_to(head);
                    for i in 0..(10 + head * 7) {
                        let _ = f.add(&item(head * 1000 + i), NO_LIMIT);
                    }
                    out.push(f.clone());
                }
                // Moved past every slice: nothing held, the head far on.
                let mut gone = f.clone();
                gone.advance_to(1 << 40);
                out.push(gone);
            }
        }
        out
    }

    fn rdb_round_trip(f: &WindowedFilter) -> WindowedFilter {
        let header = codec::encode_header(f);
        codec::decode_value(&header, codec::rdb_pieces(f)).unwrap()
    }

    fn stream_round_trip(f: &WindowedFilter) -> WindowedFilter {
        let header = codec::encode_header(f);
        let (h, warnings) = codec::decode_header(&header, Strictness::LoadChunk).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(h.memory_bytes(), f.memory_usage());
        let mut g = codec::filter_from_header(&h, NO_LIMIT).unwrap();
        let mut it = 1;
        loop {
            let (next, data) = codec::dump_chunk(f, it);
            if next == 0 {
                break;
            }
            codec::load_chunk(&mut g, next, data).unwrap();
            it = next;
        }
        g
    }

    /// Both formats read back, checked equal; the stream's copy is returned.
    pub(crate) fn round_trip_both(f: &WindowedFilter) -> WindowedFilter {
        let rdb = rdb_round_trip(f);
        assert_eq!(&rdb, f);
        stream_round_trip(f)
    }

    #[test]
    fn rdb_values_and_scandump_streams_read_back_exactly() {
        for f in samples() {
            for g in [rdb_round_trip(&f), stream_round_trip(&f)] {
                assert_eq!(g, f);
                assert_eq!(g.memory_usage(), f.memory_usage());
                assert_eq!(g.slice_summaries(), f.slice_summaries());
                assert_eq!(codec::encode_header(&g), codec::encode_header(&f));
            }
        }
    }

    #[test]
    fn a_decoded_filter_keeps_rotating_and_adding_like_the_original() {
        for f in samples() {
            let mut a = f.clone();
            let mut b = rdb_round_trip(&f);
            let next = a.head() + 2;
            assert_eq!(a.advance_to(next), b.advance_to(next));
            for i in 0..50 {
                assert_eq!(
                    a.add(&item(1 << 20 | i), NO_LIMIT),
                    b.add(&item(1 << 20 | i), NO_LIMIT)
                );
            }
            assert_eq!(a, b);
        }
    }

    #[test]
    fn scandump_chunks_follow_the_plain_filters_cursor_and_never_cross_a_layer() {
        let f = samples()
            .into_iter()
            .max_by_key(|f| f.layer_count())
            .unwrap();
        let lengths: Vec<u64> = f
            .slice_filters()
            .flat_map(|(_, c)| c.layer_bytes().into_iter().map(|b| b.len() as u64))
            .collect();
        assert!(
            f.slice_summaries().len() >= 3 && lengths.len() > 4,
            "{lengths:?}"
        );
        let mut it = 1;
        let mut seen = Vec::new();
        loop {
            let (next, data) = codec::dump_chunk(&f, it);
            if next == 0 {
                assert!(data.is_empty());
                break;
            }
            assert_eq!(next, it + data.len() as i64);
            seen.push(data.len() as u64);
            it = next;
        }
        assert_eq!(seen, lengths);
        assert_eq!(codec::dump_chunk(&f, 0), (0, &[][..]));
        assert_eq!(codec::dump_chunk(&f, -5), (0, &[][..]));
        assert_eq!(codec::dump_chunk(&f, i64::MAX), (0, &[][..]));
        // A cursor inside a layer resumes there.
        let (next, data) = codec::dump_chunk(&f, 3);
        assert_eq!(data.len() as u64, lengths[0] - 2);
        assert_eq!(next, 1 + lengths[0] as i64);
    }

    #[test]
    fn load_chunk_refuses_like_the_plain_filter() {
        let f = samples()
            .into_iter()
            .max_by_key(|f| f.layer_count())
            .unwrap();
        let (h, _) =
            codec::decode_header(&codec::encode_header(&f), Strictness::LoadChunk).unwrap();
        let mut g = codec::filter_from_header(&h, NO_LIMIT).unwrap();
        let before = g.clone();
        let total = h.bits_bytes() as i64;
        let first = f.slice_filters().next().unwrap().1.layer_bytes()[0].len() as i64;
        assert_eq!(
            codec::load_chunk(&mut g, 2, &[1, 2, 3]),
            Err(CodecError::BadData("iterator before the chunk's end"))
        );
        assert_eq!(
            codec::load_chunk(&mut g, 3, &[1, 2, 3]),
            Err(CodecError::NoLink)
        );
        assert_eq!(
            codec::load_chunk(&mut g, total + 2, &[1]),
            Err(CodecError::NoLink)
        );
        // Crossing from the first layer into the next.
        assert_eq!(
            codec::load_chunk(&mut g, first + 3, &[1, 1, 1, 1]),
            Err(CodecError::TooBig)
        );
        assert_eq!(g, before);
        // An empty chunk at a valid offset writes nothing.
        assert_eq!(codec::load_chunk(&mut g, 1, &[]), Ok(()));
        assert_eq!(g, before);
    }

    #[test]
    fn the_header_of_an_empty_window_is_fixed() {
        let w = WindowSpec {
            window_ms: 1000,
            slices: 4,
            filter: FilterSpec::new(100, 0.5, 2),
        };
        let mut f = WindowedFilter::new(w, 258, NO_LIMIT).unwrap();
        f.advance_to(3);
        let mut expected = b"LBWINDOW".to_vec();
        expected.extend([1, 0, 0, 0]); // version, blocked, scaling, reserved
        expected.extend([4, 0, 0, 0, 2, 0, 0, 0]); // slices, expansion
        expected.extend([0xe8, 3, 0, 0, 0, 0, 0, 0]); // window 1000
        expected.extend([100, 0, 0, 0, 0, 0, 0, 0]); // capacity
        expected.extend([0, 0, 0, 0, 0, 0, 0xe0, 0x3f]); // 0.5
        expected.extend([2, 1, 0, 0, 0, 0, 0, 0]); // origin 258
        expected.extend([3, 0, 0, 0, 0, 0, 0, 0]); // head
        expected.extend([0, 0, 0, 0]); // no slice held
        assert_eq!(codec::encode_header(&f), expected);
        assert!(codec::is_window_header(&expected));
        assert_eq!(codec::decode_value(&expected, []).unwrap(), f);
    }

    #[test]
    fn every_truncation_and_every_trailing_byte_is_refused() {
        for f in samples() {
            let header = codec::encode_header(&f);
            for len in 0..header.len() {
                assert!(
                    codec::decode_header(&header[..len], Strictness::Rdb).is_err(),
                    "{len}"
                );
            }
            let mut long = header.clone();
            long.push(0);
            assert!(codec::decode_header(&long, Strictness::Rdb).is_err());
            let pieces = codec::rdb_pieces(&f);
            if let Some((last, rest)) = pieces.split_last() {
                assert!(codec::decode_value(&header, rest.iter().copied()).is_err());
                let short = &last[..last.len() - 1];
                let cut = rest.iter().copied().chain([short]);
                assert!(codec::decode_value(&header, cut).is_err());
            }
            let extra = pieces.iter().copied().chain([&[0u8][..]]);
            assert!(codec::decode_value(&header, extra).is_err());
        }
    }

    /// Overwrites `bytes` at `at` with `with`.
    fn patched(bytes: &[u8], at: usize, with: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        out[at..at + with.len()].copy_from_slice(with);
        out
    }

    #[test]
    fn impossible_fields_are_refused() {
        let f = samples()
            .into_iter()
            .find(|f| f.slice_summaries().len() == 3)
            .unwrap();
        let h = codec::encode_header(&f);
        let bad = |b: Vec<u8>| codec::decode_header(&b, Strictness::Rdb).unwrap_err();
        for (at, with, why) in [
            (0, &b"LAYERBLM"[..], "not a windowed filter's header"),
            (8, &[2][..], "unknown windowed header version"),
            (9, &[2][..], "unknown layout"),
            (10, &[2][..], "non-scaling flag out of range"),
            (11, &[1][..], "reserved bytes are not zero"),
            (12, &[0, 0, 0, 0][..], "window parameters out of range"),
            (12, &[65, 0, 0, 0][..], "window parameters out of range"),
            (16, &[0, 0, 1, 0][..], "expansion out of range"),
            (
                20,
                &[3, 0, 0, 0, 0, 0, 0, 0][..],
                "window parameters out of range",
            ),
            (28, &[0; 8][..], "window parameters out of range"),
            (
                36,
                &1.0f64.to_le_bytes()[..],
                "window parameters out of range",
            ),
            (
                36,
                &f64::NAN.to_le_bytes()[..],
                "window parameters out of range",
            ),
            (60, &[6, 0, 0, 0][..], "more slices held than a window has"),
            // The head before the newest slice, or so far on that the oldest is expired.
            (52, &[0; 8][..], "a slice outside the window"),
            (
                52,
                &[99, 0, 0, 0, 0, 0, 0, 0][..],
                "a slice outside the window",
            ),
        ] {
            assert_eq!(
                bad(patched(&h, at, with)),
                CodecError::BadData(why),
                "at {at}"
            );
        }
        // Slice ids out of order: the second slice given the first's id.
        let first_id = &h[64..72];
        let chain_len = u32::from_le_bytes(h[72..76].try_into().unwrap()) as usize;
        let second = 64 + 12 + chain_len;
        assert_eq!(
            bad(patched(&h, second, first_id)),
            CodecError::BadData("slice ids are not increasing")
        );
        // A chain length past the end.
        assert_eq!(
            bad(patched(&h, 72, &[0xff, 0xff, 0xff, 0x7f])),
            CodecError::BadData("header is truncated")
        );
        // A slice whose growth differs from the window's.
        let mut nonscaling = patched(&h, 10, &[1]);
        nonscaling[16..20].copy_from_slice(&2u32.to_le_bytes());
        assert_eq!(
            bad(nonscaling),
            CodecError::BadData("a slice's growth differs from the window's")
        );
    }

    #[test]
    fn no_single_byte_change_of_a_header_panics_and_accepted_ones_build_sound_filters() {
        for f in samples().into_iter().step_by(3) {
            let header = codec::encode_header(&f);
            let pieces = codec::rdb_pieces(&f);
            for at in 0..header.len() {
                for with in [0u8, 1, 0x7f, 0x80, 0xff] {
                    let h = patched(&header, at, &[with]);
                    if let Ok(mut g) = codec::decode_value(&h, pieces.iter().copied()) {
                        g.advance_to(g.head() + 1);
                        let _ = g.add(b"x", 1 << 24);
                        let _ = g.contains(b"y");
                        let _ = codec::rdb_pieces(&g);
                        let _ = codec::dump_chunk(&g, 1);
                    }
                }
            }
        }
    }

    #[test]
    fn a_header_over_the_budget_allocates_nothing() {
        let f = samples()
            .into_iter()
            .max_by_key(|f| f.memory_usage())
            .unwrap();
        let (h, _) =
            codec::decode_header(&codec::encode_header(&f), Strictness::LoadChunk).unwrap();
        let needed = f.memory_usage();
        assert_eq!(
            codec::filter_from_header(&h, needed - 1).unwrap_err(),
            CodecError::Filter(FilterError::OverLimit {
                needed,
                limit: needed - 1
            })
        );
        assert!(codec::filter_from_header(&h, needed).is_ok());
        // Through the RDB source, a client's RESTORE.
        struct Src(std::vec::IntoIter<Vec<u8>>);
        impl codec::RdbSource for Src {
            type Buffer = Vec<u8>;
            fn unsigned(&mut self) -> Result<u64, CodecError> {
                Err(CodecError::BadData("no unsigned"))
            }
            fn double(&mut self) -> Result<f64, CodecError> {
                Err(CodecError::BadData("no double"))
            }
            fn buffer(&mut self) -> Result<Vec<u8>, CodecError> {
                self.0.next().ok_or(CodecError::BadData("value ends"))
            }
        }
        let value: Vec<Vec<u8>> = std::iter::once(codec::encode_header(&f))
            .chain(codec::rdb_pieces(&f).into_iter().map(<[u8]>::to_vec))
            .collect();
        let src = || Src(value.clone().into_iter());
        assert!(matches!(
            codec::load_rdb(&mut src(), Some(needed - 1), None),
            Err(CodecError::Filter(FilterError::OverLimit { .. }))
        ));
        assert_eq!(
            codec::load_rdb(&mut src(), Some(needed), None).unwrap().0,
            f
        );
        assert_eq!(codec::load_rdb(&mut src(), None, None).unwrap().0, f);
        // A header alone: the loader wants its pieces.
        let mut header_only = Src(vec![codec::encode_header(&f)].into_iter());
        assert!(codec::load_rdb(&mut header_only, None, None).is_err());
        let (h, _) = codec::decode_header(&value[0], Strictness::Rdb).unwrap();
        let loader = WindowLoader::new(h).unwrap();
        assert!(loader.next_piece_len().is_some());
        assert!(loader.finish().is_err());
    }
}

mod differential {
    use super::formats::round_trip_both;
    use super::*;
    use crate::hash::mix64;
    use std::collections::HashMap;

    /// A seeded random walk of adds, batches, moves of the window, clones and round trips of
    /// both formats, against a model of when each item was last added: an item added within
    /// the window is never missing, and adding it again says it was present.
    fn walk(seed: u64, spec: WindowSpec, steps: usize) {
        let mut state = seed;
        let mut next = move || {
            state = mix64(state.wrapping_add(0x9e37_79b9_7f4a_7c15));
            state
        };
        let slices = u64::from(spec.slices);
        let mut f = WindowedFilter::new(spec, 1_000_000, NO_LIMIT).unwrap();
        // item -> the slice it was last put into.
        let mut last_added: HashMap<u64, u64> = HashMap::new();
        let pool = 4 * spec.filter.capacity;
        let live = |f: &WindowedFilter, k: u64| k + slices >= f.head();
        for step in 0..steps {
            let what = format!("seed {seed} step {step} head {}", f.head());
            match next() % 16 {
                0..=6 => {
                    let i = next() % pool;
                    let was = last_added.get(&i).copied().filter(|&k| live(&f, k));
                    match f.add_detailed(&item(i), NO_LIMIT) {
                        Ok(a) => {
                            assert!(was.is_none() || a.in_window, "{what}: item {i} was new");
                            assert!(was != Some(f.head()) || !a.changed, "{what}: item {i}");
                            last_added.insert(i, f.head());
                        }
                        Err(e) => assert_eq!(e, FilterError::Full, "{what}"),
                    }
                }
                7..=8 => {
                    let items: Vec<u64> = (0..next() % 40).map(|_| next() % pool).collect();
                    let bytes: Vec<Vec<u8>> = items.iter().map(|&i| item(i)).collect();
                    let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
                    let results = f.add_many_detailed(&refs, NO_LIMIT);
                    for (&i, r) in items.iter().zip(&results) {
                        match r {
                            Ok(a) => {
                                let was = last_added.get(&i).is_some_and(|&k| live(&f, k));
                                assert!(!was || a.in_window, "{what}: item {i} was new");
                                last_added.insert(i, f.head());
                            }
                            Err(e) => assert_eq!(*e, FilterError::Full, "{what}"),
                        }
                    }
                }
                9..=11 => {
                    // Mostly a slice at a time; now and then past the whole window.
                    let by = match next() % 8 {
                        0 => slices + 1 + next() % 3,
                        1 => 0,
                        _ => 1,
                    };
                    let to = f.head() + by;
                    let held = f.slice_summaries().len();
                    let a = f.advance_to(to);
                    assert_eq!(a.moved, by > 0, "{what}");
                    assert_eq!(f.slice_summaries().len() + a.expired as usize, held);
                    assert_eq!(f.advance_to(to), Advance::default(), "{what}");
                }
                12 => f = f.try_clone().unwrap(),
                13 => f = round_trip_both(&f),
                _ => {
                    // A primary that cannot write answers by its clock, a slice or two on.
                    let ahead = f.head() + next() % 3;
                    for (&i, &k) in &last_added {
                        if k + slices >= ahead {
                            assert!(f.contains_at(&item(i), ahead), "{what}: item {i}");
                        }
                    }
                }
            }
            last_added.retain(|_, k| live(&f, *k));
            assert!(f.slice_summaries().len() <= slices as usize + 1, "{what}");
            if step % 50 == 0 || step + 1 == steps {
                let ids: Vec<u64> = last_added.keys().copied().collect();
                let bytes: Vec<Vec<u8>> = ids.iter().map(|&i| item(i)).collect();
                let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
                assert!(f.contains_many(&refs).into_iter().all(|x| x), "{what}");
                assert!(
                    f.contains_many_at(&refs, f.head()).into_iter().all(|x| x),
                    "{what}"
                );
                for (r, i) in refs.iter().zip(&ids) {
                    assert!(f.contains(r), "{what}: item {i} of the window is missing");
                }
            }
        }
    }

    #[test]
    fn no_item_of_the_window_is_ever_missing_across_moves_clones_and_round_trips() {
        for seed in 0..12u64 {
            let slices = [1, 2, 4, 7][seed as usize % 4];
            let expansion = if seed % 3 == 2 { 0 } else { 2 };
            let mut spec = wspec(10_000, slices, 30 + seed * 10, expansion);
            if seed % 4 == 3 {
                spec.filter.layout = Layout::Classic;
            }
            walk(seed, spec, 1500);
        }
    }
}

#[test]
fn creation_covers_the_steady_window_of_slices_plus_one_slices() {
    let spec = wspec(1000, 4, 400, 2);
    let mut full = WindowedFilter::new(spec, 0, NO_LIMIT).unwrap();
    for slice in 0..=4 {
        full.advance_to(slice);
        full.add(&item(slice), NO_LIMIT).unwrap();
    }
    assert_eq!(
        full.slice_filters().len(),
        5,
        "a steady window holds slices + 1"
    );
    let steady = full.memory_usage();
    // One slice's room is not enough: such a filter would refuse its fifth slice.
    let e = WindowedFilter::new(spec, 0, steady - 1).unwrap_err();
    assert_eq!(
        e,
        FilterError::OverLimit {
            needed: steady,
            limit: steady - 1
        }
    );
    // At exactly the steady size every generation takes its add.
    let mut f = WindowedFilter::new(spec, 0, steady).unwrap();
    for slice in 0..=4 {
        f.advance_to(slice);
        assert_eq!(f.add(&item(slice), steady), Ok(true), "slice {slice}");
    }
    assert_eq!(f.memory_usage(), steady);
}

/// A header's fields at their offsets (see the codec's layout notes).
fn patched_header(f: &WindowedFilter, at: usize, value: u64) -> Vec<u8> {
    let mut header = codec::encode_header(f);
    header[at..at + 8].copy_from_slice(&value.to_le_bytes());
    header
}
const WINDOW_AT: usize = 20;
const ORIGIN_AT: usize = 44;
const HEAD_AT: usize = 52;

#[test]
fn a_clients_header_may_not_carry_a_window_no_command_accepts() {
    let f = WindowedFilter::new(wspec(1000, 4, 400, 2), 0, NO_LIMIT).unwrap();
    let at_most = patched_header(&f, WINDOW_AT, MAX_WINDOW_MS);
    assert!(codec::decode_header(&at_most, codec::Strictness::LoadChunk).is_ok());
    let over = patched_header(&f, WINDOW_AT, MAX_WINDOW_MS + 1);
    assert_eq!(
        codec::decode_header(&over, codec::Strictness::LoadChunk).unwrap_err(),
        codec::CodecError::BadData("window longer than a command accepts")
    );
    let forever = patched_header(&f, WINDOW_AT, u64::MAX);
    assert!(codec::decode_header(&forever, codec::Strictness::LoadChunk).is_err());
    // What the server already accepted loads as it was.
    let (h, _) = codec::decode_header(&forever, codec::Strictness::Rdb).unwrap();
    assert_eq!(h.spec.window_ms, u64::MAX);
}

#[test]
fn a_header_ahead_of_the_clock_is_refused_and_a_current_one_is_not() {
    // slice_ms 250, origin 10_000: at 11_000 the clock's slice is 4.
    let mut f = WindowedFilter::new(wspec(1000, 4, 400, 2), 10_000, NO_LIMIT).unwrap();
    f.advance_to(3);
    let decode = |bytes: &[u8]| {
        codec::decode_header(bytes, codec::Strictness::LoadChunk)
            .unwrap()
            .0
    };
    let now = 11_000;
    assert_eq!(decode(&codec::encode_header(&f)).clock_error(now), None);
    // A head up to a window ahead is what a primary with a slightly faster clock sends.
    assert_eq!(
        decode(&patched_header(&f, HEAD_AT, 8)).clock_error(now),
        None
    );
    assert_eq!(
        decode(&patched_header(&f, HEAD_AT, 9)).clock_error(now),
        Some("the window's current slice is later than the clock's")
    );
    assert!(decode(&patched_header(&f, HEAD_AT, u64::MAX))
        .clock_error(now)
        .is_some());
    assert_eq!(
        decode(&patched_header(&f, ORIGIN_AT, now)).clock_error(now),
        None
    );
    assert_eq!(
        decode(&patched_header(&f, ORIGIN_AT, now + 1)).clock_error(now),
        Some("the window's origin is later than the clock")
    );
}

/// Issue 23, item 5: a window is one filter, held to the layers one filter may have over all
/// its slices. A window of 64 slices of one-item layers used to reach 65 × 1024 layers, and
/// every lookup probed them all.
#[test]
fn the_slices_together_hold_at_most_the_layers_of_one_filter() {
    use crate::bloom::chain::MAX_LAYERS;
    let too_many = FilterError::TooManyLayers { limit: MAX_LAYERS };
    // 64 slices of capacity 1, EXPANSION 1: every new item is a new layer.
    let mut f = WindowedFilter::new(wspec(64_000, 64, 64, 1), 0, NO_LIMIT).unwrap();
    let mut next = 0u64;
    let mut refused = 0;
    for slice in 0..=64u64 {
        f.advance_to(slice);
        let items: Vec<Vec<u8>> = (next..next + 40).map(item).collect();
        next += 40;
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let results = f.add_many(&refs, NO_LIMIT);
        if let Some(Err(e)) = results.last() {
            assert_eq!(*e, too_many, "slice {slice}");
            refused += 1;
        }
        assert!(
            f.layer_count() <= MAX_LAYERS,
            "slice {slice}: {}",
            f.layer_count()
        );
    }
    assert_eq!(f.layer_count(), MAX_LAYERS);
    assert!(refused > 30, "{refused}");
    // A single add that needs a layer: the cap's error, nothing changes.
    let before = (f.items(), f.memory_usage(), codec::encode_header(&f));
    let fresh = (0..)
        .map(|i| format!("fresh:{i}").into_bytes())
        .find(|i| !f.contains(i))
        .unwrap();
    assert_eq!(f.add(&fresh, NO_LIMIT), Err(too_many.clone()));
    assert_eq!(
        (f.items(), f.memory_usage(), codec::encode_header(&f)),
        before
    );
    // Items held still answer; once the old slices expire, adds are taken again.
    assert!(f.contains(&item(0)));
    f.advance_to(64 + 65);
    assert_eq!(f.layer_count(), 0);
    assert_eq!(f.add(&fresh, NO_LIMIT), Ok(true));
}

/// A window header whose slices are each `chain` (a plain filter's header) under ids 0, 1.
fn two_slices_of(chain: &[u8]) -> Vec<u8> {
    let mut f = WindowedFilter::new(wspec(64_000, 64, 64, 1), 0, NO_LIMIT).unwrap();
    f.add(b"a", NO_LIMIT).unwrap();
    f.advance_to(1);
    f.add(b"b", NO_LIMIT).unwrap();
    let mut header = codec::encode_header(&f)[..64].to_vec();
    for id in [0u64, 1] {
        header.extend_from_slice(&id.to_le_bytes());
        header.extend_from_slice(&(chain.len() as u32).to_le_bytes());
        header.extend_from_slice(chain);
    }
    header
}

#[test]
fn a_clients_header_may_not_hold_more_layers_over_its_slices_than_one_filter() {
    use crate::bloom::chain::MAX_LAYERS;
    use crate::bloom::filter::ScalableFilter;
    let chain_of = |layers: usize| {
        let spec = FilterSpec::new(1, 0.01 / 65.0, 1);
        let mut c = ScalableFilter::new(spec, NO_LIMIT).unwrap();
        let mut i = 0u64;
        while c.layer_count() < layers {
            c.add(&item(i), NO_LIMIT).unwrap();
            i += 1;
        }
        crate::bloom::codec::encode_header(&c)
    };
    let at_cap = two_slices_of(&chain_of(MAX_LAYERS / 2));
    let (h, _) = codec::decode_header(&at_cap, codec::Strictness::LoadChunk).unwrap();
    assert_eq!(h.layer_count(), MAX_LAYERS);
    let over = two_slices_of(&chain_of(MAX_LAYERS / 2 + 1));
    assert_eq!(
        codec::decode_header(&over, codec::Strictness::LoadChunk).unwrap_err(),
        codec::CodecError::BadData("more layers than a filter may have")
    );
    // What the server already accepted (RDB, a primary, the AOF) loads as it was.
    let (h, _) = codec::decode_header(&over, codec::Strictness::Rdb).unwrap();
    assert_eq!(h.layer_count(), MAX_LAYERS + 2);
}

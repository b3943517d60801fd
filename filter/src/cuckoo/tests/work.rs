//! Work bounds: compaction stops after its probe budget, adds to a full sub-filter fail
//! without walking, and a batch stops at its eviction budget, with RedisBloom's results
//! wherever the bound is not reached.

use std::time::{Duration, Instant};

use super::super::budget::{first_empty, probe_cost, COMPACT_BUDGET};
use super::super::filter::SubFilter;
use super::super::rate::Widths;
use super::super::rated::RatedSub;
use super::{filter, Rng};
use crate::cuckoo::{
    walk_limit, AnyFilter, CuckooError, CuckooFilter, CuckooHash, Limits, Params, RatedFilter,
    WALK_BUDGET,
};

/// `subs` sub-filters of `buckets` buckets of 255 slots, every slot holding fingerprint 1
/// but one slot of bucket 0 in each older sub-filter: no older sub-filter is full, yet
/// nearly every fingerprint of the newest fails in both of its buckets in each of them.
/// Its item count is a header's word (untrusted): small, so every delete compacts.
fn one_fingerprint_everywhere(subs: usize, buckets: u64) -> CuckooFilter {
    let bs = 255u8;
    let parts = (0..subs)
        .map(|i| {
            let mut slots = vec![1u8; buckets as usize * usize::from(bs)];
            if i + 1 < subs {
                slots[0] = 0;
            }
            SubFilter::from_slots(buckets, slots)
        })
        .collect();
    let params = Params {
        bucket_size: bs,
        max_iterations: 20,
        expansion: 1,
    };
    CuckooFilter::from_parts(parts, 5, 0, params)
}

fn occupied_by_scan(f: &CuckooFilter) -> Vec<u64> {
    f.sub_filters()
        .iter()
        .map(|s| s.as_bytes().iter().filter(|&&b| b != 0).count() as u64)
        .collect()
}

fn occupied(f: &CuckooFilter) -> Vec<u64> {
    f.sub_filters().iter().map(SubFilter::occupied).collect()
}

#[test]
fn compaction_of_a_hostile_filter_stops_after_its_probe_budget() {
    // Unbounded, this is 256 × 255 fingerprints × 1023 sub-filters × 2 probes: ~130 M.
    let mut f = one_fingerprint_everywhere(1024, 256);
    let started = Instant::now();
    let spent = f.compact_with(true, COMPACT_BUDGET);
    let took = started.elapsed();
    // The budget is checked before every probe of an older sub-filter, not only per source
    // bucket (whose fingerprints may each probe every older sub-filter, 521,730 probes of
    // 255 slots): it overshoots by at most two probes.
    assert!(spent >= COMPACT_BUDGET, "{spent}");
    assert!(spent <= COMPACT_BUDGET + 2 * probe_cost(255), "{spent}");
    eprintln!("{spent} units over 255-slot buckets took {took:?}");
    let mut g = one_fingerprint_everywhere(1024, 256);
    let started = Instant::now();
    g.compact();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "CF.COMPACT is bounded"
    );
    assert_eq!(f, g, "the same budget stops at the same point");
    assert_eq!(occupied(&f), occupied_by_scan(&f));

    // The automatic compaction of CF.DEL is bounded the same way.
    let mut f = one_fingerprint_everywhere(1024, 256);
    let item = (0u64..)
        .map(|i| format!("d{i}").into_bytes())
        .find(|item| CuckooHash::of(item).fp == 1)
        .unwrap();
    let started = Instant::now();
    assert!(f.delete(&item));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "CF.DEL is bounded"
    );
    assert_eq!(f.deletes(), 0, "the delete compacted");
}

/// Issue 23, item 3: 1024 sub-filters of 255-slot buckets, every one full but sub-filter 0,
/// whose one hole no fingerprint reaches. Every probe is paid for and full sub-filters are
/// never walked past: compaction stops within its budget of work (it used to walk 1023
/// sub-filters per slot, uncounted, for about a second per CF.DEL).
#[test]
fn compaction_past_full_sub_filters_to_one_unreachable_hole_stops_within_its_budget() {
    let buckets = 256u64;
    let mut f = one_fingerprint_everywhere(1024, buckets);
    // Every sub-filter full, then one hole in the last bucket of sub-filter 0: fingerprint 1
    // of source bucket b reaches buckets b and b ^ 149 (its offset, mod 256), so only source
    // bucket 106 reaches it, far past what the budget pays for.
    for s in f.sub_filters_mut() {
        s.write_slots(0, &[1]);
    }
    let last = (buckets * 255 - 1) as usize;
    f.sub_filters_mut()[0].write_slots(last, &[0]);
    let hole = |f: &CuckooFilter| f.sub_filters()[0].as_bytes()[last];
    assert_eq!(hole(&f), 0);
    let spent = f.compact_with(true, COMPACT_BUDGET);
    assert!(spent >= COMPACT_BUDGET, "{spent}");
    assert!(spent <= COMPACT_BUDGET + 2 * probe_cost(255), "{spent}");
    assert_eq!(hole(&f), 0, "the budget stopped it before the hole");
    assert_eq!(occupied(&f), occupied_by_scan(&f));
    // Unbounded, it reaches the hole, as RedisBloom does.
    f.compact_with(true, u64::MAX);
    assert_eq!(hole(&f), 1);
}

#[test]
fn compaction_skips_full_sub_filters_at_no_cost() {
    // Every older sub-filter full: nothing can move, and nothing is probed.
    let mut f = one_fingerprint_everywhere(1024, 256);
    for s in f.sub_filters_mut() {
        s.write_slots(0, &[1]);
    }
    let before = f.clone();
    assert_eq!(f.compact_with(true, COMPACT_BUDGET), 0);
    assert_eq!(f, before);
}

/// Small budgets, call after call, keep every item and the counts, and come to a stop: not
/// always where one unbounded pass ends (a later call may move fingerprints into slots an
/// earlier call freed, or stall on fingerprints that cannot move), but every stop falls
/// between source buckets.
#[test]
fn compaction_in_budgeted_steps_keeps_every_item_and_ends() {
    for (buckets, bs, mi, exp) in [(8, 2, 20, 2), (16, 4, 50, 1), (4, 8, 20, 2), (2, 255, 3, 1)] {
        let mut rng = Rng(u64::from(bs) * 31 + buckets);
        let mut f = filter(buckets, bs, mi, exp);
        let limits = Limits::default();
        let mut added = Vec::new();
        for i in 0..(buckets * u64::from(bs) * 6) {
            let item = format!("w{i}").into_bytes();
            f.add(&item, &limits).unwrap();
            added.push(item);
        }
        assert!(f.sub_filters().len() > 2, "{buckets} {bs}");
        for _ in 0..added.len() / 3 {
            let i = rng.below(added.len() as u64) as usize;
            assert!(f.delete(&added.swap_remove(i)));
        }
        assert_eq!(occupied(&f), occupied_by_scan(&f));
        let held: u64 = occupied(&f).iter().sum();
        let mut calls = 0;
        loop {
            let before = f.clone();
            f.compact_with(true, 16);
            calls += 1;
            assert!(calls < 10_000, "{buckets} {bs}");
            assert_eq!(occupied(&f), occupied_by_scan(&f));
            assert_eq!(occupied(&f).iter().sum::<u64>(), held);
            assert!(added.iter().all(|i| f.contains(i)), "{buckets} {bs}");
            if f == before {
                break;
            }
        }
    }
}

#[test]
fn an_add_to_a_full_sub_filter_fails_at_once_and_changes_nothing() {
    // A non-scaling filter of 255-slot buckets, every slot taken, the longest walk allowed.
    let mut f = filter(64, 255, 65_535, 0);
    let limits = Limits::default();
    let mut i = 0u64;
    while f.sub_filters()[0].occupied() < 64 * 255 {
        let _ = f.add(format!("f{i}").as_bytes(), &limits);
        i += 1;
    }
    assert_eq!(occupied(&f), occupied_by_scan(&f));
    let before = f.clone();
    let items: Vec<Vec<u8>> = (0..2000).map(|i| format!("n{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    let started = Instant::now();
    let results = f.insert_many(&refs, false, &limits).unwrap();
    // Walking, each would take 65535 swaps: seconds for the batch.
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert!(results.iter().all(|r| *r == Err(CuckooError::Full)));
    assert_eq!(f, before);
}

/// A non-scaling filter of `buckets` 4-slot buckets and the longest walk, filled one add at a
/// time until an item does not fit: nearly full, so most new items walk all 65535 swaps and
/// fail. The items it holds come with it.
fn nearly_full(rated: bool, buckets: u64) -> (AnyFilter, Vec<Vec<u8>>) {
    let p = Params {
        bucket_size: 4,
        max_iterations: 65_535,
        expansion: 0,
    };
    let mut f: AnyFilter = if rated {
        let widths = Widths {
            first: 12,
            second: 13,
        };
        RatedFilter::new(buckets, p, widths, 0.01, u64::MAX)
            .unwrap()
            .into()
    } else {
        CuckooFilter::new(buckets, p, u64::MAX).unwrap().into()
    };
    let limits = Limits::default();
    let mut held = Vec::new();
    for i in 0u64.. {
        let item = format!("f{i}").into_bytes();
        match f.add(&item, &limits) {
            Ok(()) => held.push(item),
            Err(CuckooError::Full) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    (f, held)
}

#[test]
fn a_batch_into_a_nearly_full_filter_stops_at_its_eviction_budget_and_keeps_every_item() {
    for rated in [false, true] {
        let (mut f, held) = nearly_full(rated, 1024);
        let items: Vec<Vec<u8>> = (0..2000).map(|i| format!("n{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut one_by_one = f.clone();
        let started = Instant::now();
        let results = f.insert_many(&refs, false, &Limits::default()).unwrap();
        let took = started.elapsed();
        eprintln!("rated {rated}: {} results in {took:?}", results.len());
        // Unbounded, each failing item walks 65535 swaps and back: seconds for the batch.
        assert!(took < Duration::from_secs(2), "rated {rated}: {took:?}");
        let (last, answered) = results.split_last().unwrap();
        assert_eq!(*last, Err(CuckooError::KickBudget), "rated {rated}");
        let failed = answered
            .iter()
            .filter(|r| **r == Err(CuckooError::Full))
            .count();
        // A failed walk costs 65535 probes of 4 slots and as many back, over half the
        // budget: one fits, a second could not start.
        assert_eq!(failed, 1, "rated {rated}: {failed} failed walks");
        // The items before the stop answer as added one by one (RedisBloom's answers), and
        // the stopped item and those after it changed nothing.
        let limits = Limits::default();
        for (item, result) in items.iter().zip(answered) {
            let alone = one_by_one.add(item, &limits).map(|()| true);
            assert_eq!(alone, *result, "rated {rated}");
        }
        assert_eq!(f, one_by_one, "rated {rated}");
        assert!(
            held.iter().all(|i| f.contains(i)),
            "rated {rated}: an item was lost"
        );
        // The next command has a budget of its own and goes on where this one stopped.
        let rest = &refs[answered.len()..];
        let next = f.insert_many(rest, false, &limits).unwrap();
        assert_eq!(next[0], one_by_one.add(rest[0], &limits).map(|()| true));
    }
}

/// A non-scaling filter of 64 two-slot buckets, every slot holding fingerprint 1 but slot 0
/// of bucket 0 (8-bit slots in either layout): an item whose walk never reaches bucket 0
/// walks all `max_iterations` swaps and fails, and the hole stays for the next item.
fn one_hole(rated: bool, max_iterations: u16) -> AnyFilter {
    let p = Params {
        bucket_size: 2,
        max_iterations,
        expansion: 0,
    };
    let mut slots = vec![1u8; 128];
    slots[0] = 0;
    if rated {
        let sub = RatedSub::from_bytes(64, 2, 8, &slots).unwrap();
        let widths = Widths {
            first: 8,
            second: 9,
        };
        RatedFilter::from_parts(vec![sub], 127, 0, p, widths, 0.01).into()
    } else {
        CuckooFilter::from_parts(vec![SubFilter::from_slots(64, slots)], 127, 0, p).into()
    }
}

#[test]
fn a_batch_whose_walks_fit_in_the_budget_never_meets_it() {
    // The default 20 swaps per walk over 2-slot buckets: a failed walk costs 2 × 20 probes
    // of 2 slots, so 6355 failing items fit in one command's budget.
    let walk = 2 * 20 * probe_cost(2);
    for rated in [false, true] {
        let f = one_hole(rated, 20);
        let limits = Limits::default();
        let n = (WALK_BUDGET / walk) as usize;
        assert_eq!(n, 6355);
        let items: Vec<Vec<u8>> = (0u64..)
            .map(|i| format!("m{i}").into_bytes())
            .filter(|item| {
                let mut g = f.clone();
                let mut kicks = walk;
                let r = g.insert_many_within(&[item], false, &limits, &mut kicks);
                r == Ok(vec![Err(CuckooError::Full)]) && kicks == 0
            })
            .take(n)
            .collect();
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut g = f.clone();
        let mut kicks = WALK_BUDGET;
        let results = g
            .insert_many_within(&refs, false, &limits, &mut kicks)
            .unwrap();
        assert_eq!(results, vec![Err(CuckooError::Full); n], "rated {rated}");
        assert_eq!(kicks, WALK_BUDGET - walk * n as u64, "rated {rated}");
        assert_eq!(g, f, "rated {rated}: failed walks changed the filter");
        // One more such item would need more than is left.
        let mut more = refs.clone();
        more.push(refs[0]);
        let results = f
            .clone()
            .insert_many_within(&more, false, &limits, &mut WALK_BUDGET.clone())
            .unwrap();
        assert_eq!(results.last(), Some(&Err(CuckooError::KickBudget)));
        assert_eq!(results.len(), n + 1);
    }
}

#[test]
fn an_item_is_refused_before_its_walk_when_the_budget_left_cannot_pay_all_of_it() {
    for rated in [false, true] {
        let (f, _) = nearly_full(rated, 64);
        let limits = Limits::default();
        // What a failed walk of 65535 swaps over 4-slot buckets, and its undo, cost.
        let worst = 2 * 65_535 * probe_cost(4);
        // An item that walks: its buckets are full.
        let (item, swaps) = (0u64..)
            .find_map(|i| {
                let item = format!("w{i}").into_bytes();
                let mut g = f.clone();
                let mut kicks = WALK_BUDGET;
                let r = g.insert_many_within(&[&item], false, &limits, &mut kicks);
                let swaps = WALK_BUDGET - kicks;
                (swaps > 0).then(|| (item, (swaps, r.unwrap())))
            })
            .unwrap();
        let refs: [&[u8]; 1] = [&item];
        let mut g = f.clone();
        let mut kicks = worst - 1;
        let r = g.insert_many_within(&refs, false, &limits, &mut kicks);
        assert_eq!(r, Ok(vec![Err(CuckooError::KickBudget)]), "rated {rated}");
        assert_eq!(
            (kicks, &g),
            (worst - 1, &f),
            "rated {rated}: a refusal spends nothing"
        );
        let mut kicks = worst;
        let r = g.insert_many_within(&refs, false, &limits, &mut kicks);
        assert_eq!(r, Ok(swaps.1), "rated {rated}");
        assert_eq!(worst - kicks, swaps.0, "rated {rated}");
        // Items that need no walk still go in with nothing left.
        let mut empty = filter(64, 4, 65_535, 0);
        let few: Vec<&[u8]> = vec![b"a", b"b", b"c"];
        let r = empty.insert_many_within(&few, false, &limits, &mut 0);
        assert_eq!(r, Ok(vec![Ok(true); 3]));
    }
}

/// Every bucket size up to 64 walks `max_iterations` swaps, whatever it is (RedisBloom's
/// walk); larger buckets at high `max_iterations` are cut to what `WALK_BUDGET` pays.
#[test]
fn only_walks_over_buckets_of_more_than_64_slots_are_cut() {
    for bs in 1..=255u8 {
        for mi in [1u16, 20, 500, 4096, 20_000, 65_535] {
            let limit = walk_limit(mi, bs);
            let probe = probe_cost(u64::from(bs));
            assert!(2 * limit * probe <= WALK_BUDGET, "{bs} {mi}");
            if bs <= 64 {
                assert_eq!(limit, u64::from(mi), "{bs} {mi}");
            } else {
                assert_eq!(limit, u64::from(mi).min(WALK_BUDGET / (2 * probe)));
            }
        }
    }
    assert!(walk_limit(65_535, 65) < 65_535);
    assert_eq!(walk_limit(65_535, 255), 26_296);
}

/// Issue 23, item 4: 510 copies of one item fill its two buckets of 255 slots, so a further
/// copy walks between them (RedisBloom: all 65535 swaps and back, 16 ms; a batch of 40 of
/// them 16 such walks, 0.2 s) and fails while the rest of the filter is empty. Its walk is
/// cut to `walk_limit` and paid in probes of 255 slots; a batch walks once and stops; the
/// failed walks leave every fingerprint where it was.
#[test]
fn a_walk_over_255_slot_buckets_is_cut_to_its_budget_and_changes_nothing() {
    let p = Params {
        bucket_size: 255,
        max_iterations: 65_535,
        expansion: 0,
    };
    for rated in [false, true] {
        let mut f: AnyFilter = if rated {
            let widths = Widths {
                first: 12,
                second: 13,
            };
            RatedFilter::new(64, p, widths, 0.01, u64::MAX)
                .unwrap()
                .into()
        } else {
            CuckooFilter::new(64, p, u64::MAX).unwrap().into()
        };
        let limits = Limits::default();
        // 510 copies: 255 where the two buckets are one (an offset of 0 mod 64).
        let mut copies = 0;
        while f.add(b"x", &limits).is_ok() {
            copies += 1;
        }
        assert!(copies == 510 || copies == 255, "rated {rated}: {copies}");
        let before = f.clone();
        let limit = walk_limit(65_535, 255);
        let worst = 2 * limit * probe_cost(255);
        let mut left = WALK_BUDGET;
        let started = Instant::now();
        let r = f.insert_many_within(&[b"x"], false, &limits, &mut left);
        let one = started.elapsed();
        assert_eq!(r, Ok(vec![Err(CuckooError::Full)]), "rated {rated}");
        assert_eq!(WALK_BUDGET - left, worst, "rated {rated}");
        assert!(worst <= WALK_BUDGET && limit < 65_535);
        assert_eq!(f, before, "rated {rated}: a failed walk changed the filter");
        // A batch of 40: one walk, then the budget cannot pay a second.
        let batch: Vec<&[u8]> = vec![b"x"; 40];
        let started = Instant::now();
        let r = f.insert_many(&batch, false, &limits).unwrap();
        let forty = started.elapsed();
        assert_eq!(
            r,
            vec![Err(CuckooError::Full), Err(CuckooError::KickBudget)],
            "rated {rated}"
        );
        assert_eq!(f, before, "rated {rated}");
        assert!(
            f.count(b"x") >= copies,
            "rated {rated}: a copy was lost: {} {copies}",
            f.count(b"x")
        );
        // A single add walks once too, and a filter that may grow places the item in a new
        // sub-filter after its cut walk, as after a walk of `max_iterations`.
        assert_eq!(f.add(b"x", &limits), Err(CuckooError::Full));
        eprintln!("rated {rated}: one walk {one:?}, a batch of 40 {forty:?}");
        // Unbounded: 65535 swaps and back for each of 16 items, about 0.2 s.
        assert!(
            forty < Duration::from_millis(150),
            "rated {rated}: {forty:?}"
        );
    }
}

#[test]
fn a_walk_cut_short_in_a_scaling_filter_grows_it_and_keeps_every_copy() {
    let mut f = filter(64, 255, 65_535, 1);
    let limits = Limits::default();
    for _ in 0..511 {
        f.add(b"x", &limits).unwrap();
    }
    assert_eq!(f.sub_filters().len(), 2);
    assert_eq!(f.count(b"x"), 511);
    assert_eq!(occupied(&f), vec![510, 1]);
}

#[test]
fn the_first_empty_slot_is_found_eight_slots_a_step_as_a_scan_finds_it() {
    let mut rng = Rng(7);
    for len in 1..=255usize {
        for zero in (0..len).chain([len]) {
            let mut bucket: Vec<u8> = (0..len).map(|_| 1 + rng.below(255) as u8).collect();
            if zero < len {
                bucket[zero] = 0;
                // Zeros after the first, and bytes of 0x80 and 0x01 around it, change nothing.
                for slot in &mut bucket[zero + 1..] {
                    *slot = [0, 0x80, 0x01, 0xff][rng.below(4) as usize];
                }
            }
            let want = bucket.iter().position(|&s| s == 0);
            assert_eq!(first_empty(&bucket), want, "{len} {zero}");
        }
    }
}

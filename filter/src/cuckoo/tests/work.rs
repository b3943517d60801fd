//! Work bounds: compaction stops after its probe budget, and adds to a full sub-filter
//! fail without walking, with RedisBloom's results wherever the bound is not reached.

use std::time::{Duration, Instant};

use super::super::filter::{SubFilter, COMPACT_BUDGET};
use super::{filter, Rng};
use crate::cuckoo::{CuckooError, CuckooFilter, CuckooHash, Limits, Params};

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
    // The budget is checked per source bucket: one bucket may overshoot it by its slots'
    // probes of every older sub-filter.
    assert!(spent >= COMPACT_BUDGET, "{spent}");
    assert!(spent <= COMPACT_BUDGET + 1 + 2 * 255 * 1023, "{spent}");
    eprintln!("{spent} probes of 255-slot buckets took {took:?}");
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

//! The health figures and capacity-warning crossings of the cuckoo core.

use super::super::codec::{self, Header};
use super::super::health::{self, Crossing, LoadMark};
use super::{filter, shapes, Rng};
use crate::cuckoo::{CuckooFilter, Limits};
use crate::format::Strictness;

fn scanned(f: &CuckooFilter) -> Vec<u64> {
    f.sub_filters()
        .iter()
        .map(|s| s.as_bytes().iter().filter(|&&b| b != 0).count() as u64)
        .collect()
}

fn counted(f: &CuckooFilter) -> Vec<u64> {
    f.sub_filters().iter().map(|s| s.occupied()).collect()
}

#[test]
fn occupied_counts_match_a_scan_after_adds_kicks_deletes_compaction_and_loading() {
    let limits = Limits::default();
    for (buckets, bs, mi, exp) in shapes() {
        let mut f = filter(buckets, bs, mi, exp);
        let mut rng = Rng(u64::from(bs) * 31 + buckets);
        let mut added = Vec::new();
        for step in 0..(buckets * u64::from(bs) * 6).min(4000) {
            match rng.below(10) {
                0..=5 => {
                    let item = format!("o:{step}");
                    if f.add(item.as_bytes(), &limits).is_ok() {
                        added.push(item);
                    }
                }
                6..=7 if !added.is_empty() => {
                    let i = rng.below(added.len() as u64) as usize;
                    // Not asserted: a delete of a never-added item may have taken its slot.
                    f.delete(added.swap_remove(i).as_bytes());
                }
                8 => {
                    f.delete(format!("never:{step}").as_bytes());
                }
                _ => f.compact(),
            }
            assert_eq!(
                counted(&f),
                scanned(&f),
                "{buckets} {bs} {mi} {exp} at {step}"
            );
        }
        // A SCANDUMP stream loaded chunk by chunk into a fresh filter counts the same.
        let Some((_, first)) = codec::dump_chunk(&f, 0) else {
            continue;
        };
        let header = Header::decode(&first).unwrap();
        let mut copy = codec::filter_from_header(&header, Strictness::LoadChunk, u64::MAX).unwrap();
        assert_eq!(counted(&copy), vec![0; copy.sub_filters().len()]);
        let mut it = 1;
        while let Some((next, chunk)) = codec::dump_chunk(&f, it) {
            codec::load_chunk(&mut copy, next, &chunk).unwrap();
            it = next;
        }
        assert_eq!(counted(&copy), scanned(&f));
        assert_eq!(copy.try_clone().map(|c| counted(&c)), Ok(scanned(&f)));
    }
}

#[test]
fn loads_are_occupied_slots_over_slots_per_sub_filter() {
    let mut f = filter(4, 2, 20, 2);
    assert_eq!(health::loads(&f), [0.0]);
    let limits = Limits::default();
    let mut i = 0;
    while f.sub_filters().len() < 2 {
        f.add(format!("l:{i}").as_bytes(), &limits).unwrap();
        i += 1;
    }
    let loads = health::loads(&f);
    assert_eq!(loads.len(), 2);
    for (load, sub) in loads.iter().zip(f.sub_filters()) {
        assert_eq!(*load, sub.occupied() as f64 / (sub.buckets() * 2) as f64);
    }
    assert!(loads[0] > 0.5 && loads[1] > 0.0 && loads[1] <= 1.0 / 16.0);
}

#[test]
fn the_estimated_rate_follows_the_formula_and_the_measured_rate() {
    let empty = filter(1024, 2, 20, 1);
    assert_eq!(health::estimated_fpr(&empty), 0.0);
    // One full sub-filter of bucket size b: 1 − (254/255)^(2b).
    let mut full = filter(1, 4, 20, 0);
    for i in 0..4 {
        full.add(format!("f:{i}").as_bytes(), &Limits::default())
            .unwrap();
    }
    let expected = 1.0 - (254.0f64 / 255.0).powi(8);
    assert!((health::estimated_fpr(&full) - expected).abs() < 1e-12);
    // Two sub-filters: the loads add up in the exponent.
    let mut f = filter(1024, 2, 20, 1);
    let limits = Limits::default();
    let mut n = 0;
    while f.sub_filters().len() < 2 || f.sub_filters()[1].load() < 0.5 {
        f.add(format!("m:{n}").as_bytes(), &limits).unwrap();
        n += 1;
    }
    let sum: f64 = health::loads(&f).iter().sum();
    let estimate = health::estimated_fpr(&f);
    assert!((estimate - (1.0 - (254.0f64 / 255.0).powf(4.0 * sum))).abs() < 1e-12);
    // The measured rate of items never added is near the estimate (~2.2% here; 200k
    // queries give a standard error of about 0.03 percentage points).
    let queries = 200_000;
    let hits = (0..queries)
        .filter(|q| f.contains(format!("absent:{q}").as_bytes()))
        .count();
    let measured = hits as f64 / f64::from(queries);
    assert!(
        (measured - estimate).abs() < estimate * 0.1,
        "measured {measured}, estimated {estimate}"
    );
}

fn add_until(f: &mut CuckooFilter, next: &mut u64, occupied: u64) -> Vec<Crossing> {
    let before = LoadMark::of(f);
    while f.sub_filters().last().unwrap().occupied() < occupied {
        f.add(format!("c:{next}").as_bytes(), &Limits::default())
            .unwrap();
        *next += 1;
    }
    health::crossings(before, f, 70)
}

#[test]
fn crossings_are_reported_once_per_crossing_of_the_newest_sub_filter() {
    // 64 slots: the mark is 45 (70% rounded up).
    let mut f = filter(32, 2, 20, 2);
    let mut next = 0;
    assert_eq!(add_until(&mut f, &mut next, 44), []);
    let crossed = add_until(&mut f, &mut next, 45);
    assert_eq!(
        crossed,
        [Crossing {
            sub_filter: 0,
            occupied: 45,
            slots: 64
        }]
    );
    assert_eq!(add_until(&mut f, &mut next, 46), []);
    // Deletes take it back under the mark; the next add that reaches it crosses again.
    for i in (next - 3)..next {
        assert!(f.delete(format!("c:{i}").as_bytes()));
    }
    assert_eq!(f.sub_filters()[0].occupied(), 43);
    assert_eq!(add_until(&mut f, &mut next, 44), []);
    assert_eq!(add_until(&mut f, &mut next, 45).len(), 1);
    // Growth: a sub-filter added by the write is watched from empty (128 slots, mark 90).
    let before = LoadMark::of(&f);
    while f.sub_filters().len() < 2 {
        f.add(format!("c:{next}").as_bytes(), &Limits::default())
            .unwrap();
        next += 1;
    }
    assert_eq!(health::crossings(before, &f, 70), []);
    let crossed = add_until(&mut f, &mut next, 90);
    assert_eq!(
        crossed,
        [Crossing {
            sub_filter: 1,
            occupied: 90,
            slots: 128
        }]
    );
    // One write that takes the newest past its mark and grows reports the old newest.
    let mut g = filter(4, 2, 20, 2);
    let before = LoadMark::of(&g);
    let items: Vec<String> = (0..40).map(|i| format!("g:{i}")).collect();
    let refs: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
    g.insert_many(&refs, false, &Limits::default()).unwrap();
    let crossed = health::crossings(before, &g, 70);
    assert!(g.sub_filters().len() >= 3, "{}", g.sub_filters().len());
    assert_eq!(crossed.first().map(|c| c.sub_filter), Some(0));
    assert!(crossed
        .windows(2)
        .all(|w| w[0].sub_filter < w[1].sub_filter));
    // Threshold 0: never.
    assert_eq!(
        health::crossings(LoadMark::of(&filter(4, 2, 20, 2)), &g, 0),
        []
    );
}

#[test]
fn deletes_that_find_nothing_are_counted_and_are_not_part_of_equality() {
    let mut f = filter(64, 2, 20, 1);
    f.add(b"a", &Limits::default()).unwrap();
    let copy = f.clone();
    assert!(!f.delete(b"never added"));
    assert!(!f.delete(b"never added either"));
    assert_eq!(f.deletes_not_found(), 2);
    assert_eq!(f.deletes(), 0);
    assert_eq!(f, copy, "a delete that found nothing changed the filter");
    assert!(f.delete(b"a"));
    assert_eq!((f.deletes_not_found(), f.deletes()), (2, 1));
}

//! The cuckoo core against the naive model of `layerbloom_fuzz::cuckoo::model` (written from
//! the fixtures' README): filters of small capacities, so evictions, their undo, growth,
//! `Filter is full`, the expansion limit, the memory limit, deletes that trigger compaction
//! and `CF.COMPACT` are all reached. Every reply is compared, and after every operation the
//! item and delete counts and every sub-filter's slot bytes.
//!
//! With bit 7 of the memory-limit byte, the filter is an extension filter (`RatedFilter`,
//! fingerprints of 4..=32 bits) instead, checked against a multiset of the items it holds:
//! an item added and not deleted is always found, counts at least as often as it is held, and
//! the item count is the multiset's size; deletes are of held items only (a delete of an
//! item never added may take another's fingerprint, by design).
//!
//! Input: `u8 bucket size, u8 capacity, u8 max iterations, u8 expansion, u8 max expansions,
//! u8 memory limit`, then operations: an opcode byte (low 3 bits the operation, bit 3 NX for
//! batches, bit 4 a batch's eviction budget from the next byte rather than `WALK_BUDGET`, bit
//! 7 a raw item rather than one of a small universe) and its items.

#![no_main]

use std::collections::HashMap;

use layerbloom_filter::cuckoo::rate::Widths;
use layerbloom_filter::cuckoo::{
    params, CuckooError, CuckooFilter, Limits, ParamError, Params, RatedFilter, WALK_BUDGET,
};
use layerbloom_fuzz::cuckoo::model::{self, Model};
use layerbloom_fuzz::cuckoo::{check_shape, rdb_round_trip, scandump_round_trip};
use layerbloom_fuzz::Input;
use libfuzzer_sys::fuzz_target;

const BUCKET_SIZES: [u8; 4] = [16, 64, 200, 255];
const MAX_BYTES: [u64; 4] = [1 << 11, 1 << 13, 1 << 15, 1 << 17];
const MAX_STEPS: usize = 1500;

fn item(input: &mut Input, op: u8) -> Option<Vec<u8>> {
    if op & 0x80 == 0 {
        // A small universe, so items repeat and share fingerprints.
        let id = input.u8()? % 64;
        Some(format!("k{id}").into_bytes())
    } else {
        input.bytes16().map(<[u8]>::to_vec)
    }
}

fn items(input: &mut Input, op: u8) -> Option<Vec<Vec<u8>>> {
    let n = input.u8()? % 48;
    (0..n).map(|_| item(input, op)).collect()
}

/// A batch's eviction budget: `WALK_BUDGET`, or with bit 4 a small one (0 to 65,280 units of
/// work: a failed walk of 500 swaps over 8-slot buckets costs 72,000), so that batches of
/// walks meet it.
fn kicks(input: &mut Input, op: u8) -> Option<u64> {
    if op & 0x10 == 0 {
        return Some(WALK_BUDGET);
    }
    input.u8().map(|b| u64::from(b) * 256)
}

fn same(core: &CuckooFilter, model: &Model, what: &str) {
    assert_eq!(core.items(), model.items, "items after {what}");
    assert_eq!(core.deletes(), model.deletes, "deletes after {what}");
    let subs = core.sub_filters();
    assert_eq!(subs.len(), model.subs.len(), "sub-filters after {what}");
    for (i, (got, want)) in subs.iter().zip(&model.subs).enumerate() {
        let got = got.as_bytes().chunks(model.bucket_size);
        if !got.eq(want.iter().map(Vec::as_slice)) {
            assert_eq!(
                subs[i].as_bytes(),
                model.slot_bytes()[i].as_slice(),
                "sub-filter {i}'s slots after {what}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let (Some(bs), Some(cap), Some(mi), Some(exp), Some(maxexp), Some(mem)) = (
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
    ) else {
        return;
    };
    let bucket_size = if bs >= 0xf0 {
        BUCKET_SIZES[usize::from(bs % 4)]
    } else {
        bs % 8 + 1
    };
    let bs64 = u64::from(bucket_size);
    // Mostly capacities of a few buckets; some just under the smallest allowed.
    let capacity = if cap >= 0xf8 {
        (2 * bs64).saturating_sub(u64::from(cap - 0xf7))
    } else {
        2 * bs64 + u64::from(cap % 64)
    };
    // 65535 (the longest walk) cuts walks over buckets of more than 64 slots (`walk_limit`).
    let max_iterations: u16 = if mi == 0xff {
        65_535
    } else if mi >= 0xf8 {
        500
    } else {
        u16::from(mi % 40) + 1
    };
    let expansion_arg = exp % 10;
    let max_expansions = match maxexp % 41 {
        40 => 5000,
        n => usize::from(n) + 1,
    };
    let max_bytes = MAX_BYTES[usize::from(mem % 4)];

    // CF.RESERVE's rules, the core's against the README's.
    let expansion = params::expansion(i64::from(expansion_arg)).expect("in range");
    assert_eq!(
        u64::from(expansion),
        model::round_expansion(u64::from(expansion_arg))
    );
    let buckets = match params::buckets_for(capacity as i64, bucket_size) {
        Ok(b) => b,
        Err(e) => {
            assert_eq!(e, ParamError::CapacityTooSmall);
            assert!(capacity < 2 * bs64);
            return;
        }
    };
    assert_eq!(buckets, model::reserve_buckets(capacity, bs64), "buckets");
    let p = Params {
        bucket_size,
        max_iterations,
        expansion,
    };
    if mem & 0x80 != 0 {
        let first = ((mem >> 2) & 0x1f) % 29 + 4;
        let widths = Widths {
            first,
            second: (first + cap % 4).min(32),
        };
        let limits = Limits {
            max_expansions,
            max_bytes,
        };
        rated(&mut input, buckets.max(8), p, widths, limits);
        return;
    }
    let Ok(mut core) = CuckooFilter::new(buckets, p, max_bytes) else {
        assert!(CuckooFilter::modelled_bytes(1, [buckets * bs64]) > max_bytes);
        return;
    };
    let limits = Limits {
        max_expansions,
        max_bytes,
    };
    let mut model = Model::new(
        buckets,
        usize::from(bucket_size),
        usize::from(max_iterations),
        u64::from(expansion),
        max_expansions,
        max_bytes,
    );
    same(&core, &model, "reserve");

    let mut steps = 0;
    while let Some(op) = input.u8() {
        steps += 1;
        if steps > MAX_STEPS {
            break;
        }
        let what = match op & 7 {
            0 => {
                let Some(x) = item(&mut input, op) else { break };
                assert_eq!(core.add(&x, &limits), model.add(&x), "add");
                "add"
            }
            1 => {
                let Some(x) = item(&mut input, op) else { break };
                assert_eq!(core.add_nx(&x, &limits), model.add_nx(&x), "add_nx");
                "add_nx"
            }
            2 => {
                let Some(budget) = kicks(&mut input, op) else {
                    break;
                };
                let Some(xs) = items(&mut input, op) else {
                    break;
                };
                let refs: Vec<&[u8]> = xs.iter().map(Vec::as_slice).collect();
                let nx = op & 8 != 0;
                let (mut left, mut model_left) = (budget, budget);
                assert_eq!(
                    core.insert_many_within(&refs, nx, &limits, &mut left),
                    model.insert_many_within(&xs, nx, &mut model_left),
                    "insert_many"
                );
                assert_eq!(left, model_left, "evictions left after insert_many");
                "insert_many"
            }
            3 => {
                let Some(x) = item(&mut input, op) else { break };
                assert_eq!(core.delete(&x), model.delete(&x), "delete");
                "delete"
            }
            4 => {
                core.compact();
                model.compact(true);
                if op & 8 != 0 {
                    rdb_round_trip(&core);
                    scandump_round_trip(&core);
                }
                "compact"
            }
            5 => {
                let Some(xs) = items(&mut input, op) else {
                    break;
                };
                let refs: Vec<&[u8]> = xs.iter().map(Vec::as_slice).collect();
                let want: Vec<bool> = xs.iter().map(|x| model.contains(x)).collect();
                assert_eq!(core.contains_many(&refs), want, "contains_many");
                "contains_many"
            }
            6 => {
                let Some(x) = item(&mut input, op) else { break };
                assert_eq!(core.count(&x), model.count(&x), "count");
                "count"
            }
            _ => {
                let Some(x) = item(&mut input, op) else { break };
                assert_eq!(core.contains(&x), model.contains(&x), "contains");
                "contains"
            }
        };
        same(&core, &model, what);
    }
    check_shape(&core);
    rdb_round_trip(&core);
    scandump_round_trip(&core);
});

/// The extension filter against a multiset of what it holds.
fn rated(input: &mut Input, buckets: u64, p: Params, widths: Widths, limits: Limits) {
    use layerbloom_fuzz::cuckoo_rated::{check_shape, rdb_round_trip, scandump_round_trip};
    let Ok(mut core) = RatedFilter::new(buckets, p, widths, 0.01, limits.max_bytes) else {
        return;
    };
    let mut held: HashMap<Vec<u8>, u64> = HashMap::new();
    let add =
        |held: &mut HashMap<Vec<u8>, u64>, x: &[u8]| *held.entry(x.to_vec()).or_default() += 1;
    let mut steps = 0;
    while let Some(op) = input.u8() {
        steps += 1;
        if steps > MAX_STEPS {
            break;
        }
        match op & 7 {
            0 | 1 => {
                let Some(x) = item(input, op) else { break };
                let before = core.clone();
                let r = if op & 7 == 0 {
                    core.add(&x, &limits).map(|()| true)
                } else {
                    core.add_nx(&x, &limits)
                };
                match r {
                    Ok(true) => add(&mut held, &x),
                    Ok(false) => assert!(core.contains(&x)),
                    Err(_) => assert_eq!(core, before, "a refused add changed the filter"),
                }
            }
            2 => {
                let Some(mut budget) = kicks(input, op) else {
                    break;
                };
                let Some(xs) = items(input, op) else {
                    break;
                };
                let refs: Vec<&[u8]> = xs.iter().map(Vec::as_slice).collect();
                let nx = op & 8 != 0;
                if let Ok(results) = core.insert_many_within(&refs, nx, &limits, &mut budget) {
                    if let Some(at) = results
                        .iter()
                        .position(|r| *r == Err(CuckooError::KickBudget))
                    {
                        assert_eq!(at + 1, results.len(), "the budget's refusal ends the batch");
                    }
                    for (x, r) in xs.iter().zip(results) {
                        if r == Ok(true) {
                            add(&mut held, x);
                        }
                    }
                }
            }
            3 => {
                let Some(x) = item(input, op) else { break };
                if let Some(n) = held.get_mut(&x).filter(|n| **n > 0) {
                    assert!(core.delete(&x), "a held item was not deleted");
                    *n -= 1;
                }
            }
            4 => {
                core.compact();
                if op & 8 != 0 {
                    rdb_round_trip(&core);
                    scandump_round_trip(&core);
                }
            }
            _ => {
                let Some(x) = item(input, op) else { break };
                let _ = core.contains(&x);
            }
        }
        let total: u64 = held.values().sum();
        assert_eq!(core.items(), total, "items");
        for (x, &n) in &held {
            if n > 0 {
                assert!(core.contains(x), "a false negative");
                assert!(
                    core.count(x) >= n,
                    "a held item counts less than it is held"
                );
            }
        }
    }
    check_shape(&core);
    rdb_round_trip(&core);
    scandump_round_trip(&core);
}

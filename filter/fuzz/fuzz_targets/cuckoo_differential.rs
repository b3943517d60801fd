//! The cuckoo core against the naive model of `layerbloom_fuzz::cuckoo::model` (written from
//! the fixtures' README): filters of small capacities, so evictions, their undo, growth,
//! `Filter is full`, the expansion limit, the memory limit, deletes that trigger compaction
//! and `CF.COMPACT` are all reached. Every reply is compared, and after every operation the
//! item and delete counts and every sub-filter's slot bytes.
//!
//! Input: `u8 bucket size, u8 capacity, u8 max iterations, u8 expansion, u8 max expansions,
//! u8 memory limit`, then operations: an opcode byte (low 3 bits the operation, bit 3 NX for
//! batches, bit 7 a raw item rather than one of a small universe) and its items.

#![no_main]

use layerbloom_filter::cuckoo::{params, CuckooFilter, Limits, ParamError, Params};
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
    let max_iterations: u16 = if mi >= 0xf8 {
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
                let Some(xs) = items(&mut input, op) else {
                    break;
                };
                let refs: Vec<&[u8]> = xs.iter().map(Vec::as_slice).collect();
                let nx = op & 8 != 0;
                assert_eq!(
                    core.insert_many(&refs, nx, &limits),
                    model.insert_many(&xs, nx),
                    "insert_many"
                );
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

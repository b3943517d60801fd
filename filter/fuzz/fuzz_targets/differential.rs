//! The scalable filter against a `HashSet` model: random adds and lookups (single and
//! batched) on filters of random shape, blocked and classic, scaling and not. No false
//! negative, ever; an add answers "new" only for an item never added; the item count is the
//! number of "new" answers; a refused add changes nothing; the batch API does exactly what
//! one-by-one calls do; and the filter round-trips through its formats at any point.
//!
//! Input: `u16 capacity, u8 rate, u8 expansion, u8 flags`, then operations: an opcode byte
//! and an item (a 2-byte id from a small universe, or a `u16`-length byte string).

#![no_main]

use std::collections::HashSet;

use layerbloom_filter::{FilterError, FilterSpec, Layout, ScalableFilter};
use layerbloom_fuzz::{round_trips, Input, MAX_BYTES};
use libfuzzer_sys::fuzz_target;

const RATES: [f64; 8] = [0.25, 0.1, 0.01, 0.001, 1e-4, 1e-6, 1e-9, 0.5];

fn item(input: &mut Input, op: u8) -> Option<Vec<u8>> {
    if op & 0x80 == 0 {
        let id = input.u16()? % 512;
        Some(format!("item:{id}").into_bytes())
    } else {
        input.bytes16().map(<[u8]>::to_vec)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let (Some(cap), Some(rate), Some(exp), Some(flags)) =
        (input.u16(), input.u8(), input.u8(), input.u8())
    else {
        return;
    };
    let error = if rate >= 0xf8 {
        match input.f64() {
            Some(x) if x > 0.0 && x < 1.0 => x,
            _ => return,
        }
    } else {
        RATES[usize::from(rate % 8)]
    };
    let expansion = u32::from(exp % 5);
    let spec = FilterSpec {
        capacity: u64::from(cap % 2000) + 1,
        error,
        expansion,
        nonscaling: flags & 1 != 0 || expansion == 0,
        layout: if flags & 2 != 0 {
            Layout::Classic
        } else {
            Layout::Blocked
        },
    };
    let Ok(mut filter) = ScalableFilter::new(spec, MAX_BYTES) else {
        return;
    };
    let mut model: HashSet<Vec<u8>> = HashSet::new();
    let mut counted = 0u64;
    let mut steps = 0;
    while let Some(op) = input.u8() {
        steps += 1;
        if steps > 4096 {
            break;
        }
        match op & 3 {
            0 | 1 => {
                let Some(x) = item(&mut input, op) else { break };
                let before_items = filter.items();
                let before_layers = filter.layer_count();
                match filter.add(&x, MAX_BYTES) {
                    Ok(true) => {
                        assert!(!model.contains(&x), "an added item answered new again");
                        model.insert(x.clone());
                        counted += 1;
                    }
                    // Present, or a false positive: either way nothing changed.
                    Ok(false) => assert_eq!(filter.items(), before_items),
                    Err(e) => {
                        assert!(!model.contains(&x), "a known item was refused: {e}");
                        if matches!(e, FilterError::Full) {
                            assert!(spec.nonscaling, "a scaling filter said full");
                        }
                        assert_eq!(filter.items(), before_items);
                        assert_eq!(filter.layer_count(), before_layers);
                    }
                }
                assert!(filter.contains(&x) || !model.contains(&x), "false negative");
            }
            2 => {
                let Some(x) = item(&mut input, op) else { break };
                if model.contains(&x) {
                    assert!(filter.contains(&x), "false negative");
                }
            }
            _ if op & 0x40 != 0 => {
                // A batch through add_many, against a clone taking the items one by one.
                let Some(n) = input.u8() else { break };
                let mut batch = Vec::new();
                for _ in 0..(n % 64) {
                    let Some(x) = item(&mut input, op & 0x80) else {
                        break;
                    };
                    batch.push(x);
                }
                let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
                let mut one_by_one = filter.clone();
                let mut expected = Vec::new();
                for x in &refs {
                    let r = one_by_one.add(x, MAX_BYTES);
                    let failed = r.is_err();
                    expected.push(r);
                    if failed {
                        break;
                    }
                }
                let got = filter.add_many(&refs, MAX_BYTES);
                assert_eq!(got, expected, "add_many differs from add");
                assert_eq!(filter, one_by_one);
                for (x, r) in refs.iter().zip(&got) {
                    if let Ok(true) = r {
                        assert!(model.insert(x.to_vec()), "an added item answered new again");
                        counted += 1;
                    }
                }
                let found = filter.contains_many(&refs);
                for (x, f) in refs.iter().zip(found) {
                    assert_eq!(f, filter.contains(x), "contains_many differs from contains");
                }
            }
            _ => round_trips(&filter),
        }
        assert_eq!(filter.items(), counted, "the item count");
    }
    let all: Vec<&[u8]> = model.iter().map(Vec::as_slice).collect();
    assert!(
        filter.contains_many(&all).into_iter().all(|f| f),
        "false negative at the end"
    );
    round_trips(&filter);
});

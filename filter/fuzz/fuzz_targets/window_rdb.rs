//! The windowed type's RDB value (its own module type), read through `window::codec::load_rdb`
//! as the module's `rdb_load` reads it, with or without a memory budget (a client's RESTORE
//! has one). The decoder may refuse anything; within a budget it never allocates past it
//! (measured by the allocator) beyond the header's own metadata; what it accepts equals what
//! the whole-value decoder builds from the same strings and is safe under every operation.
//!
//! Input: one byte choosing the budget (bit 7: a budget, bits 0-2: which), then the fields as
//! `FuzzSource` reads them (each buffer a varint length and its bytes).

#![no_main]

use layerbloom_filter::window::codec;
use layerbloom_fuzz::cuckoo::CountingAlloc;
use layerbloom_fuzz::window::exercise;
use layerbloom_fuzz::{FuzzSource, Input};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const BUDGETS: [u64; 8] = [
    0,
    200,
    1 << 10,
    4 << 10,
    16 << 10,
    1 << 16,
    1 << 20,
    1 << 24,
];

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(b) = input.u8() else {
        return;
    };
    let budget = (b & 0x80 != 0).then(|| BUDGETS[usize::from(b & 7)]);
    // A client's RESTORE on a primary is also checked against the clock: sometimes fuzz that.
    let clock = (b & 0x40 != 0).then_some(1_764_547_200_000u64);
    let fields = input.rest();
    let mut src = FuzzSource(Input::new(fields));

    let base = CountingAlloc::reset_peak();
    let decoded = codec::load_rdb(&mut src, budget, clock);
    let taken = CountingAlloc::peak() - base;
    if let Some(budget) = budget {
        // The header's metadata (at most a few times its bytes) and the filter, no more.
        let scratch = 4 * data.len() as u64 + 4096;
        assert!(
            taken as u64 <= budget.saturating_add(scratch),
            "the decoder took {taken} bytes within a budget of {budget}"
        );
    }
    let Ok((mut filter, _warnings)) = decoded else {
        return;
    };
    if let Some(budget) = budget {
        assert!(filter.memory_usage() <= budget);
    }

    // The same strings through the whole-value decoder (a lenient header, as RDB).
    let mut again = FuzzSource(Input::new(fields));
    let mut strings = Vec::new();
    while let Ok(s) = layerbloom_filter::format::RdbSource::buffer(&mut again) {
        strings.push(s);
    }
    let used = 1 + codec::rdb_pieces(&filter).len();
    let whole = codec::decode_value(strings[0], strings[1..used].iter().copied());
    assert_eq!(
        whole.as_ref().ok(),
        Some(&filter),
        "the two decoders disagree"
    );

    exercise(&mut filter, fields.get(..4).unwrap_or(b"rdb"));
});

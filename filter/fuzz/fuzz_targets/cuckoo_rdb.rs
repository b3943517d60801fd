//! The cuckoo type's RDB value (`MBbloomCF`, encoding versions 0 to 4, and unknown ones),
//! read field by field through `cuckoo::codec::decode_rdb` as the module's `rdb_load` reads
//! it, with or without a memory budget (a client's RESTORE has one). The decoder may refuse
//! anything; it never allocates past the budget (measured by the allocator, not taken from
//! the decoder's own bookkeeping), nor more than the input's slot strings and its tables
//! without one; what it accepts is a filter of the shape its settings give, equal to what its
//! own RDB fields decode to, and safe under every operation.
//!
//! The extension's type (`LBcuckoo-`, `rated_codec::decode_rdb`) is read the same way when
//! bit 4 of the budget byte is set, with the same bounds.
//!
//! Input: one byte choosing the encoding version (-1 to 5), one choosing the budget (none,
//! or one of a few sizes) and the type, then the fields as `FuzzSource` reads them.

#![no_main]

use layerbloom_filter::cuckoo::codec;
use layerbloom_filter::cuckoo::params::MAX_SUB_FILTERS;
use layerbloom_filter::cuckoo::{rated_codec, CuckooFilter, RatedFilter};
use layerbloom_fuzz::cuckoo::{exercise, CountingAlloc};
use layerbloom_fuzz::FuzzSource;
use layerbloom_fuzz::Input;
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const BUDGETS: [u64; 8] = [0, 100, 200, 1 << 10, 4 << 10, 64 << 10, 1 << 20, u64::MAX];

/// What the decoder may take beyond the filter itself: the table of sub-filter lengths it
/// checks before allocating anything (8 bytes per sub-filter).
const SCRATCH: usize = MAX_SUB_FILTERS * 8;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let (Some(v), Some(b)) = (input.u8(), input.u8()) else {
        return;
    };
    let encver = i32::from(v % 7) - 1;
    let budget = (b & 8 != 0).then(|| BUDGETS[usize::from(b & 7)]);
    let mut src = FuzzSource(input);
    if b & 16 != 0 {
        rated(data, &mut src, encver, budget);
        return;
    }

    let base = CountingAlloc::reset_peak();
    let decoded = codec::decode_rdb(&mut src, encver, budget);
    let taken = CountingAlloc::peak() - base;

    // Without a budget the slots are copies of the input's strings; the tables are at most
    // one entry per sub-filter.
    let table = CuckooFilter::modelled_bytes(MAX_SUB_FILTERS, []) as usize;
    assert!(
        taken <= data.len() + table + SCRATCH,
        "the decoder took {taken} bytes for a {}-byte input",
        data.len()
    );
    if let Some(budget) = budget {
        assert!(
            taken as u64 <= budget.saturating_add(SCRATCH as u64),
            "the decoder took {taken} bytes within a budget of {budget}"
        );
    }
    let Ok(mut filter) = decoded else {
        return;
    };
    assert!((0..=codec::MAX_ENCVER).contains(&encver));
    if let Some(budget) = budget {
        assert!(filter.memory_usage() <= budget, "a filter over its budget");
    }
    if encver < 4 {
        // The legacy versions imply the defaults and no deletes.
        assert_eq!(filter.params(), Default::default());
        assert_eq!(filter.deletes(), 0);
    }
    exercise(&mut filter, b"cuckoo");
});

/// What the extension's decoder may take beyond the filter: its table of sub-filter shapes
/// (24 bytes each), and each sub-filter's 8 bytes of padding.
const RATED_SCRATCH: usize = MAX_SUB_FILTERS * (24 + 8);

fn rated(data: &[u8], src: &mut FuzzSource, encver: i32, budget: Option<u64>) {
    let base = CountingAlloc::reset_peak();
    let decoded = rated_codec::decode_rdb(src, encver, budget);
    let taken = CountingAlloc::peak() - base;
    let table = RatedFilter::modelled_bytes(MAX_SUB_FILTERS, []) as usize;
    assert!(
        taken <= data.len() + table + RATED_SCRATCH,
        "the extension decoder took {taken} bytes for a {}-byte input",
        data.len()
    );
    if let Some(budget) = budget {
        assert!(
            taken as u64 <= budget.saturating_add(RATED_SCRATCH as u64),
            "the extension decoder took {taken} bytes within a budget of {budget}"
        );
    }
    let Ok(mut filter) = decoded else {
        return;
    };
    assert_eq!(encver, rated_codec::ENCVER);
    if let Some(budget) = budget {
        assert!(filter.memory_usage() <= budget, "a filter over its budget");
    }
    layerbloom_fuzz::cuckoo_rated::exercise(&mut filter, b"wide");
}

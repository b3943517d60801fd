//! Huge pages: a large sub-filter of either layout asks for them once it is dense, or at once
//! when every slot is about to be written (a header with items before its chunks, a copy); a
//! sparse one, or a replicated creation (an empty header), does not (each first touch would make
//! 2 MiB resident).

use super::super::codec::{self, Header};
use super::super::rate::Widths;
use super::super::rated::RatedFilter;
use super::super::rated_codec::{self, RatedHeader};
use crate::cuckoo::{CuckooFilter, Limits, Params};
use crate::format::Strictness;
use crate::zeroed::{huge_pages_advised, HUGE_PAGE};

/// Whether the kernel was asked for huge pages at the first huge-page boundary inside
/// `bytes` (the hint covers the aligned part of the array); `None` without THP here.
fn advised(bytes: &[u8]) -> Option<bool> {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
        return None;
    }
    let start = bytes.as_ptr() as usize;
    let inside = start.next_multiple_of(HUGE_PAGE);
    assert!(inside + HUGE_PAGE <= start + bytes.len(), "array too small");
    huge_pages_advised(inside as *const u8)
}

const PARAMS: Params = Params {
    bucket_size: 2,
    max_iterations: 20,
    expansion: 1,
};

#[test]
fn a_large_sub_filter_asks_for_huge_pages_once_dense_and_a_loaded_one_at_once() {
    // 64 MiB of slots (over glibc's largest mmap threshold, so a fresh mapping that no other
    // test advised): dense after 64 MiB / 4 KiB × 4 = 65536 fingerprints.
    let mut f = CuckooFilter::new(1 << 25, PARAMS, u64::MAX).unwrap();
    let Some(before) = advised(f.sub_filters()[0].as_bytes()) else {
        eprintln!("no transparent huge pages on this kernel: nothing to check");
        return;
    };
    assert!(!before, "a new, empty sub-filter is sparse");
    let limits = Limits::default();
    for i in 0..65535u32 {
        f.add(&i.to_le_bytes(), &limits).unwrap();
    }
    assert_eq!(advised(f.sub_filters()[0].as_bytes()), Some(false));
    f.add(b"the last", &limits).unwrap();
    assert_eq!(advised(f.sub_filters()[0].as_bytes()), Some(true));

    let header = Header::of(&f);
    let loaded = codec::filter_from_header(&header, Strictness::LoadChunk, u64::MAX).unwrap();
    assert_eq!(advised(loaded.sub_filters()[0].as_bytes()), Some(true));
    // An empty filter's header (a replicated creation) is sparse until dense.
    let empty = CuckooFilter::new(1 << 25, PARAMS, u64::MAX).unwrap();
    let created =
        codec::filter_from_header(&Header::of(&empty), Strictness::LoadChunk, u64::MAX).unwrap();
    assert_eq!(advised(created.sub_filters()[0].as_bytes()), Some(false));
    let copy = f.try_clone().unwrap();
    assert_eq!(copy, f);
    assert_eq!(advised(copy.sub_filters()[0].as_bytes()), Some(true));
}

#[test]
fn a_large_extension_sub_filter_asks_for_huge_pages_once_dense_and_a_loaded_one_at_once() {
    // 2^23 buckets of 4 slots of 13 bits: 52 MiB, dense after 53248 fingerprints.
    let widths = Widths {
        first: 13,
        second: 14,
    };
    let params = Params {
        bucket_size: 4,
        ..PARAMS
    };
    let mut f = RatedFilter::new(1 << 23, params, widths, 0.001, u64::MAX).unwrap();
    let Some(before) = advised(f.sub_filters()[0].as_bytes()) else {
        eprintln!("no transparent huge pages on this kernel: nothing to check");
        return;
    };
    assert!(!before, "a new, empty sub-filter is sparse");
    let limits = Limits::default();
    let dense = (13u64 << 23) / 2 / 4096 * 4;
    for i in 0..dense - 1 {
        f.add(&i.to_le_bytes(), &limits).unwrap();
    }
    assert_eq!(advised(f.sub_filters()[0].as_bytes()), Some(false));
    f.add(b"the last", &limits).unwrap();
    assert_eq!(advised(f.sub_filters()[0].as_bytes()), Some(true));

    let header = RatedHeader::of(&f);
    let loaded = rated_codec::filter_from_header(&header, Strictness::LoadChunk, u64::MAX).unwrap();
    assert_eq!(advised(loaded.sub_filters()[0].as_bytes()), Some(true));
    let empty = RatedFilter::new(1 << 23, params, widths, 0.001, u64::MAX).unwrap();
    let created =
        rated_codec::filter_from_header(&RatedHeader::of(&empty), Strictness::LoadChunk, u64::MAX)
            .unwrap();
    assert_eq!(advised(created.sub_filters()[0].as_bytes()), Some(false));
    let copy = f.try_clone().unwrap();
    assert_eq!(copy, f);
    assert_eq!(advised(copy.sub_filters()[0].as_bytes()), Some(true));
}

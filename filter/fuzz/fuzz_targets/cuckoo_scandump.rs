//! `CF.LOADCHUNK`: a SCANDUMP header creates an empty filter (a client's header, or one
//! replayed from the AOF or a primary), then chunks are written at iterators of the fuzzer's
//! choosing. Every chunk is accepted exactly when it is non-empty, lies inside one sub-filter
//! and overwrites no fingerprint with another (checked against a model of the sub-filters'
//! byte ranges here); it lands exactly there, and a refused one changes nothing. The loaded
//! filter is then safe under every operation, and round-trips through the stream it dumps.
//!
//! With bit 2 of the flags, the header is the extension's (52 bytes, `rated_codec`) and the
//! filter an extension filter: an accepted chunk lands where its iterator says, is whole
//! 8-slot groups and changes no occupied slot; a refused one changes nothing.
//!
//! Input: a flags byte (bit 0: replay strictness; bit 1: the header is a `u16`-length string
//! rather than 38 bytes; bit 2: the extension), the header, then chunks: a tag byte, `u16 len, data`, and either a
//! `u32` offset (even tag: iterator `1 + offset + len`, aimed at the sub-filters) or a raw
//! `u64` iterator (odd tag).

#![no_main]

use layerbloom_filter::cuckoo::codec::{self, Header, HEADER_BYTES};
use layerbloom_filter::cuckoo::{rated_codec, AnyFilter, RatedFilter};
use layerbloom_filter::format::{CodecError, Strictness};
use layerbloom_fuzz::cuckoo::{exercise, scandump_round_trip};
use layerbloom_fuzz::Input;
use libfuzzer_sys::fuzz_target;

/// The memory limit for the filters a header creates here: small, so each input runs fast.
const LOAD_LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(flags) = input.u8() else {
        return;
    };
    let strictness = if flags & 1 != 0 {
        Strictness::Rdb
    } else {
        Strictness::LoadChunk
    };
    let header_bytes = if flags & 2 != 0 {
        input.bytes16()
    } else if flags & 4 != 0 {
        input.take(rated_codec::HEADER_BYTES)
    } else {
        input.take(HEADER_BYTES)
    };
    let Some(header_bytes) = header_bytes else {
        return;
    };
    if flags & 4 != 0 {
        rated(header_bytes, strictness, &mut input);
        return;
    }
    let header = match Header::decode(header_bytes) {
        Ok(h) => h,
        Err(_) => {
            assert_ne!(header_bytes.len(), HEADER_BYTES, "a 38-byte header is read");
            return;
        }
    };
    assert_eq!(header.encode().as_slice(), header_bytes, "header fields");
    let shape = header.shape(strictness);
    let mut filter = match codec::filter_from_header(&header, strictness, LOAD_LIMIT) {
        Ok(f) => f,
        Err(e) => {
            assert!(
                shape.is_err() || header.memory_bytes(strictness).unwrap() > LOAD_LIMIT,
                "a header within the limit was refused: {e}"
            );
            return;
        }
    };
    let (params, lengths) = shape.expect("a header that built a filter has a shape");
    assert!(filter.memory_usage() <= LOAD_LIMIT);
    assert_eq!(Header::of(&filter), header, "the filter is the header's");
    assert_eq!(filter.params(), params);
    let got: Vec<u64> = filter
        .sub_filters()
        .iter()
        .map(|s| s.as_bytes().len() as u64)
        .collect();
    assert_eq!(got, lengths, "sub-filters as long as the header said");
    assert!(filter
        .sub_filters()
        .iter()
        .all(|s| s.as_bytes().iter().all(|&x| x == 0)));
    let total: u64 = lengths.iter().sum();
    if strictness == Strictness::LoadChunk {
        assert!(
            header.items <= total,
            "a client's header with more items than slots"
        );
    }
    // A client's header is at least as strict as a replayed one.
    if strictness == Strictness::LoadChunk {
        assert!(header.shape(Strictness::Rdb).is_ok());
    }

    // Byte ranges of the sub-filters in the concatenation SCANDUMP numbers.
    let mut ranges = Vec::new();
    let mut start = 0u64;
    for &l in &lengths {
        ranges.push((start, start + l));
        start += l;
    }
    let small = total <= 1 << 16;
    while let Some(tag) = input.u8() {
        let Some(chunk) = input.bytes16() else {
            break;
        };
        let len = chunk.len() as u64;
        let it = if tag & 1 == 0 {
            let Some(off) = input.u32() else { break };
            1 + u64::from(off) % (total + 2) + len
        } else {
            let Some(raw) = input.u64() else { break };
            raw
        };
        let offset = it.checked_sub(1).and_then(|e| e.checked_sub(len));
        let target = offset.and_then(|off| {
            ranges
                .iter()
                .position(|&(a, b)| off >= a && off + len <= b)
                .map(|i| (i, (off - ranges[i].0) as usize))
        });
        let old = target.map(|(i, within)| {
            filter.sub_filters()[i].as_bytes()[within..within + chunk.len()].to_vec()
        });
        // Empty slots may be filled and fingerprints repeated, never replaced.
        let clashes = old
            .as_ref()
            .is_some_and(|old| old.iter().zip(chunk).any(|(&o, &d)| o != 0 && o != d));
        let fits = !chunk.is_empty() && target.is_some() && !clashes;
        let before = small.then(|| filter.clone());
        match codec::load_chunk(&mut filter, it, chunk) {
            Ok(()) => {
                assert!(fits, "a chunk that does not fit was accepted (it {it})");
                let (i, within) = target.expect("fits");
                assert_eq!(
                    &filter.sub_filters()[i].as_bytes()[within..within + chunk.len()],
                    chunk,
                    "the chunk did not land where its iterator says"
                );
            }
            Err(e) => {
                assert!(!fits, "a chunk that fits was refused (it {it}): {e}");
                if clashes {
                    assert!(matches!(e, CodecError::BadData(_)));
                }
                if let Some(before) = before {
                    assert_eq!(filter, before, "a refused chunk changed the filter");
                }
            }
        }
    }
    // A fully loaded filter's own stream rebuilds it.
    scandump_round_trip(&filter);
    let mut copy = filter.clone();
    exercise(&mut copy, b"chunk");
});

/// The chunk target for an extension filter's header.
fn rated(header_bytes: &[u8], strictness: Strictness, input: &mut Input) {
    let filter = match AnyFilter::from_header(header_bytes, strictness, LOAD_LIMIT) {
        Ok(AnyFilter::Rated(f)) => f,
        Ok(AnyFilter::Redis(_)) => {
            assert_eq!(
                header_bytes.len(),
                HEADER_BYTES,
                "only 38 bytes are RedisBloom's"
            );
            return;
        }
        Err(_) => return,
    };
    let mut filter: RatedFilter = *filter;
    assert!(filter.memory_usage() <= LOAD_LIMIT);
    assert_eq!(
        rated_codec::RatedHeader::of(&filter).encode().as_slice(),
        header_bytes,
        "the filter is the header's"
    );
    if strictness == Strictness::LoadChunk {
        let slots: u64 = filter.sub_filters().iter().map(|s| s.slots()).sum();
        assert!(
            filter.items() <= slots,
            "a client's header with more items than slots"
        );
    }
    let lengths: Vec<u64> = filter
        .sub_filters()
        .iter()
        .map(|s| s.as_bytes().len() as u64)
        .collect();
    let total: u64 = lengths.iter().sum();
    let small = total <= 1 << 16;
    while let Some(tag) = input.u8() {
        let Some(chunk) = input.bytes16() else {
            break;
        };
        let len = chunk.len() as u64;
        let it = if tag & 1 == 0 {
            let Some(off) = input.u32() else { break };
            // Mostly aligned to an 8-slot group of the first sub-filter's width.
            let bits = u64::from(filter.sub_filters()[0].bits());
            let off = u64::from(off) % (total + 2);
            let off = if tag & 2 == 0 { off / bits * bits } else { off };
            1 + off + len
        } else {
            let Some(raw) = input.u64() else { break };
            raw
        };
        let before = small.then(|| filter.clone());
        match rated_codec::load_chunk(&mut filter, it, chunk) {
            Ok(()) => {
                let off = it - 1 - len;
                let mut start = 0;
                let (i, sub_len) = lengths
                    .iter()
                    .enumerate()
                    .find_map(|(i, &l)| {
                        let found = (off >= start && off + len <= start + l).then_some((i, l));
                        start += l;
                        found
                    })
                    .expect("an accepted chunk lies in one sub-filter");
                let s = &filter.sub_filters()[i];
                let within = off - (start - sub_len);
                let bits = u64::from(s.bits());
                assert!(
                    within.is_multiple_of(bits),
                    "a misaligned chunk was accepted"
                );
                assert!(len.is_multiple_of(bits) || within + len == sub_len);
                assert_eq!(
                    &s.as_bytes()[within as usize..(within + len) as usize],
                    chunk,
                    "the chunk did not land where its iterator says"
                );
                if let Some(before) = before {
                    let old = &before.sub_filters()[i];
                    for slot in within * 8 / bits..(within + len) * 8 / bits {
                        let was = old.get(slot);
                        assert!(
                            was == 0 || was == s.get(slot),
                            "a fingerprint was overwritten"
                        );
                    }
                }
            }
            Err(_) => {
                if let Some(before) = before {
                    assert_eq!(filter, before, "a refused chunk changed the filter");
                }
            }
        }
    }
    layerbloom_fuzz::cuckoo_rated::check_shape(&filter);
    layerbloom_fuzz::cuckoo_rated::scandump_round_trip(&filter);
    layerbloom_fuzz::cuckoo_rated::exercise(&mut filter, b"chunk");
}

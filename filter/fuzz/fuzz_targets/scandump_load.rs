//! `BF.LOADCHUNK`: a SCANDUMP header (layerbloom's or RedisBloom's) creates a zeroed filter,
//! then chunks are written at iterators of the fuzzer's choosing. Every chunk is accepted
//! exactly when it is non-empty and lies inside one layer (checked against a model of the
//! layers here), lands exactly there, and a refused one changes nothing.
//!
//! Input: `u16 len, header`, then chunks: a tag byte, `u16 len, data`, and either a `u32`
//! offset (even tag: iterator `1 + offset + len`, aimed at the layers) or a raw `i64`
//! iterator (odd tag).

#![no_main]

use layerbloom_filter::bloom::codec;
use layerbloom_fuzz::{exercise, Input, LayerRanges};
use libfuzzer_sys::fuzz_target;

/// The memory limit for the filters a header creates here: small, so each input runs fast.
const LOAD_LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(header_bytes) = input.bytes16() else {
        return;
    };
    let Ok(header) = codec::decode_header(header_bytes) else {
        return;
    };
    let lengths = header.layer_lengths();
    let Ok(mut filter) = codec::filter_from_header(&header, LOAD_LIMIT) else {
        assert!(header.memory_bytes() > LOAD_LIMIT || lengths.contains(&0));
        return;
    };
    let got: Vec<u64> = filter
        .layer_bytes()
        .iter()
        .map(|b| b.len() as u64)
        .collect();
    assert_eq!(got, lengths, "layers as long as the header said");
    assert!(filter
        .layer_bytes()
        .iter()
        .all(|b| b.iter().all(|&x| x == 0)));
    let ranges = LayerRanges::new(lengths.iter().copied());
    let total = ranges.total;
    let small = total <= 1 << 16;
    while let Some((it, chunk)) = input.bloom_chunk(total) {
        let (target, fits) = ranges.place(it, chunk.len());
        let before = small.then(|| filter.clone());
        let old_bytes = target
            .map(|(i, within)| filter.layer_bytes()[i][within..within + chunk.len()].to_vec());
        match codec::load_chunk(&mut filter, it, chunk) {
            Ok(()) => {
                assert!(fits, "a chunk outside every layer was accepted (it {it})");
                if let (Some((i, within)), Some(old)) = (target, old_bytes) {
                    // Chunks are ORed in: they never clear a bit.
                    let ored: Vec<u8> = old.iter().zip(chunk).map(|(a, b)| a | b).collect();
                    assert_eq!(
                        &filter.layer_bytes()[i][within..within + chunk.len()],
                        ored.as_slice(),
                        "the chunk was not ORed in where its iterator says"
                    );
                }
            }
            Err(_) => {
                assert!(!fits, "a chunk inside layer was refused (it {it})");
                if let Some(before) = before {
                    assert_eq!(filter, before, "a refused chunk changed the filter");
                }
            }
        }
    }
    // Counts of set bits stay exact under byte writes.
    for (summary, bytes) in filter.layer_summaries().iter().zip(filter.layer_bytes()) {
        let ones: u64 = bytes.iter().map(|b| u64::from(b.count_ones())).sum();
        assert_eq!(summary.set_bits, ones, "set-bit count after LOADCHUNK");
    }
    exercise(&mut filter, b"chunk");
});

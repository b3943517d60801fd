//! `BF.LOADCHUNK` of a windowed filter: a windowed SCANDUMP header creates the whole filter
//! zeroed, then chunks are written at iterators of the fuzzer's choosing. Every chunk is
//! accepted exactly when it lies inside one layer of one slice (checked against a model of
//! the layers here), is ORed in exactly there, and a refused one changes nothing.
//!
//! Input: `u16 len, header`, then chunks: a tag byte, `u16 len, data`, and either a `u32`
//! offset (even tag: iterator `1 + offset + len`) or a raw `i64` iterator (odd tag).

#![no_main]

use layerbloom_filter::format::Strictness;
use layerbloom_filter::window::codec;
use layerbloom_filter::WindowedFilter;
use layerbloom_fuzz::window::exercise;
use layerbloom_fuzz::{Input, LayerRanges};
use libfuzzer_sys::fuzz_target;

const LOAD_LIMIT: u64 = 1 << 20;

fn layer_bytes(f: &WindowedFilter) -> Vec<Vec<u8>> {
    f.slice_filters()
        .flat_map(|(_, c)| c.layer_bytes().into_iter().map(<[u8]>::to_vec))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(header_bytes) = input.bytes16() else {
        return;
    };
    let Ok((header, _)) = codec::decode_header(header_bytes, Strictness::LoadChunk) else {
        return;
    };
    let Ok(mut filter) = codec::filter_from_header(&header, LOAD_LIMIT) else {
        assert!(header.memory_bytes() > LOAD_LIMIT);
        return;
    };
    assert_eq!(filter.memory_usage(), header.memory_bytes());
    let layers = layer_bytes(&filter);
    assert_eq!(layers.len(), header.layer_count());
    assert!(layers.iter().all(|l| l.iter().all(|&b| b == 0)));
    let ranges = LayerRanges::new(layers.iter().map(|l| l.len() as u64));
    let total = ranges.total;
    assert_eq!(total, header.bits_bytes());
    while let Some((it, chunk)) = input.bloom_chunk(total) {
        let (target, fits) = ranges.place(it, chunk.len());
        let before = filter.clone();
        match codec::load_chunk(&mut filter, it, chunk) {
            Ok(()) => {
                assert!(fits, "a chunk outside every layer was accepted (it {it})");
                if let Some((i, within)) = target {
                    let old = &layer_bytes(&before)[i][within..within + chunk.len()];
                    let ored: Vec<u8> = old.iter().zip(chunk).map(|(a, b)| a | b).collect();
                    assert_eq!(
                        &layer_bytes(&filter)[i][within..within + chunk.len()],
                        ored.as_slice()
                    );
                }
            }
            Err(_) => {
                assert!(!fits, "a chunk inside a layer was refused (it {it})");
                assert_eq!(filter, before, "a refused chunk changed the filter");
            }
        }
    }
    for (_, chain) in filter.slice_filters() {
        for (summary, bytes) in chain.layer_summaries().iter().zip(chain.layer_bytes()) {
            let ones: u64 = bytes.iter().map(|b| u64::from(b.count_ones())).sum();
            assert_eq!(summary.set_bits, ones, "set-bit count after LOADCHUNK");
        }
    }
    exercise(&mut filter, b"chunk");
});

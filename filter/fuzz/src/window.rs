//! What the windowed targets share: the checks every windowed filter a decoder accepts must
//! pass, and the writer of their seeds.

use layerbloom_filter::format::Strictness;
use layerbloom_filter::window::codec;
use layerbloom_filter::WindowedFilter;

use crate::MAX_BYTES;

/// Every check an accepted windowed filter must pass. `seed` varies the items added and how
/// far the window moves.
pub fn exercise(filter: &mut WindowedFilter, seed: &[u8]) {
    let summaries = filter.slice_summaries();
    assert!(summaries.len() <= filter.slices() as usize + 1);
    assert!(summaries.windows(2).all(|w| w[0].id < w[1].id));
    assert!(summaries.iter().all(|s| s.id <= filter.head()));
    assert_eq!(
        summaries.iter().map(|s| s.layers).sum::<usize>(),
        filter.layer_count()
    );
    let _ = (filter.items(), filter.capacity(), filter.error());
    let _ = (filter.expansion(), filter.debug_lines(), filter.slice_ms());
    let _ = filter.contains(seed);
    let _ = filter.contains_at(seed, filter.head().saturating_add(1));
    round_trips(filter);

    // Adds, then moves: an item just added is found while its slice lives; a refused add
    // changes nothing.
    let step = u64::from(seed.first().copied().unwrap_or(1) % 4);
    let mut added = Vec::new();
    for i in 0..6u8 {
        if i % 2 == 1 {
            let to = filter.head().saturating_add(step);
            let expired = filter.advance_to(to).expired;
            assert!(expired as usize <= filter.slices() as usize + 1);
            added.retain(|(head, _): &(u64, Vec<u8>)| {
                head.saturating_add(u64::from(filter.slices())) >= filter.head()
            });
        }
        let mut item = seed.to_vec();
        item.push(i);
        let small = filter.memory_usage() <= 1 << 20;
        let before = small.then(|| filter.clone());
        match filter.add(&item, MAX_BYTES) {
            Ok(_) => added.push((filter.head(), item)),
            Err(e) => {
                if let Some(before) = before {
                    assert_eq!(*filter, before, "a refused add ({e}) changed the filter");
                }
            }
        }
        for (_, item) in &added {
            assert!(filter.contains(item), "an item of the window is not found");
        }
    }
    round_trips(filter);
}

/// The filter's RDB value and its SCANDUMP stream both rebuild it exactly.
pub fn round_trips(filter: &WindowedFilter) {
    let header = codec::encode_header(filter);
    let back = codec::decode_value(&header, codec::rdb_pieces(filter))
        .unwrap_or_else(|e| panic!("a windowed filter's own RDB value is refused: {e}"));
    assert_eq!(&back, filter, "RDB round trip");

    let (h, _) = codec::decode_header(&header, Strictness::Rdb).expect("its own header");
    assert_eq!(h.memory_bytes(), filter.memory_usage());
    let mut rebuilt = codec::filter_from_header(&h, u64::MAX).expect("its own header");
    let mut total = 0u64;
    for (it, data) in crate::bloom_chunks(|it| codec::dump_chunk(filter, it), usize::MAX) {
        codec::load_chunk(&mut rebuilt, it, data).expect("its own chunk");
        total += data.len() as u64;
    }
    assert_eq!(total, h.bits_bytes());
    assert_eq!(&rebuilt, filter, "SCANDUMP + LOADCHUNK round trip");
}

/// Writes the windowed targets' seed corpora (`filter/fuzz/seeds/window_*/`):
/// `cargo test --release --lib -- --ignored write_window_seeds` in `filter/fuzz`.
#[cfg(test)]
mod seeds {
    use std::fs;
    use std::path::Path;

    use layerbloom_filter::window::codec;
    use layerbloom_filter::{FilterSpec, Layout, WindowSpec, WindowedFilter};

    use crate::cuckoo::write_varint;

    fn filters() -> Vec<(&'static str, WindowedFilter)> {
        let mut out = Vec::new();
        for (name, window_ms, slices, capacity, error, expansion, layout, heads) in [
            (
                "empty",
                1000u64,
                4u32,
                100u64,
                0.01,
                2u32,
                Layout::Blocked,
                &[][..],
            ),
            (
                "ring",
                1000,
                4,
                40,
                0.01,
                2,
                Layout::Blocked,
                &[0u64, 1, 2, 4, 5][..],
            ),
            (
                "grown",
                60_000,
                2,
                10,
                0.001,
                2,
                Layout::Blocked,
                &[3, 4][..],
            ),
            (
                "nonscaling",
                500,
                5,
                50,
                0.1,
                0,
                Layout::Blocked,
                &[0, 2, 7][..],
            ),
            (
                "classic",
                1000,
                3,
                30,
                0.01,
                2,
                Layout::Classic,
                &[0, 1, 3][..],
            ),
            ("one-slice", 10, 1, 20, 0.05, 4, Layout::Blocked, &[9][..]),
        ] {
            let spec = WindowSpec {
                window_ms,
                slices,
                filter: FilterSpec {
                    layout,
                    ..FilterSpec::new(capacity, error, expansion)
                },
            };
            let mut f = WindowedFilter::new(spec, 1_700_000_000_000, u64::MAX).unwrap();
            for &head in heads {
                f.advance_to(head);
                for i in 0..capacity / 2 + head * 5 {
                    let _ = f.add(format!("seed:{head}:{i}").as_bytes(), u64::MAX);
                }
            }
            out.push((name, f));
        }
        out
    }

    fn buffer(out: &mut Vec<u8>, bytes: &[u8]) {
        write_varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    #[test]
    #[ignore = "writes the seed corpora"]
    fn write_window_seeds() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
        for target in ["window_rdb", "window_scandump"] {
            fs::create_dir_all(root.join(target)).unwrap();
        }
        for (name, f) in filters() {
            // window_rdb: no budget, then the header and the pieces as RDB buffers.
            for (suffix, budget) in [("", 0u8), ("-budget", 0x80 | 7)] {
                let mut v = vec![budget];
                buffer(&mut v, &codec::encode_header(&f));
                for p in codec::rdb_pieces(&f) {
                    buffer(&mut v, p);
                }
                fs::write(root.join("window_rdb").join(format!("{name}{suffix}")), &v).unwrap();
            }
            // window_scandump: the header, then every chunk at its own offset.
            let mut v = Vec::new();
            let header = codec::encode_header(&f);
            v.extend_from_slice(&(header.len() as u16).to_le_bytes());
            v.extend_from_slice(&header);
            let mut it = 1;
            loop {
                let (next, data) = codec::dump_chunk(&f, it);
                if next == 0 {
                    break;
                }
                v.push(0);
                v.extend_from_slice(&(data.len() as u16).to_le_bytes());
                v.extend_from_slice(data);
                v.extend_from_slice(&((it - 1) as u32).to_le_bytes());
                it = next;
            }
            fs::write(root.join("window_scandump").join(name), &v).unwrap();
        }
    }
}

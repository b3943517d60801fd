//! What the fuzz targets share: a cursor over the fuzzer's bytes, and the checks every filter
//! a decoder accepts must pass.
//!
//! A decoder may refuse any input; what it accepts must be a filter that is safe to use. So
//! an accepted filter is used the way the module uses it: read, added to (an added item is
//! found, a refused add changes nothing), written back in both of its formats and read again
//! (the same filter comes back), and walked with SCANDUMP (chunks of at most 16 MiB that
//! never cross a layer, and that LOADCHUNK rebuilds the filter from).

use layerbloom_filter::bloom::codec::{self, Strictness, MAX_CHUNK_BYTES};
use layerbloom_filter::format::{CodecError, RdbSource};
use layerbloom_filter::ScalableFilter;

pub mod cuckoo;
pub mod cuckoo_rated;
pub mod window;

/// Memory bound for anything built from fuzz input: the filters' growth and the headers that
/// `filter_from_header` allocates zeroed.
pub const MAX_BYTES: u64 = 1 << 24;

const EOF: CodecError = CodecError::BadData("the value ends here");

/// The RDB fields of a module value read off the fuzzer's bytes, as the module API reads them:
/// unsigneds as compact varints (`Input::varint`), buffers as a varint length and the bytes.
/// A read past the end fails, as an RDB read does.
pub struct FuzzSource<'a>(pub Input<'a>);

impl<'a> RdbSource for FuzzSource<'a> {
    type Buffer = &'a [u8];

    fn unsigned(&mut self) -> Result<u64, CodecError> {
        self.0.varint().ok_or(EOF)
    }

    fn double(&mut self) -> Result<f64, CodecError> {
        self.0.f64().ok_or(EOF)
    }

    fn buffer(&mut self) -> Result<&'a [u8], CodecError> {
        let len = self.0.varint().ok_or(EOF)?;
        let len = usize::try_from(len).map_err(|_| EOF)?;
        self.0.take(len).ok_or(EOF)
    }
}

/// Reads fields off the front of the fuzzer's bytes; `None` once they run out.
pub struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Input { bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    /// Whatever is left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    pub fn f64(&mut self) -> Option<f64> {
        self.u64().map(f64::from_bits)
    }

    /// A compact unsigned: a byte below 0xf0 is its own value; `0xf0 + n` is followed by
    /// `n + 1` little-endian bytes. Small values stay small, any `u64` can be written.
    pub fn varint(&mut self) -> Option<u64> {
        let b = self.u8()?;
        if b < 0xf0 {
            return Some(u64::from(b));
        }
        let n = usize::from(b - 0xf0 + 1).min(8);
        let bytes = self.take(n)?;
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(bytes);
        Some(u64::from_le_bytes(v))
    }

    /// A byte string with a `u16` length prefix (truncated to what is left).
    pub fn bytes16(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        let n = n.min(self.bytes.len());
        self.take(n)
    }

    /// A `BF.LOADCHUNK` of the LOADCHUNK targets, as `(iterator, data)`: a tag byte,
    /// `u16 len, data`, and either a `u32` offset (even tag: iterator `1 + offset + len`, the
    /// offset aimed at the `total` bytes of the layers) or a raw `i64` iterator (odd tag).
    pub fn bloom_chunk(&mut self, total: u64) -> Option<(i64, &'a [u8])> {
        let tag = self.u8()?;
        let chunk = self.bytes16()?;
        let it = if tag & 1 == 0 {
            let off = u64::from(self.u32()?) % (total + 2);
            (1 + off + chunk.len() as u64) as i64
        } else {
            self.u64()? as i64
        };
        Some((it, chunk))
    }
}

/// The byte ranges of a Bloom filter's layers in the concatenation SCANDUMP numbers: the
/// model the LOADCHUNK targets check each chunk against.
pub struct LayerRanges {
    ranges: Vec<(u64, u64)>,
    /// The layers' bytes in all.
    pub total: u64,
}

impl LayerRanges {
    pub fn new(lengths: impl IntoIterator<Item = u64>) -> Self {
        let mut ranges = Vec::new();
        let mut start = 0u64;
        for l in lengths {
            ranges.push((start, start + l));
            start += l;
        }
        LayerRanges {
            ranges,
            total: start,
        }
    }

    /// Where a chunk of `len` bytes at iterator `it` lands (its layer, and its offset there)
    /// when it lies inside one layer, and whether LOADCHUNK must accept it: an empty chunk at
    /// any offset inside the filter writes nothing and is accepted, as RedisBloom accepts it.
    pub fn place(&self, it: i64, len: usize) -> (Option<(usize, usize)>, bool) {
        let len = len as u64;
        let offset = u64::try_from(it)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|e| e.checked_sub(len));
        let target = offset.and_then(|off| {
            self.ranges
                .iter()
                .position(|&(a, b)| off >= a && off + len <= b)
                .map(|i| (i, (off - self.ranges[i].0) as usize))
        });
        let fits = if len == 0 {
            offset.is_some_and(|off| off < self.total)
        } else {
            target.is_some()
        };
        (target, fits)
    }
}

/// Every `(iterator, data)` chunk of a Bloom SCANDUMP walk that `dump_chunk` answers, checked
/// as it goes: non-empty chunks of at most `MAX_CHUNK_BYTES`, exact iterators, at most
/// `bound` of them.
pub fn bloom_chunks<'f>(
    mut dump_chunk: impl FnMut(i64) -> (i64, &'f [u8]),
    bound: usize,
) -> Vec<(i64, &'f [u8])> {
    let mut chunks = Vec::new();
    let mut it = 1i64;
    loop {
        let (next, data) = dump_chunk(it);
        if next == 0 {
            assert!(data.is_empty());
            return chunks;
        }
        assert!(!data.is_empty() && data.len() <= MAX_CHUNK_BYTES);
        assert_eq!(next - it, data.len() as i64, "iterator arithmetic");
        chunks.push((next, data));
        assert!(chunks.len() <= bound, "SCANDUMP does not end");
        it = next;
    }
}

/// Every check an accepted filter must pass. `seed` varies the items added.
pub fn exercise(filter: &mut ScalableFilter, seed: &[u8]) {
    // Reads answer, and the figures hang together.
    let layers = filter.layer_count();
    assert!(layers >= 1, "a filter without layers");
    assert_eq!(filter.layer_bytes().len(), layers);
    assert_eq!(filter.layer_summaries().len(), layers);
    let _ = (filter.capacity(), filter.items(), filter.error());
    let _ = (
        filter.expansion(),
        filter.is_classic(),
        filter.classic_hash_width(),
    );
    assert!(filter.memory_usage() > 0);
    let _ = filter.contains(seed);
    let _ = filter.contains(b"");

    round_trips(filter);

    // Adds: an item just added is found; a refused add changes nothing.
    let small = filter.memory_usage() <= 1 << 20;
    for i in 0..8u8 {
        let mut item = seed.to_vec();
        item.push(i);
        let before = small.then(|| filter.clone());
        match filter.add(&item, MAX_BYTES) {
            Ok(_) => assert!(filter.contains(&item), "an added item is not found"),
            Err(e) => {
                if let Some(before) = before {
                    assert_eq!(*filter, before, "a refused add ({e}) changed the filter");
                }
            }
        }
    }
    round_trips(filter);
}

/// The filter's RDB value decodes to the same filter; its SCANDUMP walk is well formed and
/// LOADCHUNK rebuilds the same filter from it.
pub fn round_trips(filter: &ScalableFilter) {
    let header = codec::encode_rdb_header(filter);
    let pieces = codec::rdb_pieces(filter);
    let back = codec::decode_value(&header, pieces.iter().copied())
        .unwrap_or_else(|e| panic!("a filter's own RDB value is refused: {e}"));
    assert_eq!(&back, filter, "RDB round trip");

    let lengths: Vec<usize> = filter.layer_bytes().iter().map(|b| b.len()).collect();
    let bound = lengths
        .iter()
        .map(|l| l / MAX_CHUNK_BYTES + 1)
        .sum::<usize>();
    let chunks = bloom_chunks(|it| codec::dump_chunk(filter, it), bound);
    assert_eq!(
        chunks.iter().map(|(_, d)| d.len()).sum::<usize>(),
        lengths.iter().sum::<usize>()
    );

    let scandump_header = codec::encode_header(filter);
    let decoded = if filter.is_classic() {
        // RedisBloom's RDB loader tolerates values its LOADCHUNK refuses (an item total that
        // differs from the layers' sum, unknown option bits): only those may fail here.
        match codec::decode_header(&scandump_header) {
            Ok(h) => Some(h),
            Err(_) => {
                codec::decode_classic_header(&scandump_header, Strictness::Rdb)
                    .expect("a classic filter's own header decodes leniently");
                None
            }
        }
    } else {
        Some(
            codec::decode_header(&scandump_header)
                .unwrap_or_else(|e| panic!("a filter's own SCANDUMP header is refused: {e}")),
        )
    };
    if let Some(h) = decoded {
        let mut rebuilt = codec::filter_from_header(&h, u64::MAX).expect("header of a real filter");
        for (it, data) in &chunks {
            codec::load_chunk(&mut rebuilt, *it, data).expect("a filter's own chunk");
        }
        assert_eq!(&rebuilt, filter, "SCANDUMP + LOADCHUNK round trip");
    }
}

/// Writes the committed seed corpora (`filter/fuzz/seeds/<target>/`) from real filters:
/// `cargo test --release --lib -- --ignored write_seeds` in `filter/fuzz`.
#[cfg(test)]
mod seeds {
    use std::fs;
    use std::path::{Path, PathBuf};

    use layerbloom_filter::bloom::codec;
    use layerbloom_filter::{FilterSpec, Layout, ScalableFilter};

    fn dir(target: &str) -> PathBuf {
        let d = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .join(target);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn u16_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes);
    }

    fn varint(out: &mut Vec<u8>, n: u64) {
        if n < 0xf0 {
            out.push(n as u8);
        } else {
            out.push(0xf7);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }

    fn filters() -> Vec<(&'static str, ScalableFilter)> {
        let mut out = Vec::new();
        for (name, capacity, error, expansion, layout, n) in [
            ("scaling", 10u64, 0.01, 2u32, Layout::Blocked, 60u64),
            ("nonscaling", 20, 0.001, 0, Layout::Blocked, 25),
            ("wide", 5, 0.1, 4, Layout::Blocked, 40),
            ("empty", 1, 0.25, 1, Layout::Blocked, 0),
            ("tight", 8, 1e-9, 2, Layout::Blocked, 20),
            ("classic", 10, 0.01, 2, Layout::Classic, 60),
            ("classic-nonscaling", 20, 0.001, 0, Layout::Classic, 25),
        ] {
            let spec = FilterSpec {
                layout,
                ..FilterSpec::new(capacity, error, expansion)
            };
            let mut f = ScalableFilter::new(spec, u64::MAX).unwrap();
            for i in 0..n {
                let _ = f.add(format!("seed:{i}").as_bytes(), u64::MAX);
            }
            out.push((name, f));
        }
        out
    }

    #[test]
    #[ignore = "writes the seed corpora"]
    fn write_seeds() {
        for (name, f) in filters() {
            // rdb_value: the RDB header, then the pieces.
            let mut v = Vec::new();
            u16_prefixed(&mut v, &codec::encode_rdb_header(&f));
            for p in codec::rdb_pieces(&f) {
                u16_prefixed(&mut v, p);
            }
            fs::write(dir("rdb_value").join(name), &v).unwrap();

            // scandump_load: the SCANDUMP header, then every chunk at its own offset.
            let mut v = Vec::new();
            u16_prefixed(&mut v, &codec::encode_header(&f));
            let mut off = 0u32;
            for bytes in f.layer_bytes() {
                v.push(0);
                u16_prefixed(&mut v, bytes);
                v.extend_from_slice(&off.to_le_bytes());
                off += bytes.len() as u32;
            }
            fs::write(dir("scandump_load").join(name), &v).unwrap();

            // redisbloom_rdb: a classic filter's fields at encoding version 4.
            if let ScalableFilter::Classic(c) = &f {
                let (layers, params) = (c.layers(), c.params());
                let mut v = vec![4 + 2];
                varint(&mut v, f.items());
                varint(&mut v, layers.len() as u64);
                varint(&mut v, u64::from(params.options));
                varint(&mut v, u64::from(params.growth));
                for l in layers {
                    let m = l.meta();
                    varint(&mut v, m.entries);
                    v.extend_from_slice(&m.error.to_le_bytes());
                    varint(&mut v, u64::from(m.hashes));
                    v.extend_from_slice(&m.bpe.to_le_bytes());
                    varint(&mut v, m.bits);
                    varint(&mut v, u64::from(m.n2));
                    varint(&mut v, l.as_bytes().len() as u64);
                    v.extend_from_slice(l.as_bytes());
                    varint(&mut v, m.size);
                }
                fs::write(dir("redisbloom_rdb").join(name), &v).unwrap();
            }
        }

        // args: commands as their arguments, after a default-expansion byte.
        for (n, line) in [
            "0.01 100",
            "0.001 1000 EXPANSION 4",
            "0.01 10 NONSCALING",
            "0.5 1073741824 expansion 0",
            "1e-9 1 EXPANSION 32768 NONSCALING",
            "CAPACITY 5 ERROR 0.1 EXPANSION 3 NOCREATE ITEMS a b",
            "NONSCALING ITEMS x",
            "ERROR 0.9 ITEMS CAPACITY y",
            "-12 9223372036854775807 -0 01 inf nan 1e-400 .5",
            "ITEMS",
        ]
        .iter()
        .enumerate()
        {
            let mut v = vec![2u8];
            v.extend_from_slice(line.as_bytes());
            fs::write(dir("args").join(format!("line{n}")), v).unwrap();
        }

        // differential: a few shapes, then adds and lookups of a small universe.
        for (n, (cap, rate, exp, flags)) in [
            (10u16, 2u8, 2u8, 0u8),
            (3, 0, 1, 0),
            (50, 3, 0, 1),
            (10, 2, 2, 2),
            (7, 5, 3, 3),
        ]
        .iter()
        .enumerate()
        {
            let mut v = Vec::new();
            v.extend_from_slice(&cap.to_le_bytes());
            v.extend_from_slice(&[*rate, *exp, *flags]);
            for i in 0..200u16 {
                v.push(if i % 3 == 2 { 2 } else { 0 });
                v.extend_from_slice(&(i / 2).to_le_bytes());
            }
            v.extend_from_slice(&[0x43, 20]);
            for i in 0..20u16 {
                v.extend_from_slice(&(300 + i).to_le_bytes());
            }
            v.push(3);
            fs::write(dir("differential").join(format!("shape{n}")), v).unwrap();
        }
    }
}

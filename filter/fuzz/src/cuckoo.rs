//! What the cuckoo targets share: an RDB source over the fuzzer's bytes, an allocator that
//! measures what a decoder takes, and the checks every cuckoo filter a decoder accepts must
//! pass (its shape is what its settings say; every operation is safe; it round-trips through
//! its RDB fields and its SCANDUMP stream).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use layerbloom_filter::cuckoo::codec::{self, Header, RdbField, HEADER_BYTES, MAX_CHUNK_BYTES};
use layerbloom_filter::cuckoo::{CuckooError, CuckooFilter, Limits};
use layerbloom_filter::format::{CodecError, RdbSource, Strictness};

pub mod model;

/// Memory bound for the growth of filters built from fuzz input.
pub const MAX_BYTES: u64 = 1 << 24;

/// Filters at most this large are cloned before an operation to check that a refusal changes
/// nothing (bigger ones would make every input slow).
const CLONE_BELOW: u64 = 1 << 20;

/// The fields an encoder yields, read back in order; a field of the wrong kind fails.
pub struct FieldSource<'a, I: Iterator<Item = RdbField<'a>>>(pub I);

impl<'a, I: Iterator<Item = RdbField<'a>>> RdbSource for FieldSource<'a, I> {
    type Buffer = &'a [u8];

    fn unsigned(&mut self) -> Result<u64, CodecError> {
        match self.0.next() {
            Some(RdbField::Unsigned(n)) => Ok(n),
            _ => Err(CodecError::BadData("expected an unsigned")),
        }
    }

    fn double(&mut self) -> Result<f64, CodecError> {
        Err(CodecError::BadData("the cuckoo type writes no doubles"))
    }

    fn buffer(&mut self) -> Result<&'a [u8], CodecError> {
        match self.0.next() {
            Some(RdbField::Buffer(b)) => Ok(b),
            _ => Err(CodecError::BadData("expected a buffer")),
        }
    }
}

/// Writes fields in `FuzzSource`'s format (the seeds' format).
pub fn write_fields<'a>(out: &mut Vec<u8>, fields: impl IntoIterator<Item = RdbField<'a>>) {
    for f in fields {
        match f {
            RdbField::Unsigned(n) => write_varint(out, n),
            RdbField::Buffer(b) => {
                write_varint(out, b.len() as u64);
                out.extend_from_slice(b);
            }
        }
    }
}

/// `Input::varint`'s encoding.
pub fn write_varint(out: &mut Vec<u8>, n: u64) {
    if n < 0xf0 {
        out.push(n as u8);
    } else {
        out.push(0xf7);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

/// The system allocator, counting the bytes live and the most live since `reset_peak`: what
/// a decoder allocates is measured, not inferred from its own bookkeeping. The fuzz targets
/// run one input at a time on one thread; libFuzzer's own allocations do not come through
/// Rust's allocator.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl CountingAlloc {
    /// Starts a measurement; returns the bytes live now.
    pub fn reset_peak() -> usize {
        let live = LIVE.load(Ordering::Relaxed);
        PEAK.store(live, Ordering::Relaxed);
        live
    }

    /// The most bytes live since `reset_peak`.
    pub fn peak() -> usize {
        PEAK.load(Ordering::Relaxed)
    }

    fn grew(size: usize) {
        let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
        PEAK.fetch_max(live, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            Self::grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            Self::grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            Self::grew(new_size);
        }
        p
    }
}

/// The filter's shape is the one its settings give: sub-filter `i` has `buckets ×
/// expansion^i` buckets of `bucket size` slots, and the figures agree with the slots.
pub fn check_shape(f: &CuckooFilter) {
    let p = f.params();
    p.check().expect("a filter's settings are in range");
    let subs = f.sub_filters();
    assert!(!subs.is_empty(), "a filter without sub-filters");
    assert!(
        p.expansion != 0 || subs.len() == 1,
        "a non-scaling filter grew"
    );
    let mut n = f.buckets();
    for (i, s) in subs.iter().enumerate() {
        if i > 0 {
            n *= u64::from(p.expansion);
        }
        assert_eq!(s.buckets(), n, "sub-filter {i}'s bucket count");
        assert!(n.is_power_of_two());
        assert_eq!(s.as_bytes().len() as u64, n * u64::from(p.bucket_size));
    }
    let slots: u64 = subs.iter().map(|s| s.as_bytes().len() as u64).sum();
    assert_eq!(f.slot_bytes(), slots);
    assert_eq!(f.info_size(), 40 + 16 * subs.len() as u64 + slots);
    assert_eq!(
        f.memory_usage(),
        CuckooFilter::modelled_bytes(subs.len(), subs.iter().map(|s| s.as_bytes().len() as u64))
    );
    let info = f.info();
    assert_eq!(
        (info.filters, info.items, info.deletes, info.buckets),
        (subs.len() as u64, f.items(), f.deletes(), f.buckets())
    );
    assert!(!f.debug_line().is_empty());
}

/// The filter's RDB fields decode to an equal filter, within a budget of exactly its memory
/// figure and not one byte less.
pub fn rdb_round_trip(f: &CuckooFilter) {
    let decode = |budget| {
        codec::decode_rdb(
            &mut FieldSource(codec::rdb_fields(f)),
            codec::ENCVER,
            budget,
        )
    };
    let back = decode(None).unwrap_or_else(|e| panic!("a filter's own RDB fields: {e}"));
    assert_eq!(&back, f, "RDB round trip");
    let exact = decode(Some(f.memory_usage()))
        .unwrap_or_else(|e| panic!("a filter's own RDB fields within its own size: {e}"));
    assert_eq!(&exact, f);
    assert!(
        decode(Some(f.memory_usage() - 1)).is_err(),
        "a budget one byte short of the filter was enough"
    );
}

/// A SCANDUMP chunk: the iterator it was sent with, and its bytes.
pub type Chunk = (u64, Vec<u8>);

/// The SCANDUMP stream: the header at iterator 1, then every sub-filter's slots in order, in
/// pieces of at most 16 MiB, the iterators exact. `None` for a filter with no items (its
/// stream ends at once).
pub fn scandump(f: &CuckooFilter) -> Option<(Header, Vec<Chunk>)> {
    let Some((first, header)) = codec::dump_chunk(f, 0) else {
        assert_eq!(f.items(), 0, "a filter with items dumped nothing");
        assert!(codec::dump_chunk(f, 1).is_none());
        return None;
    };
    assert_ne!(f.items(), 0);
    assert_eq!(first, 1, "the header's iterator");
    assert_eq!(header.len(), HEADER_BYTES);
    let header = Header::decode(&header).expect("a filter's own header has its length");
    assert_eq!(header, Header::of(f));
    let bound: u64 = f
        .sub_filters()
        .iter()
        .map(|s| (s.as_bytes().len() as u64).div_ceil(MAX_CHUNK_BYTES))
        .sum();
    let mut chunks = Vec::new();
    let mut it = 1u64;
    while let Some((next, data)) = codec::dump_chunk(f, it) {
        assert!(!data.is_empty() && data.len() as u64 <= MAX_CHUNK_BYTES);
        assert_eq!(next - it, data.len() as u64, "iterator arithmetic");
        chunks.push((next, data.into_owned()));
        assert!(chunks.len() as u64 <= bound, "SCANDUMP does not end");
        it = next;
    }
    let mut expected = Vec::new();
    for s in f.sub_filters() {
        expected.extend_from_slice(s.as_bytes());
    }
    let sent: Vec<u8> = chunks.iter().flat_map(|(_, d)| d.iter().copied()).collect();
    assert_eq!(sent, expected, "SCANDUMP sends every slot once, in order");
    Some((header, chunks))
}

/// A filter rebuilt from its SCANDUMP stream equals it: under both strictnesses (a client's
/// only when its items fit its slots), the chunks in order and in reverse.
pub fn scandump_round_trip(f: &CuckooFilter) {
    let Some((header, chunks)) = scandump(f) else {
        return;
    };
    for strictness in [Strictness::Rdb, Strictness::LoadChunk] {
        let rebuilt = match codec::filter_from_header(&header, strictness, u64::MAX) {
            Ok(r) => r,
            Err(e) => {
                assert!(
                    strictness == Strictness::LoadChunk && f.items() > f.slot_bytes(),
                    "a filter's own header is refused ({e})"
                );
                continue;
            }
        };
        load_both_ways(f, &rebuilt, &chunks, codec::load_chunk);
    }
}

/// LOADCHUNK of a filter's own `chunks` into copies of `rebuilt` (its header's filter), in
/// order and in reverse: each copy ends as `f`.
pub fn load_both_ways<F: Clone + PartialEq + std::fmt::Debug>(
    f: &F,
    rebuilt: &F,
    chunks: &[Chunk],
    load: impl Fn(&mut F, u64, &[u8]) -> Result<(), CodecError>,
) {
    for reverse in [false, true] {
        let mut r = rebuilt.clone();
        let order: Vec<&Chunk> = if reverse {
            chunks.iter().rev().collect()
        } else {
            chunks.iter().collect()
        };
        for (it, data) in order {
            load(&mut r, *it, data).unwrap_or_else(|e| panic!("a filter's own chunk at {it}: {e}"));
        }
        assert_eq!(&r, f, "SCANDUMP + LOADCHUNK round trip");
    }
}

/// Every operation on an accepted filter is safe and keeps its promises; `seed` varies the
/// items. A refused operation changes nothing.
pub fn exercise(f: &mut CuckooFilter, seed: &[u8]) {
    check_shape(f);
    let _ = (f.contains(seed), f.count(seed), f.contains(b""));
    rdb_round_trip(f);
    scandump_round_trip(f);

    let limits = Limits {
        max_expansions: 40,
        max_bytes: MAX_BYTES,
    };
    let item = |i: u8| {
        let mut x = seed.to_vec();
        x.push(i);
        x
    };
    for i in 0..12u8 {
        let x = item(i);
        let small = f.memory_usage() <= CLONE_BELOW;
        let before = small.then(|| f.clone());
        let items = f.items();
        let result = match i % 3 {
            0 => f.add(&x, &limits).map(|()| true),
            1 => f.add_nx(&x, &limits),
            // Both copies refused is a refusal; otherwise the item is in.
            _ => f.insert_many(&[&x, &x], i % 2 == 0, &limits).and_then(|r| {
                match r.iter().find(|r| r.is_ok()) {
                    Some(_) => Ok(r.iter().any(|r| matches!(r, Ok(true)))),
                    None => Err(r.into_iter().find_map(Result::err).expect("two results")),
                }
            }),
        };
        match result {
            Ok(added) => {
                assert!(f.contains(&x), "an added item is not found");
                if added {
                    assert!(f.items() > items || items == u64::MAX, "the item count");
                } else if let Some(before) = &before {
                    assert_eq!(f, before, "an add that added nothing changed the filter");
                }
                assert!(f.count(&x) >= 1, "an added item counts 0");
            }
            Err(e) => {
                assert!(
                    !matches!(e, CuckooError::Params(_)),
                    "an add refused for its settings: {e}"
                );
                if let Some(before) = before {
                    assert_eq!(*f, before, "a refused add ({e}) changed the filter");
                }
            }
        }
        let _ = f.contains_many(&[&x, seed, b""]);
        check_shape(f);
    }
    for i in (0..12u8).step_by(2) {
        let x = item(i);
        let present = f.contains(&x);
        let deleted = f.delete(&x);
        assert!(!deleted || present, "deleted an item that was not there");
        check_shape(f);
    }
    f.compact();
    assert_eq!(f.deletes(), 0, "compaction restarts the delete count");
    check_shape(f);
    rdb_round_trip(f);
    scandump_round_trip(f);
}

/// Writes the cuckoo targets' seed corpora (`filter/fuzz/seeds/cuckoo_*/`):
/// `cargo test --release --lib -- --ignored write_cuckoo_seeds` in `filter/fuzz`. The RDB and
/// SCANDUMP seeds are filters RedisBloom wrote (the SCANDUMP streams of
/// `tests/fixtures/redisbloom-cf`), the legacy encodings and the operation sequences are
/// built here.
#[cfg(test)]
mod seeds {
    use std::fs;
    use std::path::{Path, PathBuf};

    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine;
    use layerbloom_filter::cuckoo::codec::{self, Header, RdbField};
    use layerbloom_filter::cuckoo::{CuckooFilter, Limits, Params};
    use layerbloom_filter::format::Strictness;
    use serde_json::Value;

    use super::write_fields;

    /// Small fixtures covering every shape: one-slot and 255-slot buckets, non-scaling,
    /// 32 sub-filters, deletes, duplicates.
    const FIXTURES: [&str; 13] = [
        "pub_tiny2",
        "pub_tiny4",
        "pub_compact",
        "pub_dupes",
        "pub_exp0_full",
        "pub_maxexp",
        "pub_maxexp_insert",
        "pub_deletes_multi",
        "pub_exp_odd",
        "pub_insertnx_auto",
        "pub_bs1",
        "pub_bs4_mi500",
        "pub_bs_big",
    ];

    fn dir(target: &str) -> PathBuf {
        let d = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .join(target);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// A fixture's SCANDUMP stream: `(iterator, data)` up to the final `[0, null]`.
    fn stream(name: &str) -> Vec<(u64, Vec<u8>)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/redisbloom-cf/scandump")
            .join(format!("{name}.json"));
        let json: Value = serde_json::from_slice(
            &fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
        .unwrap();
        json.as_array()
            .unwrap()
            .iter()
            .filter_map(|e| {
                let it = e[0].as_u64().unwrap();
                let data = e[1].as_str()?;
                Some((it, B64.decode(data).unwrap()))
            })
            .collect()
    }

    fn load(chunks: &[(u64, Vec<u8>)]) -> CuckooFilter {
        let header = Header::decode(&chunks[0].1).unwrap();
        let mut f = codec::filter_from_header(&header, Strictness::LoadChunk, u64::MAX).unwrap();
        for (it, data) in &chunks[1..] {
            codec::load_chunk(&mut f, *it, data).unwrap();
        }
        f
    }

    fn rdb_seed(encver: i32, budget: u8, fields: &[RdbField]) -> Vec<u8> {
        let mut v = vec![(encver + 1) as u8, budget];
        write_fields(&mut v, fields.iter().copied());
        v
    }

    #[test]
    #[ignore = "writes the seed corpora"]
    fn write_cuckoo_seeds() {
        for name in FIXTURES {
            let chunks = stream(name);
            let f = load(&chunks);

            // cuckoo_rdb: the filter's fields at encoding version 4, without and with a
            // budget (1 MiB).
            let fields: Vec<RdbField> = codec::rdb_fields(&f).collect();
            fs::write(dir("cuckoo_rdb").join(name), rdb_seed(4, 0, &fields)).unwrap();
            fs::write(
                dir("cuckoo_rdb").join(format!("{name}-budget")),
                rdb_seed(4, 8 | 6, &fields),
            )
            .unwrap();

            // cuckoo_scandump: the stream as RedisBloom sent it, at its own iterators, as a
            // client's copy.
            let mut v = vec![0u8];
            v.extend_from_slice(&chunks[0].1);
            for (it, data) in &chunks[1..] {
                v.push(1);
                v.extend_from_slice(&(data.len() as u16).to_le_bytes());
                v.extend_from_slice(data);
                v.extend_from_slice(&it.to_le_bytes());
            }
            fs::write(dir("cuckoo_scandump").join(name), v).unwrap();
        }

        // The legacy encodings (0..3): the defaults, one bucket count for every sub-filter.
        let mut f = CuckooFilter::new(4, Params::default(), u64::MAX).unwrap();
        for i in 0..40 {
            let _ = f.add(format!("legacy:{i}").as_bytes(), &Limits::default());
        }
        assert!(f.sub_filters().len() > 1 && f.params().expansion == 1);
        let mut fields = vec![
            RdbField::Unsigned(f.sub_filters().len() as u64),
            RdbField::Unsigned(f.buckets()),
            RdbField::Unsigned(f.items()),
        ];
        fields.extend(
            f.sub_filters()
                .iter()
                .map(|s| RdbField::Buffer(s.as_bytes())),
        );
        for encver in [0, 3] {
            fs::write(
                dir("cuckoo_rdb").join(format!("legacy-encver{encver}")),
                rdb_seed(encver, 0, &fields),
            )
            .unwrap();
        }

        // cuckoo_scandump: a replayed header with more items than slots, then its chunk.
        let mut v = vec![1u8];
        let header = Header {
            items: 1000,
            buckets: 4,
            deletes: 3,
            sub_filters: 1,
            bucket_size: 2,
            max_iterations: 20,
            expansion: 2,
        };
        v.extend_from_slice(&header.encode());
        v.push(0);
        v.extend_from_slice(&8u16.to_le_bytes());
        v.extend_from_slice(&[1, 2, 0, 3, 4, 0, 0, 5]);
        v.extend_from_slice(&0u32.to_le_bytes());
        fs::write(dir("cuckoo_scandump").join("replayed-overfull"), v).unwrap();

        // cuckoo_differential: shapes (bucket size, capacity, iterations, expansion, max
        // expansions, memory limit bytes as the target reads them), then adds of the small
        // universe, deletes, compactions with round trips, batches, lookups.
        for (name, shape) in [
            ("bs1-exp2", [0u8, 0, 19, 2, 31, 3]),
            ("bs2-nonscaling-1iteration", [1, 0, 0, 0, 31, 3]),
            ("bs4-exp1-500iterations", [3, 5, 0xf8, 1, 31, 3]),
            ("bs255-exp4-2k-limit", [0xf3, 0, 19, 4, 31, 0]),
            ("bs2-one-expansion", [1, 0, 19, 1, 0, 3]),
            ("bs1-exp8-no-expansion-limit", [0, 3, 3, 8, 40, 2]),
        ] {
            let mut v = shape.to_vec();
            for id in 0..64u8 {
                v.extend_from_slice(&[0, id]);
            }
            for id in 0..64u8 {
                v.extend_from_slice(&[1, id]);
            }
            for id in (0..64u8).step_by(3) {
                v.extend_from_slice(&[3, id]);
            }
            v.push(4 | 8);
            v.extend_from_slice(&[2 | 8, 20]);
            v.extend(0..20u8);
            v.extend_from_slice(&[2, 20]);
            v.extend(10..30u8);
            v.extend_from_slice(&[5, 30]);
            v.extend(0..30u8);
            for id in 0..16u8 {
                v.extend_from_slice(&[6, id, 7, id + 40]);
            }
            for id in 0..64u8 {
                v.extend_from_slice(&[3, id]);
            }
            v.push(4 | 8);
            fs::write(dir("cuckoo_differential").join(name), v).unwrap();
        }
    }
}

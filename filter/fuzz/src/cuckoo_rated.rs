//! The checks every extension cuckoo filter (`RatedFilter`, the ERROR extension) a decoder
//! accepts or the core builds must pass: its shape, both codecs' round trips, and every
//! operation leaving it consistent, beside `cuckoo`'s for RedisBloom's layout.

use layerbloom_filter::cuckoo::rated_codec::{self, RatedHeader, HEADER_BYTES};
use layerbloom_filter::cuckoo::{CuckooError, Limits, RatedFilter};
use layerbloom_filter::format::Strictness;

use crate::cuckoo::FieldSource;

/// Filters at most this large are cloned to check that a refused operation changed nothing.
const CLONE_BELOW: u64 = 1 << 20;

/// Occupied slots of each sub-filter by a scan.
pub fn scanned(f: &RatedFilter) -> Vec<u64> {
    f.sub_filters()
        .iter()
        .map(|s| (0..s.slots()).filter(|&i| s.get(i) != 0).count() as u64)
        .collect()
}

/// The shape the settings and the widths give, and the occupancy counts a scan gives.
pub fn check_shape(f: &RatedFilter) {
    let p = f.params();
    p.check().expect("a filter's settings are in range");
    let w = f.widths();
    assert!(w.is_valid(), "widths out of range: {w:?}");
    assert!(f.error() > 0.0 && f.error() < 1.0);
    let subs = f.sub_filters();
    assert!(!subs.is_empty());
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
        assert!(n.is_power_of_two() && n >= 8);
        assert_eq!(s.bits(), w.of(i), "sub-filter {i}'s width");
        assert_eq!(
            s.as_bytes().len() as u64,
            (n * u64::from(p.bucket_size) * u64::from(s.bits())).div_ceil(8)
        );
    }
    let counted: Vec<u64> = subs.iter().map(|s| s.occupied()).collect();
    assert_eq!(counted, scanned(f), "occupied counts");
    assert_eq!(
        f.memory_usage(),
        RatedFilter::modelled_bytes(subs.len(), subs.iter().map(|s| s.as_bytes().len() as u64))
    );
    let fpr = f.estimated_fpr();
    assert!((0.0..=1.0).contains(&fpr), "{fpr}");
}

pub fn rdb_round_trip(f: &RatedFilter) {
    let decode = |budget| {
        rated_codec::decode_rdb(
            &mut FieldSource(rated_codec::rdb_fields(f)),
            rated_codec::ENCVER,
            budget,
        )
    };
    let back = decode(None).unwrap_or_else(|e| panic!("a filter's own RDB fields: {e}"));
    assert_eq!(&back, f, "RDB round trip");
    let exact = decode(Some(f.memory_usage())).expect("within its own size");
    assert_eq!(&exact, f);
    assert!(decode(Some(f.memory_usage() - 1)).is_err());
}

pub fn scandump_round_trip(f: &RatedFilter) {
    let Some((first, header)) = rated_codec::dump_chunk(f, 0) else {
        assert_eq!(f.items(), 0, "a filter with items dumped nothing");
        return;
    };
    assert_eq!(first, 1);
    assert_eq!(header.len(), HEADER_BYTES);
    let header = RatedHeader::decode(&header).expect("a filter's own header");
    assert_eq!(header, RatedHeader::of(f));
    let mut chunks = Vec::new();
    let mut it = 1u64;
    while let Some((next, data)) = rated_codec::dump_chunk(f, it) {
        assert_eq!(next - it, data.len() as u64, "iterator arithmetic");
        chunks.push((next, data.into_owned()));
        it = next;
    }
    let sent: Vec<u8> = chunks.iter().flat_map(|(_, d)| d.iter().copied()).collect();
    let all: Vec<u8> = f
        .sub_filters()
        .iter()
        .flat_map(|s| s.as_bytes().iter().copied())
        .collect();
    assert_eq!(sent, all, "SCANDUMP sends every slot once, in order");
    let Ok(rebuilt) = rated_codec::filter_from_header(&header, Strictness::Rdb, u64::MAX) else {
        panic!("a filter's own header is refused");
    };
    crate::cuckoo::load_both_ways(f, &rebuilt, &chunks, rated_codec::load_chunk);
}

/// Every operation on a decoded filter: no panic, adds found, refusals change nothing.
pub fn exercise(f: &mut RatedFilter, seed: &[u8]) {
    check_shape(f);
    rdb_round_trip(f);
    scandump_round_trip(f);
    let limits = Limits {
        max_expansions: 40,
        max_bytes: crate::cuckoo::MAX_BYTES,
    };
    for i in 0..12u8 {
        let mut x = seed.to_vec();
        x.push(i);
        let before = (f.memory_usage() <= CLONE_BELOW).then(|| f.clone());
        let result = match i % 3 {
            0 => f.add(&x, &limits).map(|()| true),
            1 => f.add_nx(&x, &limits),
            _ => f
                .insert_many(&[&x], false, &limits)
                .and_then(|mut r| r.pop().expect("one result")),
        };
        match result {
            Ok(_) => assert!(f.contains(&x), "an added item is not found"),
            Err(e) => {
                assert!(!matches!(e, CuckooError::Params(_)), "{e}");
                if let Some(before) = before {
                    assert_eq!(*f, before, "a refused add ({e}) changed the filter");
                }
            }
        }
        let _ = (f.count(&x), f.contains_many(&[&x, seed]));
    }
    for i in (0..12u8).step_by(2) {
        let mut x = seed.to_vec();
        x.push(i);
        let present = f.contains(&x);
        assert!(
            !f.delete(&x) || present,
            "deleted an item that was not there"
        );
    }
    f.compact();
    assert_eq!(f.deletes(), 0);
    check_shape(f);
    rdb_round_trip(f);
    scandump_round_trip(f);
}

/// Writes the extension's seeds into the cuckoo targets' corpora (`seeds/cuckoo_*/rated-*`):
/// `cargo test --release --lib -- --ignored write_rated_seeds` in `filter/fuzz`.
#[cfg(test)]
mod seeds {
    use std::fs;
    use std::path::Path;

    use layerbloom_filter::cuckoo::rate::Widths;
    use layerbloom_filter::cuckoo::rated_codec::{self, RatedHeader};
    use layerbloom_filter::cuckoo::{Limits, Params, RatedFilter};

    use crate::cuckoo::write_fields;

    fn write(target: &str, name: &str, bytes: Vec<u8>) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .join(target);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(format!("rated-{name}")), bytes).unwrap();
    }

    #[test]
    #[ignore = "writes the seed corpora"]
    fn write_rated_seeds() {
        let shapes = [
            (
                "b4-f10-exp2",
                4u8,
                2u16,
                Widths {
                    first: 10,
                    second: 13,
                },
            ),
            (
                "b3-f16-exp1",
                3,
                1,
                Widths {
                    first: 16,
                    second: 20,
                },
            ),
            (
                "b8-f31-exp4",
                8,
                4,
                Widths {
                    first: 31,
                    second: 32,
                },
            ),
            (
                "b6-f4-exp0",
                6,
                0,
                Widths {
                    first: 4,
                    second: 4,
                },
            ),
        ];
        for (name, bucket_size, expansion, widths) in shapes {
            let p = Params {
                bucket_size,
                max_iterations: 500,
                expansion,
            };
            let mut f = RatedFilter::new(8, p, widths, 0.01, u64::MAX).unwrap();
            for i in 0..150u32 {
                let _ = f.add(&i.to_le_bytes(), &Limits::default());
            }
            for i in (0..150u32).step_by(5) {
                f.delete(&i.to_le_bytes());
            }
            // cuckoo_rdb: encoding version 1, the extension's type, without and with a budget.
            for (suffix, budget) in [("", 16u8), ("-budget", 16 | 8 | 6)] {
                let mut v = vec![2, budget];
                write_fields(&mut v, rated_codec::rdb_fields(&f));
                write("cuckoo_rdb", &format!("{name}{suffix}"), v);
            }
            // cuckoo_scandump: the extension's header, then its chunks at their iterators.
            let mut v = vec![4];
            v.extend_from_slice(&RatedHeader::of(&f).encode());
            let mut it = 1;
            while let Some((next, data)) = rated_codec::dump_chunk(&f, it) {
                v.push(1);
                v.extend_from_slice(&(data.len() as u16).to_le_bytes());
                v.extend_from_slice(&data);
                v.extend_from_slice(&next.to_le_bytes());
                it = next;
            }
            write("cuckoo_scandump", name, v);
        }
        // cuckoo_differential: shapes with the extension's bit (bit 7 of the memory byte;
        // the width from its bits 2..6), then adds, deletes, batches and compactions.
        for (name, shape) in [
            ("rated-b4-exp2", [3u8, 20, 0xf8, 2, 31, 0x80 | (6 << 2) | 3]),
            ("rated-b1-exp1", [0, 3, 19, 1, 31, 0x80 | 3]),
            ("rated-b8-exp0", [7, 40, 0xf8, 0, 31, 0x80 | (27 << 2) | 3]),
        ] {
            let mut v = shape.to_vec();
            for id in 0..64u8 {
                v.extend_from_slice(&[0, id]);
            }
            for id in (0..64u8).step_by(3) {
                v.extend_from_slice(&[3, id]);
            }
            v.push(4 | 8);
            v.extend_from_slice(&[2 | 8, 20]);
            v.extend(0..20u8);
            for id in 0..64u8 {
                v.extend_from_slice(&[3, id, 1, id]);
            }
            v.push(4 | 8);
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/cuckoo_differential");
            fs::write(dir.join(name), v).unwrap();
        }
    }
}

//! Unit and property tests of the cuckoo core; `fixtures` checks it against RedisBloom's data.

mod fixtures;
mod health;
mod pages;
mod rated;
mod support;
mod work;

use std::collections::HashMap;

use super::codec::{self, Header, RdbField, HEADER_BYTES, MAX_CHUNK_BYTES};
use super::params::{self, MAX_SUB_FILTERS};
use super::{CuckooError, CuckooFilter, Limits, Params};
use crate::error::FilterError;
use crate::format::Strictness;

/// A deterministic stream of test numbers (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        crate::hash::mix64(self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn filter(buckets: u64, bucket_size: u8, max_iterations: u16, expansion: u16) -> CuckooFilter {
    let p = Params {
        bucket_size,
        max_iterations,
        expansion,
    };
    CuckooFilter::new(buckets, p, u64::MAX).unwrap()
}

/// Shapes that exercise one-slot buckets, single eviction attempts, long chains and every
/// kind of growth.
fn shapes() -> Vec<(u64, u8, u16, u16)> {
    vec![
        (2, 1, 20, 1),
        (4, 1, 1, 2),
        (16, 2, 20, 1),
        (8, 2, 1, 2),
        (32, 4, 500, 4),
        (4, 8, 20, 2),
        (64, 2, 20, 0),
        (2, 255, 3, 1),
    ]
}

#[test]
fn a_refused_insert_changes_nothing() {
    let mut fails = 0;
    for (buckets, bs, mi, _) in shapes() {
        // Non-scaling: fill past full; every refusal leaves the filter as it was.
        let mut f = filter(buckets, bs, mi, 0);
        let limits = Limits::default();
        for i in 0..(buckets * u64::from(bs) * 2) {
            let before = f.clone();
            let item = format!("full:{i}");
            match f.add(item.as_bytes(), &limits) {
                Ok(()) => assert!(f.contains(item.as_bytes())),
                Err(CuckooError::Full) => {
                    fails += 1;
                    assert_eq!(f, before, "a refused add changed the filter");
                    assert_eq!(
                        f.insert_many(&[item.as_bytes()], false, &limits).unwrap(),
                        [Err(CuckooError::Full)]
                    );
                    assert_eq!(f, before, "a refused insert changed the filter");
                }
                Err(e) => panic!("{e}"),
            }
        }
        // Scaling, but no memory for a new sub-filter: refused, unchanged.
        let mut f = filter(buckets, bs, mi, 2);
        let tight = Limits {
            max_bytes: f.memory_usage(),
            ..Limits::default()
        };
        for i in 0.. {
            let before = f.clone();
            match f.add(format!("grow:{i}").as_bytes(), &tight) {
                Ok(()) => continue,
                Err(CuckooError::Filter(FilterError::OverLimit { .. })) => {
                    assert_eq!(f, before);
                    assert_eq!(f.sub_filters().len(), 1);
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        // At the expansion limit: refused before any item, even one that would fit.
        let one = Limits {
            max_expansions: 1,
            ..Limits::default()
        };
        let before = f.clone();
        assert_eq!(f.add(b"x", &one), Err(CuckooError::MaxExpansions));
        assert_eq!(f.add_nx(b"x", &one), Err(CuckooError::MaxExpansions));
        assert_eq!(
            f.insert_many(&[b"x"], true, &one),
            Err(CuckooError::MaxExpansions)
        );
        assert_eq!(f, before);
    }
    assert!(fails > 0, "no insert was ever refused");
}

/// Adds with duplicates, then deletes of added copies only (with the automatic compactions
/// they trigger, and CF.COMPACT now and then): every copy not deleted is still counted.
#[test]
fn deleting_added_items_never_loses_another_item() {
    let mut rng = Rng(7);
    for (buckets, bs, mi, exp) in shapes() {
        for round in 0..4 {
            let mut f = filter(buckets, bs, mi, exp);
            let limits = Limits {
                max_expansions: usize::MAX,
                ..Limits::default()
            };
            let mut live: HashMap<Vec<u8>, u64> = HashMap::new();
            let universe = 40 + buckets * u64::from(bs) * 3;
            for _ in 0..universe * 2 {
                let item = format!("{round}:{}", rng.below(universe)).into_bytes();
                if rng.below(3) == 0 && live.get(&item).copied().unwrap_or(0) > 0 {
                    assert!(f.delete(&item), "an added item could not be deleted");
                    *live.get_mut(&item).unwrap() -= 1;
                } else if f.add(&item, &limits).is_ok() {
                    *live.entry(item).or_default() += 1;
                }
                if rng.below(50) == 0 {
                    f.compact();
                }
            }
            for (item, &n) in &live {
                assert!(
                    f.count(item) >= n,
                    "{n} copies live, {} counted",
                    f.count(item)
                );
                assert_eq!(f.contains(item), n > 0 || f.count(item) > 0);
            }
            let total: u64 = live.values().sum();
            assert_eq!(f.items(), total);
            let occupied: u64 = f.sub_filters().iter().map(|s| s.occupied()).sum();
            assert_eq!(occupied, total, "items and occupied slots agree");
        }
    }
}

#[test]
fn deleting_an_item_never_added_can_remove_another_items_fingerprint() {
    // The documented false negative: search for an absent item that is a false positive.
    let mut f = filter(4, 2, 20, 1);
    let limits = Limits::default();
    for i in 0..6u32 {
        f.add(&i.to_le_bytes(), &limits).unwrap();
    }
    let ghost = (1000u32..).find(|i| f.contains(&i.to_le_bytes())).unwrap();
    assert!(f.delete(&ghost.to_le_bytes()));
    assert_eq!(f.items(), 5);
    let lost = (0..6u32).filter(|i| !f.contains(&i.to_le_bytes())).count();
    let shared = (0..6u32).filter(|i| f.count(&i.to_le_bytes()) > 0).count();
    assert!(lost <= 1 && shared >= 5);
}

#[test]
fn batches_answer_exactly_as_one_by_one() {
    let mut rng = Rng(11);
    for (buckets, bs, mi, exp) in shapes() {
        for nx in [false, true] {
            let limits = Limits {
                max_expansions: 64,
                ..Limits::default()
            };
            let mut batched = filter(buckets, bs, mi, exp);
            let mut single = batched.clone();
            let items: Vec<Vec<u8>> = (0..300)
                .map(|_| rng.below(200).to_string().into_bytes())
                .collect();
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            for chunk in refs.chunks(77) {
                let got = match batched.insert_many(chunk, nx, &limits) {
                    Ok(got) => got,
                    Err(e) => {
                        // Refused once for the whole batch, at the limit one by one hits.
                        assert_eq!(single.check_expansions(&limits), Err(e));
                        break;
                    }
                };
                let want: Vec<Result<bool, CuckooError>> = chunk
                    .iter()
                    .map(|i| {
                        if nx {
                            single.add_nx(
                                i,
                                &Limits {
                                    max_expansions: usize::MAX,
                                    ..limits
                                },
                            )
                        } else {
                            single
                                .add(
                                    i,
                                    &Limits {
                                        max_expansions: usize::MAX,
                                        ..limits
                                    },
                                )
                                .map(|()| true)
                        }
                    })
                    .collect();
                assert_eq!(got, want);
                assert_eq!(batched, single);
            }
            let probes: Vec<Vec<u8>> = (0..500).map(|i| i.to_string().into_bytes()).collect();
            let refs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
            let one: Vec<bool> = refs.iter().map(|i| batched.contains(i)).collect();
            assert_eq!(batched.contains_many(&refs), one);
        }
    }
}

#[test]
fn growth_follows_the_expansion_and_stops_at_the_hard_cap() {
    let mut f = filter(2, 1, 1, 4);
    let limits = Limits {
        max_expansions: usize::MAX,
        ..Limits::default()
    };
    for i in 0..200u32 {
        f.add(&i.to_le_bytes(), &limits).unwrap();
    }
    for (i, s) in f.sub_filters().iter().enumerate() {
        assert_eq!(s.buckets(), 2 * 4u64.pow(i as u32));
    }
    // Expansion 1: many equal sub-filters, until the hard cap refuses growth.
    let mut f = filter(2, 1, 1, 1);
    let mut refused = None;
    for i in 0..10 * MAX_SUB_FILTERS as u32 {
        if let Err(e) = f.add(&i.to_le_bytes(), &limits) {
            refused = Some(e);
            break;
        }
    }
    assert_eq!(
        refused,
        Some(CuckooError::Filter(FilterError::TooManyLayers {
            limit: MAX_SUB_FILTERS
        }))
    );
    assert_eq!(f.sub_filters().len(), MAX_SUB_FILTERS);
}

#[test]
fn sizes_are_redisbloom_figures_and_the_footprint_bounds_growth() {
    let mut f = filter(512, 2, 20, 1);
    assert_eq!(f.info_size(), 40 + 16 + 1024);
    let limits = Limits::default();
    for i in 0..1100u32 {
        f.add(&i.to_le_bytes(), &limits).unwrap();
    }
    assert_eq!(f.sub_filters().len(), 2);
    assert_eq!(f.info_size(), 40 + 32 + 2048);
    assert!(f.memory_usage() >= f.slot_bytes());
    assert_eq!(
        f.memory_usage(),
        CuckooFilter::modelled_bytes(2, [1024, 1024])
    );
    // Creation is refused over the limit, and when the size cannot exist.
    let p = Params::default();
    assert!(matches!(
        CuckooFilter::new(512, p, 100),
        Err(CuckooError::Filter(FilterError::OverLimit { .. }))
    ));
    assert!(CuckooFilter::new(1 << 62, p, u64::MAX).is_err());
    assert!(CuckooFilter::new(1 << 63, p, u64::MAX).is_err());
    assert!(CuckooFilter::new(24, p, u64::MAX).is_err());
    assert!(CuckooFilter::new(
        4,
        Params {
            bucket_size: 0,
            ..p
        },
        u64::MAX
    )
    .is_err());
}

#[test]
fn scandump_splits_large_sub_filters_into_16_mib_pieces_and_loads_back() {
    // 2^24 buckets of 2 slots: one 32 MiB sub-filter (zeroed pages cost nothing).
    let mut f = filter(1 << 24, 2, 20, 1);
    let limits = Limits::default();
    for i in 0..1000u32 {
        f.add(&i.to_le_bytes(), &limits).unwrap();
    }
    let (it, head) = codec::dump_chunk(&f, 0).unwrap();
    assert_eq!((it, head.len()), (1, HEADER_BYTES));
    let (it1, a) = codec::dump_chunk(&f, 1).unwrap();
    assert_eq!(
        (it1, a.len() as u64),
        (1 + MAX_CHUNK_BYTES, MAX_CHUNK_BYTES)
    );
    let (it2, b) = codec::dump_chunk(&f, it1).unwrap();
    assert_eq!(it2, 1 + 2 * MAX_CHUNK_BYTES);
    assert!(codec::dump_chunk(&f, it2).is_none());
    let header = Header::decode(&head).unwrap();
    let mut g = codec::filter_from_header(&header, Strictness::LoadChunk, u64::MAX).unwrap();
    codec::load_chunk(&mut g, it1, &a).unwrap();
    codec::load_chunk(&mut g, it2, &b).unwrap();
    assert_eq!(g, f);
}

#[test]
fn hostile_headers_and_chunks_are_refused() {
    let good = Header {
        items: 3,
        buckets: 64,
        deletes: 0,
        sub_filters: 1,
        bucket_size: 2,
        max_iterations: 20,
        expansion: 1,
    };
    let ok = |h: Header| codec::filter_from_header(&h, Strictness::LoadChunk, 1 << 30).is_ok();
    assert!(ok(good));
    assert_eq!(Header::decode(&good.encode()).unwrap(), good);
    assert!(Header::decode(&good.encode()[..37]).is_err());
    assert!(Header::decode(&[0; 39]).is_err());
    for bad in [
        Header {
            sub_filters: 0,
            ..good
        },
        Header {
            sub_filters: 65536,
            ..good
        },
        Header {
            sub_filters: 65537,
            ..good
        },
        Header {
            bucket_size: 0,
            ..good
        },
        Header {
            bucket_size: 256,
            ..good
        },
        Header { buckets: 0, ..good },
        Header { buckets: 3, ..good },
        Header {
            buckets: 1 << 56,
            ..good
        },
        Header {
            max_iterations: 0,
            ..good
        },
        Header {
            expansion: 3,
            ..good
        },
        Header {
            expansion: 0,
            sub_filters: 2,
            ..good
        },
        Header {
            expansion: 32768,
            sub_filters: 8,
            ..good
        },
        Header { items: 129, ..good },
    ] {
        assert!(!ok(bad), "{bad:?}");
    }
    // A replayed header may count more items than slots (RedisBloom's own copies do).
    assert!(
        codec::filter_from_header(&Header { items: 129, ..good }, Strictness::Rdb, 1 << 30).is_ok()
    );
    assert!(codec::filter_from_header(&good, Strictness::LoadChunk, 100).is_err());

    let mut f = codec::filter_from_header(&good, Strictness::LoadChunk, 1 << 30).unwrap();
    let before = f.clone();
    for (it, data) in [
        (5u64, &b""[..]),
        (3, b"abcd"),
        (130, b"ab"),
        (99_999_999, b"ab"),
        (0, b"a"),
        (u64::MAX, b"ab"),
    ] {
        assert!(codec::load_chunk(&mut f, it, data).is_err(), "{it}");
    }
    assert_eq!(f, before);
    codec::load_chunk(&mut f, 129, &[7; 128]).unwrap();
    assert_eq!(f.sub_filters()[0].occupied(), 128);
    // SCANDUMP at any iterator never panics, and past the end is done.
    for it in [0, 1, 2, 128, 129, 130, u64::MAX] {
        let _ = codec::dump_chunk(&f, it);
    }
    assert!(codec::dump_chunk(&f, 129).is_none());
}

/// An RDB value as fields, for the decoder.
fn fields_of(f: &CuckooFilter) -> Vec<support::Field> {
    support::DumpValue::from_fields(codec::rdb_fields(f))
}

fn decode(
    fields: Vec<support::Field>,
    encver: i32,
) -> Result<CuckooFilter, crate::format::CodecError> {
    let value = support::DumpValue {
        encver,
        fields,
        complete: true,
    };
    codec::decode_rdb(&mut value.source(), encver, Some(1 << 30))
}

#[test]
fn rdb_values_round_trip_and_every_cut_or_bad_field_is_refused() {
    use support::Field::{S, U};
    let mut f = filter(8, 2, 20, 2);
    let limits = Limits::default();
    for i in 0..40u32 {
        f.add(&i.to_le_bytes(), &limits).unwrap();
    }
    assert!(f.delete(&3u32.to_le_bytes()));
    let fields = fields_of(&f);
    assert_eq!(decode(fields.clone(), 4).unwrap(), f);
    for cut in 0..fields.len() {
        assert!(decode(fields[..cut].to_vec(), 4).is_err(), "cut {cut}");
    }
    assert!(decode(fields.clone(), 5).is_err());
    assert!(decode(fields.clone(), -1).is_err());
    let with = |i: usize, v: support::Field| {
        let mut x = fields.clone();
        x[i] = v;
        x
    };
    for bad in [
        with(0, U(0)),
        with(0, U(1 << 40)),
        with(1, U(0)),
        with(1, U(6)),
        with(4, U(0)),
        with(4, U(256)),
        with(5, U(0)),
        with(5, U(1 << 16)),
        with(6, U(3)),
        with(6, U(0)),
        with(7, U(16)),
        with(8, S(vec![0; 15])),
        with(8, S(vec![0; 17])),
        with(7, S(vec![])),
    ] {
        assert!(decode(bad, 4).is_err());
    }
    // A budget below the footprint refuses the value before its slots are copied.
    let value = support::DumpValue {
        encver: 4,
        fields: fields.clone(),
        complete: true,
    };
    assert!(codec::decode_rdb(&mut value.source(), 4, Some(f.memory_usage() - 1)).is_err());
    assert!(codec::decode_rdb(&mut value.source(), 4, Some(f.memory_usage())).is_ok());

    // Legacy: three fields, then one slot string per sub-filter of the same size.
    let legacy = vec![
        U(2),
        U(4),
        U(1),
        S(vec![0, 0, 9, 0, 0, 0, 0, 0]),
        S(vec![0; 8]),
    ];
    let g = decode(legacy.clone(), 3).unwrap();
    assert_eq!(
        (g.params(), g.sub_filters().len(), g.items(), g.deletes()),
        (Params::default(), 2, 1, 0)
    );
    assert_eq!(
        codec::rdb_fields(&g).take(7).collect::<Vec<_>>(),
        [2, 4, 1, 0, 2, 20, 1].map(RdbField::Unsigned)
    );
    let mut short = legacy;
    short[4] = S(vec![0; 7]);
    assert!(decode(short, 1).is_err());
}

#[test]
fn the_reserve_rules_give_redisbloom_shapes() {
    let f = |cap, p: Params| {
        CuckooFilter::new(
            params::buckets_for(cap, p.bucket_size).unwrap(),
            p,
            u64::MAX,
        )
        .unwrap()
    };
    let d = f(1000, Params::default());
    assert_eq!(
        d.debug_line(),
        "bktsize:2 buckets:512 items:0 deletes:0 filters:1 max_iterations:20 expansion:1"
    );
    let p = Params {
        bucket_size: 4,
        max_iterations: 7,
        expansion: params::expansion(3).unwrap(),
    };
    let i = f(100, p).info();
    assert_eq!(
        (
            i.size,
            i.buckets,
            i.bucket_size,
            i.expansion,
            i.max_iterations
        ),
        (184, 32, 4, 4, 7)
    );
    assert_eq!(
        f(
            2000,
            Params {
                bucket_size: 255,
                ..Params::default()
            }
        )
        .info()
        .size,
        2096
    );
}

/// The loads `rate::REACHED_LOAD` promises are reached by this eviction walk, at
/// `rate::SIZING_MAX_ITERATIONS`, on every seed tried (8-bit fingerprints: wider ones collide
/// less, so they fill at least as far).
#[test]
fn sizing_loads_are_reached_before_the_first_failed_insert() {
    for &(bs, load) in super::rate::REACHED_LOAD {
        for seed in 0..3u64 {
            let buckets = 1u64 << 13;
            let mut f = filter(buckets, bs, super::rate::SIZING_MAX_ITERATIONS, 0);
            let l = Limits::default();
            let mut i = 0u64;
            while f.add(&(i ^ (seed << 40)).to_le_bytes(), &l).is_ok() {
                i += 1;
            }
            let reached = i as f64 / (buckets * u64::from(bs)) as f64;
            assert!(reached >= load, "bucket size {bs}: {reached} < {load}");
        }
    }
}

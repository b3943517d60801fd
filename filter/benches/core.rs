//! Criterion benches of the core: small (cache-resident), cache-sized and large filters;
//! present and absent items; single and batched; chains of 1, 10 and 100 layers.
//! `cargo bench -p layerbloom-filter --bench core`. The side-by-side ratios against the
//! baseline are in `benches/ratios.rs`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use layerbloom_filter::{FilterSpec, Layout, ScalableFilter};

fn item(tag: u64, i: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&tag.to_le_bytes());
    b[8..].copy_from_slice(&i.to_le_bytes());
    b
}

fn filled(capacity: u64, rate: f64, layout: Layout, expansion: u32, layers: u64) -> ScalableFilter {
    let spec = FilterSpec {
        layout,
        ..FilterSpec::new(capacity / layers, rate, expansion)
    };
    let mut f = ScalableFilter::new(spec, u64::MAX).unwrap();
    let mut i = 0;
    while f.items() < capacity {
        let _ = f.add(&item(1, i), u64::MAX);
        i += 1;
    }
    f
}

fn sizes(c: &mut Criterion) {
    for (name, capacity) in [
        ("small", 10_000u64),
        ("cache", 1_000_000),
        ("large", 20_000_000),
    ] {
        let mut group = c.benchmark_group(format!("single/{name}"));
        group.throughput(Throughput::Elements(1));
        if capacity > 1_000_000 {
            group.sample_size(20);
        }
        for layout in [Layout::Blocked, Layout::Classic] {
            let f = filled(capacity, 0.01, layout, 2, 1);
            let label = format!("{layout:?}");
            let mut i = 0u64;
            group.bench_function(BenchmarkId::new("contains_present", &label), |b| {
                b.iter(|| {
                    i = (i + 7919) % capacity;
                    black_box(f.contains(&item(1, i)))
                })
            });
            let mut j = 0u64;
            group.bench_function(BenchmarkId::new("contains_absent", &label), |b| {
                b.iter(|| {
                    j += 1;
                    black_box(f.contains(&item(2, j)))
                })
            });
        }
        group.finish();

        let mut group = c.benchmark_group(format!("batch100/{name}"));
        group.throughput(Throughput::Elements(100));
        if capacity > 1_000_000 {
            group.sample_size(20);
        }
        let f = filled(capacity, 0.01, Layout::Blocked, 2, 1);
        let mut k = 0u64;
        group.bench_function("contains_many_present", |b| {
            b.iter(|| {
                let items: Vec<[u8; 16]> = (0..100)
                    .map(|_| {
                        k = (k + 7919) % capacity;
                        item(1, k)
                    })
                    .collect();
                let refs: Vec<&[u8]> = items.iter().map(|x| &x[..]).collect();
                black_box(f.contains_many(&refs))
            })
        });
        group.finish();
    }
}

fn chains(c: &mut Criterion) {
    let mut group = c.benchmark_group("chain");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    for layers in [1u64, 10, 100] {
        let total = 2_000_000;
        let f = filled(total, 0.01, Layout::Blocked, 1, layers);
        let mut i = 0u64;
        group.bench_function(BenchmarkId::new("contains_present", layers), |b| {
            b.iter(|| {
                i = (i + 7919) % total;
                black_box(f.contains(&item(1, i)))
            })
        });
        let mut j = 0u64;
        group.bench_function(BenchmarkId::new("contains_absent", layers), |b| {
            b.iter(|| {
                j += 1;
                black_box(f.contains(&item(2, j)))
            })
        });
    }
    group.finish();
}

/// Counting the set bits of loaded data (every RDB load and BF.LOADCHUNK does it): the
/// crate's count against a byte-at-a-time count, the way it was done before.
fn bit_counts(c: &mut Criterion) {
    let data: Vec<u8> = (0..64u64 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut group = c.benchmark_group("count_ones/64MiB");
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.sample_size(10);
    group.bench_function("layerbloom_filter::bits::count_ones", |b| {
        b.iter(|| layerbloom_filter::bits::count_ones(std::hint::black_box(&data)))
    });
    group.bench_function("byte by byte", |b| {
        b.iter(|| {
            std::hint::black_box(&data)
                .iter()
                .map(|x| u64::from(x.count_ones()))
                .sum::<u64>()
        })
    });
    group.finish();
}

criterion_group!(benches, sizes, chains, bit_counts);
criterion_main!(benches);

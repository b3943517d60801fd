//! Side-by-side ratios of layerbloom's blocked layers against RedisBloom's classic layer (the
//! baseline), measured interleaved in one run so machine noise hits both alike: each round
//! times a chunk of operations on the baseline and on layerbloom, alternating which goes
//! first; the table reports the median over rounds of ns per operation and their ratio.
//!
//! `cargo bench -p layerbloom-filter --bench ratios` (or `make bench-core`). Environment:
//! `RATIOS_BITS_LOG2` (default 30: filters of at least 2^30 bits), `RATIOS_ROUNDS` (9),
//! `RATIOS_CHUNK` (200000 operations per round and side), `RATIOS_RATES` (default
//! `0.01,0.001,0.00001`), `RATIOS_CHAINS` (`1` to run the chain test, default 1).

use std::hint::black_box;
use std::time::Instant;

use layerbloom_filter::bloom::sizing::classic_bits_per_item;
use layerbloom_filter::{FilterSpec, Layout, ScalableFilter};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// 16-byte items: a tag and a counter.
fn item(tag: u64, i: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&tag.to_le_bytes());
    b[8..].copy_from_slice(&i.to_le_bytes());
    b
}

const INSERTED: u64 = 1;
const ABSENT: u64 = 2;
const FRESH: u64 = 3;

/// A small deterministic generator for probe order (xorshift*).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// One measured operation: runs `chunk` operations starting at operation number `start`.
type Op<'a> = Box<dyn FnMut(&mut ScalableFilter, u64, u64) + 'a>;

/// Times `op` on both filters, interleaved; returns median ns/op (baseline, layerbloom).
fn compare(
    base: &mut ScalableFilter,
    ours: &mut ScalableFilter,
    mut op: Op,
    rounds: u64,
    chunk: u64,
) -> (f64, f64) {
    let (mut b, mut o) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let start = round * chunk;
        let mut time = |f: &mut ScalableFilter| {
            let t = Instant::now();
            op(f, start, chunk);
            t.elapsed().as_nanos() as f64 / chunk as f64
        };
        if round % 2 == 0 {
            b.push(time(base));
            o.push(time(ours));
        } else {
            o.push(time(ours));
            b.push(time(base));
        }
    }
    (median(b), median(o))
}

/// Adds fresh items until exactly `n` are counted (never past: that would grow a layer).
fn fill(f: &mut ScalableFilter, n: u64) {
    let mut i = 0;
    while f.items() < n {
        let take = (n - f.items()).min(1000);
        let batch: Vec<[u8; 16]> = (i..i + take).map(|j| item(INSERTED, j)).collect();
        let refs: Vec<&[u8]> = batch.iter().map(|b| &b[..]).collect();
        f.add_many(&refs, u64::MAX);
        i += take;
    }
}

fn row(name: &str, (base, ours): (f64, f64)) {
    println!("| {name} | {base:.1} | {ours:.1} | {:.2}x |", base / ours);
}

fn single_and_batched(rate: f64, bits_log2: u32, rounds: u64, chunk: u64) {
    let capacity = ((1u64 << bits_log2) as f64 / classic_bits_per_item(rate * 0.5)).ceil() as u64;
    let spec = FilterSpec::new(capacity, rate, 2);
    let mut base = ScalableFilter::new(
        FilterSpec {
            layout: Layout::Classic,
            ..spec
        },
        u64::MAX,
    )
    .unwrap();
    let mut ours = ScalableFilter::new(spec, u64::MAX).unwrap();
    // Leave room for the measured adds, which bring both to capacity.
    let headroom = 2 * rounds * chunk;
    let filled = capacity - headroom.min(capacity / 2);
    let t = Instant::now();
    fill(&mut base, filled);
    fill(&mut ours, filled);
    let bytes = |f: &ScalableFilter| f.layer_summaries()[0].bytes;
    println!(
        "\n### error {rate}: capacity {capacity}, baseline {} MiB, layerbloom {} MiB, filled to {filled} in {:.0} s\n",
        bytes(&base) >> 20,
        bytes(&ours) >> 20,
        t.elapsed().as_secs_f64()
    );
    println!("| operation | baseline ns/op | layerbloom ns/op | speed-up |");
    println!("|---|---|---|---|");
    let random_present = |seed: u64| {
        move |f: &mut ScalableFilter, start: u64, n: u64| {
            let mut rng = Rng(seed ^ start.wrapping_add(1).wrapping_mul(0x9e37_79b9));
            let mut found = 0;
            for _ in 0..n {
                found += u64::from(f.contains(&item(INSERTED, rng.below(filled))));
            }
            assert_eq!(found, n, "no false negatives");
        }
    };
    row(
        "contains, present",
        compare(
            &mut base,
            &mut ours,
            Box::new(random_present(7)),
            rounds,
            chunk,
        ),
    );
    row(
        "contains, absent",
        compare(
            &mut base,
            &mut ours,
            Box::new(|f: &mut ScalableFilter, start, n| {
                for i in start..start + n {
                    black_box(f.contains(&item(ABSENT, i)));
                }
            }),
            rounds,
            chunk,
        ),
    );
    let mut fresh_base = 0u64;
    let mut fresh_ours = 0u64;
    let adds = compare(
        &mut base,
        &mut ours,
        Box::new(|f: &mut ScalableFilter, _start, n| {
            let counter = if f.is_classic() {
                &mut fresh_base
            } else {
                &mut fresh_ours
            };
            for _ in 0..n {
                black_box(f.add(&item(FRESH, *counter), u64::MAX).unwrap());
                *counter += 1;
            }
        }),
        rounds,
        chunk,
    );
    row("add", adds);
    // Batched: layerbloom's batch path against the baseline's single-item speed.
    let batch = |kind: u64| {
        move |f: &mut ScalableFilter, start: u64, n: u64| {
            let mut rng = Rng(11 ^ start.wrapping_add(3));
            let mut i = 0;
            while i < n {
                let items: Vec<[u8; 16]> = (0..100)
                    .map(|j| match kind {
                        INSERTED => item(INSERTED, rng.below(filled)),
                        other => item(other, start + i + j),
                    })
                    .collect();
                let refs: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
                if f.is_classic() {
                    for r in &refs {
                        black_box(f.contains(r));
                    }
                } else {
                    black_box(f.contains_many(&refs));
                }
                i += 100;
            }
        }
    };
    row(
        "contains 100 per batch, present (baseline: one by one)",
        compare(
            &mut base,
            &mut ours,
            Box::new(batch(INSERTED)),
            rounds,
            chunk,
        ),
    );
    row(
        "contains 100 per batch, absent (baseline: one by one)",
        compare(&mut base, &mut ours, Box::new(batch(ABSENT)), rounds, chunk),
    );
    let mut next_base = 1u64 << 40;
    let mut next_ours = 1u64 << 40;
    let batched_adds = compare(
        &mut base,
        &mut ours,
        Box::new(|f: &mut ScalableFilter, _start, n| {
            let counter = if f.is_classic() {
                &mut next_base
            } else {
                &mut next_ours
            };
            let mut i = 0;
            while i < n {
                let items: Vec<[u8; 16]> = (0..100).map(|j| item(FRESH, *counter + j)).collect();
                let refs: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
                if f.is_classic() {
                    for r in &refs {
                        black_box(f.add(r, u64::MAX).unwrap());
                    }
                } else {
                    black_box(f.add_many(&refs, u64::MAX));
                }
                *counter += 100;
                i += 100;
            }
        }),
        rounds,
        chunk,
    );
    row("add 100 per batch (baseline: one by one)", batched_adds);
}

/// A chain of `layers` equal-capacity layers (expansion 1) holding `total` items.
fn chain(total: u64, layers: u64, rate: f64) -> ScalableFilter {
    let mut f = ScalableFilter::new(FilterSpec::new(total / layers, rate, 1), u64::MAX).unwrap();
    fill(&mut f, total);
    f
}

/// Chains of 10 and 100 layers against a one-layer filter of the same total size (bytes),
/// each filled to capacity. The chain's layers tighten their error rate, so its layers hold
/// fewer items per byte than the single layer does.
fn chains(bits_log2: u32, rounds: u64, chunk: u64) {
    let rate = 0.01;
    let total = ((1u64 << bits_log2) as f64 / classic_bits_per_item(rate * 0.5)).ceil() as u64;
    println!(
        "\n### chains at error {rate}, {total} items per chain (layerbloom's blocked layers)\n"
    );
    println!("| layers | MiB | one layer of that size: present / absent ns | chain: present / absent ns | present vs 1 layer | absent vs 1 layer | memory floor, 1 layer / chain ns | floor: chain vs 1 layer |");
    println!("|---|---|---|---|---|---|---|---|");
    for layers in [10u64, 100] {
        let mut many = chain(total, layers, rate);
        let bytes = many.memory_usage();
        let per_item = chain(1_000_000, 1, rate).memory_usage() as f64 / 1_000_000.0;
        let single_items = (bytes as f64 / per_item) as u64;
        let mut one = chain(single_items, 1, rate);
        let present = |f: &mut ScalableFilter, start: u64, n: u64| {
            let holds = f.items();
            let mut rng = Rng(5 ^ start.wrapping_add(9));
            for _ in 0..n {
                assert!(f.contains(&item(INSERTED, rng.below(holds))));
            }
        };
        let absent = |f: &mut ScalableFilter, start: u64, n: u64| {
            for i in start..start + n {
                black_box(f.contains(&item(ABSENT, i)));
            }
        };
        let (p1, pn) = compare(&mut one, &mut many, Box::new(present), rounds, chunk);
        let (a1, an) = compare(&mut one, &mut many, Box::new(absent), rounds, chunk);
        let (f1, fnn) = compare(&mut one, &mut many, Box::new(line_floor), rounds, chunk);
        println!(
            "| {layers} | {} | {p1:.1} / {a1:.1} | {pn:.1} / {an:.1} | {:.2}x | {:.2}x | {f1:.1} / {fnn:.1} | {:.2}x |",
            bytes >> 20,
            pn / p1,
            an / a1,
            fnn / f1
        );
    }
}

/// The memory floor of a lookup, without hashing or bit tests: one random cache line from
/// every layer of the filter, all requested before any is read. No layout of separate layers
/// can answer faster than this.
fn line_floor(f: &mut ScalableFilter, start: u64, n: u64) {
    let layers = f.layer_bytes();
    let mut rng = Rng(7 ^ start.wrapping_add(3));
    let mut offsets = vec![0usize; layers.len()];
    let mut acc = 0u8;
    for _ in 0..n {
        for (o, layer) in offsets.iter_mut().zip(&layers) {
            *o = rng.below((layer.len() / 64) as u64) as usize * 64;
        }
        #[cfg(target_arch = "x86_64")]
        for (&o, layer) in offsets.iter().zip(&layers) {
            // SAFETY: a prefetch is a hint; the address is inside the layer.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    layer.as_ptr().add(o).cast(),
                )
            };
        }
        for (&o, layer) in offsets.iter().zip(&layers) {
            acc |= layer[o];
        }
    }
    black_box(acc);
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is expected.
    let bits_log2: u32 = env("RATIOS_BITS_LOG2", 30);
    let rounds: u64 = env("RATIOS_ROUNDS", 9);
    let chunk: u64 = env("RATIOS_CHUNK", 200_000);
    let rates: String = env("RATIOS_RATES", "0.01,0.001,0.00001".to_string());
    println!("## Core ratios: layerbloom (blocked) vs RedisBloom's layer (classic)");
    println!("\nfilters of at least 2^{bits_log2} bits; {rounds} interleaved rounds of {chunk} operations per side; medians\n");
    for rate in rates
        .split(',')
        .filter_map(|r| r.trim().parse::<f64>().ok())
    {
        single_and_batched(rate, bits_log2, rounds, chunk);
    }
    if env("RATIOS_CHAINS", 1u32) == 1 {
        chains(bits_log2, rounds, chunk);
    }
}

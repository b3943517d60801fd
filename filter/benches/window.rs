//! The windowed filter's trade-off, measured and computed: for layerbloom's ring of slices at
//! a few (error, slices) points, the memory per item of the window (measured on a filled
//! ring), the cache lines a lookup and an add touch (from the geometry of its layers), how
//! long past the window an item lingers, and the time of an absent lookup, a present lookup
//! and an add against a plain filter of the window's capacity (interleaved, median of
//! rounds); next to the same figures computed from their math for the alternatives: the
//! seeds' double buffer (two filters written together, the older one looked up) and an
//! age-partitioned Bloom filter (APBF: `k + l` bit slices shifted once per generation, an
//! item present when `k` consecutive slices hold its bit).
//!
//! `cargo bench -p layerbloom-filter --bench window`. Environment: `WINDOW_ITEMS` (items per
//! window, default 2^22), `WINDOW_ROUNDS` (5), `WINDOW_CHUNK` (100000 operations per round
//! and side).

use std::hint::black_box;
use std::time::Instant;

use layerbloom_filter::{FilterSpec, ScalableFilter, WindowSpec, WindowedFilter};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn item(tag: u64, i: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&tag.to_le_bytes());
    b[8..].copy_from_slice(&i.to_le_bytes());
    b
}

const ABSENT: u64 = u64::MAX;
const FRESH: u64 = u64::MAX - 1;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// xorshift*, for probe order and the Monte Carlo below.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        (self.next() >> 11) % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Expected cache lines an absent item costs in one blocked layer of `blocks` blocks per
/// item at rate `error`: blocks are tested in order and the first missing bit ends it, a
/// block passing with probability `error^(1/blocks)`.
fn absent_lines(blocks: u32, error: f64) -> f64 {
    let q = error.powf(1.0 / f64::from(blocks));
    (0..blocks).map(|j| q.powi(j as i32)).sum()
}

struct Ring {
    bits_per_item: f64,
    absent_lines: f64,
    present_lines: f64,
    add_lines: f64,
    add_detailed_lines: f64,
    linger: f64,
    ns: [f64; 4],
    plain_ns: [f64; 3],
}

/// A ring filled at the planned rate over all `slices + 1` live generations (the most it
/// holds), measured.
fn ring(error: f64, slices: u32, items: u64, rounds: usize, chunk: u64) -> Ring {
    let spec = WindowSpec {
        window_ms: 1000 * u64::from(slices),
        slices,
        filter: FilterSpec::new(items, error, 2),
    };
    let mut f = WindowedFilter::new(spec, 0, u64::MAX).unwrap();
    let per_slice = items / u64::from(slices);
    for head in 0..=u64::from(slices) {
        f.advance_to(head);
        for i in 0..per_slice {
            f.add(&item(head, i), u64::MAX).unwrap();
        }
    }
    let layers: Vec<_> = f
        .slice_filters()
        .flat_map(|(_, c)| c.layer_summaries())
        .collect();
    assert_eq!(layers.len(), slices as usize + 1, "one layer per slice");
    let l = layers[0];
    let per_slice_absent = absent_lines(l.blocks_per_item, l.error);
    let generations = f64::from(slices + 1);
    // A present item of age a (0 ..= slices, each as likely) is found after the a newer
    // slices refused it, in all of its blocks.
    let present = f64::from(slices) / 2.0 * per_slice_absent + f64::from(l.blocks_per_item);

    let mut plain = ScalableFilter::new(FilterSpec::new(items, error, 2), u64::MAX).unwrap();
    for i in 0..items {
        plain.add(&item(0, i), u64::MAX).unwrap();
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ns = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut plain_ns = [Vec::new(), Vec::new(), Vec::new()];
    let mut fresh = 0u64;
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            let probes: Vec<[u8; 16]> = (0..chunk)
                .map(|_| {
                    if side == 0 {
                        let head = rng.below(u64::from(slices) + 1);
                        item(head, rng.below(per_slice))
                    } else {
                        item(0, rng.below(items))
                    }
                })
                .collect();
            let absent: Vec<[u8; 16]> = (0..chunk).map(|_| item(ABSENT, rng.next())).collect();
            let adds: Vec<[u8; 16]> = (0..chunk)
                .map(|_| {
                    fresh += 1;
                    item(FRESH, fresh)
                })
                .collect();
            let out: &mut [Vec<f64>] = if side == 0 { &mut ns } else { &mut plain_ns };
            let time = |run: &mut dyn FnMut()| {
                let t = Instant::now();
                run();
                t.elapsed().as_nanos() as f64 / chunk as f64
            };
            if side == 0 {
                out[0].push(time(&mut || {
                    for p in &absent {
                        black_box(f.contains(p));
                    }
                }));
                out[1].push(time(&mut || {
                    for p in &probes {
                        black_box(f.contains(p));
                    }
                }));
                // Adds into a copy, so every round measures the same filter.
                let mut g = f.clone();
                out[2].push(time(&mut || {
                    for p in &adds {
                        black_box(g.add(p, u64::MAX).ok());
                    }
                }));
                let mut g = f.clone();
                out[3].push(time(&mut || {
                    for p in &adds {
                        black_box(g.add_detailed(p, u64::MAX).ok());
                    }
                }));
            } else {
                out[0].push(time(&mut || {
                    for p in &absent {
                        black_box(plain.contains(p));
                    }
                }));
                out[1].push(time(&mut || {
                    for p in &probes {
                        black_box(plain.contains(p));
                    }
                }));
                let mut g = plain.clone();
                out[2].push(time(&mut || {
                    for p in &adds {
                        black_box(g.add(p, u64::MAX).ok());
                    }
                }));
            }
        }
    }
    let [a, b, c, d] = ns;
    let [pa, pb, pc] = plain_ns;
    Ring {
        bits_per_item: f.memory_usage() as f64 * 8.0 / items as f64,
        absent_lines: generations * per_slice_absent,
        present_lines: present,
        add_lines: f64::from(l.blocks_per_item),
        add_detailed_lines: f64::from(slices) * per_slice_absent + f64::from(l.blocks_per_item),
        linger: 1.0 / f64::from(slices),
        ns: [median(a), median(b), median(c), median(d)],
        plain_ns: [median(pa), median(pb), median(pc)],
    }
}

/// The double buffer: two filters written together, each reset in turn every window, the
/// one reset longest ago looked up; it holds between one and two windows of items, so each
/// filter is sized for two windows. Lines from layerbloom's blocked layer at that rate.
fn double_buffer(error: f64, items: u64) -> (f64, f64, f64, f64) {
    let spec = FilterSpec::new(2 * items, error, 0);
    let f = ScalableFilter::new(spec, u64::MAX).unwrap();
    let l = f.layer_summaries()[0];
    let bits = 2.0 * f.memory_usage() as f64 * 8.0 / items as f64;
    let blocks = f64::from(l.blocks_per_item);
    (
        bits,
        absent_lines(l.blocks_per_item, l.error),
        blocks,
        2.0 * blocks,
    )
}

/// Probability that `k` consecutive slices answer present when slice `i` does with
/// probability `fill[i]`, independently: the chance of a run of `k` among them.
fn run_probability(fill: &[f64], k: usize) -> f64 {
    // state[r]: probability that the current run of hits has length r (< k), no run of k yet.
    let mut state = vec![0.0; k];
    state[0] = 1.0;
    let mut found = 0.0;
    for &f in fill {
        let mut next = vec![0.0; k];
        for (r, &p) in state.iter().enumerate() {
            next[0] += p * (1.0 - f);
            if r + 1 == k {
                found += p * f;
            } else {
                next[r + 1] += p * f;
            }
        }
        state = next;
    }
    found
}

/// The fills of an APBF's `k + l` slices at its fullest (a generation of `g` items about to
/// shift), with `m` bits per slice: the slice at position `i` (0 the newest) has taken
/// `min(i + 1, k)` generations, one bit per item each.
fn apbf_fills(k: usize, l: usize, g: f64, m: f64) -> Vec<f64> {
    (0..k + l)
        .map(|i| 1.0 - (-(((i + 1).min(k)) as f64) * g / m).exp())
        .collect()
}

/// An APBF for a window of `l` generations at `error`: the `k` and slice size that take the
/// least memory, its bits per item of the window, and the expected slices an absent and a
/// present lookup probe (each a cache line: its slices are separate arrays), searching
/// positions `k - 1, 2k - 1, ...` (every run of `k` covers one) and extending each hit both
/// ways; an add sets one bit in each of `k` slices.
fn apbf(error: f64, l: usize) -> (usize, f64, f64, f64, f64) {
    let g = 1.0; // per-item figures: slices of m bits per item of a generation
    let mut best: Option<(usize, f64)> = None;
    for k in 1..=24 {
        let (mut lo, mut hi) = (0.1, 1000.0);
        if run_probability(&apbf_fills(k, l, g, hi), k) > error {
            continue;
        }
        for _ in 0..60 {
            let mid: f64 = (lo + hi) / 2.0;
            if run_probability(&apbf_fills(k, l, g, mid), k) > error {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let bits = (k + l) as f64 * hi / l as f64;
        if best.is_none_or(|(_, b)| bits < b) {
            best = Some((k, bits));
        }
    }
    let (k, bits) = best.expect("some k meets the rate");
    let m = bits * l as f64 / (k + l) as f64;
    let fills = apbf_fills(k, l, g, m);
    let mut rng = Rng(0x5eed);
    let trials = 200_000;
    let (mut absent, mut present) = (0u64, 0u64);
    for trial in 0..trials {
        // A present item: its run starts at a position of its age (0 ..= l).
        let age = (trial % (l + 1) as u64) as usize;
        for (probes, start) in [(&mut absent, None), (&mut present, Some(age))] {
            let hits: Vec<bool> = (0..k + l)
                .map(|i| match start {
                    Some(s) if i >= s && i < s + k => true,
                    _ => rng.unit() < fills[i],
                })
                .collect();
            *probes += search(&hits, k);
        }
    }
    (
        k,
        bits,
        absent as f64 / trials as f64,
        present as f64 / trials as f64,
        k as f64,
    )
}

/// Probes the search makes over the slices' answers `hits`.
fn search(hits: &[bool], k: usize) -> u64 {
    let mut probes = 0;
    let mut known = vec![None; hits.len()];
    let mut probe = |i: usize, probes: &mut u64| -> bool {
        *known[i].get_or_insert_with(|| {
            *probes += 1;
            hits[i]
        })
    };
    let mut j = k - 1;
    while j < hits.len() {
        if probe(j, &mut probes) {
            let mut run = 1;
            let mut left = j;
            while left > 0 && run < k && probe(left - 1, &mut probes) {
                left -= 1;
                run += 1;
            }
            let mut right = j;
            while right + 1 < hits.len() && run < k && probe(right + 1, &mut probes) {
                right += 1;
                run += 1;
            }
            if run >= k {
                return probes;
            }
        }
        j += k;
    }
    probes
}

fn main() {
    let items: u64 = env("WINDOW_ITEMS", 1 << 22);
    let rounds: usize = env("WINDOW_ROUNDS", 5);
    let chunk: u64 = env("WINDOW_CHUNK", 100_000);
    println!("items per window: {items}; {rounds} rounds of {chunk} operations per side\n");
    println!("| error | slices | structure | bits per item of the window | lines: absent lookup | present lookup | add | add telling \"was it in the window\" | lingers past the window, at most (of a window) | ns: absent / present / add / add detailed | plain filter ns: absent / present / add |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for error in [0.01, 0.001] {
        let (bits, absent, present, add) = double_buffer(error, items);
        println!(
            "| {error} | - | double buffer | {bits:.1} | {absent:.2} | {present:.2} | {add:.2} | {add:.2} | 1 | | |"
        );
        for slices in [1u32, 2, 4, 8, 16] {
            let r = ring(error, slices, items, rounds, chunk);
            println!(
                "| {error} | {slices} | ring (layerbloom) | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.0} / {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} |",
                r.bits_per_item,
                r.absent_lines,
                r.present_lines,
                r.add_lines,
                r.add_detailed_lines,
                r.linger,
                r.ns[0],
                r.ns[1],
                r.ns[2],
                r.ns[3],
                r.plain_ns[0],
                r.plain_ns[1],
                r.plain_ns[2],
            );
            let (k, bits, absent, present, add) = apbf(error, slices as usize);
            println!(
                "| {error} | {slices} | APBF (k = {k}, l = {slices}) | {bits:.1} | {absent:.2} | {present:.2} | {add:.2} | {:.2} | {:.3} | | |",
                add + absent,
                1.0 / f64::from(slices)
            );
        }
    }
}

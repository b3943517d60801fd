//! A deliberately naive cuckoo filter, written from the rules in the RedisBloom fixtures'
//! README ("Formats", "Filter semantics") and nothing else: a `Vec` of buckets per
//! sub-filter, obvious loops, the eviction walk logged and undone from the log. The fast
//! core (`layerbloom_filter::cuckoo`) must give the same reply and the same slot bytes after
//! every operation. Only the memory limit, the sub-filter cap and the eviction budget of a
//! batch are layerbloom's own rules, not RedisBloom's; they are modelled from the README.

use layerbloom_filter::cuckoo::params::MAX_SUB_FILTERS;
use layerbloom_filter::cuckoo::{CuckooError, CuckooFilter, WALK_BUDGET};
use layerbloom_filter::hash::murmur64a;
use layerbloom_filter::FilterError;

const MULTIPLIER: u64 = 0x5bd1_e995;

/// An item's fingerprint and its two bucket hashes, by the README's formulas.
#[derive(Debug, Clone, Copy)]
pub struct Hashed {
    pub fp: u8,
    pub h1: u64,
    pub h2: u64,
}

pub fn hash(item: &[u8]) -> Hashed {
    let h = murmur64a(item, 0);
    let fp = (h % 255 + 1) as u8;
    Hashed {
        fp,
        h1: h,
        h2: h ^ (u64::from(fp) * MULTIPLIER),
    }
}

/// The other bucket of a fingerprint in bucket `b` of a sub-filter of `n` buckets.
fn other_bucket(b: u64, fp: u8, n: u64) -> u64 {
    (b ^ (u64::from(fp) * MULTIPLIER)) % n
}

/// `CF.RESERVE`'s bucket count: the next power of two at or above ⌊capacity / bucket size⌋,
/// at least 1.
pub fn reserve_buckets(capacity: u64, bucket_size: u64) -> u64 {
    let mut n = 1;
    while n < capacity / bucket_size {
        n *= 2;
    }
    n
}

/// `EXPANSION`, rounded up to a power of two (0 stays 0).
pub fn round_expansion(e: u64) -> u64 {
    if e == 0 {
        return 0;
    }
    let mut p = 1;
    while p < e {
        p *= 2;
    }
    p
}

#[derive(Debug, Clone)]
pub struct Model {
    pub bucket_size: usize,
    pub max_iterations: usize,
    pub expansion: u64,
    /// Oldest first; each sub-filter a list of buckets, each bucket `bucket_size` slots.
    pub subs: Vec<Vec<Vec<u8>>>,
    pub items: u64,
    pub deletes: u64,
    pub max_expansions: usize,
    pub max_bytes: u64,
}

fn empty_sub(buckets: u64, bucket_size: usize) -> Vec<Vec<u8>> {
    (0..buckets).map(|_| vec![0u8; bucket_size]).collect()
}

fn put_first_empty(bucket: &mut [u8], fp: u8) -> bool {
    for slot in bucket.iter_mut() {
        if *slot == 0 {
            *slot = fp;
            return true;
        }
    }
    false
}

impl Model {
    pub fn new(
        buckets: u64,
        bucket_size: usize,
        max_iterations: usize,
        expansion: u64,
        max_expansions: usize,
        max_bytes: u64,
    ) -> Model {
        Model {
            bucket_size,
            max_iterations,
            expansion,
            subs: vec![empty_sub(buckets, bucket_size)],
            items: 0,
            deletes: 0,
            max_expansions,
            max_bytes,
        }
    }

    /// Every sub-filter's slots, bucket after bucket.
    pub fn slot_bytes(&self) -> Vec<Vec<u8>> {
        self.subs.iter().map(|s| s.concat()).collect()
    }

    pub fn contains(&self, item: &[u8]) -> bool {
        let h = hash(item);
        for sub in &self.subs {
            let n = sub.len() as u64;
            if sub[(h.h1 % n) as usize].contains(&h.fp) || sub[(h.h2 % n) as usize].contains(&h.fp)
            {
                return true;
            }
        }
        false
    }

    pub fn count(&self, item: &[u8]) -> u64 {
        let h = hash(item);
        let mut total = 0;
        for sub in &self.subs {
            let n = sub.len() as u64;
            for b in [h.h1 % n, h.h2 % n] {
                total += sub[b as usize].iter().filter(|&&s| s == h.fp).count() as u64;
            }
        }
        total
    }

    fn check_expansions(&self) -> Result<(), CuckooError> {
        if self.subs.len() >= self.max_expansions {
            Err(CuckooError::MaxExpansions)
        } else {
            Ok(())
        }
    }

    pub fn add(&mut self, item: &[u8]) -> Result<(), CuckooError> {
        self.check_expansions()?;
        self.insert(item, &mut WALK_BUDGET.clone())
    }

    pub fn add_nx(&mut self, item: &[u8]) -> Result<bool, CuckooError> {
        self.check_expansions()?;
        if self.contains(item) {
            return Ok(false);
        }
        self.insert(item, &mut WALK_BUDGET.clone()).map(|()| true)
    }

    pub fn insert_many(
        &mut self,
        items: &[Vec<u8>],
        nx: bool,
    ) -> Result<Vec<Result<bool, CuckooError>>, CuckooError> {
        self.insert_many_within(items, nx, &mut WALK_BUDGET.clone())
    }

    /// A batch whose walks share `kicks` units of work (README: a swap costs a probe of the
    /// bucket size + 64, a failed walk twice its swaps; "an item whose walk could need more
    /// than the command has left is refused, and the command stops there").
    pub fn insert_many_within(
        &mut self,
        items: &[Vec<u8>],
        nx: bool,
        kicks: &mut u64,
    ) -> Result<Vec<Result<bool, CuckooError>>, CuckooError> {
        self.check_expansions()?;
        let mut out = Vec::new();
        for item in items {
            let r = if nx && self.contains(item) {
                Ok(false)
            } else {
                self.insert(item, kicks).map(|()| true)
            };
            let stop = matches!(&r, Err(e) if *e != CuckooError::Full);
            out.push(r);
            if stop {
                break;
            }
        }
        Ok(out)
    }

    fn insert(&mut self, item: &[u8], kicks: &mut u64) -> Result<(), CuckooError> {
        let h = hash(item);
        // The first empty slot of bucket h1, then h2, newest sub-filter to oldest.
        for sub in self.subs.iter_mut().rev() {
            let n = sub.len() as u64;
            if put_first_empty(&mut sub[(h.h1 % n) as usize], h.fp)
                || put_first_empty(&mut sub[(h.h2 % n) as usize], h.fp)
            {
                self.items += 1;
                return Ok(());
            }
        }
        // A walk in a sub-filter without an empty slot cannot succeed: the README says it
        // is not made, so it needs and spends no budget (the model still walks it, to check
        // that it fails and is undone).
        let newest_full = self
            .subs
            .last()
            .expect("a sub-filter")
            .iter()
            .all(|b| !b.contains(&0));
        let probe = self.bucket_size as u64 + 64;
        if !newest_full && *kicks < 2 * self.walk_limit() as u64 * probe {
            return Err(CuckooError::KickBudget);
        }
        let (placed, swaps) = self.evict(h);
        assert!(
            !(placed && newest_full),
            "a walk in a full sub-filter placed an item"
        );
        if !newest_full {
            *kicks -= if placed {
                swaps * probe
            } else {
                2 * swaps * probe
            };
        }
        if placed {
            self.items += 1;
            return Ok(());
        }
        if self.expansion == 0 {
            return Err(CuckooError::Full);
        }
        if let Err(e) = self.grow() {
            // README: an item refused for growth spends nothing of the budget.
            if !newest_full {
                *kicks += 2 * swaps * probe;
            }
            return Err(e);
        }
        let sub = self.subs.last_mut().expect("just grown");
        let n = sub.len() as u64;
        assert!(
            put_first_empty(&mut sub[(h.h1 % n) as usize], h.fp),
            "a new sub-filter is empty"
        );
        self.items += 1;
        Ok(())
    }

    /// A walk's swaps: `max_iterations`, or as many as the whole budget pays for with their
    /// undo (README, "Adds are bounded").
    fn walk_limit(&self) -> usize {
        let pays = WALK_BUDGET / (2 * (self.bucket_size as u64 + 64));
        self.max_iterations.min(pays as usize)
    }

    /// The eviction walk in the newest sub-filter, every swap logged; on failure the log is
    /// replayed backwards. Whether it placed the item, and the swaps it made (not counting
    /// the undo).
    fn evict(&mut self, h: Hashed) -> (bool, u64) {
        let bs = self.bucket_size;
        let limit = self.walk_limit();
        let sub = self.subs.last_mut().expect("a sub-filter");
        let n = sub.len() as u64;
        let mut bucket = h.h1 % n;
        let mut victim = 0;
        let mut hand = h.fp;
        let mut log = Vec::new();
        for _ in 0..limit {
            let evicted = sub[bucket as usize][victim];
            sub[bucket as usize][victim] = hand;
            log.push((bucket, victim));
            hand = evicted;
            bucket = other_bucket(bucket, hand, n);
            if put_first_empty(&mut sub[bucket as usize], hand) {
                return (true, log.len() as u64);
            }
            victim = (victim + 1) % bs;
        }
        for &(b, v) in log.iter().rev() {
            std::mem::swap(&mut hand, &mut sub[b as usize][v]);
        }
        assert_eq!(hand, h.fp, "the undo gives back the item's fingerprint");
        (false, log.len() as u64)
    }

    fn grow(&mut self) -> Result<(), CuckooError> {
        if self.subs.len() >= MAX_SUB_FILTERS {
            return Err(FilterError::TooManyLayers {
                limit: MAX_SUB_FILTERS,
            }
            .into());
        }
        let n = self.subs.last().expect("a sub-filter").len() as u64 * self.expansion;
        let mut lengths: Vec<u64> = self
            .subs
            .iter()
            .map(|s| (s.len() * self.bucket_size) as u64)
            .collect();
        lengths.push(n * self.bucket_size as u64);
        let needed = CuckooFilter::modelled_bytes(lengths.len(), lengths);
        if needed > self.max_bytes {
            return Err(FilterError::OverLimit {
                needed,
                limit: self.max_bytes,
            }
            .into());
        }
        self.subs.push(empty_sub(n, self.bucket_size));
        Ok(())
    }

    pub fn delete(&mut self, item: &[u8]) -> bool {
        let h = hash(item);
        let mut found = false;
        'subs: for sub in self.subs.iter_mut().rev() {
            let n = sub.len() as u64;
            for b in [h.h1 % n, h.h2 % n] {
                if let Some(slot) = sub[b as usize].iter().position(|&s| s == h.fp) {
                    sub[b as usize][slot] = 0;
                    found = true;
                    break 'subs;
                }
            }
        }
        if !found {
            return false;
        }
        self.items -= 1;
        self.deletes += 1;
        if self.subs.len() > 1 && self.deletes as f64 > 0.1 * self.items as f64 {
            self.compact(false);
        }
        true
    }

    /// Compaction; `past_full` (`CF.COMPACT`) goes on past a sub-filter it cannot empty.
    pub fn compact(&mut self, past_full: bool) {
        let bs = self.bucket_size;
        let mut i = self.subs.len() - 1;
        while i >= 1 {
            let n = self.subs[i].len() as u64;
            let mut emptied = true;
            for b in 0..n {
                for slot in 0..bs {
                    let fp = self.subs[i][b as usize][slot];
                    if fp == 0 {
                        continue;
                    }
                    let alt = b ^ (u64::from(fp) * MULTIPLIER);
                    let mut moved = false;
                    for j in 0..i {
                        let m = self.subs[j].len() as u64;
                        if put_first_empty(&mut self.subs[j][(b % m) as usize], fp)
                            || put_first_empty(&mut self.subs[j][(alt % m) as usize], fp)
                        {
                            moved = true;
                            break;
                        }
                    }
                    if moved {
                        self.subs[i][b as usize][slot] = 0;
                    } else {
                        emptied = false;
                    }
                }
            }
            if emptied && i == self.subs.len() - 1 {
                self.subs.pop();
            } else if !emptied && !past_full {
                break;
            }
            i -= 1;
        }
        self.deletes = 0;
    }
}

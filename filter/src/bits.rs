//! Counting set bits of whole bit arrays, which loading does for every byte it reads.
//!
//! The crate is built for baseline x86-64, whose `count_ones` is a sequence of shifts and
//! masks; on a CPU with the POPCNT instruction (every x86-64 CPU since about 2008) the count
//! runs eight bytes per instruction, chosen once at run time.

/// The number of bits set in `bytes`.
pub fn count_ones(bytes: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has just been seen to support POPCNT.
        return unsafe { count_ones_popcnt(bytes) };
    }
    count_ones_words(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn count_ones_popcnt(bytes: &[u8]) -> u64 {
    count_ones_words(bytes)
}

#[inline(always)]
fn count_ones_words(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut total: u64 = 0;
    for w in &mut words {
        let word = u64::from_le_bytes(w.try_into().expect("chunks of eight bytes"));
        total += u64::from(word.count_ones());
    }
    total
        + words
            .remainder()
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum::<u64>()
}

/// ORs `data` into `target` (of the same length) and returns how many bits it set that were
/// clear. Words of `data` that are zero are neither read against nor written: a chunk of zeros
/// leaves a lazily zeroed array's untouched pages untouched.
pub fn or_into(target: &mut [u8], data: &[u8]) -> u64 {
    debug_assert_eq!(target.len(), data.len());
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has just been seen to support POPCNT.
        return unsafe { or_into_popcnt(target, data) };
    }
    or_into_words(target, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn or_into_popcnt(target: &mut [u8], data: &[u8]) -> u64 {
    or_into_words(target, data)
}

#[inline(always)]
fn or_into_words(target: &mut [u8], data: &[u8]) -> u64 {
    let mut set = 0u64;
    let mut t_words = target.chunks_exact_mut(8);
    let mut d_words = data.chunks_exact(8);
    for (t, d) in (&mut t_words).zip(&mut d_words) {
        let d = u64::from_le_bytes(d.try_into().expect("chunks of eight bytes"));
        if d == 0 {
            continue;
        }
        let old = u64::from_le_bytes((&*t).try_into().expect("chunks of eight bytes"));
        let new_bits = d & !old;
        if new_bits != 0 {
            set += u64::from(new_bits.count_ones());
            t.copy_from_slice(&(old | d).to_le_bytes());
        }
    }
    for (t, d) in t_words.into_remainder().iter_mut().zip(d_words.remainder()) {
        // Zero bytes are not written either: a run's tail must not fault in a page it sets
        // nothing in.
        if *d != 0 {
            set += u64::from((d & !*t).count_ones());
            *t |= d;
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_into_sets_the_union_and_counts_only_new_bits() {
        let a: Vec<u8> = (0..203u32)
            .map(|i| (i.wrapping_mul(53) >> 2) as u8)
            .collect();
        let b: Vec<u8> = (0..203u32)
            .map(|i| {
                if i % 16 < 8 {
                    0
                } else {
                    (i.wrapping_mul(29) ^ 0x5a) as u8
                }
            })
            .collect();
        for start in 0..9 {
            let mut t = a[start..].to_vec();
            let d = &b[start..];
            let expected_new: u64 = t
                .iter()
                .zip(d)
                .map(|(t, d)| u64::from((d & !t).count_ones()))
                .sum();
            let union: Vec<u8> = t.iter().zip(d).map(|(t, d)| t | d).collect();
            assert_eq!(or_into(&mut t, d), expected_new, "from {start}");
            assert_eq!(t, union, "from {start}");
        }
    }

    #[test]
    fn counts_every_length_and_alignment() {
        let data: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(37) ^ (i >> 3)) as u8)
            .collect();
        for start in 0..9 {
            for end in (start..data.len()).step_by(7) {
                let slice = &data[start..end];
                let expected: u64 = slice.iter().map(|b| u64::from(b.count_ones())).sum();
                assert_eq!(count_ones(slice), expected, "bytes {start}..{end}");
            }
        }
        assert_eq!(count_ones(&[]), 0);
        assert_eq!(count_ones(&[0xff; 1000]), 8000);
    }
}

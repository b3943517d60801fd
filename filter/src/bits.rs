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

#[cfg(test)]
mod tests {
    use super::*;

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

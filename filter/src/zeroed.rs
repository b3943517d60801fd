//! Zeroed bit arrays whose cost does not depend on their size.
//!
//! A new layer is all zeros. Writing those zeros (what `Vec::resize` does) touches every page:
//! a 3 GB filter cost seconds of the server's only thread and 3 GB of resident memory before
//! its first item. The allocator's `alloc_zeroed` instead returns memory that reads as zero
//! without being written (calloc's fresh pages; the module allocator discards large ranges),
//! so pages become resident only as bits are set in them.

use crate::error::FilterError;

/// Types for which the all-zero byte pattern is a valid value.
///
/// # Safety
/// Implementors must be plain data whose every field is valid when all its bytes are zero.
pub(crate) unsafe trait Zeroable: Sized {}

// SAFETY: zero is a valid `u8`.
unsafe impl Zeroable for u8 {}

/// A vector of `len` zero values, or an error when the allocator refuses the memory.
pub(crate) fn try_zeroed_vec<T: Zeroable>(len: u64) -> Result<Vec<T>, FilterError> {
    let bytes = len.saturating_mul(std::mem::size_of::<T>() as u64);
    let oom = FilterError::OutOfMemory { bytes };
    let n = usize::try_from(len).map_err(|_| oom.clone())?;
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| oom.clone())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(oom);
    }
    // SAFETY: `ptr` was allocated by the global allocator with exactly the layout a
    // `Vec<T>` of capacity `n` frees with (`Layout::array::<T>(n)`: same size, T's
    // alignment); its `n` elements are initialised, as all-zero bytes are a valid `T`
    // (`Zeroable`).
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::blocked::Block;

    #[test]
    fn zeroed_vectors_have_exactly_the_asked_length_and_only_zeros() {
        for len in [0u64, 1, 7, 4096, 100_000] {
            let v = try_zeroed_vec::<u8>(len).unwrap();
            assert_eq!((v.len() as u64, v.capacity() as u64), (len, len));
            assert!(v.iter().all(|&b| b == 0));
            let b = try_zeroed_vec::<Block>(len).unwrap();
            assert_eq!((b.len() as u64, b.capacity() as u64), (len, len));
            assert!(b.iter().all(|x| *x == Block::default()));
            assert_eq!(b.as_ptr() as usize % 64, 0);
        }
    }

    #[test]
    fn an_impossible_size_is_an_error_not_an_abort() {
        assert!(matches!(
            try_zeroed_vec::<Block>(u64::MAX / 64),
            Err(FilterError::OutOfMemory { .. })
        ));
        assert!(matches!(
            try_zeroed_vec::<u8>(isize::MAX as u64 - 4096),
            Err(FilterError::OutOfMemory { .. })
        ));
    }

    /// A 1 GiB zeroed array is only address space until written: allocating it writes
    /// nothing, and a page written later reads back.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_huge_zeroed_array_costs_no_resident_memory() {
        let rss = || -> u64 {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
            statm
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
                * 4096
        };
        let before = rss();
        let len = 1u64 << 30; // 1 GiB
        let mut v = try_zeroed_vec::<u8>(len).unwrap();
        assert!(
            rss() - before < 64 << 20,
            "a zeroed 1 GiB array became resident"
        );
        v[12345] = 1;
        assert_eq!(v[12345], 1);
        assert_eq!(v[len as usize - 1], 0);
    }
}

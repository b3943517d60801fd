//! Vectors that grow only as asked and report a refused allocation as an error: the
//! server's allocator must never abort the process on a client's say-so.

use crate::error::FilterError;

/// An empty vector with room for exactly `n` elements, or the allocation failure as an error.
pub(crate) fn try_vec<T>(n: usize) -> Result<Vec<T>, FilterError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| FilterError::OutOfMemory {
            bytes: (n * std::mem::size_of::<T>()) as u64,
        })?;
    Ok(v)
}

/// Pushes onto a vector whose growth is exact and fallible.
pub(crate) fn try_push<T>(v: &mut Vec<T>, item: T) -> Result<(), FilterError> {
    v.try_reserve_exact(1)
        .map_err(|_| FilterError::OutOfMemory {
            bytes: std::mem::size_of::<T>() as u64,
        })?;
    v.push(item);
    Ok(())
}

/// The first room reserved for a layer being loaded (never past the layer's size): layers up
/// to this size are read without a reallocation, larger ones then grow fourfold. Every
/// reallocation copies what was read (measured: loading 0.95 GiB layers took 1.1-2.4 s/GiB
/// growing twofold from 64 MiB, 0.43 s/GiB reserved whole), while room reserved and not yet
/// written is address space that nothing touches: a header claiming more than its data gets at
/// most this much, or four times the data read, and gives it back when the load fails.
const FIRST_RESERVATION_BYTES: usize = 256 << 20;

/// Reserves room for `needed` elements, growing as `FIRST_RESERVATION_BYTES` says but never
/// past `total`.
pub(crate) fn grow_toward<T>(
    v: &mut Vec<T>,
    needed: usize,
    total: usize,
) -> Result<(), FilterError> {
    if needed > v.capacity() {
        let first = FIRST_RESERVATION_BYTES / std::mem::size_of::<T>();
        let target = needed
            .max(v.capacity().saturating_mul(4))
            .max(first)
            .min(total);
        v.try_reserve_exact(target - v.len())
            .map_err(|_| FilterError::OutOfMemory {
                bytes: (target * std::mem::size_of::<T>()) as u64,
            })?;
    }
    Ok(())
}

//! What a filter's allocations really cost, by a deterministic model of the allocator.
//!
//! Allocators hand out memory in size classes, and the module's allocator pads every request
//! aligned above 8 bytes by its alignment (Redis guarantees 8; blocks want 64) unless it is
//! large enough to come page-aligned. Counting the requested bytes undercounts: a one-block
//! layer asks for 64 bytes and takes 128. The memory limit, `INFO bf`
//! `bf_bytes` and `BF.INFO` `Size` count this model, not the allocator's answer at run time:
//! the same filter then has the same figure on every server, its copies and its replicas.
//!
//! The classes are jemalloc's (Redis's default allocator) with a 16-byte quantum: 8, then
//! multiples of 16 up to 128, then four classes per doubling. They are at least the classes
//! of jemalloc built with an 8-byte quantum (the official Redis builds) and, for anything past
//! a few hundred bytes, at least what glibc's malloc (Valkey's default build) reserves.

/// The alignment every allocation of the server's allocator has; stricter ones are padded.
pub const GUARANTEED_ALIGN: u64 = 8;

/// The size class a request of `size` bytes lands in (0 for nothing).
pub fn size_class(size: u64) -> u64 {
    match size {
        0 => 0,
        1..=8 => 8,
        9..=128 => size.next_multiple_of(16),
        _ => {
            // Four classes between 2^(k-1) and 2^k: spacing 2^(k-3).
            let k = 64 - (size - 1).leading_zeros();
            if k >= 63 {
                return u64::MAX;
            }
            size.div_ceil(1 << (k - 3)).saturating_mul(1 << (k - 3))
        }
    }
}

/// Over-aligned requests at least this large are served unpadded where the allocator aligns
/// them itself (jemalloc's large classes are page-aligned); the module's allocator
/// (`src/alloc.rs`) uses the same bound.
pub const UNPADDED_FROM: u64 = 16 << 10;

/// Bytes an allocation of `size` bytes aligned to `align` takes through the module's
/// allocator: small over-aligned requests carry their alignment as padding, large ones do not
/// (under glibc's malloc, which aligns them to 16 only, they are padded after all: a few
/// bytes more than counted, against a model that rounds up to jemalloc's classes).
pub fn allocation(size: u64, align: u64) -> u64 {
    if size == 0 {
        return 0;
    }
    let padding = if align > GUARANTEED_ALIGN && size < UNPADDED_FROM {
        align
    } else {
        0
    };
    size_class(size.saturating_add(padding))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_jemallocs() {
        let cases = [
            (1, 8),
            (8, 8),
            (9, 16),
            (24, 32),
            (72, 80),
            (128, 128),
            (129, 160),
            (200, 224),
            (256, 256),
            (257, 320),
            (4097, 5120),
            (16 << 10, 16 << 10),
            ((16 << 10) + 1, 20 << 10),
        ];
        for (size, class) in cases {
            assert_eq!(size_class(size), class, "{size}");
        }
        assert_eq!(size_class(2 << 30), 2 << 30);
        assert_eq!(size_class((2 << 30) + 64), (5 << 30) / 2);
        assert_eq!(size_class(u64::MAX), u64::MAX);
    }

    #[test]
    fn over_aligned_requests_pay_their_padding() {
        assert_eq!(allocation(64, 64), 128);
        assert_eq!(allocation(64, 8), 64);
        assert_eq!(allocation(0, 64), 0);
        // A 2 GiB bit array stays in its class: large ones are not padded.
        assert_eq!(allocation(2 << 30, 64), 2 << 30);
        assert_eq!(allocation(UNPADDED_FROM - 64, 64), UNPADDED_FROM);
    }

    #[test]
    fn every_class_is_at_least_its_request_and_classes_only_grow() {
        let mut last = 0;
        for size in 1..100_000u64 {
            let c = size_class(size);
            assert!(c >= size && c >= last, "{size}");
            last = c;
        }
    }
}

//! The module's global allocator: Redis's `RedisModule_TryAlloc`, so memory is counted in
//! `used_memory` like Redis's own, and a failed allocation is reported (a `try_reserve`
//! error) instead of aborting the server as `RedisModule_Alloc` would.
//!
//! Redis has no aligned allocation call. Requests aligned to 16 bytes or less are served
//! directly (Redis's allocators return 16-byte aligned memory for them); stricter ones (the
//! filter's 64-byte blocks) over-allocate by the alignment and keep the raw pointer in the
//! 8 bytes before the aligned one.

// Unit tests run on the system allocator; only `allocated_size` is used there.
#![cfg_attr(test, allow(dead_code))]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use redis_module::raw;

/// Alignment every Redis allocation already has.
const NATURAL_ALIGN: usize = 16;

/// The allocator registered with `redis_module!`.
pub struct ModuleAlloc;

fn try_alloc(size: usize) -> *mut u8 {
    // SAFETY: the function pointers are set by RedisModule_Init before any module code runs
    // and never change afterwards; TryAlloc accepts any size and returns null on failure.
    unsafe {
        match raw::RedisModule_TryAlloc {
            Some(alloc) => alloc(size).cast(),
            None => std::ptr::null_mut(),
        }
    }
}

fn free(ptr: *mut u8) {
    // SAFETY: `ptr` came from `try_alloc`, whose memory Redis's allocator owns.
    unsafe {
        if let Some(free) = raw::RedisModule_Free {
            free(ptr.cast::<c_void>());
        }
    }
}

unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= NATURAL_ALIGN {
            // A size of at least the alignment puts the request in a size class that is
            // aligned to it.
            return try_alloc(layout.size().max(layout.align()));
        }
        let Some(total) = layout.size().checked_add(layout.align()) else {
            return std::ptr::null_mut();
        };
        let raw_ptr = try_alloc(total);
        if raw_ptr.is_null() {
            return raw_ptr;
        }
        // `raw_ptr` is at least 8-aligned, so rounding `raw_ptr + 8` up to the alignment stays
        // within `raw_ptr + align` and leaves room for the raw pointer just before it.
        let aligned =
            ((raw_ptr as usize + 8 + layout.align() - 1) & !(layout.align() - 1)) as *mut u8;
        // SAFETY: `aligned - 8 >= raw_ptr` and `aligned + size <= raw_ptr + total`; the slot is
        // 8-aligned because `aligned` is.
        unsafe { aligned.cast::<*mut u8>().sub(1).write(raw_ptr) };
        aligned
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.align() <= NATURAL_ALIGN {
            free(ptr);
        } else {
            // SAFETY: `alloc` stored the raw pointer in the 8 bytes before `ptr`.
            free(unsafe { ptr.cast::<*mut u8>().sub(1).read() });
        }
    }
}

/// The bytes the allocator really reserved for an allocation made through `ModuleAlloc` with
/// alignment `align` (its size class, plus the alignment padding of over-aligned ones), or
/// `None` when Redis's allocator is not available (unit tests).
///
/// # Safety
/// `ptr` must be a live allocation made by `ModuleAlloc` with alignment `align`.
pub unsafe fn allocated_size(ptr: *const u8, align: usize) -> Option<usize> {
    // SAFETY: see the function's contract.
    unsafe {
        let size = raw::RedisModule_MallocSize?;
        let raw_ptr = if align <= NATURAL_ALIGN {
            ptr.cast_mut()
        } else {
            ptr.cast::<*mut u8>().sub(1).read()
        };
        Some(size(raw_ptr.cast::<c_void>()))
    }
}

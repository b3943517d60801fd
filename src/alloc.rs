//! The module's global allocator: Redis's `RedisModule_TryAlloc`, so memory is counted in
//! `used_memory` like Redis's own, and a failed allocation is reported (a `try_reserve`
//! error) instead of aborting the server as `RedisModule_Alloc` would.
//!
//! Redis promises 8-byte alignment and nothing more: the official builds (vendored jemalloc,
//! 8-byte quantum) return a 24-, 40- or 56-byte request 8-aligned, and SSE code on such memory
//! (hashbrown's tables want 16) crashes the server. Requests aligned to 8 bytes or less are
//! served directly; every stricter one (16-byte tables, the filter's 64-byte blocks)
//! over-allocates by its alignment and keeps the raw pointer in the 8 bytes before the
//! aligned one.

// Unit tests run on the system allocator; only `allocated_size` is used there.
#![cfg_attr(test, allow(dead_code))]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::raw_api;

/// The only alignment every allocation of the server's allocator is guaranteed to have.
const GUARANTEED_ALIGN: usize = 8;

/// What the aligning layer needs of the memory underneath it.
pub trait RawAlloc {
    /// `size` bytes, at least [`GUARANTEED_ALIGN`]-aligned, or null on failure.
    fn alloc(&self, size: usize) -> *mut u8;
    /// Frees what [`RawAlloc::alloc`] returned.
    ///
    /// # Safety
    /// `ptr` came from `alloc` of the same allocator and is freed once.
    unsafe fn free(&self, ptr: *mut u8);
    /// The bytes the block at `ptr` may use (its size class), where the allocator says.
    ///
    /// # Safety
    /// `ptr` came from `alloc` of the same allocator and is live.
    unsafe fn usable_size(&self, _ptr: *mut u8) -> Option<usize> {
        None
    }
}

/// Redis's allocator, through the module API.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedisAlloc;

impl RawAlloc for RedisAlloc {
    fn alloc(&self, size: usize) -> *mut u8 {
        raw_api::try_alloc(size)
    }

    unsafe fn free(&self, ptr: *mut u8) {
        // SAFETY: `ptr` came from `alloc`, whose memory Redis's allocator owns, and is freed
        // once (the trait's contract).
        unsafe { raw_api::free(ptr.cast::<c_void>()) }
    }

    unsafe fn usable_size(&self, ptr: *mut u8) -> Option<usize> {
        // SAFETY: `ptr` came from `alloc` and is live (the trait's contract).
        unsafe { raw_api::malloc_usable_size(ptr.cast::<c_void>()) }
    }
}

/// The allocator registered with `redis_module!`: any alignment over a [`RawAlloc`] that
/// guarantees only 8.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModuleAlloc<A = RedisAlloc>(pub A);

/// Whether an allocation of this alignment needs more than the server's allocator promises.
fn over_aligned(align: usize) -> bool {
    align > GUARANTEED_ALIGN
}

/// Over-aligned requests at least this large are first asked for unpadded: jemalloc serves
/// them from page-aligned extents (its large classes start at four pages), so a layer's bit
/// array usually needs no padding, and padding by the alignment would push a request just
/// at a size class (2 GiB) into the next one (2.5 GiB). `footprint::allocation` models this.
pub const DIRECT_MIN_BYTES: usize = layerbloom_filter::footprint::UNPADDED_FROM as usize;

/// Slots of the table of live unpadded allocations (a power of two), and how far from its
/// home slot a pointer may be placed. A pointer that finds no free slot within reach is
/// padded instead (correct, only larger), so the table never needs to grow.
const DIRECT_SLOTS: usize = 1 << 14;
const DIRECT_PROBES: usize = 32;

/// A slot whose pointer was freed; lookups go past it, inserts reuse it. Slots never return
/// to empty (0), so a lookup that meets an empty slot knows its pointer is not further on.
const FREED: usize = 1;

/// The live unpadded over-aligned allocations: an open-addressed set of pointers, lock-free so
/// that the allocator never allocates or blocks to keep it (the lazy-free thread frees too).
static DIRECT: [AtomicUsize; DIRECT_SLOTS] = [const { AtomicUsize::new(0) }; DIRECT_SLOTS];

/// The slots `ptr` may occupy, in probe order.
fn probe(ptr: *const u8) -> impl Iterator<Item = &'static AtomicUsize> {
    // Fibonacci hashing of the page number: large blocks are page-aligned.
    let home = ((ptr as u64 >> 12).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        >> (64 - DIRECT_SLOTS.trailing_zeros())) as usize;
    (0..DIRECT_PROBES).map(move |i| &DIRECT[(home + i) & (DIRECT_SLOTS - 1)])
}

/// Records `ptr` as an unpadded allocation; `false` when no slot within reach is free.
fn register_direct(ptr: *mut u8) -> bool {
    probe(ptr).any(|slot| {
        let current = slot.load(Ordering::Acquire);
        (current == 0 || current == FREED)
            && slot
                .compare_exchange(current, ptr as usize, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    })
}

/// Forgets `ptr` if it was recorded as unpadded; whether it was.
fn unregister_direct(ptr: *const u8) -> bool {
    for slot in probe(ptr) {
        match slot.load(Ordering::Acquire) {
            0 => return false,
            p if p == ptr as usize => {
                return slot
                    .compare_exchange(p, FREED, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            }
            _ => {}
        }
    }
    false
}

/// Whether `ptr` is a live unpadded allocation.
fn is_direct(ptr: *const u8) -> bool {
    for slot in probe(ptr) {
        match slot.load(Ordering::Acquire) {
            0 => return false,
            p if p == ptr as usize => return true,
            _ => {}
        }
    }
    false
}

unsafe impl<A: RawAlloc> GlobalAlloc for ModuleAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !over_aligned(layout.align()) {
            return self.0.alloc(layout.size());
        }
        if layout.size() >= DIRECT_MIN_BYTES {
            let ptr = self.0.alloc(layout.size());
            if ptr.is_null() {
                return ptr;
            }
            if (ptr as usize).is_multiple_of(layout.align()) && register_direct(ptr) {
                return ptr;
            }
            // SAFETY: allocated just above and not handed out.
            unsafe { self.0.free(ptr) };
        }
        let Some(total) = layout.size().checked_add(layout.align()) else {
            return std::ptr::null_mut();
        };
        let raw_ptr = self.0.alloc(total);
        if raw_ptr.is_null() {
            return raw_ptr;
        }
        // `raw_ptr` is at least 8-aligned, so rounding `raw_ptr + 8` up to the alignment (a
        // power of two of at least 16) stays within `raw_ptr + align` and leaves room for the
        // raw pointer just before it.
        let offset = (raw_ptr as usize + GUARANTEED_ALIGN).next_multiple_of(layout.align())
            - raw_ptr as usize;
        // SAFETY: `GUARANTEED_ALIGN <= offset <= align`, so `aligned - 8 >= raw_ptr` and
        // `aligned + size <= raw_ptr + total`; the slot is 8-aligned because `aligned` is.
        unsafe {
            let aligned = raw_ptr.add(offset);
            aligned.cast::<*mut u8>().sub(1).write(raw_ptr);
            aligned
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout has a non-zero size, as `alloc` requires.
        let ptr = unsafe { self.alloc(layout) };
        if ptr.is_null() {
            return ptr;
        }
        let mut len = layout.size();
        // A block that starts at `ptr` (not padded for alignment) is ours to its size class's
        // end: zeroing to there leaves no partial last page to write, which faulted one page
        // in per piece (1024 pieces of 1,048,512 bytes: 1024 page faults, most of a header's
        // cost once the rest was discarded). The discard's threshold applies to the asked
        // size only.
        let unpadded =
            !over_aligned(layout.align()) || (layout.size() >= DIRECT_MIN_BYTES && is_direct(ptr));
        if unpadded && len >= DISCARD_BYTES {
            // SAFETY: `ptr` was just returned by the raw allocator itself (unpadded).
            if let Some(usable) = unsafe { self.0.usable_size(ptr) } {
                len = len.max(usable);
            }
        }
        // SAFETY: `ptr` is a fresh allocation of at least `len` bytes.
        unsafe { zero(ptr, len) };
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by `alloc` with this layout: as it is when it was not
        // over-aligned or was recorded as unpadded, otherwise with its raw pointer stored in
        // the 8 bytes before it.
        unsafe {
            let unpadded = !over_aligned(layout.align())
                || (layout.size() >= DIRECT_MIN_BYTES && unregister_direct(ptr));
            if unpadded {
                self.0.free(ptr);
            } else {
                self.0.free(ptr.cast::<*mut u8>().sub(1).read());
            }
        }
    }
}

/// Blocks at least this large are never offered to active defragmentation. jemalloc packs
/// only its small size classes into slabs (which fragment, and which alone its defrag hint
/// covers): up to 14 KiB with 4 KiB pages, up to 224 KiB with the 64 KiB pages some builds
/// use (the official Redis 7.4.1 binary here has them); larger blocks are whole page runs.
pub const DEFRAG_MAX_BYTES: usize = 256 << 10;

/// Moves a block that `ModuleAlloc` returned for `layout` (active defragmentation): `mover`
/// is offered the block of the underlying allocator (for an over-aligned block, the padded
/// block before it) and returns where it moved it, its bytes all copied and the old block
/// freed, or null when it did not move it. Returns the block's new address (with the same
/// alignment, contents and the bookkeeping `dealloc` reads), or null when it did not move.
/// Blocks of `DEFRAG_MAX_BYTES` or more are not offered, nor unpadded over-aligned ones
/// (`DIRECT_MIN_BYTES` and up, aligned by the allocator itself), whose alignment a move would
/// not keep.
///
/// # Safety
/// `block` is a live allocation of `ModuleAlloc` for `layout`; `mover` keeps its promise
/// (every byte of the raw block copied, the old one freed, or null and nothing done).
pub unsafe fn relocate(
    block: *mut u8,
    layout: Layout,
    mover: impl FnOnce(*mut u8) -> *mut u8,
) -> *mut u8 {
    if layout.size() >= DEFRAG_MAX_BYTES {
        return std::ptr::null_mut();
    }
    if !over_aligned(layout.align()) {
        return mover(block);
    }
    if layout.size() >= DIRECT_MIN_BYTES && is_direct(block) {
        return std::ptr::null_mut();
    }
    // SAFETY: an over-aligned block not recorded as unpadded is padded (see `alloc`): its raw
    // pointer is in the 8 bytes before it, and the block lies `old_offset` bytes into
    // a raw block of `size + align` bytes, which the mover copies whole to `new_raw`. The new
    // offset, computed as `alloc` computes it, is within `8..=align` too, so both the bytes
    // copied to the new offset and the raw pointer written before it stay inside the new raw
    // block; `ptr::copy` allows the overlap.
    unsafe {
        let raw_ptr = block.cast::<*mut u8>().sub(1).read();
        let old_offset = block as usize - raw_ptr as usize;
        let new_raw = mover(raw_ptr);
        if new_raw.is_null() {
            return new_raw;
        }
        let new_offset = (new_raw as usize + GUARANTEED_ALIGN).next_multiple_of(layout.align())
            - new_raw as usize;
        let aligned = new_raw.add(new_offset);
        if new_offset != old_offset {
            std::ptr::copy(new_raw.add(old_offset), aligned, layout.size());
        }
        aligned.cast::<*mut u8>().sub(1).write(new_raw);
        aligned
    }
}

/// Zeroing at least this much (four pages) discards the whole pages instead of writing them.
/// Not more: a filter's pieces (layers, sub-filters, slices' layers) may each be just under
/// any larger threshold, and 1024 of them just under 1 MiB were 1 GB written and resident for
/// one 38-byte header. Below it a piece writes at most 16 KiB, against one system call.
const DISCARD_BYTES: usize = 16 << 10;

/// Zeroes `len` bytes at `ptr` without making untouched pages resident.
///
/// Redis's allocator has no calloc before Redis 7.4 (`RedisModule_TryCalloc`), and writing
/// zeros over a filter of gigabytes took seconds of the server's thread and made all of it
/// resident at once. Large ranges are therefore zeroed by the kernel instead: after
/// `MADV_DONTNEED`, private anonymous memory (every allocator's heap and large mappings)
/// reads back as zero-filled pages faulted in on first touch, and pages never touched cost
/// nothing at all. Only the partial pages at the ends are written. Elsewhere, or if the kernel
/// refuses, the bytes are written.
///
/// # Safety
/// `ptr..ptr + len` is memory this allocator handed out and nobody else uses.
unsafe fn zero(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= DISCARD_BYTES {
        let page = page_size();
        let start = ptr as usize;
        let first = start.next_multiple_of(page);
        let last = (start + len) / page * page;
        if last > first {
            // SAFETY: `first..last` holds whole pages inside the allocation (the caller's
            // range), so no other allocation shares them; MADV_DONTNEED only replaces their
            // contents with zeros.
            let discarded = unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_DONTNEED,
                )
            } == 0;
            if discarded {
                // SAFETY: the two partial ends lie inside the caller's range.
                unsafe {
                    zero_unless_zero(ptr, first - start);
                    zero_unless_zero(last as *mut u8, start + len - last);
                }
                return;
            }
        }
    }
    // SAFETY: the caller's range.
    unsafe { std::ptr::write_bytes(ptr, 0, len) };
}

/// Zeroes `len` bytes at `ptr` (within one page: a discarded range's partial end) unless they
/// already read as zero. A block's partial first and last pages are most often pages never
/// touched (jemalloc builds with cache-oblivious placement, Debian's among them, start a large
/// block at a random cache line of a fresh page, and end it inside another): reading one maps
/// the kernel's shared zero page, where writing faulted in, cleared and charged a page of its
/// own, twice per piece (1024 pieces: 12-16 ms of a header's cost, and 8 MiB resident).
///
/// # Safety
/// `ptr..ptr + len` is memory this allocator handed out and nobody else uses.
#[cfg(target_os = "linux")]
unsafe fn zero_unless_zero(ptr: *mut u8, len: usize) {
    // Volatile reads: the bytes are read as they are, whatever the compiler assumes of fresh
    // memory (they come from an opaque allocator call, any value possible). Eight bytes at a
    // time from the first 8-aligned address, the odd ones byte by byte.
    let head = ((ptr as usize).next_multiple_of(8) - ptr as usize).min(len);
    let words = (len - head) / 8;
    // SAFETY: every read lies in the caller's range: `head` bytes, then `words` aligned words,
    // then the rest.
    let dirty = unsafe {
        (0..head).any(|i| std::ptr::read_volatile(ptr.add(i)) != 0)
            || (0..words).any(|w| std::ptr::read_volatile(ptr.add(head).cast::<u64>().add(w)) != 0)
            || (head + words * 8..len).any(|i| std::ptr::read_volatile(ptr.add(i)) != 0)
    };
    if dirty {
        // SAFETY: the caller's range.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
    }
}

/// The kernel's page size.
#[cfg(target_os = "linux")]
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| s.is_power_of_two())
        .unwrap_or(4096)
}

/// The bytes the allocator really reserved for an allocation made through `ModuleAlloc` with
/// alignment `align` (its size class, plus the alignment padding of over-aligned ones), or
/// `None` when Redis's allocator is not available (unit tests).
///
/// # Safety
/// `ptr` must be a live allocation made by `ModuleAlloc` with alignment `align`.
pub unsafe fn allocated_size(ptr: *const u8, align: usize) -> Option<usize> {
    // SAFETY: see the function's contract: a padded over-aligned allocation keeps the
    // allocator's own pointer in the 8 bytes before `ptr`, any other is the allocator's.
    unsafe {
        let raw_ptr = if over_aligned(align) && !is_direct(ptr) {
            ptr.cast::<*mut u8>().sub(1).read()
        } else {
            ptr.cast_mut()
        };
        raw_api::malloc_size(raw_ptr.cast::<c_void>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// An allocator as the official Redis builds behave: every block 8-aligned and never
    /// 16-aligned (the worst case a quantum of 8 allows), sizes as asked.
    #[derive(Default)]
    struct EightAligned {
        live: RefCell<HashMap<usize, Layout>>,
    }

    impl RawAlloc for &EightAligned {
        fn alloc(&self, size: usize) -> *mut u8 {
            let layout = Layout::from_size_align(size + 8, 16).unwrap();
            // SAFETY: the layout has a non-zero size.
            let base = unsafe { std::alloc::alloc(layout) };
            assert!(!base.is_null());
            // SAFETY: `base + 8` is within the allocation of `size + 8` bytes.
            let ptr = unsafe { base.add(8) };
            self.live.borrow_mut().insert(ptr as usize, layout);
            ptr
        }

        unsafe fn free(&self, ptr: *mut u8) {
            let layout = self
                .live
                .borrow_mut()
                .remove(&(ptr as usize))
                .expect("freed a pointer that was not allocated, or twice");
            // SAFETY: allocated above with this layout at `ptr - 8`.
            unsafe { std::alloc::dealloc(ptr.sub(8), layout) };
        }
    }

    /// jemalloc as it serves large requests: page-aligned blocks from four pages up (smaller
    /// ones 8-aligned only); records each block's size as asked.
    #[derive(Default)]
    struct PageAlignedLarge {
        live: RefCell<HashMap<usize, (Layout, usize, usize)>>,
    }

    impl RawAlloc for &PageAlignedLarge {
        fn alloc(&self, size: usize) -> *mut u8 {
            let (align, offset) = if size >= 4 * 4096 { (4096, 0) } else { (16, 8) };
            let layout = Layout::from_size_align(size + offset, align).unwrap();
            // SAFETY: the layout has a non-zero size.
            let base = unsafe { std::alloc::alloc(layout) };
            assert!(!base.is_null());
            // SAFETY: within the allocation.
            let ptr = unsafe { base.add(offset) };
            self.live
                .borrow_mut()
                .insert(ptr as usize, (layout, offset, size));
            ptr
        }

        unsafe fn free(&self, ptr: *mut u8) {
            let (layout, offset, _) = self
                .live
                .borrow_mut()
                .remove(&(ptr as usize))
                .expect("freed a pointer that was not allocated, or twice");
            // SAFETY: allocated above with this layout at `ptr - offset`.
            unsafe { std::alloc::dealloc(ptr.sub(offset), layout) };
        }
    }

    /// What Redis's `DefragAlloc` does with a raw block: a new block of the same size, every
    /// byte copied, the old one freed. Above 16-byte alignment this one insists on a new block
    /// whose padding differs (the raw blocks are only 8-aligned, never 16-aligned, so at 16
    /// the padding is always 8), so the realignment is exercised every time.
    fn defrag_alloc(raw: &EightAligned, align: usize, old: *mut u8) -> *mut u8 {
        let size = raw.live.borrow()[&(old as usize)].size() - 8;
        let offset = |p: *mut u8| (p as usize + 8).next_multiple_of(align) - p as usize;
        let mut spare = Vec::new();
        let new = loop {
            let p = (&raw).alloc(size);
            if align <= 16 || offset(p) != offset(old) {
                break p;
            }
            spare.push(p);
            assert!(spare.len() < 1000, "no block of another padding");
        };
        // SAFETY: both blocks are live and `size` bytes long; each spare and the old block
        // are freed once.
        unsafe {
            std::ptr::copy_nonoverlapping(old, new, size);
            for p in spare {
                (&raw).free(p);
            }
            (&raw).free(old);
        }
        new
    }

    #[test]
    fn defragmentation_moves_small_blocks_keeping_alignment_contents_and_padding() {
        let raw = EightAligned::default();
        let alloc = ModuleAlloc(&raw);
        for (size, align) in [
            (24, 8),
            (100, 16),
            (1000, 64),
            (DIRECT_MIN_BYTES + 64, 64),
            (DEFRAG_MAX_BYTES - 64, 64),
        ] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: non-zero sizes; every block is live while moved and freed once with its
            // layout, at the address the last move returned.
            unsafe {
                let mut p = alloc.alloc(layout);
                for i in 0..size {
                    p.add(i).write(i as u8);
                }
                for _ in 0..3 {
                    let moved = relocate(p, layout, |b| defrag_alloc(&raw, align.max(8), b));
                    assert!(!moved.is_null() && moved != p, "size {size}");
                    p = moved;
                    assert_eq!(p as usize % align, 0);
                    assert!((0..size).all(|i| p.add(i).read() == i as u8), "size {size}");
                }
                alloc.dealloc(p, layout);
            }
            assert!(raw.live.borrow().is_empty(), "freed with the right pointer");
        }
    }

    #[test]
    fn defragmentation_leaves_large_blocks_and_honours_a_refusal() {
        let raw = EightAligned::default();
        let alloc = ModuleAlloc(&raw);
        for (size, align) in [(DEFRAG_MAX_BYTES, 8), (DEFRAG_MAX_BYTES, 64), (64, 64)] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: non-zero sizes, freed once with the layout.
            unsafe {
                let p = alloc.alloc(layout);
                let mut offered = false;
                let moved = relocate(p, layout, |_| {
                    offered = true;
                    std::ptr::null_mut()
                });
                assert!(moved.is_null());
                assert_eq!(offered, size < DEFRAG_MAX_BYTES, "size {size}");
                alloc.dealloc(p, layout);
            }
            assert!(raw.live.borrow().is_empty());
        }
    }

    #[test]
    fn defragmentation_leaves_unpadded_over_aligned_blocks_where_they_are() {
        let raw = PageAlignedLarge::default();
        let alloc = ModuleAlloc(&raw);
        let layout = Layout::from_size_align(DIRECT_MIN_BYTES, 64).unwrap();
        // SAFETY: a non-zero size, freed once with its layout.
        unsafe {
            let p = alloc.alloc(layout);
            assert!(is_direct(p));
            let moved = relocate(p, layout, |_| panic!("an unpadded block was offered"));
            assert!(moved.is_null());
            alloc.dealloc(p, layout);
        }
        assert!(raw.live.borrow().is_empty());
    }

    #[test]
    fn large_over_aligned_blocks_take_no_padding_where_the_allocator_aligns_them() {
        let raw = PageAlignedLarge::default();
        let alloc = ModuleAlloc(&raw);
        for (size, padded) in [(1000, true), (DIRECT_MIN_BYTES, false), (3 << 20, false)] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: non-zero sizes; each pointer is freed once with its layout.
            unsafe {
                let p = alloc.alloc(layout);
                assert_eq!(p as usize % 64, 0);
                let asked: Vec<usize> = raw.live.borrow().values().map(|v| v.2).collect();
                assert_eq!(
                    asked,
                    [if padded { size + 64 } else { size }],
                    "size {size}"
                );
                assert_eq!(is_direct(p), !padded);
                std::ptr::write_bytes(p, 0x5A, size);
                alloc.dealloc(p, layout);
                assert!(!is_direct(p));
            }
            assert!(raw.live.borrow().is_empty(), "freed with the right pointer");
        }
    }

    #[test]
    fn every_alignment_is_honoured_over_memory_aligned_to_8_only() {
        let raw = EightAligned::default();
        let alloc = ModuleAlloc(&raw);
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in [
                1,
                7,
                8,
                15,
                16,
                24,
                40,
                56,
                64,
                100,
                1000,
                5000,
                16 << 10,
                1 << 20,
            ] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero size; freed below with the same layout.
                unsafe {
                    let p = alloc.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    // The whole block is usable: write every byte, read the ends back.
                    std::ptr::write_bytes(p, 0xA5, size);
                    assert_eq!(*p, 0xA5);
                    assert_eq!(*p.add(size - 1), 0xA5);
                    alloc.dealloc(p, layout);
                }
            }
        }
        assert!(raw.live.borrow().is_empty(), "every block was freed");
    }

    #[test]
    fn reallocation_keeps_contents_and_alignment() {
        let raw = EightAligned::default();
        let alloc = ModuleAlloc(&raw);
        for align in [8, 16, 64] {
            let layout = Layout::from_size_align(24, align).unwrap();
            // SAFETY: non-zero sizes; each pointer is freed once with its current layout.
            unsafe {
                let p = alloc.alloc(layout);
                for i in 0..24 {
                    *p.add(i) = i as u8;
                }
                let q = alloc.realloc(p, layout, 4000);
                assert_eq!(q as usize % align, 0);
                for i in 0..24 {
                    assert_eq!(*q.add(i), i as u8);
                }
                alloc.dealloc(q, Layout::from_size_align(4000, align).unwrap());
            }
        }
        assert!(raw.live.borrow().is_empty());
    }

    #[test]
    fn zeroed_allocations_read_as_zero_at_every_alignment_and_size() {
        let raw = EightAligned::default();
        let alloc = ModuleAlloc(&raw);
        // Sizes on both sides of the discard threshold, not multiples of a page; the raw
        // memory is dirtied first so that zeros cannot come from a fresh mapping by chance.
        for align in [1, 8, 16, 64, 4096] {
            for size in [
                1,
                63,
                4096,
                5000,
                DISCARD_BYTES - 1,
                DISCARD_BYTES + 12_345,
                3 << 20,
            ] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; each block is freed once with its layout.
                unsafe {
                    let dirty = alloc.alloc(layout);
                    std::ptr::write_bytes(dirty, 0x5A, size);
                    alloc.dealloc(dirty, layout);
                    let p = alloc.alloc_zeroed(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    let bytes = std::slice::from_raw_parts(p, size);
                    assert!(
                        bytes.iter().all(|&b| b == 0),
                        "size {size} align {align}: a non-zero byte"
                    );
                    // Writable after the discard, and the write sticks.
                    *p.add(size / 2) = 7;
                    assert_eq!(*p.add(size / 2), 7);
                    alloc.dealloc(p, layout);
                }
            }
        }
        assert!(raw.live.borrow().is_empty(), "every block was freed");
    }

    #[test]
    fn zeroing_a_dirty_range_discards_its_interior_pages_and_writes_its_ends() {
        // Memory the test owns outright: dirty it, zero an unaligned range inside it, and the
        // bytes just outside the range must be untouched.
        let len = 4 << 20;
        let mut buf = vec![0xC3u8; len];
        let (from, to) = (1234, len - 4321);
        // SAFETY: the range lies inside `buf`, which nothing else uses.
        unsafe { zero(buf.as_mut_ptr().add(from), to - from) };
        assert!(buf[..from].iter().all(|&b| b == 0xC3));
        assert!(buf[from..to].iter().all(|&b| b == 0));
        assert!(buf[to..].iter().all(|&b| b == 0xC3));
    }

    /// A piece of a few pages (a layer or sub-filter just under any larger threshold) is
    /// discarded too: its interior pages are no longer resident after zeroing.
    #[test]
    #[cfg(target_os = "linux")]
    fn zeroing_a_range_of_a_few_pages_makes_its_interior_pages_non_resident() {
        let page = page_size();
        let len = 8 * page;
        let mut buf = vec![0xC3u8; len + page];
        let base = buf.as_mut_ptr();
        let from = (base as usize).next_multiple_of(page) - base as usize + 100;
        let to = from + 5 * page;
        // SAFETY: the range lies inside `buf`, which nothing else uses.
        unsafe { zero(base.add(from), to - from) };
        // The first whole page inside the range (and the next two): not resident (checked
        // before reading them, which maps them again).
        let first = (base as usize + from).next_multiple_of(page);
        let mut resident = [0u8; 3];
        // SAFETY: three whole pages inside `buf`; `resident` has one byte per page.
        let rc =
            unsafe { libc::mincore(first as *mut libc::c_void, 3 * page, resident.as_mut_ptr()) };
        assert_eq!(rc, 0);
        assert!(
            resident.iter().all(|&r| r & 1 == 0),
            "interior pages still resident: {resident:?}"
        );
        assert!(buf[from..to].iter().all(|&b| b == 0));
        assert!(buf[to..].iter().all(|&b| b == 0xC3));
    }

    /// The partial ends of a discarded range are written only where they hold a non-zero
    /// byte: a fresh range's stay untouched (not resident), a dirty one's are zeroed.
    #[test]
    #[cfg(target_os = "linux")]
    fn zeroing_leaves_partial_ends_that_already_read_as_zero_unwritten() {
        let page = page_size();
        let len = 64 * page;
        // A fresh anonymous mapping: no page touched.
        // SAFETY: a new private anonymous mapping, unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        let base = map.cast::<u8>();
        // The mapping's resident bytes of its own (`Rss` in smaps: the zero page is not
        // counted).
        let rss = || -> u64 {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let head = format!("{:x}-", base as usize);
            let at = smaps.find(&head).expect("the mapping in smaps");
            let line = smaps[at..]
                .lines()
                .find_map(|l| l.strip_prefix("Rss:"))
                .unwrap();
            line.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap()
                * 1024
        };
        // SAFETY: ranges inside the mapping, which nothing else uses.
        unsafe {
            zero(base.add(448), 8 * page);
            // Both partial pages only read: the zero page, not pages of their own.
            let bytes = std::slice::from_raw_parts(base, 10 * page);
            assert_eq!(rss(), 0, "pages of their own made resident");
            assert!(bytes[448..448 + 8 * page].iter().all(|&b| b == 0));
            // Dirty ends are zeroed, the bytes outside the range kept.
            std::ptr::write_bytes(base.add(20 * page), 0x77, 12 * page);
            zero(base.add(20 * page + 100), 10 * page);
            let bytes = std::slice::from_raw_parts(base.add(20 * page), 12 * page);
            assert!(bytes[..100].iter().all(|&b| b == 0x77));
            assert!(bytes[100..100 + 10 * page].iter().all(|&b| b == 0));
            assert!(bytes[100 + 10 * page..].iter().all(|&b| b == 0x77));
            libc::munmap(map, len);
        }
    }

    #[test]
    fn the_raw_allocator_of_the_test_really_returns_misaligned_blocks() {
        let raw = EightAligned::default();
        let p = (&raw).alloc(24);
        assert_eq!(p as usize % 16, 8);
        // SAFETY: allocated just above.
        unsafe { (&raw).free(p) };
    }
}

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
/// Implementors must be plain data whose every field is valid when all its bytes are zero,
/// without padding, every bit pattern valid (`try_copy_sparse` reads and writes their bytes).
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

/// The unit a sparse copy skips when it is all zeros: a page of the kernel's.
const COPY_PAGE: usize = 4096;

/// A copy of `src` (COPY of a filter) as lazy as its source: a zeroed array (`try_zeroed_vec`)
/// into which only the pages of `src` holding a non-zero byte are written, so the pages of a
/// reserved filter no bit was ever set in stay unwritten (and not resident) in the copy too.
/// `huge`: the source is dense (`HugeSchedule::for_copy`): the copy is hinted for huge pages
/// and written whole.
/// `empty`: the caller knows `src` is all zeros (no bit set): nothing is read, the copy costs
/// O(1) whatever its size. Otherwise the pages the kernel says were never written (neither
/// present nor swapped: they read as zeros) are skipped without being read, since reading
/// them would fault each in (measured: 3 s for a 1.3 GB layer holding one item); the others
/// are read once and copied when not all zero.
pub(crate) fn try_copy_sparse<T: Zeroable + Copy>(
    src: &[T],
    empty: bool,
    huge: bool,
) -> Result<Vec<T>, FilterError> {
    if huge {
        // A dense source: nearly every page is written anyway. Reserved, not zeroed (an
        // allocator may zero over-aligned memory by writing it, in 4 KiB pages), hinted,
        // then written whole, so that its pages fault in huge at once.
        let mut copy = Vec::new();
        copy.try_reserve_exact(src.len())
            .map_err(|_| FilterError::OutOfMemory {
                bytes: std::mem::size_of_val(src) as u64,
            })?;
        advise_huge_pages(&copy);
        copy.extend_from_slice(src);
        return Ok(copy);
    }
    let mut copy = try_zeroed_vec::<T>(src.len() as u64)?;
    if empty || src.is_empty() {
        return Ok(copy);
    }
    // SAFETY: `T` is plain data without padding, any bit pattern valid (`Zeroable`): its bytes
    // are initialised and any bytes written are a valid `T`; both views live only here, and
    // `copy` is a distinct allocation of the same length.
    let (from, to) = unsafe {
        (
            std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), std::mem::size_of_val(src)),
            std::slice::from_raw_parts_mut(
                copy.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(src),
            ),
        )
    };
    // Within a written run, page by page (by address): a run may be long where the kernel
    // cannot tell pages read from pages written (before Linux 6.7, or no pagemap at all: one
    // run), and a page of zeros copied would make the copy's page resident for nothing.
    for_each_written(from, |at, run| {
        copy_nonzero_pages(&mut to[at..at + run.len()], run)
    });
    Ok(copy)
}

/// Copies `run` into `to` (of the same length) page by page of `run`'s addresses, skipping
/// the pages of zeros, so that they stay untouched in `to`.
fn copy_nonzero_pages(to: &mut [u8], run: &[u8]) {
    let base = run.as_ptr() as usize;
    let mut off = 0;
    while off < run.len() {
        let next = ((base + off) / COPY_PAGE + 1) * COPY_PAGE - base;
        let piece = &run[off..next.min(run.len())];
        if piece.iter().any(|&b| b != 0) {
            to[off..off + piece.len()].copy_from_slice(piece);
        }
        off += piece.len();
    }
}

/// ORs `src` into `target` (of the same length), reading only what the kernel does not know
/// to be zeros: the pages of `src` never written are skipped unread, as `try_copy_sparse`
/// skips them, and zero words of the others are not written (`bits::or_into`), so the cost
/// follows the pages of `src` that were written, and `target`'s untouched pages stay
/// untouched. Returns the bits it set that were clear (BF.MERGE of reserved filters: 24
/// sources of 1.3 GB holding one item each took 11.7 s when every byte was read).
pub(crate) fn or_written(target: &mut [u8], src: &[u8]) -> u64 {
    debug_assert_eq!(target.len(), src.len());
    let mut set = 0;
    for_each_written(src, |at, run| {
        set += crate::bits::or_into(&mut target[at..at + run.len()], run);
    });
    set
}

/// Calls `f(offset, run)` for each run of `bytes` made of pages that may hold data (a run's
/// first and last pages may be partial), in order. Pages that read as zeros without being
/// read are skipped: never written (neither present nor swapped), or mapped to the kernel's
/// shared zero page; reading them would fault each in (measured: 3 s for a 1.3 GB layer
/// holding one item). The kernel lists the runs itself where it can (`PAGEMAP_SCAN`, Linux
/// 6.7), at a cost that follows the page tables' populated parts, not the array's size;
/// elsewhere each page's entry is read (8 bytes a 4 KiB page: 2 ms a GB). Where it cannot
/// tell at all (no `/proc/self/pagemap`), `bytes` is one run.
fn for_each_written(bytes: &[u8], f: impl FnMut(usize, &[u8])) {
    for_each_written_by(bytes, true, f)
}

/// `for_each_written`, with (`scan`) or without the kernel's run listing.
fn for_each_written_by(bytes: &[u8], scan: bool, mut f: impl FnMut(usize, &[u8])) {
    PageMap::with(|pages| match pages {
        Some(pages) => written_runs(pages, bytes, scan, &mut f),
        None if !bytes.is_empty() => f(0, bytes),
        None => {}
    })
}

/// `for_each_written_by` over an open pagemap.
fn written_runs(pages: &mut PageMap, bytes: &[u8], scan: bool, f: &mut impl FnMut(usize, &[u8])) {
    let base = bytes.as_ptr() as usize;
    let end = base + bytes.len();
    let mut at = base / COPY_PAGE * COPY_PAGE;
    let last = end.next_multiple_of(COPY_PAGE);
    while scan && at < last {
        let Some(walked) = pages.scan(at, last) else {
            break;
        };
        for r in &pages.regions {
            let (from, to) = ((r.start as usize).max(base), (r.end as usize).min(end));
            if from < to {
                f(from - base, &bytes[from - base..to - base]);
            }
        }
        if walked <= at {
            break;
        }
        at = walked;
    }
    // Page by page from `at` on: page-aligned pieces (the first and last may be partial),
    // runs of those the kernel holds.
    let (mut at, mut run) = (at.saturating_sub(base), at.saturating_sub(base));
    while at < bytes.len() {
        let next = (((base + at) / COPY_PAGE + 1) * COPY_PAGE - base).min(bytes.len());
        if pages.never_written((base + at) / COPY_PAGE) {
            if run < at {
                f(run, &bytes[run..at]);
            }
            run = next;
        }
        at = next;
    }
    if run < bytes.len() {
        f(run, &bytes[run..]);
    }
}

/// `struct page_region` of `PAGEMAP_SCAN`: pages `start..end` (addresses) and their kinds.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    /// Written by the kernel, not read: the runs asked for are all of one kind.
    #[allow(dead_code)]
    categories: u64,
}

/// `struct pm_scan_arg` of `PAGEMAP_SCAN` (linux/fs.h).
#[cfg(target_os = "linux")]
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
#[cfg(target_os = "linux")]
const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
#[cfg(target_os = "linux")]
const PAGE_IS_PRESENT: u64 = 1 << 3;
#[cfg(target_os = "linux")]
const PAGE_IS_SWAPPED: u64 = 1 << 4;
#[cfg(target_os = "linux")]
const PAGE_IS_PFNZERO: u64 = 1 << 5;

/// Runs listed by one `PAGEMAP_SCAN` call.
const SCAN_REGIONS: usize = 256;

/// `/proc/self/pagemap`, read in batches: whether a page of this process was never written
/// (not present, not swapped). `None` where it cannot be read (other systems, no /proc):
/// every page is then read.
struct PageMap {
    #[cfg(target_os = "linux")]
    file: std::fs::File,
    /// The first page of `entries`.
    first: usize,
    entries: Vec<u64>,
    /// The runs the last `scan` listed.
    regions: Vec<PageRegion>,
}

/// Pagemap entries read at once (512 KiB of entries cover 256 MiB of pages).
const PAGEMAP_BATCH: usize = 64 * 1024;

impl PageMap {
    /// Calls `f` with this process's pagemap, opened once a thread (a merge walks up to
    /// 1024 layers of each source: an open each would cost more than the walks) and again in
    /// a forked child, whose `/proc/self` is another file; `None` where it cannot be opened.
    /// Nothing read before is kept: pages may have been written since.
    fn with<R>(f: impl FnOnce(Option<&mut PageMap>) -> R) -> R {
        thread_local! {
            static OPEN: std::cell::RefCell<Option<(u32, PageMap)>> =
                const { std::cell::RefCell::new(None) };
        }
        let pid = std::process::id();
        OPEN.with(|open| {
            let Ok(mut open) = open.try_borrow_mut() else {
                return f(PageMap::open().as_mut());
            };
            if open.as_ref().is_none_or(|(of, _)| *of != pid) {
                *open = PageMap::open().map(|m| (pid, m));
            }
            let mut pages = open.as_mut().map(|(_, m)| m);
            if let Some(m) = pages.as_mut() {
                m.entries.clear();
            }
            f(pages)
        })
    }

    fn open() -> Option<PageMap> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: sysconf only reads a constant.
            if unsafe { libc::sysconf(libc::_SC_PAGESIZE) } != COPY_PAGE as libc::c_long {
                return None;
            }
            let file = std::fs::File::open("/proc/self/pagemap").ok()?;
            Some(PageMap {
                file,
                first: 0,
                entries: Vec::new(),
                regions: Vec::new(),
            })
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Lists in `regions` the runs of pages from address `start` to `end` (page-aligned)
    /// that hold data: present or swapped, not the shared zero page. Returns where the walk
    /// stopped (`end` once done; earlier when `regions` filled), `None` where the kernel has
    /// no `PAGEMAP_SCAN` (before 6.7) or refused it.
    #[cfg(target_os = "linux")]
    fn scan(&mut self, start: usize, end: usize) -> Option<usize> {
        use std::os::fd::AsRawFd;
        if self.regions.len() < SCAN_REGIONS {
            self.regions.try_reserve_exact(SCAN_REGIONS).ok()?;
            self.regions.resize(SCAN_REGIONS, PageRegion::default());
        }
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            flags: 0,
            start: start as u64,
            end: end as u64,
            walk_end: 0,
            vec: self.regions.as_mut_ptr() as u64,
            vec_len: SCAN_REGIONS as u64,
            max_pages: 0,
            // Not the zero page, and present or swapped.
            category_inverted: PAGE_IS_PFNZERO,
            category_mask: PAGE_IS_PFNZERO,
            category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
            return_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
        };
        // SAFETY: `arg` is a `struct pm_scan_arg` of the size it states, whose `vec` points
        // to `vec_len` writable `struct page_region`s owned by `self.regions`; the kernel
        // only writes those and `arg`, and reads the page tables of `start..end`.
        let found = unsafe { libc::ioctl(self.file.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
        let found = usize::try_from(found).ok()?.min(SCAN_REGIONS);
        let walked = arg.walk_end as usize;
        self.regions.truncate(found);
        (start < walked && walked <= end).then_some(walked)
    }

    #[cfg(not(target_os = "linux"))]
    fn scan(&mut self, _start: usize, _end: usize) -> Option<usize> {
        None
    }

    fn never_written(&mut self, page: usize) -> bool {
        const PRESENT: u64 = 1 << 63;
        const SWAPPED: u64 = 1 << 62;
        if !(self.first..self.first + self.entries.len()).contains(&page) && !self.read(page) {
            return false;
        }
        self.entries[page - self.first] & (PRESENT | SWAPPED) == 0
    }

    /// Reads the entries from `page` on; false (and nothing known) on failure.
    #[cfg(target_os = "linux")]
    fn read(&mut self, page: usize) -> bool {
        use std::os::unix::fs::FileExt;
        // One buffer for every batch: a walk over a large array reads many.
        if self.entries.capacity() < PAGEMAP_BATCH
            && self
                .entries
                .try_reserve_exact(PAGEMAP_BATCH - self.entries.len())
                .is_err()
        {
            return false;
        }
        self.entries.clear();
        self.entries.resize(PAGEMAP_BATCH, 0);
        // SAFETY: the vector's `PAGEMAP_BATCH` initialised `u64`s viewed as their bytes, any
        // bytes a valid `u64`; the view lives only for the read.
        let buf = unsafe {
            std::slice::from_raw_parts_mut(
                self.entries.as_mut_ptr().cast::<u8>(),
                PAGEMAP_BATCH * 8,
            )
        };
        let Ok(n) = self.file.read_at(buf, page as u64 * 8) else {
            self.entries.clear();
            return false;
        };
        self.first = page;
        self.entries.truncate(n / 8);
        !self.entries.is_empty()
    }

    #[cfg(not(target_os = "linux"))]
    fn read(&mut self, _page: usize) -> bool {
        false
    }
}

/// Arrays at least this large are backed by huge pages where the kernel allows it.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back a large array's reserved capacity with transparent huge pages
/// (pages touched later fault in 2 MiB at a time; resident ones are collapsed in the
/// background). A lookup in a large filter costs one cache miss and one TLB miss per line it
/// reads; with 4 KiB pages the TLB miss (a page walk) costs as much as the cache miss, with
/// 2 MiB pages a few hundred of them cover a whole filter. Only a hint: failure (no THP,
/// other kernels) changes nothing but speed. The Bloom layers and the cuckoo sub-filters of
/// both layouts share it.
pub(crate) fn advise_huge_pages<T>(v: &Vec<T>) {
    let len = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if len < HUGE_PAGE {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let start = v.as_ptr() as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE);
        let end = (start + len) / HUGE_PAGE * HUGE_PAGE;
        if end > aligned {
            // SAFETY: the range lies inside the vector's own allocation and is aligned to the
            // huge page size; MADV_HUGEPAGE only changes how the kernel backs those pages, not
            // their contents, validity or ownership.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    end - aligned,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
}

/// The writes between two collapsed regions of a dense array (`HugeSchedule`): a collapse
/// costs 3 to 11 ms per 2 MiB on the benchmark machine under load (a huge page allocated, 512
/// pages copied into it; 1.1 s for 200 MB in one call), so a 180 MB layer's 90 regions are
/// spread over the 90,000 adds after its dense mark instead of stalling one add for a second.
/// One in a thousand: a batch of up to 1000 items (BF.MADD, CF.INSERT) pays at most one
/// collapse, and the cost stays under a microsecond an item stored.
pub(crate) const WRITES_PER_COLLAPSE: u64 = 1000;

/// When an array written in place (a new filter's adds) gets its huge pages. Hinting it while
/// sparse would make each first touch of a 2 MiB range resident whole (`dense_after_writes`);
/// hinting it once dense is too late on its own: by then nearly every page is resident in 4
/// KiB pages, which the kernel only collapses in the background (khugepaged: 16 MiB per 10 s
/// by default, minutes for a filter of hundreds of MB, during which each lookup pays a page
/// walk). So, once dense, the array is hinted and then collapsed in place one 2 MiB region
/// every `WRITES_PER_COLLAPSE` writes (`MADV_COLLAPSE`, Linux 6.1+), where the system's THP
/// setting allows huge pages at all. The owner calls `step` when `due` says so: one compare
/// per write.
///
/// One word, as every layer and sub-filter holds one (per-user filters are small): the write
/// count at which the next step is due in the low 48 bits (`NEVER`: none; 2^48 writes are
/// far past any filter's), the next region to collapse in the high 16 (a layer of more than
/// 65,535 regions, 128 GiB, is left to khugepaged past them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HugeSchedule(u64);

/// A schedule says nothing about the array's contents: arrays with the same bits are equal
/// whatever their schedules.
impl PartialEq for HugeSchedule {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for HugeSchedule {}

impl HugeSchedule {
    const AT_BITS: u32 = 48;
    const NEVER: u64 = (1 << Self::AT_BITS) - 1;

    /// Nothing left to do: the array was hinted before it was written, or is too small.
    pub(crate) const DONE: HugeSchedule = HugeSchedule(Self::NEVER);

    /// The first step (hint, first collapse) after `writes` writes (`u64::MAX`: never).
    pub(crate) fn dense_at(writes: u64) -> Self {
        HugeSchedule(writes.min(Self::NEVER))
    }

    /// The write count at which the next step is due.
    #[inline(always)]
    fn at(&self) -> u64 {
        self.0 & Self::NEVER
    }

    /// The next region to collapse, counted from the array's first 2 MiB-aligned one.
    fn region(&self) -> u64 {
        self.0 >> Self::AT_BITS
    }

    /// A copy's schedule (COPY of a filter), and whether the copy is hinted before it is
    /// written: a source whose schedule has begun (past its dense mark, or hinted when it was
    /// loaded) is copied nearly whole, so the copy is hinted first, faults in huge and has
    /// nothing left to do; a source not yet dense is copied as sparse as it is and keeps its
    /// schedule, to be hinted at the same mark.
    pub(crate) fn for_copy(&self, writes: u64) -> (bool, HugeSchedule) {
        if self.at() != Self::NEVER && self.region() == 0 && writes < self.at() {
            (false, *self)
        } else {
            (true, Self::DONE)
        }
    }

    /// Whether a step is due after `writes` writes.
    #[inline(always)]
    pub(crate) fn due(&self, writes: u64) -> bool {
        writes == self.at()
    }

    /// The hint (on the first step) and one region's collapse; the next step is due
    /// `WRITES_PER_COLLAPSE` writes later, until every region was collapsed or collapsing is
    /// not possible here.
    #[cold]
    #[inline(never)]
    pub(crate) fn step<T>(&mut self, v: &Vec<T>, writes: u64) {
        let region = self.region();
        if region == 0 {
            advise_huge_pages(v);
        }
        let next = region + 1;
        if next >> (64 - Self::AT_BITS) == 0 && collapse_region(v, region as usize) {
            let at = writes
                .saturating_add(WRITES_PER_COLLAPSE)
                .min(Self::NEVER - 1);
            *self = HugeSchedule(next << Self::AT_BITS | at);
        } else {
            *self = Self::DONE;
        }
    }
}

/// Collapses the `region`th 2 MiB-aligned region of the array into a huge page; whether
/// regions after it remain to collapse. A region the kernel could not collapse now (no free
/// huge page) is left to khugepaged; a kernel without `MADV_COLLAPSE`, a process with THP
/// disabled (Redis does so when the setting is `always`) or the setting `never` ends it.
fn collapse_region<T>(v: &Vec<T>, region: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        let len = v.capacity().saturating_mul(std::mem::size_of::<T>());
        let start = v.as_ptr() as usize;
        let first = start.next_multiple_of(HUGE_PAGE);
        let end = start.saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
        let at = first.saturating_add(region.saturating_mul(HUGE_PAGE));
        if len < HUGE_PAGE || at.saturating_add(HUGE_PAGE) > end || !thp_allowed() {
            return false;
        }
        // SAFETY: the range is one aligned huge page inside the vector's own allocation;
        // MADV_COLLAPSE copies its pages into a huge page and maps that instead, keeping
        // their contents.
        let done = unsafe { libc::madvise(at as *mut libc::c_void, HUGE_PAGE, MADV_COLLAPSE) };
        if done != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            return false;
        }
        at + 2 * HUGE_PAGE <= end
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (v, region);
        false
    }
}

/// `MADV_COLLAPSE` (Linux 6.1); older kernels answer `EINVAL`.
#[cfg(target_os = "linux")]
const MADV_COLLAPSE: libc::c_int = 25;

/// Whether the system's THP setting (`/sys/kernel/mm/transparent_hugepage/enabled`) is
/// `always` or `madvise`: `MADV_COLLAPSE` ignores it, and `never` is an administrator's
/// choice to respect. Read once.
#[cfg(target_os = "linux")]
fn thp_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"))
    })
}

/// Writes to random places of an array after which nearly every 4 KiB page of it is resident
/// (four per page on average: all but `e^-4`, 2%), so that huge pages cost no more memory
/// than the array already takes; `u64::MAX` (never) for an array too small for a huge page.
/// Advising a sparse array instead makes each first touch of a 2 MiB range resident whole
/// (measured on a Bloom layer: 100 items added to a new 1.9 GB filter made 356 MB resident).
pub(crate) fn dense_after_writes(bytes: u64) -> u64 {
    const TOUCHES_PER_PAGE: u64 = 4;
    if bytes < HUGE_PAGE as u64 {
        return u64::MAX;
    }
    bytes / 4096 * TOUCHES_PER_PAGE
}

/// Whether the kernel was asked for huge pages over the mapping holding `ptr` (its
/// `VmFlags` in `/proc/self/smaps` carry `hg`); `None` where that cannot be read.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn huge_pages_advised(ptr: *const u8) -> Option<bool> {
    let at = ptr as usize;
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&at);
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.split_whitespace().any(|f| f == "hg"));
            }
        }
    }
    None
}

/// The bytes of the mapping holding `ptr` that are backed by huge pages (`AnonHugePages` in
/// `/proc/self/smaps`) and the mapping's size; `None` where that cannot be read.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn huge_bytes_of_mapping(ptr: *const u8) -> Option<(u64, u64)> {
    let at = ptr as usize;
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut size = None;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                size = (lo..hi).contains(&at).then_some((hi - lo) as u64);
                continue;
            }
        }
        if let (Some(size), Some(kb)) = (size, line.strip_prefix("AnonHugePages:")) {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().ok()?;
            return Some((kb * 1024, size));
        }
    }
    None
}

/// Why this process cannot have huge pages, if it cannot: the kernel has no THP, the system
/// setting is `never`, or THP is disabled for the process.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn no_huge_pages_here() -> Option<String> {
    if !thp_allowed() {
        return Some("THP is off or absent on this system".into());
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["THP_enabled:", "0"])
        .then(|| "THP is disabled for this process".into())
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
    fn a_sparse_copy_equals_its_source() {
        let mut src = try_zeroed_vec::<u8>(5 * COPY_PAGE as u64 + 17).unwrap();
        for at in [0, COPY_PAGE - 1, 3 * COPY_PAGE + 5, src.len() - 1] {
            src[at] = 0xa5;
        }
        assert_eq!(try_copy_sparse(&src, false, false).unwrap(), src);
        let zeros = try_zeroed_vec::<u8>(3 * COPY_PAGE as u64).unwrap();
        assert_eq!(try_copy_sparse(&zeros, true, false).unwrap(), zeros);
        // Large enough to come from fresh pages: some never written, some written.
        let mut big = try_zeroed_vec::<u8>(64 << 20).unwrap();
        for at in (0..big.len()).step_by(7_777_777) {
            big[at] = 1;
        }
        assert_eq!(try_copy_sparse(&big, false, false).unwrap(), big);
        let mut blocks = try_zeroed_vec::<Block>(200).unwrap();
        blocks[130].0[7] = 1;
        assert_eq!(try_copy_sparse(&blocks, false, false).unwrap(), blocks);
        assert!(try_copy_sparse::<u8>(&[], false, false).unwrap().is_empty());
        assert_eq!(try_copy_sparse(&big, false, true).unwrap(), big);
    }

    /// Pages of this process, from `at` for `len` bytes, that the kernel holds (present or
    /// swapped): those a walk read or wrote.
    #[cfg(target_os = "linux")]
    fn held_pages(at: *const u8, len: usize) -> usize {
        let mut pages = PageMap::open().expect("pagemap");
        let first = at as usize / COPY_PAGE;
        let last = (at as usize + len).div_ceil(COPY_PAGE);
        (first..last).filter(|&p| !pages.never_written(p)).count()
    }

    /// Keeps a test buffer in 4 KiB pages, so that page counts mean what the tests say where
    /// transparent huge pages are `always` (a first touch would fault in, or map, 2 MiB).
    #[cfg(target_os = "linux")]
    fn in_small_pages(v: &[u8]) {
        let start = (v.as_ptr() as usize).next_multiple_of(COPY_PAGE);
        let end = (v.as_ptr() as usize + v.len()) / COPY_PAGE * COPY_PAGE;
        if end > start {
            // SAFETY: a whole-page range inside `v`'s own mapping; the advice changes no
            // contents.
            unsafe {
                libc::madvise(
                    start as *mut libc::c_void,
                    end - start,
                    libc::MADV_NOHUGEPAGE,
                )
            };
        }
    }

    /// A written run copied by a COPY (`try_copy_sparse`) makes only its pages that hold a
    /// non-zero byte resident in the copy: a run may span pages only read (where the kernel
    /// cannot tell them from written ones), and those must stay untouched.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_copied_run_makes_only_its_non_zero_pages_resident() {
        let len = 64 << 20;
        let mut run = try_zeroed_vec::<u8>(len as u64).unwrap();
        in_small_pages(&run);
        run[len / 2] = 7;
        let mut to = try_zeroed_vec::<u8>(len as u64).unwrap();
        in_small_pages(&to);
        copy_nonzero_pages(&mut to, &run);
        assert_eq!(to[len / 2], 7);
        assert!(
            held_pages(to.as_ptr(), len) <= 2,
            "{}",
            held_pages(to.as_ptr(), len)
        );
        assert_eq!(crate::bits::count_ones(&to), 3);
    }

    /// Issue 23, item 2: a union of mostly unwritten arrays reads and writes only their
    /// written pages: neither the sources' other pages nor the target's are touched.
    #[test]
    #[cfg(target_os = "linux")]
    fn or_written_reads_only_the_written_pages_of_its_source() {
        let len = 64 << 20;
        let mut src = try_zeroed_vec::<u8>(len as u64).unwrap();
        in_small_pages(&src);
        let written = [5, COPY_PAGE * 3 + 17, len / 2, len / 2 + COPY_PAGE, len - 1];
        for (i, &at) in written.iter().enumerate() {
            src[at] = 1 << i;
        }
        let mut target = try_zeroed_vec::<u8>(len as u64).unwrap();
        in_small_pages(&target);
        target[len / 2] = 0x80;
        assert_eq!(or_written(&mut target, &src), written.len() as u64);
        for (i, &at) in written.iter().enumerate() {
            let old = if at == len / 2 { 0x80 } else { 0 };
            assert_eq!(target[at], old | 1 << i, "{at}");
        }
        assert_eq!(crate::bits::count_ones(&target), written.len() as u64 + 1);
        // Counting the bits above read every page of `target`: check the source, and a
        // second target that only the union wrote.
        let mut fresh = try_zeroed_vec::<u8>(len as u64).unwrap();
        in_small_pages(&fresh);
        or_written(&mut fresh, &src);
        assert!(held_pages(src.as_ptr(), len) <= written.len() + 2);
        assert!(held_pages(fresh.as_ptr(), len) <= written.len() + 2);
        assert_eq!(fresh[len - 1], 1 << 4);
    }

    /// Both ways of finding the written pages, the kernel's run listing and the page-by-page
    /// entries, give the same runs, covering every written byte; the run listing also skips
    /// pages only read (mapped to the shared zero page).
    #[test]
    #[cfg(target_os = "linux")]
    fn the_written_runs_cover_every_written_byte_either_way() {
        // Past glibc's largest mmap threshold (32 MiB): fresh pages, whatever ran before.
        let len = 64 << 20;
        let mut src = try_zeroed_vec::<u8>(len as u64 + 100).unwrap();
        in_small_pages(&src);
        // An unaligned view, so that its first and last pages are partial.
        let view = 37..37 + len;
        let written = [
            37,
            40,
            3 * COPY_PAGE,
            3 * COPY_PAGE + 9000,
            len / 3,
            len + 36,
        ];
        for &at in &written {
            src[at] = 1;
        }
        // Read, not written: the zero page (where the kernel maps it for reads).
        let read_only = 5 * COPY_PAGE * 17;
        assert_eq!(std::hint::black_box(&src)[read_only], 0);
        let runs = |scan: bool| {
            let mut runs = Vec::new();
            for_each_written_by(&src[view.clone()], scan, |at, run| {
                runs.push(at..at + run.len())
            });
            runs
        };
        for scan in [true, false] {
            let got = runs(scan);
            for &at in &written {
                assert!(
                    got.iter().any(|r| r.contains(&(at - 37))),
                    "scan {scan}: {at} not in {got:?}"
                );
            }
            assert!(got.windows(2).all(|w| w[0].end <= w[1].start), "{got:?}");
            let bytes: usize = got.iter().map(|r| r.len()).sum();
            assert!(
                bytes <= 8 * COPY_PAGE,
                "scan {scan}: {bytes} bytes in {got:?}"
            );
        }
        let scanned = runs(true);
        if !scanned.is_empty() && scanned != runs(false) {
            // Only where the kernel lists runs: the zero page's is skipped.
            assert!(!scanned.iter().any(|r| r.contains(&(read_only - 37))));
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

    #[test]
    fn only_arrays_of_a_huge_page_or_more_become_dense() {
        assert_eq!(dense_after_writes(0), u64::MAX);
        assert_eq!(dense_after_writes(HUGE_PAGE as u64 - 1), u64::MAX);
        assert_eq!(dense_after_writes(HUGE_PAGE as u64), 2048);
        assert_eq!(dense_after_writes(1 << 30), 1 << 20);
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

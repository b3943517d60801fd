//! Moving a value's heap blocks elsewhere, for a defragmenter that knows which blocks sit in
//! sparse parts of the allocator's memory (Redis's active defragmentation). The core knows
//! nothing of who moves blocks or why: each value offers every block it owns, innermost
//! first, and adopts the new address of each one that moved.

use std::alloc::Layout;
use std::ptr::NonNull;

/// Something that may move a heap block of the global allocator elsewhere.
///
/// # Safety
/// When [`Relocator::relocate`] returns `Some(new)`, `new` must be a live block that the
/// global allocator would free soundly with `layout` (as if it had returned it for `layout`),
/// holding the block's `layout.size()` bytes as they were, and the old block must have been
/// released: the value then holds `new` in place of the old pointer. `None` must leave the
/// block untouched.
pub unsafe trait Relocator {
    /// Moves the block at `block`, allocated by the global allocator for `layout`, or not.
    fn relocate(&mut self, block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>>;
}

/// Offers a vector's buffer (if it has one) and adopts where it moved.
pub(crate) fn relocate_vec<T>(v: &mut Vec<T>, to: &mut dyn Relocator) {
    if v.capacity() == 0 || std::mem::size_of::<T>() == 0 {
        return;
    }
    let Ok(layout) = Layout::array::<T>(v.capacity()) else {
        return;
    };
    let (len, capacity) = (v.len(), v.capacity());
    let Some(block) = NonNull::new(v.as_mut_ptr().cast::<u8>()) else {
        return;
    };
    if let Some(moved) = to.relocate(block, layout) {
        // SAFETY: the `Relocator` contract: `moved` is a block of the global allocator for
        // exactly this vector's layout (`Layout::array::<T>(capacity)`, `T`'s alignment),
        // holding its `len` initialised elements bit for bit; the old buffer was released,
        // so the old vector is forgotten, never dropped.
        let old = std::mem::replace(v, unsafe {
            Vec::from_raw_parts(moved.as_ptr().cast::<T>(), len, capacity)
        });
        std::mem::forget(old);
    }
}

/// Offers a box's block and adopts where it moved.
pub(crate) fn relocate_box<T>(b: &mut Box<T>, to: &mut dyn Relocator) {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return;
    }
    let block = NonNull::from(&mut **b).cast::<u8>();
    if let Some(moved) = to.relocate(block, layout) {
        // SAFETY: as in `relocate_vec`: `moved` holds the `T` bit for bit in a block of the
        // global allocator for `Layout::new::<T>()`, and the old block was released.
        let old = std::mem::replace(b, unsafe { Box::from_raw(moved.as_ptr().cast::<T>()) });
        std::mem::forget(old);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Moves every block to a fresh allocation of the global allocator, poisoning the old one
    /// before freeing it, so a value that kept an old pointer reads garbage (or Miri flags it).
    #[derive(Default)]
    pub(crate) struct MoveAll {
        pub(crate) moved: usize,
        pub(crate) bytes: usize,
    }

    // SAFETY: a fresh block of the global allocator for `layout`, the bytes copied, the old
    // block freed with the layout it was allocated with.
    unsafe impl Relocator for MoveAll {
        fn relocate(&mut self, block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
            // SAFETY: the layout has a non-zero size (the callers skip empty blocks); the old
            // block is live for `layout` (the trait's caller contract) and freed once.
            unsafe {
                let new = NonNull::new(std::alloc::alloc(layout))?;
                std::ptr::copy_nonoverlapping(block.as_ptr(), new.as_ptr(), layout.size());
                std::ptr::write_bytes(block.as_ptr(), 0xA5, layout.size());
                std::alloc::dealloc(block.as_ptr(), layout);
                self.moved += 1;
                self.bytes += layout.size();
                Some(new)
            }
        }
    }

    /// Moves nothing, counting what it was offered.
    #[derive(Default)]
    struct Refuse(usize);

    // SAFETY: never moves a block.
    unsafe impl Relocator for Refuse {
        fn relocate(&mut self, _: NonNull<u8>, _: Layout) -> Option<NonNull<u8>> {
            self.0 += 1;
            None
        }
    }

    #[test]
    fn a_moved_vector_and_box_keep_their_contents() {
        let mut v: Vec<Vec<u64>> = (0..5).map(|i| (0..i).collect()).collect();
        let before = v.clone();
        let mut to = MoveAll::default();
        for inner in &mut v {
            relocate_vec(inner, &mut to);
        }
        relocate_vec(&mut v, &mut to);
        assert_eq!(v, before);
        // The empty inner vector has no block to offer.
        assert_eq!(to.moved, 5);
        let mut b = Box::new([7u8; 100]);
        relocate_box(&mut b, &mut to);
        assert_eq!(*b, [7u8; 100]);
        v[4].push(9);
        assert_eq!(v[4], [0, 1, 2, 3, 9]);
    }

    #[test]
    fn a_refused_move_leaves_the_block_in_place() {
        let mut v = vec![1u8, 2, 3];
        let at = v.as_ptr();
        let mut to = Refuse::default();
        relocate_vec(&mut v, &mut to);
        assert_eq!((to.0, v.as_ptr(), v), (1, at, vec![1, 2, 3]));
        relocate_vec(&mut Vec::<u8>::new(), &mut to);
        assert_eq!(to.0, 1);
    }

    mod values {
        use super::MoveAll;
        use crate::cuckoo::rate::Widths;
        use crate::cuckoo::rated::RatedFilter;
        use crate::cuckoo::{AnyFilter, CuckooFilter, Limits, Params};
        use crate::{FilterSpec, Layout, ScalableFilter, WindowSpec, WindowedFilter};

        fn items() -> Vec<Vec<u8>> {
            (0..3000u32)
                .map(|i| format!("item-{i}").into_bytes())
                .collect()
        }

        /// Moves every block of `value` and checks it is equal and answers as before.
        fn moved_keeps<V: Clone + PartialEq + std::fmt::Debug>(
            mut value: V,
            relocate: impl Fn(&mut V, &mut MoveAll),
            contains: impl Fn(&V, &[u8]) -> bool,
            blocks: usize,
        ) {
            let before = value.clone();
            let mut to = MoveAll::default();
            relocate(&mut value, &mut to);
            assert_eq!(to.moved, blocks, "blocks offered");
            assert_eq!(value, before);
            assert!(items().iter().all(|i| contains(&value, i)));
            // Moved twice: the blocks adopted the first time are live blocks too.
            relocate(&mut value, &mut to);
            assert_eq!(value, before);
        }

        #[test]
        fn every_bloom_layout_moves_intact() {
            for layout in [Layout::Blocked, Layout::Classic] {
                let spec = FilterSpec {
                    layout,
                    ..FilterSpec::new(100, 0.01, 2)
                };
                let mut f = ScalableFilter::new(spec, u64::MAX).unwrap();
                for i in items() {
                    f.add(&i, u64::MAX).unwrap();
                }
                let layers = f.layer_count();
                assert!(layers > 3);
                // Every bit array, the layer table and the end offsets.
                moved_keeps(f, |f, to| f.relocate(to), |f, i| f.contains(i), layers + 2);
            }
        }

        #[test]
        fn windowed_filters_move_intact() {
            let spec = WindowSpec {
                window_ms: 4000,
                slices: 4,
                filter: FilterSpec::new(5000, 0.01, 2),
            };
            let mut f = WindowedFilter::new(spec, 0, u64::MAX).unwrap();
            for (n, i) in items().iter().enumerate() {
                f.advance_to(f.slice_of(n as u64));
                f.add(i, u64::MAX).unwrap();
            }
            assert!(f.slice_filters().len() >= 3);
            let blocks = f
                .slice_filters()
                .map(|(_, s)| s.layer_count() + 2)
                .sum::<usize>()
                + 1;
            moved_keeps(f, |f, to| f.relocate(to), |f, i| f.contains(i), blocks);
        }

        #[test]
        fn both_cuckoo_layouts_move_intact() {
            let params = Params {
                bucket_size: 2,
                max_iterations: 20,
                expansion: 1,
            };
            let limits = Limits::default();
            let mut redis = AnyFilter::Redis(CuckooFilter::new(64, params, u64::MAX).unwrap());
            let widths = Widths {
                first: 16,
                second: 16,
            };
            let mut wide =
                AnyFilter::from(RatedFilter::new(64, params, widths, 0.001, u64::MAX).unwrap());
            for i in items() {
                redis.add(&i, &limits).unwrap();
                wide.add(&i, &limits).unwrap();
            }
            let subs = redis.sub_filter_count();
            assert!(subs > 3);
            moved_keeps(
                redis,
                |f, to| f.relocate(to),
                |f, i| f.contains(i),
                subs + 1,
            );
            // The extension's box too.
            let subs = wide.sub_filter_count();
            moved_keeps(wide, |f, to| f.relocate(to), |f, i| f.contains(i), subs + 2);
        }
    }
}

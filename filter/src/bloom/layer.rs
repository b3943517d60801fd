//! One layer of a scalable Bloom filter, whatever its layout: everything a chain asks of it.
//!
//! A chain (`chain`) holds layers of one kind and knows nothing of their layout. It hashes an
//! item once, with the kind's hash, asks its layers whether they hold it, inserts it into the
//! newest, and grows by its one growth rule (`chain::next_layer`), for which a kind supplies
//! only its sizing (`Layer::plan`). Blocked layers (`blocked`) and RedisBloom's classic ones
//! (`classic`) are the two kinds; a new kind implements this trait and `codec::LayerCodec`,
//! and gets a variant in `filter::ScalableFilter` and in the codec's `Header` and loader, and
//! a line in each arm of `filter::on_layout!`.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::bloom::spec::{FilterSpec, Layout, SizingError};
use crate::error::FilterError;

/// One layer's figures, whatever its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerSummary {
    pub capacity: u64,
    pub error: f64,
    pub items: u64,
    pub bytes: u64,
    pub set_bits: u64,
    pub total_bits: u64,
    /// Bit positions each item sets (blocked: blocks per item × bits per block).
    pub hashes: u32,
    /// Blocks each item touches (1 for a classic layer, which has no blocks).
    pub blocks_per_item: u32,
}

/// What sizing decided for a layer: all a new, empty layer is allocated from. (With its item
/// count it is also what a header persists of a layer: the layers' metadata types are plans.)
pub trait LayerPlan: Copy + Debug + PartialEq {
    /// Items the layer holds before it is full.
    fn capacity(&self) -> u64;
    /// The false-positive rate it was sized for.
    fn error(&self) -> f64;
    /// Bytes of its bit array.
    fn bytes(&self) -> u64;
}

/// A heap block that a filter owns (its layer table, a layer's bit array), for asking the
/// allocator what it really reserved there.
///
/// Invariant, which makes such a query sound: `ptr` is the start of a live block that the
/// global allocator returned for a request of at least one byte aligned to exactly `align`,
/// and it stays allocated while the borrow `'a` of its owner lasts. The only constructor,
/// [`Allocation::of_vec`], takes it from a vector's buffer, for which `Vec` guarantees it:
/// a `Vec<T>` with room for at least one `T` of non-zero size holds a block the global
/// allocator gave it for `Layout::array::<T>(capacity)`, whose alignment is `T`'s.
#[derive(Debug, Clone, Copy)]
pub struct Allocation<'a> {
    ptr: NonNull<u8>,
    align: usize,
    owner: PhantomData<&'a ()>,
}

impl<'a> Allocation<'a> {
    /// The block holding a vector's elements; `None` when it holds none (no room reserved, or
    /// elements of size zero), so an empty vector is skipped rather than assumed away.
    pub(crate) fn of_vec<T>(v: &'a Vec<T>) -> Option<Self> {
        if v.capacity() == 0 || std::mem::size_of::<T>() == 0 {
            return None;
        }
        Some(Allocation {
            ptr: NonNull::new(v.as_ptr().cast_mut().cast::<u8>())?,
            align: std::mem::align_of::<T>(),
            owner: PhantomData,
        })
    }

    /// Where the block starts.
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The alignment it was requested with.
    pub fn align(&self) -> usize {
        self.align
    }
}

/// One layer of a chain. Every layer of a chain is of one kind, so an item is hashed once for
/// all of them.
pub trait Layer: Sized + Clone + PartialEq + Debug {
    /// The layout this kind is.
    const LAYOUT: Layout;
    /// The alignment its bit array is allocated with (the allocator model pads above 8).
    const BITS_ALIGN: u64;
    /// Whether an insert counts the bits it flips a word at a time: on baseline x86-64 that is
    /// a software popcount per word, so the chain compiles its adds for POPCNT where the CPU
    /// has it.
    const COUNTS_WORDS: bool = false;

    /// What every layer of a chain shares beyond its own figures (classic: RedisBloom's
    /// option bits, which decide how items hash, and its growth factor as persisted).
    type Params: Copy + PartialEq + Debug;
    /// An item's hash: computed once per item, probed in every layer.
    type Hash: Copy + Default;
    /// A layer's figures besides its bits: its plan, and its item count.
    type Meta: LayerPlan;

    /// The parameters of a new chain of this kind.
    fn params_for(spec: &FilterSpec) -> Self::Params;
    /// Hashes an item as every layer of a chain with these parameters probes it.
    fn hash(item: &[u8], params: &Self::Params) -> Self::Hash;
    /// Sizes a layer for `capacity` items at `error`.
    fn plan(capacity: u64, error: f64, params: &Self::Params) -> Result<Self::Meta, SizingError>;
    /// The rate a growth asks the next layer for, after tightening: what `plan` can size.
    fn floor_error(error: f64) -> f64 {
        error
    }
    /// Whether every later layer of a growth that keeps the capacity (expansion 1) has this
    /// plan's capacity and bytes again.
    fn plans_repeat(_plan: &Self::Meta) -> bool {
        false
    }
    /// The chain's error rate when the kind derives it from its first layer (its formats do
    /// not persist one) rather than keeping the rate it was created with.
    fn derived_error(_params: &Self::Params, _first_layer_error: f64) -> Option<f64> {
        None
    }
    /// A new, empty layer of a plan.
    fn empty(plan: Self::Meta) -> Result<Self, FilterError>;
    /// Its figures besides its bits.
    fn meta(&self) -> &Self::Meta;

    /// Whether every bit of the item's probe is set.
    fn contains(&self, hash: &Self::Hash) -> bool;
    /// Whether any of a chain's layers holds the hash; newest first, as it is the largest and
    /// most likely to answer. Kinds that can overlap the layers' memory accesses override it.
    #[inline]
    fn contains_any(layers: &[Self], hash: &Self::Hash) -> bool {
        layers.iter().rev().any(|l| l.contains(hash))
    }
    /// Sets the item's bits and counts it, whether or not they were set.
    fn insert(&mut self, hash: &Self::Hash);
    /// Sets the item's bits unless every one is set already; whether it did (and so counted
    /// the item). Nothing changes when it did not.
    #[inline]
    fn insert_new(&mut self, hash: &Self::Hash) -> bool {
        if self.contains(hash) {
            return false;
        }
        self.insert(hash);
        true
    }
    /// Whether it holds as many items as it was sized for.
    fn is_full(&self) -> bool;
    /// The layer stops taking items: a newer one was added.
    fn seal(&mut self) {}
    /// Starts loading every cache line an item's probe touches.
    #[inline(always)]
    fn prefetch(&self, _hash: &Self::Hash) {}
    /// Starts loading the first line an item's probe touches: the one an absent item is
    /// usually refused by.
    #[inline(always)]
    fn prefetch_first(&self, hash: &Self::Hash) {
        self.prefetch(hash)
    }

    /// Its figures.
    fn summary(&self) -> LayerSummary;
    /// The false-positive rate a layer of this kind with these figures has, estimated from
    /// its fill (`math`).
    fn fpr_of(summary: &LayerSummary) -> f64;
    /// The distinct items the bits of a layer of this kind with these figures account for
    /// (`math`).
    fn distinct_of(summary: &LayerSummary) -> f64;
    /// This layer's estimated false-positive rate.
    fn estimated_fpr(&self) -> f64 {
        Self::fpr_of(&self.summary())
    }
    /// RedisBloom's `BF.DEBUG` line for it (or one of the same shape).
    fn debug_line(&self, params: &Self::Params) -> String;
    /// The hash width RedisBloom reports (`BF.DEBUG` `hashwidth`), for its kinds only.
    fn hash_width(_params: &Self::Params) -> Option<u32> {
        None
    }

    /// The bit array as bytes, as persisted.
    fn as_bytes(&self) -> &[u8];
    /// ORs bytes into the bit array at `offset` (the caller has checked the range), keeping
    /// the set-bit count exact; never clears a bit.
    fn or_bytes(&mut self, offset: usize, data: &[u8]);
    /// Bytes allocated for the bit array.
    fn bytes(&self) -> u64;
    /// The block holding the bit array.
    fn allocation(&self) -> Option<Allocation<'_>>;
    /// Offers the bit array's block to `to` (active defragmentation).
    fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator);
    /// A deep copy, reporting allocation failure instead of aborting.
    fn try_clone(&self) -> Result<Self, FilterError>;
}

/// C's `printf("%g", x)`: six significant digits, trailing zeros removed, exponent form when
/// the exponent is below -4 or at least 6.
pub fn format_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').expect("scientific notation");
    let exp: i32 = exp.parse().expect("integer exponent");
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip(mantissa), sign, exp.abs())
    } else {
        let decimals = (5 - exp).max(0) as usize;
        strip(&format!("{x:.decimals$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_g_matches_c() {
        for (x, want) in [
            (0.01, "0.01"),
            (0.005, "0.005"),
            (0.0003125, "0.0003125"),
            (0.000625, "0.000625"),
            (0.0001, "0.0001"),
            (0.00003125, "3.125e-05"),
            (1.0 / 3.0, "0.333333"),
            (0.25, "0.25"),
            (1e-9, "1e-09"),
            (0.00000762939453125, "7.62939e-06"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
        ] {
            assert_eq!(format_g(x), want, "{x}");
        }
    }
}

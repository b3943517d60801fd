//! The filter a key holds: a chain of blocked layers or a chain of classic ones, and the one
//! place that tells them apart.
//!
//! Everything a filter does is the chain's (`Chain<L>`, generic over the kind of layer);
//! `on_layout!` forwards each call to the chain the filter holds. It is the only match on the
//! kind of a filter, so a new kind of layer is a line in each of its arms and a variant below
//! (and in the codec's `Header` and loader).

use crate::bloom::blocked::BlockedLayer;
use crate::bloom::chain::{Chain, BOX_CLASS};
use crate::bloom::classic::ClassicLayer;
use crate::bloom::layer::{Allocation, Layer, LayerSummary};
pub use crate::bloom::spec::{FilterSpec, Layout};
use crate::error::FilterError;

/// The one match on the kind of layer. Forms:
/// * `on_layout!(value, Kinds, x => body)`: `body` with `x` bound to what a value of a kind
///   enum holds (`ScalableFilter`, the codec's `Header`: one variant per kind of layer, named
///   alike, each holding that kind's);
/// * `on_layout!(value, Kinds => Into, x => body)`: the same, `body`'s value wrapped in the
///   same variant of the kind enum `Into`;
/// * `on_layout!(layout l, L => body)`: `body` with `L` naming the layer type of the `Layout`
///   `l`; with `layout l => Into`, its value wrapped in that kind's variant of `Into`.
macro_rules! on_layout {
    (layout $layout:expr, $L:ident => $body:expr) => {
        match $layout {
            $crate::bloom::spec::Layout::Blocked => {
                type $L = $crate::bloom::blocked::BlockedLayer;
                $body
            }
            $crate::bloom::spec::Layout::Classic => {
                type $L = $crate::bloom::classic::ClassicLayer;
                $body
            }
        }
    };
    (layout $layout:expr => $into:ident, $L:ident => $body:expr) => {
        match $layout {
            $crate::bloom::spec::Layout::Blocked => {
                type $L = $crate::bloom::blocked::BlockedLayer;
                $into::Blocked($body)
            }
            $crate::bloom::spec::Layout::Classic => {
                type $L = $crate::bloom::classic::ClassicLayer;
                $into::Classic($body)
            }
        }
    };
    ($value:expr, $kinds:ident => $into:ident, $x:pat => $body:expr) => {
        match $value {
            $kinds::Blocked($x) => $into::Blocked($body),
            $kinds::Classic($x) => $into::Classic($body),
        }
    };
    ($value:expr, $kinds:ident, $x:pat => $body:expr) => {
        match $value {
            $kinds::Blocked($x) => $body,
            $kinds::Classic($x) => $body,
        }
    };
}
pub(crate) use on_layout;

// A spec's cost depends on its kind of layers, which only the filter tells apart.
impl FilterSpec {
    /// Bytes a filter of this spec takes when created, without allocating.
    pub fn initial_bytes(&self) -> Result<u64, FilterError> {
        on_layout!(layout self.layout, L => Chain::<L>::initial_bytes(self))
    }
}

/// A scalable Bloom filter: a chain of one kind of layer.
#[derive(Debug, Clone, PartialEq)]
pub enum ScalableFilter {
    Blocked(Chain<BlockedLayer>),
    Classic(Chain<ClassicLayer>),
}

// The allocator model counts the box in the size class it has had since filters were one
// struct (65 to 80 bytes), which the chain's model counts as `BOX_CLASS`: MEMORY USAGE and
// BF.INFO figures are pinned by tests.
const _: () = assert!(
    std::mem::size_of::<ScalableFilter>() > 64
        && std::mem::size_of::<ScalableFilter>() as u64 <= BOX_CLASS
        && std::mem::align_of::<ScalableFilter>() <= 8
);

impl ScalableFilter {
    /// A new, empty filter, refused if it would take more than `max_bytes`.
    pub fn new(spec: FilterSpec, max_bytes: u64) -> Result<Self, FilterError> {
        Ok(
            on_layout!(layout spec.layout => ScalableFilter, L => Chain::<L>::new(&spec, max_bytes)?),
        )
    }

    /// Where byte `offset` of the concatenated bit arrays lies: `(layer, offset within it,
    /// that layer's length)`, found by binary search.
    pub fn locate(&self, offset: u64) -> Option<(usize, u64, u64)> {
        on_layout!(self, ScalableFilter, c => c.locate(offset))
    }

    /// Bytes of all its bit arrays together (SCANDUMP's offsets run over them).
    pub fn bits_bytes(&self) -> u64 {
        on_layout!(self, ScalableFilter, c => c.bits_bytes())
    }

    /// Whether any layer holds the item.
    pub fn contains(&self, item: &[u8]) -> bool {
        on_layout!(self, ScalableFilter, c => c.contains(item))
    }

    /// Adds an item. `Ok(false)` when it was (or looked) present already: nothing changes and
    /// nothing is counted. Growth that would take the filter past `max_bytes` is refused.
    pub fn add(&mut self, item: &[u8], max_bytes: u64) -> Result<bool, FilterError> {
        on_layout!(self, ScalableFilter, c => c.add(item, max_bytes))
    }

    /// `contains` for many items at once, in order (`Chain::contains_many`).
    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        on_layout!(self, ScalableFilter, c => c.contains_many(items))
    }

    /// `add` for many items, with exactly the effect of adding them one by one in order; the
    /// results stop after the first error (`Chain::add_many`).
    pub fn add_many(&mut self, items: &[&[u8]], max_bytes: u64) -> Vec<Result<bool, FilterError>> {
        on_layout!(self, ScalableFilter, c => c.add_many(items, max_bytes))
    }

    /// `add`, growing to at most `max_layers` layers (`Chain::add_capped`).
    pub fn add_capped(
        &mut self,
        item: &[u8],
        max_bytes: u64,
        max_layers: usize,
    ) -> Result<bool, FilterError> {
        on_layout!(self, ScalableFilter, c => c.add_capped(item, max_bytes, max_layers))
    }

    /// `add_many`, growing to at most `max_layers` layers (`Chain::add_many_capped`).
    pub fn add_many_capped(
        &mut self,
        items: &[&[u8]],
        max_bytes: u64,
        max_layers: usize,
    ) -> Vec<Result<bool, FilterError>> {
        on_layout!(self, ScalableFilter, c => c.add_many_capped(items, max_bytes, max_layers))
    }

    /// Number of layers.
    pub fn layer_count(&self) -> usize {
        on_layout!(self, ScalableFilter, c => c.layer_count())
    }

    /// Each layer's figures, oldest first.
    pub fn layer_summaries(&self) -> Vec<LayerSummary> {
        on_layout!(self, ScalableFilter, c => c.layer_summaries())
    }

    /// Items and capacity of layer `index` (oldest first).
    pub fn layer_load(&self, index: usize) -> Option<(u64, u64)> {
        on_layout!(self, ScalableFilter, c => c.layer_load(index))
    }

    /// Each layer's bit array as bytes, oldest first.
    pub fn layer_bytes(&self) -> Vec<&[u8]> {
        on_layout!(self, ScalableFilter, c => c.layer_bytes())
    }

    /// Layer `index`'s bit array as bytes.
    pub fn layer_bytes_at(&self, index: usize) -> &[u8] {
        on_layout!(self, ScalableFilter, c => c.layer_bytes_at(index))
    }

    /// ORs bytes into layer `index` at `offset`; the caller has checked the range.
    pub(crate) fn or_layer_bytes(&mut self, index: usize, offset: usize, data: &[u8]) {
        on_layout!(self, ScalableFilter, c => c.or_layer_bytes(index, offset, data))
    }

    /// Items added (an add that found the item present does not count).
    pub fn items(&self) -> u64 {
        on_layout!(self, ScalableFilter, c => c.items())
    }

    /// The sum of the layers' capacities.
    pub fn capacity(&self) -> u64 {
        on_layout!(self, ScalableFilter, c => c.capacity())
    }

    /// The error rate the filter was created with (for a classic filter loaded from
    /// RedisBloom, derived from its first layer).
    pub fn error(&self) -> f64 {
        on_layout!(self, ScalableFilter, c => c.error())
    }

    /// The growth factor, or `None` for a non-scaling filter.
    pub fn expansion(&self) -> Option<u32> {
        let expansion = self.expansion_raw();
        (expansion != 0).then_some(expansion)
    }

    /// The raw growth factor (0 for non-scaling), as persisted.
    pub fn expansion_raw(&self) -> u32 {
        on_layout!(self, ScalableFilter, c => c.expansion_raw())
    }

    /// The kind of layers it is made of.
    pub fn layout(&self) -> Layout {
        fn of<L: Layer>(_: &Chain<L>) -> Layout {
            L::LAYOUT
        }
        on_layout!(self, ScalableFilter, c => of(c))
    }

    /// Whether the layers are RedisBloom's.
    pub fn is_classic(&self) -> bool {
        self.layout() == Layout::Classic
    }

    /// The hash width RedisBloom reports (BF.DEBUG `hashwidth`), for a classic filter.
    pub fn classic_hash_width(&self) -> Option<u32> {
        fn of<L: Layer>(c: &Chain<L>) -> Option<u32> {
            L::hash_width(c.params())
        }
        on_layout!(self, ScalableFilter, c => of(c))
    }

    /// `BF.DEBUG`'s line for each layer, oldest first.
    pub fn debug_lines(&self) -> Vec<String> {
        on_layout!(self, ScalableFilter, c => c.debug_lines().collect())
    }

    /// Bytes the filter takes: its box, its layer table and its bit arrays, each as the
    /// allocator model (`footprint`) counts it. Deterministic: equal filters report equal
    /// figures on every server.
    pub fn memory_usage(&self) -> u64 {
        on_layout!(self, ScalableFilter, c => c.memory_usage())
    }

    /// `memory_usage` of the filter's first `count` layers: what it took before it grew past
    /// them.
    pub fn memory_usage_of_layers(&self, count: usize) -> u64 {
        on_layout!(self, ScalableFilter, c => c.memory_usage_of_layers(count))
    }

    /// Calls `each` with every heap block the filter's box holds: its layer table, then each
    /// layer's bit array (see `Allocation` for what the allocator may be asked about them).
    pub fn allocations<'a>(&'a self, mut each: impl FnMut(Allocation<'a>)) {
        on_layout!(self, ScalableFilter, c => c.allocations(&mut each))
    }

    /// Offers every heap block the filter's box holds to `to` (active defragmentation; the
    /// box itself is its owner's to offer).
    pub fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator) {
        on_layout!(self, ScalableFilter, c => c.relocate(to))
    }

    /// A deep copy, reporting allocation failure instead of aborting.
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        Ok(on_layout!(self, ScalableFilter => ScalableFilter, c => c.try_clone()?))
    }
}

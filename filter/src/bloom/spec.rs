//! What a new Bloom filter is asked to be: its spec, the kind of layers it is made of, and the
//! ratio by which each new layer's rate tightens. A leaf: it imports nothing of the Bloom core,
//! so every part of it (layers, the chain, the filter, the codec) can name these freely.

/// How much tighter each new layer's error rate is than the previous one's.
pub const TIGHTENING: f64 = 0.5;

/// The kind of layers a new filter is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Cache-local blocked layers (layerbloom's).
    #[default]
    Blocked,
    /// RedisBloom's layers, bit for bit: data can move back to RedisBloom.
    Classic,
}

/// What a new filter is asked to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterSpec {
    /// Items the first layer holds.
    pub capacity: u64,
    /// The false-positive rate the whole filter keeps under.
    pub error: f64,
    /// Growth factor of each new layer.
    pub expansion: u32,
    /// The filter refuses new items once its first layer is full.
    pub nonscaling: bool,
    pub layout: Layout,
}

impl FilterSpec {
    /// A scaling blocked filter.
    pub fn new(capacity: u64, error: f64, expansion: u32) -> Self {
        FilterSpec {
            capacity,
            error,
            expansion,
            nonscaling: expansion == 0,
            layout: Layout::Blocked,
        }
    }

    /// The error rate of the first layer.
    pub fn first_layer_error(&self) -> f64 {
        if self.nonscaling {
            self.error
        } else {
            self.error * TIGHTENING
        }
    }
}

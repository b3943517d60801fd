//! What a new Bloom filter is asked to be: its spec, the kind of layers it is made of, the
//! ratio by which each new layer's rate tightens, and why a layer cannot be sized for it.
//!
//! A leaf: it imports nothing of the Bloom core, so every part of it (the layers, the chain,
//! the filter, the codec, the math) can name these without importing one another.

/// How much tighter each new layer's error rate is than the previous one's. Layer `i` of a
/// scaling filter of rate `p` is sized for `p·r^(i+1)`, so the rates of all its layers sum to
/// at most `p·r/(1 − r) = p` at `r = 1/2`, the geometric series of "Scalable Bloom Filters"
/// (Almeida, Baquero, Preguiça, Hutchison, Information Processing Letters 101(6), 2007); the
/// chain's rate `1 − Π(1 − p_i)` is at most that sum (`math::combine_fprs`).
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

/// Why a geometry could not be planned.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum SizingError {
    #[error("error rate must be in the open interval (0, 1)")]
    BadErrorRate,
    #[error("capacity must be at least 1")]
    BadCapacity,
    #[error("the layer would have more blocks than can be addressed")]
    TooLarge,
    /// A windowed filter's slice count is outside `1..=window::MAX_SLICES`.
    #[error("the number of slices must be between 1 and 64")]
    BadSlices,
    /// A windowed filter's window is shorter than one millisecond per slice.
    #[error("the window must be at least one millisecond per slice")]
    BadWindow,
}

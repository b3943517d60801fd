//! The pure core of layerbloom: scalable Bloom filters built from cache-local blocked layers,
//! and the byte formats they persist in. Nothing here knows about Redis, so all of it is unit
//! tested, benchmarked and fuzzed directly.

pub mod blocked;
pub mod error;
pub mod hash;
pub mod sizing;

pub use blocked::{BlockedLayer, LayerMeta};
pub use error::FilterError;
pub use hash::ItemHash;
pub use sizing::{Geometry, SizingError};
pub mod chain;
pub use chain::{FilterSpec, ScalableFilter};
pub mod codec;

//! The pure core of layerbloom: scalable Bloom filters built from cache-local blocked layers
//! (or RedisBloom's classic layers, for its data), and the byte formats they persist in.
//! Nothing here knows about Redis, so all of it is unit tested, benchmarked and fuzzed
//! directly.

pub mod bits;
pub mod blocked;
pub mod chain;
pub mod classic;
pub mod codec;
pub mod cuckoo;
pub mod error;
pub mod footprint;
pub mod hash;
pub mod health;
pub mod sizing;
mod zeroed;

pub use blocked::{BlockedLayer, LayerMeta};
pub use chain::{FilterSpec, Layers, Layout, ScalableFilter};
pub use classic::{ClassicLayer, ClassicMeta};
pub use error::FilterError;
pub use hash::ItemHash;
pub use sizing::{Geometry, SizingError};

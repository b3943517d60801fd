//! The pure core of layerbloom: scalable Bloom filters built from cache-local blocked layers
//! (or RedisBloom's classic layers, for its data), and the byte formats they persist in.
//! Nothing here knows about Redis, so all of it is unit tested, benchmarked and fuzzed
//! directly.

pub mod bits;
pub mod bloom;
pub mod cuckoo;
pub mod error;
mod fallible;
pub mod footprint;
pub mod format;
pub mod hash;
pub mod relocate;
pub mod window;
mod zeroed;

pub use bloom::blocked::{BlockedLayer, LayerMeta};
pub use bloom::chain::Chain;
pub use bloom::classic::{ClassicLayer, ClassicMeta, ClassicParams};
pub use bloom::filter::ScalableFilter;
pub use bloom::layer::{Allocation, Layer, LayerSummary};
pub use bloom::sizing::Geometry;
pub use bloom::spec::{FilterSpec, Layout, SizingError};
pub use error::FilterError;
pub use hash::ItemHash;
pub use window::{WindowSpec, WindowedFilter};

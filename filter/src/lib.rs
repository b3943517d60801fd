//! The pure core of layerbloom: scalable Bloom filters built from cache-local blocked layers
//! (or RedisBloom's classic layers, for its data), and the byte formats they persist in.
//! Nothing here knows about Redis, so all of it is unit tested, benchmarked and fuzzed
//! directly.
//!
//! A filter is asked for a capacity and a false-positive rate; past its capacity it grows a
//! new layer at a tighter rate, so the rate it promises holds however far it grows:
//!
//! ```
//! use layerbloom_filter::bloom::health;
//! use layerbloom_filter::{FilterSpec, ScalableFilter};
//!
//! // 10,000 items at a 1% false-positive rate, each new layer twice the last one's size.
//! let spec = FilterSpec::new(10_000, 0.01, 2);
//! let no_limit = u64::MAX; // the most bytes the filter may take (the module's memory limit)
//! let mut filter = ScalableFilter::new(spec, no_limit).unwrap();
//!
//! // Twice its capacity: the first layer fills, and a second one takes the rest.
//! for i in 0..20_000u64 {
//!     filter.add(&i.to_le_bytes(), no_limit).unwrap();
//! }
//! assert_eq!(filter.layer_count(), 2);
//!
//! // No false negatives: every item added is found.
//! assert!((0..20_000u64).all(|i| filter.contains(&i.to_le_bytes())));
//!
//! // Items never added are found at most at the promised rate, measured and estimated.
//! let probes = 100_000u64;
//! let false_positives = (1_000_000..1_000_000 + probes)
//!     .filter(|i| filter.contains(&i.to_le_bytes()))
//!     .count();
//! assert!(false_positives as f64 / probes as f64 <= 0.01);
//! assert!(health::estimated_fpr(&filter) <= 0.01);
//! ```

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

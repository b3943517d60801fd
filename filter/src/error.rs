//! The core's errors. The module maps each to the exact text a client sees.

use crate::bloom::spec::SizingError;

/// Why a filter operation did not happen. Every variant leaves the filter unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FilterError {
    /// A non-scaling filter's only layer is at capacity.
    #[error("non scaling filter is full")]
    Full,
    /// Creating or growing the filter would take it past the per-filter memory limit.
    #[error("the filter would need {needed} bytes, over the per-filter limit of {limit} bytes")]
    OverLimit { needed: u64, limit: u64 },
    /// The allocator refused the memory.
    #[error("could not allocate {bytes} bytes")]
    OutOfMemory { bytes: u64 },
    /// A scaling filter already has the most layers a filter may have (`chain::MAX_LAYERS`).
    #[error("the filter has reached its maximum of {limit} layers")]
    TooManyLayers { limit: usize },
    /// Parameters that no layer can be built for.
    #[error(transparent)]
    Sizing(#[from] SizingError),
}

//! Every error text a client can see, in one place. Several of RedisBloom's texts have no
//! `ERR ` prefix; clients match on them, so they are reproduced exactly.

use layerbloom_filter::bloom::codec::CodecError;
use layerbloom_filter::bloom::merge::{Incompatible, MergeError};
use layerbloom_filter::FilterError;

/// An error reply of a BF command. `Display` is the exact text sent to the client.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BfError {
    /// Replied through `RedisModule_WrongArity`, which writes Redis's standard text.
    #[error("ERR wrong number of arguments")]
    WrongArity,
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR not found")]
    NotFound,
    #[error("ERR item exists")]
    ItemExists,
    #[error("ERR bad error rate")]
    BadErrorRate,
    #[error("ERR error rate must be in the range (0.000000, 1.000000)")]
    ErrorRateRange,
    #[error("ERR bad capacity")]
    BadCapacity,
    #[error("ERR capacity must be in the range [1, 1073741824]")]
    CapacityRange,
    #[error("ERR no expansion")]
    NoExpansion,
    #[error("ERR bad expansion")]
    BadExpansion,
    #[error("ERR expansion must be in the range [0, 32768]")]
    ExpansionRange,
    #[error("Nonscaling filters cannot expand")]
    NonscalingCannotExpand,
    /// BF.RESERVE with a word it does not know (RedisBloom ignores these; a typo such as
    /// `NONSCALNG` would silently create a scaling filter).
    #[error("ERR Unknown argument received")]
    ReserveUnknownArgument,
    #[error("ERR no window")]
    NoWindow,
    #[error("ERR bad window")]
    BadWindow,
    #[error("ERR window must be in the range [1, 1000000000000] milliseconds")]
    WindowRange,
    #[error("ERR no slices")]
    NoSlices,
    #[error("ERR bad slices")]
    BadSlices,
    #[error("ERR slices must be in the range [1, 64]")]
    SlicesRange,
    #[error("ERR SLICES needs WINDOW")]
    SlicesWithoutWindow,
    #[error("ERR window must be at least one millisecond per slice")]
    WindowShorterThanSlices,
    #[error("ERR bad slice")]
    BadSlice,
    #[error("ERR the filter has no window")]
    NotWindowed,
    #[error("ERR the slice is later than the current one")]
    SliceInFuture,
    #[error("ERR without a clock (a replica, AOF replay) BF.WINDOWADVANCE needs a slice")]
    NoSliceWithoutClock,
    #[error("Bad window")]
    InsertBadWindow,
    #[error("Bad slices")]
    InsertBadSlices,
    #[error("Bad error rate")]
    InsertBadErrorRate,
    #[error("Bad capacity")]
    InsertBadCapacity,
    #[error("Bad expansion")]
    InsertBadExpansion,
    #[error("Unknown argument received")]
    InsertUnknownArgument,
    #[error("ERR non scaling filter is full")]
    Full,
    #[error(
        "ERR Insufficient memory to create filter: it would need {needed} bytes, over the \
         per-filter limit bf-max-filter-memory of {limit} bytes"
    )]
    CreateOverLimit { needed: u64, limit: u64 },
    /// RedisBloom's text for a growth that cannot be done, then why.
    #[error(
        "ERR problem inserting into filter: its next layer would bring it to {needed} bytes, \
         over the per-filter limit bf-max-filter-memory of {limit} bytes"
    )]
    GrowOverLimit { needed: u64, limit: u64 },
    #[error("ERR could not create filter")]
    CouldNotCreate,
    #[error("ERR problem inserting into filter")]
    InsertProblem,
    /// Growth refused: the filter has `layerbloom_filter::bloom::chain::MAX_LAYERS` layers.
    #[error(
        "ERR problem inserting into filter: the filter has reached its maximum of {limit} layers"
    )]
    TooManyLayers { limit: usize },
    #[error("Invalid information value")]
    InvalidInfo,
    #[error("Second argument must be numeric")]
    ScanDumpNotNumeric,
    #[error("ERR Second argument must be numeric")]
    LoadChunkNotNumeric,
    #[error("ERR received bad data")]
    BadData,
    #[error("ERR invalid offset - no link found")]
    NoLink,
    #[error("ERR invalid chunk - Too big for current filter")]
    TooBig,
    #[error("ERR internal error in layerbloom, see the server log")]
    Internal,
    /// The allocator refused the few bytes that view a long command's arguments.
    #[error("OOM not enough memory to read the command's arguments")]
    ArgumentsOutOfMemory,
    /// BF.MERGE of filters that do not share their parameters and layout: which source
    /// differs from which (the first, or the longest for a layer the first lacks), and in what.
    #[error("ERR incompatible filters: {0}")]
    MergeIncompatible(Incompatible),
    #[error(
        "ERR the merged filter would need {needed} bytes, over the per-filter limit \
         bf-max-filter-memory of {limit} bytes"
    )]
    MergeOverLimit { needed: u64, limit: u64 },
    /// A new layer would take used memory past `maxmemory`: Redis's own text for a deny-oom
    /// command refused at maxmemory, so clients handle both alike.
    #[error("OOM command not allowed when used memory > 'maxmemory'.")]
    OverMaxmemory,

    // The CF commands' texts (RedisBloom's where it has one).
    #[error("Capacity must be at least (BucketSize * 2)")]
    CfCapacityTooSmall,
    #[error("Couldn't parse BUCKETSIZE")]
    CfBucketSizeNotNumeric,
    #[error("Couldn't parse MAXITERATIONS")]
    CfMaxIterationsNotNumeric,
    #[error("Couldn't parse EXPANSION")]
    CfExpansionNotNumeric,
    #[error("BUCKETSIZE: value must be an integer between 1 and 255, inclusive.")]
    CfBucketSizeRange,
    #[error("MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.")]
    CfMaxIterationsRange,
    #[error("EXPANSION: value must be an integer between 0 and 32768, inclusive.")]
    CfExpansionRange,
    /// A repeated option: RedisBloom takes the first silently, so `EXPANSION 2 EXPANSION 4`
    /// would not do what the second word says.
    #[error("ERR option {0} given more than once")]
    CfRepeatedOption(&'static str),
    /// A filter that cannot be allocated at all (RedisBloom's text).
    #[error("ERR Insufficient memory to create filter")]
    CfInsufficientMemory,
    #[error("Not found")]
    CfNotFound,
    #[error("Cuckoo filter was not found")]
    CfCompactNotFound,
    #[error("Filter is full")]
    CfFull,
    #[error("Maximum expansions reached")]
    CfMaxExpansions,
    #[error("Invalid position")]
    CfInvalidPosition,
    #[error("Invalid header")]
    CfInvalidHeader,
    #[error("Couldn't create filter!")]
    CfCouldNotCreate,
    #[error("Couldn't load chunk!")]
    CfCouldNotLoadChunk,
    #[error(
        "ERR problem inserting into filter: its next sub-filter would bring it to {needed} \
         bytes, over the per-filter limit bf-max-filter-memory of {limit} bytes"
    )]
    CfGrowOverLimit { needed: u64, limit: u64 },
    #[error(
        "ERR problem inserting into filter: the filter has reached its maximum of {limit} \
         sub-filters"
    )]
    CfTooManySubFilters { limit: usize },
    /// A CF.INSERT / CF.INSERTNX stopped where its items' eviction walks could exceed the
    /// command's budget (`layerbloom_filter::cuckoo::WALK_BUDGET`).
    #[error(
        "ERR problem inserting into filter: this command spent its eviction budget of {budget} \
         units of work; this item and the ones after it were not inserted"
    )]
    CfKickBudget { budget: u64 },
    /// layerbloom's extension: `ERROR e` of CF.RESERVE / CF.INSERT.
    #[error("ERR ERROR: value must be a number between 0 and 1, exclusive")]
    CfErrorRange,
    #[error(
        "ERR ERROR: no fingerprint of at most 32 bits reaches this rate (the smallest is about \
         1e-7)"
    )]
    CfErrorTooSmall,
    #[error("ERR BUCKETSIZE: with ERROR, value must be 3, 4, 6 or 8")]
    CfErrorBucketSize,
}

impl BfError {
    /// The error of a failed creation.
    pub fn from_create(e: FilterError) -> Self {
        match e {
            FilterError::OverLimit { needed, limit } => BfError::CreateOverLimit { needed, limit },
            FilterError::Full => BfError::Full,
            FilterError::TooManyLayers { limit } => BfError::TooManyLayers { limit },
            FilterError::OutOfMemory { .. } | FilterError::Sizing(_) => BfError::CouldNotCreate,
        }
    }

    /// The error of a failed add.
    pub fn from_add(e: FilterError) -> Self {
        match e {
            FilterError::Full => BfError::Full,
            FilterError::OverLimit { needed, limit } => BfError::GrowOverLimit { needed, limit },
            FilterError::TooManyLayers { limit } => BfError::TooManyLayers { limit },
            FilterError::OutOfMemory { .. } | FilterError::Sizing(_) => BfError::InsertProblem,
        }
    }

    /// The error of a refused BF.MERGE (the per-filter limit's; `maxmemory`'s is told apart
    /// by the caller, which knows the limits).
    pub fn from_merge(e: MergeError) -> Self {
        match e {
            MergeError::Incompatible(i) => BfError::MergeIncompatible(i),
            MergeError::Filter(FilterError::OverLimit { needed, limit }) => {
                BfError::MergeOverLimit { needed, limit }
            }
            MergeError::Filter(FilterError::TooManyLayers { limit }) => {
                BfError::TooManyLayers { limit }
            }
            MergeError::NoSources | MergeError::Filter(_) => BfError::CouldNotCreate,
        }
    }

    /// The error of a rejected `BF.LOADCHUNK`.
    pub fn from_codec(e: CodecError) -> Self {
        match e {
            CodecError::BadData(_) => BfError::BadData,
            CodecError::NoLink => BfError::NoLink,
            CodecError::TooBig => BfError::TooBig,
            CodecError::Filter(f) => BfError::from_create(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use layerbloom_filter::bloom::merge::Mismatch;

    /// Clients match on these texts: a change here breaks them.
    #[test]
    fn every_client_visible_text_is_pinned() {
        let table: &[(BfError, &str)] = &[
            (
                BfError::WrongType,
                "WRONGTYPE Operation against a key holding the wrong kind of value",
            ),
            (BfError::NotFound, "ERR not found"),
            (BfError::ItemExists, "ERR item exists"),
            (BfError::BadErrorRate, "ERR bad error rate"),
            (
                BfError::ErrorRateRange,
                "ERR error rate must be in the range (0.000000, 1.000000)",
            ),
            (BfError::BadCapacity, "ERR bad capacity"),
            (
                BfError::CapacityRange,
                "ERR capacity must be in the range [1, 1073741824]",
            ),
            (BfError::NoExpansion, "ERR no expansion"),
            (BfError::BadExpansion, "ERR bad expansion"),
            (
                BfError::ExpansionRange,
                "ERR expansion must be in the range [0, 32768]",
            ),
            (
                BfError::NonscalingCannotExpand,
                "Nonscaling filters cannot expand",
            ),
            (
                BfError::ReserveUnknownArgument,
                "ERR Unknown argument received",
            ),
            (BfError::NoWindow, "ERR no window"),
            (BfError::BadWindow, "ERR bad window"),
            (
                BfError::WindowRange,
                "ERR window must be in the range [1, 1000000000000] milliseconds",
            ),
            (BfError::NoSlices, "ERR no slices"),
            (BfError::BadSlices, "ERR bad slices"),
            (
                BfError::SlicesRange,
                "ERR slices must be in the range [1, 64]",
            ),
            (BfError::SlicesWithoutWindow, "ERR SLICES needs WINDOW"),
            (
                BfError::WindowShorterThanSlices,
                "ERR window must be at least one millisecond per slice",
            ),
            (BfError::BadSlice, "ERR bad slice"),
            (BfError::NotWindowed, "ERR the filter has no window"),
            (
                BfError::SliceInFuture,
                "ERR the slice is later than the current one",
            ),
            (
                BfError::NoSliceWithoutClock,
                "ERR without a clock (a replica, AOF replay) BF.WINDOWADVANCE needs a slice",
            ),
            (BfError::InsertBadWindow, "Bad window"),
            (BfError::InsertBadSlices, "Bad slices"),
            (BfError::InsertBadErrorRate, "Bad error rate"),
            (BfError::InsertBadCapacity, "Bad capacity"),
            (BfError::InsertBadExpansion, "Bad expansion"),
            (BfError::InsertUnknownArgument, "Unknown argument received"),
            (BfError::Full, "ERR non scaling filter is full"),
            (
                BfError::CreateOverLimit {
                    needed: 10,
                    limit: 5,
                },
                "ERR Insufficient memory to create filter: it would need 10 bytes, over the \
                 per-filter limit bf-max-filter-memory of 5 bytes",
            ),
            (
                BfError::GrowOverLimit {
                    needed: 10,
                    limit: 5,
                },
                "ERR problem inserting into filter: its next layer would bring it to 10 bytes, \
                 over the per-filter limit bf-max-filter-memory of 5 bytes",
            ),
            (BfError::CouldNotCreate, "ERR could not create filter"),
            (BfError::InsertProblem, "ERR problem inserting into filter"),
            (
                BfError::TooManyLayers { limit: 1024 },
                "ERR problem inserting into filter: the filter has reached its maximum of 1024 \
                 layers",
            ),
            (BfError::InvalidInfo, "Invalid information value"),
            (
                BfError::ScanDumpNotNumeric,
                "Second argument must be numeric",
            ),
            (
                BfError::LoadChunkNotNumeric,
                "ERR Second argument must be numeric",
            ),
            (BfError::BadData, "ERR received bad data"),
            (BfError::NoLink, "ERR invalid offset - no link found"),
            (
                BfError::TooBig,
                "ERR invalid chunk - Too big for current filter",
            ),
            (
                BfError::ArgumentsOutOfMemory,
                "OOM not enough memory to read the command's arguments",
            ),
            (
                BfError::MergeIncompatible(Incompatible {
                    source: 1,
                    against: 0,
                    mismatch: Mismatch::ErrorRate {
                        first: 0.01,
                        this: 0.001,
                    },
                }),
                "ERR incompatible filters: source 2 has error rate 0.001, source 1 has error \
                 rate 0.01",
            ),
            (
                BfError::MergeOverLimit {
                    needed: 10,
                    limit: 5,
                },
                "ERR the merged filter would need 10 bytes, over the per-filter limit \
                 bf-max-filter-memory of 5 bytes",
            ),
            (
                BfError::OverMaxmemory,
                "OOM command not allowed when used memory > 'maxmemory'.",
            ),
            (
                BfError::CfCapacityTooSmall,
                "Capacity must be at least (BucketSize * 2)",
            ),
            (BfError::CfBucketSizeNotNumeric, "Couldn't parse BUCKETSIZE"),
            (
                BfError::CfMaxIterationsNotNumeric,
                "Couldn't parse MAXITERATIONS",
            ),
            (BfError::CfExpansionNotNumeric, "Couldn't parse EXPANSION"),
            (
                BfError::CfBucketSizeRange,
                "BUCKETSIZE: value must be an integer between 1 and 255, inclusive.",
            ),
            (
                BfError::CfMaxIterationsRange,
                "MAXITERATIONS: value must be an integer between 1 and 65535, inclusive.",
            ),
            (
                BfError::CfExpansionRange,
                "EXPANSION: value must be an integer between 0 and 32768, inclusive.",
            ),
            (
                BfError::CfRepeatedOption("EXPANSION"),
                "ERR option EXPANSION given more than once",
            ),
            (
                BfError::CfInsufficientMemory,
                "ERR Insufficient memory to create filter",
            ),
            (BfError::CfNotFound, "Not found"),
            (BfError::CfCompactNotFound, "Cuckoo filter was not found"),
            (BfError::CfFull, "Filter is full"),
            (BfError::CfMaxExpansions, "Maximum expansions reached"),
            (BfError::CfInvalidPosition, "Invalid position"),
            (BfError::CfInvalidHeader, "Invalid header"),
            (BfError::CfCouldNotCreate, "Couldn't create filter!"),
            (BfError::CfCouldNotLoadChunk, "Couldn't load chunk!"),
            (
                BfError::CfErrorRange,
                "ERR ERROR: value must be a number between 0 and 1, exclusive",
            ),
            (
                BfError::CfErrorBucketSize,
                "ERR BUCKETSIZE: with ERROR, value must be 3, 4, 6 or 8",
            ),
            (
                BfError::CfGrowOverLimit {
                    needed: 10,
                    limit: 5,
                },
                "ERR problem inserting into filter: its next sub-filter would bring it to 10 \
                 bytes, over the per-filter limit bf-max-filter-memory of 5 bytes",
            ),
            (
                BfError::CfTooManySubFilters { limit: 1024 },
                "ERR problem inserting into filter: the filter has reached its maximum of 1024 \
                 sub-filters",
            ),
            (
                BfError::CfKickBudget { budget: 1 << 24 },
                "ERR problem inserting into filter: this command spent its eviction budget of \
                 16777216 units of work; this item and the ones after it were not inserted",
            ),
        ];
        for (error, text) in table {
            assert_eq!(&error.to_string(), text);
        }
    }

    #[test]
    fn core_errors_map_to_redisbloom_texts() {
        assert_eq!(BfError::from_add(FilterError::Full), BfError::Full);
        assert_eq!(
            BfError::from_add(FilterError::OutOfMemory { bytes: 1 }),
            BfError::InsertProblem
        );
        assert_eq!(
            BfError::from_create(FilterError::OutOfMemory { bytes: 1 }),
            BfError::CouldNotCreate
        );
        assert_eq!(BfError::from_codec(CodecError::NoLink), BfError::NoLink);
        assert_eq!(BfError::from_codec(CodecError::TooBig), BfError::TooBig);
        assert_eq!(
            BfError::from_codec(CodecError::BadData("x")),
            BfError::BadData
        );
    }
}

//! A cuckoo filter of either layout: RedisBloom's ([`CuckooFilter`], 8-bit fingerprints, its
//! formats bit for bit) or the extension's ([`RatedFilter`], a rate of one's choosing). Every
//! command works on this one type; each layout keeps its own code and formats.

use std::borrow::Cow;

use super::codec::{self, RdbField};
use super::health::{self, Occupancy};
use super::rate::Widths;
use super::rated::RatedFilter;
use super::rated_codec;
use super::{CuckooError, CuckooFilter, Info, Limits, Params};
use crate::error::FilterError;
use crate::format::{CodecError, Strictness};

/// A cuckoo filter of either layout. The extension's is boxed so that RedisBloom's, the
/// common one, costs no more than it did alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyFilter {
    Redis(CuckooFilter),
    Rated(Box<RatedFilter>),
}

/// Calls the same method on either layout.
macro_rules! either {
    ($self:expr, $f:ident => $body:expr) => {
        match $self {
            AnyFilter::Redis($f) => $body,
            AnyFilter::Rated($f) => $body,
        }
    };
}

impl From<CuckooFilter> for AnyFilter {
    fn from(f: CuckooFilter) -> Self {
        AnyFilter::Redis(f)
    }
}

impl From<RatedFilter> for AnyFilter {
    fn from(f: RatedFilter) -> Self {
        AnyFilter::Rated(Box::new(f))
    }
}

impl Occupancy for AnyFilter {
    fn sub_filter_count(&self) -> usize {
        either!(self, f => f.sub_filter_count())
    }

    fn sub_occupancy(&self, i: usize) -> (u64, u64) {
        either!(self, f => f.sub_occupancy(i))
    }
}

impl AnyFilter {
    /// Whether this is an extension filter (stored under its own module type).
    pub fn is_rated(&self) -> bool {
        matches!(self, AnyFilter::Rated(_))
    }

    pub fn params(&self) -> Params {
        either!(self, f => f.params())
    }

    pub fn items(&self) -> u64 {
        either!(self, f => f.items())
    }

    pub fn deletes(&self) -> u64 {
        either!(self, f => f.deletes())
    }

    pub fn deletes_not_found(&self) -> u64 {
        either!(self, f => f.deletes_not_found())
    }

    pub fn buckets(&self) -> u64 {
        either!(self, f => f.buckets())
    }

    pub fn sub_filter_count(&self) -> usize {
        Occupancy::sub_filter_count(self)
    }

    /// Each sub-filter's fingerprint width, oldest first.
    pub fn fingerprint_bits(&self) -> Vec<u8> {
        match self {
            AnyFilter::Redis(f) => vec![8; f.sub_filters().len()],
            AnyFilter::Rated(f) => f.sub_filters().iter().map(|s| s.bits()).collect(),
        }
    }

    /// The rate asked for at creation; `None` for RedisBloom's layout.
    pub fn error(&self) -> Option<f64> {
        match self {
            AnyFilter::Redis(_) => None,
            AnyFilter::Rated(f) => Some(f.error()),
        }
    }

    /// The widths rule of an extension filter.
    pub fn widths(&self) -> Option<Widths> {
        match self {
            AnyFilter::Redis(_) => None,
            AnyFilter::Rated(f) => Some(f.widths()),
        }
    }

    pub fn memory_usage(&self) -> u64 {
        either!(self, f => f.memory_usage())
    }

    /// `memory_usage` of the oldest `count` sub-filters alone.
    pub fn memory_usage_of_first(&self, count: usize) -> u64 {
        either!(self, f => f.memory_usage_of_first(count))
    }

    /// Offers every heap block the filter holds to `to` (active defragmentation), the
    /// extension's box included (the value's own box is its owner's to offer).
    pub fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator) {
        match self {
            AnyFilter::Redis(f) => f.relocate(to),
            AnyFilter::Rated(f) => {
                f.relocate(to);
                crate::relocate::relocate_box(f, to);
            }
        }
    }

    pub fn try_clone(&self) -> Result<Self, FilterError> {
        Ok(match self {
            AnyFilter::Redis(f) => AnyFilter::Redis(f.try_clone()?),
            AnyFilter::Rated(f) => AnyFilter::from(f.try_clone()?),
        })
    }

    /// `CF.INFO`'s eight figures; `Size` counts an extension filter's packed slot bytes.
    pub fn info(&self) -> Info {
        match self {
            AnyFilter::Redis(f) => f.info(),
            AnyFilter::Rated(f) => {
                let p = f.params();
                let subs = f.sub_filters().len() as u64;
                Info {
                    size: 40u64
                        .saturating_add(16u64.saturating_mul(subs))
                        .saturating_add(f.slot_bytes()),
                    buckets: f.buckets(),
                    filters: subs,
                    items: f.items(),
                    deletes: f.deletes(),
                    bucket_size: u64::from(p.bucket_size),
                    expansion: u64::from(p.expansion),
                    max_iterations: u64::from(p.max_iterations),
                }
            }
        }
    }

    /// `CF.DEBUG`'s line: RedisBloom's, then an extension filter's widths and rate.
    pub fn debug_line(&self) -> String {
        match self {
            AnyFilter::Redis(f) => f.debug_line(),
            AnyFilter::Rated(f) => {
                let p = f.params();
                let widths: Vec<String> =
                    self.fingerprint_bits().iter().map(u8::to_string).collect();
                format!(
                    "bktsize:{} buckets:{} items:{} deletes:{} filters:{} max_iterations:{} \
                     expansion:{} fingerprint:{} error:{}",
                    p.bucket_size,
                    f.buckets(),
                    f.items(),
                    f.deletes(),
                    f.sub_filters().len(),
                    p.max_iterations,
                    p.expansion,
                    widths.join(","),
                    f.error()
                )
            }
        }
    }

    /// The estimated false-positive rate of a lookup in the whole filter.
    pub fn estimated_fpr(&self) -> f64 {
        match self {
            AnyFilter::Redis(f) => health::estimated_fpr(f),
            AnyFilter::Rated(f) => f.estimated_fpr(),
        }
    }

    pub fn loads(&self) -> Vec<f64> {
        health::loads(self)
    }

    pub fn contains(&self, item: &[u8]) -> bool {
        either!(self, f => f.contains(item))
    }

    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        either!(self, f => f.contains_many(items))
    }

    pub fn count(&self, item: &[u8]) -> u64 {
        either!(self, f => f.count(item))
    }

    pub fn check_expansions(&self, limits: &Limits) -> Result<(), CuckooError> {
        either!(self, f => f.check_expansions(limits))
    }

    pub fn add(&mut self, item: &[u8], limits: &Limits) -> Result<(), CuckooError> {
        either!(self, f => f.add(item, limits))
    }

    pub fn add_nx(&mut self, item: &[u8], limits: &Limits) -> Result<bool, CuckooError> {
        either!(self, f => f.add_nx(item, limits))
    }

    pub fn insert_many(
        &mut self,
        items: &[&[u8]],
        nx: bool,
        limits: &Limits,
    ) -> Result<Vec<Result<bool, CuckooError>>, CuckooError> {
        either!(self, f => f.insert_many(items, nx, limits))
    }

    /// `CuckooFilter::insert_many_within`: a batch within what is left of the command's
    /// eviction budget.
    pub fn insert_many_within(
        &mut self,
        items: &[&[u8]],
        nx: bool,
        limits: &Limits,
        kicks: &mut u64,
    ) -> Result<Vec<Result<bool, CuckooError>>, CuckooError> {
        either!(self, f => f.insert_many_within(items, nx, limits, kicks))
    }

    pub fn delete(&mut self, item: &[u8]) -> bool {
        either!(self, f => f.delete(item))
    }

    pub fn compact(&mut self) {
        either!(self, f => f.compact())
    }

    // ---- formats ------------------------------------------------------------------------

    /// The `CF.SCANDUMP` header (RedisBloom's 38 bytes, or the extension's 52).
    pub fn header(&self) -> Vec<u8> {
        match self {
            AnyFilter::Redis(f) => codec::Header::of(f).encode().to_vec(),
            AnyFilter::Rated(f) => rated_codec::RatedHeader::of(f).encode().to_vec(),
        }
    }

    /// An empty filter from a `CF.LOADCHUNK` header of either layout (told apart by length).
    pub fn from_header(
        bytes: &[u8],
        strictness: Strictness,
        max_bytes: u64,
    ) -> Result<Self, HeaderError> {
        if bytes.len() == rated_codec::HEADER_BYTES {
            let header =
                rated_codec::RatedHeader::decode(bytes).map_err(|_| HeaderError::Invalid)?;
            rated_codec::filter_from_header(&header, strictness, max_bytes)
                .map(AnyFilter::from)
                .map_err(HeaderError::Refused)
        } else {
            let header = codec::Header::decode(bytes).map_err(|_| HeaderError::Invalid)?;
            codec::filter_from_header(&header, strictness, max_bytes)
                .map(AnyFilter::Redis)
                .map_err(HeaderError::Refused)
        }
    }

    /// `CF.SCANDUMP key it`.
    pub fn dump_chunk(&self, it: u64) -> Option<(u64, Cow<'_, [u8]>)> {
        match self {
            AnyFilter::Redis(f) => codec::dump_chunk(f, it),
            AnyFilter::Rated(f) => rated_codec::dump_chunk(f, it),
        }
    }

    /// `CF.LOADCHUNK key it data` for a data chunk.
    pub fn load_chunk(&mut self, it: u64, data: &[u8]) -> Result<(), CodecError> {
        match self {
            AnyFilter::Redis(f) => codec::load_chunk(f, it, data),
            AnyFilter::Rated(f) => rated_codec::load_chunk(f, it, data),
        }
    }

    /// The RDB value's fields, in its type's encoding.
    pub fn rdb_fields(&self) -> Box<dyn Iterator<Item = RdbField<'_>> + '_> {
        match self {
            AnyFilter::Redis(f) => Box::new(codec::rdb_fields(f)),
            AnyFilter::Rated(f) => Box::new(rated_codec::rdb_fields(f)),
        }
    }

    /// Each sub-filter's persisted slot bytes, oldest first, with the largest piece the
    /// stream and the AOF rewrite cut it into.
    pub fn slot_arrays(&self) -> Vec<(&[u8], u64)> {
        match self {
            AnyFilter::Redis(f) => f
                .sub_filters()
                .iter()
                .map(|s| (s.as_bytes(), codec::MAX_CHUNK_BYTES))
                .collect(),
            AnyFilter::Rated(f) => f
                .sub_filters()
                .iter()
                .map(|s| (s.as_bytes(), rated_codec::piece_bytes(s.bits())))
                .collect(),
        }
    }
}

/// Why a `CF.LOADCHUNK` header made no filter.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderError {
    /// Not a header of either layout.
    Invalid,
    /// A header whose fields are refused, or whose filter is over a limit.
    Refused(CodecError),
}

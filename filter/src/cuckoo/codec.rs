//! A cuckoo filter's byte formats, RedisBloom's exactly: the RDB value's fields (encoding
//! version 4, and the legacy 0..3), and the `CF.SCANDUMP` / `CF.LOADCHUNK` stream.
//!
//! # RDB value (`MBbloomCF`)
//! Encoding version 4, every number an RDB unsigned:
//! `sub-filters, buckets, items, deletes, bucket size, max iterations, expansion`, then per
//! sub-filter its bucket count and its slot string (`bucket count × bucket size` bytes).
//! Versions 0..3: `sub-filters, buckets, items`, then per sub-filter its slot string; bucket
//! size 2, 20 iterations, expansion 1 and no deletes are implied, every sub-filter having
//! `buckets` buckets.
//!
//! # `CF.SCANDUMP` stream
//! First a 38-byte header, packed little-endian: `u64 items, u64 buckets (the first
//! sub-filter's), u64 deletes, u64 sub-filters, u16 bucket size, u16 max iterations, u16
//! expansion`, at iterator 1. Then each sub-filter's slots, oldest first, whole when at most
//! 16 MiB, else in 16 MiB pieces; each chunk's iterator is the position just after it (1 +
//! the bytes sent so far). A filter with no items answers "done" at once (RedisBloom's rule:
//! its copy creates no key).
//!
//! # What is refused
//! Everything is validated before anything is allocated or indexed, and refused with an
//! error, where RedisBloom asserts (a slot string of the wrong length), divides by zero
//! (bucket size 0), truncates (a sub-filter count above 65535) or loads what its own
//! commands could never create (bucket counts or expansions that are not powers of two,
//! expansion 0 with several sub-filters, 0 iterations, sub-filters whose sizes do not follow
//! `buckets × expansion^i`). No RedisBloom filter made by its commands has any of these, so
//! every real RedisBloom value still loads.

use std::borrow::Cow;

use super::filter::{slot_bytes, CuckooFilter, SubFilter};
use super::params::{Params, MAX_SUB_FILTERS};
pub use super::stream::RdbField;
use super::stream::{self, Budget};
use crate::error::FilterError;
use crate::fallible::try_vec;
use crate::footprint::allocation;
use crate::format::{CodecError, RdbSource, Strictness};

/// Bytes of the `CF.SCANDUMP` header.
pub const HEADER_BYTES: usize = 38;
/// Largest `CF.SCANDUMP` chunk of slots.
pub const MAX_CHUNK_BYTES: u64 = crate::format::MAX_CHUNK_BYTES as u64;
/// The encoding version this build writes (RedisBloom's current one).
pub const ENCVER: i32 = 4;

/// The `CF.SCANDUMP` header: the whole filter but its slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub items: u64,
    /// The first sub-filter's bucket count.
    pub buckets: u64,
    pub deletes: u64,
    pub sub_filters: u64,
    pub bucket_size: u16,
    pub max_iterations: u16,
    pub expansion: u16,
}

impl Header {
    /// A filter's header.
    pub fn of(filter: &CuckooFilter) -> Self {
        let p = filter.params();
        Header {
            items: filter.items(),
            buckets: filter.buckets(),
            deletes: filter.deletes(),
            sub_filters: filter.sub_filters().len() as u64,
            bucket_size: u16::from(p.bucket_size),
            max_iterations: p.max_iterations,
            expansion: p.expansion,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[0..8].copy_from_slice(&self.items.to_le_bytes());
        out[8..16].copy_from_slice(&self.buckets.to_le_bytes());
        out[16..24].copy_from_slice(&self.deletes.to_le_bytes());
        out[24..32].copy_from_slice(&self.sub_filters.to_le_bytes());
        out[32..34].copy_from_slice(&self.bucket_size.to_le_bytes());
        out[34..36].copy_from_slice(&self.max_iterations.to_le_bytes());
        out[36..38].copy_from_slice(&self.expansion.to_le_bytes());
        out
    }

    /// Reads a header's fields (exactly 38 bytes); `shape` checks them.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let b: &[u8; HEADER_BYTES] = bytes
            .try_into()
            .map_err(|_| CodecError::BadData("a cuckoo header is 38 bytes"))?;
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Ok(Header {
            items: u64_at(0),
            buckets: u64_at(8),
            deletes: u64_at(16),
            sub_filters: u64_at(24),
            bucket_size: u16_at(32),
            max_iterations: u16_at(34),
            expansion: u16_at(36),
        })
    }

    /// The settings and each sub-filter's slot bytes, once every field is checked. A
    /// client's header (`Strictness::LoadChunk`) may not count more items than it has
    /// slots; one replayed from the AOF or a primary is taken as its filter was.
    pub fn shape(&self, strictness: Strictness) -> Result<(Params, Vec<u64>), CodecError> {
        let params = check_shape(
            self.sub_filters,
            self.buckets,
            u64::from(self.bucket_size),
            u64::from(self.max_iterations),
            u64::from(self.expansion),
        )?;
        let lengths = sub_lengths(self.sub_filters, self.buckets, params)?;
        if strictness == Strictness::LoadChunk {
            let slots = lengths.iter().try_fold(0u64, |a, &b| a.checked_add(b));
            if slots.is_none_or(|s| self.items > s) {
                return Err(CodecError::BadData("more items than slots"));
            }
        }
        Ok((params, lengths))
    }

    /// Bytes the filter will take once built (`CuckooFilter::memory_usage`).
    pub fn memory_bytes(&self, strictness: Strictness) -> Result<u64, CodecError> {
        let (_, lengths) = self.shape(strictness)?;
        Ok(CuckooFilter::modelled_bytes(lengths.len(), lengths))
    }
}

/// Checks a filter's persisted settings; see the module documentation for what is refused.
pub(crate) fn check_shape(
    sub_filters: u64,
    buckets: u64,
    bucket_size: u64,
    max_iterations: u64,
    expansion: u64,
) -> Result<Params, CodecError> {
    if sub_filters == 0 {
        return Err(CodecError::BadData(
            "a cuckoo filter has at least one sub-filter",
        ));
    }
    if sub_filters > MAX_SUB_FILTERS as u64 {
        return Err(CodecError::BadData(
            "more sub-filters than a filter may have",
        ));
    }
    if !buckets.is_power_of_two() {
        return Err(CodecError::BadData(
            "the bucket count must be a power of two",
        ));
    }
    let params = Params {
        bucket_size: u8::try_from(bucket_size)
            .map_err(|_| CodecError::BadData("bucket size out of range"))?,
        max_iterations: u16::try_from(max_iterations)
            .map_err(|_| CodecError::BadData("max iterations out of range"))?,
        expansion: u16::try_from(expansion)
            .map_err(|_| CodecError::BadData("expansion out of range"))?,
    };
    params.check().map_err(|_| {
        CodecError::BadData("bucket size, max iterations or expansion out of range")
    })?;
    if params.expansion == 0 && sub_filters > 1 {
        return Err(CodecError::BadData(
            "a non-scaling filter has one sub-filter",
        ));
    }
    Ok(params)
}

/// Each sub-filter's slot bytes: sub-filter `i` has `buckets × expansion^i` buckets.
fn sub_lengths(sub_filters: u64, buckets: u64, params: Params) -> Result<Vec<u64>, CodecError> {
    let too_big = CodecError::Filter(FilterError::OutOfMemory { bytes: u64::MAX });
    let mut out = try_vec(usize::try_from(sub_filters).map_err(|_| too_big.clone())?)?;
    let mut n = buckets;
    for i in 0..sub_filters {
        if i > 0 {
            n = n
                .checked_mul(u64::from(params.expansion))
                .ok_or(too_big.clone())?;
        }
        out.push(slot_bytes(n, params.bucket_size).ok_or(too_big.clone())?);
    }
    Ok(out)
}

/// An empty filter of a header's shape (its slots come in later chunks), refused if it
/// would take more than `max_bytes` by the allocator model.
pub fn filter_from_header(
    header: &Header,
    strictness: Strictness,
    max_bytes: u64,
) -> Result<CuckooFilter, CodecError> {
    let (params, lengths) = header.shape(strictness)?;
    let needed = CuckooFilter::modelled_bytes(lengths.len(), lengths.iter().copied());
    if needed > max_bytes {
        return Err(FilterError::OverLimit {
            needed,
            limit: max_bytes,
        }
        .into());
    }
    let mut subs = try_vec(lengths.len())?;
    for &len in &lengths {
        let buckets = len / u64::from(params.bucket_size);
        // Only a header with items has chunks to follow: an empty one is a creation (how a
        // replica and the AOF receive CF.RESERVE), whose sparse adds must not fault 2 MiB
        // pages in.
        subs.push(if header.items > 0 {
            SubFilter::zeroed_for_load(buckets, params.bucket_size)?
        } else {
            SubFilter::zeroed(buckets, params.bucket_size)?
        });
    }
    Ok(CuckooFilter::from_parts(
        subs,
        header.items,
        header.deletes,
        params,
    ))
}

/// `CF.SCANDUMP key it`: the next iterator and its bytes, or `None` when done (`[0, nil]`).
/// A filter with no items is done at once. An iterator inside a sub-filter answers the
/// whole sub-filter holding it (the 16 MiB piece holding it, for larger ones) with
/// `it + its length`, as RedisBloom answers.
pub fn dump_chunk(filter: &CuckooFilter, it: u64) -> Option<(u64, Cow<'_, [u8]>)> {
    if filter.items() == 0 {
        return None;
    }
    if it == 0 {
        return Some((1, Cow::Owned(Header::of(filter).encode().to_vec())));
    }
    let subs = filter.sub_filters();
    let (index, start) = stream::locate(subs, it - 1)?;
    let bytes = subs[index].as_bytes();
    let len = bytes.len() as u64;
    let piece = if len <= MAX_CHUNK_BYTES {
        bytes
    } else {
        let from = (it - 1 - start) / MAX_CHUNK_BYTES * MAX_CHUNK_BYTES;
        let to = (from + MAX_CHUNK_BYTES).min(len);
        &bytes[from as usize..to as usize]
    };
    Some((it.saturating_add(piece.len() as u64), Cow::Borrowed(piece)))
}

/// `CF.LOADCHUNK key it data` for a data chunk (iterator 1 is the header: see
/// `filter_from_header`): `data` goes at position `it - 1 - len(data)`, inside one
/// sub-filter. A chunk may fill empty slots or repeat what a slot holds, never overwrite a
/// fingerprint: a live filter's items cannot be lost to a stray chunk (RedisBloom copies it
/// over them). Nothing changes when refused.
pub fn load_chunk(filter: &mut CuckooFilter, it: u64, data: &[u8]) -> Result<(), CodecError> {
    let offset = stream::chunk_start(it, data.len())?;
    let (index, start) = stream::locate(filter.sub_filters(), offset).ok_or(CodecError::NoLink)?;
    let sub = &mut filter.sub_filters_mut()[index];
    let within = offset - start;
    let len = data.len() as u64;
    if within + len > sub.slots() {
        return Err(CodecError::TooBig);
    }
    let target = &sub.as_bytes()[within as usize..(within + len) as usize];
    if target.iter().zip(data).any(|(&t, &d)| t != 0 && t != d) {
        return Err(CodecError::BadData(
            "the chunk would overwrite fingerprints of the filter",
        ));
    }
    sub.write_slots(within as usize, data);
    Ok(())
}

/// The filter's RDB value at encoding version 4 (`ENCVER`), field by field.
pub fn rdb_fields(filter: &CuckooFilter) -> impl Iterator<Item = RdbField<'_>> {
    let p = filter.params();
    let head = [
        filter.sub_filters().len() as u64,
        filter.buckets(),
        filter.items(),
        filter.deletes(),
        u64::from(p.bucket_size),
        u64::from(p.max_iterations),
        u64::from(p.expansion),
    ];
    stream::rdb_fields(head, filter.sub_filters())
}

/// The highest encoding version this build reads.
pub const MAX_ENCVER: i32 = 4;

/// Decodes an RDB value of encoding version 0..=4. With `budget` (the bytes the filter may
/// take by the allocator model: a client's RESTORE), each sub-filter is charged before its
/// slots are read, so a payload is refused before it builds past the limit.
pub fn decode_rdb<S: RdbSource>(
    src: &mut S,
    encver: i32,
    budget: Option<u64>,
) -> Result<CuckooFilter, CodecError> {
    if !(0..=MAX_ENCVER).contains(&encver) {
        return Err(CodecError::BadData("unknown cuckoo encoding version"));
    }
    let sub_filters = src.unsigned()?;
    let buckets = src.unsigned()?;
    let items = src.unsigned()?;
    let (deletes, bucket_size, max_iterations, expansion) = if encver >= 4 {
        (
            src.unsigned()?,
            src.unsigned()?,
            src.unsigned()?,
            src.unsigned()?,
        )
    } else {
        (0, 2, 20, 1)
    };
    let params = check_shape(sub_filters, buckets, bucket_size, max_iterations, expansion)?;
    let lengths = sub_lengths(sub_filters, buckets, params)?;
    let mut budget = Budget::new(budget);
    budget.charge(CuckooFilter::modelled_bytes(lengths.len(), []))?;
    let mut subs = try_vec(lengths.len())?;
    for &len in &lengths {
        let n = len / u64::from(params.bucket_size);
        if encver >= 4 && src.unsigned()? != n {
            return Err(CodecError::BadData(
                "a sub-filter's bucket count is not buckets × expansion^i",
            ));
        }
        budget.charge(allocation(len, 1))?;
        let buffer = src.buffer()?;
        let buffer = buffer.as_ref();
        if buffer.len() as u64 != len {
            return Err(CodecError::BadData(
                "a slot string's length is not buckets × bucket size",
            ));
        }
        let mut slots = try_vec(buffer.len())?;
        // Before the copy writes every page, so that they fault in huge at once.
        crate::zeroed::advise_huge_pages(&slots);
        slots.extend_from_slice(buffer);
        subs.push(SubFilter::from_slots(n, slots));
    }
    Ok(CuckooFilter::from_parts(subs, items, deletes, params))
}

//! The byte formats of extension filters ([`RatedFilter`]): their RDB value (module type
//! `LBcuckoo-`, encoding version 1) and their `CF.SCANDUMP` / `CF.LOADCHUNK` stream.
//!
//! # RDB value
//! Every number an RDB unsigned: `sub-filters, buckets, items, deletes, bucket size, max
//! iterations, expansion, first width, second width, error` (the asked rate's IEEE-754 bits:
//! a double field would be text in old RDB versions), then per sub-filter its bucket count and
//! its packed slot string (`ceil(buckets × bucket size × width / 8)` bytes).
//!
//! # `CF.SCANDUMP` stream
//! A 52-byte header: RedisBloom's 38 bytes, then `"LBwf"`, `u8 first width`, `u8 second
//! width`, `u64 error bits` (little-endian). RedisBloom refuses a header that is not 38 bytes,
//! so it never reads these slots as its own. Then each sub-filter's packed slots, oldest
//! first, in pieces of at most 16 MiB that are a whole number of 8-slot groups (`width`
//! bytes); iterators are positions as in RedisBloom's stream. `CF.LOADCHUNK` takes pieces
//! starting at a group and ending at one or at the sub-filter's end, and refuses any that
//! would change an occupied slot.
//!
//! Everything is validated before anything is allocated: RedisBloom's rules
//! (`codec::check_shape`), at least [`MIN_BUCKETS`] buckets, widths in 4..=32 that never
//! narrow, and a rate in (0, 1).

use std::borrow::Cow;

use super::codec::{check_shape, RdbField, MAX_CHUNK_BYTES};
use super::params::Params;
use super::rate::Widths;
use super::rated::{slot_bytes, RatedFilter, RatedSub, MIN_BUCKETS, PAD_BYTES};
use super::stream::{self, Budget};
use crate::error::FilterError;
use crate::fallible::try_vec;
use crate::footprint::allocation;
use crate::format::{CodecError, RdbSource, Strictness};

/// Bytes of an extension filter's `CF.SCANDUMP` header.
pub const HEADER_BYTES: usize = 52;
/// What follows RedisBloom's 38 header bytes.
const MAGIC: &[u8; 4] = b"LBwf";
/// The encoding version of the `LBcuckoo-` type.
pub const ENCVER: i32 = 1;

/// An extension filter's header: the whole filter but its slots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatedHeader {
    pub classic: super::codec::Header,
    pub widths: Widths,
    pub error: f64,
}

/// A checked shape: the settings and each sub-filter's buckets, width and slot bytes.
struct Shape {
    params: Params,
    subs: Vec<(u64, u8, u64)>,
}

impl Shape {
    fn modelled_bytes(&self) -> u64 {
        RatedFilter::modelled_bytes(self.subs.len(), self.subs.iter().map(|s| s.2))
    }
}

fn check_error(error: f64) -> Result<(), CodecError> {
    if error > 0.0 && error < 1.0 {
        Ok(())
    } else {
        Err(CodecError::BadData(
            "the rate of an extension filter is not in (0, 1)",
        ))
    }
}

fn check(
    sub_filters: u64,
    buckets: u64,
    bucket_size: u64,
    max_iterations: u64,
    expansion: u64,
    widths: Widths,
    error: f64,
) -> Result<Shape, CodecError> {
    let params = check_shape(sub_filters, buckets, bucket_size, max_iterations, expansion)?;
    if buckets < MIN_BUCKETS {
        return Err(CodecError::BadData(
            "an extension filter has at least 8 buckets",
        ));
    }
    if !widths.is_valid() {
        return Err(CodecError::BadData("fingerprint widths out of range"));
    }
    check_error(error)?;
    let too_big = CodecError::Filter(FilterError::OutOfMemory { bytes: u64::MAX });
    let count = usize::try_from(sub_filters).map_err(|_| too_big.clone())?;
    let mut subs = try_vec(count)?;
    let mut n = buckets;
    for i in 0..count {
        if i > 0 {
            n = n
                .checked_mul(u64::from(params.expansion))
                .ok_or(too_big.clone())?;
        }
        let bits = widths.of(i);
        let bytes = slot_bytes(n, params.bucket_size, bits).ok_or(too_big.clone())?;
        subs.push((n, bits, bytes));
    }
    Ok(Shape { params, subs })
}

impl RatedHeader {
    pub fn of(filter: &RatedFilter) -> Self {
        let p = filter.params();
        RatedHeader {
            classic: super::codec::Header {
                items: filter.items(),
                buckets: filter.buckets(),
                deletes: filter.deletes(),
                sub_filters: filter.sub_filters().len() as u64,
                bucket_size: u16::from(p.bucket_size),
                max_iterations: p.max_iterations,
                expansion: p.expansion,
            },
            widths: filter.widths(),
            error: filter.error(),
        }
    }

    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        out[..38].copy_from_slice(&self.classic.encode());
        out[38..42].copy_from_slice(MAGIC);
        out[42] = self.widths.first;
        out[43] = self.widths.second;
        out[44..52].copy_from_slice(&self.error.to_bits().to_le_bytes());
        out
    }

    /// Reads a header's fields (exactly 52 bytes, with the magic); `filter_from_header`
    /// checks them.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != HEADER_BYTES || &bytes[38..42] != MAGIC {
            return Err(CodecError::BadData("not an extension filter's header"));
        }
        let error = f64::from_bits(u64::from_le_bytes(
            bytes[44..52].try_into().expect("8 bytes"),
        ));
        Ok(RatedHeader {
            classic: super::codec::Header::decode(&bytes[..38])?,
            widths: Widths {
                first: bytes[42],
                second: bytes[43],
            },
            error,
        })
    }

    fn shape(&self, strictness: Strictness) -> Result<Shape, CodecError> {
        let c = &self.classic;
        let shape = check(
            c.sub_filters,
            c.buckets,
            u64::from(c.bucket_size),
            u64::from(c.max_iterations),
            u64::from(c.expansion),
            self.widths,
            self.error,
        )?;
        if strictness == Strictness::LoadChunk {
            let slots = shape.subs.iter().try_fold(0u64, |a, s| {
                s.0.checked_mul(u64::from(c.bucket_size))?.checked_add(a)
            });
            if slots.is_none_or(|s| c.items > s) {
                return Err(CodecError::BadData("more items than slots"));
            }
        }
        Ok(shape)
    }

    /// Bytes the filter will take once built.
    pub fn memory_bytes(&self, strictness: Strictness) -> Result<u64, CodecError> {
        Ok(self.shape(strictness)?.modelled_bytes())
    }
}

/// An empty filter of a header's shape, refused over `max_bytes` by the allocator model.
pub fn filter_from_header(
    header: &RatedHeader,
    strictness: Strictness,
    max_bytes: u64,
) -> Result<RatedFilter, CodecError> {
    let shape = header.shape(strictness)?;
    let needed = shape.modelled_bytes();
    if needed > max_bytes {
        return Err(FilterError::OverLimit {
            needed,
            limit: max_bytes,
        }
        .into());
    }
    let mut subs = try_vec(shape.subs.len())?;
    for &(n, bits, _) in &shape.subs {
        let bucket_size = shape.params.bucket_size;
        // As for RedisBloom's layout: an empty header is a creation, not a load.
        subs.push(if header.classic.items > 0 {
            RatedSub::zeroed_for_load(n, bucket_size, bits)?
        } else {
            RatedSub::zeroed(n, bucket_size, bits)?
        });
    }
    Ok(RatedFilter::from_parts(
        subs,
        header.classic.items,
        header.classic.deletes,
        shape.params,
        header.widths,
        header.error,
    ))
}

/// The largest piece of a sub-filter of `bits`-bit slots: whole 8-slot groups.
pub fn piece_bytes(bits: u8) -> u64 {
    MAX_CHUNK_BYTES / u64::from(bits) * u64::from(bits)
}

/// `CF.SCANDUMP key it` of an extension filter (`codec::dump_chunk`'s rules).
pub fn dump_chunk(filter: &RatedFilter, it: u64) -> Option<(u64, Cow<'_, [u8]>)> {
    if filter.items() == 0 {
        return None;
    }
    if it == 0 {
        return Some((1, Cow::Owned(RatedHeader::of(filter).encode().to_vec())));
    }
    let subs = filter.sub_filters();
    let (index, start) = stream::locate(subs, it - 1)?;
    let sub = &subs[index];
    let bytes = sub.as_bytes();
    let piece = piece_bytes(sub.bits());
    let from = (it - 1 - start) / piece * piece;
    let to = (from + piece).min(bytes.len() as u64);
    // The position after the piece, wherever in it `it` pointed.
    Some((
        1 + start + to,
        Cow::Borrowed(&bytes[from as usize..to as usize]),
    ))
}

/// Slot `index` of packed `bits`-bit slots in `data` (which may end inside the word).
fn slot_in(data: &[u8], bits: u8, index: u64) -> u32 {
    let bit = index * u64::from(bits);
    let at = (bit >> 3) as usize;
    let mut word = [0u8; 8];
    let end = (at + 8).min(data.len());
    word[..end - at].copy_from_slice(&data[at..end]);
    ((u64::from_le_bytes(word) >> (bit & 7)) & ((1u64 << bits) - 1)) as u32
}

/// `CF.LOADCHUNK key it data` for a data chunk of an extension filter (see the module
/// documentation). Nothing changes when refused.
pub fn load_chunk(filter: &mut RatedFilter, it: u64, data: &[u8]) -> Result<(), CodecError> {
    let offset = stream::chunk_start(it, data.len())?;
    let (index, start) = stream::locate(filter.sub_filters(), offset).ok_or(CodecError::NoLink)?;
    let sub = &mut filter.sub_filters_mut()[index];
    let sub_len = sub.as_bytes().len() as u64;
    let within = offset - start;
    let len = data.len() as u64;
    if within + len > sub_len {
        return Err(CodecError::TooBig);
    }
    let bits = u64::from(sub.bits());
    if !within.is_multiple_of(bits) || (!len.is_multiple_of(bits) && within + len != sub_len) {
        return Err(CodecError::BadData(
            "a chunk of an extension filter is whole 8-slot groups",
        ));
    }
    let first = within * 8 / bits;
    let count = len * 8 / bits;
    let overwrites = (0..count).any(|k| {
        let now = sub.get(first + k);
        now != 0 && now != slot_in(data, sub.bits(), k)
    });
    if overwrites {
        return Err(CodecError::BadData(
            "the chunk would overwrite fingerprints of the filter",
        ));
    }
    sub.write_bytes(within, data);
    Ok(())
}

/// The filter's RDB value, field by field.
pub fn rdb_fields(filter: &RatedFilter) -> impl Iterator<Item = RdbField<'_>> {
    let p = filter.params();
    let w = filter.widths();
    let head = [
        filter.sub_filters().len() as u64,
        filter.buckets(),
        filter.items(),
        filter.deletes(),
        u64::from(p.bucket_size),
        u64::from(p.max_iterations),
        u64::from(p.expansion),
        u64::from(w.first),
        u64::from(w.second),
        filter.error().to_bits(),
    ];
    stream::rdb_fields(head, filter.sub_filters())
}

/// Decodes an RDB value of encoding version 1. With `budget` (a client's RESTORE), each
/// sub-filter is charged before its slots are read.
pub fn decode_rdb<S: RdbSource>(
    src: &mut S,
    encver: i32,
    budget: Option<u64>,
) -> Result<RatedFilter, CodecError> {
    if encver != ENCVER {
        return Err(CodecError::BadData(
            "unknown extension cuckoo encoding version",
        ));
    }
    let mut fields = [0u64; 10];
    for f in &mut fields {
        *f = src.unsigned()?;
    }
    let [sub_filters, buckets, items, deletes, bucket_size, max_iterations, expansion, first, second, error] =
        fields;
    let width = |w: u64| u8::try_from(w).unwrap_or(0);
    let widths = Widths {
        first: width(first),
        second: width(second),
    };
    let error = f64::from_bits(error);
    let shape = check(
        sub_filters,
        buckets,
        bucket_size,
        max_iterations,
        expansion,
        widths,
        error,
    )?;
    let mut budget = Budget::new(budget);
    budget.charge(RatedFilter::modelled_bytes(shape.subs.len(), []))?;
    let mut subs = try_vec(shape.subs.len())?;
    for &(n, bits, bytes) in &shape.subs {
        if src.unsigned()? != n {
            return Err(CodecError::BadData(
                "a sub-filter's bucket count is not buckets × expansion^i",
            ));
        }
        budget.charge(allocation(bytes.saturating_add(PAD_BYTES), 1))?;
        let buffer = src.buffer()?;
        let buffer = buffer.as_ref();
        if buffer.len() as u64 != bytes {
            return Err(CodecError::BadData(
                "a slot string's length is not its sub-filter's packed size",
            ));
        }
        subs.push(RatedSub::from_bytes(
            n,
            shape.params.bucket_size,
            bits,
            buffer,
        )?);
    }
    Ok(RatedFilter::from_parts(
        subs,
        items,
        deletes,
        shape.params,
        widths,
        error,
    ))
}

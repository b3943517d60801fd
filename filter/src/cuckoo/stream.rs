//! What both layouts' byte formats share, written once over [`Slots`]: finding the sub-filter
//! a stream position falls in, where a `CF.LOADCHUNK` chunk goes, the RDB value's field
//! order, and the memory budget a client's RESTORE is held to while it decodes.
//!
//! A filter's stream (`CF.SCANDUMP`'s chunks after the header) is its sub-filters' persisted
//! bytes, oldest first, back to back; a position is a byte offset into that concatenation.

use super::slots::Slots;
use crate::format::CodecError;

/// The sub-filter holding byte `offset` of the stream: its index and the offset of its first
/// byte. `None` past the last sub-filter.
pub(crate) fn locate<S: Slots>(subs: &[S], offset: u64) -> Option<(usize, u64)> {
    let mut start = 0u64;
    for (index, sub) in subs.iter().enumerate() {
        let len = sub.persisted().len() as u64;
        if offset < start + len {
            return Some((index, start));
        }
        start += len;
    }
    None
}

/// Where a `CF.LOADCHUNK` chunk of `len` bytes at iterator `it` starts in the stream: the
/// iterator is the position just after the chunk, plus one (iterator 1 is the header).
pub(crate) fn chunk_start(it: u64, len: usize) -> Result<u64, CodecError> {
    if len == 0 {
        return Err(CodecError::BadData("an empty chunk"));
    }
    it.checked_sub(1)
        .and_then(|p| p.checked_sub(len as u64))
        .ok_or(CodecError::NoLink)
}

/// One field of an RDB value, in the order `rdb_fields` yields them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdbField<'a> {
    Unsigned(u64),
    Buffer(&'a [u8]),
}

/// An RDB value: the layout's `head` fields, then per sub-filter its bucket count and its
/// persisted slots.
pub(crate) fn rdb_fields<S: Slots, const N: usize>(
    head: [u64; N],
    subs: &[S],
) -> impl Iterator<Item = RdbField<'_>> {
    head.into_iter()
        .map(RdbField::Unsigned)
        .chain(subs.iter().flat_map(|s| {
            [
                RdbField::Unsigned(s.buckets()),
                RdbField::Buffer(s.persisted()),
            ]
        }))
}

/// The bytes a decode may still allocate by the allocator model: a client's RESTORE is held
/// to the memory limit before each piece is read; the RDB loader and the AOF are not.
pub(crate) struct Budget(Option<u64>);

impl Budget {
    pub(crate) fn new(bytes: Option<u64>) -> Self {
        Budget(bytes)
    }

    /// Takes `bytes` from what is left, or refuses once they pass it.
    pub(crate) fn charge(&mut self, bytes: u64) -> Result<(), CodecError> {
        if let Some(left) = &mut self.0 {
            *left = left.checked_sub(bytes).ok_or(CodecError::BadData(
                "over the memory limit (bf-max-filter-memory or maxmemory)",
            ))?;
        }
        Ok(())
    }
}

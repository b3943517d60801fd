//! What every structure's byte formats share: the errors of decoding, a reader of
//! little-endian fields, how strictly a header is checked, the RDB source the module reads
//! values through, and the sizes that bound a chunk or a piece.
//!
//! Every decoder treats its input as hostile: lengths, counts and offsets are checked against
//! the bytes actually present before anything is allocated or indexed.

use crate::error::FilterError;

/// Largest `BF.SCANDUMP` chunk.
pub const MAX_CHUNK_BYTES: usize = 16 * 1024 * 1024;
/// Largest piece of a bit array in an RDB value.
pub const RDB_PIECE_BYTES: usize = 64 * 1024 * 1024;

/// Why bytes could not be decoded or applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    /// Not a header, or one with impossible or inconsistent fields.
    #[error("bad data: {0}")]
    BadData(&'static str),
    /// A chunk whose offset lies outside every layer.
    #[error("invalid offset - no link found")]
    NoLink,
    /// A chunk that starts inside a layer and runs past its end.
    #[error("invalid chunk - Too big for current filter")]
    TooBig,
    /// The data describes a filter that cannot be built here.
    #[error(transparent)]
    Filter(#[from] FilterError),
}

/// Reads little-endian fields off the front of a byte slice.
pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
}

impl Reader<'_> {
    pub(crate) fn take<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or(CodecError::BadData("header is truncated"))?;
        self.bytes = rest;
        Ok(*head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take::<1>()?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    pub(crate) fn f64(&mut self) -> Result<f64, CodecError> {
        Ok(f64::from_le_bytes(self.take()?))
    }
    pub(crate) fn zeros<const N: usize>(&mut self) -> Result<(), CodecError> {
        if self.take::<N>()? == [0; N] {
            Ok(())
        } else {
            Err(CodecError::BadData("reserved bytes are not zero"))
        }
    }
}

/// Adds a layer's bytes to a running total, refusing totals no allocation could hold.
pub(crate) fn add_bytes(total: u64, bytes: u64) -> Result<u64, CodecError> {
    total
        .checked_add(bytes)
        .filter(|&b| b <= isize::MAX as u64)
        .ok_or(CodecError::BadData("layers are too large"))
}

/// How strictly a header is checked: a client's at least as strictly as RedisBloom checks it,
/// one the server (or its primary) already accepted as leniently as RedisBloom's RDB loader,
/// so that every value RedisBloom loads loads here too. For a Bloom filter:
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// A client's `BF.LOADCHUNK`, at least as strict as RedisBloom's: the item total must be
    /// exactly the sum of the layers' counts (no overflow) and below 2^64 - 1, RedisBloom's
    /// option bits known and each classic layer's hash count the one its bits per entry give.
    LoadChunk,
    /// RDB values, and `BF.LOADCHUNK` replayed from the AOF or sent by a primary (they
    /// describe filters already accepted from an RDB value): as RedisBloom's RDB loader, an
    /// odd total or option bits and a stray hash count are accepted (with a warning) when
    /// safe, so that every value RedisBloom loads loads here too. Counts saturate, so a
    /// total that reached the top still equals its layers' sum.
    Rdb,
}

/// Something odd but safe found while loading, worth a log line.
pub type Warning = &'static str;

/// The fields of an RDB value, as the module API reads them (`RedisModule_LoadUnsigned`,
/// `LoadDouble`, `LoadStringBuffer`). Each read fails once the value's data runs out.
pub trait RdbSource {
    type Buffer: AsRef<[u8]>;
    fn unsigned(&mut self) -> Result<u64, CodecError>;
    fn double(&mut self) -> Result<f64, CodecError>;
    fn buffer(&mut self) -> Result<Self::Buffer, CodecError>;
}

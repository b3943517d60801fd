//! The windowed filter's byte formats: its header, its `BF.SCANDUMP` / `BF.LOADCHUNK` stream
//! and its RDB value. Each slice's chain is persisted in the Bloom codec's formats
//! (`bloom::codec`): its header and its bit arrays, unchanged.
//!
//! # The header (format version 1)
//! Little-endian, packed:
//!
//! ```text
//! magic "LBWINDOW"       8 bytes   tells it from a plain filter's header (layerbloom's starts
//!                                  "LAYERBLM"; RedisBloom's with an item count, never this large)
//! version u8             = 1
//! layout u8              0 blocked, 1 classic (every slice's chain is of this kind)
//! nonscaling u8          0 or 1
//! reserved u8            = 0
//! slices u32             1 ..= MAX_SLICES
//! expansion u32          as asked (<= bloom::codec::MAX_EXPANSION)
//! window_ms u64          >= slices
//! capacity u64           items per window, >= 1
//! error f64              over the window, in (0, 1)
//! origin_ms u64          creation time on the primary
//! head u64               the slice adds go into
//! held u32               slices held, <= slices + 1
//! per slice held, oldest first (ids strictly increasing, within head - slices ..= head):
//!   id u64, chain_len u32, the slice's chain header (bloom::codec::encode_header:
//!   layerbloom's for blocked slices, RedisBloom's for classic ones), chain_len bytes
//! ```
//!
//! # SCANDUMP / LOADCHUNK
//! `BF.SCANDUMP key 0` answers iterator 1 and the header; the bit arrays follow as for a plain
//! filter, with the same iterator arithmetic over the concatenation of every slice's layers
//! (oldest slice first, each slice's layers oldest first): the chunk at byte offset `off` of
//! length `len` comes with iterator `1 + off + len`, chunks are at most `MAX_CHUNK_BYTES` and
//! never cross a layer, and `BF.LOADCHUNK key it data` ORs `data` in at `it - 1 - len(data)`.
//! A header builds the whole filter with every bit zero ([`filter_from_header`]), so no
//! half-built filter is ever visible: a partial load is a filter missing bits, as for a plain
//! filter.
//!
//! # RDB value
//! The header as one string, then each slice's bit arrays in the Bloom codec's pieces (at
//! most `RDB_PIECE_BYTES` each), slice after slice. [`WindowLoader`] reads them piece by
//! piece, so memory grows with the data actually read.

use crate::bloom::chain::MAX_LAYERS;
use crate::bloom::codec::{
    self as bloom_codec, decode_blocked_header, decode_classic_header, FilterLoader, Header,
    MAX_EXPANSION,
};
use crate::bloom::filter::{FilterSpec, Layout};
use crate::fallible::try_vec;
use crate::format::{add_bytes, Reader};
pub use crate::format::{CodecError, RdbSource, Strictness, Warning, MAX_CHUNK_BYTES};
use crate::window::filter::Slice;
use crate::window::{WindowSpec, WindowedFilter};
use crate::FilterError;

/// First bytes of every windowed header.
pub const MAGIC: [u8; 8] = *b"LBWINDOW";
/// The header format this build writes.
pub const FORMAT_VERSION: u8 = 1;
/// The RDB encoding version of the windowed module type (its own type: only the first).
pub const ENCODING_VERSION: i32 = 1;
const FIXED_BYTES: usize = 64;
const SLICE_BYTES: usize = 12;

/// A decoded, validated header: the whole filter but its bits.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowHeader {
    pub spec: WindowSpec,
    pub origin_ms: u64,
    pub head: u64,
    /// Each slice held, oldest first: its id and its chain's header.
    pub slices: Vec<(u64, Header)>,
}

impl WindowHeader {
    /// Memory the filter will take once built, as `WindowedFilter::memory_usage` counts it.
    pub fn memory_bytes(&self) -> u64 {
        let chains = self.slices.iter().map(|(_, h)| h.memory_bytes());
        WindowedFilter::modelled_bytes(self.slices.len(), chains)
    }

    /// Bytes of every bit array together (the decoder refused overflowing totals).
    pub fn bits_bytes(&self) -> u64 {
        self.slices.iter().map(|(_, h)| h.bits_bytes()).sum()
    }

    /// Why a client's header cannot be taken on a primary whose clock reads `now_ms`: an
    /// origin in the future or a head past the clock's slice by more than a window keeps
    /// every slice live until the clock catches up (possibly never), and no advance can move
    /// a head backwards. Only refused, never corrected: what is loaded must stay the bytes
    /// sent, so that a replica and the AOF hold the same filter.
    pub fn clock_error(&self, now_ms: u64) -> Option<&'static str> {
        if self.origin_ms > now_ms {
            return Some("the window's origin is later than the clock");
        }
        let current = (now_ms - self.origin_ms) / self.spec.slice_ms();
        if self.head > current.saturating_add(u64::from(self.spec.slices)) {
            return Some("the window's current slice is later than the clock's");
        }
        None
    }

    /// Layers over all slices.
    pub fn layer_count(&self) -> usize {
        self.slices.iter().map(|(_, h)| h.layer_count()).sum()
    }
}

/// Whether bytes start like a windowed header.
pub fn is_window_header(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// The filter's header: `BF.SCANDUMP`'s first chunk and its RDB value's first string.
pub fn encode_header(filter: &WindowedFilter) -> Vec<u8> {
    let spec = filter.spec();
    let slices = filter.slice_table();
    let chains: Vec<Vec<u8>> = slices
        .iter()
        .map(|s| bloom_codec::encode_header(&s.filter))
        .collect();
    let total = FIXED_BYTES + chains.iter().map(|c| SLICE_BYTES + c.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT_VERSION);
    out.push(match spec.filter.layout {
        Layout::Blocked => 0,
        Layout::Classic => 1,
    });
    out.push(u8::from(spec.filter.nonscaling));
    out.push(0);
    out.extend_from_slice(&spec.slices.to_le_bytes());
    out.extend_from_slice(&spec.filter.expansion.to_le_bytes());
    out.extend_from_slice(&spec.window_ms.to_le_bytes());
    out.extend_from_slice(&spec.filter.capacity.to_le_bytes());
    out.extend_from_slice(&spec.filter.error.to_le_bytes());
    out.extend_from_slice(&filter.origin_ms().to_le_bytes());
    out.extend_from_slice(&filter.head().to_le_bytes());
    out.extend_from_slice(&(slices.len() as u32).to_le_bytes());
    for (slice, chain) in slices.iter().zip(&chains) {
        out.extend_from_slice(&slice.id.to_le_bytes());
        out.extend_from_slice(&(chain.len() as u32).to_le_bytes());
        out.extend_from_slice(chain);
    }
    out
}

/// Decodes and validates a header. `strictness` is the Bloom codec's, for each slice's chain
/// (a client's `BF.LOADCHUNK`: `LoadChunk`; RDB values and replayed commands: `Rdb`); the
/// warnings are the lax load's.
pub fn decode_header(
    bytes: &[u8],
    strictness: Strictness,
) -> Result<(WindowHeader, Vec<Warning>), CodecError> {
    let mut r = Reader { bytes };
    if r.take::<8>()? != MAGIC {
        return Err(CodecError::BadData("not a windowed filter's header"));
    }
    if r.u8()? != FORMAT_VERSION {
        return Err(CodecError::BadData("unknown windowed header version"));
    }
    let layout = match r.u8()? {
        0 => Layout::Blocked,
        1 => Layout::Classic,
        _ => return Err(CodecError::BadData("unknown layout")),
    };
    let nonscaling = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(CodecError::BadData("non-scaling flag out of range")),
    };
    r.zeros::<1>()?;
    let slices = r.u32()?;
    let expansion = r.u32()?;
    let window_ms = r.u64()?;
    let capacity = r.u64()?;
    let error = r.f64()?;
    let origin_ms = r.u64()?;
    let head = r.u64()?;
    let held = r.u32()?;
    if expansion > MAX_EXPANSION {
        return Err(CodecError::BadData("expansion out of range"));
    }
    let spec = WindowSpec {
        window_ms,
        slices,
        filter: FilterSpec {
            capacity,
            error,
            expansion,
            nonscaling,
            layout,
        },
    };
    spec.validate()
        .map_err(|_| CodecError::BadData("window parameters out of range"))?;
    // A client may not bring a window no command could create: one of u64::MAX ms never
    // leaves its first slice, so it would never forget. What the server already accepted
    // (RDB, a primary, the AOF) loads as it was.
    if strictness == Strictness::LoadChunk && window_ms > super::MAX_WINDOW_MS {
        return Err(CodecError::BadData("window longer than a command accepts"));
    }
    // New slices are made from the spec: one that cannot be sized cannot take an add.
    spec.slice_spec()
        .initial_bytes()
        .map_err(|_| CodecError::BadData("no slice can be sized for the window"))?;
    if u64::from(held) > u64::from(slices) + 1 {
        return Err(CodecError::BadData("more slices held than a window has"));
    }
    let chain_expansion = if nonscaling { 0 } else { expansion };
    let oldest_live = head.saturating_sub(u64::from(slices));
    // Bounded by MAX_SLICES + 1.
    let mut out = try_vec(held as usize)?;
    let mut warnings = Vec::new();
    let mut bits = 0u64;
    let mut last_id = None;
    for _ in 0..held {
        let id = r.u64()?;
        let len = r.u32()? as usize;
        if last_id.is_some_and(|last| id <= last) {
            return Err(CodecError::BadData("slice ids are not increasing"));
        }
        if id > head || id < oldest_live {
            return Err(CodecError::BadData("a slice outside the window"));
        }
        last_id = Some(id);
        let chain = r
            .bytes
            .get(..len)
            .ok_or(CodecError::BadData("header is truncated"))?;
        r.bytes = &r.bytes[len..];
        let header = match layout {
            Layout::Blocked => Header::Blocked(decode_blocked_header(chain, strictness)?),
            Layout::Classic => {
                let (h, w) = decode_classic_header(chain, strictness)?;
                warnings.extend(w);
                Header::Classic(h)
            }
        };
        let expansion_of = match &header {
            Header::Blocked(h) => h.expansion,
            Header::Classic(h) => h.expansion,
        };
        if expansion_of != chain_expansion {
            return Err(CodecError::BadData(
                "a slice's growth differs from the window's",
            ));
        }
        bits = add_bytes(bits, header.bits_bytes())?;
        out.push((id, header));
    }
    if !r.bytes.is_empty() {
        return Err(CodecError::BadData("trailing bytes after the last slice"));
    }
    // A window is one filter: its slices together hold at most the layers one filter may
    // (a plain filter's header is held to the same), else every lookup probes up to 65 × 1024
    // layers. What the server already accepted loads as it was.
    let layers: usize = out.iter().map(|(_, h)| h.layer_count()).sum();
    if strictness == Strictness::LoadChunk && layers > MAX_LAYERS {
        return Err(CodecError::BadData("more layers than a filter may have"));
    }
    Ok((
        WindowHeader {
            spec,
            origin_ms,
            head,
            slices: out,
        },
        warnings,
    ))
}

/// The filter a header describes with every bit zero, to be filled by `load_chunk`. Refused
/// when it would take more than `max_bytes`.
pub fn filter_from_header(
    header: &WindowHeader,
    max_bytes: u64,
) -> Result<WindowedFilter, CodecError> {
    let needed = header.memory_bytes();
    if needed > max_bytes {
        return Err(FilterError::OverLimit {
            needed,
            limit: max_bytes,
        }
        .into());
    }
    let mut slices = try_vec(header.slices.len())?;
    for (id, chain) in &header.slices {
        slices.push(Slice {
            id: *id,
            filter: bloom_codec::filter_from_header(chain, u64::MAX)?,
        });
    }
    Ok(WindowedFilter::from_parts(
        header.spec,
        header.origin_ms,
        header.head,
        slices,
    ))
}

/// Where byte `offset` of every slice's bit arrays, concatenated, lies: the slice's index and
/// the offset within its own.
fn locate_slice(filter: &WindowedFilter, offset: u64) -> Option<(usize, u64)> {
    let mut start = 0u64;
    for (index, slice) in filter.slice_table().iter().enumerate() {
        let len = slice.filter.bits_bytes();
        if offset < start.saturating_add(len) {
            return Some((index, offset - start));
        }
        start = start.saturating_add(len);
    }
    None
}

/// The `BF.SCANDUMP` chunk after iterator `it` (>= 1): `(next iterator, bytes)`, or
/// `(0, [])` past the end.
pub fn dump_chunk(filter: &WindowedFilter, it: i64) -> (i64, &[u8]) {
    let Some(offset) = u64::try_from(it).ok().and_then(|it| it.checked_sub(1)) else {
        return (0, &[]);
    };
    let Some((slice, within_slice)) = locate_slice(filter, offset) else {
        return (0, &[]);
    };
    let chain = &filter.slice_table()[slice].filter;
    let Some((index, within, _)) = chain.locate(within_slice) else {
        return (0, &[]);
    };
    let bytes = chain.layer_bytes_at(index);
    let within = within as usize;
    let len = (bytes.len() - within).min(MAX_CHUNK_BYTES);
    let next = 1 + offset + len as u64;
    (next as i64, &bytes[within..within + len])
}

/// Applies a `BF.LOADCHUNK` chunk (iterator `it` > 1): its bits are ORed into the filter's,
/// with the plain filter's checks and errors in RedisBloom's order.
pub fn load_chunk(filter: &mut WindowedFilter, it: i64, data: &[u8]) -> Result<(), CodecError> {
    let len = data.len() as u64;
    let end = u64::try_from(it)
        .ok()
        .filter(|&it| it > 0 && it >= len)
        .ok_or(CodecError::BadData("iterator before the chunk's end"))?;
    let offset = (end - 1).checked_sub(len).ok_or(CodecError::NoLink)?;
    let (slice, within_slice) = locate_slice(filter, offset).ok_or(CodecError::NoLink)?;
    let chain = &mut filter.slice_table_mut()[slice].filter;
    let (index, within, layer_len) = chain.locate(within_slice).ok_or(CodecError::NoLink)?;
    if within + len > layer_len {
        return Err(CodecError::TooBig);
    }
    chain.or_layer_bytes(index, within as usize, data);
    Ok(())
}

/// The pieces an RDB value stores after the header, in order: each slice's, oldest first.
pub fn rdb_pieces(filter: &WindowedFilter) -> Vec<&[u8]> {
    filter
        .slice_table()
        .iter()
        .flat_map(|s| bloom_codec::rdb_pieces(&s.filter))
        .collect()
}

/// Rebuilds a filter from an RDB value: the header, then its pieces one at a time, each
/// slice's through the Bloom codec's loader.
pub struct WindowLoader {
    spec: WindowSpec,
    origin_ms: u64,
    head: u64,
    pending: std::vec::IntoIter<(u64, Header)>,
    current: Option<(u64, FilterLoader)>,
    done: Vec<Slice>,
}

impl WindowLoader {
    /// Starts from a decoded header.
    pub fn new(header: WindowHeader) -> Result<Self, CodecError> {
        let done = try_vec(header.slices.len())?;
        let mut loader = WindowLoader {
            spec: header.spec,
            origin_ms: header.origin_ms,
            head: header.head,
            pending: header.slices.into_iter(),
            current: None,
            done,
        };
        loader.next_slice()?;
        Ok(loader)
    }

    /// Finishes the slice whose pieces have all arrived and starts the next.
    fn next_slice(&mut self) -> Result<(), CodecError> {
        loop {
            match self.current.take() {
                Some((id, loader)) if loader.next_piece_len().is_none() => {
                    // Within the room reserved for the header's slice count.
                    self.done.push(Slice {
                        id,
                        filter: loader.finish()?,
                    });
                }
                Some(current) => {
                    self.current = Some(current);
                    return Ok(());
                }
                None => match self.pending.next() {
                    Some((id, header)) => self.current = Some((id, FilterLoader::new(header)?)),
                    None => return Ok(()),
                },
            }
        }
    }

    /// The length the next piece must have, or `None` when every piece has been read.
    pub fn next_piece_len(&self) -> Option<usize> {
        self.current.as_ref()?.1.next_piece_len()
    }

    /// Takes the next piece, which must have exactly `next_piece_len()` bytes.
    pub fn push_piece(&mut self, piece: &[u8]) -> Result<(), CodecError> {
        let (_, loader) = self
            .current
            .as_mut()
            .ok_or(CodecError::BadData("more pieces than slices"))?;
        loader.push_piece(piece)?;
        self.next_slice()
    }

    /// The filter, once every piece has been read.
    pub fn finish(self) -> Result<WindowedFilter, CodecError> {
        if self.current.is_some() {
            return Err(CodecError::BadData("value ends before its last piece"));
        }
        Ok(WindowedFilter::from_parts(
            self.spec,
            self.origin_ms,
            self.head,
            self.done,
        ))
    }
}

/// Decodes an RDB value held whole in memory (header, then pieces).
pub fn decode_value<'a>(
    header: &[u8],
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<WindowedFilter, CodecError> {
    let (header, _) = decode_header(header, Strictness::Rdb)?;
    let mut loader = WindowLoader::new(header)?;
    let mut pieces = pieces.into_iter();
    while loader.next_piece_len().is_some() {
        let piece = pieces
            .next()
            .ok_or(CodecError::BadData("value ends before its last piece"))?;
        loader.push_piece(piece)?;
    }
    if pieces.next().is_some() {
        return Err(CodecError::BadData("trailing pieces"));
    }
    loader.finish()
}

/// Reads an RDB value through the module API's fields: the header string, then the pieces.
/// With `budget` (a client's RESTORE: the bytes the filter may take by the allocator model)
/// the header is held to a client's strictness and the budget before anything is allocated,
/// since zeroed bit arrays compress to almost nothing in a payload. With `clock` (the
/// primary's time, for a client's RESTORE there) the header must also fit it
/// ([`WindowHeader::clock_error`]).
pub fn load_rdb<S: RdbSource>(
    src: &mut S,
    budget: Option<u64>,
    clock: Option<u64>,
) -> Result<(WindowedFilter, Vec<Warning>), CodecError> {
    let strictness = if budget.is_some() {
        Strictness::LoadChunk
    } else {
        Strictness::Rdb
    };
    let header = src.buffer()?;
    let (header, warnings) = decode_header(header.as_ref(), strictness)?;
    if let Some(why) = clock.and_then(|now| header.clock_error(now)) {
        return Err(CodecError::BadData(why));
    }
    if let Some(budget) = budget {
        let needed = header.memory_bytes();
        if needed > budget {
            return Err(FilterError::OverLimit {
                needed,
                limit: budget,
            }
            .into());
        }
    }
    let mut loader = WindowLoader::new(header)?;
    while loader.next_piece_len().is_some() {
        let piece = src.buffer()?;
        loader.push_piece(piece.as_ref())?;
    }
    Ok((loader.finish()?, warnings))
}

//! Every byte format layerbloom persists or hands to clients, and their decoders.
//!
//! # Header (format version 1), shared by RDB values and `BF.SCANDUMP`
//! Little-endian, packed:
//!
//! ```text
//! magic  "LAYERBLM"      8 bytes   tells layerbloom's header from RedisBloom's, whose first
//!                                  8 bytes are an item count that can never be this large
//! version u8             = 1
//! reserved [u8; 3]       = 0
//! expansion u32          0 = non-scaling
//! error f64              the rate the filter was created with
//! items u64              items counted, = the sum of the layers' items
//! layers u32             >= 1
//! per layer (40 bytes):
//!   capacity u64, error f64, items u64, blocks u64,
//!   blocks_per_item u8, hashes_per_block u8, reserved [u8; 6] = 0
//! ```
//!
//! # Bit arrays
//! A layer's bits are its blocks' bytes, each 64-bit word little-endian. `BF.SCANDUMP` hands
//! them out in chunks of at most 16 MiB that never cross a layer, with RedisBloom's iterator
//! arithmetic: the chunk at byte offset `off` (into all layers' arrays, concatenated) of length
//! `len` comes with iterator `1 + off + len`, and `BF.LOADCHUNK key it data` writes `data` at
//! `it - 1 - len(data)`. RDB values store the header, then each layer's array in pieces of at
//! most 64 MiB, so loading never needs a second copy of a whole layer.
//!
//! Every decoder treats its input as hostile: lengths, counts and offsets are checked against
//! the bytes actually present before anything is allocated or indexed.

use crate::blocked::{zeroed_blocks, Block, BlockedLayer, LayerMeta};
use crate::chain::ScalableFilter;
use crate::error::FilterError;
use crate::sizing::{Geometry, BLOCK_BYTES};

/// First bytes of every layerbloom header.
pub const MAGIC: [u8; 8] = *b"LAYERBLM";
/// The header format this build writes.
pub const FORMAT_VERSION: u8 = 1;
/// Largest expansion factor a filter may have (RedisBloom's bound).
pub const MAX_EXPANSION: u32 = 32768;
/// Largest `BF.SCANDUMP` chunk.
pub const MAX_CHUNK_BYTES: usize = 16 * 1024 * 1024;
/// Largest piece of a bit array in an RDB value.
pub const RDB_PIECE_BYTES: usize = 64 * 1024 * 1024;

const CHAIN_BYTES: usize = 36;
const LAYER_BYTES: usize = 40;

/// Why bytes could not be decoded or applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    /// Not a layerbloom header, or one with impossible or inconsistent fields.
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

/// A decoded header: the whole filter but its bits.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub items: u64,
    pub error: f64,
    pub expansion: u32,
    pub layers: Vec<LayerMeta>,
}

impl Header {
    /// Bytes of all bit arrays together (checked: the decoder refused overflowing totals).
    pub fn bits_bytes(&self) -> u64 {
        self.layers.iter().map(|l| l.geometry.bytes()).sum()
    }

    /// Memory the filter will take once built.
    pub fn memory_bytes(&self) -> u64 {
        ScalableFilter::overhead_bytes(self.layers.len()).saturating_add(self.bits_bytes())
    }
}

/// Whether bytes start like a layerbloom header (as opposed to RedisBloom's).
pub fn is_layerbloom_header(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// Encodes a filter's header.
pub fn encode_header(filter: &ScalableFilter) -> Vec<u8> {
    let layers = filter.layers();
    let mut out = Vec::with_capacity(CHAIN_BYTES + LAYER_BYTES * layers.len());
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&filter.expansion_raw().to_le_bytes());
    out.extend_from_slice(&filter.error().to_le_bytes());
    out.extend_from_slice(&filter.items().to_le_bytes());
    out.extend_from_slice(&(layers.len() as u32).to_le_bytes());
    for layer in layers {
        let m = layer.meta();
        out.extend_from_slice(&m.capacity.to_le_bytes());
        out.extend_from_slice(&m.error.to_le_bytes());
        out.extend_from_slice(&m.items.to_le_bytes());
        out.extend_from_slice(&m.geometry.blocks.to_le_bytes());
        out.push(m.geometry.blocks_per_item as u8);
        out.push(m.geometry.hashes_per_block as u8);
        out.extend_from_slice(&[0; 6]);
    }
    out
}

/// Reads little-endian fields off the front of a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or(CodecError::BadData("header is truncated"))?;
        self.bytes = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn f64(&mut self) -> Result<f64, CodecError> {
        Ok(f64::from_le_bytes(self.take()?))
    }
    fn zeros<const N: usize>(&mut self) -> Result<(), CodecError> {
        if self.take::<N>()? == [0; N] {
            Ok(())
        } else {
            Err(CodecError::BadData("reserved bytes are not zero"))
        }
    }
}

fn is_rate(x: f64) -> bool {
    x > 0.0 && x < 1.0
}

/// Decodes and validates a header.
pub fn decode_header(bytes: &[u8]) -> Result<Header, CodecError> {
    let mut r = Reader { bytes };
    if r.take::<8>()? != MAGIC {
        return Err(CodecError::BadData("not a layerbloom header"));
    }
    let version = r.u8()?;
    if version != FORMAT_VERSION {
        return Err(CodecError::BadData("unknown header version"));
    }
    r.zeros::<3>()?;
    let expansion = r.u32()?;
    let error = r.f64()?;
    let items = r.u64()?;
    let count = r.u32()? as usize;
    if expansion > MAX_EXPANSION {
        return Err(CodecError::BadData("expansion out of range"));
    }
    if !is_rate(error) {
        return Err(CodecError::BadData("error rate out of range"));
    }
    if count == 0 {
        return Err(CodecError::BadData("a filter has at least one layer"));
    }
    if expansion == 0 && count != 1 {
        return Err(CodecError::BadData("a non-scaling filter has one layer"));
    }
    // The length must match exactly before anything sized by `count` is allocated.
    if r.bytes.len() != count.saturating_mul(LAYER_BYTES) {
        return Err(CodecError::BadData(
            "header length does not match its layer count",
        ));
    }
    let mut layers = Vec::with_capacity(count);
    let mut item_sum = 0u64;
    let mut byte_sum = 0u64;
    for _ in 0..count {
        let capacity = r.u64()?;
        let layer_error = r.f64()?;
        let layer_items = r.u64()?;
        let blocks = r.u64()?;
        let blocks_per_item = u32::from(r.u8()?);
        let hashes_per_block = u32::from(r.u8()?);
        r.zeros::<6>()?;
        let geometry = Geometry {
            blocks,
            blocks_per_item,
            hashes_per_block,
        };
        if capacity == 0 || layer_items > capacity {
            return Err(CodecError::BadData("layer item count exceeds its capacity"));
        }
        if !is_rate(layer_error) {
            return Err(CodecError::BadData("layer error rate out of range"));
        }
        if !geometry.is_valid() {
            return Err(CodecError::BadData("layer geometry out of range"));
        }
        item_sum = item_sum
            .checked_add(layer_items)
            .ok_or(CodecError::BadData("item counts overflow"))?;
        byte_sum = byte_sum
            .checked_add(geometry.bytes())
            .filter(|&b| b <= isize::MAX as u64)
            .ok_or(CodecError::BadData("layers are too large"))?;
        layers.push(LayerMeta {
            capacity,
            error: layer_error,
            items: layer_items,
            geometry,
        });
    }
    if item_sum != items {
        return Err(CodecError::BadData(
            "item count differs from the layers' sum",
        ));
    }
    Ok(Header {
        items,
        error,
        expansion,
        layers,
    })
}

/// A filter with the header's layers and all bits zero, to be filled by `load_chunk`.
/// Refused when it would take more than `max_bytes`.
pub fn filter_from_header(header: &Header, max_bytes: u64) -> Result<ScalableFilter, CodecError> {
    let needed = header.memory_bytes();
    if needed > max_bytes {
        return Err(FilterError::OverLimit {
            needed,
            limit: max_bytes,
        }
        .into());
    }
    let mut layers = try_vec(header.layers.len())?;
    for meta in &header.layers {
        let blocks = zeroed_blocks(meta.geometry.blocks)?;
        layers.push(BlockedLayer::from_parts(*meta, blocks));
    }
    Ok(ScalableFilter::from_parts(
        layers,
        header.items,
        header.error,
        header.expansion,
    ))
}

fn try_vec<T>(n: usize) -> Result<Vec<T>, FilterError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| FilterError::OutOfMemory {
            bytes: (n * std::mem::size_of::<T>()) as u64,
        })?;
    Ok(v)
}

/// Where a byte offset into the concatenated bit arrays falls: `(layer, offset in layer)`.
fn locate(filter: &ScalableFilter, offset: u64) -> Option<(usize, u64)> {
    let mut start = 0u64;
    for (i, layer) in filter.layers().iter().enumerate() {
        let len = layer.geometry().bytes();
        if offset < start + len {
            return Some((i, offset - start));
        }
        start += len;
    }
    None
}

/// The `BF.SCANDUMP` chunk after iterator `it` (>= 1): `(next iterator, bytes)`, or
/// `(0, [])` past the end.
pub fn dump_chunk(filter: &ScalableFilter, it: i64) -> (i64, &[u8]) {
    let Some(offset) = u64::try_from(it).ok().and_then(|it| it.checked_sub(1)) else {
        return (0, &[]);
    };
    let Some((index, within)) = locate(filter, offset) else {
        return (0, &[]);
    };
    let bytes = filter.layers()[index].as_bytes();
    let within = within as usize;
    let len = (bytes.len() - within).min(MAX_CHUNK_BYTES);
    let next = 1 + offset + len as u64;
    (next as i64, &bytes[within..within + len])
}

/// Applies a `BF.LOADCHUNK` chunk (iterator `it` > 1).
pub fn load_chunk(filter: &mut ScalableFilter, it: i64, data: &[u8]) -> Result<(), CodecError> {
    if data.is_empty() {
        return Err(CodecError::BadData("empty chunk"));
    }
    let offset = u64::try_from(it)
        .ok()
        .and_then(|it| it.checked_sub(1))
        .and_then(|end| end.checked_sub(data.len() as u64))
        .ok_or(CodecError::NoLink)?;
    let (index, within) = locate(filter, offset).ok_or(CodecError::NoLink)?;
    let layer = &mut filter.layers_mut()[index];
    if within + data.len() as u64 > layer.geometry().bytes() {
        return Err(CodecError::TooBig);
    }
    layer.write_bytes(within as usize, data);
    Ok(())
}

/// The pieces an RDB value stores after the header, in order.
pub fn rdb_pieces(filter: &ScalableFilter) -> impl Iterator<Item = &[u8]> {
    filter
        .layers()
        .iter()
        .flat_map(|layer| layer.as_bytes().chunks(RDB_PIECE_BYTES))
}

/// Rebuilds a filter from an RDB value: the header, then its pieces one at a time. Memory
/// grows with the pieces actually read, so a header that lies about its size costs no more
/// than the data behind it.
pub struct FilterLoader {
    header: Header,
    layers: Vec<BlockedLayer>,
    current: Vec<Block>,
}

impl FilterLoader {
    /// Starts from a decoded header.
    pub fn new(header: Header) -> Result<Self, CodecError> {
        let layers = try_vec(header.layers.len())?;
        Ok(FilterLoader {
            header,
            layers,
            current: Vec::new(),
        })
    }

    fn current_meta(&self) -> Option<&LayerMeta> {
        self.header.layers.get(self.layers.len())
    }

    /// The length the next piece must have, or `None` when every piece has been read.
    pub fn next_piece_len(&self) -> Option<usize> {
        let meta = self.current_meta()?;
        let left = meta.geometry.bytes() - self.current.len() as u64 * BLOCK_BYTES;
        Some(left.min(RDB_PIECE_BYTES as u64) as usize)
    }

    /// Takes the next piece, which must have exactly `next_piece_len()` bytes.
    pub fn push_piece(&mut self, piece: &[u8]) -> Result<(), CodecError> {
        let expected = self
            .next_piece_len()
            .ok_or(CodecError::BadData("more pieces than layers"))?;
        if piece.len() != expected {
            return Err(CodecError::BadData(
                "piece length does not match the header",
            ));
        }
        let meta = *self.current_meta().expect("checked by next_piece_len");
        let total = meta.geometry.blocks as usize;
        let needed = self.current.len() + piece.len() / BLOCK_BYTES as usize;
        if needed > self.current.capacity() {
            // Grow geometrically but never past the layer's size.
            let target = needed.max(self.current.capacity() * 2).min(total);
            self.current
                .try_reserve_exact(target - self.current.len())
                .map_err(|_| FilterError::OutOfMemory {
                    bytes: (target as u64) * BLOCK_BYTES,
                })?;
        }
        self.current
            .extend(piece.chunks_exact(BLOCK_BYTES as usize).map(|bytes| {
                let mut words = [0u64; 8];
                for (w, b) in words.iter_mut().zip(bytes.chunks_exact(8)) {
                    *w = u64::from_le_bytes(b.try_into().expect("8-byte chunk"));
                }
                Block(words)
            }));
        if self.current.len() == total {
            let blocks = std::mem::take(&mut self.current);
            self.layers.push(BlockedLayer::from_parts(meta, blocks));
        }
        Ok(())
    }

    /// The filter, once every piece has been read.
    pub fn finish(self) -> Result<ScalableFilter, CodecError> {
        if self.next_piece_len().is_some() {
            return Err(CodecError::BadData("value ends before its last piece"));
        }
        Ok(ScalableFilter::from_parts(
            self.layers,
            self.header.items,
            self.header.error,
            self.header.expansion,
        ))
    }
}

/// Decodes an RDB value held whole in memory (header, then pieces): for tests and fuzzing.
pub fn decode_value<'a>(
    header: &[u8],
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<ScalableFilter, CodecError> {
    let mut loader = FilterLoader::new(decode_header(header)?)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::FilterSpec;
    use crate::hash::ItemHash;

    fn filled(capacity: u64, error: f64, expansion: u32, n: u64) -> ScalableFilter {
        let spec = FilterSpec {
            capacity,
            error,
            expansion,
        };
        let mut f = ScalableFilter::new(spec, u64::MAX).unwrap();
        for i in 0..n {
            let _ = f.add(&ItemHash::of(&i.to_le_bytes()), u64::MAX);
        }
        f
    }

    /// A stored byte fixture of format version 1, so a change to the format cannot go
    /// unnoticed: a filter of capacity 2 at 1% (non-scaling) with one item, 0u64 LE.
    const V1_HEADER: [u8; 76] = [
        b'L', b'A', b'Y', b'E', b'R', b'B', b'L', b'M', 1, 0, 0, 0, // magic, version
        0, 0, 0, 0, // expansion 0
        0x7b, 0x14, 0xae, 0x47, 0xe1, 0x7a, 0x84, 0x3f, // 0.01
        1, 0, 0, 0, 0, 0, 0, 0, // items
        1, 0, 0, 0, // layers
        2, 0, 0, 0, 0, 0, 0, 0, // capacity
        0x7b, 0x14, 0xae, 0x47, 0xe1, 0x7a, 0x84, 0x3f, // 0.01
        1, 0, 0, 0, 0, 0, 0, 0, // items
        1, 0, 0, 0, 0, 0, 0, 0, // blocks
        1, 6, 0, 0, 0, 0, 0, 0, // b, k, reserved
    ];

    #[test]
    fn version_1_header_fixture_decodes_and_reencodes() {
        let f = filled(2, 0.01, 0, 1);
        assert_eq!(encode_header(&f), V1_HEADER);
        let h = decode_header(&V1_HEADER).unwrap();
        assert_eq!(h.items, 1);
        assert_eq!(h.expansion, 0);
        assert_eq!(h.layers[0].geometry.blocks_per_item, 1);
        assert_eq!(h.layers[0].geometry.hashes_per_block, 6);
    }

    #[test]
    fn rdb_value_round_trips() {
        for f in [
            filled(100, 0.01, 2, 1000),
            filled(1000, 1e-6, 0, 500),
            filled(1, 0.25, 1, 40),
            filled(10, 0.01, 2, 0),
        ] {
            let header = encode_header(&f);
            let back = decode_value(&header, rdb_pieces(&f)).unwrap();
            assert_eq!(back, f);
            assert_eq!(back.memory_usage(), f.memory_usage());
        }
    }

    #[test]
    fn large_layers_are_split_into_pieces_and_rebuilt() {
        // 80 MiB of bits: two pieces.
        let f = filled(70_000_000, 0.01, 0, 1000);
        let pieces: Vec<&[u8]> = rdb_pieces(&f).collect();
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].len(), RDB_PIECE_BYTES);
        let back = decode_value(&encode_header(&f), pieces).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.layers()[0].bytes(), f.layers()[0].bytes());
    }

    #[test]
    fn scandump_chunks_replay_into_an_identical_filter() {
        let f = filled(100, 0.01, 2, 2000);
        let mut it = 1i64;
        let mut chunks = Vec::new();
        loop {
            let (next, data) = dump_chunk(&f, it);
            if next == 0 {
                break;
            }
            chunks.push((next, data.to_vec()));
            it = next;
        }
        assert_eq!(chunks.len(), f.layers().len());
        let header = decode_header(&encode_header(&f)).unwrap();
        let mut g = filter_from_header(&header, u64::MAX).unwrap();
        for (it, data) in &chunks {
            load_chunk(&mut g, *it, data).unwrap();
        }
        assert_eq!(g, f);
    }

    #[test]
    fn chunks_never_exceed_16_mib_or_cross_a_layer() {
        let f = filled(20_000_000, 0.01, 0, 10);
        let total = f.layers()[0].as_bytes().len();
        let (next, first) = dump_chunk(&f, 1);
        assert_eq!(first.len(), MAX_CHUNK_BYTES);
        let (next2, second) = dump_chunk(&f, next);
        assert_eq!(second.len(), total - MAX_CHUNK_BYTES);
        assert_eq!(dump_chunk(&f, next2), (0, &[][..]));
        assert_eq!(dump_chunk(&f, -5), (0, &[][..]));
        assert_eq!(dump_chunk(&f, i64::MAX), (0, &[][..]));
    }

    #[test]
    fn chunks_at_bad_offsets_are_refused_without_change() {
        let mut f = filled(100, 0.01, 2, 150);
        let before = f.clone();
        let first_len = f.layers()[0].as_bytes().len() as i64;
        let total: i64 = f.layers().iter().map(|l| l.as_bytes().len() as i64).sum();
        // Past the end.
        assert_eq!(load_chunk(&mut f, total + 2, &[1]), Err(CodecError::NoLink));
        // Negative offset.
        assert_eq!(load_chunk(&mut f, 2, &[1, 2]), Err(CodecError::NoLink));
        assert_eq!(load_chunk(&mut f, i64::MIN, &[1]), Err(CodecError::NoLink));
        // Starting in layer 0 and running into layer 1.
        assert_eq!(
            load_chunk(&mut f, 1 + first_len + 1, &[0xff, 0xff]),
            Err(CodecError::TooBig)
        );
        assert!(matches!(
            load_chunk(&mut f, 5, &[]),
            Err(CodecError::BadData(_))
        ));
        assert_eq!(f, before);
    }

    #[test]
    fn headers_are_validated_field_by_field() {
        let good = encode_header(&filled(100, 0.01, 2, 300));
        assert!(decode_header(&good).is_ok());
        let field = |offset: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[offset..offset + bytes.len()].copy_from_slice(bytes);
            decode_header(&h)
        };
        let bad = |r: Result<Header, CodecError>| matches!(r, Err(CodecError::BadData(_)));
        assert!(bad(field(0, b"X")), "magic");
        assert!(bad(field(8, &[2])), "version");
        assert!(bad(field(9, &[1])), "reserved");
        assert!(bad(field(12, &40000u32.to_le_bytes())), "expansion");
        for e in [0.0, 1.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(bad(field(16, &e.to_le_bytes())), "error {e}");
            assert!(bad(field(36 + 8, &e.to_le_bytes())), "layer error {e}");
        }
        assert!(bad(field(24, &7u64.to_le_bytes())), "item sum");
        assert!(bad(field(32, &0u32.to_le_bytes())), "zero layers");
        assert!(
            bad(field(32, &u32::MAX.to_le_bytes())),
            "layer count vs length"
        );
        assert!(bad(field(36, &0u64.to_le_bytes())), "zero capacity");
        assert!(bad(field(36 + 24, &0u64.to_le_bytes())), "zero blocks");
        assert!(bad(field(36 + 24, &u64::MAX.to_le_bytes())), "huge blocks");
        assert!(bad(field(36 + 32, &[0])), "zero blocks per item");
        assert!(bad(field(36 + 32, &[5])), "five blocks per item");
        assert!(bad(field(36 + 33, &[0])), "zero hashes");
        assert!(bad(field(36 + 33, &[65])), "too many hashes");
        assert!(bad(field(36 + 34, &[1])), "layer reserved");
        for n in 0..good.len() {
            assert!(bad(decode_header(&good[..n])), "truncated at {n}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(bad(decode_header(&longer)));
    }

    #[test]
    fn pieces_of_the_wrong_length_or_count_are_refused() {
        let f = filled(100, 0.01, 2, 300);
        let header = encode_header(&f);
        let pieces: Vec<&[u8]> = rdb_pieces(&f).collect();
        assert!(decode_value(&header, pieces[..1].iter().copied()).is_err());
        let mut extra = pieces.clone();
        extra.push(&[0u8; 64]);
        assert!(decode_value(&header, extra).is_err());
        let short = &pieces[0][..pieces[0].len() - 64];
        assert!(decode_value(
            &header,
            std::iter::once(short).chain(pieces[1..].iter().copied())
        )
        .is_err());
    }

    #[test]
    fn a_header_that_lies_about_its_size_allocates_only_what_arrives() {
        // One layer claiming 2^40 blocks (64 TiB): decoding the header allocates nothing big,
        // and the loader fails on the first short piece.
        let mut h = encode_header(&filled(2, 0.01, 0, 0));
        h[36 + 24..36 + 32].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let header = decode_header(&h).unwrap();
        assert_eq!(header.bits_bytes(), 1 << 46);
        let mut loader = FilterLoader::new(header.clone()).unwrap();
        assert!(loader.push_piece(&[0u8; 64]).is_err());
        assert!(matches!(
            filter_from_header(&header, 1 << 30),
            Err(CodecError::Filter(FilterError::OverLimit { .. }))
        ));
    }

    #[test]
    fn layerbloom_headers_are_told_from_redisbloom_ones() {
        assert!(is_layerbloom_header(&V1_HEADER));
        // RedisBloom's header starts with its item count.
        let mut rb = 1234u64.to_le_bytes().to_vec();
        rb.extend_from_slice(&[0; 65]);
        assert!(!is_layerbloom_header(&rb));
    }
}

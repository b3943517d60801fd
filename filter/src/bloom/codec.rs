//! Every byte format layerbloom reads or writes, and their decoders.
//!
//! # layerbloom's header (format version 1), for blocked filters
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
//! # RedisBloom's header, for classic filters
//! `u64 items, u32 layers, u32 options, u32 growth`, then per layer `u64 bytes, u64 bits,
//! u64 size, f64 error, f64 bpe, u32 hashes, u64 entries, u8 n2` (20 + 53 · layers bytes). A
//! classic filter's `BF.SCANDUMP` emits exactly this, so its data can go back to RedisBloom.
//!
//! # Bit arrays and chunks
//! A layer's bits are its bytes (blocked: each 64-bit word little-endian). `BF.SCANDUMP` hands
//! them out in chunks of at most 16 MiB that never cross a layer, with RedisBloom's iterator
//! arithmetic: the chunk at byte offset `off` (into all layers' arrays, concatenated) of length
//! `len` comes with iterator `1 + off + len`, and `BF.LOADCHUNK key it data` writes `data` at
//! `it - 1 - len(data)`.
//!
//! # RDB values
//! layerbloom's own values (encoding version 100) are a header string, then each layer's bit
//! array in pieces of at most 64 MiB, so loading never needs a second copy of a whole layer.
//! The header is layerbloom's for blocked filters, and `"LBCLASSC"` followed by RedisBloom's
//! header for classic ones. RedisBloom's values (encoding versions 0 to 4) are read field by
//! field through [`RdbSource`] by [`decode_redisbloom_value`].
//!
//! Every decoder treats its input as hostile: lengths, counts and offsets are checked against
//! the bytes actually present before anything is allocated or indexed.

use crate::bloom::blocked::{Block, BlockedLayer, LayerMeta};
use crate::bloom::chain::{Chain, MAX_LAYERS};
use crate::bloom::classic::{
    zeroed_bytes, ClassicLayer, ClassicMeta, ClassicParams, KNOWN_OPTIONS,
};
use crate::bloom::filter::{on_layout, ScalableFilter};
use crate::bloom::layer::{Layer, LayerPlan};
use crate::bloom::sizing::{Geometry, BLOCK_BYTES};
use crate::error::FilterError;
use crate::fallible::{grow_toward, try_vec};
use crate::format::{add_bytes, Reader};
pub use crate::format::{
    CodecError, RdbSource, Strictness, Warning, MAX_CHUNK_BYTES, RDB_PIECE_BYTES,
};

/// First bytes of every layerbloom (blocked) header.
pub const MAGIC: [u8; 8] = *b"LAYERBLM";
/// First bytes of a classic filter's header in layerbloom's RDB values.
pub const CLASSIC_MAGIC: [u8; 8] = *b"LBCLASSC";
/// The header format this build writes.
pub const FORMAT_VERSION: u8 = 1;
/// Largest expansion factor a new filter may have (RedisBloom's bound).
pub const MAX_EXPANSION: u32 = 32768;
const CHAIN_BYTES: usize = 36;
const LAYER_BYTES: usize = 40;
const RB_CHAIN_BYTES: usize = 20;
const RB_LAYER_BYTES: usize = 53;

/// How a kind of layer is persisted, beyond what its chain's header says.
pub trait LayerCodec: Layer {
    /// What precedes its header in layerbloom's RDB values (nothing: the header's own magic
    /// tells it apart).
    const RDB_PREFIX: &'static [u8];
    /// A layer's bits while the pieces of an RDB value arrive.
    type Partial: Default;

    /// The chain's `BF.SCANDUMP` header.
    fn encode_header(chain: &Chain<Self>) -> Vec<u8>;
    /// A layer of persisted metadata whose bits are all zero (a `BF.LOADCHUNK` header's, to be
    /// filled by chunks).
    fn zeroed(meta: Self::Meta) -> Result<Self, FilterError>;
    /// Appends a piece of a layer of `total` bytes, reserving room as `grow_toward` says.
    fn extend(partial: &mut Self::Partial, piece: &[u8], total: usize) -> Result<(), FilterError>;
    /// The layer, once every byte of it has arrived; its set bits are counted, not trusted.
    fn finish(meta: Self::Meta, bits: Self::Partial) -> Self;
}

/// A decoded header of one kind: the whole filter but its bits, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainHeader<L: Layer> {
    pub items: u64,
    /// The chain's rate (for a classic chain, derived from its first layer's).
    pub error: f64,
    /// 0 for non-scaling.
    pub expansion: u32,
    pub params: L::Params,
    pub layers: Vec<L::Meta>,
}

/// A blocked filter's header: layerbloom's.
pub type BlockedHeader = ChainHeader<BlockedLayer>;
/// A classic filter's header, as RedisBloom writes it.
pub type ClassicHeader = ChainHeader<ClassicLayer>;

impl<L: LayerCodec> ChainHeader<L> {
    fn layer_lengths(&self) -> Vec<u64> {
        self.layers.iter().map(LayerPlan::bytes).collect()
    }

    fn memory_bytes(&self) -> u64 {
        let lengths = self.layer_lengths();
        Chain::<L>::modelled_bytes(lengths.len(), lengths)
    }

    /// The chain with these layers, all bits zero.
    fn zeroed_chain(&self) -> Result<Chain<L>, FilterError> {
        let mut layers = try_vec(self.layers.len())?;
        for meta in &self.layers {
            layers.push(L::zeroed(*meta)?);
        }
        Ok(Chain::from_parts(
            layers,
            self.items,
            self.error,
            self.expansion,
            self.params,
        ))
    }
}

/// A decoded header of either kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Header {
    Blocked(BlockedHeader),
    Classic(ClassicHeader),
}

impl Header {
    /// Each layer's bit array length in bytes.
    pub fn layer_lengths(&self) -> Vec<u64> {
        on_layout!(self, Header, h => h.layer_lengths())
    }

    /// Layers of the chain.
    pub fn layer_count(&self) -> usize {
        on_layout!(self, Header, h => h.layers.len())
    }

    /// Bytes of all bit arrays together (the decoders refused overflowing totals).
    pub fn bits_bytes(&self) -> u64 {
        self.layer_lengths().iter().sum()
    }

    /// Memory the filter will take once built, as `ScalableFilter::memory_usage` counts it.
    pub fn memory_bytes(&self) -> u64 {
        on_layout!(self, Header, h => h.memory_bytes())
    }
}

/// Whether bytes start like a layerbloom header (as opposed to RedisBloom's).
pub fn is_layerbloom_header(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// Encodes a filter's `BF.SCANDUMP` header: layerbloom's for a blocked filter, RedisBloom's
/// for a classic one.
pub fn encode_header(filter: &ScalableFilter) -> Vec<u8> {
    on_layout!(filter, ScalableFilter, c => LayerCodec::encode_header(c))
}

impl LayerCodec for BlockedLayer {
    const RDB_PREFIX: &'static [u8] = b"";
    type Partial = Vec<Block>;

    fn encode_header(chain: &Chain<Self>) -> Vec<u8> {
        let layers = chain.layers();
        let mut out = Vec::with_capacity(CHAIN_BYTES + LAYER_BYTES * layers.len());
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&chain.expansion_raw().to_le_bytes());
        out.extend_from_slice(&chain.error().to_le_bytes());
        out.extend_from_slice(&chain.items().to_le_bytes());
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

    fn zeroed(meta: LayerMeta) -> Result<Self, FilterError> {
        BlockedLayer::zeroed_with_meta(meta)
    }

    fn extend(blocks: &mut Vec<Block>, piece: &[u8], total: usize) -> Result<(), FilterError> {
        let block = BLOCK_BYTES as usize;
        let before = blocks.capacity();
        grow_toward(blocks, blocks.len() + piece.len() / block, total / block)?;
        if blocks.capacity() != before {
            crate::zeroed::advise_huge_pages(blocks);
        }
        crate::bloom::blocked::extend_from_bytes(blocks, piece);
        Ok(())
    }

    fn finish(meta: LayerMeta, blocks: Vec<Block>) -> Self {
        BlockedLayer::from_parts(meta, blocks)
    }
}

impl LayerCodec for ClassicLayer {
    const RDB_PREFIX: &'static [u8] = &CLASSIC_MAGIC;
    type Partial = Vec<u8>;

    fn encode_header(chain: &Chain<Self>) -> Vec<u8> {
        let layers = chain.layers();
        let params = chain.params();
        let mut out = Vec::with_capacity(RB_CHAIN_BYTES + RB_LAYER_BYTES * layers.len());
        out.extend_from_slice(&chain.items().to_le_bytes());
        out.extend_from_slice(&(layers.len() as u32).to_le_bytes());
        out.extend_from_slice(&params.options.to_le_bytes());
        out.extend_from_slice(&params.growth.to_le_bytes());
        for layer in layers {
            let m = layer.meta();
            out.extend_from_slice(&m.bytes().to_le_bytes());
            out.extend_from_slice(&m.bits.to_le_bytes());
            out.extend_from_slice(&m.size.to_le_bytes());
            out.extend_from_slice(&m.error.to_le_bytes());
            out.extend_from_slice(&m.bpe.to_le_bytes());
            out.extend_from_slice(&m.hashes.to_le_bytes());
            out.extend_from_slice(&m.entries.to_le_bytes());
            out.push(m.n2);
        }
        out
    }

    fn zeroed(meta: ClassicMeta) -> Result<Self, FilterError> {
        ClassicLayer::zeroed_with_meta(meta)
    }

    fn extend(bytes: &mut Vec<u8>, piece: &[u8], total: usize) -> Result<(), FilterError> {
        grow_toward(bytes, bytes.len() + piece.len(), total)?;
        bytes.extend_from_slice(piece);
        Ok(())
    }

    fn finish(meta: ClassicMeta, bytes: Vec<u8>) -> Self {
        ClassicLayer::from_parts(meta, bytes)
    }
}

fn is_rate(x: f64) -> bool {
    x > 0.0 && x < 1.0
}

/// Decodes and validates a `BF.LOADCHUNK` header of either kind. RedisBloom's is checked as
/// strictly as RedisBloom checks it.
pub fn decode_header(bytes: &[u8]) -> Result<Header, CodecError> {
    decode_header_with(bytes, Strictness::LoadChunk)
}

/// `decode_header` with a chosen strictness for RedisBloom's header: `Strictness::Rdb` for
/// headers replayed from the AOF or sent by a primary, which describe filters this server (or
/// its primary) already accepted from an RDB file, however lax.
pub fn decode_header_with(bytes: &[u8], strictness: Strictness) -> Result<Header, CodecError> {
    if is_layerbloom_header(bytes) {
        decode_blocked_header(bytes, strictness).map(Header::Blocked)
    } else {
        decode_classic_header(bytes, strictness).map(|(h, _)| Header::Classic(h))
    }
}

/// Decodes and validates a layerbloom (blocked) header; `strictness` decides only how the
/// item total is checked (see [`check_item_total`]).
pub fn decode_blocked_header(
    bytes: &[u8],
    strictness: Strictness,
) -> Result<BlockedHeader, CodecError> {
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
    if strictness == Strictness::LoadChunk && count > MAX_LAYERS {
        return Err(CodecError::BadData("more layers than a filter may have"));
    }
    // The length must match exactly before anything sized by `count` is allocated.
    if r.bytes.len() != count.saturating_mul(LAYER_BYTES) {
        return Err(CodecError::BadData(
            "header length does not match its layer count",
        ));
    }
    let mut layers = Vec::with_capacity(count);
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
        // No bound on the count against the capacity: a union (BF.MERGE) holds every
        // source's items in a layer, more than it was sized for, and must load back.
        if capacity == 0 {
            return Err(CodecError::BadData("a layer has no capacity"));
        }
        if !is_rate(layer_error) {
            return Err(CodecError::BadData("layer error rate out of range"));
        }
        if !geometry.is_valid() {
            return Err(CodecError::BadData("layer geometry out of range"));
        }
        byte_sum = add_bytes(byte_sum, geometry.bytes())?;
        layers.push(LayerMeta {
            capacity,
            error: layer_error,
            items: layer_items,
            geometry,
        });
    }
    let counts = layers.iter().map(|l| l.items);
    if let Some(warning) = check_item_total(items, counts, strictness)? {
        // Blocked filters are only ever written by layerbloom, which keeps the total exact.
        return Err(CodecError::BadData(warning));
    }
    Ok(BlockedHeader {
        items,
        error,
        expansion,
        params: (),
        layers,
    })
}

/// Checks a header's item total against its layers' counts. Refused: any mismatch when
/// strict; when lax, a saturated sum that is not the total, which is returned as a warning
/// for the caller to log or refuse.
fn check_item_total(
    items: u64,
    counts: impl Iterator<Item = u64> + Clone,
    strictness: Strictness,
) -> Result<Option<Warning>, CodecError> {
    const DIFFERS: &str = "item count differs from the layers' sum";
    match strictness {
        Strictness::LoadChunk => {
            let exact = counts.clone().try_fold(0u64, u64::checked_add);
            if items == u64::MAX {
                return Err(CodecError::BadData("item count is all ones"));
            }
            if exact != Some(items) {
                return Err(CodecError::BadData(DIFFERS));
            }
            Ok(None)
        }
        Strictness::Rdb => {
            let saturated = counts.fold(0u64, u64::saturating_add);
            Ok((saturated != items).then_some(DIFFERS))
        }
    }
}

/// Checks a classic chain's fields; returns the warnings of a lax load.
fn check_classic_chain(
    items: u64,
    options: u32,
    layers: &[ClassicMeta],
    strictness: Strictness,
) -> Result<Vec<Warning>, CodecError> {
    let mut warnings = Vec::new();
    if layers.is_empty() {
        return Err(CodecError::BadData("a filter has at least one layer"));
    }
    if options & !KNOWN_OPTIONS != 0 {
        match strictness {
            Strictness::LoadChunk => return Err(CodecError::BadData("unknown option bits")),
            Strictness::Rdb => warnings.push("unknown option bits, ignored"),
        }
    }
    if !layers.iter().all(ClassicMeta::hashes_match_bpe) {
        match strictness {
            Strictness::LoadChunk => {
                return Err(CodecError::BadData(
                    "a layer's hash count does not match its bits per entry",
                ))
            }
            Strictness::Rdb => {
                warnings.push("a layer's hash count differs from its bits per entry")
            }
        }
    }
    let sizes = layers.iter().map(|l| l.size);
    if check_item_total(items, sizes, strictness)?.is_some() {
        warnings.push("item count differs from the sum of the layers' counts");
    }
    Ok(warnings)
}

/// Decodes RedisBloom's header (the first `BF.SCANDUMP` chunk of a RedisBloom filter).
pub fn decode_classic_header(
    bytes: &[u8],
    strictness: Strictness,
) -> Result<(ClassicHeader, Vec<Warning>), CodecError> {
    let mut r = Reader { bytes };
    let items = r.u64()?;
    let count = r.u32()? as usize;
    let options = r.u32()?;
    let growth = r.u32()?;
    if strictness == Strictness::LoadChunk && count > MAX_LAYERS {
        return Err(CodecError::BadData("more layers than a filter may have"));
    }
    if r.bytes.len() != count.saturating_mul(RB_LAYER_BYTES) {
        return Err(CodecError::BadData(
            "header length does not match its layer count",
        ));
    }
    let mut layers = Vec::with_capacity(count);
    let mut byte_sum = 0u64;
    for _ in 0..count {
        let bytes = r.u64()?;
        let meta = ClassicMeta {
            bits: r.u64()?,
            size: r.u64()?,
            error: r.f64()?,
            bpe: r.f64()?,
            hashes: r.u32()?,
            entries: r.u64()?,
            n2: r.u8()?,
        };
        meta.check(bytes).map_err(CodecError::BadData)?;
        byte_sum = add_bytes(byte_sum, bytes)?;
        layers.push(meta);
    }
    let warnings = check_classic_chain(items, options, &layers, strictness)?;
    let params = ClassicParams { options, growth };
    Ok((
        ClassicHeader {
            items,
            error: params.chain_error(layers[0].error),
            expansion: params.expansion(),
            params,
            layers,
        },
        warnings,
    ))
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
    Ok(on_layout!(header, Header => ScalableFilter, h => h.zeroed_chain()?))
}

/// The `BF.SCANDUMP` chunk after iterator `it` (>= 1): `(next iterator, bytes)`, or
/// `(0, [])` past the end.
pub fn dump_chunk(filter: &ScalableFilter, it: i64) -> (i64, &[u8]) {
    let Some(offset) = u64::try_from(it).ok().and_then(|it| it.checked_sub(1)) else {
        return (0, &[]);
    };
    let Some((index, within, _)) = filter.locate(offset) else {
        return (0, &[]);
    };
    let bytes = filter.layer_bytes_at(index);
    let within = within as usize;
    let len = (bytes.len() - within).min(MAX_CHUNK_BYTES);
    let next = 1 + offset + len as u64;
    (next as i64, &bytes[within..within + len])
}

/// Applies a `BF.LOADCHUNK` chunk (iterator `it` > 1): its bits are ORed into the filter's,
/// never overwrite them. Loaded into a fresh filter (all zero) a chunk reads back exactly; into
/// a live one it keeps every item the filter already holds.
pub fn load_chunk(filter: &mut ScalableFilter, it: i64, data: &[u8]) -> Result<(), CodecError> {
    // RedisBloom's checks in its order: an iterator that cannot end a chunk this long is bad
    // data; one that ends it just before the first byte has no link; an empty chunk at a
    // valid offset writes nothing (RedisBloom answers OK).
    let len = data.len() as u64;
    let end = u64::try_from(it)
        .ok()
        .filter(|&it| it > 0 && it >= len)
        .ok_or(CodecError::BadData("iterator before the chunk's end"))?;
    let offset = (end - 1).checked_sub(len).ok_or(CodecError::NoLink)?;
    let (index, within, layer_len) = filter.locate(offset).ok_or(CodecError::NoLink)?;
    if within + len > layer_len {
        return Err(CodecError::TooBig);
    }
    filter.or_layer_bytes(index, within as usize, data);
    Ok(())
}

/// The header string of layerbloom's RDB value for a filter: its `BF.SCANDUMP` header, after
/// the kind's prefix.
pub fn encode_rdb_header(filter: &ScalableFilter) -> Vec<u8> {
    fn of<L: LayerCodec>(chain: &Chain<L>) -> Vec<u8> {
        let mut out = L::RDB_PREFIX.to_vec();
        out.extend_from_slice(&L::encode_header(chain));
        out
    }
    on_layout!(filter, ScalableFilter, c => of(c))
}

/// Decodes the header string of layerbloom's RDB value.
pub fn decode_rdb_header(bytes: &[u8]) -> Result<(Header, Vec<Warning>), CodecError> {
    match bytes.strip_prefix(&CLASSIC_MAGIC) {
        Some(rest) => {
            decode_classic_header(rest, Strictness::Rdb).map(|(h, w)| (Header::Classic(h), w))
        }
        None => {
            decode_blocked_header(bytes, Strictness::Rdb).map(|h| (Header::Blocked(h), Vec::new()))
        }
    }
}

/// The pieces an RDB value stores after the header, in order.
pub fn rdb_pieces(filter: &ScalableFilter) -> Vec<&[u8]> {
    filter
        .layer_bytes()
        .into_iter()
        .flat_map(|bytes| bytes.chunks(RDB_PIECE_BYTES))
        .collect()
}

/// Rebuilds a filter from an RDB value: the header, then its pieces one at a time. Memory
/// grows with the pieces actually read, so a header that lies about its size costs no more
/// than the data behind it.
pub struct FilterLoader(Loading);

/// A loader of either kind.
enum Loading {
    Blocked(ChainLoader<BlockedLayer>),
    Classic(ChainLoader<ClassicLayer>),
}

/// A chain's layers, the ones read whole and the one whose pieces are arriving.
struct ChainLoader<L: LayerCodec> {
    header: ChainHeader<L>,
    lengths: Vec<u64>,
    layers: Vec<L>,
    current: L::Partial,
    current_len: u64,
}

impl FilterLoader {
    /// Starts from a decoded header.
    pub fn new(header: Header) -> Result<Self, CodecError> {
        Ok(FilterLoader(
            on_layout!(header, Header => Loading, h => ChainLoader::new(h)?),
        ))
    }

    /// The length the next piece must have, or `None` when every piece has been read.
    pub fn next_piece_len(&self) -> Option<usize> {
        on_layout!(&self.0, Loading, l => l.next_piece_len())
    }

    /// Takes the next piece, which must have exactly `next_piece_len()` bytes.
    pub fn push_piece(&mut self, piece: &[u8]) -> Result<(), CodecError> {
        on_layout!(&mut self.0, Loading, l => l.push_piece(piece))
    }

    /// The filter, once every piece has been read.
    pub fn finish(self) -> Result<ScalableFilter, CodecError> {
        Ok(on_layout!(self.0, Loading => ScalableFilter, l => l.finish()?))
    }
}

impl<L: LayerCodec> ChainLoader<L> {
    fn new(header: ChainHeader<L>) -> Result<Self, CodecError> {
        let lengths = header.layer_lengths();
        let layers = try_vec(header.layers.len())?;
        Ok(ChainLoader {
            header,
            lengths,
            layers,
            current: L::Partial::default(),
            current_len: 0,
        })
    }

    fn next_piece_len(&self) -> Option<usize> {
        let total = *self.lengths.get(self.layers.len())?;
        Some((total - self.current_len).min(RDB_PIECE_BYTES as u64) as usize)
    }

    fn push_piece(&mut self, piece: &[u8]) -> Result<(), CodecError> {
        let expected = self
            .next_piece_len()
            .ok_or(CodecError::BadData("more pieces than layers"))?;
        if piece.len() != expected {
            return Err(CodecError::BadData(
                "piece length does not match the header",
            ));
        }
        let index = self.layers.len();
        let total = self.lengths[index] as usize;
        L::extend(&mut self.current, piece, total)?;
        self.current_len += piece.len() as u64;
        if self.current_len == total as u64 {
            self.current_len = 0;
            let bits = std::mem::take(&mut self.current);
            // Within the room reserved for the header's layer count.
            self.layers.push(L::finish(self.header.layers[index], bits));
        }
        Ok(())
    }

    fn finish(self) -> Result<Chain<L>, CodecError> {
        if self.next_piece_len().is_some() {
            return Err(CodecError::BadData("value ends before its last piece"));
        }
        let h = self.header;
        Ok(Chain::from_parts(
            self.layers,
            h.items,
            h.error,
            h.expansion,
            h.params,
        ))
    }
}

/// Decodes one of layerbloom's RDB values held whole in memory (header, then pieces).
pub fn decode_value<'a>(
    header: &[u8],
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<ScalableFilter, CodecError> {
    let (header, _) = decode_rdb_header(header)?;
    let mut loader = FilterLoader::new(header)?;
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

/// The highest encoding version RedisBloom writes.
pub const REDISBLOOM_MAX_ENCVER: i32 = 4;

/// Decodes a RedisBloom RDB value (encoding versions 0 to 4) into a classic filter, with the
/// warnings worth logging. Accepts every value RedisBloom's loader accepts that is safe to
/// use; refuses values whose layers would index outside their buffers.
pub fn decode_redisbloom_value<S: RdbSource>(
    src: &mut S,
    encver: i32,
) -> Result<(ScalableFilter, Vec<Warning>), CodecError> {
    decode_redisbloom_value_within(src, encver, None)
}

/// `decode_redisbloom_value` for a value a client sent (RESTORE): with `budget`, the bytes the
/// filter may take by the allocator model, the layer count is held to `MAX_LAYERS` as soon as
/// it is read, and each layer's cost (its bit array as its `bits` field declares it and as its
/// buffer really is, and its table entry) is charged before the next is read, so a payload
/// cannot build past either limit before it is refused.
pub fn decode_redisbloom_value_within<S: RdbSource>(
    src: &mut S,
    encver: i32,
    budget: Option<u64>,
) -> Result<(ScalableFilter, Vec<Warning>), CodecError> {
    if !(0..=REDISBLOOM_MAX_ENCVER).contains(&encver) {
        return Err(CodecError::BadData("unknown RedisBloom encoding version"));
    }
    let items = src.unsigned()?;
    let count = src.unsigned()?;
    let options = if encver >= 2 { src.unsigned()? } else { 0 };
    let growth = if encver >= 4 { src.unsigned()? } else { 2 };
    let options =
        u32::try_from(options).map_err(|_| CodecError::BadData("options out of range"))?;
    let growth = u32::try_from(growth).map_err(|_| CodecError::BadData("growth out of range"))?;
    if count == 0 {
        return Err(CodecError::BadData("a filter has at least one layer"));
    }
    if budget.is_some() && count > MAX_LAYERS as u64 {
        return Err(CodecError::BadData("more layers than a filter may have"));
    }
    let over_budget =
        CodecError::BadData("over the memory limit (bf-max-filter-memory or maxmemory)");
    let mut budget = budget;
    let mut charge = |bytes: u64| -> Result<(), CodecError> {
        if let Some(left) = &mut budget {
            *left = left.checked_sub(bytes).ok_or(over_budget.clone())?;
        }
        Ok(())
    };
    let entry = std::mem::size_of::<ClassicLayer>() as u64;
    // The count is trusted for an allocation only up to the layers a filter may grow to:
    // beyond, layers are pushed as they are read, and each needs a non-empty bit array from
    // the data.
    let mut layers: Vec<ClassicLayer> = try_vec(count.min(MAX_LAYERS as u64) as usize)?;
    let mut metas: Vec<ClassicMeta> = try_vec(count.min(MAX_LAYERS as u64) as usize)?;
    for _ in 0..count {
        let entries = src.unsigned()?;
        let error = src.double()?;
        let hashes = src.unsigned()?;
        let bpe = src.double()?;
        let (bits, n2) = if encver >= 1 {
            (src.unsigned()?, src.unsigned()?)
        } else {
            ((entries as f64 * bpe) as u64, 0)
        };
        charge(crate::footprint::allocation(bits.div_ceil(8), 1).saturating_add(entry))?;
        let buffer = src.buffer()?;
        let buffer = buffer.as_ref();
        let declared = bits.div_ceil(8);
        if buffer.len() as u64 > declared {
            charge(
                crate::footprint::allocation(buffer.len() as u64, 1)
                    - crate::footprint::allocation(declared, 1),
            )?;
        }
        let size = src.unsigned()?;
        let meta = ClassicMeta {
            entries,
            error,
            bpe,
            hashes: u32::try_from(hashes)
                .map_err(|_| CodecError::BadData("layer hash count out of range"))?,
            bits,
            n2: u8::try_from(n2)
                .map_err(|_| CodecError::BadData("layer power of two out of range"))?,
            size,
        };
        meta.check(buffer.len() as u64)
            .map_err(CodecError::BadData)?;
        let mut bytes = zeroed_bytes(0)?;
        bytes
            .try_reserve_exact(buffer.len())
            .map_err(|_| FilterError::OutOfMemory {
                bytes: buffer.len() as u64,
            })?;
        bytes.extend_from_slice(buffer);
        // Past the reserved count (RDB values only), growth is amortised.
        layers
            .try_reserve(1)
            .and_then(|()| metas.try_reserve(1))
            .map_err(|_| FilterError::OutOfMemory { bytes: entry })?;
        layers.push(ClassicLayer::from_parts(meta, bytes));
        metas.push(meta);
    }
    let warnings = check_classic_chain(items, options, &metas, Strictness::Rdb)?;
    let params = ClassicParams { options, growth };
    let error = params.chain_error(metas[0].error);
    let chain = Chain::from_parts(layers, items, error, params.expansion(), params);
    Ok((ScalableFilter::Classic(chain), warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::filter::{FilterSpec, Layout};

    fn filled_with(spec: FilterSpec, n: u64) -> ScalableFilter {
        let mut f = ScalableFilter::new(spec, u64::MAX).unwrap();
        for i in 0..n {
            let _ = f.add(&i.to_le_bytes(), u64::MAX);
        }
        f
    }

    fn filled(capacity: u64, error: f64, expansion: u32, n: u64) -> ScalableFilter {
        filled_with(FilterSpec::new(capacity, error, expansion), n)
    }

    fn classic(capacity: u64, error: f64, expansion: u32, n: u64) -> ScalableFilter {
        let spec = FilterSpec {
            layout: Layout::Classic,
            ..FilterSpec::new(capacity, error, expansion)
        };
        filled_with(spec, n)
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
        let h = decode_blocked_header(&V1_HEADER, Strictness::LoadChunk).unwrap();
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
            classic(100, 0.01, 2, 1000),
            classic(50, 0.001, 0, 60),
        ] {
            let back = decode_value(&encode_rdb_header(&f), rdb_pieces(&f)).unwrap();
            assert_eq!(back, f);
            assert_eq!(back.memory_usage(), f.memory_usage());
        }
    }

    #[test]
    fn large_layers_are_split_into_pieces_and_rebuilt() {
        // 80 MiB of bits: two pieces.
        let f = filled(70_000_000, 0.01, 0, 1000);
        let pieces = rdb_pieces(&f);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].len(), RDB_PIECE_BYTES);
        let back = decode_value(&encode_rdb_header(&f), pieces).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.memory_usage(), f.memory_usage());
    }

    #[test]
    fn scandump_chunks_replay_into_an_identical_filter() {
        for f in [filled(100, 0.01, 2, 2000), classic(100, 0.01, 2, 2000)] {
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
            assert_eq!(chunks.len(), f.layer_count());
            let header = decode_header(&encode_header(&f)).unwrap();
            let mut g = filter_from_header(&header, u64::MAX).unwrap();
            for (it, data) in &chunks {
                load_chunk(&mut g, *it, data).unwrap();
            }
            assert_eq!(g, f);
        }
    }

    #[test]
    fn chunks_never_exceed_16_mib_or_cross_a_layer() {
        let f = filled(20_000_000, 0.01, 0, 10);
        let total = f.layer_bytes()[0].len();
        let (next, first) = dump_chunk(&f, 1);
        assert_eq!(first.len(), MAX_CHUNK_BYTES);
        let (next2, second) = dump_chunk(&f, next);
        assert_eq!(second.len(), total - MAX_CHUNK_BYTES);
        assert_eq!(dump_chunk(&f, next2), (0, &[][..]));
        assert_eq!(dump_chunk(&f, -5), (0, &[][..]));
        assert_eq!(dump_chunk(&f, i64::MAX), (0, &[][..]));
    }

    #[test]
    fn a_chunk_of_zeros_erases_nothing_from_a_live_filter() {
        for mut f in [filled(100, 0.01, 2, 150), classic(100, 0.01, 2, 150)] {
            let before = f.clone();
            let summaries = f.layer_summaries();
            let mut it = 1i64;
            for bytes in f.layer_bytes().iter().map(|b| b.len()).collect::<Vec<_>>() {
                it += bytes as i64;
                load_chunk(&mut f, it, &vec![0; bytes]).unwrap();
            }
            assert_eq!(f, before);
            assert_eq!(f.layer_summaries(), summaries);
        }
    }

    #[test]
    fn chunks_at_bad_offsets_are_refused_without_change() {
        let mut f = filled(100, 0.01, 2, 150);
        let before = f.clone();
        let first_len = f.layer_bytes()[0].len() as i64;
        let total: i64 = f.layer_bytes().iter().map(|l| l.len() as i64).sum();
        assert_eq!(load_chunk(&mut f, total + 2, &[1]), Err(CodecError::NoLink));
        assert_eq!(load_chunk(&mut f, 2, &[1, 2]), Err(CodecError::NoLink));
        for (it, data) in [(i64::MIN, &[1][..]), (0, &[]), (-1, &[]), (1, &[1, 2])] {
            assert!(
                matches!(load_chunk(&mut f, it, data), Err(CodecError::BadData(_))),
                "{it}"
            );
        }
        assert_eq!(load_chunk(&mut f, total + 2, &[]), Err(CodecError::NoLink));
        assert_eq!(
            load_chunk(&mut f, 1 + first_len + 1, &[0xff, 0xff]),
            Err(CodecError::TooBig)
        );
        assert_eq!(f, before);
        // An empty chunk at a valid offset is accepted and changes nothing.
        assert_eq!(load_chunk(&mut f, 5, &[]), Ok(()));
        assert_eq!(f, before);
    }

    #[test]
    fn headers_with_more_layers_than_the_cap_are_refused() {
        use crate::bloom::chain::tests::longest_chain;
        use crate::Layout;
        for layout in [Layout::Blocked, Layout::Classic] {
            let f = longest_chain(layout);
            let header = encode_header(&f);
            // The longest legal chain round-trips through its header and its RDB value.
            let decoded = decode_header(&header).unwrap();
            assert_eq!(decoded.layer_lengths().len(), MAX_LAYERS);
            // One layer more: the count field and one more copy of the last layer's record.
            let (count_at, record) = match layout {
                Layout::Blocked => (32, LAYER_BYTES),
                Layout::Classic => (8, RB_LAYER_BYTES),
            };
            let mut longer = header.clone();
            longer[count_at..count_at + 4].copy_from_slice(&(MAX_LAYERS as u32 + 1).to_le_bytes());
            let last = header[header.len() - record..].to_vec();
            longer.extend_from_slice(&last);
            assert_eq!(
                decode_header(&longer).unwrap_err(),
                CodecError::BadData("more layers than a filter may have"),
                "{layout:?}"
            );
            // A filter that already has them (an RDB file or AOF of an older layerbloom, or
            // of RedisBloom, which sets no bound) still loads: it just cannot grow. Both
            // records hold a layer's items at offset 16; the chain's total follows them.
            let total_at = match layout {
                Layout::Blocked => 24,
                Layout::Classic => 0,
            };
            let u64_at =
                |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            let total = u64_at(&longer, total_at) + u64_at(&last, 16);
            longer[total_at..total_at + 8].copy_from_slice(&total.to_le_bytes());
            let loaded = decode_header_with(&longer, Strictness::Rdb).unwrap();
            assert_eq!(loaded.layer_lengths().len(), MAX_LAYERS + 1, "{layout:?}");
        }
    }

    #[test]
    fn blocked_headers_are_validated_field_by_field() {
        let good = encode_header(&filled(100, 0.01, 2, 300));
        assert!(decode_header(&good).is_ok());
        let field = |offset: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[offset..offset + bytes.len()].copy_from_slice(bytes);
            decode_blocked_header(&h, Strictness::LoadChunk)
        };
        let bad = |r: Result<BlockedHeader, CodecError>| matches!(r, Err(CodecError::BadData(_)));
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
            assert!(
                bad(decode_blocked_header(&good[..n], Strictness::Rdb)),
                "truncated at {n}"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(bad(decode_blocked_header(&longer, Strictness::Rdb)));
    }

    #[test]
    fn redisbloom_headers_are_checked_as_redisbloom_checks_them() {
        let good = encode_header(&classic(100, 0.01, 2, 300));
        assert!(matches!(decode_header(&good), Ok(Header::Classic(_))));
        let with = |offset: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[offset..offset + bytes.len()].copy_from_slice(bytes);
            h
        };
        // Unknown option bits and a wrong total: refused by LOADCHUNK, accepted by RDB.
        for h in [
            with(12, &(5u32 | 16).to_le_bytes()),
            with(0, &1u64.to_le_bytes()),
        ] {
            assert!(decode_header(&h).is_err());
            let (_, warnings) = decode_classic_header(&h, Strictness::Rdb).unwrap();
            assert_eq!(warnings.len(), 1);
        }
        // Unsafe in any mode: bits that do not match the buffer, zero layers, bad rates.
        let layer = 20;
        for h in [
            with(layer, &1u64.to_le_bytes()),
            with(layer + 8, &0u64.to_le_bytes()),
            with(layer + 24, &1.5f64.to_le_bytes()),
            with(layer + 24, &f64::NAN.to_le_bytes()),
            with(layer + 40, &0u32.to_le_bytes()),
            with(layer + 52, &[64]),
            with(8, &0u32.to_le_bytes()),
            with(8, &1000u32.to_le_bytes()),
        ] {
            assert!(decode_classic_header(&h, Strictness::Rdb).is_err());
        }
        for n in 0..good.len() {
            assert!(decode_header(&good[..n]).is_err(), "truncated at {n}");
        }
    }

    #[test]
    fn a_client_header_with_an_all_ones_or_overflowing_total_is_refused_but_replays() {
        // Blocked: two layers whose counts saturate at 2^64 - 1 (only a crafted RDB value
        // has such counts); then an exact total of 2^64 - 1.
        let good = encode_header(&filled(100, 0.01, 2, 150));
        let with = |total: u64, first: u64, second: u64| {
            let mut h = good.clone();
            h[24..32].copy_from_slice(&total.to_le_bytes());
            for (i, (items, capacity)) in [(first, first), (second, second.max(1))]
                .into_iter()
                .enumerate()
            {
                let at = CHAIN_BYTES + LAYER_BYTES * i;
                h[at..at + 8].copy_from_slice(&capacity.to_le_bytes());
                h[at + 16..at + 24].copy_from_slice(&items.to_le_bytes());
            }
            h
        };
        for h in [
            with(u64::MAX, u64::MAX, 20),
            with(u64::MAX, u64::MAX - 20, 20),
        ] {
            assert!(decode_header(&h).is_err(), "client");
            assert!(decode_header_with(&h, Strictness::Rdb).is_ok(), "replay");
        }
        assert!(decode_header(&with(u64::MAX - 1, u64::MAX - 21, 20)).is_ok());
        assert!(decode_header_with(&with(5, u64::MAX, 20), Strictness::Rdb).is_err());

        // RedisBloom's header, likewise.
        let good = encode_header(&classic(10, 0.01, 2, 30));
        let size_at = |layer: usize| RB_CHAIN_BYTES + RB_LAYER_BYTES * layer + 16;
        let with = |total: u64, first: u64, second: u64| {
            let mut h = good.clone();
            h[0..8].copy_from_slice(&total.to_le_bytes());
            h[size_at(0)..size_at(0) + 8].copy_from_slice(&first.to_le_bytes());
            h[size_at(1)..size_at(1) + 8].copy_from_slice(&second.to_le_bytes());
            h
        };
        // Replayed: a saturated or exact sum loads quietly, a wrapping one with a warning.
        for (h, warned) in [
            (with(u64::MAX, u64::MAX, 20), false),
            (with(u64::MAX, u64::MAX - 20, 20), false),
            (with(4, u64::MAX - 15, 20), true),
        ] {
            assert!(decode_header(&h).is_err(), "client");
            let (_, warnings) = decode_classic_header(&h, Strictness::Rdb).unwrap();
            assert_eq!(!warnings.is_empty(), warned);
        }
    }

    #[test]
    fn a_client_header_whose_second_link_has_a_stray_hash_count_is_refused_but_replays() {
        let good = encode_header(&classic(10, 0.01, 2, 30));
        assert!(decode_header(&good).is_ok());
        let hashes_at = RB_CHAIN_BYTES + RB_LAYER_BYTES + 40;
        let bpe_at = RB_CHAIN_BYTES + RB_LAYER_BYTES + 32;
        let mut stray = good.clone();
        stray[hashes_at..hashes_at + 4].copy_from_slice(&1u32.to_le_bytes());
        let mut doubled = good.clone();
        let bpe = f64::from_le_bytes(good[bpe_at..bpe_at + 8].try_into().unwrap());
        doubled[bpe_at..bpe_at + 8].copy_from_slice(&(2.0 * bpe).to_le_bytes());
        for h in [stray, doubled] {
            assert_eq!(
                decode_header(&h),
                Err(CodecError::BadData(
                    "a layer's hash count does not match its bits per entry"
                ))
            );
            let (_, warnings) = decode_classic_header(&h, Strictness::Rdb).unwrap();
            assert_eq!(
                warnings,
                ["a layer's hash count differs from its bits per entry"]
            );
        }
    }

    #[test]
    fn pieces_of_the_wrong_length_or_count_are_refused() {
        let f = filled(100, 0.01, 2, 300);
        let header = encode_rdb_header(&f);
        let pieces = rdb_pieces(&f);
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
        assert!(!is_layerbloom_header(&encode_header(&classic(
            10, 0.01, 2, 5
        ))));
    }

    /// An in-memory RDB value for the RedisBloom decoder.
    enum Field {
        U(u64),
        D(f64),
        B(Vec<u8>),
    }

    struct Fields(std::vec::IntoIter<Field>);

    impl RdbSource for Fields {
        type Buffer = Vec<u8>;
        fn unsigned(&mut self) -> Result<u64, CodecError> {
            match self.0.next() {
                Some(Field::U(v)) => Ok(v),
                _ => Err(CodecError::BadData("expected an unsigned")),
            }
        }
        fn double(&mut self) -> Result<f64, CodecError> {
            match self.0.next() {
                Some(Field::D(v)) => Ok(v),
                _ => Err(CodecError::BadData("expected a double")),
            }
        }
        fn buffer(&mut self) -> Result<Vec<u8>, CodecError> {
            match self.0.next() {
                Some(Field::B(v)) => Ok(v),
                _ => Err(CodecError::BadData("expected a buffer")),
            }
        }
    }

    /// The encver-4 fields of a classic filter, as RedisBloom saves them.
    fn v4_fields(f: &ScalableFilter) -> Vec<Field> {
        let ScalableFilter::Classic(c) = f else {
            panic!("classic")
        };
        let (layers, params) = (c.layers(), c.params());
        let mut out = vec![
            Field::U(f.items()),
            Field::U(layers.len() as u64),
            Field::U(u64::from(params.options)),
            Field::U(u64::from(params.growth)),
        ];
        for l in layers {
            let m = l.meta();
            out.extend([
                Field::U(m.entries),
                Field::D(m.error),
                Field::U(u64::from(m.hashes)),
                Field::D(m.bpe),
                Field::U(m.bits),
                Field::U(u64::from(m.n2)),
                Field::B(l.as_bytes().to_vec()),
                Field::U(m.size),
            ]);
        }
        out
    }

    #[test]
    fn redisbloom_encver_4_values_load_as_the_same_classic_filter() {
        let f = classic(10, 0.01, 2, 100);
        let (g, warnings) =
            decode_redisbloom_value(&mut Fields(v4_fields(&f).into_iter()), 4).unwrap();
        assert_eq!(g, f);
        assert!(warnings.is_empty());
        assert!((0..100u64).all(|i| g.contains(&i.to_le_bytes())));
    }

    #[test]
    fn truncated_or_hostile_redisbloom_values_are_refused() {
        let f = classic(10, 0.01, 2, 100);
        let fields = v4_fields(&f);
        for cut in 0..fields.len() {
            let mut partial = v4_fields(&f);
            partial.truncate(cut);
            assert!(
                decode_redisbloom_value(&mut Fields(partial.into_iter()), 4).is_err(),
                "cut {cut}"
            );
        }
        // A layer count of 2^63 with one layer's worth of data fails on the missing data.
        let mut huge = v4_fields(&f);
        huge[1] = Field::U(1 << 63);
        assert!(decode_redisbloom_value(&mut Fields(huge.into_iter()), 4).is_err());
        assert!(decode_redisbloom_value(&mut Fields(v4_fields(&f).into_iter()), 5).is_err());
    }
}

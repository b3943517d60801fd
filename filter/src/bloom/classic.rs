//! The classic layer: bit for bit what RedisBloom stores and computes, so filters written by
//! RedisBloom (RDB files, DUMP payloads, SCANDUMP streams) answer exactly as they did there.
//!
//! # The math, as RedisBloom implements it
//! * Bits per entry `bpe = -ln(error) / 0.480453013918201` (that constant, `ln(2)^2` rounded,
//!   not the exact value: it decides the last bit of `bpe`), hashes `k = ceil(0.693147180559945
//!   · bpe)`.
//! * Without the NOROUND option a layer is power-of-two sized: `n2 = ilogb(entries·bpe) + 1`,
//!   `2^n2` bits are indexed, and `entries` grows by `floor(floor(2^n2 − entries·bpe) / bpe)` to
//!   use them. With NOROUND, `bits = floor(entries·bpe)` (at least 1) and `n2 = 0`. Either way
//!   the buffer is whole 64-bit words and the stored `bits` is `8 · bytes`.
//! * Item hash: `a = MurmurHash64A(item, 0xc6a4a7935bd1e995)`, `b = MurmurHash64A(item, a)` with
//!   FORCE64; very old filters use 32-bit MurmurHash2 (`seed 0x9747b28c`), still summed in 64
//!   bits. Probe `i < k` tests bit `(a + i·b) mod 2^64`, reduced `mod 2^n2` when `n2 > 0`, else
//!   `mod bits`; bit `x` is byte `x >> 3`, mask `1 << (x & 7)` (least significant bit first,
//!   `bitvec`'s `Lsb0` order over bytes).

use bitvec::prelude::{BitSlice, Lsb0};
use bitvec::view::BitView;

use crate::bloom::layer::{format_g, Allocation, Layer, LayerPlan, LayerSummary};
use crate::bloom::math;
use crate::bloom::spec::{FilterSpec, Layout, SizingError, TIGHTENING};
use crate::error::FilterError;
use crate::hash::{murmur2_32, murmur64a};

/// Option bit: layers are not rounded to a power of two.
pub const OPT_NOROUND: u32 = 1;
/// Option bit: `entries` is a bit count (not used by chains).
pub const OPT_ENTS_IS_BITS: u32 = 2;
/// Option bit: 64-bit hashing.
pub const OPT_FORCE64: u32 = 4;
/// Option bit: the chain does not grow.
pub const OPT_NO_SCALING: u32 = 8;
/// Every option bit RedisBloom defines.
pub const KNOWN_OPTIONS: u32 = OPT_NOROUND | OPT_ENTS_IS_BITS | OPT_FORCE64 | OPT_NO_SCALING;
/// Options of the filters RedisBloom 2.x creates (plus `OPT_NO_SCALING` for non-scaling ones).
pub const DEFAULT_OPTIONS: u32 = OPT_NOROUND | OPT_FORCE64;

/// The most hashes any valid error rate gives (`bpe` of the smallest double is about 1550).
pub const MAX_CLASSIC_HASHES: u32 = 1100;

/// One item's classic hash pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassicHash {
    a: u64,
    b: u64,
}

impl ClassicHash {
    /// Hashes an item as a filter with `options` does.
    pub fn of(item: &[u8], options: u32) -> Self {
        if options & OPT_FORCE64 != 0 {
            let a = murmur64a(item, 0xc6a4_a793_5bd1_e995);
            ClassicHash {
                a,
                b: murmur64a(item, a),
            }
        } else {
            let a = murmur2_32(item, 0x9747_b28c);
            ClassicHash {
                a: u64::from(a),
                b: u64::from(murmur2_32(item, a)),
            }
        }
    }
}

/// A classic layer's fields, as RedisBloom persists them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassicMeta {
    /// Capacity.
    pub entries: u64,
    pub error: f64,
    pub bpe: f64,
    pub hashes: u32,
    /// `8 ·` the buffer's bytes.
    pub bits: u64,
    /// Power-of-two exponent of the indexed bits, or 0.
    pub n2: u8,
    /// Items added to this layer.
    pub size: u64,
}

impl ClassicMeta {
    /// Bytes of the bit array.
    pub fn bytes(&self) -> u64 {
        self.bits / 8
    }

    /// The number of bits probes are reduced to.
    fn modulus(&self) -> u64 {
        if self.n2 > 0 {
            1u64 << self.n2
        } else {
            self.bits
        }
    }

    /// Whether the hash count is the one the bits per entry give, as every layer RedisBloom
    /// or layerbloom creates has it (RedisBloom's BF.LOADCHUNK refuses a header without it).
    pub fn hashes_match_bpe(&self) -> bool {
        math::redisbloom_hashes(self.bpe) == f64::from(self.hashes)
    }

    /// RedisBloom's sizing of a new layer.
    pub fn plan(entries: u64, error: f64, options: u32) -> Result<Self, SizingError> {
        if !(error > 0.0 && error < 1.0) {
            return Err(SizingError::BadErrorRate);
        }
        if entries == 0 {
            return Err(SizingError::BadCapacity);
        }
        let bpe = math::redisbloom_bits_per_entry(error);
        let hashes = math::redisbloom_hashes(bpe);
        let wanted = entries as f64 * bpe;
        let hashes_ok = (1.0..=f64::from(MAX_CLASSIC_HASHES)).contains(&hashes);
        if !hashes_ok || wanted.is_nan() || wanted >= 2f64.powi(62) {
            return Err(SizingError::TooLarge);
        }
        let (entries, n2, indexed) = if options & OPT_NOROUND != 0 {
            (entries, 0u8, (wanted as u64).max(1))
        } else {
            let n2 = (ilogb(wanted) + 1).max(0) as u8;
            let indexed = 1u64 << n2;
            let extra = ((indexed as f64 - wanted).floor() / bpe).floor() as u64;
            (entries.saturating_add(extra), n2, indexed)
        };
        let bytes = indexed.div_ceil(64) * 8;
        Ok(ClassicMeta {
            entries,
            error,
            bpe,
            hashes: hashes as u32,
            bits: bytes * 8,
            n2,
            size: 0,
        })
    }

    /// Whether a persisted layer is safe and meaningful with a buffer of `buffer_len` bytes:
    /// every probe stays inside the buffer and the per-item work is bounded.
    pub fn check(&self, buffer_len: u64) -> Result<(), &'static str> {
        if !(self.error > 0.0 && self.error < 1.0) {
            return Err("layer error rate out of range");
        }
        if !self.bpe.is_finite() {
            return Err("layer bits per entry is not a number");
        }
        if self.hashes == 0 || self.hashes > MAX_CLASSIC_HASHES {
            return Err("layer hash count out of range");
        }
        if self.n2 > 63 {
            return Err("layer power of two out of range");
        }
        if self.bits == 0 || Some(self.bits) != buffer_len.checked_mul(8) {
            return Err("layer bit count does not match its buffer");
        }
        if self.n2 > 0 && (1u64 << self.n2) > self.bits {
            return Err("layer indexes more bits than its buffer holds");
        }
        Ok(())
    }
}

/// `ilogb` of a positive finite double: its binary exponent.
fn ilogb(x: f64) -> i32 {
    if x < f64::MIN_POSITIVE {
        return -1023;
    }
    ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// A classic layer.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassicLayer {
    meta: ClassicMeta,
    bytes: Vec<u8>,
    set_bits: u64,
}

impl ClassicLayer {
    /// A new, empty layer.
    pub fn new(meta: ClassicMeta) -> Result<Self, FilterError> {
        let bytes = zeroed_bytes(meta.bytes())?;
        Ok(ClassicLayer {
            meta,
            bytes,
            set_bits: 0,
        })
    }

    /// A layer from persisted parts; `meta.check(bytes.len())` must have passed.
    /// A layer of persisted metadata whose bits are all zero: nothing to count.
    pub(crate) fn zeroed_with_meta(meta: ClassicMeta) -> Result<Self, FilterError> {
        Ok(ClassicLayer {
            meta,
            bytes: zeroed_bytes(meta.bytes())?,
            set_bits: 0,
        })
    }

    pub fn from_parts(meta: ClassicMeta, bytes: Vec<u8>) -> Self {
        debug_assert!(meta.check(bytes.len() as u64).is_ok());
        let set_bits = crate::bits::count_ones(&bytes);
        ClassicLayer {
            meta,
            bytes,
            set_bits,
        }
    }

    pub fn meta(&self) -> &ClassicMeta {
        &self.meta
    }

    pub fn is_full(&self) -> bool {
        self.meta.size >= self.meta.entries
    }

    /// Sets the item count (RedisBloom's `size`), which a merge estimates from the bits.
    pub(crate) fn set_items(&mut self, items: u64) {
        self.meta.size = items;
    }

    pub fn set_bits(&self) -> u64 {
        self.set_bits
    }

    /// Bytes allocated for the bit array.
    pub fn bytes(&self) -> u64 {
        self.bytes.capacity() as u64
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn bits(&self) -> &BitSlice<u8, Lsb0> {
        self.bytes.view_bits::<Lsb0>()
    }

    pub fn contains(&self, hash: &ClassicHash) -> bool {
        let bits = self.bits();
        probes(&self.meta, *hash).all(|x| bits[x])
    }

    /// Sets the item's bits and counts it.
    pub fn insert(&mut self, hash: &ClassicHash) {
        let meta = self.meta;
        let bits = self.bytes.view_bits_mut::<Lsb0>();
        let mut flipped = 0;
        for x in probes(&meta, *hash) {
            if !bits[x] {
                bits.set(x, true);
                flipped += 1;
            }
        }
        self.set_bits += flipped;
        // Saturating: RedisBloom's loader accepts any count, including the top of the range.
        self.meta.size = self.meta.size.saturating_add(1);
    }

    /// ORs bytes in at `offset` (range checked by the caller), recounting the range's bits.
    pub(crate) fn or_bytes(&mut self, offset: usize, data: &[u8]) {
        let set = crate::bits::or_into(&mut self.bytes[offset..offset + data.len()], data);
        self.set_bits += set;
    }

    /// ORs the bits of `other`, a layer of the same plan, in (BF.MERGE), reading only the
    /// pages of `other` that were written (`zeroed::or_written`).
    pub(crate) fn or_layer(&mut self, other: &ClassicLayer) {
        debug_assert_eq!(self.bytes.len(), other.bytes.len());
        if other.set_bits == 0 {
            return;
        }
        self.set_bits += crate::zeroed::or_written(&mut self.bytes, &other.bytes);
    }

    /// A deep copy as lazy as the layer (`zeroed::try_copy_sparse`).
    pub fn try_clone(&self) -> Result<Self, FilterError> {
        let bytes = crate::zeroed::try_copy_sparse(&self.bytes, self.set_bits == 0, false)?;
        Ok(ClassicLayer {
            meta: self.meta,
            bytes,
            set_bits: self.set_bits,
        })
    }

    /// RedisBloom's BF.DEBUG line for this layer.
    pub fn debug_line(&self, hash_width: u32) -> String {
        let m = &self.meta;
        let bits = if m.bits != 0 { m.bits } else { 1u64 << m.n2 };
        format!(
            "bytes:{} bits:{} hashes:{} hashwidth:{} capacity:{} size:{} ratio:{}",
            m.bytes(),
            bits,
            m.hashes,
            hash_width,
            m.entries,
            m.size,
            format_g(m.error)
        )
    }
}

impl LayerPlan for ClassicMeta {
    fn capacity(&self) -> u64 {
        self.entries
    }

    fn error(&self) -> f64 {
        self.error
    }

    fn bytes(&self) -> u64 {
        ClassicMeta::bytes(self)
    }
}

/// What every layer of a classic chain shares, as RedisBloom persists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassicParams {
    /// RedisBloom's option bits (hash width, rounding, non-scaling).
    pub options: u32,
    /// RedisBloom's growth factor, kept as loaded even for a non-scaling filter.
    pub growth: u32,
}

impl ClassicParams {
    /// Whether the chain does not grow.
    pub fn nonscaling(&self) -> bool {
        self.options & OPT_NO_SCALING != 0
    }

    /// The chain's growth factor (0 for non-scaling).
    pub fn expansion(&self) -> u32 {
        if self.nonscaling() {
            0
        } else {
            self.growth
        }
    }

    /// The chain's error rate, which RedisBloom's formats do not persist: derived from the
    /// first layer's, which is the chain's halved unless the chain does not grow.
    pub fn chain_error(&self, first_layer_error: f64) -> f64 {
        if self.nonscaling() {
            first_layer_error
        } else {
            first_layer_error / TIGHTENING
        }
    }
}

/// Every method forwards to the inherent one of the same name, or is RedisBloom's answer to
/// what a chain asks.
impl Layer for ClassicLayer {
    const LAYOUT: Layout = Layout::Classic;
    const BITS_ALIGN: u64 = 1;

    type Params = ClassicParams;
    type Hash = ClassicHash;
    type Meta = ClassicMeta;

    /// RedisBloom's option bits for a classic filter of this spec.
    fn params_for(spec: &FilterSpec) -> ClassicParams {
        ClassicParams {
            options: DEFAULT_OPTIONS | if spec.nonscaling { OPT_NO_SCALING } else { 0 },
            growth: spec.expansion,
        }
    }

    fn hash(item: &[u8], params: &ClassicParams) -> ClassicHash {
        ClassicHash::of(item, params.options)
    }

    fn plan(entries: u64, error: f64, params: &ClassicParams) -> Result<ClassicMeta, SizingError> {
        ClassicMeta::plan(entries, error, params.options)
    }

    fn derived_error(params: &ClassicParams, first_layer_error: f64) -> Option<f64> {
        Some(params.chain_error(first_layer_error))
    }

    fn empty(plan: ClassicMeta) -> Result<Self, FilterError> {
        ClassicLayer::new(plan)
    }

    fn meta(&self) -> &ClassicMeta {
        &self.meta
    }

    fn contains(&self, hash: &ClassicHash) -> bool {
        ClassicLayer::contains(self, hash)
    }

    fn insert(&mut self, hash: &ClassicHash) {
        ClassicLayer::insert(self, hash)
    }

    fn is_full(&self) -> bool {
        ClassicLayer::is_full(self)
    }

    fn summary(&self) -> LayerSummary {
        let m = &self.meta;
        LayerSummary {
            capacity: m.entries,
            error: m.error,
            items: m.size,
            bytes: m.bytes(),
            set_bits: self.set_bits,
            total_bits: m.bits,
            hashes: m.hashes,
            blocks_per_item: 1,
        }
    }

    fn fpr_of(summary: &LayerSummary) -> f64 {
        math::classic_fpr(summary)
    }

    fn distinct_of(summary: &LayerSummary) -> f64 {
        math::classic_distinct(summary)
    }

    fn debug_line(&self, params: &ClassicParams) -> String {
        ClassicLayer::debug_line(self, Self::hash_width(params).unwrap_or(64))
    }

    fn hash_width(params: &ClassicParams) -> Option<u32> {
        Some(if params.options & OPT_FORCE64 != 0 {
            64
        } else {
            32
        })
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn or_bytes(&mut self, offset: usize, data: &[u8]) {
        ClassicLayer::or_bytes(self, offset, data)
    }

    fn bytes(&self) -> u64 {
        ClassicLayer::bytes(self)
    }

    fn allocation(&self) -> Option<Allocation<'_>> {
        Allocation::of_vec(&self.bytes)
    }

    fn relocate(&mut self, to: &mut dyn crate::relocate::Relocator) {
        crate::relocate::relocate_vec(&mut self.bytes, to);
    }

    fn try_clone(&self) -> Result<Self, FilterError> {
        ClassicLayer::try_clone(self)
    }
}

/// The bit positions an item probes in a layer.
fn probes(meta: &ClassicMeta, hash: ClassicHash) -> impl Iterator<Item = usize> {
    let modulus = meta.modulus();
    let power_of_two = meta.n2 > 0;
    (0..u64::from(meta.hashes)).map(move |i| {
        let x = hash.a.wrapping_add(i.wrapping_mul(hash.b));
        (if power_of_two {
            x & (modulus - 1)
        } else {
            x % modulus
        }) as usize
    })
}

/// Allocates zeroed bytes, reporting failure instead of aborting; untouched pages stay lazy
/// (see `zeroed`).
pub(crate) fn zeroed_bytes(len: u64) -> Result<Vec<u8>, FilterError> {
    crate::zeroed::try_zeroed_vec(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    /// (entries asked, error, options) -> (entries, bpe, hashes, bits, n2, bytes), from
    /// RedisBloom's own BF.DEBUG output and the fixtures' layer records.
    #[test]
    fn sizing_matches_redisbloom() {
        type Case = (u64, f64, u32, u64, u64, u32, u64, u8, u64);
        let cases: &[Case] = &[
            // NOROUND (RedisBloom 2.x filters)
            (10, 0.005, 5, 10, 0, 8, 128, 0, 16),
            (20, 0.0025, 5, 20, 0, 9, 256, 0, 32),
            (40, 0.00125, 5, 40, 0, 10, 576, 0, 72),
            (80, 0.000625, 5, 80, 0, 11, 1280, 0, 160),
            (3, 0.005, 5, 3, 0, 8, 64, 0, 8),
            (215, 0.001, 5, 215, 0, 10, 3136, 0, 392),
            (
                1_000_000, 0.0005, 5, 1_000_000, 0, 11, 15_820_288, 0, 1_977_536,
            ),
            // power of two (options without NOROUND)
            (400, 0.005, 0, 742, 0, 8, 8192, 13, 1024),
            (1484, 0.0025, 0, 2627, 0, 9, 32768, 15, 4096),
            (2, 0.005, 0, 2, 0, 8, 64, 5, 8),
            (4, 0.0025, 0, 5, 0, 9, 64, 6, 8),
        ];
        for &(asked, error, options, entries, _, hashes, bits, n2, bytes) in cases {
            let m = ClassicMeta::plan(asked, error, options).unwrap();
            assert_eq!(
                (m.entries, m.hashes, m.bits, m.n2, m.bytes()),
                (entries, hashes, bits, n2, bytes),
                "asked {asked} at {error} options {options}"
            );
        }
        assert_eq!(
            ClassicMeta::plan(10, 0.005, 5).unwrap().bpe,
            11.027753418256411
        );
    }

    #[test]
    fn hash_variants_pin_known_vectors() {
        // Values this implementation produces; the fixture tests prove them against
        // RedisBloom's bit arrays, these catch a regression without the fixtures.
        assert_eq!(murmur64a(b"", 0), 0);
        assert_ne!(murmur64a(b"a", 0), murmur64a(b"b", 0));
        assert_eq!(murmur2_32(b"", 0), 0);
        let h64 = ClassicHash::of(b"item", OPT_FORCE64);
        let h32 = ClassicHash::of(b"item", 0);
        assert!(h32.a < 1 << 32 && h32.b < 1 << 32);
        assert_ne!(h64.a, h32.a);
    }

    #[test]
    fn added_items_are_found_and_probes_stay_in_range() {
        for options in [5, 0, 4, 1] {
            let mut layer =
                ClassicLayer::new(ClassicMeta::plan(50, 0.01, options).unwrap()).unwrap();
            for i in 0..50u32 {
                layer.insert(&ClassicHash::of(&i.to_le_bytes(), options));
            }
            assert!((0..50u32).all(|i| layer.contains(&ClassicHash::of(&i.to_le_bytes(), options))));
            let counted: u64 = layer
                .as_bytes()
                .iter()
                .map(|b| u64::from(b.count_ones()))
                .sum();
            assert_eq!(counted, layer.set_bits());
        }
    }

    #[test]
    fn persisted_layers_are_checked_against_their_buffers() {
        let good = ClassicMeta::plan(100, 0.01, 5).unwrap();
        assert!(good.check(good.bytes()).is_ok());
        assert!(good.check(good.bytes() - 1).is_err());
        let bad = |f: fn(&mut ClassicMeta)| {
            let mut m = good;
            f(&mut m);
            m.check(good.bytes()).is_err()
        };
        assert!(bad(|m| m.error = 0.0));
        assert!(bad(|m| m.error = f64::NAN));
        assert!(bad(|m| m.hashes = 0));
        assert!(bad(|m| m.hashes = 5000));
        assert!(bad(|m| m.n2 = 64));
        assert!(bad(|m| m.n2 = 20));
        assert!(bad(|m| m.bits = 0));
        assert!(bad(|m| m.bpe = f64::INFINITY));
    }
}

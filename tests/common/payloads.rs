//! DUMP payloads and RDB module values built field by field, with a valid CRC-64: the module's
//! decoders are attacked, not Redis's checksum (tests/hostile.rs, tests/recovery.rs). Also
//! RedisBloom's value and SCANDUMP header layouts, to feed layerbloom RedisBloom's data.

use super::kind::server;

/// CRC-64 as Redis computes DUMP and RDB checksums ("Jones": polynomial 0xad93d23594c935a9,
/// reflected input and output, initial value 0, no final xor).
pub fn crc64(bytes: &[u8]) -> u64 {
    const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    (c >> 1) ^ POLY_REFLECTED
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        t
    });
    bytes.iter().fold(0u64, |crc, &b| {
        table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// An RDB length: 6-bit, 14-bit, 32-bit or 64-bit form, the shortest that fits.
pub fn rdb_len(n: u64) -> Vec<u8> {
    if n < 1 << 6 {
        vec![n as u8]
    } else if n < 1 << 14 {
        vec![0x40 | (n >> 8) as u8, n as u8]
    } else if n <= u64::from(u32::MAX) {
        let mut v = vec![0x80];
        v.extend_from_slice(&(n as u32).to_be_bytes());
        v
    } else {
        let mut v = vec![0x81];
        v.extend_from_slice(&n.to_be_bytes());
        v
    }
}

/// The 64-bit id Redis gives a module data type: its 9-character name at 6 bits a character,
/// then the 10-bit encoding version.
pub fn module_type_id(name: &[u8; 9], encver: u64) -> u64 {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = name.iter().fold(0u64, |id, c| {
        let pos = CHARSET.iter().position(|x| x == c).expect("name charset") as u64;
        (id << 6) | pos
    });
    (id << 10) | (encver & 1023)
}

pub const RDB_TYPE_MODULE_2: u8 = 7;
pub const OP_EOF: u8 = 0;
pub const OP_UINT: u8 = 2;
pub const OP_FLOAT: u8 = 3;
pub const OP_DOUBLE: u8 = 4;
pub const OP_STRING: u8 = 5;
/// The data type's encoding version for layerbloom's own values.
pub const LAYERBLOOM_ENCVER: u64 = 100;
/// RedisBloom's current encoding version.
pub const REDISBLOOM_ENCVER: u64 = 4;

/// One field of a module value as the module API saves it.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    Uint(u64),
    Double(f64),
    Str(Vec<u8>),
    /// Bytes written as they are: an opcode-level attack.
    Raw(Vec<u8>),
}

impl Field {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Field::Uint(n) => {
                out.push(OP_UINT);
                out.extend(rdb_len(*n));
            }
            Field::Double(x) => {
                out.push(OP_DOUBLE);
                out.extend_from_slice(&x.to_le_bytes());
            }
            Field::Str(s) => {
                out.push(OP_STRING);
                out.extend(rdb_len(s.len() as u64));
                out.extend_from_slice(s);
            }
            Field::Raw(b) => out.extend_from_slice(b),
        }
    }

    pub fn str(&self) -> &[u8] {
        match self {
            Field::Str(s) => s,
            other => panic!("expected a string field, got {other:?}"),
        }
    }
}

/// A DUMP payload of a module value.
#[derive(Debug, Clone)]
pub struct Payload {
    pub type_byte: u8,
    pub module_id: u64,
    pub fields: Vec<Field>,
    pub eof: bool,
    pub rdb_version: u16,
}

impl Payload {
    pub fn new(encver: u64, fields: Vec<Field>) -> Self {
        Payload {
            type_byte: RDB_TYPE_MODULE_2,
            module_id: module_type_id(b"MBbloom--", encver),
            fields,
            eof: true,
            rdb_version: server().rdb_version(),
        }
    }

    /// A layerbloom value: the header string, then the bit array pieces.
    pub fn layerbloom(header: &[u8], pieces: &[Vec<u8>]) -> Self {
        let mut fields = vec![Field::Str(header.to_vec())];
        fields.extend(pieces.iter().map(|p| Field::Str(p.clone())));
        Payload::new(LAYERBLOOM_ENCVER, fields)
    }

    pub fn body(&self) -> Vec<u8> {
        let mut out = vec![self.type_byte];
        out.extend(rdb_len(self.module_id));
        for f in &self.fields {
            f.encode(&mut out);
        }
        if self.eof {
            out.push(OP_EOF);
        }
        out
    }

    /// The payload bytes, footer and valid checksum included.
    pub fn bytes(&self) -> Vec<u8> {
        seal(self.body(), self.rdb_version)
    }
}

/// Appends the RDB version and the CRC-64 of everything before it.
pub fn seal(mut body: Vec<u8>, rdb_version: u16) -> Vec<u8> {
    body.extend_from_slice(&rdb_version.to_le_bytes());
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// One layer of a RedisBloom value.
#[derive(Debug, Clone)]
pub struct RbLayer {
    pub entries: u64,
    pub error: f64,
    pub hashes: u64,
    pub bpe: f64,
    pub bits: u64,
    pub n2: u64,
    pub bytes: Vec<u8>,
    pub size: u64,
}

/// RedisBloom's layer sizing (REDISBLOOM_COMPAT.md), NOROUND: an empty layer.
// RedisBloom's own rounded ln(2) and ln(2)^2 decide its sizes, not the exact constants.
#[allow(clippy::approx_constant)]
pub fn rb_layer(entries: u64, error: f64) -> RbLayer {
    let bpe = -error.ln() / 0.480453013918201;
    let hashes = (0.693147180559945 * bpe).ceil() as u64;
    let bits = ((entries as f64 * bpe) as u64).max(1);
    let bytes = bits.div_ceil(64) * 8;
    RbLayer {
        entries,
        error,
        hashes,
        bpe,
        bits: bytes * 8,
        n2: 0,
        bytes: vec![0; bytes as usize],
        size: 0,
    }
}

/// A RedisBloom chain.
#[derive(Debug, Clone)]
pub struct RbChain {
    pub items: u64,
    pub options: u64,
    pub growth: u64,
    pub layers: Vec<RbLayer>,
}

impl RbChain {
    /// A scaling 64-bit-hash chain of two empty layers (options NOROUND | FORCE64).
    pub fn sample() -> Self {
        RbChain {
            items: 0,
            options: 5,
            growth: 2,
            layers: vec![rb_layer(100, 0.005), rb_layer(200, 0.0025)],
        }
    }

    /// The value's fields at an encoding version, as RedisBloom's field order has it.
    pub fn fields(&self, encver: u64) -> Vec<Field> {
        let mut f = vec![
            Field::Uint(self.items),
            Field::Uint(self.layers.len() as u64),
        ];
        if encver >= 2 {
            f.push(Field::Uint(self.options));
        }
        if encver >= 4 {
            f.push(Field::Uint(self.growth));
        }
        for l in &self.layers {
            f.push(Field::Uint(l.entries));
            f.push(Field::Double(l.error));
            f.push(Field::Uint(l.hashes));
            f.push(Field::Double(l.bpe));
            if encver >= 1 {
                f.push(Field::Uint(l.bits));
                f.push(Field::Uint(l.n2));
            }
            f.push(Field::Str(l.bytes.clone()));
            f.push(Field::Uint(l.size));
        }
        f
    }

    pub fn payload(&self, encver: u64) -> Vec<u8> {
        Payload::new(encver, self.fields(encver)).bytes()
    }

    /// RedisBloom's SCANDUMP header.
    pub fn scandump_header(&self) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&self.items.to_le_bytes());
        h.extend_from_slice(&(self.layers.len() as u32).to_le_bytes());
        h.extend_from_slice(&(self.options as u32).to_le_bytes());
        h.extend_from_slice(&(self.growth as u32).to_le_bytes());
        for l in &self.layers {
            h.extend_from_slice(&(l.bytes.len() as u64).to_le_bytes());
            h.extend_from_slice(&l.bits.to_le_bytes());
            h.extend_from_slice(&l.size.to_le_bytes());
            h.extend_from_slice(&l.error.to_le_bytes());
            h.extend_from_slice(&l.bpe.to_le_bytes());
            h.extend_from_slice(&(l.hashes as u32).to_le_bytes());
            h.extend_from_slice(&l.entries.to_le_bytes());
            h.push(l.n2 as u8);
        }
        h
    }
}

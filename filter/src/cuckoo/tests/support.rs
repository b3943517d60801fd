//! Test-only readers: RedisBloom's DUMP payloads (RDB module fields, LZF strings) and
//! SHA-256, so the fixtures can be checked without more dependencies.

use crate::cuckoo::codec::RdbField;
use crate::format::{CodecError, RdbSource};

/// One field of a module value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    U(u64),
    S(Vec<u8>),
    /// A field kind the cuckoo type never writes (signed, float, double).
    Other,
}

/// A DUMP payload's module value: its encoding version and fields. `complete` is false when
/// the bytes ended (or went wrong) before the end-of-value opcode.
#[derive(Debug)]
pub struct DumpValue {
    pub encver: i32,
    pub fields: Vec<Field>,
    pub complete: bool,
}

struct Bytes<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }

    /// An RDB length, or (`true`, kind) for a special string encoding.
    fn len(&mut self) -> Option<(u64, bool)> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => (u64::from(b & 63), false),
            1 => ((u64::from(b & 63) << 8) | u64::from(self.byte()?), false),
            2 if b == 0x80 => (
                u64::from(u32::from_be_bytes(self.take(4)?.try_into().ok()?)),
                false,
            ),
            2 if b == 0x81 => (u64::from_be_bytes(self.take(8)?.try_into().ok()?), false),
            3 => (u64::from(b & 63), true),
            _ => return None,
        })
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        let (n, special) = self.len()?;
        if !special {
            return Some(self.take(usize::try_from(n).ok()?)?.to_vec());
        }
        match n {
            0 => Some((self.byte()? as i8).to_string().into_bytes()),
            1 => Some(
                i16::from_le_bytes(self.take(2)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            2 => Some(
                i32::from_le_bytes(self.take(4)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            3 => {
                let (clen, _) = self.len()?;
                let (ulen, _) = self.len()?;
                let c = self.take(usize::try_from(clen).ok()?)?;
                lzf_decompress(c, usize::try_from(ulen).ok()?)
            }
            _ => None,
        }
    }
}

/// LZF (liblzf's format, as Redis compresses strings).
pub fn lzf_decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            out.extend_from_slice(input.get(i..i + n)?);
            i += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            for k in 0..n + 2 {
                let byte = out[start + k];
                out.push(byte);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

impl DumpValue {
    pub fn parse(payload: &[u8]) -> Self {
        let mut r = Bytes { b: payload, pos: 0 };
        let mut v = DumpValue {
            encver: -1,
            fields: Vec::new(),
            complete: false,
        };
        if r.byte() != Some(7) {
            return v;
        }
        let Some((id, false)) = r.len() else { return v };
        v.encver = (id & 1023) as i32;
        loop {
            let Some((op, false)) = r.len() else { return v };
            let field = match op {
                0 => break,
                1 | 2 => match r.len() {
                    Some((n, false)) if op == 2 => Field::U(n),
                    Some((_, false)) => Field::Other,
                    _ => return v,
                },
                3 => match r.take(4) {
                    Some(_) => Field::Other,
                    None => return v,
                },
                4 => match r.take(8) {
                    Some(_) => Field::Other,
                    None => return v,
                },
                5 => match r.string() {
                    Some(s) => Field::S(s),
                    None => return v,
                },
                _ => return v,
            };
            v.fields.push(field);
        }
        // The RDB version and the checksum follow.
        v.complete = r.b.len() == r.pos + 10;
        v
    }

    /// The fields as the module API would read them.
    pub fn source(&self) -> Fields {
        Fields(self.fields.clone().into_iter())
    }

    /// What an encoder's fields would be in a payload.
    pub fn from_fields<'a>(fields: impl Iterator<Item = RdbField<'a>>) -> Vec<Field> {
        fields
            .map(|f| match f {
                RdbField::Unsigned(n) => Field::U(n),
                RdbField::Buffer(b) => Field::S(b.to_vec()),
            })
            .collect()
    }
}

pub struct Fields(std::vec::IntoIter<Field>);

impl RdbSource for Fields {
    type Buffer = Vec<u8>;
    fn unsigned(&mut self) -> Result<u64, CodecError> {
        match self.0.next() {
            Some(Field::U(n)) => Ok(n),
            _ => Err(CodecError::BadData("expected an unsigned")),
        }
    }
    fn double(&mut self) -> Result<f64, CodecError> {
        Err(CodecError::BadData("the cuckoo type has no doubles"))
    }
    fn buffer(&mut self) -> Result<Vec<u8>, CodecError> {
        match self.0.next() {
            Some(Field::S(s)) => Ok(s),
            _ => Err(CodecError::BadData("expected a string")),
        }
    }
}

#[path = "sha256.rs"]
mod sha256;
pub use sha256::sha256_hex;

#[test]
fn sha256_and_lzf_match_known_answers() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    // A literal run of 3 bytes, then a back-reference copying 4 bytes from 3 back.
    assert_eq!(
        lzf_decompress(&[2, b'a', b'b', b'c', (2 << 5), 2], 7).unwrap(),
        b"abcabca"
    );
}

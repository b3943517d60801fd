//! What an INFO command of a structure (`BF.INFO`, `CF.INFO`) asks for: all of RedisBloom's
//! fields, the health figures, or one field, each structure with its own field words. Plain
//! data, so argument parsing is unit tested (and fuzzed) without Redis; `Reply::info` answers.

use crate::error::BfError;

/// What an INFO command asks for, `F` being its structure's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoRequest<F> {
    /// No field word: RedisBloom's fields, as a map (RESP2: a flat array).
    Full,
    /// `HEALTH`: the health figures, as a map (RESP2: a flat array).
    Health,
    /// One field word: RESP2 an array of its value, RESP3 a one-entry map.
    One(F),
}

impl<F> InfoRequest<F> {
    /// The request of an INFO command whose field words `field` reads.
    pub fn parse_with(
        word: Option<&[u8]>,
        field: impl FnOnce(&[u8]) -> Result<F, BfError>,
    ) -> Result<Self, BfError> {
        match word {
            None => Ok(InfoRequest::Full),
            Some(w) if w.eq_ignore_ascii_case(b"HEALTH") => Ok(InfoRequest::Health),
            Some(w) => field(w).map(InfoRequest::One),
        }
    }
}

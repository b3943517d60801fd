//! RedisBloom's RDB values (encoding versions 0 to 4), read field by field as the module reads
//! them through `RedisModule_LoadUnsigned` / `LoadDouble` / `LoadStringBuffer`.
//!
//! Input: one byte choosing the encoding version (-2 to 5, so unknown ones are tried too),
//! then the fields: unsigneds as compact varints (see `Input::varint`), doubles as 8 bytes,
//! buffers as a varint length and the bytes. A read past the end fails, as an RDB read does.

#![no_main]

use layerbloom_filter::bloom::codec::{self, CodecError, RdbSource};
use layerbloom_fuzz::{exercise, Input};
use libfuzzer_sys::fuzz_target;

struct Source<'a>(Input<'a>);

const EOF: CodecError = CodecError::BadData("the value ends here");

impl<'a> RdbSource for Source<'a> {
    type Buffer = &'a [u8];

    fn unsigned(&mut self) -> Result<u64, CodecError> {
        self.0.varint().ok_or(EOF)
    }

    fn double(&mut self) -> Result<f64, CodecError> {
        self.0.f64().ok_or(EOF)
    }

    fn buffer(&mut self) -> Result<&'a [u8], CodecError> {
        let len = self.0.varint().ok_or(EOF)?;
        let len = usize::try_from(len).map_err(|_| EOF)?;
        self.0.take(len).ok_or(EOF)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(v) = input.u8() else {
        return;
    };
    let encver = i32::from(v % 8) - 2;
    let mut src = Source(input);
    let Ok((mut filter, _warnings)) = codec::decode_redisbloom_value(&mut src, encver) else {
        return;
    };
    assert!((0..=codec::REDISBLOOM_MAX_ENCVER).contains(&encver));
    assert!(filter.is_classic());
    exercise(&mut filter, b"redisbloom");
});

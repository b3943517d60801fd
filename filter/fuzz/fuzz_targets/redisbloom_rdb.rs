//! RedisBloom's RDB values (encoding versions 0 to 4), read field by field as the module reads
//! them through `RedisModule_LoadUnsigned` / `LoadDouble` / `LoadStringBuffer`.
//!
//! Input: one byte choosing the encoding version (-2 to 5, so unknown ones are tried too),
//! then the fields: unsigneds as compact varints (see `Input::varint`), doubles as 8 bytes,
//! buffers as a varint length and the bytes. A read past the end fails, as an RDB read does.

#![no_main]

use layerbloom_filter::bloom::codec;
use layerbloom_fuzz::{exercise, FuzzSource, Input};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(v) = input.u8() else {
        return;
    };
    let encver = i32::from(v % 8) - 2;
    let mut src = FuzzSource(input);
    let Ok((mut filter, _warnings)) = codec::decode_redisbloom_value(&mut src, encver) else {
        return;
    };
    assert!((0..=codec::REDISBLOOM_MAX_ENCVER).contains(&encver));
    assert!(filter.is_classic());
    exercise(&mut filter, b"redisbloom");
});

//! layerbloom's own RDB value (encoding version 100): a header string, then the bit array
//! pieces, fed to the loader one at a time exactly as the module's `rdb_load` does.
//!
//! Input: `u16 len, header`, then any number of `u16 len, piece`.

#![no_main]

use layerbloom_filter::bloom::codec::{self, FilterLoader};
use layerbloom_fuzz::{exercise, Input};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let Some(header_bytes) = input.bytes16() else {
        return;
    };
    let mut pieces = Vec::new();
    while let Some(p) = input.bytes16() {
        pieces.push(p);
        if input.is_empty() {
            break;
        }
    }
    let whole = codec::decode_value(header_bytes, pieces.iter().copied());

    let Ok((header, _warnings)) = codec::decode_rdb_header(header_bytes) else {
        assert!(whole.is_err());
        return;
    };
    let lengths = header.layer_lengths();
    let Ok(mut loader) = FilterLoader::new(header) else {
        return;
    };
    let mut next = pieces.iter();
    let mut used = 0;
    while let Some(expected) = loader.next_piece_len() {
        let Some(piece) = next.next() else {
            assert!(
                whole.is_err(),
                "a value without all its pieces was accepted"
            );
            return;
        };
        used += 1;
        match loader.push_piece(piece) {
            Ok(()) => assert_eq!(piece.len(), expected),
            Err(_) => {
                assert!(whole.is_err());
                return;
            }
        }
    }
    let Ok(mut filter) = loader.finish() else {
        assert!(whole.is_err());
        return;
    };
    // The streaming loader and the whole-value decoder agree.
    if used == pieces.len() {
        assert_eq!(whole.as_ref().ok(), Some(&filter));
    } else {
        assert!(whole.is_err(), "trailing pieces were accepted");
    }
    let loaded: Vec<u64> = filter
        .layer_bytes()
        .iter()
        .map(|b| b.len() as u64)
        .collect();
    assert_eq!(loaded, lengths, "layers as long as the header said");
    exercise(&mut filter, header_bytes.get(..4).unwrap_or(b"rdb"));
});

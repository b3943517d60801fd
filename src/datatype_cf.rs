//! The native data types of cuckoo filters and their callbacks. `MBbloomCF` is RedisBloom's
//! type (so RDB files and DUMP payloads move both ways): encoding version 4 is RedisBloom's
//! current one, written and read; 0..3 (RedisBloom 1.x / 2.0) are read. `LBcuckoo-` holds
//! the extension's filters (a rate of one's choosing, `wide_codec`): a type of its own, so
//! that RedisBloom refuses such a value by its type instead of misreading its slots, and so
//! that its encoding version is its own. Both hold an `AnyFilter` and share every callback
//! but the loader. The callbacks share the Bloom type's panic guard, RDB field reader and
//! RESTORE limits (`datatype.rs`).

use std::ffi::{c_int, c_void};

use layerbloom_filter::cuckoo::codec::{self, RdbField};
use layerbloom_filter::cuckoo::AnyFilter;
use layerbloom_filter::format::CodecError;
use redis_module::{native_types::RedisType, raw};

use crate::datatype::{guarded, restore_limits, type_methods, FREE_EFFORT_BYTES};
use crate::raw_api::{Digest, Io};

pub static CUCKOO_TYPE: RedisType = RedisType::new("MBbloomCF", codec::ENCVER, type_methods!());

/// The extension's type (see the module documentation).
pub use wide::WIDE_CUCKOO_TYPE;

/// The type a filter is stored under.
pub fn type_of(filter: &AnyFilter) -> &'static RedisType {
    if filter.is_wide() {
        &WIDE_CUCKOO_TYPE
    } else {
        &CUCKOO_TYPE
    }
}

mod wide {
    use super::*;
    use layerbloom_filter::cuckoo::wide_codec;

    pub static WIDE_CUCKOO_TYPE: RedisType =
        RedisType::new("LBcuckoo-", wide_codec::ENCVER, type_methods!());

    extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
        load(rdb, encver, "extension cuckoo", |io, encver, budget| {
            wide_codec::decode_rdb(io, encver, budget).map(AnyFilter::from)
        })
    }
}

/// # Safety
/// `value` must be a live `Box<AnyFilter>` this module stored or returned.
unsafe fn filter<'a>(value: *mut c_void) -> &'a AnyFilter {
    unsafe { &*value.cast::<AnyFilter>() }
}

/// A loaded or copied filter as the value Redis stores, counted in `INFO bf`.
fn into_value(filter: AnyFilter) -> *mut c_void {
    let value = Box::new(filter);
    crate::cf::stats::entered(&value);
    Box::into_raw(value).cast()
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    load(rdb, encver, "cuckoo", |io, encver, budget| {
        codec::decode_rdb(io, encver, budget).map(AnyFilter::Redis)
    })
}

/// Loads a value with `decode`, logging and refusing what it refuses.
fn load(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
    what: &str,
    decode: impl FnOnce(&mut Io, i32, Option<u64>) -> Result<AnyFilter, CodecError>,
) -> *mut c_void {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    guarded("cuckoo rdb_load", std::ptr::null_mut(), || {
        // A client's RESTORE is charged against the limits as it is read, before each
        // sub-filter's slots are allocated; loads from disk, the AOF or a primary are not.
        let budget = restore_limits(&io).map(|l| l.bytes());
        match decode(&mut io, encver, budget) {
            Ok(filter) => into_value(filter),
            Err(why) => {
                crate::log::warning(
                    None,
                    &format!(
                        "layerbloom: cannot load a {what} filter (encoding version {encver}): \
                         {why}"
                    ),
                );
                std::ptr::null_mut()
            }
        }
    })
}

extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    guarded("cuckoo rdb_save", (), || {
        // SAFETY: Redis passes a value of this type.
        for field in unsafe { filter(value) }.rdb_fields() {
            match field {
                RdbField::Unsigned(v) => io.save_unsigned(v),
                RdbField::Buffer(bytes) => io.save_string_buffer(bytes),
            }
        }
    })
}

/// The `CF.LOADCHUNK` data chunks that rebuild `filter`'s slots after its header: every
/// piece (at most `MAX_CHUNK_BYTES`, whole slot groups for the extension) that holds a
/// fingerprint, with its iterator (the position just after it). Unlike `CF.SCANDUMP`, a
/// filter with no items still has its chunks: an AOF rewrite keeps every filter as it is.
fn slot_chunks(filter: &AnyFilter) -> impl Iterator<Item = (u64, &[u8])> {
    let mut start = 0u64;
    filter
        .slot_arrays()
        .into_iter()
        .flat_map(move |(bytes, piece)| {
            let base = start;
            start += bytes.len() as u64;
            bytes
                .chunks(piece as usize)
                .scan(base, |at, piece| {
                    *at += piece.len() as u64;
                    Some((1 + *at, piece))
                })
                .filter(|(_, piece)| piece.iter().any(|&b| b != 0))
        })
}

extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(aof) };
    guarded("cuckoo aof_rewrite", (), || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value) };
        let mut emit = |it: u64, bytes: &[u8]| {
            // SAFETY: `key` is the key Redis passed to this callback.
            unsafe { io.emit_aof_key_int_buffer(c"CF.LOADCHUNK", key, it as i64, bytes) }
        };
        emit(1, &filter.header());
        for (it, piece) in slot_chunks(filter) {
            emit(it, piece);
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    guarded("cuckoo mem_usage", 0, || {
        // SAFETY: Redis passes a value of this type.
        unsafe { filter(value.cast_mut()) }.memory_usage() as usize
    })
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: the digest Redis passed to this callback, used only during it.
    let mut digest = unsafe { Digest::of_callback(md) };
    guarded("cuckoo digest", (), || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value) };
        digest.add_string_buffer(&filter.header());
        for (bytes, _) in filter.slot_arrays() {
            digest.add_string_buffer(bytes);
        }
        digest.end_sequence();
    })
}

extern "C" fn free(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    guarded("cuckoo free", (), || {
        // SAFETY: a `Box<AnyFilter>` this module created; Redis frees it exactly once.
        let filter = unsafe { Box::from_raw(value.cast::<AnyFilter>()) };
        crate::cf::stats::freed(&filter);
        drop(filter);
    })
}

extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guarded("cuckoo free_effort", 0, || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value.cast_mut()) };
        (filter.sub_filter_count() as u64 + filter.memory_usage() / FREE_EFFORT_BYTES) as usize
    })
}

extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guarded("cuckoo copy", std::ptr::null_mut(), || {
        // SAFETY: Redis passes a value of this type.
        match unsafe { filter(value.cast_mut()) }.try_clone() {
            Ok(copy) => into_value(copy),
            Err(e) => {
                crate::log::warning(None, &format!("layerbloom: COPY failed: {e}"));
                std::ptr::null_mut()
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use layerbloom_filter::cuckoo::{CuckooFilter, Limits, Params};
    use layerbloom_filter::format::Strictness;

    #[test]
    fn aof_chunks_skip_empty_pieces_and_end_after_their_bytes() {
        let mut f = AnyFilter::Redis(CuckooFilter::new(64, Params::default(), u64::MAX).unwrap());
        assert_eq!(slot_chunks(&f).count(), 0);
        f.add(b"x", &Limits::default()).unwrap();
        let chunks: Vec<_> = slot_chunks(&f).collect();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].0, 1 + 128);
        assert_eq!(chunks[0].1, f.slot_arrays()[0].0);
        // Rebuilt from the header and the chunks, the copy is the same filter.
        let mut copy = AnyFilter::from_header(&f.header(), Strictness::Rdb, u64::MAX).unwrap();
        for (it, piece) in chunks {
            copy.load_chunk(it, piece).unwrap();
        }
        assert_eq!(copy, f);
    }

    #[test]
    fn an_extension_filter_s_aof_chunks_rebuild_it() {
        use layerbloom_filter::cuckoo::rate::Widths;
        use layerbloom_filter::cuckoo::WideFilter;
        let p = Params {
            bucket_size: 4,
            max_iterations: 500,
            expansion: 2,
        };
        let widths = Widths {
            first: 11,
            second: 14,
        };
        let mut f = AnyFilter::from(WideFilter::new(64, p, widths, 0.003, u64::MAX).unwrap());
        for i in 0..600 {
            f.add(format!("{i}").as_bytes(), &Limits::default())
                .unwrap();
        }
        assert!(f.sub_filter_count() > 1);
        let mut copy = AnyFilter::from_header(&f.header(), Strictness::Rdb, u64::MAX).unwrap();
        assert!(copy.is_wide());
        for (it, piece) in slot_chunks(&f) {
            copy.load_chunk(it, piece).unwrap();
        }
        assert_eq!(copy, f);
    }
}

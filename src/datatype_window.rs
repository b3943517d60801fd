//! The native data type `LBbloomW-` of windowed Bloom filters (`BF.RESERVE ... WINDOW ms`)
//! and its callbacks. A type of its own: RedisBloom has no windowed filters, and a name it does
//! not know makes its loader refuse such a value cleanly instead of misreading it. The
//! callbacks share the Bloom type's panic guard and RESTORE limits (`datatype.rs`); the byte
//! formats are the core's (`layerbloom_filter::window::codec`).
//!
//! - RDB / DUMP: the core's RDB encoding, one string buffer per piece it makes.
//! - AOF rewrite: the value's `BF.LOADCHUNK` stream (the header pins the spec, the origin, the
//!   head and every slice's id and layers; the chunks are the bit arrays), which rebuilds the
//!   same slices. Replay never reads a clock.
//! - Digest: the encoded header (the whole spec, origin, head, each slice's id and chain
//!   header), then every slice's bit arrays: equal on a replica and after AOF replay or an
//!   RDB reload.

use std::ffi::{c_int, c_void};

use layerbloom_filter::window::{codec, WindowedFilter};
use redis_module::{native_types::RedisType, raw};

use crate::datatype::{guarded, restore_limits, type_methods, FREE_EFFORT_BYTES};
use crate::raw_api::{Digest, Io};

/// The type's encoding version (its own: no other module writes this type).
pub const ENCODING_VERSION: i32 = codec::ENCODING_VERSION;

pub static WINDOW_TYPE: RedisType = RedisType::new("LBbloomW-", ENCODING_VERSION, type_methods!());

/// # Safety
/// `value` must be a live `Box<WindowedFilter>` this module stored or returned.
unsafe fn filter<'a>(value: *mut c_void) -> &'a WindowedFilter {
    unsafe { &*value.cast::<WindowedFilter>() }
}

/// A loaded or copied filter as the value Redis stores, counted in `INFO bf`.
fn into_value(filter: WindowedFilter) -> *mut c_void {
    crate::bf::window::entered();
    Box::into_raw(Box::new(filter)).cast()
}

/// The bytes a windowed filter really occupies in Redis's allocator (`MEMORY USAGE`): its box,
/// its slice table and every slice's blocks, each as the size class the allocator gave it.
pub fn allocated_bytes(filter: &WindowedFilter) -> u64 {
    // SAFETY: `filter` is the contents of a `Box` this module made, so the module's (global)
    // allocator gave it its block with the type's alignment, alive while borrowed.
    let mut total = unsafe {
        crate::alloc::allocated_size(
            std::ptr::from_ref(filter).cast(),
            std::mem::align_of::<WindowedFilter>(),
        )
    };
    filter.allocations(|a| {
        // SAFETY: an `Allocation` is a live block of the global allocator, requested with
        // exactly this alignment, alive while the filter is borrowed (its invariant).
        let size = unsafe { crate::alloc::allocated_size(a.ptr().as_ptr(), a.align()) };
        total = total.and_then(|t| Some(t + size?));
    });
    total.map_or_else(|| filter.memory_usage(), |t| t as u64)
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    guarded("window mem_usage", 0, || {
        // SAFETY: Redis passes a value of this type.
        allocated_bytes(unsafe { filter(value.cast_mut()) }) as usize
    })
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: the digest Redis passed to this callback, used only during it.
    let mut digest = unsafe { Digest::of_callback(md) };
    guarded("window digest", (), || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value) };
        // The encoded header pins the whole spec (capacity, error, expansion, layout), the
        // origin, the head and each slice's id and chain header.
        digest.add_string_buffer(&codec::encode_header(filter));
        for (_, slice) in filter.slice_filters() {
            for bytes in slice.layer_bytes() {
                digest.add_string_buffer(bytes);
            }
        }
        digest.end_sequence();
    })
}

extern "C" fn free(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    guarded("window free", (), || {
        // SAFETY: a `Box<WindowedFilter>` this module created; Redis frees it exactly once.
        drop(unsafe { Box::from_raw(value.cast::<WindowedFilter>()) });
        crate::bf::window::freed();
    })
}

extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guarded("window free_effort", 0, || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value.cast_mut()) };
        (filter.layer_count() as u64 + filter.memory_usage() / FREE_EFFORT_BYTES) as usize
    })
}

extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guarded("window copy", std::ptr::null_mut(), || {
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

/// The header that rebuilds `filter` (what a creation replicates as, in `BF.LOADCHUNK key 1`).
pub fn creation_header(filter: &WindowedFilter) -> Vec<u8> {
    codec::encode_header(filter)
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    guarded("window rdb_load", std::ptr::null_mut(), || {
        let loaded = if encver == ENCODING_VERSION {
            // A client's RESTORE is held to the limits before anything is allocated.
            let budget = restore_limits(&io).map(|l| l.bytes());
            // A client's RESTORE on a primary is also held to its clock (see
            // `WindowHeader::clock_error`); loading from disk or a primary never reads one.
            let clock = budget
                .is_some()
                .then(|| io.context_flags())
                .flatten()
                .filter(crate::clock::applies)
                .map(|_| crate::clock::now_ms());
            codec::load_rdb(&mut io, budget, clock).map_err(|e| e.to_string())
        } else {
            Err(format!(
                "encoding version {encver} is not one this build of layerbloom reads (its own \
                 is {ENCODING_VERSION})"
            ))
        };
        match loaded {
            Ok((filter, warnings)) => {
                for warning in warnings {
                    crate::log::warning(
                        None,
                        &format!("layerbloom: a windowed filter loaded with: {warning}"),
                    );
                }
                into_value(filter)
            }
            Err(why) => {
                crate::log::warning(
                    None,
                    &format!("layerbloom: cannot load a windowed Bloom filter: {why}"),
                );
                std::ptr::null_mut()
            }
        }
    })
}

extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    guarded("window rdb_save", (), || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value) };
        io.save_string_buffer(&codec::encode_header(filter));
        for piece in codec::rdb_pieces(filter) {
            io.save_string_buffer(piece);
        }
    })
}

extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(aof) };
    guarded("window aof_rewrite", (), || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value) };
        let mut emit = |it: i64, bytes: &[u8]| {
            // SAFETY: `key` is the key Redis passed to this callback.
            unsafe { io.emit_aof_key_int_buffer(c"BF.LOADCHUNK", key, it, bytes) }
        };
        emit(1, &codec::encode_header(filter));
        let mut it = 1;
        loop {
            let (next, data) = codec::dump_chunk(filter, it);
            if next == 0 {
                break;
            }
            // The header creates zeroed slices: chunks with no bit set need no command.
            if data.iter().any(|&b| b != 0) {
                emit(next, data);
            }
            it = next;
        }
    })
}

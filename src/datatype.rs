//! The native data type `MBbloom--` and its callbacks: RDB save and load, AOF rewrite, memory
//! usage, digest, copy and free. Every callback is a few lines of FFI around the core's codec;
//! a panic is caught and logged, never let across the C boundary.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use layerbloom_filter::bloom::chain::MAX_LAYERS;
use layerbloom_filter::bloom::codec::{self, CodecError, FilterLoader, RdbSource};
use layerbloom_filter::ScalableFilter;
use redis_module::{native_types::RedisType, raw, ContextFlags};

use crate::memory::Limits;
use crate::raw_api::{Digest, Io, LoadedBuffer};

/// The type's encoding version for layerbloom's own values. RedisBloom writes 0 to 4 under
/// the same type name; far above them, the loader tells its own values from RedisBloom's,
/// which it reads too (as classic filters).
pub const ENCODING_VERSION: i32 = 100;

/// The type methods of a module type of this module, built from the callbacks of the module
/// the macro is used in, which every type names alike: `rdb_load`, `rdb_save`, `aof_rewrite`,
/// `mem_usage`, `digest`, `free`, `free_effort` and `copy`.
macro_rules! type_methods {
    () => {
        ::redis_module::raw::RedisModuleTypeMethods {
            version: ::redis_module::raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
            rdb_load: Some(rdb_load),
            rdb_save: Some(rdb_save),
            aof_rewrite: Some(aof_rewrite),
            mem_usage: Some(mem_usage),
            digest: Some(digest),
            free: Some(free),
            aux_load: None,
            aux_save: None,
            aux_save_triggers: 0,
            free_effort: Some(free_effort),
            unlink: None,
            copy: Some(copy),
            defrag: None,
            mem_usage2: None,
            free_effort2: None,
            unlink2: None,
            copy2: None,
            aux_save2: None,
        }
    };
}
pub(crate) use type_methods;

/// The data type, registered under RedisBloom's name so RDB files and DUMP payloads name it
/// the same way.
pub static BLOOM_TYPE: RedisType = RedisType::new("MBbloom--", ENCODING_VERSION, type_methods!());

/// Bytes a background thread frees per unit of `free_effort`. Redis frees a value in the
/// background when its effort exceeds 64, so filters above about 4 MiB are freed lazily.
pub(crate) const FREE_EFFORT_BYTES: u64 = 64 * 1024;

/// Runs a callback body, logging a panic and returning `fallback` instead of unwinding.
pub(crate) fn guarded<T>(what: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        crate::log::warning(
            None,
            &format!("layerbloom: internal error in {what}; see the log above"),
        );
        fallback
    })
}

/// # Safety
/// `value` must be a pointer this module stored with `ModuleTypeSetValue` or returned from
/// `rdb_load`/`copy`: a live `Box<ScalableFilter>`.
unsafe fn filter<'a>(value: *mut c_void) -> &'a ScalableFilter {
    unsafe { &*value.cast::<ScalableFilter>() }
}

/// The bytes a filter really occupies in Redis's allocator: its box, its layer table and its
/// bit arrays, each as the size class the allocator gave it. This is what `MEMORY USAGE` and
/// `BF.INFO` report. `filter` must be the value stored under a key (a `Box` made by this
/// module).
pub fn allocated_bytes(filter: &ScalableFilter) -> u64 {
    // SAFETY: `filter` is the contents of a `Box` this module made, so the module's (global)
    // allocator gave it its block with the type's alignment, alive while borrowed.
    let mut total = unsafe {
        crate::alloc::allocated_size(
            std::ptr::from_ref(filter).cast(),
            std::mem::align_of::<ScalableFilter>(),
        )
    };
    filter.allocations(|a| {
        // SAFETY: an `Allocation` is a live block of the global allocator (`ModuleAlloc`),
        // requested with exactly this alignment, alive while the filter is borrowed (its
        // invariant).
        let size = unsafe { crate::alloc::allocated_size(a.ptr().as_ptr(), a.align()) };
        total = total.and_then(|t| Some(t + size?));
    });
    total.map_or_else(|| filter.memory_usage(), |t| t as u64)
}

const UNREADABLE: &str = "the value is truncated or unreadable";

fn load_buffer(io: &mut Io) -> Result<LoadedBuffer, String> {
    let buffer = io.load_string_buffer().map_err(|e| e.to_string())?;
    if io.failed() {
        return Err(UNREADABLE.into());
    }
    Ok(buffer)
}

/// RedisBloom's RDB fields read through the module API.
impl RdbSource for Io<'_> {
    type Buffer = LoadedBuffer;

    fn unsigned(&mut self) -> Result<u64, CodecError> {
        let v = self
            .load_unsigned()
            .map_err(|_| CodecError::BadData(UNREADABLE))?;
        checked(self, v)
    }

    fn double(&mut self) -> Result<f64, CodecError> {
        let v = self
            .load_double()
            .map_err(|_| CodecError::BadData(UNREADABLE))?;
        checked(self, v)
    }

    fn buffer(&mut self) -> Result<LoadedBuffer, CodecError> {
        load_buffer(self).map_err(|_| CodecError::BadData(UNREADABLE))
    }
}

/// A loaded field, unless the load failed.
fn checked<T>(io: &Io, value: T) -> Result<T, CodecError> {
    if io.failed() {
        Err(CodecError::BadData(UNREADABLE))
    } else {
        Ok(value)
    }
}

/// The limits of a value loaded by a client's RESTORE, or `None` when the server is loading
/// (startup, DEBUG RELOAD, a full sync from the primary, the AOF) or is a replica (a RESTORE
/// it runs comes from its primary, which accepted it): copies accept what the primary did.
pub(crate) fn restore_limits(io: &Io) -> Option<Limits> {
    let flags = io.context_flags()?;
    if flags.intersects(crate::memory::EXEMPT | ContextFlags::SLAVE) {
        return None;
    }
    Some(Limits::for_creation(
        &flags,
        crate::config::max_filter_memory(),
    ))
}

/// A client's RESTORE may not bring a filter of more layers than a filter may grow to; one
/// loaded from disk, a primary or the AOF may (RedisBloom sets no bound, so migrations never
/// fail on it), with a warning that it cannot grow.
fn within_layer_cap(layers: usize, from_client: bool) -> Result<(), String> {
    if layers <= MAX_LAYERS {
        return Ok(());
    }
    if from_client {
        return Err(format!(
            "a RESTORE of it would bring {layers} layers, over the {MAX_LAYERS} a filter may have"
        ));
    }
    crate::log::warning(
        None,
        &format!(
            "layerbloom: a filter loaded with {layers} layers, more than the {MAX_LAYERS} a \
             filter may grow to: it answers, but adds that need a new layer are refused"
        ),
    );
    Ok(())
}

fn load_value(io: &mut Io, encver: c_int) -> Result<ScalableFilter, String> {
    let limits = restore_limits(io);
    if (0..=codec::REDISBLOOM_MAX_ENCVER).contains(&encver) {
        // A client's RESTORE: the layer cap and the memory limits are applied as the value is
        // read (its layer count and each layer's size come before the layer's bits).
        let budget = limits.map(|l| l.bytes());
        let (filter, warnings) =
            codec::decode_redisbloom_value_within(io, encver, budget).map_err(|e| e.to_string())?;
        for warning in warnings {
            crate::log::warning(
                None,
                &format!(
                "layerbloom: a RedisBloom filter (encoding version {encver}) loaded with: {warning}"
            ),
            );
        }
        return within_layer_cap(filter.layer_count(), limits.is_some()).map(|()| filter);
    }
    if encver != ENCODING_VERSION {
        return Err(format!(
            "encoding version {encver} is not one this build of layerbloom reads \
             (its own is {ENCODING_VERSION}; RedisBloom's are 0 to 4)"
        ));
    }
    let header = load_buffer(io)?;
    let (header, warnings) =
        codec::decode_rdb_header(header.as_slice()).map_err(|e| e.to_string())?;
    for warning in warnings {
        crate::log::warning(
            None,
            &format!("layerbloom: a filter loaded with: {warning}"),
        );
    }
    within_layer_cap(header.layer_lengths().len(), limits.is_some())?;
    if let Some(limits) = limits {
        // Checked before anything is allocated: zero bit arrays compress ~110:1 in a DUMP
        // payload, so a small payload may describe gigabytes.
        let needed = header.memory_bytes();
        if needed > limits.bytes() {
            let which = if limits.bytes() < limits.filter {
                "what maxmemory leaves"
            } else {
                "bf-max-filter-memory"
            };
            return Err(format!(
                "a RESTORE of it would take {needed} bytes, over {which} ({} bytes)",
                limits.bytes()
            ));
        }
    }
    let mut loader = FilterLoader::new(header).map_err(|e| e.to_string())?;
    while loader.next_piece_len().is_some() {
        let piece = load_buffer(io)?;
        loader
            .push_piece(piece.as_slice())
            .map_err(|e| e.to_string())?;
    }
    loader.finish().map_err(|e| e.to_string())
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    guarded("rdb_load", std::ptr::null_mut(), || {
        match load_value(&mut io, encver) {
            Ok(filter) => into_value(filter),
            Err(why) => {
                crate::log::warning(
                    None,
                    &format!("layerbloom: cannot load a Bloom filter: {why}"),
                );
                std::ptr::null_mut()
            }
        }
    })
}

extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    guarded("rdb_save", (), || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value) };
        io.save_string_buffer(&codec::encode_rdb_header(filter));
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
    guarded("aof_rewrite", (), || {
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
            // The header creates zeroed layers: chunks with no bit set need no command.
            if data.iter().any(|&b| b != 0) {
                emit(next, data);
            }
            it = next;
        }
    })
}

extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: Redis passes a value of this type.
    guarded("mem_usage", 0, || {
        allocated_bytes(unsafe { filter(value.cast_mut()) }) as usize
    })
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: the digest Redis passed to this callback, used only during it.
    let mut digest = unsafe { Digest::of_callback(md) };
    guarded("digest", (), || {
        // SAFETY: Redis passes a value of this type.
        let filter = unsafe { filter(value) };
        digest.add_string_buffer(&codec::encode_header(filter));
        for bytes in filter.layer_bytes() {
            digest.add_string_buffer(bytes);
        }
        digest.end_sequence();
    })
}

extern "C" fn free(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    guarded("free", (), || {
        // SAFETY: the value is a `Box<ScalableFilter>` this module created; Redis frees it
        // exactly once.
        let filter = unsafe { Box::from_raw(value.cast::<ScalableFilter>()) };
        crate::stats::freed(&filter);
        drop(filter);
    })
}

/// A loaded or copied filter as the value Redis stores, counted in `INFO bf`.
fn into_value(filter: ScalableFilter) -> *mut c_void {
    let value = Box::new(filter);
    crate::stats::entered(&value);
    Box::into_raw(value).cast()
}

extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guarded("free_effort", 0, || {
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
    guarded("copy", std::ptr::null_mut(), || {
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

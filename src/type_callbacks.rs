//! The callbacks every module type of this module shares, written once over the value kind it
//! stores (`StoredValue`): RDB save, AOF rewrite, memory usage, digest, copy, free and free
//! effort, active defragmentation, and the frame of each type's own loader. A panic is caught and logged, never let
//! across the C boundary.

use std::ffi::{c_void, CStr};
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};

use layerbloom_filter::relocate::Relocator;
use layerbloom_filter::{Allocation, FilterError};
use redis_module::raw;

use layerbloom_filter::format::{CodecError, RdbSource};

use crate::raw_api::{Digest, Io, LoadedBuffer};

/// What the shared callbacks need of a value kind; its codec calls stay with its type.
pub(crate) trait StoredValue: Sized {
    /// How the log names the type's callbacks (a panic's "internal error in …").
    const LOG_PREFIX: &'static str;
    /// The command an AOF rewrite rebuilds a value with.
    const LOAD_CHUNK: &'static CStr;

    /// The value entered the keyspace (created, loaded, copied), boxed as stored: its address
    /// identifies it until `freed`.
    fn entered(&self);
    /// The value is being freed (on the main thread or Redis's lazy-free thread).
    fn freed(&self);
    fn rdb_save(&self, io: &mut Io);
    /// Calls `emit` with each `LOAD_CHUNK` iterator and bytes that rebuild the value.
    fn aof_chunks(&self, emit: &mut dyn FnMut(i64, &[u8]));
    /// Adds the value's parts to a digest (the sequence is ended by the caller).
    fn digest(&self, digest: &mut Digest);
    /// What `MEMORY USAGE` reports.
    fn mem_usage(&self) -> u64;
    /// The heap blocks a free walks (layers, sub-filters) and the bytes it returns, for
    /// `free_effort`.
    fn free_size(&self) -> (usize, u64);
    fn clone_value(&self) -> Result<Self, FilterError>;
    /// Offers every heap block the value holds (not its own box) to `to`.
    fn relocate(&mut self, to: &mut dyn Relocator);
    /// Active defragmentation moved the value's box from address `from`.
    fn moved(&self, _from: usize) {}
}

/// The type methods of a module type storing values of `$value`, with `$rdb_load` its loader
/// (the only callback each type has of its own). The macro alone ties a type to its value
/// kind, which the shared callbacks' casts rely on.
macro_rules! type_methods {
    ($value:ty, $rdb_load:expr) => {
        ::redis_module::raw::RedisModuleTypeMethods {
            version: ::redis_module::raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
            rdb_load: Some($rdb_load),
            rdb_save: Some($crate::type_callbacks::rdb_save::<$value>),
            aof_rewrite: Some($crate::type_callbacks::aof_rewrite::<$value>),
            mem_usage: Some($crate::type_callbacks::mem_usage::<$value>),
            digest: Some($crate::type_callbacks::digest::<$value>),
            free: Some($crate::type_callbacks::free::<$value>),
            aux_load: None,
            aux_save: None,
            aux_save_triggers: 0,
            free_effort: Some($crate::type_callbacks::free_effort::<$value>),
            unlink: None,
            copy: Some($crate::type_callbacks::copy::<$value>),
            defrag: Some($crate::type_callbacks::defrag::<$value>),
            mem_usage2: None,
            free_effort2: None,
            unlink2: None,
            copy2: None,
            aux_save2: None,
        }
    };
}
pub(crate) use type_methods;

/// Bytes a background thread frees per unit of `free_effort`. Redis frees a value in the
/// background when its effort exceeds 64, so filters above about 4 MiB are freed lazily.
const FREE_EFFORT_BYTES: u64 = 64 * 1024;

/// Runs a callback body, logging a panic and returning `fallback` instead of unwinding.
pub(crate) fn guarded<T>(what: impl Display, fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        crate::log_limit::internal_error(&format!(
            "layerbloom: internal error in {what}; see the log above"
        ));
        fallback
    })
}

/// `guarded`, naming the callback as `V`'s.
fn guarded_as<V: StoredValue, T>(callback: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    guarded(format_args!("{}{callback}", V::LOG_PREFIX), fallback, body)
}

/// # Safety
/// `value` must be a pointer this module stored with `ModuleTypeSetValue` or returned from
/// `rdb_load`/`copy` under a type `type_methods!` made for `V`: a live `Box<V>`.
unsafe fn value<'a, V>(value: *const c_void) -> &'a V {
    unsafe { &*value.cast::<V>() }
}

/// A loaded or copied value as the value Redis stores, counted in `INFO bf`.
fn into_value<V: StoredValue>(value: V) -> *mut c_void {
    let value = Box::new(value);
    value.entered();
    Box::into_raw(value).cast()
}

/// The body of a type's `rdb_load`: the value `decode` reads, or null (logged as a `what`
/// that cannot be loaded) when it refuses.
pub(crate) fn load<V: StoredValue>(
    rdb: *mut raw::RedisModuleIO,
    what: impl Display,
    decode: impl FnOnce(&mut Io) -> Result<V, String>,
) -> *mut c_void {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    // A client may send refused RESTOREs without end: their lines share a budget.
    let from_client = io
        .context_flags()
        .is_some_and(|f| crate::memory::is_client_restore(&f));
    guarded_as::<V, _>("rdb_load", std::ptr::null_mut(), || match decode(&mut io) {
        Ok(value) => into_value(value),
        Err(why) => {
            crate::log_limit::load_warning(
                from_client,
                &format!("layerbloom: cannot load a {what}: {why}"),
            );
            std::ptr::null_mut()
        }
    })
}

/// The bytes a value really occupies in Redis's allocator: its box and every heap block
/// `allocations` names, each as the size class the allocator gave it; `modelled` where the
/// allocator cannot tell. `value` must be the contents of a `Box` this module made.
pub(crate) fn allocated_bytes<'a, V>(
    value: &'a V,
    allocations: impl FnOnce(&mut dyn FnMut(Allocation<'a>)),
    modelled: impl FnOnce() -> u64,
) -> u64 {
    // SAFETY: `value` is the contents of a `Box` this module made, so the module's (global)
    // allocator gave it its block with the type's alignment, alive while borrowed.
    let mut total = unsafe {
        crate::alloc::allocated_size(std::ptr::from_ref(value).cast(), std::mem::align_of::<V>())
    };
    allocations(&mut |a| {
        // SAFETY: an `Allocation` is a live block of the global allocator (`ModuleAlloc`),
        // requested with exactly this alignment, alive while the value is borrowed (its
        // invariant).
        let size = unsafe { crate::alloc::allocated_size(a.ptr().as_ptr(), a.align()) };
        total = total.and_then(|t| Some(t + size?));
    });
    total.map_or_else(modelled, |t| t as u64)
}

pub(crate) extern "C" fn rdb_save<V: StoredValue>(
    rdb: *mut raw::RedisModuleIO,
    value: *mut c_void,
) {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(rdb) };
    guarded_as::<V, _>("rdb_save", (), || {
        // SAFETY: Redis passes a value of this type.
        unsafe { self::value::<V>(value) }.rdb_save(&mut io);
    })
}

pub(crate) extern "C" fn aof_rewrite<V: StoredValue>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: the handle Redis passed to this callback, used only during it.
    let mut io = unsafe { Io::of_callback(aof) };
    guarded_as::<V, _>("aof_rewrite", (), || {
        // SAFETY: Redis passes a value of this type.
        unsafe { self::value::<V>(value) }.aof_chunks(&mut |it, bytes| {
            // SAFETY: `key` is the key Redis passed to this callback.
            unsafe { io.emit_aof_key_int_buffer(V::LOAD_CHUNK, key, it, bytes) }
        });
    })
}

/// The server's `DefragAlloc`.
type DefragAlloc = unsafe extern "C" fn(*mut raw::RedisModuleDefragCtx, *mut c_void) -> *mut c_void;

/// Moves blocks with the server's `DefragAlloc`: it asks jemalloc whether a block sits in a
/// sparsely used slab and, if so, copies it to a new block (bypassing the thread cache, so not
/// back into the same slab) and frees the old one; otherwise it returns null and nothing moved.
/// A copy through the ordinary allocator gains nothing: it lands in the same sparse slabs.
struct Defragger {
    ctx: *mut raw::RedisModuleDefragCtx,
    alloc: DefragAlloc,
}

impl Defragger {
    /// Moves a block `ModuleAlloc` made for `layout`, or returns null.
    ///
    /// # Safety
    /// `block` is a live allocation of the module's global allocator for `layout`, which
    /// nothing else refers to during the call.
    unsafe fn move_block(&mut self, block: *mut u8, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `block`; the mover is `DefragAlloc` on the raw
        // block underneath (a live block of Redis's allocator, which is what `TryAlloc`
        // returned): it copies the whole block and frees the old one, or does nothing and
        // returns null, as `relocate` requires.
        unsafe {
            crate::alloc::relocate(block, layout, |raw_block| {
                (self.alloc)(self.ctx, raw_block.cast()).cast()
            })
        }
    }
}

// SAFETY: `move_block` returns either null (nothing done) or a block of the module's global
// allocator for the same layout holding the same bytes, the old one freed (`alloc::relocate`).
unsafe impl Relocator for Defragger {
    fn relocate(
        &mut self,
        block: std::ptr::NonNull<u8>,
        layout: std::alloc::Layout,
    ) -> Option<std::ptr::NonNull<u8>> {
        // SAFETY: the trait's caller contract: a live block of the global allocator (the
        // module's) for `layout`, owned by the value being defragmented.
        std::ptr::NonNull::new(unsafe { self.move_block(block.as_ptr(), layout) })
    }
}

/// Active defragmentation (`activedefrag yes`, on servers whose jemalloc supports it): every
/// small heap block of the value, then its box, is offered to `DefragAlloc`, and the value
/// adopts the blocks that moved. Its bytes, digest and counts are unchanged. A value has a
/// bounded number of blocks (at most 1024 layers per chain, 64 slices, the sub-filters the
/// memory limit allows), and blocks of `DEFRAG_MAX_BYTES` or more (whole pages) are skipped
/// without a call, so the whole value is done at once: 0 (finished), never resumed with a
/// cursor (`DefragShouldStop` is not needed).
pub(crate) extern "C" fn defrag<V: StoredValue>(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> std::ffi::c_int {
    guarded_as::<V, _>("defrag", 0, || {
        // SAFETY: the API table is written once, at load, before any callback runs. Servers
        // without the function (none of 7.0+ lacks it) get no defragmentation of values.
        let Some(alloc) = (unsafe { raw::RedisModule_DefragAlloc }) else {
            return 0;
        };
        if value.is_null() {
            return 0;
        }
        let mut to = Defragger { ctx, alloc };
        // SAFETY: Redis passes, on its main thread, the slot holding a live value of this
        // type (a `Box<V>` this module made, see `value`), which nothing else uses during the
        // callback: the value may be changed in place and its box replaced in the slot.
        unsafe {
            let stored = *value;
            (*stored.cast::<V>()).relocate(&mut to);
            let moved = to.move_block(stored.cast(), std::alloc::Layout::new::<V>());
            if !moved.is_null() {
                *value = moved.cast();
                (*moved.cast::<V>()).moved(stored as usize);
            }
        }
        0
    })
}

pub(crate) extern "C" fn mem_usage<V: StoredValue>(value: *const c_void) -> usize {
    guarded_as::<V, _>("mem_usage", 0, || {
        // SAFETY: Redis passes a value of this type.
        unsafe { self::value::<V>(value) }.mem_usage() as usize
    })
}

pub(crate) extern "C" fn digest<V: StoredValue>(
    md: *mut raw::RedisModuleDigest,
    value: *mut c_void,
) {
    // SAFETY: the digest Redis passed to this callback, used only during it.
    let mut digest = unsafe { Digest::of_callback(md) };
    guarded_as::<V, _>("digest", (), || {
        // SAFETY: Redis passes a value of this type.
        unsafe { self::value::<V>(value) }.digest(&mut digest);
        digest.end_sequence();
    })
}

pub(crate) extern "C" fn free<V: StoredValue>(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    guarded_as::<V, _>("free", (), || {
        // SAFETY: a `Box<V>` this module created (see `value`); Redis frees it exactly once.
        let value = unsafe { Box::from_raw(value.cast::<V>()) };
        value.freed();
        drop(value);
    })
}

pub(crate) extern "C" fn free_effort<V: StoredValue>(
    _key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> usize {
    guarded_as::<V, _>("free_effort", 0, || {
        // SAFETY: Redis passes a value of this type.
        let (blocks, bytes) = unsafe { self::value::<V>(value) }.free_size();
        (blocks as u64 + bytes / FREE_EFFORT_BYTES) as usize
    })
}

pub(crate) extern "C" fn copy<V: StoredValue>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guarded_as::<V, _>("copy", std::ptr::null_mut(), || {
        // SAFETY: Redis passes a value of this type.
        let value = unsafe { self::value::<V>(value) };
        // A copy allocates as much as its source: held to the limits a creation is (it used
        // to pass maxmemory by the source's size). The server answers a refused copy with its
        // own error ("module key failed to copy"); the reason goes to the log, rate-limited.
        if let Some(limits) = crate::memory::Limits::for_copy() {
            let bytes = value.mem_usage();
            if bytes > limits.bytes() {
                let which = if limits.is_memory(limits.bytes()) {
                    "maxmemory"
                } else {
                    "bf-max-filter-memory"
                };
                crate::log_limit::copy_refused(&format!(
                    "layerbloom: COPY refused: the copy would take {bytes} bytes, over what \
                     {which} leaves ({} bytes)",
                    limits.bytes()
                ));
                return std::ptr::null_mut();
            }
        }
        match value.clone_value() {
            Ok(copy) => into_value(copy),
            Err(e) => {
                crate::log_limit::copy_refused(&format!("layerbloom: COPY failed: {e}"));
                std::ptr::null_mut()
            }
        }
    })
}

const UNREADABLE: &str = "the value is truncated or unreadable";

/// The next string buffer of a value being loaded.
pub(crate) fn load_buffer(io: &mut Io) -> Result<LoadedBuffer, String> {
    let buffer = io.load_string_buffer().map_err(|e| e.to_string())?;
    if io.failed() {
        return Err(UNREADABLE.into());
    }
    Ok(buffer)
}

/// RDB fields read through the module API, for the core's decoders (RedisBloom's formats,
/// of every structure).
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

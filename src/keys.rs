//! A key's value of one of this module's types, read, written or stored: the same three steps
//! for every structure, with the errors a client sees; and the keyspace events of its writes.

use std::ffi::{c_int, CStr};
use std::ops::Deref;

use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::native_types::RedisType;
use redis_module::{raw, Context, KeyType, RedisString};

use crate::error::BfError;
use crate::raw_api;

/// A key opened for reading, with Redis's handle to it at hand: `read` asks for the value's
/// module type once, where the crate's typed read asks for the key's type, then its module
/// type, and builds and drops a reply value (about 70 instructions of a 1700-instruction
/// BF.EXISTS, docs/BENCHMARKS.md). Closed when dropped, as a `RedisKey`.
pub struct ReadKey {
    key: RedisKey,
    handle: *mut raw::RedisModuleKey,
}

impl ReadKey {
    /// Opens the key as `Context::open_key` does. (Not through `RedisKey::to_raw_parts`:
    /// it drops, so closes, the key whose handle it returns.)
    pub fn open(ctx: &Context, name: &RedisString) -> Self {
        let handle = raw::open_key(ctx.ctx, name.inner, raw::KeyMode::READ);
        // SAFETY: a key just opened in this call's context, given at once to a `RedisKey`,
        // which closes it when dropped (once); `handle` is only used while `key` lives.
        let key = unsafe { RedisKey::from_raw_parts(ctx.ctx, handle) };
        ReadKey { key, handle }
    }
}

impl Deref for ReadKey {
    type Target = RedisKey;

    fn deref(&self) -> &RedisKey {
        &self.key
    }
}

/// The value under a key opened for reading; `None` when the key is missing, `WRONGTYPE` when
/// it holds another type.
pub fn read<'k, T>(key: &'k ReadKey, ty: &RedisType) -> Result<Option<&'k T>, BfError> {
    if !key.handle.is_null() {
        // SAFETY: an open key's handle (Redis returns null for a missing key opened for
        // reading, handled apart); both calls only read it.
        let found = unsafe { raw::RedisModule_ModuleTypeGetType.unwrap()(key.handle) };
        if !found.is_null() && found == *ty.raw_type.borrow() {
            // SAFETY: as above; a value of type `ty` is a `T` (the type's callbacks box `T`s).
            let value = unsafe { raw::RedisModule_ModuleTypeGetValue.unwrap()(key.handle) };
            return Ok(unsafe { value.cast::<T>().as_ref() });
        }
    }
    match key.key_type() {
        KeyType::Empty => Ok(None),
        _ => Err(BfError::WrongType),
    }
}

/// The value under a key opened for writing; `None` when the key is missing.
pub fn write<'k, T>(
    key: &'k RedisKeyWritable,
    ty: &RedisType,
) -> Result<Option<&'k mut T>, BfError> {
    key.get_value::<T>(ty).map_err(|_| BfError::WrongType)
}

/// Stores a new value under an empty key and returns it as stored.
pub fn store<'k, T>(
    key: &'k RedisKeyWritable,
    ty: &RedisType,
    value: T,
) -> Result<&'k mut T, BfError> {
    key.set_value(ty, value).map_err(|_| BfError::Internal)?;
    write(key, ty)?.ok_or(BfError::Internal)
}

/// Sends a keyspace event of class `g` (generic) about `key`. The crate's own call builds a C
/// string for the event's name on every event; these names are static.
pub fn notify(ctx: &Context, event: &CStr, key: &RedisString) {
    raw_api::notify_keyspace_event(ctx, raw::REDISMODULE_NOTIFY_GENERIC as c_int, event, key);
}

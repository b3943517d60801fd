//! A key's value of one of this module's types, read, written or stored: the same three steps
//! for every structure, with the errors a client sees; and the keyspace events of its writes.

use std::ffi::{c_int, CStr};

use redis_module::key::{RedisKey, RedisKeyWritable};
use redis_module::native_types::RedisType;
use redis_module::{raw, Context, RedisString};

use crate::error::BfError;
use crate::raw_api;

/// The value under a key opened for reading; `None` when the key is missing, `WRONGTYPE` when
/// it holds another type.
pub fn read<'k, T>(key: &'k RedisKey, ty: &RedisType) -> Result<Option<&'k T>, BfError> {
    key.get_value::<T>(ty).map_err(|_| BfError::WrongType)
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

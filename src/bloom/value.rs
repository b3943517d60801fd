//! The value under a BF key: a plain filter (`MBbloom--`) or a windowed one (`LBbloomW-`),
//! read, written and stored; each handler answers for both kinds.

use layerbloom_filter::window::WindowedFilter;
use layerbloom_filter::ScalableFilter;
use redis_module::key::RedisKeyWritable;

use crate::bloom::datatype::BLOOM_TYPE;
use crate::bloom::stats;
use crate::bloom::window::datatype::WINDOW_TYPE;
use crate::error::BfError;
use crate::keys;

/// The value under a BF key, opened for reading.
pub enum Value<'a> {
    Plain(&'a ScalableFilter),
    Windowed(&'a WindowedFilter),
}

/// The value under a BF key, opened for writing.
pub enum ValueMut<'a> {
    Plain(&'a mut ScalableFilter),
    Windowed(&'a mut WindowedFilter),
}

/// The filter of either kind under a key opened for reading; `None` when the key is missing.
/// Plain filters are asked for first: they are most keys.
pub fn read(key: &keys::ReadKey) -> Result<Option<Value<'_>>, BfError> {
    match keys::read::<ScalableFilter>(key, &BLOOM_TYPE) {
        Err(BfError::WrongType) => {
            Ok(keys::read::<WindowedFilter>(key, &WINDOW_TYPE)?.map(Value::Windowed))
        }
        other => Ok(other?.map(Value::Plain)),
    }
}

/// The filter of either kind under a key opened for writing; `None` when the key is missing.
pub fn write(key: &RedisKeyWritable) -> Result<Option<ValueMut<'_>>, BfError> {
    match keys::write::<ScalableFilter>(key, &BLOOM_TYPE) {
        Err(BfError::WrongType) => {
            Ok(keys::write::<WindowedFilter>(key, &WINDOW_TYPE)?.map(ValueMut::Windowed))
        }
        other => Ok(other?.map(ValueMut::Plain)),
    }
}

/// Stores a new plain filter under an empty key and returns it.
pub fn store_plain(
    key: &RedisKeyWritable,
    filter: ScalableFilter,
) -> Result<&mut ScalableFilter, BfError> {
    let stored = keys::store(key, &BLOOM_TYPE, filter)?;
    stats::entered(stored);
    Ok(stored)
}

/// Stores a new windowed filter under an empty key and returns it.
pub fn store_windowed(
    key: &RedisKeyWritable,
    filter: WindowedFilter,
) -> Result<&mut WindowedFilter, BfError> {
    let stored = keys::store(key, &WINDOW_TYPE, filter)?;
    stats::window_entered();
    Ok(stored)
}

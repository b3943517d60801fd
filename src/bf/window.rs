//! Windowed Bloom filters in the BF commands.

use redis_module::{Context, RedisString};

use crate::dispatch::CommandResult;
use crate::error::BfError;

/// `BF.WINDOWADVANCE key [slice]`
pub fn advance(_ctx: &Context, _args: &[RedisString]) -> CommandResult {
    Err(BfError::NotFound)
}

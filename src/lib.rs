//! layerbloom: scalable Bloom filters as a native Redis data type, a drop-in for RedisBloom's
//! `BF.*` commands. This crate is the thin glue between Redis and the pure core in
//! `layerbloom-filter`: argument parsing, replies, the data type's callbacks and settings.

mod alloc;
mod args;
mod command_docs;
mod commands;
mod config;
mod datatype;
mod error;
mod log;
mod propagate;
mod reply;
mod stats;

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, redis_module, Context, RedisResult, RedisString, RedisValue, Status};

use crate::commands::CommandResult;
use crate::datatype::BLOOM_TYPE;
use crate::error::BfError;
use crate::reply::Reply;

/// The version `MODULE LIST` reports: the RedisBloom API level implemented (2.8), so tools
/// that gate features on RedisBloom's version see the BF commands they expect.
const MODULE_VERSION: i32 = 20800;

#[cfg(not(test))]
type Allocator = alloc::ModuleAlloc;
#[cfg(not(test))]
const ALLOCATOR: Allocator = alloc::ModuleAlloc;
// Unit tests run without a server, so without Redis's allocator.
#[cfg(test)]
type Allocator = std::alloc::System;
#[cfg(test)]
const ALLOCATOR: Allocator = std::alloc::System;

/// Runs a handler: replies its error, and turns a panic into an error reply and a log line
/// instead of an abort of the server.
fn run(
    ctx: &Context,
    args: &[RedisString],
    handler: fn(&Context, &[RedisString]) -> CommandResult,
) -> RedisResult {
    match catch_unwind(AssertUnwindSafe(|| handler(ctx, args))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => Reply::new(ctx).error(&e),
        Err(_) => Reply::new(ctx).error(&BfError::Internal),
    }
    Ok(RedisValue::NoReply)
}

macro_rules! handlers {
    ($($name:ident => $handler:path),* $(,)?) => {
        $(
            fn $name(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
                run(ctx, &args, $handler)
            }
        )*
    };
}

handlers! {
    bf_reserve => commands::reserve,
    bf_add => commands::add,
    bf_madd => commands::madd,
    bf_insert => commands::insert,
    bf_exists => commands::exists,
    bf_mexists => commands::mexists,
    bf_info => commands::info,
    bf_card => commands::card,
    bf_scandump => commands::scandump,
    bf_loadchunk => commands::loadchunk,
    bf_debug => commands::debug,
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    std::panic::set_hook(Box::new(|info| {
        log::warning(None, &format!("layerbloom: panic: {info}"));
    }));
    // SAFETY: called from OnLoad with its context.
    unsafe {
        raw::RedisModule_SetModuleOptions.expect("core API")(
            ctx.get_raw(),
            raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as i32,
        )
    };
    let setup = config::register(ctx).and_then(|()| config::apply_module_args(args));
    if let Err(why) = setup {
        log::warning(Some(ctx), &format!("layerbloom: {why}"));
        return Status::Err;
    }
    // The sizing model's tables and shapes are built on first use (milliseconds each): build
    // the default filter's whole ladder of layer rates now, while the server loads, rather
    // than inside the first command that creates, grows or reports on such a filter.
    let mut rate = config::default_spec().first_layer_error();
    while rate >= layerbloom_filter::sizing::MIN_SIZING_ERROR / 2.0 {
        let _ = layerbloom_filter::sizing::shape_for(rate);
        rate *= layerbloom_filter::chain::TIGHTENING;
    }
    log::notice(
        Some(ctx),
        &format!(
            "layerbloom: settings are named {} (CONFIG SET / CONFIG GET)",
            [
                "bf-error-rate",
                "bf-initial-size",
                "bf-expansion-factor",
                "bf-max-filter-memory",
                "bf-layout",
                "bf-capacity-warning",
            ]
            .map(config::setting_name)
            .join(", ")
        ),
    );
    // Replaces the crate's own INFO callback: `INFO bf` shows sections bf_stats and bf_settings.
    // SAFETY: called from OnLoad with its context; the callback is an `extern "C"` function
    // with the documented signature that catches its own panics.
    unsafe {
        if let Some(register_info) = raw::RedisModule_RegisterInfoFunc {
            register_info(ctx.get_raw(), Some(stats::info_callback));
        }
    }
    // Docs and ACL categories help clients and operators; a server that refuses them still
    // runs every command, so this is logged, not fatal.
    match command_docs::register(ctx) {
        Ok(r) => log::notice(
            Some(ctx),
            &format!(
                "layerbloom: command docs set; ACL categories: {}",
                match (r.categories, r.bloom_category) {
                    (true, true) => "@bloom plus @read/@write and @fast/@slow",
                    (true, false) =>
                        "@read/@write and @fast/@slow (this server has no module categories)",
                    _ => "none (this server has no ACL categories for module commands)",
                }
            ),
        ),
        Err(why) => log::warning(Some(ctx), &format!("layerbloom: {why}")),
    }
    Status::Ok
}

redis_module! {
    name: "bf",
    version: MODULE_VERSION,
    allocator: (Allocator, ALLOCATOR),
    data_types: [BLOOM_TYPE],
    init: init,
    commands: [
        ["BF.RESERVE", bf_reserve, "write deny-oom", 1, 1, 1, ""],
        ["BF.ADD", bf_add, "write deny-oom", 1, 1, 1, ""],
        ["BF.MADD", bf_madd, "write deny-oom", 1, 1, 1, ""],
        ["BF.INSERT", bf_insert, "write deny-oom", 1, 1, 1, ""],
        ["BF.EXISTS", bf_exists, "readonly fast", 1, 1, 1, ""],
        ["BF.MEXISTS", bf_mexists, "readonly fast", 1, 1, 1, ""],
        ["BF.INFO", bf_info, "readonly fast", 1, 1, 1, ""],
        ["BF.CARD", bf_card, "readonly fast", 1, 1, 1, ""],
        ["BF.SCANDUMP", bf_scandump, "readonly", 1, 1, 1, ""],
        ["BF.LOADCHUNK", bf_loadchunk, "write deny-oom", 1, 1, 1, ""],
        ["BF.DEBUG", bf_debug, "readonly", 1, 1, 1, ""],
    ],
}

//! layerbloom: scalable Bloom filters as a native Redis data type, a drop-in for RedisBloom's
//! `BF.*` commands. This crate is the thin glue between Redis and the pure core in
//! `layerbloom-filter`: argument parsing, replies, the data type's callbacks and settings.

mod alloc;
mod bloom;
mod clock;
mod command_docs;
mod command_spec;
mod config;
mod cuckoo;
mod dispatch;
mod error;
mod keys;
mod log;
mod log_limit;
mod memory;
mod number;
mod raw_api;
mod reply;
mod type_callbacks;
mod types;

use redis_module::{Context, RedisString, Status};

/// The version `MODULE LIST` reports: the RedisBloom API level implemented (2.8), so tools
/// that gate features on RedisBloom's version see the BF commands they expect.
const MODULE_VERSION: i32 = 20800;

/// The command table of each structure.
const TABLES: &[&[dispatch::Command]] = &[bloom::COMMANDS, cuckoo::COMMANDS];

#[cfg(not(test))]
type Allocator = alloc::ModuleAlloc;
#[cfg(not(test))]
const ALLOCATOR: Allocator = alloc::ModuleAlloc(alloc::RedisAlloc);
// Unit tests run without a server, so without Redis's allocator.
#[cfg(test)]
type Allocator = std::alloc::System;
#[cfg(test)]
const ALLOCATOR: Allocator = std::alloc::System;

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    std::panic::set_hook(Box::new(|info| {
        log_limit::internal_error(&format!("layerbloom: panic: {info}"));
    }));
    let missing = raw_api::missing_core_functions();
    if !missing.is_empty() {
        log::warning(
            Some(ctx),
            &format!(
                "layerbloom: this server lacks the module API functions {}",
                missing.join(", ")
            ),
        );
        return Status::Err;
    }
    if let Err(why) = types::register(ctx) {
        log::warning(Some(ctx), &format!("layerbloom: {why}"));
        return Status::Err;
    }
    if raw_api::set_module_options(ctx, raw_api::server_is_valkey(ctx)) {
        log::notice(
            Some(ctx),
            "layerbloom: keys may move by atomic slot migration (CLUSTER MIGRATESLOTS)",
        );
    }
    if !number::follow_host() {
        log::notice(
            Some(ctx),
            "layerbloom: numbers follow this server's parser, which refuses hexadecimal floats",
        );
    }
    let setup = dispatch::register(ctx, TABLES)
        .and_then(|()| config::register(ctx))
        .and_then(|()| config::apply_module_args(args));
    if let Err(why) = setup {
        log::warning(Some(ctx), &format!("layerbloom: {why}"));
        return Status::Err;
    }
    config::read_databases(ctx);
    // The sizing model's tables and shapes are built on first use (milliseconds each): build
    // the default filter's whole ladder of layer rates now, while the server loads, rather
    // than inside the first command that creates, grows or reports on such a filter.
    let mut rate = config::default_spec().first_layer_error();
    while rate >= layerbloom_filter::bloom::sizing::MIN_SIZING_ERROR / 2.0 {
        let _ = layerbloom_filter::bloom::sizing::shape_for(rate);
        rate *= layerbloom_filter::bloom::chain::TIGHTENING;
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
    if clock::TEST_CLOCK {
        log::warning(
            Some(ctx),
            "layerbloom: this is a test build: its clock takes the offset \
             bf-test-clock-offset-ms; never run it in production",
        );
    }
    // Replaces the crate's own INFO callback: `INFO bf` shows sections bf_stats and bf_settings.
    raw_api::register_info_func(ctx, Some(bloom::stats::info_callback));
    // Docs and ACL categories help clients and operators; a server that refuses them still
    // runs every command, so this is logged, not fatal.
    match command_docs::register(ctx, TABLES) {
        Ok(r) => {
            let named = |categories: &[&str]| {
                categories
                    .iter()
                    .map(|c| format!("@{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let categories = match (r.categories, r.added.is_empty()) {
                (true, false) => format!("{} plus @read/@write and @fast/@slow", named(&r.added)),
                (true, true) if r.refused.is_empty() => {
                    "@read/@write and @fast/@slow (this server has no module categories)"
                        .to_string()
                }
                (true, true) => "@read/@write and @fast/@slow".to_string(),
                (false, _) => {
                    "none (this server has no ACL categories for module commands)".to_string()
                }
            };
            let refused = if r.refused.is_empty() {
                String::new()
            } else {
                format!("; the server refused to add {}", named(&r.refused))
            };
            log::notice(
                Some(ctx),
                &format!("layerbloom: command docs set; ACL categories: {categories}{refused}"),
            );
        }
        Err(why) => log::warning(Some(ctx), &format!("layerbloom: {why}")),
    }
    Status::Ok
}

/// The module's name: RedisBloom's, so tools that look for Bloom support by name find it.
const MODULE_NAME: &std::ffi::CStr = c"bf";

#[global_allocator]
static GLOBAL_ALLOCATOR: Allocator = ALLOCATOR;

/// The entry Redis calls to load the module. Written out rather than generated by the
/// redis-module crate's `redis_module!`, whose entry returns at once, with no word in the log,
/// when the server already has a module named `bf` (RedisBloom: Redis 8 builds with their
/// bundled modules load it at start, and a server starting then aborts). The data types are
/// created in `init` (types.rs), which also says why when their names are taken.
///
/// # Safety
/// Called by Redis only, with its module context and the load-time arguments.
#[no_mangle]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut redis_module::raw::RedisModuleCtx,
    argv: *mut *mut redis_module::raw::RedisModuleString,
    argc: std::ffi::c_int,
) -> std::ffi::c_int {
    use redis_module::raw;
    // SAFETY: Redis's context of this load; the name is NUL-terminated and copied by Redis.
    // Init fills the API table first, then refuses a name in use: the log works either way.
    let status = unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            MODULE_NAME.as_ptr(),
            MODULE_VERSION,
            raw::REDISMODULE_APIVER_1 as std::ffi::c_int,
        )
    };
    let context = Context::new(ctx);
    if status == raw::Status::Err as std::ffi::c_int {
        log::warning(Some(&context), &types::name_taken());
        return raw::Status::Err as std::ffi::c_int;
    }
    let _ = redis_module::MODULE_CONTEXT.set_context(&context);
    let args = redis_module::decode_args(ctx, argv, argc);
    init(&context, &args) as std::ffi::c_int
}

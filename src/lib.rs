//! layerbloom: scalable Bloom filters as a native Redis data type, a drop-in for RedisBloom's
//! `BF.*` commands. This crate is the thin glue between Redis and the pure core in
//! `layerbloom-filter`: argument parsing, replies, the data type's callbacks and settings.
//!
//! Each structure is a folder of its own (`bloom/`, `cuckoo/`) and one entry of
//! [`STRUCTURES`], the registry; the other files are the shared glue, which names no structure.

mod alloc;
mod clock;
mod command_docs;
mod command_spec;
mod config;
mod dispatch;
mod error;
mod info;
mod info_request;
mod keys;
mod log;
mod log_limit;
mod memory;
mod number;
mod raw_api;
mod reply;
mod structure;
mod type_callbacks;
mod types;

mod bloom;
mod cuckoo;

use redis_module::{Context, RedisString, Status};

use crate::config::Setting;
use crate::structure::Structure;

/// The version `MODULE LIST` reports: the RedisBloom API level implemented (2.8), so tools
/// that gate features on RedisBloom's version see the BF commands they expect.
const MODULE_VERSION: i32 = 20800;

/// The registry: one entry per structure (its commands, data types, settings and INFO
/// sections), in the order their commands are registered and their INFO sections shown.
static STRUCTURES: &[&Structure] = &[&bloom::STRUCTURE, &cuckoo::STRUCTURE];

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
    if let Err(why) = types::register(ctx, STRUCTURES) {
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
    let tables: Vec<&[dispatch::Command]> = STRUCTURES.iter().map(|s| s.commands).collect();
    // Every structure's settings, then the shared glue's own (the test clock's).
    let structures_settings: Vec<&'static Setting> = STRUCTURES
        .iter()
        .flat_map(|s| s.settings.iter().copied())
        .collect();
    let mut settings = structures_settings.clone();
    settings.extend(clock::SETTINGS);
    let setup = dispatch::register(ctx, &tables)
        .and_then(|()| config::register(ctx, &settings))
        .and_then(|()| config::apply_module_args(&settings, args));
    if let Err(why) = setup {
        log::warning(Some(ctx), &format!("layerbloom: {why}"));
        return Status::Err;
    }
    config::read_databases(ctx);
    for structure in STRUCTURES {
        (structure.loaded)();
    }
    log::notice(
        Some(ctx),
        &format!(
            "layerbloom: settings are named {} (CONFIG SET / CONFIG GET)",
            config::distinct(&structures_settings)
                .iter()
                .map(|s| config::setting_name(s.name))
                .collect::<Vec<_>>()
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
    // Replaces the crate's own INFO callback: `INFO bf` shows every structure's sections.
    info::register(ctx, STRUCTURES);
    // Docs and ACL categories help clients and operators; a server that refuses them still
    // runs every command, so this is logged, not fatal.
    match command_docs::register(ctx, &tables) {
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

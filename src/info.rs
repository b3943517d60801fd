//! The module's INFO callback: `INFO bf` shows every structure's sections (its registry entry's
//! `info`), each field with the module's `bf_` prefix, which Redis adds.

use std::ffi::{c_int, CString};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

use redis_module::{raw, Context};

use crate::raw_api;
use crate::structure::{Section, Structure};

/// The structures whose sections the callback writes.
static STRUCTURES: OnceLock<&'static [&'static Structure]> = OnceLock::new();

/// Replaces the crate's own INFO callback with one that writes `structures`' sections.
pub fn register(ctx: &Context, structures: &'static [&'static Structure]) {
    let _ = STRUCTURES.set(structures);
    raw_api::register_info_func(ctx, Some(callback));
}

/// Every structure's sections, in the registry's order.
pub fn sections(structures: &[&Structure]) -> Vec<Section> {
    structures.iter().flat_map(|s| (s.info)()).collect()
}

extern "C" fn callback(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    let _ = for_crash_report;
    // SAFETY: `ctx` is the INFO context Redis passed to this callback; `info` is dropped
    // before the callback returns.
    let mut info = unsafe { raw_api::InfoCtx::of_callback(ctx) };
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        for section in sections(STRUCTURES.get().copied().unwrap_or_default()) {
            let name = CString::new(section.name).expect("no NUL in section names");
            if !info.add_section(&name) {
                // Not requested: Redis skips the section's fields.
                continue;
            }
            for (field, value) in section.fields {
                let field = CString::new(field.as_ref()).expect("no NUL in field names");
                let value = CString::new(value).unwrap_or_default();
                info.add_field(&field, &value);
            }
        }
    }));
    if result.is_err() {
        crate::log_limit::internal_error("layerbloom: internal error in the INFO callback");
    }
}

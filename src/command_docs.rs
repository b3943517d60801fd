//! What `COMMAND INFO` / `COMMAND DOCS` tell about the commands (summary, since, complexity,
//! arity, key specs, arguments), and their ACL categories, as the command tables say.
//!
//! Docs and key specs are set with `RedisModule_SetCommandInfo` (Redis 7.0 and later): redis-cli
//! builds its argument hints from them, cluster-aware clients route by the key specs. ACL
//! categories need newer servers and are set only where the API exists:
//! - Redis 7.4 and later (`RedisModule_AddACLCategory`): every command is in its structure's
//!   own category, its table's (`@bloom` for BF), plus `@read` or `@write` and `@fast` or
//!   `@slow`, as its flags say;
//! - Redis 7.2 and 7.3 (`RedisModule_SetCommandACLCategories` only): `@read` or `@write` and
//!   `@fast` or `@slow`, no `@bloom` (a module cannot add a category there);
//! - Redis 7.0: none; module commands belong to no category, so grant them by name
//!   (`+bf.add`) or with `+@all`.

use std::ffi::{c_int, CString};

use redis_module::{raw, Context};

use crate::command_spec::{Arg, ArgKind, KeyAccess};
use crate::dispatch::Command;
use crate::raw_api;

fn arg_type(kind: ArgKind) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
        ArgKind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        ArgKind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
    }
}

fn arg_flags(arg: &Arg) -> c_int {
    let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
    if arg.optional {
        flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
    }
    if arg.multiple {
        flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
    }
    flags as c_int
}

fn key_flags(access: KeyAccess) -> u64 {
    u64::from(match access {
        KeyAccess::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        KeyAccess::ReadMeta => raw::REDISMODULE_CMD_KEY_RO,
        KeyAccess::Insert => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT,
        KeyAccess::Update => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        // The old value is not read: it is overwritten, as SUNIONSTORE's destination is.
        KeyAccess::Replace => raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
    })
}

/// Owns the C strings and arrays handed to Redis until `SetCommandInfo` has copied them.
#[derive(Default)]
struct Arena {
    strings: Vec<CString>,
    arrays: Vec<Vec<raw::RedisModuleCommandArg>>,
}

impl Arena {
    fn text(&mut self, s: &str) -> *const std::ffi::c_char {
        let c = CString::new(s).expect("no NUL in command docs");
        let ptr = c.as_ptr();
        self.strings.push(c);
        ptr
    }

    fn maybe(&mut self, s: Option<&str>) -> *const std::ffi::c_char {
        s.map_or(std::ptr::null(), |s| self.text(s))
    }

    /// A zero-terminated array of arguments; the pointer stays valid while the arena lives
    /// (the vector's heap buffer does not move when the vector itself is moved).
    /// The `n`-th key argument of a command is found by its `n`-th key spec (`key_specs`).
    fn args(&mut self, args: &[Arg]) -> *mut raw::RedisModuleCommandArg {
        if args.is_empty() {
            return std::ptr::null_mut();
        }
        let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
        let mut keys = 0;
        for a in args {
            let subargs = self.args(a.subargs);
            let key_spec_index = if a.kind == ArgKind::Key {
                keys += 1;
                keys - 1
            } else {
                -1
            };
            out.push(raw::RedisModuleCommandArg {
                name: self.text(a.name),
                type_: arg_type(a.kind),
                key_spec_index,
                token: self.maybe(a.token),
                summary: std::ptr::null(),
                since: std::ptr::null(),
                flags: arg_flags(a),
                deprecated_since: std::ptr::null(),
                subargs,
                display_text: std::ptr::null(),
            });
        }
        // SAFETY: an all-zero argument (null pointers, zero integers) is the terminator Redis
        // expects; every field of the struct is valid as zero.
        out.push(unsafe { std::mem::zeroed() });
        let ptr = out.as_mut_ptr();
        self.arrays.push(out);
        ptr
    }
}

/// A command's key specs: the key at argument 1 alone, or for `Replace` the destination at
/// argument 1 (overwritten) and the sources from argument 2 to the last (read).
fn key_specs(access: KeyAccess) -> [raw::RedisModuleCommandKeySpec; 3] {
    // SAFETY: all-zero is a valid key spec (null notes, zero flags and unions); the first
    // all-zero element after the used ones is the terminator Redis expects.
    let mut specs: [raw::RedisModuleCommandKeySpec; 3] = unsafe { std::mem::zeroed() };
    let range = |spec: &mut raw::RedisModuleCommandKeySpec, pos: c_int, lastkey: c_int| {
        spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        spec.bs.index.pos = pos;
        spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        spec.fk.range.lastkey = lastkey;
        spec.fk.range.keystep = 1;
        spec.fk.range.limit = 0;
    };
    specs[0].flags = key_flags(access);
    range(&mut specs[0], 1, 0);
    if access == KeyAccess::Replace {
        specs[1].flags = key_flags(KeyAccess::Read);
        // From argument 2 to the last one (`-1`).
        range(&mut specs[1], 2, -1);
    }
    specs
}

static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// What `register` did, for the log.
pub struct Registered {
    /// Whether any ACL categories were set (Redis 7.2+).
    pub categories: bool,
    /// The structures' own categories that exist now and hold their commands.
    pub added: Vec<&'static str>,
    /// The structures' own categories the server refused to add (its API exists).
    pub refused: Vec<&'static str>,
}

/// Sets docs, key specs and (where the server has them) ACL categories of every command of
/// the tables; called from `OnLoad`, after the commands were created.
pub fn register(ctx: &Context, tables: &[&[Command]]) -> Result<Registered, String> {
    let commands = || tables.iter().copied().flatten();
    let set_categories = raw_api::has_command_acl_categories();
    let mut added = Vec::new();
    let mut refused = Vec::new();
    if set_categories {
        // Each distinct category once: Redis refuses to add a category twice.
        for category in commands().map(|c| c.category) {
            if added.contains(&category) || refused.contains(&category) {
                continue;
            }
            let name = CString::new(category).expect("no NUL in category names");
            match raw_api::add_acl_category(ctx, &name) {
                Ok(true) => added.push(category),
                Ok(false) => refused.push(category),
                // No such API (Redis 7.2 and 7.3): no module category at all.
                Err(_) => break,
            }
        }
    }
    for entry in commands() {
        let doc = entry.spec;
        let name = CString::new(doc.name).expect("no NUL in command names");
        let command = raw_api::get_command(ctx, &name)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("command {} is not registered", doc.name))?;
        let mut arena = Arena::default();
        let mut specs = key_specs(doc.key);
        let info = raw::RedisModuleCommandInfo {
            version: &INFO_VERSION,
            summary: arena.text(doc.summary),
            complexity: arena.text(doc.complexity),
            since: arena.maybe(doc.since),
            history: std::ptr::null_mut(),
            tips: std::ptr::null(),
            arity: doc.arity.redis(),
            key_specs: specs.as_mut_ptr(),
            args: arena.args(doc.args),
        };
        // SAFETY: the strings and argument arrays belong to `arena`, the key specs to
        // `specs`, both alive until the call returns; every array ends with the all-zero
        // element (`Arena::args`, `key_specs`).
        let accepted = unsafe { raw_api::set_command_info(command, &info) };
        if !accepted.map_err(|e| e.to_string())? {
            return Err(format!("Redis refused the command docs of {}", doc.name));
        }
        if set_categories {
            let own = Some(entry.category).filter(|c| added.contains(c));
            let categories: Vec<&str> = doc.acl_categories().chain(own).collect();
            let categories = CString::new(categories.join(" ")).expect("no NUL in categories");
            if !raw_api::set_command_acl_categories(command, &categories).unwrap_or(false) {
                return Err(format!(
                    "Redis refused the ACL categories {:?} of {}",
                    categories, doc.name
                ));
            }
        }
    }
    Ok(Registered {
        categories: set_categories,
        added,
        refused,
    })
}

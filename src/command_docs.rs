//! What `COMMAND INFO` / `COMMAND DOCS` tell about the BF commands (summary, since,
//! complexity, arity, key specs, arguments), and their ACL categories.
//!
//! Docs and key specs are set with `RedisModule_SetCommandInfo` (Redis 7.0 and later): redis-cli
//! builds its argument hints from them, cluster-aware clients route by the key specs. ACL
//! categories need newer servers and are set only where the API exists:
//! - Redis 7.4 and later (`RedisModule_AddACLCategory`): every BF command is in the module's
//!   own category `@bloom`, plus `@read` or `@write` and `@fast` or `@slow`, as their flags say;
//! - Redis 7.2 and 7.3 (`RedisModule_SetCommandACLCategories` only): `@read` or `@write` and
//!   `@fast` or `@slow`, no `@bloom` (a module cannot add a category there);
//! - Redis 7.0: none; module commands belong to no category, so grant them by name
//!   (`+bf.add`) or with `+@all`.

use std::ffi::{c_int, CString};

use redis_module::{raw, Context};

/// One argument of a command, as `COMMAND DOCS` lists it.
struct Arg {
    name: &'static str,
    kind: raw::RedisModuleCommandArgType,
    token: Option<&'static str>,
    flags: u32,
    subargs: &'static [Arg],
}

const fn arg(name: &'static str, kind: raw::RedisModuleCommandArgType) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        flags: raw::REDISMODULE_CMD_ARG_NONE,
        subargs: &[],
    }
}

const KEY: Arg = arg(
    "key",
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
);
const STRING: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
const INTEGER: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER;
const DOUBLE: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE;
const TOKEN: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN;
const ONEOF: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF;
const OPTIONAL: u32 = raw::REDISMODULE_CMD_ARG_OPTIONAL;
const MULTIPLE: u32 = raw::REDISMODULE_CMD_ARG_MULTIPLE;

/// An optional `TOKEN value` argument.
const fn option(
    name: &'static str,
    token: &'static str,
    kind: raw::RedisModuleCommandArgType,
) -> Arg {
    Arg {
        token: Some(token),
        flags: OPTIONAL,
        ..arg(name, kind)
    }
}

/// An optional bare word.
const fn word(name: &'static str, token: &'static str) -> Arg {
    option(name, token, TOKEN)
}

/// A bare word inside a one-of group.
const fn choice(name: &'static str, token: &'static str) -> Arg {
    Arg {
        token: Some(token),
        ..arg(name, TOKEN)
    }
}

const ITEM: Arg = arg("item", STRING);
const ITEMS: Arg = Arg {
    flags: MULTIPLE,
    ..arg("item", STRING)
};

/// What a command does with its key, for its key spec.
const READ: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
const READ_META: u32 = raw::REDISMODULE_CMD_KEY_RO;
const INSERT: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT;
const UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;

/// The docs of one command.
pub struct Doc {
    pub name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    since: Option<&'static str>,
    /// Redis's arity: the exact argument count (command name included), or `-n` for at least n.
    pub arity: c_int,
    key_flags: u32,
    args: &'static [Arg],
    /// ACL categories besides `bloom` (Redis 7.2+).
    pub acl: &'static str,
}

/// Every BF command, in registration order. `since` is the RedisBloom version that introduced
/// the command (layerbloom implements RedisBloom's BF API level 2.8).
pub const DOCS: &[Doc] = &[
    Doc {
        name: "BF.RESERVE",
        summary: "Creates an empty Bloom filter with the given error rate and capacity",
        complexity: "O(1)",
        since: Some("1.0.0"),
        arity: -4,
        key_flags: INSERT,
        args: &[
            KEY,
            arg("error_rate", DOUBLE),
            arg("capacity", INTEGER),
            option("expansion", "EXPANSION", INTEGER),
            word("nonscaling", "NONSCALING"),
        ],
        acl: "write slow",
    },
    Doc {
        name: "BF.ADD",
        summary: "Adds an item to a Bloom filter, creating the filter if it does not exist",
        complexity: "O(k), where k is the number of layers",
        since: Some("1.0.0"),
        arity: 3,
        key_flags: INSERT,
        args: &[KEY, ITEM],
        acl: "write slow",
    },
    Doc {
        name: "BF.MADD",
        summary: "Adds one or more items to a Bloom filter, creating the filter if it does not exist",
        complexity: "O(k * n), where k is the number of layers and n the number of items",
        since: Some("1.0.0"),
        arity: -3,
        key_flags: INSERT,
        args: &[KEY, ITEMS],
        acl: "write slow",
    },
    Doc {
        name: "BF.INSERT",
        summary: "Adds one or more items to a Bloom filter, creating it with the given options if it does not exist",
        complexity: "O(k * n), where k is the number of layers and n the number of items",
        since: Some("1.0.0"),
        arity: -4,
        key_flags: INSERT,
        args: &[
            KEY,
            option("capacity", "CAPACITY", INTEGER),
            option("error", "ERROR", DOUBLE),
            option("expansion", "EXPANSION", INTEGER),
            word("nocreate", "NOCREATE"),
            word("nonscaling", "NONSCALING"),
            Arg {
                token: Some("ITEMS"),
                flags: MULTIPLE,
                ..arg("item", STRING)
            },
        ],
        acl: "write slow",
    },
    Doc {
        name: "BF.EXISTS",
        summary: "Tells whether an item may have been added to a Bloom filter",
        complexity: "O(k), where k is the number of layers",
        since: Some("1.0.0"),
        arity: 3,
        key_flags: READ,
        args: &[KEY, ITEM],
        acl: "read fast",
    },
    Doc {
        name: "BF.MEXISTS",
        summary: "Tells for each item whether it may have been added to a Bloom filter",
        complexity: "O(k * n), where k is the number of layers and n the number of items",
        since: Some("1.0.0"),
        arity: -3,
        key_flags: READ,
        args: &[KEY, ITEMS],
        acl: "read fast",
    },
    Doc {
        name: "BF.INFO",
        summary: "Returns a Bloom filter's parameters (capacity, size, layers, items, expansion), one of them, one health figure, or with HEALTH all five (error rate, fill, estimated false-positive rate and distinct items, maximum capacity)",
        complexity: "O(k), where k is the number of layers",
        since: Some("1.0.0"),
        arity: -2,
        key_flags: READ_META,
        args: &[
            KEY,
            Arg {
                flags: OPTIONAL,
                subargs: &[
                    choice("capacity", "CAPACITY"),
                    choice("size", "SIZE"),
                    choice("filters", "FILTERS"),
                    choice("items", "ITEMS"),
                    choice("expansion", "EXPANSION"),
                    choice("error", "ERROR"),
                    choice("fill", "FILL"),
                    choice("fpr", "FPR"),
                    choice("distinct", "DISTINCT"),
                    choice("maxcapacity", "MAXCAPACITY"),
                    choice("health", "HEALTH"),
                ],
                ..arg("single_value", ONEOF)
            },
        ],
        acl: "read fast",
    },
    Doc {
        name: "BF.CARD",
        summary: "Returns the number of items added to a Bloom filter",
        complexity: "O(1)",
        since: Some("2.4.4"),
        arity: 2,
        key_flags: READ_META,
        args: &[KEY],
        acl: "read fast",
    },
    Doc {
        name: "BF.SCANDUMP",
        summary: "Begins or continues an incremental save of a Bloom filter",
        complexity: "O(n), where n is the size of the chunk returned",
        since: Some("1.0.0"),
        arity: 3,
        key_flags: READ,
        args: &[KEY, arg("iterator", INTEGER)],
        acl: "read slow",
    },
    Doc {
        name: "BF.LOADCHUNK",
        summary: "Restores a Bloom filter previously saved with BF.SCANDUMP",
        complexity: "O(n), where n is the size of the chunk",
        since: Some("1.0.0"),
        arity: 4,
        key_flags: UPDATE,
        args: &[KEY, arg("iterator", INTEGER), arg("data", STRING)],
        acl: "write slow",
    },
    Doc {
        name: "BF.DEBUG",
        summary: "Returns the layers of a Bloom filter and their parameters, for debugging",
        complexity: "O(k), where k is the number of layers",
        since: None,
        arity: 2,
        key_flags: READ_META,
        args: &[KEY],
        acl: "read slow",
    },
];

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
    fn args(&mut self, args: &[Arg]) -> *mut raw::RedisModuleCommandArg {
        if args.is_empty() {
            return std::ptr::null_mut();
        }
        let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
        for a in args {
            let subargs = self.args(a.subargs);
            out.push(raw::RedisModuleCommandArg {
                name: self.text(a.name),
                type_: a.kind,
                key_spec_index: if a.kind == KEY.kind { 0 } else { -1 },
                token: self.maybe(a.token),
                summary: std::ptr::null(),
                since: std::ptr::null(),
                flags: a.flags as c_int,
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

/// The key spec every BF command has: the key is argument 1, a single key.
fn key_specs(flags: u32) -> [raw::RedisModuleCommandKeySpec; 2] {
    // SAFETY: all-zero is a valid key spec (null notes, zero flags and unions); the second
    // element is the zero terminator Redis expects.
    let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    specs[0].flags = u64::from(flags);
    specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    specs[0].bs.index.pos = 1;
    specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    specs[0].fk.range.lastkey = 0;
    specs[0].fk.range.keystep = 1;
    specs[0].fk.range.limit = 0;
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
    /// Whether `@bloom` exists and holds the commands.
    pub bloom_category: bool,
    /// Whether any ACL categories were set (Redis 7.2+).
    pub categories: bool,
}

/// Sets docs, key specs and (where the server has them) ACL categories of every command;
/// called from `OnLoad`, after the commands were created.
pub fn register(ctx: &Context) -> Result<Registered, String> {
    let raw_ctx = ctx.get_raw();
    // SAFETY: reading the API table Redis filled before OnLoad; the functions are called with
    // this module's context during OnLoad, with zero-terminated strings and arrays that live
    // until the calls return (Redis copies what it keeps).
    unsafe {
        let get_command = raw::RedisModule_GetCommand.ok_or("no RedisModule_GetCommand")?;
        let set_info = raw::RedisModule_SetCommandInfo.ok_or("no RedisModule_SetCommandInfo")?;
        let set_categories = raw::RedisModule_SetCommandACLCategories;
        let bloom_category = match (raw::RedisModule_AddACLCategory, set_categories) {
            (Some(add), Some(_)) => add(raw_ctx, c"bloom".as_ptr()) == raw::REDISMODULE_OK as c_int,
            _ => false,
        };
        for doc in DOCS {
            let name = CString::new(doc.name).expect("no NUL in command names");
            let command = get_command(raw_ctx, name.as_ptr());
            if command.is_null() {
                return Err(format!("command {} is not registered", doc.name));
            }
            let mut arena = Arena::default();
            let mut specs = key_specs(doc.key_flags);
            let info = raw::RedisModuleCommandInfo {
                version: &INFO_VERSION,
                summary: arena.text(doc.summary),
                complexity: arena.text(doc.complexity),
                since: arena.maybe(doc.since),
                history: std::ptr::null_mut(),
                tips: std::ptr::null(),
                arity: doc.arity,
                key_specs: specs.as_mut_ptr(),
                args: arena.args(doc.args),
            };
            if set_info(command, &info) != raw::REDISMODULE_OK as c_int {
                return Err(format!("Redis refused the command docs of {}", doc.name));
            }
            if let Some(set) = set_categories {
                let categories = if bloom_category {
                    format!("{} bloom", doc.acl)
                } else {
                    doc.acl.to_string()
                };
                let categories = CString::new(categories).expect("no NUL in categories");
                if set(command, categories.as_ptr()) != raw::REDISMODULE_OK as c_int {
                    return Err(format!(
                        "Redis refused the ACL categories {:?} of {}",
                        categories, doc.name
                    ));
                }
            }
        }
        Ok(Registered {
            bloom_category,
            categories: set_categories.is_some(),
        })
    }
}

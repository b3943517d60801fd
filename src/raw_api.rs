//! Every call of a `RedisModule_*` function pointer, behind a safe wrapper with its safety
//! argument beside it (the redis-module crate's own wrappers, `raw::reply_with_*`, `Context`,
//! `RedisString`, are used as they are).
//!
//! The pointers are filled by `RedisModule_Init` before any of the module's code runs and never
//! written again, so reading one is a plain load. A pointer is `None` when the server lacks the
//! function: [`missing_core_functions`] lists those the module calls unconditionally, and the
//! module refuses to load without them, so the fallbacks below (nothing written, an I/O error)
//! are not reached on a server that loaded it. Functions of newer servers are asked for with
//! `has_*` or return `Err(Missing)`.
//!
//! Handles Redis passes to a callback (an RDB/AOF stream, a digest, an INFO context) are
//! wrapped once, in an `unsafe` constructor whose caller vouches for the handle and promises
//! that the wrapper does not outlive the callback (nothing else ties its lifetime to the
//! call); within that promise its methods are safe.

use std::ffi::{c_char, c_int, c_longlong, c_void, CStr};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, Ordering};

use redis_module::{raw, Context, ContextFlags, RedisString};

/// An API function this server does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missing(pub &'static str);

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "this server has no RedisModule_{}", self.0)
    }
}

const OK: c_int = raw::REDISMODULE_OK as c_int;

/// The functions the module calls without checking for them first (module API of Redis 7.0,
/// which every supported server has) that this server lacks, as `RedisModule_Name`.
pub fn missing_core_functions() -> Vec<&'static str> {
    macro_rules! absent {
        ($($name:ident),* $(,)?) => {
            // SAFETY: reading the API table, filled before OnLoad and never written again.
            [$((stringify!($name), unsafe { ::redis_module::raw::$name }.is_none())),*]
        };
    }
    absent![
        RedisModule_SetModuleOptions,
        RedisModule_ReplyWithError,
        RedisModule_WrongArity,
        RedisModule_ReplyWithSimpleString,
        RedisModule_ReplyWithLongLong,
        RedisModule_ReplyWithBool,
        RedisModule_ReplyWithNull,
        RedisModule_ReplyWithDouble,
        RedisModule_ReplyWithStringBuffer,
        RedisModule_ReplyWithArray,
        RedisModule_ReplyWithMap,
        RedisModule_CreateString,
        RedisModule_FreeString,
        RedisModule_Free,
        RedisModule_SaveStringBuffer,
        RedisModule_LoadStringBuffer,
        RedisModule_LoadUnsigned,
        RedisModule_LoadDouble,
        RedisModule_IsIOError,
        RedisModule_EmitAOF,
        RedisModule_Replicate,
        RedisModule_DigestAddStringBuffer,
        RedisModule_DigestEndSequence,
    ]
    .into_iter()
    .filter(|&(_, absent)| absent)
    .map(|(name, _)| name)
    .collect()
}

// ---------------------------------------------------------------- loading the module

/// Valkey 9's module option declaring that the module's keys may move by atomic slot migration
/// (`VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION`). Redis gives the bit no such meaning:
/// it is only ever set on Valkey, and only where the server lists it as supported.
const VALKEY_OPTION_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;
/// Valkey 9's context flag of the client that applies an atomic slot migration's snapshot and
/// stream on the target (`VALKEYMODULE_CTX_FLAGS_SLOT_IMPORT_CLIENT`); Redis gives the bit no
/// such meaning.
const VALKEY_FLAG_SLOT_IMPORT_CLIENT: c_int = 1 << 25;
/// The slot-import flag where this server has it (Valkey 9), else 0 (set at load).
static SLOT_IMPORT_FLAG: AtomicI32 = AtomicI32::new(0);

/// Sets the module's options (called from OnLoad): it checks `IsIOError` after its loads; and
/// on Valkey (`valkey`) that lists the option, it declares that its keys may move by atomic
/// slot migration (`CLUSTER MIGRATESLOTS`). Returns whether it declared the latter.
///
/// What that migration asks of a module, and why this one meets it: the keys of the moved
/// slots travel as an AOF-format snapshot (each value through the type's `aof_rewrite`, the
/// `LOADCHUNK` commands that rebuild it bit for bit), then as the stream of the commands
/// replicated for those slots (every write of this module replicates commands on its own key,
/// so each carries its slot); the target applies both through a slot-import client, whose
/// commands this module treats as a primary's (see [`context_flags`]): carried out already,
/// so no clock, no memory limit, RDB-level strictness. The module keeps no state outside its
/// keys (no aux data, no keyspace subscriptions), so nothing else has to move.
pub fn set_module_options(ctx: &Context, valkey: bool) -> bool {
    // SAFETY: reading the API table, filled before OnLoad and never written again; the calls
    // take no arguments but OnLoad's live context and plain flags.
    unsafe {
        let Some(set) = raw::RedisModule_SetModuleOptions else {
            return false;
        };
        let mut options = raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int;
        let supported = raw::RedisModule_GetModuleOptionsAll.map_or(0, |all| all());
        let migrates = valkey && supported & VALKEY_OPTION_ATOMIC_SLOT_MIGRATION != 0;
        if migrates {
            options |= VALKEY_OPTION_ATOMIC_SLOT_MIGRATION;
            let flags = raw::RedisModule_GetContextFlagsAll.map_or(0, |all| all());
            if flags & VALKEY_FLAG_SLOT_IMPORT_CLIENT != 0 {
                SLOT_IMPORT_FLAG.store(VALKEY_FLAG_SLOT_IMPORT_CLIENT, Ordering::Relaxed);
            }
        }
        set(ctx.get_raw(), options);
        migrates
    }
}

/// Whether keys may arrive by atomic slot migration (declared at load, Valkey 9): commands of
/// the slot-import client are then told apart only where a command's context is at hand.
pub fn slot_imports_possible() -> bool {
    SLOT_IMPORT_FLAG.load(Ordering::Relaxed) != 0
}

/// Whether the server is Valkey (its `INFO server` names it; Valkey also answers the version
/// call, with its own numbering).
pub fn server_is_valkey(ctx: &Context) -> bool {
    let name = ctx.server_info("server").field("server_name");
    name.is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case("valkey"))
}

/// The flags of a command's context, with Valkey 9's slot-import client counted as
/// `REPLICATED`: like a primary's, its commands (a migration's snapshot and stream) were
/// carried out on the source already and must be applied as sent.
pub fn context_flags(ctx: &Context) -> ContextFlags {
    // SAFETY: a live context of a command; the call only reads it.
    let bits = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |get| get(ctx.get_raw())) };
    let mut flags = ContextFlags::from_bits_truncate(bits);
    let import = SLOT_IMPORT_FLAG.load(Ordering::Relaxed);
    if import != 0 && bits & import != 0 {
        flags |= ContextFlags::REPLICATED;
    }
    flags
}

/// The module's INFO callback (`INFO bf`); `false` where the server has none.
pub fn register_info_func(ctx: &Context, callback: raw::RedisModuleInfoFunc) -> bool {
    // SAFETY: OnLoad's context; the callback, if any, is an `extern "C"` function with the
    // documented signature (the type says so) and catches its own panics.
    unsafe {
        raw::RedisModule_RegisterInfoFunc
            .is_some_and(|register| register(ctx.get_raw(), callback) == OK)
    }
}

/// Creates a command (called from OnLoad); Redis copies the name and parses the flags.
pub fn create_command(
    ctx: &Context,
    name: &CStr,
    entry: raw::RedisModuleCmdFunc,
    flags: &CStr,
    (first_key, last_key, key_step): (c_int, c_int, c_int),
) -> Result<bool, Missing> {
    // SAFETY: OnLoad's context, NUL-terminated strings alive for the call, and an entry point
    // with the documented signature (the type says so).
    unsafe {
        let create = raw::RedisModule_CreateCommand.ok_or(Missing("CreateCommand"))?;
        Ok(create(
            ctx.get_raw(),
            name.as_ptr(),
            entry,
            flags.as_ptr(),
            first_key,
            last_key,
            key_step,
        ) == OK)
    }
}

/// A command this module created, to describe it.
#[derive(Clone, Copy)]
pub struct CommandHandle(*mut raw::RedisModuleCommand);

/// The command registered under `name` (any case), if any.
pub fn get_command(ctx: &Context, name: &CStr) -> Result<Option<CommandHandle>, Missing> {
    // SAFETY: OnLoad's context and a NUL-terminated name; the handle Redis returns lives as
    // long as the command, which a module cannot remove.
    unsafe {
        let get = raw::RedisModule_GetCommand.ok_or(Missing("GetCommand"))?;
        let command = get(ctx.get_raw(), name.as_ptr());
        Ok((!command.is_null()).then_some(CommandHandle(command)))
    }
}

/// Sets a command's docs, arity and key specs (Redis 7.0+); whether Redis accepted them.
///
/// # Safety
/// Every pointer in `info` (strings, argument and key-spec arrays, their sub-arguments) is
/// valid for the call, and the arrays end with an all-zero element, as Redis reads them.
pub unsafe fn set_command_info(
    command: CommandHandle,
    info: &raw::RedisModuleCommandInfo,
) -> Result<bool, Missing> {
    // SAFETY: a handle of `get_command`; `info`'s pointers are the caller's to vouch for;
    // Redis copies what it keeps.
    unsafe {
        let set = raw::RedisModule_SetCommandInfo.ok_or(Missing("SetCommandInfo"))?;
        Ok(set(command.0, info) == OK)
    }
}

/// Whether the server can set a command's ACL categories (Redis 7.2+).
pub fn has_command_acl_categories() -> bool {
    // SAFETY: reading the API table.
    unsafe { raw::RedisModule_SetCommandACLCategories }.is_some()
}

/// Sets a command's ACL categories (space-separated names); whether Redis accepted them.
pub fn set_command_acl_categories(
    command: CommandHandle,
    categories: &CStr,
) -> Result<bool, Missing> {
    // SAFETY: a handle of `get_command` and a NUL-terminated string Redis parses.
    unsafe {
        let set =
            raw::RedisModule_SetCommandACLCategories.ok_or(Missing("SetCommandACLCategories"))?;
        Ok(set(command.0, categories.as_ptr()) == OK)
    }
}

/// Adds the module's own ACL category (Redis 7.4+, during OnLoad); whether it exists now.
pub fn add_acl_category(ctx: &Context, name: &CStr) -> Result<bool, Missing> {
    // SAFETY: OnLoad's context and a NUL-terminated name, which Redis copies.
    unsafe {
        let add = raw::RedisModule_AddACLCategory.ok_or(Missing("AddACLCategory"))?;
        Ok(add(ctx.get_raw(), name.as_ptr()) == OK)
    }
}

// ---------------------------------------------------------------- settings

/// The callbacks and private data of a setting, with the module API's signatures.
pub struct ConfigCallbacks<G, S> {
    pub get: G,
    pub set: S,
    /// Handed back to the callbacks: an integer telling them apart, never dereferenced.
    pub privdata: usize,
}

pub type StringConfig =
    ConfigCallbacks<raw::RedisModuleConfigGetStringFunc, raw::RedisModuleConfigSetStringFunc>;
pub type NumericConfig =
    ConfigCallbacks<raw::RedisModuleConfigGetNumericFunc, raw::RedisModuleConfigSetNumericFunc>;
pub type EnumConfig =
    ConfigCallbacks<raw::RedisModuleConfigGetEnumFunc, raw::RedisModuleConfigSetEnumFunc>;

/// Registers a string setting (during OnLoad); whether Redis accepted it.
pub fn register_string_config(
    ctx: &Context,
    name: &CStr,
    default: &CStr,
    flags: u32,
    callbacks: StringConfig,
) -> Result<bool, Missing> {
    // SAFETY: OnLoad's context; the strings are NUL-terminated and copied by Redis; the
    // callbacks have the documented signatures (their types say so); `privdata` is an integer
    // the callbacks only compare.
    unsafe {
        let register =
            raw::RedisModule_RegisterStringConfig.ok_or(Missing("RegisterStringConfig"))?;
        Ok(register(
            ctx.get_raw(),
            name.as_ptr(),
            default.as_ptr(),
            flags,
            callbacks.get,
            callbacks.set,
            None,
            callbacks.privdata as *mut c_void,
        ) == OK)
    }
}

/// Registers a numeric setting with its bounds (during OnLoad); whether Redis accepted it.
pub fn register_numeric_config(
    ctx: &Context,
    name: &CStr,
    (default, min, max): (i64, i64, i64),
    flags: u32,
    callbacks: NumericConfig,
) -> Result<bool, Missing> {
    // SAFETY: as in `register_string_config`.
    unsafe {
        let register =
            raw::RedisModule_RegisterNumericConfig.ok_or(Missing("RegisterNumericConfig"))?;
        Ok(register(
            ctx.get_raw(),
            name.as_ptr(),
            default,
            flags,
            min,
            max,
            callbacks.get,
            callbacks.set,
            None,
            callbacks.privdata as *mut c_void,
        ) == OK)
    }
}

/// Registers an enum setting of at most 8 names (during OnLoad); whether Redis accepted it.
pub fn register_enum_config(
    ctx: &Context,
    name: &CStr,
    default: c_int,
    flags: u32,
    choices: &[(&CStr, c_int)],
    callbacks: EnumConfig,
) -> Result<bool, Missing> {
    let mut names = [std::ptr::null::<c_char>(); 8];
    let mut values: [c_int; 8] = [0; 8];
    let count = choices.len().min(names.len());
    for (i, &(name, value)) in choices.iter().take(count).enumerate() {
        names[i] = name.as_ptr();
        values[i] = value;
    }
    // SAFETY: as in `register_string_config`; `names` and `values` hold `count` entries,
    // alive for the call (Redis copies the names).
    unsafe {
        let register = raw::RedisModule_RegisterEnumConfig.ok_or(Missing("RegisterEnumConfig"))?;
        Ok(register(
            ctx.get_raw(),
            name.as_ptr(),
            default,
            flags,
            names.as_mut_ptr(),
            values.as_ptr(),
            count as c_int,
            callbacks.get,
            callbacks.set,
            None,
            callbacks.privdata as *mut c_void,
        ) == OK)
    }
}

/// Applies the server configuration's values to the registered settings (during OnLoad).
pub fn load_configs(ctx: &Context) -> Result<bool, Missing> {
    // SAFETY: OnLoad's context.
    unsafe {
        let load = raw::RedisModule_LoadConfigs.ok_or(Missing("LoadConfigs"))?;
        Ok(load(ctx.get_raw()) == OK)
    }
}

/// A new string with no context (so never freed automatically), or null if the server lacks
/// the function. The caller owns it: [`free_string`] it, or hand it to Redis.
pub fn create_string(bytes: &[u8]) -> *mut raw::RedisModuleString {
    // SAFETY: a null context is allowed; Redis copies `bytes.len()` bytes from `bytes`.
    unsafe {
        raw::RedisModule_CreateString.map_or(std::ptr::null_mut(), |create| {
            create(
                std::ptr::null_mut(),
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        })
    }
}

/// Frees a string of [`create_string`].
///
/// # Safety
/// `string` came from `create_string`, is not null, and is not used again.
pub unsafe fn free_string(string: *mut raw::RedisModuleString) {
    // SAFETY: a context-free string the caller owns, freed once with the null context it was
    // created with.
    unsafe {
        if let Some(free) = raw::RedisModule_FreeString {
            free(std::ptr::null_mut(), string);
        }
    }
}

/// A double as the server's own parser reads `bytes` (`RedisModule_StringToDouble`), or
/// `None` if it refuses them; `Err` where the API is missing. Copies `bytes` into a
/// context-free string: callers bound the length.
pub fn host_string_to_double(bytes: &[u8]) -> Result<Option<f64>, Missing> {
    // SAFETY: reading the API table, filled before OnLoad and never written again.
    let parse = unsafe { raw::RedisModule_StringToDouble }.ok_or(Missing("StringToDouble"))?;
    let string = create_string(bytes);
    if string.is_null() {
        return Err(Missing("CreateString"));
    }
    let mut value = 0.0f64;
    // SAFETY: `string` is a live string made above; Redis writes only `value`.
    let status = unsafe { parse(string, &mut value) };
    // SAFETY: made by `create_string` above, reachable from nowhere else.
    unsafe { free_string(string) };
    Ok((status == raw::REDISMODULE_OK as c_int).then_some(value))
}

/// The server's version as `0x00MMmmpp`, or 0 where the API to ask is missing.
pub fn server_version() -> i32 {
    // SAFETY: the function takes no arguments and only reads the server's version constant.
    unsafe { raw::RedisModule_GetServerVersion.map_or(0, |get| get()) }
}

// ---------------------------------------------------------------- server state and log

/// Used memory over `maxmemory`, as Redis's OOM check measures it (Redis 7.0+).
pub fn used_memory_ratio() -> Option<f32> {
    // SAFETY: the function takes no arguments.
    unsafe { raw::RedisModule_GetUsedMemoryRatio.map(|ratio| ratio()) }
}

/// An unsigned field of an `INFO` section (`None`: missing, not a number, or no API).
pub fn server_info_unsigned(section: &CStr, field: &CStr) -> Option<u64> {
    // SAFETY: a null context is allowed (no automatic memory); the strings are
    // NUL-terminated; the info data is freed once, below, and not used after.
    unsafe {
        let get = raw::RedisModule_GetServerInfo?;
        let get_field = raw::RedisModule_ServerInfoGetFieldUnsigned?;
        let free = raw::RedisModule_FreeServerInfo?;
        let info = get(std::ptr::null_mut(), section.as_ptr());
        if info.is_null() {
            return None;
        }
        let mut err: c_int = 0;
        let value = get_field(info, field.as_ptr(), &mut err);
        free(std::ptr::null_mut(), info);
        (err == 0).then_some(value)
    }
}

/// A field of an `INFO` section as text (`None`: missing, or no API).
pub fn server_info_string(section: &CStr, field: &CStr) -> Option<String> {
    server_info_strings(section, std::iter::once(field))?
        .pop()
        .flatten()
}

/// Fields of one `INFO` section as text, the section built once (`None`: no API; a missing
/// field: `None` in its place).
pub fn server_info_strings<'a>(
    section: &CStr,
    fields: impl Iterator<Item = &'a CStr>,
) -> Option<Vec<Option<String>>> {
    // SAFETY: as in `server_info_unsigned`; each field's C string belongs to the info data
    // and is copied before that is freed.
    unsafe {
        let get = raw::RedisModule_GetServerInfo?;
        let get_field = raw::RedisModule_ServerInfoGetFieldC?;
        let free = raw::RedisModule_FreeServerInfo?;
        let info = get(std::ptr::null_mut(), section.as_ptr());
        if info.is_null() {
            return None;
        }
        let texts = fields
            .map(|field| {
                let value = get_field(info, field.as_ptr());
                (!value.is_null()).then(|| CStr::from_ptr(value).to_string_lossy().into_owned())
            })
            .collect();
        free(std::ptr::null_mut(), info);
        Some(texts)
    }
}

/// The server's own context flags (maxmemory, eviction, loading, replica...), for a callback
/// that has no context (a type's `copy`): no client's flags (REPLICATED, MULTI) among them.
pub fn server_flags() -> Option<ContextFlags> {
    // SAFETY: Redis and Valkey read only server state when the context is null.
    unsafe {
        let get = raw::RedisModule_GetContextFlags?;
        Some(ContextFlags::from_bits_truncate(get(std::ptr::null_mut())))
    }
}

/// Writes a line to the server log at `level` (`"warning"`, `"notice"`). The text is passed
/// as the argument of a constant `"%s"` format, never as the format.
pub fn log(ctx: Option<&Context>, level: &CStr, text: &CStr) {
    let ctx = ctx.map_or(std::ptr::null_mut(), Context::get_raw);
    // SAFETY: the format "%s" consumes exactly one NUL-terminated string argument, which
    // outlives the call; a null context is allowed (the line then lacks the module's name).
    unsafe {
        if let Some(log) = raw::RedisModule_Log {
            log(ctx, level.as_ptr(), c"%s".as_ptr(), text.as_ptr());
        }
    }
}

// ---------------------------------------------------------------- commands

/// Sends a keyspace event of class `class` about `key`.
pub fn notify_keyspace_event(ctx: &Context, class: c_int, event: &CStr, key: &RedisString) {
    // SAFETY: the command's live context, a key string alive for the call and a
    // NUL-terminated event name, which Redis copies.
    unsafe {
        if let Some(notify) = raw::RedisModule_NotifyKeyspaceEvent {
            notify(ctx.get_raw(), class, event.as_ptr(), key.inner);
        }
    }
}

/// The arguments of a command to replicate: the strings themselves, borrowed (Redis takes its
/// own reference to each), not copies.
pub struct Argv<'a> {
    strings: Vec<*mut raw::RedisModuleString>,
    borrowed: PhantomData<&'a RedisString>,
}

impl<'a> Argv<'a> {
    pub fn with_capacity(count: usize) -> Self {
        Argv {
            strings: Vec::with_capacity(count),
            borrowed: PhantomData,
        }
    }

    pub fn push(&mut self, arg: &'a RedisString) {
        self.strings.push(arg.inner);
    }

    pub fn extend(&mut self, args: &'a [RedisString]) {
        self.strings.extend(args.iter().map(|arg| arg.inner));
    }
}

/// Replicates `command` with `argv` to the replicas and the AOF, as `Context::replicate`
/// does, without its copies of the argument vector and of the name.
pub fn replicate(ctx: &Context, command: &CStr, argv: &Argv) {
    // SAFETY: the command's live context, a NUL-terminated name, and the "v" format with a
    // vector of strings that `Argv` borrows (alive for the call) and its length; Redis reads
    // them during the call. It fails only for a command this server does not know, which the
    // module's own command never is.
    unsafe {
        if let Some(replicate) = raw::RedisModule_Replicate {
            replicate(
                ctx.get_raw(),
                command.as_ptr(),
                raw::FMT,
                argv.strings.as_ptr(),
                argv.strings.len(),
            );
        }
    }
}

/// Replies Redis's standard wrong-arity error, naming the command as registered.
pub fn reply_wrong_arity(ctx: &Context) {
    // SAFETY: the command's live context.
    unsafe {
        if let Some(wrong_arity) = raw::RedisModule_WrongArity {
            wrong_arity(ctx.get_raw());
        }
    }
}

/// Replies an error with exactly this text (its first word is the error code).
pub fn reply_error(ctx: &Context, text: &CStr) {
    // SAFETY: the command's live context and a NUL-terminated text, which Redis copies.
    unsafe {
        if let Some(reply) = raw::RedisModule_ReplyWithError {
            reply(ctx.get_raw(), text.as_ptr());
        }
    }
}

// ---------------------------------------------------------------- data type callbacks

/// The RDB or AOF stream Redis passed to a data type callback.
pub struct Io<'a> {
    io: *mut raw::RedisModuleIO,
    callback: PhantomData<&'a mut raw::RedisModuleIO>,
}

impl Io<'_> {
    /// # Safety
    /// `io` is the handle Redis passed to the running `rdb_load`, `rdb_save` or `aof_rewrite`
    /// callback, and the `Io` does not outlive that call.
    pub unsafe fn of_callback(io: *mut raw::RedisModuleIO) -> Self {
        Io {
            io,
            callback: PhantomData,
        }
    }

    /// Whether a load failed (truncated or unreadable input); `true` without the API.
    pub fn failed(&self) -> bool {
        // SAFETY: a live handle (the constructor's contract).
        unsafe { raw::RedisModule_IsIOError.is_none_or(|failed| failed(self.io) != 0) }
    }

    pub fn load_unsigned(&mut self) -> Result<u64, Missing> {
        // SAFETY: a live handle of a load.
        unsafe {
            let load = raw::RedisModule_LoadUnsigned.ok_or(Missing("LoadUnsigned"))?;
            Ok(load(self.io))
        }
    }

    pub fn load_double(&mut self) -> Result<f64, Missing> {
        // SAFETY: a live handle of a load.
        unsafe {
            let load = raw::RedisModule_LoadDouble.ok_or(Missing("LoadDouble"))?;
            Ok(load(self.io))
        }
    }

    /// The next string of the stream, owned (freed on drop); check [`Io::failed`] after.
    pub fn load_string_buffer(&mut self) -> Result<LoadedBuffer, Missing> {
        let mut len = 0usize;
        // SAFETY: a live handle of a load; Redis writes the length to `len`.
        let ptr = unsafe {
            let load = raw::RedisModule_LoadStringBuffer.ok_or(Missing("LoadStringBuffer"))?;
            load(self.io, &mut len)
        };
        Ok(LoadedBuffer { ptr, len })
    }

    /// The flags of the context the load runs in (a client's RESTORE, startup, a replica's
    /// sync), where the server can tell them.
    pub fn context_flags(&self) -> Option<ContextFlags> {
        // SAFETY: a live handle; the context Redis returns belongs to the handle and is freed
        // by Redis.
        unsafe {
            let ctx = raw::RedisModule_GetContextFromIO?(self.io);
            Some(ContextFlags::from_bits_truncate(
                raw::RedisModule_GetContextFlags?(ctx),
            ))
        }
    }

    pub fn save_unsigned(&mut self, value: u64) {
        // SAFETY: a live handle of a save.
        unsafe {
            if let Some(save) = raw::RedisModule_SaveUnsigned {
                save(self.io, value);
            }
        }
    }

    pub fn save_string_buffer(&mut self, bytes: &[u8]) {
        // SAFETY: a live handle of a save; Redis copies the bytes.
        unsafe {
            if let Some(save) = raw::RedisModule_SaveStringBuffer {
                save(self.io, bytes.as_ptr().cast::<c_char>(), bytes.len());
            }
        }
    }

    /// Emits `command key it bytes` into a rewritten AOF.
    ///
    /// # Safety
    /// `key` is the key string Redis passed to the running `aof_rewrite`.
    pub unsafe fn emit_aof_key_int_buffer(
        &mut self,
        command: &CStr,
        key: *mut raw::RedisModuleString,
        it: i64,
        bytes: &[u8],
    ) {
        // SAFETY: a live handle of an AOF rewrite and its key (the caller's contract); the
        // format "slb" takes a RedisModuleString, a long long and a (pointer, length) buffer,
        // exactly what is passed; Redis copies them.
        unsafe {
            if let Some(emit) = raw::RedisModule_EmitAOF {
                emit(
                    self.io,
                    command.as_ptr(),
                    c"slb".as_ptr(),
                    key,
                    it as c_longlong,
                    bytes.as_ptr().cast::<c_char>(),
                    bytes.len(),
                );
            }
        }
    }
}

/// A string buffer of `RedisModule_LoadStringBuffer`, freed on drop.
pub struct LoadedBuffer {
    ptr: *mut c_char,
    len: usize,
}

impl LoadedBuffer {
    pub fn as_slice(&self) -> &[u8] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: Redis returned `len` initialised bytes at `ptr`, owned by this buffer.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl AsRef<[u8]> for LoadedBuffer {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Drop for LoadedBuffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated by Redis for this buffer alone, freed once.
            unsafe { free(self.ptr.cast()) };
        }
    }
}

/// The digest Redis passed to a data type's `digest` callback.
pub struct Digest<'a> {
    md: *mut raw::RedisModuleDigest,
    callback: PhantomData<&'a mut raw::RedisModuleDigest>,
}

impl Digest<'_> {
    /// # Safety
    /// `md` is the digest Redis passed to the running `digest` callback, and the `Digest`
    /// does not outlive that call.
    pub unsafe fn of_callback(md: *mut raw::RedisModuleDigest) -> Self {
        Digest {
            md,
            callback: PhantomData,
        }
    }

    pub fn add_string_buffer(&mut self, bytes: &[u8]) {
        // SAFETY: a live digest (the constructor's contract); the bytes are only read.
        unsafe {
            if let Some(add) = raw::RedisModule_DigestAddStringBuffer {
                add(self.md, bytes.as_ptr().cast::<c_char>(), bytes.len());
            }
        }
    }

    pub fn end_sequence(&mut self) {
        // SAFETY: a live digest.
        unsafe {
            if let Some(end) = raw::RedisModule_DigestEndSequence {
                end(self.md);
            }
        }
    }
}

/// The INFO context Redis passed to the module's INFO callback.
pub struct InfoCtx<'a> {
    ctx: *mut raw::RedisModuleInfoCtx,
    callback: PhantomData<&'a mut raw::RedisModuleInfoCtx>,
}

impl InfoCtx<'_> {
    /// # Safety
    /// `ctx` is the context Redis passed to the running INFO callback, and the `InfoCtx`
    /// does not outlive that call.
    pub unsafe fn of_callback(ctx: *mut raw::RedisModuleInfoCtx) -> Self {
        InfoCtx {
            ctx,
            callback: PhantomData,
        }
    }

    /// Starts a section; `false` when it was not asked for (Redis then skips its fields) or
    /// the server has no INFO API.
    pub fn add_section(&mut self, name: &CStr) -> bool {
        // SAFETY: a live INFO context; Redis copies the name.
        unsafe {
            raw::RedisModule_InfoAddSection.is_some_and(|add| add(self.ctx, name.as_ptr()) == OK)
        }
    }

    pub fn add_field(&mut self, field: &CStr, value: &CStr) {
        // SAFETY: a live INFO context; Redis copies the strings.
        unsafe {
            if let Some(add) = raw::RedisModule_InfoAddFieldCString {
                add(self.ctx, field.as_ptr(), value.as_ptr());
            }
        }
    }
}

// ---------------------------------------------------------------- the allocator
// (Unit tests run on the system allocator: these are unused there.)

/// `size` bytes of Redis's allocator (counted in `used_memory`), at least 8-aligned, or null
/// when it has none to give (or the server lacks `TryAlloc`): never an abort.
#[cfg_attr(test, allow(dead_code))]
#[inline]
pub fn try_alloc(size: usize) -> *mut u8 {
    // SAFETY: TryAlloc accepts any size and returns null on failure.
    unsafe { raw::RedisModule_TryAlloc.map_or(std::ptr::null_mut(), |alloc| alloc(size).cast()) }
}

/// Frees memory of Redis's allocator.
///
/// # Safety
/// `ptr` came from Redis's allocator ([`try_alloc`], or a buffer Redis handed over) and is
/// freed once.
#[cfg_attr(test, allow(dead_code))]
#[inline]
pub unsafe fn free(ptr: *mut c_void) {
    // SAFETY: the caller's contract.
    unsafe {
        if let Some(free) = raw::RedisModule_Free {
            free(ptr);
        }
    }
}

/// The usable size the allocator reserved for `ptr`, or `None` without the API (unit tests).
///
/// # Safety
/// `ptr` is a live allocation of Redis's allocator, as returned by it (not offset).
#[cfg_attr(test, allow(dead_code))]
#[inline]
pub unsafe fn malloc_size(ptr: *mut c_void) -> Option<usize> {
    // SAFETY: the caller's contract.
    unsafe { raw::RedisModule_MallocSize.map(|size| size(ptr)) }
}

/// The bytes a live allocation of Redis's allocator may use from `ptr` (its size class), where
/// the server says (`RedisModule_MallocUsableSize`, Redis 7.0.1 and later); `None` elsewhere.
///
/// # Safety
/// `ptr` is a live allocation of Redis's allocator, as returned by it (not offset).
#[cfg_attr(test, allow(dead_code))]
#[inline]
pub unsafe fn malloc_usable_size(ptr: *mut c_void) -> Option<usize> {
    // SAFETY: the caller's contract.
    unsafe { raw::RedisModule_MallocUsableSize.map(|size| size(ptr)) }
}

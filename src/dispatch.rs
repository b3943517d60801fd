//! Command registration and the call path from Redis into a handler.
//!
//! The redis-module crate's command wrapper retains every argument string, collects them into
//! a fresh vector and frees them again after the call: about 600 instructions per command,
//! more than the filter's own work on a single-item BF.EXISTS (docs/BENCHMARKS.md). Redis
//! keeps `argv` alive for the whole call, so the handlers here borrow the arguments instead:
//! no retain, no free and, for the usual short commands, no allocation.

use std::ffi::{c_int, CString};
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, Context, RedisString};

use crate::command_spec::CommandSpec;
use crate::error::BfError;
use crate::raw_api;
use crate::reply::Reply;

/// What every handler returns: `Err` is replied as an error (nothing was replied yet).
pub type CommandResult = Result<(), BfError>;

/// A command's handler, called with a count of arguments its table accepts.
pub type Handler = fn(&Context, &[RedisString]) -> CommandResult;
/// Counts an error a handler returned among its structure's refusals (`INFO bf`), before it
/// is replied: each table names its structure's.
pub type Refused = fn(&BfError);
pub type RawCommand =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// One registered command: its table entry and the function Redis calls.
pub struct Command {
    pub spec: &'static CommandSpec,
    /// Its table's ACL category, the structure's own (`bloom`).
    pub category: &'static str,
    pub entry: RawCommand,
}

/// Arguments up to this count are viewed from the stack, without an allocation.
const INLINE_ARGS: usize = 8;

/// Runs a handler on the call's arguments: refuses a wrong argument count (Redis checks
/// only the minimum of a variable arity), counts (`refused`) and replies the handler's error,
/// and turns a panic into an error reply and a log line instead of an abort of the server.
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    spec: &'static CommandSpec,
    (handler, refused): (Handler, Refused),
) -> c_int {
    let context = Context::new(ctx);
    let count = usize::try_from(argc).unwrap_or(0);
    if !spec.arity.accepts(count) {
        Reply::new(&context).error(&BfError::WrongArity);
        return raw::REDISMODULE_OK as c_int;
    }
    let raw_args: &[*mut raw::RedisModuleString] = if argv.is_null() || count == 0 {
        &[]
    } else {
        // SAFETY: Redis passes `argc` valid argument pointers that outlive the call.
        unsafe { std::slice::from_raw_parts(argv, count) }
    };
    // Borrowed views: never freed here, as the strings belong to the call.
    let view = |p: *mut raw::RedisModuleString| {
        ManuallyDrop::new(RedisString::from_redis_module_string(ctx, p))
    };
    let outcome = if raw_args.len() <= INLINE_ARGS {
        let inline: [ManuallyDrop<RedisString>; INLINE_ARGS] =
            std::array::from_fn(|i| view(raw_args.get(i).copied().unwrap_or(std::ptr::null_mut())));
        call(&context, as_strings(&inline[..raw_args.len()]), handler)
    } else {
        let mut many: Vec<ManuallyDrop<RedisString>> = Vec::new();
        match many.try_reserve_exact(raw_args.len()) {
            Ok(()) => {
                many.extend(raw_args.iter().map(|&p| view(p)));
                call(&context, as_strings(&many), handler)
            }
            Err(_) => Ok(Err(BfError::ArgumentsOutOfMemory)),
        }
    };
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            refused(&e);
            Reply::new(&context).error(&e);
        }
        Err(()) => Reply::new(&context).error(&BfError::Internal),
    }
    raw::REDISMODULE_OK as c_int
}

fn call(ctx: &Context, args: &[RedisString], handler: Handler) -> Result<CommandResult, ()> {
    catch_unwind(AssertUnwindSafe(|| handler(ctx, args))).map_err(|_| ())
}

fn as_strings(views: &[ManuallyDrop<RedisString>]) -> &[RedisString] {
    // SAFETY: `ManuallyDrop<T>` is `repr(transparent)` over `T`, so the slices have the same
    // layout; the handler only reads the strings and cannot drop them through a shared slice.
    unsafe { &*(views as *const [ManuallyDrop<RedisString>] as *const [RedisString]) }
}

/// Expands a structure's table (`bloom/table.rs`) into its ACL category, `CATEGORY`, and its
/// commands, `COMMANDS`: for each entry an `extern "C"` function that Redis calls, passing the
/// call to [`dispatch`] with the entry, the handler and the structure's count of refusals
/// (`refused:`, optional).
macro_rules! command_table {
    (category: $category:literal; $($handler:path => $spec:expr,)*) => {
        $crate::dispatch::command_table! {
            category: $category;
            refused: $crate::dispatch::uncounted;
            $($handler => $spec,)*
        }
    };
    (category: $category:literal; refused: $refused:path; $($handler:path => $spec:expr,)*) => {
        #[allow(unused_imports)]
        use $crate::command_spec::*;

        /// The structure's own ACL category, which every command of the table is in.
        pub const CATEGORY: &str = $category;

        pub const COMMANDS: &[$crate::dispatch::Command] = &[$({
            const SPEC: CommandSpec = $spec;
            extern "C" fn entry(
                ctx: *mut ::redis_module::raw::RedisModuleCtx,
                argv: *mut *mut ::redis_module::raw::RedisModuleString,
                argc: ::std::ffi::c_int,
            ) -> ::std::ffi::c_int {
                $crate::dispatch::dispatch(ctx, argv, argc, &SPEC, ($handler, $refused))
            }
            $crate::dispatch::Command {
                spec: &SPEC,
                category: CATEGORY,
                entry,
            }
        },)*];
    };
}
pub(crate) use command_table;

/// The count of refusals of a table that names none: its structure counts its own where they
/// arise.
pub fn uncounted(_: &BfError) {}

/// Creates every command of the tables (first key at argument 1 for all of them).
pub fn register(ctx: &Context, tables: &[&[Command]]) -> Result<(), String> {
    for command in tables.iter().copied().flatten() {
        let name = CString::new(command.spec.name).map_err(|e| e.to_string())?;
        let flags = CString::new(command.spec.flags).map_err(|e| e.to_string())?;
        let (first, last, step) = command.spec.key.key_range();
        let created =
            raw_api::create_command(ctx, &name, Some(command.entry), &flags, (first, last, step))
                .map_err(|e| e.to_string())?;
        if !created {
            return Err(format!("cannot create command {}", command.spec.name));
        }
    }
    Ok(())
}

//! Command registration and the call path from Redis into a handler.
//!
//! The redis-module crate's command wrapper retains every argument string, collects them into
//! a fresh vector and frees them again after the call: about 600 instructions per command,
//! more than the filter's own work on a single-item BF.EXISTS (docs/BENCHMARKS.md). Redis
//! keeps `argv` alive for the whole call, so the handlers here borrow the arguments instead:
//! no retain, no free and, for the usual short commands, no allocation.

use std::ffi::{c_int, CStr};
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, Context, RedisString};

use crate::bf::handlers::{self as commands, CommandResult};
use crate::error::BfError;
use crate::reply::Reply;

type Handler = fn(&Context, &[RedisString]) -> CommandResult;
type RawCommand =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// One command: its name, Redis's command flags and the function Redis calls.
struct Command {
    name: &'static CStr,
    flags: &'static CStr,
    entry: RawCommand,
}

/// Arguments up to this count are viewed from the stack, without an allocation.
const INLINE_ARGS: usize = 8;

/// Runs a handler on the call's arguments: replies its error, and turns a panic into an error
/// reply and a log line instead of an abort of the server.
fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: Handler,
) -> c_int {
    let context = Context::new(ctx);
    let count = usize::try_from(argc).unwrap_or(0);
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
        Ok(Err(e)) => Reply::new(&context).error(&e),
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

macro_rules! commands {
    ($($name:literal, $flags:literal => $entry:ident => $handler:path;)*) => {
        $(
            extern "C" fn $entry(
                ctx: *mut raw::RedisModuleCtx,
                argv: *mut *mut raw::RedisModuleString,
                argc: c_int,
            ) -> c_int {
                dispatch(ctx, argv, argc, $handler)
            }
        )*
        const COMMANDS: &[Command] = &[
            $(Command { name: $name, flags: $flags, entry: $entry },)*
        ];
    };
}

// Registered in lower case, as RedisBloom registers them: Redis names a command by its
// registered spelling in wrong-arity errors, COMMAND INFO and INFO commandstats
// (`cmdstat_bf.add`), which monitoring reads.
commands! {
    c"bf.reserve", c"write deny-oom" => bf_reserve => commands::reserve;
    c"bf.add", c"write deny-oom" => bf_add => commands::add;
    c"bf.madd", c"write deny-oom" => bf_madd => commands::madd;
    c"bf.insert", c"write deny-oom" => bf_insert => commands::insert;
    c"bf.exists", c"readonly fast" => bf_exists => commands::exists;
    c"bf.mexists", c"readonly fast" => bf_mexists => commands::mexists;
    c"bf.info", c"readonly fast" => bf_info => commands::info;
    c"bf.card", c"readonly fast" => bf_card => commands::card;
    c"bf.scandump", c"readonly" => bf_scandump => commands::scandump;
    c"bf.loadchunk", c"write deny-oom" => bf_loadchunk => commands::loadchunk;
    c"bf.debug", c"readonly" => bf_debug => commands::debug;
}

/// Creates every BF command (key at argument 1 for all of them).
pub fn register(ctx: &Context) -> Result<(), String> {
    // SAFETY: reading the API table Redis filled before OnLoad.
    let create = unsafe { raw::RedisModule_CreateCommand }.ok_or("no RedisModule_CreateCommand")?;
    for command in COMMANDS {
        // SAFETY: called from OnLoad with its context and zero-terminated static strings.
        let status = unsafe {
            create(
                ctx.get_raw(),
                command.name.as_ptr(),
                Some(command.entry),
                command.flags.as_ptr(),
                1,
                1,
                1,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!(
                "cannot create command {}",
                command.name.to_string_lossy()
            ));
        }
    }
    Ok(())
}

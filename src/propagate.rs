//! Replication and keyspace events of every write, in one place.
//!
//! A replica (and the AOF) must build a filter identical to the primary's whatever its own
//! settings and version, so a write is not replicated verbatim when its outcome depended on
//! this server's state. A filter created by a command is replicated as `BF.LOADCHUNK key 1
//! <header>`: the header of the new, empty filter pins every parameter, the layout and each
//! layer's geometry. Only the items that changed the filter are replicated (`BF.MADD`); an add
//! that changed nothing is not replicated at all. `BF.LOADCHUNK` is deterministic and goes
//! verbatim.

use redis_module::{Context, NotifyEvent, RedisString};

/// What a write command did to its key.
pub enum Change<'a> {
    /// A filter was created empty (BF.RESERVE); the header of the new filter.
    Reserved(&'a [u8]),
    /// Items were added; `created` holds the new filter's header if the command created it.
    Added {
        created: Option<&'a [u8]>,
        items: &'a [&'a [u8]],
    },
    /// A BF.LOADCHUNK was applied; `created` when it was the header.
    Loaded { created: bool },
}

/// Replicates and notifies a write.
pub fn after_write(ctx: &Context, key: &RedisString, change: Change) {
    match change {
        Change::Reserved(header) => {
            replicate_creation(ctx, key, header);
            ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
        }
        Change::Added { created, items } => {
            if let Some(header) = created {
                replicate_creation(ctx, key, header);
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
            }
            if !items.is_empty() {
                let mut args: Vec<&[u8]> = Vec::with_capacity(items.len() + 1);
                args.push(key.as_slice());
                args.extend_from_slice(items);
                ctx.replicate("BF.MADD", args.as_slice());
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.add", key);
            }
        }
        Change::Loaded { created } => {
            ctx.replicate_verbatim();
            if created {
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
            }
            ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.loadchunk", key);
        }
    }
}

fn replicate_creation(ctx: &Context, key: &RedisString, header: &[u8]) {
    let args: [&[u8]; 3] = [key.as_slice(), b"1", header];
    ctx.replicate("BF.LOADCHUNK", &args[..]);
}

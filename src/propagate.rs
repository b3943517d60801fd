//! Replication and keyspace events of every write, in one place.
//!
//! A replica (and the AOF) must build a filter identical to the primary's whatever its own
//! settings, so writes are not replicated verbatim when the outcome depended on this server's
//! state: an auto-created filter is sent with the parameters it was actually created with, and
//! only the items that changed the filter are sent. An add that changed nothing is not sent.

use layerbloom_filter::FilterSpec;
use redis_module::{Context, NotifyEvent, RedisString};

/// What a write command did to its key.
pub enum Change<'a> {
    /// A filter was created empty (BF.RESERVE).
    Reserved(FilterSpec),
    /// Items were added; `created` holds the parameters if the command created the filter.
    Added {
        created: Option<FilterSpec>,
        items: &'a [&'a [u8]],
    },
    /// A BF.LOADCHUNK was applied; `created` when it was the header.
    Loaded { created: bool },
}

/// The arguments that recreate a filter of `spec`, after the key.
fn spec_args(spec: &FilterSpec) -> Vec<Vec<u8>> {
    let mut args = vec![
        b"CAPACITY".to_vec(),
        spec.capacity.to_string().into_bytes(),
        b"ERROR".to_vec(),
        // `{:?}` prints the shortest text that parses back to the same f64.
        format!("{:?}", spec.error).into_bytes(),
    ];
    args.extend(growth_args(spec));
    args
}

/// `NONSCALING`, or `EXPANSION n`.
fn growth_args(spec: &FilterSpec) -> Vec<Vec<u8>> {
    if spec.expansion == 0 {
        vec![b"NONSCALING".to_vec()]
    } else {
        vec![
            b"EXPANSION".to_vec(),
            spec.expansion.to_string().into_bytes(),
        ]
    }
}

/// Replicates and notifies a write.
pub fn after_write(ctx: &Context, key: &RedisString, change: Change) {
    let key_bytes = key.as_slice();
    match change {
        Change::Reserved(spec) => {
            replicate_reserve(ctx, key_bytes, &spec);
            ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
        }
        Change::Added { created, items } => {
            if let Some(spec) = created {
                if items.is_empty() {
                    replicate_reserve(ctx, key_bytes, &spec);
                } else {
                    let mut args: Vec<Vec<u8>> = vec![key_bytes.to_vec()];
                    args.extend(spec_args(&spec));
                    args.push(b"ITEMS".to_vec());
                    let mut refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                    refs.extend_from_slice(items);
                    ctx.replicate("BF.INSERT", refs.as_slice());
                }
                ctx.notify_keyspace_event(NotifyEvent::GENERIC, "bf.reserve", key);
            } else if !items.is_empty() {
                let mut refs: Vec<&[u8]> = vec![key_bytes];
                refs.extend_from_slice(items);
                ctx.replicate("BF.MADD", refs.as_slice());
            }
            if !items.is_empty() {
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

fn replicate_reserve(ctx: &Context, key: &[u8], spec: &FilterSpec) {
    let mut args: Vec<Vec<u8>> = vec![
        key.to_vec(),
        format!("{:?}", spec.error).into_bytes(),
        spec.capacity.to_string().into_bytes(),
    ];
    args.extend(growth_args(spec));
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    ctx.replicate("BF.RESERVE", refs.as_slice());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicated_error_rates_parse_back_exactly() {
        for e in [0.01, 0.25, 1e-9, 0.1 + 0.2, 1e-300, 0.000_123_456_789] {
            let text = format!("{e:?}");
            assert_eq!(crate::args::parse_f64(text.as_bytes()), Some(e), "{text}");
        }
    }

    #[test]
    fn spec_arguments_recreate_the_spec() {
        let spec = FilterSpec {
            capacity: 1000,
            error: 0.001,
            expansion: 0,
        };
        let mut args = spec_args(&spec);
        args.push(b"ITEMS".to_vec());
        args.push(b"x".to_vec());
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let parsed = crate::args::parse_insert(
            &refs,
            FilterSpec {
                capacity: 1,
                error: 0.5,
                expansion: 9,
            },
        )
        .unwrap();
        assert_eq!(parsed.spec, spec);
    }
}

//! The BF.* command handlers: check the arguments, open the key, call the core, reply. Each
//! is called with an argument count its table entry (`table.rs`) accepts: dispatch checked it.
//!
//! A refused command changes nothing. The write commands parse their options (and
//! BF.LOADCHUNK its iterator) before they open the key; what can only be checked against the
//! filter (a BF.LOADCHUNK chunk's place in it) is checked before anything is written. The
//! read-only BF.INFO and BF.SCANDUMP look the key up first and parse their word or iterator
//! after, as RedisBloom does: a missing key or a key of another type is the error a client
//! sees before a bad argument (the oracle tests pin the order).

use std::cell::OnceCell;

use layerbloom_filter::bloom::codec;
use layerbloom_filter::bloom::health;
use layerbloom_filter::window::codec as window_codec;
use layerbloom_filter::window::view::ReadView;
use layerbloom_filter::{FilterError, FilterSpec, Layout, ScalableFilter, WindowedFilter};
use redis_module::{Context, ContextFlags, KeyType, RedisString};

use crate::bloom::args::{self, InfoField, InfoRequest, Window};
use crate::bloom::limits::{self, Refusals};
use crate::bloom::propagate::{self, Before, Change};
use crate::bloom::settings;
use crate::bloom::value::{self, Value, ValueMut};
use crate::bloom::window as windowed;
use crate::clock;
use crate::config;
use crate::dispatch::CommandResult;
use crate::error::BfError;
use crate::keys;
use crate::memory::Limits;
use crate::number;
use crate::reply::{self, Reply};

fn slices(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(RedisString::as_slice).collect()
}

/// The layout of a filter a command creates. layerbloom propagates its own creations as
/// `BF.LOADCHUNK` headers, so a creating BF.RESERVE / BF.INSERT / BF.ADD replayed from the AOF
/// or sent by a primary was written by RedisBloom: it is rebuilt as RedisBloom built it, so a
/// migrated AOF answers exactly as before.
fn creation_layout(flags: &ContextFlags) -> Layout {
    if is_from_redisbloom(flags) {
        Layout::Classic
    } else {
        settings::layout()
    }
}

/// How strictly a BF.LOADCHUNK header (either format) is checked: at least as strictly as
/// RedisBloom's BF.LOADCHUNK for clients, as its RDB loader for commands replayed from the AOF
/// or sent by a primary (an AOF rewrite of a filter loaded from a lax RDB value must replay).
fn header_strictness(flags: &ContextFlags) -> codec::Strictness {
    if flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) {
        codec::Strictness::Rdb
    } else {
        codec::Strictness::LoadChunk
    }
}

/// RedisBloom lowers error rates above a quarter; the client is not told, so the log is.
/// A creation replayed from the AOF or sent by a primary keeps the rate it carries: layerbloom
/// replicates its own creations as headers holding the rate it used, so such a command was
/// written by RedisBloom, which before version 8 did not lower rates; it is built as
/// RedisBloom built it (classic, `creation_layout`), so the replica or the replayed AOF holds
/// the primary's filter.
fn cap_error_rate(
    ctx: &Context,
    key: &RedisString,
    flags: &ContextFlags,
    mut spec: FilterSpec,
) -> FilterSpec {
    if spec.error > args::MAX_ERROR_RATE && !is_from_redisbloom(flags) {
        crate::log_limit::error_rate_warning(
            Some(ctx),
            &format!(
                "layerbloom: filter '{}' asked for error rate {}; it uses {} (the maximum)",
                crate::log::key_name(key.as_slice()),
                spec.error,
                args::MAX_ERROR_RATE
            ),
        );
        spec.error = args::MAX_ERROR_RATE;
    }
    spec
}

/// Whether a command was replayed from the AOF or sent by a primary.
fn is_from_redisbloom(flags: &ContextFlags) -> bool {
    flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
}

/// The spec of a windowed filter a command creates: its slices are always blocked filters
/// (RedisBloom cannot read a windowed filter, so its layout buys nothing), their rate always
/// capped (RedisBloom never sent one).
fn windowed_spec(ctx: &Context, key: &RedisString, spec: FilterSpec) -> FilterSpec {
    FilterSpec {
        layout: Layout::Blocked,
        ..cap_error_rate(ctx, key, &ContextFlags::empty(), spec)
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [WINDOW ms [SLICES n]]`
pub fn reserve(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let (spec, window) = args::parse_reserve(&slices(&args[2..]), settings::default_expansion())?;
    let key = ctx.open_key_writable(&args[1]);
    if key.key_type() != KeyType::Empty {
        value::write(&key)?;
        return Err(BfError::ItemExists);
    }
    let flags = crate::raw_api::context_flags(ctx);
    if let Some(window) = window {
        let spec = windowed_spec(ctx, &args[1], spec);
        let (_, header) = windowed::create(&key, spec, window, &flags)?;
        propagate::after_write(ctx, &args[1], Change::Reserved(&header));
        Reply::new(ctx).ok();
        return Ok(());
    }
    let spec = FilterSpec {
        layout: creation_layout(&flags),
        ..cap_error_rate(ctx, &args[1], &flags, spec)
    };
    let limits = Limits::for_creation(&flags, config::max_filter_bytes(&flags));
    let filter = ScalableFilter::new(spec, limits.bytes()).map_err(|e| limits.create_error(e))?;
    let header = codec::encode_header(&filter);
    value::store_plain(&key, filter)?;
    propagate::after_write(ctx, &args[1], Change::Reserved(&header));
    Reply::new(ctx).ok();
    Ok(())
}

/// `BF.ADD key item`
pub fn add(ctx: &Context, args: &[RedisString]) -> CommandResult {
    add_items(
        ctx,
        &args[1],
        &[args[2].as_slice()],
        &args[2..],
        Some(default_creation),
        AddCommand::Single,
    )
}

/// `BF.MADD key item [item ...]`
pub fn madd(ctx: &Context, args: &[RedisString]) -> CommandResult {
    add_items(
        ctx,
        &args[1],
        &slices(&args[2..]),
        &args[2..],
        Some(default_creation),
        AddCommand::Multi,
    )
}

/// What BF.ADD and BF.MADD create for a missing key: a plain filter of the settings.
fn default_creation() -> (FilterSpec, Option<Window>) {
    (settings::default_spec(), None)
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING]
/// [WINDOW ms [SLICES n]] ITEMS item...`
pub fn insert(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let rest = slices(&args[2..]);
    let parsed = args::parse_insert(&rest, settings::default_spec())?;
    let spec = parsed.spec;
    let window = parsed.window;
    let create = (!parsed.nocreate).then_some(move || (spec, window));
    // The items are the arguments' tail.
    let item_args = &args[args.len() - parsed.items.len()..];
    add_items(
        ctx,
        &args[1],
        parsed.items,
        item_args,
        create,
        AddCommand::Insert,
    )
}

/// Which add command runs: its reply shape, and whether its arguments are just the key and
/// the items (then, when every item changed an existing filter, it replicates verbatim).
#[derive(Clone, Copy, PartialEq)]
enum AddCommand {
    /// BF.ADD: one reply, `key item`.
    Single,
    /// BF.MADD: an array reply, `key item...`.
    Multi,
    /// BF.INSERT: an array reply; its arguments carry creation options.
    Insert,
}

/// Adds items in order, creating the filter with the spec (and window) `create` gives when
/// the key is missing (`None`: a missing key is an error; the spec is not built for a key that
/// exists). An add error ends the command: in a multi reply it is the last element and the
/// items after it are not processed. `item_args`: the command's arguments
/// that are `items` (replication passes them on as they are, without copying).
fn add_items(
    ctx: &Context,
    key_name: &RedisString,
    items: &[&[u8]],
    item_args: &[RedisString],
    create: Option<impl FnOnce() -> (FilterSpec, Option<Window>)>,
    command: AddCommand,
) -> CommandResult {
    debug_assert_eq!(items.len(), item_args.len());
    let multi = command != AddCommand::Single;
    let verbatim = command != AddCommand::Insert;
    let key = ctx.open_key_writable(key_name);
    // Only a creation and an add that may grow the filter (its limits) depend on the context
    // flags: most adds never ask Redis for them (about 130 instructions a call).
    let flags = OnceCell::new();
    let flags = || flags.get_or_init(|| crate::raw_api::context_flags(ctx));
    let (filter, created) = match value::write(&key)? {
        Some(ValueMut::Plain(filter)) => (filter, None),
        Some(ValueMut::Windowed(filter)) => {
            let items = (items, item_args);
            return windowed::add_items(ctx, key_name, filter, None, items, multi, verbatim);
        }
        None => {
            let flags = flags();
            let (spec, window) = create.ok_or(BfError::NotFound)?();
            if let Some(window) = window {
                let spec = windowed_spec(ctx, key_name, spec);
                let (filter, header) = windowed::create(&key, spec, window, flags)?;
                let (created, items) = (Some(header.as_slice()), (items, item_args));
                return windowed::add_items(ctx, key_name, filter, created, items, multi, verbatim);
            }
            let spec = FilterSpec {
                layout: creation_layout(flags),
                ..cap_error_rate(ctx, key_name, flags, spec)
            };
            let limits = Limits::for_creation(flags, config::max_filter_bytes(flags));
            let filter =
                ScalableFilter::new(spec, limits.bytes()).map_err(|e| limits.create_error(e))?;
            let header = codec::encode_header(&filter);
            (value::store_plain(&key, filter)?, Some(header))
        }
    };
    let before = Before::of(filter);
    let limits = limits::for_add(flags, filter, before.load(), items.len());
    let limit = limits.bytes();
    // The batch path has exactly the effect of adding the items one by one; a single item
    // skips its vectors.
    let one;
    let many;
    let results: &[Result<bool, FilterError>] = if let [item] = items {
        one = [filter.add(item, limit)];
        &one
    } else {
        many = filter.add_many(items, limit);
        &many
    };
    // Every add is done before the reply starts, so the array's length (shorter when an
    // error ended it) is known: no postponed length for Redis to patch in.
    let reply = Reply::new(ctx);
    if multi {
        reply.array(results.len());
    }
    for result in results {
        match result {
            Ok(added) => reply.boolean(*added),
            Err(e) => limits.reply_add_error(&reply, e.clone()),
        }
    }
    propagate::after_write(
        ctx,
        key_name,
        Change::Added {
            created: created.as_deref(),
            items: item_args,
            results,
            verbatim,
            filter,
            before,
        },
    );
    Ok(())
}

/// `BF.EXISTS key item`
pub fn exists(ctx: &Context, args: &[RedisString]) -> CommandResult {
    check_items(ctx, args, false)
}

/// `BF.MEXISTS key item [item ...]`
pub fn mexists(ctx: &Context, args: &[RedisString]) -> CommandResult {
    check_items(ctx, args, true)
}

fn check_items(ctx: &Context, args: &[RedisString], multi: bool) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let filter = value::read(&key)?;
    let items = &args[2..];
    let reply = Reply::new(ctx);
    if multi {
        reply.array(items.len());
    }
    match filter {
        Some(Value::Plain(f)) if multi => {
            let items: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
            for found in f.contains_many(&items) {
                reply.boolean(found);
            }
        }
        Some(Value::Plain(f)) => items
            .iter()
            .for_each(|i| reply.boolean(f.contains(i.as_slice()))),
        Some(Value::Windowed(f)) => {
            let view = windowed::read_view(ctx, f);
            if multi {
                let items: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
                for found in view.contains_many(&items) {
                    reply.boolean(found);
                }
            } else {
                items
                    .iter()
                    .for_each(|i| reply.boolean(view.contains(i.as_slice())));
            }
        }
        None => items.iter().for_each(|_| reply.boolean(false)),
    }
    Ok(())
}

/// `BF.CARD key`
pub fn card(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let items = match value::read(&key)? {
        Some(Value::Plain(f)) => f.items(),
        Some(Value::Windowed(f)) => windowed::read_view(ctx, f).items(),
        None => 0,
    };
    // As BF.INFO: a count past i64 (only a crafted payload has one) reads as i64::MAX.
    Reply::new(ctx).int(i64::try_from(items).unwrap_or(i64::MAX));
    Ok(())
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION | ERROR | FILL | FPR | DISTINCT
/// | MAXCAPACITY | HEALTH]`: without a word, exactly RedisBloom's five fields in its order
/// (clients reject any other); the health figures only when asked for. The word is parsed
/// after the key is looked up, in RedisBloom's order of errors.
pub fn info(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let filter = match value::read(&key)?.ok_or(BfError::NotFound)? {
        Value::Plain(f) => f,
        Value::Windowed(f) => {
            let request = InfoRequest::parse(args.get(2).map(RedisString::as_slice))?;
            windowed_info(ctx, f, windowed::read_view(ctx, f), request);
            return Ok(());
        }
    };
    let request = InfoRequest::parse(args.get(2).map(RedisString::as_slice))?;
    // Walked only for the figures that need every layer.
    let summaries = std::cell::OnceCell::new();
    let layers = || summaries.get_or_init(|| filter.layer_summaries());
    let reply = Reply::new(ctx);
    let count = |n: u64| reply.int(i64::try_from(n).unwrap_or(i64::MAX));
    let value = |field: InfoField| match field {
        InfoField::Capacity => count(filter.capacity()),
        InfoField::Size => count(reported_size(filter)),
        InfoField::Filters => count(filter.layer_count() as u64),
        InfoField::Items => count(filter.items()),
        InfoField::Expansion => match filter.expansion() {
            Some(e) => reply.int(i64::from(e)),
            None => reply.null(),
        },
        InfoField::ErrorRate => reply.double(filter.error()),
        InfoField::FillRatio => reply.double(layers().last().map_or(0.0, health::fill_ratio)),
        InfoField::EstimatedFpr => reply.double(health::estimated_fpr(filter)),
        InfoField::EstimatedDistinct => count(health::estimated_distinct(filter)),
        InfoField::MaxCapacity => count(health::max_capacity(filter, config::max_filter_memory())),
        // A plain filter has no window.
        InfoField::Window | InfoField::Slices | InfoField::Oldest | InfoField::SliceItems => {
            reply.null()
        }
    };
    reply::info(
        &reply,
        request,
        (&InfoField::REDISBLOOM, &InfoField::HEALTH),
        InfoField::title_c,
        value,
    );
    Ok(())
}

/// BF.INFO of a windowed filter: the same fields, over the slices a read answers from
/// (`bloom::window`'s notes), and the window's own.
fn windowed_info(
    ctx: &Context,
    filter: &WindowedFilter,
    view: ReadView,
    request: InfoRequest<InfoField>,
) {
    let reply = Reply::new(ctx);
    let count = |n: u64| reply.int(i64::try_from(n).unwrap_or(i64::MAX));
    let value = |field: InfoField| match field {
        InfoField::Capacity => count(filter.capacity()),
        InfoField::Size => count(filter.memory_usage()),
        InfoField::Filters => count(view.layers()),
        InfoField::Items => count(view.items()),
        InfoField::Expansion => match filter.expansion() {
            Some(e) => reply.int(i64::from(e)),
            None => reply.null(),
        },
        InfoField::ErrorRate => reply.double(filter.error()),
        InfoField::FillRatio => reply.double(view.fill_ratio()),
        InfoField::EstimatedFpr => reply.double(view.estimated_fpr()),
        InfoField::EstimatedDistinct => count(view.estimated_distinct()),
        // What a window can hold depends on how its items spread over the slices.
        InfoField::MaxCapacity => reply.null(),
        InfoField::Window => count(filter.window_ms()),
        InfoField::Slices => count(u64::from(filter.slices())),
        InfoField::Oldest => match view.oldest_age_ms() {
            Some(age) => count(age),
            None => reply.null(),
        },
        InfoField::SliceItems => {
            let counts = view.slice_items();
            reply.array(counts.len());
            counts.into_iter().for_each(count);
        }
    };
    reply::info(
        &reply,
        request,
        (&InfoField::REDISBLOOM, &InfoField::HEALTH),
        InfoField::title_c,
        value,
    );
}

/// The `Size` of BF.INFO: the memory the filter really takes, or, in classic mode, for a
/// classic filter, RedisBloom's own figure (32 + 64 per layer + the bit arrays) so that tools
/// comparing the two see the same numbers.
fn reported_size(filter: &ScalableFilter) -> u64 {
    if settings::classic_mode() && filter.is_classic() {
        let bits: u64 = filter.layer_summaries().iter().map(|l| l.bytes).sum();
        32 + 64 * filter.layer_count() as u64 + bits
    } else {
        // The allocator model, not the allocator's answer: equal filters report equal sizes
        // on every server (MEMORY USAGE gives the allocator's).
        filter.memory_usage()
    }
}

/// `BF.DEBUG key`: RedisBloom's format for classic filters; for blocked ones the same shape
/// with the blocked layout's facts (blocks, blocks per item, bits set per block).
pub fn debug(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let lines = match value::read(&key)?.ok_or(BfError::NotFound)? {
        Value::Plain(filter) => {
            let mut lines = vec![format!("size:{}", filter.items())];
            lines.extend(filter.debug_lines());
            lines
        }
        // The slices held, as stored (a read changes nothing).
        Value::Windowed(filter) => {
            let mut lines = vec![format!(
                "size:{} window_ms:{} slices:{} slice_ms:{} origin_ms:{} head:{}",
                filter.items(),
                filter.window_ms(),
                filter.slices(),
                filter.slice_ms(),
                filter.origin_ms(),
                filter.head()
            )];
            lines.extend(filter.debug_lines());
            lines
        }
    };
    let reply = Reply::new(ctx);
    reply.array(lines.len());
    for line in &lines {
        reply.bulk(line.as_bytes());
    }
    Ok(())
}

/// `BF.SCANDUMP key iterator`: the iterator is parsed after the key is looked up, in
/// RedisBloom's order of errors.
pub fn scandump(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let filter = value::read(&key)?.ok_or(BfError::NotFound)?;
    let it = number::parse_i64(args[2].as_slice()).ok_or(BfError::ScanDumpNotNumeric)?;
    let reply = Reply::new(ctx);
    reply.array(2);
    // A windowed filter's stream is its slices as held (a read changes nothing).
    if it == 0 {
        reply.int(1);
        match filter {
            Value::Plain(f) => reply.bulk(&codec::encode_header(f)),
            Value::Windowed(f) => reply.bulk(&window_codec::encode_header(f)),
        }
    } else {
        let (next, data) = match filter {
            Value::Plain(f) => codec::dump_chunk(f, it),
            Value::Windowed(f) => window_codec::dump_chunk(f, it),
        };
        reply.int(next);
        reply.bulk(data);
    }
    Ok(())
}

/// `BF.LOADCHUNK key iterator data`
pub fn loadchunk(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let it = number::parse_i64(args[2].as_slice()).ok_or(BfError::LoadChunkNotNumeric)?;
    let data = args[3].as_slice();
    let key = ctx.open_key_writable(&args[1]);
    let created = match value::write(&key)? {
        None if it == 1 && window_codec::is_window_header(data) => {
            // Also how a windowed filter's creation and AOF rewrite replay: the header
            // carries its origin and head, so nothing reads a clock.
            let flags = crate::raw_api::context_flags(ctx);
            let (header, _) = window_codec::decode_header(data, header_strictness(&flags))
                .map_err(BfError::from_codec)?;
            if clock::applies(&flags) && header.clock_error(clock::now_ms()).is_some() {
                return Err(BfError::BadData);
            }
            let limits = Limits::for_creation(&flags, config::max_filter_bytes(&flags));
            let filter = window_codec::filter_from_header(&header, limits.bytes())
                .map_err(|e| limits.codec_error(e))?;
            value::store_windowed(&key, filter)?;
            true
        }
        None if it == 1 => {
            let flags = crate::raw_api::context_flags(ctx);
            let header = codec::decode_header_with(data, header_strictness(&flags))
                .map_err(BfError::from_codec)?;
            let limits = Limits::for_creation(&flags, config::max_filter_bytes(&flags));
            let filter = codec::filter_from_header(&header, limits.bytes())
                .map_err(|e| limits.codec_error(e))?;
            value::store_plain(&key, filter)?;
            true
        }
        None => return Err(BfError::NotFound),
        Some(ValueMut::Plain(filter)) => {
            codec::load_chunk(filter, it, data).map_err(BfError::from_codec)?;
            false
        }
        Some(ValueMut::Windowed(filter)) => {
            window_codec::load_chunk(filter, it, data).map_err(BfError::from_codec)?;
            false
        }
    };
    propagate::after_write(ctx, &args[1], Change::Loaded { created });
    Reply::new(ctx).ok();
    Ok(())
}

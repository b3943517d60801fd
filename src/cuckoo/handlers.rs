//! The CF.* command handlers: check the arguments, open the key, call the cuckoo core,
//! reply as RedisBloom does (RESP2 and RESP3). Each is called with an argument count its
//! table entry accepts (dispatch checked it).
//!
//! A refused command changes nothing: options are parsed before the key is opened, and every
//! allocation (a new filter, a new sub-filter) is checked against the per-filter limit and
//! `maxmemory` before it is made. A key of another type is `WRONGTYPE` for every command (as
//! for the BF commands; RedisBloom answers 0 or "Not found" for some, see docs/compatibility.md).

use layerbloom_filter::cuckoo::health::LoadMark;
use layerbloom_filter::cuckoo::params::DEFAULT_MAX_EXPANSIONS;
use layerbloom_filter::cuckoo::{
    AnyFilter, CuckooError, CuckooFilter, HeaderError, Limits as CfLimits, RatedFilter, WALK_BUDGET,
};
use layerbloom_filter::format::{CodecError, Strictness};
use layerbloom_filter::FilterError;
use std::cell::OnceCell;

use redis_module::key::RedisKeyWritable;
use redis_module::{Context, ContextFlags, KeyType, RedisString};

use crate::config;
use crate::cuckoo::args::{self, InfoField, Spec, Syntax};
use crate::cuckoo::datatype::{self, CUCKOO_TYPE, RATED_CUCKOO_TYPE};
use crate::cuckoo::propagate::{self, Change};
use crate::cuckoo::stats::{self, Figures};
use crate::dispatch::CommandResult;
use crate::error::BfError;
use crate::info_request::InfoRequest;
use crate::keys;
use crate::memory::Limits;
use crate::reply::{self, Reply};

/// The filter under a key of either cuckoo type (RedisBloom's, or the extension's).
fn read_filter(key: &keys::ReadKey) -> Result<Option<&AnyFilter>, BfError> {
    match keys::read(key, &CUCKOO_TYPE) {
        Err(BfError::WrongType) => keys::read(key, &RATED_CUCKOO_TYPE),
        found => found,
    }
}

fn write_filter(key: &RedisKeyWritable) -> Result<Option<&mut AnyFilter>, BfError> {
    match keys::write(key, &CUCKOO_TYPE) {
        Err(BfError::WrongType) => keys::write(key, &RATED_CUCKOO_TYPE),
        found => found,
    }
}

/// Stores a new filter under the type of its layout.
fn store_filter(key: &RedisKeyWritable, filter: AnyFilter) -> Result<&mut AnyFilter, BfError> {
    let stored = keys::store(key, datatype::type_of(&filter), filter)?;
    stats::entered(stored);
    Ok(stored)
}

/// Counts a refusal in `INFO bf`.
fn count_refusal(e: &CuckooError) {
    match e {
        CuckooError::Full => stats::refused_full(1),
        CuckooError::MaxExpansions => stats::refused_max_expansions(),
        _ => {}
    }
}

/// The client-visible error of a core refusal, under `limits`.
fn cf_error(limits: &Limits, e: CuckooError, creating: bool) -> BfError {
    match e {
        CuckooError::Full => BfError::CfFull,
        CuckooError::MaxExpansions => BfError::CfMaxExpansions,
        CuckooError::KickBudget => BfError::CfKickBudget {
            budget: WALK_BUDGET,
        },
        CuckooError::Params(_) => BfError::Internal,
        CuckooError::Filter(FilterError::OverLimit { limit, .. }) if limits.is_memory(limit) => {
            BfError::OverMaxmemory
        }
        CuckooError::Filter(FilterError::OverLimit { needed, limit }) if creating => {
            BfError::CreateOverLimit { needed, limit }
        }
        CuckooError::Filter(FilterError::OverLimit { needed, limit }) => {
            BfError::CfGrowOverLimit { needed, limit }
        }
        CuckooError::Filter(FilterError::TooManyLayers { limit }) => {
            BfError::CfTooManySubFilters { limit }
        }
        CuckooError::Filter(_) if creating => BfError::CfInsufficientMemory,
        CuckooError::Filter(_) => BfError::InsertProblem,
    }
}

/// A command's context flags, asked of the server at most once and only when first needed
/// (about 130 instructions a call, as it also reads the server's memory state): a CF.ADD or
/// CF.ADDNX that neither creates nor grows a filter never needs them. CF.INSERT and
/// CF.INSERTNX always do, to choose the syntax they read (`syntax`).
struct Flags<'c> {
    ctx: &'c Context,
    read: OnceCell<ContextFlags>,
}

impl<'c> Flags<'c> {
    fn new(ctx: &'c Context) -> Self {
        Flags {
            ctx,
            read: OnceCell::new(),
        }
    }

    fn get(&self) -> &ContextFlags {
        self.read
            .get_or_init(|| crate::raw_api::context_flags(self.ctx))
    }
}

/// Creates a filter of `spec` within the creation limits: RedisBloom's layout, or the
/// extension's for a spec with a rate.
fn new_filter(flags: &Flags, spec: Spec) -> Result<AnyFilter, BfError> {
    let flags = flags.get();
    let limits = Limits::for_creation(flags, config::max_filter_bytes(flags));
    match spec.rate {
        None => CuckooFilter::new(spec.buckets, spec.params, limits.bytes()).map(AnyFilter::from),
        Some(r) => RatedFilter::new(spec.buckets, spec.params, r.widths, r.error, limits.bytes())
            .map(AnyFilter::from),
    }
    .map_err(|e| cf_error(&limits, e, true))
}

/// The limits of an add to `filter`: growth may take it to the per-filter limit, or to what
/// `maxmemory` leaves above its current size.
fn add_limits(flags: &Flags, filter: &AnyFilter) -> (Limits, CfLimits) {
    let limits = Limits::for_growth(flags.get(), filter.memory_usage());
    let core = CfLimits {
        max_bytes: limits.bytes(),
        ..CfLimits::default()
    };
    (limits, core)
}

/// Core limits under which an add cannot grow a filter (no sub-filter fits in 0 bytes). An
/// add tries these first: only growth consults the limits, and the context flags and
/// `maxmemory`'s headroom (the server's INFO) are too dear for every add. A refusal changes
/// nothing, so the item refused here is then retried under `add_limits` with exactly the
/// result it would have had under them from the start.
const NO_GROWTH: CfLimits = CfLimits {
    max_expansions: DEFAULT_MAX_EXPANSIONS,
    max_bytes: 0,
};

/// Whether an add under `NO_GROWTH` was refused because it needed a new sub-filter.
fn needs_growth<T>(result: &Result<T, CuckooError>) -> bool {
    matches!(
        result,
        Err(CuckooError::Filter(FilterError::OverLimit { .. }))
    )
}

/// Limits that no refusal under `NO_GROWTH` is mapped with (only `OverLimit` reads them).
const UNREAD_LIMITS: Limits = Limits::NONE;

/// Whether the command was sent by a primary or is replayed from the AOF: it was carried out
/// there already, possibly by RedisBloom, and must be carried out here as sent.
fn from_primary_or_aof(flags: &Flags) -> bool {
    flags
        .get()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
}

/// The syntax a command is read with: RedisBloom's for commands replayed from the AOF or
/// sent by a primary (they may be RedisBloom's), layerbloom's strict one for clients.
fn syntax(flags: &Flags) -> Syntax {
    if from_primary_or_aof(flags) {
        Syntax::RedisBloom
    } else {
        Syntax::Strict
    }
}

/// `CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e]`
pub fn reserve(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let flags = Flags::new(ctx);
    let spec = match syntax(&flags) {
        Syntax::Strict => {
            let rest: Vec<&[u8]> = args[2..].iter().map(RedisString::as_slice).collect();
            args::parse_reserve(&rest)?
        }
        Syntax::RedisBloom => {
            let rest: Vec<&[u8]> = args[1..].iter().map(RedisString::as_slice).collect();
            args::parse_reserve_redisbloom(&rest)?
        }
    };
    let key = ctx.open_key_writable(&args[1]);
    if key.key_type() != KeyType::Empty {
        write_filter(&key)?;
        return Err(BfError::ItemExists);
    }
    let filter = store_filter(&key, new_filter(&flags, spec)?)?;
    let header = filter.header();
    propagate::after_write(ctx, &args[1], Change::Reserved(&header));
    Reply::new(ctx).ok();
    Ok(())
}

/// The filter under a key for an add, created with the spec `create` gives when missing
/// (`None`: a missing key is "ERR not found"); and the header of a filter it created. The
/// spec is asked for only then: CF.ADD's default one costs a sizing per call otherwise.
fn filter_for_add<'k>(
    flags: &Flags,
    key: &'k RedisKeyWritable,
    create: impl FnOnce() -> Option<Spec>,
) -> Result<(&'k mut AnyFilter, Option<Vec<u8>>), BfError> {
    if let Some(filter) = write_filter(key)? {
        return Ok((filter, None));
    }
    let filter = new_filter(flags, create().ok_or(BfError::NotFound)?)?;
    let header = filter.header();
    Ok((store_filter(key, filter)?, Some(header)))
}

/// `CF.ADD key item`
pub fn add(ctx: &Context, args: &[RedisString]) -> CommandResult {
    add_one(ctx, args, false)
}

/// `CF.ADDNX key item`
pub fn addnx(ctx: &Context, args: &[RedisString]) -> CommandResult {
    add_one(ctx, args, true)
}

fn add_one(ctx: &Context, args: &[RedisString], nx: bool) -> CommandResult {
    let flags = Flags::new(ctx);
    let key = ctx.open_key_writable(&args[1]);
    let (filter, created) = filter_for_add(&flags, &key, || Some(args::default_spec()))?;
    let before = Figures::before_append(filter);
    let mark = LoadMark::of(filter);
    let item = args[2].as_slice();
    let attempt = |filter: &mut AnyFilter, core: &CfLimits| {
        if nx {
            filter.add_nx(item, core)
        } else {
            filter.add(item, core).map(|()| true)
        }
    };
    let mut limits = UNREAD_LIMITS;
    let mut result = attempt(filter, &NO_GROWTH);
    if needs_growth(&result) {
        let (real, core) = add_limits(&flags, filter);
        limits = real;
        result = attempt(filter, &core);
    }
    stats::changed(before, filter);
    if let Err(e) = &result {
        count_refusal(e);
    }
    let changed = [matches!(result, Ok(true))];
    propagate::after_write(
        ctx,
        &args[1],
        Change::Added {
            created: created.as_ref().map(|h| &h[..]),
            items: &args[2..],
            changed: &changed,
            full: matches!(result, Err(CuckooError::Full)),
            filter,
            before: mark,
        },
    );
    match result {
        Ok(added) => Reply::new(ctx).boolean(added),
        Err(e) => return Err(cf_error(&limits, e, false)),
    }
    Ok(())
}

/// `CF.INSERT key [CAPACITY c] [NOCREATE] ITEMS item...`
pub fn insert(ctx: &Context, args: &[RedisString]) -> CommandResult {
    insert_items(ctx, args, false)
}

/// `CF.INSERTNX key [CAPACITY c] [NOCREATE] ITEMS item...`
pub fn insertnx(ctx: &Context, args: &[RedisString]) -> CommandResult {
    insert_items(ctx, args, true)
}

/// One reply per item: added (1 / true), present (0, NX only), did not fit (-1; `false` in
/// RESP3 for CF.INSERT, while CF.INSERTNX answers integers in both, as RedisBloom does). An
/// error other than "did not fit" ends the array and the items after it are not processed:
/// a limit on growth, or the command's eviction budget (`WALK_BUDGET`, shared by both
/// passes below, so one command never walks more than it whatever the limits; the item the
/// first pass stops at for growth walks again in the second, and pays once). A command from
/// a primary or the AOF is never stopped by the budget: its sender may be RedisBloom, or an
/// earlier layerbloom, which walk every item, and one our primary sends holds only items that
/// went in within the budget there; stopping it would leave the replica without the rest.
fn insert_items(ctx: &Context, args: &[RedisString], nx: bool) -> CommandResult {
    let rest: Vec<&[u8]> = args[2..].iter().map(RedisString::as_slice).collect();
    let flags = Flags::new(ctx);
    let parsed = match syntax(&flags) {
        Syntax::Strict => args::parse_insert(&rest)?,
        Syntax::RedisBloom => args::parse_insert_redisbloom(&rest)?,
    };
    let item_args = &args[args.len() - parsed.items.len()..];
    let key = ctx.open_key_writable(&args[1]);
    let (filter, created) = filter_for_add(&flags, &key, || parsed.create)?;
    let before = Figures::before_append(filter);
    let mark = LoadMark::of(filter);
    let mut limits = UNREAD_LIMITS;
    let mut core = None;
    let mut kicks = WALK_BUDGET;
    let mut unbounded = false;
    let mut outcome = filter.insert_many_within(parsed.items, nx, &NO_GROWTH, &mut kicks);
    if let Ok(results) = &mut outcome {
        // Each pass resumes at the item the previous one stopped at, after one of two things
        // that happen at most once: the first growth (read the real limits), or a replayed
        // command's budget running out (lift it).
        loop {
            match results.last() {
                Some(last) if core.is_none() && needs_growth(last) => {
                    let (real, grow) = add_limits(&flags, filter);
                    limits = real;
                    core = Some(grow);
                }
                Some(Err(CuckooError::KickBudget)) if !unbounded && from_primary_or_aof(&flags) => {
                    unbounded = true;
                    kicks = u64::MAX;
                }
                _ => break,
            }
            results.pop();
            let rest = &parsed.items[results.len()..];
            // The expansion limit applies before the command's first item, not again before
            // a resumed pass (a growth in an earlier pass may have reached it).
            let pass = CfLimits {
                max_expansions: usize::MAX,
                ..core.unwrap_or(NO_GROWTH)
            };
            match filter.insert_many_within(rest, nx, &pass, &mut kicks) {
                Ok(rest) => results.extend(rest),
                Err(e) => results.push(Err(e)),
            }
        }
    }
    stats::changed(before, filter);
    let results = match &outcome {
        Ok(results) => &results[..],
        Err(_) => &[],
    };
    // An error other than "did not fit" ends the results at the item it refused: that item
    // was not processed, so it is left out of `changed`, even when it is the last one sent
    // (else the command would be replicated as sent, and replicas and the AOF, where the
    // limits do not apply, would add it).
    let processed = match results.last() {
        Some(Err(e)) if *e != CuckooError::Full => results.len() - 1,
        _ => results.len(),
    };
    let changed: Vec<bool> = results[..processed]
        .iter()
        .map(|r| matches!(r, Ok(true)))
        .collect();
    match &outcome {
        Ok(results) => {
            stats::refused_full(
                results
                    .iter()
                    .filter(|r| matches!(r, Err(CuckooError::Full)))
                    .count(),
            );
            if matches!(results.last(), Some(Err(CuckooError::KickBudget))) {
                stats::insert_stopped();
            }
        }
        Err(e) => count_refusal(e),
    }
    propagate::after_write(
        ctx,
        &args[1],
        Change::Added {
            created: created.as_ref().map(|h| &h[..]),
            items: item_args,
            changed: &changed,
            full: results.iter().any(|r| matches!(r, Err(CuckooError::Full))),
            filter,
            before: mark,
        },
    );
    let results = outcome.map_err(|e| cf_error(&limits, e, false))?;
    let reply = Reply::new(ctx);
    reply.array(results.len());
    // Only an item that did not fit needs the protocol (from the flags).
    let resp3 = || flags.get().contains(ContextFlags::FLAGS_RESP3);
    for result in results {
        match result {
            Ok(added) if nx => reply.int(i64::from(added)),
            Ok(added) => reply.boolean(added),
            Err(CuckooError::Full) if nx || !resp3() => reply.int(-1),
            Err(CuckooError::Full) => reply.boolean(false),
            Err(e) => reply.error(&cf_error(&limits, e, false)),
        }
    }
    Ok(())
}

/// `CF.EXISTS key item`
pub fn exists(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let found = read_filter(&key)?.is_some_and(|f| f.contains(args[2].as_slice()));
    Reply::new(ctx).boolean(found);
    Ok(())
}

/// `CF.MEXISTS key item...`
pub fn mexists(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let filter = read_filter(&key)?;
    let items = &args[2..];
    let reply = Reply::new(ctx);
    reply.array(items.len());
    match filter {
        Some(f) => {
            let items: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
            for found in f.contains_many(&items) {
                reply.boolean(found);
            }
        }
        None => items.iter().for_each(|_| reply.boolean(false)),
    }
    Ok(())
}

/// `CF.COUNT key item`
pub fn count(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let n = read_filter(&key)?.map_or(0, |f| f.count(args[2].as_slice()));
    Reply::new(ctx).int(i64::try_from(n).unwrap_or(i64::MAX));
    Ok(())
}

/// `CF.DEL key item`: removes one slot holding the item's fingerprint. An item never added
/// can share a fingerprint and a bucket with one that was: deleting it removes that item.
pub fn del(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = ctx.open_key_writable(&args[1]);
    let filter = write_filter(&key)?.ok_or(BfError::CfNotFound)?;
    // Only a filter of several sub-filters compacts (drops some) after a delete.
    let before = if filter.sub_filter_count() > 1 {
        Figures::of(filter)
    } else {
        Figures::before_append(filter)
    };
    let deleted = filter.delete(args[2].as_slice());
    stats::changed(before, filter);
    if deleted {
        propagate::after_write(ctx, &args[1], Change::Deleted);
    } else {
        stats::delete_not_found();
    }
    Reply::new(ctx).boolean(deleted);
    Ok(())
}

/// `CF.COMPACT key`
pub fn compact(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = ctx.open_key_writable(&args[1]);
    let filter = write_filter(&key)?.ok_or(BfError::CfCompactNotFound)?;
    let before = Figures::of(filter);
    filter.compact();
    stats::changed(before, filter);
    propagate::after_write(ctx, &args[1], Change::Compacted);
    Reply::new(ctx).ok();
    Ok(())
}

/// `CF.INFO key [SIZE | BUCKETS | FILTERS | ITEMS | DELETED | BUCKETSIZE | EXPANSION |
/// MAXITERATIONS | LOAD | FPR | DELETESNOTFOUND | HEALTH | FINGERPRINT | ERROR]`: without a
/// word, exactly RedisBloom's eight fields in its order (a map in RESP3, a flat array in
/// RESP2); the health and layout figures only when asked for, shaped as BF.INFO's. The word
/// is parsed after the key is looked up, as BF.INFO's.
pub fn info(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let filter = read_filter(&key)?.ok_or(BfError::NotFound)?;
    let request =
        InfoRequest::parse_with(args.get(2).map(RedisString::as_slice), InfoField::parse)?;
    let info = filter.info();
    let reply = Reply::new(ctx);
    let count = |n: u64| reply.int(i64::try_from(n).unwrap_or(i64::MAX));
    let value = |field: InfoField| match field {
        InfoField::Size => count(info.size),
        InfoField::Buckets => count(info.buckets),
        InfoField::Filters => count(info.filters),
        InfoField::Items => count(info.items),
        InfoField::Deleted => count(info.deletes),
        InfoField::BucketSize => count(info.bucket_size),
        InfoField::Expansion => count(info.expansion),
        InfoField::MaxIterations => count(info.max_iterations),
        InfoField::Load => {
            let loads = filter.loads();
            reply.array(loads.len());
            loads.into_iter().for_each(|l| reply.double(l));
        }
        InfoField::EstimatedFpr => reply.double(filter.estimated_fpr()),
        InfoField::DeletesNotFound => count(filter.deletes_not_found()),
        InfoField::Fingerprint => {
            let bits = filter.fingerprint_bits();
            reply.array(bits.len());
            bits.into_iter().for_each(|b| count(u64::from(b)));
        }
        InfoField::Error => match filter.error() {
            Some(e) => reply.double(e),
            None => reply.null(),
        },
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

/// `CF.DEBUG key`: one line, RedisBloom's.
pub fn debug(ctx: &Context, args: &[RedisString]) -> CommandResult {
    let key = keys::ReadKey::open(ctx, &args[1]);
    let line = read_filter(&key)?.ok_or(BfError::NotFound)?.debug_line();
    Reply::new(ctx).bulk(line.as_bytes());
    Ok(())
}

/// `CF.SCANDUMP key iterator`: `[next, chunk]`, `[0, nil]` when done.
pub fn scandump(ctx: &Context, args: &[RedisString]) -> CommandResult {
    // RedisBloom checks the iterator before it looks the key up (unlike BF.SCANDUMP).
    let it = args::position(args[2].as_slice(), 0)?;
    let key = keys::ReadKey::open(ctx, &args[1]);
    let filter = read_filter(&key)?.ok_or(BfError::NotFound)?;
    let reply = Reply::new(ctx);
    reply.array(2);
    match filter.dump_chunk(it) {
        Some((next, data)) => {
            reply.int(i64::try_from(next).unwrap_or(i64::MAX));
            reply.bulk(&data);
        }
        None => {
            reply.int(0);
            reply.null();
        }
    }
    Ok(())
}

/// How strictly a `CF.LOADCHUNK` header is checked: a client's strictly, one replayed from
/// the AOF or sent by a primary as the RDB loader does (it describes a filter already
/// accepted).
fn header_strictness(flags: &Flags) -> Strictness {
    match syntax(flags) {
        Syntax::Strict => Strictness::LoadChunk,
        Syntax::RedisBloom => Strictness::Rdb,
    }
}

/// `CF.LOADCHUNK key iterator data`: iterator 1 is the header, which creates the filter on a
/// missing key; later chunks fill its slots (never overwriting a fingerprint).
pub fn loadchunk(ctx: &Context, args: &[RedisString]) -> CommandResult {
    // RedisBloom: a non-number or 0 is an invalid position; a negative one is a chunk that
    // cannot be loaded (or a missing key).
    let it = crate::number::parse_i64(args[2].as_slice())
        .filter(|&it| it != 0)
        .ok_or(BfError::CfInvalidPosition)?;
    let data = args[3].as_slice();
    let key = ctx.open_key_writable(&args[1]);
    let created = match write_filter(&key)? {
        None if it == 1 => {
            let flags = Flags::new(ctx);
            let limits = Limits::for_creation(flags.get(), config::max_filter_bytes(flags.get()));
            let filter = AnyFilter::from_header(data, header_strictness(&flags), limits.bytes())
                .map_err(|e| match e {
                    HeaderError::Invalid => BfError::CfInvalidHeader,
                    HeaderError::Refused(CodecError::Filter(f)) => {
                        cf_error(&limits, CuckooError::Filter(f), true)
                    }
                    HeaderError::Refused(_) => BfError::CfCouldNotCreate,
                })?;
            store_filter(&key, filter)?;
            true
        }
        None => return Err(BfError::NotFound),
        Some(_) if it == 1 => return Err(BfError::ItemExists),
        Some(filter) => {
            let it = u64::try_from(it).map_err(|_| BfError::CfCouldNotLoadChunk)?;
            filter
                .load_chunk(it, data)
                .map_err(|_| BfError::CfCouldNotLoadChunk)?;
            false
        }
    };
    propagate::after_write(ctx, &args[1], Change::Loaded { created });
    Reply::new(ctx).ok();
    Ok(())
}

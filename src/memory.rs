//! The per-filter memory limit and the server's `maxmemory` as limits on new layers (and
//! slices, sub-filters: whatever a structure allocates as it grows). Redis checks `maxmemory` only before a
//! deny-oom command runs, so one BF.RESERVE under the limit could still allocate gigabytes
//! past it. Every command that allocates a layer (creating or growing a filter, a BF.LOADCHUNK
//! header, a client's RESTORE) is refused with Redis's own OOM error when used memory plus the
//! new layer would exceed `maxmemory`. Under an eviction policy that has keys to evict Redis
//! makes room by evicting as for any write, so only a layer larger than `maxmemory` itself is
//! refused; under `volatile-*` with no key that has a TTL nothing can be evicted, and the
//! limit is what is left, as under `noeviction`.
//!
//! Commands from the primary and replayed from the AOF (and values loaded while the server is
//! loading) are never refused: a replica builds what its primary accepted. Adds that cannot
//! grow the filter (its newest layer has room for all their items) skip the check (each
//! structure knows when: `bloom/limits.rs`).

use redis_module::ContextFlags;

use crate::raw_api;

/// Flags under which no memory limit applies: the primary or the AOF decided already.
pub const EXEMPT: ContextFlags = ContextFlags::REPLICATED
    .union(ContextFlags::LOADING)
    .union(ContextFlags::ASYNC_LOADING);

/// Whether a load runs a client's RESTORE (the server is neither loading nor a replica): what
/// it logs then is rate-limited (`log_limit::load_warning`), since the client may repeat it.
pub fn is_client_restore(flags: &ContextFlags) -> bool {
    !flags.intersects(EXEMPT | ContextFlags::SLAVE)
}

/// The bytes a new allocation may take before used memory passes `maxmemory`, or `None` when
/// `maxmemory` does not apply (not set, ignored by this replica, or the command is exempt).
pub fn headroom(flags: &ContextFlags) -> Option<u64> {
    if flags.intersects(EXEMPT) || !flags.contains(ContextFlags::MAXMEMORY) {
        return None;
    }
    let maxmemory = maxmemory()?;
    if flags.contains(ContextFlags::EVICTED) && eviction_can_make_room() {
        return Some(maxmemory);
    }
    let ratio = raw_api::used_memory_ratio()?;
    // The ratio is Redis's own measure for its OOM check (used memory without replication
    // and AOF buffers, over maxmemory).
    let used = (f64::from(ratio) * maxmemory as f64) as u64;
    Some(maxmemory.saturating_sub(used))
}

/// Whether the eviction policy has keys it may evict: any key under `allkeys-*`, only keys
/// with a time to live under `volatile-*` (INFO keyspace's `expires` counts, over every
/// database). With none, Redis cannot make room and a write past `maxmemory` just passes it:
/// the headroom is then what is left, as under `noeviction`. Keys with a TTL present count
/// as room up to `maxmemory` whatever their size (the API tells their number, not their
/// bytes). A policy that cannot be read keeps the old answer (room).
fn eviction_can_make_room() -> bool {
    let Some(policy) = raw_api::server_info_string(c"memory", c"maxmemory_policy") else {
        return true;
    };
    if policy.starts_with("volatile") {
        keys_with_ttl() > 0
    } else {
        policy.starts_with("allkeys")
    }
}

/// Keys with a time to live, over every database (INFO keyspace, built once, lists the
/// non-empty ones as `dbN:keys=..,expires=..,avg_ttl=..`).
fn keys_with_ttl() -> u64 {
    let fields: Vec<std::ffi::CString> = (0..crate::config::databases())
        .filter_map(|db| std::ffi::CString::new(format!("db{db}")).ok())
        .collect();
    let Some(lines) = raw_api::server_info_strings(c"keyspace", fields.iter().map(|f| &**f)) else {
        return 0;
    };
    lines
        .iter()
        .flatten()
        .filter_map(|line| {
            line.split(',')
                .find_map(|kv| kv.strip_prefix("expires="))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}

/// `maxmemory` in bytes (0 or unreadable: `None`).
fn maxmemory() -> Option<u64> {
    raw_api::server_info_unsigned(c"memory", c"maxmemory").filter(|&bytes| bytes > 0)
}

/// The limits a command's new allocations are checked against: the per-filter limit and,
/// when it applies, what is left under `maxmemory`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `bf-max-filter-memory` (or no limit for exempt commands).
    pub filter: u64,
    /// Bytes left under `maxmemory`.
    pub memory: Option<u64>,
}

impl Limits {
    /// The limits of a command creating a filter.
    pub fn for_creation(flags: &ContextFlags, filter: u64) -> Self {
        Limits {
            filter,
            memory: headroom(flags),
        }
    }

    /// The limits of a value loaded by a client's RESTORE, or `None` when the server is
    /// loading (startup, DEBUG RELOAD, a full sync from the primary, the AOF) or is a replica
    /// (a RESTORE it runs comes from its primary, which accepted it): copies accept what the
    /// primary did.
    pub fn for_restore(io: &raw_api::Io) -> Option<Self> {
        let flags = io.context_flags()?;
        if !is_client_restore(&flags) {
            return None;
        }
        Some(Limits::for_creation(
            &flags,
            crate::config::max_filter_memory(),
        ))
    }

    /// The limits of a COPY of a filter, or `None` when none apply: the copy callback has no
    /// client's context, so the server's own flags tell. A replica (its COPY comes from its
    /// primary, which accepted it) and a server loading its AOF copy whatever they are sent.
    ///
    /// A cluster node that may import slots atomically (Valkey 9) holds no COPY to the limits:
    /// the migration streams the source's COPY commands through its import client, which a
    /// callback without a context cannot tell from a client's, and a copy the source made must
    /// not be missing on the target.
    pub fn for_copy() -> Option<Self> {
        let flags = raw_api::server_flags()?;
        if flags.intersects(EXEMPT | ContextFlags::SLAVE) {
            return None;
        }
        if flags.contains(ContextFlags::CLUSTER) && raw_api::slot_imports_possible() {
            return None;
        }
        Some(Limits::for_creation(
            &flags,
            crate::config::max_filter_bytes(&flags),
        ))
    }

    /// No limit: for an add that cannot allocate (its errors are not about memory).
    pub const NONE: Limits = Limits {
        filter: u64::MAX,
        memory: None,
    };

    /// The limits of a write that may grow a filter of `current_bytes` bytes (a new layer,
    /// slice or sub-filter): the whole filter is held to the per-filter limit, its growth to
    /// what `maxmemory` leaves.
    pub fn for_growth(flags: &ContextFlags, current_bytes: u64) -> Self {
        let memory = if flags.contains(ContextFlags::MAXMEMORY) {
            headroom(flags).map(|room| current_bytes.saturating_add(room))
        } else {
            None
        };
        Limits {
            filter: crate::config::max_filter_bytes(flags),
            memory,
        }
    }

    /// The byte limit to give the core: the tighter one.
    pub fn bytes(&self) -> u64 {
        self.memory.map_or(self.filter, |m| m.min(self.filter))
    }

    /// Whether a core refusal at `limit` was `maxmemory`'s.
    pub fn is_memory(&self, limit: u64) -> bool {
        self.memory.is_some_and(|m| m < self.filter && limit == m)
    }
}

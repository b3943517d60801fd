//! Module-wide cuckoo figures for `INFO bf` (section `bf_cuckoo`): filters, sub-filters,
//! items, bytes, and what the filters could not do. Running sums, as for the Bloom figures:
//! added when a filter enters the keyspace, changed by each write, subtracted when it is
//! freed (also on Redis's lazy-free thread, hence atomics).

use std::sync::atomic::{AtomicI64, Ordering};

use layerbloom_filter::cuckoo::AnyFilter;

use crate::log_limit::Budget;
use crate::structure::Section;

static FILTERS: AtomicI64 = AtomicI64::new(0);
static SUB_FILTERS: AtomicI64 = AtomicI64::new(0);
static ITEMS: AtomicI64 = AtomicI64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);
static DELETES_NOT_FOUND: AtomicI64 = AtomicI64::new(0);
static REFUSED_FULL: AtomicI64 = AtomicI64::new(0);
static REFUSED_MAX_EXPANSIONS: AtomicI64 = AtomicI64::new(0);
static CAPACITY_WARNINGS: AtomicI64 = AtomicI64::new(0);
static INSERTS_STOPPED: AtomicI64 = AtomicI64::new(0);

/// The log budget of cuckoo filters' capacity warnings.
pub static CAPACITY_LOG: Budget = Budget::new(
    "cuckoo capacity warnings (INFO bf cf_capacity_warnings_suppressed counts them all, the \
     cf.capacity keyspace events report each)",
);

/// The figures of one filter that the totals sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    sub_filters: usize,
    items: u64,
    /// Modelled bytes; `None` when taken before a write that removes no sub-filter, whose
    /// bytes before are then those of the sub-filters it kept (`changed`).
    bytes: Option<u64>,
}

impl Figures {
    /// Before any write.
    pub fn of(filter: &AnyFilter) -> Self {
        Figures {
            bytes: Some(filter.memory_usage()),
            ..Self::before_append(filter)
        }
    }

    /// Before a write that removes no sub-filter (an add; a delete from a filter of one
    /// sub-filter, which cannot compact): its bytes change only if it appends sub-filters,
    /// so they are computed only then, not on every write (a walk of the allocator model).
    pub fn before_append(filter: &AnyFilter) -> Self {
        Figures {
            sub_filters: filter.sub_filter_count(),
            items: filter.items(),
            bytes: None,
        }
    }
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A filter entered the keyspace (created, loaded, copied).
pub fn entered(filter: &AnyFilter) {
    count_filter(filter, 1);
}

/// Adds (`sign` 1) or subtracts (-1) a whole filter's figures.
fn count_filter(filter: &AnyFilter, sign: i64) {
    FILTERS.fetch_add(sign, Ordering::Relaxed);
    SUB_FILTERS.fetch_add(sign * filter.sub_filter_count() as i64, Ordering::Relaxed);
    ITEMS.fetch_add(
        sign.saturating_mul(signed(filter.items())),
        Ordering::Relaxed,
    );
    BYTES.fetch_add(
        sign.saturating_mul(signed(filter.memory_usage())),
        Ordering::Relaxed,
    );
}

/// A write changed a filter whose figures were `before`. Only the totals that moved are
/// written: each is an atomic read-modify-write (a locked instruction, tens of cycles),
/// and an add or a delete moves only the item count.
pub fn changed(before: Figures, filter: &AnyFilter) {
    let items = signed(filter.items()).wrapping_sub(signed(before.items));
    if items != 0 {
        ITEMS.fetch_add(items, Ordering::Relaxed);
    }
    let sub_filters = filter.sub_filter_count();
    if sub_filters != before.sub_filters {
        let was = before
            .bytes
            .unwrap_or_else(|| filter.memory_usage_of_first(before.sub_filters));
        SUB_FILTERS.fetch_add(
            sub_filters as i64 - before.sub_filters as i64,
            Ordering::Relaxed,
        );
        BYTES.fetch_add(
            signed(filter.memory_usage()).wrapping_sub(signed(was)),
            Ordering::Relaxed,
        );
    }
}

/// A filter is being freed.
pub fn freed(filter: &AnyFilter) {
    count_filter(filter, -1);
}

/// A CF.DEL found no copy of the item's fingerprint.
pub fn delete_not_found() {
    DELETES_NOT_FOUND.fetch_add(1, Ordering::Relaxed);
}

/// Items a non-scaling filter refused (`Filter is full`, or -1 in a CF.INSERT reply).
pub fn refused_full(items: usize) {
    if items > 0 {
        REFUSED_FULL.fetch_add(items as i64, Ordering::Relaxed);
    }
}

/// A command refused for the filter's sub-filter count (`Maximum expansions reached`).
pub fn refused_max_expansions() {
    REFUSED_MAX_EXPANSIONS.fetch_add(1, Ordering::Relaxed);
}

/// A CF.INSERT / CF.INSERTNX stopped at its eviction budget (`WALK_BUDGET`) before its last
/// item.
pub fn insert_stopped() {
    INSERTS_STOPPED.fetch_add(1, Ordering::Relaxed);
}

/// An add took a sub-filter to the capacity-warning threshold.
pub fn warned() {
    CAPACITY_WARNINGS.fetch_add(1, Ordering::Relaxed);
}

/// Cuckoo's section of `INFO bf`, `bf_cuckoo` (Redis adds the module's `bf_` prefix to its
/// fields).
pub fn info() -> Vec<Section> {
    let n = |counter: &AtomicI64| counter.load(Ordering::Relaxed).to_string();
    let fields = [
        ("cf_filters", n(&FILTERS)),
        ("cf_sub_filters", n(&SUB_FILTERS)),
        ("cf_items", n(&ITEMS)),
        ("cf_bytes", n(&BYTES)),
        ("cf_deletes_not_found", n(&DELETES_NOT_FOUND)),
        ("cf_refused_full", n(&REFUSED_FULL)),
        ("cf_refused_max_expansions", n(&REFUSED_MAX_EXPANSIONS)),
        ("cf_inserts_stopped_at_budget", n(&INSERTS_STOPPED)),
        ("cf_capacity_warnings", n(&CAPACITY_WARNINGS)),
        (
            "cf_capacity_warnings_suppressed",
            CAPACITY_LOG.suppressed().to_string(),
        ),
    ];
    vec![Section::of("cuckoo", fields)]
}

//! Module-wide cuckoo figures for `INFO bf` (section `bf_cuckoo`): filters, sub-filters,
//! items, bytes, and what the filters could not do. Running sums, as for the Bloom figures
//! (`stats.rs`): added when a filter enters the keyspace, changed by each write, subtracted
//! when it is freed (also on Redis's lazy-free thread, hence atomics).

use std::sync::atomic::{AtomicI64, Ordering};

use layerbloom_filter::cuckoo::AnyFilter;

static FILTERS: AtomicI64 = AtomicI64::new(0);
static SUB_FILTERS: AtomicI64 = AtomicI64::new(0);
static ITEMS: AtomicI64 = AtomicI64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);
static DELETES_NOT_FOUND: AtomicI64 = AtomicI64::new(0);
static REFUSED_FULL: AtomicI64 = AtomicI64::new(0);
static REFUSED_MAX_EXPANSIONS: AtomicI64 = AtomicI64::new(0);
static CAPACITY_WARNINGS: AtomicI64 = AtomicI64::new(0);

/// The figures of one filter that the totals sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    sub_filters: i64,
    items: i64,
    bytes: i64,
}

impl Figures {
    pub fn of(filter: &AnyFilter) -> Self {
        let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        Figures {
            sub_filters: filter.sub_filter_count() as i64,
            items: signed(filter.items()),
            bytes: signed(filter.memory_usage()),
        }
    }

    fn add_to_totals(self, sign: i64) {
        SUB_FILTERS.fetch_add(sign * self.sub_filters, Ordering::Relaxed);
        ITEMS.fetch_add(sign.saturating_mul(self.items), Ordering::Relaxed);
        BYTES.fetch_add(sign.saturating_mul(self.bytes), Ordering::Relaxed);
    }
}

/// A filter entered the keyspace (created, loaded, copied).
pub fn entered(filter: &AnyFilter) {
    FILTERS.fetch_add(1, Ordering::Relaxed);
    Figures::of(filter).add_to_totals(1);
}

/// A write changed a filter whose figures were `before`.
pub fn changed(before: Figures, filter: &AnyFilter) {
    let after = Figures::of(filter);
    if after != before {
        after.add_to_totals(1);
        before.add_to_totals(-1);
    }
}

/// A filter is being freed.
pub fn freed(filter: &AnyFilter) {
    FILTERS.fetch_sub(1, Ordering::Relaxed);
    Figures::of(filter).add_to_totals(-1);
}

/// A CF.DEL found no copy of the item's fingerprint.
pub fn delete_not_found() {
    DELETES_NOT_FOUND.fetch_add(1, Ordering::Relaxed);
}

/// Items a non-scaling filter refused (`Filter is full`, or -1 in a CF.INSERT reply).
pub fn refused_full(items: usize) {
    REFUSED_FULL.fetch_add(items as i64, Ordering::Relaxed);
}

/// A command refused for the filter's sub-filter count (`Maximum expansions reached`).
pub fn refused_max_expansions() {
    REFUSED_MAX_EXPANSIONS.fetch_add(1, Ordering::Relaxed);
}

/// An add took a sub-filter to the capacity-warning threshold.
pub fn warned() {
    CAPACITY_WARNINGS.fetch_add(1, Ordering::Relaxed);
}

/// The `bf_cuckoo` section's fields (Redis adds the module's `bf_` prefix).
pub fn info_fields() -> (&'static str, Vec<(&'static str, String)>) {
    let n = |counter: &AtomicI64| counter.load(Ordering::Relaxed).to_string();
    (
        "cuckoo",
        vec![
            ("cf_filters", n(&FILTERS)),
            ("cf_sub_filters", n(&SUB_FILTERS)),
            ("cf_items", n(&ITEMS)),
            ("cf_bytes", n(&BYTES)),
            ("cf_deletes_not_found", n(&DELETES_NOT_FOUND)),
            ("cf_refused_full", n(&REFUSED_FULL)),
            ("cf_refused_max_expansions", n(&REFUSED_MAX_EXPANSIONS)),
            ("cf_capacity_warnings", n(&CAPACITY_WARNINGS)),
            (
                "cf_capacity_warnings_suppressed",
                crate::log_limit::cf_suppressed().to_string(),
            ),
        ],
    )
}

//! The Bloom filters' figures for `INFO bf` (section `bf_stats`): how many filters, layers,
//! items and bytes the server holds, how many filters are past the capacity-warning threshold,
//! what was refused, how many windowed filters there are and how many of their slices expired.
//!
//! The totals are kept as running sums, never by walking the keyspace: every filter that
//! enters the keyspace is added (`entered`: created by a command, loaded from an RDB file or a
//! DUMP payload, copied), every change a write makes is added (`changed`), every filter freed
//! is subtracted (`freed`, also from Redis's lazy-free thread, hence atomics). Bytes are the
//! core's `memory_usage`, the figure the memory limit is checked against.
//!
//! "Over the warning threshold" is a set of filters (by address: a value keeps its address for
//! its life, Redis moves the key, not the value, and active defragmentation, which may move
//! it, says so: `moved`), re-evaluated with the threshold in force whenever a filter is
//! written, loaded or copied. After `CONFIG SET bf-capacity-warning` a filter is counted under
//! the new threshold from its next write.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use layerbloom_filter::bloom::health::{self, Load};
use layerbloom_filter::ScalableFilter;

use crate::bloom::settings;
use crate::config;
use crate::error::BfError;
use crate::log_limit::Budget;
use crate::structure::Section;

static FILTERS: AtomicI64 = AtomicI64::new(0);
static LAYERS: AtomicI64 = AtomicI64::new(0);
static ITEMS: AtomicI64 = AtomicI64::new(0);
static BYTES: AtomicI64 = AtomicI64::new(0);
static OVER_WARNING: AtomicI64 = AtomicI64::new(0);
/// The log budget of Bloom filters' capacity warnings.
pub static CAPACITY_LOG: Budget = Budget::new(
    "capacity warnings (INFO bf capacity_warnings_suppressed counts them all, the \
     bf.capacity keyspace events report each)",
);

/// Whether the warning threshold changed while filters were live (`threshold_changed`).
static WARNING_CHANGED: AtomicBool = AtomicBool::new(false);
/// The threshold's count of changes (`Setting::changes`) when the filters live now started
/// to be (the count of filters last rose from 0).
static WARNING_CHANGES_SEEN: AtomicU64 = AtomicU64::new(0);
static CAPACITY_WARNINGS: AtomicI64 = AtomicI64::new(0);
static REFUSED_FULL: AtomicI64 = AtomicI64::new(0);
static REFUSED_GROW: AtomicI64 = AtomicI64::new(0);
static REFUSED_CREATE: AtomicI64 = AtomicI64::new(0);
static WINDOWED_FILTERS: AtomicI64 = AtomicI64::new(0);
static SLICES_EXPIRED: AtomicI64 = AtomicI64::new(0);

/// The filters over the warning threshold, by address.
static OVER: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn over_set() -> MutexGuard<'static, Option<HashSet<usize>>> {
    // The set stays consistent even if a holder panicked: every update is one insert/remove.
    OVER.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn address(filter: &ScalableFilter) -> usize {
    std::ptr::from_ref(filter) as usize
}

/// The figures of one filter that the totals sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    layers: i64,
    items: i64,
    bytes: i64,
}

impl Figures {
    pub fn of(filter: &ScalableFilter) -> Self {
        Figures {
            layers: filter.layer_count() as i64,
            items: filter.items() as i64,
            bytes: filter.memory_usage() as i64,
        }
    }

    fn add_to_totals(self, sign: i64) {
        // Wrapping, like the atomics: a loaded item count of 2^63 or more must not panic, and
        // the same figures are always added and later taken away.
        LAYERS.fetch_add(sign.wrapping_mul(self.layers), Ordering::Relaxed);
        ITEMS.fetch_add(sign.wrapping_mul(self.items), Ordering::Relaxed);
        BYTES.fetch_add(sign.wrapping_mul(self.bytes), Ordering::Relaxed);
    }
}

/// Records whether a filter is over the warning threshold now.
fn set_over(filter: &ScalableFilter, over: bool) {
    if !over && OVER_WARNING.load(Ordering::Relaxed) == 0 {
        // Nothing to remove (the common case): no lock taken.
        return;
    }
    let mut guard = over_set();
    let set = guard.get_or_insert_with(HashSet::new);
    let changed = if over {
        set.insert(address(filter))
    } else {
        set.remove(&address(filter))
    };
    if changed {
        OVER_WARNING.store(set.len() as i64, Ordering::Relaxed);
    }
}

/// A filter entered the keyspace (created, loaded, copied). `filter` must be the value as
/// stored (its address identifies it until it is freed).
pub fn entered(filter: &ScalableFilter) {
    if FILTERS.fetch_add(1, Ordering::Relaxed) == 0 {
        WARNING_CHANGES_SEEN.store(config::CAPACITY_WARNING.changes(), Ordering::Relaxed);
    }
    Figures::of(filter).add_to_totals(1);
    set_over(
        filter,
        health::over_warning(filter, config::capacity_warning()),
    );
}

/// A write took a filter from the counts `before` to `after` (its bytes are not taken: they
/// follow from its layers, which a write only appends to, so most writes, those that add no
/// layer, never walk the layers for them).
pub fn changed(before: &Load, after: &Load, filter: &ScalableFilter) {
    // Only the totals that moved are written: each is a locked read-modify-write (tens of
    // cycles), and most adds move the items alone. Wrapping, as in `Figures::add_to_totals`:
    // the same figures' difference.
    if after.layers != before.layers {
        let bytes = (filter.memory_usage() as i64)
            .wrapping_sub(filter.memory_usage_of_layers(before.layers) as i64);
        let layers = (after.layers as i64).wrapping_sub(before.layers as i64);
        LAYERS.fetch_add(layers, Ordering::Relaxed);
        BYTES.fetch_add(bytes, Ordering::Relaxed);
    }
    if after.items != before.items {
        ITEMS.fetch_add(
            (after.items as i64).wrapping_sub(before.items as i64),
            Ordering::Relaxed,
        );
    }
    // The filter's place in the set is its state as of its last write (or entry); while the
    // threshold has never changed under live filters, that is `before`'s, and a write that
    // leaves the filter on the same side needs no lock.
    let percent = config::capacity_warning();
    let over = after.over_warning(percent);
    if over != before.over_warning(percent) || threshold_changed() {
        set_over(filter, over);
    }
}

/// Whether the capacity-warning threshold changed while filters were live. Filters recorded
/// over or under the old one are reconciled by their next write, as before; from then on
/// every write reconciles (which filters are still out of date is not known). A change while
/// no filter was live leaves none out of date.
fn threshold_changed() -> bool {
    if WARNING_CHANGED.load(Ordering::Relaxed) {
        return true;
    }
    let changed =
        config::CAPACITY_WARNING.changes() != WARNING_CHANGES_SEEN.load(Ordering::Relaxed);
    if changed {
        WARNING_CHANGED.store(true, Ordering::Relaxed);
    }
    changed
}

/// A filter is being freed (on the main thread or Redis's lazy-free thread).
pub fn freed(filter: &ScalableFilter) {
    FILTERS.fetch_sub(1, Ordering::Relaxed);
    Figures::of(filter).add_to_totals(-1);
    set_over(filter, false);
}

/// Active defragmentation moved a filter's box from address `from` (see `type_callbacks::
/// defrag`): its place in the set of filters over the warning threshold moves with it.
pub fn moved(from: usize, filter: &ScalableFilter) {
    if OVER_WARNING.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut guard = over_set();
    let set = guard.get_or_insert_with(HashSet::new);
    if set.remove(&from) {
        set.insert(address(filter));
    }
}

/// A capacity warning was issued.
pub fn warned() {
    CAPACITY_WARNINGS.fetch_add(1, Ordering::Relaxed);
}

/// Counts a refusal that a client is answered with.
pub fn refused(error: &BfError) {
    let counter = match error {
        BfError::Full => &REFUSED_FULL,
        BfError::GrowOverLimit { .. } => &REFUSED_GROW,
        BfError::CreateOverLimit { .. } => &REFUSED_CREATE,
        _ => return,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A windowed filter entered the keyspace (created, loaded, copied).
pub fn window_entered() {
    WINDOWED_FILTERS.fetch_add(1, Ordering::Relaxed);
}

/// A windowed filter is being freed (on the main thread or Redis's lazy-free thread).
pub fn window_freed() {
    WINDOWED_FILTERS.fetch_sub(1, Ordering::Relaxed);
}

/// An advance dropped `slices` slices that had left their window.
pub fn slices_expired(slices: u32) {
    SLICES_EXPIRED.fetch_add(i64::from(slices), Ordering::Relaxed);
}

/// The `bf_stats` fields (Redis adds the module's `bf_` prefix).
pub fn fields() -> [(&'static str, String); 13] {
    let n = |counter: &AtomicI64| counter.load(Ordering::Relaxed).to_string();
    let full = REFUSED_FULL.load(Ordering::Relaxed);
    let grow = REFUSED_GROW.load(Ordering::Relaxed);
    [
        ("filters", n(&FILTERS)),
        ("layers", n(&LAYERS)),
        ("items", n(&ITEMS)),
        ("bytes", n(&BYTES)),
        ("filters_over_warning", n(&OVER_WARNING)),
        ("capacity_warnings", n(&CAPACITY_WARNINGS)),
        (
            "capacity_warnings_suppressed",
            CAPACITY_LOG.suppressed().to_string(),
        ),
        ("refused_adds", (full + grow).to_string()),
        ("refused_full", full.to_string()),
        ("refused_grow_over_limit", grow.to_string()),
        ("refused_create_over_limit", n(&REFUSED_CREATE)),
        ("windowed_filters", n(&WINDOWED_FILTERS)),
        ("window_slices_expired", n(&SLICES_EXPIRED)),
    ]
}

/// Bloom's sections of `INFO bf`: `bf_stats`, and `bf_settings`, the settings that apply to
/// Bloom filters (RedisBloom's section for them; they include those every structure shares).
pub fn info() -> Vec<Section> {
    vec![
        Section::of("stats", fields()),
        Section {
            name: "settings",
            fields: config::info_fields(settings::SETTINGS),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use layerbloom_filter::FilterSpec;

    fn total(name: &str) -> String {
        fields()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    }

    /// The only test touching the module-wide totals (they are process-wide).
    #[test]
    fn totals_follow_filters_in_and_out_and_their_writes() {
        let mut a = Box::new(ScalableFilter::new(FilterSpec::new(100, 0.01, 2), u64::MAX).unwrap());
        let b = Box::new(ScalableFilter::new(FilterSpec::new(10, 0.01, 0), u64::MAX).unwrap());
        entered(&a);
        entered(&b);
        assert_eq!(total("filters"), "2");
        assert_eq!(total("layers"), "2");
        assert_eq!(total("items"), "0");
        let empty_bytes = a.memory_usage() + b.memory_usage();
        assert_eq!(total("bytes"), empty_bytes.to_string());
        // A write that grows `a` past its 70% mark and into a second layer.
        let before = Load::of(&a);
        for i in 0..150 {
            a.add(format!("i{i}").as_bytes(), u64::MAX).unwrap();
        }
        changed(&before, &Load::of(&a), &a);
        assert_eq!(total("layers"), "3");
        assert_eq!(total("items"), a.items().to_string());
        assert_eq!(
            total("bytes"),
            (a.memory_usage() + b.memory_usage()).to_string()
        );
        // 150 items: the second layer (200) holds about 50, under its mark.
        assert_eq!(total("filters_over_warning"), "0");
        let before = Load::of(&a);
        for i in 150..300 {
            a.add(format!("i{i}").as_bytes(), u64::MAX).unwrap();
        }
        changed(&before, &Load::of(&a), &a);
        assert_eq!(total("items"), a.items().to_string());
        assert_eq!(total("filters_over_warning"), "1");
        freed(&a);
        freed(&b);
        for name in [
            "filters",
            "layers",
            "items",
            "bytes",
            "filters_over_warning",
        ] {
            assert_eq!(total(name), "0", "{name}");
        }
        refused(&BfError::Full);
        refused(&BfError::GrowOverLimit {
            needed: 2,
            limit: 1,
        });
        refused(&BfError::CreateOverLimit {
            needed: 2,
            limit: 1,
        });
        refused(&BfError::NotFound);
        assert_eq!(total("refused_adds"), "2");
        assert_eq!(total("refused_full"), "1");
        assert_eq!(total("refused_grow_over_limit"), "1");
        assert_eq!(total("refused_create_over_limit"), "1");
    }
}

//! The Bloom filter's settings (rows of the module's settings table, `config.rs`): the
//! parameters of filters that an add creates for a missing key, and the layout of every new
//! filter. [`SETTINGS`] lists every setting that applies to Bloom filters, in the order
//! `INFO bf_settings` shows them.

use layerbloom_filter::{FilterSpec, Layout};

use crate::bloom::args::{MAX_CAPACITY, MAX_ERROR_RATE, MAX_EXPANSION};
use crate::config::{self, Setting};

/// Default error rate of auto-created filters.
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
/// Default capacity of auto-created filters.
pub const DEFAULT_INITIAL_SIZE: i64 = 100;
/// Default growth factor of new filters.
pub const DEFAULT_EXPANSION: i64 = 2;

pub static ERROR_RATE: Setting = Setting::rate(
    "bf-error-rate",
    "Bloom filters an add creates for a missing key",
    (DEFAULT_ERROR_RATE, c"0.01"),
    MAX_ERROR_RATE,
)
.legacy("error_rate");

pub static INITIAL_SIZE: Setting = Setting::integer(
    "bf-initial-size",
    "Bloom filters an add creates for a missing key",
    DEFAULT_INITIAL_SIZE,
    1,
    MAX_CAPACITY as i64,
)
.legacy("initial_size");

pub static EXPANSION: Setting = Setting::integer(
    "bf-expansion-factor",
    "Bloom filters created without EXPANSION (0: non-scaling)",
    DEFAULT_EXPANSION,
    0,
    MAX_EXPANSION as i64,
)
.legacy("expansion");

/// The layout of new filters: `blocked` (layerbloom's) or `classic` (RedisBloom's layers).
pub static LAYOUT: Setting = Setting::choice(
    "bf-layout",
    "every Bloom filter a client creates",
    &[c"blocked", c"classic"],
    0,
);

/// The settings that apply to Bloom filters, in `INFO bf_settings`'s order.
pub static SETTINGS: &[&Setting] = &[
    &ERROR_RATE,
    &INITIAL_SIZE,
    &EXPANSION,
    &config::MAX_FILTER_MEMORY,
    &LAYOUT,
    &config::CAPACITY_WARNING,
];

/// The parameters of a filter created without explicit ones.
pub fn default_spec() -> FilterSpec {
    let expansion = default_expansion();
    FilterSpec {
        capacity: initial_size(),
        error: ERROR_RATE.rate_value().min(MAX_ERROR_RATE),
        expansion,
        nonscaling: expansion == 0,
        layout: layout(),
    }
}

/// The layout of new filters.
pub fn layout() -> Layout {
    if LAYOUT.integer_value() == 1 {
        Layout::Classic
    } else {
        Layout::Blocked
    }
}

/// Whether new filters are RedisBloom's classic ones, reporting RedisBloom's figures.
pub fn classic_mode() -> bool {
    layout() == Layout::Classic
}

/// The growth factor of filters created without one.
pub fn default_expansion() -> u32 {
    EXPANSION.integer_value() as u32
}

/// The default capacity of auto-created filters.
pub fn initial_size() -> u64 {
    INITIAL_SIZE.integer_value() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_that_apply_to_bloom_filters_in_info_s_order() {
        let fields: Vec<_> = config::info_fields(SETTINGS)
            .into_iter()
            .map(|(field, value)| format!("{field}:{value}"))
            .collect();
        assert_eq!(
            fields,
            [
                "error_rate:0.01",
                "initial_size:100",
                "expansion_factor:2",
                "max_filter_memory:4294967296",
                "layout:blocked",
                "capacity_warning:70",
            ]
        );
        for setting in SETTINGS {
            assert!(!setting.applies.is_empty(), "{}", setting.name);
        }
        let legacy: Vec<_> = SETTINGS.iter().filter_map(|s| s.legacy).collect();
        assert_eq!(legacy, ["error_rate", "initial_size", "expansion"]);
        assert_eq!(default_spec(), FilterSpec::new(100, 0.01, 2));
    }
}

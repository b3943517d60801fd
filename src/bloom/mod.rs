//! Bloom filters, plain and windowed: their commands (`BF.*`: `table.rs`, `args.rs`,
//! `handlers.rs`, `merge.rs`), the value under a key (`value.rs`), the data types and their
//! callbacks (`datatype.rs`; `window/datatype.rs`), windows and their expiry (`window/`),
//! replication and keyspace events (`propagate.rs`), refusals and figures (`stats.rs`) and
//! settings (`settings.rs`). [`STRUCTURE`] is all the module is told of them.

use crate::dispatch::command_table;
use crate::structure::Structure;

pub mod args;
pub mod datatype;
pub mod handlers;
pub mod limits;
pub mod merge;
pub mod propagate;
pub mod settings;
pub mod stats;
mod table;
pub mod value;
pub mod window;

pub use table::COMMANDS;

/// Bloom filters' entry in the module's registry.
pub static STRUCTURE: Structure = Structure {
    commands: COMMANDS,
    types: &[
        (&datatype::BLOOM_TYPE, "MBbloom--"),
        (&window::datatype::WINDOW_TYPE, "LBbloomW-"),
    ],
    settings: settings::SETTINGS,
    info: stats::info,
    loaded: warm_up,
};

/// The sizing model's tables and shapes are built on first use (milliseconds each): builds
/// the default filter's whole ladder of layer rates at load, rather than inside the first
/// command that creates, grows or reports on such a filter.
fn warm_up() {
    use layerbloom_filter::bloom::{chain, sizing};
    let mut rate = settings::default_spec().first_layer_error();
    while rate >= sizing::MIN_SIZING_ERROR / 2.0 {
        let _ = sizing::shape_for(rate);
        rate *= chain::TIGHTENING;
    }
}

#[cfg(test)]
mod tests {
    use super::table::CATEGORY;
    use super::COMMANDS;
    use crate::command_spec::{ArgKind, Arity, CommandSpec};

    #[test]
    fn flags_and_key_specs_agree_for_every_command() {
        for spec in COMMANDS.iter().map(|c| c.spec) {
            let name = spec.name;
            assert_eq!(spec.is_write(), spec.key.writes(), "{name}");
            assert_eq!(!spec.is_write(), spec.is_readonly(), "{name}");
            assert_eq!(name, name.to_ascii_lowercase(), "registered in lower case");
            assert_eq!(
                spec.args[0].kind,
                ArgKind::Key,
                "{name}: the key is argument 1"
            );
            assert!(spec.arity.min() >= 2, "{name}: the key is required");
        }
    }

    #[test]
    fn acl_categories_follow_the_flags_and_every_command_is_in_bloom() {
        // RedisBloom's documented category for the BF commands, the one users grant.
        assert_eq!(CATEGORY, "bloom");
        for command in COMMANDS {
            assert_eq!(command.category, CATEGORY, "{}", command.spec.name);
        }
        let categories = |name: &str| {
            let command = COMMANDS.iter().find(|c| c.spec.name == name).unwrap();
            command.spec.acl_categories().collect::<Vec<_>>()
        };
        assert_eq!(categories("bf.add"), ["write", "slow"]);
        assert_eq!(categories("bf.exists"), ["read", "fast"]);
        assert_eq!(categories("bf.scandump"), ["read", "slow"]);
        // Neither a write nor read-only: no access category rather than a wrong one.
        let neither = CommandSpec {
            flags: "fast",
            ..*COMMANDS[0].spec
        };
        assert_eq!(neither.acl_categories().collect::<Vec<_>>(), ["fast"]);
    }

    #[test]
    fn arity_is_told_to_redis_in_its_form_and_checked_at_both_ends() {
        let between = Arity::Between(4, 7);
        assert_eq!(between.redis(), -4);
        assert_eq!((between.min(), between.max()), (4, Some(7)));
        assert_eq!(
            (3..=8).map(|n| between.accepts(n)).collect::<Vec<_>>(),
            [false, true, true, true, true, false]
        );
        assert_eq!(Arity::Exactly(3).redis(), 3);
        assert!(Arity::Exactly(3).accepts(3) && !Arity::Exactly(3).accepts(4));
        assert_eq!(Arity::AtLeast(3).redis(), -3);
        assert_eq!(Arity::AtLeast(3).max(), None);
        assert!(Arity::AtLeast(3).accepts(usize::MAX) && !Arity::AtLeast(3).accepts(2));
    }
}

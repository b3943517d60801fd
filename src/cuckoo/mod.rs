//! Cuckoo filters: their commands (`CF.*`: `table.rs`, `args.rs`, `handlers.rs`), the data
//! types and their callbacks (`datatype.rs`), replication and keyspace events
//! (`propagate.rs`) and figures (`stats.rs`). [`STRUCTURE`] is all the module is told of them.

use crate::config::{self, Setting};
use crate::dispatch::command_table;
use crate::structure::Structure;

pub mod args;
pub mod datatype;
pub mod handlers;
pub mod propagate;
pub mod stats;
mod table;

pub use table::COMMANDS;

/// The settings that apply to cuckoo filters (shared with Bloom filters, registered once).
static SETTINGS: &[&Setting] = &[&config::MAX_FILTER_MEMORY, &config::CAPACITY_WARNING];

/// Cuckoo filters' entry in the module's registry.
pub static STRUCTURE: Structure = Structure {
    commands: COMMANDS,
    types: &[
        (&datatype::CUCKOO_TYPE, "MBbloomCF"),
        (&datatype::RATED_CUCKOO_TYPE, "LBcuckoo-"),
    ],
    settings: SETTINGS,
    info: stats::info,
    loaded: || {},
};

#[cfg(test)]
mod tests {
    use super::table::CATEGORY;
    use super::COMMANDS;
    use crate::command_spec::ArgKind;

    #[test]
    fn every_command_is_in_cuckoo_with_flags_matching_its_key_spec() {
        assert_eq!(CATEGORY, "cuckoo");
        for command in COMMANDS {
            let spec = command.spec;
            assert_eq!(command.category, "cuckoo", "{}", spec.name);
            assert!(spec.name.starts_with("cf."), "{}", spec.name);
            assert_eq!(spec.is_write(), spec.key.writes(), "{}", spec.name);
            assert_eq!(!spec.is_write(), spec.is_readonly(), "{}", spec.name);
            assert_eq!(spec.args[0].kind, ArgKind::Key, "{}", spec.name);
        }
        assert_eq!(COMMANDS.len(), 14);
    }
}

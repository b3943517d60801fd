//! The module's command tables, read from its sources (`src/command_spec.rs` and each
//! structure's `table.rs`) without its handlers: the tests check that the server tells
//! clients what the tables say.

#![allow(dead_code)]

#[path = "../../src/command_spec.rs"]
pub mod spec;

/// The tests' expansion of a table: its ACL category and its specs, in registration order.
macro_rules! command_table {
    (category: $category:literal; refused: $refused:path; $($handler:path => $spec:expr,)*) => {
        super::command_table! { category: $category; $($handler => $spec,)* }
    };
    (category: $category:literal; $($handler:path => $spec:expr,)*) => {
        #[allow(unused_imports)]
        use super::spec::*;

        pub const CATEGORY: &str = $category;

        pub const COMMANDS: &[CommandSpec] = &[$($spec,)*];
    };
}
use command_table;

#[path = "../../src/bloom/table.rs"]
pub mod bf;

#[path = "../../src/cuckoo/table.rs"]
pub mod cf;

#[allow(unused_imports)] // each suite uses some
pub use spec::{Arity, CommandSpec, KeyAccess};

/// Each table: the structure's own ACL category and its commands.
pub const TABLES: &[(&str, &[CommandSpec])] =
    &[(bf::CATEGORY, bf::COMMANDS), (cf::CATEGORY, cf::COMMANDS)];

/// Every command of every table.
pub fn commands() -> impl Iterator<Item = &'static CommandSpec> {
    TABLES.iter().flat_map(|(_, commands)| commands.iter())
}

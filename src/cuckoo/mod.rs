//! The cuckoo filter's commands (`CF.*`): their table, handlers and argument parsing, beside
//! the Bloom filter's (`bf/`).

use crate::dispatch::command_table;

pub mod args;
pub mod datatype;
pub mod handlers;
pub mod stats;
mod table;

pub use table::COMMANDS;

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

//! What a structure brings to the module: its [`Structure`] entry, the one line it adds to the
//! registry (`STRUCTURES` in `lib.rs`). Everything else of a structure is in its own folder
//! (`src/bloom/`, `src/cuckoo/`); the shared glue reads the entries and names no structure.

use std::borrow::Cow;

use redis_module::native_types::RedisType;

use crate::config::Setting;
use crate::dispatch::Command;

/// One structure of the module (Bloom filters, cuckoo filters, ...).
pub struct Structure {
    /// Its commands: the expansion of its `table.rs` (`dispatch::command_table!`).
    pub commands: &'static [Command],
    /// Its data types, each with the name it is registered under (which a server that holds
    /// the name already is told, `types.rs`).
    pub types: &'static [(&'static RedisType, &'static str)],
    /// The settings that apply to it (a shared one is listed by each structure it applies to,
    /// and registered once), in the order its INFO section shows them.
    pub settings: &'static [&'static Setting],
    /// Its sections of `INFO bf`, in order.
    pub info: fn() -> Vec<Section>,
    /// What it does at load once the settings are read (nothing, or building tables that its
    /// first command would otherwise wait for).
    pub loaded: fn(),
}

/// One section of `INFO bf` (`bf_<name>`) and its fields, in order.
pub struct Section {
    pub name: &'static str,
    pub fields: Vec<(Cow<'static, str>, String)>,
}

impl Section {
    /// A section of fields whose names are fixed.
    pub fn of(
        name: &'static str,
        fields: impl IntoIterator<Item = (&'static str, String)>,
    ) -> Self {
        Section {
            name,
            fields: fields
                .into_iter()
                .map(|(field, value)| (Cow::Borrowed(field), value))
                .collect(),
        }
    }
}

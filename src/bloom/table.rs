//! The BF commands, in registration order: each command's handler and everything the server
//! and its clients are told about it. Plain data (see `command_spec.rs`): the glue expands the
//! table with the handlers, the integration tests without them.
//!
//! The category is the structure's own ACL category (on servers with module
//! categories: Redis 7.4+, Valkey 8); each command's other
//! categories follow from its flags (`CommandSpec::acl_categories`).
//!
//! Names are registered in lower case, as RedisBloom registers them. `since` is the
//! RedisBloom version that introduced the command (layerbloom implements RedisBloom's BF API
//! level 2.8).

super::command_table! {
    // RedisBloom's category for the BF commands, the one users grant (`+@bloom`).
    category: "bloom";
    // Refusals (full, over a memory limit) are counted in `INFO bf_stats`.
    refused: crate::bloom::stats::refused;

    crate::bloom::handlers::reserve => CommandSpec {
        name: "bf.reserve",
        flags: "write deny-oom",
        arity: Arity::Between(4, 11),
        key: KeyAccess::Insert,
        summary: "Creates an empty Bloom filter with the given error rate and capacity (with WINDOW, one that forgets items older than the window)",
        complexity: "O(1)",
        since: Some("1.0.0"),
        args: &[
            KEY,
            arg("error_rate", ArgKind::Double),
            arg("capacity", ArgKind::Integer),
            option("expansion", "EXPANSION", ArgKind::Integer),
            word("nonscaling", "NONSCALING"),
            option("window", "WINDOW", ArgKind::Integer),
            option("slices", "SLICES", ArgKind::Integer),
        ],
    },
    crate::bloom::handlers::add => CommandSpec {
        name: "bf.add",
        flags: "write deny-oom",
        arity: Arity::Exactly(3),
        key: KeyAccess::Insert,
        summary: "Adds an item to a Bloom filter, creating the filter if it does not exist",
        complexity: "O(k), where k is the number of layers",
        since: Some("1.0.0"),
        args: &[KEY, ITEM],
    },
    crate::bloom::handlers::madd => CommandSpec {
        name: "bf.madd",
        flags: "write deny-oom",
        arity: Arity::AtLeast(3),
        key: KeyAccess::Insert,
        summary: "Adds one or more items to a Bloom filter, creating the filter if it does not exist",
        complexity: "O(k * n), where k is the number of layers and n the number of items",
        since: Some("1.0.0"),
        args: &[KEY, ITEMS],
    },
    crate::bloom::handlers::insert => CommandSpec {
        name: "bf.insert",
        flags: "write deny-oom",
        arity: Arity::AtLeast(4),
        key: KeyAccess::Insert,
        summary: "Adds one or more items to a Bloom filter, creating it with the given options if it does not exist",
        complexity: "O(k * n), where k is the number of layers and n the number of items",
        since: Some("1.0.0"),
        args: &[
            KEY,
            option("capacity", "CAPACITY", ArgKind::Integer),
            option("error", "ERROR", ArgKind::Double),
            option("expansion", "EXPANSION", ArgKind::Integer),
            word("nocreate", "NOCREATE"),
            word("nonscaling", "NONSCALING"),
            option("window", "WINDOW", ArgKind::Integer),
            option("slices", "SLICES", ArgKind::Integer),
            Arg {
                token: Some("ITEMS"),
                ..ITEMS
            },
        ],
    },
    crate::bloom::handlers::exists => CommandSpec {
        name: "bf.exists",
        flags: "readonly fast",
        arity: Arity::Exactly(3),
        key: KeyAccess::Read,
        summary: "Tells whether an item may have been added to a Bloom filter",
        complexity: "O(k), where k is the number of layers",
        since: Some("1.0.0"),
        args: &[KEY, ITEM],
    },
    crate::bloom::handlers::mexists => CommandSpec {
        name: "bf.mexists",
        flags: "readonly fast",
        arity: Arity::AtLeast(3),
        key: KeyAccess::Read,
        summary: "Tells for each item whether it may have been added to a Bloom filter",
        complexity: "O(k * n), where k is the number of layers and n the number of items",
        since: Some("1.0.0"),
        args: &[KEY, ITEMS],
    },
    crate::bloom::handlers::info => CommandSpec {
        name: "bf.info",
        flags: "readonly fast",
        arity: Arity::Between(2, 3),
        key: KeyAccess::ReadMeta,
        summary: "Returns a Bloom filter's parameters (capacity, size, layers, items, expansion), one of them, one health figure, or with HEALTH all five (error rate, fill, estimated false-positive rate and distinct items, maximum capacity)",
        complexity: "O(k), where k is the number of layers",
        since: Some("1.0.0"),
        args: &[
            KEY,
            Arg {
                optional: true,
                subargs: &[
                    choice("capacity", "CAPACITY"),
                    choice("size", "SIZE"),
                    choice("filters", "FILTERS"),
                    choice("items", "ITEMS"),
                    choice("expansion", "EXPANSION"),
                    choice("error", "ERROR"),
                    choice("fill", "FILL"),
                    choice("fpr", "FPR"),
                    choice("distinct", "DISTINCT"),
                    choice("maxcapacity", "MAXCAPACITY"),
                    choice("health", "HEALTH"),
                    choice("window", "WINDOW"),
                    choice("slices", "SLICES"),
                    choice("oldest", "OLDEST"),
                    choice("sliceitems", "SLICEITEMS"),
                ],
                ..arg("single_value", ArgKind::OneOf)
            },
        ],
    },
    crate::bloom::handlers::card => CommandSpec {
        name: "bf.card",
        flags: "readonly fast",
        arity: Arity::Exactly(2),
        key: KeyAccess::ReadMeta,
        summary: "Returns the number of items added to a Bloom filter",
        complexity: "O(1)",
        since: Some("2.4.4"),
        args: &[KEY],
    },
    crate::bloom::handlers::scandump => CommandSpec {
        name: "bf.scandump",
        flags: "readonly",
        arity: Arity::Exactly(3),
        key: KeyAccess::Read,
        summary: "Begins or continues an incremental save of a Bloom filter",
        complexity: "O(n), where n is the size of the chunk returned",
        since: Some("1.0.0"),
        args: &[KEY, arg("iterator", ArgKind::Integer)],
    },
    crate::bloom::handlers::loadchunk => CommandSpec {
        name: "bf.loadchunk",
        flags: "write deny-oom",
        arity: Arity::Exactly(4),
        key: KeyAccess::Update,
        summary: "Restores a Bloom filter previously saved with BF.SCANDUMP",
        complexity: "O(n), where n is the size of the chunk",
        since: Some("1.0.0"),
        args: &[
            KEY,
            arg("iterator", ArgKind::Integer),
            arg("data", ArgKind::String),
        ],
    },
    crate::bloom::merge::merge => CommandSpec {
        name: "bf.merge",
        flags: "write deny-oom",
        arity: Arity::AtLeast(3),
        key: KeyAccess::Replace,
        summary: "Stores in the destination key the union of Bloom filters created with the same parameters, replacing its filter; its item count is estimated",
        complexity: "O(n), where n is the total size of the source filters",
        // layerbloom's own: RedisBloom has no such command.
        since: None,
        args: &[
            arg("destination", ArgKind::Key),
            Arg {
                multiple: true,
                ..arg("source", ArgKind::Key)
            },
        ],
    },
    crate::bloom::handlers::debug => CommandSpec {
        name: "bf.debug",
        flags: "readonly",
        arity: Arity::Exactly(2),
        key: KeyAccess::ReadMeta,
        summary: "Returns the layers of a Bloom filter and their parameters, for debugging",
        complexity: "O(k), where k is the number of layers",
        since: None,
        args: &[KEY],
    },
    crate::bloom::window::advance => CommandSpec {
        name: "bf.windowadvance",
        // Not `fast`: one call may free every slice of a large filter.
        flags: "write",
        arity: Arity::Between(2, 3),
        key: KeyAccess::Update,
        summary: "Expires a windowed Bloom filter's slices older than the window, up to the current slice (or a given slice no later than it); the command a primary propagates for each expiry",
        complexity: "O(s), where s is the number of slices expired",
        since: None,
        args: &[
            KEY,
            Arg {
                optional: true,
                ..arg("slice", ArgKind::Integer)
            },
        ],
    },
}

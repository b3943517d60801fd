//! What a command table says about each command: its name, flags, arity, ACL categories, key
//! spec and docs. Plain data without Redis: the glue derives registration, the arity check,
//! `COMMAND DOCS` / `COMMAND INFO` and ACL categories from a structure's table (see
//! `dispatch::command_table!`), and the integration tests include this file and the tables
//! with `#[path]` to derive their expectations from the same entries.
//!
//! A structure's table (e.g. `bloom/table.rs`) is one `command_table!` invocation: the
//! structure's own ACL category (`category: "bloom";`), then entries
//! `handler => CommandSpec { .. }`. Whoever includes the file brings the macro: the glue's
//! registers the handlers, the tests' keeps only the category and the specs.

/// How many arguments a command takes, its name included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many.
    Exactly(usize),
    /// This many or more.
    AtLeast(usize),
    /// From the first to the second, both included. Redis knows only "at least" (`-min`), so
    /// the maximum is checked by the module's dispatch.
    Between(usize, usize),
}

impl Arity {
    /// Redis's form: `n` for exactly n, `-n` for at least n.
    pub const fn redis(self) -> i32 {
        match self {
            Arity::Exactly(n) => n as i32,
            Arity::AtLeast(n) | Arity::Between(n, _) => -(n as i32),
        }
    }

    /// The fewest arguments accepted.
    #[cfg_attr(not(test), allow(dead_code))] // the tests' (`#[path]`) read it
    pub const fn min(self) -> usize {
        match self {
            Arity::Exactly(n) | Arity::AtLeast(n) | Arity::Between(n, _) => n,
        }
    }

    /// The most arguments accepted, if bounded.
    #[cfg_attr(not(test), allow(dead_code))] // the tests' (`#[path]`) read it
    pub const fn max(self) -> Option<usize> {
        match self {
            Arity::Exactly(n) | Arity::Between(_, n) => Some(n),
            Arity::AtLeast(_) => None,
        }
    }

    /// Whether a call with `count` arguments (the name included) has a valid count.
    #[inline]
    pub const fn accepts(self, count: usize) -> bool {
        match self {
            Arity::Exactly(n) => count == n,
            Arity::AtLeast(min) => count >= min,
            Arity::Between(min, max) => count >= min && count <= max,
        }
    }
}

/// What a command does with its key (argument 1 for every command of this module), for its
/// key spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAccess {
    /// Reads the value's content (RO, ACCESS).
    Read,
    /// Reads only the value's metadata (RO).
    ReadMeta,
    /// Adds to the value, or creates it (RW, INSERT).
    Insert,
    /// Overwrites part of the value (RW, UPDATE).
    Update,
    /// Replaces the value (OW, UPDATE) with one computed from the keys after it, which it
    /// reads (RO, ACCESS): argument 1 is the destination, every later argument a source key.
    Replace,
}

impl KeyAccess {
    /// Whether the key spec says RW (else RO).
    #[cfg_attr(not(test), allow(dead_code))] // the tests' (`#[path]`) read it
    pub const fn writes(self) -> bool {
        matches!(
            self,
            KeyAccess::Insert | KeyAccess::Update | KeyAccess::Replace
        )
    }

    /// The legacy key range Redis is told at registration, `(first, last, step)`: argument 1
    /// alone, or for `Replace` every argument from 1 on (`-1`: the last).
    pub const fn key_range(self) -> (i32, i32, i32) {
        match self {
            KeyAccess::Replace => (1, -1, 1),
            _ => (1, 1, 1),
        }
    }
}

/// The type of an argument, as `COMMAND DOCS` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Key,
    String,
    Integer,
    Double,
    /// A bare word (`NONSCALING`).
    PureToken,
    /// One of the sub-arguments.
    OneOf,
}

/// One argument of a command, as `COMMAND DOCS` lists it.
#[derive(Debug, Clone, Copy)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    /// The word that introduces the value (`EXPANSION n`).
    pub token: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
    pub subargs: &'static [Arg],
}

/// A required argument.
pub const fn arg(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
        subargs: &[],
    }
}

/// An optional `TOKEN value` argument.
pub const fn option(name: &'static str, token: &'static str, kind: ArgKind) -> Arg {
    Arg {
        token: Some(token),
        optional: true,
        ..arg(name, kind)
    }
}

/// An optional bare word.
pub const fn word(name: &'static str, token: &'static str) -> Arg {
    option(name, token, ArgKind::PureToken)
}

/// A bare word inside a one-of group.
pub const fn choice(name: &'static str, token: &'static str) -> Arg {
    Arg {
        token: Some(token),
        ..arg(name, ArgKind::PureToken)
    }
}

/// The key, argument 1 of every command.
pub const KEY: Arg = arg("key", ArgKind::Key);

/// One item.
pub const ITEM: Arg = arg("item", ArgKind::String);

/// One or more items.
pub const ITEMS: Arg = Arg {
    multiple: true,
    ..ITEM
};

/// Everything a table says about one command.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// As registered: Redis names the command by this spelling in wrong-arity errors,
    /// `COMMAND INFO` and `INFO commandstats` (`cmdstat_bf.add`), which monitoring reads.
    pub name: &'static str,
    /// Redis's command flags (`"write deny-oom"`).
    pub flags: &'static str,
    pub arity: Arity,
    pub key: KeyAccess,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// The version that introduced the command (`None`: not documented).
    pub since: Option<&'static str>,
    pub args: &'static [Arg],
}

impl CommandSpec {
    /// Whether the flags mark the command as a write.
    pub fn is_write(&self) -> bool {
        self.has_flag("write")
    }

    /// Whether the flags mark the command as read-only.
    pub fn is_readonly(&self) -> bool {
        self.has_flag("readonly")
    }

    /// Whether the flags mark the command as fast.
    pub fn is_fast(&self) -> bool {
        self.has_flag("fast")
    }

    /// The ACL categories (Redis 7.2+) that the flags imply, besides the structure's own:
    /// `write` for a write, `read` for a read-only command, and `fast`, else `slow`, as Redis
    /// files its own commands. Derived rather than written in the table, so that flags and
    /// categories cannot disagree.
    pub fn acl_categories(&self) -> impl Iterator<Item = &'static str> {
        let access = if self.is_write() {
            Some("write")
        } else if self.is_readonly() {
            Some("read")
        } else {
            None
        };
        let speed = if self.is_fast() { "fast" } else { "slow" };
        access.into_iter().chain(Some(speed))
    }

    fn has_flag(&self, flag: &str) -> bool {
        self.flags.split(' ').any(|f| f == flag)
    }
}

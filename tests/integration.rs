//! Every integration test in one binary: the files beside this one are its modules, so the
//! harness (`common`), the command tables (`table`) and the dependencies are compiled and
//! linked once rather than once per file. Each test spawns its own servers; run one file's
//! tests with a filter, e.g. `cargo test --release -p layerbloom --test integration
//! persistence::` (a filter is a substring: `commands::` also runs `cf_commands::`).

#[macro_use]
mod common;
mod table;

mod cf_commands;
mod cf_compat;
mod cf_error;
mod clients;
mod cluster;
mod commands;
mod compat;
mod defrag;
mod docs;
mod hostile;
mod hostile_glue;
mod hosts;
mod huge_pages;
mod limits;
mod merge;
mod operations;
mod oracle;
mod persistence;
mod recovery;
mod replication;
mod replication_workload;
mod replies;
mod stalls;
mod window;

//! The integration tests' shared harness, split by concern into the modules below.

mod server;

pub use server::*;

//! The Bloom filter's commands (`BF.*`).

pub mod args;
pub mod handlers;

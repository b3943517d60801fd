//! The scalable Bloom filter: a chain of layers, each blocked (layerbloom's cache-local
//! layout, the default) or classic (RedisBloom's, bit for bit), and its byte formats.
//!
//! `layer` says what a chain asks of a layer, `chain` is the chain over any kind of layer,
//! `filter` the filter a key holds (a chain of one kind or the other); `blocked` and
//! `classic` are the two kinds with their layouts, `sizing` (and `shapes.in`) the blocked
//! layout's sizing, `health` the estimates read from a filter's bits, `merge` the union of
//! compatible filters, `codec` its byte formats.

pub mod blocked;
pub mod chain;
pub mod classic;
pub mod codec;
pub mod filter;
pub mod health;
pub mod layer;
pub mod math;
pub mod merge;
pub mod sizing;
pub mod spec;

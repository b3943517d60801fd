//! The scalable Bloom filter: a chain of layers, each blocked (layerbloom's cache-local
//! layout, the default) or classic (RedisBloom's, bit for bit), and its byte formats.

pub mod blocked;
pub mod chain;
pub mod classic;
pub mod codec;
pub mod health;
pub mod sizing;

//! Unit and property tests of the cuckoo core; `fixtures` checks it against RedisBloom's data.

mod fixtures;
mod support;

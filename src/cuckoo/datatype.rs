//! The native data types of cuckoo filters and their callbacks. `MBbloomCF` is RedisBloom's
//! type (so RDB files and DUMP payloads move both ways): encoding version 4 is RedisBloom's
//! current one, written and read; 0..3 (RedisBloom 1.x / 2.0) are read. `LBcuckoo-` holds
//! the extension's filters (a rate of one's choosing, `rated_codec`): a type of its own, so
//! that RedisBloom refuses such a value by its type instead of misreading its slots, and so
//! that its encoding version is its own. Both hold an `AnyFilter` and share every callback
//! but the loader. The callbacks are the shared ones (`type_callbacks`), with the shared RDB field reader and RESTORE limits.

use std::ffi::{c_int, c_void, CStr};

use layerbloom_filter::cuckoo::codec::{self, RdbField};
use layerbloom_filter::cuckoo::AnyFilter;
use layerbloom_filter::format::CodecError;
use layerbloom_filter::FilterError;
use redis_module::{native_types::RedisType, raw};

use crate::memory::Limits;
use crate::raw_api::{Digest, Io};
use crate::type_callbacks::{self, type_methods, StoredValue};

pub static CUCKOO_TYPE: RedisType = RedisType::new(
    "MBbloomCF",
    codec::ENCVER,
    type_methods!(AnyFilter, rdb_load),
);

/// The extension's type (see the module documentation).
pub use rated::RATED_CUCKOO_TYPE;

/// The type a filter is stored under.
pub fn type_of(filter: &AnyFilter) -> &'static RedisType {
    if filter.is_rated() {
        &RATED_CUCKOO_TYPE
    } else {
        &CUCKOO_TYPE
    }
}

mod rated {
    use super::*;
    use layerbloom_filter::cuckoo::rated_codec;

    pub static RATED_CUCKOO_TYPE: RedisType = RedisType::new(
        "LBcuckoo-",
        rated_codec::ENCVER,
        type_methods!(AnyFilter, rdb_load),
    );

    extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
        load(rdb, encver, "extension cuckoo", |io, encver, budget| {
            rated_codec::decode_rdb(io, encver, budget).map(AnyFilter::from)
        })
    }
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    load(rdb, encver, "cuckoo", |io, encver, budget| {
        codec::decode_rdb(io, encver, budget).map(AnyFilter::Redis)
    })
}

/// Loads a value with `decode`, logging and refusing what it refuses.
fn load(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
    what: &str,
    decode: impl FnOnce(&mut Io, i32, Option<u64>) -> Result<AnyFilter, CodecError>,
) -> *mut c_void {
    let what = format_args!("{what} filter (encoding version {encver})");
    type_callbacks::load(rdb, what, |io| {
        // A client's RESTORE is charged against the limits as it is read, before each
        // sub-filter's slots are allocated; loads from disk, the AOF or a primary are not.
        let budget = Limits::for_restore(io).map(|l| l.bytes());
        decode(io, encver, budget).map_err(|e| e.to_string())
    })
}

impl StoredValue for AnyFilter {
    const LOG_PREFIX: &'static str = "cuckoo ";
    const LOAD_CHUNK: &'static CStr = c"CF.LOADCHUNK";

    fn entered(&self) {
        crate::cuckoo::stats::entered(self);
    }

    fn freed(&self) {
        crate::cuckoo::stats::freed(self);
    }

    fn rdb_save(&self, io: &mut Io) {
        for field in self.rdb_fields() {
            match field {
                RdbField::Unsigned(v) => io.save_unsigned(v),
                RdbField::Buffer(bytes) => io.save_string_buffer(bytes),
            }
        }
    }

    fn aof_chunks(&self, emit: &mut dyn FnMut(i64, &[u8])) {
        emit(1, &self.header());
        for (it, piece) in slot_chunks(self) {
            emit(it as i64, piece);
        }
    }

    fn digest(&self, digest: &mut Digest) {
        digest.add_string_buffer(&self.header());
        for (bytes, _) in self.slot_arrays() {
            digest.add_string_buffer(bytes);
        }
    }

    fn mem_usage(&self) -> u64 {
        self.memory_usage()
    }

    fn free_size(&self) -> (usize, u64) {
        (self.sub_filter_count(), self.memory_usage())
    }

    fn clone_value(&self) -> Result<Self, FilterError> {
        self.try_clone()
    }

    fn relocate(&mut self, to: &mut dyn layerbloom_filter::relocate::Relocator) {
        AnyFilter::relocate(self, to);
    }
}

/// The `CF.LOADCHUNK` data chunks that rebuild `filter`'s slots after its header: every
/// piece (at most `MAX_CHUNK_BYTES`, whole slot groups for the extension) that holds a
/// fingerprint, with its iterator (the position just after it). Unlike `CF.SCANDUMP`, a
/// filter with no items still has its chunks: an AOF rewrite keeps every filter as it is.
fn slot_chunks(filter: &AnyFilter) -> impl Iterator<Item = (u64, &[u8])> {
    let mut start = 0u64;
    filter
        .slot_arrays()
        .into_iter()
        .flat_map(move |(bytes, piece)| {
            let base = start;
            start += bytes.len() as u64;
            bytes
                .chunks(piece as usize)
                .scan(base, |at, piece| {
                    *at += piece.len() as u64;
                    Some((1 + *at, piece))
                })
                .filter(|(_, piece)| piece.iter().any(|&b| b != 0))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use layerbloom_filter::cuckoo::{CuckooFilter, Limits, Params};
    use layerbloom_filter::format::Strictness;

    #[test]
    fn aof_chunks_skip_empty_pieces_and_end_after_their_bytes() {
        let mut f = AnyFilter::Redis(CuckooFilter::new(64, Params::default(), u64::MAX).unwrap());
        assert_eq!(slot_chunks(&f).count(), 0);
        f.add(b"x", &Limits::default()).unwrap();
        let chunks: Vec<_> = slot_chunks(&f).collect();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].0, 1 + 128);
        assert_eq!(chunks[0].1, f.slot_arrays()[0].0);
        // Rebuilt from the header and the chunks, the copy is the same filter.
        let mut copy = AnyFilter::from_header(&f.header(), Strictness::Rdb, u64::MAX).unwrap();
        for (it, piece) in chunks {
            copy.load_chunk(it, piece).unwrap();
        }
        assert_eq!(copy, f);
    }

    #[test]
    fn an_extension_filter_s_aof_chunks_rebuild_it() {
        use layerbloom_filter::cuckoo::rate::Widths;
        use layerbloom_filter::cuckoo::RatedFilter;
        let p = Params {
            bucket_size: 4,
            max_iterations: 500,
            expansion: 2,
        };
        let widths = Widths {
            first: 11,
            second: 14,
        };
        let mut f = AnyFilter::from(RatedFilter::new(64, p, widths, 0.003, u64::MAX).unwrap());
        for i in 0..600 {
            f.add(format!("{i}").as_bytes(), &Limits::default())
                .unwrap();
        }
        assert!(f.sub_filter_count() > 1);
        let mut copy = AnyFilter::from_header(&f.header(), Strictness::Rdb, u64::MAX).unwrap();
        assert!(copy.is_rated());
        for (it, piece) in slot_chunks(&f) {
            copy.load_chunk(it, piece).unwrap();
        }
        assert_eq!(copy, f);
    }
}

//! The native data type `LBbloomW-` of windowed Bloom filters (`BF.RESERVE ... WINDOW ms`)
//! and its callbacks. A type of its own: RedisBloom has no windowed filters, and a name it does
//! not know makes its loader refuse such a value cleanly instead of misreading it. The
//! callbacks are the shared ones (`type_callbacks`), with the shared RESTORE limits
//! (`memory.rs`) and the Bloom type's `BF.LOADCHUNK` stream (`bloom/datatype.rs`); the byte
//! formats are the core's
//! (`layerbloom_filter::window::codec`).
//!
//! - RDB / DUMP: the core's RDB encoding, one string buffer per piece it makes.
//! - AOF rewrite: the value's `BF.LOADCHUNK` stream (the header pins the spec, the origin, the
//!   head and every slice's id and layers; the chunks are the bit arrays), which rebuilds the
//!   same slices. Replay never reads a clock.
//! - Digest: the encoded header (the whole spec, origin, head, each slice's id and chain
//!   header), then every slice's bit arrays: equal on a replica and after AOF replay or an
//!   RDB reload.

use std::ffi::{c_int, c_void, CStr};

use layerbloom_filter::window::{codec, WindowedFilter};
use layerbloom_filter::FilterError;
use redis_module::{native_types::RedisType, raw};

use crate::bloom::datatype::{emit_dump, save_pieces};
use crate::memory::Limits;
use crate::raw_api::{Digest, Io};
use crate::type_callbacks::{self, type_methods, StoredValue};

/// The type's encoding version (its own: no other module writes this type).
pub const ENCODING_VERSION: i32 = codec::ENCODING_VERSION;

pub static WINDOW_TYPE: RedisType = RedisType::new(
    "LBbloomW-",
    ENCODING_VERSION,
    type_methods!(WindowedFilter, rdb_load),
);

impl StoredValue for WindowedFilter {
    const LOG_PREFIX: &'static str = "window ";
    const LOAD_CHUNK: &'static CStr = c"BF.LOADCHUNK";

    fn entered(&self) {
        crate::bloom::stats::window_entered();
    }

    fn freed(&self) {
        crate::bloom::stats::window_freed();
    }

    fn rdb_save(&self, io: &mut Io) {
        save_pieces(io, &codec::encode_header(self), codec::rdb_pieces(self));
    }

    /// The header pins the spec, the origin, the head and every slice's id and layers, so the
    /// chunks (the bit arrays) rebuild the same slices.
    fn aof_chunks(&self, emit: &mut dyn FnMut(i64, &[u8])) {
        emit_dump(
            &codec::encode_header(self),
            |it| codec::dump_chunk(self, it),
            emit,
        );
    }

    fn digest(&self, digest: &mut Digest) {
        // The encoded header pins the whole spec (capacity, error, expansion, layout), the
        // origin, the head and each slice's id and chain header.
        digest.add_string_buffer(&codec::encode_header(self));
        for (_, slice) in self.slice_filters() {
            for bytes in slice.layer_bytes() {
                digest.add_string_buffer(bytes);
            }
        }
    }

    /// Its box, its slice table and every slice's blocks, as the allocator sized them.
    fn mem_usage(&self) -> u64 {
        type_callbacks::allocated_bytes(self, |each| self.allocations(each), || self.memory_usage())
    }

    fn free_size(&self) -> (usize, u64) {
        (self.layer_count(), self.memory_usage())
    }

    fn clone_value(&self) -> Result<Self, FilterError> {
        self.try_clone()
    }

    fn relocate(&mut self, to: &mut dyn layerbloom_filter::relocate::Relocator) {
        WindowedFilter::relocate(self, to);
    }
}

/// The header that rebuilds `filter` (what a creation replicates as, in `BF.LOADCHUNK key 1`).
pub fn creation_header(filter: &WindowedFilter) -> Vec<u8> {
    codec::encode_header(filter)
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    type_callbacks::load(rdb, "windowed Bloom filter", |io| {
        if encver != ENCODING_VERSION {
            return Err(format!(
                "encoding version {encver} is not one this build of layerbloom reads (its own \
                 is {ENCODING_VERSION})"
            ));
        }
        // A client's RESTORE is held to the limits before anything is allocated.
        let budget = Limits::for_restore(io).map(|l| l.bytes());
        // A client's RESTORE on a primary is also held to its clock (see
        // `WindowHeader::clock_error`); loading from disk or a primary never reads one.
        let clock = budget
            .is_some()
            .then(|| io.context_flags())
            .flatten()
            .filter(crate::clock::applies)
            .map(|_| crate::clock::now_ms());
        let (filter, warnings) = codec::load_rdb(io, budget, clock).map_err(|e| e.to_string())?;
        for warning in warnings {
            crate::log_limit::load_warning(
                budget.is_some(),
                &format!("layerbloom: a windowed filter loaded with: {warning}"),
            );
        }
        Ok(filter)
    })
}

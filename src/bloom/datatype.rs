//! The native data type `MBbloom--`: its loader and what the shared callbacks
//! (`type_callbacks`) need of its values, each a few lines around the core's codec.

use std::ffi::{c_int, c_void, CStr};

use layerbloom_filter::bloom::chain::MAX_LAYERS;
use layerbloom_filter::bloom::codec::{self, FilterLoader};
use layerbloom_filter::relocate::Relocator;
use layerbloom_filter::{FilterError, ScalableFilter};
use redis_module::{native_types::RedisType, raw};

use crate::memory::Limits;
use crate::raw_api::{Digest, Io};
use crate::type_callbacks::{self, load_buffer, type_methods, StoredValue};

/// The type's encoding version for layerbloom's own values. RedisBloom writes 0 to 4 under
/// the same type name; far above them, the loader tells its own values from RedisBloom's,
/// which it reads too (as classic filters).
pub const ENCODING_VERSION: i32 = 100;

/// The data type, registered under RedisBloom's name so RDB files and DUMP payloads name it
/// the same way.
pub static BLOOM_TYPE: RedisType = RedisType::new(
    "MBbloom--",
    ENCODING_VERSION,
    type_methods!(ScalableFilter, rdb_load),
);

impl StoredValue for ScalableFilter {
    const LOG_PREFIX: &'static str = "";
    const LOAD_CHUNK: &'static CStr = c"BF.LOADCHUNK";

    fn entered(&self) {
        crate::bloom::stats::entered(self);
    }

    fn freed(&self) {
        crate::bloom::stats::freed(self);
    }

    fn rdb_save(&self, io: &mut Io) {
        save_pieces(io, &codec::encode_rdb_header(self), codec::rdb_pieces(self));
    }

    fn aof_chunks(&self, emit: &mut dyn FnMut(i64, &[u8])) {
        emit_dump(
            &codec::encode_header(self),
            |it| codec::dump_chunk(self, it),
            emit,
        );
    }

    fn digest(&self, digest: &mut Digest) {
        digest.add_string_buffer(&codec::encode_header(self));
        for bytes in self.layer_bytes() {
            digest.add_string_buffer(bytes);
        }
    }

    fn mem_usage(&self) -> u64 {
        allocated_bytes(self)
    }

    fn free_size(&self) -> (usize, u64) {
        (self.layer_count(), self.memory_usage())
    }

    fn clone_value(&self) -> Result<Self, FilterError> {
        self.try_clone()
    }

    fn relocate(&mut self, to: &mut dyn Relocator) {
        ScalableFilter::relocate(self, to);
    }

    fn moved(&self, from: usize) {
        crate::bloom::stats::moved(from, self);
    }
}

/// Saves an RDB header and the pieces that follow it, a string buffer each.
pub(crate) fn save_pieces(io: &mut Io, header: &[u8], pieces: Vec<&[u8]>) {
    io.save_string_buffer(header);
    for piece in pieces {
        io.save_string_buffer(piece);
    }
}

/// Emits a `BF.LOADCHUNK` stream: `header` (iterator 1), then every chunk `dump_chunk`
/// yields, but those with no bit set: the header creates zeroed bit arrays, so they need no
/// command.
pub(crate) fn emit_dump<'a>(
    header: &[u8],
    mut dump_chunk: impl FnMut(i64) -> (i64, &'a [u8]),
    emit: &mut dyn FnMut(i64, &[u8]),
) {
    emit(1, header);
    let mut it = 1;
    loop {
        let (next, data) = dump_chunk(it);
        if next == 0 {
            break;
        }
        if data.iter().any(|&b| b != 0) {
            emit(next, data);
        }
        it = next;
    }
}

/// The bytes a filter really occupies in Redis's allocator: its box, its layer table and its
/// bit arrays, each as the size class the allocator gave it. This is what `MEMORY USAGE` and
/// `BF.INFO` report. `filter` must be the value stored under a key (a `Box` made by this
/// module).
pub fn allocated_bytes(filter: &ScalableFilter) -> u64 {
    type_callbacks::allocated_bytes(
        filter,
        |each| filter.allocations(each),
        || filter.memory_usage(),
    )
}

/// A client's RESTORE may not bring a filter of more layers than a filter may grow to; one
/// loaded from disk, a primary or the AOF may (RedisBloom sets no bound, so migrations never
/// fail on it), with a warning that it cannot grow.
fn within_layer_cap(layers: usize, from_client: bool) -> Result<(), String> {
    if layers <= MAX_LAYERS {
        return Ok(());
    }
    if from_client {
        return Err(format!(
            "a RESTORE of it would bring {layers} layers, over the {MAX_LAYERS} a filter may have"
        ));
    }
    crate::log::warning(
        None,
        &format!(
            "layerbloom: a filter loaded with {layers} layers, more than the {MAX_LAYERS} a \
             filter may grow to: it answers, but adds that need a new layer are refused"
        ),
    );
    Ok(())
}

fn load_value(io: &mut Io, encver: c_int) -> Result<ScalableFilter, String> {
    let limits = Limits::for_restore(io);
    if (0..=codec::REDISBLOOM_MAX_ENCVER).contains(&encver) {
        // A client's RESTORE: the layer cap and the memory limits are applied as the value is
        // read (its layer count and each layer's size come before the layer's bits).
        let budget = limits.map(|l| l.bytes());
        let (filter, warnings) =
            codec::decode_redisbloom_value_within(io, encver, budget).map_err(|e| e.to_string())?;
        for warning in warnings {
            crate::log_limit::load_warning(
                limits.is_some(),
                &format!(
                "layerbloom: a RedisBloom filter (encoding version {encver}) loaded with: {warning}"
            ),
            );
        }
        return within_layer_cap(filter.layer_count(), limits.is_some()).map(|()| filter);
    }
    if encver != ENCODING_VERSION {
        return Err(format!(
            "encoding version {encver} is not one this build of layerbloom reads \
             (its own is {ENCODING_VERSION}; RedisBloom's are 0 to 4)"
        ));
    }
    let header = load_buffer(io)?;
    let (header, warnings) =
        codec::decode_rdb_header(header.as_slice()).map_err(|e| e.to_string())?;
    for warning in warnings {
        crate::log_limit::load_warning(
            limits.is_some(),
            &format!("layerbloom: a filter loaded with: {warning}"),
        );
    }
    within_layer_cap(header.layer_lengths().len(), limits.is_some())?;
    if let Some(limits) = limits {
        // Checked before anything is allocated: zero bit arrays compress ~110:1 in a DUMP
        // payload, so a small payload may describe gigabytes.
        let needed = header.memory_bytes();
        if needed > limits.bytes() {
            let which = if limits.bytes() < limits.filter {
                "what maxmemory leaves"
            } else {
                "bf-max-filter-memory"
            };
            return Err(format!(
                "a RESTORE of it would take {needed} bytes, over {which} ({} bytes)",
                limits.bytes()
            ));
        }
    }
    let mut loader = FilterLoader::new(header).map_err(|e| e.to_string())?;
    while loader.next_piece_len().is_some() {
        let piece = load_buffer(io)?;
        loader
            .push_piece(piece.as_slice())
            .map_err(|e| e.to_string())?;
    }
    loader.finish().map_err(|e| e.to_string())
}

extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    type_callbacks::load(rdb, "Bloom filter", |io| load_value(io, encver))
}

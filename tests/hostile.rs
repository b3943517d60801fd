//! Hostile input. Every way a client can hand the module bytes or numbers it did not make
//! itself: RESTORE payloads (layerbloom's own format and RedisBloom's), `BF.LOADCHUNK`
//! headers and chunks, absurd `BF.RESERVE` / `BF.INSERT` values, arguments of hundreds of
//! megabytes, a server at `maxmemory`, and frees of very large filters.
//!
//! The payloads are built here, field by field, with a valid CRC-64: Redis's checksum passes
//! and the module's decoder is what gets attacked. The rule each test enforces: the input is
//! refused with an error, or it loads as a filter that is safe to use (every command works on
//! it, an item added to it is found, it copies, dumps and reloads to the same digest), and in
//! every case the server keeps serving and never logs a panic of the module.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{
    aof_file, assert_pong, bf_info, crc64, digest, error_of, info_i64, items, key_exists,
    loadchunks, madd, mexists, module_type_id, rdb_len, scandump, seal, Exec, Field, Payload,
    RbChain, RbLayer, Rng, Server, LAYERBLOOM_ENCVER, OP_DOUBLE, OP_EOF, OP_FLOAT, OP_STRING,
    OP_UINT, RDB_TYPE_MODULE_2, REDISBLOOM_ENCVER,
};
use redis::{ConnectionLike, Value};

// =============================================================================================
// Reading real DUMP payloads (the builder is in tests/common).
// =============================================================================================

/// Reads a DUMP payload back into fields (real DUMPs: strings may be LZF-compressed or
/// integer-encoded).
struct PayloadReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// An RDB length or a special encoding.
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl PayloadReader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes[self.pos];
        self.pos += 1;
        b
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        s
    }

    fn len_or_encoding(&mut self) -> Len {
        let first = self.byte();
        match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3f)),
            1 => Len::Plain((u64::from(first & 0x3f) << 8) | u64::from(self.byte())),
            2 if first == 0x80 => Len::Plain(u64::from(u32::from_be_bytes(
                self.take(4).try_into().unwrap(),
            ))),
            2 if first == 0x81 => Len::Plain(u64::from_be_bytes(self.take(8).try_into().unwrap())),
            3 => Len::Encoded(first & 0x3f),
            _ => panic!("bad RDB length byte {first:#x}"),
        }
    }

    fn len(&mut self) -> u64 {
        match self.len_or_encoding() {
            Len::Plain(n) => n,
            Len::Encoded(e) => panic!("unexpected encoded length {e}"),
        }
    }

    fn string(&mut self) -> Vec<u8> {
        match self.len_or_encoding() {
            Len::Plain(n) => self.take(n as usize).to_vec(),
            Len::Encoded(0) => (self.byte() as i8).to_string().into_bytes(),
            Len::Encoded(1) => i16::from_le_bytes(self.take(2).try_into().unwrap())
                .to_string()
                .into_bytes(),
            Len::Encoded(2) => i32::from_le_bytes(self.take(4).try_into().unwrap())
                .to_string()
                .into_bytes(),
            Len::Encoded(3) => {
                let compressed = self.len() as usize;
                let plain = self.len() as usize;
                let data = self.take(compressed).to_vec();
                lzf_decompress(&data, plain)
            }
            Len::Encoded(e) => panic!("unknown string encoding {e}"),
        }
    }
}

/// LZF decompression (the format Redis compresses RDB strings with): a control byte below 32
/// starts a literal run of `ctrl + 1` bytes; otherwise its top 3 bits are a length (7 means
/// "add the next byte"), plus 2, copied from `((ctrl & 31) << 8) + next byte + 1` bytes back.
fn lzf_decompress(input: &[u8], expected: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(expected);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            out.extend_from_slice(&input[i..i + ctrl + 1]);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(input[i]);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(input[i]) + 1;
            i += 1;
            let start = out.len() - back;
            for j in 0..len + 2 {
                out.push(out[start + j]);
            }
        }
    }
    assert_eq!(out.len(), expected, "LZF output length");
    out
}

/// Parses a real DUMP payload, checking its footer and checksum.
fn parse_payload(bytes: &[u8]) -> Payload {
    assert!(bytes.len() > 10, "payload too short");
    let (rest, crc) = bytes.split_at(bytes.len() - 8);
    assert_eq!(
        crc64(rest),
        u64::from_le_bytes(crc.try_into().unwrap()),
        "checksum of a real DUMP: the CRC-64 here is not Redis's"
    );
    let (body, version) = rest.split_at(rest.len() - 2);
    let mut r = PayloadReader {
        bytes: body,
        pos: 0,
    };
    let type_byte = r.byte();
    let module_id = r.len();
    let mut fields = Vec::new();
    loop {
        let op = r.len();
        match op as u8 {
            OP_EOF => break,
            OP_UINT | 1 => fields.push(Field::Uint(r.len())),
            OP_FLOAT => fields.push(Field::Raw(r.take(4).to_vec())),
            OP_DOUBLE => fields.push(Field::Double(f64::from_le_bytes(
                r.take(8).try_into().unwrap(),
            ))),
            OP_STRING => fields.push(Field::Str(r.string())),
            other => panic!("unknown module opcode {other}"),
        }
    }
    assert_eq!(r.pos, body.len(), "bytes after the module EOF");
    Payload {
        type_byte,
        module_id,
        fields,
        eof: true,
        rdb_version: u16::from_le_bytes(version.try_into().unwrap()),
    }
}

// =============================================================================================
// layerbloom's header, format version 1 (filter/src/bloom/codec.rs).
// =============================================================================================

mod v1 {
    pub const VERSION: usize = 8;
    pub const RESERVED: usize = 9;
    pub const EXPANSION: usize = 12;
    pub const ERROR: usize = 16;
    pub const ITEMS: usize = 24;
    pub const LAYERS: usize = 32;
    pub const FIRST_LAYER: usize = 36;
    pub const LAYER_LEN: usize = 40;
    pub const L_CAPACITY: usize = 0;
    pub const L_ERROR: usize = 8;
    pub const L_ITEMS: usize = 16;
    pub const L_BLOCKS: usize = 24;
    pub const L_BLOCKS_PER_ITEM: usize = 32;
    pub const L_HASHES: usize = 33;
    pub const L_RESERVED: usize = 34;

    pub fn layer(i: usize, field: usize) -> usize {
        FIRST_LAYER + i * LAYER_LEN + field
    }

    pub fn get_u64(h: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(h[at..at + 8].try_into().unwrap())
    }

    pub fn get_u32(h: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(h[at..at + 4].try_into().unwrap())
    }

    pub fn put(h: &mut [u8], at: usize, bytes: &[u8]) {
        h[at..at + bytes.len()].copy_from_slice(bytes);
    }

    pub fn layer_count(h: &[u8]) -> usize {
        get_u32(h, LAYERS) as usize
    }
}

/// A filter's parts as a DUMP carries them: its header and its bit array pieces.
#[derive(Debug, Clone)]
struct Parts {
    header: Vec<u8>,
    pieces: Vec<Vec<u8>>,
}

fn dump_parts(con: &mut redis::Connection, key: &str) -> Parts {
    let bytes: Vec<u8> = con.q(&cmd!("DUMP", key));
    let p = parse_payload(&bytes);
    assert_eq!(p.type_byte, RDB_TYPE_MODULE_2);
    assert_eq!(
        p.module_id,
        module_type_id(b"MBbloom--", LAYERBLOOM_ENCVER),
        "the module id computed here must be the one Redis writes"
    );
    let header = p.fields[0].str().to_vec();
    assert!(
        header.starts_with(b"LAYERBLM") && header[v1::VERSION] == 1,
        "these tests mutate header format version 1"
    );
    let pieces = p.fields[1..].iter().map(|f| f.str().to_vec()).collect();
    Parts { header, pieces }
}

// =============================================================================================
// The server under attack and the checks after each attempt.
// =============================================================================================

/// Replies that a write on a strange (but accepted) filter may end with.
const ADD_ERRORS: [&str; 2] = [
    "ERR non scaling filter is full",
    "ERR problem inserting into filter",
];

/// What RESTORE answers when the module refuses a value.
const BAD_DATA_FORMAT: &str = "ERR Bad data format";

fn hostile_server() -> Server {
    Server::builder().start()
}

/// A connection that fails instead of waiting forever if the server stops answering.
fn conn(s: &Server) -> redis::Connection {
    let con = s.conn();
    con.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("read timeout");
    con
}

/// RESTOREs a payload: `Ok` when it loaded, `Err(text)` when refused.
fn restore(con: &mut redis::Connection, key: &str, payload: &[u8]) -> Result<(), String> {
    let v = con.raw(&cmd!("RESTORE", key, 0, payload));
    match error_of(&v) {
        Some(e) => Err(e),
        None => {
            assert!(matches!(v, Value::Okay), "RESTORE replied {v:?}");
            Ok(())
        }
    }
}

/// RESTORE must refuse the payload as bad data (not as a bad checksum: that would mean the
/// payload builder, not the module, was tested), and create nothing.
fn assert_refused(con: &mut redis::Connection, key: &str, payload: &[u8], what: &str) {
    match restore(con, key, payload) {
        Err(e) => assert_eq!(e, BAD_DATA_FORMAT, "{what}: RESTORE refused with {e:?}"),
        Ok(()) => panic!("{what}: RESTORE accepted a payload that must be refused"),
    }
    assert!(
        !key_exists(con, key),
        "{what}: a refused RESTORE left a key"
    );
    assert_pong(con);
}

/// Outcome counts of a batch of attempts.
#[derive(Debug, Default)]
struct Tally {
    refused: usize,
    loaded: usize,
}

/// RESTOREs a payload that may be refused or accepted; an accepted one must be a filter
/// that is safe to use. Returns whether it loaded.
fn refused_or_safe(
    con: &mut redis::Connection,
    key: &str,
    payload: &[u8],
    what: &str,
    tally: &mut Tally,
) -> bool {
    match restore(con, key, payload) {
        Err(e) => {
            assert_eq!(e, BAD_DATA_FORMAT, "{what}: RESTORE refused with {e:?}");
            assert!(
                !key_exists(con, key),
                "{what}: a refused RESTORE left a key"
            );
            tally.refused += 1;
            assert_pong(con);
            false
        }
        Ok(()) => {
            assert_usable(con, key, what);
            tally.loaded += 1;
            true
        }
    }
}

/// Every command works on the filter at `key`, without crashing the server: reads, adds (an
/// added item is found), SCANDUMP replayed through LOADCHUNK, DUMP/RESTORE and COPY give
/// the same digest, MEMORY USAGE answers.
fn assert_usable(con: &mut redis::Connection, key: &str, what: &str) {
    let t: String = con.q(&cmd!("TYPE", key));
    assert_eq!(t, "MBbloom--", "{what}: TYPE");
    let info = bf_info(con, key);
    // Capacity and item counts of loaded filters are checked on their own (see
    // `loaded_filters_report_capacity_and_items_as_non_negative_integers`).
    assert!(
        info.size > 0 && info.filters >= 1,
        "{what}: BF.INFO answers impossible figures: {info:?}"
    );
    if info.items < i64::MAX {
        // (BF.INFO saturates counts at i64::MAX; those are checked on their own.)
        assert_eq!(con.q::<i64>(&cmd!("BF.CARD", key)), info.items, "{what}");
    }
    for field in ["CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"] {
        let v = con.raw(&cmd!("BF.INFO", key, field));
        assert!(error_of(&v).is_none(), "{what}: BF.INFO {field}: {v:?}");
    }
    let v = con.raw(&cmd!("BF.DEBUG", key));
    assert!(matches!(v, Value::Array(_)), "{what}: BF.DEBUG {v:?}");
    let probes = items(&format!("{what}-probe"), 100);
    mexists(con, key, &probes);
    con.q::<i64>(&cmd!("BF.EXISTS", key, "x"));

    // Adds: each item answered 1 is found afterwards; an error can only end the reply.
    let fresh = items(&format!("{what}-fresh"), 40);
    let mut c = cmd!("BF.MADD", key);
    for i in &fresh {
        c.arg(i.as_slice());
    }
    let v = con.raw(&c);
    let Value::Array(replies) = &v else {
        panic!("{what}: BF.MADD replied {v:?}")
    };
    let mut added = Vec::new();
    for (n, r) in replies.iter().enumerate() {
        match r {
            Value::Int(1) => added.push(fresh[n].clone()),
            Value::Int(0) => {}
            other => {
                let e = error_of(other).unwrap_or_else(|| panic!("{what}: BF.MADD {v:?}"));
                assert!(
                    ADD_ERRORS.iter().any(|p| e.starts_with(p)),
                    "{what}: BF.MADD error {e:?}"
                );
                assert_eq!(n + 1, replies.len(), "{what}: an error ends the reply");
            }
        }
    }
    assert!(
        mexists(con, key, &added).iter().all(|&x| x),
        "{what}: an item just added is not found"
    );

    // The filter copies exactly, whichever way.
    let d = digest(con, key);
    let chunks = scandump(con, key);
    let via_chunks = format!("{key}:via-chunks");
    let v = con.raw(&cmd!(
        "BF.LOADCHUNK",
        &via_chunks,
        1,
        chunks[0].1.as_slice()
    ));
    match error_of(&v) {
        None => {
            loadchunks(con, &via_chunks, &chunks[1..]);
            assert_eq!(digest(con, &via_chunks), d, "{what}: SCANDUMP + LOADCHUNK");
        }
        // RedisBloom's RDB loader takes values its LOADCHUNK refuses; a drop-in does the same
        // (REDISBLOOM_COMPAT.md). Any other refusal of a filter's own header is a bug.
        Some(e) => assert!(
            e == "ERR received bad data" && is_lax_header(&chunks[0].1),
            "{what}: LOADCHUNK refused the filter's own SCANDUMP header: {e:?}"
        ),
    }
    let payload: Vec<u8> = con.q(&cmd!("DUMP", key));
    let via_dump = format!("{key}:via-dump");
    con.ok(&cmd!("RESTORE", &via_dump, 0, payload.as_slice()));
    assert_eq!(digest(con, &via_dump), d, "{what}: DUMP + RESTORE");
    let via_copy = format!("{key}:via-copy");
    assert_eq!(con.q::<i64>(&cmd!("COPY", key, &via_copy)), 1);
    assert_eq!(digest(con, &via_copy), d, "{what}: COPY");
    assert!(con.q::<i64>(&cmd!("MEMORY", "USAGE", key)) > 0, "{what}");
    con.q::<i64>(&cmd!("DEL", &via_chunks, &via_dump, &via_copy));
    assert_pong(con);
}

/// Whether a SCANDUMP header has what only the RDB loader tolerates and a client's LOADCHUNK
/// refuses: an item total that is 2^64 - 1 or not exactly the layers' sum; in RedisBloom's
/// format also unknown option bits or a hash count its bits per entry do not give.
fn is_lax_header(h: &[u8]) -> bool {
    fn exact_total(items: u64, counts: impl Iterator<Item = u64>) -> bool {
        let mut counts = counts;
        items != u64::MAX && counts.try_fold(0u64, u64::checked_add) == Some(items)
    }
    if h.starts_with(b"LAYERBLM") {
        let layers = v1::layer_count(h);
        let counts = (0..layers).map(|i| v1::get_u64(h, v1::layer(i, v1::L_ITEMS)));
        return !exact_total(v1::get_u64(h, v1::ITEMS), counts);
    }
    if h.len() < 20 {
        return false;
    }
    let items = u64::from_le_bytes(h[0..8].try_into().unwrap());
    let layers = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
    let options = u32::from_le_bytes(h[12..16].try_into().unwrap());
    if h.len() != 20 + 53 * layers {
        return false;
    }
    let field = |i: usize, at: usize, len: usize| &h[20 + 53 * i + at..20 + 53 * i + at + len];
    let sizes = (0..layers).map(|i| u64::from_le_bytes(field(i, 16, 8).try_into().unwrap()));
    // RedisBloom's rounded ln(2), as the module compares it.
    #[allow(clippy::approx_constant)]
    let stray_hashes = (0..layers).any(|i| {
        let bpe = f64::from_le_bytes(field(i, 32, 8).try_into().unwrap());
        let hashes = u32::from_le_bytes(field(i, 40, 4).try_into().unwrap());
        (0.693147180559945 * bpe).ceil() != f64::from(hashes)
    });
    options & !15 != 0 || stray_hashes || !exact_total(items, sizes)
}

/// The server is alive, answers, and never caught a panic of the module.
fn assert_server_healthy(s: &mut Server) {
    assert!(s.is_running(), "the server process died");
    assert_pong(&mut conn(s));
    let log = s.log();
    for mark in ["layerbloom: panic", "layerbloom: internal error"] {
        assert!(
            !log.contains(mark),
            "the module logged {mark:?}:\n{}",
            log.lines()
                .filter(|l| l.contains("layerbloom"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Source filters of every shape: several layers, non-scaling and full, auto-created, empty,
/// a wide expansion.
fn build_sources(con: &mut redis::Connection) -> Vec<String> {
    con.ok(&cmd!(
        "BF.RESERVE",
        "src:scaling",
        "0.01",
        20,
        "EXPANSION",
        2
    ));
    madd(con, "src:scaling", &items("s", 150));
    assert!(bf_info(con, "src:scaling").filters >= 3);
    con.ok(&cmd!(
        "BF.RESERVE",
        "src:nonscaling",
        "0.001",
        30,
        "NONSCALING"
    ));
    let v = con.raw(&{
        let mut c = cmd!("BF.MADD", "src:nonscaling");
        for i in items("n", 40) {
            c.arg(i);
        }
        c
    });
    assert!(matches!(v, Value::Array(_)), "{v:?}");
    con.q::<i64>(&cmd!("BF.ADD", "src:auto", "x"));
    con.ok(&cmd!("BF.RESERVE", "src:empty", "0.1", 1));
    con.ok(&cmd!(
        "BF.RESERVE",
        "src:wide",
        "0.0001",
        10,
        "EXPANSION",
        7
    ));
    madd(con, "src:wide", &items("w", 100));
    [
        "src:scaling",
        "src:nonscaling",
        "src:auto",
        "src:empty",
        "src:wide",
    ]
    .map(String::from)
    .to_vec()
}

// =============================================================================================
// The payload builder itself.
// =============================================================================================

#[test]
fn payload_builder_reproduces_real_dumps_byte_for_byte() {
    assert_eq!(
        crc64(b"123456789"),
        0xe9c6_d914_c4b8_d9ca,
        "CRC-64/Jones check"
    );
    let mut s = Server::builder().config("rdbcompression", "no").start();
    let mut con = conn(&s);
    for key in build_sources(&mut con) {
        let real: Vec<u8> = con.q(&cmd!("DUMP", &key));
        let parts = dump_parts(&mut con, &key);
        let rebuilt = Payload::layerbloom(&parts.header, &parts.pieces).bytes();
        assert_eq!(
            rebuilt, real,
            "{key}: the builder must write what Redis writes"
        );
        con.ok(&cmd!(
            "RESTORE",
            format!("{key}:rebuilt"),
            0,
            rebuilt.as_slice()
        ));
        assert_eq!(
            digest(&mut con, &format!("{key}:rebuilt")),
            digest(&mut con, &key)
        );
    }
    assert_server_healthy(&mut s);
}

// =============================================================================================
// RESTORE of layerbloom values.
// =============================================================================================

#[test]
fn restore_refuses_every_truncation_of_the_header() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    build_sources(&mut con);
    let parts = dump_parts(&mut con, "src:scaling");
    let mut cases = 0;
    for n in 0..parts.header.len() {
        let p = Payload::layerbloom(&parts.header[..n], &parts.pieces).bytes();
        assert_refused(&mut con, "dst", &p, &format!("header cut to {n} bytes"));
        cases += 1;
    }
    for extra in [1usize, 7, 40, 41] {
        let mut h = parts.header.clone();
        h.extend(std::iter::repeat_n(0u8, extra));
        let p = Payload::layerbloom(&h, &parts.pieces).bytes();
        assert_refused(&mut con, "dst", &p, &format!("header + {extra} bytes"));
        cases += 1;
    }
    eprintln!("{cases} truncated or extended headers refused");
    assert_server_healthy(&mut s);
}

/// What a header mutation makes of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Invalid on its own (or over the memory limit): every decoder refuses it.
    Invalid,
    /// A valid header whose sizes no longer match the bit arrays: RESTORE refuses it,
    /// LOADCHUNK (which sees the header alone) may take it.
    SizeMismatch,
    /// Valid, if strange: refused or loaded as a safe filter.
    Either,
}

/// Edits a header in place.
type Edit = Box<dyn Fn(&mut Vec<u8>)>;

/// A header mutation.
struct Mutation {
    what: String,
    expect: Expect,
    apply: Edit,
}

fn mutation(what: &str, expect: Expect, apply: impl Fn(&mut Vec<u8>) + 'static) -> Mutation {
    Mutation {
        what: what.to_string(),
        expect,
        apply: Box::new(apply),
    }
}

/// Floats no error rate may be.
fn bad_rates() -> Vec<(&'static str, f64)> {
    vec![
        ("NaN", f64::NAN),
        ("negative NaN", -f64::NAN),
        ("0", 0.0),
        ("-0", -0.0),
        ("1", 1.0),
        ("1.5", 1.5),
        ("-0.01", -0.01),
        ("inf", f64::INFINITY),
        ("-inf", f64::NEG_INFINITY),
        ("f64::MAX", f64::MAX),
    ]
}

/// Every field of a version 1 header, mutated; `layers` is the header's layer count.
fn header_mutations(layers: usize) -> Vec<Mutation> {
    use v1::*;
    use Expect::{Either, Invalid, SizeMismatch};
    let mut m = vec![
        mutation("magic", Invalid, |h| h[0] ^= 0x20),
        mutation("version 0", Invalid, |h| h[VERSION] = 0),
        mutation("version 2", Invalid, |h| h[VERSION] = 2),
        mutation("version 255", Invalid, |h| h[VERSION] = 255),
        mutation("reserved byte", Invalid, |h| h[RESERVED + 1] = 1),
        mutation("expansion 32769", Invalid, |h| {
            put(h, EXPANSION, &32769u32.to_le_bytes())
        }),
        mutation("expansion u32::MAX", Invalid, |h| {
            put(h, EXPANSION, &u32::MAX.to_le_bytes())
        }),
        mutation("expansion 32768", Either, |h| {
            put(h, EXPANSION, &32768u32.to_le_bytes())
        }),
        mutation("expansion 1", Either, |h| {
            put(h, EXPANSION, &1u32.to_le_bytes())
        }),
        mutation("smallest subnormal error rate", Either, |h| {
            put(h, ERROR, &f64::from_bits(1).to_le_bytes())
        }),
        mutation("error rate just under 1", Either, |h| {
            put(h, ERROR, &(1.0 - f64::EPSILON).to_le_bytes())
        }),
        mutation("items + 1", Invalid, |h| {
            let n = get_u64(h, ITEMS).wrapping_add(1);
            put(h, ITEMS, &n.to_le_bytes())
        }),
        mutation("items u64::MAX", Invalid, |h| {
            put(h, ITEMS, &u64::MAX.to_le_bytes())
        }),
        mutation("0 layers", Invalid, |h| put(h, LAYERS, &0u32.to_le_bytes())),
        mutation("layers + 1", Invalid, |h| {
            let n = get_u32(h, LAYERS) + 1;
            put(h, LAYERS, &n.to_le_bytes())
        }),
        mutation("layers - 1", Invalid, |h| {
            let n = get_u32(h, LAYERS) - 1;
            put(h, LAYERS, &n.to_le_bytes())
        }),
        mutation("layers 2^31", Invalid, |h| {
            put(h, LAYERS, &(1u32 << 31).to_le_bytes())
        }),
        mutation("layers u32::MAX", Invalid, |h| {
            put(h, LAYERS, &u32::MAX.to_le_bytes())
        }),
    ];
    if layers > 1 {
        m.push(mutation("non-scaling with several layers", Invalid, |h| {
            put(h, EXPANSION, &0u32.to_le_bytes())
        }));
    }
    for (name, x) in bad_rates() {
        m.push(mutation(&format!("error rate {name}"), Invalid, move |h| {
            put(h, ERROR, &x.to_le_bytes())
        }));
    }
    for i in [0, layers - 1] {
        let at = move |field| layer(i, field);
        for (name, x) in bad_rates() {
            m.push(mutation(
                &format!("layer {i} error rate {name}"),
                Invalid,
                move |h| put(h, at(L_ERROR), &x.to_le_bytes()),
            ));
        }
        m.extend([
            mutation(&format!("layer {i} capacity 0"), Invalid, move |h| {
                put(h, at(L_CAPACITY), &0u64.to_le_bytes())
            }),
            mutation(&format!("layer {i} capacity u64::MAX"), Either, move |h| {
                put(h, at(L_CAPACITY), &u64::MAX.to_le_bytes())
            }),
            mutation(&format!("layer {i} capacity 2^62"), Either, move |h| {
                put(h, at(L_CAPACITY), &(1u64 << 62).to_le_bytes())
            }),
            mutation(&format!("layer {i} capacity 1"), Either, move |h| {
                // Keep items <= capacity: both 1, and the header's total follows.
                let old = get_u64(h, at(L_ITEMS));
                put(h, at(L_CAPACITY), &1u64.to_le_bytes());
                put(h, at(L_ITEMS), &1u64.to_le_bytes());
                let total = get_u64(h, ITEMS) - old + 1;
                put(h, ITEMS, &total.to_le_bytes());
            }),
            // What a BF.MERGE union holds: it must load.
            mutation(&format!("layer {i} items > capacity"), Either, move |h| {
                let cap = get_u64(h, at(L_CAPACITY));
                let old = get_u64(h, at(L_ITEMS));
                put(h, at(L_ITEMS), &(cap + 1).to_le_bytes());
                let total = get_u64(h, ITEMS) - old + cap + 1;
                put(h, ITEMS, &total.to_le_bytes());
            }),
            mutation(&format!("layer {i} items = capacity"), Either, move |h| {
                let cap = get_u64(h, at(L_CAPACITY));
                let old = get_u64(h, at(L_ITEMS));
                put(h, at(L_ITEMS), &cap.to_le_bytes());
                let total = get_u64(h, ITEMS) - old + cap;
                put(h, ITEMS, &total.to_le_bytes());
            }),
            mutation(&format!("layer {i} items u64::MAX"), Invalid, move |h| {
                put(h, at(L_ITEMS), &u64::MAX.to_le_bytes())
            }),
            mutation(&format!("layer {i} 0 blocks"), Invalid, move |h| {
                put(h, at(L_BLOCKS), &0u64.to_le_bytes())
            }),
            mutation(&format!("layer {i} blocks + 1"), SizeMismatch, move |h| {
                let n = get_u64(h, at(L_BLOCKS)) + 1;
                put(h, at(L_BLOCKS), &n.to_le_bytes())
            }),
            mutation(&format!("layer {i} blocks - 1"), SizeMismatch, move |h| {
                let n = get_u64(h, at(L_BLOCKS)) - 1;
                put(h, at(L_BLOCKS), &n.to_le_bytes())
            }),
            mutation(
                &format!("layer {i} 2^40 blocks (64 TiB)"),
                Invalid,
                move |h| put(h, at(L_BLOCKS), &(1u64 << 40).to_le_bytes()),
            ),
            mutation(&format!("layer {i} 2^57 blocks"), Invalid, move |h| {
                put(h, at(L_BLOCKS), &(1u64 << 57).to_le_bytes())
            }),
            mutation(&format!("layer {i} u64::MAX blocks"), Invalid, move |h| {
                put(h, at(L_BLOCKS), &u64::MAX.to_le_bytes())
            }),
            mutation(&format!("layer {i} 0 blocks per item"), Invalid, move |h| {
                h[at(L_BLOCKS_PER_ITEM)] = 0
            }),
            mutation(&format!("layer {i} 5 blocks per item"), Invalid, move |h| {
                h[at(L_BLOCKS_PER_ITEM)] = 5
            }),
            mutation(
                &format!("layer {i} 255 blocks per item"),
                Invalid,
                move |h| h[at(L_BLOCKS_PER_ITEM)] = 255,
            ),
            mutation(&format!("layer {i} 4 blocks per item"), Either, move |h| {
                h[at(L_BLOCKS_PER_ITEM)] = 4
            }),
            mutation(&format!("layer {i} 0 hashes"), Invalid, move |h| {
                h[at(L_HASHES)] = 0
            }),
            mutation(&format!("layer {i} 65 hashes"), Invalid, move |h| {
                h[at(L_HASHES)] = 65
            }),
            mutation(&format!("layer {i} 255 hashes"), Invalid, move |h| {
                h[at(L_HASHES)] = 255
            }),
            mutation(&format!("layer {i} 64 hashes"), Either, move |h| {
                h[at(L_HASHES)] = 64
            }),
            mutation(&format!("layer {i} 1 hash"), Either, move |h| {
                h[at(L_HASHES)] = 1
            }),
            mutation(&format!("layer {i} reserved byte"), Invalid, move |h| {
                h[at(L_RESERVED) + 5] = 0x80
            }),
        ]);
    }
    m
}

#[test]
fn restore_refuses_or_safely_loads_every_header_field_mutation() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let sources = build_sources(&mut con);
    let mut tally = Tally::default();
    let mut accepted = Vec::new();
    for src in &sources {
        let parts = dump_parts(&mut con, src);
        for (n, m) in header_mutations(v1::layer_count(&parts.header))
            .iter()
            .enumerate()
        {
            let mut h = parts.header.clone();
            (m.apply)(&mut h);
            let p = Payload::layerbloom(&h, &parts.pieces).bytes();
            let what = format!("{src}: {}", m.what);
            let key = format!("mut:{src}:{n}");
            if m.expect != Expect::Either {
                assert_refused(&mut con, &key, &p, &what);
                tally.refused += 1;
            } else if refused_or_safe(&mut con, &key, &p, &what, &mut tally) {
                accepted.push(key);
            }
        }
    }
    eprintln!("header field mutations: {tally:?}");
    assert!(tally.loaded > 0, "no valid-but-strange header was accepted");
    assert_reload_keeps(&mut con, &accepted);
    assert_server_healthy(&mut s);
}

/// A decoded header is used as counts in replies: `BF.INFO` and `BF.CARD` answer RESP
/// integers (signed 64-bit), so a loaded filter must never claim a capacity or an item count
/// that does not fit one. No filter layerbloom builds comes near 2^63 (the memory limit stops
/// growth long before), so such a header can only be forged.
#[test]
fn loaded_filters_report_capacity_and_items_as_non_negative_integers() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    build_sources(&mut con);
    let parts = dump_parts(&mut con, "src:nonscaling");
    // RedisBloom's RDB loader tolerates an item total that differs from the layers' sum.
    let mut chain = RbChain::sample();
    chain.items = u64::MAX;
    let mut classic = Vec::new();
    if restore(
        &mut con,
        "redisbloom:items u64::MAX",
        &chain.payload(REDISBLOOM_ENCVER),
    )
    .is_ok()
    {
        classic.push("redisbloom:items u64::MAX".to_string());
    }
    for (what, capacity, items) in [
        ("capacity 2^63", 1u64 << 63, None),
        ("capacity u64::MAX", u64::MAX, None),
        ("capacity and items 2^63", 1u64 << 63, Some(1u64 << 63)),
    ] {
        let mut h = parts.header.clone();
        v1::put(
            &mut h,
            v1::layer(0, v1::L_CAPACITY),
            &capacity.to_le_bytes(),
        );
        if let Some(n) = items {
            v1::put(&mut h, v1::layer(0, v1::L_ITEMS), &n.to_le_bytes());
            v1::put(&mut h, v1::ITEMS, &n.to_le_bytes());
        }
        let payload = Payload::layerbloom(&h, &parts.pieces).bytes();
        let via_restore = format!("restore:{what}");
        let via_loadchunk = format!("loadchunk:{what}");
        let mut loaded = Vec::new();
        if restore(&mut con, &via_restore, &payload).is_ok() {
            loaded.push(via_restore);
        }
        let v = con.raw(&cmd!("BF.LOADCHUNK", &via_loadchunk, 1, h.as_slice()));
        if error_of(&v).is_none() {
            loaded.push(via_loadchunk);
        }
        if what == "capacity and items 2^63" {
            loaded.append(&mut classic);
        }
        for key in loaded {
            let info = bf_info(&mut con, &key);
            let card: i64 = con.q(&cmd!("BF.CARD", &key));
            assert!(
                info.capacity >= 1 && info.items >= 0 && card >= 0,
                "{key}: a loaded filter answers BF.INFO {info:?}, BF.CARD {card}"
            );
        }
    }
    assert_server_healthy(&mut s);
}

/// Counts near the top of `u64` that a forged value can carry, and that adds then push over
/// it: what the module saves must still be something it loads. A value it cannot load makes
/// `DEBUG RELOAD` lose the dataset and a restart refuse to start.
#[test]
fn filters_loaded_with_counts_near_the_u64_limit_still_save_and_reload_after_adds() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    build_sources(&mut con);
    let mut loaded = Vec::new();

    // layerbloom's format: the oldest layer claims (nearly) 2^64 items, the newest has room.
    let parts = dump_parts(&mut con, "src:scaling");
    let mut h = parts.header.clone();
    let layers = v1::layer_count(&h);
    let others: u64 = (1..layers)
        .map(|i| v1::get_u64(&h, v1::layer(i, v1::L_ITEMS)))
        .sum();
    let first = u64::MAX - 1 - others;
    v1::put(
        &mut h,
        v1::layer(0, v1::L_CAPACITY),
        &u64::MAX.to_le_bytes(),
    );
    v1::put(&mut h, v1::layer(0, v1::L_ITEMS), &first.to_le_bytes());
    v1::put(&mut h, v1::ITEMS, &(u64::MAX - 1).to_le_bytes());
    if restore(
        &mut con,
        "blocked",
        &Payload::layerbloom(&h, &parts.pieces).bytes(),
    )
    .is_ok()
    {
        loaded.push("blocked");
    }
    // RedisBloom's format: its loader does not hold the item total to the layers' sum.
    let mut chain = RbChain::sample();
    chain.layers[0].size = u64::MAX - 1;
    if restore(&mut con, "classic", &chain.payload(REDISBLOOM_ENCVER)).is_ok() {
        loaded.push("classic");
    }
    for key in &loaded {
        // Adds are answered (new, present, or refused with an error)...
        let v = con.raw(&cmd!("BF.MADD", *key, "n1", "n2", "n3", "n4"));
        assert!(matches!(v, Value::Array(_)), "{key}: {v:?}");
    }
    let before: Vec<String> = loaded.iter().map(|k| digest(&mut con, k)).collect();
    // ...and whatever the filter became, the server can save it and load it back.
    let v = con.raw(&cmd!("DEBUG", "RELOAD"));
    assert!(
        error_of(&v).is_none(),
        "DEBUG RELOAD failed after adds to {loaded:?}: {v:?} (the dataset is gone: {} keys)",
        con.q::<i64>(&cmd!("DBSIZE"))
    );
    let after: Vec<String> = loaded.iter().map(|k| digest(&mut con, k)).collect();
    assert_eq!(after, before);
    assert_server_healthy(&mut s);
}

/// `DEBUG RELOAD` (save and load the whole dataset) keeps every key's digest.
fn assert_reload_keeps(con: &mut redis::Connection, keys: &[String]) {
    let before: Vec<String> = keys.iter().map(|k| digest(con, k)).collect();
    con.ok(&cmd!("DEBUG", "RELOAD"));
    let after: Vec<String> = keys.iter().map(|k| digest(con, k)).collect();
    assert_eq!(after, before, "digests after DEBUG RELOAD");
}

#[test]
fn restore_refuses_pieces_that_do_not_match_the_header() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    build_sources(&mut con);
    let parts = dump_parts(&mut con, "src:scaling");
    let h = &parts.header;
    let good = &parts.pieces;
    assert!(good.len() >= 3);
    let mut cases: Vec<(String, Vec<Vec<u8>>)> = vec![
        ("no pieces".into(), vec![]),
        ("last piece missing".into(), good[..good.len() - 1].to_vec()),
        ("first piece missing".into(), good[1..].to_vec()),
        ("extra empty piece".into(), {
            let mut p = good.clone();
            p.push(vec![]);
            p
        }),
        ("extra 64-byte piece".into(), {
            let mut p = good.clone();
            p.push(vec![0; 64]);
            p
        }),
        ("all pieces merged".into(), vec![good.concat()]),
        (
            "pieces reversed".into(),
            good.iter().rev().cloned().collect(),
        ),
        ("an empty piece in place of the first".into(), {
            let mut p = good.clone();
            p[0] = vec![];
            p
        }),
    ];
    for (i, delta) in [(0usize, -1i64), (0, -64), (0, 1), (0, 64), (1, -1), (1, 63)] {
        let mut p = good.clone();
        let len = (p[i].len() as i64 + delta) as usize;
        p[i].resize(len, 0xaa);
        cases.push((format!("piece {i} resized by {delta}"), p));
    }
    for (what, pieces) in &cases {
        let p = Payload::layerbloom(h, pieces).bytes();
        assert_refused(&mut con, "dst", &p, what);
    }
    eprintln!("{} piece mismatches refused", cases.len());
    assert_server_healthy(&mut s);
}

#[test]
fn restore_of_any_bit_pattern_of_the_right_size_is_safe() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let mut tally = Tally::default();
    let mut keys = Vec::new();
    for src in build_sources(&mut con) {
        let parts = dump_parts(&mut con, &src);
        type Pattern = Box<dyn Fn(usize) -> Vec<u8>>;
        let patterns: [(&str, Pattern); 3] = [
            ("all ones", Box::new(|n| vec![0xff; n])),
            ("all zeros", Box::new(|n| vec![0; n])),
            (
                "random",
                Box::new(move |n| (0..n).map(|i| (i as u8).wrapping_mul(167) ^ 0x5c).collect()),
            ),
        ];
        for (name, make) in &patterns {
            let pieces: Vec<Vec<u8>> = parts.pieces.iter().map(|p| make(p.len())).collect();
            let key = format!("bits:{src}:{name}");
            let p = Payload::layerbloom(&parts.header, &pieces).bytes();
            restore(&mut con, &key, &p).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_usable(&mut con, &key, &key);
            tally.loaded += 1;
            keys.push(key);
        }
    }
    eprintln!("bit patterns: {tally:?}");
    assert_reload_keeps(&mut con, &keys);
    assert_server_healthy(&mut s);
}

#[test]
fn restore_refuses_wrong_opcodes_lengths_and_encoding_versions() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    build_sources(&mut con);
    let parts = dump_parts(&mut con, "src:scaling");
    let real = Payload::layerbloom(&parts.header, &parts.pieces);
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    let with_fields = |f: &dyn Fn(&mut Vec<Field>)| {
        let mut p = real.clone();
        f(&mut p.fields);
        p.bytes()
    };
    cases.push((
        "header saved as an unsigned".into(),
        with_fields(&|f| f[0] = Field::Uint(76)),
    ));
    cases.push((
        "header saved as a double".into(),
        with_fields(&|f| f[0] = Field::Double(1.0)),
    ));
    cases.push((
        "a piece saved as an unsigned".into(),
        with_fields(&|f| f[1] = Field::Uint(0)),
    ));
    cases.push((
        "unsigned field after the pieces".into(),
        with_fields(&|f| f.push(Field::Uint(7))),
    ));
    cases.push((
        "string field after the pieces".into(),
        with_fields(&|f| f.push(Field::Str(b"tail".to_vec()))),
    ));
    cases.push(("no fields".into(), with_fields(&|f| f.clear())));
    cases.push((
        "unknown opcode 9".into(),
        with_fields(&|f| f.insert(0, Field::Raw(vec![9, 1, 2, 3]))),
    ));
    cases.push((
        "float opcode".into(),
        with_fields(&|f| f.insert(0, Field::Raw(vec![OP_FLOAT, 0, 0, 0x80, 0x3f]))),
    ));
    // Redis itself allocates a string's claimed length before reading it (a try-allocation:
    // refused past the machine's memory, untouched pages otherwise). Under valgrind, whose
    // shadow memory makes a multi-GiB allocation real, those claims are left out.
    let affordable = |claimed: u64| !common::under_valgrind() || claimed < 1 << 30;
    for claimed in [
        parts.header.len() as u64 + 1,
        1 << 20,
        1 << 31,
        1 << 40,
        u64::MAX,
    ] {
        if !affordable(claimed) {
            continue;
        }
        let mut raw = vec![OP_STRING];
        raw.extend(rdb_len(claimed));
        raw.extend_from_slice(&parts.header);
        cases.push((
            format!("header string claiming {claimed} bytes"),
            with_fields(&|f| f[0] = Field::Raw(raw.clone())),
        ));
    }
    for claimed in [1u64 << 20, 1 << 33] {
        if !affordable(claimed) {
            continue;
        }
        // An LZF string whose claimed plain length is far over what it holds.
        let mut raw = vec![OP_STRING, 0xc3];
        raw.extend(rdb_len(2));
        raw.extend(rdb_len(claimed));
        raw.extend_from_slice(&[0, b'L']);
        cases.push((
            format!("LZF header claiming {claimed} bytes"),
            with_fields(&|f| f[0] = Field::Raw(raw.clone())),
        ));
    }
    let mut no_eof = real.clone();
    no_eof.eof = false;
    cases.push(("no module EOF".into(), no_eof.bytes()));
    let mut pre_ga = real.clone();
    pre_ga.type_byte = 6;
    cases.push(("pre-GA module type byte".into(), pre_ga.bytes()));
    for encver in [0u64, 1, 2, 3, 4, 5, 99, 101, 1023] {
        let mut p = real.clone();
        p.module_id = module_type_id(b"MBbloom--", encver);
        cases.push((
            format!("layerbloom fields under encoding version {encver}"),
            p.bytes(),
        ));
    }
    let mut other_type = real.clone();
    other_type.module_id = module_type_id(b"NOTbloom-", LAYERBLOOM_ENCVER);
    let other = other_type.bytes();
    for (what, p) in &cases {
        assert_refused(&mut con, "dst", p, what);
    }
    // A type no module registered: Redis itself refuses it.
    let e = restore(&mut con, "dst", &other).unwrap_err();
    assert_eq!(e, BAD_DATA_FORMAT);
    eprintln!("{} opcode-level payloads refused", cases.len() + 1);
    assert_server_healthy(&mut s);
}

#[test]
fn restore_of_a_header_claiming_terabytes_allocates_only_what_arrives() {
    require_own_server!();
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "small", "0.01", 2, "NONSCALING"));
    let parts = dump_parts(&mut con, "small");
    // One layer of 2^34 blocks: 1 TiB of bits.
    let mut h = parts.header.clone();
    v1::put(
        &mut h,
        v1::layer(0, v1::L_BLOCKS),
        &(1u64 << 34).to_le_bytes(),
    );
    let peak_before = info_i64(&mut con, "memory", "used_memory_peak");
    let used_before = info_i64(&mut con, "memory", "used_memory");
    // The first piece must be 64 MiB: send exactly that, then nothing more.
    let piece = vec![0x11u8; 64 << 20];
    let p = Payload::layerbloom(&h, &[piece]).bytes();
    assert_refused(&mut con, "dst", &p, "1 TiB header with one 64 MiB piece");
    // Short first pieces fail before anything is allocated.
    for len in [0usize, 64, 1 << 20] {
        let p = Payload::layerbloom(&h, &[vec![0u8; len]]).bytes();
        assert_refused(
            &mut con,
            "dst",
            &p,
            &format!("1 TiB header, {len}-byte piece"),
        );
    }
    drop(p);
    let peak_after = info_i64(&mut con, "memory", "used_memory_peak");
    // The payload itself (64 MiB in the query buffer, then in the loaded string) and the one
    // piece of blocks: a few hundred MiB at most, never the 1 TiB claimed.
    assert!(
        peak_after - peak_before < 600 << 20,
        "used_memory_peak grew by {} bytes",
        peak_after - peak_before
    );
    // Query buffers shrink in the background (clientsCron): wait for them, then no more than
    // a few MiB may remain.
    common::wait_until(Duration::from_secs(30), "used_memory to come back", || {
        info_i64(&mut con, "memory", "used_memory") - used_before < 16 << 20
    });
    assert_server_healthy(&mut s);
}

#[test]
fn restore_of_twenty_thousand_layers_is_refused_or_safe() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "one", "0.01", 1, "EXPANSION", 1));
    let parts = dump_parts(&mut con, "one");
    let layer = parts.header[v1::FIRST_LAYER..v1::FIRST_LAYER + v1::LAYER_LEN].to_vec();
    assert_eq!(
        v1::get_u64(&layer, v1::L_BLOCKS),
        1,
        "a capacity-1 layer has one block"
    );
    // Every accepted filter is walked with SCANDUMP, one round trip a layer: 20000 of them.
    let count = 20_000u32;
    let mut h = parts.header[..v1::FIRST_LAYER].to_vec();
    v1::put(&mut h, v1::LAYERS, &count.to_le_bytes());
    for _ in 0..count {
        h.extend_from_slice(&layer);
    }
    // Header only: the loader must fail on the first missing piece.
    assert_refused(
        &mut con,
        "dst",
        &Payload::layerbloom(&h, &[]).bytes(),
        "20000 layers, no pieces",
    );
    // Every piece present: a legal (if silly) filter of 100000 one-block layers.
    let pieces = vec![vec![0u8; 64]; count as usize];
    let p = Payload::layerbloom(&h, &pieces).bytes();
    if restore(&mut con, "many", &p).is_ok() {
        assert_eq!(bf_info(&mut con, "many").filters, i64::from(count));
        assert_usable(&mut con, "many", "20000 layers");
        assert_eq!(con.q::<i64>(&cmd!("UNLINK", "many")), 1);
    }
    assert_server_healthy(&mut s);
}

#[test]
fn restore_of_randomly_mutated_real_dumps_is_refused_or_safe() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let sources = build_sources(&mut con);
    let mut rng = Rng(0x6a09_e667_f3bc_c908);
    let mut tally = Tally::default();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut accepted = Vec::new();
    const PER_SOURCE: usize = 300;
    for src in &sources {
        let real: Vec<u8> = con.q(&cmd!("DUMP", src));
        let body = &real[..real.len() - 10];
        let version = u16::from_le_bytes(real[real.len() - 10..real.len() - 8].try_into().unwrap());
        // Leave the type byte and the 9-byte module id alone: the value is the target.
        let start = 10;
        for n in 0..PER_SOURCE {
            let mut b = body.to_vec();
            let at = start + rng.below((b.len() - start) as u64) as usize;
            let kind = match rng.below(6) {
                0 => {
                    b[at] ^= 1 << rng.below(8);
                    "bit flip"
                }
                1 => {
                    b[at] = rng.next_u64() as u8;
                    "random byte"
                }
                2 => {
                    b.truncate(at);
                    "truncation"
                }
                3 => {
                    b.remove(at);
                    "byte removed"
                }
                4 => {
                    b.insert(at, rng.next_u64() as u8);
                    "byte inserted"
                }
                _ => {
                    let x = *rng.pick(&[0u8, 0xff, 0x7f, 0x80, 0x81, 0x40, 0x3f]);
                    b[at] = x;
                    "boundary byte"
                }
            };
            *kinds.entry(kind).or_default() += 1;
            let p = seal(b, version);
            let key = format!("rnd:{src}:{n}");
            let what = format!("{src} #{n} ({kind} at {at})");
            if refused_or_safe(&mut con, &key, &p, &what, &mut tally) {
                accepted.push(key);
            }
        }
    }
    eprintln!("random mutations {kinds:?}: {tally:?}");
    assert_eq!(tally.refused + tally.loaded, PER_SOURCE * sources.len());
    assert!(tally.refused > 0 && tally.loaded > 0, "{tally:?}");
    assert_reload_keeps(&mut con, &accepted);
    assert_server_healthy(&mut s);
}

// =============================================================================================
// RESTORE of RedisBloom values (encoding versions 0 to 4).
// =============================================================================================

/// Mutations of a RedisBloom chain: every field out of its range or inconsistent with the
/// others.
fn redisbloom_mutations() -> Vec<(String, RbChain)> {
    let base = RbChain::sample();
    let mut out = vec![("as built".to_string(), base.clone())];
    let mut add = |what: &str, f: &dyn Fn(&mut RbChain)| {
        let mut c = base.clone();
        f(&mut c);
        out.push((what.to_string(), c));
    };
    add("0 layers", &|c| c.layers.clear());
    add("items != sum of sizes", &|c| c.items = 5);
    add("items u64::MAX", &|c| c.items = u64::MAX);
    add("unknown option bits", &|c| c.options |= 0x100);
    add("32-bit hash (options 0)", &|c| c.options = 0);
    add("power-of-two option (no NOROUND)", &|c| c.options = 4);
    add("non-scaling with two layers", &|c| c.options |= 8);
    add("growth 0", &|c| c.growth = 0);
    add("growth 2^32", &|c| c.growth = 1 << 32);
    add("growth u64::MAX", &|c| c.growth = u64::MAX);
    for i in [0usize, 1] {
        let edit = |c: &mut RbChain, f: &dyn Fn(&mut RbLayer)| f(&mut c.layers[i]);
        add(&format!("layer {i} entries 0"), &|c| {
            edit(c, &|l| l.entries = 0)
        });
        add(&format!("layer {i} entries u64::MAX"), &|c| {
            edit(c, &|l| l.entries = u64::MAX)
        });
        add(&format!("layer {i} size > entries"), &|c| {
            edit(c, &|l| l.size = l.entries + 1);
            c.items = c.layers.iter().map(|l| l.size).sum();
        });
        add(&format!("layer {i} size = entries, all bits set"), &|c| {
            edit(c, &|l| {
                l.size = l.entries;
                l.bytes.iter_mut().for_each(|b| *b = 0xff);
            });
            c.items = c.layers.iter().map(|l| l.size).sum();
        });
        for (name, x) in bad_rates() {
            add(&format!("layer {i} error {name}"), &|c| {
                edit(c, &|l| l.error = x)
            });
            add(&format!("layer {i} bpe {name}"), &|c| {
                edit(c, &|l| l.bpe = x)
            });
        }
        add(&format!("layer {i} bpe 1e300"), &|c| {
            edit(c, &|l| l.bpe = 1e300)
        });
        add(&format!("layer {i} 0 hashes"), &|c| {
            edit(c, &|l| l.hashes = 0)
        });
        add(&format!("layer {i} 2^40 hashes, all bits set"), &|c| {
            edit(c, &|l| {
                l.hashes = 1 << 40;
                l.bytes.iter_mut().for_each(|b| *b = 0xff);
            })
        });
        add(&format!("layer {i} u64::MAX hashes"), &|c| {
            edit(c, &|l| l.hashes = u64::MAX)
        });
        add(&format!("layer {i} 0 bits"), &|c| edit(c, &|l| l.bits = 0));
        add(&format!("layer {i} bits beyond the buffer"), &|c| {
            edit(c, &|l| l.bits = l.bytes.len() as u64 * 8 + 64)
        });
        add(&format!("layer {i} bits u64::MAX"), &|c| {
            edit(c, &|l| l.bits = u64::MAX)
        });
        add(&format!("layer {i} bits 1"), &|c| edit(c, &|l| l.bits = 1));
        add(&format!("layer {i} empty buffer"), &|c| {
            edit(c, &|l| l.bytes.clear())
        });
        add(&format!("layer {i} buffer shorter than bits"), &|c| {
            edit(c, &|l| {
                l.bytes.truncate(8);
            })
        });
        add(&format!("layer {i} buffer not whole words"), &|c| {
            edit(c, &|l| l.bytes.push(0))
        });
        for n2 in [1u64, 6, 12, 63, 64, 65, 255, u64::MAX] {
            add(&format!("layer {i} n2 {n2}, all bits set"), &|c| {
                edit(c, &|l| {
                    l.n2 = n2;
                    l.bytes.iter_mut().for_each(|b| *b = 0xff);
                })
            });
        }
    }
    out
}

#[test]
fn restore_of_redisbloom_values_is_refused_or_safe() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let mut tally = Tally::default();
    let mut accepted = Vec::new();
    for (n, (what, chain)) in redisbloom_mutations().iter().enumerate() {
        for encver in 0..=REDISBLOOM_ENCVER {
            let key = format!("rb:{n}:{encver}");
            let what = format!("RedisBloom v{encver}: {what}");
            if refused_or_safe(&mut con, &key, &chain.payload(encver), &what, &mut tally) {
                accepted.push(key);
            }
        }
    }
    // Counts that no decoder may use before checking them against the data present.
    for layers in [1u64 << 20, 1 << 32, 1 << 40, u64::MAX] {
        for encver in 0..=REDISBLOOM_ENCVER {
            let mut f = RbChain::sample().fields(encver);
            f[1] = Field::Uint(layers);
            let p = Payload::new(encver, f).bytes();
            assert_refused(
                &mut con,
                "dst",
                &p,
                &format!("RedisBloom v{encver} claiming {layers} layers"),
            );
            tally.refused += 1;
        }
    }
    eprintln!("RedisBloom values: {tally:?}");
    assert_reload_keeps(&mut con, &accepted);
    assert_server_healthy(&mut s);
}

// =============================================================================================
// BF.LOADCHUNK: headers and chunks.
// =============================================================================================

/// What BF.LOADCHUNK may answer to a header it does not take.
fn is_loadchunk_refusal(e: &str) -> bool {
    e == "ERR received bad data"
        || e.starts_with("ERR Insufficient memory to create filter")
        || e == "ERR could not create filter"
}

/// Sends a header with LOADCHUNK, then the chunks; an accepted filter must be safe to use.
fn loadchunk_refused_or_safe(
    con: &mut redis::Connection,
    key: &str,
    header: &[u8],
    chunks: &[(i64, Vec<u8>)],
    what: &str,
    must_refuse: bool,
    tally: &mut Tally,
) {
    let v = con.raw(&cmd!("BF.LOADCHUNK", key, 1, header));
    if let Some(e) = error_of(&v) {
        assert!(is_loadchunk_refusal(&e), "{what}: LOADCHUNK header: {e:?}");
        assert!(!key_exists(con, key), "{what}: a refused header left a key");
        tally.refused += 1;
        assert_pong(con);
        return;
    }
    assert!(
        !must_refuse,
        "{what}: LOADCHUNK accepted a header it must refuse"
    );
    for (it, data) in chunks {
        let v = con.raw(&cmd!("BF.LOADCHUNK", key, *it, data.as_slice()));
        if let Some(e) = error_of(&v) {
            assert!(
                e == "ERR invalid offset - no link found"
                    || e == "ERR invalid chunk - Too big for current filter",
                "{what}: LOADCHUNK chunk {it}: {e:?}"
            );
        }
    }
    assert_usable(con, key, what);
    tally.loaded += 1;
}

#[test]
fn loadchunk_refuses_or_safely_loads_every_header_mutation() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let sources = build_sources(&mut con);
    let mut tally = Tally::default();
    for src in &sources {
        let chunks = scandump(&mut con, src);
        let header = chunks[0].1.clone();
        let rest = &chunks[1..];
        for n in 0..header.len() {
            loadchunk_refused_or_safe(
                &mut con,
                "dst",
                &header[..n],
                &[],
                &format!("{src}: header cut to {n}"),
                true,
                &mut tally,
            );
        }
        for (n, m) in header_mutations(v1::layer_count(&header))
            .iter()
            .enumerate()
        {
            let mut h = header.clone();
            (m.apply)(&mut h);
            let key = format!("lc:{src}:{n}");
            let what = format!("{src}: {}", m.what);
            let must_refuse = m.expect == Expect::Invalid;
            loadchunk_refused_or_safe(&mut con, &key, &h, rest, &what, must_refuse, &mut tally);
        }
    }
    eprintln!("LOADCHUNK header mutations: {tally:?}");
    assert_server_healthy(&mut s);
}

#[test]
fn loadchunk_refuses_headers_claiming_more_than_the_memory_limit() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "small", "0.01", 2, "NONSCALING"));
    let header = scandump(&mut con, "small")[0].1.clone();
    for blocks in [1u64 << 26, 1 << 34, 1 << 40, (isize::MAX as u64) / 64] {
        let mut h = header.clone();
        v1::put(&mut h, v1::layer(0, v1::L_BLOCKS), &blocks.to_le_bytes());
        let e = con.err_text(&cmd!("BF.LOADCHUNK", "dst", 1, h.as_slice()));
        assert!(
            e.starts_with("ERR Insufficient memory to create filter"),
            "{blocks} blocks: {e:?}"
        );
        assert!(!key_exists(&mut con, "dst"));
    }
    // RedisBloom headers claiming terabytes.
    let mut chain = RbChain::sample();
    chain.layers[0].bytes = Vec::new();
    let mut h = chain.scandump_header();
    h[20..28].copy_from_slice(&(1u64 << 40).to_le_bytes());
    h[28..36].copy_from_slice(&(8u64 << 40).to_le_bytes());
    let v = con.raw(&cmd!("BF.LOADCHUNK", "dst", 1, h.as_slice()));
    let e = error_of(&v).unwrap_or_else(|| panic!("1 TiB RedisBloom header accepted: {v:?}"));
    assert!(is_loadchunk_refusal(&e), "{e:?}");
    assert!(!key_exists(&mut con, "dst"));
    assert_server_healthy(&mut s);
}

#[test]
fn loadchunk_of_redisbloom_headers_is_refused_or_safe() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let mut tally = Tally::default();
    for (n, (what, chain)) in redisbloom_mutations().iter().enumerate() {
        let header = chain.scandump_header();
        // Chunks as RedisBloom's SCANDUMP numbers them.
        let mut off = 0i64;
        let mut chunks = Vec::new();
        for l in &chain.layers {
            if !l.bytes.is_empty() {
                off += l.bytes.len() as i64;
                chunks.push((1 + off, l.bytes.clone()));
            }
        }
        let key = format!("rblc:{n}");
        let what = format!("RedisBloom header: {what}");
        loadchunk_refused_or_safe(&mut con, &key, &header, &chunks, &what, false, &mut tally);
    }
    let sample = RbChain::sample().scandump_header();
    for n in 0..sample.len() {
        loadchunk_refused_or_safe(
            &mut con,
            "dst",
            &sample[..n],
            &[],
            &format!("RedisBloom header cut to {n}"),
            true,
            &mut tally,
        );
    }
    for layers in [2u32 << 20, u32::MAX] {
        let mut h = sample.clone();
        h[8..12].copy_from_slice(&layers.to_le_bytes());
        loadchunk_refused_or_safe(
            &mut con,
            "dst",
            &h,
            &[],
            &format!("RedisBloom header claiming {layers} layers"),
            true,
            &mut tally,
        );
    }
    eprintln!("LOADCHUNK RedisBloom headers: {tally:?}");
    assert_server_healthy(&mut s);
}

/// Headers a client's BF.LOADCHUNK must refuse although they are safe, each with what makes
/// it so: layerbloom's and RedisBloom's, with a total of 2^64 - 1 (the layers' counts
/// saturating to it, or summing to it exactly), and with the second link corrupted.
fn strictly_refused_headers(con: &mut redis::Connection) -> Vec<(&'static str, Vec<u8>)> {
    con.ok(&cmd!("BF.RESERVE", "strict:src", "0.01", 100));
    add_items(con, "strict:src", 150);
    let blocked = scandump(con, "strict:src")[0].1.clone();
    con.q::<i64>(&cmd!("DEL", "strict:src"));
    assert_eq!(v1::layer_count(&blocked), 2);
    let mut out = Vec::new();
    for (what, first) in [
        (
            "layerbloom header: total 2^64 - 1, counts saturating",
            u64::MAX,
        ),
        (
            "layerbloom header: total 2^64 - 1, counts summing",
            u64::MAX - 20,
        ),
    ] {
        let mut h = blocked.clone();
        v1::put(&mut h, v1::ITEMS, &u64::MAX.to_le_bytes());
        v1::put(
            &mut h,
            v1::layer(0, v1::L_CAPACITY),
            &u64::MAX.to_le_bytes(),
        );
        v1::put(&mut h, v1::layer(0, v1::L_ITEMS), &first.to_le_bytes());
        v1::put(&mut h, v1::layer(1, v1::L_ITEMS), &20u64.to_le_bytes());
        out.push((what, h));
    }
    let mut chain = RbChain::sample();
    chain.items = u64::MAX;
    chain.layers[0].size = u64::MAX;
    chain.layers[1].size = 20;
    out.push((
        "RedisBloom header: total 2^64 - 1, counts saturating",
        chain.scandump_header(),
    ));
    chain.layers[0].size = u64::MAX - 20;
    out.push((
        "RedisBloom header: total 2^64 - 1, counts summing",
        chain.scandump_header(),
    ));
    let mut chain = RbChain::sample();
    chain.layers[1].hashes = 1;
    out.push((
        "RedisBloom header: second link's hash count corrupted",
        chain.scandump_header(),
    ));
    let mut chain = RbChain::sample();
    chain.layers[1].bpe *= 2.0;
    out.push((
        "RedisBloom header: second link's bits per entry corrupted",
        chain.scandump_header(),
    ));
    for h in &out {
        assert!(is_lax_header(&h.1), "{}", h.0);
    }
    out
}

fn add_items(con: &mut redis::Connection, key: &str, n: usize) {
    madd(con, key, &items("strict", n));
}

#[test]
fn client_loadchunk_refuses_all_ones_totals_and_corrupted_second_links() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    for (what, header) in strictly_refused_headers(&mut con) {
        assert_eq!(
            con.err_text(&cmd!("BF.LOADCHUNK", "dst", 1, header.as_slice())),
            "ERR received bad data",
            "{what}"
        );
        assert!(
            !key_exists(&mut con, "dst"),
            "{what}: a refused header left a key"
        );
    }
    // Blocked headers whose second link is corrupted were refused before too; still are.
    con.ok(&cmd!("BF.RESERVE", "src", "0.01", 100));
    add_items(&mut con, "src", 150);
    let good = scandump(&mut con, "src")[0].1.clone();
    for (what, at, bytes) in [
        ("zero blocks", v1::L_BLOCKS, &0u64.to_le_bytes()[..]),
        ("zero hashes per block", v1::L_HASHES, &[0u8][..]),
        ("reserved bytes", v1::L_RESERVED, &[1u8][..]),
    ] {
        let mut h = good.clone();
        v1::put(&mut h, v1::layer(1, at), bytes);
        assert_eq!(
            con.err_text(&cmd!("BF.LOADCHUNK", "dst", 1, h.as_slice())),
            "ERR received bad data",
            "second link: {what}"
        );
        assert!(!key_exists(&mut con, "dst"));
    }
    assert_server_healthy(&mut s);
}

/// What a client cannot send, the AOF may hold: an AOF rewrite of a filter loaded from a lax
/// RDB value emits exactly such a header, and RedisBloom's RDB loader takes the value.
#[test]
fn the_same_headers_replayed_from_the_aof_still_load() {
    require_own_server!();
    let mut s = Server::builder().config("appendonly", "yes").start();
    let mut con = s.conn();
    let headers = strictly_refused_headers(&mut con);
    // Let the first rewrite finish, then stop without touching the AOF again.
    common::wait_until(Duration::from_secs(10), "the AOF rewrite", || {
        con.info_map("persistence")
            .get("aof_rewrite_in_progress")
            .map(String::as_str)
            == Some("0")
    });
    drop(con);
    s.restart(common::Stop::NoSave);
    let incr = aof_file(s.dir(), "i");
    let mut aof = std::fs::OpenOptions::new()
        .append(true)
        .open(&incr)
        .unwrap();
    for (n, (_, header)) in headers.iter().enumerate() {
        let key = format!("replayed:{n}");
        let args: [&[u8]; 4] = [b"BF.LOADCHUNK", key.as_bytes(), b"1", header];
        let mut resp = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            resp.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            resp.extend_from_slice(a);
            resp.extend_from_slice(b"\r\n");
        }
        std::io::Write::write_all(&mut aof, &resp).unwrap();
    }
    drop(aof);
    s.restart(common::Stop::NoSave);
    let mut con = s.conn();
    for (n, (what, _)) in headers.iter().enumerate() {
        let key = format!("replayed:{n}");
        assert!(key_exists(&mut con, &key), "{what}: not replayed");
        assert_usable(&mut con, &key, what);
    }
}

#[test]
fn loadchunk_accepts_exactly_the_chunks_that_fit_inside_one_layer() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "f", "0.01", 10, "EXPANSION", 2));
    madd(&mut con, "f", &items("x", 60));
    let chunks = scandump(&mut con, "f");
    // Layer byte ranges: every SCANDUMP chunk of a small filter is one whole layer.
    let mut layers = Vec::new();
    let mut start = 0i64;
    for (it, data) in &chunks[1..] {
        assert_eq!(*it - 1 - data.len() as i64, start, "chunks are contiguous");
        layers.push((start, start + data.len() as i64));
        start += data.len() as i64;
    }
    let total = start;
    assert!(layers.len() >= 3, "{layers:?}");
    // An empty chunk fits at any offset inside a layer (RedisBloom accepts it; it writes
    // nothing).
    let fits = |off: i64, len: i64| {
        layers
            .iter()
            .any(|&(a, b)| off >= a && off + len <= b && off < b)
    };
    let original = digest(&mut con, "f");
    let mut cases = 0;
    let mut accepted = 0;
    let mut offsets: Vec<i64> = vec![-3, -1, 0, 1, total - 1, total, total + 1, total + 100];
    for &(a, b) in &layers {
        offsets.extend([a - 1, a, a + 1, b - 2, b - 1, b, b + 1]);
    }
    let lengths: Vec<i64> = {
        let mut l = vec![0, 1, 2, 8, 63, 64, 65];
        l.extend(layers.iter().map(|&(a, b)| b - a));
        l.extend(layers.iter().map(|&(a, b)| b - a + 1));
        l
    };
    for &off in &offsets {
        for &len in &lengths {
            let it = 1 + off + len;
            let data = vec![0xa5u8; len as usize];
            let v = con.raw(&cmd!("BF.LOADCHUNK", "f", it, data.as_slice()));
            cases += 1;
            if fits(off, len) {
                assert!(
                    error_of(&v).is_none(),
                    "offset {off} length {len} fits in a layer but was refused: {v:?}"
                );
                accepted += 1;
                // The bytes were ORed in exactly there: read them back, then restore the
                // filter (a chunk never clears bits, so by loading it afresh).
                let (i, &(a, b)) = layers
                    .iter()
                    .enumerate()
                    .find(|(_, &(a, b))| off >= a && off + len <= b)
                    .unwrap();
                let (next, now) = {
                    let v: (i64, Vec<u8>) = con.q(&cmd!("BF.SCANDUMP", "f", chunks[i].0));
                    v
                };
                assert_eq!(next, chunks[i + 1].0);
                let rel = (off - a) as usize;
                let ored: Vec<u8> = chunks[i + 1].1[rel..rel + len as usize]
                    .iter()
                    .zip(&data)
                    .map(|(o, d)| o | d)
                    .collect();
                assert_eq!(&now[rel..rel + len as usize], ored.as_slice());
                assert_eq!(now.len() as i64, b - a);
                con.q::<i64>(&cmd!("DEL", "f"));
                loadchunks(&mut con, "f", &chunks);
            } else {
                let e = error_of(&v).unwrap_or_else(|| {
                    panic!("offset {off} length {len} does not fit a layer but was accepted")
                });
                assert!(
                    [
                        "ERR invalid offset - no link found",
                        "ERR invalid chunk - Too big for current filter",
                        "ERR received bad data",
                    ]
                    .contains(&e.as_str()),
                    "offset {off} length {len}: {e:?}"
                );
            }
            assert_eq!(digest(&mut con, "f"), original, "offset {off} length {len}");
        }
    }
    for it in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX, i64::MAX - 1] {
        let e = con.err_text(&cmd!("BF.LOADCHUNK", "f", it, b"\x01".as_slice()));
        // RedisBloom's order: an iterator that cannot end the chunk is bad data.
        if it <= 0 {
            assert_eq!(e, "ERR received bad data", "iterator {it}");
        } else {
            assert!(e.starts_with("ERR invalid"), "iterator {it}: {e:?}");
        }
        cases += 1;
    }
    for bad in ["1.5", "", " 1", "0x10", "99999999999999999999", "-"] {
        assert_eq!(
            con.err_text(&cmd!("BF.LOADCHUNK", "f", bad, "x")),
            "ERR Second argument must be numeric"
        );
        cases += 1;
    }
    assert_eq!(digest(&mut con, "f"), original);
    eprintln!("{cases} LOADCHUNK offsets and lengths, {accepted} inside a layer");
    assert_server_healthy(&mut s);
}

#[test]
fn scandump_answers_every_iterator_without_error() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "f", "0.01", 10, "EXPANSION", 2));
    madd(&mut con, "f", &items("x", 60));
    let chunks = scandump(&mut con, "f");
    let total: i64 = chunks[1..].iter().map(|(_, d)| d.len() as i64).sum();
    let mut its: Vec<i64> = vec![i64::MIN, -1, 1, total, total + 1, total + 2, i64::MAX];
    its.extend((2..total + 1).step_by(7));
    for it in its {
        let (next, data): (i64, Vec<u8>) = con.q(&cmd!("BF.SCANDUMP", "f", it));
        if next == 0 {
            assert!(data.is_empty(), "iterator {it}");
        } else {
            assert!(next > it && !data.is_empty(), "iterator {it} -> {next}");
            assert_eq!(next - it, data.len() as i64, "iterator {it}");
        }
    }
    assert_eq!(
        con.err_text(&cmd!("BF.SCANDUMP", "f", "x")),
        "Second argument must be numeric"
    );
    assert_server_healthy(&mut s);
}

// =============================================================================================
// Absurd command values.
// =============================================================================================

#[test]
fn absurd_reserve_values_are_refused_and_create_nothing() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let huge_digits = "9".repeat(10_000);
    let cases: Vec<(&str, &str, Vec<&str>)> = vec![
        ("nan", "100", vec![]),
        ("NaN", "100", vec![]),
        ("inf", "100", vec![]),
        ("-inf", "100", vec![]),
        ("1e309", "100", vec![]),
        ("1e-400", "100", vec![]),
        ("-0", "100", vec![]),
        ("0x", "100", vec![]),
        ("0x1p-1080", "100", vec![]),
        ("", "100", vec![]),
        ("0.01\0", "100", vec![]),
        (&huge_digits, "100", vec![]),
        ("0.01", "-1", vec![]),
        ("0.01", "0", vec![]),
        ("0.01", "1073741825", vec![]),
        ("0.01", "9223372036854775807", vec![]),
        ("0.01", "9223372036854775808", vec![]),
        ("0.01", "18446744073709551616", vec![]),
        ("0.01", "-9223372036854775808", vec![]),
        ("0.01", "1e3", vec![]),
        ("0.01", "0x10", vec![]),
        ("0.01", " 1", vec![]),
        ("0.01", "+1", vec![]),
        ("0.01", "1.0", vec![]),
        ("0.01", &huge_digits, vec![]),
        ("0.01", "100", vec!["EXPANSION", "-1"]),
        ("0.01", "100", vec!["EXPANSION", "32769"]),
        ("0.01", "100", vec!["EXPANSION", "4294967296"]),
        ("0.01", "100", vec!["EXPANSION", "9223372036854775807"]),
        ("0.01", "100", vec!["EXPANSION", ""]),
        ("0.01", "100", vec!["EXPANSION", &huge_digits]),
        ("0.01", "100", vec!["EXPANSION"]),
        ("0.01", "100", vec!["EXPANSION", "3", "NONSCALING"]),
        ("0.01", "100", vec!["NONSCALING", "BOGUS"]),
        // Valid but far over the per-filter memory limit.
        ("1e-300", "1073741824", vec![]),
        ("1e-300", "1073741824", vec!["NONSCALING"]),
        // The first layer of a scaling filter gets half the rate: 0 here.
        ("4.9e-324", "100", vec![]),
    ];
    let allowed = [
        "ERR bad error rate",
        "ERR error rate must be in the range (0.000000, 1.000000)",
        "ERR bad capacity",
        "ERR capacity must be in the range [1, 1073741824]",
        "ERR no expansion",
        "ERR bad expansion",
        "ERR expansion must be in the range [0, 32768]",
        "Nonscaling filters cannot expand",
        "ERR Unknown argument received",
        "ERR could not create filter",
        "ERR Insufficient memory to create filter",
        "ERR wrong number of arguments",
    ];
    for (rate, cap, opts) in &cases {
        let mut c = cmd!("BF.RESERVE", "k", *rate, *cap);
        for o in opts {
            c.arg(*o);
        }
        let e = con.err_text(&c);
        assert!(
            allowed.iter().any(|a| e.starts_with(a)),
            "BF.RESERVE k {rate:.20} {cap:.20} {opts:?}: {e:?}"
        );
        assert!(!key_exists(&mut con, "k"), "{rate:.20} {cap:.20} {opts:?}");
    }
    // Extremes that are valid make working filters.
    for (rate, cap, opts) in [
        ("4.9e-324", "1", vec!["NONSCALING"]),
        ("1e-300", "1", vec![]),
        ("0.999999999", "1", vec![]),
        ("0.25", "10000000", vec!["NONSCALING"]),
    ] {
        let key = format!("ok:{rate}:{cap}");
        let mut c = cmd!("BF.RESERVE", &key, rate, cap);
        for o in &opts {
            c.arg(*o);
        }
        con.ok(&c);
        assert_usable(&mut con, &key, &key);
        con.q::<i64>(&cmd!("UNLINK", &key));
    }
    eprintln!("{} absurd BF.RESERVE forms refused", cases.len());
    assert_server_healthy(&mut s);
}

#[test]
fn absurd_insert_values_are_refused_and_create_nothing() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    let opts: Vec<Vec<&str>> = vec![
        vec!["CAPACITY", "0"],
        vec!["CAPACITY", "-5"],
        vec!["CAPACITY", "1073741825"],
        vec!["CAPACITY", "99999999999999999999"],
        vec!["ERROR", "0"],
        vec!["ERROR", "1"],
        vec!["ERROR", "nan"],
        vec!["ERROR", "inf"],
        vec!["ERROR", "-0.5"],
        vec!["ERROR", "1e-400"],
        vec!["EXPANSION", "-1"],
        vec!["EXPANSION", "32769"],
        vec!["EXPANSION", "1e3"],
        vec!["BOGUS"],
        vec!["CAPACITY"],
        vec!["ERROR", "1e-300", "CAPACITY", "1073741824"],
        vec!["ERROR", "4.9e-324"],
    ];
    for o in &opts {
        let mut c = cmd!("BF.INSERT", "k");
        for w in o {
            c.arg(*w);
        }
        c.arg("ITEMS").arg("a");
        let v = con.raw(&c);
        let e = error_of(&v).unwrap_or_else(|| panic!("BF.INSERT {o:?} accepted: {v:?}"));
        assert!(
            [
                "Bad capacity",
                "Bad error rate",
                "Bad expansion",
                "Unknown argument received",
                "ERR wrong number of arguments",
                "ERR Insufficient memory to create filter",
                "ERR could not create filter",
            ]
            .iter()
            .any(|a| e.starts_with(a)),
            "BF.INSERT {o:?}: {e:?}"
        );
        assert!(
            !key_exists(&mut con, "k"),
            "BF.INSERT {o:?} created the key"
        );
    }
    // 100 000 option words, then items: parsed in one pass, last value wins.
    let mut c = cmd!("BF.INSERT", "many");
    for n in 0..50_000 {
        c.arg("CAPACITY").arg(1 + n % 1000);
    }
    c.arg("NONSCALING").arg("ITEMS").arg("a");
    assert_eq!(con.q::<Vec<i64>>(&c), vec![1]);
    assert_eq!(bf_info(&mut con, "many").capacity, 1000);
    // 200 000 empty and NUL items in one BF.INSERT.
    let mut c = cmd!("BF.INSERT", "wide", "CAPACITY", 1000, "ITEMS");
    for n in 0..200_000u32 {
        c.arg(if n % 2 == 0 {
            b"".as_slice()
        } else {
            b"\0".as_slice()
        });
    }
    let r: Vec<i64> = con.q(&c);
    assert_eq!(r.len(), 200_000);
    assert_eq!(r.iter().sum::<i64>(), 2, "two distinct items");
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "wide")), 2);
    assert_server_healthy(&mut s);
}

#[test]
fn growth_that_would_pass_the_memory_limit_is_refused_without_change() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    // Capacity 1, expansion 32768, error 1e-300: the third layer (2^30 items at < 1e-30)
    // needs far more than the 4 GB limit.
    con.ok(&cmd!("BF.RESERVE", "f", "1e-300", 1, "EXPANSION", 32768));
    let all = items("g", 40_000);
    let mut refused_at = None;
    for (n, batch) in all.chunks(1000).enumerate() {
        let mut c = cmd!("BF.MADD", "f");
        for i in batch {
            c.arg(i.as_slice());
        }
        let v = con.raw(&c);
        let Value::Array(r) = &v else { panic!("{v:?}") };
        if let Some(e) = r.last().and_then(error_of) {
            assert!(e.starts_with("ERR problem inserting into filter"), "{e:?}");
            // Items before the error were added; a retry of the failing item changes nothing.
            let failing = &batch[r.len() - 1];
            let d = digest(&mut con, "f");
            let e2 = con.err_text(&cmd!("BF.ADD", "f", failing.as_slice()));
            assert!(e2.starts_with("ERR problem inserting into filter"));
            assert_eq!(digest(&mut con, "f"), d);
            refused_at = Some(n * 1000 + r.len() - 1);
            break;
        }
    }
    assert_eq!(
        refused_at,
        Some(32769),
        "the item after two full layers (1 + 32768) is refused"
    );
    let info = bf_info(&mut con, "f");
    assert_eq!((info.filters, info.items), (2, 32769));
    assert!(mexists(&mut con, "f", &all[..32769]).iter().all(|&x| x));
    assert_server_healthy(&mut s);
}

// =============================================================================================
// Very large arguments.
// =============================================================================================

/// A deterministic item of `len` bytes.
fn big_item(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn large_arguments_are_handled(item_len: usize) {
    let mut s = Server::builder()
        .config("proto-max-bulk-len", "600mb")
        .config("client-query-buffer-limit", "1gb")
        .start();
    let mut con = conn(&s);
    let item = big_item(item_len, 1);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "f", item.as_slice())), 1);
    assert_eq!(con.q::<i64>(&cmd!("BF.EXISTS", "f", item.as_slice())), 1);
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "f", item.as_slice())), 0);
    let mut other = item.clone();
    *other.last_mut().unwrap() ^= 1;
    assert_eq!(
        con.q::<Vec<i64>>(&cmd!("BF.MADD", "f", other.as_slice(), "small")),
        vec![1, 1]
    );
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "f")), 3);
    drop(other);
    let d = digest(&mut con, "f");
    // As every other argument, a huge one is refused without change.
    assert_eq!(
        con.err_text(&cmd!("BF.LOADCHUNK", "new", 1, item.as_slice())),
        "ERR received bad data"
    );
    assert!(!key_exists(&mut con, "new"));
    let e = con.err_text(&cmd!(
        "BF.LOADCHUNK",
        "f",
        1 + item_len as i64,
        item.as_slice()
    ));
    assert!(e.starts_with("ERR invalid"), "{e:?}");
    assert_eq!(
        con.err_text(&cmd!("BF.RESERVE", "r", "0.01", item.as_slice())),
        "ERR bad capacity"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.RESERVE", "r", item.as_slice(), 10)),
        "ERR bad error rate"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.SCANDUMP", "f", item.as_slice())),
        "Second argument must be numeric"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.INFO", "f", item.as_slice())),
        "Invalid information value"
    );
    assert_eq!(digest(&mut con, "f"), d);
    // A key name that large works too.
    assert_eq!(
        con.q::<i64>(&cmd!("BF.ADD", item.as_slice(), "x")),
        1,
        "huge key name"
    );
    assert_eq!(con.q::<i64>(&cmd!("BF.EXISTS", item.as_slice(), "x")), 1);
    assert_eq!(con.q::<i64>(&cmd!("UNLINK", item.as_slice())), 1);
    assert_server_healthy(&mut s);
}

#[test]
fn arguments_of_100_mb_are_handled_like_any_other() {
    large_arguments_are_handled(100 << 20);
}

/// The largest argument Redis accepts by default (proto-max-bulk-len 512mb). Heavy: run with
/// `make test-heavy`.
#[test]
#[ignore = "heavy: 512 MB arguments; make test-heavy"]
fn arguments_of_512_mb_are_handled_like_any_other() {
    large_arguments_are_handled(512 << 20);
}

#[test]
fn an_argument_over_proto_max_bulk_len_is_refused_by_redis_and_changes_nothing() {
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("CONFIG", "SET", "proto-max-bulk-len", "1mb"));
    con.q::<i64>(&cmd!("BF.ADD", "f", "a"));
    let d = digest(&mut con, "f");
    let item = big_item((1 << 20) + 1, 2);
    let mut victim = conn(&s);
    // Redis answers a protocol error and closes the connection.
    let r = victim.req_command(&cmd!("BF.ADD", "f", item.as_slice()));
    match r {
        Ok(Value::ServerError(e)) => {
            let t = common::server_error_text(&e);
            assert!(t.contains("Protocol error"), "{t:?}");
        }
        Ok(v) => panic!("an over-long argument was accepted: {v:?}"),
        Err(_) => {} // the connection was closed
    }
    let mut con = conn(&s);
    assert_eq!(digest(&mut con, "f"), d);
    assert_eq!(con.q::<i64>(&cmd!("BF.CARD", "f")), 1);
    assert_server_healthy(&mut s);
}

// =============================================================================================
// maxmemory.
// =============================================================================================

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

#[test]
fn at_maxmemory_every_bf_write_is_refused_whole_and_reads_still_work() {
    require_own_server!();
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "scaling", "0.01", 100));
    madd(&mut con, "scaling", &items("a", 90));
    con.ok(&cmd!("BF.RESERVE", "ns", "0.01", 10, "NONSCALING"));
    let chunks = scandump(&mut con, "scaling");
    let keys = ["scaling", "ns"];
    let before: Vec<String> = keys.iter().map(|k| digest(&mut con, k)).collect();
    // Ballast, then a limit under the memory now used.
    con.ok(&cmd!("DEBUG", "POPULATE", 20_000, "ballast", 512));
    let used = info_i64(&mut con, "memory", "used_memory");
    con.ok(&cmd!("CONFIG", "SET", "maxmemory-policy", "noeviction"));
    con.ok(&cmd!("CONFIG", "SET", "maxmemory", used - (2 << 20)));
    let writes = vec![
        cmd!("BF.ADD", "scaling", "new"),
        cmd!("BF.ADD", "missing", "new"),
        cmd!("BF.MADD", "scaling", "a-1", "new1", "new2"),
        cmd!("BF.MADD", "missing", "x"),
        cmd!("BF.INSERT", "scaling", "ITEMS", "new3"),
        cmd!("BF.INSERT", "missing", "CAPACITY", 10, "ITEMS", "x"),
        cmd!("BF.INSERT", "ns", "ITEMS", "x", "y"),
        cmd!("BF.RESERVE", "missing", "0.01", 100),
        cmd!("BF.LOADCHUNK", "missing", 1, chunks[0].1.as_slice()),
        cmd!(
            "BF.LOADCHUNK",
            "scaling",
            chunks[1].0,
            vec![0xffu8; chunks[1].1.len()].as_slice()
        ),
    ];
    for w in &writes {
        assert_eq!(con.err_text(w), OOM, "{}", common::show(w));
    }
    // In a transaction the OOM refusal aborts the EXEC (Redis 7 checks at queue time).
    con.ok(&cmd!("MULTI"));
    let q = con.raw(&cmd!("BF.ADD", "scaling", "in-multi"));
    assert_eq!(error_of(&q).as_deref(), Some(OOM), "{q:?}");
    let e = con.err_text(&cmd!("EXEC"));
    assert!(e.starts_with("EXECABORT"), "{e:?}");
    // Nothing changed, nothing was created, and reads answer.
    let after: Vec<String> = keys.iter().map(|k| digest(&mut con, k)).collect();
    assert_eq!(after, before);
    assert!(!key_exists(&mut con, "missing"));
    assert_eq!(con.q::<i64>(&cmd!("BF.EXISTS", "scaling", "a-1")), 1);
    assert_eq!(con.q::<i64>(&cmd!("BF.EXISTS", "scaling", "new")), 0);
    assert_eq!(bf_info(&mut con, "scaling").items, 90);
    assert_eq!(scandump(&mut con, "scaling"), chunks);
    // Freeing memory makes writes possible again.
    con.ok(&cmd!("CONFIG", "SET", "maxmemory", 0));
    con.ok(&cmd!("FLUSHDB"));
    assert_eq!(con.q::<i64>(&cmd!("BF.ADD", "again", "x")), 1);
    assert_server_healthy(&mut s);
}

#[test]
fn writes_are_refused_once_maxmemory_is_reached_and_acknowledged_items_stay() {
    require_own_server!();
    let mut s = hostile_server();
    let mut con = conn(&s);
    // Layers of 1000, 4000, ... 1 048 576 000 items: the 1M-item layer, several MB, is
    // allocated by one add and takes the server past maxmemory (checked before commands).
    con.ok(&cmd!("BF.RESERVE", "f", "0.0001", 1000, "EXPANSION", 4));
    let used = info_i64(&mut con, "memory", "used_memory");
    con.ok(&cmd!("CONFIG", "SET", "maxmemory-policy", "noeviction"));
    con.ok(&cmd!("CONFIG", "SET", "maxmemory", used + (4 << 20)));
    let all = items("m", 3_000_000);
    let mut acked = 0usize;
    let mut refused = false;
    for batch in all.chunks(5_000) {
        let mut c = cmd!("BF.MADD", "f");
        for i in batch {
            c.arg(i.as_slice());
        }
        let d = digest(&mut con, "f");
        let v = con.raw(&c);
        if let Some(e) = error_of(&v) {
            assert_eq!(e, OOM);
            assert_eq!(
                digest(&mut con, "f"),
                d,
                "a refused BF.MADD changed the filter"
            );
            refused = true;
            break;
        }
        let Value::Array(r) = &v else { panic!("{v:?}") };
        // A growth that would pass maxmemory ends the reply with the OOM error; the items
        // before it were added.
        if let Some(e) = r.last().and_then(error_of) {
            assert_eq!(e, OOM);
            assert!(r[..r.len() - 1].iter().all(|x| error_of(x).is_none()));
            acked += r.len() - 1;
            refused = true;
            break;
        }
        assert_eq!(r.len(), batch.len());
        acked += batch.len();
    }
    assert!(refused, "3 million items never reached maxmemory");
    assert!(acked > 0);
    assert!(mexists(&mut con, "f", &all[..acked]).iter().all(|&x| x));
    assert_eq!(
        con.err_text(&cmd!("BF.ADD", "f", "one-more")),
        OOM,
        "still refused"
    );
    assert_server_healthy(&mut s);
}

// =============================================================================================
// Freeing large filters.
// =============================================================================================

/// Frees `key` while another client pings; returns the PINGs answered meanwhile. The free
/// must go to the background thread (`lazyfreed_objects` counts it) and every PING must be
/// answered.
fn free_while_pinging(s: &Server, con: &mut redis::Connection, free: redis::Cmd) -> u64 {
    let before = common::lazyfreed_objects(con);
    let stop = Arc::new(AtomicBool::new(false));
    let pongs = Arc::new(AtomicU64::new(0));
    let pinger = {
        let mut p = conn(s);
        let stop = stop.clone();
        let pongs = pongs.clone();
        std::thread::spawn(move || {
            // Bounded: at most a million PINGs.
            for _ in 0..1_000_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                assert_pong(&mut p);
                pongs.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let v = con.raw(&free);
    assert!(error_of(&v).is_none(), "{}: {v:?}", common::show(&free));
    common::wait_until(
        Duration::from_secs(120),
        "lazyfreed_objects to count the filter",
        || common::lazyfreed_objects(con) > before,
    );
    stop.store(true, Ordering::Relaxed);
    pinger.join().expect("the pinging client failed");
    assert_pong(con);
    pongs.load(Ordering::Relaxed)
}

#[test]
fn unlink_of_a_large_filter_frees_it_in_the_background_while_clients_are_served() {
    require_own_server!();
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "big", "0.01", 200_000_000));
    assert!(bf_info(&mut con, "big").size > 200 << 20);
    let used = info_i64(&mut con, "memory", "used_memory");
    let pongs = free_while_pinging(&s, &mut con, cmd!("UNLINK", "big"));
    assert!(!key_exists(&mut con, "big"));
    common::wait_until(Duration::from_secs(60), "the memory to be returned", || {
        info_i64(&mut con, "memory", "used_memory") < used - (200 << 20)
    });
    eprintln!("{pongs} PINGs answered while 240 MB were freed");
    assert_server_healthy(&mut s);
}

#[test]
fn a_small_filter_is_freed_at_once_not_in_the_background() {
    require_own_server!();
    let mut s = hostile_server();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "small", "0.01", 1000));
    let before = common::lazyfreed_objects(&mut con);
    assert_eq!(con.q::<i64>(&cmd!("UNLINK", "small")), 1);
    assert_eq!(
        common::lazyfreed_objects(&mut con),
        before,
        "a 1 KB filter is not worth a thread"
    );
    assert_server_healthy(&mut s);
}

#[test]
fn del_flushall_and_overwrites_free_large_filters_lazily_when_configured() {
    require_own_server!();
    let mut s = Server::builder()
        .config("lazyfree-lazy-user-del", "yes")
        .config("lazyfree-lazy-server-del", "yes")
        .start();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "a", "0.01", 20_000_000));
    free_while_pinging(&s, &mut con, cmd!("DEL", "a"));
    // RESTORE REPLACE over a big filter frees the old value in the background.
    con.ok(&cmd!("BF.RESERVE", "b", "0.01", 20_000_000));
    con.ok(&cmd!("BF.RESERVE", "tiny", "0.01", 10));
    let payload: Vec<u8> = con.q(&cmd!("DUMP", "tiny"));
    free_while_pinging(
        &s,
        &mut con,
        cmd!("RESTORE", "b", 0, payload.as_slice(), "REPLACE"),
    );
    assert_eq!(digest(&mut con, "b"), digest(&mut con, "tiny"));
    con.ok(&cmd!("BF.RESERVE", "c", "0.01", 20_000_000));
    free_while_pinging(&s, &mut con, cmd!("FLUSHALL", "ASYNC"));
    assert_eq!(con.q::<i64>(&cmd!("DBSIZE")), 0);
    assert_server_healthy(&mut s);
}

/// A multi-GiB filter: created, used by every command, freed with UNLINK while another client
/// is served. Prints each command's `usec_per_call` (recorded in docs/RELIABILITY.md; never
/// asserted). Heavy: run with `make test-heavy`.
#[test]
#[ignore = "heavy: a 2.5 GiB filter; make test-heavy"]
fn a_multi_gib_filter_is_served_and_freed_without_blocking() {
    require_own_server!();
    let mut s = Server::builder()
        .config("proto-max-bulk-len", "64mb")
        .start();
    let mut con = conn(&s);
    con.ok(&cmd!("BF.RESERVE", "huge", "0.0001", 1_073_741_824));
    let size = bf_info(&mut con, "huge").size;
    assert!(size > 2 << 30, "Size {size}");
    con.ok(&cmd!("BF.RESERVE", "small", "0.0001", 1000));
    con.ok(&cmd!("CONFIG", "RESETSTAT"));
    for key in ["huge", "small"] {
        madd(&mut con, key, &items("i", 1000));
        mexists(&mut con, key, &items("i", 1000));
        con.q::<i64>(&cmd!("BF.EXISTS", key, "i-1"));
        bf_info(&mut con, key);
        con.q::<i64>(&cmd!("BF.CARD", key));
        con.q::<i64>(&cmd!("MEMORY", "USAGE", key));
        let (_, chunk): (i64, Vec<u8>) = con.q(&cmd!("BF.SCANDUMP", key, 1));
        assert!(chunk.len() <= 16 << 20);
        con.ok(&cmd!(
            "BF.LOADCHUNK",
            key,
            1 + chunk.len() as i64,
            chunk.as_slice()
        ));
        let stats = con.info_map("commandstats");
        let mut lines: Vec<String> = stats
            .iter()
            .filter(|(k, _)| k.starts_with("cmdstat_"))
            .map(|(k, v)| format!("{key} {k} {v}"))
            .collect();
        lines.sort();
        eprintln!("{}", lines.join("\n"));
        con.ok(&cmd!("CONFIG", "RESETSTAT"));
    }
    let d = digest(&mut con, "huge");
    assert_eq!(d.len(), 40);
    let pongs = free_while_pinging(&s, &mut con, cmd!("UNLINK", "huge"));
    let stats = con.info_map("commandstats");
    eprintln!(
        "UNLINK of {size} bytes: {:?}; {pongs} PINGs answered while it was freed",
        stats.get("cmdstat_unlink")
    );
    assert_server_healthy(&mut s);
}

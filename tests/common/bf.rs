//! Helpers over the module's own commands (`BF.INFO` parsed, batched `BF.MADD`/`BF.MEXISTS`,
//! SCANDUMP walks and their replay), and reproducible workloads (items, a seeded generator).

use redis::Value;

use super::conn::{text_of, Exec};

/// The five fields of `BF.INFO key`, looked up by name (the exact reply shape has its own
/// tests; this parser only needs the values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfInfo {
    pub capacity: i64,
    pub size: i64,
    pub filters: i64,
    pub items: i64,
    /// `None` for a non-scaling filter.
    pub expansion: Option<i64>,
}

/// `BF.INFO key` over a RESP2 connection.
pub fn bf_info(con: &mut redis::Connection, key: &str) -> BfInfo {
    let v = con.raw(&cmd!("BF.INFO", key));
    let pairs: Vec<(String, Value)> = match &v {
        Value::Array(items) if items.len() % 2 == 0 => items
            .chunks(2)
            .map(|p| (text_of(&p[0]).unwrap_or_default(), p[1].clone()))
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| (text_of(k).unwrap_or_default(), v.clone()))
            .collect(),
        _ => panic!("BF.INFO {key} replied {v:?}"),
    };
    let field = |name: &str| -> Value {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("BF.INFO {key} has no {name:?}: {v:?}"))
    };
    let int = |name: &str| -> i64 {
        match field(name) {
            Value::Int(n) => n,
            other => panic!("BF.INFO {key} field {name:?} is {other:?}, not an integer"),
        }
    };
    BfInfo {
        capacity: int("Capacity"),
        size: int("Size"),
        filters: int("Number of filters"),
        items: int("Number of items inserted"),
        expansion: match field("Expansion rate") {
            Value::Nil => None,
            Value::Int(n) => Some(n),
            other => panic!("BF.INFO {key} expansion is {other:?}"),
        },
    }
}

/// `DEBUG DIGEST-VALUE key` (hex).
pub fn digest(con: &mut redis::Connection, key: &str) -> String {
    let v: Vec<String> = con.q(&cmd!("DEBUG", "DIGEST-VALUE", key));
    v.into_iter()
        .next()
        .expect("DEBUG DIGEST-VALUE replied nothing")
}

/// `BF.MEXISTS` over many items, in batches; one bool per item.
pub fn mexists(con: &mut redis::Connection, key: &str, items: &[Vec<u8>]) -> Vec<bool> {
    let mut out = Vec::with_capacity(items.len());
    for batch in items.chunks(1000) {
        let mut c = cmd!("BF.MEXISTS", key);
        for item in batch {
            c.arg(item.as_slice());
        }
        let r: Vec<i64> = con.q(&c);
        assert_eq!(r.len(), batch.len(), "BF.MEXISTS reply length");
        out.extend(r.into_iter().map(|x| x == 1));
    }
    out
}

/// `BF.MADD` over many items, in batches; the replies (1/0) per item. Panics on any error.
pub fn madd(con: &mut redis::Connection, key: &str, items: &[Vec<u8>]) -> Vec<i64> {
    let mut out = Vec::with_capacity(items.len());
    for batch in items.chunks(1000) {
        let mut c = cmd!("BF.MADD", key);
        for item in batch {
            c.arg(item.as_slice());
        }
        let r: Vec<i64> = con.q(&c);
        assert_eq!(r.len(), batch.len(), "BF.MADD reply length");
        out.extend(r);
    }
    out
}

/// `n` distinct items `<prefix>-<i>`.
pub fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .collect()
}

/// Every `(iterator, data)` pair of a `BF.SCANDUMP` walk, the final `[0, ""]` excluded.
/// Checks the walk's shape: the first reply is `[1, header]`, the last `[0, ""]`.
pub fn scandump(con: &mut redis::Connection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it: i64 = 0;
    for _ in 0..100_000 {
        let v = con.raw(&cmd!("BF.SCANDUMP", key, it));
        let (next, data) = match &v {
            Value::Array(p) if p.len() == 2 => match (&p[0], &p[1]) {
                (Value::Int(n), Value::BulkString(d)) => (*n, d.clone()),
                _ => panic!("BF.SCANDUMP {key} {it} replied {v:?}"),
            },
            _ => panic!("BF.SCANDUMP {key} {it} replied {v:?}"),
        };
        if it == 0 {
            assert_eq!(next, 1, "BF.SCANDUMP {key} 0 must return iterator 1");
            assert!(
                !data.is_empty(),
                "BF.SCANDUMP {key} 0 returned an empty header"
            );
        }
        if next == 0 {
            assert!(
                data.is_empty(),
                "the final SCANDUMP reply must be [0, \"\"]"
            );
            return out;
        }
        out.push((next, data));
        it = next;
    }
    panic!("BF.SCANDUMP {key} never returned iterator 0");
}

/// Replays a SCANDUMP walk with `BF.LOADCHUNK` into `key`.
pub fn loadchunks(con: &mut redis::Connection, key: &str, chunks: &[(i64, Vec<u8>)]) {
    for (it, data) in chunks {
        con.ok(&cmd!("BF.LOADCHUNK", key, *it, data.as_slice()));
    }
}

/// Whether `key` exists (Redis `EXISTS`).
pub fn key_exists(con: &mut redis::Connection, key: &str) -> bool {
    con.q::<i64>(&cmd!("EXISTS", key)) == 1
}

/// A small deterministic pseudo-random generator (SplitMix64) for reproducible workloads.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// An element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

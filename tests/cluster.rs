//! Redis Cluster: a local cluster of three primaries on loopback ports, started by each test.
//! Every BF and CF command works through a cluster-aware client, keys route by their hash slot
//! (a node that does not own the slot answers MOVED; a transaction over two slots is refused
//! with CROSSSLOT), and moving a filter key to another node, by hand (`CLUSTER SETSLOT` +
//! `MIGRATE`) or with `redis-cli --cluster reshard`, or copying it with SCANDUMP / LOADCHUNK,
//! keeps it intact: the same digest, every item still present.

use crate::common;
use common::setting;

use std::process::Command;
use std::time::Duration;

use common::{error_of, free_port, items, Exec, Server, CF_INFO_FIELDS};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Cmd, ConnectionLike, FromRedisValue, Value};

/// Three primaries owning all 16384 slots.
struct Cluster {
    nodes: Vec<Server>,
}

impl Cluster {
    fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                Server::builder()
                    .config("cluster-enabled", "yes")
                    .config("cluster-config-file", "nodes.conf")
                    .config("cluster-node-timeout", "5000")
                    // The bus port would be port + 10000, which may not exist: choose it.
                    .config("cluster-port", &free_port().to_string())
                    .start()
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("cannot run redis-cli");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        cluster.wait_ok();
        cluster
    }

    /// Waits until every node reports `cluster_state:ok` and agrees on all slots.
    fn wait_ok(&self) {
        for n in &self.nodes {
            let mut con = n.conn();
            common::wait_until(Duration::from_secs(60), "cluster_state:ok", || {
                let v = con.raw(&cmd!("CLUSTER", "INFO"));
                let text = common::text_of(&v).unwrap_or_default();
                text.contains("cluster_state:ok") && text.contains("cluster_slots_ok:16384")
            });
        }
    }

    fn client(&self) -> ClusterConnection {
        let urls: Vec<String> = self.nodes.iter().map(|n| n.url().to_string()).collect();
        ClusterClient::new(urls)
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }

    fn node_id(&self, i: usize) -> String {
        self.nodes[i].conn().q(&cmd!("CLUSTER", "MYID"))
    }

    /// The index of the node that owns `slot`, as that node itself says.
    fn owner(&self, slot: i64) -> usize {
        (0..3)
            .find(|&i| {
                let v: Value = self.nodes[i].conn().raw(&cmd!("CLUSTER", "SLOTS"));
                owns(&v, slot, self.nodes[i].port())
            })
            .unwrap_or_else(|| panic!("no node owns slot {slot}"))
    }

    fn slot(&self, key: &str) -> i64 {
        self.nodes[0].conn().q(&cmd!("CLUSTER", "KEYSLOT", key))
    }

    /// The keys of a test are spread over every node (`per_node` of them on each, as their
    /// owners said), and the nodes hold `keys` keys in all.
    fn assert_spread(&self, per_node: &[usize], keys: usize) {
        assert!(
            per_node.iter().all(|&n| n > 0),
            "{keys} keys should spread over the 3 nodes: {per_node:?}"
        );
        let total: i64 = self
            .nodes
            .iter()
            .map(|n| n.conn().q::<i64>(&cmd!("DBSIZE")))
            .sum();
        assert_eq!(total, keys as i64);
    }

    /// Marks `slot` as moving from node `src` to node `dst`.
    fn begin_migration(&self, slot: i64, src: usize, dst: usize) {
        let (src_id, dst_id) = (self.node_id(src), self.node_id(dst));
        self.nodes[dst]
            .conn()
            .ok(&cmd!("CLUSTER", "SETSLOT", slot, "IMPORTING", &src_id));
        self.nodes[src]
            .conn()
            .ok(&cmd!("CLUSTER", "SETSLOT", slot, "MIGRATING", &dst_id));
    }

    /// Ends a migration `begin_migration` began: MIGRATEs every key of `slot` (the keys
    /// returned) from node `src` to node `dst`, then gives the slot to `dst` on every node.
    fn finish_migration(&self, slot: i64, src: usize, dst: usize) -> Vec<String> {
        let mut s = self.nodes[src].conn();
        let keys: Vec<String> = s.q(&cmd!("CLUSTER", "GETKEYSINSLOT", slot, 100));
        let mut m = cmd!(
            "MIGRATE",
            "127.0.0.1",
            self.nodes[dst].port(),
            "",
            0,
            10_000,
            "KEYS"
        );
        for k in &keys {
            m.arg(k);
        }
        s.ok(&m);
        let dst_id = self.node_id(dst);
        for n in &self.nodes {
            n.conn()
                .ok(&cmd!("CLUSTER", "SETSLOT", slot, "NODE", &dst_id));
        }
        self.wait_ok();
        keys
    }
}

/// Whether a `CLUSTER SLOTS` reply gives `slot` to the node on `port`.
fn owns(slots: &Value, slot: i64, port: u16) -> bool {
    let Value::Array(ranges) = slots else {
        return false;
    };
    ranges.iter().any(|r| match r {
        Value::Array(f) if f.len() >= 3 => {
            let (Value::Int(a), Value::Int(b)) = (&f[0], &f[1]) else {
                return false;
            };
            let Value::Array(master) = &f[2] else {
                return false;
            };
            (*a..=*b).contains(&slot) && master.get(1) == Some(&Value::Int(i64::from(port)))
        }
        _ => false,
    })
}

/// A command through the cluster client that must fail: the server's error text.
fn cerr(cc: &mut ClusterConnection, c: &Cmd) -> String {
    match cc.req_command(c) {
        Ok(Value::ServerError(e)) => common::server_error_text(&e),
        Ok(v) => panic!("{} should fail, got {v:?}", common::show(c)),
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => panic!("{} through the cluster client: {e}", common::show(c)),
        },
    }
}

/// A command through the cluster client, converted; panics on an error reply.
fn cq<T: FromRedisValue>(cc: &mut ClusterConnection, c: &Cmd) -> T {
    c.query(cc)
        .unwrap_or_else(|e| panic!("{} through the cluster client: {e}", common::show(c)))
}

/// A key's digest, asked of the node that holds it.
fn digest_on(node: &Server, key: &str) -> String {
    common::digest(&mut node.conn(), key)
}

/// Copies a filter through the cluster client with SCANDUMP / LOADCHUNK.
fn copy_by_chunks(cc: &mut ClusterConnection, from: &str, to: &str) {
    let mut it = 0i64;
    for _ in 0..100_000 {
        let (next, data): (i64, Vec<u8>) = cq(cc, &cmd!("BF.SCANDUMP", from, it));
        if next == 0 {
            return;
        }
        let ok: String = cq(cc, &cmd!("BF.LOADCHUNK", to, next, data.as_slice()));
        assert_eq!(ok, "OK");
        it = next;
    }
    panic!("SCANDUMP of {from} never ended");
}

#[test]
fn every_bf_command_works_through_a_cluster_client_and_keys_route_by_slot() {
    require_own_server!();
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    let keys: Vec<String> = (0..30).map(|i| format!("filter:{i}")).collect();
    for (n, k) in keys.iter().enumerate() {
        let list = items(k, 50 + n * 10);
        match n % 3 {
            0 => {
                let ok: String = cq(&mut cc, &cmd!("BF.RESERVE", k, "0.01", 20, "EXPANSION", 2));
                assert_eq!(ok, "OK");
                let mut c = cmd!("BF.MADD", k);
                for i in &list {
                    c.arg(i.as_slice());
                }
                let r: Vec<i64> = cq(&mut cc, &c);
                assert_eq!(r.len(), list.len());
            }
            1 => {
                let mut c = cmd!("BF.INSERT", k, "CAPACITY", 1000, "ERROR", "0.001", "ITEMS");
                for i in &list {
                    c.arg(i.as_slice());
                }
                let r: Vec<i64> = cq(&mut cc, &c);
                assert_eq!(r.len(), list.len());
            }
            _ => {
                for i in &list {
                    let _: i64 = cq(&mut cc, &cmd!("BF.ADD", k, i.as_slice()));
                }
            }
        }
        for i in &list {
            let one: i64 = cq(&mut cc, &cmd!("BF.EXISTS", k, i.as_slice()));
            assert_eq!(one, 1, "{k}: an added item is missing");
        }
        let mut c = cmd!("BF.MEXISTS", k);
        for i in &list {
            c.arg(i.as_slice());
        }
        let all: Vec<i64> = cq(&mut cc, &c);
        assert!(all.iter().all(|&x| x == 1));
        let card: i64 = cq(&mut cc, &cmd!("BF.CARD", k));
        assert!(card >= 1 && card <= list.len() as i64);
        let info: Vec<Value> = cq(&mut cc, &cmd!("BF.INFO", k));
        let names: Vec<String> = info
            .iter()
            .step_by(2)
            .take(5)
            .filter_map(common::text_of)
            .collect();
        assert_eq!(
            names,
            [
                "Capacity",
                "Size",
                "Number of filters",
                "Number of items inserted",
                "Expansion rate"
            ],
            "{k}: BF.INFO {info:?}"
        );
        let items_field: Vec<i64> = cq(&mut cc, &cmd!("BF.INFO", k, "ITEMS"));
        assert_eq!(items_field, vec![card]);
    }

    // Each key lives on the node owning its slot, and only there; the others answer MOVED.
    let mut per_node = [0usize; 3];
    for k in &keys {
        let slot = cluster.slot(k);
        let owner = cluster.owner(slot);
        per_node[owner] += 1;
        for (i, node) in cluster.nodes.iter().enumerate() {
            let v = node.conn().raw(&cmd!("BF.EXISTS", k, "x"));
            if i == owner {
                assert!(error_of(&v).is_none(), "{k} on its owner: {v:?}");
            } else {
                let e = error_of(&v).unwrap_or_else(|| panic!("{k} served by node {i}: {v:?}"));
                let moved = format!("MOVED {slot} 127.0.0.1:{}", cluster.nodes[owner].port());
                assert_eq!(e, moved, "{k} asked of node {i}");
            }
        }
        let getkeys: Vec<String> = cluster.nodes[0]
            .conn()
            .q(&cmd!("COMMAND", "GETKEYS", "BF.ADD", k, "x"));
        assert_eq!(getkeys, vec![k.clone()]);
    }
    cluster.assert_spread(&per_node, keys.len());

    // SCANDUMP / LOADCHUNK through the client copy filters across slots and nodes.
    for k in keys.iter().take(6) {
        let to = format!("{k}:copy");
        copy_by_chunks(&mut cc, k, &to);
        let a = digest_on(&cluster.nodes[cluster.owner(cluster.slot(k))], k);
        let b = digest_on(&cluster.nodes[cluster.owner(cluster.slot(&to))], &to);
        assert_eq!(a, b, "{k} copied by chunks");
    }
    // Hash tags keep related filters on one node.
    let _: i64 = cq(&mut cc, &cmd!("BF.ADD", "{user:7}:seen", "a"));
    let _: i64 = cq(&mut cc, &cmd!("BF.ADD", "{user:7}:liked", "a"));
    assert_eq!(
        cluster.slot("{user:7}:seen"),
        cluster.slot("{user:7}:liked")
    );
    // Errors come back through the client as they do directly.
    assert_eq!(
        cerr(&mut cc, &cmd!("BF.RESERVE", "filter:0", "0.01", 10)),
        "ERR item exists"
    );
    assert_eq!(
        cerr(&mut cc, &cmd!("BF.INFO", "missing-key")),
        "ERR not found"
    );
}

#[test]
fn bf_merge_works_within_a_slot_and_is_refused_across_slots() {
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    let (a, b, dest) = ("{team}:a", "{team}:b", "{team}:union");
    let _: String = cq(&mut cc, &cmd!("BF.RESERVE", a, "0.01", 100));
    let _: String = cq(&mut cc, &cmd!("BF.RESERVE", b, "0.01", 100));
    let (xs, ys) = (items("x", 300), items("y", 300));
    for (k, list) in [(a, &xs), (b, &ys)] {
        let mut c = cmd!("BF.MADD", k);
        for i in list {
            c.arg(i.as_slice());
        }
        let _: Vec<i64> = cq(&mut cc, &c);
    }
    // Keys under one hash tag: routed by the client to their node, merged there.
    let _: String = cq(&mut cc, &cmd!("BF.MERGE", dest, a, b));
    let mut c = cmd!("BF.MEXISTS", dest);
    for i in xs.iter().chain(&ys) {
        c.arg(i.as_slice());
    }
    let found: Vec<i64> = cq(&mut cc, &c);
    assert!(
        found.iter().all(|&f| f == 1),
        "an item is missing from the union"
    );
    // The key specs name every key: a destination in another slot than its sources is
    // refused by the server before the command runs, and nothing is created.
    let other = "{elsewhere}:union";
    assert_ne!(cluster.slot(other), cluster.slot(a));
    let owner = cluster.owner(cluster.slot(a));
    let mut con = cluster.nodes[owner].conn();
    assert_eq!(
        con.err_text(&cmd!("BF.MERGE", other, a, b)),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(
        con.err_text(&cmd!("BF.MERGE", dest, a, "{elsewhere}:src")),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    let total: i64 = cluster
        .nodes
        .iter()
        .map(|n| n.conn().q::<i64>(&cmd!("DBSIZE")))
        .sum();
    assert_eq!(total, 3, "only the two sources and the union exist");
}

/// Builds filters of several kinds under one hash tag (one slot) through the client; returns
/// the keys and the items each holds.
fn tagged_filters(cc: &mut ClusterConnection, tag: &str) -> Vec<(String, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    let k = format!("{{{tag}}}:scaling");
    let _: String = cq(cc, &cmd!("BF.RESERVE", &k, "0.01", 50, "EXPANSION", 2));
    let list = items(&k, 600);
    for batch in list.chunks(100) {
        let mut c = cmd!("BF.MADD", &k);
        for i in batch {
            c.arg(i.as_slice());
        }
        let _: Vec<i64> = cq(cc, &c);
    }
    out.push((k, list));

    let k = format!("{{{tag}}}:nonscaling");
    let _: String = cq(cc, &cmd!("BF.RESERVE", &k, "0.001", 100, "NONSCALING"));
    let list = items(&k, 100);
    for i in &list {
        let _: i64 = cq(cc, &cmd!("BF.ADD", &k, i.as_slice()));
    }
    out.push((k, list));

    let k = format!("{{{tag}}}:big");
    let _: String = cq(cc, &cmd!("BF.RESERVE", &k, "0.0001", 2_000_000));
    let list = items(&k, 2000);
    let mut c = cmd!("BF.MADD", &k);
    for i in &list {
        c.arg(i.as_slice());
    }
    let _: Vec<i64> = cq(cc, &c);
    out.push((k, list));
    out
}

/// Every filter answers 1 for each of its items through the client.
fn assert_items_present(cc: &mut ClusterConnection, filters: &[(String, Vec<Vec<u8>>)]) {
    for (k, list) in filters {
        for batch in list.chunks(500) {
            let mut c = cmd!("BF.MEXISTS", k);
            for i in batch {
                c.arg(i.as_slice());
            }
            let r: Vec<i64> = cq(cc, &c);
            assert!(r.iter().all(|&x| x == 1), "{k}: an item is missing");
        }
    }
}

#[test]
fn migrate_moves_filter_keys_between_nodes_intact() {
    require_own_server!();
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    let mut filters = tagged_filters(&mut cc, "mig");
    let slot = cluster.slot(&filters[0].0);
    let src = cluster.owner(slot);
    let dst = (src + 1) % 3;
    // A filter in RedisBloom's classic layout too.
    cluster.nodes[src]
        .conn()
        .ok(&cmd!("CONFIG", "SET", &setting("bf-layout"), "classic"));
    let classic = "{mig}:classic".to_string();
    let list = items(&classic, 300);
    let mut c = cmd!("BF.MADD", &classic);
    for i in &list {
        c.arg(i.as_slice());
    }
    let _: Vec<i64> = cq(&mut cc, &c);
    filters.push((classic, list));
    let digests: Vec<String> = filters
        .iter()
        .map(|(k, _)| digest_on(&cluster.nodes[src], k))
        .collect();
    cluster.begin_migration(slot, src, dst);
    let mut s = cluster.nodes[src].conn();
    let mut d = cluster.nodes[dst].conn();

    // Mid-migration the source still serves the keys it holds; a new key of the slot is
    // created on the target (the client follows the ASK redirect).
    let _: i64 = cq(&mut cc, &cmd!("BF.ADD", &filters[0].0, "during-migration"));
    let late = "{mig}:created-during-migration";
    let _: i64 = cq(&mut cc, &cmd!("BF.ADD", late, "x"));
    // It is on the target, visible there only to a client that says ASKING.
    let e = d.err_text(&cmd!("EXISTS", late));
    assert!(e.starts_with("MOVED"), "{e:?}");
    d.ok(&cmd!("ASKING"));
    assert_eq!(
        d.q::<i64>(&cmd!("EXISTS", late)),
        1,
        "created on the target"
    );
    // The source, which does not hold it, sends clients there.
    let e = s.err_text(&cmd!("EXISTS", late));
    assert!(e.starts_with(&format!("ASK {slot} ")), "{e:?}");
    let digest_before_move = digest_on(&cluster.nodes[src], &filters[0].0);

    let late_digest = {
        d.ok(&cmd!("ASKING"));
        common::digest(&mut d, late)
    };
    let keys = cluster.finish_migration(slot, src, dst);
    assert_eq!(keys.len(), filters.len(), "{keys:?}");

    // Identical on the target, gone from the source, and every item found through the client.
    assert_eq!(s.q::<i64>(&cmd!("CLUSTER", "COUNTKEYSINSLOT", slot)), 0);
    for (n, (k, _)) in filters.iter().enumerate() {
        let moved = digest_on(&cluster.nodes[dst], k);
        if n == 0 {
            assert_eq!(moved, digest_before_move, "{k} after MIGRATE");
            assert_ne!(moved, digests[0], "the mid-migration add is in it");
        } else {
            assert_eq!(moved, digests[n], "{k} after MIGRATE");
        }
    }
    assert_items_present(&mut cc, &filters);
    let one: i64 = cq(
        &mut cc,
        &cmd!("BF.EXISTS", &filters[0].0, "during-migration"),
    );
    assert_eq!(one, 1);
    let one: i64 = cq(&mut cc, &cmd!("BF.EXISTS", late, "x"));
    assert_eq!(one, 1);
    assert_eq!(digest_on(&cluster.nodes[dst], late), late_digest);
    // And they keep working where they are now.
    let added: i64 = cq(&mut cc, &cmd!("BF.ADD", &filters[0].0, "after-migration"));
    assert_eq!(added, 1);
}

#[test]
fn resharding_with_redis_cli_keeps_filters_intact() {
    require_own_server!();
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    // redis-cli moves a source's lowest slots first: tag filters into slots 0..200 of the
    // node that owns slot 0.
    let src = cluster.owner(0);
    let dst = (src + 1) % 3;
    let mut tags = Vec::new();
    for n in 0..100_000 {
        let tag = format!("t{n}");
        if cluster.slot(&format!("{{{tag}}}")) < 200 {
            tags.push(tag);
            if tags.len() == 3 {
                break;
            }
        }
    }
    assert_eq!(tags.len(), 3, "no tags found in the lowest slots");
    let mut filters = Vec::new();
    for tag in &tags {
        filters.extend(tagged_filters(&mut cc, tag));
    }
    let digests: Vec<String> = filters
        .iter()
        .map(|(k, _)| digest_on(&cluster.nodes[src], k))
        .collect();
    let out = Command::new("redis-cli")
        .args([
            "--cluster",
            "reshard",
            &format!("127.0.0.1:{}", cluster.nodes[src].port()),
            "--cluster-from",
            &cluster.node_id(src),
            "--cluster-to",
            &cluster.node_id(dst),
            "--cluster-slots",
            "200",
            "--cluster-yes",
        ])
        .output()
        .expect("cannot run redis-cli");
    assert!(
        out.status.success(),
        "redis-cli --cluster reshard failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.wait_ok();
    for (n, (k, _)) in filters.iter().enumerate() {
        let slot = cluster.slot(k);
        assert_eq!(cluster.owner(slot), dst, "{k} (slot {slot}) was not moved");
        let v = cluster.nodes[src].conn().raw(&cmd!("EXISTS", k));
        let e = error_of(&v).unwrap_or_else(|| panic!("{k} still served by the source: {v:?}"));
        assert!(e.starts_with("MOVED"), "{k} on the source: {e:?}");
        assert_eq!(
            digest_on(&cluster.nodes[dst], k),
            digests[n],
            "{k} after resharding"
        );
    }
    assert_items_present(&mut cc, &filters);
}

// ---------------------------------------------------------------- cuckoo filters

/// Copies a cuckoo filter through the cluster client with CF.SCANDUMP / CF.LOADCHUNK.
fn copy_cf_by_chunks(cc: &mut ClusterConnection, from: &str, to: &str) {
    let mut it = 0i64;
    for _ in 0..100_000 {
        let (next, data): (i64, Option<Vec<u8>>) = cq(cc, &cmd!("CF.SCANDUMP", from, it));
        let Some(data) = data else {
            assert_eq!(next, 0, "{from}: a chunk without data ends the stream");
            return;
        };
        let ok: String = cq(cc, &cmd!("CF.LOADCHUNK", to, next, data.as_slice()));
        assert_eq!(ok, "OK");
        it = next;
    }
    panic!("CF.SCANDUMP of {from} never ended");
}

/// `CF.MEXISTS` of `list` through the client: whether every item is found.
fn cf_all_found(cc: &mut ClusterConnection, key: &str, list: &[Vec<u8>]) -> bool {
    list.chunks(500).all(|batch| {
        let mut c = cmd!("CF.MEXISTS", key);
        for i in batch {
            c.arg(i.as_slice());
        }
        let r: Vec<i64> = cq(cc, &c);
        r.len() == batch.len() && r.iter().all(|&x| x == 1)
    })
}

/// `CF.INFO` through the client, as `(field, value)` pairs in RedisBloom's order.
fn cf_info(cc: &mut ClusterConnection, key: &str) -> Vec<(String, i64)> {
    let flat: Vec<Value> = cq(cc, &cmd!("CF.INFO", key));
    common::cf_info_pairs(&flat)
}

/// One call of each CF command on `key`, with arguments it accepts.
fn every_cf_command(key: &str) -> Vec<Cmd> {
    vec![
        cmd!("CF.RESERVE", key, 100),
        cmd!("CF.ADD", key, "x"),
        cmd!("CF.ADDNX", key, "x"),
        cmd!("CF.INSERT", key, "ITEMS", "x", "y"),
        cmd!("CF.INSERTNX", key, "CAPACITY", 100, "ITEMS", "x"),
        cmd!("CF.EXISTS", key, "x"),
        cmd!("CF.MEXISTS", key, "x", "y"),
        cmd!("CF.DEL", key, "x"),
        cmd!("CF.COUNT", key, "x"),
        cmd!("CF.INFO", key),
        cmd!("CF.SCANDUMP", key, 0),
        cmd!("CF.LOADCHUNK", key, 1, "x"),
        cmd!("CF.COMPACT", key),
        cmd!("CF.DEBUG", key),
    ]
}

#[test]
fn every_cf_command_works_through_a_cluster_client_and_keys_route_by_slot() {
    require_own_server!();
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    let keys: Vec<String> = (0..30).map(|i| format!("cuckoo:{i}")).collect();
    let mut lists = Vec::new();
    for (n, k) in keys.iter().enumerate() {
        let list = items(k, 50 + n * 10);
        match n % 3 {
            // A small filter that grows sub-filters.
            0 => {
                let ok: String = cq(&mut cc, &cmd!("CF.RESERVE", k, 32, "EXPANSION", 1));
                assert_eq!(ok, "OK");
                let mut c = cmd!("CF.INSERT", k, "ITEMS");
                for i in &list {
                    c.arg(i.as_slice());
                }
                let r: Vec<i64> = cq(&mut cc, &c);
                assert_eq!(r, vec![1; list.len()], "{k}");
            }
            1 => {
                let mut c = cmd!("CF.INSERTNX", k, "CAPACITY", 1000, "ITEMS");
                for i in &list {
                    c.arg(i.as_slice());
                }
                let r: Vec<i64> = cq(&mut cc, &c);
                assert_eq!(r.len(), list.len());
                assert!(r.iter().all(|&x| x == 0 || x == 1), "{k}: {r:?}");
            }
            _ => {
                for (j, i) in list.iter().enumerate() {
                    let name = if j % 2 == 0 { "CF.ADD" } else { "CF.ADDNX" };
                    let _: i64 = cq(&mut cc, &cmd!(name, k, i.as_slice()));
                }
            }
        }
        for i in &list {
            let one: i64 = cq(&mut cc, &cmd!("CF.EXISTS", k, i.as_slice()));
            assert_eq!(one, 1, "{k}: an added item is missing");
        }
        assert!(cf_all_found(&mut cc, k, &list), "{k}: CF.MEXISTS");
        let count: i64 = cq(&mut cc, &cmd!("CF.COUNT", k, list[1].as_slice()));
        assert!(count >= 1, "{k}: CF.COUNT {count}");
        let info = cf_info(&mut cc, k);
        let names: Vec<&str> = info.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, CF_INFO_FIELDS, "{k}: CF.INFO");
        if n % 3 == 0 {
            assert!(info[2].1 > 1, "{k} grew: {info:?}");
            assert_eq!(info[3].1, list.len() as i64, "{k}: {info:?}");
        }
        let line: String = cq(&mut cc, &cmd!("CF.DEBUG", k));
        assert!(line.starts_with("bktsize:"), "{k}: {line}");
        // A delete and a compaction leave every other item in place.
        let deleted: i64 = cq(&mut cc, &cmd!("CF.DEL", k, list[0].as_slice()));
        assert_eq!(deleted, 1, "{k}: CF.DEL of an added item");
        let ok: String = cq(&mut cc, &cmd!("CF.COMPACT", k));
        assert_eq!(ok, "OK");
        let items_field: Vec<i64> = cq(&mut cc, &cmd!("CF.INFO", k, "ITEMS"));
        assert_eq!(items_field, vec![info[3].1 - 1], "{k}");
        assert!(cf_all_found(&mut cc, k, &list[1..]), "{k}: after CF.DEL");
        lists.push(list[1..].to_vec());
    }

    // Each key lives on the node owning its slot, and only there: the other nodes answer
    // every CF command, reads and writes, with MOVED to the owner; the key spec names the
    // key for each.
    let mut per_node = [0usize; 3];
    for (n, k) in keys.iter().enumerate() {
        let slot = cluster.slot(k);
        let owner = cluster.owner(slot);
        per_node[owner] += 1;
        if n >= 6 {
            continue;
        }
        let moved = format!("MOVED {slot} 127.0.0.1:{}", cluster.nodes[owner].port());
        for c in every_cf_command(k) {
            for (i, node) in cluster.nodes.iter().enumerate() {
                if i != owner {
                    let v = node.conn().raw(&c);
                    assert_eq!(error_of(&v), Some(moved.clone()), "{}", common::show(&c));
                }
            }
            let mut getkeys = cmd!("COMMAND", "GETKEYS");
            for arg in c.args_iter() {
                if let redis::Arg::Simple(bytes) = arg {
                    getkeys.arg(bytes);
                }
            }
            let got: Vec<String> = cluster.nodes[0].conn().q(&getkeys);
            assert_eq!(got, vec![k.clone()], "{}", common::show(&c));
        }
    }
    cluster.assert_spread(&per_node, keys.len());

    // CF.SCANDUMP / CF.LOADCHUNK through the client copy filters across slots and nodes.
    let mut across = 0;
    for (k, list) in keys.iter().zip(&lists).take(9) {
        let to = format!("{k}:copy");
        copy_cf_by_chunks(&mut cc, k, &to);
        let (from_node, to_node) = (
            cluster.owner(cluster.slot(k)),
            cluster.owner(cluster.slot(&to)),
        );
        across += usize::from(from_node != to_node);
        assert_eq!(
            digest_on(&cluster.nodes[from_node], k),
            digest_on(&cluster.nodes[to_node], &to),
            "{k} copied by chunks"
        );
        assert_eq!(cf_info(&mut cc, k), cf_info(&mut cc, &to), "{k}");
        assert!(cf_all_found(&mut cc, &to, list), "{to}");
    }
    assert!(across > 0, "no copy landed on another node");

    // A transaction's keys must share a slot: CF commands on two slots of one node are
    // refused at EXEC (CROSSSLOT) and nothing runs; under one hash tag they run.
    let a = &keys[0];
    let owner = cluster.owner(cluster.slot(a));
    let b = keys[1..]
        .iter()
        .find(|b| cluster.owner(cluster.slot(b)) == owner)
        .expect("two of 30 keys on one node");
    assert_ne!(cluster.slot(a), cluster.slot(b));
    let mut con = cluster.nodes[owner].conn();
    con.ok(&cmd!("MULTI"));
    let queued: String = con.q(&cmd!("CF.ADD", a, "in-multi"));
    assert_eq!(queued, "QUEUED");
    let queued: String = con.q(&cmd!("CF.DEL", b, "in-multi"));
    assert_eq!(queued, "QUEUED");
    let e = con.err_text(&cmd!("EXEC"));
    assert!(e.starts_with("CROSSSLOT"), "{e}");
    assert_eq!(con.q::<i64>(&cmd!("CF.COUNT", a, "in-multi")), 0);
    let tagged = ["{cf:7}:seen", "{cf:7}:liked"];
    assert_eq!(cluster.slot(tagged[0]), cluster.slot(tagged[1]));
    let mut con = cluster.nodes[cluster.owner(cluster.slot(tagged[0]))].conn();
    con.ok(&cmd!("MULTI"));
    for k in tagged {
        let queued: String = con.q(&cmd!("CF.ADD", k, "x"));
        assert_eq!(queued, "QUEUED");
    }
    let done: Vec<i64> = con.q(&cmd!("EXEC"));
    assert_eq!(done, [1, 1]);

    // Errors come back through the client as they do directly.
    assert_eq!(
        cerr(&mut cc, &cmd!("CF.RESERVE", &keys[0], 10)),
        "ERR item exists"
    );
    assert_eq!(
        cerr(&mut cc, &cmd!("CF.INFO", "missing-key")),
        "ERR not found"
    );
    assert_eq!(
        cerr(&mut cc, &cmd!("CF.DEL", "missing-key", "x")),
        "Not found"
    );
}

#[test]
fn migrate_moves_cuckoo_filters_between_nodes_intact() {
    require_own_server!();
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    // Under one hash tag (one slot): a filter that grew sub-filters and had deletes, one of a
    // larger bucket size, a non-scaling one.
    let mut filters: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    let grown = "{cfmig}:grown".to_string();
    let _: String = cq(&mut cc, &cmd!("CF.RESERVE", &grown, 64, "EXPANSION", 2));
    let list = items(&grown, 1500);
    for batch in list.chunks(250) {
        let mut c = cmd!("CF.INSERT", &grown, "ITEMS");
        for i in batch {
            c.arg(i.as_slice());
        }
        let _: Vec<i64> = cq(&mut cc, &c);
    }
    for i in &list[..100] {
        let deleted: i64 = cq(&mut cc, &cmd!("CF.DEL", &grown, i.as_slice()));
        assert_eq!(deleted, 1);
    }
    filters.push((grown, list[100..].to_vec()));
    let wide = "{cfmig}:bucketsize".to_string();
    let _: String = cq(
        &mut cc,
        &cmd!(
            "CF.RESERVE",
            &wide,
            1000,
            "BUCKETSIZE",
            4,
            "MAXITERATIONS",
            50
        ),
    );
    let list = items(&wide, 800);
    for i in &list {
        let _: i64 = cq(&mut cc, &cmd!("CF.ADD", &wide, i.as_slice()));
    }
    filters.push((wide, list));
    let fixed = "{cfmig}:nonscaling".to_string();
    let _: String = cq(&mut cc, &cmd!("CF.RESERVE", &fixed, 500, "EXPANSION", 0));
    let list = items(&fixed, 300);
    let mut c = cmd!("CF.INSERTNX", &fixed, "ITEMS");
    for i in &list {
        c.arg(i.as_slice());
    }
    let _: Vec<i64> = cq(&mut cc, &c);
    filters.push((fixed, list));

    let slot = cluster.slot(&filters[0].0);
    let src = cluster.owner(slot);
    let dst = (src + 1) % 3;
    let before: Vec<(String, Vec<(String, i64)>)> = filters
        .iter()
        .map(|(k, _)| (digest_on(&cluster.nodes[src], k), cf_info(&mut cc, k)))
        .collect();
    assert!(
        before[0].1[2].1 > 1,
        "the first filter grew: {:?}",
        before[0]
    );
    cluster.begin_migration(slot, src, dst);
    let keys = cluster.finish_migration(slot, src, dst);
    assert_eq!(keys.len(), filters.len(), "{keys:?}");
    let mut s = cluster.nodes[src].conn();

    // The same buckets on the target (digest), the same figures, every item found; gone from
    // the source, and still writable where they are now.
    assert_eq!(s.q::<i64>(&cmd!("CLUSTER", "COUNTKEYSINSLOT", slot)), 0);
    for ((k, list), (digest, info)) in filters.iter().zip(&before) {
        assert_eq!(
            &digest_on(&cluster.nodes[dst], k),
            digest,
            "{k} after MIGRATE"
        );
        assert_eq!(&cf_info(&mut cc, k), info, "{k} after MIGRATE");
        assert!(cf_all_found(&mut cc, k, list), "{k}: an item is missing");
    }
    let k = &filters[0].0;
    let deleted: i64 = cq(&mut cc, &cmd!("CF.DEL", k, filters[0].1[0].as_slice()));
    assert_eq!(deleted, 1);
    let added: i64 = cq(&mut cc, &cmd!("CF.ADD", k, "after-migration"));
    assert_eq!(added, 1);
    let one: i64 = cq(&mut cc, &cmd!("CF.EXISTS", k, "after-migration"));
    assert_eq!(one, 1);
}

/// Whether the server has atomic slot migration (`CLUSTER MIGRATESLOTS`, Valkey 9), asked of
/// a server of its own.
fn has_atomic_slot_migration() -> bool {
    let s = Server::start();
    let v = s
        .conn()
        .raw(&cmd!("COMMAND", "INFO", "CLUSTER|MIGRATESLOTS"));
    matches!(&v, Value::Array(infos) if infos.iter().any(|i| !matches!(i, Value::Nil)))
}

/// Keys of every value type under one hash tag: for each, a `quiet` one no one writes during
/// the migration (its digest must come through unchanged) and a `live` one written under it.
/// Returns (key, items in it, add command) per key; quiet keys first.
fn asm_filters(cc: &mut ClusterConnection) -> Vec<(String, Vec<Vec<u8>>, &'static str)> {
    let mut out = Vec::new();
    for role in ["quiet", "live"] {
        let bloom = format!("{{asm}}:{role}:bloom");
        let _: String = cq(
            cc,
            &cmd!("BF.RESERVE", &bloom, "0.001", 100, "EXPANSION", 2),
        );
        let window = format!("{{asm}}:{role}:window");
        let _: String = cq(
            cc,
            &cmd!(
                "BF.RESERVE",
                &window,
                "0.01",
                1000,
                "WINDOW",
                3_600_000,
                "SLICES",
                4
            ),
        );
        let big = format!("{{asm}}:{role}:big");
        let _: String = cq(cc, &cmd!("BF.RESERVE", &big, "0.0001", 2_000_000));
        for k in [&bloom, &window, &big] {
            let list = items(k, 700);
            let mut c = cmd!("BF.MADD", k);
            for i in &list {
                c.arg(i.as_slice());
            }
            let _: Vec<i64> = cq(cc, &c);
            out.push((k.clone(), list, "BF.ADD"));
        }
        let cuckoo = format!("{{asm}}:{role}:cuckoo");
        let _: String = cq(cc, &cmd!("CF.RESERVE", &cuckoo, 128, "EXPANSION", 2));
        let sized = format!("{{asm}}:{role}:cuckoo-error");
        let _: String = cq(cc, &cmd!("CF.RESERVE", &sized, 1000, "ERROR", "0.0001"));
        for k in [&cuckoo, &sized] {
            let list = items(k, 700);
            let mut c = cmd!("CF.INSERT", k, "ITEMS");
            for i in &list {
                c.arg(i.as_slice());
            }
            let _: Vec<i64> = cq(cc, &c);
            // A few deletes, so the moved buckets hold holes too.
            for i in &list[..50] {
                let deleted: i64 = cq(cc, &cmd!("CF.DEL", k, i.as_slice()));
                assert_eq!(deleted, 1);
            }
            out.push((k.clone(), list[50..].to_vec(), "CF.ADD"));
        }
    }
    out
}

/// Whether every item answers present, through the cluster client.
fn all_present(cc: &mut ClusterConnection, key: &str, add: &str, list: &[Vec<u8>]) -> bool {
    try_all_present(cc, key, add, list).unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// [`all_present`], or the error a command met (a reader under migration may meet one).
fn try_all_present(
    cc: &mut ClusterConnection,
    key: &str,
    add: &str,
    list: &[Vec<u8>],
) -> Result<bool, String> {
    let exists = if add == "CF.ADD" {
        "CF.MEXISTS"
    } else {
        "BF.MEXISTS"
    };
    for batch in list.chunks(500) {
        let mut c = cmd!(exists, key);
        for i in batch {
            c.arg(i.as_slice());
        }
        let r: Vec<i64> = c.query(cc).map_err(|e| e.to_string())?;
        if !r.iter().all(|&x| x == 1) {
            return Ok(false);
        }
    }
    Ok(true)
}

#[test]
fn atomic_slot_migration_moves_every_value_type_under_live_reads_and_writes() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    require_own_server!();
    skip_unless!(
        has_atomic_slot_migration(),
        "no atomic slot migration (CLUSTER MIGRATESLOTS is Valkey 9's)"
    );
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    let filters = asm_filters(&mut cc);
    let slot = cluster.slot(&filters[0].0);
    let src = cluster.owner(slot);
    let dst = (src + 1) % 3;
    let digests: Vec<String> = filters
        .iter()
        .map(|(k, _, _)| digest_on(&cluster.nodes[src], k))
        .collect();
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_string()).collect();
    let connect = move || {
        ClusterClient::new(urls.clone())
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    };

    // Live writes: each live key gets new items, one at a time, until told to stop; the
    // acknowledged ones must all be there afterwards.
    let stop = Arc::new(AtomicBool::new(false));
    let live: Vec<(String, &'static str)> = filters
        .iter()
        .filter(|(k, _, _)| k.contains(":live:"))
        .map(|(k, _, add)| (k.clone(), *add))
        .collect();
    let writer = {
        let (stop, live, mut wc) = (stop.clone(), live.clone(), connect.clone()());
        std::thread::spawn(move || {
            let mut acked: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new(); live.len()];
            let mut errors = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for (j, (k, add)) in live.iter().enumerate() {
                    let item = format!("live-{n}").into_bytes();
                    match wc.req_command(&cmd!(*add, k, item.as_slice())) {
                        Ok(Value::Int(_)) => acked[j].push((k.clone(), item)),
                        other => errors.push(format!("{add} {k}: {other:?}")),
                    }
                }
                n += 1;
            }
            (acked, errors)
        })
    };
    // Live reads of the quiet keys: never a wrong answer.
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (stop, reads, mut rc) = (stop.clone(), reads.clone(), connect());
        let quiet: Vec<(String, Vec<Vec<u8>>, &'static str)> = filters
            .iter()
            .filter(|(k, _, _)| k.contains(":quiet:"))
            .cloned()
            .collect();
        std::thread::spawn(move || {
            let mut wrong = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                for (k, list, add) in &quiet {
                    match try_all_present(&mut rc, k, add, &list[..100]) {
                        Ok(true) => {
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(false) => wrong.push(k.clone()),
                        // A redirect or reconnection under way: not an answer.
                        Err(_) => {}
                    }
                }
            }
            wrong
        })
    };
    std::thread::sleep(Duration::from_millis(200));

    let dst_id = cluster.node_id(dst);
    let mut s = cluster.nodes[src].conn();
    let reply = s.raw(&cmd!(
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        slot,
        slot,
        "NODE",
        &dst_id
    ));
    assert!(
        matches!(&reply, Value::Okay) || matches!(&reply, Value::SimpleString(t) if t == "OK"),
        "CLUSTER MIGRATESLOTS replied {reply:?}"
    );
    let reads_at_start = reads.load(Ordering::Relaxed);
    common::wait_until(
        Duration::from_secs(60),
        "the slot migration to succeed",
        || {
            let jobs = format!("{:?}", s.raw(&cmd!("CLUSTER", "GETSLOTMIGRATIONS")));
            assert!(!jobs.contains("\"failed\""), "the migration failed: {jobs}");
            jobs.contains("\"success\"") && cluster.owner(slot) == dst
        },
    );
    cluster.wait_ok();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (acked, errors) = writer.join().expect("writer");
    let wrong = reader.join().expect("reader");
    assert!(
        wrong.is_empty(),
        "reads answered absent during the migration: {wrong:?}"
    );
    assert!(
        reads.load(Ordering::Relaxed) > reads_at_start,
        "no read ran during the migration"
    );
    assert!(
        acked.iter().all(|a| a.len() >= 10),
        "too few writes ran: {:?}; errors {errors:?}",
        acked.iter().map(Vec::len).collect::<Vec<_>>()
    );

    // The source no longer holds the slot's keys; the target holds every one.
    common::wait_until(
        Duration::from_secs(30),
        "the source to drop the moved keys",
        || s.q::<i64>(&cmd!("CLUSTER", "COUNTKEYSINSLOT", slot)) == 0,
    );
    let mut d = cluster.nodes[dst].conn();
    assert_eq!(
        d.q::<i64>(&cmd!("CLUSTER", "COUNTKEYSINSLOT", slot)),
        filters.len() as i64
    );
    // Quiet keys: bit for bit what the source held. Live keys: every item, old and new.
    for ((k, list, add), digest) in filters.iter().zip(&digests) {
        if k.contains(":quiet:") {
            assert_eq!(&digest_on(&cluster.nodes[dst], k), digest, "{k} moved");
        }
        assert!(
            all_present(&mut cc, k, add, list),
            "{k}: an item is missing"
        );
    }
    for (j, (k, add)) in live.iter().enumerate() {
        let new: Vec<Vec<u8>> = acked[j].iter().map(|(_, i)| i.clone()).collect();
        assert!(
            all_present(&mut cc, k, add, &new),
            "{k}: a live write is missing"
        );
        // And they keep taking writes where they are now.
        let v = cc.req_command(&cmd!(*add, k, "after-migration")).unwrap();
        assert!(matches!(v, Value::Int(_)), "{add} {k} after: {v:?}");
    }
    // A copy of each live key through its own codec equals it (the value is whole).
    for (k, _, _) in filters.iter().filter(|(k, _, _)| k.contains(":live:")) {
        let dump: Vec<u8> = d.q(&cmd!("DUMP", k));
        let copy = format!("{k}:copy");
        d.ok(&cmd!("RESTORE", &copy, 0, dump.as_slice()));
        assert_eq!(
            common::digest(&mut d, &copy),
            common::digest(&mut d, k),
            "{k}"
        );
    }
}

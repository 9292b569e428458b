//! A sequential model check shared by the B+tree tests: random operations
//! on an `FgTree` (any design) against a `BTreeMap`, every answer compared.
#![allow(dead_code)]

use dm_runtime::SimRuntime;
use dm_tree::{DexTree, FgTree, TreeConfig, TreeError};
use dm_verbs::sim::{Faults, SimConfig, SimFabric};
use dm_verbs::{Fabric, MsConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A sim cluster of `num_ms` MSs (`region` bytes each, 64 KiB chunks, 2 RPC
/// cores serving the NAM and DEX handlers) with
/// strict (8-byte) torn READs and delayed completions, and a tree of
/// 128-byte nodes (a few entries each: splits all the time) over it.
pub fn sim_cluster(num_ms: u16, region: u64, seed: u64) -> (SimRuntime, TreeConfig) {
    let chunk = 64 << 10;
    let cfg = SimConfig {
        num_ms,
        ms: MsConfig {
            region_bytes: region,
            chunk_bytes: chunk,
            device_bytes: 0,
            cores: 2,
        },
        faults: Faults::torn_and_delayed(),
        seed,
        ..Default::default()
    };
    let tcfg = TreeConfig {
        node_bytes: 128,
        chunk_bytes: chunk,
        num_ms,
        ..Default::default()
    };
    let f = SimFabric::new(cfg);
    f.register_rpc(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
    f.register_rpc(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
    (SimRuntime::new(f), tcfg)
}

/// One operation on u64 keys (8-byte big-endian in the tree).
#[derive(Clone, Debug)]
pub enum Op {
    Insert(u64, u64),
    Update(u64, u64),
    Remove(u64),
    Get(u64),
    Scan(u64, usize),
}

pub fn k(x: u64) -> Vec<u8> {
    x.to_be_bytes().to_vec()
}

/// Operations on 200 keys `key(0..200)`, inserts the most frequent; scans
/// of fewer than `max_scan` entries.
pub fn op(key: fn(u64) -> u64, max_scan: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..200u64, any::<u64>()).prop_map(move |(x, v)| Op::Insert(key(x), v)),
        1 => (0..200u64, any::<u64>()).prop_map(move |(x, v)| Op::Update(key(x), v)),
        2 => (0..200u64).prop_map(move |x| Op::Remove(key(x))),
        2 => (0..200u64).prop_map(move |x| Op::Get(key(x))),
        1 => (0..200u64, 0..max_scan).prop_map(move |(x, n)| Op::Scan(key(x), n)),
    ]
}

/// The operations the model drives (FgTree in every design, and DEX).
#[allow(async_fn_in_trait, dead_code)]
pub trait Index {
    async fn insert(&self, k: &[u8], v: u64) -> Result<(), TreeError>;
    async fn update(&self, k: &[u8], v: u64) -> Result<bool, TreeError>;
    async fn remove(&self, k: &[u8]) -> Result<bool, TreeError>;
    async fn get(&self, k: &[u8]) -> Result<Option<u64>, TreeError>;
    async fn scan(&self, k: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, TreeError>;
}

macro_rules! index {
    ($t:ty) => {
        impl Index for $t {
            async fn insert(&self, k: &[u8], v: u64) -> Result<(), TreeError> {
                <$t>::insert(self, k, v).await
            }
            async fn update(&self, k: &[u8], v: u64) -> Result<bool, TreeError> {
                <$t>::update(self, k, v).await
            }
            async fn remove(&self, k: &[u8]) -> Result<bool, TreeError> {
                <$t>::remove(self, k).await
            }
            async fn get(&self, k: &[u8]) -> Result<Option<u64>, TreeError> {
                <$t>::get(self, k).await
            }
            async fn scan(&self, k: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, TreeError> {
                <$t>::scan(self, k, n).await
            }
        }
    };
}
index!(FgTree);
index!(DexTree);

/// Runs `ops` on `t` and on a `BTreeMap`, asserting every answer and, at
/// the end, a full scan equal to the map.
pub async fn matches_btreemap(t: &impl Index, ops: Vec<Op>) {
    let mut m = BTreeMap::new();
    for o in ops {
        match o {
            Op::Insert(x, v) => {
                t.insert(&k(x), v).await.unwrap();
                m.insert(x, v);
            }
            Op::Update(x, v) => {
                let had = m.contains_key(&x);
                assert_eq!(t.update(&k(x), v).await.unwrap(), had);
                if had {
                    m.insert(x, v);
                }
            }
            Op::Remove(x) => assert_eq!(t.remove(&k(x)).await.unwrap(), m.remove(&x).is_some()),
            Op::Get(x) => assert_eq!(t.get(&k(x)).await.unwrap(), m.get(&x).copied()),
            Op::Scan(x, n) => {
                let want: Vec<_> = m.range(x..).take(n).map(|(a, b)| (k(*a), *b)).collect();
                assert_eq!(t.scan(&k(x), n).await.unwrap(), want);
            }
        }
    }
    let all: Vec<_> = m.iter().map(|(a, b)| (k(*a), *b)).collect();
    assert_eq!(t.scan(&k(0), usize::MAX).await.unwrap(), all);
}

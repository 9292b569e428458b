//! A sequential model check shared by the B+tree tests: random operations
//! on an `FgTree` (any design) against a `BTreeMap`, every answer compared.

use dm_tree::{DexTree, FgTree, TreeError};
use proptest::prelude::*;
use std::collections::BTreeMap;

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

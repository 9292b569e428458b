//! The CS index cache of FG+ (Sherman §5 gives FG an index cache; Sherman
//! §4.1 caches the leaf parents): copies of level-1 internal nodes, shared by
//! the cores of one compute server, bounded in bytes.
//!
//! A lookup maps a key to the leaf pointer of the cached level-1 node whose
//! fences `[low, high)` contain the key (the greatest cached low fence <= key),
//! so a warm `get` is one READ of the leaf.
//!
//! **Why a stale entry is safe.** Nodes are never merged or freed, and a split
//! only lowers a node's high fence (the low fence never changes). A cached
//! child pointer for `key` therefore always leads to a leaf whose low fence is
//! still <= `key`; if keys moved right since the copy was taken, the reader
//! follows sibling pointers (B-link move-right). Staleness is detected by the
//! fence keys: when a lookup had to move right, or found a node that no longer
//! fits (e.g. the tree was rebuilt by a bulk load), the entry is dropped and the
//! next traversal from the root re-caches a fresh copy.
//!
//! Eviction: first in, first out once the byte budget is exceeded (each cached
//! node counts `node_bytes`).

use crate::node::{Fence, Node};
use dm_verbs::GlobalAddr;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Mutex;

struct Inner {
    /// Cached level-1 nodes by low fence (empty vector = -inf).
    nodes: BTreeMap<Vec<u8>, Node>,
    fifo: VecDeque<Vec<u8>>,
    bytes: u64,
    hits: u64,
    misses: u64,
}

/// A CS-wide cache of leaf-parent nodes. Share it between the cores of one CS
/// with `Arc`; it is internally locked.
pub struct IndexCache {
    budget: u64,
    node_bytes: u64,
    inner: Mutex<Inner>,
}

/// Cache counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Bytes held (cached nodes x node size).
    pub bytes: u64,
    pub nodes: u64,
}

impl CacheStats {
    /// hits / (hits + misses), 0 when unused.
    pub fn hit_ratio(&self) -> f64 {
        self.hits as f64 / (self.hits + self.misses).max(1) as f64
    }
}

fn low_key(f: &Fence) -> Vec<u8> {
    match f {
        Fence::Key(k) => k.clone(),
        _ => Vec::new(),
    }
}

impl IndexCache {
    /// A cache of at most `budget_bytes` for trees with `node_bytes` nodes.
    pub fn new(budget_bytes: u64, node_bytes: usize) -> Self {
        IndexCache {
            budget: budget_bytes,
            node_bytes: node_bytes as u64,
            inner: Mutex::new(Inner {
                nodes: BTreeMap::new(),
                fifo: VecDeque::new(),
                bytes: 0,
                hits: 0,
                misses: 0,
            }),
        }
    }

    /// The leaf pointer for `key` and the entry's id (its low fence), if cached.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<(GlobalAddr, Vec<u8>)> {
        let g = self.inner.lock().unwrap();
        let (low, n) = g
            .nodes
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        if n.beyond_high(key) {
            return None;
        }
        Some((n.child_for(key), low.clone()))
    }

    pub(crate) fn record(&self, hit: bool) {
        let mut g = self.inner.lock().unwrap();
        if hit {
            g.hits += 1;
        } else {
            g.misses += 1;
        }
    }

    /// Caches a validated level-1 node (replacing the copy with the same low fence).
    pub(crate) fn insert(&self, n: &Node) {
        if n.level != 1 || self.budget < self.node_bytes {
            return;
        }
        let k = low_key(&n.low);
        let mut g = self.inner.lock().unwrap();
        if g.nodes.insert(k.clone(), n.clone()).is_none() {
            g.bytes += self.node_bytes;
            g.fifo.push_back(k);
        }
        while g.bytes > self.budget {
            let Some(old) = g.fifo.pop_front() else { break };
            if g.nodes.remove(&old).is_some() {
                g.bytes -= self.node_bytes;
            }
        }
    }

    /// Drops the entry with low fence `low` (found stale).
    pub(crate) fn invalidate(&self, low: &[u8]) {
        let mut g = self.inner.lock().unwrap();
        if g.nodes.remove(low).is_some() {
            g.bytes -= self.node_bytes;
            g.fifo.retain(|k| k.as_slice() != low);
        }
    }

    pub fn stats(&self) -> CacheStats {
        let g = self.inner.lock().unwrap();
        CacheStats {
            hits: g.hits,
            misses: g.misses,
            bytes: g.bytes,
            nodes: g.nodes.len() as u64,
        }
    }
}

//! The CS index cache (Sherman §4.1; Sherman §5 gives FG+ the same cache):
//! copies of internal nodes, shared by the cores of one compute server, of two
//! types, as the paper has them:
//! 1. **leaf parents** (level 1), bounded in bytes: a lookup maps a key to the
//!    leaf pointer of the cached level-1 node whose fences `[low, high)`
//!    contain the key (the greatest cached low fence <= key), so a warm `get`
//!    is one READ of the leaf, and a range scan learns the addresses of the
//!    next leaves at once (their READs go out in parallel, see `scan`);
//! 2. **the highest two levels** (the root and its children), kept whole
//!    outside the budget (at most `1 + fan-out` nodes): on a type-1 miss the
//!    traversal starts at the child of the cached level below the root, which
//!    saves the two READs of the top levels.
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
//! The same argument covers the top levels: a traversal started from a cached
//! child pointer moves right where keys moved, and restarts from the root
//! (dropping the top-level copies) if it lands on a node that does not cover
//! its key; a traversal from the root that finds the root at a higher level
//! than the copies were taken from replaces them. A cache must not outlive a
//! `bulk_load` that replaces its tree (the old tree's nodes still exist).
//!
//! Eviction of leaf parents: first in, first out once the byte budget is
//! exceeded (each cached node counts `node_bytes`).

use crate::keys8::{child_at, Keys8};
use crate::node::{child_index, Fence, Node};
use dm_runtime::hint::prefetch;
use dm_verbs::GlobalAddr;
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// A cache entry's id: its low fence key (at most 32 bytes, so held inline:
/// a warm lookup allocates nothing, issue 32).
pub(crate) type CacheId = smallvec::SmallVec<[u8; CACHE_ID_INLINE]>;

/// The bytes a [`CacheId`] holds inline.
const CACHE_ID_INLINE: usize = 32;

/// A cached leaf parent's low fence as the map's key: the fence's first 8
/// bytes as a big-endian word (zero-padded), then the fence itself.
///
/// Ordered as the fence bytes are: where two padded words differ, either
/// both fences have real bytes there (byte order decides alike), or the
/// shorter one ends there and is a prefix of the other up to that byte (a
/// padding zero against a byte above zero: the shorter is less in byte
/// order too). So `Low` may be borrowed as `[u8]`; most comparisons of a
/// warm lookup stop at the word instead of calling `memcmp` (issue 32: the
/// map's search was about a tenth of a loopback FG+ update's CPU).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Low {
    word: u64,
    id: CacheId,
}

impl Low {
    fn new(id: CacheId) -> Low {
        Low {
            word: low_word(&id),
            id,
        }
    }
}

/// The first 8 bytes of `k`, zero-padded, as a big-endian word.
fn low_word(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b)
}

impl Ord for Low {
    fn cmp(&self, o: &Low) -> Ordering {
        self.word
            .cmp(&o.word)
            .then_with(|| self.id[..].cmp(&o.id[..]))
    }
}

impl PartialOrd for Low {
    fn partial_cmp(&self, o: &Low) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Borrow<[u8]> for Low {
    fn borrow(&self) -> &[u8] {
        &self.id
    }
}

/// A cached leaf parent, flattened for the warm lookup (issue 32): its
/// high fence, its separator keys back to back (`kb` bytes each, sorted)
/// and its children in the same order. A binary search touches one
/// contiguous array instead of a heap `Vec` per key.
struct Flat {
    high: Fence,
    kb: usize,
    /// The separators back to back, `kb` bytes each.
    keys: Vec<u8>,
    /// With 8-byte keys, the separators as big-endian words with the
    /// children beside them (else empty), searched in two cache lines
    /// ([`Keys8`]; issue 32: a binary search of the words waited for one
    /// dependent miss per probe, about a tenth of a warm Sherman get).
    k8: Keys8,
    kids: Vec<u64>,
}

impl Flat {
    fn new(n: &Node, kb: usize) -> Flat {
        let mut keys = Vec::with_capacity(n.entries.len() * kb);
        for (k, _) in &n.entries {
            keys.extend_from_slice(k);
        }
        let mut k8 = Keys8::default();
        if kb == 8 {
            k8.rebuild(n.entries.iter().map(|(k, v)| {
                let w = <[u8; 8]>::try_from(&k[..]).ok().map(u64::from_be_bytes);
                (w, *v)
            }));
        }
        Flat {
            high: n.high.clone(),
            kb,
            keys,
            k8,
            kids: n.entries.iter().map(|e| e.1).collect(),
        }
    }

    /// As [`Node::beyond_high`].
    fn beyond_high(&self, key: &[u8]) -> bool {
        self.high.high_excludes(key)
    }

    /// The index of the child covering `key`, as [`Node::child_for`]
    /// chooses it.
    fn child_index(&self, key: &[u8]) -> usize {
        if let (false, Ok(k)) = (self.k8.is_empty(), <[u8; 8]>::try_from(key)) {
            // As `child_index`: the last separator <= key, else the first.
            // The child's line is fetched while the block is searched.
            let k8 = &self.k8;
            return child_at(k8.find_with(u64::from_be_bytes(k), |lo| prefetch(k8.value_ptr(lo))));
        }
        let kb = self.kb;
        child_index(self.kids.len(), |i| &self.keys[i * kb..(i + 1) * kb], key)
    }

    /// The child covering `key` ([`Flat::child_index`]), from the array
    /// the search read when it holds the children.
    fn child(&self, key: &[u8]) -> u64 {
        let i = self.child_index(key);
        self.k8.value(i).unwrap_or_else(|| self.kids[i])
    }
}

struct Inner {
    /// Cached level-1 nodes by low fence (empty vector = -inf).
    /// (Keys inline: a lookup compares them without chasing a pointer.)
    nodes: BTreeMap<Low, Flat>,
    /// Type 2: the highest two levels, by (level, low fence); `top_level` is
    /// the root level they were taken under (0: none cached).
    top: BTreeMap<(u8, Vec<u8>), Node>,
    top_level: u8,
    fifo: VecDeque<CacheId>,
    bytes: u64,
}

impl Inner {
    /// The cached leaf parent with the greatest low fence <= `key`, if any
    /// (it covers `key` unless `key` is beyond its high fence).
    fn covering(&self, key: &[u8]) -> Option<(&Low, &Flat)> {
        if key.len() <= CACHE_ID_INLINE {
            // A probe of the map's own key type, held inline: compared by
            // word first.
            let probe = Low::new(CacheId::from_slice(key));
            return self.nodes.range(..=probe).next_back();
        }
        self.nodes
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
    }
}

/// A CS-wide cache of leaf-parent nodes. Share it between the cores of one CS
/// with `Arc`; it is internally locked.
pub struct IndexCache {
    budget: u64,
    node_bytes: u64,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Cache counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Bytes held (cached nodes of both types x node size).
    pub bytes: u64,
    /// Leaf parents cached.
    pub nodes: u64,
    /// Nodes of the highest two levels cached.
    pub top_nodes: u64,
}

impl CacheStats {
    /// hits / (hits + misses), 0 when unused.
    pub fn hit_ratio(&self) -> f64 {
        self.hits as f64 / (self.hits + self.misses).max(1) as f64
    }
}

fn low_key(f: &Fence) -> Vec<u8> {
    match f {
        Fence::Key(k) => k.to_vec(),
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
                top: BTreeMap::new(),
                top_level: 0,
                fifo: VecDeque::new(),
                bytes: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The leaf pointer for `key` and the entry's id (its low fence), if cached.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<(GlobalAddr, CacheId)> {
        let g = self.inner.lock().unwrap();
        let (low, n) = g.covering(key)?;
        if n.beyond_high(key) || n.kids.is_empty() {
            return None;
        }
        let c = GlobalAddr::from_u64(n.child(key));
        Some((c, low.id.clone()))
    }

    /// Up to `max` leaf pointers from the cached leaf parent covering `key`:
    /// the child for `key` and the ones after it, in key order.
    pub(crate) fn leaves_from(&self, key: &[u8], max: usize) -> Option<crate::scan::LeafAddrs> {
        let g = self.inner.lock().unwrap();
        let (_, n) = g.covering(key)?;
        if n.beyond_high(key) || n.kids.is_empty() {
            return None;
        }
        let i = n.child_index(key);
        Some(
            n.kids[i..]
                .iter()
                .take(max)
                .map(|&c| GlobalAddr::from_u64(c))
                .collect(),
        )
    }

    /// Type-2 lookup for a traversal towards `level`: the child pointer for
    /// `key` of the cached node one level below the root, and that child's
    /// level, when the child is at `level` or above.
    pub(crate) fn top_lookup(&self, key: &[u8], level: u8) -> Option<(GlobalAddr, u8)> {
        let g = self.inner.lock().unwrap();
        if g.top_level < 2 {
            return None;
        }
        let l = g.top_level - 1;
        if l <= level {
            return None;
        }
        let (_, n) = g
            .top
            .range::<(u8, Vec<u8>), _>((
                Bound::Included((l, Vec::new())),
                Bound::Included((l, key.to_vec())),
            ))
            .next_back()?;
        if n.beyond_high(key) {
            return None;
        }
        Some((n.child_for(key), l - 1))
    }

    /// Caches `n`, read by a traversal that found the root at `root_level`,
    /// if it is one of the highest two levels (type 2).
    pub(crate) fn insert_top(&self, n: &Node, root_level: u8) {
        if root_level < 2 || n.level + 1 < root_level {
            return;
        }
        let mut g = self.inner.lock().unwrap();
        if root_level > g.top_level {
            g.top.clear();
            g.top_level = root_level;
        } else if root_level < g.top_level {
            return;
        }
        g.top.insert((n.level, low_key(&n.low)), n.clone());
    }

    /// Drops the type-2 copies (a traversal from them went astray).
    pub(crate) fn invalidate_top(&self) {
        let mut g = self.inner.lock().unwrap();
        g.top.clear();
        g.top_level = 0;
    }

    pub(crate) fn record(&self, hit: bool) {
        if hit {
            self.hits.fetch_add(1, Relaxed);
        } else {
            self.misses.fetch_add(1, Relaxed);
        }
    }

    /// Caches a validated level-1 node (replacing the copy with the same low fence).
    pub(crate) fn insert(&self, n: &Node) {
        if n.level != 1 || self.budget < self.node_bytes {
            return;
        }
        let k = CacheId::from_vec(low_key(&n.low));
        let kb = n.entries.first().map_or(0, |e| e.0.len());
        let f = Flat::new(n, kb);
        let mut g = self.inner.lock().unwrap();
        if g.nodes.insert(Low::new(k.clone()), f).is_none() {
            g.bytes += self.node_bytes;
            g.fifo.push_back(k);
        }
        while g.bytes > self.budget {
            let Some(old) = g.fifo.pop_front() else { break };
            if g.nodes.remove(&old[..]).is_some() {
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
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            bytes: g.bytes + g.top.len() as u64 * self.node_bytes,
            nodes: g.nodes.len() as u64,
            top_nodes: g.top.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeKey;
    use proptest::prelude::*;

    proptest! {
        /// `Low` orders as the fence bytes do (so borrowing it as `[u8]`
        /// is sound): keys over a small alphabet with zeros, of lengths
        /// around the 8-byte word, where padding and prefixes meet.
        #[test]
        fn low_orders_as_its_bytes(
            a in proptest::collection::vec(0u8..3, 0..12),
            b in proptest::collection::vec(0u8..3, 0..12),
        ) {
            let (la, lb) = (Low::new(CacheId::from_slice(&a)), Low::new(CacheId::from_slice(&b)));
            prop_assert_eq!(la.cmp(&lb), a.cmp(&b));
            prop_assert_eq!(la == lb, a == b);
        }
    }

    proptest! {
        /// A leaf parent's word search picks the child the byte search
        /// does (`child_index` over the separators), for any sorted
        /// separators (equal ones too) and any 8-byte key, including keys
        /// equal to one.
        #[test]
        fn word_search_picks_the_child_the_byte_search_does(
            mut seps in proptest::collection::vec(0u64..64, 0..40),
            k in 0u64..70,
        ) {
            // Equal separators kept: a split at a bound can make them.
            seps.sort_unstable();
            let mut n = Node::empty(1, Fence::NegInf, Fence::PosInf);
            n.entries = seps
                .iter()
                .map(|s| (NodeKey::from_slice(&s.to_be_bytes()), *s))
                .collect();
            let f = Flat::new(&n, 8);
            prop_assert_eq!(f.k8.is_empty(), seps.is_empty());
            let key = k.to_be_bytes();
            let by_bytes = child_index(seps.len(), |i| &f.keys[i * 8..(i + 1) * 8], &key);
            prop_assert_eq!(f.child_index(&key), by_bytes);
            if !seps.is_empty() {
                prop_assert_eq!(f.child(&key), f.kids[by_bytes]);
            }
        }
    }

    /// A lookup finds the entry with the greatest low fence <= the key,
    /// for short keys (the word-first probe) and long ones (`[u8]`).
    #[test]
    fn covering_finds_the_greatest_low_fence_at_most_the_key() {
        let mut inner = Inner {
            nodes: BTreeMap::new(),
            top: BTreeMap::new(),
            top_level: 0,
            fifo: VecDeque::new(),
            bytes: 0,
        };
        let flat = || Flat {
            high: Fence::PosInf,
            kb: 0,
            keys: Vec::new(),
            k8: Keys8::default(),
            kids: Vec::new(),
        };
        for k in [&b""[..], b"b", b"b\0", b"b\0\0\0\0\0\0\0\x01", b"c"] {
            inner.nodes.insert(Low::new(CacheId::from_slice(k)), flat());
        }
        let long = [b'b'; 40];
        for (key, want) in [
            (&b"a"[..], &b""[..]),
            (b"b", b"b"),
            (b"b\0", b"b\0"),
            (b"b\0\0\0\0\0\0\0", b"b\0"),
            (b"b\0\0\0\0\0\0\0\x01", b"b\0\0\0\0\0\0\0\x01"),
            (b"b\x01", b"b\0\0\0\0\0\0\0\x01"),
            (&long[..], b"b\0\0\0\0\0\0\0\x01"),
            (b"d", b"c"),
        ] {
            let (low, _) = inner.covering(key).unwrap();
            assert_eq!(&low.id[..], want, "key {key:?}");
        }
    }
}

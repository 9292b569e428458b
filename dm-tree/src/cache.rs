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
//! next traversal from the root re-caches a fresh copy; a writer that moved
//! right under its lock drops it too (`FgTree::moved_right`). Under
//! `ShermanCache::Authors` (the published Sherman code) a stale leaf ends the
//! operation's cached attempt at once: the entry is dropped and the operation
//! traverses from the root, and no top level is cached.
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
use crate::node::{child_index, cmp_keys, Fence, Node};
use dm_runtime::hint::prefetch;
use dm_verbs::GlobalAddr;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// A cache entry's low fence key (up to 32 bytes held inline: a warm
/// lookup allocates nothing, issue 32).
type LowKey = smallvec::SmallVec<[u8; LOW_INLINE]>;

/// The bytes a [`LowKey`] holds inline.
const LOW_INLINE: usize = 32;

/// The cache entry a lookup used: its admission number, unique per cache.
/// [`IndexCache::invalidate`] drops the entry covering the key only if it
/// is still that one (a copy admitted since is fresher). A word, not the
/// low fence: copying the fence out of every warm lookup was about a
/// twentieth of a loopback Sherman get's instructions (issue 32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheId(u64);

/// Cached leaf parents whose low fences share their first 8 bytes
/// ([`low_word`]), sorted by low fence; almost always one.
type Bucket = smallvec::SmallVec<[(LowKey, Flat); 1]>;

/// The first 8 bytes of `k`, zero-padded, as a big-endian word.
fn low_word(k: &[u8]) -> u64 {
    if let Some(w) = k.first_chunk::<8>() {
        // A key of 8 bytes or more: one load, no `memcpy` call of a
        // variable length (issue 32: one per warm lookup).
        return u64::from_be_bytes(*w);
    }
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b)
}

/// A cached leaf parent, flattened for the warm lookup (issue 32): its
/// high fence, its separator keys back to back (`kb` bytes each, sorted)
/// and its children in the same order. A binary search touches one
/// contiguous array instead of a heap `Vec` per key.
struct Flat {
    /// Admission number ([`CacheId`]).
    seq: u64,
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
    fn new(n: &Node, kb: usize, seq: u64) -> Flat {
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
            seq,
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
    /// Cached level-1 nodes ([`Directory`]).
    nodes: Directory,
    /// Type 2: the highest two levels, by (level, low fence); `top_level` is
    /// the root level they were taken under (0: none cached).
    top: BTreeMap<(u8, Vec<u8>), Node>,
    top_level: u8,
    fifo: VecDeque<LowKey>,
    bytes: u64,
    /// The next admission number.
    next_seq: u64,
}

/// The cached leaf parents, by the first word of their low fence (empty =
/// -inf), then by the whole fence. The word orders as the fence bytes do
/// where two words differ (either both fences have real bytes there, or
/// the shorter ends there and is a prefix of the other: a padding zero
/// against a byte above zero), so a lookup binary-searches a sorted array
/// of words and then one bucket's fences at most (issue 32: a map keyed by
/// the fences, compared word first, took a tenth of a warm Sherman get's
/// instructions, and a `BTreeMap` by word still descended both edges of
/// its range). An admission of a new word moves the words after it.
#[derive(Default)]
struct Directory {
    /// The distinct low words, sorted.
    words: Vec<u64>,
    /// Each word's bucket in `buckets`, in the same order.
    at: Vec<usize>,
    buckets: slab::Slab<Bucket>,
    /// Entries.
    count: usize,
}

impl Directory {
    /// The entry with the greatest low fence <= `key`, if any (it covers
    /// `key` unless `key` is beyond its high fence), and that fence: in the
    /// bucket of `key`'s word or the one before (a fence of a smaller word
    /// is below `key`).
    fn covering(&self, key: &[u8]) -> Option<(&LowKey, &Flat)> {
        let w = low_word(key);
        let i = self.words.partition_point(|&x| x <= w);
        for j in (i.saturating_sub(2)..i).rev() {
            let b = &self.buckets[self.at[j]];
            if let Some((l, f)) = b.iter().rev().find(|(l, _)| cmp_keys(l, key).is_le()) {
                return Some((l, f));
            }
        }
        None
    }

    /// The cached leaf parent whose range holds `key` and that has
    /// children, if any.
    fn parent_of(&self, key: &[u8]) -> Option<&Flat> {
        let (_, n) = self.covering(key)?;
        (!n.beyond_high(key) && !n.kids.is_empty()).then_some(n)
    }

    /// Caches `f` under `low`, replacing the entry there; true if there
    /// was none.
    fn put(&mut self, low: LowKey, f: Flat) -> bool {
        let w = low_word(&low);
        let i = self.words.binary_search(&w).unwrap_or_else(|i| {
            let k = self.buckets.insert(Bucket::new());
            self.words.insert(i, w);
            self.at.insert(i, k);
            i
        });
        let b = &mut self.buckets[self.at[i]];
        match b.binary_search_by(|(l, _)| l[..].cmp(&low[..])) {
            Ok(j) => {
                b[j].1 = f;
                false
            }
            Err(j) => {
                b.insert(j, (low, f));
                self.count += 1;
                true
            }
        }
    }

    /// Drops the entry under `low`; true if there was one.
    fn take(&mut self, low: &[u8]) -> bool {
        let Ok(i) = self.words.binary_search(&low_word(low)) else {
            return false;
        };
        let b = &mut self.buckets[self.at[i]];
        let Ok(j) = b.binary_search_by(|(l, _)| l[..].cmp(low)) else {
            return false;
        };
        b.remove(j);
        if b.is_empty() {
            self.buckets.remove(self.at[i]);
            self.words.remove(i);
            self.at.remove(i);
        }
        self.count -= 1;
        true
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
                nodes: Directory::default(),
                top: BTreeMap::new(),
                top_level: 0,
                fifo: VecDeque::new(),
                bytes: 0,
                next_seq: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The leaf pointer for `key` and the entry it came from ([`CacheId`],
    /// for [`IndexCache::invalidate`]), if cached.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<(GlobalAddr, CacheId)> {
        let g = self.inner.lock().unwrap();
        let n = g.nodes.parent_of(key)?;
        let c = GlobalAddr::from_u64(n.child(key));
        Some((c, CacheId(n.seq)))
    }

    /// Up to `max` leaf pointers from the cached leaf parent covering `key`:
    /// the child for `key` and the ones after it, in key order.
    pub(crate) fn leaves_from(&self, key: &[u8], max: usize) -> Option<crate::scan::LeafAddrs> {
        let g = self.inner.lock().unwrap();
        let n = g.nodes.parent_of(key)?;
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
        let k = LowKey::from_vec(low_key(&n.low));
        let kb = n.entries.first().map_or(0, |e| e.0.len());
        let mut g = self.inner.lock().unwrap();
        let f = Flat::new(n, kb, g.next_seq);
        g.next_seq += 1;
        if g.nodes.put(k.clone(), f) {
            g.bytes += self.node_bytes;
            g.fifo.push_back(k);
        }
        while g.bytes > self.budget {
            let Some(old) = g.fifo.pop_front() else { break };
            if g.nodes.take(&old) {
                g.bytes -= self.node_bytes;
            }
        }
    }

    /// Drops the entry covering `key` if it is `id`, which a lookup of
    /// `key` returned (it led to a leaf that does not cover `key`: stale).
    pub(crate) fn invalidate(&self, key: &[u8], id: CacheId) {
        let mut g = self.inner.lock().unwrap();
        let low = match g.nodes.covering(key) {
            Some((low, n)) if n.seq == id.0 => low.clone(),
            _ => return,
        };
        if g.nodes.take(&low) {
            g.bytes -= self.node_bytes;
            g.fifo.retain(|k| *k != low);
        }
    }

    pub fn stats(&self) -> CacheStats {
        let g = self.inner.lock().unwrap();
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            bytes: g.bytes + g.top.len() as u64 * self.node_bytes,
            nodes: g.nodes.count as u64,
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
        /// A fence's first word orders as its bytes do where two words
        /// differ (so a lookup may search words, then one bucket): keys
        /// over a small alphabet with zeros, of lengths around the 8-byte
        /// word, where padding and prefixes meet.
        #[test]
        fn low_words_order_as_their_bytes(
            a in proptest::collection::vec(0u8..3, 0..12),
            b in proptest::collection::vec(0u8..3, 0..12),
        ) {
            let (wa, wb) = (low_word(&a), low_word(&b));
            if wa != wb {
                prop_assert_eq!(wa.cmp(&wb), a.cmp(&b));
            }
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
            let f = Flat::new(&n, 8, 0);
            prop_assert_eq!(f.k8.is_empty(), seps.is_empty());
            let key = k.to_be_bytes();
            let by_bytes = child_index(seps.len(), |i| &f.keys[i * 8..(i + 1) * 8], &key);
            prop_assert_eq!(f.child_index(&key), by_bytes);
            if !seps.is_empty() {
                prop_assert_eq!(f.child(&key), f.kids[by_bytes]);
            }
        }
    }

    proptest! {
        /// The directory answers as a map ordered by the fence bytes,
        /// through admissions, replacements and drops (buckets made and
        /// emptied), for keys around the fences.
        #[test]
        fn directory_covers_as_an_ordered_map(
            ops in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec(0u8..3, 0..11)), 0..60),
            keys in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..11), 0..30),
        ) {
            let mut d = Directory::default();
            let mut model = std::collections::BTreeMap::new();
            for (seq, (add, low)) in ops.into_iter().enumerate() {
                if add {
                    let mut f = Flat::new(&Node::empty(1, Fence::NegInf, Fence::PosInf), 0, 0);
                    f.seq = seq as u64;
                    prop_assert_eq!(d.put(LowKey::from_slice(&low), f), model.insert(low, seq).is_none());
                } else {
                    prop_assert_eq!(d.take(&low), model.remove(&low).is_some());
                }
                prop_assert_eq!(d.count, model.len());
            }
            for k in keys.iter().chain(model.keys()) {
                let want = model.range::<Vec<u8>, _>(..=k.clone()).next_back();
                let got = d.covering(k).map(|(l, f)| (l.to_vec(), f.seq as usize));
                prop_assert_eq!(got, want.map(|(l, s)| (l.clone(), *s)), "key {:?}", k);
            }
        }
    }

    /// A lookup finds the entry with the greatest low fence <= the key,
    /// for keys of 8 bytes and fewer and longer ones, within a bucket of
    /// fences sharing a word and across buckets.
    #[test]
    fn covering_finds_the_greatest_low_fence_at_most_the_key() {
        let mut inner = Inner {
            nodes: Directory::default(),
            top: BTreeMap::new(),
            top_level: 0,
            fifo: VecDeque::new(),
            bytes: 0,
            next_seq: 0,
        };
        let flat = || Flat {
            seq: 0,
            high: Fence::PosInf,
            kb: 0,
            keys: Vec::new(),
            k8: Keys8::default(),
            kids: Vec::new(),
        };
        for k in [&b""[..], b"b", b"b\0", b"b\0\0\0\0\0\0\0\x01", b"c"] {
            inner.nodes.put(LowKey::from_slice(k), flat());
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
            let (low, _) = inner.nodes.covering(key).unwrap();
            assert_eq!(&low[..], want, "key {key:?}");
        }
        // No fence of the key's word is at or below it: the bucket before.
        assert!(inner.nodes.take(b"b"));
        assert!(!inner.nodes.take(b"b"));
        assert_eq!(&inner.nodes.covering(b"b").unwrap().0[..], b"");
        assert_eq!(inner.nodes.count, 4);
    }
}

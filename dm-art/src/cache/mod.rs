//! SMART's ART cache (SMART §4.3): per compute server, a local radix tree
//! indexed by key prefix whose entries are snapshots of remote internal
//! nodes, so that a warm search READs only the leaf.
//!
//! ## What an entry is
//! When a traversal READs an internal node whose (effective) prefix its key
//! matches, it caches `{node address, the slot word that named the node and
//! that slot's address (the *via* cursor), the node's filled slots as READ}`
//! under the key prefix `path[..end]`, where `end` = the node's depth plus
//! its prefix length: the position of the byte its slots discriminate on.
//! That prefix identifies the node (§4.3.1: a node excluding its header is
//! named by the bytes before its slots), and it never changes: a header
//! split only trims a node's prefix from the front (`insert` invariant 3).
//!
//! ## The local radix tree
//! One trie node per prefix byte (children kept sorted in a small vector
//! that grows with the fan-out, so a node costs what its children need;
//! the adaptive node types of ART without path compression), an entry on
//! the trie node of its prefix. Entries hang off any depth, the paper's
//! "high-level leaves". A lookup walks the key's path and takes the
//! deepest entry on it: if that node's snapshot has a slot for the next
//! path byte, the search starts at that slot word (then the leaf READ is
//! all that is left when the child is a leaf); otherwise it starts by READing the node itself
//! through the via cursor. (The artifact instead backs off to a shallower
//! entry that has a matching slot, which READs the same node.)
//!
//! ## Budget and eviction
//! Bytes are what the entries and trie nodes occupy on the heap
//! ([`CacheStats::bytes`]); over the budget, entries are evicted in FIFO
//! order of admission (the artifact's policy; the paper names none) and
//! trie nodes left empty are freed. A refresh of an entry keeps its place.
//!
//! ## Staleness: the reverse check, made sound
//! A cached slot word may be stale: a leaf split replaced a leaf by a node,
//! a header split put a new node above the child, a type switch grew the
//! child (§4.3.2 types 1-2; type 3, node deletion, never happens here:
//! nodes are never freed, see `insert`). The paper detects type 1 by the
//! child's reverse pointer (it must name the cached slot), type 2 by the
//! child's header type, type 3 by a zero type or a cleared valid bit. We run
//! all three checks, and invalidate on a mismatch, but do not *trust* a
//! passed reverse check: the reverse pointer is rewritten after the split's
//! CAS (the artifact even leaves it unsignalled), so in that window a stale
//! reader passes the check, reads the old leaf, and misses a key a fresher
//! reader has already seen (digest §5.2 item 11; a signalled write does not
//! close it either). What we rely on instead (see `search`):
//!
//! - a **leaf with the searched key** is authoritative however it was
//!   reached: a key lives in one leaf forever (splits move slots, not leaves);
//! - an **internal node** covers a fixed key region forever (its end
//!   position never changes and nodes are never unlinked), so its fresh
//!   image answers for keys matching its prefix however it was reached;
//! - every **negative** conclusion drawn through a cached word (a leaf with
//!   another key, a prefix mismatch) is confirmed by one 8-byte READ of the
//!   cached slot: slots change monotonically (a word is replaced only by a
//!   node that contains it), so an unchanged word proves the conclusion at
//!   that READ; a changed one invalidates the entry and the walk goes on
//!   from the fresh word. Writes need no extra READ: their CAS on the slot
//!   carries the cached word as its expected value.
//!
//! Reads of present keys, the common case, thus keep the paper's one READ.

use crate::cursor::Cursor;
use crate::layout::slot_addr;
use dm_verbs::GlobalAddr;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Counters of one CS's cache (since creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found an entry on the key's path.
    pub hits: u64,
    /// Lookups that found none (the walk starts at the root slot).
    pub misses: u64,
    /// Entries dropped because a check found them stale.
    pub invalidations: u64,
    /// Cached leaf addresses found replaced (RCU leaves of the ART
    /// baseline, SMART Fig. 5b) and patched with the slot's new word.
    pub stale_leaves: u64,
    /// Entries dropped to stay within the byte budget.
    pub evictions: u64,
    /// Entries held now.
    pub entries: u64,
    /// Heap bytes of entries and trie nodes now.
    pub bytes: u64,
}

#[derive(Clone)]
struct Entry {
    node: GlobalAddr,
    via: Cursor,
    /// The slot array: its first `filled` words are the node's filled
    /// slots. A kept array may be a few words longer (the smallest kept
    /// one that fits); the budget counts the filled words, as before
    /// arrays were kept, so the cache's size and evictions are unchanged.
    slots: Box<[u64]>,
    filled: u32,
    /// FIFO stamp of admission (wraps; only compared with the FIFO's
    /// records, which compaction keeps recent).
    stamp: u32,
}

impl Entry {
    /// The node's filled slots as cached.
    fn slots(&self) -> &[u64] {
        &self.slots[..self.filled as usize]
    }
}

struct TNode {
    parent: u32,
    byte: u8,
    /// Sorted by byte.
    children: SmallVec<[(u8, u32); 4]>,
    entry: Option<Entry>,
}

const TNODE_BYTES: usize = std::mem::size_of::<TNode>();

fn entry_bytes(slots: usize) -> usize {
    std::mem::size_of::<Entry>() + 8 * slots
}

struct Inner {
    nodes: Vec<TNode>,
    free: Vec<u32>,
    fifo: VecDeque<(u32, u32)>,
    bytes: usize,
    entries: usize,
    next_stamp: u32,
    /// Slot arrays of dropped entries, for later admissions (an RCU leaf
    /// replacement drops an entry that the next READ of the node admits
    /// again: no allocation, issue 32); at most [`SPARE_WORDS`] words of
    /// capacity in all, outside the budget.
    spare: Vec<Box<[u64]>>,
    spare_words: usize,
}

/// Slot words [`Inner::spare`] keeps (128 KiB).
const SPARE_WORDS: usize = 16384;

impl Inner {
    fn child(&self, t: u32, b: u8) -> Option<u32> {
        let ch = &self.nodes[t as usize].children;
        ch.binary_search_by_key(&b, |c| c.0).ok().map(|i| ch[i].1)
    }

    fn child_or_new(&mut self, t: u32, b: u8) -> u32 {
        let pos = match self.nodes[t as usize]
            .children
            .binary_search_by_key(&b, |c| c.0)
        {
            Ok(i) => return self.nodes[t as usize].children[i].1,
            Err(i) => i,
        };
        let n = TNode {
            parent: t,
            byte: b,
            children: SmallVec::new(),
            entry: None,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = n;
                id
            }
            None => {
                self.nodes.push(n);
                (self.nodes.len() - 1) as u32
            }
        };
        self.bytes += TNODE_BYTES;
        self.nodes[t as usize].children.insert(pos, (b, id));
        id
    }

    fn find(&self, prefix: &[u8]) -> Option<u32> {
        let mut t = 0;
        for &b in prefix {
            t = self.child(t, b)?;
        }
        Some(t)
    }

    /// Keeps `b` for a later entry, making room by freeing the longest
    /// kept arrays (rejecting the newest instead let the spare fill with
    /// long arrays no short entry takes: a slow leak of allocations).
    fn keep_spare(&mut self, b: Box<[u64]>) {
        if b.len() > SPARE_WORDS {
            return;
        }
        while self.spare_words + b.len() > SPARE_WORDS {
            let Some(i) = (self.spare.iter().enumerate())
                .max_by_key(|(_, x)| x.len())
                .map(|(i, _)| i)
            else {
                break;
            };
            self.spare_words -= self.spare.swap_remove(i).len();
        }
        self.spare_words += b.len();
        self.spare.push(b);
    }

    /// An array starting with `slots`: the smallest kept one that holds
    /// them, else a new one of their length.
    fn slots_box(&mut self, slots: &[u64]) -> Box<[u64]> {
        let fit = (self.spare.iter().enumerate())
            .filter(|(_, b)| b.len() >= slots.len())
            .min_by_key(|(_, b)| b.len())
            .map(|(i, _)| i);
        match fit {
            Some(i) => {
                let mut b = self.spare.swap_remove(i);
                self.spare_words -= b.len();
                b[..slots.len()].copy_from_slice(slots);
                b
            }
            None => slots.into(),
        }
    }

    /// Drops the entry of trie node `t` and frees the trie nodes left empty.
    fn remove_entry(&mut self, mut t: u32) {
        if let Some(e) = self.nodes[t as usize].entry.take() {
            self.bytes -= entry_bytes(e.filled as usize);
            self.entries -= 1;
            self.keep_spare(e.slots);
        }
        while t != 0 {
            let n = &self.nodes[t as usize];
            if n.entry.is_some() || !n.children.is_empty() {
                break;
            }
            let (p, b) = (n.parent, n.byte);
            let ch = &mut self.nodes[p as usize].children;
            if let Ok(i) = ch.binary_search_by_key(&b, |c| c.0) {
                ch.remove(i);
            }
            self.free.push(t);
            self.bytes -= TNODE_BYTES;
            t = p;
        }
    }
}

/// One compute server's ART cache, shared by its cores (`Arc`); see the
/// module docs. Every method takes one mutex for a walk of at most the
/// key's path length.
pub struct ArtCache {
    budget: usize,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    invalidations: AtomicU64,
    stale_leaves: AtomicU64,
    evictions: AtomicU64,
}

/// Where a cached start came from, to invalidate it if it proves stale.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    /// Length of the entry's key prefix.
    pub prefix_len: usize,
    pub node: GlobalAddr,
}

impl ArtCache {
    /// An empty cache holding at most `budget_bytes` of entries and trie
    /// nodes (the paper's default is 600 MB per CS, §5.1).
    pub fn new(budget_bytes: usize) -> Self {
        ArtCache {
            budget: budget_bytes,
            inner: Mutex::new(Inner {
                nodes: vec![TNode {
                    parent: 0,
                    byte: 0,
                    children: SmallVec::new(),
                    entry: None,
                }],
                free: Vec::new(),
                fifo: VecDeque::new(),
                bytes: TNODE_BYTES,
                entries: 0,
                next_stamp: 0,
                spare: Vec::new(),
                spare_words: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
            stale_leaves: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> CacheStats {
        let g = self.inner.lock().unwrap();
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            invalidations: self.invalidations.load(Relaxed),
            stale_leaves: self.stale_leaves.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            entries: g.entries as u64,
            bytes: g.bytes as u64,
        }
    }

    /// The start of a walk for `path` from the deepest entry on it: the
    /// cached slot word for the next path byte if the snapshot has one,
    /// else the via cursor of the node itself; both marked `cached`.
    pub(crate) fn lookup(&self, path: &[u8]) -> Option<(Cursor, Hit)> {
        let g = self.inner.lock().unwrap();
        let mut t = 0u32;
        let mut best: Option<(usize, u32)> = None;
        let mut l = 0;
        loop {
            if g.nodes[t as usize].entry.is_some() {
                best = Some((l, t));
            }
            if l == path.len() {
                break;
            }
            match g.child(t, path[l]) {
                Some(c) => {
                    t = c;
                    l += 1;
                }
                None => break,
            }
        }
        let Some((l, t)) = best else {
            self.misses.fetch_add(1, Relaxed);
            return None;
        };
        self.hits.fetch_add(1, Relaxed);
        let e = g.nodes[t as usize].entry.as_ref().unwrap();
        let hit = Hit {
            prefix_len: l,
            node: e.node,
        };
        let slot = path.get(l).and_then(|&b| {
            e.slots()
                .iter()
                .position(|&w| w as u8 == b)
                .map(|i| (i, e.slots[i]))
        });
        let c = match slot {
            Some((i, w)) => Cursor {
                slot_a: slot_addr(e.node, i),
                owner: e.node,
                word: w,
                depth: l + 1,
                cached: true,
            },
            None => Cursor {
                cached: true,
                ..e.via
            },
        };
        Some((c, hit))
    }

    /// Admits or refreshes the entry of the node at `node` whose slots
    /// discriminate on path byte `prefix.len()`; `via` is the cursor whose
    /// slot named it; `slots` its slot words as READ (the filled prefix is kept).
    pub(crate) fn insert(&self, prefix: &[u8], node: GlobalAddr, via: Cursor, slots: &[u64]) {
        let filled = slots.iter().take_while(|&&w| w != 0).count();
        let slots = &slots[..filled];
        let mut g = self.inner.lock().unwrap();
        if let Some(t) = g.find(prefix) {
            if let Some(e) = &mut g.nodes[t as usize].entry {
                if e.node == node && e.slots() == slots {
                    return;
                }
                let old = e.filled as usize;
                e.node = node;
                e.via = Cursor {
                    cached: false,
                    ..via
                };
                if e.slots.len() >= filled {
                    // A slot word changed (RCU: a leaf replaced): in place.
                    e.slots[..filled].copy_from_slice(slots);
                    e.filled = filled as u32;
                } else {
                    let b = g.slots_box(slots);
                    let e = g.nodes[t as usize].entry.as_mut().unwrap();
                    e.filled = filled as u32;
                    let was = std::mem::replace(&mut e.slots, b);
                    g.keep_spare(was);
                }
                g.bytes = g.bytes + 8 * filled - 8 * old;
                return;
            }
        }
        let mut t = 0;
        for &b in prefix {
            t = g.child_or_new(t, b);
        }
        let stamp = g.next_stamp;
        g.next_stamp = g.next_stamp.wrapping_add(1);
        let slots = g.slots_box(slots);
        g.nodes[t as usize].entry = Some(Entry {
            node,
            via: Cursor {
                cached: false,
                ..via
            },
            slots,
            filled: filled as u32,
            stamp,
        });
        g.bytes += entry_bytes(filled);
        g.entries += 1;
        g.fifo.push_back((t, stamp));
        while g.bytes > self.budget {
            let Some((t, stamp)) = g.fifo.pop_front() else {
                break;
            };
            if g.nodes[t as usize].entry.as_ref().map(|e| e.stamp) == Some(stamp) {
                g.remove_entry(t);
                self.evictions.fetch_add(1, Relaxed);
            }
        }
        // Invalidations leave their FIFO records behind: compact when they
        // outnumber the live ones.
        if g.fifo.len() > 2 * g.entries + 64 {
            let Inner { fifo, nodes, .. } = &mut *g;
            fifo.retain(|&(t, s)| nodes[t as usize].entry.as_ref().map(|e| e.stamp) == Some(s));
        }
    }

    /// Drops the entry at `prefix` if it still describes the node `hit` found.
    pub(crate) fn invalidate(&self, prefix: &[u8], hit: Hit) {
        let mut g = self.inner.lock().unwrap();
        let Some(t) = g.find(&prefix[..hit.prefix_len]) else {
            return;
        };
        if g.nodes[t as usize].entry.as_ref().map(|e| e.node) == Some(hit.node) {
            g.remove_entry(t);
            self.invalidations.fetch_add(1, Relaxed);
        }
    }

    /// A cached leaf address was found replaced (RCU leaves): the entry
    /// `hit` found on `prefix` takes `new`, READ from the slot at `slot_a`,
    /// in place of `old` (the rest of the snapshot is as good as before:
    /// each word is a hint the walk checks). No-op if the entry changed.
    pub(crate) fn patch(&self, prefix: &[u8], hit: Hit, slot_a: GlobalAddr, old: u64, new: u64) {
        self.stale_leaves.fetch_add(1, Relaxed);
        let mut g = self.inner.lock().unwrap();
        let Some(t) = g.find(&prefix[..hit.prefix_len]) else {
            return;
        };
        let Some(e) = g.nodes[t as usize].entry.as_mut() else {
            return;
        };
        let off = slot_a.offset().wrapping_sub(e.node.offset() + 16);
        if e.node != hit.node || slot_a.ms() != e.node.ms() || !off.is_multiple_of(8) {
            return;
        }
        if let Some(w) = e.slots[..e.filled as usize].get_mut((off / 8) as usize) {
            if *w == old && new != 0 {
                *w = new;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via(x: u64) -> Cursor {
        Cursor {
            slot_a: GlobalAddr::new(0, 8),
            owner: GlobalAddr::new(0, 8),
            word: x,
            depth: 0,
            cached: false,
        }
    }

    #[test]
    fn deepest_entry_wins_and_budget_evicts_fifo() {
        let c = ArtCache::new(1 << 20);
        let n0 = GlobalAddr::new(0, 64);
        let n1 = GlobalAddr::new(1, 128);
        c.insert(&[], n0, via(1), &[0x11, 0x22, 0]);
        c.insert(&[0x11, 5], n1, via(2), &[0x07]);
        // Path through n1 with a slot for byte 7: start at that slot.
        let (cur, hit) = c.lookup(&[0x11, 5, 7, 9]).unwrap();
        assert_eq!((cur.word, cur.depth, cur.cached), (0x07, 3, true));
        assert_eq!(hit.node, n1);
        // n1 has no slot for byte 8: start at n1 through its via cursor.
        let (cur, _) = c.lookup(&[0x11, 5, 8, 9]).unwrap();
        assert_eq!((cur.word, cur.depth), (2, 0));
        // Only the root entry is on this path.
        let (cur, hit) = c.lookup(&[0x22, 0, 0, 0]).unwrap();
        assert_eq!((cur.word, cur.depth, hit.prefix_len), (0x22, 1, 0));
        c.invalidate(&[0x11, 5, 7, 9], c.lookup(&[0x11, 5, 7, 9]).unwrap().1);
        assert_eq!(c.lookup(&[0x11, 5, 7, 9]).unwrap().1.node, n0);
        let s = c.stats();
        assert_eq!((s.entries, s.invalidations), (1, 1));
        // Trie nodes of the dropped entry are freed.
        assert_eq!(s.bytes as usize, TNODE_BYTES + entry_bytes(2));

        let small = ArtCache::new(TNODE_BYTES * 3 + entry_bytes(1) * 2);
        for i in 0..10u8 {
            small.insert(&[i], GlobalAddr::new(0, 64 * (i as u64 + 1)), via(0), &[1]);
        }
        let s = small.stats();
        assert!(s.bytes as usize <= small.budget());
        assert_eq!(s.entries, 2);
        assert_eq!(s.evictions, 8);
        // The newest survive.
        assert!(small.lookup(&[9, 1]).is_some());
        assert!(small.lookup(&[0, 1]).is_none());
    }
}

//! SMART's ART cache (SMART §4.3): per compute server, a local index by key
//! prefix whose entries are snapshots of remote internal nodes, so that a
//! warm search READs only the leaf. `store` holds the entries (one map,
//! FIFO, kept slot arrays); this file the lookup, admission and the checks'
//! side (invalidate, patch).
//!
//! ## What an entry is
//! When a traversal READs an internal node whose (effective) prefix its key
//! matches, it caches `{node address, the node's filled slots as READ}`
//! under the key prefix `path[..end]`, where `end` = the node's depth plus
//! its prefix length: the position of the byte its slots discriminate on.
//! That prefix identifies the node (§4.3.1: a node excluding its header is
//! named by the bytes before its slots), and it never changes: a header
//! split only trims a node's prefix from the front (`insert` invariant 3).
//! A writer's own successful CASes keep its entries current too: a normal
//! insert adds the slots it saw filled (`ArtCache::note_filled`), a split
//! replaces the slot word it published and admits the new nodes (issue 32
//! item 4: a CS that loads a tree by inserts otherwise holds snapshots taken
//! before most slots were filled, and pays a node READ per node afterwards).
//!
//! ## Finding the start: one hash map, deepest matching slot
//! The paper indexes its entries with a local ART (§4.3.1, Fig. 11) whose
//! long slots point to the entries ("high-level leaves"). Here one hash map
//! from the prefix to the entry does that job: prefixes up to 7 bytes are
//! the map key itself (packed with their length), longer ones are hashed
//! and checked against a copy kept in the entry. A lookup probes the key's
//! prefixes from the longest down, skipping lengths no entry has (a count
//! per length), and starts at the deepest entry that has a slot for the
//! next path byte; an entry without one is passed over for a shallower one
//! whose slot names the path's next node, as the artifact's back-off does
//! (the walk then READs that node and refreshes its entry); a path no
//! entry has a slot for starts at the root slot (one 8-byte READ). Keeping
//! the root slot's word as a hint too saved that READ but lost a key in a
//! `check --faults crash` seed (smart, 3000 keys, seed 8) whose cause is
//! not yet found, so it is not done. Without a per-byte trie or a
//! per-entry copy of the parent cursor, an entry is one 64-byte map
//! bucket, one cache line, holding up to four slot words itself (most
//! nodes below a hashed-key tree's top levels have two to four), plus a
//! heap array for more: a warm probe touches the map's control bytes and
//! one bucket (issue 32 items 2 and 4; measured in docs/experiments/smart.md
//! and cpu-ratios.md). An entry of 32 or more filled slots (the top
//! levels' Node256s) also keeps a 256-byte index from partial key to its
//! first slot in that array, so finding the slot for the path's byte reads
//! one index line and one slot word, not a scan of the node's slots.
//!
//! ## Budget and eviction
//! Bytes are what the entries' map buckets and their heap slot arrays
//! occupy ([`CacheStats::bytes`]; a heap array has the size class of its
//! filled slots, less than half again as many words, so a dropped entry's
//! array serves the next admission of its class without an allocation;
//! the map's empty buckets and control bytes are not counted); over the budget,
//! entries are evicted in FIFO order of admission (the artifact's policy;
//! the paper names none). A refresh of an entry keeps its place.
//!
//! ## The authors' central FIFO, modelled (sim only)
//! The artifact's cache counts its bytes in one counter and queues every
//! admission on one FIFO per CS; with dozens of threads per CS and a cache
//! that churns, those words bounce between cores (DEX §2.3 and §8.2: 49% of
//! SMART's cycles). Ours holds its mutex for a map probe, which costs no
//! virtual time on `sim`; [`ArtCache::with_fifo_hold_ns`] charges each
//! admission a turn at one CS-wide lock instead, for reproducing DEX's
//! comparison (issue 34; `dm-bench ycsb --smart-fifo-ns`). Off by default.
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

mod store;

use crate::cursor::Cursor;
use crate::layout::slot_addr;
use dm_verbs::GlobalAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use store::Store;

/// Counters of one CS's cache (since creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found an entry with a slot for the key's path.
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
    /// Bytes of entries (their map buckets) and heap slot arrays now.
    pub bytes: u64,
    /// Admissions that took the modelled central FIFO lock
    /// ([`ArtCache::with_fifo_hold_ns`]; 0 without the model).
    pub fifo_admissions: u64,
    /// Virtual ns those admissions spent waiting for and holding it.
    pub fifo_ns: u64,
}

/// One compute server's ART cache, shared by its cores (`Arc`); see the
/// module docs. Every method takes one mutex for at most one map probe per
/// prefix length the key's path has entries at.
pub struct ArtCache {
    budget: usize,
    inner: Mutex<Store>,
    invalidations: AtomicU64,
    stale_leaves: AtomicU64,
    evictions: AtomicU64,
    /// The central-FIFO model ([`ArtCache::with_fifo_hold_ns`]): virtual ns
    /// each admission holds it (0: off), the clock at which it is next
    /// free, and its counters.
    fifo_hold_ns: u64,
    fifo_free_ns: AtomicU64,
    fifo_admissions: AtomicU64,
    fifo_ns: AtomicU64,
    /// The artifact's policy for a stale node type hint
    /// ([`ArtCache::with_stale_hints_dropped`]).
    drop_stale_hints: bool,
}

/// Where a cached start came from, to invalidate it if it proves stale.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    /// Length of the entry's key prefix.
    pub prefix_len: usize,
    pub node: GlobalAddr,
}

impl ArtCache {
    /// An empty cache holding at most `budget_bytes` of entries (the
    /// paper's default is 600 MB per CS, §5.1).
    pub fn new(budget_bytes: usize) -> Self {
        ArtCache {
            budget: budget_bytes,
            inner: Mutex::new(Store::default()),
            invalidations: AtomicU64::new(0),
            stale_leaves: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            fifo_hold_ns: 0,
            fifo_free_ns: AtomicU64::new(0),
            fifo_admissions: AtomicU64::new(0),
            fifo_ns: AtomicU64::new(0),
            drop_stale_hints: false,
        }
    }

    /// This cache with the SMART artifact's policy for a node type hint
    /// found stale: the entry whose slot word carried it is dropped
    /// (`read_node`'s `!type_correct` with `from_cache` in the artifact's
    /// `Tree::insert` and `search`), and a type switch leaves this CS's
    /// copy of the parent slot as it was. The default refreshes the word
    /// instead ([`crate::SmartTree`]'s `refresh_type_hint`). Under RCU
    /// leaves (the ART rungs) a cached leaf address found replaced drops
    /// its entry too, as the artifact's `search` does on an invalid leaf,
    /// where the default patches the word ([`ArtCache::patch`]). Off by
    /// default; kept to measure the Dolphin paper's LOAD claim, whose
    /// SMART "invalidates a cached internal node" per insert (issue 34).
    pub fn with_stale_hints_dropped(mut self, on: bool) -> Self {
        self.drop_stale_hints = on;
        self
    }

    /// Whether stale type hints drop their entry
    /// ([`ArtCache::with_stale_hints_dropped`]).
    pub(crate) fn drops_stale_hints(&self) -> bool {
        self.drop_stale_hints
    }

    /// This cache with the authors' central FIFO modelled on `sim`: each
    /// admission of a node just READ holds one CS-wide lock for `ns`
    /// virtual ns, so the CS's cores admit one at a time, each waiting
    /// (busy, as a spinning thread does) for the admissions before it.
    /// The artifact's cache updates one usage counter and pushes every
    /// admitted entry onto one FIFO queue; with many threads per CS and a
    /// cache far smaller than the tree's internal nodes those shared words
    /// bounce between cores: DEX §2.3 names it as what stops SMART scaling
    /// and §8.2 profiles it at 49% of SMART's CPU cycles (issue 34). Our
    /// cache's own mutex is held for a map probe only, and costs no
    /// virtual time. On wall-clock fabrics (`loopback`, `rdma`) this has no
    /// effect: the real lock's cost is what it is. 0: off (the default).
    pub fn with_fifo_hold_ns(mut self, ns: u64) -> Self {
        self.fifo_hold_ns = ns;
        self
    }

    /// The modelled central FIFO's turn for one admission
    /// ([`ArtCache::with_fifo_hold_ns`]): returns at once without the model.
    pub(crate) async fn fifo_turn(&self) {
        let hold = self.fifo_hold_ns;
        if hold == 0 {
            return;
        }
        // Arrive in virtual-time order with the CS's other cores (as DEX's
        // shared cache does, `dm_runtime::sync_virtual_time`).
        dm_runtime::sync_virtual_time().await;
        let now = dm_runtime::now_ns();
        let prev = self
            .fifo_free_ns
            .fetch_update(Relaxed, Relaxed, |free| Some(free.max(now) + hold))
            .expect("the closure always returns Some");
        let busy = prev.max(now) + hold - now;
        dm_runtime::charge_cpu(busy);
        self.fifo_admissions.fetch_add(1, Relaxed);
        self.fifo_ns.fetch_add(busy, Relaxed);
        // Let the cores behind catch up before this one posts again: the
        // sim's NICs take posts in the order cores make them, so a core
        // that jumped microseconds ahead would otherwise hold up the posts
        // of cores still before it in virtual time.
        dm_runtime::sync_virtual_time().await;
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> CacheStats {
        let g = self.inner.lock().unwrap();
        CacheStats {
            hits: g.hits,
            misses: g.misses,
            invalidations: self.invalidations.load(Relaxed),
            stale_leaves: self.stale_leaves.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            entries: g.entries() as u64,
            bytes: g.bytes as u64,
            fifo_admissions: self.fifo_admissions.load(Relaxed),
            fifo_ns: self.fifo_ns.load(Relaxed),
        }
    }

    /// The start of a walk for `path`: the cached slot word for the next
    /// path byte of the deepest entry on the path that has one, marked
    /// `cached` (module docs); `None` if no entry has.
    pub(crate) fn lookup(&self, path: &[u8]) -> Option<(Cursor, Hit)> {
        let mut g = self.inner.lock().unwrap();
        let top = path.len().min(g.lens.len());
        for l in (0..top).rev() {
            if g.lens[l] == 0 {
                continue;
            }
            let Some(e) = g.find(&path[..l]) else {
                continue;
            };
            let b = path[l];
            let Some(i) = e.position(b) else {
                continue;
            };
            let c = Cursor {
                slot_a: slot_addr(e.node, i),
                owner: e.node,
                word: e.slots()[i],
                depth: l + 1,
                cached: true,
            };
            let hit = Hit {
                prefix_len: l,
                node: e.node,
            };
            g.hits += 1;
            return Some((c, hit));
        }
        g.misses += 1;
        None
    }

    /// Admits or refreshes the entry of the node at `node` whose slots
    /// discriminate on path byte `prefix.len()`; `slots` its slot words as
    /// READ (the filled prefix is kept).
    pub(crate) fn insert(&self, prefix: &[u8], node: GlobalAddr, slots: &[u64]) {
        let filled = slots.iter().take_while(|&&w| w != 0).count();
        let slots = &slots[..filled];
        let mut g = self.inner.lock().unwrap();
        if let Some(id) = g.find_id(prefix) {
            let e = g.get_mut(id).unwrap();
            if e.node == node && e.slots() == slots {
                return;
            }
            e.node = node;
            g.set_slots(id, slots);
        } else {
            g.admit(prefix, node, slots);
        }
        self.evict_to_budget(&mut g);
    }

    /// Evicts entries in FIFO order of admission until the budget holds.
    fn evict_to_budget(&self, g: &mut Store) {
        while g.bytes > self.budget {
            let Some((id, stamp)) = g.fifo.pop_front() else {
                break;
            };
            if g.current(id, stamp) {
                g.remove(id);
                self.evictions.fetch_add(1, Relaxed);
            }
        }
        // Invalidations leave their FIFO records behind: compact when they
        // outnumber the live ones.
        if g.fifo.len() > 2 * g.entries() + 64 {
            let mut fifo = std::mem::take(&mut g.fifo);
            fifo.retain(|&(id, s)| g.current(id, s));
            g.fifo = fifo;
        }
    }

    /// Drops the entry at `prefix` if it still describes the node `hit` found.
    pub(crate) fn invalidate(&self, prefix: &[u8], hit: Hit) {
        let mut g = self.inner.lock().unwrap();
        let Some(id) = g.find_id(&prefix[..hit.prefix_len]) else {
            return;
        };
        if g.get(id).map(|e| e.node) == Some(hit.node) {
            g.remove(id);
            self.invalidations.fetch_add(1, Relaxed);
        }
    }

    /// A cached leaf address was found replaced (RCU leaves): the entry
    /// `hit` found on `prefix` takes `new`, READ from the slot at `slot_a`,
    /// in place of `old` (the rest of the snapshot is as good as before:
    /// each word is a hint the walk checks). No-op if the entry changed.
    pub(crate) fn patch(&self, prefix: &[u8], hit: Hit, slot_a: GlobalAddr, old: u64, new: u64) {
        self.stale_leaves.fetch_add(1, Relaxed);
        self.replace_word(&prefix[..hit.prefix_len], hit.node, slot_a, old, new);
    }

    /// The slot at `slot_a` of the node at `node` (entry at `prefix`) went
    /// from `old` to `new`: by this CS's own CAS (a split's publish) or as
    /// READ. The entry's word is replaced if it still holds `old`; no-op if
    /// the entry names another node or lacks the slot.
    pub(crate) fn replace_word(
        &self,
        prefix: &[u8],
        node: GlobalAddr,
        slot_a: GlobalAddr,
        old: u64,
        new: u64,
    ) {
        let mut g = self.inner.lock().unwrap();
        let Some(e) = g.find_id(prefix).and_then(|id| g.get_mut(id)) else {
            return;
        };
        let off = slot_a.offset().wrapping_sub(e.node.offset() + 16);
        if e.node != node || slot_a.ms() != e.node.ms() || !off.is_multiple_of(8) {
            return;
        }
        e.replace((off / 8) as usize, old, new);
    }

    /// This CS filled slots `first..first + words.len()` of the node at
    /// `node` (whose slots discriminate on path byte `prefix.len()`): the
    /// last word by its own CAS, the others as that CAS's failed
    /// predecessors returned them (other writers' partial keys). The entry,
    /// if it names `node` and holds at least `first` slots, takes the ones
    /// it lacks, as a READ at that time would have given them (slots are
    /// never emptied, `insert` invariant 1); otherwise nothing changes.
    pub(crate) fn note_filled(&self, prefix: &[u8], node: GlobalAddr, first: usize, words: &[u64]) {
        let mut g = self.inner.lock().unwrap();
        let Some(id) = g.find_id(prefix) else {
            return;
        };
        let e = g.get(id).unwrap();
        let filled = e.slots().len();
        if e.node != node || filled < first || filled >= first + words.len() {
            return;
        }
        let add = &words[filled - first..];
        if add.contains(&0) {
            return;
        }
        g.write_slots(id, filled, add);
        self.evict_to_budget(&mut g);
    }
}

#[cfg(test)]
mod tests;

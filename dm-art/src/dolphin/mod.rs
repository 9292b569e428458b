//! # Dolphin: ART internal nodes over B+tree-style leaves (An et al., MSST'24)
//!
//! The upper levels are SMART's lock-free ART internal nodes
//! ([`crate::layout`], reused as they are, with the ART cache
//! [`crate::ArtCache`]), indexing the first 7 bytes of 8-byte keys; each slot
//! at the bottom names a Dolphin leaf holding every key of one 7-byte prefix
//! (range `[P·00, P·FF]`), or, once that leaf has split, a *special node*
//! whose entries partition the last byte among several leaves (Dolphin
//! §III-A/B, Fig. 2 and 4; byte layouts in [`layout`]). One cached ART node
//! or special node therefore maps to the tens of items of each leaf it names
//! (the 1 : N mapping behind the paper's memory claim). What lives where:
//!
//! - [`layout`]: leaf, key word, special node, byte by byte; a get reads its
//!   validated leaf in place ([`layout::LeafView`]), writers decode a
//!   [`layout::LeafImage`];
//! - `walk`: pathfinding (§III-B): cached ART descent, exact match on the
//!   first 7 bytes, floor match in the special node, backtracking when a
//!   leaf's range no longer covers the key;
//! - `ops`: `get`, `insert` (upsert), `update`, `remove` and the Spear lock
//!   (or, in lease mode, the node lock);
//! - `smo`: hanging new leaves into the ART and leaf splits (Fig. 4b, d, e);
//! - `settle`: lease mode, rolling forward a split its holder left cut;
//! - `scan`: ordered, count-bounded range scans.
//!
//! ## Concurrency: what we keep from the paper and what soundness changes
//!
//! The paper's *MS-RNIC write synchronisation* (§III-C) relies on two NIC
//! behaviours RDMA does not promise: 64-byte WRITE atomicity and WRITEs
//! placed in increasing address order; its insert also publishes a key (CAS)
//! before its value (WRITE), so a reader can see a key with a stale value
//! (digest B5 #5), two inserts of one key can both succeed into different
//! slots (#6), and an update racing a delete can leave a value behind (#7).
//! Here a one-sided READ may return every 8-byte word from a different moment
//! (`dm_verbs::sim` torn reads), so:
//!
//! 1. **Spear, FAA only** (§III-C). The leaf's lock word counts IDU shares
//!    (+1) and an exclusive holder adds `-EXCLUSIVE`; nothing but FAA
//!    changes it and no leaf WRITE covers it. A share is taken by an FAA
//!    posted in the same doorbell as the leaf READ (in-order execution on
//!    the QP: the READ sees the leaf after the FAA). Whoever sees a negative
//!    old value undoes its add and waits until the word is non-negative.
//!    An exclusive taker that sees positive shares waits until they drain
//!    (the word reads `-EXCLUSIVE`) and READs the leaf again.
//! 2. **Update: 2 round trips, as the paper**, with a sound item. An item
//!    is a key word and two value buffers; the key word carries a sequence
//!    number naming the current buffer and a digest binding that buffer's
//!    value (and the leaf version) to it. Under a share, an update posts in
//!    one doorbell: WRITE of the *other* buffer, CAS of the key word to the
//!    next sequence number and the new digest, FAA -1. A torn READ that sees
//!    the new key word before the new value fails the digest and is READ
//!    again. Two concurrent updates of one key: one CAS wins; the loser's
//!    WRITE may land on the winner's buffer after it, leaving a mismatched
//!    item that readers retry on, and the loser, whose CAS failed, runs again
//!    and installs its own value, repairing it (it linearizes after the
//!    winner). The paper's update-update resolution "inside the RNIC"
//!    becomes a CAS; same-key conflicts cost the loser a second attempt.
//!    The paper's update and its authors' are kept as switches to measure
//!    the paper's claims with ([`DolphinUpdate`]; not sound on RDMA).
//! 3. **Insert and remove take the leaf exclusively** (the paper's insert
//!    CASes a key slot under a share: the source of #5, #6, #7). Under the
//!    exclusive hold no update is in flight, so an insert WRITEs its whole
//!    item (key word, value, digest) and a remove clears the key word,
//!    each in one doorbell with the releasing FAA: 2 round trips past the
//!    cache, one fewer than the paper's insert (3) and the same as its
//!    delete, but inserts into one leaf no longer run in parallel (as in
//!    Sherman, which the paper's LOAD results match anyway).
//! 4. **Leaf versions.** Whole-leaf WRITEs (splits) bump a 32-bit version
//!    carried by the header (checksummed) and by every key word; a READ torn
//!    across a split fails one of the checks. Within a version items do not
//!    move, so an accepted image is a set of per-item snapshots.
//! 5. **Splits** (§III-B, Fig. 4d/e) run under the exclusive hold and
//!    split evenly (the paper's text; the code's 3/4 split would break the
//!    bound on leaves per prefix). The new leaf is born exclusively held and
//!    released only after the old leaf's rewrite, so no value changes while
//!    a key is reachable in both; readers that reach the shrunk leaf for a
//!    key past its range backtrack through the special node.
//!
//! ## A compute server that dies (issue 33, not in the paper)
//!
//! Spear's shares are anonymous FAA counts: a dead CS's share, or its
//! exclusive add, can never be told from a live one's, and the word stays
//! held for ever. In **lease mode** ([`DolphinTree::with_member`], every CS
//! joined to the membership table) the same 8-byte word at the leaf's end
//! is taken as an FG+-style node lock instead (`dm_runtime::lock::
//! NodeLocks`: CAS `0 -> name` (the CS's incarnation, a take count and
//! the tag: `dm_runtime::lock::member`), the leaf READ in the
//! CAS's doorbell, WRITE 0 to release, command combination on), by
//! updates, inserts, removes and splits alike; gets and scans take no lock,
//! as before. A dead holder's lock is taken over after the lease
//! (`dm_runtime::lock::lease`). What it may have left, and how a taker
//! recognises it:
//!
//! - **An item** is written as its value buffer, then its key word (the
//!   word naming the buffer and binding the value by its digest), each an
//!   8-byte WRITE in one doorbell with the unlock on the leaf's QP, which
//!   executes them in order: a cut leaves the old item or the new one,
//!   never a key word naming an unwritten value. A remove is one 8-byte
//!   WRITE of the key word. No repair.
//! - **A split** (`smo`) holds the new leaf from before its publication
//!   (WRITTEN free, then locked by CAS while nobody can reach it). Cut
//!   before the publishing CAS, the new leaf is leaked and the old one
//!   whole; cut after the old leaf's rewrite, nothing overlaps. Cut in
//!   between, the new leaf is reachable while the old one's image still
//!   covers its keys, which a stale path (a cached ART slot) still reads:
//!   `settle` (module `settle`) rolls it forward, run by whoever takes
//!   either leaf from a holder that never released it
//!   (`dm_runtime::lock::Held::taken_stale`): the old leaf is rewritten
//!   to end below the new one before either is written again. Its test
//!   (`tests/dolphin_lease.rs`) cuts a split there and shows the stale
//!   reader's wrong answers without it.
//! - **Publishing CASes** (a new leaf into the ART, a special node, an
//!   entry) read an unreported success as one (`crate::tree::publish_took`):
//!   read as a loss, the spare leaf would be reused while published.
//!
//! The lock is taken by every writer of a leaf, so same-leaf updates no
//! longer run in parallel under a share; an update still costs 2 round
//! trips ([CAS lock, READ leaf], then [WRITE value, WRITE key word, WRITE
//! 0]; `tests/dolphin.rs` counts them). A split dropped by a live CS (a
//! cancelled future) is repaired too: its words are taken back stale by
//! the same core's next attempt, or released at another core's request to
//! `dm_runtime::lock::ask::ABANDONED`, which the next taker takes stale.
//! `dm-bench check --index dolphin --faults crash` runs it; recovery times
//! on sim are in `docs/experiments/recovery.md`.
//!
//! Read delegation and write combining (the authors' code borrows them from
//! SMART, digest B5 #12) are not part of Dolphin's design and not used here.
//! Keys must be 8 bytes (the authors' code stores 8-byte keys only; B5 #4).
//! Memory is never reclaimed: removed items leave free slots that later
//! inserts reuse, leaves never merge.

pub mod layout;
mod ops;
mod scan;
mod settle;
mod smo;
mod stats;
mod walk;

pub(crate) use stats::Counter;
pub use stats::{totals, DolphinCounters, DolphinStats};

use crate::cache::ArtCache;
use crate::config::SmartConfig;
use crate::error::ArtError;
use crate::tree::SmartTree;
use dm_runtime::lock::{LockCounters, LockTableConfig, LockTechniques, Member, NodeLocks};
use dm_verbs::ms::superblock;
use dm_verbs::GlobalAddr;
use layout::{LeafGeometry, SpecialEntries, SPECIAL_BYTES};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Where the tree lives and its leaf size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DolphinConfig {
    /// Address of the 8-byte root slot (default: MS 0, superblock offset
    /// [`superblock::DOLPHIN_ROOT`] = 32). A tree that shares its fabric
    /// with other indexes takes a root area of [`DolphinConfig::root_bytes`]
    /// from `dm_runtime::catalog` and puts its root slot there.
    pub root_slot: GlobalAddr,
    /// Chunk size the MSs hand out (must match the fabric's `MsConfig::chunk_bytes`).
    pub chunk_bytes: u64,
    /// Number of memory servers nodes and leaves are spread over.
    pub num_ms: u16,
    /// Leaf size in bytes (default 1,024: the paper's evaluation, §IV-A);
    /// a multiple of 64 holding at least 32 items (808 bytes).
    pub leaf_bytes: usize,
    /// How an update publishes its value (default
    /// [`DolphinUpdate::KeyWordCas`], the sound one). Every CS of a tree
    /// must choose the same.
    pub update: DolphinUpdate,
}

/// How a Dolphin update publishes its value under its Spear share (§III-C,
/// Fig. 5a; module docs, point 2). Outside lease mode only: in lease mode
/// an update holds the leaf's node lock and WRITEs its item.
///
/// | variant | second doorbell | same-key updates | assumes |
/// |---|---|---|---|
/// | `KeyWordCas` | WRITE other value buffer (8 B), CAS key word, FAA -1 | one CAS wins, the losers run again | 8-byte atomicity only |
/// | `Paper` | WRITE whole item (24 B: key word, value in both buffers), FAA -1 | last WRITE wins | an item WRITE lands whole |
/// | `Authors` | as `Paper`, posted and not waited for | last WRITE wins | as `Paper`, and no reader overtakes it |
///
/// `Paper` and `Authors` exist to measure the paper's claims (issue 34:
/// the cause of Dolphin's YCSB A numbers), not to be deployed: RDMA does
/// not promise what they assume. The `sim` fabric does not break them
/// (its WRITEs land whole, its links deliver in order at one latency, and
/// a READ torn across an item WRITE fails the key word's digest), so
/// `dm-bench check` passes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DolphinUpdate {
    /// Sound: the value goes to the item's other buffer and the key word
    /// (sequence number, digest of the value) is CASed; a torn READ that
    /// pairs a key word with another value fails the digest. Two updates
    /// of one key: one CAS wins, the other runs the update again (2 more
    /// round trips).
    #[default]
    KeyWordCas,
    /// The paper's (§III-C, "MS-RNIC write synchronisation"): one WRITE of
    /// the item, relying on the NIC applying it whole (the paper assumes
    /// 64-byte WRITE atomicity); no CAS, so concurrent updates of one key
    /// all succeed and the last WRITE wins, "resolved inside the RNIC".
    /// RDMA lets a responder place a WRITE's bytes in any order: two
    /// updates' WRITEs interleaved word by word leave a key word whose
    /// digest does not bind the value beside it, and every get of the key
    /// then fails until the next update (an error after its retries).
    Paper,
    /// As [`DolphinUpdate::Paper`], and the second doorbell is posted but
    /// not waited for, as the authors' code posts it unsignaled (digest
    /// B3.3 [C]): an update returns after one round trip. Its verbs are
    /// still counted to the operation; a failure of them is not reported;
    /// a client whose READ reaches the MS first reads the old value after
    /// the update returned, which is not linearizable.
    Authors,
}

impl DolphinUpdate {
    /// The variant named `s` (`cas`, `paper`, `authors`; `ycsb
    /// --dolphin-update`).
    pub fn named(s: &str) -> Option<Self> {
        match s {
            "cas" => Some(DolphinUpdate::KeyWordCas),
            "paper" => Some(DolphinUpdate::Paper),
            "authors" => Some(DolphinUpdate::Authors),
            _ => None,
        }
    }
}

impl Default for DolphinConfig {
    fn default() -> Self {
        DolphinConfig {
            root_slot: GlobalAddr::new(0, superblock::DOLPHIN_ROOT),
            chunk_bytes: 8 << 20,
            num_ms: 1,
            leaf_bytes: 1024,
            update: DolphinUpdate::KeyWordCas,
        }
    }
}

impl DolphinConfig {
    /// Root-area bytes the tree needs from `root_slot` on (issue 31): the
    /// root slot alone (Dolphin's SMART core runs every SMART technique, so
    /// it keeps no lock-table address).
    pub const ROOT_BYTES: u32 = 8;

    /// Root-area bytes this tree needs: [`DolphinConfig::ROOT_BYTES`].
    pub fn root_bytes(&self) -> u32 {
        Self::ROOT_BYTES
    }

    /// This configuration placed in a root area at superblock offset
    /// `root_off` (a catalog entry's): the root slot at MS 0 `root_off`.
    pub fn in_root_area(mut self, root_off: u64) -> Self {
        self.root_slot = GlobalAddr::new(0, root_off);
        self
    }
}

/// What an exclusive holder adds to a Spear lock word (the authors' code
/// uses -1,000,000; any value above the number of concurrent shares works).
pub(crate) const EXCLUSIVE: i64 = 1 << 40;

/// One compute server's Dolphin cache, shared by its cores: the ART cache of
/// internal nodes (SMART §4.3) and the special nodes' entries by prefix
/// (Dolphin caches internal nodes down to the special node, §III-A; the
/// authors' code, digest B3.9). Both count against one byte budget; special
/// nodes are evicted first in, first out.
pub struct DolphinCache {
    art: Arc<ArtCache>,
    budget: usize,
    specials: Mutex<Specials>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct Specials {
    map: HashMap<u64, (GlobalAddr, SpecialEntries)>,
    fifo: VecDeque<u64>,
}

/// Bytes one cached special node is charged: its entries, address and
/// prefix, and the map and queue overhead.
const SPECIAL_ENTRY_BYTES: usize = SPECIAL_BYTES + 48;

/// Dolphin cache occupancy and counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DolphinCacheStats {
    /// The ART part ([`crate::CacheStats`]).
    pub art: crate::CacheStats,
    /// Special nodes cached, and lookups of them that hit or missed.
    pub specials: u64,
    pub special_hits: u64,
    pub special_misses: u64,
    /// Bytes of the whole cache (ART entries and special nodes).
    pub bytes: u64,
}

impl DolphinCache {
    /// An empty cache of `budget_bytes`.
    pub fn new(budget_bytes: usize) -> Self {
        DolphinCache {
            art: Arc::new(ArtCache::new(budget_bytes)),
            budget: budget_bytes,
            specials: Mutex::new(Specials::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> DolphinCacheStats {
        let art = self.art.stats();
        let n = self.specials.lock().unwrap().map.len() as u64;
        DolphinCacheStats {
            art,
            specials: n,
            special_hits: self.hits.load(Relaxed),
            special_misses: self.misses.load(Relaxed),
            bytes: art.bytes + n * SPECIAL_ENTRY_BYTES as u64,
        }
    }

    /// The cached entries of special node `d` of `prefix`, through `f`
    /// under the lock (no copy: a warm operation allocates nothing), or
    /// `None` on a miss.
    fn special<T>(&self, prefix: u64, d: GlobalAddr, f: impl FnOnce(&[u64]) -> T) -> Option<T> {
        let g = self.specials.lock().unwrap();
        match g.map.get(&prefix) {
            Some((a, e)) if *a == d => {
                self.hits.fetch_add(1, Relaxed);
                Some(f(e))
            }
            _ => {
                self.misses.fetch_add(1, Relaxed);
                None
            }
        }
    }

    fn put_special(&self, prefix: u64, d: GlobalAddr, entries: SpecialEntries) {
        let art = self.art.stats().bytes as usize;
        let mut g = self.specials.lock().unwrap();
        if g.map.insert(prefix, (d, entries)).is_none() {
            g.fifo.push_back(prefix);
        }
        while art + g.map.len() * SPECIAL_ENTRY_BYTES > self.budget {
            let Some(p) = g.fifo.pop_front() else { break };
            g.map.remove(&p);
        }
    }

    fn drop_special(&self, prefix: u64) {
        self.specials.lock().unwrap().map.remove(&prefix);
    }
}

/// One core's handle on a global Dolphin tree. Create the tree once with
/// [`DolphinTree::create`], then [`DolphinTree::open`] it on every other core.
pub struct DolphinTree {
    pub(crate) g: LeafGeometry,
    /// SMART's internal-node machinery (READs, splits, type switches, the
    /// ART cache) over the same root slot; its own leaves are never used.
    pub(crate) art: SmartTree,
    pub(crate) cache: Option<Arc<DolphinCache>>,
    /// Leaf images rejected (torn or mid-update) and READ again.
    pub(crate) rejected: Cell<u64>,
    /// Same-key update CASes lost (the loser runs again).
    pub(crate) lost_cas: Cell<u64>,
    /// Spear waits: shares or exclusive takers that found the word held.
    pub(crate) lock_waits: Cell<u64>,
    /// Backtracks through a special node (§III-B).
    pub(crate) backtracks: Cell<u64>,
    /// A new leaf WRITTEN for a publication that lost its CAS, reused by
    /// the next one (so a lost race allocates nothing).
    pub(crate) spare: Cell<Option<GlobalAddr>>,
    /// The index's counters of the four above, if shared per index
    /// ([`DolphinTree::with_counters`]; this handle's own by default).
    pub(crate) counters: Arc<DolphinCounters>,
    /// Spear holds and waits as lock statistics
    /// ([`DolphinTree::with_lock_counters`]).
    pub(crate) lock_counters: Arc<LockCounters>,
    /// This handle's compute server and core (its lock tag in lease mode).
    pub(crate) id: (u16, u16),
    /// Lease mode ([`DolphinTree::with_member`]): the leaf lock word taken
    /// as a node lock naming its holder, instead of Spear's shares.
    pub(crate) locks: Option<NodeLocks>,
    /// How updates publish their values outside lease mode.
    pub(crate) update: DolphinUpdate,
}

impl DolphinTree {
    /// A handle for core `core` of compute server `cs` (no verbs). Errors:
    /// [`ArtError::BadConfig`] for a leaf size that is not a multiple of 64
    /// or holds fewer than 32 items.
    pub fn open(cfg: DolphinConfig, cs: u16, core: u16) -> Result<Self, ArtError> {
        let g = LeafGeometry::new(cfg.leaf_bytes).ok_or_else(|| {
            ArtError::BadConfig(format!(
                "leaf of {} bytes: a multiple of 64 holding at least {} items ({} bytes) needed",
                cfg.leaf_bytes,
                layout::MIN_ITEMS,
                layout::ITEMS_OFF + 8 + layout::ITEM_BYTES * layout::MIN_ITEMS
            ))
        })?;
        if cfg.leaf_bytes as u64 > cfg.chunk_bytes {
            return Err(ArtError::BadConfig("leaf larger than a chunk".into()));
        }
        let art = SmartTree::open(
            SmartConfig {
                root_slot: cfg.root_slot,
                chunk_bytes: cfg.chunk_bytes,
                num_ms: cfg.num_ms,
                ..SmartConfig::default()
            },
            cs,
            core,
        )?;
        Ok(DolphinTree {
            g,
            art,
            cache: None,
            rejected: Cell::new(0),
            lost_cas: Cell::new(0),
            lock_waits: Cell::new(0),
            backtracks: Cell::new(0),
            spare: Cell::new(None),
            counters: Arc::default(),
            lock_counters: Arc::default(),
            id: (cs, core),
            locks: None,
            update: cfg.update,
        })
    }

    /// Lease mode (issue 33, not in the paper): joins this handle to its
    /// CS's membership `m` ([`dm_runtime::lock::member`]). Spear's FAA
    /// shares are anonymous, so a dead CS's share could never be told from
    /// a live one; with a member the leaf's lock word (the Spear word's
    /// place, offset [`LeafGeometry::lock_off`]) is instead taken as an
    /// FG+-style node lock naming its holder's CS, core and incarnation
    /// (`dm_runtime::lock::NodeLocks`, command combination on), by every
    /// update, insert, remove and split: an update costs the same 2 round
    /// trips ([CAS, READ], then [WRITE value, WRITE key word, WRITE 0]),
    /// but updates of one leaf no longer run in parallel. A dead holder's
    /// lock is taken over after the lease, and what its split left half
    /// done is rolled forward (`settle`, module docs). Every CS of the tree
    /// joins, or none (the two lock disciplines do not mix). Errors:
    /// [`ArtError::BadConfig`] as `NodeLocks::set_member` (`m` of another
    /// CS), and for a configuration whose [`DolphinConfig::update`] is not
    /// the default (the paper's updates take no lock that names a holder).
    pub fn with_member(mut self, m: Arc<Member>) -> Result<Self, ArtError> {
        if self.update != DolphinUpdate::KeyWordCas {
            return Err(ArtError::BadConfig(format!(
                "dolphin updates {:?} have no lease mode",
                self.update
            )));
        }
        let t = LockTechniques {
            combine: true,
            ..LockTechniques::FG_PLUS
        };
        let (cs, core) = self.id;
        let mut l = NodeLocks::new(t, LockTableConfig::default(), cs, core, 0, u64::MAX)?
            .with_counters(self.lock_counters.clone());
        l.set_member(m)?;
        self.locks = Some(l);
        Ok(self)
    }

    /// Creates an empty tree (root slot empty) and returns this core's handle.
    pub async fn create(cfg: DolphinConfig, cs: u16, core: u16) -> Result<Self, ArtError> {
        let t = Self::open(cfg, cs, core)?;
        dm_runtime::write(cfg.root_slot, vec![0; 8]).await?;
        Ok(t)
    }

    /// Uses `cache`, the Dolphin cache of this handle's compute server (one
    /// per CS, shared by its cores).
    pub fn with_cache(mut self, cache: Arc<DolphinCache>) -> Self {
        self.art = self.art.with_cache(cache.art.clone());
        self.cache = Some(cache);
        self
    }

    /// This handle's cache, if any.
    pub fn cache(&self) -> Option<&Arc<DolphinCache>> {
        self.cache.as_ref()
    }

    /// Items per leaf.
    pub fn leaf_items(&self) -> usize {
        self.g.items
    }
}

/// The key as an integer (8 bytes, big-endian). Errors: [`ArtError::KeyLength`].
pub(crate) fn key_u64(key: &[u8]) -> Result<u64, ArtError> {
    let b: [u8; 8] = key.try_into().map_err(|_| {
        ArtError::KeyLength(crate::KeyLengthError {
            got: key.len(),
            max: 8,
            variable: false,
        })
    })?;
    Ok(u64::from_be_bytes(b))
}

//! DEX (Lu et al., PVLDB 17(10) 2024): logical partitioning, a path-aware
//! cache of inner *and* leaf nodes, and cost-aware offloading to the MSs,
//! over the remote B-link tree of [`crate::FgTree`] (same node layout, same
//! checksum validation, same locks for the nodes that are locked).
//!
//! ## What lives where
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`DexCluster`] (the partition map and each CS's state, shared by the cores of a process), [`DexTree`] (one core's handle: entering a partition, flushing), [`DexStats`] |
//! | `config.rs` | [`DexConfig`]: bounds, cache budget, offload level, cost-model knobs |
//! | `api.rs` | the public operations: route to the owning CS, run there |
//! | `traverse.rs` | the cached traversal under the CS's mutex and its async driver; refresh of stale inner nodes (§4, §5.2) |
//! | `op.rs` | the operation on a leaf (get, put, remove, one leaf of a scan) |
//! | `range.rs` | fence order and key-range tests (cover, inside a partition, overlap, a child's range) |
//! | `miss.rs` | misses: lazy leaf admission, scratch leaves, fetch, the offload decision (§5.2, §5.3, §6) |
//! | `offload.rs` | the offload RPC and its reply (§6.2) |
//! | `write_back.rs` | dirty leaf pages written back: cooling a dirty page, flush (§5.3); lease mode's write-through |
//! | `split.rs` | leaf splits, repartitioning and the cut of a leaf at a new partition bound (§4, §5.2), lease mode's repair of a route a dead CS's split cut |
//! | `cache.rs` | one CS's cache (§5): frames, the mapping table, pointer swizzling, refresh |
//! | `eviction.rs` | admission, the cooling map (hash buckets of 6-entry FIFO arrays, 10% of the frames), path-aware sampling, second chance, eviction (§5.3) |
//! | `inflight.rs` | misses and offloads in flight: tokens, key ranges, holds, the hot-leaf repair |
//! | `cost.rs` | the cost model of §6.1 (moving averages, 1% exploration) |
//! | [`ms`] | the MS side of offloading (§6.2), an RPC handler |
//! | `bulk.rs` | bulk load with DEX's placement and leaves cut at partition bounds |
//!
//! ## The design as built, and where it departs from the paper
//! - **Partitioning (§4).** CS `i` owns keys in `[bounds[i-1], bounds[i])`.
//!   Every bound is a leaf fence (bulk load and [`DexTree::create`] cut
//!   leaves there; [`DexTree::repartition`] splits the leaf under a new
//!   bound), so every leaf belongs to exactly one CS, and leaves never
//!   straddle a bound later because only their owner splits them. An
//!   operation on a key another CS owns is [`TreeError::NotOwner`], or, with
//!   [`DexConfig::forward`], runs against the owner's cache (in-process
//!   forwarding; its CS-to-CS message is not modelled on `sim`).
//! - **Leaves are private and written back lazily (§4, §5.2).** A cached leaf
//!   is modified in the CS cache only (no RDMA) and written back (one 1 KB
//!   WRITE) when it cools, on [`DexTree::flush`] and on repartitioning. A
//!   leaf that is not admitted (lazy admission, p = 0.1) is READ into a
//!   scratch copy, and a write costs one more WRITE of the page. No remote
//!   lock: the mapping table's in-flight flag gives exclusivity within the
//!   CS, partitioning across CSs.
//! - **Inner nodes are written through** (a departure). The paper keeps
//!   private inner nodes dirty in the cache and locks only shared ones. Here
//!   every inner-node change (a separator after a leaf split, inner splits,
//!   root growth) goes through FgTree's remote B-link insert with the node's
//!   RDMA lock, so the pool always holds the newest inner nodes and a cached
//!   inner node is a read copy that is validated by fences and refreshed
//!   when stale (§4's lazy coherence, applied to every inner node). Inner
//!   changes are one per leaf split, so the cost is a few round trips per
//!   ~30 inserts; what it buys is that neither offloading nor another CS can
//!   ever see a stale inner node, and no repartition has to find dirty ones.
//! - **Remote reads of shared nodes** use the checksum validation of
//!   [`crate::node`] (one READ), not the paper's lock-word/version/re-read
//!   triple (three READs): the same soundness argument as FG's nodes.
//! - **Local synchronisation.** A mutex per CS cache (held only between
//!   awaits, never across a verb) instead of per-node optimistic lock
//!   coupling. `sim` does not charge it; on `loopback` it is a contention
//!   point DEX's OLC avoids.
//! - **Offloading (§6)** as the paper: only below or at the offload level M,
//!   never for shared nodes, scans or SMOs; the missed node is marked in
//!   flight and its parent pinned while the MS runs the rest of the
//!   operation, and a cooling copy of the returned leaf is dropped. One
//!   more guard: a node is not offloaded while a hot "orphan" frame (a
//!   cached node whose cached parent lost it in a refresh) lies in its key
//!   range, because that frame could be dirty. And a second, found on
//!   real threads: a node is not offloaded while another miss of this CS
//!   (a scratch leaf being read, changed and written back, say) is in
//!   flight over its key range, and a miss whose range meets an offload in
//!   flight waits for it. A leaf split updates the pool's inner nodes
//!   before the CS's cached ones are refreshed, so for a while two routes
//!   reach one leaf: a cached inner node, and an uncached one that misses
//!   and may be offloaded. Without the guard the scratch leaf's write-back
//!   overwrote the offloaded change (see `cache::IoRange`). The same window
//!   can leave a *hot* leaf frame under the stale cached inner node while
//!   the uncached one is offloaded. Then the
//!   frame, the leaf's owner copy, is marked dirty so that its write-back
//!   overwrites the MS's change, the MS's result is dropped and the
//!   operation retried through the cache (`Cache::invalidate`,
//!   `CacheCounters::hot_offloads`); the paper's invariant alone (no hot
//!   descendants below an uncached node) does not hold across a split.
//!   The runs that found both races: `docs/experiments/tree.md`.
//! - Head nodes and merges are not built (the paper's code does not merge).
//!
//! ## A compute server that dies (lease mode, issue 33; not in the paper)
//! DEX assumes CSs never fail: a dead CS takes its partition's dirty cached
//! leaves with it, acknowledged writes included. [`DexTree::with_member`]
//! (every handle of a CS that joined the membership table,
//! `dm_runtime::lock::member`) switches the CS to a lease mode that loses
//! nothing acknowledged:
//! - **Write-through of leaves.** A change of a cached leaf sets its frame
//!   `flushing` and is written (one WRITE of the page) before the
//!   operation returns (`write_back::Through`). While a frame is flushing,
//!   every other operation of the CS on it waits, gets too: writes of one
//!   page are ordered, and a reader sees only what is in the pool. A split
//!   writes the right leaf, then the left half, then inserts the
//!   separator. Scratch leaves were written at once already. Cooling,
//!   flushes and repartitions then find nothing dirty. Cost: one WRITE
//!   per changed leaf (the paper's lazy write-back batches many changes
//!   into one), and same-leaf operations serialised over it. A
//!   write-through that fails (a broken QP) or is cancelled leaves a
//!   change that may be missing from the pool: its operation did not
//!   succeed, and the next operation on the leaf READs the page again
//!   instead of serving that change (`Frame::reread`), so no reader sees
//!   a value a dead CS could take with it.
//! - **Inner nodes** are FgTree's: their locks name the member and are
//!   taken over after the lease, and a half-done write-back is repaired as
//!   `dm_tree`'s docs say.
//! - **A split cut between its node writes and its separator's insert**
//!   (right and left leaf written, or an inner node split by FgTree)
//!   leaves a node whose high fence is below what its parent routes to
//!   it. FG's readers move right across it, but DEX's cached traversal
//!   re-reads the parent for ever. An operation that has been refreshing
//!   for longer than a lease walks its route from the root and inserts
//!   every separator it crossed by moving right (`split::repair_route`,
//!   idempotent). Recognised by the fences; rolled forward, never back.
//! - **Restart.** A restarted CS has a new incarnation and an empty
//!   cache. It serves nothing before one lease has passed since its first
//!   operation (`DexTree::wait_out_predecessor`), so that the WRITEs and
//!   offloaded operations its dead predecessor left in flight have landed
//!   before it reads the leaves they touch (the lease bounds a dead CS's
//!   work in flight as it bounds a stalled lock holder). Offloading stays
//!   on: an offloaded operation changes the pool itself.
//! - **Forwarding** is in-process, so a CS and the CSs it forwards to die
//!   together; `check --faults crash` runs DEX's two CSs as two processes.
//!   A dead CS's partition is unavailable until a CS with its id restarts
//!   (repartitioning needs both CSs alive, §4).
//!
//! Without a member nothing changes (sim output byte-identical).
//!
//! ## Errors
//! [`TreeError::NotOwner`] (key of another partition, forwarding off);
//! `Verb(MsOutOfMemory)` when a leaf split finds no memory on the leaf's MS
//! (the insert did not happen); [`TreeError::Corrupt`] when a route keeps
//! failing its fence checks (a separator that never reached a parent) or a
//! leaf straddles a partition bound; other verb errors as FgTree's.

mod api;
mod bulk;
mod cache;
mod config;
mod cost;
mod eviction;
mod inflight;
mod miss;
pub mod ms;
mod offload;
mod op;
mod range;
mod split;
mod traverse;
mod write_back;

use crate::node::cmp_keys;
use crate::tree::{FgTree, TreeConfig, TreeError};
use cache::Cache;
use cost::CostModel;
use dm_runtime::yield_now;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

pub use cache::CacheCounters;
pub use config::DexConfig;
pub use ms::RPC_DEX;

/// Per-CS counters of DEX (cumulative since the cluster was made).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DexStats {
    pub cache: CacheCounters,
    /// Offload RPCs sent, and those the MS sent back (SMO, left its MS).
    pub offloads: u64,
    pub offload_fallbacks: u64,
    /// Misses that fetched the node instead (including explorations).
    pub fetches: u64,
    /// Operations forwarded here from another CS's core.
    pub forwarded: u64,
    /// Repartitions this CS took part in, and their virtual/wall time, ns.
    pub repartitions: u64,
    pub repartition_ns: u64,
    /// Cost model's current averages (ns; 0 before the first sample).
    pub avg_read_ns: u64,
    pub avg_offload_ns: u64,
}

/// One CS's DEX state, shared by its cores.
pub(crate) struct DexCs {
    pub(crate) id: u16,
    pub(crate) st: Mutex<Cache>,
    pub(crate) cost: Mutex<CostModel>,
    /// Set while a repartition involving this CS runs: new operations wait.
    frozen: AtomicBool,
    /// Operations running against this CS's cache.
    active: AtomicU32,
    pub(crate) offloads: AtomicU64,
    pub(crate) fallbacks: AtomicU64,
    pub(crate) fetches: AtomicU64,
    forwarded: AtomicU64,
    repartitions: AtomicU64,
    repartition_ns: AtomicU64,
    /// The latest core clock (ns) at which the cache was touched, kept on
    /// virtual clocks only (0 on wall clocks); see [`DexCs::locked`].
    last_ns: AtomicU64,
    /// Lease mode: the core clock (ns) from which this CS serves its
    /// partition, one lease after its first operation (0: not set yet);
    /// see [`DexTree::with_member`].
    serve_from_ns: AtomicU64,
}

impl DexCs {
    /// The cache, for synchronous clean-up (guards' drops); stamps the clock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Cache> {
        let g = self.st.lock().unwrap_or_else(|e| e.into_inner());
        self.stamp();
        g
    }

    /// The cache, once this core's clock has caught up with the latest
    /// clock that touched it. On `sim` each core has its own virtual clock
    /// and a core may run ahead of another within one tick; state shared
    /// through CS memory (this cache) must not let a core observe a change
    /// stamped later than its own clock, or an operation would see an
    /// effect from its future (a Lamport clock for in-CS sharing). Before
    /// that wait, [`dm_runtime::sync_virtual_time`] lets every core whose
    /// clock is behind run first, so accesses arrive in virtual-time order
    /// and the wait is rare (without it, a core whose operations hit the
    /// cache posted no WR, ran ahead within its round, and the wait
    /// serialised the CS). With wall clocks (loopback, rdma) real cores
    /// already act in time order: neither waits, and no stamp is kept (a
    /// clock read and a shared `fetch_max` per access were a tenth of a
    /// cached loopback get's CPU, issue 32).
    pub(crate) async fn locked(&self) -> MutexGuard<'_, Cache> {
        let g = self.peek().await;
        self.stamp();
        g
    }

    /// [`DexCs::locked`] without stamping the clock, for an access whose
    /// outcome may turn out not to matter (a traversal that only finds it
    /// must wait); the caller stamps if it does ([`DexCs::stamp`]).
    /// Waiting accesses that stamped would push the clock ahead of the
    /// core they wait for, which then never catches up.
    pub(crate) async fn peek(&self) -> MutexGuard<'_, Cache> {
        // Let every core whose virtual clock is behind act first, so that
        // accesses reach the cache in virtual-time order and the wait below
        // is the exception, not the rule (a no-op on wall clocks).
        if dm_runtime::clock_is_virtual() {
            dm_runtime::sync_virtual_time().await;
            while dm_runtime::now_ns() < self.last_ns.load(SeqCst) {
                yield_now().await;
            }
        }
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that the cache was touched at this core's clock (a virtual
    /// one: nothing on wall clocks, see [`DexCs::locked`]).
    pub(crate) fn stamp(&self) {
        if dm_runtime::clock_is_virtual() {
            self.last_ns.fetch_max(dm_runtime::now_ns(), SeqCst);
        }
    }
}

/// Most frames a CS's cache holds: `DexConfig::cache_bytes` beyond this
/// many nodes (16 GiB of 1 KiB nodes) is taken as this many, so "no limit"
/// (`u64::MAX`) allocates the cooling map of 2^24 frames, not of 2^54.
pub const MAX_FRAMES: u64 = 1 << 24;

/// The partition map and every CS's state: one per process, shared by the
/// handles of all cores ([`DexTree::open`]).
pub struct DexCluster {
    pub(crate) cfg: DexConfig,
    pub(crate) tcfg: TreeConfig,
    bounds: RwLock<Vec<Vec<u8>>>,
    /// Bumped after every change of `bounds` (while the two CSs are still
    /// frozen): a handle's copy of the bounds is current while this holds
    /// the value it was copied at ([`DexTree::owner`]).
    bounds_epoch: AtomicU64,
    pub(crate) css: Vec<DexCs>,
}

impl DexCluster {
    /// The state of `num_cs` CSs over the tree `tcfg` (its `subtree_level`
    /// is set to `dcfg.offload_level`). Errors: `BadConfig` for bounds of
    /// the wrong length or order, more bounds than CSs - 1, or no CS.
    pub fn new(mut tcfg: TreeConfig, dcfg: DexConfig, num_cs: u16) -> Result<Arc<Self>, TreeError> {
        if num_cs == 0 || dcfg.bounds.len() >= num_cs as usize {
            return Err(TreeError::BadConfig(format!(
                "{} partition bounds for {num_cs} CSs",
                dcfg.bounds.len()
            )));
        }
        if dcfg.bounds.iter().any(|b| b.len() != tcfg.key_bytes)
            || dcfg.bounds.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(TreeError::BadConfig(
                "partition bounds must be key_bytes long and strictly increasing".into(),
            ));
        }
        if !(0.0..=1.0).contains(&dcfg.leaf_admission) || !(0.0..=1.0).contains(&dcfg.explore) {
            return Err(TreeError::BadConfig(
                "leaf_admission and explore are probabilities".into(),
            ));
        }
        if tcfg.node_bytes < 64 {
            // Checked again, with the entries it must hold, when the tree
            // opens; the frames below divide by it first.
            return Err(TreeError::BadConfig(format!(
                "node_bytes {} holds fewer than 4 entries",
                tcfg.node_bytes
            )));
        }
        tcfg.subtree_level = Some(dcfg.offload_level);
        tcfg.design = crate::nam::Design::Fine;
        tcfg.techniques = crate::techniques::Techniques::FG_PLUS;
        let frames = (dcfg.cache_bytes / tcfg.node_bytes as u64).clamp(4, MAX_FRAMES) as usize;
        let css = (0..num_cs)
            .map(|id| DexCs {
                id,
                st: Mutex::new(Cache::new(frames, dcfg.seed ^ (id as u64) << 32)),
                cost: Mutex::new(CostModel::new(&dcfg, dcfg.seed.wrapping_add(id as u64))),
                frozen: AtomicBool::new(false),
                active: AtomicU32::new(0),
                offloads: AtomicU64::new(0),
                fallbacks: AtomicU64::new(0),
                fetches: AtomicU64::new(0),
                forwarded: AtomicU64::new(0),
                repartitions: AtomicU64::new(0),
                repartition_ns: AtomicU64::new(0),
                last_ns: AtomicU64::new(0),
                serve_from_ns: AtomicU64::new(0),
            })
            .collect();
        Ok(Arc::new(DexCluster {
            bounds: RwLock::new(dcfg.bounds.clone()),
            bounds_epoch: AtomicU64::new(0),
            cfg: dcfg,
            tcfg,
            css,
        }))
    }

    /// The CS owning `key` under the current bounds.
    pub fn owner(&self, key: &[u8]) -> u16 {
        let b = self.bounds.read().unwrap_or_else(|e| e.into_inner());
        b.partition_point(|x| x.as_slice() <= key) as u16
    }

    /// The current partition bounds.
    pub fn bounds(&self) -> Vec<Vec<u8>> {
        self.bounds
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Number of CSs.
    pub fn num_cs(&self) -> u16 {
        self.css.len() as u16
    }

    /// The DEX configuration (bounds as created; see [`DexCluster::bounds`]).
    pub fn config(&self) -> &DexConfig {
        &self.cfg
    }

    /// The tree configuration every handle uses.
    pub fn tree_config(&self) -> TreeConfig {
        self.tcfg
    }

    /// Counters of CS `cs`.
    pub fn stats(&self, cs: u16) -> DexStats {
        let c = &self.css[cs as usize];
        let (avg_read_ns, avg_offload_ns) =
            c.cost.lock().unwrap_or_else(|e| e.into_inner()).averages();
        DexStats {
            cache: c
                .st
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .counters
                .clone(),
            offloads: c.offloads.load(SeqCst),
            offload_fallbacks: c.fallbacks.load(SeqCst),
            fetches: c.fetches.load(SeqCst),
            forwarded: c.forwarded.load(SeqCst),
            repartitions: c.repartitions.load(SeqCst),
            repartition_ns: c.repartition_ns.load(SeqCst),
            avg_read_ns,
            avg_offload_ns,
        }
    }

    /// Cache frames in use and dirty frames of CS `cs`.
    pub fn cache_frames(&self, cs: u16) -> (usize, usize) {
        let st = self.css[cs as usize]
            .st
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        (
            st.frames.len(),
            st.frames.iter().filter(|(_, f)| f.dirty).count(),
        )
    }
}

/// Leaves a CS's partition when dropped (cancel-safe).
pub(crate) struct Entered<'a>(&'a DexCs);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, SeqCst);
    }
}

/// One core's handle on a DEX tree.
pub struct DexTree {
    pub(crate) t: FgTree,
    pub(crate) cs: u16,
    pub(crate) cl: Arc<DexCluster>,
    /// This handle's copy of the partition bounds ([`range::BoundsCopy`]).
    bounds: RefCell<range::BoundsCopy>,
    /// Lease mode ([`DexTree::with_member`]): the member's lease, ns.
    pub(crate) lease_ns: Option<u64>,
    /// Lease mode: this handle saw its CS's predecessor waited out.
    served: std::cell::Cell<bool>,
}

impl DexTree {
    /// A handle for core `core` of CS `cs` (no verbs); `cs` must be below
    /// the cluster's CS count.
    pub fn open(cl: Arc<DexCluster>, cs: u16, core: u16) -> Result<Self, TreeError> {
        if cs >= cl.num_cs() || !cl.cfg.local_cs.contains(&cs) {
            return Err(TreeError::BadConfig(format!(
                "CS {cs} of a {}-CS cluster whose local CSs are {:?}",
                cl.num_cs(),
                cl.cfg.local_cs
            )));
        }
        Ok(DexTree {
            t: FgTree::open(cl.tcfg, cs, core)?,
            cs,
            cl,
            bounds: RefCell::new(range::BoundsCopy::none()),
            lease_ns: None,
            served: std::cell::Cell::new(false),
        })
    }

    /// [`DexCluster::owner`] from this handle's copy of the bounds, taken
    /// again when the bounds epoch moved: one atomic load per call instead
    /// of a read lock of the shared bounds (two atomic read-modify-writes).
    /// A copy that is stale because a repartition is under way names an
    /// owner that is frozen, which `enter` waits out.
    fn owner(&self, key: &[u8]) -> u16 {
        self.with_bounds(|b| b.keys.partition_point(|x| cmp_keys(x, key).is_le()) as u16)
    }

    /// `f` of this handle's copy of the bounds, taken again first if the
    /// bounds epoch moved. `f` must not reach the copy again (it is
    /// borrowed while `f` runs); no `await` can happen inside it.
    pub(super) fn with_bounds<R>(&self, f: impl FnOnce(&range::BoundsCopy) -> R) -> R {
        let epoch = self.cl.bounds_epoch.load(SeqCst);
        let mut b = self.bounds.borrow_mut();
        if b.epoch != epoch {
            *b = range::BoundsCopy::new(epoch, self.cl.bounds(), self.cl.num_cs());
        }
        f(&b)
    }

    /// Creates an empty tree (one empty leaf per partition) and returns this
    /// core's handle.
    pub async fn create(cl: Arc<DexCluster>, cs: u16, core: u16) -> Result<Self, TreeError> {
        Self::bulk_load::<Vec<u8>>(cl, cs, core, &[], 0.8).await
    }

    /// Counts the node-lock events of this handle's B-link tree (FG+ lock
    /// words) into `c`, one per index shared by its handles
    /// ([`FgTree::with_lock_counters`]).
    pub fn with_lock_counters(mut self, c: Arc<dm_runtime::lock::LockCounters>) -> Self {
        self.t = self.t.with_lock_counters(c);
        self
    }

    /// Lease mode (issue 33; not in the paper, whose CSs never fail): joins
    /// this handle's B-link node locks to its CS's membership `m`
    /// ([`FgTree::with_member`]) and makes the CS's cache one that a crash
    /// loses nothing from (the module docs, "A compute server that dies").
    /// Every handle of a CS joins, or none. Errors: as
    /// [`FgTree::with_member`].
    pub fn with_member(mut self, m: Arc<dm_runtime::lock::Member>) -> Result<Self, TreeError> {
        self.lease_ns = Some(m.lease().lease_ns);
        self.t = self.t.with_member(m)?;
        Ok(self)
    }

    /// Counts the bytes this handle's B-link tree carves into `c`
    /// ([`FgTree::with_carved_counter`]).
    pub fn with_carved_counter(mut self, c: Arc<AtomicU64>) -> Self {
        self.t = self.t.with_carved_counter(c);
        self
    }

    /// The FG B-link tree underneath (for whole-tree checks after [`DexTree::flush`]).
    pub fn fg(&self) -> &FgTree {
        &self.t
    }

    /// The cluster this handle belongs to.
    pub fn cluster(&self) -> &Arc<DexCluster> {
        &self.cl
    }

    /// Enters the partition owning `key`: waits out a repartition, returns the
    /// owner's state and a guard. `NotOwner` if another CS owns it and
    /// forwarding is off or that CS is not local ([`DexConfig::local_cs`]).
    pub(crate) async fn enter(&self, key: &[u8]) -> Result<(&DexCs, Entered<'_>), TreeError> {
        if let Some(lease) = self.lease_ns.filter(|_| !self.served.get()) {
            self.wait_out_predecessor(lease).await;
            self.served.set(true);
        }
        loop {
            // A repartition freezes the CS, changes the bounds, bumps the
            // epoch and only then thaws it; so if the CS is not frozen once
            // this one is counted active and the epoch has not moved since
            // before `owner` read the bounds, the owner still holds (and no
            // repartition starts until this one leaves: it waits for
            // `active` to drain), without reading the bounds twice.
            let epoch = self.cl.bounds_epoch.load(SeqCst);
            let o = self.owner(key);
            if o != self.cs && !(self.cl.cfg.forward && self.cl.cfg.local_cs.contains(&o)) {
                return Err(TreeError::NotOwner(o));
            }
            let c = &self.cl.css[o as usize];
            if !c.frozen.load(SeqCst) {
                c.active.fetch_add(1, SeqCst);
                let g = Entered(c);
                if !c.frozen.load(SeqCst) && self.cl.bounds_epoch.load(SeqCst) == epoch {
                    if o != self.cs {
                        c.forwarded.fetch_add(1, SeqCst);
                    }
                    return Ok((c, g));
                }
                drop(g);
            }
            yield_now().await;
        }
    }

    /// Lease mode: the CS serves nothing before one lease has passed since
    /// its first operation (after its join), so that every WRITE a dead
    /// predecessor incarnation posted, and every operation it offloaded,
    /// has taken effect before this one reads the leaves it may overwrite
    /// (the lease bounds a dead CS's work in flight as it bounds a stalled
    /// holder, `dm_runtime::lock::member`).
    async fn wait_out_predecessor(&self, lease: u64) {
        let c = &self.cl.css[self.cs as usize];
        let mut at = c.serve_from_ns.load(SeqCst);
        if at == 0 {
            let mine = dm_runtime::now_ns().saturating_add(lease).max(1);
            at = match c.serve_from_ns.compare_exchange(0, mine, SeqCst, SeqCst) {
                Ok(_) => mine,
                Err(x) => x,
            };
        }
        if dm_runtime::now_ns() < at {
            dm_runtime::yield_until(at).await;
        }
    }

    /// Writes every dirty cached leaf of every CS back to the pool (one
    /// WRITE per page; pages stay cached, clean). Returns the pages written.
    /// After it (and with no operation running) the pool holds the whole
    /// tree, e.g. for [`FgTree`]'s scans and checks.
    pub async fn flush(&self) -> Result<u64, TreeError> {
        let mut n = 0;
        for c in &self.cl.css {
            n += self.flush_cs(c).await?;
        }
        Ok(n)
    }
}

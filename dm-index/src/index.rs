//! One index in this process ([`Instance`]: its resolved configuration,
//! the state its cores share per compute server, its statistics) and a
//! core's handle on it ([`Index`]: the one async index API).

use crate::config::{IndexConfig, Plan, Root, Site};
use crate::error::Error;
use crate::kind::{Family, KeyRule};
use crate::stats::{Counters, IndexStats, Op};
use dm_art::dolphin::DolphinCounters;
use dm_art::{ArtCache, DolphinCache, DolphinTree, Rdwc, SmartTree};
use dm_runtime::lock::{LeaseConfig, LockCounters, Member};
use dm_runtime::sync::LocalLockTable;
use dm_runtime::ScanBuf;
use dm_tree::{DexTree, FgTree, IndexCache};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The state the cores of one compute server share for one index (SMART
/// §4.2's read-delegation/write-combining table, HOCL's local lock table,
/// the index cache).
#[derive(Default)]
pub(crate) struct CsState {
    pub(crate) tree_cache: Option<Arc<IndexCache>>,
    pub(crate) art_cache: Option<Arc<ArtCache>>,
    pub(crate) dolphin_cache: Option<Arc<DolphinCache>>,
    pub(crate) rdwc: Option<Arc<Rdwc>>,
    pub(crate) llt: Option<Arc<LocalLockTable>>,
    /// The CS's membership once [`Instance::join`] ran (issue 33).
    pub(crate) member: std::sync::OnceLock<Arc<Member>>,
}

/// One index as this process sees it: the configuration resolved against
/// the cluster, each local compute server's shared state, the counters.
/// `Send + Sync`; its cores' handles ([`Index`]) are not.
pub struct Instance {
    /// Process-unique (the core threads key their handles by it).
    id: u64,
    name: String,
    cfg: IndexConfig,
    pub(crate) plan: Plan,
    pub(crate) site: Site,
    /// Per local CS, indexed by `cs - site.local_cs.start`.
    pub(crate) cs: Vec<CsState>,
    counters: Counters,
    /// The lock counters every core's handle of this index counts into
    /// ([`IndexStats::locks`]).
    locks: Arc<LockCounters>,
    /// Dolphin's counters, shared likewise ([`IndexStats::dolphin`]; zero
    /// for the other kinds).
    dolphin: Arc<DolphinCounters>,
    /// Bytes the handles carved from MS chunks ([`IndexStats::bytes_carved`]).
    carved: Arc<AtomicU64>,
}

impl Instance {
    /// `cfg` resolved for `site` with its root words at `root`, with
    /// counters for `cores` cores. [`crate::Cluster`] does this for a
    /// service; a tool that drives its own executors (`dm-bench` on its
    /// deterministic sim) calls it, creates the index with
    /// [`Instance::create_root`] from one core and opens each core's handle
    /// with [`Instance::open`]. Errors: `BadConfig` (key width, node size,
    /// DEX bounds).
    pub fn new(
        name: &str,
        cfg: IndexConfig,
        site: Site,
        root: Root,
        cores: usize,
    ) -> Result<Self, Error> {
        let plan = cfg.resolve(&site, root)?;
        let cs = site
            .local_cs
            .clone()
            .map(|cs| cs_state(&cfg, &plan, cs))
            .collect();
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Ok(Instance {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            cfg,
            plan,
            site,
            cs,
            counters: Counters::new(cores),
            locks: Arc::default(),
            dolphin: Arc::default(),
            carved: Arc::default(),
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The index's name in the catalog.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its configuration.
    pub fn config(&self) -> &IndexConfig {
        &self.cfg
    }

    /// Creates the empty index (its root, lock tables, NAM partitions) from
    /// core `core` of compute server `cs`; run once per index, inside a
    /// dm-runtime task, before any [`Instance::open`] handle operates.
    pub async fn create_root(&self, cs: u16, core: u16) -> Result<(), Error> {
        match &self.plan {
            Plan::BTree(c) => FgTree::create(*c, cs, core).await.map(drop)?,
            Plan::Dex(cl) => DexTree::create(cl.clone(), cs, core).await.map(drop)?,
            Plan::Radix(c) => SmartTree::create(*c, cs, core).await.map(drop)?,
            Plan::Dolphin(c) => DolphinTree::create(*c, cs, core).await.map(drop)?,
        }
        Ok(())
    }

    /// Registers local compute server `cs` on the memory servers with a new
    /// incarnation and lease `lease` (issue 33, `dm_runtime::lock::member`),
    /// so that the handles [`Instance::open`] gives for `cs` from now on
    /// name it in their lock words and take over dead members' locks (the
    /// B+tree family and the ART baseline's locks; SMART's rear lock and
    /// the 16-bit lanes of `sherman-onchip` under HOCL are covered as
    /// `dm_runtime::lock` says; Dolphin and DEX switch to their lease
    /// modes, `dm_art::DolphinTree::with_member`,
    /// `dm_tree::DexTree::with_member`: DEX then writes every leaf change
    /// through, so a dead CS's partition loses nothing acknowledged).
    /// Run inside a dm-runtime task, once per CS, before opening its
    /// handles; then run [`Member::heartbeat`] as a task on one of the CS's
    /// cores (every CS of an index joins, or none). Errors: a verb's,
    /// `BadConfig` if `cs` is not local or already joined.
    pub async fn join(&self, cs: u16, lease: LeaseConfig) -> Result<Arc<Member>, Error> {
        let st = self.local_state(cs)?;
        if st.member.get().is_some() {
            return Err(Error::BadConfig(format!("CS {cs} already joined")));
        }
        let m = Member::join(cs, lease, self.site.chunk_bytes).await?;
        st.member
            .set(m.clone())
            .map_err(|_| Error::BadConfig(format!("CS {cs} already joined")))?;
        Ok(m)
    }

    /// Gives this instance member `m` of one of its local CSs, registered
    /// elsewhere (a cluster's members are shared by all its indexes).
    /// Errors: `BadConfig` if the CS is not local or already has one.
    pub(crate) fn adopt_member(&self, m: Arc<Member>) -> Result<(), Error> {
        let cs = m.cs();
        self.local_state(cs)?
            .member
            .set(m)
            .map_err(|_| Error::BadConfig(format!("CS {cs} already joined")))
    }

    /// CS `cs`'s membership, if it joined ([`Instance::join`]).
    pub fn member(&self, cs: u16) -> Option<Arc<Member>> {
        self.cs_state(cs)?.member.get().cloned()
    }

    /// The shared state of local CS `cs`, or why there is none.
    fn local_state(&self, cs: u16) -> Result<&CsState, Error> {
        self.cs_state(cs).ok_or_else(|| {
            Error::BadConfig(format!(
                "CS {cs} is not one of this process's compute servers {:?}",
                self.site.local_cs
            ))
        })
    }

    /// Core `core` of compute server `cs`'s handle, counting into shard
    /// `shard` (one per core of the process). No verbs. `(cs, core)` must
    /// be unique among the handles that operate at a time (it is the lock
    /// holder's identity, `dm_runtime::lock`) and `cs` one of this
    /// process's compute servers. Every handle counts its lock events into
    /// the index's one [`LockCounters`] (and Dolphin's into its one
    /// [`DolphinCounters`]) and the bytes it carves into the index's count,
    /// so [`Instance::stats`] reports this index's locks and memory alone.
    pub fn open(self: &Arc<Self>, cs: u16, core: u16, shard: usize) -> Result<Index, Error> {
        let st = self.local_state(cs)?;
        let member = st.member.get().cloned();
        let tree = match &self.plan {
            Plan::BTree(c) => {
                let mut t = FgTree::open(*c, cs, core)?
                    .with_lock_counters(self.locks.clone())
                    .with_carved_counter(self.carved.clone());
                if let Some(l) = &st.llt {
                    t = t.with_local_locks(l.clone());
                }
                if let Some(c) = &st.tree_cache {
                    t = t.with_cache(c.clone());
                }
                if let Some(m) = member {
                    t = t.with_member(m)?;
                }
                Handle::BTree(t)
            }
            Plan::Dex(cl) => {
                let mut t = DexTree::open(cl.clone(), cs, core)?
                    .with_lock_counters(self.locks.clone())
                    .with_carved_counter(self.carved.clone());
                if let Some(m) = member {
                    t = t.with_member(m)?;
                }
                Handle::Dex(t)
            }
            Plan::Radix(c) => {
                let mut t = SmartTree::open(*c, cs, core)?
                    .with_lock_counters(self.locks.clone())
                    .with_carved_counter(self.carved.clone());
                if let Some(l) = &st.llt {
                    t = t.with_local_locks(l.clone());
                }
                if let Some(r) = &st.rdwc {
                    t = t.with_rdwc(r.clone());
                }
                if let Some(c) = &st.art_cache {
                    t = t.with_cache(c.clone());
                }
                if let Some(m) = member {
                    t = t.with_member(m)?;
                }
                Handle::Radix(t)
            }
            Plan::Dolphin(c) => {
                let mut t = DolphinTree::open(*c, cs, core)?
                    .with_lock_counters(self.locks.clone())
                    .with_counters(self.dolphin.clone())
                    .with_carved_counter(self.carved.clone());
                if let Some(c) = &st.dolphin_cache {
                    t = t.with_cache(c.clone());
                }
                if let Some(m) = member {
                    t = t.with_member(m)?;
                }
                Handle::Dolphin(t)
            }
        };
        Ok(Index {
            tree,
            width: self.cfg.key_bytes,
            inst: self.clone(),
            shard: self.counters.shard_of(shard),
        })
    }

    /// DEX: the compute server whose partition holds `key` (§4); `None`
    /// for the other indexes, which any core serves.
    pub fn owner(&self, key: &[u8]) -> Option<u16> {
        match &self.plan {
            Plan::Dex(cl) => Some(cl.owner(key)),
            _ => None,
        }
    }

    /// The lock counters this index's handles count into (for a tool that
    /// opens family handles itself: attach them with the family's
    /// `with_lock_counters`).
    pub fn lock_counters(&self) -> &Arc<LockCounters> {
        &self.locks
    }

    /// What the index did in this process so far: operations, verbs, its
    /// caches (summed over the local compute servers), its locks.
    pub fn stats(&self) -> IndexStats {
        let mut s = self.counters.sum();
        s.locks = self.locks.snapshot();
        s.dolphin = self.dolphin.snapshot();
        s.bytes_carved = self.carved.load(Ordering::Relaxed);
        for (i, st) in self.cs.iter().enumerate() {
            let (h, m, b) = if let Some(c) = &st.tree_cache {
                let c = c.stats();
                (c.hits, c.misses, c.bytes)
            } else if let Some(c) = &st.art_cache {
                let c = c.stats();
                (c.hits, c.misses, c.bytes)
            } else if let Some(c) = &st.dolphin_cache {
                let c = c.stats();
                (
                    c.art.hits + c.special_hits,
                    c.art.misses + c.special_misses,
                    c.bytes,
                )
            } else if let Plan::Dex(cl) = &self.plan {
                let c = cl.stats(self.site.local_cs.start + i as u16).cache;
                (c.hits, c.misses, 0)
            } else {
                (0, 0, 0)
            };
            s.cache_hits += h;
            s.cache_misses += m;
            s.cache_bytes += b;
        }
        s
    }
}

/// A compute server's shared state for `cfg` (as `dm-bench ycsb` builds
/// it: the NAM designs run without a CS cache, Ziegler et al. App. A.4;
/// read delegation and write combining only for SMART itself).
/// CS `cs`'s shared state: `cfg` with the CS's [`crate::CsOverride`].
fn cs_state(cfg: &IndexConfig, plan: &Plan, cs: u16) -> CsState {
    let o = cfg.cs_override(cs);
    let cache = o.cache_bytes.unwrap_or(cfg.cache_bytes);
    let mut st = CsState::default();
    match plan {
        Plan::BTree(t) => {
            st.llt = Some(FgTree::new_local_lock_table(t));
            if cache > 0 && t.design == dm_tree::Design::Fine {
                st.tree_cache = Some(Arc::new(IndexCache::new(cache, t.node_bytes)));
            }
        }
        Plan::Dex(_) => {}
        Plan::Radix(_) => {
            let smart = cfg.kind == crate::IndexKind::Smart;
            let (rd, wc) = (
                o.read_delegation.or(cfg.read_delegation).unwrap_or(smart),
                o.write_combining.or(cfg.write_combining).unwrap_or(smart),
            );
            let queue = o
                .queue_same_key_writers
                .unwrap_or_else(|| cfg.queues_without_combining(wc));
            let entries = o.rdwc_entries.unwrap_or(cfg.rdwc_entries);
            let absorb = o.absorb_writers.unwrap_or(cfg.art_absorb_writers);
            let r = Rdwc::new(entries, rd, wc)
                .queue_writers(queue)
                .absorb_writers(absorb);
            st.rdwc = Some(Arc::new(r));
            st.llt = Some(SmartTree::new_local_lock_table());
            if cache > 0 {
                let k = ArtCache::new(cache as usize)
                    .with_fifo_hold_ns(cfg.art_fifo_hold_ns)
                    .with_stale_hints_dropped(cfg.art_drop_stale_hints);
                st.art_cache = Some(Arc::new(k));
            }
        }
        Plan::Dolphin(_) => {
            if cache > 0 {
                st.dolphin_cache = Some(Arc::new(DolphinCache::new(cache as usize)));
            }
        }
    }
    st
}

/// A core's handle on one index: the workspace's one async index API.
/// Operations run inside a dm-runtime task on the core that opened the
/// handle (verb futures belong to their core); it is `!Send`. Keys are
/// `&[u8]` of exactly the index's width ([`crate::KeyRule`]); values `u64`.
/// Every operation is linearizable (each paper's protocol, made sound
/// under torn READs; see the crates' docs).
pub struct Index {
    tree: Handle,
    width: usize,
    inst: Arc<Instance>,
    /// The counter shard this handle records into, reduced at `open`.
    shard: usize,
}

/// A core's handle of the index's own family, for what the one API does
/// not cover (bulk loading, head nodes, DEX's repartitioning, family
/// statistics): [`Index::handle`].
pub enum Handle {
    /// FG+, the Sherman rungs, the NAM designs.
    BTree(FgTree),
    Dex(DexTree),
    /// SMART and its ladder down to ART.
    Radix(SmartTree),
    Dolphin(DolphinTree),
}

/// Dispatches `$call` to the family's handle (each family's method of the
/// same name and signature) and maps its error.
macro_rules! each {
    ($self:ident, $t:ident => $call:expr) => {
        match &$self.tree {
            Handle::BTree($t) => $call.await.map_err(Error::from),
            Handle::Dex($t) => $call.await.map_err(Error::from),
            Handle::Radix($t) => $call.await.map_err(Error::from),
            Handle::Dolphin($t) => $call.await.map_err(Error::from),
        }
    };
}

impl Index {
    /// The family's own handle.
    pub fn handle(&self) -> &Handle {
        &self.tree
    }

    /// The instance this handle belongs to.
    pub fn instance(&self) -> &Arc<Instance> {
        &self.inst
    }

    /// `Err(KeyLength)` unless `key` has the index's width.
    fn check(&self, key: &[u8]) -> Result<(), Error> {
        KeyRule::exact(self.width).check_key(key)
    }

    /// Counts one finished operation and the verbs its task posted since
    /// `before`.
    fn count<T>(&self, op: Op, before: &dm_verbs::VerbStats, r: &Result<T, Error>) {
        let after = dm_runtime::task_stats();
        (self.inst.counters).record(self.shard, op, r.is_err(), before, &after);
    }

    /// The value of `key`, if present.
    pub async fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        self.check(key)?;
        let before = dm_runtime::task_stats();
        let r = each!(self, t => t.get(key));
        self.count(Op::Get, &before, &r);
        r
    }

    /// Sets `key` to `value`, inserting it if absent (upsert).
    pub async fn insert(&self, key: &[u8], value: u64) -> Result<(), Error> {
        self.check(key)?;
        let before = dm_runtime::task_stats();
        let r = each!(self, t => t.insert(key, value));
        self.count(Op::Insert, &before, &r);
        r
    }

    /// Sets `key` to `value` if present; `Ok(false)` (nothing written) if not.
    pub async fn update(&self, key: &[u8], value: u64) -> Result<bool, Error> {
        self.check(key)?;
        let before = dm_runtime::task_stats();
        let r = each!(self, t => t.update(key, value));
        self.count(Op::Update, &before, &r);
        r
    }

    /// Removes `key`; `Ok(false)` if it was absent.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, Error> {
        self.check(key)?;
        let before = dm_runtime::task_stats();
        let r = each!(self, t => t.remove(key));
        self.count(Op::Remove, &before, &r);
        r
    }

    /// Up to `n` entries with key >= `from`, in key order: one allocation
    /// per key ([`Index::scan_into`] makes none).
    pub async fn scan(&self, from: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, Error> {
        let mut out = ScanBuf::new();
        self.scan_into(from, n, &mut out).await?;
        Ok(out.to_entries())
    }

    /// Clears `out` and fills it with up to `n` entries with key >= `from`,
    /// in key order. A buffer reused across scans allocates only when a scan
    /// returns more than any before it (issue 32). Errors as
    /// [`Index::scan`]; on one, `out` holds what was found before it.
    pub async fn scan_into(&self, from: &[u8], n: usize, out: &mut ScanBuf) -> Result<(), Error> {
        self.check(from)?;
        let before = dm_runtime::task_stats();
        let r = each!(self, t => t.scan_into(from, n, out));
        self.count(Op::Scan, &before, &r);
        r
    }

    /// Up to `limit` entries with `lo <= key < hi`, in key order: scans of
    /// at most [`RANGE_BATCH`] entries from `lo` until a key reaches `hi`.
    pub async fn range(
        &self,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, u64)>, Error> {
        self.check(lo)?;
        self.check(hi)?;
        let mut out = Vec::new();
        let mut from = lo.to_vec();
        while out.len() < limit && from.as_slice() < hi {
            let want = (limit - out.len()).min(RANGE_BATCH);
            let batch = self.scan(&from, want).await?;
            let full = batch.len() == want;
            for (k, v) in batch {
                if k.as_slice() >= hi {
                    return Ok(out);
                }
                from.clone_from(&k);
                out.push((k, v));
            }
            if !full || !successor(&mut from) {
                break;
            }
        }
        Ok(out)
    }
}

/// Entries one scan of [`Index::range`] asks for.
pub const RANGE_BATCH: usize = 256;

/// The next fixed-width key after `k` (big-endian increment); false if `k`
/// is the largest.
fn successor(k: &mut [u8]) -> bool {
    for b in k.iter_mut().rev() {
        if *b == 0xff {
            *b = 0;
        } else {
            *b += 1;
            return true;
        }
    }
    false
}

// The family a handle serves, for the client's routing.
impl Index {
    /// The family of the index.
    pub fn family(&self) -> Family {
        self.inst.cfg.kind.family()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn successor_carries() {
        let mut k = [0u8, 0xff, 0xff];
        assert!(super::successor(&mut k));
        assert_eq!(k, [1, 0, 0]);
        let mut k = [0xffu8; 2];
        assert!(!super::successor(&mut k));
    }
}

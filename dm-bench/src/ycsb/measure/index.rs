//! Index creation and each core's handle: the per-CS state the cores of a
//! CS share ([`Indexes`]: the index cache — B+tree leaf parents and top
//! levels, SMART's ART cache, Dolphin's cache — the local lock tables, and
//! SMART's read delegation / write combining tables, SMART §4.2.1), the
//! index created from client 0's first core ([`Bench::create`]), and a
//! core's handle opened with its CS's state ([`Bench::open`]).

use super::cluster::Cluster;
use super::options::Choice;
use super::Bench;
use crate::kv::AnyIndex;
use crate::ycsb::Args;
use dm_art::{ArtCache, DolphinCache, DolphinTree, Rdwc, SmartTree};
use dm_runtime::sync::LocalLockTable;
use dm_tree::{DexTree, FgTree, IndexCache};
use std::future::Future;
use std::sync::Arc;

/// Each CS's state, shared by its cores (index `cs`).
pub(super) struct Indexes {
    pub caches: Vec<Arc<IndexCache>>,
    pub art_caches: Vec<Arc<ArtCache>>,
    pub dolphin_caches: Vec<Arc<DolphinCache>>,
    pub rdwcs: Vec<Arc<Rdwc>>,
    /// SMART: same-key writers of a CS queue in its local lock table.
    pub write_queue: bool,
    llts: Vec<Arc<LocalLockTable>>,
}

impl Indexes {
    pub(super) fn new(a: &Args, c: &Choice, cl: &Cluster) -> Self {
        let (smart, art_techniques, tcfg) = (c.smart, c.art_techniques, cl.tcfg);
        let caches: Vec<Arc<IndexCache>> = (0..a.cs)
            .map(|_| Arc::new(IndexCache::new(a.cache_mb << 20, a.node_bytes)))
            .collect();
        let art_caches: Vec<Arc<ArtCache>> = (0..a.cs)
            .map(|_| Arc::new(ArtCache::new((a.cache_mb << 20) as usize)))
            .collect();
        let dolphin_caches: Vec<Arc<DolphinCache>> = (0..a.cs)
            .map(|_| Arc::new(DolphinCache::new((a.cache_mb << 20) as usize)))
            .collect();
        let off = |t: &str| a.smart_off.iter().any(|x| x == t);
        // Without combining, same-key writers of a CS still queue in the local
        // lock table (HOCL's, which SMART §5.1.3 gives every baseline): in front
        // of the rear lock (E-HOCL, §5.3.1, Fig. 19) and of RCU leaf writes.
        // Lock-table-locked leaves queue in HOCL's own local table instead.
        let write_queue = off("wc") && (art_techniques.rear_lock || !art_techniques.in_place_leaf);
        let rdwcs: Vec<Arc<Rdwc>> = (0..a.cs)
            .map(|_| {
                let t = Rdwc::new(a.rdwc_entries, !off("rd"), !off("wc"));
                Arc::new(t.queue_writers(write_queue))
            })
            .collect();
        let llts: Vec<_> = (0..a.cs)
            .map(|_| {
                if smart {
                    SmartTree::new_local_lock_table()
                } else {
                    FgTree::new_local_lock_table(&tcfg)
                }
            })
            .collect();
        Indexes {
            caches,
            art_caches,
            dolphin_caches,
            rdwcs,
            write_queue,
            llts,
        }
    }
}

impl Bench {
    /// Creates the index (from client 0's first core).
    pub(super) fn create(&self) -> impl Future<Output = Result<(), String>> + 'static {
        let dexc = self.cl.dexcl.clone();
        let (dolphin, smart) = (self.c.dolphin, self.c.smart);
        let (tcfg, scfg, dcfg) = (self.cl.tcfg, self.cl.scfg, self.cl.dcfg);
        async move {
            if let Some(cl) = dexc {
                return DexTree::create(cl, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string());
            }
            if dolphin {
                return DolphinTree::create(dcfg, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string());
            }
            if smart {
                SmartTree::create(scfg, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            } else {
                FgTree::create(tcfg, 0, 0)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Core `t` of CS `cs` of this process: its handle on the index.
    pub(super) fn open(&self, cs: u16, t: u16) -> AnyIndex {
        let (a, ci, dexcl) = (&self.a, self.c.ci, &self.cl.dexcl);
        let (dolphin, smart) = (self.c.dolphin, self.c.smart);
        let (tcfg, scfg, dcfg) = (self.cl.tcfg, self.cl.scfg, self.cl.dcfg);
        let Indexes {
            caches,
            art_caches,
            dolphin_caches,
            rdwcs,
            llts,
            ..
        } = &self.ix;
        let id = (ci * a.cs as usize) as u16 + cs;
        if let Some(cl) = &dexcl {
            return AnyIndex::Dex(DexTree::open(cl.clone(), id, t).unwrap());
        }
        if dolphin {
            let tree = DolphinTree::open(dcfg, id, t).unwrap();
            return AnyIndex::Dolphin(if a.cache_mb > 0 {
                tree.with_cache(dolphin_caches[cs as usize].clone())
            } else {
                tree
            });
        }
        if smart {
            let tree = SmartTree::open(scfg, id, t)
                .unwrap()
                .with_local_locks(llts[cs as usize].clone())
                .with_rdwc(rdwcs[cs as usize].clone());
            return AnyIndex::Smart(if a.cache_mb > 0 {
                tree.with_cache(art_caches[cs as usize].clone())
            } else {
                tree
            });
        }
        let tree = FgTree::open(tcfg, id, t)
            .unwrap()
            .with_local_locks(llts[cs as usize].clone());
        AnyIndex::Tree(if a.cache_mb > 0 {
            tree.with_cache(caches[cs as usize].clone())
        } else {
            tree
        })
    }
}

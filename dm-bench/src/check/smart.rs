//! `dm-bench check --index smart` and the ART ladder's rungs (`art`, ...):
//! the radix tree with per-CS state that goes stale and conflicts often
//! ([`SmartPerCs`]), on sim and on a real fabric.

use super::args::Args;
use super::history::Event;
use super::real::{run_clients, Proc};
use super::sim::{finish_seed, spawn_sim_clients};
use anyhow::{anyhow, Result};
use dm_art::{ArtCache, Rdwc, SmartConfig, SmartTree};
use dm_runtime::{Executor, SimCore, SimRuntime};
use dm_tree::LockTableConfig;
use dm_verbs::Fabric;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// SMART's per-CS state for the two CSs of a check (sim and real fabrics
/// alike): an ART cache (§4.3), roomy on the first CS and too small for the
/// tree on the second (misses and evictions), each going stale behind the
/// other's splits; read delegation and write combining (§4.2) with 16 lock
/// entries for the 48 keys, so same-key groups and hash conflicts both happen
/// (the second CS queues same-key writers without combining, E-HOCL);
/// the local lock tables of the ladder's lock-table locks (`dm_art::baseline`).
struct SmartPerCs {
    caches: [Arc<ArtCache>; 2],
    rdwcs: [Arc<Rdwc>; 2],
    llts: [Arc<dm_runtime::sync::LocalLockTable>; 2],
}

impl SmartPerCs {
    fn new() -> Self {
        SmartPerCs {
            caches: [
                Arc::new(ArtCache::new(64 << 20)),
                Arc::new(ArtCache::new(4 << 10)),
            ],
            rdwcs: [
                Arc::new(Rdwc::new(16, true, true)),
                // E-HOCL: same-key writers queue, each writes its own value.
                Arc::new(Rdwc::new(16, true, false).queue_writers(true)),
            ],
            llts: [
                SmartTree::new_local_lock_table(),
                SmartTree::new_local_lock_table(),
            ],
        }
    }

    /// The handle of core `core` of CS `cs`, the `k`-th (0 or 1) CS of the check.
    fn open(&self, scfg: SmartConfig, cs: u16, core: u16, k: usize) -> SmartTree {
        SmartTree::open(scfg, cs, core)
            .expect("the configuration was checked")
            .with_local_locks(self.llts[k].clone())
            .with_cache(self.caches[k].clone())
            .with_rdwc(self.rdwcs[k].clone())
    }
}

/// The radix tree of a check: rung `techniques`, its locks (if any) in
/// the check's deliberately tiny lock table.
pub(super) fn smart_config(
    chunk_bytes: u64,
    num_ms: u16,
    techniques: dm_art::Techniques,
    lock_table: LockTableConfig,
) -> SmartConfig {
    SmartConfig {
        chunk_bytes,
        num_ms,
        techniques,
        lock_table,
        ..Default::default()
    }
}

/// One sim seed (the caller made the runtime, its cores and the tree
/// configuration, and registered the handlers).
pub(super) fn run_seed(
    a: &Rc<Args>,
    seed: u64,
    mut rt: SimRuntime,
    cores: &[SimCore],
    scfg: SmartConfig,
) -> Result<Vec<Event>> {
    let log = Rc::new(RefCell::new(Vec::new()));
    rt.block_on(cores[0], SmartTree::create(scfg, 0, 0))
        .unwrap()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let per_cs = SmartPerCs::new();
    let trees: Vec<_> = (0..cores.len())
        .map(|i| Rc::new(per_cs.open(scfg, (i % 2) as u16, (i / 2) as u16, i % 2)))
        .collect();
    let hs = spawn_sim_clients(&mut rt, cores, &trees, a, seed, &log);
    rt.run();
    finish_seed(seed, &hs, &log)
}

/// One seed on a real fabric: process 0 creates the tree, every process
/// runs its clients over its two CSs, each CS with its [`SmartPerCs`] state.
pub(super) fn run_seed_real<F: Fabric + Send + Sync>(
    fabric: &F,
    ex: &mut Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
    scfg: SmartConfig,
) -> Result<Vec<Event>> {
    SmartTree::open(scfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    let create = |ex: &mut Executor<F::Queues>| {
        ex.block_on(async move { SmartTree::create(scfg, 0, 0).await.map(|_| ()) })
            .map_err(|e| e.to_string())
    };
    let per_cs = SmartPerCs::new();
    run_clients(fabric, ex, a, seed, p, 0..a.keys, create, |cs, core| {
        per_cs.open(scfg, cs, core, cs as usize % 2)
    })
}

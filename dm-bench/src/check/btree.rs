//! `dm-bench check` on the B+tree family (`fg`, `sherman*`, `nam-coarse`,
//! `nam-hybrid`): per CS, an index cache of `--cache-nodes` leaf parents
//! (tiny, so lookups through stale and evicted copies are frequent) and a
//! local lock table. On sim, `--head-nodes N` adds a maintainer task on the
//! last core that installs, refreshes and unlinks head nodes (Ziegler et al.
//! §4-5) while the clients' scans cross them.

use super::args::Args;
use super::history::Event;
use super::real::{run_clients, Proc};
use super::sim::{finish_seed, spawn_sim_clients};
use anyhow::{anyhow, bail, Result};
use dm_runtime::JoinError;
use dm_runtime::{Executor, SimCore, SimRuntime};
use dm_tree::{FgTree, IndexCache, TreeConfig};
use dm_verbs::Fabric;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Head nodes installed, refreshed or unlinked by `--head-nodes` maintainers.
pub(super) static HEAD_CHANGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One sim seed (the caller made the runtime, its cores and the tree
/// configuration, and registered the handlers).
pub(super) fn run_seed(
    a: &Rc<Args>,
    seed: u64,
    mut rt: SimRuntime,
    cores: &[SimCore],
    tcfg: TreeConfig,
) -> Result<Vec<Event>> {
    let log = Rc::new(RefCell::new(Vec::new()));
    rt.block_on(cores[0], FgTree::create(tcfg, 0, 0))
        .unwrap()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    // Per CS: an index cache of `--cache-nodes` leaf parents and a local lock table.
    let caches: Vec<_> = (0..2)
        .map(|_| {
            Arc::new(IndexCache::new(
                a.cache_nodes.saturating_mul(a.node_bytes() as u64),
                a.node_bytes(),
            ))
        })
        .collect();
    let llts: Vec<_> = (0..2)
        .map(|_| FgTree::new_local_lock_table(&tcfg))
        .collect();
    let trees: Vec<_> = (0..cores.len())
        .map(|i| {
            let cs = i % 2;
            let mut t = FgTree::open(tcfg, cs as u16, (i / 2) as u16)
                .unwrap()
                .with_local_locks(llts[cs].clone());
            if a.cache_nodes > 0 {
                t = t.with_cache(caches[cs].clone());
            }
            Rc::new(t)
        })
        .collect();
    let hs = spawn_sim_clients(&mut rt, cores, &trees, a, seed, &log);
    let maint = spawn_head_maintainer(&mut rt, cores, &trees, a, &log);
    rt.run();
    if let Some(m) = maint {
        match m.try_take().map(|r| r.unwrap_or_else(JoinError::resume)) {
            Some(Ok(n)) => {
                HEAD_CHANGES.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
            Some(Err(e)) => bail!("seed {seed}: head-node maintenance failed: {e}"),
            None => bail!("seed {seed}: head-node maintenance never finished"),
        }
    }
    finish_seed(seed, &hs, &log)
}

/// `--head-nodes N`: a task on the last core that runs head-node passes with
/// groups of N, 2, N+1 leaves, over and over until the clients have logged
/// every operation; its result is the number of head-node changes.
fn spawn_head_maintainer(
    rt: &mut SimRuntime,
    cores: &[SimCore],
    trees: &[Rc<FgTree>],
    a: &Rc<Args>,
    log: &Rc<RefCell<Vec<Event>>>,
) -> Option<dm_runtime::JoinHandle<Result<u64, String>>> {
    (a.head_nodes > 0).then(|| {
        let t = trees[cores.len() - 1].clone();
        let total = a.clients as usize * a.ops as usize;
        let (n, log) = (a.head_nodes, log.clone());
        rt.spawn_on(cores[cores.len() - 1], async move {
            let mut changes = 0;
            for g in [n, 2, n.saturating_add(1)].into_iter().cycle() {
                if log.borrow().len() >= total {
                    break;
                }
                let p = t.maintain_head_nodes(g).await.map_err(|e| e.to_string())?;
                changes += p.installed + p.refreshed + p.removed;
                dm_runtime::yield_until(dm_runtime::now_ns() + 2_000).await;
            }
            Ok::<u64, String>(changes)
        })
    })
}

/// One seed on a real fabric: process 0 creates the tree, every process
/// runs its clients over its two CSs, each CS with its cache and local
/// lock table.
pub(super) fn run_seed_real<F: Fabric + Send + Sync>(
    fabric: &F,
    ex: &mut Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
    tcfg: TreeConfig,
) -> Result<Vec<Event>> {
    FgTree::open(tcfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    let create = |ex: &mut Executor<F::Queues>| {
        ex.block_on(async move { FgTree::create(tcfg, 0, 0).await.map(|_| ()) })
            .map_err(|e| e.to_string())
    };
    let caches: Vec<Arc<IndexCache>> = (0..2)
        .map(|_| {
            Arc::new(IndexCache::new(
                a.cache_nodes.saturating_mul(a.node_bytes() as u64),
                a.node_bytes(),
            ))
        })
        .collect();
    let llts: Vec<_> = (0..2)
        .map(|_| FgTree::new_local_lock_table(&tcfg))
        .collect();
    run_clients(fabric, ex, a, seed, p, 0..a.keys, create, |cs, core| {
        let k = cs as usize % 2;
        let mut t = FgTree::open(tcfg, cs, core)
            .expect("checked above")
            .with_local_locks(llts[k].clone());
        if a.cache_nodes > 0 {
            t = t.with_cache(caches[k].clone());
        }
        t
    })
}

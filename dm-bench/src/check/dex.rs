//! `dm-bench check --index dex`: two CSs, each owning half of the keys,
//! with forwarding on (the clients issue any key; an operation runs at the
//! owner's cache), tiny caches (`--cache-nodes`, at least 4 frames: cooling
//! and eviction all the time), leaf admission 0.5, offloading below level 2
//! with the cost model's windows of 2 and 20% exploration, so that
//! offloaded and one-sided operations on the same sub-tree interleave. On
//! sim, a mover task repartitions twice in the middle of each seed's run
//! (bound from keys/2 to keys/3, then to 2keys/3, at seed-dependent times).

use super::args::Args;
use super::client::key;
use super::history::Event;
use super::real::{run_clients, Proc};
use super::sim::{finish_seed, spawn_sim_clients};
use anyhow::{anyhow, bail, Result};
use dm_runtime::JoinError;
use dm_runtime::{SimCore, SimRuntime};
use dm_tree::{DexCluster, DexConfig, DexTree, TreeConfig};
use dm_verbs::Fabric;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The cluster of process `ci` of `cn`: 2 `cn` CSs, equal key ranges,
/// CSs `2ci` and `2ci + 1` local.
fn cluster(
    a: &Args,
    tcfg: TreeConfig,
    seed: u64,
    (ci, cn): (usize, usize),
) -> Result<Arc<DexCluster>> {
    let n = 2 * cn as u64;
    let cfg = DexConfig {
        bounds: (1..n).map(|j| key(j * a.keys / n)).collect(),
        local_cs: 2 * ci as u16..2 * ci as u16 + 2,
        cache_bytes: a.cache_nodes.max(4).saturating_mul(a.node_bytes() as u64),
        offload_level: 2,
        window: 2,
        explore: 0.2,
        forward: true,
        leaf_admission: 0.5,
        seed,
        ..Default::default()
    };
    DexCluster::new(tcfg, cfg, n as u16).map_err(|e| anyhow!("{e}"))
}

/// One sim seed (the caller made the runtime, its cores and the tree
/// configuration, and registered the handlers).
pub(super) fn run_seed(
    a: &Rc<Args>,
    seed: u64,
    mut rt: SimRuntime,
    cores: &[SimCore],
    tcfg: TreeConfig,
) -> Result<Vec<Event>> {
    let cl = cluster(a, tcfg, seed, (0, 1))?;
    rt.block_on(cores[0], DexTree::create(cl.clone(), 0, 0))
        .unwrap()
        .map_err(|e| anyhow!("{e}"))?;
    let log = Rc::new(RefCell::new(Vec::new()));
    let trees: Vec<Rc<DexTree>> = (0..cores.len())
        .map(|i| Rc::new(DexTree::open(cl.clone(), (i % 2) as u16, (i / 2) as u16).unwrap()))
        .collect();
    let hs = spawn_sim_clients(&mut rt, cores, &trees, a, seed, &log);
    let t = trees[cores.len() - 1].clone();
    let keys = a.keys;
    let mover = rt.spawn_on(cores[cores.len() - 1], async move {
        let t1 = 40_000 + (seed % 5) * 25_000;
        for (at, to) in [(t1, keys / 3), (t1 + 150_000, 2 * keys / 3)] {
            dm_runtime::yield_until(at).await;
            t.repartition(0, key(to)).await.map_err(|e| e.to_string())?;
        }
        Ok::<(), String>(())
    });
    rt.run();
    match mover
        .try_take()
        .map(|r| r.unwrap_or_else(JoinError::resume))
    {
        Some(Ok(())) => {}
        Some(Err(e)) => bail!("seed {seed}: repartitioning failed: {e}"),
        None => bail!("seed {seed}: the repartition never finished"),
    }
    if cl.bounds() != vec![key(2 * keys / 3)] {
        bail!(
            "seed {seed}: bounds {:?} after the repartitions",
            cl.bounds()
        );
    }
    finish_seed(seed, &hs, &log)
}

/// One seed on a real fabric. With `--client I/N`, 2N CSs own N x 2 equal
/// key ranges and process I hosts CSs 2I and 2I+1 (`DexConfig::local_cs`,
/// forwarding between those two only), its clients drawing keys from its
/// two ranges (DEX §7: each CS serves its own keys); no repartition.
pub(super) fn run_seed_real<F: Fabric + Send + Sync>(
    fabric: &F,
    ex: &mut dm_runtime::Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
    tcfg: TreeConfig,
) -> Result<Vec<Event>> {
    let cl = cluster(a, tcfg, seed, (p.ci, p.cn))?;
    let c = cl.clone();
    let create = |ex: &mut dm_runtime::Executor<F::Queues>| {
        ex.block_on(async move { DexTree::create(c, 0, 0).await.map(|_| ()) })
            .map_err(|e| e.to_string())
    };
    let (ci, cn) = (p.ci as u64, p.cn as u64);
    let keys = ci * a.keys / cn..(ci + 1) * a.keys / cn;
    run_clients(fabric, ex, a, seed, p, keys, create, |cs, core| {
        DexTree::open(cl.clone(), cs, core).expect("a local CS")
    })
}

//! `dm-bench check --index dolphin`: keys 0..N (dense: with N above the
//! leaf's 40 items a leaf splits, and above 256 a second prefix hangs off
//! the ART), a Dolphin cache per CS of `--cache-nodes` KiB (tiny: stale
//! special nodes and backtracking all the time, 0 = none), torn READs and
//! delayed completions on sim; splits race updates (Spear), same-key
//! updates race (the key-word CAS), and readers backtrack through special
//! nodes under concurrent splits.

use super::args::Args;
use super::history::Event;
use super::real::{run_clients, Proc};
use super::sim::{finish_seed, spawn_sim_clients};
use anyhow::{anyhow, Result};
use dm_art::{DolphinCache, DolphinConfig, DolphinTree};
use dm_runtime::{SimCore, SimRuntime};
use dm_verbs::Fabric;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

fn config(chunk: u64, num_ms: u16) -> DolphinConfig {
    DolphinConfig {
        chunk_bytes: chunk,
        num_ms,
        ..Default::default()
    }
}

fn caches(a: &Args) -> [Option<Arc<DolphinCache>>; 2] {
    let c =
        || (a.cache_nodes > 0).then(|| Arc::new(DolphinCache::new((a.cache_nodes << 10) as usize)));
    [c(), c()]
}

fn open(cfg: DolphinConfig, cs: u16, core: u16, cache: &Option<Arc<DolphinCache>>) -> DolphinTree {
    let t = DolphinTree::open(cfg, cs, core).expect("checked when the tree was created");
    match cache {
        Some(c) => t.with_cache(c.clone()),
        None => t,
    }
}

/// One sim seed (the caller made the runtime and its cores).
pub(super) fn run_seed(
    a: &Rc<Args>,
    seed: u64,
    mut rt: SimRuntime,
    cores: &[SimCore],
    chunk: u64,
    num_ms: u16,
) -> Result<Vec<Event>> {
    let cfg = config(chunk, num_ms);
    rt.block_on(cores[0], DolphinTree::create(cfg, 0, 0))
        .unwrap()
        .map_err(|e| anyhow!("{e}"))?;
    let log = Rc::new(RefCell::new(Vec::new()));
    let caches = caches(a);
    let trees: Vec<Rc<DolphinTree>> = (0..cores.len())
        .map(|i| Rc::new(open(cfg, (i % 2) as u16, (i / 2) as u16, &caches[i % 2])))
        .collect();
    let hs = spawn_sim_clients(&mut rt, cores, &trees, a, seed, &log);
    rt.run();
    finish_seed(seed, &hs, &log)
}

/// One seed on a real fabric: process 0 creates the tree, every process
/// runs its clients over its two CSs, each CS with its own cache.
pub(super) fn run_seed_real<F: Fabric + Send + Sync>(
    fabric: &F,
    ex: &mut dm_runtime::Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
) -> Result<Vec<Event>> {
    let cfg = config(fabric.ms_config().chunk_bytes, fabric.num_ms());
    let create = |ex: &mut dm_runtime::Executor<F::Queues>| {
        ex.block_on(async move { DolphinTree::create(cfg, 0, 0).await.map(|_| ()) })
            .map_err(|e| e.to_string())
    };
    let caches = caches(a);
    run_clients(fabric, ex, a, seed, p, 0..a.keys, create, |cs, core| {
        open(cfg, cs, core, &caches[cs as usize % 2])
    })
}

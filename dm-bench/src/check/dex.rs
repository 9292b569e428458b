//! `dm-bench check --index dex`: two CSs per client process, each owning
//! an equal range of the keys, with forwarding on (the clients issue any
//! key; an operation runs at the owner's cache), tiny caches
//! (`--cache-nodes`, at least 4 frames: cooling and eviction all the
//! time), leaf admission 0.5, offloading below level 2 with the cost
//! model's windows of 2 and 20% exploration, so that offloaded and
//! one-sided operations on the same sub-tree interleave. On sim, a mover
//! task repartitions twice in the middle of each seed's run (bound from
//! keys/2 to keys/3, then to 2keys/3, at seed-dependent times).

use super::args::Args;
use super::client::key;
use super::real::Proc;
use anyhow::{bail, Result};
use dm_index::{Handle, Index, IndexConfig, Instance};
use dm_runtime::{JoinError, JoinHandle, SimCore, SimRuntime};
use dm_tree::DexConfig;
use std::rc::Rc;

/// The family's part of the check's configuration for `num_cs` CSs with
/// equal key ranges (the cluster sets `local_cs` and forwarding).
pub(super) fn configure(mut cfg: IndexConfig, a: &Args, seed: u64, num_cs: u16) -> IndexConfig {
    let n = num_cs as u64;
    cfg.dex = DexConfig {
        bounds: (1..n).map(|j| key(j * a.keys / n)).collect(),
        cache_bytes: a.cache_nodes.max(4).saturating_mul(a.node_bytes() as u64),
        offload_level: 2,
        window: 2,
        explore: 0.2,
        leaf_admission: 0.5,
        seed,
        ..Default::default()
    };
    cfg
}

/// The keys process `p`'s clients draw from: for DEX its two CSs' ranges
/// (DEX §7: each CS serves its own keys), for the others all of them.
pub(super) fn client_keys(inst: &Instance, a: &Args, p: Proc) -> std::ops::Range<u64> {
    share(inst, a, p.ci as u64, p.cn as u64)
}

/// Share `i` of `n` of the keys for DEX (a partition), all keys for the
/// other indexes.
fn share(inst: &Instance, a: &Args, i: u64, n: u64) -> std::ops::Range<u64> {
    match inst.dex_cluster() {
        Some(_) => i * a.keys / n..(i + 1) * a.keys / n,
        None => 0..a.keys,
    }
}

/// The keys CS `cs`'s clients draw from in a crash seed: for DEX its own
/// partition (its two CSs run as two processes, see `cluster::run_seed`),
/// for the others all of them.
pub(super) fn crash_keys(inst: &Instance, a: &Args, cs: u16) -> std::ops::Range<u64> {
    share(inst, a, cs as u64, 2)
}

/// DEX on sim: the mover on `core` (the last), repartitioning twice; none
/// in a crash seed (a repartition needs both CSs alive, §4: both flush
/// and drop their caches).
pub(super) fn spawn_mover(
    rt: &mut SimRuntime,
    (core, t): (SimCore, Rc<Index>),
    a: &Args,
    seed: u64,
) -> Option<JoinHandle<Result<(), String>>> {
    if !matches!(t.handle(), Handle::Dex(_)) || a.crash() {
        return None;
    }
    let keys = a.keys;
    Some(rt.spawn_on(core, async move {
        let Handle::Dex(t) = t.handle() else {
            unreachable!("checked above")
        };
        let t1 = 40_000 + (seed % 5) * 25_000;
        for (at, to) in [(t1, keys / 3), (t1 + 150_000, 2 * keys / 3)] {
            dm_runtime::yield_until(at).await;
            t.repartition(0, key(to)).await.map_err(|e| e.to_string())?;
        }
        Ok::<(), String>(())
    }))
}

/// The mover's outcome once the simulation drained: both repartitions
/// done and the bound where the second one put it.
pub(super) fn finish_mover(
    m: Option<JoinHandle<Result<(), String>>>,
    inst: &Instance,
    a: &Args,
    seed: u64,
) -> Result<()> {
    let (Some(m), Some(cl)) = (m, inst.dex_cluster()) else {
        return Ok(());
    };
    match m.try_take().map(|r| r.unwrap_or_else(JoinError::resume)) {
        Some(Ok(())) => {}
        Some(Err(e)) => bail!("seed {seed}: repartitioning failed: {e}"),
        None => bail!("seed {seed}: the repartition never finished"),
    }
    if cl.bounds() != vec![key(2 * a.keys / 3)] {
        bail!(
            "seed {seed}: bounds {:?} after the repartitions",
            cl.bounds()
        );
    }
    Ok(())
}

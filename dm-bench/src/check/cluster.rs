//! A seed's cluster: on sim, the fabric (with the seed's faults), the
//! runtime and `--cores` cores alternating between two CSs; on both sim and
//! real fabrics, the index configuration, with the NAM designs' partitions
//! ([`nam_config`]) and a deliberately tiny lock table, so that unrelated
//! nodes share lock slots often: on even seeds the global lock table goes to
//! device memory when the fabric offers it (16-bit lanes with masked CAS),
//! otherwise, and on odd seeds, 16 64-bit slots in a host-memory chunk. Then
//! the index family's module runs the seed ([`super::btree`],
//! [`super::smart`], [`super::dex`], [`super::dolphin`]).

use super::args::{parse_faults, Args};
use super::client::key;
use super::history::Event;
use super::real::Proc;
use super::smart::smart_config;
use super::{btree, dex, dolphin, smart};
use crate::kv::radix;
use anyhow::Result;
use dm_runtime::{Executor, SimRuntime};
use dm_tree::{LockTableConfig, NamConfig, TreeConfig};
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::{Caps, Fabric, MsConfig};
use std::rc::Rc;

/// The NAM designs' partitions for a check: one more than there are MSs (so
/// one MS holds two), splitting the checked keys evenly. A large key space
/// is sampled evenly (65536 keys) instead of listed.
fn nam_config(a: &Args, num_ms: u16) -> NamConfig {
    const SAMPLE: u64 = 1 << 16;
    let keys: Vec<Vec<u8>> = if a.keys <= SAMPLE {
        (0..a.keys).map(key).collect()
    } else {
        (0..SAMPLE)
            .map(|i| key((i as u128 * a.keys as u128 / SAMPLE as u128) as u64))
            .collect()
    };
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    NamConfig::from_sample(&refs, num_ms + 1)
}

/// One seed on sim: a fresh simulated cluster, the index, its clients.
pub(super) fn run_seed(a: &Rc<Args>, seed: u64) -> Result<Vec<Event>> {
    let chunk = 1 << 20;
    let faults = parse_faults(a)?;
    let num_ms = a.ms_spec.count();
    // Lock tables are tiny so that unrelated nodes share lock slots often:
    // even seeds put 16-bit lanes in device memory (masked CAS), odd seeds
    // 64-bit words in a host-memory table.
    let lanes = seed.is_multiple_of(2);
    let cfg = SimConfig {
        num_ms,
        ms: MsConfig {
            // A chunk per core and MS it allocates on, as on loopback (at
            // least 8: what every check ran with before).
            region_bytes: 4096 + (a.cores as u64 + 4).max(8) * chunk,
            chunk_bytes: chunk,
            device_bytes: if lanes { 64 } else { 0 },
            cores: 1,
        },
        faults,
        seed,
        ..Default::default()
    };
    let tcfg = TreeConfig {
        node_bytes: a.node_bytes(),
        chunk_bytes: chunk,
        num_ms,
        techniques: a.techniques,
        lock_table: LockTableConfig {
            device: lanes,
            lanes16: lanes,
            slots: if lanes { 32 } else { 16 },
        },
        design: a.design,
        nam: nam_config(a, num_ms),
        ..Default::default()
    };
    let fabric = SimFabric::new(cfg);
    fabric.register_rpc(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
    fabric.register_rpc(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
    let mut rt = SimRuntime::new(fabric);
    let cores: Vec<_> = (0..a.cores.max(1))
        .map(|i| rt.add_core(i % 2, i / 2))
        .collect();
    if a.index == crate::ycsb::dex::DEX {
        return dex::run_seed(a, seed, rt, &cores, tcfg);
    }
    if a.index == crate::kv::DOLPHIN {
        return dolphin::run_seed(a, seed, rt, &cores, chunk, num_ms);
    }
    if let Some(t) = radix(&a.index) {
        let scfg = smart_config(chunk, num_ms, t, tcfg.lock_table);
        return smart::run_seed(a, seed, rt, &cores, scfg);
    }
    btree::run_seed(a, seed, rt, &cores, tcfg)
}

/// The lock table of `seed` on a real fabric (see the module docs).
fn real_lock_table(caps: Caps, seed: u64) -> LockTableConfig {
    let device = seed.is_multiple_of(2) && caps.device_memory_bytes >= 128;
    LockTableConfig {
        device,
        lanes16: device && caps.masked_cas,
        slots: if device && caps.masked_cas { 32 } else { 16 },
    }
}

/// One seed on a real fabric (see [`super::real`]). `ex` runs on this
/// thread (creation, barriers); the clients run on `a.cores` threads.
pub(super) fn run_seed_real<F: Fabric + Send + Sync>(
    fabric: &F,
    ex: &mut Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
) -> Result<Vec<Event>> {
    let tcfg = TreeConfig {
        node_bytes: a.node_bytes(),
        chunk_bytes: fabric.ms_config().chunk_bytes,
        num_ms: fabric.num_ms(),
        techniques: a.techniques,
        lock_table: real_lock_table(fabric.caps(), seed),
        design: a.design,
        nam: nam_config(a, fabric.num_ms()),
        ..Default::default()
    };
    if a.index == crate::ycsb::dex::DEX {
        return dex::run_seed_real(fabric, ex, a, seed, p, tcfg);
    }
    if a.index == crate::kv::DOLPHIN {
        return dolphin::run_seed_real(fabric, ex, a, seed, p);
    }
    if let Some(rung) = radix(&a.index) {
        let scfg = smart_config(
            fabric.ms_config().chunk_bytes,
            fabric.num_ms(),
            rung,
            tcfg.lock_table,
        );
        return smart::run_seed_real(fabric, ex, a, seed, p, scfg);
    }
    btree::run_seed_real(fabric, ex, a, seed, p, tcfg)
}

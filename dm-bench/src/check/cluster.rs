//! A seed's cluster, built through the library (`dm_index::Instance`, as a
//! service's would be, at the hand-built roots): on sim, the fabric (with
//! the seed's faults), the runtime and `--cores` cores alternating between
//! two CSs; on both sim and real fabrics, the index configuration
//! ([`index_config`]) with a deliberately adversarial set-up:
//!
//! - a tiny global lock table, so that unrelated nodes share lock slots
//!   often: on even seeds in device memory when the fabric offers it
//!   (16-bit lanes with masked CAS), otherwise, and on odd seeds, 16 64-bit
//!   slots in a host-memory chunk ([`dm_index::IndexConfig::lock_table`]);
//! - the NAM designs' partitions ([`nam_config`]);
//! - per family, tiny caches and per-CS differences (the family modules:
//!   [`super::btree`], [`super::smart`], [`super::dex`], [`super::dolphin`];
//!   the radix family's two CSs differ through
//!   [`dm_index::CsOverride`]).
//!
//! Then the clients run on each core's `dm_index::Index` handle; the
//! B+trees' head-node maintainer and DEX's mover use the family handle
//! (`Index::handle`).

use super::args::{parse_faults, Args};
use super::client::key;
use super::history::Event;
use super::real::{run_clients, Proc};
use super::sim::{finish_seed, spawn_sim_clients};
use super::{btree, crash, dex, dolphin, smart};
use crate::ycsb::measure::peers;
use anyhow::{anyhow, Result};
use dm_index::{Family, Index, IndexConfig, IndexKind, Instance, Root, Site};
use dm_runtime::{Executor, SimRuntime};
use dm_tree::{LockTableConfig, NamConfig};
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::{Caps, Fabric, MsConfig};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

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

/// The check's index configuration for `seed`: `--index`'s kind with
/// `--node-bytes`, the lock table `lock_table`, the NAM partitions, and
/// each family's caches and per-CS choices, for `num_cs` compute servers
/// (2 per client process).
fn index_config(
    a: &Args,
    seed: u64,
    lock_table: LockTableConfig,
    num_ms: u16,
    num_cs: u16,
) -> Result<IndexConfig> {
    let kind = IndexKind::named(&a.index).map_err(|e| anyhow!("{e}"))?;
    let mut cfg = IndexConfig::new(kind).with_node_bytes(a.node_bytes());
    cfg.lock_table = Some(lock_table);
    cfg.nam = nam_config(a, num_ms);
    Ok(match kind.family() {
        Family::BTree => btree::configure(cfg, a),
        Family::Dex => dex::configure(cfg, a, seed, num_cs),
        Family::Radix => smart::configure(cfg, num_cs, a.art_absorb),
        Family::Dolphin => dolphin::configure(cfg, a)?,
    })
}

/// One seed on sim: a fresh simulated cluster, the index, its clients.
pub(super) fn run_seed(a: &Rc<Args>, seed: u64) -> Result<Vec<Event>> {
    let chunk = 1 << 20;
    let faults = parse_faults(a)?;
    let crash = a.crash();
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
            // One more for the membership table of a crash run.
            region_bytes: 4096 + ((a.cores as u64 + 4).max(8) + crash as u64) * chunk,
            chunk_bytes: chunk,
            device_bytes: if lanes { 64 } else { 0 },
            cores: 1,
        },
        faults,
        seed,
        ..Default::default()
    };
    let lock_table = LockTableConfig {
        device: lanes,
        lanes16: lanes,
        slots: if lanes { 32 } else { 16 },
    };
    let fabric = SimFabric::new(cfg);
    // A new cluster on this thread: the locks a killed CS of the last seed
    // held stay in the thread's ledger (its tasks are never dropped).
    dm_runtime::lock::forget_thread_ledger();
    dm_index::register_handlers(&fabric);
    let icfg = index_config(a, seed, lock_table, num_ms, 2)?;
    let ncores = a.cores.max(1) as usize;
    // A crash kills one CS. DEX's two CSs then run as two processes (an
    // instance each, no forwarding between them): a process dies whole,
    // in-process forwarding included. The others share one instance.
    let apart = crash && icfg.kind.family() == Family::Dex;
    let site = |cs: u16| match apart {
        true => Site::of(&fabric, cs..cs + 1, 2),
        false => Site::of(&fabric, 0..2, 2),
    };
    let fresh = crash
        .then(|| instance(icfg.clone(), site(crash::victim(ncores)), 1))
        .transpose()?;
    let inst = Arc::new(instance(icfg.clone(), site(0), ncores)?);
    let insts = match apart {
        true => vec![inst.clone(), Arc::new(instance(icfg, site(1), ncores)?)],
        false => vec![inst.clone(), inst.clone()],
    };
    let mut rt = SimRuntime::new(fabric);
    let cores: Vec<_> = (0..ncores as u16)
        .map(|i| rt.add_core(i % 2, i / 2))
        .collect();
    let i = inst.clone();
    rt.block_on(cores[0], async move { i.create_root(0, 0).await })
        .unwrap()
        .map_err(|e| anyhow!("{e}"))?;
    let members = crash
        .then(|| crash::join(&mut rt, &cores, &insts))
        .transpose()?;
    let handles = (0..cores.len())
        .map(|i| open(&insts[i % 2], (i % 2) as u16, (i / 2) as u16).map(Rc::new))
        .collect::<Result<Vec<_>>>()?;
    let log = Rc::new(RefCell::new(Vec::new()));
    let hs = match (fresh, members) {
        (Some(fresh), Some(members)) => {
            let s = crash::Seed {
                a,
                seed,
                cores: &cores,
                handles: &handles,
                insts: &insts,
                fresh,
                log: &log,
                members,
            };
            crash::spawn_seed(&mut rt, s)
        }
        _ => spawn_sim_clients(&mut rt, &cores, &handles, a, seed, &log),
    };
    let last = (cores[cores.len() - 1], handles[cores.len() - 1].clone());
    let maint = btree::spawn_head_maintainer(&mut rt, last.clone(), a, &log);
    let mover = dex::spawn_mover(&mut rt, last, a, seed);
    rt.run();
    btree::finish_head_maintainer(maint, seed)?;
    dex::finish_mover(mover, &inst, a, seed)?;
    finish_seed(seed, &hs, &log)
}

/// The check's instance of `cfg` at the hand-built roots.
fn instance(cfg: IndexConfig, site: Site, cores: usize) -> Result<Instance> {
    Instance::new("check", cfg, site, Root::HandBuilt, cores).map_err(|e| anyhow!("{e}"))
}

/// Core `core` of CS `cs`'s handle (counting into shard `2 core + cs % 2`,
/// the core's index among a process's `--cores`).
fn open(inst: &Arc<Instance>, cs: u16, core: u16) -> Result<Index> {
    let shard = 2 * core as usize + cs as usize % 2;
    inst.open(cs, core, shard).map_err(|e| anyhow!("{e}"))
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
/// Process 0 creates the index; process `I` of `N` hosts CSs `2I` and
/// `2I + 1` of `2N`.
pub(super) fn run_seed_real<F: Fabric + Send + Sync>(
    fabric: &F,
    ex: &mut Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
) -> Result<Vec<Event>> {
    let num_cs = 2 * p.cn as u16;
    let cs0 = 2 * p.ci as u16;
    let lock_table = real_lock_table(fabric.caps(), seed);
    let icfg = index_config(a, seed, lock_table, fabric.num_ms(), num_cs)?;
    let site = Site::of(fabric, cs0..cs0 + 2, num_cs);
    let inst = Arc::new(instance(icfg, site, a.cores.max(1) as usize)?);
    let i = inst.clone();
    let create = |ex: &mut Executor<F::Queues>| {
        ex.block_on(async move { i.create_root(0, 0).await })
            .map_err(|e| e.to_string())
    };
    let keys = dex::client_keys(&inst, a, p);
    let open_core = |cs, core| open(&inst, cs, core).expect("a local CS");
    let Some(ms) = a.lease_ms else {
        return run_clients(fabric, ex, a, seed, p, keys, create, open_core);
    };
    // Members: join before any handle opens, heartbeat from a thread of
    // its own until the seed's clients are done.
    let cfg = peers::lease(ms)?;
    let members = peers::join(ex, &inst, cfg).map_err(|e| anyhow!("seed {seed}: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let hb = s.spawn(|| peers::beat(fabric, &members, cfg, rx));
        let r = run_clients(fabric, ex, a, seed, p, keys, create, open_core);
        drop(tx);
        let beat = hb
            .join()
            .map_err(|_| anyhow!("seed {seed}: the heartbeat thread panicked"))?;
        beat.map_err(|e| anyhow!("seed {seed}: {e}"))?;
        r
    })
}

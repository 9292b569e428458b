//! The cluster a run sets up before any index exists: the MS region sized
//! for the index and the keys (every core carves its own chunks), the MS
//! configuration and the fabric's capabilities (device memory, masked CAS),
//! each index family's configuration (B+tree with its lock table and the
//! NAM designs' partitions, SMART, Dolphin), DEX's cluster of partitioned
//! CS caches, and the mid-run extras of the plan (DEX's repartitioning,
//! head-node maintenance).

use super::options::Choice;
use crate::verbs_bench::FabricArg;
use crate::ycsb::plan::{key_bytes, Plan};
use crate::ycsb::Args;
use anyhow::{anyhow, bail, Result};
use dm_art::{DolphinConfig, DolphinTree, KeyCodec, SmartConfig, SmartTree};
use dm_tree::{Design, FgTree, LockTableConfig, NamConfig, TreeConfig};
use dm_verbs::loopback::LoopbackConfig;
use dm_verbs::sim::SimConfig;
use dm_verbs::{Caps, MsConfig};
use std::sync::Arc;

/// The cluster's configuration (every fabric).
pub(super) struct Cluster {
    pub ms_cfg: MsConfig,
    pub caps: Caps,
    /// B+tree, SMART and Dolphin configurations (the chosen index's is used).
    pub tcfg: TreeConfig,
    pub scfg: SmartConfig,
    pub dcfg: DolphinConfig,
    /// DEX's cluster (`--index dex`).
    pub dexcl: Option<Arc<dm_tree::DexCluster>>,
}

/// Sets up the cluster for `plan` (adding its DEX repartitioning and
/// head-node passes); `rdma`: the chunk size and caps the memory servers
/// and the NIC report.
pub(super) fn set_up(
    a: &Args,
    c: &Choice,
    plan: &mut Plan,
    rdma: Option<(u64, Caps)>,
) -> Result<Cluster> {
    let Choice {
        ci,
        cn,
        techniques,
        design,
        art_techniques,
        smart,
        dex,
        dolphin,
    } = *c;
    let mut chunk = 8u64 << 20;
    if let Some((bytes, _)) = rdma {
        // The memory servers decide the chunk size.
        chunk = bytes;
    }
    let region = region_bytes(a, c, plan, chunk);
    let ms_cfg = MsConfig {
        region_bytes: region,
        chunk_bytes: chunk,
        cores: a.ms_cores,
        ..Default::default()
    };
    // sim and loopback get the default MS device memory and masked CAS as each
    // offers it; rdma what the memory servers and the NIC report.
    let mut caps = Caps {
        masked_cas: match a.fabric {
            FabricArg::Sim => SimConfig::default().masked_cas,
            FabricArg::Loopback => LoopbackConfig::default().masked_cas,
            FabricArg::Rdma => false,
        },
        device_memory_bytes: ms_cfg.device_bytes,
    };
    if let Some((_, r)) = rdma {
        caps = r;
    }
    let tcfg = TreeConfig {
        node_bytes: a.node_bytes,
        key_bytes: key_bytes(a),
        chunk_bytes: chunk,
        num_ms: a.ms,
        techniques,
        lock_table: LockTableConfig::for_caps(caps),
        design,
        nam: if design == Design::Fine {
            NamConfig::default()
        } else {
            nam_config(a, plan)
        },
        ..Default::default()
    };
    let scfg = SmartConfig {
        keys: KeyCodec::fixed(key_bytes(a)),
        chunk_bytes: chunk,
        num_ms: a.ms,
        techniques: art_techniques,
        lock_table: tcfg.lock_table,
        ..Default::default()
    };
    let dcfg = DolphinConfig {
        chunk_bytes: chunk,
        num_ms: a.ms,
        leaf_bytes: a.node_bytes,
        ..Default::default()
    };
    if smart {
        SmartTree::open(scfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    } else if dolphin {
        DolphinTree::open(dcfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    } else {
        FgTree::open(tcfg, 0, 0).map_err(|e| anyhow!("{e}"))?;
    }
    let dexcl = if dex {
        // With --client I/N, N x cs CSs own the partitions; this process
        // hosts CSs I*cs.. and runs only the operations on their keys.
        let local = (ci as u16 * a.cs)..((ci as u16 + 1) * a.cs);
        Some(crate::ycsb::dex::cluster(
            &a.dex,
            tcfg,
            &plan.load,
            (a.cs * cn as u16, local),
            a.cache_mb,
            a.fill,
            a.seed,
        )?)
    } else {
        None
    };
    if let Some(cl) = &dexcl {
        plan.repartition =
            crate::ycsb::dex::repartition_plan(&a.dex, cl, &plan.load, plan.run.len())?;
    } else if a.dex.dex_repartition_at != 0.0 {
        bail!("--dex-repartition-at is for --index dex");
    }
    let one_sided_btree = !smart && !dex && !dolphin && design != Design::Coarse;
    plan.heads = crate::ycsb::head::HeadMaint::plan(&a.head, one_sided_btree)?;
    Ok(Cluster {
        ms_cfg,
        caps,
        tcfg,
        scfg,
        dcfg,
        dexcl,
    })
}

/// The MS region's bytes: the B+tree's nodes (3 node slots per 24 bytes of
/// node per key, twice over), or SMART's and Dolphin's estimates, plus a
/// chunk per core.
fn region_bytes(a: &Args, c: &Choice, plan: &Plan, chunk: u64) -> u64 {
    let (smart, dolphin, art_techniques) = (c.smart, c.dolphin, c.art_techniques);
    let nodes_estimate = (plan.allowed.len() as u64 * 3 / (a.node_bytes as u64 / 24).max(1) + 64)
        * a.node_bytes as u64;
    // Every core carves its own chunk on each MS it allocates from: with
    // many cores (16 CS x 2 threads at 1M keys) the chunks, not the nodes,
    // fill the region.
    let cores_total = (a.cs as u64) * (a.threads as u64);
    let mut region = (4096 + nodes_estimate * 2 / a.ms as u64 + (cores_total + 4) * chunk)
        .next_multiple_of(chunk)
        + 4096;
    if smart {
        // SMART: a leaf per key plus its share of internal nodes (well under
        // 1 KiB per key), spread over the MSs; each core carves its own
        // chunks on every MS it allocates from.
        let cores = (a.cs as u64) * (a.threads as u64);
        let mut smart_bytes =
            plan.allowed.len() as u64 * 1024 * 2 / a.ms as u64 + (cores + 4) * chunk;
        if !art_techniques.in_place_leaf {
            // RCU: a new leaf (at most 320 B with 255-byte keys) per write.
            smart_bytes += plan.run.len() as u64 * 320 / a.ms as u64;
        }
        region = region.max((4096 + smart_bytes).next_multiple_of(chunk) + 4096);
    }
    if dolphin {
        // Dolphin: a leaf per 7-byte prefix, about half full with dense
        // keys, but one per key with sparse ones (digest B2.3).
        let per_leaf = if a.key_order == "ordered" { 16 } else { 1 };
        let cores = (a.cs as u64) * (a.threads as u64);
        let leaves = plan.allowed.len() as u64 / per_leaf + 64;
        let bytes = leaves * (a.node_bytes as u64 + 512) * 2 / a.ms as u64 + (cores + 4) * chunk;
        region = region.max((4096 + bytes).next_multiple_of(chunk) + 4096);
    }
    region
}

/// The NAM designs' partitions: `--nam-skew` shares of the key-prefix
/// space, else one partition per MS with equal shares of the loaded keys.
fn nam_config(a: &Args, plan: &Plan) -> NamConfig {
    let mut c = if a.nam_skew.is_empty() {
        let mut keys: Vec<&[u8]> = plan.load.iter().map(|k| k.as_slice()).collect();
        keys.sort_unstable();
        NamConfig::from_sample(&keys, a.ms)
    } else {
        NamConfig::weighted(&a.nam_skew)
    };
    c.ms_node_ns = a.nam_node_ns;
    c
}

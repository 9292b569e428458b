//! The cluster a run sets up before any index exists: the MS region sized
//! for the index and the keys (every core carves its own chunks), the MS
//! configuration and the fabric's capabilities (device memory, masked CAS),
//! the index as the library resolves it from the flags (`dm_index`: its
//! kind and configuration, the family configuration derived from the
//! fabric, DEX's cluster of partitioned CS caches), and the mid-run extras
//! of the plan (DEX's repartitioning, head-node maintenance).

use super::options::Choice;
use crate::verbs_bench::FabricArg;
use crate::ycsb::plan::{key_bytes, Plan};
use crate::ycsb::Args;
use anyhow::{anyhow, bail, Result};
use dm_index::{IndexConfig, IndexKind, Instance, Root, Site};
use dm_tree::{Design, LockTableConfig, NamConfig, TreeConfig};
use dm_verbs::loopback::LoopbackConfig;
use dm_verbs::sim::SimConfig;
use dm_verbs::{Caps, MsConfig};
use std::sync::Arc;

/// The cluster's configuration (every fabric) and the index, resolved by
/// the library (`dm_index::Instance`: the family configuration derived
/// from the fabric, each CS's caches and tables).
pub(super) struct Cluster {
    pub ms_cfg: MsConfig,
    pub caps: Caps,
    /// The index in this process, placed at its family's hand-built roots
    /// (one index per run; `--client I/N` processes meet at a barrier).
    pub inst: Arc<Instance>,
    /// The B+tree configuration the reports describe (the radix family's
    /// lock table too); DEX's tree for `--index dex`.
    pub tcfg: TreeConfig,
}

impl Cluster {
    /// DEX's cluster (`--index dex`).
    pub fn dexcl(&self) -> Option<&Arc<dm_tree::DexCluster>> {
        self.inst.dex_cluster()
    }
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
    let (ci, cn, design, dex) = (c.ci, c.cn, c.design, c.dex);
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
    // With --client I/N, N x cs CSs run the index; this process hosts CSs
    // I*cs.. (DEX: and runs only the operations on their keys).
    let site = Site {
        chunk_bytes: chunk,
        num_ms: a.ms,
        caps,
        num_cs: a.cs * cn as u16,
        local_cs: (ci as u16 * a.cs)..((ci as u16 + 1) * a.cs),
    };
    let mut cfg = index_config(a, c, plan)?;
    cfg.lock_table = lock_table(a.lock_slots, caps)?;
    let cfg_lock_table = cfg.lock_table;
    let cores = a.cs as usize * a.threads as usize;
    let inst = Arc::new(
        Instance::new(&a.index, cfg, site.clone(), Root::HandBuilt, cores)
            .map_err(|e| anyhow!("{e}"))?,
    );
    // Opening a handle checks what only the family knows (node size).
    inst.open(site.local_cs.start, 0, 0)
        .map_err(|e| anyhow!("{e}"))?;
    if let Some(cl) = inst.dex_cluster() {
        plan.repartition =
            crate::ycsb::dex::repartition_plan(&a.dex, cl, &plan.load, plan.run.len())?;
    } else if a.dex.dex_repartition_at != 0.0 {
        bail!("--dex-repartition-at is for --index dex");
    }
    let one_sided_btree = !c.smart && !dex && !c.dolphin && design != Design::Coarse;
    plan.heads = crate::ycsb::head::HeadMaint::plan(&a.head, one_sided_btree)?;
    let tcfg = inst.tree_config().unwrap_or(TreeConfig {
        lock_table: cfg_lock_table.unwrap_or_else(|| LockTableConfig::for_caps(caps)),
        ..Default::default()
    });
    Ok(Cluster {
        ms_cfg,
        caps,
        inst,
        tcfg,
    })
}

/// The global lock table `--lock-slots` asks for: the fabric's default
/// table cut to `slots` per MS; `None` without the flag (the default).
fn lock_table(slots: Option<u64>, caps: Caps) -> Result<Option<LockTableConfig>> {
    let Some(n) = slots else { return Ok(None) };
    let full = LockTableConfig::for_caps(caps);
    if n == 0 || n > full.slots {
        bail!(
            "--lock-slots {n}: the lock table holds 1 to {} slots per MS on this fabric",
            full.slots
        );
    }
    Ok(Some(LockTableConfig { slots: n, ..full }))
}

/// The library's index configuration from the flags: the kind, and what
/// the flags change from its defaults (lock techniques, SMART's switched-off
/// techniques, the NAM partitions, DEX's knobs and partition bounds).
fn index_config(a: &Args, c: &Choice, plan: &Plan) -> Result<IndexConfig> {
    let kind = IndexKind::named(&a.index).map_err(|e| anyhow!("{e}"))?;
    let off = |t: &str| a.smart_off.iter().any(|x| x == t);
    let mut cfg = IndexConfig::new(kind)
        .with_key_bytes(key_bytes(a))
        .with_node_bytes(a.node_bytes);
    cfg.cache_bytes = a.cache_mb << 20;
    cfg.rdwc_entries = a.rdwc_entries;
    cfg.tree_techniques = Some(c.techniques);
    cfg.node_read = dm_tree::NodeRead::named(&a.node_read)
        .ok_or_else(|| anyhow!("--node-read {}", a.node_read))?;
    cfg.sherman_cache = dm_tree::ShermanCache::named(&a.sherman_cache)
        .ok_or_else(|| anyhow!("--sherman-cache {}", a.sherman_cache))?;
    cfg.dolphin_update =
        crate::kv::dolphin_update(&a.dolphin_update, &a.index, a.lease_ms.is_some())?;
    cfg.radix_techniques = Some(c.art_techniques);
    cfg.art_fifo_hold_ns = a.smart_fifo_ns;
    cfg.art_absorb_writers = a.art_absorb;
    cfg.art_drop_stale_hints = a.smart_drop_stale_hints;
    cfg.read_delegation = Some(!off("rd"));
    cfg.write_combining = Some(!off("wc"));
    if c.design != Design::Fine {
        cfg.nam = nam_config(a, plan);
    }
    if c.dex {
        cfg.dex = crate::ycsb::dex::config(
            &a.dex,
            &cfg,
            &plan.load,
            (a.cs * c.cn as u16, a.ms),
            a.cache_mb,
            a.fill,
            a.seed,
        );
    }
    Ok(cfg)
}

/// The MS region's bytes: the B+tree's nodes (3 node slots per 24 bytes of
/// node per key, twice over), or SMART's and Dolphin's estimates, plus a
/// chunk per core.
fn region_bytes(a: &Args, c: &Choice, plan: &Plan, chunk: u64) -> u64 {
    let (smart, dolphin, art_techniques) = (c.smart, c.dolphin, c.art_techniques);
    let nodes_estimate = (plan.written.len() as u64 * 3 / (a.node_bytes as u64 / 24).max(1) + 64)
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
            plan.written.len() as u64 * 1024 * 2 / a.ms as u64 + (cores + 4) * chunk;
        if !art_techniques.in_place_leaf {
            // RCU: a new leaf (at most 320 B with 255-byte keys) per write.
            smart_bytes += plan.run.len() as u64 * 320 / a.ms as u64;
        }
        region = region.max((4096 + smart_bytes).next_multiple_of(chunk) + 4096);
    }
    if dolphin {
        // Dolphin: a leaf per 7-byte prefix, about half full with dense
        // keys, but one per key with sparse ones (digest B2.3).
        let per_leaf = if a.key_order == "hashed" { 1 } else { 16 };
        let cores = (a.cs as u64) * (a.threads as u64);
        let leaves = plan.written.len() as u64 / per_leaf + 64;
        let bytes = leaves * (a.node_bytes as u64 + 512) * 2 / a.ms as u64 + (cores + 4) * chunk;
        region = region.max((4096 + bytes).next_multiple_of(chunk) + 4096);
    }
    region
}

/// The NAM designs' partitions: `--nam-skew` shares of the loaded keys,
/// else one partition per MS with equal shares of them.
fn nam_config(a: &Args, plan: &Plan) -> NamConfig {
    let mut keys: Vec<&[u8]> = plan.load.iter().collect();
    keys.sort_unstable();
    let mut c = if a.nam_skew.is_empty() {
        NamConfig::from_sample(&keys, a.ms)
    } else {
        NamConfig::from_sample_weighted(&keys, &a.nam_skew)
    };
    c.ms_node_ns = a.nam_node_ns;
    c
}

//! `dm-bench ycsb --index dex`: DEX's cluster (partition bounds, offload
//! level, cache), the routing of each request to the CS owning its key
//! (DEX §7: each CS's clients issue keys of its own partition), and the
//! report's `dex` section.

use crate::ycsb::Op;
use anyhow::{anyhow, Result};
use dm_tree::{DexCluster, DexConfig, DexStats, DexTree, TreeConfig};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

/// The `--index` name of DEX.
pub(crate) const DEX: &str = "dex";

#[derive(clap::Args, Clone, Debug, Default)]
pub struct DexArgs {
    /// dex: offload level M (DEX §4, §6): sub-trees rooted at level M live
    /// on one MS, and only misses at or below M may be offloaded. Default:
    /// the highest level up to 3 (the paper's code) that has at least 4
    /// nodes per MS at the loaded key count, so sub-trees spread over the MSs.
    #[arg(long)]
    pub dex_offload_level: Option<u8>,
    /// dex: switch cost-aware offloading off (every miss fetches).
    #[arg(long)]
    pub dex_no_offload: bool,
    /// dex: probability that a missed leaf is admitted to the cache (§5.3).
    #[arg(long, default_value_t = LEAF_ADMISSION)]
    pub dex_leaf_admission: f64,
    /// dex: spread requests round-robin over all CSs (each runs at the
    /// owner's cache, forwarded in-process) instead of routing each to a
    /// core of the CS that owns its key.
    #[arg(long)]
    pub dex_forward: bool,
    /// dex: simulated MS CPU ns per node an offloaded operation visits (at
    /// most 1 s = 1000000000).
    #[arg(long, default_value_t = NODE_NS,
        value_parser = clap::value_parser!(u32).range(..=crate::fabric_arg::MAX_SIM_NS as i64))]
    pub dex_node_ns: u32,
    /// dex: logical repartitioning in the middle of the run (DEX §4,
    /// Fig. 10): once this fraction of the run's operations has completed,
    /// CS 0 hands the upper half of its key range to CS 1 (both flush their
    /// dirty pages and drop their caches; their operations wait meanwhile).
    /// The report gives the duration. 0 (default): no repartitioning.
    #[arg(long, default_value_t = 0.0)]
    pub dex_repartition_at: f64,
}

/// `--dex-leaf-admission`'s default (§5.3).
const LEAF_ADMISSION: f64 = 0.1;
/// `--dex-node-ns`'s default.
const NODE_NS: u32 = 300;

impl DexArgs {
    /// The first `--dex-*` flag given away from its default, if any (they
    /// are for `--index dex` only).
    pub fn first_set(&self) -> Option<&'static str> {
        [
            (self.dex_offload_level.is_some(), "--dex-offload-level"),
            (self.dex_no_offload, "--dex-no-offload"),
            (
                self.dex_leaf_admission != LEAF_ADMISSION,
                "--dex-leaf-admission",
            ),
            (self.dex_forward, "--dex-forward"),
            (self.dex_node_ns != NODE_NS, "--dex-node-ns"),
            (self.dex_repartition_at != 0.0, "--dex-repartition-at"),
        ]
        .into_iter()
        .find_map(|(set, flag)| set.then_some(flag))
    }
}

/// The default offload level (see `--dex-offload-level`).
fn auto_level(keys: u64, tcfg: &TreeConfig, fill: f64) -> u8 {
    let cap = dm_tree::node::Geometry::new(tcfg.node_bytes, tcfg.key_bytes).capacity();
    let per = (cap as f64 * fill).floor().max(2.0);
    let mut nodes = keys as f64 / per;
    let mut level = 0;
    for l in 1..=3u8 {
        nodes /= per;
        if nodes >= 4.0 * tcfg.num_ms as f64 {
            level = l;
        }
    }
    level
}

/// DEX's configuration for a ycsb run: equal shares of the loaded keys per
/// CS (§7) over `num_cs` CSs (the CSs of all client processes; the library
/// sets which of them this process hosts), `--cache-mb` per CS.
pub(crate) fn config(
    d: &DexArgs,
    cfg: &dm_index::IndexConfig,
    load: &crate::ycsb::flat::Keys,
    (num_cs, num_ms): (u16, u16),
    cache_mb: u64,
    fill: f64,
    seed: u64,
) -> DexConfig {
    let mut sorted: Vec<&[u8]> = load.iter().collect();
    sorted.sort_unstable();
    // What the default offload level depends on: the nodes' geometry and
    // the MS count.
    let geometry = TreeConfig {
        node_bytes: cfg.node_bytes,
        key_bytes: cfg.key_bytes,
        num_ms,
        ..Default::default()
    };
    DexConfig {
        bounds: DexConfig::even_bounds(&sorted, num_cs),
        cache_bytes: cache_mb << 20,
        offload_level: d
            .dex_offload_level
            .unwrap_or_else(|| auto_level(load.len() as u64, &geometry, fill)),
        offload: !d.dex_no_offload,
        leaf_admission: d.dex_leaf_admission,
        ms_node_ns: d.dex_node_ns,
        seed,
        ..Default::default()
    }
}

/// A repartitioning planned for the middle of a run (`--dex-repartition-at`):
/// the coroutine that completes run operation number `at` moves bound 0 to
/// `key` and waits for it, as the paper's single flush thread does.
pub(crate) struct Repartition {
    at: usize,
    key: Vec<u8>,
    done: AtomicUsize,
    outcome: Mutex<Option<Outcome>>,
}

/// What a mid-run repartitioning did.
struct Outcome {
    /// Virtual (sim) or wall ns from the call to the new bound in force.
    ns: u64,
    /// Dirty pages written back by its flushes.
    write_backs: u64,
    /// The error, if it failed (the run goes on with the old bounds).
    error: Option<String>,
}

/// The mid-run repartitioning of `--dex-repartition-at F`: after F of the
/// `run_ops`, bound 0 moves to the middle loaded key of CS 0's range.
pub(crate) fn repartition_plan(
    d: &DexArgs,
    cl: &DexCluster,
    load: &crate::ycsb::flat::Keys,
    run_ops: usize,
) -> Result<Option<Arc<Repartition>>> {
    let f = d.dex_repartition_at;
    if f == 0.0 {
        return Ok(None);
    }
    if !(f > 0.0 && f < 1.0) {
        return Err(anyhow!("--dex-repartition-at must lie in (0, 1), not {f}"));
    }
    if cl.num_cs() < 2 {
        return Err(anyhow!("--dex-repartition-at needs --cs 2 or more"));
    }
    let b0 = &cl.bounds()[0];
    let mut own: Vec<&[u8]> = load.iter().filter(|k| *k < &b0[..]).collect();
    own.sort_unstable();
    own.dedup();
    if own.len() < 2 {
        return Err(anyhow!(
            "--dex-repartition-at: CS 0 owns fewer than 2 loaded keys"
        ));
    }
    Ok(Some(Arc::new(Repartition {
        at: ((run_ops as f64 * f) as usize).max(1),
        key: own[own.len() / 2].to_vec(),
        done: AtomicUsize::new(0),
        outcome: Mutex::new(None),
    })))
}

impl Repartition {
    /// Counts one completed run operation; the one that reaches `at`
    /// repartitions through `tree` (CS 0 and CS 1 wait for it).
    pub(crate) async fn tick(&self, tree: &DexTree) {
        if self.done.fetch_add(1, SeqCst) + 1 != self.at {
            return;
        }
        let cl = tree.cluster();
        let wb = |cl: &DexCluster| (0..2).map(|c| cl.stats(c).cache.write_backs).sum::<u64>();
        let (w0, t0) = (wb(cl), dm_runtime::now_ns());
        let r = tree.repartition(0, self.key.clone()).await;
        *self.outcome.lock().unwrap() = Some(Outcome {
            ns: dm_runtime::now_ns() - t0,
            write_backs: wb(cl) - w0,
            error: r.err().map(|e| e.to_string()),
        });
    }

    /// The report's words and JSON for it.
    fn report(&self) -> (String, serde_json::Value) {
        let o = self.outcome.lock().unwrap();
        let Some(o) = o.as_ref() else {
            return (
                format!("repartitioning planned after {} ops did not run", self.at),
                json!({"after_ops": self.at, "ran": false}),
            );
        };
        let what = match &o.error {
            None => format!(
                "CS 0 handed the upper half of its range to CS 1 after {} ops in {:.1} us ({} dirty pages written back)",
                self.at,
                o.ns as f64 / 1e3,
                o.write_backs
            ),
            Some(e) => format!("repartitioning after {} ops failed: {e}", self.at),
        };
        let v = json!({"after_ops": self.at, "ran": o.error.is_none(), "ns": o.ns,
            "write_backs": o.write_backs, "error": o.error});
        (what, v)
    }
}

fn op_key(o: &Op) -> &[u8] {
    match o {
        Op::Read(k)
        | Op::Insert(k)
        | Op::Update(k)
        | Op::Remove(k)
        | Op::Scan(k, _)
        | Op::ReadModifyWrite(k) => k,
    }
}

/// Per CS, the indices of the load and run operations whose keys it owns.
pub(crate) type Routes = (Vec<Arc<Vec<usize>>>, Vec<Arc<Vec<usize>>>);

pub(crate) fn routes(cl: &DexCluster, load: &crate::ycsb::flat::Keys, run: &[Op]) -> Routes {
    let n = cl.num_cs() as usize;
    let split = |keys: &mut dyn Iterator<Item = &[u8]>| {
        let mut v = vec![Vec::new(); n];
        for (j, k) in keys.enumerate() {
            v[cl.owner(k) as usize].push(j);
        }
        v.into_iter().map(Arc::new).collect()
    };
    (split(&mut load.iter()), split(&mut run.iter().map(op_key)))
}

/// The report's `dex` line and JSON: totals over the CSs.
pub(crate) fn report(
    cl: &DexCluster,
    forward: bool,
    rp: Option<&Repartition>,
) -> (String, serde_json::Value) {
    let per: Vec<DexStats> = (0..cl.num_cs()).map(|c| cl.stats(c)).collect();
    let sum = |f: &dyn Fn(&DexStats) -> u64| per.iter().map(f).sum::<u64>();
    let (hits, misses) = (sum(&|s| s.cache.hits), sum(&|s| s.cache.misses));
    let frames: usize = (0..cl.num_cs()).map(|c| cl.cache_frames(c).0).sum();
    let cfg = cl.config();
    let mut line = format!(
        "{} partitions, offload level {}, {} traversals hit the cache, {} missed ({:.1}% hit); {} offloads ({} sent back), {} node fetches, {} scratch leaves, {} pages written back, {} forwarded; {} frames cached",
        cl.num_cs(),
        cfg.offload_level,
        hits,
        misses,
        100.0 * hits as f64 / (hits + misses).max(1) as f64,
        sum(&|s| s.offloads),
        sum(&|s| s.offload_fallbacks),
        sum(&|s| s.fetches),
        sum(&|s| s.cache.scratch_leaves),
        sum(&|s| s.cache.write_backs),
        sum(&|s| s.forwarded),
        frames
    );
    let mut v = json!({
        "partitions": cl.num_cs(), "offload_level": cfg.offload_level,
        "offload": cfg.offload, "leaf_admission": cfg.leaf_admission,
        "routing": if forward { "round-robin, forwarded" } else { "to the owner CS" },
        "hits": hits, "misses": misses,
        "hit_ratio": hits as f64 / (hits + misses).max(1) as f64,
        "admitted": sum(&|s| s.cache.admitted), "cooled": sum(&|s| s.cache.cooled),
        "evicted": sum(&|s| s.cache.evicted), "second_chances": sum(&|s| s.cache.second_chances),
        "refreshes": sum(&|s| s.cache.refreshes), "scratch_leaves": sum(&|s| s.cache.scratch_leaves),
        "write_backs": sum(&|s| s.cache.write_backs), "write_back_bytes": sum(&|s| s.cache.write_back_bytes),
        "offloads": sum(&|s| s.offloads), "offload_fallbacks": sum(&|s| s.offload_fallbacks),
        "fetches": sum(&|s| s.fetches), "forwarded": sum(&|s| s.forwarded),
        "avg_read_ns": per.iter().map(|s| s.avg_read_ns).collect::<Vec<_>>(),
        "avg_offload_ns": per.iter().map(|s| s.avg_offload_ns).collect::<Vec<_>>(),
        "cache_frames": frames,
    });
    if let Some(r) = rp {
        let (l, j) = r.report();
        line = format!("{line}; {l}");
        v["repartition"] = j;
    }
    (line, v)
}

//! `dm-bench ycsb`'s run, phase by phase ([`measure_with`]):
//! - [`options`]: what to run — the flags checked and the index resolved;
//! - [`crate::ycsb::plan`]: the operations and the values they write;
//! - [`cluster`]: the MS region and configuration, the index's
//!   configuration, DEX's cluster;
//! - [`index`]: each CS's caches and tables, index creation, each core's
//!   handle;
//! - [`phase`]: a core's coroutines over its share of the load and run;
//! - [`sim`] and [`real`]: load, run and verification on `sim`, or on one
//!   OS thread per core on `loopback` and `rdma`;
//! - [`peers`]: `--lease-ms`: membership, heartbeat, and barriers that
//!   stop waiting for a dead client process;
//! - [`verify`]: the final check of every key touched;
//! - [`report`] (with [`cache`] and [`locks`]): the text and the JSON.

mod cache;
mod cluster;
mod index;
mod locks;
mod options;
pub(crate) mod peers;
mod phase;
mod real;
mod report;
mod sim;
mod verify;

pub(crate) use options::check_sizes;

use self::cluster::Cluster;
use self::options::Choice;
use self::phase::{Bars, Layout, Out, Phase};
use self::report::Parts;
use crate::verbs_bench::FabricArg;
use crate::ycsb::baseline;
use crate::ycsb::plan::{build_plan, load_value, run_value, Plan};
use crate::ycsb::Args;
use anyhow::Result;
use dm_index::Index;
use dm_runtime::SimRuntime;
use std::rc::Rc;
use std::sync::Arc;

pub fn run(a: Args) -> Result<()> {
    measure(a).map(|_| ())
}

/// [`run`], returning the report (the JSON that `--json` writes).
pub fn measure(a: Args) -> Result<serde_json::Value> {
    measure_with(a, None)
}

/// The warmed-up sim cluster that [`measure_with`] hands its hook after the
/// run phase and the final verification (`dm-bench trace` runs one traced
/// operation there while every client is idle).
pub(crate) struct Warm<'a> {
    pub rt: &'a mut SimRuntime,
    /// (CS, thread) of each core, in the order of `sim_cores` and `trees`.
    pub places: &'a [(u16, u16)],
    pub sim_cores: &'a [dm_runtime::SimCore],
    /// Each core's index handle (with its CS's caches, as the run used them).
    pub trees: &'a [Rc<Index>],
}

/// What runs on [`Warm`] (sim only).
pub(crate) type WarmHook<'h> = &'h mut dyn FnMut(Warm<'_>) -> Result<()>;

/// A run's state from set-up to report: the flags, the index chosen, the
/// cluster, the operations, who runs which, and each CS's caches.
struct Bench {
    a: Args,
    c: Choice,
    cl: Cluster,
    plan: Arc<Plan>,
    layout: Layout,
}

/// What the load, run and verification phases measured, on any fabric.
struct Ran {
    load: Out,
    run: Out,
    /// Load and run phase, virtual (sim) or wall ns.
    load_ns: u64,
    run_ns: u64,
    /// Keys verified, mismatches, the first.
    verified: (u64, u64, Option<String>),
    /// Real fabrics: the core threads' CPU time in the run phase.
    run_cpu: Option<(u64, u64)>,
    fabric_detail: serde_json::Value,
    /// Bytes of the MSs' chunks (sim, loopback).
    ms_used: u64,
    /// Run phase (sim): admissions through the modelled central FIFO of
    /// SMART's ART cache (`--smart-fifo-ns`) and the virtual ns they
    /// waited for or held it, summed over the cores; (0, 0) without it.
    run_fifo: (u64, u64),
}

/// [`measure`]; on sim, `after` then runs on the cluster as the run and
/// the verification left it (caches warm, every task finished).
pub(crate) fn measure_with(mut a: Args, after: Option<WarmHook<'_>>) -> Result<serde_json::Value> {
    options::check_sizes(&a)?;
    let (ci, cn) = options::check_cluster(&mut a, after.is_some())?;
    #[cfg(feature = "rdma")]
    let rdma_fabric = match a.fabric {
        FabricArg::Rdma => Some(crate::fabric_arg::connect(&a.ms_spec, &a.rdma)?),
        _ => None,
    };
    #[cfg(not(feature = "rdma"))]
    if a.fabric == FabricArg::Rdma {
        return Err(crate::fabric_arg::no_rdma());
    }
    let c = options::choose_index(&mut a, (ci, cn))?;
    let mut plan = build_plan(&a)?;
    // rdma: the chunk size and caps the memory servers and the NIC report.
    #[cfg(feature = "rdma")]
    let rdma = {
        use dm_verbs::Fabric;
        rdma_fabric
            .as_ref()
            .map(|f| (f.ms_config().chunk_bytes, f.caps()))
    };
    #[cfg(not(feature = "rdma"))]
    let rdma = None;
    let cl = cluster::set_up(&a, &c, &mut plan, rdma)?;
    let plan = Arc::new(plan);
    let layout = Layout::new(&a, ci, cl.dexcl(), &plan);
    let b = Bench {
        a,
        c,
        cl,
        plan,
        layout,
    };
    let wall = std::time::Instant::now();
    let bars = Bars::new(&b.plan);
    let ran = match b.a.fabric {
        FabricArg::Sim => b.run_sim(&bars, after)?,
        FabricArg::Loopback => b.run_loopback(&bars)?,
        #[cfg(feature = "rdma")]
        FabricArg::Rdma => b.run_rdma(rdma_fabric.as_ref().expect("connected above"), &bars)?,
        #[cfg(not(feature = "rdma"))]
        FabricArg::Rdma => unreachable!("rejected above"),
    };
    let cache = cache::CacheReport::of(&b, &ran);
    let wall_s = wall.elapsed().as_secs_f64();
    let (baselines, harness) = b.baselines();
    report::report(
        &b,
        ran,
        Parts {
            cache,
            wall_s,
            baselines,
            harness,
        },
    )
}

impl Bench {
    /// --baseline: the same stream against local maps (crate::ycsb::baseline),
    /// each core thread's operations on one OS thread; and on wall-clock
    /// fabrics the harness pass (`baseline::harness`: the stream against a
    /// no-op index, what the bench's own bookkeeping costs).
    fn baselines(&self) -> (Vec<baseline::Baseline>, Option<crate::cpu_time::CpuCost>) {
        let (a, plan, l) = (&self.a, &self.plan, &self.layout);
        let (cores, coros, total, ncores) = (&l.cores, l.coros, l.total, l.cores.len());
        let by_thread = |ph: Phase, n: usize| -> Vec<Vec<usize>> {
            (0..ncores)
                .map(|i| {
                    let (first, all, ids) = l.group(i, cores[i], ph, coros, total);
                    baseline::core_ops(first, coros, all, ids.as_deref().map(|v| &v[..]), n)
                })
                .collect()
        };
        let real = a.fabric != FabricArg::Sim;
        if a.baseline.is_empty() && !real {
            return (Vec::new(), None);
        }
        // One stream (its per-thread lists) for every map and the harness.
        let stream = baseline::Stream {
            load: &plan.load,
            writes: &plan.writes,
            run: &plan.run,
            written: &plan.written,
            load_value,
            run_value,
            load_by_thread: (a.load != "bulk").then(|| by_thread(Phase::Load, plan.load.len())),
            // The measured operations only (not `--warmup`'s).
            run_by_thread: by_thread(Phase::Run, plan.run.len())
                .into_iter()
                .map(|v| v.into_iter().filter(|&j| j >= plan.warm).collect())
                .collect(),
        };
        let maps = a
            .baseline
            .iter()
            .map(|&m| baseline::run(m, &stream))
            .collect();
        (maps, real.then(|| baseline::harness(&stream)))
    }
}

//! `dm-bench verbs`: every CS coroutine issues a random mix of READ, WRITE,
//! CAS-increment and FAA against chunks allocated on every MS, then a final
//! task verifies memory through the same fabric:
//!
//! - every FAA and every CAS-increment landed exactly once (counter sums equal
//!   the operation counts);
//! - every 8-byte word of every data slot holds 0 or a value whose high 32 bits
//!   name that slot (no byte landed in the wrong place, torn READs included).
//!
//! What lives where: this module, the flags and the run on each fabric;
//! [`ops`]: the coroutines' operations, the chunk layout and the final check
//! of memory; [`report`]: the totals, the summary and the JSON report.

mod ops;
mod report;

use crate::fabric_arg::{check_ms, parse_ms, MsArg, RdmaArgs};
use crate::report::PerftestArgs;
use anyhow::{bail, Result};
use clap::ValueEnum;
use dm_runtime::JoinError;
use dm_runtime::{ExecConfig, Executor, SimRuntime};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::sim::{Faults, SimConfig, SimFabric, TearGranularity};
use dm_verbs::{Fabric, MsConfig};
use ops::{run_core, setup, verify, CoroOut, Plan, DATA_OFF};
use report::{report, Totals};
use serde_json::json;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum FabricArg {
    Sim,
    Loopback,
    /// Real verbs to `dm-memserver` processes (build with `--features rdma`).
    Rdma,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum TearArg {
    Off,
    Line,
    Word,
}

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    #[arg(long, value_enum, default_value = "sim")]
    pub fabric: FabricArg,
    /// Memory servers: a count (sim, loopback) or HOST:PORT[,HOST:PORT..]
    /// of dm-memserver processes (rdma; MS id = position).
    #[arg(long = "ms", default_value = "2", value_parser = parse_ms)]
    pub ms_spec: MsArg,
    /// Number of memory servers (from `--ms`).
    #[arg(skip)]
    pub ms: u16,
    #[command(flatten)]
    pub rdma: RdmaArgs,
    #[command(flatten)]
    pub perftest: PerftestArgs,
    /// Compute servers.
    #[arg(long, default_value_t = 2)]
    pub cs: u16,
    /// Cores (threads) per compute server.
    #[arg(long, default_value_t = 4)]
    pub threads: u16,
    /// Coroutines (tasks) per thread.
    #[arg(long, default_value_t = 8)]
    pub coros: u32,
    /// Total operations over all coroutines (at least 1), exactly: each
    /// coroutine runs ops / coroutines, the first ops % coroutines one more.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: u64,
    /// Operation mix in percent: read,write,cas,faa.
    #[arg(long, default_value = "50,30,10,10")]
    pub mix: String,
    /// Bytes per READ/WRITE (multiple of 8).
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    /// Chunk size (and working set per MS), KiB.
    #[arg(long, default_value_t = 1024)]
    pub chunk_kib: u64,
    /// Torn-READ model on sim (loopback and rdma READs tear as the
    /// hardware tears them: only the default there).
    #[arg(long, value_enum, default_value = "word")]
    pub tear: TearArg,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

type RunOut = (Vec<CoroOut>, u64, serde_json::Value, (u64, u64, u64));

/// The run on a real fabric (loopback, rdma): setup and verification on one
/// executor over `setup_q`, the operations on one OS thread per core.
fn run_threads_fabric<F: Fabric + Send + Sync>(
    fabric: &F,
    setup_q: F::Queues,
    a: &Args,
    cores: &[(u16, u16)],
    mix: [u32; 4],
    chunk_bytes: u64,
) -> Result<RunOut> {
    let mut setup_ex = Executor::new(setup_q, a.ms, ExecConfig::default());
    let chunks = setup_ex.block_on(setup(a.ms, chunk_bytes))?;
    let plan = Plan {
        mix,
        size: a.size,
        chunks,
        num_ms: a.ms,
        chunk_bytes,
        seed: a.seed,
        ops: a.ops,
        tasks: cores.len() as u64 * a.coros as u64,
    };
    let t0 = std::time::Instant::now();
    let coros = a.coros;
    let outs: Vec<CoroOut> = dm_runtime::run_threads(fabric, cores, true, |i| {
        run_core(plan, i as u64 * coros as u64, coros)
    })
    .into_iter()
    .flatten()
    .collect();
    let el = t0.elapsed().as_nanos() as u64;
    let verified = setup_ex.block_on(verify(plan))?;
    Ok((outs, el, json!({}), verified))
}

pub fn run(mut a: Args) -> Result<()> {
    let (mix, chunk_bytes) = validate(&mut a)?;
    let ms_cfg = MsConfig {
        region_bytes: 4096 + 4 * chunk_bytes,
        chunk_bytes,
        ..Default::default()
    };
    let cores: Vec<(u16, u16)> = (0..a.cs)
        .flat_map(|cs| (0..a.threads).map(move |t| (cs, t)))
        .collect();
    let wall = std::time::Instant::now();
    let (outs, elapsed_ns, extra, verified) = match a.fabric {
        FabricArg::Sim => run_sim(&a, ms_cfg, &cores, mix, chunk_bytes)?,
        FabricArg::Loopback => {
            let fabric = LoopbackFabric::new(LoopbackConfig {
                num_ms: a.ms,
                ms: ms_cfg,
                ..Default::default()
            });
            let q = fabric.open_queues(0, 0);
            run_threads_fabric(&fabric, q, &a, &cores, mix, chunk_bytes)?
        }
        #[cfg(feature = "rdma")]
        FabricArg::Rdma => {
            let fabric = crate::fabric_arg::connect(&a.ms_spec, &a.rdma)?;
            let q = fabric.try_open_queues(0, 0)?;
            // The memory servers decide the chunk size.
            let chunk_bytes = fabric.ms_config().chunk_bytes;
            if chunk_bytes < DATA_OFF + a.size as u64 {
                bail!("the memory servers' chunks ({chunk_bytes} bytes) are too small for the counters and one data slot");
            }
            let (o, el, _, v) = run_threads_fabric(&fabric, q, &a, &cores, mix, chunk_bytes)?;
            (
                o,
                el,
                json!({"device": fabric.device_name(), "chunk_bytes": chunk_bytes}),
                v,
            )
        }
        #[cfg(not(feature = "rdma"))]
        FabricArg::Rdma => return Err(crate::fabric_arg::no_rdma()),
    };
    let wall_s = wall.elapsed().as_secs_f64();
    let totals = Totals::of(&outs)?;
    report(&a, &totals, elapsed_ns, extra, verified, wall_s)
}

/// `--chunk-kib` at most: 1 GiB.
const MAX_CHUNK_KIB: u64 = 1 << 20;

/// Checks the flags and sets `a.ms`: the mix (read, write, cas, faa
/// percentages) and the chunk size in bytes.
fn validate(a: &mut Args) -> Result<([u32; 4], u64)> {
    a.ms = a.ms_spec.count();
    check_ms(&a.ms_spec, a.fabric == FabricArg::Rdma)?;
    a.rdma.check(a.fabric == FabricArg::Rdma)?;
    let mix = crate::fabric_arg::parse_percentages::<4>(&a.mix, "read,write,cas,faa")?;
    a.perftest.check(a.fabric == FabricArg::Sim)?;
    if a.fabric != FabricArg::Sim && a.tear != TearArg::Word {
        bail!("--tear sets the sim fabric's torn READs: on --fabric loopback and rdma READs tear as the hardware tears them");
    }
    if a.size == 0 || !a.size.is_multiple_of(8) {
        bail!("--size must be a positive multiple of 8");
    }
    if a.ms == 0 || a.ms > 64 || a.cs == 0 || a.threads == 0 || a.coros == 0 {
        bail!("--ms must be 1..=64 and --cs, --threads, --coros at least 1");
    }
    let cores = a.cs as u128 * a.threads as u128;
    crate::limits::check_shape(None, cores, cores * a.coros as u128, 32 << 10)?;
    crate::limits::at_most("--ops", a.ops, crate::limits::MAX_COUNT, "verbs of one run")?;
    crate::limits::at_most(
        "--chunk-kib",
        a.chunk_kib,
        MAX_CHUNK_KIB,
        "a chunk of at most 1 GiB per MS",
    )?;
    let chunk_bytes = a.chunk_kib << 10;
    // The final check reads every chunk: each MS's region is touched.
    crate::limits::fits_memory(
        &format!("--ms {} regions of 4 x --chunk-kib {}", a.ms, a.chunk_kib),
        a.ms as u128 * (4096 + 4 * chunk_bytes as u128),
        "take a smaller --chunk-kib or fewer --ms",
    )?;
    if chunk_bytes < DATA_OFF + a.size as u64 {
        bail!("--chunk-kib too small for the counters and one data slot");
    }
    Ok((mix, chunk_bytes))
}

/// The run on sim: setup, the cores' coroutines and verification on
/// simulated cores, timed by the virtual clock.
fn run_sim(
    a: &Args,
    ms_cfg: MsConfig,
    cores: &[(u16, u16)],
    mix: [u32; 4],
    chunk_bytes: u64,
) -> Result<RunOut> {
    let tear = match a.tear {
        TearArg::Off => TearGranularity::Off,
        TearArg::Line => TearGranularity::CacheLine,
        TearArg::Word => TearGranularity::Word,
    };
    let cfg = SimConfig {
        num_ms: a.ms,
        ms: ms_cfg,
        faults: Faults {
            tear,
            ..Default::default()
        },
        seed: a.seed,
        ..Default::default()
    };
    let fabric = SimFabric::new(cfg);
    let mut rt = SimRuntime::new(fabric.clone());
    let sim_cores: Vec<_> = cores.iter().map(|&(cs, t)| rt.add_core(cs, t)).collect();
    let chunks = rt
        .block_on(sim_cores[0], setup(a.ms, chunk_bytes))
        .unwrap()?;
    let plan = Plan {
        mix,
        size: a.size,
        chunks,
        num_ms: a.ms,
        chunk_bytes,
        seed: a.seed,
        ops: a.ops,
        tasks: cores.len() as u64 * a.coros as u64,
    };
    let t0 = fabric.now_ns();
    let hs: Vec<_> = sim_cores
        .iter()
        .enumerate()
        .map(|(i, &c)| rt.spawn_on(c, run_core(plan, i as u64 * a.coros as u64, a.coros)))
        .collect();
    let t1 = rt.run();
    let outs: Vec<CoroOut> = hs
        .into_iter()
        .flat_map(|h| {
            h.try_take()
                .expect("core finished")
                .unwrap_or_else(JoinError::resume)
        })
        .collect();
    let verified = rt.block_on(sim_cores[0], verify(plan)).unwrap()?;
    let extra = json!({
        "trace_hash": format!("{:016x}", fabric.trace_hash()),
        "sim_verbs_executed": fabric.verbs_executed(),
        "net": format!("{:?}", cfg.net),
        "tear": format!("{tear:?}"),
    });
    Ok((outs, t1 - t0, extra, verified))
}

//! `dm-bench sim-speed`: how many simulated verbs the `sim` backend executes per
//! wall-clock second on one OS thread (one core), with the default network
//! model and torn READs on. Workload: `cores` simulated cores x `coros` tasks,
//! each looping over 64-byte READs, WRITEs and FAAs on one MS.
//!
//! Every repetition builds a fresh cluster and runs the same workload; the best
//! (highest) rate is reported, together with the run's trace hash, which must be
//! the same in every repetition (and across changes that only make the
//! simulator faster).

use crate::report::write_json;
use anyhow::{ensure, Result};
use dm_runtime::SimRuntime;
use dm_verbs::ms::SUPERBLOCK_BYTES;
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::{GlobalAddr, MsConfig};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Simulated CS cores (at least 1).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub cores: u16,
    /// Tasks per core (at least 1).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub coros: u32,
    /// Verbs per task (at least 1).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub verbs: u64,
    /// Repetitions (at least 1); the best (highest) rate is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One run: (verbs executed, wall seconds, virtual ns, trace hash).
fn run_once(a: &Args) -> (u64, f64, u64, u64) {
    let cfg = SimConfig {
        num_ms: 2,
        ms: MsConfig {
            region_bytes: 16 << 20,
            chunk_bytes: 1 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    let fabric = SimFabric::new(cfg);
    let mut rt = SimRuntime::new(fabric.clone());
    for c in 0..a.cores {
        let core = rt.add_core(c / 8, c % 8);
        for t in 0..a.coros {
            let n = a.verbs;
            rt.spawn_on(core, async move {
                let a = GlobalAddr::new(
                    ((c as u32 + t) % 2) as u16,
                    SUPERBLOCK_BYTES + 64 * (t as u64 % 1024),
                );
                for i in 0..n {
                    match i % 3 {
                        0 => drop(dm_runtime::read(a, 64).await.unwrap()),
                        1 => dm_runtime::write(a, vec![i as u8; 64]).await.unwrap(),
                        _ => drop(dm_runtime::faa(a, 1).await.unwrap()),
                    }
                }
            });
        }
    }
    let t = Instant::now();
    let virt = rt.run();
    let secs = t.elapsed().as_secs_f64();
    (fabric.verbs_executed(), secs, virt, fabric.trace_hash())
}

pub fn run(a: Args) -> Result<()> {
    use crate::limits::{at_most, check_shape, MAX_COUNT, MAX_REPS};
    let tasks = a.cores as u128 * a.coros as u128;
    check_shape(None, a.cores as u128, tasks, 32 << 10)?;
    let verbs = tasks * a.verbs as u128;
    at_most(
        "--cores x --coros x --verbs",
        verbs.min(u64::MAX as u128) as u64,
        MAX_COUNT,
        "verbs of one repetition",
    )?;
    at_most(
        "--reps",
        a.reps as u64,
        MAX_REPS,
        "repetitions; the best one is reported",
    )?;
    let runs: Vec<_> = (0..a.reps).map(|_| run_once(&a)).collect();
    let (verbs, _, virt, hash) = runs[0];
    ensure!(
        runs.iter().all(|r| (r.0, r.2, r.3) == (verbs, virt, hash)),
        "sim-speed: repetitions disagree (the simulation is not deterministic)"
    );
    let secs = runs.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let rate = verbs as f64 / secs;
    println!(
        "dm-bench sim-speed: {verbs} verbs simulated in {secs:.3} s wall ({:.2} M verbs/s), {:.3} ms virtual, {} cores x {} tasks, trace {hash:016x}, best of {}",
        rate / 1e6,
        virt as f64 / 1e6,
        a.cores,
        a.coros,
        runs.len()
    );
    write_json(
        a.json.as_deref(),
        &json!({"sim_verbs_per_sec": rate, "verbs": verbs, "wall_seconds": secs, "virtual_ns": virt, "trace_hash": format!("{hash:016x}")}),
    )
}

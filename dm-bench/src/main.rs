//! `dm-bench`: benchmarks and checks for the dm workspace.
//!
//! Subcommands (see `dm-bench --help`):
//! - `ycsb`: the main job: load, run a YCSB or Sherman workload against an
//!   index (`fg`, Sherman's rungs, `smart`), verify every key touched, report;
//!   on loopback also CPU ns per operation, and `--baseline` (the same stream
//!   against a local `BTreeMap` or skip list) for the ratio.
//! - `check`: concurrent random operations on `sim` with faults, the history
//!   checked for linearizability (per key, Wing & Gong) and scan consistency.
//! - `verbs`: the main job until the B+tree lands: a cluster of CS coroutines
//!   issuing READ/WRITE/CAS/FAA to the memory servers on `sim` or `loopback`,
//!   reporting throughput, latency and per-operation verb accounting, and
//!   verifying the final memory state.
//! - `runtime`: ns per task switch of dm-runtime vs tokio's `LocalSet`.
//! - `sim-speed`: simulated verbs per wall second on one core.
//! - `calibrate`: the papers' hardware facts (RTT, READ IOPS and bandwidth,
//!   on-chip CAS, lock collapse) measured on `sim` with a NIC preset ([`calibrate`]).
//! - `figure`: a paper's headline figure or table at its cluster shape on
//!   `sim` ([`figure`]): CSV, SVG plot, the table next to the paper's numbers.
//! - `trace`: one operation on a warmed-up index on `sim`, as a timeline
//!   of every WR, doorbell, completion, task switch and lock wait in
//!   virtual ns, and an SVG sequence diagram (CS core, CS NIC, MSs)
//!   ([`trace_cmd`]; `docs/techniques.md` shows each paper technique with it).
//! - `workload`: statistics of a YCSB/Sherman operation stream, generated
//!   ([`ycsb`]) or read from an index-microbench trace.

mod calibrate;
mod check;
mod cpu_time;
mod fabric_arg;
mod figure;
mod kv;
mod report;
mod runtime_bench;
mod runtime_lean;
mod sim_speed;
mod trace_cmd;
mod verbs_bench;
mod workload_cmd;
mod ycsb;
mod ycsb_baseline;
mod ycsb_bench;
mod ycsb_dex;
mod ycsb_head;

/// The bench's allocator. The executor's batching (a post list of up to 256
/// READs whose result buffers are freed as their tasks run) overflows
/// glibc's per-thread cache of 7 chunks per size, and every free and malloc
/// past it took glibc's slower paths: 21 % of `runtime --only dm-verb` in
/// `perf`. mimalloc's free lists have no such bound. Same allocator for every
/// runtime in a `dm-bench runtime` run; measured effect in the README.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "dm-bench",
    version,
    about = "Benchmarks and checks for range indexes on disaggregated memory"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The main job: load, then run a YCSB/Sherman workload against an index, then verify.
    Ycsb(Box<ycsb_bench::Args>),
    /// Concurrent random operations on sim with faults, checked for linearizability.
    Check(check::Args),
    /// Verb micro-benchmark over the fabric and runtime (sim or loopback).
    Verbs(verbs_bench::Args),
    /// Task-switch cost: dm-runtime vs tokio current-thread + LocalSet, on loopback.
    Runtime(runtime_bench::Args),
    /// Simulator speed: simulated verbs per wall second on one core.
    SimSpeed(sim_speed::Args),
    /// The papers' hardware facts measured on sim with a NIC preset (docs/simulator.md).
    Calibrate(calibrate::Args),
    /// Statistics of a workload's operation stream (generated or from a trace).
    Workload(workload_cmd::Args),
    /// A paper's headline figure on sim: CSV, SVG and the table (`figure list`).
    Figure(figure::Args),
    /// One operation on a warmed-up index on sim: its timeline and an SVG sequence diagram.
    Trace(trace_cmd::Args),
}

fn main() {
    // A core thread that fails (an index error surfaces as a panic in the
    // bench's tasks) may hold remote locks its tasks took: the rest of this
    // process, and other client processes, would wait on them until their
    // bounds run out. Report the failure and end the whole process at once.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        eprintln!("dm-bench: error: a core thread failed; stopping");
        std::process::exit(101);
    }));
    // The fabric and the indexes report trouble that is not an error of the
    // operation at hand through `tracing` warnings and errors (the rdma
    // backend: QP failures and retransmissions; the B+trees: a node lock
    // still taken after many attempts, a separator that keeps missing its
    // parent). Without a subscriber they would vanish. With the rdma
    // feature, RUST_LOG overrides the level.
    #[cfg(not(feature = "rdma"))]
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    #[cfg(feature = "rdma")]
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Ycsb(a) => ycsb_bench::run(*a),
        Cmd::Check(a) => check::run(a),
        Cmd::Verbs(a) => verbs_bench::run(a),
        Cmd::Runtime(a) => runtime_bench::run(a),
        Cmd::SimSpeed(a) => sim_speed::run(a),
        Cmd::Calibrate(a) => calibrate::run(a),
        Cmd::Workload(a) => workload_cmd::run(a),
        Cmd::Figure(a) => figure::run(a),
        Cmd::Trace(a) => trace_cmd::run(a),
    };
    if let Err(e) = r {
        eprintln!("dm-bench: error: {e:#}");
        std::process::exit(1);
    }
}

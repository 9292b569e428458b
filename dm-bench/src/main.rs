//! `dm-bench`: the benchmarks and checks of the dm workspace, one binary
//! with a subcommand each (`dm-bench --help`); `dm-memserver`
//! (`src/bin/dm-memserver.rs`) is the memory-server process of
//! `--fabric rdma`.
//!
//! Subcommands and their modules:
//! - `ycsb` ([`ycsb`]): load, run a YCSB or Sherman workload against an index
//!   (B+tree family, radix family, DEX, Dolphin, NAM designs), verify every
//!   key touched, report; `--baseline` runs local ordered maps beside it.
//! - `check` ([`check`]): concurrent random operations (on `sim` with
//!   faults), the history checked for linearizability and scan consistency.
//! - `verbs` ([`verbs_bench`]): CS coroutines issuing READ/WRITE/CAS/FAA to
//!   the MSs: throughput, latency, verbs per operation, final memory checked.
//! - `runtime` ([`runtime_bench`], [`runtime_lean`]): ns per task switch of
//!   dm-runtime vs tokio's `LocalSet` and a minimal executor.
//! - `sim-speed` ([`sim_speed`]): simulated verbs per wall second on one core.
//! - `calibrate` ([`calibrate`]): the papers' hardware facts (RTT, READ IOPS
//!   and bandwidth, on-chip CAS, lock collapse) on `sim` with a NIC preset.
//! - `figure` ([`figure`]): a paper's headline figure or table at its
//!   cluster shape on `sim`: CSV, SVG plot, the table next to the paper's.
//! - `trace` ([`trace_cmd`]): one operation on a warmed-up index on `sim` as
//!   a timeline of every WR, doorbell, completion, task switch and lock wait,
//!   and an SVG sequence diagram (`docs/techniques.md`).
//! - `workload` ([`workload_cmd`]): statistics of an operation stream,
//!   generated ([`ycsb`]) or read from an index-microbench trace.
//!
//! Shared pieces: [`fabric_arg`] (`--fabric`, `--ms`, the RDMA flags,
//! `--client I/N`), [`barrier`] (where `--client I/N` processes meet),
//! [`kv`] (the `--index` names, from `dm_index::IndexKind`, and the
//! checkers' get/insert/update/remove/scan interface), [`report`] (verb
//! accounting and `--json`), [`cpu_time`] (the core threads' CPU time on
//! the wall-clock fabrics), [`limits`] (sizes checked against fixed caps
//! and the machine's memory before anything is allocated). `ycsb` and
//! `trace` build their index through the library (`dm_index::Instance`:
//! the family configuration derived from the fabric and the flags, each
//! CS's caches and tables, each core's `dm_index::Index`); `check` still
//! builds each family's handles itself.

#![warn(clippy::undocumented_unsafe_blocks)]

mod alloc_count;
mod barrier;
mod calibrate;
mod check;
mod cpu_time;
mod fabric_arg;
mod figure;
mod kv;
mod limits;
mod report;
mod runtime_bench;
mod runtime_lean;
mod sim_speed;
mod trace_cmd;
mod verbs_bench;
mod workload_cmd;
mod ycsb;

/// The bench's allocator. The executor's batching (a post list of up to 256
/// READs whose result buffers are freed as their tasks run) overflows
/// glibc's per-thread cache of 7 chunks per size, and every free and malloc
/// past it took glibc's slower paths: 21 % of `runtime --only dm-verb` in
/// `perf`. mimalloc's free lists have no such bound. Same allocator for every
/// runtime in a `dm-bench runtime` run; measured effect in
/// `docs/experiments/runtime.md`.
/// Wrapped to count each thread's allocations ([`alloc_count`]:
/// `allocs_per_op` in `ycsb`'s report).
#[global_allocator]
static GLOBAL: alloc_count::Counting<mimalloc::MiMalloc> =
    alloc_count::Counting(mimalloc::MiMalloc);

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
    Ycsb(Box<ycsb::Args>),
    /// Concurrent random operations on sim with faults, checked for linearizability.
    Check(Box<check::Args>),
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
        Cmd::Ycsb(a) => ycsb::run(*a),
        Cmd::Check(a) => check::run(*a),
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

//! `dm-bench verbs`: every CS coroutine issues a random mix of READ, WRITE,
//! CAS-increment and FAA against chunks allocated on every MS, then a final
//! task verifies memory through the same fabric:
//!
//! - every FAA and every CAS-increment landed exactly once (counter sums equal
//!   the operation counts);
//! - every 8-byte word of every data slot holds 0 or a value whose high 32 bits
//!   name that slot (no byte landed in the wrong place, torn READs included).
//!
//! Chunk layout on each MS (one chunk per MS, from the chunk-allocation RPC):
//! `[0, 8 KiB)` FAA counters, `[8 KiB, 16 KiB)` CAS counters (1024 u64 each),
//! `[16 KiB, chunk end)` data slots of `--size` bytes.

use crate::fabric_arg::{check_ms, parse_ms, MsArg, RdmaArgs};
use crate::report::{efficiency, per_op, verbs_posted, write_json, PerftestArgs};
use anyhow::{bail, Result};
use clap::ValueEnum;
use dm_runtime::alloc::ChunkAlloc;
use dm_runtime::{cas, faa, read, write, ExecConfig, Executor, SimRuntime};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::sim::{Faults, SimConfig, SimFabric, TearGranularity};
use dm_verbs::{Fabric, GlobalAddr, MsConfig, VerbStats};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::path::PathBuf;

const COUNTERS: u64 = 1024;
const DATA_OFF: u64 = 16 << 10;

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
    /// Total operations over all coroutines.
    #[arg(long, default_value_t = 200_000)]
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
    /// Torn-READ model on sim.
    #[arg(long, value_enum, default_value = "word")]
    pub tear: TearArg,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Clone, Copy)]
struct Plan {
    mix: [u32; 4],
    size: u32,
    chunks: [GlobalAddr; 64],
    num_ms: u16,
    chunk_bytes: u64,
    seed: u64,
}

/// What one coroutine did.
struct CoroOut {
    hist: Histogram<u64>,
    stats: VerbStats,
    counts: [u64; 4],
    bad_words: u64,
    /// The verb error that stopped this coroutine early, if any.
    error: Option<dm_verbs::VerbError>,
}

async fn coroutine(plan: Plan, id: u64, ops: u64) -> CoroOut {
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut counts = [0u64; 4];
    let mut bad_words = 0;
    let slots = (plan.chunk_bytes - DATA_OFF) / plan.size as u64;
    let before = dm_runtime::task_stats();
    let mut error = None;
    for seq in 0..ops {
        if let Err(e) = one_op(
            &plan,
            &mut rng,
            seq,
            &mut counts,
            &mut bad_words,
            &mut hist,
            slots,
        )
        .await
        {
            error = Some(e);
            break;
        }
    }
    CoroOut {
        hist,
        stats: dm_runtime::task_stats().since(&before),
        counts,
        bad_words,
        error,
    }
}

async fn one_op(
    plan: &Plan,
    rng: &mut ChaCha8Rng,
    seq: u64,
    counts: &mut [u64; 4],
    bad_words: &mut u64,
    hist: &mut Histogram<u64>,
    slots: u64,
) -> Result<(), dm_verbs::VerbError> {
    {
        let base = plan.chunks[rng.gen_range(0..plan.num_ms) as usize];
        let p = rng.gen_range(0..100u32);
        let t0 = dm_runtime::now_ns();
        let kind = if p < plan.mix[0] {
            0
        } else if p < plan.mix[0] + plan.mix[1] {
            1
        } else if p < plan.mix[0] + plan.mix[1] + plan.mix[2] {
            2
        } else {
            3
        };
        match kind {
            0 | 1 => {
                let slot = rng.gen_range(0..slots);
                let addr = base.add(DATA_OFF + slot * plan.size as u64);
                if kind == 0 {
                    let data = read(addr, plan.size).await?;
                    *bad_words += check_slot(&data, slot);
                } else {
                    let word = (slot << 32) | (seq & 0xffff_ffff);
                    let data: Vec<u8> = (0..plan.size / 8)
                        .flat_map(|_| word.to_le_bytes())
                        .collect();
                    write(addr, data).await?;
                }
            }
            2 => {
                let a = base.add(8 * COUNTERS + 8 * rng.gen_range(0..COUNTERS));
                let mut old = u64::from_le_bytes(read(a, 8).await?.try_into().unwrap());
                loop {
                    let seen = cas(a, old, old + 1).await?;
                    if seen == old {
                        break;
                    }
                    old = seen;
                }
            }
            _ => {
                let a = base.add(8 * rng.gen_range(0..COUNTERS));
                faa(a, 1).await?;
            }
        }
        counts[kind] += 1;
        hist.record((dm_runtime::now_ns() - t0).max(1)).unwrap();
    }
    Ok(())
}

fn check_slot(data: &[u8], slot: u64) -> u64 {
    data.chunks(8)
        .filter(|w| {
            let v = u64::from_le_bytes((*w).try_into().unwrap());
            v != 0 && v >> 32 != slot
        })
        .count() as u64
}

/// Allocates one chunk on every MS.
async fn setup(num_ms: u16, chunk_bytes: u64) -> Result<[GlobalAddr; 64], dm_verbs::VerbError> {
    let a = ChunkAlloc::new(num_ms, chunk_bytes, 0);
    let mut chunks = [GlobalAddr::NULL; 64];
    for c in chunks.iter_mut().take(num_ms as usize) {
        *c = a.alloc(chunk_bytes, 4096).await?;
    }
    Ok(chunks)
}

/// Sums of FAA and CAS counters and bad data words, read back through the fabric.
async fn verify(plan: Plan) -> Result<(u64, u64, u64), dm_verbs::VerbError> {
    let (mut faa_sum, mut cas_sum, mut bad) = (0, 0, 0);
    for &base in plan.chunks.iter().take(plan.num_ms as usize) {
        let c = read(base, (16 * COUNTERS) as u32).await?;
        for (i, w) in c.chunks(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().unwrap());
            if (i as u64) < COUNTERS {
                faa_sum += v;
            } else {
                cas_sum += v;
            }
        }
        let data = read(base.add(DATA_OFF), (plan.chunk_bytes - DATA_OFF) as u32).await?;
        for (slot, s) in data.chunks(plan.size as usize).enumerate() {
            bad += check_slot(s, slot as u64);
        }
    }
    Ok((faa_sum, cas_sum, bad))
}

async fn run_core(plan: Plan, first_id: u64, coros: u32, ops_per: u64) -> Vec<CoroOut> {
    let hs: Vec<_> = (0..coros as u64)
        .map(|i| dm_runtime::spawn(coroutine(plan, first_id + i, ops_per)))
        .collect();
    let mut out = Vec::new();
    for h in hs {
        out.push(h.await);
    }
    out
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
    ops_per: u64,
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
    };
    let t0 = std::time::Instant::now();
    let coros = a.coros;
    let outs: Vec<CoroOut> = dm_runtime::run_threads(fabric, cores, true, |i| {
        run_core(plan, i as u64 * coros as u64, coros, ops_per)
    })
    .into_iter()
    .flatten()
    .collect();
    let el = t0.elapsed().as_nanos() as u64;
    let verified = setup_ex.block_on(verify(plan))?;
    Ok((outs, el, json!({}), verified))
}

pub fn run(mut a: Args) -> Result<()> {
    a.ms = a.ms_spec.count();
    check_ms(&a.ms_spec, a.fabric == FabricArg::Rdma)?;
    let mix = crate::fabric_arg::parse_percentages::<4>(&a.mix, "read,write,cas,faa")?;
    a.perftest.check(a.fabric == FabricArg::Sim)?;
    if a.size == 0 || !a.size.is_multiple_of(8) {
        bail!("--size must be a positive multiple of 8");
    }
    if a.ms == 0 || a.ms > 64 || a.cs == 0 || a.threads == 0 || a.coros == 0 {
        bail!("--ms must be 1..=64 and --cs, --threads, --coros at least 1");
    }
    let chunk_bytes = a.chunk_kib << 10;
    if chunk_bytes < DATA_OFF + a.size as u64 {
        bail!("--chunk-kib too small for the counters and one data slot");
    }
    let ms_cfg = MsConfig {
        region_bytes: 4096 + 4 * chunk_bytes,
        chunk_bytes,
        ..Default::default()
    };
    let cores: Vec<(u16, u16)> = (0..a.cs)
        .flat_map(|cs| (0..a.threads).map(move |t| (cs, t)))
        .collect();
    let coros_total = cores.len() as u64 * a.coros as u64;
    let ops_per = a.ops.div_ceil(coros_total);
    let wall = std::time::Instant::now();
    let (outs, elapsed_ns, extra, verified) = match a.fabric {
        FabricArg::Sim => {
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
            };
            let t0 = fabric.now_ns();
            let hs: Vec<_> = sim_cores
                .iter()
                .enumerate()
                .map(|(i, &c)| {
                    rt.spawn_on(
                        c,
                        run_core(plan, i as u64 * a.coros as u64, a.coros, ops_per),
                    )
                })
                .collect();
            let t1 = rt.run();
            let outs: Vec<CoroOut> = hs
                .into_iter()
                .flat_map(|h| h.try_take().expect("core finished"))
                .collect();
            let verified = rt.block_on(sim_cores[0], verify(plan)).unwrap()?;
            let extra = json!({
                "trace_hash": format!("{:016x}", fabric.trace_hash()),
                "sim_verbs_executed": fabric.verbs_executed(),
                "net": format!("{:?}", cfg.net),
                "tear": format!("{tear:?}"),
            });
            (outs, t1 - t0, extra, verified)
        }
        FabricArg::Loopback => {
            let fabric = LoopbackFabric::new(LoopbackConfig {
                num_ms: a.ms,
                ms: ms_cfg,
                ..Default::default()
            });
            let q = fabric.open_queues(0, 0);
            run_threads_fabric(&fabric, q, &a, &cores, mix, chunk_bytes, ops_per)?
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
            let (o, el, _, v) =
                run_threads_fabric(&fabric, q, &a, &cores, mix, chunk_bytes, ops_per)?;
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
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut stats = VerbStats::default();
    let mut counts = [0u64; 4];
    let mut bad_reads = 0;
    if let Some(e) = outs.iter().find_map(|o| o.error.as_ref()) {
        let n = outs.iter().filter(|o| o.error.is_some()).count();
        bail!("{n} coroutines stopped on a verb error; first: {e}");
    }
    for o in &outs {
        hist.add(&o.hist).unwrap();
        stats.add(&o.stats);
        for (c, x) in counts.iter_mut().zip(o.counts) {
            *c += x;
        }
        bad_reads += o.bad_words;
    }
    let ops: u64 = counts.iter().sum();
    let (faa_sum, cas_sum, bad_mem) = verified;
    let mismatches =
        (faa_sum != counts[3]) as u64 + (cas_sum != counts[2]) as u64 + bad_mem + bad_reads;
    let clock = match a.fabric {
        FabricArg::Sim => "virtual",
        FabricArg::Loopback | FabricArg::Rdma => "wall",
    };
    let mops = ops as f64 / (elapsed_ns.max(1) as f64 / 1e9) / 1e6;
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let (eff, eff_line) = efficiency(verbs_posted(&stats), elapsed_ns, &a.perftest);
    let report = json!({
        "bench": "verbs",
        "fabric": format!("{:?}", a.fabric).to_lowercase(),
        "clock": clock,
        "ops": ops,
        "ops_by_kind": {"read": counts[0], "write": counts[1], "cas_increment": counts[2], "faa": counts[3]},
        "cluster": {"ms": a.ms, "cs": a.cs, "threads": a.threads, "coros": a.coros},
        "size": a.size,
        "throughput_mops": mops,
        "latency_us": {"p50": us(0.5), "p99": us(0.99), "p999": us(0.999)},
        "per_op": per_op(&stats, ops),
        "verified": {"faa_sum": faa_sum, "cas_sum": cas_sum, "bad_words_in_reads": bad_reads, "bad_words_in_memory": bad_mem},
        "mismatches": mismatches,
        "time": {"elapsed_ns": elapsed_ns, "clock": clock, "wall_seconds": wall_s},
        "fabric_detail": extra,
        "verbs_per_s": eff["verbs_per_s"],
        "perftest_read_mops": eff["perftest_read_mops"],
        "rdma_efficiency": eff["rdma_efficiency"],
    });
    println!(
        "dm-bench verbs on {} ({clock} time)",
        report["fabric"].as_str().unwrap()
    );
    println!(
        "  cluster      {} MS, {} CS x {} threads x {} coroutines",
        a.ms, a.cs, a.threads, a.coros
    );
    println!(
        "  ops          {ops} (read {}, write {}, cas-increment {}, faa {})",
        counts[0], counts[1], counts[2], counts[3]
    );
    println!(
        "  throughput   {} Mops ({clock})",
        crate::report::mops(mops)
    );
    if let Some(l) = eff_line {
        println!("  efficiency   {l}");
    }
    println!(
        "  latency      p50 {:.2} us, p99 {:.2} us, p99.9 {:.2} us",
        us(0.5),
        us(0.99),
        us(0.999)
    );
    let d = ops.max(1) as f64;
    println!(
        "  per op       read {:.2} write {:.2} cas {:.2} faa {:.2} | bytes r {:.1} w {:.1} | rtts {:.2} doorbells {:.2}",
        stats.read as f64 / d,
        stats.write as f64 / d,
        stats.cas as f64 / d,
        stats.faa as f64 / d,
        stats.bytes_read as f64 / d,
        stats.bytes_written as f64 / d,
        stats.rtts as f64 / d,
        stats.doorbells as f64 / d
    );
    println!("  verified     faa sum {faa_sum}, cas sum {cas_sum}, bad words {}; mismatches {mismatches}", bad_mem + bad_reads);
    println!("  wall time    {wall_s:.2} s");
    write_json(a.json.as_deref(), &report)?;
    if mismatches > 0 {
        bail!("{mismatches} mismatches in verification");
    }
    Ok(())
}

//! `dm-bench trace`: the timeline of one operation on a warmed-up index on
//! `sim` (teaching material, issue 9).
//!
//! What lives where:
//! - this module: the command. It builds and loads the index with
//!   `ycsb`'s own code ([`crate::ycsb::measure_with`]: `--keys` keys
//!   loaded by insert, then `--warmup` zipfian reads (YCSB c) from every
//!   client, then ycsb's verification, which GETs every key from CS 0 and so
//!   warms its cache), then, with every client idle, turns on the sim's WR
//!   recorder ([`dm_verbs::sim::SimFabric::start_trace`]) and a `tracing`
//!   subscriber for the runtime's events ([`collect`]), runs exactly one
//!   operation on one core and prints the merged timeline and a summary;
//! - [`collect`]: the subscriber (task switches, CQ polls, lock-table waits,
//!   stamped with the core's virtual clock);
//! - [`timeline`]: the merged timeline ([`Line`]s), its text and summary;
//! - [`svg`]: the sequence diagram (plain SVG text).
//!
//! Times are **virtual ns** relative to the operation's start (its first
//! poll). Stages of a WR (dm-verbs' `sim` network model): the core posts it
//! and rings the QP's doorbell (one post list per QP per scheduling round),
//! the CS NIC sends it, it reaches the MS NIC half an RTT later, the MS
//! executes it (the NIC's atomic unit for CAS/FAA, an MS core for an RPC),
//! the response leaves the MS, and the completion reaches the CS's CQ half
//! an RTT later, where the core's next CQ poll hands it to the task.
//! "Round trips" are the runtime's count (times the task parked waiting on
//! verbs it posted); doorbells rung in one scheduling round share a round trip.

pub mod collect;
pub mod svg;
pub mod timeline;

use dm_runtime::JoinError;
use timeline::render_text;
pub use timeline::{actor_name, summary, timeline, wr_label, Actor, Line, What};

use crate::kv::parse_index;
use crate::ycsb::{self, Warm};
use anyhow::{anyhow, bail, Context, Result};
use dm_index::{Handle, Index};
use dm_verbs::sim::SimTrace;
use dm_verbs::{Fabric, VerbStats};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

/// Operations the command traces.
pub const OPS: [&str; 5] = ["get", "insert", "update", "remove", "scan"];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Index: any `ycsb --index` name (fg, sherman-combine, sherman-onchip,
    /// sherman-hier, sherman, smart, art, ..., dex, dolphin, nam-coarse, nam-hybrid).
    #[arg(long, default_value = "fg")]
    pub index: String,
    /// get, insert, update, remove or scan.
    #[arg(long)]
    pub op: String,
    /// Key number K (YCSB's key numbering, FNV-hashed into 8-byte keys): the
    /// load inserts 0..--keys. get/update/remove/scan need a loaded one
    /// (default --keys / 2), insert a new one (default --keys).
    #[arg(long)]
    pub key: Option<u64>,
    /// Keys loaded (by insert, as `ycsb` loads); at least 1.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Warm-up operations (YCSB c: zipfian reads from every client) before
    /// the traced one.
    #[arg(long, default_value_t = 2_000)]
    pub warmup: u64,
    /// Records a traced scan asks for.
    #[arg(long, default_value_t = 10)]
    pub scan_len: u32,
    #[arg(long, default_value_t = 2)]
    pub ms: u16,
    #[arg(long, default_value_t = 2)]
    pub cs: u16,
    /// Cores per compute server.
    #[arg(long, default_value_t = 1)]
    pub threads: u16,
    /// Coroutines per core (warm-up only: the traced operation runs alone).
    #[arg(long, default_value_t = 4)]
    pub coros: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The sequence diagram; default trace-<index>-<op>.svg.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Further `ycsb` flags for the index, after `--` (e.g. `-- --smart-off cache`).
    #[arg(last = true)]
    pub ycsb: Vec<String>,
}

#[derive(clap::Parser)]
struct YcsbArgs {
    #[command(flatten)]
    a: ycsb::Args,
}

/// A simulated core as the timeline names it.
#[derive(Clone, Debug)]
pub struct CoreName {
    pub cs: u16,
    pub thread: u16,
}

/// What one traced operation did.
pub struct Traced {
    pub index: String,
    pub op: String,
    pub key_number: u64,
    pub key: Vec<u8>,
    /// Virtual ns of the operation's first poll and of its end (global clock).
    pub t0: u64,
    pub t1: u64,
    /// The operation's verb counters (the runtime's per-task accounting).
    pub stats: VerbStats,
    /// The result, as text.
    pub outcome: String,
    pub sim: SimTrace,
    pub rt: Vec<collect::RtEvent>,
    /// Simulator core index -> (CS, thread).
    pub cores: Vec<CoreName>,
    /// Executor id -> simulator core index.
    pub exec_core: HashMap<u32, usize>,
    /// The core that ran the operation.
    pub core: usize,
    pub num_ms: u16,
}

pub fn run(a: Args) -> Result<()> {
    let t = trace(&a)?;
    let lines = timeline(&t);
    print!("{}", render_text(&t, &lines));
    let path = a
        .svg
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("trace-{}-{}.svg", a.index, a.op)));
    std::fs::write(&path, svg::render(&t, &lines))
        .with_context(|| format!("writing {}", path.display()))?;
    println!("svg          {}", path.display());
    Ok(())
}

/// Loads and warms the index, then traces one operation (see the module docs).
pub fn trace(a: &Args) -> Result<Traced> {
    if !OPS.contains(&a.op.as_str()) {
        bail!(
            "unknown --op {:?}: trace takes {} (index {})",
            a.op,
            OPS.join(", "),
            a.index
        );
    }
    parse_index(&a.index)?;
    if a.keys == 0 {
        bail!(
            "--keys 0: trace warms the index with reads of loaded keys (YCSB c); load at least 1"
        );
    }
    crate::limits::at_most(
        "--warmup",
        a.warmup,
        crate::limits::MAX_COUNT,
        "operations before the traced one",
    )?;
    let insert = a.op == "insert";
    let k = a.key.unwrap_or(if insert { a.keys } else { a.keys / 2 });
    if insert && k < a.keys {
        bail!(
            "--op insert traces the insert of a new key: key number {k} is loaded (0..{}); \
             take one >= {} (or --op update for a loaded key)",
            a.keys,
            a.keys
        );
    }
    if !insert && k >= a.keys {
        bail!(
            "--op {} needs a loaded key: key number {k} is not among the {} loaded (0..{})",
            a.op,
            a.keys,
            a.keys
        );
    }
    let mut argv: Vec<String> = vec!["ycsb".into()];
    for (f, v) in [
        ("--index", a.index.clone()),
        ("--workload", "c".into()),
        ("--keys", a.keys.to_string()),
        ("--ops", a.warmup.to_string()),
        ("--ms", a.ms.to_string()),
        ("--cs", a.cs.to_string()),
        ("--threads", a.threads.to_string()),
        ("--coros", a.coros.to_string()),
        ("--seed", a.seed.to_string()),
        ("--scan-len", a.scan_len.to_string()),
    ] {
        argv.push(f.into());
        argv.push(v);
    }
    argv.extend(a.ycsb.iter().cloned());
    let mut y = <YcsbArgs as clap::Parser>::try_parse_from(&argv)
        .map_err(|e| anyhow!("the ycsb flags after --: {e}"))?
        .a;
    y.quiet = true;
    y.ms = y.ms_spec.count();
    ycsb::check_sizes(&y)?;
    let key = ycsb::generated_key(&y, k)?;
    let (op, scan_len, index) = (a.op.clone(), a.scan_len as usize, a.index.clone());
    let mut got: Option<Traced> = None;
    let mut hook = |w: Warm<'_>| -> Result<()> {
        // DEX: the CS that owns the key's partition serves it (DEX §7).
        let cs = match w.trees[0].handle() {
            Handle::Dex(d) => d.cluster().owner(&key),
            _ => 0,
        };
        let i = w
            .places
            .iter()
            .position(|p| p.0 == cs)
            .expect("a core of every CS");
        let exec_core: HashMap<u32, usize> = w
            .sim_cores
            .iter()
            .map(|&c| (w.rt.executor(c).id(), c.0))
            .collect();
        let cores = w
            .places
            .iter()
            .map(|&(cs, thread)| CoreName { cs, thread })
            .collect();
        let tree = w.trees[i].clone();
        let fabric = w.rt.fabric().clone();
        let (events, sub) = collect::Collector::new();
        fabric.start_trace();
        let h = tracing::subscriber::with_default(sub, || {
            let h = w.rt.spawn_on(
                w.sim_cores[i],
                one_op(tree, op.clone(), key.clone(), scan_len),
            );
            w.rt.run();
            h
        });
        let sim = fabric.take_trace().expect("recording");
        let (t0, t1, stats, outcome) = h
            .try_take()
            .ok_or_else(|| anyhow!("the traced {op} never finished"))?
            .unwrap_or_else(JoinError::resume)
            .map_err(|e| anyhow!("{index} {op}: {e}"))?;
        got = Some(Traced {
            index: index.clone(),
            op: op.clone(),
            key_number: k,
            key: key.clone(),
            t0,
            t1,
            stats,
            outcome,
            sim,
            rt: events.take(),
            cores,
            exec_core,
            core: w.sim_cores[i].0,
            num_ms: fabric.num_ms(),
        });
        Ok(())
    };
    ycsb::measure_with(y, Some(&mut hook))?;
    got.ok_or_else(|| anyhow!("the traced operation did not run"))
}

/// The traced operation: (start, end, verb counters, outcome).
async fn one_op(
    tree: Rc<Index>,
    op: String,
    key: Vec<u8>,
    scan_len: usize,
) -> Result<(u64, u64, VerbStats, String), dm_index::Error> {
    let t0 = dm_runtime::now_ns();
    let s0 = dm_runtime::task_stats();
    let v = 0x7ace_0000_0000_0000 | (t0 & 0xffff_ffff);
    let outcome = match op.as_str() {
        "get" => match tree.get(&key).await? {
            Some(v) => format!("found, value {v:#x}"),
            None => "not found".into(),
        },
        "insert" => {
            tree.insert(&key, v).await?;
            format!("inserted value {v:#x}")
        }
        "update" => match tree.update(&key, v).await? {
            true => format!("updated to {v:#x}"),
            false => "key not found".into(),
        },
        "remove" => match tree.remove(&key).await? {
            true => "removed".into(),
            false => "key not found".into(),
        },
        "scan" => {
            let r = tree.scan(&key, scan_len).await?;
            format!("{} records", r.len())
        }
        _ => unreachable!("checked"),
    };
    let stats = dm_runtime::task_stats().since(&s0);
    Ok((t0, dm_runtime::now_ns(), stats, outcome))
}

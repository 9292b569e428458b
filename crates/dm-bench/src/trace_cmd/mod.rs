//! `dm-bench trace`: the timeline of one operation on a warmed-up index on
//! `sim` (teaching material, issue 9).
//!
//! What lives where:
//! - this module: the command. It builds and loads the index with
//!   `ycsb`'s own code ([`crate::ycsb_bench::measure_with`]: `--keys` keys
//!   loaded by insert, then `--warmup` zipfian reads (YCSB c) from every
//!   client, then ycsb's verification, which GETs every key from CS 0 and so
//!   warms its cache), then, with every client idle, turns on the sim's WR
//!   recorder ([`dm_verbs::sim::SimFabric::start_trace`]) and a `tracing`
//!   subscriber for the runtime's events ([`collect`]), runs exactly one
//!   operation on one core and prints the merged timeline and a summary;
//! - [`collect`]: the subscriber (task switches, CQ polls, lock-table waits,
//!   stamped with the core's virtual clock);
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

use crate::kv::{parse_index, AnyIndex, Kv};
use crate::ycsb_bench::{self, Warm};
use anyhow::{anyhow, bail, Context, Result};
use dm_verbs::sim::{SimTrace, WrTrace};
use dm_verbs::{Fabric, VerbKind, VerbStats};
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
    /// Keys loaded (by insert, as `ycsb` loads).
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
    a: ycsb_bench::Args,
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
    let key = ycsb_bench::generated_key(&y, k)?;
    let (op, scan_len, index) = (a.op.clone(), a.scan_len as usize, a.index.clone());
    let mut got: Option<Traced> = None;
    let mut hook = |w: Warm<'_>| -> Result<()> {
        // DEX: the CS that owns the key's partition serves it (DEX §7).
        let cs = match &*w.trees[0] {
            AnyIndex::Dex(d) => d.cluster().owner(&key),
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
    ycsb_bench::measure_with(y, Some(&mut hook))?;
    got.ok_or_else(|| anyhow!("the traced operation did not run"))
}

/// The traced operation: (start, end, verb counters, outcome).
async fn one_op(
    tree: Rc<AnyIndex>,
    op: String,
    key: Vec<u8>,
    scan_len: usize,
) -> Result<(u64, u64, VerbStats, String), String> {
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

/// A column of the diagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Actor {
    /// A CS core (simulator core index).
    Core(usize),
    /// A CS's NIC.
    CsNic(u16),
    /// A memory server (its NIC and memory).
    Ms(u16),
}

/// What happened, for the text and the arrows.
#[derive(Clone, Debug)]
pub enum What {
    /// A doorbell: post list `db` of the recorder (round trip `rt`).
    Doorbell {
        db: usize,
        rt: usize,
    },
    /// A WR at one of its stages (posted, sent, received, executed,
    /// replied, in the CQ); the arrows come from the recorder's WRs.
    Wr,
    /// The core's CQ poll handed this WR's (index into the recorder's
    /// WRs) result to its task.
    Polled(Option<usize>),
    /// A runtime event (task switch, lock wait, lock granted).
    Runtime,
    OpStart,
    OpEnd,
}

/// One line of the timeline.
#[derive(Clone, Debug)]
pub struct Line {
    /// Virtual ns relative to the operation's start.
    pub ns: i64,
    pub actor: Actor,
    pub what: What,
    pub text: String,
}

fn kind_name(w: &WrTrace) -> &'static str {
    match (w.kind, w.masked) {
        (VerbKind::Read, _) => "READ",
        (VerbKind::Write, _) => "WRITE",
        (VerbKind::Cas, false) => "CAS",
        (VerbKind::Cas, true) => "MASKED-CAS",
        (VerbKind::Faa, _) => "FAA",
        (VerbKind::Rpc, _) => "RPC",
    }
}

/// `READ ms1:0x1a2b00 1024 B`: kind, address (`dev:` for device memory),
/// payload bytes.
pub fn wr_label(w: &WrTrace) -> String {
    let at = match w.addr {
        Some(a) if a.is_device() => format!("ms{}:dev:{:#x}", a.ms(), a.local_offset()),
        Some(a) => format!("ms{}:{:#x}", a.ms(), a.local_offset()),
        None => format!("ms{} handler {}", w.ms, w.rpc_handler.unwrap_or(0)),
    };
    let bytes = match w.kind {
        VerbKind::Read => w.bytes_in,
        VerbKind::Rpc => w.bytes_out,
        VerbKind::Write => w.bytes_out,
        _ => 8,
    };
    format!("{} {at} {bytes} B", kind_name(w))
}

/// What came back, for the MS's reply line.
fn reply_label(w: &WrTrace) -> String {
    if !w.ok {
        return "error".into();
    }
    match (w.kind, w.atomic_old, w.cas_expect) {
        (VerbKind::Cas, Some(old), Some((e, m))) => format!(
            "old {old:#x}: {}",
            if old & m == e & m {
                "swapped"
            } else {
                "failed"
            }
        ),
        (VerbKind::Faa, Some(old), _) => format!("old {old:#x}"),
        (VerbKind::Read, _, _) => format!("{} B of data", w.bytes_in),
        (VerbKind::Rpc, _, _) => format!("reply {} B", w.bytes_in),
        _ => "ack".into(),
    }
}

/// The merged timeline of `t`, in time order.
pub fn timeline(t: &Traced) -> Vec<Line> {
    let rel = |ns: u64| ns as i64 - t.t0 as i64;
    let mut v: Vec<(i64, u8, Line)> = Vec::new();
    let mut push = |ns: u64, order: u8, actor: Actor, what: What, text: String| {
        v.push((
            rel(ns),
            order,
            Line {
                ns: rel(ns),
                actor,
                what,
                text,
            },
        ))
    };
    push(
        t.t0,
        0,
        Actor::Core(t.core),
        What::OpStart,
        format!("{} key #{} ({}) starts", t.op, t.key_number, hex(&t.key)),
    );
    // Round trips: doorbells of one core in one scheduling round (same ns) share one.
    let mut rt_of = Vec::with_capacity(t.sim.doorbells.len());
    let mut last: HashMap<usize, (u64, usize)> = HashMap::new();
    let mut n = 0;
    for d in &t.sim.doorbells {
        let e = last.entry(d.core).or_insert((u64::MAX, 0));
        if e.0 != d.ns {
            n += 1;
            *e = (d.ns, n);
        }
        rt_of.push(e.1);
    }
    let by_wr_id: HashMap<(usize, u64), usize> = t
        .sim
        .wrs
        .iter()
        .enumerate()
        .map(|(i, w)| ((w.core, w.wr_id), i))
        .collect();
    for (di, d) in t.sim.doorbells.iter().enumerate() {
        for &i in &d.wrs {
            let w = &t.sim.wrs[i];
            push(
                w.posted_ns,
                1,
                Actor::Core(w.core),
                What::Wr,
                format!("post {} wr_id={:#x}", wr_label(w), w.wr_id),
            );
        }
        push(
            d.ns,
            2,
            Actor::Core(d.core),
            What::Doorbell {
                db: di,
                rt: rt_of[di],
            },
            format!(
                "doorbell: post list of {} WR{} to MS{} (round trip {})",
                d.wrs.len(),
                if d.wrs.len() == 1 { "" } else { "s" },
                d.ms,
                rt_of[di]
            ),
        );
    }
    for w in &t.sim.wrs {
        let cs = t.cores.get(w.core).map_or(w.cs, |c| c.cs);
        let l = wr_label(w);
        push(
            w.nic_tx_ns,
            3,
            Actor::CsNic(cs),
            What::Wr,
            format!("sends {l}"),
        );
        push(
            w.ms_arrive_ns,
            4,
            Actor::Ms(w.ms),
            What::Wr,
            format!("NIC receives {} wr_id={:#x}", kind_name(w), w.wr_id),
        );
        let wait = w.exec_ns - w.ms_arrive_ns;
        push(
            w.exec_ns,
            5,
            Actor::Ms(w.ms),
            What::Wr,
            format!(
                "executes {l}{}",
                if wait > 0 {
                    format!(
                        " (waited {wait} ns: NIC message rate, atomic unit, QP order or MS core)"
                    )
                } else {
                    String::new()
                }
            ),
        );
        push(
            w.ms_done_ns,
            6,
            Actor::Ms(w.ms),
            What::Wr,
            format!(
                "replies to {} wr_id={:#x}: {}",
                kind_name(w),
                w.wr_id,
                reply_label(w)
            ),
        );
        push(
            w.cq_ns,
            7,
            Actor::CsNic(cs),
            What::Wr,
            format!(
                "completion of {} wr_id={:#x} in the CQ",
                kind_name(w),
                w.wr_id
            ),
        );
    }
    for e in &t.rt {
        let Some(&core) = t.exec_core.get(&e.exec) else {
            continue;
        };
        let field = |k: &str| e.fields.get(k).cloned().unwrap_or_default();
        let (what, text) = match e.name.as_str() {
            "completion" => {
                let id: u64 = field("wr_id").parse().unwrap_or(0);
                let wr = by_wr_id.get(&(core, id)).copied();
                let kind = wr.map_or("?", |i| kind_name(&t.sim.wrs[i]));
                (
                    What::Polled(wr),
                    format!("CQ poll: {kind} wr_id={id:#x} done, task woken"),
                )
            }
            "switch" if field("ready") == "true" => {
                (What::Runtime, format!("task {} finishes", field("task")))
            }
            "switch" => (
                What::Runtime,
                format!("task {} parks (switch)", field("task")),
            ),
            "lock wait" => (
                What::Runtime,
                format!("local lock table: waits for lock {}", field("key")),
            ),
            "lock granted" => (
                What::Runtime,
                format!(
                    "local lock table: lock {} granted{}",
                    field("key"),
                    if field("handed_over") == "true" {
                        " with the remote lock handed over"
                    } else {
                        ""
                    }
                ),
            ),
            _ => continue,
        };
        push(e.ns, 8, Actor::Core(core), what, text);
    }
    push(
        t.t1,
        9,
        Actor::Core(t.core),
        What::OpEnd,
        format!("{} returns: {}", t.op, t.outcome),
    );
    v.sort_by_key(|(ns, o, _)| (*ns, *o));
    v.into_iter().map(|(_, _, l)| l).collect()
}

fn hex(b: &[u8]) -> String {
    let mut s = String::from("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// The column's name.
pub fn actor_name(t: &Traced, a: Actor) -> String {
    match a {
        Actor::Core(i) => match t.cores.get(i) {
            Some(c) => format!("CS{} core{}", c.cs, c.thread),
            None => format!("core {i}"),
        },
        Actor::CsNic(cs) => format!("CS{cs} NIC"),
        Actor::Ms(m) => format!("MS{m}"),
    }
}

/// The summary: round trips, verbs by kind, bytes, latency.
pub fn summary(t: &Traced) -> String {
    let s = &t.stats;
    let mut kinds = Vec::new();
    for (n, k) in [
        (s.read, "READ"),
        (s.write, "WRITE"),
        (s.cas, "CAS"),
        (s.faa, "FAA"),
        (s.rpc, "RPC"),
    ] {
        if n > 0 {
            kinds.push(format!("{n} {k}"));
        }
    }
    format!(
        "{} round trips, {} doorbells, {} verbs ({}), {} B read, {} B written, latency {} ns (virtual)",
        s.rtts,
        s.doorbells,
        s.read + s.write + s.cas + s.faa + s.rpc,
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(", ")
        },
        s.bytes_read,
        s.bytes_written,
        t.t1 - t.t0
    )
}

fn render_text(t: &Traced, lines: &[Line]) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "dm-bench trace: index {}, {} of key #{} ({}) on sim, after loading and warming up; times in virtual ns from the op's start\n",
        t.index,
        t.op,
        t.key_number,
        hex(&t.key)
    ));
    let w = lines
        .iter()
        .map(|l| actor_name(t, l.actor).len())
        .max()
        .unwrap_or(8);
    for l in lines {
        o.push_str(&format!(
            "{:>9} ns  {:<w$}  {}\n",
            l.ns,
            actor_name(t, l.actor),
            l.text
        ));
    }
    o.push_str(&format!("summary      {}\n", summary(t)));
    if t.sim.wrs.iter().any(|w| w.core != t.core) {
        o.push_str("note         other cores posted WRs meanwhile (shown above)\n");
    }
    o
}

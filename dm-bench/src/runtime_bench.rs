//! `dm-bench runtime`: ns per task switch, dm-runtime vs tokio, same workload,
//! same process, same loopback fabric.
//!
//! - *verb* variant: `tasks` tasks each await `iters` 8-byte READs on a
//!   loopback QP; one switch = one await of a verb completion.
//!   - dm-runtime: the verb future appends the WR to the round's post list; the
//!     executor rings one doorbell per QP per round and wakes owners from the CQ.
//!   - tokio: a current-thread runtime with a `LocalSet`; each task posts its WR
//!     on the shared loopback QP and parks on a slab slot; a poller task drains
//!     the CQ, stores results and wakes owners, then `yield_now`s. This is the
//!     straightforward way to drive RDMA completions from tokio.
//! - *yield* variant: the same tasks each `yield_now` `iters` times.
//! - *fabric alone*: the same READs posted to the loopback queues in lists of
//!   256 with no runtime (`fabric_ns_per_verb`): the part of both verb
//!   figures that no executor can remove (executing the READ, its result
//!   allocation and free, the CQ).
//! - *leanest executor* (`lean_ns_per_switch`, [`crate::runtime_lean`]): the
//!   verb variant's tasks on an executor that has only what this workload
//!   needs (one READ in flight per task, the task index as `wr_id`), a lower
//!   bound for dm-runtime's verb figure: the gap is what dm-runtime's
//!   features cost.
//!
//! ns per switch = wall time of the run / (tasks x iters). Best of `--reps`
//! runs of each variant, the variants interleaved (dm, tokio, dm, tokio, ...).

use crate::report::write_json;
use anyhow::Result;
use dm_runtime::{ExecConfig, Executor};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric, LoopbackQueues};
use dm_verbs::{Completion, Fabric, GlobalAddr, MsConfig, Queues, Verb, VerbOutput, WorkRequest};
use serde_json::json;
use slab::Slab;
use std::cell::RefCell;
use std::future::poll_fn;
use std::path::PathBuf;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Concurrent tasks (at least 1).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: u64,
    /// Awaits (verb or yield) per task (at least 1).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,
    /// Repetitions (at least 1); the best (lowest) time of each variant is
    /// reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run only dm-runtime's verb variant (for profiling); prints its ns per
    /// switch. Same as `--only dm-verb`, hence not with `--only`.
    #[arg(long, conflicts_with = "only")]
    pub dm_only: bool,
    /// Run only one variant (for profiling, e.g. under callgrind); prints its
    /// ns per switch (per READ for `fabric`).
    #[arg(long, value_enum)]
    pub only: Option<Variant>,
}

/// One of the six measured runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    DmVerb,
    TokioVerb,
    DmYield,
    TokioYield,
    Fabric,
    Lean,
}

impl Variant {
    /// The order of one interleaved repetition.
    const ALL: [Variant; 6] = [
        Variant::Fabric,
        Variant::Lean,
        Variant::DmVerb,
        Variant::TokioVerb,
        Variant::DmYield,
        Variant::TokioYield,
    ];
}

/// One loopback MS of 1 MiB (64 KiB chunks): the fabric of the runtime
/// measurements, and of unit tests that need one.
pub(crate) fn fabric() -> LoopbackFabric {
    LoopbackFabric::new(LoopbackConfig {
        num_ms: 1,
        ms: MsConfig {
            region_bytes: 1 << 20,
            chunk_bytes: 1 << 16,
            ..Default::default()
        },
        ..Default::default()
    })
}

const ADDR: GlobalAddr = GlobalAddr::new(0, 4096);

fn dm_verbs_run(tasks: u64, iters: u64) -> f64 {
    let f = fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 1, ExecConfig::default());
    for _ in 0..tasks {
        ex.spawn(async move {
            for _ in 0..iters {
                dm_runtime::read(ADDR, 8).await.unwrap();
            }
        });
    }
    let t = Instant::now();
    while ex.live_tasks() > 0 {
        ex.tick();
    }
    t.elapsed().as_nanos() as f64 / (tasks * iters) as f64
}

fn dm_yield_run(tasks: u64, iters: u64) -> f64 {
    let f = fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), 1, ExecConfig::default());
    for _ in 0..tasks {
        ex.spawn(async move {
            for _ in 0..iters {
                dm_runtime::yield_now().await;
            }
        });
    }
    let t = Instant::now();
    while ex.live_tasks() > 0 {
        ex.tick();
    }
    t.elapsed().as_nanos() as f64 / (tasks * iters) as f64
}

/// The tokio side: one loopback QP shared by the tasks of a `LocalSet`.
struct TokioQp {
    queues: RefCell<LoopbackQueues>,
    slots: RefCell<Slab<(Option<Waker>, Option<Completion>)>>,
    live: RefCell<u64>,
}

async fn tokio_read(qp: &TokioQp, addr: GlobalAddr, len: u32) -> Vec<u8> {
    let key = qp.slots.borrow_mut().insert((None, None));
    let mut wrs = vec![WorkRequest {
        wr_id: key as u64,
        verb: Verb::Read { addr, len },
    }];
    qp.queues.borrow_mut().post_list(addr.ms(), &mut wrs);
    let c = poll_fn(|cx| {
        let mut s = qp.slots.borrow_mut();
        match s[key].1.take() {
            Some(c) => {
                s.remove(key);
                Poll::Ready(c)
            }
            None => {
                s[key].0 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    })
    .await;
    match c.result.unwrap() {
        VerbOutput::Read(b) => b,
        o => panic!("unexpected {o:?}"),
    }
}

async fn tokio_poller(qp: Rc<TokioQp>) {
    let mut buf = Vec::with_capacity(64);
    while *qp.live.borrow() > 0 {
        qp.queues.borrow_mut().poll_cq(&mut buf, 64);
        for c in buf.drain(..) {
            let w = {
                let mut s = qp.slots.borrow_mut();
                let slot = &mut s[c.wr_id as usize];
                slot.1 = Some(c);
                slot.0.take()
            };
            if let Some(w) = w {
                w.wake();
            }
        }
        tokio::task::yield_now().await;
    }
}

fn tokio_run(tasks: u64, iters: u64, verbs: bool) -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let f = fabric();
    let qp = Rc::new(TokioQp {
        queues: RefCell::new(f.open_queues(0, 0)),
        slots: RefCell::new(Slab::new()),
        live: RefCell::new(tasks),
    });
    let t = Instant::now();
    local.block_on(&rt, async {
        let mut hs = Vec::new();
        for _ in 0..tasks {
            let qp = qp.clone();
            hs.push(tokio::task::spawn_local(async move {
                for _ in 0..iters {
                    if verbs {
                        tokio_read(&qp, ADDR, 8).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
                *qp.live.borrow_mut() -= 1;
            }));
        }
        if verbs {
            tokio::task::spawn_local(tokio_poller(qp.clone()));
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    t.elapsed().as_nanos() as f64 / (tasks * iters) as f64
}

/// The floor under both runtimes: the same READs posted straight to the
/// loopback queues in lists of 256 and their completions drained, with no
/// task, waker or future in between (ns per verb).
fn fabric_run(tasks: u64, iters: u64) -> f64 {
    let f = fabric();
    let mut q = f.open_queues(0, 0);
    let (mut wrs, mut done) = (Vec::with_capacity(256), Vec::with_capacity(256));
    let lists = (tasks * iters).div_ceil(256);
    let t = Instant::now();
    for _ in 0..lists {
        wrs.extend((0..256).map(|i| WorkRequest {
            wr_id: i,
            verb: Verb::Read { addr: ADDR, len: 8 },
        }));
        q.post_list(0, &mut wrs);
        while q.poll_cq(&mut done, 64) > 0 {
            done.clear();
        }
    }
    t.elapsed().as_nanos() as f64 / (lists * 256) as f64
}

/// One run of variant `v`: ns per switch (per READ for `Fabric`).
fn measure(v: Variant, tasks: u64, iters: u64) -> f64 {
    match v {
        Variant::DmVerb => dm_verbs_run(tasks, iters),
        Variant::TokioVerb => tokio_run(tasks, iters, true),
        Variant::DmYield => dm_yield_run(tasks, iters),
        Variant::TokioYield => tokio_run(tasks, iters, false),
        Variant::Fabric => fabric_run(tasks, iters),
        Variant::Lean => crate::runtime_lean::run(&fabric(), ADDR, tasks, iters),
    }
}

fn best(reps: u32, mut f: impl FnMut() -> f64) -> f64 {
    (0..reps).map(|_| f()).fold(f64::INFINITY, f64::min)
}

pub fn run(a: Args) -> Result<()> {
    if a.tasks.checked_mul(a.iters).is_none() {
        anyhow::bail!(
            "--tasks {} x --iters {} overflows the count of awaits (at most {})",
            a.tasks,
            a.iters,
            u64::MAX
        );
    }
    crate::limits::at_most(
        "--tasks",
        a.tasks,
        crate::limits::MAX_TASKS,
        "tasks of one run, each with its own state",
    )?;
    crate::limits::at_most(
        "--tasks x --iters",
        a.tasks * a.iters,
        crate::limits::MAX_COUNT,
        "awaits of one repetition",
    )?;
    crate::limits::at_most(
        "--reps",
        a.reps as u64,
        crate::limits::MAX_REPS,
        "repetitions; the best one is reported",
    )?;
    let only = if a.dm_only {
        Some(Variant::DmVerb)
    } else {
        a.only
    };
    if let Some(v) = only {
        let ns = best(a.reps, || measure(v, a.tasks, a.iters));
        println!("{v:?}: {ns:.1} ns");
        return Ok(());
    }
    // Interleaved repetitions: on a shared machine the speed drifts over
    // seconds, and interleaving exposes both runtimes to the same drift.
    // Best per variant, in `ALL` order.
    let mut b = [f64::INFINITY; 6];
    for _ in 0..a.reps {
        for (i, v) in Variant::ALL.into_iter().enumerate() {
            b[i] = b[i].min(measure(v, a.tasks, a.iters));
        }
    }
    let [floor, lean, dm_switch, tokio_switch, dm_yield, tokio_yield] = b;
    println!(
        "dm-bench runtime: {} tasks x {} awaits, loopback fabric, best of {}",
        a.tasks, a.iters, a.reps
    );
    println!("  verb completion switch: dm-runtime {dm_switch:.1} ns, tokio LocalSet {tokio_switch:.1} ns, ratio {:.2}", dm_switch / tokio_switch);
    println!("  pure yield:             dm-runtime {dm_yield:.1} ns, tokio LocalSet {tokio_yield:.1} ns, ratio {:.2}", dm_yield / tokio_yield);
    println!("  the fabric alone:       {floor:.1} ns per READ (posted in lists of 256, no runtime; both verb figures include it)");
    println!("  leanest executor:       {lean:.1} ns per verb switch (one READ in flight per task, no accounting; a lower bound for dm-runtime's, ratio {:.2} to tokio)", lean / tokio_switch);
    let v = json!({
        "dm_runtime_ns_per_switch": dm_switch,
        "tokio_localset_ns_per_switch": tokio_switch,
        "dm_runtime_ns_per_yield": dm_yield,
        "tokio_localset_ns_per_yield": tokio_yield,
        "switch_ratio": dm_switch / tokio_switch,
        "yield_ratio": dm_yield / tokio_yield,
        "fabric_ns_per_verb": floor,
        "lean_ns_per_switch": lean,
        "tasks": a.tasks,
        "iters": a.iters,
    });
    write_json(a.json.as_deref(), &v)
}

//! The load and run phases on one core: its coroutines, each over its
//! share of the operations ([`Layout`]: round-robin over every coroutine of
//! every CS core, or DEX's per-CS lists), with the run's checks of every
//! result against the values ever written ([`run_op`]); and the load phase
//! of `--load bulk` (a sorted bulk load from one core, as Sherman loads its
//! trees).

use crate::ycsb::dex::{routes, Routes};
use crate::ycsb::plan::{allowed, load_value, run_value, Plan};
use crate::ycsb::{Args, Op};
use dm_index::{Handle, Index, ScanBuf};
use dm_runtime::JoinError;
use dm_verbs::VerbStats;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use std::rc::Rc;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct Out {
    pub hist: Option<Histogram<u64>>,
    pub stats: [VerbStats; 6],
    pub counts: [u64; 6],
    /// Heap allocations of the core thread while each kind's operations
    /// were polled (run and warm-up; [`counted`]).
    pub allocs: [u64; 6],
    pub mismatches: u64,
    pub first_mismatch: Option<String>,
    /// Leaves scans READ ahead from head lists, and used (one per core:
    /// [`FgTree::head_prefetch_stats`] of the core's handle).
    pub head_prefetch: (u64, u64),
    /// This coroutine's scan results, reused by every scan it runs
    /// ([`Index::scan_into`]; not merged).
    pub scan: ScanBuf,
}

impl Out {
    pub(super) fn new() -> Self {
        Out {
            hist: Some(Histogram::new(3).unwrap()),
            ..Default::default()
        }
    }
    pub(super) fn bad(&mut self, what: String) {
        self.mismatches += 1;
        self.first_mismatch.get_or_insert(what);
    }
    /// Keeps only `o`'s failed checks (the warm-up's: its counts and
    /// latencies are in no figure).
    pub(super) fn merge_checks(&mut self, o: Out) {
        self.mismatches += o.mismatches;
        if self.first_mismatch.is_none() {
            self.first_mismatch = o.first_mismatch;
        }
    }

    pub(super) fn merge(&mut self, o: Out) {
        if let (Some(h), Some(oh)) = (self.hist.as_mut(), o.hist.as_ref()) {
            h.add(oh).unwrap();
        }
        for i in 0..6 {
            self.stats[i].add(&o.stats[i]);
            self.counts[i] += o.counts[i];
            self.allocs[i] += o.allocs[i];
        }
        self.mismatches += o.mismatches;
        self.head_prefetch.0 += o.head_prefetch.0;
        self.head_prefetch.1 += o.head_prefetch.1;
        if self.first_mismatch.is_none() {
            self.first_mismatch = o.first_mismatch;
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Phase {
    Load,
    /// `--warmup`: the run's first `plan.warm` operations, not counted.
    Warmup,
    Run,
}

impl Phase {
    /// The operation indices of this phase (into `plan.load` for the load,
    /// `plan.run` for the others).
    fn range(self, plan: &Plan) -> std::ops::Range<usize> {
        match self {
            Phase::Load => 0..plan.load.len(),
            Phase::Warmup => 0..plan.warm,
            Phase::Run => plan.warm..plan.run.len(),
        }
    }
}

/// Operations a coroutine counts before it moves the progress bar.
const PROGRESS_EVERY: u64 = 256;

async fn coroutine(
    tree: Rc<Index>,
    plan: Arc<Plan>,
    phase: Phase,
    id: usize,
    total: usize,
    pb: ProgressBar,
    ids: Option<Arc<Vec<usize>>>,
) -> Out {
    let mut out = Out::new();
    let r = phase.range(&plan);
    // All operations round-robin, or (DEX, partitioned) this CS's list;
    // `--split chunks`: this coroutine's contiguous share of them.
    let mine: Box<dyn Iterator<Item = usize>> = match (&ids, plan.chunks) {
        (None, false) => Box::new((r.start + id..r.end).step_by(total)),
        (None, true) => Box::new(chunk(r, id, total)),
        (Some(v), false) => Box::new(
            v.iter()
                .copied()
                .filter(move |j| r.contains(j))
                .skip(id)
                .step_by(total),
        ),
        (Some(v), true) => {
            let lo = v.partition_point(|&j| j < r.start);
            let hi = v.partition_point(|&j| j < r.end);
            Box::new(chunk(lo..hi, id, total).map(move |k| v[k]))
        }
    };
    // The end of the previous operation when nothing ran since: the next
    // one's start (one clock read per operation; a read of the wall clock
    // costs 35-40 ns on the development VM). `pending`: operations not yet
    // on the progress bar, whose `inc` reads the clock too.
    let (mut last, mut pending) = (None, 0);
    for j in mine {
        let t0 = last.take().unwrap_or_else(dm_runtime::now_ns);
        dm_runtime::charge_op();
        let s0 = dm_runtime::task_stats();
        let kind = match phase {
            Phase::Load => {
                let k = &plan.load[j];
                if let Err(e) = tree.insert(k, load_value(j)).await {
                    out.bad(format!("insert {k:?} failed: {e}"));
                }
                1
            }
            Phase::Run | Phase::Warmup => {
                // Pinned where it is made: the operation's future is large
                // (every index's), and moving it into a wrapper cost a
                // third of the thread's CPU in `memmove`.
                let (kind, n) = {
                    let op = std::pin::pin!(run_op(&tree, &plan, j, &mut out));
                    counted(op).await
                };
                out.allocs[kind] += n;
                kind
            }
        };
        out.stats[kind].add(&dm_runtime::task_stats().since(&s0));
        out.counts[kind] += 1;
        let t1 = dm_runtime::now_ns();
        out.hist.as_mut().unwrap().record((t1 - t0).max(1)).unwrap();
        last = Some(t1);
        pending += 1;
        if pending == PROGRESS_EVERY {
            pb.inc(pending);
            pending = 0;
        }
        if let (Phase::Run, Some(r), Handle::Dex(d)) = (phase, &plan.repartition, tree.handle()) {
            r.tick(d).await;
            last = None;
        }
        if let (Phase::Run, Some(h)) = (phase, &plan.heads) {
            h.tick(&tree).await;
            last = None;
        }
    }
    pb.inc(pending);
    out
}

/// `f`'s output and the heap allocations the calling thread made while
/// polling it (`crate::alloc_count`): an operation's own allocations,
/// wherever its polls interleave with other coroutines'. Allocations of
/// other tasks it waits for (none in the indexes' warm paths) are not in
/// it; the run's `allocs_per_op` counts everything.
async fn counted<F: std::future::Future>(mut f: std::pin::Pin<&mut F>) -> (F::Output, u64) {
    let mut n = 0;
    let out = std::future::poll_fn(|cx| {
        let a0 = crate::alloc_count::thread_allocs();
        let r = f.as_mut().poll(cx);
        n += crate::alloc_count::thread_allocs().saturating_sub(a0);
        r
    })
    .await;
    (out, n)
}

/// One run operation: its kind's index into `out`'s counters. A failed
/// operation (an index error) is a mismatch that fails the run, with the
/// error's message.
async fn run_op(tree: &Index, plan: &Plan, j: usize, out: &mut Out) -> usize {
    match run_op_checked(tree, plan, j, out).await {
        Ok(kind) => kind,
        Err((kind, what, e)) => {
            out.bad(format!("{what} {:?} failed: {e}", plan.run[j].key()));
            kind
        }
    }
}

/// A failed run operation: its kind, what failed, the index's error (the
/// message is built only then: nothing is formatted on the hot path).
type OpError = (usize, &'static str, dm_index::Error);

async fn run_op_checked(
    tree: &Index,
    plan: &Plan,
    j: usize,
    out: &mut Out,
) -> Result<usize, OpError> {
    let fail = |kind: usize, what: &'static str| move |e| (kind, what, e);
    Ok(match &plan.run[j] {
        Op::Read(k) => {
            if let Some(v) = tree.get(k).await.map_err(fail(0, "get"))? {
                if !allowed(plan, k, v) {
                    out.bad(format!("get {k:?} returned {v:#x}, never written"));
                }
            }
            0
        }
        Op::Insert(k) => {
            tree.insert(k, run_value(j))
                .await
                .map_err(fail(1, "insert"))?;
            1
        }
        Op::Update(k) => {
            let found = tree
                .update(k, run_value(j))
                .await
                .map_err(fail(2, "update"))?;
            if !found && plan.load.contains(k) {
                out.bad(format!("update of loaded key {k:?} did not find it"));
            }
            2
        }
        Op::Remove(k) => {
            tree.remove(k).await.map_err(fail(3, "remove"))?;
            3
        }
        Op::Scan(k, len) => {
            let mut r = std::mem::take(&mut out.scan);
            tree.scan_into(k, *len as usize, &mut r)
                .await
                .map_err(fail(4, "scan from"))?;
            let sorted = (1..r.len()).all(|i| r.key(i - 1) < r.key(i));
            if !sorted || r.len() > *len as usize || (!r.is_empty() && r.key(0) < k.as_slice()) {
                out.bad(format!(
                    "scan from {k:?} returned an unordered or out-of-range result"
                ));
            }
            out.scan = r;
            4
        }
        Op::ReadModifyWrite(k) => {
            let _ = tree.get(k).await.map_err(fail(5, "get"))?;
            tree.update(k, run_value(j))
                .await
                .map_err(fail(5, "update"))?;
            5
        }
    })
}

/// Coroutine `id`'s share of `r` under `--split chunks`: the `id`-th of
/// `total` contiguous chunks of `r.len() / total` operations, the last one
/// taking the remainder (the SMART artifact's `split_workload.py`).
fn chunk(r: std::ops::Range<usize>, id: usize, total: usize) -> std::ops::Range<usize> {
    let size = r.len() / total;
    let start = r.start + id * size;
    let end = if id + 1 == total { r.end } else { start + size };
    start..end
}

/// The coroutines of one core: ids `first..first + coros` of `total`, over
/// every operation or (with `ids`) over the listed ones.
#[allow(clippy::too_many_arguments)]
pub(super) async fn core_phase(
    tree: Rc<Index>,
    plan: Arc<Plan>,
    phase: Phase,
    first: usize,
    coros: usize,
    total: usize,
    pb: ProgressBar,
    ids: Option<Arc<Vec<usize>>>,
) -> Out {
    let hs: Vec<_> = (0..coros)
        .map(|c| {
            dm_runtime::spawn(coroutine(
                tree.clone(),
                plan.clone(),
                phase,
                first + c,
                total,
                pb.clone(),
                ids.clone(),
            ))
        })
        .collect();
    let mut out = Out::new();
    for h in hs {
        out.merge(h.await.unwrap_or_else(JoinError::resume));
    }
    if let Handle::BTree(t) = tree.handle() {
        out.head_prefetch = t.head_prefetch_stats();
    }
    out
}

/// Bulk-loads the index (`--load bulk`: the fine-grained B+trees and DEX,
/// from client 0's first core).
pub(super) async fn bulk_load(
    inst: Arc<dm_index::Instance>,
    plan: Arc<crate::ycsb::plan::Plan>,
    fill: f64,
) -> Result<(), dm_index::Error> {
    let cs = inst.local_cs().start;
    let sorted = crate::ycsb::plan::sorted_load(&plan);
    inst.bulk_load((cs, 0), &sorted, fill).await
}

/// Load-phase counters of a bulk load (its verbs are not per-operation).
pub(super) fn bulk_out(plan: &Plan) -> Out {
    let mut o = Out::new();
    o.counts[1] = plan.load.len() as u64;
    o
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg:>5} [{bar:40}] {pos}/{len} ops ({elapsed})")
            .unwrap()
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// Which coroutines run which operations: every core of this process's
/// CSs runs `coros` coroutines; with DEX's routing (not `--dex-forward`),
/// each CS's coroutines run the operations on its own keys.
pub(super) struct Layout {
    /// (CS, thread) of each core of this process.
    pub cores: Vec<(u16, u16)>,
    /// Coroutines per core (`--coros`).
    pub coros: usize,
    /// Coroutines of this process.
    pub total: usize,
    /// DEX: each CS's coroutines run the operations on its own keys.
    routes: Option<Routes>,
    /// This process is client `ci` (`--client I/N`).
    ci: usize,
    cs: u16,
    threads: u16,
}

impl Layout {
    pub(super) fn new(
        a: &Args,
        ci: usize,
        dexcl: Option<&Arc<dm_tree::DexCluster>>,
        plan: &Plan,
    ) -> Self {
        // DEX: each CS's coroutines run the operations on its own keys.
        let routes = match dexcl {
            Some(cl) if !a.dex.dex_forward => Some(routes(cl, &plan.load, &plan.run)),
            _ => None,
        };
        let cores: Vec<(u16, u16)> = (0..a.cs)
            .flat_map(|cs| (0..a.threads).map(move |t| (cs, t)))
            .collect();
        let coros = a.coros as usize;
        let total = cores.len() * coros;
        Layout {
            cores,
            coros,
            total,
            routes,
            ci,
            cs: a.cs,
            threads: a.threads,
        }
    }

    /// (first coroutine id, coroutines in the group, the group's list) of core i.
    pub(super) fn group(
        &self,
        i: usize,
        (cs, t): (u16, u16),
        ph: Phase,
        coros: usize,
        total: usize,
    ) -> (usize, usize, Option<Arc<Vec<usize>>>) {
        match &self.routes {
            None => (i * coros, total, None),
            Some((l, r)) => (
                t as usize * coros,
                self.threads as usize * coros,
                Some(
                    if ph == Phase::Load { l } else { r }[self.ci * self.cs as usize + cs as usize]
                        .clone(),
                ),
            ),
        }
    }
}

/// The load and run phases' progress bars.
pub(super) struct Bars {
    pub load: ProgressBar,
    pub warm: ProgressBar,
    pub run: ProgressBar,
}

impl Bars {
    pub(super) fn new(plan: &Plan) -> Self {
        let load = bar(plan.load.len() as u64, "load");
        let warm = bar(plan.warm as u64, "warm-up");
        let run = bar((plan.run.len() - plan.warm) as u64, "run");
        Bars { load, warm, run }
    }
}

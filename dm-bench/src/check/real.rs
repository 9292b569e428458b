//! Running a seed's clients on a real fabric (`--fabric loopback|rdma`):
//! the same clients as on sim, on OS threads, one per `--cores` (alternating
//! between two CSs), against real memory (`loopback`) or `dm-memserver`
//! processes (`rdma`). Nothing is injected: torn READs and reordered
//! completions are whatever the hardware does. Times are `CLOCK_MONOTONIC`
//! ns read before an operation is issued and after it returns: one clock for
//! every process of a machine. A seed fixes each client's operations, not
//! the interleaving, so a failing seed cannot be replayed exactly; its
//! history (`--history-out`) is the evidence.
//!
//! With `--client I/N` (rdma), process I runs clients `I*clients..` on CSs
//! `2I` and `2I+1`, process 0 creates each seed's index, and they meet at
//! barriers ([`Proc::meet`]: [`crate::barrier`], as `ycsb --client`) after
//! creation and after the run.

use super::args::Args;
use super::client::client;
use super::history::Event;
use crate::barrier::barrier;
use crate::kv::Kv;
use anyhow::{anyhow, Result};
use dm_runtime::{Executor, JoinError};
use dm_verbs::Fabric;
use std::cell::RefCell;
use std::rc::Rc;

/// Nanoseconds of `CLOCK_MONOTONIC`: the same clock in every process of a machine.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// This process among the check's client processes (`--client I/N`: `ci`
/// of `cn`) and the seeds run before the current one (`round`, which
/// numbers the barriers).
#[derive(Clone, Copy, Debug)]
pub(super) struct Proc {
    pub ci: usize,
    pub cn: usize,
    pub round: u64,
}

impl Proc {
    /// Waits at barrier `k` (1: the index is created, 2: every client is
    /// done) of this seed for all `cn` processes.
    fn meet<Q: dm_verbs::Queues>(&self, ex: &mut Executor<Q>, k: u64, seed: u64) -> Result<()> {
        if self.cn > 1 {
            ex.block_on(barrier(self.ci, self.cn, 2 * self.round + k))
                .map_err(|e| anyhow!("seed {seed}: barrier: {e}"))?;
        }
        Ok(())
    }
}

/// One seed's clients on a real fabric: process 0 runs `create`, all
/// processes meet, then process `ci` runs its clients (ids `ci * clients..`)
/// on `a.cores` threads over its two CSs (thread `i` is core `i / 2` of CS
/// `2ci + i % 2`), each thread's on the handle `open(cs, core)`, drawing
/// keys from `keys`; all meet again when their clients are done.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_clients<F, T>(
    fabric: &F,
    ex: &mut Executor<F::Queues>,
    a: &Args,
    seed: u64,
    p: Proc,
    keys: std::ops::Range<u64>,
    create: impl FnOnce(&mut Executor<F::Queues>) -> Result<(), String>,
    open: impl Fn(u16, u16) -> T + Send + Sync,
) -> Result<Vec<Event>>
where
    F: Fabric + Send + Sync,
    T: Kv + 'static,
{
    if p.ci == 0 {
        create(ex).map_err(|e| anyhow!("seed {seed}: creating the tree: {e}"))?;
    }
    p.meet(ex, 1, seed)?;
    let cs0 = (2 * p.ci) as u16;
    let cores: Vec<(u16, u16)> = (0..a.cores.max(1)).map(|i| (cs0 + i % 2, i / 2)).collect();
    let ncores = cores.len();
    let outs = dm_runtime::run_threads(fabric, &cores, true, |i| {
        let (cs, core) = cores[i];
        let c = CoreClients {
            i,
            ncores,
            ci: p.ci,
            seed,
            keys: keys.clone(),
        };
        let f: BoxedClients = Box::pin(c.run(Rc::new(open(cs, core)), Rc::new(a.clone())));
        f
    });
    p.meet(ex, 2, seed)?;
    let mut events = Vec::new();
    for o in outs {
        events.extend(o.map_err(|e| anyhow!("seed {seed}: a client failed: {e}"))?);
    }
    Ok(events)
}

type BoxedClients =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<Event>, String>>>>;

/// The clients of thread `i` (of `ncores`) of client process `ci`.
struct CoreClients {
    i: usize,
    ncores: usize,
    ci: usize,
    seed: u64,
    keys: std::ops::Range<u64>,
}

impl CoreClients {
    /// Runs them on one tree handle: their events, or the first error.
    async fn run<T: Kv + 'static>(self, t: Rc<T>, a: Rc<Args>) -> Result<Vec<Event>, String> {
        let log = Rc::new(RefCell::new(Vec::new()));
        let hs: Vec<_> = (0..a.clients)
            .filter(|c| *c as usize % self.ncores == self.i)
            .map(|c| {
                let id = self.ci as u32 * a.clients + c;
                dm_runtime::spawn(client(
                    t.clone(),
                    id,
                    self.seed,
                    a.clone(),
                    self.keys.clone(),
                    log.clone(),
                    monotonic_ns,
                    false,
                ))
            })
            .collect();
        let mut err = None;
        for h in hs {
            if let Err(e) = h.await.unwrap_or_else(JoinError::resume) {
                err.get_or_insert(e.to_string());
            }
        }
        let events = log.take();
        match err {
            None => Ok(events),
            Some(e) => Err(e),
        }
    }
}

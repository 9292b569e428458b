//! The executor of one core.
//!
//! A scheduling round ([`Executor::tick`]):
//! 1. drain the cross-core inbox (if its flag is set): wake its task keys,
//!    run its jobs (`inbox::remote_job`: release requests, `crate::lock`);
//! 2. poll the CQ in batches of [`ExecConfig::cq_batch`], storing each result in
//!    its in-flight slot and waking the owner;
//! 3. poll at most [`ExecConfig::max_polls_per_round`] ready tasks, FIFO
//!    (a task that ended its round with [`crate::sync::sync_virtual_time`] waits
//!    for the next round);
//! 4. hand each QP that got WRs this round one post list (one doorbell).
//!
//! On `sim` every task poll, WR and non-empty CQ poll charges the core's
//! virtual CPU clock ([`dm_verbs::CpuCost`]); on `loopback` real CPU time passes.

use crate::core::{enqueue, with_current, CoreState, Entered};
use crate::inbox::{register_executor, unregister_executor, Job, Parker};
use crate::inflight::InFlightTable;
use crate::task::{self, JoinError, JoinHandle, TaskCell, TaskSlot};
use crate::waiter::{Waiter, ABANDONED_KEY};
use crate::waker;
use dm_verbs::{Completion, CpuCost, Queues, VerbStats};
use slab::Slab;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Executor tuning.
#[derive(Clone, Copy, Debug)]
pub struct ExecConfig {
    /// Tasks polled per round before the CQ is polled again (fairness bound).
    pub max_polls_per_round: usize,
    /// Completions taken per `poll_cq` call.
    pub cq_batch: usize,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            max_polls_per_round: 256,
            cq_batch: 64,
        }
    }
}

/// One core's executor over that core's [`Queues`].
pub struct Executor<Q: Queues> {
    core: Rc<CoreState>,
    queues: Q,
    cfg: ExecConfig,
    /// The queues' CPU costs, read once: a fabric's cost model is fixed when
    /// its queues are opened (on sim, reading it borrows the whole simulator).
    cost: CpuCost,
    cq_buf: Vec<Completion>,
    /// The keys of the last inbox drain, swapped with the inbox's queue so
    /// neither is reallocated once warm.
    inbox_buf: Vec<u32>,
    /// Jobs of the last inbox drain (`inbox::remote_job`), run in it.
    jobs_buf: Vec<Job>,
}

impl<Q: Queues> Executor<Q> {
    /// An executor for `queues`, which reach `num_ms` memory servers.
    pub fn new(queues: Q, num_ms: u16, cfg: ExecConfig) -> Self {
        let (exec_id, inbox) = register_executor();
        let cost = queues.cpu_cost();
        let core = Rc::new(CoreState {
            exec_id,
            tasks: RefCell::new(Slab::new()),
            run_queue: RefCell::new(VecDeque::new()),
            deferred: RefCell::new(Vec::new()),
            inflight: RefCell::new(InFlightTable::new()),
            next_gen: Cell::new(0),
            pending: RefCell::new((0..=num_ms).map(|_| Vec::new()).collect()),
            pending_mask: Cell::new(0),
            cur_stats: Cell::new(std::ptr::null_mut()),
            idle_stats: Box::new(UnsafeCell::new(VerbStats::default())),
            cur_ms_mask: Cell::new(0),
            retired: Cell::new(VerbStats::default()),
            doorbells: Cell::new(0),
            trace_on: Cell::new(false),
            clock: queues.clock(),
            inbox,
            num_ms,
            last_list: num_ms as usize,
            op_ns: cost.op_ns,
        });
        core.cur_stats.set(core.idle_stats.get());
        Executor {
            core,
            cost,
            queues,
            cfg,
            cq_buf: Vec::with_capacity(cfg.cq_batch),
            inbox_buf: Vec::new(),
            jobs_buf: Vec::new(),
        }
    }

    /// Process-unique id of this executor.
    pub fn id(&self) -> u32 {
        self.core.exec_id
    }

    /// The queues this executor drives.
    pub fn queues(&self) -> &Q {
        &self.queues
    }

    /// The queues, mutably (fault injection such as breaking a QP in tests).
    pub fn queues_mut(&mut self) -> &mut Q {
        &mut self.queues
    }

    /// Spawns `fut` on this core; it runs on the next ticks.
    pub fn spawn<F: Future + 'static>(&self, fut: F) -> JoinHandle<F::Output> {
        spawn_on(&self.core, fut)
    }

    /// Tasks not yet finished.
    pub fn live_tasks(&self) -> usize {
        self.core.tasks.borrow().len()
    }

    /// True if some task is ready to run.
    pub fn has_ready(&self) -> bool {
        // `deferred` is always empty between ticks (each tick moves it to
        // the run queue), so it needs no check here.
        !self.core.run_queue.borrow().is_empty() || self.core.inbox.flag.load(Ordering::Relaxed)
    }

    /// WRs posted and not yet completed.
    pub fn inflight(&self) -> usize {
        self.core.inflight.borrow().len()
    }

    /// Registers the thread that parks when this executor idles
    /// (`crate::service`): a cross-core wake then unparks it.
    pub(crate) fn set_parker(&self, p: Arc<Parker>) {
        self.core.inbox.set_parker(p);
    }

    /// Runs `f` with this core current on the calling thread, as during a
    /// task poll: [`spawn`] inside `f` spawns here (submitted jobs).
    pub(crate) fn run_entered<R>(&self, f: impl FnOnce() -> R) -> R {
        let _entered = Entered::enter(&self.core);
        f()
    }

    /// Verb totals of this core: the counters of its finished and live
    /// tasks, with the doorbells the core rang (a task's doorbells count
    /// the QPs it posted to per poll; several tasks share one doorbell).
    pub fn stats(&self) -> VerbStats {
        let core = &self.core;
        let mut s = core.retired.get();
        for (_, t) in core.tasks.borrow().iter() {
            s.add(&t.task.stats);
        }
        // SAFETY: no task is being polled (`&self` is not reachable from a
        // task), so nothing writes the idle counters now.
        s.add(unsafe { &*core.idle_stats.get() });
        s.doorbells = core.doorbells.get();
        s
    }

    /// One scheduling round (see the module docs). Returns the number of task polls.
    pub fn tick(&mut self) -> usize {
        let core: &CoreState = &self.core;
        let _entered = Entered::enter(core);
        let cost = self.cost;
        core.trace_on.set(
            tracing::level_filters::STATIC_MAX_LEVEL >= tracing::level_filters::LevelFilter::TRACE
                && tracing::level_filters::LevelFilter::current()
                    >= tracing::level_filters::LevelFilter::TRACE,
        );
        // 1. cross-core wakes
        if core.inbox.flag.load(Ordering::Relaxed) && core.inbox.flag.swap(false, Ordering::Acquire)
        {
            core.inbox
                .drain_into(&mut self.inbox_buf, &mut self.jobs_buf);
            for &k in &self.inbox_buf {
                core.schedule(k);
            }
            self.inbox_buf.clear();
            for job in self.jobs_buf.drain(..) {
                job();
            }
        }
        // 2. completions
        loop {
            let n = self.queues.poll_cq(&mut self.cq_buf, self.cfg.cq_batch);
            if n == 0 {
                break;
            }
            if cost.cq_poll_ns > 0 {
                self.queues.charge_cpu(cost.cq_poll_ns);
            }
            deliver(core, &mut self.cq_buf);
            if n < self.cfg.cq_batch {
                break;
            }
        }
        // 3. ready tasks
        let mut polls = 0;
        while polls < self.cfg.max_polls_per_round {
            let Some(key) = core.run_queue.borrow_mut().pop_front() else {
                break;
            };
            let (cell, free_poll) = {
                let mut tasks = core.tasks.borrow_mut();
                let Some(t) = tasks.get_mut(key as usize) else {
                    continue;
                };
                t.queued = false;
                // SAFETY: the task is polled through this pointer and never
                // moved out of its pinned box.
                let cell = unsafe { t.task.as_mut().get_unchecked_mut() }
                    as *mut TaskCell<dyn Future<Output = ()>>;
                (cell, std::mem::take(&mut t.free_poll))
            };
            polls += 1;
            if cost.poll_ns > 0 && !free_poll {
                self.queues.charge_cpu(cost.poll_ns);
            }
            // SAFETY: the slot, and so the box `cell` points into, stays in
            // the slab until this function removes it after a `Ready` poll
            // (nothing else removes task slots, and a growing slab moves the
            // box, not its contents). The counters and the future are
            // disjoint fields: the verbs of the poll write the counters
            // through `cur_stats` while the future is borrowed.
            let stats = unsafe { std::ptr::addr_of_mut!((*cell).stats) };
            core.cur_stats.set(stats);
            let waker = waker::waker(core.exec_id, key);
            // SAFETY: the future lives in the pinned box of its slot (see
            // above) and is never moved out of it; only the executor drops it.
            let fut = unsafe { Pin::new_unchecked(&mut (*cell).fut) };
            let res = fut.poll(&mut Context::from_waker(&waker));
            core.cur_stats.set(core.idle_stats.get());
            if core.trace_on.get() {
                tracing::trace!(task = key, ready = res.is_ready(), "switch");
            }
            let ms_mask = core.cur_ms_mask.replace(0);
            match res {
                Poll::Ready(()) => {
                    let t = core.tasks.borrow_mut().remove(key as usize);
                    let mut r = core.retired.get();
                    r.add(&t.task.stats);
                    core.retired.set(r);
                    // Dropped outside the slab's borrow: the future's drop
                    // may reach the core.
                    drop(t);
                }
                Poll::Pending if ms_mask != 0 => {
                    // SAFETY: as above; the task is still in its slot.
                    let s = unsafe { &mut *stats };
                    s.rtts += 1;
                    // Doorbells: the core's are counted when the round
                    // rings them; the task's are the QPs this poll used.
                    s.doorbells += ms_mask.count_ones() as u64;
                }
                Poll::Pending => {}
            }
        }
        // Tasks that ended their round run in the next one.
        if !core.deferred.borrow().is_empty() {
            core.run_queue
                .borrow_mut()
                .extend(core.deferred.borrow_mut().drain(..));
        }
        // 4. one post list (doorbell) per QP
        let mask = core.pending_mask.replace(0);
        if mask != 0 {
            let mut pending = core.pending.borrow_mut();
            for (ms, list) in pending.iter_mut().enumerate() {
                if list.is_empty() {
                    continue;
                }
                if cost.post_ns > 0 {
                    self.queues.charge_cpu(cost.post_ns * list.len() as u64);
                }
                core.doorbells.set(core.doorbells.get() + 1);
                self.queues.post_list(ms as u16, list);
            }
        }
        polls
    }

    /// Runs `fut` to completion on this core, ticking until it finishes (busy
    /// polling, as an RDMA core does). For `loopback`/`rdma`; under `sim` use
    /// [`crate::SimRuntime`], which advances virtual time. If `fut` panics,
    /// or a task whose [`JoinHandle`] was dropped panics meanwhile, the panic
    /// resumes here, after the core dropped the task: a harness for tests
    /// and benchmarks, not a service's loop.
    pub fn block_on<F: Future + 'static>(&mut self, fut: F) -> F::Output {
        let h = self.spawn(fut);
        loop {
            if let Some(r) = h.try_take() {
                return r.unwrap_or_else(JoinError::resume);
            }
            self.tick();
            if let Some(e) = task::take_orphan_panic() {
                e.resume::<()>();
            }
        }
    }
}

/// Stores each completion of `cq` (drained) in its in-flight slot and
/// wakes the slot's waiter, in CQ order. The in-flight table, the task slab
/// and the run queue are borrowed once for the batch, not once per
/// completion; a waiter that is a foreign [`std::task::Waker`] is woken
/// with the borrows released (it may reach this core), then the batch goes on.
fn deliver(core: &CoreState, cq: &mut Vec<Completion>) {
    let trace_on = core.trace_on.get();
    let mut batch = cq.drain(..);
    loop {
        let waker = {
            let mut inf = core.inflight.borrow_mut();
            let mut tasks = core.tasks.borrow_mut();
            let mut run_queue = core.run_queue.borrow_mut();
            loop {
                let Some(c) = batch.next() else { break None };
                if let Some(w) = deliver_one(&mut inf, &mut tasks, &mut run_queue, c, trace_on) {
                    break Some(w);
                }
            }
        };
        match waker {
            Some(w) => w.wake(),
            None => return,
        }
    }
}

/// One completion: a stale `wr_id` (freed or reused slot) is dropped, an
/// abandoned slot is freed, otherwise the result goes into the slot and its
/// task is queued, or its foreign waker returned for the caller to wake.
#[inline(always)]
fn deliver_one(
    inf: &mut InFlightTable,
    tasks: &mut Slab<TaskSlot>,
    run_queue: &mut VecDeque<u32>,
    c: Completion,
    trace_on: bool,
) -> Option<Waker> {
    let key = c.wr_id as u32;
    let gen = (c.wr_id >> 32) as u32;
    let slot = inf.get_mut(key).filter(|s| s.gen == gen)?;
    if trace_on {
        tracing::trace!(key, wr_id = c.wr_id, ok = c.result.is_ok(), "completion");
    }
    // Once the result is in, the waiter is no longer needed: a later poll takes
    // the result, a drop frees the slot.
    match std::mem::replace(&mut slot.waiter, Waiter::ABANDONED) {
        Waiter::Task(ABANDONED_KEY) => {
            inf.remove(key);
            None
        }
        Waiter::Task(k) => {
            // The slot's result is empty until its one delivery (the
            // waiter was not abandoned yet): store without the drop check
            // of an old value, which the compiler cannot rule out (a
            // non-empty one would only leak).
            debug_assert!(slot.result.is_none());
            std::mem::forget(slot.result.replace(c.result));
            enqueue(tasks, run_queue, k);
            None
        }
        Waiter::Waker(w) => {
            slot.result = Some(c.result);
            Some(w)
        }
    }
}

/// Spawns `fut` on the current core. Panics outside a dm-runtime task.
pub fn spawn<F: Future + 'static>(fut: F) -> JoinHandle<F::Output> {
    with_current(|c| spawn_on(c, fut))
}

pub(crate) fn spawn_on<F: Future + 'static>(core: &CoreState, fut: F) -> JoinHandle<F::Output> {
    let (boxed, handle) = task::wrap(fut);
    let key = core.tasks.borrow_mut().insert(TaskSlot {
        task: boxed,
        queued: true,
        free_poll: false,
    });
    // Keys are u32 in wakers and `wr_id`s, and u32::MAX marks an abandoned
    // in-flight slot: 2^32 - 1 live tasks on one core is the limit.
    assert!(
        key < ABANDONED_KEY as usize,
        "dm-runtime: more than 2^32 - 1 live tasks on one core"
    );
    let key = key as u32;
    core.run_queue.borrow_mut().push_back(key);
    handle
}

impl<Q: Queues> Drop for Executor<Q> {
    fn drop(&mut self) {
        unregister_executor(self.core.exec_id);
        // Drop task futures with this core current, so their verb futures can clean up.
        let core: &CoreState = &self.core;
        let _entered = Entered::enter(core);
        let futs: Vec<_> = core.tasks.borrow_mut().drain().map(|t| t.task).collect();
        drop(futs);
    }
}

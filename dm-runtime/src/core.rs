//! Per-core state shared by the executor and the futures it polls, and the
//! public calls that reach it from a task ([`now_ns`], [`charge_op`],
//! [`task_stats`]...).
//!
//! Who may touch what: every field is touched only by the OS thread that runs
//! the core's executor (the `Cell`/`RefCell`s are never shared across threads).
//! Other cores reach a core only through its [`Inbox`], a mutex-guarded
//! queue drained once per scheduling round. Futures find their core through the
//! thread-local `CURRENT`, which the executor sets while it polls a task.

use crate::inbox::Inbox;
use crate::inflight::InFlightTable;
use crate::task::TaskSlot;
use dm_verbs::{Clock, VerbStats, WorkRequest};
use slab::Slab;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;

pub(crate) struct CoreState {
    pub(crate) exec_id: u32,
    pub(crate) tasks: RefCell<Slab<TaskSlot>>,
    pub(crate) run_queue: RefCell<VecDeque<u32>>,
    /// Tasks that ended their round (`sync_virtual_time`): queued
    /// (their `queued` flag is set) but moved to `run_queue` only when the
    /// round is over, so the executor does not poll them again this round.
    /// Empty outside a tick.
    pub(crate) deferred: RefCell<Vec<u32>>,
    pub(crate) inflight: RefCell<InFlightTable>,
    pub(crate) next_gen: Cell<u32>,
    /// WRs posted this round, per MS plus one list for invalid MS ids (one post list = one doorbell each).
    pub(crate) pending: RefCell<Vec<Vec<WorkRequest>>>,
    /// Bit i set: MS i has pending WRs (MS ids >= 64 share bit 63 and are scanned).
    pub(crate) pending_mask: Cell<u64>,
    /// The counters verbs are counted in: the polled task's
    /// (`TaskCell::stats`, set by the executor around each poll), else
    /// `idle_stats`. Never null.
    pub(crate) cur_stats: Cell<*mut VerbStats>,
    /// Counters of verbs posted outside any task poll (none in practice; the
    /// core totals include them).
    pub(crate) idle_stats: Box<UnsafeCell<VerbStats>>,
    /// QPs (bit per MS) the polled task posted to in this poll: its
    /// doorbells; not 0 exactly when it posted (an RTT if it parks).
    pub(crate) cur_ms_mask: Cell<u64>,
    /// Counters of the tasks that finished; the core totals are these plus
    /// the live tasks' ([`crate::Executor::stats`]).
    pub(crate) retired: Cell<VerbStats>,
    /// Post lists the core rang (one doorbell each).
    pub(crate) doorbells: Cell<u64>,
    /// `trace`-level events can be enabled (read once per round, so the
    /// per-verb events cost one test when nobody collects them).
    pub(crate) trace_on: Cell<bool>,
    pub(crate) clock: Clock,
    pub(crate) inbox: &'static Inbox,
    pub(crate) num_ms: u16,
    /// `num_ms` as a word: the index of the post list for invalid MS ids.
    /// Kept apart from the one-byte cells beside `num_ms`, which `post`
    /// writes just before it reads this: a wide load of `num_ms` that
    /// overlapped the byte just stored could not be forwarded and stalled
    /// every post (a quarter of the verb future's samples in `perf`).
    pub(crate) last_list: usize,
    /// The fabric's CPU charge per index operation (`CpuCost::op_ns`), for
    /// [`charge_op`].
    pub(crate) op_ns: u64,
}

/// Queues task `key` on `run_queue` if it exists and is not queued yet
/// (its `queued` flag keeps it in the queue at most once).
#[inline(always)]
pub(crate) fn enqueue(tasks: &mut Slab<TaskSlot>, run_queue: &mut VecDeque<u32>, key: u32) {
    if let Some(t) = tasks.get_mut(key as usize) {
        if !t.queued {
            t.queued = true;
            run_queue.push_back(key);
        }
    }
}

thread_local! {
    /// The core whose executor is ticking on this thread; null otherwise.
    /// Set only through [`Entered`], which restores the previous value on
    /// drop, also when a panic unwinds out of the tick.
    static CURRENT: Cell<*const CoreState> = const { Cell::new(std::ptr::null()) };
}

/// Makes a core the current one on this thread until dropped, then restores
/// the previous value: on a normal return and when a panic unwinds through
/// the scope (the role of async-task's `Guard` and tokio's scoped context).
/// Without it a caught panic would leave `CURRENT` pointing at a core that
/// may be freed next, and a later runtime call would read freed memory.
pub(crate) struct Entered {
    prev: *const CoreState,
}

impl Entered {
    /// `core` is current until the guard drops; the caller keeps `core`
    /// alive (and at the same address) for at least that long.
    #[inline]
    pub(crate) fn enter(core: &CoreState) -> Self {
        Entered {
            prev: CURRENT.with(|c| c.replace(core as *const CoreState)),
        }
    }
}

impl Drop for Entered {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Runs `f` with the core whose executor is polling on this thread.
/// Panics with a clear message outside a dm-runtime task.
#[inline(always)]
pub(crate) fn with_current<R>(f: impl FnOnce(&CoreState) -> R) -> R {
    let p = CURRENT.with(|c| c.get());
    assert!(
        !p.is_null(),
        "dm-runtime: verb or runtime call outside a task polled by a dm-runtime executor"
    );
    // SAFETY: CURRENT is set only through `Entered`, by the executor ticking (or
    // dropping its tasks) on this thread, to a CoreState that the executor keeps alive
    // (inside an Rc it owns) while the guard lives; the guard restores the previous value
    // when dropped, also on unwinding. We hand out a shared reference only for `f`.
    f(unsafe { &*p })
}

/// Like [`with_current`] but returns `None` outside a task.
pub(crate) fn try_current<R>(f: impl FnOnce(&CoreState) -> R) -> Option<R> {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        None
    } else {
        // SAFETY: as in `with_current`.
        Some(f(unsafe { &*p }))
    }
}

impl CoreState {
    /// Queues a task on this core's run queue if it exists and is not queued yet.
    #[inline]
    pub(crate) fn schedule(&self, key: u32) {
        enqueue(
            &mut self.tasks.borrow_mut(),
            &mut self.run_queue.borrow_mut(),
            key,
        );
    }

    /// Adds a WR to MS `ms` (its verb's target) to this round's post list
    /// for `ms`: `push` appends it to the list. The caller has counted it
    /// (`cur_stats`).
    ///
    /// `cur_stats` points at the polled task's counters, which live as long
    /// as the task (the executor resets the pointer to `idle_stats` after
    /// the poll), or at `idle_stats`; writers dereference it for one
    /// statement and hold no reference across calls.
    #[inline(always)]
    pub(crate) fn post(&self, ms: u16, push: impl FnOnce(&mut Vec<WorkRequest>)) {
        let bit = 1u64 << (ms.min(63));
        self.cur_ms_mask.set(self.cur_ms_mask.get() | bit);
        self.pending_mask.set(self.pending_mask.get() | bit);
        // Lists 0..num_ms are the QPs; the last list collects WRs for MS ids the
        // fabric does not have (posted as MS `num_ms`, so they fail as OutOfBounds).
        let i = (ms as usize).min(self.last_list);
        push(&mut self.pending.borrow_mut()[i]);
    }
}

/// The current core's clock, ns (virtual on sim, wall otherwise).
pub fn now_ns() -> u64 {
    with_current(|c| c.clock.now_ns())
}

/// Whether the current core's clock is virtual (`sim`), where cores run
/// ahead of one another inside a scheduling round and state they share
/// through CS memory must be ordered by virtual time
/// ([`sync_virtual_time`](crate::sync_virtual_time), DEX's Lamport stamps).
/// `false` on wall clocks (`loopback`, `rdma`): real cores already act in
/// time order, and an index can skip that bookkeeping (a clock read costs
/// a `clock_gettime` there). Panics outside a dm-runtime task, as
/// [`now_ns`] does.
pub fn clock_is_virtual() -> bool {
    with_current(|c| matches!(c.clock, dm_verbs::Clock::Virtual(_)))
}

/// The polling core's executor id ([`Executor::id`](crate::Executor::id))
/// and clock (ns), or `None` outside a dm-runtime executor's tick. For
/// `tracing` subscribers that stamp the runtime's events (`post`,
/// `completion`, `switch`, `lock wait`, `lock granted`) with the core's
/// virtual time (`dm-bench trace`).
pub fn current_core_clock() -> Option<(u32, u64)> {
    try_current(|c| (c.exec_id, c.clock.now_ns()))
}

/// Where the current core stands in handing its posts to the NIC: see
/// [`unposted_mark`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostMark {
    exec: u32,
    doorbells: u64,
}

/// A mark of the current core's doorbells, for an operation that shares
/// its result with others that start after it (SMART's read delegation,
/// `dm_art::rdwc`): two equal marks taken in tasks mean that between them
/// this core rang no doorbell, so a verb posted by a task of this core
/// after the first mark had not reached the NIC (had not executed) when the
/// second was taken. A core rings its post lists only after it polled every
/// task of its round (`Executor::tick`), so the tasks polled after a post
/// in the same round all take the poster's mark.
///
/// `None` outside a dm-runtime task and on virtual clocks (`sim`): there a
/// verb takes effect at its post's virtual time, which the later polls of
/// the same round may pass (each charges its CPU to the core's clock), so
/// "not rung yet" does not order it after them.
#[inline]
pub fn unposted_mark() -> Option<PostMark> {
    try_current(|c| match c.clock {
        Clock::Virtual(_) => None,
        _ => Some(PostMark {
            exec: c.exec_id,
            doorbells: c.doorbells.get(),
        }),
    })
    .flatten()
}

/// Charges `ns` of local CPU work to the current core: an index's traversal
/// of its CS-side cache, which posts no verb and so costs nothing on `sim`
/// unless charged. Advances the core's virtual clock on sim (later events of
/// this core, and `now_ns`, move by `ns`); no-op on wall-clock fabrics.
pub fn charge_cpu(ns: u64) {
    with_current(|c| c.clock.charge(ns))
}

/// Charges the fabric's CPU cost of one index operation
/// ([`dm_verbs::CpuCost::op_ns`], set by the sim's network model; 0 on real
/// fabrics, where the CPU is really spent) to the current core. Called by
/// the client that issues operations (dm-bench's `ycsb` driver), once per
/// operation before it starts.
pub fn charge_op() {
    with_current(|c| c.clock.charge(c.op_ns))
}

/// Verb counters of the running task so far (take a difference around an
/// operation to get its per-operation cost).
pub fn task_stats() -> VerbStats {
    with_current(|c| {
        // SAFETY: as in `CoreState::post`.
        let mut s = unsafe { *c.cur_stats.get() };
        // The round trip this poll is about to wait for is not counted yet
        // (none, mostly: the baseline x86-64 target has no `popcnt`, and
        // its bit-twiddling sequence was a third of this function).
        let mask = c.cur_ms_mask.get();
        if mask != 0 {
            s.doorbells += mask.count_ones() as u64;
        }
        s
    })
}

/// Number of memory servers the current core reaches.
pub fn num_ms() -> u16 {
    with_current(|c| c.num_ms)
}

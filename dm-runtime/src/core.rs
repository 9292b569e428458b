//! Per-core state shared by the executor and the futures it polls.
//!
//! Who may touch what: every field is touched only by the OS thread that runs
//! the core's executor (the `Cell`/`RefCell`s are never shared across threads).
//! Other cores reach a core only through its [`crate::task::Inbox`], a mutex-guarded
//! queue drained once per scheduling round. Futures find their core through the
//! thread-local `CURRENT`, which the executor sets while it polls a task.

use crate::inflight::InFlightTable;
use crate::task::{Inbox, TaskSlot};
use dm_verbs::{Clock, VerbStats, WorkRequest};
use slab::Slab;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Waker;

/// Whom a completion wakes. 16 bytes: `Task`'s key sits beside the
/// niche of the waker's vtable pointer, which a third variant would not
/// (24 bytes, and an in-flight slot of 72 instead of one 64-byte line).
pub(crate) enum Waiter {
    /// A task of this core, by key: the common case, woken without a waker
    /// clone, drop or vtable call. Key [`ABANDONED_KEY`] is
    /// [`Waiter::ABANDONED`].
    Task(u32),
    /// Any other waker (a combinator's, or another executor's).
    Waker(Waker),
}

/// The task key no task has (slab keys stay below it): the future was
/// dropped, and the completion just frees the slot.
pub(crate) const ABANDONED_KEY: u32 = u32::MAX;

impl Waiter {
    /// The future was dropped; the completion just frees the slot.
    pub(crate) const ABANDONED: Waiter = Waiter::Task(ABANDONED_KEY);

    pub(crate) fn is_abandoned(&self) -> bool {
        matches!(self, Waiter::Task(ABANDONED_KEY))
    }
}

pub(crate) struct CoreState {
    pub(crate) exec_id: u32,
    pub(crate) tasks: RefCell<Slab<TaskSlot>>,
    pub(crate) run_queue: RefCell<VecDeque<u32>>,
    /// Tasks that ended their round ([`crate::sync_virtual_time`]): queued
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
    pub(crate) inbox: Arc<Inbox>,
    pub(crate) num_ms: u16,
    /// `num_ms` as a word: the index of the post list for invalid MS ids.
    /// Kept apart from the one-byte cells beside `num_ms`, which `post`
    /// writes just before it reads this: a wide load of `num_ms` that
    /// overlapped the byte just stored could not be forwarded and stalled
    /// every post (a quarter of the verb future's samples in `perf`).
    pub(crate) last_list: usize,
    /// The fabric's CPU charge per index operation (`CpuCost::op_ns`), for
    /// [`crate::charge_op`].
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
    pub(crate) static CURRENT: Cell<*const CoreState> = const { Cell::new(std::ptr::null()) };
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
    // SAFETY: CURRENT is set only by `Executor::tick` on this thread to a CoreState that
    // the executor keeps alive (inside an Rc it owns) for the whole tick, and reset before
    // the tick returns; we only hand out a shared reference for the duration of `f`.
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

    /// Queues the task of waker `w` for the next round, not this one; false
    /// if `w` is not a task waker of this core (the caller wakes it instead).
    pub(crate) fn defer(&self, w: &Waker) -> bool {
        let Some(key) = crate::task::local_key(w, self.exec_id) else {
            return false;
        };
        let mut tasks = self.tasks.borrow_mut();
        if let Some(t) = tasks.get_mut(key as usize) {
            if !t.queued {
                t.queued = true;
                t.free_poll = true;
                self.deferred.borrow_mut().push(key);
            }
        }
        true
    }

    /// The [`Waiter`] for a future polled with `w`.
    #[inline]
    pub(crate) fn waiter(&self, w: &Waker) -> Waiter {
        match crate::task::local_key(w, self.exec_id) {
            Some(k) => Waiter::Task(k),
            None => Waiter::Waker(w.clone()),
        }
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

//! Tasks: a spawned future in one heap allocation with its verb counters
//! ([`TaskCell`]), its slot in the core's slab ([`TaskSlot`]), and the
//! [`JoinHandle`] its output goes to. How a task is woken is in `waker.rs`;
//! how it is polled, in `executor.rs`.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// A spawned task in one heap allocation: its verb counters, then its
/// future (type-erased behind [`BoxedTask`]). While the executor polls the
/// task, `CoreState::cur_stats` points at `stats`, so a verb is counted
/// where it is posted, with no per-poll fold; the allocation never moves
/// (the task slab may grow during a poll, the box does not).
pub(crate) struct TaskCell<F: ?Sized> {
    pub(crate) stats: dm_verbs::VerbStats,
    pub(crate) fut: F,
}

/// A spawned task, type-erased.
pub(crate) type BoxedTask = Pin<Box<TaskCell<dyn Future<Output = ()>>>>;

/// A task's slot in the core's slab. The executor polls the task in place
/// (the slot stays in the slab during its poll; only the executor removes
/// it, after a poll that returned `Ready`).
pub(crate) struct TaskSlot {
    pub(crate) task: BoxedTask,
    pub(crate) queued: bool,
    /// The next poll resumes the task after it ended its round
    /// (`sync_virtual_time`): a simulation artefact, so it charges no CPU
    /// time.
    pub(crate) free_poll: bool,
}

/// Output slot shared by a spawned task and its [`JoinHandle`].
pub(crate) struct JoinSlot<T> {
    pub(crate) value: Option<T>,
    pub(crate) waiter: Option<std::task::Waker>,
    pub(crate) done: bool,
}

/// Handle on a spawned task's output. Await it inside a task on the same core,
/// or call [`JoinHandle::try_take`] after the executor has run.
pub struct JoinHandle<T> {
    pub(crate) slot: Rc<RefCell<JoinSlot<T>>>,
}

impl<T> JoinHandle<T> {
    /// The output if the task has finished (once).
    pub fn try_take(&self) -> Option<T> {
        self.slot.borrow_mut().value.take()
    }

    /// True once the task has finished.
    pub fn is_finished(&self) -> bool {
        self.slot.borrow().done
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.slot.borrow_mut();
        match s.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A spawned future and the join slot its output goes to. A plain future
/// rather than an `async` block around `fut`, so a task poll resumes one
/// state machine (the task's own), not two.
pub(crate) struct Joined<F: Future> {
    fut: F,
    slot: Rc<RefCell<JoinSlot<F::Output>>>,
}

impl<F: Future> Future for Joined<F> {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `fut` is structurally pinned (never moved out of `self`);
        // `slot` is not pinned and only read through a shared reference.
        let this = unsafe { self.get_unchecked_mut() };
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        let Poll::Ready(v) = fut.poll(cx) else {
            return Poll::Pending;
        };
        let w = {
            let mut s = this.slot.borrow_mut();
            s.value = Some(v);
            s.done = true;
            s.waiter.take()
        };
        if let Some(w) = w {
            w.wake();
        }
        Poll::Ready(())
    }
}

/// Wraps `fut` so that its output lands in a join slot. The executor polls
/// the task until its first `Ready` and then drops it, so `Joined` is never
/// polled after it finished.
pub(crate) fn wrap<F: Future + 'static>(fut: F) -> (BoxedTask, JoinHandle<F::Output>) {
    let slot = Rc::new(RefCell::new(JoinSlot {
        value: None,
        waiter: None,
        done: false,
    }));
    let cell = Box::pin(TaskCell {
        stats: dm_verbs::VerbStats::default(),
        fut: Joined {
            fut,
            slot: slot.clone(),
        },
    });
    (cell, JoinHandle { slot })
}

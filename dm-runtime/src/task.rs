//! Tasks: a spawned future in one heap allocation with its verb counters
//! ([`TaskCell`]), its slot in the core's slab ([`TaskSlot`]), and the
//! [`JoinHandle`] its output goes to. How a task is woken is in `waker.rs`;
//! how it is polled, in `executor.rs`.
//!
//! A task that panics fails alone: [`Joined`] catches the panic of its
//! poll, stores a [`JoinError`] as the task's output and ends the task; the
//! executor drops it (its in-flight verbs are abandoned, see `verbs.rs`)
//! and goes on with its other tasks, as tokio does. If the task's
//! [`JoinHandle`] was already dropped, nobody could see that error: it is
//! kept as this thread's orphan panic ([`take_orphan_panic`]), which the
//! run-to-completion drivers (`Executor::block_on`, `SimRuntime::run`)
//! resume, so a failed assertion in a detached test task still fails.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
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

/// Why a task has no output: its future panicked while polled. The core
/// that ran it dropped the task and went on serving its other tasks; the
/// panic message was also printed by the process's panic hook.
pub struct JoinError {
    payload: Box<dyn Any + Send + 'static>,
}

impl JoinError {
    /// The error of a panic caught with `payload` (submitted jobs, which
    /// catch their own panics: `crate::service`).
    pub(crate) fn from_panic(payload: Box<dyn Any + Send + 'static>) -> Self {
        JoinError { payload }
    }

    /// The panic's message, when its payload is a string (as `panic!` makes).
    pub fn message(&self) -> &str {
        if let Some(s) = self.payload.downcast_ref::<&'static str>() {
            s
        } else if let Some(s) = self.payload.downcast_ref::<String>() {
            s
        } else {
            "(non-string panic payload)"
        }
    }

    /// The panic payload, e.g. for `std::panic::resume_unwind`.
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.payload
    }

    /// Resumes the task's panic on this thread: for callers to whom a
    /// panicking task is a bug (`handle.await.unwrap_or_else(JoinError::resume)`;
    /// generic over `T` so it fits any `unwrap_or_else`, it never returns).
    pub fn resume<T>(self) -> T {
        std::panic::resume_unwind(self.payload)
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinError::Panic({:?})", self.message())
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task panicked: {}", self.message())
    }
}

impl std::error::Error for JoinError {}

thread_local! {
    /// The first panic, since it was last taken, of a task polled on this
    /// thread whose [`JoinHandle`] had been dropped.
    static ORPHAN_PANIC: RefCell<Option<JoinError>> = const { RefCell::new(None) };
}

/// The first panic of a task on this thread whose [`JoinHandle`] had been
/// dropped, since the last call (module docs).
pub(crate) fn take_orphan_panic() -> Option<JoinError> {
    ORPHAN_PANIC.with(|p| p.borrow_mut().take())
}

/// Output slot shared by a spawned task and its [`JoinHandle`].
pub(crate) struct JoinSlot<T> {
    pub(crate) value: Option<Result<T, JoinError>>,
    pub(crate) waiter: Option<std::task::Waker>,
    pub(crate) done: bool,
}

/// Handle on a spawned task's output. Await it inside a task on the same core,
/// or call [`JoinHandle::try_take`] after the executor has run. The output is
/// `Err(JoinError)` if the task panicked.
pub struct JoinHandle<T> {
    pub(crate) slot: Rc<RefCell<JoinSlot<T>>>,
}

impl<T> JoinHandle<T> {
    /// The output if the task has finished (once): `Ok` with the future's
    /// output, `Err` if it panicked.
    pub fn try_take(&self) -> Option<Result<T, JoinError>> {
        self.slot.borrow_mut().value.take()
    }

    /// True once the task has finished.
    pub fn is_finished(&self) -> bool {
        self.slot.borrow().done
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
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
        // SAFETY: `this.fut` is never moved while `self` is pinned (above).
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        // A panic fails this task only: the executor drops it after this
        // `Ready` and never polls it again, so no broken state is observed.
        let v = match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(v)) => Ok(v),
            Err(payload) => {
                let e = JoinError { payload };
                tracing::error!(error = %e, "dm-runtime: a task panicked; its core goes on");
                if Rc::strong_count(&this.slot) == 1 {
                    // The handle is gone: keep the panic for the driver.
                    ORPHAN_PANIC.with(|p| {
                        p.borrow_mut().get_or_insert(e);
                    });
                    return Poll::Ready(());
                }
                Err(e)
            }
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

//! Tasks, wakers and join handles.
//!
//! A task is a boxed future in the core's `Slab`. Its waker needs no reference
//! count and no allocation: the waker's data word packs `(exec_id << 32) | key`.
//! `wake` on the thread that is running that executor pushes the key on the
//! local run queue (no atomics); from anywhere else it goes to the target core's
//! [`Inbox`] (a mutex, off the same-core fast path). Waking a key whose task has
//! finished is a no-op; waking a reused key only causes a spurious poll, which
//! futures tolerate.

use crate::core::{try_current, CoreState};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

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
    /// ([`crate::sync_virtual_time`]): a simulation artefact, so it charges
    /// no CPU time.
    pub(crate) free_poll: bool,
}

/// Cross-core wake queue of one executor.
#[derive(Default)]
pub(crate) struct Inbox {
    pub(crate) flag: AtomicBool,
    pub(crate) keys: Mutex<Vec<u32>>,
}

/// Executors by id, for cross-core wakes. Ids are never reused.
fn registry() -> &'static Mutex<Vec<Option<Arc<Inbox>>>> {
    static R: OnceLock<Mutex<Vec<Option<Arc<Inbox>>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

pub(crate) fn register_executor() -> (u32, Arc<Inbox>) {
    let inbox = Arc::new(Inbox::default());
    let mut r = registry().lock().unwrap();
    r.push(Some(inbox.clone()));
    ((r.len() - 1) as u32, inbox)
}

pub(crate) fn unregister_executor(id: u32) {
    if let Some(s) = registry().lock().unwrap().get_mut(id as usize) {
        *s = None;
    }
}

thread_local! {
    /// Executor ids woken from this thread through their inbox (the sim driver
    /// drains it to schedule those simulated cores).
    pub(crate) static REMOTE_WOKEN: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

fn remote_wake(exec: u32, key: u32) {
    let inbox = registry()
        .lock()
        .unwrap()
        .get(exec as usize)
        .and_then(|s| s.clone());
    if let Some(inbox) = inbox {
        inbox.keys.lock().unwrap().push(key);
        inbox.flag.store(true, Ordering::Release);
        REMOTE_WOKEN.with(|w| w.borrow_mut().push(exec));
    }
}

fn wake_data(data: usize) {
    let exec = (data >> 32) as u32;
    let key = data as u32;
    let local = try_current(|c: &CoreState| {
        if c.exec_id == exec {
            c.schedule(key);
            true
        } else {
            false
        }
    });
    if local != Some(true) {
        remote_wake(exec, key);
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(
    |d| RawWaker::new(d, &VTABLE),
    |d| wake_data(d as usize),
    |d| wake_data(d as usize),
    |_| {},
);

/// If `w` is a dm-runtime task waker of executor `exec`, the task key.
#[inline]
pub(crate) fn local_key(w: &Waker, exec: u32) -> Option<u32> {
    if std::ptr::eq(w.vtable(), &VTABLE) {
        let d = w.data() as usize;
        if (d >> 32) as u32 == exec {
            return Some(d as u32);
        }
    }
    None
}

pub(crate) fn waker(exec: u32, key: u32) -> Waker {
    let data = ((exec as usize) << 32) | key as usize;
    // SAFETY: the vtable functions only interpret `data` as an integer; there is no
    // pointee, so cloning/dropping need no bookkeeping and every thread may call them.
    unsafe { Waker::from_raw(RawWaker::new(data as *const (), &VTABLE)) }
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

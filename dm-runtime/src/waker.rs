//! Task wakers, and what a core does with the waker a future is polled with.
//!
//! A waker needs no reference count and no allocation: its data word packs
//! `(exec_id << 32) | key`, so cloning and dropping are free and it is `Send`
//! by construction. `wake` on the thread that is running that executor pushes
//! the key on the local run queue (no atomics); from anywhere else it goes to
//! the target core's inbox ([`crate::inbox`]). Waking a key whose task has
//! finished is a no-op; waking a reused key only causes a spurious poll, which
//! futures tolerate. A core decodes a waker of its own back into the task key
//! ([`local_key`]): an in-flight slot then names the task, not a waker clone.

use crate::core::{try_current, CoreState};
use crate::inbox::remote_wake;
use crate::waiter::Waiter;
use std::task::{RawWaker, RawWakerVTable, Waker};

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

impl CoreState {
    /// Queues the task of waker `w` for the next round, not this one; false
    /// if `w` is not a task waker of this core (the caller wakes it instead).
    pub(crate) fn defer(&self, w: &Waker) -> bool {
        let Some(key) = local_key(w, self.exec_id) else {
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
        match local_key(w, self.exec_id) {
            Some(k) => Waiter::Task(k),
            None => Waiter::Waker(w.clone()),
        }
    }
}

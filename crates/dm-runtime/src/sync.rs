//! Local synchronisation on a compute server.
//!
//! - [`yield_now`]: a switch point after a lock failure (retry later).
//! - [`LocalLockTable`]: the CS-local half of Sherman's hierarchical on-chip lock
//!   (HOCL, Sherman §4.3). One table per CS, shared by its cores; a slot per hash
//!   of the lock key; FIFO wait queue; a waiter parks (a queue wait, not a spin).
//!   The holder may *hand over* the lock to the next local waiter, together with
//!   the remote lock it still holds, at most `max_handover` times in a row
//!   (Sherman uses 4) so that other CSs are not starved.
//! - [`SharedCell`]: a CS-wide once-cell with cross-core wakes: one task fills
//!   it, every waiter on any core of the CS gets a clone (SMART read delegation, §4.2).
//!
//! Same-core fast paths (uncontended lock, already-set cell) take one uncontended
//! mutex and never touch another core; wakes across cores go through the target
//! core's inbox.

use std::collections::VecDeque;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Yields once: the task goes to the back of its core's run queue.
pub fn yield_now() -> YieldNow {
    YieldNow(false)
}

/// Future of [`yield_now`].
pub struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[derive(Default)]
struct WaitCell {
    /// `Some(handed_over)` once the lock is granted to this waiter.
    state: Mutex<(Option<bool>, Option<Waker>)>,
}

#[derive(Default)]
struct LockSlot {
    held: bool,
    handovers: u32,
    waiters: VecDeque<Arc<WaitCell>>,
}

/// Local lock table with FIFO wait queues and bounded hand-over (Sherman §4.3).
pub struct LocalLockTable {
    slots: Box<[Mutex<LockSlot>]>,
    max_handover: u32,
}

impl LocalLockTable {
    /// `slots` lock slots (keys hash into them; colliding keys share a lock,
    /// which is safe), at most `max_handover` consecutive hand-overs.
    pub fn new(slots: usize, max_handover: u32) -> Self {
        LocalLockTable {
            slots: (0..slots.max(1)).map(|_| Mutex::default()).collect(),
            max_handover,
        }
    }

    fn slot_of(&self, key: u64) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        (h.finish() % self.slots.len() as u64) as usize
    }

    /// Acquires the local lock of `key`. If the guard says
    /// [`LocalLockGuard::handed_over`], the previous holder passed its remote lock
    /// along and the caller must not acquire it again.
    pub async fn lock(&self, key: u64) -> LocalLockGuard<'_> {
        let slot = self.slot_of(key);
        let cell = {
            let mut s = self.slots[slot].lock().unwrap();
            if !s.held {
                s.held = true;
                s.handovers = 0;
                return LocalLockGuard {
                    table: self,
                    slot,
                    handed_over: false,
                    released: false,
                };
            }
            let c = Arc::new(WaitCell::default());
            s.waiters.push_back(c.clone());
            c
        };
        let handed_over = LockWait {
            table: self,
            slot,
            cell: Some(cell),
        }
        .await;
        LocalLockGuard {
            table: self,
            slot,
            handed_over,
            released: false,
        }
    }

    fn grant_next(&self, slot: usize, hand_over: bool) -> bool {
        let mut s = self.slots[slot].lock().unwrap();
        if hand_over && s.handovers >= self.max_handover {
            return false;
        }
        match s.waiters.pop_front() {
            Some(c) => {
                s.handovers = if hand_over { s.handovers + 1 } else { 0 };
                drop(s);
                let w = {
                    let mut st = c.state.lock().unwrap();
                    st.0 = Some(hand_over);
                    st.1.take()
                };
                if let Some(w) = w {
                    w.wake();
                }
                true
            }
            None if hand_over => false,
            None => {
                s.held = false;
                s.handovers = 0;
                true
            }
        }
    }
}

struct LockWait<'a> {
    table: &'a LocalLockTable,
    slot: usize,
    cell: Option<Arc<WaitCell>>,
}

impl Future for LockWait<'_> {
    type Output = bool;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let cell = self.cell.as_ref().expect("polled after completion");
        let mut st = cell.state.lock().unwrap();
        if let Some(h) = st.0 {
            drop(st);
            self.cell = None;
            return Poll::Ready(h);
        }
        st.1 = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for LockWait<'_> {
    fn drop(&mut self) {
        let Some(cell) = self.cell.take() else { return };
        let mut s = self.table.slots[self.slot].lock().unwrap();
        if let Some(i) = s.waiters.iter().position(|c| Arc::ptr_eq(c, &cell)) {
            s.waiters.remove(i);
            return;
        }
        drop(s);
        // Granted but never observed: pass the lock on as a plain release.
        if cell.state.lock().unwrap().0.is_some() {
            self.table.grant_next(self.slot, false);
        }
    }
}

/// A held local lock. Dropping it releases the lock to the next waiter, who must
/// acquire the remote lock itself; release the remote lock *before* dropping.
pub struct LocalLockGuard<'a> {
    table: &'a LocalLockTable,
    slot: usize,
    handed_over: bool,
    released: bool,
}

impl LocalLockGuard<'_> {
    /// True if the previous holder handed the remote lock over with this lock.
    pub fn handed_over(&self) -> bool {
        self.handed_over
    }

    /// Hands the lock (and the remote lock the caller still holds) to the next
    /// local waiter. `Err(self)` when there is no waiter or the hand-over bound
    /// is reached: then release the remote lock and drop the guard.
    pub fn try_hand_over(mut self) -> Result<(), Self> {
        if self.table.grant_next(self.slot, true) {
            self.released = true;
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl Drop for LocalLockGuard<'_> {
    fn drop(&mut self) {
        if !self.released {
            self.table.grant_next(self.slot, false);
        }
    }
}

/// A CS-wide once-cell: [`SharedCell::set`] once, [`SharedCell::get`] from any
/// core waits for the value. Share it with `Arc`.
pub struct SharedCell<T> {
    inner: Mutex<(Option<T>, Vec<Waker>)>,
}

impl<T: Clone> Default for SharedCell<T> {
    fn default() -> Self {
        SharedCell {
            inner: Mutex::new((None, Vec::new())),
        }
    }
}

impl<T: Clone> SharedCell<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the value (if unset) and wakes every waiter; returns false if it was set.
    pub fn set(&self, v: T) -> bool {
        let wakers = {
            let mut g = self.inner.lock().unwrap();
            if g.0.is_some() {
                return false;
            }
            g.0 = Some(v);
            std::mem::take(&mut g.1)
        };
        for w in wakers {
            w.wake();
        }
        true
    }

    /// The value if set.
    pub fn try_get(&self) -> Option<T> {
        self.inner.lock().unwrap().0.clone()
    }

    /// Waits for the value.
    pub fn get(&self) -> SharedGet<'_, T> {
        SharedGet { cell: self }
    }
}

/// Future of [`SharedCell::get`].
pub struct SharedGet<'a, T> {
    cell: &'a SharedCell<T>,
}

impl<T: Clone> Future for SharedGet<'_, T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut g = self.cell.inner.lock().unwrap();
        match &g.0 {
            Some(v) => Poll::Ready(v.clone()),
            None => {
                g.1.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

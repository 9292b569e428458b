//! Local synchronisation on a compute server.
//!
//! - [`yield_now`]: a switch point after a lock failure (retry later).
//! - [`LocalLockTable`]: the CS-local half of Sherman's hierarchical on-chip lock
//!   (HOCL, Sherman §4.3). One table per CS, shared by its cores; an exact lock
//!   per key (no false sharing, so hand-over is sound); FIFO wait queue; a waiter parks (a queue wait, not a spin).
//!   The holder may *hand over* the lock to the next local waiter, together with
//!   the remote lock it still holds, at most `max_handover` times in a row
//!   (Sherman uses 4) so that other CSs are not starved.
//! - [`SharedCell`]: a CS-wide once-cell with cross-core wakes: one task fills
//!   it, every waiter on any core of the CS gets a clone (SMART read delegation, §4.2).
//!
//! A wait in the lock table emits the `tracing` events `lock wait` and `lock
//! granted` (field `key`; `handed_over` on the grant), which `dm-bench trace`
//! places on its timeline.
//!
//! Same-core fast paths (uncontended lock, already-set cell) take one uncontended
//! mutex and never touch another core; wakes across cores go through the target
//! core's inbox.

use crate::core::{now_ns, with_current};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Yields once: the task goes to the back of its core's run queue.
pub fn yield_now() -> YieldNow {
    YieldNow(false)
}

/// Yields until the current core's clock reaches `ns` (virtual ns on sim,
/// where other tasks and cores run meanwhile; on wall-clock fabrics a busy
/// wait that lets the core's other tasks run). Returns at once if it has.
pub async fn yield_until(ns: u64) {
    while now_ns() < ns {
        yield_now().await;
    }
}

/// Orders an access to state that the cores of one CS share through CS
/// memory (DEX's cache, DEX §4) by virtual time: on a virtual clock (`sim`)
/// it ends the core's scheduling round, so the simulator resumes this task
/// at the core's clock only after every core whose clock is behind has run
/// up to this time (conservative synchronisation, as in parallel
/// discrete-event simulation). On a wall clock (`loopback`, `rdma`) it
/// returns at once: real cores already act in time order.
///
/// Why it exists: a core's round runs its tasks back to back, so an
/// operation that posts no WR (a cache hit) lets the core's clock run ahead
/// of the other cores' within one round. Without this, the core's accesses
/// land in shared state "from the future" of cores that run later, and a
/// Lamport-clock wait (the other cores wait for the latest stamp) turns that
/// into serialisation of the whole CS. Costs no virtual time: the poll that
/// resumes the task is not charged ([`dm_verbs::CpuCost::poll_ns`]), since
/// the round it ends is an artefact of simulating many cores in one thread.
pub async fn sync_virtual_time() {
    if crate::core::clock_is_virtual() {
        EndRound(false).await
    }
}

/// Future of [`sync_virtual_time`] on a virtual clock: pending once, queued
/// for the core's next round.
struct EndRound(bool);

impl Future for EndRound {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        if !with_current(|c| c.defer(cx.waker())) {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
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
    /// A waiter was handed the remote lock but gave up before taking it: the
    /// next holder inherits the remote lock (it is still held).
    orphan_remote: bool,
    handovers: u32,
    waiters: VecDeque<Arc<WaitCell>>,
}

/// Local lock table with FIFO wait queues and bounded hand-over (Sherman §4.3).
///
/// Locks are exact per key (a `u64`, e.g. the index of a global lock-table
/// slot): two keys never share a local lock, which is what makes hand-over
/// sound (the receiver inherits the remote lock of *its* key). Keys live in
/// `shards` hash maps behind one mutex each; an entry exists only while its
/// lock is held, so memory follows the locks in use, not the key space.
pub struct LocalLockTable {
    shards: Box<[Mutex<HashMap<u64, LockSlot>>]>,
    /// What released locks and finished waits leave for later ones, for
    /// the whole table (issue 32: a warm queue wait allocates nothing):
    /// reset wait cells and emptied wait queues, at most [`SPARE`] of
    /// each. Taken only on the contended path, inside a shard's mutex
    /// (never the other way round).
    spare: Mutex<Spare>,
    max_handover: u32,
    /// Waiters queued in every shard (changed under their shard's mutex):
    /// a holder that reads 0 asks no shard whether it can hand over
    /// ([`LocalLockGuard::can_hand_over`]; issue 32: a mutex and a hash
    /// lookup per uncontended release). A waiter queued meanwhile on
    /// another core that this count does not show yet is as one that
    /// queued just after the answer: the holder releases the remote lock
    /// and its guard's drop grants the waiter a plain lock.
    waiting: AtomicUsize,
}

#[derive(Default)]
struct Spare {
    cells: Vec<Arc<WaitCell>>,
    queues: Vec<VecDeque<Arc<WaitCell>>>,
}

/// Wait cells and queues the table keeps.
const SPARE: usize = 64;

/// Held keys a shard's map has room for from the start (its capacity
/// only grows: a new high-water mark of held keys allocates).
const SHARD_KEYS: usize = 8;

impl LocalLockTable {
    /// `shards` mutex-protected maps (contention between cores, not
    /// correctness), at most `max_handover` consecutive hand-overs per key.
    pub fn new(shards: usize, max_handover: u32) -> Self {
        LocalLockTable {
            shards: (0..shards.max(1))
                .map(|_| {
                    Mutex::new(HashMap::with_capacity_and_hasher(
                        SHARD_KEYS,
                        Default::default(),
                    ))
                })
                .collect(),
            spare: Mutex::default(),
            max_handover,
            waiting: AtomicUsize::new(0),
        }
    }

    /// The shard of `key`: the high 32 bits of a Fibonacci hash scaled to
    /// the shard count by a multiply and shift (Lemire's range reduction),
    /// not a `%`: the 32-bit division took 2.8% of `lock_and_read`'s
    /// samples in a `perf` of loopback Sherman updates (issue 32; wall
    /// time moved within this VM's noise).
    fn shard_of(&self, key: u64) -> usize {
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        ((h * self.shards.len() as u64) >> 32) as usize
    }

    /// Acquires the local lock of `key`. If the guard says
    /// [`LocalLockGuard::handed_over`], the previous holder passed its remote lock
    /// along and the caller must not acquire it again.
    pub async fn lock(&self, key: u64) -> LocalLockGuard<'_> {
        let shard = self.shard_of(key);
        let cell = {
            let mut m = self.shards[shard].lock().unwrap();
            let s = m.entry(key).or_default();
            if let Some(g) = self.take_free(s, key) {
                return g;
            }
            let c = {
                let mut sp = self.spare.lock().unwrap();
                if s.waiters.capacity() == 0 {
                    if let Some(q) = sp.queues.pop() {
                        s.waiters = q;
                    }
                }
                sp.cells.pop().unwrap_or_default()
            };
            s.waiters.push_back(c.clone());
            self.waiting.fetch_add(1, Relaxed);
            c
        };
        tracing::trace!(key, "lock wait");
        let handed_over = LockWait {
            table: self,
            key,
            cell: Some(cell),
        }
        .await;
        tracing::trace!(key, handed_over, "lock granted");
        LocalLockGuard {
            table: self,
            key,
            handed_over,
            waited: true,
            released: false,
        }
    }

    /// Takes the local lock of `key` if nobody holds it (no waiting, no
    /// queueing): `None` when it is held. The guard says
    /// [`LocalLockGuard::handed_over`] when a cancelled waiter left the
    /// remote lock with the slot: the caller then holds the remote lock.
    pub fn try_lock(&self, key: u64) -> Option<LocalLockGuard<'_>> {
        let mut m = self.shards[self.shard_of(key)].lock().unwrap();
        let s = m.entry(key).or_default();
        self.take_free(s, key)
    }

    /// The uncontended take of `key`'s slot `s` (its shard's mutex held):
    /// a guard if nobody holds it, inheriting a remote lock a cancelled
    /// waiter left with the slot.
    fn take_free(&self, s: &mut LockSlot, key: u64) -> Option<LocalLockGuard<'_>> {
        if s.held {
            return None;
        }
        s.held = true;
        s.handovers = 0;
        Some(LocalLockGuard {
            table: self,
            key,
            handed_over: std::mem::take(&mut s.orphan_remote),
            waited: false,
            released: false,
        })
    }

    fn grant_next(&self, key: u64, hand_over: bool) -> bool {
        let mut m = self.shards[self.shard_of(key)].lock().unwrap();
        let s = m.get_mut(&key).expect("granting a lock nobody holds");
        if hand_over && s.handovers >= self.max_handover {
            return false;
        }
        match s.waiters.pop_front() {
            Some(c) => {
                self.waiting.fetch_sub(1, Relaxed);
                s.handovers = if hand_over { s.handovers + 1 } else { 0 };
                drop(m);
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
                if let Some(s) = m.remove(&key) {
                    if s.waiters.capacity() > 0 {
                        let mut sp = self.spare.lock().unwrap();
                        if sp.queues.len() < SPARE {
                            sp.queues.push(s.waiters);
                        }
                    }
                }
                true
            }
        }
    }

    /// A cancelled waiter held a handed-over remote lock: hand it to the next
    /// waiter (even past the bound: it is one step), else park it in the slot.
    fn pass_orphan(&self, key: u64) {
        let mut m = self.shards[self.shard_of(key)].lock().unwrap();
        let s = m.get_mut(&key).expect("orphaned lock has a slot");
        match s.waiters.pop_front() {
            Some(c) => {
                self.waiting.fetch_sub(1, Relaxed);
                s.handovers += 1;
                drop(m);
                let w = {
                    let mut st = c.state.lock().unwrap();
                    st.0 = Some(true);
                    st.1.take()
                };
                if let Some(w) = w {
                    w.wake();
                }
            }
            None => {
                s.held = false;
                s.orphan_remote = true;
            }
        }
    }

    /// Keeps a granted waiter's cell for a later wait, reset, if its
    /// granter has let go of it (the granter drops its clone after the
    /// wake, outside the shard's mutex: else the cell is simply freed).
    fn keep_cell(&self, cell: Arc<WaitCell>) {
        if Arc::strong_count(&cell) != 1 {
            return;
        }
        *cell.state.lock().unwrap() = (None, None);
        let mut sp = self.spare.lock().unwrap();
        if sp.cells.len() < SPARE {
            sp.cells.push(cell);
        }
    }

    fn has_waiters(&self, key: u64) -> bool {
        if self.waiting.load(Relaxed) == 0 {
            return false;
        }
        let m = self.shards[self.shard_of(key)].lock().unwrap();
        m.get(&key)
            .is_some_and(|s| !s.waiters.is_empty() && s.handovers < self.max_handover)
    }

    /// Waiters queued (the count [`LocalLockGuard::can_hand_over`] reads
    /// first); for tests and leak checks.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    /// Keys with an entry (held locks); for tests and leak checks.
    pub fn held_keys(&self) -> usize {
        self.shards.iter().map(|m| m.lock().unwrap().len()).sum()
    }
}

struct LockWait<'a> {
    table: &'a LocalLockTable,
    key: u64,
    cell: Option<Arc<WaitCell>>,
}

impl Future for LockWait<'_> {
    type Output = bool;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let cell = self.cell.as_ref().expect("polled after completion");
        let mut st = cell.state.lock().unwrap();
        if let Some(h) = st.0 {
            drop(st);
            let cell = self.cell.take().expect("checked above");
            self.table.keep_cell(cell);
            return Poll::Ready(h);
        }
        st.1 = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for LockWait<'_> {
    fn drop(&mut self) {
        let Some(cell) = self.cell.take() else { return };
        let mut m = self.table.shards[self.table.shard_of(self.key)]
            .lock()
            .unwrap();
        if let Some(s) = m.get_mut(&self.key) {
            if let Some(i) = s.waiters.iter().position(|c| Arc::ptr_eq(c, &cell)) {
                s.waiters.remove(i);
                self.table.waiting.fetch_sub(1, Relaxed);
                return;
            }
        }
        drop(m);
        // Granted but never observed. A plain grant is passed on as a plain
        // release. A hand-over carries the remote lock, which must not be lost:
        // pass it on to the next waiter, or leave it to the next holder.
        let granted = cell.state.lock().unwrap().0;
        match granted {
            Some(false) => {
                self.table.grant_next(self.key, false);
            }
            Some(true) => self.table.pass_orphan(self.key),
            None => {}
        }
    }
}

/// A held local lock. Dropping it releases the lock to the next waiter, who must
/// acquire the remote lock itself; release the remote lock *before* dropping.
pub struct LocalLockGuard<'a> {
    table: &'a LocalLockTable,
    key: u64,
    handed_over: bool,
    /// The lock was held when asked for: this guard queued for it.
    waited: bool,
    released: bool,
}

impl LocalLockGuard<'_> {
    /// True if the previous holder handed the remote lock over with this lock.
    pub fn handed_over(&self) -> bool {
        self.handed_over
    }

    /// True if the lock was held when asked for and this guard queued behind
    /// its holder (a local queue wait: `crate::lock::LockStats::waits`).
    pub fn waited(&self) -> bool {
        self.waited
    }

    /// True if a local waiter is queued and the hand-over bound allows passing
    /// the lock to it: the holder may then skip releasing the remote lock.
    /// (A waiter that gives up before [`Self::try_hand_over`] makes that fail;
    /// the holder then releases the remote lock itself.)
    pub fn can_hand_over(&self) -> bool {
        self.table.has_waiters(self.key)
    }

    /// Hands the lock (and the remote lock the caller still holds) to the next
    /// local waiter. `Err(self)` when there is no waiter or the hand-over bound
    /// is reached: then release the remote lock and drop the guard.
    pub fn try_hand_over(mut self) -> Result<(), Self> {
        if self.table.grant_next(self.key, true) {
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
            self.table.grant_next(self.key, false);
        }
    }
}

/// A CS-wide once-cell: [`SharedCell::set`] once, [`SharedCell::get`] from any
/// core waits for the value. Share it with `Arc`.
///
/// The waiters' wakers are held inline up to two (a follower and a spare:
/// no allocation per wait), and a cell can be [`SharedCell::reset`] and
/// used again (SMART's read delegation recycles its followers' cells).
pub struct SharedCell<T> {
    inner: Mutex<(Option<T>, SmallVec<[Waker; 2]>)>,
}

impl<T: Clone> Default for SharedCell<T> {
    fn default() -> Self {
        SharedCell {
            inner: Mutex::new((None, SmallVec::new())),
        }
    }
}

impl<T: Clone> SharedCell<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the cell (no value, no waiters) for another round. Call it
    /// only on a cell nobody else holds (`Arc::strong_count == 1`): a
    /// waiter of the old round would never be woken.
    pub fn reset(&self) {
        let mut g = self.inner.lock().unwrap();
        g.0 = None;
        g.1.clear();
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
                if !g.1.iter().any(|w| w.will_wake(cx.waker())) {
                    g.1.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::noop_waker;

    /// Node addresses (multiples of the node size) spread over every shard,
    /// each shard within a third of the mean, for shard counts that are
    /// and are not powers of two.
    #[test]
    fn shard_of_spreads_node_addresses_over_every_shard() {
        for n in [1, 7, 64, 100] {
            let t = LocalLockTable::new(n, 4);
            let mut hits = vec![0u32; n];
            let keys = 1000 * n as u64;
            for k in 0..keys {
                hits[t.shard_of(k * 1024)] += 1;
            }
            let mean = (keys / n as u64) as u32;
            assert!(
                hits.iter().all(|&h| h > mean * 2 / 3 && h < mean * 4 / 3),
                "{n}: {hits:?}"
            );
        }
    }

    /// A queue wait's cell and the key's wait queue are kept when the wait
    /// ends and the lock is let go, and the next contended round uses them
    /// (no allocation once warm): the table keeps one of each after every
    /// round, and no key.
    #[test]
    fn a_finished_wait_leaves_its_cell_and_queue_for_the_next() {
        let t = LocalLockTable::new(1, 4);
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        for round in 0..3 {
            let Poll::Ready(first) = Box::pin(t.lock(9)).as_mut().poll(&mut cx) else {
                panic!("round {round}: a free lock waits");
            };
            let mut second = Box::pin(t.lock(9));
            assert!(second.as_mut().poll(&mut cx).is_pending());
            drop(first);
            let Poll::Ready(g) = second.as_mut().poll(&mut cx) else {
                panic!("round {round}: the waiter was not granted");
            };
            assert!(g.waited() && !g.handed_over());
            drop(g);
            let sp = t.spare.lock().unwrap();
            assert_eq!((sp.cells.len(), sp.queues.len()), (1, 1));
            drop(sp);
            assert_eq!(t.held_keys(), 0);
        }
    }
}

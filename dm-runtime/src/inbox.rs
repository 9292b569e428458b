//! Cross-core wakes: each executor's [`Inbox`] (a mutex-guarded queue of
//! task keys, drained once per scheduling round), the process-wide table of
//! inboxes by executor id, and the thread-local list of executors woken
//! from this thread, which the sim driver turns into simulator
//! notifications. Off the same-core fast path.
//!
//! **The table** is append-only and lock-free to read: executor ids are
//! handed out by one atomic counter and never reused; id `i` lives in
//! segment `s = log2(i + 1)`, which holds `2^s` inboxes and is allocated
//! the first time an id reaches it. A remote wake finds its inbox with two
//! atomic loads, takes only that inbox's mutex, and never blocks on other
//! executors being created or dropped. An inbox stays in the table after
//! its executor is gone (dead: wakes to it are dropped), at about 40 bytes
//! per executor ever created in the process.
//!
//! **The woken list** ([`REMOTE_WOKEN`]) is kept only on threads that run a
//! `SimRuntime` (it is how a wake from one simulated core reaches the
//! simulator); on any other thread nothing is recorded, so wakes from
//! service threads or between real cores leave no trace that could grow.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// Cross-core wake queue of one executor.
#[derive(Default)]
pub(crate) struct Inbox {
    /// Set when keys were queued since the last drain.
    pub(crate) flag: AtomicBool,
    /// Queued task keys; `None` while the executor does not exist (before
    /// registration and after it is dropped): wakes are then dropped.
    keys: Mutex<Option<Vec<u32>>>,
}

impl Inbox {
    /// Swaps the queued keys into `out`, which must be empty: the two
    /// buffers trade places, so neither is reallocated once warm.
    pub(crate) fn drain_into(&self, out: &mut Vec<u32>) {
        debug_assert!(out.is_empty());
        if let Some(k) = self.keys.lock().unwrap().as_mut() {
            std::mem::swap(k, out);
        }
    }

    /// Queues `key` (once if it is already the last queued: a task woken
    /// again before its core drained the inbox needs one poll); false if
    /// the executor is gone.
    fn push(&self, key: u32) -> bool {
        match self.keys.lock().unwrap().as_mut() {
            Some(k) => {
                if k.last() != Some(&key) {
                    k.push(key);
                }
            }
            None => return false,
        }
        self.flag.store(true, Ordering::Release);
        true
    }
}

/// Segments of the table: segment `s` holds ids `2^s - 1 .. 2^(s+1) - 1`.
const SEGMENTS: usize = 32;

static TABLE: [OnceLock<Box<[Inbox]>>; SEGMENTS] = [const { OnceLock::new() }; SEGMENTS];
static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// Where executor `id`'s inbox sits: (segment, index in the segment).
fn slot(id: u32) -> (usize, usize) {
    let n = id as u64 + 1;
    let s = 63 - n.leading_zeros() as usize;
    (s, (n - (1 << s)) as usize)
}

/// The inbox of executor `id`, if its segment exists.
fn inbox(id: u32) -> Option<&'static Inbox> {
    let (s, i) = slot(id);
    TABLE.get(s)?.get()?.get(i)
}

/// A new executor id and its (live) inbox.
pub(crate) fn register_executor() -> (u32, &'static Inbox) {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    assert!(id < u32::MAX, "dm-runtime: executor ids exhausted");
    let (s, i) = slot(id);
    let seg = TABLE[s].get_or_init(|| (0..1usize << s).map(|_| Inbox::default()).collect());
    let inbox = &seg[i];
    *inbox.keys.lock().unwrap() = Some(Vec::new());
    (id, inbox)
}

/// Marks executor `id` gone: later wakes to it are dropped.
pub(crate) fn unregister_executor(id: u32) {
    if let Some(i) = inbox(id) {
        *i.keys.lock().unwrap() = None;
    }
}

thread_local! {
    /// Executor ids woken from this thread through their inbox, recorded
    /// only while a sim driver lives on this thread (it drains the list to
    /// schedule those simulated cores).
    pub(crate) static REMOTE_WOKEN: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    /// Sim drivers alive on this thread.
    static SIM_DRIVERS: Cell<u32> = const { Cell::new(0) };
}

/// A sim driver starts (true) or stops (false) on this thread.
pub(crate) fn sim_driver_alive(alive: bool) {
    SIM_DRIVERS.with(|n| n.set(if alive { n.get() + 1 } else { n.get() - 1 }));
    if !alive && SIM_DRIVERS.with(|n| n.get()) == 0 {
        REMOTE_WOKEN.with(|w| *w.borrow_mut() = Vec::new());
    }
}

/// Queues task `key` in the inbox of executor `exec` (if it still exists).
pub(crate) fn remote_wake(exec: u32, key: u32) {
    if let Some(inbox) = inbox(exec) {
        if inbox.push(key) && SIM_DRIVERS.with(|n| n.get()) > 0 {
            REMOTE_WOKEN.with(|w| w.borrow_mut().push(exec));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_to_distinct_inboxes_across_segments() {
        let regs: Vec<_> = (0..300).map(|_| register_executor()).collect();
        for (i, (id, ib)) in regs.iter().enumerate() {
            assert!(std::ptr::eq(inbox(*id).unwrap(), *ib), "id {id}");
            for (id2, ib2) in &regs[i + 1..] {
                assert_ne!(id, id2);
                assert!(!std::ptr::eq(*ib, *ib2));
            }
        }
        let (id, ib) = regs[7];
        let mut out = Vec::new();
        for k in [5, 5, 6, 5] {
            remote_wake(id, k);
        }
        ib.drain_into(&mut out);
        assert_eq!(out, vec![5, 6, 5]);
        out.clear();
        unregister_executor(id);
        remote_wake(id, 6);
        ib.drain_into(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn wakes_off_a_sim_thread_record_nothing() {
        let (id, ib) = register_executor();
        let mut out = Vec::new();
        for round in 0..1_000 {
            for k in 0..1_000 {
                remote_wake(id, round * 1_000 + k);
            }
            ib.drain_into(&mut out);
            assert_eq!(out.len(), 1_000);
            out.clear();
        }
        assert_eq!(REMOTE_WOKEN.with(|w| w.borrow().capacity()), 0);
        unregister_executor(id);
    }
}

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
//! its executor is gone (dead: wakes to it are dropped, its parker
//! released), at about 48 bytes per executor ever created in the process.
//!
//! **The woken list** ([`REMOTE_WOKEN`]) is kept only on threads that run a
//! `SimRuntime` (it is how a wake from one simulated core reaches the
//! simulator); on any other thread nothing is recorded, so wakes from
//! service threads or between real cores leave no trace that could grow.
//!
//! **Parking** ([`Parker`]): an executor run by `crate::service` may park
//! its thread when idle. Its inbox then holds the thread's [`Parker`] (until
//! the executor is dropped), and a wake that queues a key also unparks the
//! thread if it sleeps: one fence and one load when it does not. Inboxes without a parker (plain
//! executors, `run_threads`, `SimRuntime`) pay nothing.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

/// The thread an idle service executor (or the sim service thread) parks,
/// and the lost-wakeup-free protocol around `std::thread::park` (Dekker
/// style, both sides fenced):
///
/// - the sleeper stores `sleeping = true`, fences, re-checks for work (its
///   submission queues, inbox flags, shutdown) and only then parks; a
///   `park` that returns while `sleeping` is still set was spurious: it
///   re-checks and parks again;
/// - a waker first publishes its work (a flag store), fences, and if
///   `sleeping` is set clears it with a swap; the one whose swap saw `true`
///   unparks the thread (and counts a wake).
///
/// With both fences `SeqCst`, either the sleeper's re-check sees the work
/// or the waker sees `sleeping`: no wake is lost.
#[derive(Default)]
pub(crate) struct Parker {
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
    parks: AtomicU64,
    wakes: AtomicU64,
}

impl Parker {
    /// Binds the parker to the calling thread, the one that will park.
    /// Before this, nobody sleeps on it and wakes are no-ops.
    pub(crate) fn bind_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Parks the bound (calling) thread until a [`Parker::wake`], unless
    /// `has_work` (called after `sleeping` is published) says there is
    /// work already. Returns whether it parked.
    pub(crate) fn park_unless(&self, has_work: impl Fn() -> bool) -> bool {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if has_work() {
            self.sleeping.store(false, Ordering::Relaxed);
            return false;
        }
        self.parks.fetch_add(1, Ordering::Relaxed);
        loop {
            std::thread::park();
            if !self.sleeping.load(Ordering::Acquire) {
                return true;
            }
            // Spurious (or a token left by an earlier wake): sleep on
            // unless work came meanwhile.
            if has_work() {
                self.sleeping.store(false, Ordering::Relaxed);
                return true;
            }
        }
    }

    /// Unparks the thread if it sleeps. Call after publishing the work
    /// the sleeper's re-check looks for.
    #[inline]
    pub(crate) fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            self.wakes.fetch_add(1, Ordering::Relaxed);
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Times the thread parked.
    pub(crate) fn parks(&self) -> u64 {
        self.parks.load(Ordering::Relaxed)
    }

    /// Times a waker found the thread asleep and unparked it.
    pub(crate) fn wakes(&self) -> u64 {
        self.wakes.load(Ordering::Relaxed)
    }
}

/// Cross-core wake queue of one executor.
#[derive(Default)]
pub(crate) struct Inbox {
    /// Set when keys were queued since the last drain.
    pub(crate) flag: AtomicBool,
    /// `None` while the executor does not exist (before registration and
    /// after it is dropped): wakes are then dropped.
    live: Mutex<Option<Live>>,
}

/// The inbox of a live executor.
#[derive(Default)]
struct Live {
    /// Queued task keys.
    keys: Vec<u32>,
    /// Queued jobs ([`remote_job`]): run on the executor's thread at its
    /// next drain, inside its context (they may spawn tasks there).
    jobs: Vec<Job>,
    /// The thread that parks when this executor idles (service cores
    /// only): a wake unparks it.
    parker: Option<Arc<Parker>>,
}

/// A closure queued for an executor's thread ([`remote_job`]).
pub(crate) type Job = Box<dyn FnOnce() + Send>;

impl Inbox {
    /// Swaps the queued keys into `out`, which must be empty: the two
    /// buffers trade places, so neither is reallocated once warm. Queued
    /// jobs are moved to `jobs` (empty unless some were queued: the rare
    /// path, see [`remote_job`]).
    pub(crate) fn drain_into(&self, out: &mut Vec<u32>, jobs: &mut Vec<Job>) {
        debug_assert!(out.is_empty());
        if let Some(l) = self.live.lock().unwrap().as_mut() {
            std::mem::swap(&mut l.keys, out);
            if !l.jobs.is_empty() {
                jobs.append(&mut l.jobs);
            }
        }
    }

    /// Queues `key` (once if it is already the last queued: a task woken
    /// again before its core drained the inbox needs one poll); false if
    /// the executor is gone. Unparks the executor's thread if it sleeps.
    fn push(&self, key: u32) -> bool {
        let mut live = self.live.lock().unwrap();
        let Some(l) = live.as_mut() else {
            return false;
        };
        if l.keys.last() != Some(&key) {
            l.keys.push(key);
        }
        self.flag.store(true, Ordering::Release);
        if let Some(p) = &l.parker {
            // Under the lock, which keeps the parker registered: a thread
            // that sleeps is woken (a syscall) while other wakers of this
            // core wait, one fence and one load otherwise.
            p.wake();
        }
        true
    }

    /// Registers the thread that parks when this inbox's executor idles
    /// (an inbox belongs to one executor, which lives on one thread); the
    /// executor's drop unregisters it with the inbox.
    pub(crate) fn set_parker(&self, p: Arc<Parker>) {
        if let Some(l) = self.live.lock().unwrap().as_mut() {
            l.parker = Some(p);
        }
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
    *inbox.live.lock().unwrap() = Some(Live::default());
    (id, inbox)
}

/// Marks executor `id` gone: later wakes to it are dropped.
pub(crate) fn unregister_executor(id: u32) {
    if let Some(i) = inbox(id) {
        *i.live.lock().unwrap() = None;
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

/// Queues `job` to run on executor `exec`'s thread, inside its context,
/// at its next scheduling round (it may [`crate::spawn`] there); unparks
/// the thread if it sleeps. False (and `job` dropped) if the executor is
/// gone. Off every fast path: a job is a boxed closure (issue 33's release
/// requests, `crate::lock`).
pub(crate) fn remote_job(exec: u32, job: Job) -> bool {
    let Some(inbox) = inbox(exec) else {
        return false;
    };
    {
        let mut live = inbox.live.lock().unwrap();
        let Some(l) = live.as_mut() else {
            return false;
        };
        l.jobs.push(job);
        inbox.flag.store(true, Ordering::Release);
        if let Some(p) = &l.parker {
            p.wake();
        }
    }
    if SIM_DRIVERS.with(|n| n.get()) > 0 {
        REMOTE_WOKEN.with(|w| w.borrow_mut().push(exec));
    }
    true
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
        let mut jobs = Vec::new();
        ib.drain_into(&mut out, &mut jobs);
        assert_eq!(out, vec![5, 6, 5]);
        out.clear();
        unregister_executor(id);
        remote_wake(id, 6);
        assert!(!remote_job(id, Box::new(|| ())));
        ib.drain_into(&mut out, &mut jobs);
        assert!(jobs.is_empty());
        assert!(out.is_empty());
    }

    #[test]
    fn a_remote_wake_unparks_the_registered_thread() {
        let (id, ib) = register_executor();
        let parker = Arc::new(Parker::default());
        ib.set_parker(parker.clone());
        let p = parker.clone();
        let sleeper = std::thread::spawn(move || {
            p.bind_current();
            let mut rounds = 0;
            // Park until the inbox has a key, as a service core does.
            while !ib.flag.swap(false, Ordering::Acquire) {
                p.park_unless(|| ib.flag.load(Ordering::Relaxed));
                rounds += 1;
            }
            let mut out = Vec::new();
            ib.drain_into(&mut out, &mut Vec::new());
            (out, rounds)
        });
        // Bounded: the sleeper parks once it runs.
        let mut spins = 0u64;
        while parker.parks() == 0 {
            spins += 1;
            assert!(spins < 50_000_000, "the sleeper never parked");
            std::thread::yield_now();
        }
        remote_wake(id, 9);
        let (out, rounds) = sleeper.join().unwrap();
        assert_eq!(out, vec![9]);
        assert_eq!((parker.parks(), parker.wakes(), rounds), (1, 1, 1));
        unregister_executor(id);
    }

    #[test]
    fn wakes_off_a_sim_thread_record_nothing() {
        let (id, ib) = register_executor();
        let mut out = Vec::new();
        for round in 0..1_000 {
            for k in 0..1_000 {
                remote_wake(id, round * 1_000 + k);
            }
            ib.drain_into(&mut out, &mut Vec::new());
            assert_eq!(out.len(), 1_000);
            out.clear();
        }
        assert_eq!(REMOTE_WOKEN.with(|w| w.borrow().capacity()), 0);
        unregister_executor(id);
    }
}

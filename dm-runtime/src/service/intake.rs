//! One core's submission queue ([`Intake`]): boxed jobs pushed by any
//! thread, drained by the core once per scheduling round.
//!
//! The pattern of `inbox.rs`: a mutex-guarded `Vec` plus an atomic flag, so
//! a round in which nothing was submitted pays one relaxed load; a drain
//! swaps the whole queue with the core's (empty) buffer, so every queued
//! job is spawned in one batch and neither `Vec` is reallocated once warm.

use super::SubmitError;
use crate::inbox::Parker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

/// A submitted job: run on its core thread with the core current, it calls
/// the submitter's `make` and spawns the future (`spawner.rs`).
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// What the mutex guards.
struct State {
    jobs: Vec<Job>,
    /// Submitters waiting for room (`Spawner::spawn` on a full queue),
    /// woken by the next drain (which empties the queue) or by `close`.
    room: Vec<Waker>,
    closed: bool,
}

/// One core's submission queue.
pub(crate) struct Intake {
    state: Mutex<State>,
    /// Set (under the lock) when a job is queued; cleared by a drain.
    pending: AtomicBool,
    /// Mirrors `State::closed` for the core's lock-free checks.
    closed: AtomicBool,
    /// Most jobs waiting at once (at least 1).
    depth: usize,
    /// The thread that drains this queue, to unpark after a push.
    parker: Arc<Parker>,
}

impl Intake {
    pub(crate) fn new(depth: usize, parker: Arc<Parker>) -> Self {
        Intake {
            state: Mutex::new(State {
                jobs: Vec::new(),
                room: Vec::new(),
                closed: false,
            }),
            pending: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            depth: depth.max(1),
            parker,
        }
    }

    /// The lock; jobs never run under it, so a poisoned lock only means a
    /// waker's `clone` panicked and the state is still whole.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `job` and wakes the core thread if it sleeps. Hands the job
    /// back with `ShutDown` after [`Intake::close`], or with `QueueFull` when
    /// `depth` jobs wait; then `room`, if given, is woken when there is room
    /// (or the queue closes).
    pub(crate) fn push(&self, job: Job, room: Option<&Waker>) -> Result<(), (SubmitError, Job)> {
        {
            let mut s = self.lock();
            if s.closed {
                return Err((SubmitError::ShutDown, job));
            }
            if s.jobs.len() >= self.depth {
                if let Some(w) = room {
                    if !s.room.last().is_some_and(|l| l.will_wake(w)) {
                        s.room.push(w.clone());
                    }
                }
                return Err((SubmitError::QueueFull, job));
            }
            s.jobs.push(job);
            self.pending.store(true, Ordering::Release);
        }
        self.parker.wake();
        Ok(())
    }

    /// True if jobs were queued since the last drain (one relaxed load).
    #[inline]
    pub(crate) fn has_jobs(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// True once [`Intake::close`] ran. Every job queued before is then
    /// visible to [`Intake::has_jobs`] (it was pushed under the lock that
    /// `close` took afterwards).
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// If jobs were queued, swaps them into `out` (empty) and wakes the
    /// submitters that waited for room, through `wakers` (an empty buffer
    /// kept by the caller). Returns whether `out` got jobs.
    pub(crate) fn drain(&self, out: &mut Vec<Job>, wakers: &mut Vec<Waker>) -> bool {
        debug_assert!(out.is_empty() && wakers.is_empty());
        if !self.has_jobs() {
            return false;
        }
        {
            let mut s = self.lock();
            self.pending.store(false, Ordering::Relaxed);
            std::mem::swap(&mut s.jobs, out);
            std::mem::swap(&mut s.room, wakers);
        }
        for w in wakers.drain(..) {
            w.wake();
        }
        !out.is_empty()
    }

    /// Stops intake: later pushes fail with `ShutDown`; jobs already queued
    /// stay for the core to run. Wakes the room waiters (they see
    /// `ShutDown`) and the core thread.
    pub(crate) fn close(&self) {
        let room = {
            let mut s = self.lock();
            s.closed = true;
            self.closed.store(true, Ordering::Release);
            std::mem::take(&mut s.room)
        };
        for w in room {
            w.wake();
        }
        self.parker.wake();
    }

    /// [`Intake::close`], then drops the queued jobs: their submitters get
    /// `ShutDown`. For a core thread that ends without running them (it
    /// panicked).
    pub(crate) fn close_and_discard(&self) {
        self.close();
        let jobs = std::mem::take(&mut self.lock().jobs);
        drop(jobs);
    }
}

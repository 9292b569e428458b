//! Dolphin's counters (Spear lock, §III-C; pathfinding, §III-B): per handle
//! ([`DolphinTree::stats`]), per index ([`DolphinCounters`], shared by every
//! core's handle of one index: issue 31), and, for the reports that still
//! read them, per process ([`totals`]). Spear holds and waits also count as
//! lock statistics ([`DolphinTree::with_lock_counters`]).

use super::DolphinTree;
use dm_runtime::lock::{LockCounters, LockEvent};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Process-wide totals of every handle's counters ([`totals`]).
static TOTALS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// A counter (index into [`TOTALS`] and [`DolphinCounters`]).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy)]
pub(crate) enum Counter {
    rejected,
    lost_cas,
    lock_waits,
    backtracks,
}

/// The counters of every Dolphin handle of this process, summed (for the
/// reports that read process totals; an index's own are its
/// [`DolphinCounters`]).
pub fn totals() -> DolphinStats {
    snapshot(&TOTALS)
}

fn snapshot(c: &[AtomicU64; 4]) -> DolphinStats {
    let t = |k: Counter| c[k as usize].load(Relaxed);
    DolphinStats {
        rejected_images: t(Counter::rejected),
        lost_update_cas: t(Counter::lost_cas),
        lock_waits: t(Counter::lock_waits),
        backtracks: t(Counter::backtracks),
    }
}

/// Counts of a handle, an index or the process (each a number of events).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DolphinStats {
    /// Leaf images READ again because they were torn or mid-update (digest
    /// or version checks, module docs 2 and 4).
    pub rejected_images: u64,
    /// Same-key update CASes on a key word that lost (the loser runs the
    /// update again; module docs 2).
    pub lost_update_cas: u64,
    /// Spear lock waits (§III-C): a share or exclusive taker that found an
    /// exclusive holder (READs of the lock word until free), or an
    /// exclusive taker that found shares (READs until they drain).
    pub lock_waits: u64,
    /// Backtracks through a special node to the leaf left of the one
    /// reached (§III-B).
    pub backtracks: u64,
}

impl DolphinStats {
    /// The counts since `earlier` (an earlier reading of the same counters,
    /// e.g. [`totals`] before a run).
    pub fn since(self, earlier: DolphinStats) -> DolphinStats {
        DolphinStats {
            rejected_images: self.rejected_images - earlier.rejected_images,
            lost_update_cas: self.lost_update_cas - earlier.lost_update_cas,
            lock_waits: self.lock_waits - earlier.lock_waits,
            backtracks: self.backtracks - earlier.backtracks,
        }
    }
}

/// The counters of one Dolphin index, shared by every core's handle of it
/// through an `Arc` ([`DolphinTree::with_counters`]); Relaxed atomics.
#[derive(Debug, Default)]
pub struct DolphinCounters {
    c: [AtomicU64; 4],
}

impl DolphinCounters {
    /// Counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counts so far.
    pub fn snapshot(&self) -> DolphinStats {
        snapshot(&self.c)
    }
}

impl DolphinTree {
    /// Counts this handle's events into `c`, one per index shared by every
    /// core's handle of it, instead of into counters of its own (besides
    /// this handle's [`DolphinTree::stats`] and the process [`totals`]).
    pub fn with_counters(mut self, c: Arc<DolphinCounters>) -> Self {
        self.counters = c;
        self
    }

    /// The per-index counters this handle counts into.
    pub fn counters(&self) -> &Arc<DolphinCounters> {
        &self.counters
    }

    /// Counts Spear holds taken (IDU shares and exclusive holds: lock
    /// acquisitions) and Spear waits (lock waits) into `c`, one per index
    /// shared by its handles ([`dm_runtime::lock::LockStats`]; Spear takes
    /// no CAS, so no CAS failures).
    pub fn with_lock_counters(mut self, c: Arc<LockCounters>) -> Self {
        if let Some(l) = &mut self.locks {
            l.set_counters(c.clone());
        }
        self.lock_counters = c;
        self
    }

    /// The lock counters this handle counts into.
    pub fn lock_counters(&self) -> &Arc<LockCounters> {
        &self.lock_counters
    }

    /// Counts the bytes this handle carves (leaves, special and ART nodes)
    /// into `c`, one per index shared by its handles
    /// ([`crate::SmartTree::with_carved_counter`]).
    pub fn with_carved_counter(mut self, c: Arc<AtomicU64>) -> Self {
        self.art = self.art.with_carved_counter(c);
        self
    }

    /// Counts one event on this handle, its index and the process totals
    /// (a Spear wait also as a lock wait).
    pub(crate) fn bump(&self, cell: &Cell<u64>, c: Counter) {
        cell.set(cell.get() + 1);
        self.counters.c[c as usize].fetch_add(1, Relaxed);
        TOTALS[c as usize].fetch_add(1, Relaxed);
        if let Counter::lock_waits = c {
            self.lock_counters.count(LockEvent::Waited);
        }
    }

    /// Counts a Spear hold taken (share or exclusive) as a lock acquisition.
    pub(crate) fn count_hold(&self) {
        self.lock_counters.count(LockEvent::Acquired);
    }

    /// This handle's counters.
    pub fn stats(&self) -> DolphinStats {
        DolphinStats {
            rejected_images: self.rejected.get(),
            lost_update_cas: self.lost_cas.get(),
            lock_waits: self.lock_waits.get(),
            backtracks: self.backtracks.get(),
        }
    }
}

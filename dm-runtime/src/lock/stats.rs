//! Per-index lock statistics (issue 31): [`LockCounters`], shared through an
//! `Arc` by every core's handle of one index, and [`LockStats`], a plain
//! snapshot of them. Nothing here is process-wide: two indexes in one
//! process count separately (only [`super::lock_takeovers`] stays a process
//! total, for the reports that read it).
//!
//! Counting costs one Relaxed `fetch_add` on a path that already posts a
//! lock verb (CAS, masked CAS or FAA) or waits in a queue; no verb, and
//! nothing on the lock-free read paths.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What a lock counter counts ([`LockCounters::count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockEvent {
    /// A lock was taken ([`LockStats::acquisitions`]).
    Acquired,
    /// A lock CAS found the lock held ([`LockStats::cas_failures`]).
    CasFailed,
    /// A lock attempt waited without a failed CAS ([`LockStats::waits`]).
    Waited,
    /// A lock arrived by hand-over ([`LockStats::handovers`]).
    HandedOver,
    /// A lock was taken over through the own-tag ledger ([`LockStats::takeovers`]).
    TakenOver,
}

const EVENTS: usize = 5;

/// The lock counters of one index, shared by its handles (`Arc`; attach one
/// to every core's handle with `NodeLocks::with_counters`,
/// `dm_tree::FgTree::with_lock_counters`, `dm_art::SmartTree::with_lock_counters`,
/// ...). Relaxed atomics: [`LockCounters::snapshot`] is a consistent total
/// once the operations it should see have finished, approximate meanwhile.
#[derive(Debug, Default)]
pub struct LockCounters {
    c: [AtomicU64; EVENTS],
}

impl LockCounters {
    /// Counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one `e` (one Relaxed `fetch_add`).
    #[inline]
    pub fn count(&self, e: LockEvent) {
        self.c[e as usize].fetch_add(1, Relaxed);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> LockStats {
        let c = |e: LockEvent| self.c[e as usize].load(Relaxed);
        LockStats {
            acquisitions: c(LockEvent::Acquired),
            cas_failures: c(LockEvent::CasFailed),
            waits: c(LockEvent::Waited),
            handovers: c(LockEvent::HandedOver),
            takeovers: c(LockEvent::TakenOver),
        }
    }
}

/// Lock counts of one index (a [`LockCounters::snapshot`]); every field is a
/// number of events since the counters were created. Which lock each index
/// kind takes:
/// - FG+ (`fg`): the 64-bit lock word at node offset 0 (Sherman §5, FG+);
/// - Sherman's rungs: a global lock table (GLT) slot on the node's MS, under
///   the CS-local HOCL lock when `hier_lock` is on (Sherman §4.3);
/// - SMART: the rear-embedded leaf lock (SMART §4.1.1); its baselines
///   (`art`, ...): HOCL node and leaf locks (§5.1.3);
/// - Dolphin: Spear leaf holds, FAA only (Dolphin §III-C): IDU shares and
///   exclusive holds count as acquisitions, waits for a holder as waits
///   (there is no lock CAS);
/// - DEX: its FG B-link tree's node locks (FG+ lock word).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Locks taken (including those received by hand-over and taken over):
    /// one per critical section.
    pub acquisitions: u64,
    /// Lock CAS attempts (64-bit CAS on a lock word or GLT slot, masked CAS
    /// on a 16-bit GLT lane, SMART's rear-lock CAS) that found the lock
    /// held: each is one retry, after back-off.
    pub cas_failures: u64,
    /// Lock attempts that waited without a failed CAS: a queue wait behind
    /// a holder on the same CS (HOCL's local lock, Sherman §4.3), a leaf
    /// READ that showed SMART's rear lock held (READ again, no CAS), a
    /// Spear FAA that found a holder (Dolphin §III-C; READs of the word
    /// until free).
    pub waits: u64,
    /// Acquisitions that received the still-held GLT slot from the
    /// previous local holder, skipping the remote CAS (HOCL hand-over,
    /// Sherman §4.3; at most `max_handover` in a row).
    pub handovers: u64,
    /// Locks taken over through the own-tag ledger: a CAS of this index's
    /// handles took the lock without its success being reported
    /// (`dm_runtime::lock` docs; not in the papers; 0 on a sound fabric).
    pub takeovers: u64,
}

impl LockStats {
    /// The counts since `earlier` (an earlier snapshot of the same counters).
    pub fn since(self, earlier: LockStats) -> LockStats {
        LockStats {
            acquisitions: self.acquisitions - earlier.acquisitions,
            cas_failures: self.cas_failures - earlier.cas_failures,
            waits: self.waits - earlier.waits,
            handovers: self.handovers - earlier.handovers,
            takeovers: self.takeovers - earlier.takeovers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_event_in_its_field() {
        let c = LockCounters::new();
        c.count(LockEvent::Acquired);
        c.count(LockEvent::Acquired);
        c.count(LockEvent::CasFailed);
        c.count(LockEvent::Waited);
        c.count(LockEvent::HandedOver);
        c.count(LockEvent::TakenOver);
        let s = c.snapshot();
        let want = LockStats {
            acquisitions: 2,
            cas_failures: 1,
            waits: 1,
            handovers: 1,
            takeovers: 1,
        };
        assert_eq!(s, want);
        assert_eq!(s.since(want), LockStats::default());
    }
}

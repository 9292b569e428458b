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
use std::sync::Mutex;

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
    /// A lock was taken over from a dead holder after its lease
    /// ([`LockStats::recovered`], issue 33).
    Recovered,
}

const EVENTS: usize = 6;

/// The lock counters of one index, shared by its handles (`Arc`; attach one
/// to every core's handle with `NodeLocks::with_counters`,
/// `dm_tree::FgTree::with_lock_counters`, `dm_art::SmartTree::with_lock_counters`,
/// ...). Relaxed atomics: [`LockCounters::snapshot`] is a consistent total
/// once the operations it should see have finished, approximate meanwhile.
#[derive(Debug, Default)]
pub struct LockCounters {
    c: [AtomicU64; EVENTS],
    /// Recovery time of each lock taken over from a dead holder (ns from
    /// the waiter first seeing the holder to its takeover CAS): rare, so a
    /// mutex-guarded list.
    recovery_ns: Mutex<Vec<u64>>,
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

    /// Records one lock recovery that took `ns` (the waiter's clock: virtual
    /// on sim); counted separately with [`LockEvent::Recovered`].
    pub fn recovered(&self, ns: u64) {
        self.recovery_ns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ns);
    }

    /// Every recovery time recorded so far, in the order recorded.
    pub fn recovery_ns(&self) -> Vec<u64> {
        self.recovery_ns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
            recovered: c(LockEvent::Recovered),
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
    /// Locks taken over from a holder whose lease expired: a dead CS, or an
    /// earlier incarnation of a restarted one (issue 33,
    /// `dm_runtime::lock::member`; 0 when no CS fails). Their recovery
    /// times are [`LockCounters::recovery_ns`].
    pub recovered: u64,
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
            recovered: self.recovered - earlier.recovered,
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
        c.count(LockEvent::Recovered);
        c.recovered(7);
        let s = c.snapshot();
        let want = LockStats {
            acquisitions: 2,
            cas_failures: 1,
            waits: 1,
            handovers: 1,
            takeovers: 1,
            recovered: 1,
        };
        assert_eq!(s, want);
        assert_eq!(c.recovery_ns(), vec![7]);
        assert_eq!(s.since(want), LockStats::default());
    }
}

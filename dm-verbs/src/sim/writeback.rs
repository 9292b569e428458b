//! A failed CAS that writes its word back (`Faults::cas_writeback_prob`):
//! soft-RoCE in a 6.1 kernel executes a CAS as `value = *word; if value ==
//! compare { value = swap }; *word = value` under a lock only atomics take,
//! so a WRITE that lands between that read and that store is undone
//! (docs/rdma.md). Here the store comes up to
//! `Faults::writeback_window_ns` after the CAS, and only if a WRITE touched
//! the word meanwhile; another atomic on the word settles it first (rxe
//! serialises atomics, so the store would have come before that atomic).

use super::world::{mix, Event, World};
use crate::GlobalAddr;
use rand::Rng;

/// A failed CAS's write-back still to come.
pub(super) struct Pending {
    /// The CAS's number among the verbs executed (`World::verbs_executed`),
    /// which its write-back event names.
    id: u64,
    addr: GlobalAddr,
    /// The word the CAS read, which its store writes back.
    old: u64,
    /// A WRITE touched the word since the CAS: the store undoes it.
    raced: bool,
}

impl World {
    /// After a CAS at `addr` that read `old` and failed: with
    /// `Faults::cas_writeback_prob`, its write-back is scheduled.
    pub(super) fn maybe_write_back_failed_cas(&mut self, addr: GlobalAddr, old: u64) {
        let f = &self.cfg.faults;
        if f.cas_writeback_prob <= 0.0 || !self.rng.gen_bool(f.cas_writeback_prob.min(1.0)) {
            return;
        }
        let at = self.now + self.rng.gen_range(1..=f.writeback_window_ns.max(1));
        let id = self.verbs_executed;
        self.writebacks.push(Pending {
            id,
            addr,
            old,
            raced: false,
        });
        self.push(at, Event::WriteBack(id));
    }

    /// `len` bytes at `addr` were stored (a WRITE, or an RPC handler on the
    /// MS's CPU): pending write-backs of the words they touched will undo
    /// them.
    pub(super) fn note_write(&mut self, addr: GlobalAddr, len: u64) {
        if self.writebacks.is_empty() {
            return;
        }
        let (lo, hi) = (addr.to_u64(), addr.to_u64() + len);
        for p in &mut self.writebacks {
            let w = p.addr.to_u64();
            if w + 8 > lo && w < hi {
                p.raced = true;
            }
        }
    }

    /// Before an atomic on `addr`: the pending write-backs of that word
    /// happen now (rxe would have finished them first).
    pub(super) fn settle_write_backs(&mut self, addr: GlobalAddr) {
        while let Some(i) = self.writebacks.iter().position(|p| p.addr == addr) {
            self.finish_write_back(i);
        }
    }

    /// The write-back event of the failed CAS `id` (nothing left to do if
    /// an atomic on its word settled it already).
    pub(super) fn write_back(&mut self, id: u64) {
        if let Some(i) = self.writebacks.iter().position(|p| p.id == id) {
            self.finish_write_back(i);
        }
    }

    fn finish_write_back(&mut self, i: usize) {
        let p = self.writebacks.remove(i);
        if p.raced {
            self.trace_hash = mix(self.trace_hash, p.old);
            tracing::trace!(addr = ?p.addr, "sim: a failed CAS wrote its word back over a WRITE");
            // In bounds: the CAS read this word. (Its `note_write` finds
            // no other write-back of the word: atomics settle them in turn.)
            let _ = self.store(p.addr, &p.old.to_le_bytes());
        }
    }
}

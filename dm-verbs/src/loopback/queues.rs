//! [`LoopbackQueues`]: one core's QPs and CQ. A post list executes at once,
//! in posting order, and its completions wait in the CQ until polled.

use super::memory::Shared;
use crate::{Clock, Completion, CpuCost, Queues, VerbError, WorkRequest};
use std::sync::Arc;

/// One core's QPs and CQ on the loopback fabric. `Send`, not shared.
pub struct LoopbackQueues {
    pub(super) s: Arc<Shared>,
    /// Completions in posting order. `cq[cq_head..]` are not polled yet;
    /// the ones before `cq_head` were moved out bitwise by `poll_cq` and are
    /// never read or dropped again. A batch off the front moves neither the
    /// rest (as draining a `Vec` would) nor each completion through a
    /// temporary (as `VecDeque::drain` did: its 16-byte loads of the
    /// temporary could not be forwarded from the narrower stores that wrote
    /// it, the hottest instruction of a loopback verb switch in `perf`).
    pub(super) cq: Vec<Completion>,
    pub(super) cq_head: usize,
    pub(super) broken: Vec<bool>,
}

impl LoopbackQueues {
    /// Fault injection: puts this core's QP to `ms` in the error state; every
    /// later WR to `ms` completes with [`VerbError::QpError`].
    pub fn break_qp(&mut self, ms: u16) {
        if let Some(b) = self.broken.get_mut(ms as usize) {
            *b = true;
        }
    }

    /// Re-creates the QP to `ms` (leaves the error state).
    pub fn reset_qp(&mut self, ms: u16) {
        if let Some(b) = self.broken.get_mut(ms as usize) {
            *b = false;
        }
    }
}

impl Drop for LoopbackQueues {
    fn drop(&mut self) {
        // Drop only the completions not polled yet (see `cq`).
        let (head, len) = (self.cq_head, self.cq.len());
        // SAFETY: `cq[..head]` were moved out; `cq[head..len]` are owned
        // here and dropped exactly once, after the length is cleared so a
        // panicking drop cannot reach them again.
        unsafe {
            self.cq.set_len(0);
            let p = self.cq.as_mut_ptr();
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(p.add(head), len - head));
        }
    }
}

impl Queues for LoopbackQueues {
    fn post_list(&mut self, ms: u16, wrs: &mut Vec<WorkRequest>) {
        let broken = self.broken.get(ms as usize).copied().unwrap_or(false);
        self.cq.reserve(wrs.len());
        for wr in wrs.drain(..) {
            let n = self.cq.len();
            // SAFETY: `reserve` made room for `wrs.len()` more completions;
            // slot `n` is written whole (both fields) before the length
            // covers it. The result is written in place rather than pushed:
            // a completion built on the stack and then copied into the CQ
            // made wide loads of narrow stores the CPU could not forward.
            unsafe {
                let dst = self.cq.as_mut_ptr().add(n);
                std::ptr::addr_of_mut!((*dst).wr_id).write(wr.wr_id);
                let result = std::ptr::addr_of_mut!((*dst).result);
                if broken {
                    result.write(Err(VerbError::QpError { ms }));
                } else {
                    result.write(self.s.execute(wr.verb));
                }
                self.cq.set_len(n + 1);
            }
        }
    }

    fn poll_cq(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        let n = (self.cq.len() - self.cq_head).min(max);
        out.reserve(n);
        // SAFETY: `cq[cq_head..cq_head + n]` are initialised and not polled
        // yet; they are copied bitwise into `out`'s reserved spare capacity
        // and `cq_head` moves past them, so they are owned by `out` alone
        // (see the field docs). Nothing here can panic between the copy and
        // the length updates.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.cq.as_ptr().add(self.cq_head),
                out.as_mut_ptr().add(out.len()),
                n,
            );
            out.set_len(out.len() + n);
        }
        self.cq_head += n;
        if self.cq_head == self.cq.len() {
            // SAFETY: every element was moved out; forget them all.
            unsafe { self.cq.set_len(0) };
            self.cq_head = 0;
        } else if self.cq_head >= 1024 && 2 * self.cq_head >= self.cq.len() {
            // A CQ that is never drained to empty (new WRs posted between
            // partial polls) would otherwise grow for ever: move the unpolled
            // rest to the front (amortised: at least as many were polled).
            let rest = self.cq.len() - self.cq_head;
            // SAFETY: moves the owned `cq[head..len]` bitwise to `cq[..rest]`
            // (`copy` allows the overlap) and forgets the old places.
            unsafe {
                let p = self.cq.as_mut_ptr();
                std::ptr::copy(p.add(self.cq_head), p, rest);
                self.cq.set_len(rest);
            }
            self.cq_head = 0;
        }
        n
    }

    fn clock(&self) -> Clock {
        Clock::Wall(self.s.t0)
    }

    fn charge_cpu(&mut self, _ns: u64) {}

    fn cpu_cost(&self) -> CpuCost {
        CpuCost::default()
    }
}

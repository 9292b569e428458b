//! The [`Queues`] impl of [`RdmaQueues`] (post lists in, completions out,
//! a TCP liveness check when the CQ stays empty) and its fault injection.

use super::post::verb_target;
use super::state::{QpState, RdmaQueues};
use crate::{Clock, Completion, CpuCost, Queues, VerbError, WorkRequest};

impl RdmaQueues {
    /// Fault injection: WRs to MS `ms` name `rkey` instead of the region's
    /// (a wrong rkey makes the next one-sided WR fail with a remote access
    /// error, which breaks the QP).
    pub fn set_rkey(&mut self, ms: u16, rkey: u32) {
        if let Some(q) = self.qps.get_mut(ms as usize) {
            q.w.rkey = rkey;
        }
    }

    /// True if the QP to `ms` is broken (every WR to it fails with `QpError`).
    pub fn qp_broken(&self, ms: u16) -> bool {
        self.qps.get(ms as usize).is_none_or(QpState::broken)
    }
}

/// Empty CQ polls (with work in flight) between two TCP liveness checks.
const LIVENESS_EVERY: u32 = 4096;

impl Queues for RdmaQueues {
    fn post_list(&mut self, ms: u16, wrs: &mut Vec<WorkRequest>) {
        let i = ms as usize;
        match self.qps.get_mut(i) {
            None => {
                for wr in wrs.drain(..) {
                    let (addr, len) = verb_target(&wr.verb);
                    self.ready.push_back(Completion {
                        wr_id: wr.wr_id,
                        result: Err(VerbError::OutOfBounds { addr, len }),
                    });
                }
            }
            Some(q) => {
                q.backlog.extend(wrs.drain(..));
                self.pump(i);
            }
        }
    }

    fn poll_cq(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        if self.ready.len() < max {
            if let Some(cq) = self.cq.clone() {
                let mut wcs = std::mem::take(&mut self.wcs);
                wcs.clear();
                let n = match cq.poll(&mut wcs, 32) {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::error!(error = %e, "ibv_poll_cq failed; all QPs broken");
                        for i in 0..self.qps.len() {
                            if !self.qps[i].broken() {
                                self.fail_qp(i, None);
                            }
                        }
                        0
                    }
                };
                for wc in wcs.drain(..) {
                    self.on_wc(wc);
                }
                self.wcs = wcs;
                if n > 0 {
                    self.idle = 0;
                    for i in 0..self.qps.len() {
                        if !self.qps[i].backlog.is_empty() {
                            self.pump(i);
                        }
                    }
                } else if self.ready.is_empty() {
                    self.idle = self.idle.wrapping_add(1);
                    if self.idle.is_multiple_of(LIVENESS_EVERY) {
                        self.check_liveness();
                    }
                }
            }
        }
        let n = self.ready.len().min(max);
        out.extend(self.ready.drain(..n));
        n
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn charge_cpu(&mut self, _ns: u64) {}

    fn cpu_cost(&self) -> CpuCost {
        CpuCost::default()
    }
}

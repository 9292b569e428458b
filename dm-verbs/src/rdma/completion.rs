//! Completions: a CQ entry of a send WR retires every outstanding WR of its
//! QP up to it (RC completes in order); a RECV's entry is an RPC reply. A WR
//! that completes in error, or a memory server that closes its TCP
//! connection, breaks the QP and fails everything on it.

use super::ffi::{self, Local, Wc};
use super::state::{OutKind, Outstanding, RdmaQueues, RECV_BIT, UNWRITTEN};
use super::wire;
use crate::loopback::read_words;
use crate::{Completion, VerbError, VerbOutput, WorkRequest};

impl RdmaQueues {
    /// The output of a WR that completed successfully; frees its buffer.
    /// `None` for an RPC's SEND (the RPC completes with its reply).
    fn retire_ok(&mut self, o: &Outstanding) -> Option<Result<VerbOutput, VerbError>> {
        let words = self.staging.as_ref().map_or(&[][..], |m| m.words());
        let r = match (o.kind, o.buf) {
            (OutKind::Read, Some((off, _))) => {
                let data = read_words(words, off, o.len as usize);
                if data.len() >= 8 && data[..8] == UNWRITTEN.to_le_bytes() {
                    tracing::warn!(
                        ms = o.addr.ms(),
                        addr = ?o.addr,
                        len = o.len,
                        "READ completed without its data in the buffer \
                         (or the memory really held the marker {UNWRITTEN:#x})"
                    );
                }
                Some(Ok(VerbOutput::Read(data)))
            }
            (OutKind::Atomic, Some((off, _))) => {
                let v = u64::from_le_bytes(read_words(words, off, 8).try_into().unwrap());
                if v == UNWRITTEN {
                    tracing::warn!(
                        ms = o.addr.ms(),
                        addr = ?o.addr,
                        "atomic completed without its old value in the buffer \
                         (or the word really held the marker {UNWRITTEN:#x})"
                    );
                }
                Some(Ok(VerbOutput::Atomic(v)))
            }
            (OutKind::Write, _) => Some(Ok(VerbOutput::Write)),
            _ => None,
        };
        if let Some(b) = o.buf {
            self.stage.release(b);
        }
        r
    }

    /// Breaks QP `i`: destroys it, retires the WRs before `failing` (sequence,
    /// `ibv_wc_status`), fails that one with its mapped error and everything
    /// else outstanding, waiting or backlogged with `QpError`.
    pub(super) fn fail_qp(&mut self, i: usize, failing: Option<(u64, u32)>) {
        let q = &mut self.qps[i];
        let ms = q.ms;
        // After ibv_destroy_qp no WR of this QP touches the staging MR any more,
        // so its buffers can be reused below.
        q.qp = None;
        q.tcp = None;
        if self.blocked == Some(ms) {
            self.blocked = None;
        }
        let outs: Vec<Outstanding> = q.outstanding.drain(..).collect();
        let rpcs: Vec<(u64, u16)> = q.rpcs.drain(..).collect();
        let backlog: Vec<WorkRequest> = q.backlog.drain(..).collect();
        let qp_err = || Err(VerbError::QpError { ms });
        for o in &outs {
            let r = match failing {
                Some((s, _)) if o.seq < s => self.retire_ok(o),
                Some((s, st)) if o.seq == s => {
                    if let Some(b) = o.buf {
                        self.stage.release(b);
                    }
                    match o.kind {
                        OutKind::RpcSend => None,
                        _ if ffi::is_remote_access_error(st) => Some(Err(VerbError::OutOfBounds {
                            addr: o.addr,
                            len: o.len,
                        })),
                        _ => Some(qp_err()),
                    }
                }
                _ => {
                    if let Some(b) = o.buf {
                        self.stage.release(b);
                    }
                    (!matches!(o.kind, OutKind::RpcSend)).then(qp_err)
                }
            };
            if let Some(result) = r {
                self.ready.push_back(Completion {
                    wr_id: o.wr_id,
                    result,
                });
            }
        }
        for (wr_id, _) in rpcs {
            self.ready.push_back(Completion {
                wr_id,
                result: qp_err(),
            });
        }
        for wr in backlog {
            self.ready.push_back(Completion {
                wr_id: wr.wr_id,
                result: qp_err(),
            });
        }
    }

    pub(super) fn on_wc(&mut self, wc: Wc) {
        if wc.wr_id & RECV_BIT != 0 {
            let i = ((wc.wr_id >> 16) & 0xffff) as usize;
            let slot = (wc.wr_id & 0xffff) as usize;
            let Some(q) = self.qps.get(i) else { return };
            if q.broken() {
                return;
            }
            if let Some((st, vendor)) = wc.error {
                tracing::warn!(
                    ms = q.ms,
                    status = ffi::wc_status_name(st),
                    vendor,
                    "RECV failed; QP broken"
                );
                self.fail_qp(i, None);
                return;
            }
            let (Some(staging), q) = (self.staging.as_ref(), &mut self.qps[i]) else {
                return;
            };
            let off = q.recv[slot];
            let msg = read_words(
                staging.words(),
                off,
                (wc.byte_len as u64).min(q.msg_bytes) as usize,
            );
            let l = Local {
                mr: staging,
                off,
                len: q.msg_bytes as u32,
            };
            let repost = q.qp.as_mut().map(|qp| qp.post_recv(wc.wr_id, l));
            match wire::decode_reply(&msg) {
                Some((tag, st, body)) => match q.rpcs.iter().position(|r| r.0 == tag) {
                    Some(p) => {
                        let (_, handler) = q.rpcs.swap_remove(p);
                        let result = if st == 0 {
                            Ok(VerbOutput::Rpc(body.to_vec()))
                        } else {
                            Err(wire::decode_error(body, q.ms, handler))
                        };
                        self.ready.push_back(Completion { wr_id: tag, result });
                    }
                    None => tracing::warn!(ms = q.ms, tag, "RPC reply for no pending RPC"),
                },
                None => tracing::warn!(ms = q.ms, len = msg.len(), "malformed RPC reply"),
            }
            if let Some(Err(e)) = repost {
                tracing::warn!(ms = self.qps[i].ms, error = %e, "re-posting a RECV failed; QP broken");
                self.fail_qp(i, None);
            }
            return;
        }
        // A send-queue completion: find its QP (a destroyed QP's stragglers match none).
        let Some(i) = self
            .qps
            .iter()
            .position(|q| q.qp.as_ref().is_some_and(|qp| qp.qpn() == wc.qp_num))
        else {
            return;
        };
        if let Some((st, vendor)) = wc.error {
            tracing::warn!(
                ms = self.qps[i].ms,
                status = ffi::wc_status_name(st),
                vendor,
                "WR completed in error; QP broken"
            );
            self.fail_qp(i, Some((wc.wr_id, st)));
            return;
        }
        while self.qps[i]
            .outstanding
            .front()
            .is_some_and(|o| o.seq <= wc.wr_id)
        {
            let o = self.qps[i].outstanding.pop_front().unwrap();
            if let Some(result) = self.retire_ok(&o) {
                self.ready.push_back(Completion {
                    wr_id: o.wr_id,
                    result,
                });
            }
        }
    }

    /// Breaks every QP with work in flight whose memory server closed its TCP
    /// connection (process gone: its QP no longer answers, and an RPC whose
    /// SEND was acknowledged would otherwise wait for its reply forever).
    pub(super) fn check_liveness(&mut self) {
        for i in 0..self.qps.len() {
            let q = &self.qps[i];
            if q.broken() || (q.outstanding.is_empty() && q.rpcs.is_empty()) {
                continue;
            }
            let mut b = [0u8; 1];
            let dead = match q.tcp.as_ref().map(|t| t.peek(&mut b)) {
                Some(Ok(0)) => true,
                Some(Err(e)) => e.kind() != std::io::ErrorKind::WouldBlock,
                _ => false,
            };
            if dead {
                tracing::warn!(ms = q.ms, "memory server closed its connection; QP broken");
                self.fail_qp(i, None);
            }
        }
    }
}

//! [`RdmaQueues`] and its per-QP state: the RC QP and its TCP connection, the
//! outstanding WRs in posting order, the backlog, the RPCs waiting for a
//! reply, and the receive slots.

use super::ffi::{Cq, MemRegion, Qp, Wc};
use super::stage::Stage;
use super::wire::Welcome;
use crate::{Clock, Completion, GlobalAddr, WorkRequest};
use std::collections::VecDeque;
use std::net::TcpStream;
use std::sync::Arc;

/// Written into an atomic's result buffer before posting: a completion that
/// leaves it there had its old value never delivered (a warning), and the
/// caller sees this marker rather than a stale value (such as 0, which a lock
/// CAS would take for success). Also into the first word of a READ's buffer
/// (READs of at least 8 bytes): a completion that leaves it there delivered
/// no data, and the warning says so instead of the caller silently taking
/// an earlier READ's bytes for fresh ones. See docs/rdma.md.
pub(super) const UNWRITTEN: u64 = 0xa5c3_5a3c_0bad_f00d;

/// Native `wr_id` bit of receive WRs (send WRs carry a per-QP sequence number).
pub(super) const RECV_BIT: u64 = 1 << 63;

pub(super) fn recv_wr_id(ms: u16, slot: usize) -> u64 {
    RECV_BIT | ((ms as u64) << 16) | slot as u64
}

#[derive(Clone, Copy, Debug)]
pub(super) enum OutKind {
    Read,
    Write,
    Atomic,
    RpcSend,
}

/// A posted send WR not yet retired.
pub(super) struct Outstanding {
    pub(super) seq: u64,
    pub(super) wr_id: u64,
    pub(super) kind: OutKind,
    pub(super) addr: GlobalAddr,
    pub(super) len: u64,
    pub(super) buf: Option<(u64, usize)>,
}

pub(super) struct QpState {
    pub(super) ms: u16,
    pub(super) qp: Option<Qp>,
    pub(super) tcp: Option<TcpStream>,
    pub(super) w: Welcome,
    pub(super) max_inline: u32,
    pub(super) credits: usize,
    pub(super) msg_bytes: u64,
    pub(super) sq: usize,
    pub(super) next_seq: u64,
    pub(super) outstanding: VecDeque<Outstanding>,
    pub(super) backlog: VecDeque<WorkRequest>,
    /// RPCs whose reply has not arrived: (wr_id, handler).
    pub(super) rpcs: Vec<(u64, u16)>,
    /// Offsets of this QP's receive slots in the staging MR.
    pub(super) recv: Vec<u64>,
}

impl QpState {
    pub(super) fn broken(&self) -> bool {
        self.qp.is_none()
    }
}

/// One core's QPs (one per MS), CQ and staging MR. `Send`, not shared.
pub struct RdmaQueues {
    // Drop order: QPs (which hold the CQ and staging MR) first.
    pub(super) qps: Vec<QpState>,
    pub(super) staging: Option<Arc<MemRegion>>,
    pub(super) cq: Option<Arc<Cq>>,
    pub(super) stage: Stage,
    pub(super) wcs: Vec<Wc>,
    pub(super) ready: VecDeque<Completion>,
    /// The MS whose backlog waits for staging space; others do not allocate
    /// meanwhile, so in-use buffers drain and the waiter gets its turn.
    pub(super) blocked: Option<u16>,
    pub(super) idle: u32,
    pub(super) clock: Clock,
}

impl RdmaQueues {
    pub(super) fn broken(num_ms: u16, clock: Clock) -> RdmaQueues {
        let qps = (0..num_ms)
            .map(|ms| QpState {
                ms,
                qp: None,
                tcp: None,
                w: Welcome {
                    ms_id: ms,
                    qpn: 0,
                    psn: 0,
                    lid: 0,
                    gid: [0; 16],
                    region_addr: 0,
                    rkey: 0,
                    region_bytes: 0,
                    chunk_bytes: 0,
                    device_bytes: 0,
                    rpc_slots: 0,
                    msg_bytes: 0,
                    dm_rkey: 0,
                },
                max_inline: 0,
                credits: 0,
                msg_bytes: 0,
                sq: 0,
                next_seq: 0,
                outstanding: VecDeque::new(),
                backlog: VecDeque::new(),
                rpcs: Vec::new(),
                recv: Vec::new(),
            })
            .collect();
        RdmaQueues {
            qps,
            staging: None,
            cq: None,
            stage: Stage::new(0, 0),
            wcs: Vec::new(),
            ready: VecDeque::new(),
            blocked: None,
            idle: 0,
            clock,
        }
    }
}

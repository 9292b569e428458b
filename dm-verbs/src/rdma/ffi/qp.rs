//! [`Qp`]: an RC queue pair (QP) on one CQ, its creation, and its
//! RESET -> INIT -> RTR -> RTS transitions against a remote [`Endpoint`]
//! exchanged by the TCP handshake. Posting WRs to it is in `post.rs`.

use super::{errno_err, Cq, Device, FfiError, MemRegion};
use ibverbs_sys as sys;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// A GID (16 bytes, network order) and the other half of a QP endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Endpoint {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

/// Capacities asked for at QP creation.
#[derive(Clone, Copy, Debug)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_inline: u32,
}

/// Timers of an RC connection (ibv_modify_qp(3)).
#[derive(Clone, Copy, Debug)]
pub struct RcTimers {
    /// Local ACK timeout, 4.096 us * 2^timeout.
    pub timeout: u8,
    /// Transport retries before IBV_WC_RETRY_EXC_ERR.
    pub retry_cnt: u8,
    /// RNR retries (7 = unlimited).
    pub rnr_retry: u8,
    /// Responder's RNR NAK timer code.
    pub min_rnr_timer: u8,
}

/// An RC queue pair whose send and receive queues complete on one CQ.
pub struct Qp {
    pub(super) qp: NonNull<sys::ibv_qp>,
    pub(super) max_inline: u32,
    pub(super) wrs: Vec<sys::ibv_send_wr>,
    pub(super) sges: Vec<sys::ibv_sge>,
    // Declared after `qp`, but `Drop` destroys the QP explicitly before these go.
    pub(super) keep: Vec<Arc<MemRegion>>,
    _cq: Arc<Cq>,
    dev: Arc<Device>,
}

// SAFETY: point 5; `wrs`/`sges` hold pointers only during `post_send`.
unsafe impl Send for Qp {}

impl Qp {
    /// Creates an RC QP on `cq` whose WRs may use the regions in `keep`.
    pub fn new_rc(cq: &Arc<Cq>, keep: Vec<Arc<MemRegion>>, caps: QpCaps) -> Result<Qp, FfiError> {
        let dev = cq.dev.clone();
        let lim = dev.max_qp_wr.max(1);
        let mut init = sys::ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: cq.cq.as_ptr(),
            recv_cq: cq.cq.as_ptr(),
            srq: ptr::null_mut(),
            cap: sys::ibv_qp_cap {
                max_send_wr: caps.max_send_wr.clamp(1, lim),
                max_recv_wr: caps.max_recv_wr.clamp(1, lim),
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: caps.max_inline,
            },
            qp_type: sys::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: pd and cq valid (point 1); `init` is fully initialised.
        let qp = unsafe { sys::ibv_create_qp(dev.pd.as_ptr(), &mut init) };
        let qp = NonNull::new(qp).ok_or_else(|| errno_err("ibv_create_qp", 0))?;
        Ok(Qp {
            qp,
            // ibv_create_qp writes back the capacities actually granted.
            max_inline: init.cap.max_inline_data,
            wrs: Vec::new(),
            sges: Vec::new(),
            keep,
            _cq: cq.clone(),
            dev,
        })
    }

    pub fn qpn(&self) -> u32 {
        // SAFETY: qp valid while self lives.
        unsafe { self.qp.as_ref().qp_num }
    }

    /// Largest inline payload the QP accepts.
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// This side's endpoint for the handshake.
    pub fn endpoint(&self, psn: u32) -> Endpoint {
        Endpoint {
            qpn: self.qpn(),
            psn,
            lid: self.dev.lid,
            gid: self.dev.gid,
        }
    }

    /// RESET -> INIT -> RTR -> RTS against `remote`, with our send PSN `psn`
    /// and `max_rd_atomic`/`max_dest_rd_atomic` at `rd_atomic` (capped by the device).
    pub fn connect(
        &mut self,
        psn: u32,
        remote: &Endpoint,
        rd_atomic: u8,
        t: RcTimers,
    ) -> Result<(), FfiError> {
        use sys::ibv_qp_attr_mask as M;
        let d = self.dev.clone();
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: d.port,
            qp_access_flags: (sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC)
                .0,
            ..Default::default()
        };
        let mask = M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS;
        self.modify(&mut a, mask, "INIT")?;
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_RTR,
            path_mtu: d.active_mtu,
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn,
            max_dest_rd_atomic: rd_atomic.min(d.max_dest_rd_atomic).max(1),
            min_rnr_timer: t.min_rnr_timer,
            ..Default::default()
        };
        a.ah_attr.dlid = remote.lid;
        a.ah_attr.port_num = d.port;
        if remote.gid != [0; 16] {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = remote.gid;
            a.ah_attr.grh.sgid_index = d.gid_index;
            a.ah_attr.grh.hop_limit = 64;
        }
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_AV
            | M::IBV_QP_PATH_MTU
            | M::IBV_QP_DEST_QPN
            | M::IBV_QP_RQ_PSN
            | M::IBV_QP_MAX_DEST_RD_ATOMIC
            | M::IBV_QP_MIN_RNR_TIMER;
        self.modify(&mut a, mask, "RTR")?;
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_RTS,
            sq_psn: psn,
            timeout: t.timeout,
            retry_cnt: t.retry_cnt,
            rnr_retry: t.rnr_retry,
            max_rd_atomic: rd_atomic.min(d.max_rd_atomic).max(1),
            ..Default::default()
        };
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_SQ_PSN
            | M::IBV_QP_TIMEOUT
            | M::IBV_QP_RETRY_CNT
            | M::IBV_QP_RNR_RETRY
            | M::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(&mut a, mask, "RTS")
    }

    fn modify(
        &mut self,
        a: &mut sys::ibv_qp_attr,
        mask: sys::ibv_qp_attr_mask,
        to: &str,
    ) -> Result<(), FfiError> {
        // SAFETY: qp valid; `a` fully initialised for the fields in `mask`.
        let rc = unsafe { sys::ibv_modify_qp(self.qp.as_ptr(), a, mask.0 as i32) };
        if rc != 0 {
            return Err(errno_err(&format!("ibv_modify_qp to {to}"), rc));
        }
        Ok(())
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: point 2: destroy the QP before `keep` (and the CQ) are released.
        unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
    }
}

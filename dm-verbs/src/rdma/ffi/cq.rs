//! [`Cq`]: a completion queue (CQ), polled with `ibv_poll_cq` into [`Wc`]s,
//! and the names of the work-completion statuses.

use super::{errno_err, Device, FfiError};
use ibverbs_sys as sys;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// A completion queue, with a completion event channel if made by
/// [`Cq::with_channel`].
pub struct Cq {
    pub(super) cq: NonNull<sys::ibv_cq>,
    pub(super) dev: Arc<Device>,
    channel: Option<NonNull<sys::ibv_comp_channel>>,
}

// SAFETY: point 5: a CQ handle has no thread affinity (libibverbs calls may
// come from any thread), and `dev` keeps its context open wherever the `Cq`
// goes (point 1); `ibv_destroy_cq` runs once, in `Drop`.
unsafe impl Send for Cq {}
// SAFETY: point 5: through `&Cq` the handle is only passed to the provider's
// `poll_cq` (`Cq::poll`) and to `ibv_create_qp` as a QP's CQ; `self.cq` and the
// `ibv_cq` fields read here (`context`) are written only by `ibv_create_cq`.
// rdma-core providers take the CQ's own lock in `poll_cq`, so concurrent polls
// are serialised by the library (this crate polls each CQ from one core's
// `RdmaQueues` or the memory server's loop anyway). mlx5's
// `MLX5_SINGLE_THREADED=1` drops that lock; it stays sound here only because no
// CQ is polled from two threads at once.
unsafe impl Sync for Cq {}

/// A work completion, copied out of the CQ.
#[derive(Clone, Copy, Debug)]
pub struct Wc {
    pub wr_id: u64,
    pub qp_num: u32,
    /// `None` on success; else (`ibv_wc_status`, vendor error).
    pub error: Option<(u32, u32)>,
    pub byte_len: u32,
}

impl Cq {
    /// A CQ with at least `cqe` entries (capped at the device maximum).
    pub fn new(dev: &Arc<Device>, cqe: u32) -> Result<Arc<Cq>, FfiError> {
        let cqe = cqe.clamp(1, dev.max_cqe.max(1)) as i32;
        // SAFETY: ctx valid; no channel, no context pointer.
        let cq = unsafe {
            sys::ibv_create_cq(dev.ctx.as_ptr(), cqe, ptr::null_mut(), ptr::null_mut(), 0)
        };
        let cq = NonNull::new(cq).ok_or_else(|| errno_err("ibv_create_cq", 0))?;
        Ok(Arc::new(Cq {
            cq,
            dev: dev.clone(),
            channel: None,
        }))
    }

    /// A CQ as [`Cq::new`] whose completions, once [`Cq::arm`]ed, signal a
    /// completion event channel with a non-blocking file descriptor
    /// ([`Cq::channel_fd`]): the memory server blocks on it when idle.
    pub fn with_channel(dev: &Arc<Device>, cqe: u32) -> Result<Arc<Cq>, FfiError> {
        let cqe = cqe.clamp(1, dev.max_cqe.max(1)) as i32;
        // SAFETY: ctx valid.
        let ch = unsafe { sys::ibv_create_comp_channel(dev.ctx.as_ptr()) };
        let ch = NonNull::new(ch).ok_or_else(|| errno_err("ibv_create_comp_channel", 0))?;
        // SAFETY: `ch` is a live channel; its fd is an open descriptor it owns.
        let fd = unsafe { ch.as_ref().fd };
        // SAFETY: fcntl on an open descriptor.
        let ok = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        };
        // SAFETY: ctx valid; `ch` outlives the CQ (destroyed after it, in Drop).
        let cq = ok.then(|| unsafe {
            sys::ibv_create_cq(dev.ctx.as_ptr(), cqe, ptr::null_mut(), ch.as_ptr(), 0)
        });
        match cq.and_then(NonNull::new) {
            Some(cq) => Ok(Arc::new(Cq {
                cq,
                dev: dev.clone(),
                channel: Some(ch),
            })),
            None => {
                let e = errno_err("ibv_create_cq with a completion channel", 0);
                // SAFETY: no CQ uses the channel.
                unsafe { sys::ibv_destroy_comp_channel(ch.as_ptr()) };
                Err(e)
            }
        }
    }

    /// The completion channel's file descriptor (readable once an armed
    /// CQ got a completion), if the CQ has a channel.
    pub fn channel_fd(&self) -> Option<i32> {
        // SAFETY: the channel lives as long as `self`.
        self.channel.map(|c| unsafe { c.as_ref().fd })
    }

    /// Asks for one event on the channel at the next completion
    /// (`ibv_req_notify_cq`, inline in verbs.h: the context's ops table).
    /// A completion already in the CQ raises none: poll once more after
    /// arming before blocking.
    pub fn arm(&self) -> Result<(), FfiError> {
        // SAFETY: point 6; cq valid.
        let r = unsafe {
            let ctx = self.cq.as_ref().context;
            let f = (*ctx)
                .ops
                .req_notify_cq
                .ok_or_else(|| FfiError("provider has no req_notify_cq".into()))?;
            f(self.cq.as_ptr(), 0)
        };
        if r != 0 {
            return Err(FfiError(format!("ibv_req_notify_cq failed ({r})")));
        }
        Ok(())
    }

    /// Reads and acknowledges every event waiting on the channel (none
    /// without a channel); how many there were.
    pub fn take_events(&self) -> u32 {
        let Some(ch) = self.channel else { return 0 };
        let mut n = 0u32;
        loop {
            let mut cq: *mut sys::ibv_cq = ptr::null_mut();
            let mut ctx: *mut std::ffi::c_void = ptr::null_mut();
            // SAFETY: a live channel with a non-blocking fd: returns -1
            // (EAGAIN) when no event is waiting.
            if unsafe { sys::ibv_get_cq_event(ch.as_ptr(), &mut cq, &mut ctx) } != 0 {
                break;
            }
            n += 1;
        }
        if n > 0 {
            // SAFETY: every event read above is for this CQ (the channel's only one).
            unsafe { sys::ibv_ack_cq_events(self.cq.as_ptr(), n) };
        }
        n
    }

    /// `ibv_poll_cq` for up to `max` completions, appended to `out`; returns how many.
    pub fn poll(&self, out: &mut Vec<Wc>, max: usize) -> Result<usize, FfiError> {
        const BATCH: usize = 32;
        // SAFETY: `ibv_wc` is plain old data; zeroed is a valid value.
        let mut wcs: [sys::ibv_wc; BATCH] = unsafe { std::mem::zeroed() };
        let want = max.min(BATCH) as i32;
        // SAFETY: point 6; cq valid; `wcs` has room for `want` entries.
        let n = unsafe {
            let ctx = self.cq.as_ref().context;
            let f = (*ctx)
                .ops
                .poll_cq
                .ok_or_else(|| FfiError("provider has no poll_cq".into()))?;
            f(self.cq.as_ptr(), want, wcs.as_mut_ptr())
        };
        if n < 0 {
            return Err(FfiError(format!("ibv_poll_cq failed ({n})")));
        }
        for w in &wcs[..n as usize] {
            out.push(Wc {
                wr_id: w.wr_id(),
                qp_num: w.qp_num,
                error: w.error(),
                byte_len: w.len() as u32,
            });
        }
        Ok(n as usize)
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: point 1: every QP on this CQ holds an Arc to it, so none is left.
        unsafe { sys::ibv_destroy_cq(self.cq.as_ptr()) };
        if let Some(ch) = self.channel {
            // SAFETY: its only CQ is gone.
            unsafe { sys::ibv_destroy_comp_channel(ch.as_ptr()) };
        }
    }
}

/// True for `IBV_WC_REM_ACCESS_ERR` (wrong rkey, or an address outside the remote MR).
pub fn is_remote_access_error(status: u32) -> bool {
    status == sys::ibv_wc_status::IBV_WC_REM_ACCESS_ERR
}

/// The name of an `ibv_wc_status` (for logs).
pub fn wc_status_name(status: u32) -> &'static str {
    use sys::ibv_wc_status as S;
    match status {
        S::IBV_WC_SUCCESS => "IBV_WC_SUCCESS",
        S::IBV_WC_LOC_LEN_ERR => "IBV_WC_LOC_LEN_ERR",
        S::IBV_WC_LOC_QP_OP_ERR => "IBV_WC_LOC_QP_OP_ERR",
        S::IBV_WC_LOC_PROT_ERR => "IBV_WC_LOC_PROT_ERR",
        S::IBV_WC_WR_FLUSH_ERR => "IBV_WC_WR_FLUSH_ERR",
        S::IBV_WC_REM_INV_REQ_ERR => "IBV_WC_REM_INV_REQ_ERR",
        S::IBV_WC_REM_ACCESS_ERR => "IBV_WC_REM_ACCESS_ERR",
        S::IBV_WC_REM_OP_ERR => "IBV_WC_REM_OP_ERR",
        S::IBV_WC_RETRY_EXC_ERR => "IBV_WC_RETRY_EXC_ERR",
        S::IBV_WC_RNR_RETRY_EXC_ERR => "IBV_WC_RNR_RETRY_EXC_ERR",
        S::IBV_WC_REM_ABORT_ERR => "IBV_WC_REM_ABORT_ERR",
        S::IBV_WC_FATAL_ERR => "IBV_WC_FATAL_ERR",
        S::IBV_WC_RESP_TIMEOUT_ERR => "IBV_WC_RESP_TIMEOUT_ERR",
        S::IBV_WC_GENERAL_ERR => "IBV_WC_GENERAL_ERR",
        _ => "other ibv_wc_status",
    }
}

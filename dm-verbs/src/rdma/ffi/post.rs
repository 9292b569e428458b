//! Posting work requests (WRs) to a [`Qp`]: the WR types ([`SendWr`],
//! [`SendOp`], [`Local`], [`Src`]), the chained post list behind one
//! `ibv_post_send` (one doorbell), and `ibv_post_recv` (points 2, 4 and 6 of
//! the parent module's safety argument).

use super::{errno_err, FfiError, MemRegion, Qp};
use ibverbs_sys as sys;
use std::ptr;
use std::sync::Arc;

/// A local buffer of a WR: `len` bytes at `off` of `mr`, which must be one of
/// the QP's `keep` regions.
#[derive(Clone, Copy)]
pub struct Local<'a> {
    pub mr: &'a Arc<MemRegion>,
    pub off: u64,
    pub len: u32,
}

/// Where the bytes of a WRITE or SEND come from.
#[derive(Clone, Copy)]
pub enum Src<'a> {
    /// Copied into the WQE by `ibv_post_send` (`IBV_SEND_INLINE`); at most
    /// [`Qp::max_inline`] bytes.
    Inline(&'a [u8]),
    Buf(Local<'a>),
}

/// One send-queue WR.
#[derive(Clone, Copy)]
pub enum SendOp<'a> {
    Read {
        dst: Local<'a>,
        remote: u64,
        rkey: u32,
    },
    Write {
        src: Src<'a>,
        remote: u64,
        rkey: u32,
    },
    /// 8-byte CAS; the old value lands in `dst` (8 bytes, 8-aligned).
    Cas {
        dst: Local<'a>,
        remote: u64,
        rkey: u32,
        expect: u64,
        swap: u64,
    },
    /// 8-byte FAA; the old value lands in `dst`.
    Faa {
        dst: Local<'a>,
        remote: u64,
        rkey: u32,
        add: u64,
    },
    Send {
        src: Src<'a>,
    },
}

#[derive(Clone, Copy)]
pub struct SendWr<'a> {
    pub wr_id: u64,
    pub signaled: bool,
    pub op: SendOp<'a>,
}

impl Qp {
    fn sge(&self, l: &Local<'_>) -> Result<sys::ibv_sge, FfiError> {
        if !self.keep.iter().any(|k| Arc::ptr_eq(k, l.mr)) {
            return Err(FfiError(
                "local buffer in an MR this QP does not keep".into(),
            ));
        }
        if l.off
            .checked_add(l.len as u64)
            .is_none_or(|e| e > l.mr.len())
        {
            return Err(FfiError("local buffer outside its MR".into()));
        }
        Ok(sys::ibv_sge {
            addr: l.mr.addr() + l.off,
            length: l.len,
            lkey: l.mr.lkey(),
        })
    }

    fn src_sge(&self, s: &Src<'_>) -> Result<(sys::ibv_sge, bool), FfiError> {
        match s {
            Src::Inline(b) => {
                if b.len() as u64 > self.max_inline as u64 {
                    return Err(FfiError("inline payload above max_inline_data".into()));
                }
                let sge = sys::ibv_sge {
                    addr: b.as_ptr() as u64,
                    length: b.len() as u32,
                    lkey: 0,
                };
                Ok((sge, true))
            }
            Src::Buf(l) => Ok((self.sge(l)?, false)),
        }
    }

    /// Posts `wrs` as one chained post list: one `ibv_post_send`, one doorbell.
    /// Errors (bad local buffer, provider refusal such as a full SQ) post nothing
    /// of the list only if they are found before the call; a provider refusal
    /// may have posted a prefix, so the caller treats it as a broken QP.
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), FfiError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let mut sges = std::mem::take(&mut self.sges);
        let mut out = std::mem::take(&mut self.wrs);
        sges.clear();
        out.clear();
        let r = self.build(wrs, &mut sges, &mut out).and_then(|()| {
            // Chain now that neither vector grows any more (point 4).
            let n = out.len();
            for i in 0..n {
                out[i].sg_list = if out[i].num_sge > 0 {
                    &mut sges[i] as *mut _
                } else {
                    ptr::null_mut()
                };
                out[i].next = if i + 1 < n {
                    &mut out[i + 1] as *mut _
                } else {
                    ptr::null_mut()
                };
            }
            let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
            // SAFETY: point 6 (ops table), point 2 (local buffers checked in
            // `build`, inline data borrowed for this call), point 4 (arrays live).
            let rc = unsafe {
                let ctx = self.qp.as_ref().context;
                let f = (*ctx)
                    .ops
                    .post_send
                    .ok_or_else(|| FfiError("provider has no post_send".into()))?;
                f(self.qp.as_ptr(), out.as_mut_ptr(), &mut bad)
            };
            if rc != 0 {
                return Err(errno_err("ibv_post_send", rc));
            }
            Ok(())
        });
        // Drop every pointer before the scratch goes back (point 4).
        out.clear();
        sges.clear();
        self.wrs = out;
        self.sges = sges;
        r
    }

    fn build(
        &self,
        wrs: &[SendWr<'_>],
        sges: &mut Vec<sys::ibv_sge>,
        out: &mut Vec<sys::ibv_send_wr>,
    ) -> Result<(), FfiError> {
        use sys::ibv_wr_opcode as Op;
        sges.reserve(wrs.len());
        out.reserve(wrs.len());
        for w in wrs {
            let mut s = sys::ibv_send_wr {
                wr_id: w.wr_id,
                num_sge: 1,
                ..Default::default()
            };
            let mut flags = if w.signaled {
                sys::ibv_send_flags::IBV_SEND_SIGNALED.0
            } else {
                0
            };
            let sge = match &w.op {
                SendOp::Read { dst, remote, rkey } => {
                    s.opcode = Op::IBV_WR_RDMA_READ;
                    s.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                        remote_addr: *remote,
                        rkey: *rkey,
                    };
                    self.sge(dst)?
                }
                SendOp::Write { src, remote, rkey } => {
                    s.opcode = Op::IBV_WR_RDMA_WRITE;
                    s.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                        remote_addr: *remote,
                        rkey: *rkey,
                    };
                    let (sge, inline) = self.src_sge(src)?;
                    if inline {
                        flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
                    }
                    sge
                }
                SendOp::Cas {
                    dst,
                    remote,
                    rkey,
                    expect,
                    swap,
                } => {
                    s.opcode = Op::IBV_WR_ATOMIC_CMP_AND_SWP;
                    s.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                        remote_addr: *remote,
                        compare_add: *expect,
                        swap: *swap,
                        rkey: *rkey,
                    };
                    self.sge(dst)?
                }
                SendOp::Faa {
                    dst,
                    remote,
                    rkey,
                    add,
                } => {
                    s.opcode = Op::IBV_WR_ATOMIC_FETCH_AND_ADD;
                    s.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                        remote_addr: *remote,
                        compare_add: *add,
                        swap: 0,
                        rkey: *rkey,
                    };
                    self.sge(dst)?
                }
                SendOp::Send { src } => {
                    s.opcode = Op::IBV_WR_SEND;
                    let (sge, inline) = self.src_sge(src)?;
                    if inline {
                        flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
                    }
                    sge
                }
            };
            if sge.length == 0 {
                s.num_sge = 0;
            }
            s.send_flags = flags;
            sges.push(sge);
            out.push(s);
        }
        Ok(())
    }

    /// Posts one receive WR for `buf`.
    pub fn post_recv(&mut self, wr_id: u64, buf: Local<'_>) -> Result<(), FfiError> {
        let mut sge = self.sge(&buf)?;
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: point 6; `wr`/`sge` live for the call; the buffer is a kept MR (point 2).
        let rc = unsafe {
            let ctx = self.qp.as_ref().context;
            let f = (*ctx)
                .ops
                .post_recv
                .ok_or_else(|| FfiError("provider has no post_recv".into()))?;
            f(self.qp.as_ptr(), &mut wr, &mut bad)
        };
        if rc != 0 {
            return Err(errno_err("ibv_post_recv", rc));
        }
        Ok(())
    }
}

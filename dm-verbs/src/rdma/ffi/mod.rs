//! Every `unsafe` line of the `rdma` backend: thin owning wrappers over the
//! rdma-core objects (device context, PD, MR, CQ, RC QP) built on `ibverbs-sys`,
//! and the two data-path calls (`ibv_post_send`/`ibv_post_recv` with a chained
//! post list, `ibv_poll_cq`). Nothing outside this module touches a raw verbs
//! handle.
//!
//! Why not the `ibverbs` crate: `ibverbs` 0.9.2 keeps the raw handles of its
//! `Context`, `ProtectionDomain`, `CompletionQueue`, `QueuePair` and
//! `MemoryRegion` in private fields, so a QP it built cannot be handed a
//! one-sided WR or a post list, an MR it registered cannot be named by one, and
//! it wraps neither `ibv_query_device_ex` nor device memory. Mixing the two
//! would mean two owners of one context. This module therefore does setup
//! through `ibverbs-sys` (the raw bindings `ibverbs` itself is built on) as
//! well, and the workspace does not depend on `ibverbs`.
//!
//! ## Safety argument (the whole module)
//! 1. **Handles are valid while their owner lives.** Each wrapper owns exactly
//!    one non-null handle returned by its `ibv_create_*`/`ibv_alloc_*`/
//!    `ibv_reg_mr`/`ibv_open_device` call, and destroys it once in `Drop`.
//!    Dependencies are kept alive by `Arc`: an [`MemRegion`], [`Cq`] and [`Qp`]
//!    hold the [`Device`] (context + PD) they were made from; a [`Qp`] holds its
//!    [`Cq`] and every [`MemRegion`] its WRs may name (`keep`). So the context
//!    outlives the PD, the PD outlives its MRs and QPs, and the CQ outlives its QPs.
//! 2. **The NIC only touches memory that outlives the QP.** [`Qp::post_send`] and
//!    [`Qp::post_recv`] accept local buffers only as [`Local`] = (one of this QP's
//!    `keep` regions, offset, length), checked to lie inside that region; the
//!    lkey comes from the region itself. Inline data is copied by the provider
//!    inside `ibv_post_send` (that is what `IBV_SEND_INLINE` means), so its
//!    borrow only needs to last for the call. `Qp::drop` destroys the QP (after
//!    `ibv_destroy_qp` returns no WR of it is executed or completed any more)
//!    before it drops its `keep` regions, and a region deregisters its MR before
//!    freeing the memory. Remote addresses are the peer's business: a wrong one
//!    makes the WR complete in error (remote access error), never a local write.
//! 3. **CPU access to registered memory is atomic.** A [`MemRegion`] is an array
//!    of `AtomicU64` words (zeroed by the allocator); the CPU reads and writes it
//!    only through [`MemRegion::words`], so a CPU access racing a NIC DMA (or a
//!    remote WRITE on the memory server) is at worst a torn value, never a Rust
//!    data race on plain memory.
//! 4. **Work requests live for the duration of the call.** The `ibv_send_wr`/
//!    `ibv_sge` arrays are built in scratch vectors that are not resized after
//!    the `next`/`sg_list` pointers are taken, and the provider copies them into
//!    its queue before `ibv_post_send` returns (verbs(7) contract), so nothing
//!    points into them afterwards.
//! 5. **Thread safety.** libibverbs objects may be used from any thread
//!    (rdma-core documents all verbs calls as thread safe). A [`Qp`] is posted to
//!    only through `&mut self`; [`Cq::poll`] takes `&self` and rdma-core's
//!    providers lock the CQ internally. Hence the `Send`/`Sync` impls below.
//! 6. **Inline functions.** `ibv_post_send`, `ibv_post_recv` and `ibv_poll_cq`
//!    are `static inline` in `verbs.h` and not exported by libibverbs; as in
//!    `verbs.h`, they are reached through the context's `ops` table, whose
//!    entries the provider fills at `ibv_open_device` (a missing entry is
//!    reported as an error, not called).
//! 7. **Device memory** (`ibv_query_device_ex`, `ibv_alloc_dm`,
//!    `ibv_reg_dm_mr`, `ibv_memcpy_to_dm`, `ibv_free_dm`) is inline in
//!    `verbs.h` too, but through `struct verbs_context`, which ibverbs-sys
//!    does not bind; `csrc/dm_shim.c` compiles those inline bodies against the
//!    header, and this module calls them as `extern "C"` functions taking the
//!    same opaque pointers. A [`DeviceMem`] owns one allocation and its MR
//!    (zero-based, so remote peers name offsets, never host addresses); the
//!    CPU never maps it (it is written only through `ibv_memcpy_to_dm`), so
//!    point 3 does not arise. Drop deregisters the MR before freeing the
//!    memory, so a late remote WR fails with an access error.

use ibverbs_sys as sys;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::CStr;
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

// csrc/dm_shim.c (point 7).
extern "C" {
    fn dm_shim_max_dm_size(ctx: *mut sys::ibv_context) -> u64;
    fn dm_shim_alloc_dm(ctx: *mut sys::ibv_context, len: u64) -> *mut sys::ibv_dm;
    fn dm_shim_free_dm(dm: *mut sys::ibv_dm) -> std::os::raw::c_int;
    fn dm_shim_reg_dm_mr(pd: *mut sys::ibv_pd, dm: *mut sys::ibv_dm, len: u64) -> *mut sys::ibv_mr;
    fn dm_shim_memcpy_to_dm(
        dm: *mut sys::ibv_dm,
        off: u64,
        src: *const std::os::raw::c_void,
        len: u64,
    ) -> std::os::raw::c_int;
}

/// A setup or data-path failure of the verbs library (not a WR completion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FfiError(pub String);

impl fmt::Display for FfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn errno_err(what: &str, rc: i32) -> FfiError {
    let e = if rc > 0 {
        std::io::Error::from_raw_os_error(rc)
    } else {
        std::io::Error::last_os_error()
    };
    FfiError(format!("{what}: {e}"))
}

/// A GID (16 bytes, network order) and the other half of a QP endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Endpoint {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

/// An opened RDMA device: its context, one PD, and what we use of its port.
pub struct Device {
    ctx: NonNull<sys::ibv_context>,
    pd: NonNull<sys::ibv_pd>,
    pub name: String,
    pub port: u8,
    pub gid_index: u8,
    pub gid: [u8; 16],
    pub lid: u16,
    /// `ibv_mtu` enum value of the port's active MTU.
    pub active_mtu: u32,
    /// Device limits on outstanding RDMA READ/atomic WRs per QP (initiator, responder).
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub max_qp_wr: u32,
    pub max_cqe: u32,
    /// `ibv_atomic_cap` (0 = no atomics).
    pub atomic_cap: u32,
}

// SAFETY: see the module docs, point 5.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Device {
    /// Names of the RDMA devices present (empty if none or no libibverbs provider).
    pub fn list() -> Vec<String> {
        let mut n = 0;
        // SAFETY: returns a NULL-terminated array of `n` device pointers or NULL;
        // we read the names and free the array before returning.
        unsafe {
            let l = sys::ibv_get_device_list(&mut n);
            if l.is_null() {
                return Vec::new();
            }
            let mut out = Vec::new();
            for i in 0..n.max(0) as usize {
                let d = *l.add(i);
                let p = sys::ibv_get_device_name(d);
                if !p.is_null() {
                    out.push(CStr::from_ptr(p).to_string_lossy().into_owned());
                }
            }
            sys::ibv_free_device_list(l);
            out
        }
    }

    /// Opens device `name` (or the first one), queries port `port` and GID
    /// `gid_index`, and allocates a PD. Errors: no such device, port not
    /// ACTIVE/ARMED, GID index out of range or all-zero, any verbs failure.
    pub fn open(name: Option<&str>, port: u8, gid_index: u8) -> Result<Arc<Device>, FfiError> {
        let mut n = 0;
        // SAFETY: the device list is valid until freed; `ibv_open_device` keeps
        // what it needs, so the list is freed right after (ibv_get_device_list(3)).
        let (ctx, dev_name) = unsafe {
            let l = sys::ibv_get_device_list(&mut n);
            if l.is_null() || n <= 0 {
                if !l.is_null() {
                    sys::ibv_free_device_list(l);
                }
                return Err(FfiError(
                    "no RDMA device (is a provider installed and, for soft-RoCE, \
                     `rdma link add rxe0 type rxe netdev IFACE` done?)"
                        .into(),
                ));
            }
            let mut chosen = None;
            let mut names = Vec::new();
            for i in 0..n as usize {
                let d = *l.add(i);
                let p = sys::ibv_get_device_name(d);
                let nm = if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                };
                if chosen.is_none() && name.is_none_or(|w| w == nm) {
                    chosen = Some((d, nm.clone()));
                }
                names.push(nm);
            }
            let Some((d, nm)) = chosen else {
                sys::ibv_free_device_list(l);
                return Err(FfiError(format!(
                    "no RDMA device named {:?} (have: {})",
                    name.unwrap_or(""),
                    names.join(", ")
                )));
            };
            let ctx = sys::ibv_open_device(d);
            sys::ibv_free_device_list(l);
            (ctx, nm)
        };
        let ctx = NonNull::new(ctx).ok_or_else(|| errno_err("ibv_open_device", 0))?;
        // From here on, `close` releases the context on every error path.
        let close = |e: FfiError| {
            // SAFETY: ctx is open and owned by nobody else yet.
            unsafe { sys::ibv_close_device(ctx.as_ptr()) };
            e
        };
        let mut pa = sys::ibv_port_attr::default();
        let mut da = sys::ibv_device_attr::default();
        let mut gid = sys::ibv_gid::default();
        // SAFETY: ctx is open; the exported `ibv_query_port` fills a
        // `struct ibv_port_attr` (the `_compat` type is the same struct in the
        // versioned symbol), and `pa` is a full, writable one.
        let rc = unsafe {
            sys::ibv_query_port(
                ctx.as_ptr(),
                port,
                &mut pa as *mut sys::ibv_port_attr as *mut sys::_compat_ibv_port_attr,
            )
        };
        if rc != 0 {
            return Err(close(errno_err("ibv_query_port", rc)));
        }
        if pa.state != sys::ibv_port_state::IBV_PORT_ACTIVE
            && pa.state != sys::ibv_port_state::IBV_PORT_ARMED
        {
            return Err(close(FfiError(format!(
                "{dev_name} port {port} is not ACTIVE (state {})",
                pa.state
            ))));
        }
        if gid_index as i32 >= pa.gid_tbl_len {
            return Err(close(FfiError(format!(
                "GID index {gid_index} out of range: {dev_name} port {port} has {} GIDs",
                pa.gid_tbl_len
            ))));
        }
        // SAFETY: ctx open, out-pointers valid.
        let rc = unsafe { sys::ibv_query_gid(ctx.as_ptr(), port, gid_index as i32, &mut gid) };
        if rc != 0 {
            return Err(close(errno_err("ibv_query_gid", rc)));
        }
        // SAFETY: as above.
        let rc = unsafe { sys::ibv_query_device(ctx.as_ptr(), &mut da) };
        if rc != 0 {
            return Err(close(errno_err("ibv_query_device", rc)));
        }
        // SAFETY: `raw` is the byte view of the 16-byte GID union, always valid.
        let gid = unsafe { gid.raw };
        if gid == [0; 16] {
            return Err(close(FfiError(format!(
                "GID {gid_index} of {dev_name} port {port} is empty (RoCE: pick the index \
                 of an IPv4-mapped RoCE v2 GID, 1 on soft-RoCE over lo)"
            ))));
        }
        // SAFETY: ctx open.
        let pd = unsafe { sys::ibv_alloc_pd(ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| close(errno_err("ibv_alloc_pd", 0)))?;
        Ok(Arc::new(Device {
            ctx,
            pd,
            name: dev_name,
            port,
            gid_index,
            gid,
            lid: pa.lid,
            active_mtu: pa.active_mtu,
            max_rd_atomic: da.max_qp_init_rd_atom.clamp(0, 255) as u8,
            max_dest_rd_atomic: da.max_qp_rd_atom.clamp(0, 255) as u8,
            max_qp_wr: da.max_qp_wr.max(0) as u32,
            max_cqe: da.max_cqe.max(0) as u32,
            atomic_cap: da.atomic_cap,
        }))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: point 1: every PD/context user holds an Arc<Device>, so none is left.
        unsafe {
            sys::ibv_dealloc_pd(self.pd.as_ptr());
            sys::ibv_close_device(self.ctx.as_ptr());
        }
    }
}

/// Zeroed, page-aligned memory of `AtomicU64` words registered as one MR with
/// local write and remote READ/WRITE/atomic access.
pub struct MemRegion {
    mr: NonNull<sys::ibv_mr>,
    ptr: NonNull<AtomicU64>,
    layout: Layout,
    words: usize,
    _dev: Arc<Device>,
}

// SAFETY: the memory is only reached through `&[AtomicU64]` (point 3); the MR
// handle is only read (lkey/rkey) or destroyed in Drop.
unsafe impl Send for MemRegion {}
unsafe impl Sync for MemRegion {}

impl MemRegion {
    /// Allocates `bytes` (rounded up to a page) zeroed and registers them.
    /// Registration pins the pages, so the whole region is committed.
    pub fn new(dev: &Arc<Device>, bytes: u64) -> Result<Arc<MemRegion>, FfiError> {
        let len = bytes.max(8).next_multiple_of(4096);
        let len = usize::try_from(len).map_err(|_| FfiError("region too large".into()))?;
        let layout =
            Layout::from_size_align(len, 4096).map_err(|e| FfiError(format!("region: {e}")))?;
        // SAFETY: non-zero size; all-zero bytes are valid AtomicU64 values.
        let p = unsafe { alloc_zeroed(layout) } as *mut AtomicU64;
        let ptr = NonNull::new(p)
            .ok_or_else(|| FfiError(format!("out of memory allocating {len} bytes")))?;
        let access = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;
        // SAFETY: pd valid (point 1); [p, p+len) is our live allocation.
        let mr = unsafe { sys::ibv_reg_mr(dev.pd.as_ptr(), p.cast(), len, access.0 as i32) };
        let Some(mr) = NonNull::new(mr) else {
            let e = errno_err(&format!("ibv_reg_mr of {len} bytes"), 0);
            // SAFETY: allocated above with this layout, never registered.
            unsafe { dealloc(p.cast(), layout) };
            return Err(e);
        };
        Ok(Arc::new(MemRegion {
            mr,
            ptr,
            layout,
            words: len / 8,
            _dev: dev.clone(),
        }))
    }

    /// The region as atomic words (the only CPU access path, point 3).
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: ptr/words describe our live, initialised allocation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.words) }
    }

    /// Bytes registered (never 0).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.words as u64 * 8
    }

    /// Virtual address of the first byte (what a remote WR names).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: mr valid while self lives.
        unsafe { self.mr.as_ref().lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { self.mr.as_ref().rkey }
    }
}

impl Drop for MemRegion {
    fn drop(&mut self) {
        // SAFETY: point 2: every QP that could DMA here holds an Arc to us, so
        // all are destroyed; deregister first, then free.
        unsafe {
            sys::ibv_dereg_mr(self.mr.as_ptr());
            dealloc(self.ptr.as_ptr().cast(), self.layout);
        }
    }
}

impl Device {
    /// Bytes of device (on-chip) memory the NIC offers
    /// (`ibv_device_attr_ex.max_dm_size`; 0 on NICs without it, e.g. rxe).
    pub fn max_dm_size(&self) -> u64 {
        // SAFETY: ctx is open (point 1); the shim only reads attributes.
        unsafe { dm_shim_max_dm_size(self.ctx.as_ptr()) }
    }
}

/// Device (on-chip) memory: one `ibv_alloc_dm` allocation, zeroed, registered
/// zero-based with local write and remote READ/WRITE/atomic access (point 7).
pub struct DeviceMem {
    dm: NonNull<sys::ibv_dm>,
    mr: NonNull<sys::ibv_mr>,
    len: u64,
    _dev: Arc<Device>,
}

// SAFETY: the handles are only read (rkey) or destroyed in Drop; the memory
// is never mapped into this process.
unsafe impl Send for DeviceMem {}
unsafe impl Sync for DeviceMem {}

impl DeviceMem {
    /// Allocates `bytes` (rounded up to 64) of device memory, zeroes it and
    /// registers it. Errors: the NIC has less than that
    /// ([`Device::max_dm_size`]) or the allocation or registration fails.
    pub fn new(dev: &Arc<Device>, bytes: u64) -> Result<Arc<DeviceMem>, FfiError> {
        let len = bytes.max(64).next_multiple_of(64);
        let max = dev.max_dm_size();
        if len > max {
            return Err(FfiError(format!(
                "{} offers {max} bytes of device memory, {len} asked",
                dev.name
            )));
        }
        // SAFETY: ctx open (point 1).
        let dm = unsafe { dm_shim_alloc_dm(dev.ctx.as_ptr(), len) };
        let dm = NonNull::new(dm)
            .ok_or_else(|| errno_err(&format!("ibv_alloc_dm of {len} bytes"), 0))?;
        let free = |e: FfiError| {
            // SAFETY: allocated above, not registered, owned by nobody else.
            unsafe { dm_shim_free_dm(dm.as_ptr()) };
            e
        };
        let zeros = [0u8; 4096];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(zeros.len() as u64);
            // SAFETY: dm live; [off, off+n) inside it; `zeros` outlives the call.
            let rc = unsafe { dm_shim_memcpy_to_dm(dm.as_ptr(), off, zeros.as_ptr().cast(), n) };
            if rc != 0 {
                return Err(free(errno_err("ibv_memcpy_to_dm", rc)));
            }
            off += n;
        }
        // SAFETY: pd and dm live; len is the allocation's size.
        let mr = unsafe { dm_shim_reg_dm_mr(dev.pd.as_ptr(), dm.as_ptr(), len) };
        let mr = NonNull::new(mr)
            .ok_or_else(|| free(errno_err(&format!("ibv_reg_dm_mr of {len} bytes"), 0)))?;
        Ok(Arc::new(DeviceMem {
            dm,
            mr,
            len,
            _dev: dev.clone(),
        }))
    }

    /// The MR's rkey (remote addresses are offsets from 0).
    pub fn rkey(&self) -> u32 {
        // SAFETY: mr live while self is.
        unsafe { (*self.mr.as_ptr()).rkey }
    }

    /// Bytes allocated.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        // SAFETY: point 7: deregister first (late remote WRs then fail), then free.
        unsafe {
            sys::ibv_dereg_mr(self.mr.as_ptr());
            dm_shim_free_dm(self.dm.as_ptr());
        }
    }
}

/// A completion queue.
pub struct Cq {
    cq: NonNull<sys::ibv_cq>,
    dev: Arc<Device>,
}

// SAFETY: point 5.
unsafe impl Send for Cq {}
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
        }))
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
    }
}

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
    qp: NonNull<sys::ibv_qp>,
    max_inline: u32,
    wrs: Vec<sys::ibv_send_wr>,
    sges: Vec<sys::ibv_sge>,
    // Declared after `qp`, but `Drop` destroys the QP explicitly before these go.
    keep: Vec<Arc<MemRegion>>,
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

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: point 2: destroy the QP before `keep` (and the CQ) are released.
        unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
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

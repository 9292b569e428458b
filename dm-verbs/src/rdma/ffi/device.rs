//! [`Device`]: an opened RDMA device context, its one protection domain
//! (PD) and what the backend uses of its port (GID, LID, MTU, limits). The
//! safety argument (points 1-7) is in the parent module's docs.

use super::{errno_err, FfiError};
use ibverbs_sys as sys;
use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::Arc;

/// An opened RDMA device: its context, one PD, and what we use of its port.
pub struct Device {
    pub(super) ctx: NonNull<sys::ibv_context>,
    pub(super) pd: NonNull<sys::ibv_pd>,
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

// SAFETY: see the module docs, point 5: the context and PD handles have no
// thread affinity (libibverbs calls may come from any thread), `Device` owns
// both uniquely, and `Drop` releases them once (PD, then context) on whichever
// thread drops the last `Arc<Device>`.
unsafe impl Send for Device {}
// SAFETY: point 5: through `&Device` the handles are only passed to verbs calls
// rdma-core documents as thread safe (`ibv_create_cq`, `ibv_create_qp`,
// `ibv_reg_mr`, the device-memory shims, `ibv_query_device_ex` in
// `max_dm_size`); `ctx`/`pd` and the public fields are written only in `open`,
// before the `Device` is shared, and freed only in `Drop` (no `&Device` left).
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

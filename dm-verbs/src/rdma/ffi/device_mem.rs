//! [`DeviceMem`]: device (on-chip) memory of the NIC (Sherman §4.3 keeps its
//! lock table there), allocated and registered through `csrc/dm_shim.c`
//! (point 7 of the parent module's safety argument).

use super::{errno_err, Device, FfiError};
use ibverbs_sys as sys;
use std::ptr::NonNull;
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
// is never mapped into this process. `DeviceMem` owns both handles uniquely,
// neither is tied to a thread (point 5), and `_dev` keeps the context and PD
// open wherever it goes (point 1).
unsafe impl Send for DeviceMem {}
// SAFETY: `&DeviceMem` offers only `rkey` (a read of the `ibv_mr` field that
// `ibv_reg_dm_mr` wrote before the `DeviceMem` was shared) and `len`; the
// device memory is written only in `new` (zeroing, before it is shared) and
// is never mapped into this process, so no CPU access can race (point 7).
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

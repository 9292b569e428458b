//! [`MemRegion`]: host memory registered as one memory region (MR), seen by
//! the CPU only as atomic words (point 3 of the parent module's safety
//! argument).

use super::{errno_err, Device, FfiError};
use ibverbs_sys as sys;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Zeroed, page-aligned memory of `AtomicU64` words registered as one MR with
/// local write and remote READ/WRITE/atomic access.
pub struct MemRegion {
    mr: NonNull<sys::ibv_mr>,
    ptr: NonNull<AtomicU64>,
    layout: Layout,
    words: usize,
    _dev: Arc<Device>,
}

// SAFETY: `MemRegion` uniquely owns its allocation and its MR handle, neither
// tied to a thread (point 5); moving it moves that ownership, and `Drop`
// deregisters and frees on whichever thread drops the last `Arc<MemRegion>`.
// The `Device` it needs stays alive through `_dev` (point 1).
unsafe impl Send for MemRegion {}
// SAFETY: through `&MemRegion` the memory is reached only as `&[AtomicU64]`
// (`words`, point 3), so concurrent CPU accesses (and NIC DMA racing them) are
// atomic, never a data race on plain memory; the MR handle is only read
// (`lkey`/`rkey`, fields `ibv_reg_mr` wrote before the region was shared and
// nothing rewrites: it is never re-registered) and is destroyed only in `Drop`.
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

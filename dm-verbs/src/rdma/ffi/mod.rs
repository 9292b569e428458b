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
//!    providers lock the CQ internally. Hence the wrappers' `Send`/`Sync` impls.
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
//!
//! ## Files
//! One per verbs object: [`Device`] (context, PD, port; `device.rs`),
//! [`MemRegion`] (`mr.rs`), [`DeviceMem`] (`device_mem.rs`), [`Cq`] and its
//! [`Wc`]s (`cq.rs`), [`Qp`] creation and connection (`qp.rs`), and the WRs
//! posted to a QP (`post.rs`). This file holds what they share: [`FfiError`].

mod cq;
mod device;
mod device_mem;
mod mr;
mod post;
mod qp;

pub use cq::{is_remote_access_error, wc_status_name, Cq, Wc};
pub use device::Device;
pub use device_mem::DeviceMem;
pub use mr::MemRegion;
pub use post::{Local, SendOp, SendWr, Src};
pub use qp::{Endpoint, Qp, QpCaps, RcTimers};

use std::fmt;

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

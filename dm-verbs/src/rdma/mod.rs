//! `rdma`: real RDMA verbs through rdma-core (cargo feature `rdma`).
//!
//! A compute-server process builds an [`RdmaFabric`] from the TCP addresses of
//! `dm-memserver` processes (MS id = position in the list). Each core then
//! opens its [`RdmaQueues`]: one CQ, one registered staging MR, and one RC QP
//! per memory server, each QP connected by a TCP handshake ([`wire`]) that
//! exchanges QP number, PSN, LID, GID and the server's region address, rkey,
//! length and chunk size. The TCP connection stays open for the QP's lifetime:
//! the memory server frees the QP when it closes, and a client notices a dead
//! memory server by its EOF.
//!
//! ## Data path
//! - **One doorbell per post list.** [`Queues::post_list`] turns its WRs into one
//!   chained `ibv_send_wr` list and calls `ibv_post_send` once. Only the last WR
//!   of the list is signalled: RC completes a send queue in order, so the
//!   completion of WR `n` means every earlier WR of that QP completed, and the
//!   backend synthesizes their completions (each posted WR's native `wr_id` is a
//!   per-QP sequence number; a completion with sequence `s` retires every
//!   outstanding WR up to `s`).
//! - **Buffers.** READ results and atomic old values land in a per-core staging
//!   MR (power-of-two size classes, 64 B up; default 32 MiB) and are copied out
//!   on completion. WRITEs of at most `max_inline_data` bytes (asked: 128) are
//!   posted inline; larger ones are copied into staging first. A WR that cannot
//!   get a buffer, SQ slot or RPC credit now waits in a per-QP backlog (order
//!   kept) until completions free them; one longer than the staging MR fails
//!   with `OutOfBounds`.
//! - **RPCs** are SEND/RECV: request `[wr_id, handler id, payload]`, reply
//!   `[wr_id, status, body]` by SEND from the memory server into one of the
//!   QP's pre-posted receive slots. A client has at most as many RPCs in
//!   flight per QP as the server has receive slots (credits), so no SEND ever
//!   meets an empty receive queue.
//! - **Local checks first.** Bounds (against the region length the server
//!   reported), alignment of atomics and masked CAS (unsupported: rxe has no
//!   masked atomics and ConnectX's need vendor verbs) are rejected with their
//!   typed error before anything is posted, as on `loopback`.
//!
//! ## Errors
//! A WR that completes in error retires the WRs before it normally, fails
//! itself with [`VerbError::OutOfBounds`] (remote access error: wrong rkey or
//! address) or [`VerbError::QpError`] (anything else: retry exceeded, flush,
//! ...), and breaks the QP: the QP is destroyed at once (so no DMA can reach a
//! freed buffer), every other outstanding WR, waiting RPC and backlogged WR
//! fails with `QpError`, and every later `post_list` to that MS completes at
//! once with `QpError`. Nothing is retried. A memory server whose TCP
//! connection closes (process killed) breaks the QP the same way, which also
//! covers RPCs whose SEND was acknowledged but whose reply will never come.
//!
//! ## Capabilities
//! `masked_cas: false` (ConnectX's masked atomics are vendor verbs, not
//! wired). `device_memory_bytes`: the smallest device-memory size the memory
//! servers offer (0 if any offers none). A `dm-memserver` allocates its
//! `--device-kib` with `ibv_alloc_dm` when the NIC has that much on-chip
//! memory (`max_dm_size`; ConnectX-5 and later) and registers it zero-based;
//! its welcome carries the size and the MR's rkey, and a device address
//! ([`GlobalAddr::device`]) goes out as that offset under that rkey. rxe has
//! none: the capability is absent, so indexes keep their locks in host
//! memory (`LockTableConfig::for_caps`). Device memory is reached by
//! one-sided verbs only (RPC handlers on the MS see host memory).
//!
//! ## Unsafe code
//! All of it is in [`ffi`], with its safety argument in that module's docs.
//!
//! ## Files
//! - `config.rs`: [`RdmaConfig`] (device, QP depths, timers) and
//!   [`parse_ms_list`].
//! - `fabric.rs`: [`RdmaFabric`], the [`Fabric`](crate::Fabric) impl, and
//!   opening one core's CQ, staging MR and QPs; `handshake.rs`: the client
//!   side of the TCP handshake ([`wire`] is its message format).
//! - `state.rs`: [`RdmaQueues`]' per-QP state; `stage.rs`: the staging MR's
//!   buffer allocator.
//! - `post.rs`: turning WRs into post lists (local checks, backlog, one
//!   doorbell); `completion.rs`: retiring WRs from CQ entries and breaking
//!   QPs; `queues.rs`: the [`Queues`](crate::Queues) impl over both.
//! - [`server`]: the memory-server side (`dm-memserver`).
//!
//! [`Queues::post_list`]: crate::Queues::post_list
//! [`VerbError::OutOfBounds`]: crate::VerbError::OutOfBounds
//! [`VerbError::QpError`]: crate::VerbError::QpError
//! [`GlobalAddr::device`]: crate::GlobalAddr::device

mod completion;
mod config;
mod fabric;
mod handshake;
mod post;
mod queues;
mod stage;
mod state;

pub mod ffi;
pub mod server;
pub mod wire;

pub use config::{parse_ms_list, RdmaConfig};
pub use fabric::RdmaFabric;
pub use state::RdmaQueues;

use std::fmt;

/// A setup failure of the `rdma` backend (device, handshake, address list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaError(pub String);

impl fmt::Display for RdmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RdmaError {}

impl From<ffi::FfiError> for RdmaError {
    fn from(e: ffi::FfiError) -> Self {
        RdmaError(e.0)
    }
}

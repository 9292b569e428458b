//! # dm-verbs: the disaggregated-memory fabric
//!
//! What a compute server (CS) needs to reach memory servers (MS): global
//! addresses, one-sided verbs (READ, WRITE, CAS, FAA, optional masked CAS),
//! two-sided RPCs to MS cores, queue pairs (QP) and completion queues (CQ).
//! Nothing above this crate knows which backend it runs on.
//!
//! ## What lives where
//! | module | what |
//! |---|---|
//! | [`addr`] | [`GlobalAddr`]: 16-bit MS id + 48-bit offset, host or device memory (Sherman §4.2) |
//! | [`verb`] | [`Verb`], [`WorkRequest`], [`Completion`], [`VerbStats`] accounting |
//! | [`error`] | [`VerbError`], the typed failures of a verb |
//! | [`fabric`] | the [`Fabric`] and [`Queues`] traits, [`Caps`], [`Clock`], [`CpuCost`] |
//! | [`ms`] | memory-server config, superblock and chunk allocator, RPC registry, bounds checks; [`ms::superblock`]: who owns which superblock bytes |
//! | [`sim`] | deterministic discrete-event backend in virtual ns: network model, fault injection (torn READs, delays, broken QPs), WR recording |
//! | [`loopback`] | real threads on shared process memory, wall-clock ns; measures real CPU cost |
//! | `rdma` (feature `rdma`) | real verbs through rdma-core; every `unsafe` line in `rdma/ffi/`; `rdma::server` is the `dm-memserver` side |
//!
//! ## Semantics every backend gives
//! - WRs on one QP (one CS core to one MS) execute in posting order.
//! - CAS/FAA are atomic against each other on aligned 8-byte words.
//! - A READ or WRITE longer than 8 bytes is **not** atomic: a READ that overlaps
//!   a concurrent WRITE may return any mix of old and new 8-byte words (sim shows
//!   this; see [`sim::TearGranularity`]). Indexes validate what they read.
//! - A broken QP completes every WR with [`VerbError::QpError`]; nothing hangs.
//! - An index must work with any [`Caps`] (masked CAS and device memory are
//!   optional) and must not branch on [`FabricKind`].
//!
//! ## How to use it
//! Build a fabric ([`sim::SimFabric::new`], [`loopback::LoopbackFabric::new`]
//! or `rdma::RdmaFabric::connect`), open one [`Queues`] per CS core with
//! [`Fabric::open_queues`], hand each QP a post list with
//! [`Queues::post_list`] (one doorbell) and collect [`Completion`]s with
//! [`Queues::poll_cq`]. In practice dm-runtime does this for its tasks; the
//! sim is driven by its `SimRuntime`, which asks
//! [`sim::SimFabric::next_core`] which core runs next.
//!
//! ## References
//! `docs/simulator.md` (the sim's model, every parameter's source, its
//! calibration against Sherman Table 1), `docs/rdma.md` (running on
//! soft-RoCE or ConnectX), `docs/experiments/fabric.md` (simulator speed).

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod addr;
pub mod buf;
pub mod error;
pub mod fabric;
pub mod loopback;
pub mod ms;
#[cfg(feature = "rdma")]
pub mod rdma;
pub mod sim;
pub mod verb;

pub use addr::GlobalAddr;
pub use error::VerbError;
pub use fabric::{Capability, Caps, Clock, CpuCost, Fabric, FabricKind, Queues};
pub use ms::{MsConfig, MsMemory, RpcHandler};
pub use verb::{Completion, Verb, VerbKind, VerbOutput, VerbStats, WorkRequest};

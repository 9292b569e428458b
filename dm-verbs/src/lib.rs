//! # dm-verbs: the disaggregated-memory fabric
//!
//! What a compute server (CS) needs to reach memory servers (MS): global
//! addresses, one-sided verbs (READ, WRITE, CAS, FAA, optional masked CAS),
//! two-sided RPCs to MS cores, queue pairs (QP) and completion queues (CQ).
//! Nothing above this crate knows which backend it runs on.
//!
//! ## What lives where
//! - [`addr`]: [`GlobalAddr`], 16-bit MS id + 48-bit offset (Sherman §4.2).
//! - [`verb`]: [`Verb`], [`WorkRequest`], [`Completion`], [`VerbStats`] accounting.
//! - [`error`]: [`VerbError`], the typed failures of a verb.
//! - [`fabric`]: the [`Fabric`] and [`Queues`] traits, [`Caps`], [`CpuCost`].
//! - [`ms`]: memory-server config, superblock and chunk allocator, RPC registry.
//! - [`sim`]: deterministic discrete-event backend in virtual ns, with a network
//!   model and fault injection (torn READs, delays, broken QPs).
//! - [`loopback`]: real threads on shared process memory, wall-clock ns.
//! - `rdma` (cargo feature `rdma`): real verbs through rdma-core; the
//!   `dm-memserver` binary of dm-bench serves memory servers over it.
//!
//! ## Semantics every backend gives
//! - WRs on one QP (one CS core to one MS) execute in posting order.
//! - CAS/FAA are atomic against each other on aligned 8-byte words.
//! - A READ or WRITE longer than 8 bytes is **not** atomic: a READ that overlaps
//!   a concurrent WRITE may return any mix of old and new 8-byte words (sim shows
//!   this; see [`sim::TearGranularity`]). Indexes validate what they read.
//! - A broken QP completes every WR with [`VerbError::QpError`]; nothing hangs.

pub mod addr;
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

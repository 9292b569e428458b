//! # dm-index: the workspace as a library
//!
//! One async index API over every index and rung the workspace builds
//! (FG+ and the Sherman rungs, the NAM designs, DEX, the ART rungs, SMART,
//! Dolphin), a cluster that knows how to set them up, and a client handle
//! that any thread or executor can call. The guide for services is
//! `docs/guide.md`.
//!
//! ## What lives where
//! | module | what |
//! |---|---|
//! | [`kind`] | [`IndexKind`]: every index by its paper's name; [`KeyRule`]: each one's key widths, in one table |
//! | [`config`] | [`IndexConfig`]: what a service chooses (kind, key width, node size, cache); the rest is derived from the fabric |
//! | [`error`] | [`Error`]: the one error type (key length, out of MS memory, verb/QP failure, corrupt node, lock stuck, not owner, bad config, catalog, queue full, shut down) |
//! | [`index`] | [`Instance`] (one index in this process: its per-CS caches, lock tables and counters) and [`Index`] (a core's handle: `get`, `insert`, `update`, `remove`, `scan`, `scan_into` (into a reused [`ScanBuf`], no allocation per entry), `range`) |
//! | [`stats`] | [`IndexStats`]: operations, verbs and cache of one index (per instance, per-core shards) |
//! | [`cluster`] | [`Cluster`] and its builder: fabric, compute servers, core threads; create and open indexes by name (the catalog on MS 0); with [`ClusterBuilder::lease`] the CSs are members whose dead holders' locks are taken over (issue 33) |
//! | `membership` | the members of a cluster's CSs and the heartbeat thread that renews them (`dm_runtime::lock::member`) |
//! | [`access`] | a family's own parts for tools: resolved configurations, each CS's caches and tables, bulk loading |
//! | [`client`] | [`Client`]: `Clone + Send + Sync`; routes each request to a core and returns a future any executor awaits, or waits (`*_blocking`) |
//!
//! ## Use
//! ```no_run
//! use dm_index::{Cluster, FabricSpec, IndexConfig, IndexKind};
//! let cluster = Cluster::builder()
//!     .fabric(FabricSpec::Loopback(Default::default()))
//!     .cores_per_cs(1)
//!     .build()?;
//! let users = cluster.create_index("users", IndexConfig::new(IndexKind::Smart))?;
//! users.insert_blocking(&42u64.to_be_bytes(), 7)?;
//! assert_eq!(users.get_blocking(&42u64.to_be_bytes())?, Some(7));
//! let stats = cluster.shutdown();
//! # Ok::<(), dm_index::Error>(())
//! ```
//! From async code, `users.get(&key).await` on any executor.
//!
//! ## Invariants
//! - **A core's handle stays on its core.** [`Index`] holds verb futures'
//!   state and is `!Send`; [`Client`] reaches it by submitting to the core.
//! - **`(cs, core)` names a lock holder**: each process runs distinct
//!   compute-server ids ([`ClusterBuilder::compute_servers`]).
//! - **Nothing here writes a fixed superblock offset**: every index's root
//!   words live in the root area its catalog entry was given.
//! - **Statistics are per instance**: [`Instance::stats`] counts one
//!   index's operations in this process; there are no process-wide
//!   counters in this crate.
//!
//! ## Sources
//! The indexes are the papers' (see each crate's docs: `dm_tree`,
//! `dm_art`); the submission path follows tokio's `Handle` and embassy's
//! `SendSpawner`; the parked core follows glommio/monoio.

#![forbid(unsafe_code)]

pub mod access;
pub mod client;
pub mod cluster;
pub mod config;
pub mod error;
pub mod index;
pub mod kind;
mod membership;
pub mod stats;

pub use client::{Client, Entries};
pub use cluster::{
    check_ms, register_handlers, Cluster, ClusterBuilder, ClusterStats, FabricSpec, MAX_CORES,
    MAX_SIM_CORES,
};
pub use config::{CsOverride, IndexConfig, Root, Site, MAX_RDWC_ENTRIES};
pub use dm_runtime::lock::LeaseConfig;
pub use dm_runtime::service::ServiceConfig;
pub use dm_runtime::ScanBuf;
pub use error::Error;
pub use index::{Handle, Index, Instance};
pub use kind::{Family, IndexKind, KeyRule};
pub use stats::IndexStats;

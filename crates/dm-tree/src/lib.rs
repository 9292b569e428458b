//! # dm-tree: the B+tree family on disaggregated memory
//!
//! Status: scaffold. The foundation (issue 2) provides the fabric
//! ([`dm_verbs`]) and the runtime ([`dm_runtime`]) this crate builds on; the
//! trees land with their issues. What will live here, one module per design and
//! one file per operation (search, insert, split, remove, scan), as the
//! workspace's `ARCHITECTURE.md` lays out:
//!
//! - `node`: the B-link node layout (1 KB default: level, count, fence keys
//!   `[low, high)`, sibling pointer, lock/version word, sorted entries), written
//!   down byte by byte, with validation that never accepts a torn node.
//! - `fg`: the fine-grained one-sided tree (Ziegler et al. §4-5) and FG+ (Sherman §5).
//! - `sherman`: command combination, hierarchical on-chip lock, two-level
//!   versions, index cache (Sherman §4), as switches over the same code path.
//! - `dex`: logical partitioning, path-aware caching, cost-aware offloading (DEX §4-6).
//! - `nam`: coarse-grained (RPC) and hybrid designs (Ziegler et al. §4).
//!
//! Every tree implements one async API (`get`, `insert`, `update`, `remove`,
//! `scan`, `bulk_load`) over any [`dm_verbs::Fabric`].

/// The default node size of the B+tree family in bytes (Sherman §5, FG+: 1 KB).
pub const DEFAULT_NODE_BYTES: usize = 1024;

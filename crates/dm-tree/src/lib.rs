//! # dm-tree: the B+tree family on disaggregated memory
//!
//! Now: the fine-grained one-sided B-link tree (FG, Ziegler et al. §4-5) with
//! FG+'s locking as Sherman §5 describes it: nodes spread over the MSs, lock-free
//! reads validated by a node checksum, an RDMA CAS lock per node for writers,
//! write-back of the whole node, release by WRITE.
//!
//! ## What lives where
//! - [`node`]: the byte layout, fences, checksum validation (why a checksum: see there).
//! - [`tree`]: [`FgTree`], configuration, errors, locking and the root pointer.
//! - `search`: traversal to the node covering a key at a level; `get`.
//! - `insert`: upsert and update, node splits, parent insertion, root growth.
//! - `remove`: delete without merge (nodes stay in place).
//! - `scan`: ordered range scan across leaves via sibling pointers.
//! - `bulk`: `bulk_load` from sorted input at a fill factor (default 80%).
//!
//! - [`cache`]: the CS index cache of leaf parents (FG+), safe when stale.
//!
//! Still to come (issue 3 and later):
//! Sherman's techniques, DEX and the NAM designs (see the issues).

mod bulk;
pub mod cache;
mod insert;
pub mod node;
mod remove;
mod scan;
mod search;
pub mod tree;

pub use cache::{CacheStats, IndexCache};
pub use tree::{FgTree, TreeConfig, TreeError};

/// The default node size of the B+tree family in bytes (Sherman §5, FG+: 1 KB).
pub const DEFAULT_NODE_BYTES: usize = 1024;

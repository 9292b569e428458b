//! # dm-tree: the B+tree family on disaggregated memory
//!
//! Now: the fine-grained one-sided B-link tree (FG, Ziegler et al. §4-5) with
//! FG+'s locking as Sherman §5 describes it: nodes spread over the MSs, lock-free
//! reads validated by a node checksum, an RDMA CAS lock per node for writers,
//! write-back of the whole node, release by WRITE.
//!
//! ## What lives where
//! - [`node`]: the byte layout, fences, checksum validation (why a checksum: see there).
//! - [`two_level`]: Sherman's unsorted leaves with two-level versions (§4.4),
//!   made sound under torn READs: header checksum plus a check word per slot.
//! - [`tree`]: [`FgTree`], configuration, errors and the root pointer.
//! - [`lock`]: node locks and release: FG+, and Sherman's ladder (command
//!   combination, global lock table, hierarchical lock) as switches.
//! - `search`: traversal to the node covering a key at a level; `get`.
//! - `insert`: upsert and update, node splits, parent insertion, root growth.
//! - `remove`: delete without merge (nodes stay in place).
//! - `scan`: ordered range scan across leaves via sibling pointers, the
//!   leaves READ in parallel when the cached leaf parent names them (Sherman §4.2).
//! - `bulk`: `bulk_load` from sorted input at a fill factor (default 80%).
//! - [`head`]: head nodes on the leaf level for scan prefetching (Ziegler et
//!   al. §4-5) and their maintenance pass.
//!
//! - [`cache`]: the CS index cache (Sherman §4.1): leaf parents within a byte
//!   budget, plus the highest two levels; safe when stale.
//! - [`dex`]: DEX (Lu et al. 2024): partitions, the CS cache, offloading
//!   and its MS handler, placement, bulk load, repartitioning.
//! - [`nam`]: Ziegler et al.'s coarse-grained (one RPC per operation) and
//!   hybrid (upper levels by RPC, leaves one-sided) designs as
//!   [`TreeConfig::design`] switches: partitioning ([`NamConfig`]), the CS
//!   side (`nam/rpc.rs`) and the MS side's per-partition trees and RPC
//!   handler ([`nam::ms`]).
//!
//! ## Using it
//! Create the tree once ([`FgTree::create`] or [`FgTree::bulk_load`]) from one
//! core, then [`FgTree::open`] a handle on every core that uses it (handles
//! carve their own chunks), optionally sharing one [`IndexCache`] per CS with
//! [`FgTree::with_cache`]. Every operation is an `async fn` to run on
//! dm-runtime: `get`, `insert` (upsert), `update` (only if present), `remove`,
//! `scan(from, count)` (ascending, `count` entries at most).
//!
//! ## Keys, values and errors
//! - **Keys** are byte strings of exactly `TreeConfig::key_bytes` (1..=32;
//!   8 by default, u64 keys as big-endian bytes so byte order is numeric
//!   order), compared lexicographically. Shorter string keys are padded by the
//!   caller (dm-bench pads with zero bytes). No key value is reserved: fences
//!   mark -inf/+inf with flags, so the all-zero and all-0xff keys are ordinary
//!   keys. Any other length is [`TreeError::KeyLength`].
//! - **Values** are 8 bytes (`u64`), as in FG and Sherman, where a value is
//!   typically the address of a record kept elsewhere; the type makes a value
//!   of the wrong size unrepresentable, so there is no runtime check to fail.
//! - **MS out of memory** (no chunk left for the new node of a leaf split) is
//!   `TreeError::Verb(VerbError::MsOutOfMemory)` and means the key was *not*
//!   inserted: the new node is allocated before anything is written, and the
//!   leaf is unlocked unchanged. Once a leaf split is published, the insert has
//!   taken effect; if an upper level then cannot get memory for its own split
//!   or for root growth, its separator stays out (the B-link sibling chain
//!   still reaches the new node, one more hop) and the insert returns `Ok`.
//!   Tested in `tests/fg.rs` (`bad_input_and_exhausted_memory_are_errors`).
//! - A failed verb (QP in error state, bad address) is `TreeError::Verb`; a
//!   node that never validates (a writer died mid-write-back) is
//!   [`TreeError::Corrupt`]; an impossible configuration is
//!   [`TreeError::BadConfig`]. No input panics.
//!
//! Sherman (issue 5) so far: command combination, the global lock table, the
//! hierarchical lock and two-level versions with unsorted leaves as
//! [`Techniques`] switches (`Techniques::SHERMAN` has them all); the index
//! cache with both of Sherman's node types and parallel scan READs serve every
//! rung. The NAM designs (issue 7) are [`Design::Coarse`] and
//! [`Design::Hybrid`]. DEX (issue 7) is [`dex`]: logical partitioning, the
//! path-aware cache of inner and leaf nodes and cost-aware offloading over
//! the same remote B-link tree ([`DexTree`], [`DexCluster`]).

mod bulk;
pub mod cache;
pub mod dex;
pub mod head;
mod insert;
pub mod lock;
pub mod nam;
pub mod node;
mod remove;
mod scan;
mod search;
pub mod tree;
pub mod two_level;

pub use cache::{CacheStats, IndexCache};
pub use dex::{DexCluster, DexConfig, DexStats, DexTree};
pub use head::HeadPass;
pub use lock::{lock_takeovers, LockTableConfig, NodeLocks, Techniques};
pub use nam::{Design, NamConfig};
pub use tree::{FgTree, TreeConfig, TreeError};

/// The default node size of the B+tree family in bytes (Sherman §5, FG+: 1 KB).
pub const DEFAULT_NODE_BYTES: usize = 1024;

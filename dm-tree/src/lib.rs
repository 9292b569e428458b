//! # dm-tree: the B+tree family on disaggregated memory
//!
//! Range indexes (byte keys, `u64` values) whose nodes live on memory servers
//! (MSs) and are reached from compute servers (CSs) with one-sided RDMA verbs
//! through dm-runtime: the fine-grained B-link tree FG (Ziegler et al.
//! SIGMOD'19 §4-5) with FG+'s locking (Sherman §5), Sherman's techniques over
//! it (SIGMOD'22 §4, Fig. 5), Ziegler et al.'s coarse-grained and hybrid NAM
//! designs (§3, §5), and DEX (PVLDB'24 §4-6) over the same node layout.
//!
//! ## What lives where
//! | module | what | paper |
//! |---|---|---|
//! | [`node`] | node byte layout, fences; `node/codec.rs`: encode, checksum-validated decode | FG §4-5, Sherman §5 |
//! | `node_read.rs` | [`NodeRead`]: a node READ validated by its checksum, or DEX's Sherman baseline's optimistic read (3 READs; its writers READ the locked node once and the version before a release that does not hand over); [`ShermanCache`]: a stale cache entry left by moving right, or as the published Sherman code does (from the root) | DEX §2.2, §8.1; Sherman §4.1 |
//! | [`two_level`] | unsorted leaves with two-level versions, sound under torn READs | Sherman §4.4 |
//! | [`tree`] | [`FgTree`] (one core's handle), [`TreeConfig`], [`TreeError`], root pointer, node READ, lock and release | FG §4 |
//! | `covering.rs` | locking the node covering a key: lock, one READ under the lock, B-link moves right (or, from a stale cache entry under [`ShermanCache::Authors`], a restart) | FG §4.2, Sherman §4.1 |
//! | `techniques.rs` | [`Techniques`]: Sherman's ladder as switches (lock techniques plus two-level versions) | Sherman §4, Fig. 5 |
//! | `search.rs` | traversal to the node covering a key at a level; `get` | FG §5.1 |
//! | `insert.rs` | upsert, update, node splits, parent insertion, root growth | FG §5.2 |
//! | `remove.rs` | delete without merge (nodes stay in place) | |
//! | `scan.rs` | range scan along the leaf chain, leaves READ in parallel and read in place (`node::View`, no decode) | FG §5.3, Sherman §4.2 |
//! | `bulk.rs` | `bulk_load` from sorted input at a fill factor (default 80%) | Sherman §5 |
//! | [`head`] | head nodes on the leaf level for scan prefetching, their maintenance pass | FG §4-5 |
//! | [`cache`] | the CS index cache: leaf parents in a byte budget plus the top two levels | Sherman §4.1 |
//! | `keys8.rs` | a cached node's 8-byte keys laid out for a two-line search (samples, then one block), for the index cache's leaf parents and DEX's frames | |
//! | [`nam`] | coarse-grained and hybrid designs as [`TreeConfig::design`] switches: partitioning ([`NamConfig`]), CS side (`nam/rpc.rs`), MS side ([`nam::ms`]) | FG §3, §5 |
//! | [`dex`] | DEX ([`DexTree`], [`DexCluster`]): partitions, the CS cache of inner and leaf nodes, offloading and its MS handler; its module doc maps `dex/` | DEX §4-6 |
//!
//! Node locks (FG+'s lock word, command combination, the global lock table,
//! the hierarchical lock, the own-tag ledger) are [`dm_runtime::lock`]; the
//! node checksum is [`dm_runtime::checksum`].
//!
//! ## Invariants
//! - Every node image a reader acts on validated by its checksum (an unsorted
//!   leaf: header checksum and a check word per slot); a torn READ is read
//!   again, a node that never validates is [`TreeError::Corrupt`].
//! - Nodes are never merged or freed and a split only lowers a node's high
//!   fence, so every pointer a reader holds stays valid: a stale cache entry
//!   or parent costs a B-link move right, never a wrong result.
//! - A split writes the new right node before the left one (B-link order).
//!   A shared node changes only under its lock (the lock word is outside the
//!   checksum); DEX's leaves belong to one CS's partition instead, the NAM
//!   MS-side trees to the MS's serialised handlers.
//! - `(cs, core)` is unique per handle: it is the lock tag,
//!   `(cs << 16 | core) + 1` (with the CS's incarnation and a take count
//!   above bit 32 once it joined a membership: `dm_runtime::lock::member`),
//!   so at most one thread may run handles of a given
//!   pair at a time (the own-tag ledger of [`dm_runtime::lock`] relies on it).
//!
//! ## A compute server that dies (issue 33)
//! With every CS joined to the membership table ([`FgTree::with_member`],
//! `dm_index::Instance::join`; `dm_runtime::lock::member` has the protocol
//! and the clock assumptions), a lock whose holder died is taken over by
//! the next CS that wants it, one lease after its heartbeat stopped (or at
//! once after a lease if the holder's CS restarted with a new incarnation).
//! What the dead holder may have left, and why a taker needs no repair:
//! - **A posted WRITE lands whole.** The fabric executes a WR posted before
//!   the death (the `sim` cut falls between verbs); a node image is
//!   therefore the old one or the new one. On real NICs a WRITE the NIC had
//!   only partly placed when the QP was torn down would leave a node whose
//!   checksum (or, in Sherman's unsorted leaves, a slot whose check word)
//!   does not validate: readers and the taker READ it again and never act
//!   on it, and the taker then gets [`TreeError::Corrupt`] instead of a
//!   wrong answer; rebuilding such a node is not implemented (no backend
//!   here produces one).
//! - **A split cut between its WRITEs** (the new right node written, the
//!   left node not) leaves an unreachable node: leaked memory, no change
//!   to the tree. Cut after the left node was written and before the
//!   parent was updated, it leaves the state every B-link reader already
//!   handles (Lehman & Yao): the separator is missing above, readers move
//!   right along the sibling pointer. Nothing rolls the parent forward:
//!   lookups of that range keep paying the move right (DEX's cached
//!   traversal cannot move right, so its lease mode inserts such a
//!   separator: [`dex`], "A compute server that dies").
//! - **A write-back cut before its unlock** (command combination posts both
//!   in one doorbell, §4.5; FG+ completes the write-back first) leaves the
//!   new image under a taken lock: the taker READs it under the lock as the
//!   current node. A two-level leaf entry (§4.4) is one WRITE with its own
//!   versions: present whole or not at all.
//! - **HOCL's local queue** dies with its CS: nothing of it is remote.
//!
//! `dm-bench check --faults crash` kills a CS at random verb boundaries
//! and restarts it; the recovery times it measured are in
//! `docs/experiments/recovery.md`.
//!
//! ## Using it
//! Create the tree once ([`FgTree::create`] or [`FgTree::bulk_load`]) from one
//! core, then [`FgTree::open`] a handle on every core that uses it (handles
//! carve their own chunks), optionally sharing one [`IndexCache`] per CS with
//! [`FgTree::with_cache`] and one local lock table per CS with
//! [`FgTree::with_local_locks`] (the hierarchical lock), and one lock counter
//! set per index with [`FgTree::with_lock_counters`] (per-index
//! [`dm_runtime::lock::LockStats`]). Every operation is an
//! `async fn` to run on dm-runtime: `get`, `insert` (upsert), `update` (only
//! if present), `remove`, `scan(from, count)` (ascending, `count` entries at
//! most). DEX: one [`DexCluster`] per process, [`DexTree::open`] per core.
//!
//! ## Keys, values and errors
//! - **Keys** are byte strings of exactly `TreeConfig::key_bytes` (1..=32;
//!   8 by default, u64 keys big-endian), compared lexicographically; shorter
//!   keys are padded by the caller. No key is reserved (fences mark -inf/+inf
//!   with flags). Any other length is [`TreeError::KeyLength`].
//! - **Values** are 8 bytes (`u64`), as in FG and Sherman.
//! - **MS out of memory** for the new node of a leaf split is
//!   `TreeError::Verb(VerbError::MsOutOfMemory)`: the key was *not* inserted
//!   (the leaf is unlocked unchanged). Once a leaf split is published the
//!   insert took effect; an upper level without memory leaves its separator
//!   out (the sibling chain still reaches the new node) and returns `Ok`
//!   (`tests/fg.rs`, `bad_input_and_exhausted_memory_are_errors`).
//! - A failed verb is `TreeError::Verb`; an impossible configuration is
//!   [`TreeError::BadConfig`]. No input panics.
//!
//! Records of runs (DEX races found by `dm-bench check`):
//! `docs/experiments/tree.md`; figures: `docs/experiments/sherman.md`,
//! `docs/experiments/nam.md`.

#![forbid(unsafe_code)]

mod bulk;
pub mod cache;
mod covering;
pub mod dex;
pub mod head;
mod insert;
mod keys8;
pub mod nam;
pub mod node;
mod node_read;
mod remove;
mod scan;
mod search;
mod techniques;
pub mod tree;
pub mod two_level;

pub use cache::{CacheStats, IndexCache};
pub use dex::{DexCluster, DexConfig, DexStats, DexTree};
pub use dm_runtime::lock::LockTableConfig;
pub use head::HeadPass;
pub use nam::{Design, NamConfig};
pub use node::DEFAULT_NODE_BYTES;
pub use node_read::{NodeRead, ShermanCache};
pub use techniques::Techniques;
pub use tree::{FgTree, TreeConfig, TreeError};

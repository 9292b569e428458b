//! # dm-art: the radix-tree family on disaggregated memory
//!
//! Status: SMART's remote layout and its core tree ([`SmartTree`]: get,
//! upsert, update, remove, ordered scan; lock-free internal nodes, rear-locked
//! in-place leaves, checksum-validated READs), its ART cache with the
//! (sound) reverse check, read delegation with write combining (sound
//! versions), and the DM-ported ART baseline with SMART's technique ladder as
//! switches ([`Techniques`], SMART §5.1.3, §5.3.1) run on every fabric;
//! Dolphin ([`DolphinTree`]) over the same internal nodes. What lives here:
//!
//! - [`layout`]: 8-byte slots (partial key, leaf bit, node type or leaf size,
//!   48-bit address) changed by one CAS; adaptive internal nodes with reverse
//!   pointers and compressed prefixes; leaves with checksum and a rear lock
//!   word taken by plain CAS (SMART §4.1.1), byte by byte in its docs.
//! - [`keys`]: keys as radix paths: fixed-length (8-byte integers) or
//!   variable-length with a length byte, order-preserving.
//! - [`tree`]: [`SmartTree`], [`SmartConfig`], [`ArtError`], validated READs
//!   of nodes and leaves, the header-depth rule of header splits.
//! - [`cache`]: [`ArtCache`], the per-CS local radix tree of internal-node
//!   snapshots (SMART §4.3), its budget and FIFO eviction, and why a passed
//!   reverse check is not trusted for negative answers.
//! - `search`: `get` (Algorithm 1) and the walk helpers around the cache
//!   (reverse check, confirmation of negative answers, cache fill).
//! - `insert`: `insert` (upsert), `update`, `remove` (Algorithm 2, Fig. 8:
//!   normal insert, leaf split, header split, type switch, in-place update
//!   under the rear lock); the invariants that make them lock-free and sound.
//! - `scan`: ordered, count-bounded range scan (Algorithm 4).
//! - [`rdwc`]: [`Rdwc`], the per-CS hash-based local lock table of read
//!   delegation and write combining (SMART §4.2), each a switch, and why
//!   followers are served only by operations that started after them.
//! - [`baseline`]: [`Techniques`], the switches of SMART's ladder (Fig. 18:
//!   lock-free internal nodes, in-place leaves, rear-embedded lock); with all
//!   off, the DM-ported ART baseline (SMART §5.1.3): ROWEX node locks in
//!   Sherman's hierarchical lock table ([`baseline::HOCL`]) and RCU leaf
//!   updates; why the baseline keeps SMART's homogeneous node layout.
//! - [`dolphin`]: [`DolphinTree`], ART internal nodes over B+tree-style
//!   leaves of one 7-byte prefix each, special nodes, the FAA-only Spear
//!   lock, 2-round-trip updates (Dolphin §III), and where soundness under
//!   torn READs departs from the paper (its module docs).
//!
//! Every tree implements the workspace's one async index API over any
//! [`dm_verbs::Fabric`].

pub mod baseline;
pub mod cache;
pub mod dolphin;
mod insert;
pub mod keys;
pub mod layout;
pub mod rdwc;
mod scan;
mod search;
pub mod tree;

pub use baseline::Techniques;
pub use cache::{ArtCache, CacheStats};
pub use dolphin::{DolphinCache, DolphinConfig, DolphinTree};
pub use keys::{KeyCodec, KeyLengthError};
pub use rdwc::{Rdwc, RdwcStats};
pub use tree::{ArtError, SmartConfig, SmartTree};

/// Width of one SMART slot in bytes (SMART §4.1.1: a slot is changed by one 8-byte CAS).
pub const SLOT_BYTES: usize = 8;

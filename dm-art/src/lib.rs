//! # dm-art: the radix-tree family on disaggregated memory
//!
//! Radix trees whose nodes live in the memory servers (MSs) and are reached
//! from compute servers (CSs) by one-sided verbs only: SMART (Luo et al.,
//! OSDI'23) as [`SmartTree`], the DM-ported ART baseline and SMART's
//! technique ladder as switches of the same tree ([`Techniques`], SMART
//! §5.1.3, §5.3.1), and Dolphin (An et al., MSST'24) as [`DolphinTree`] over
//! SMART's internal nodes. Every handle offers async get, insert (upsert),
//! update, remove and ordered scan over any [`dm_verbs::Fabric`].
//!
//! | module | what lives there |
//! |---|---|
//! | [`keys`] | keys as order-preserving radix paths (fixed or variable length) |
//! | [`layout`] | slot, internal node and leaf bytes (SMART §4.1.1, Fig. 7) |
//! | `error`, `config`, `cursor` | [`ArtError`]; [`SmartConfig`], [`Techniques`], [`baseline::HOCL`]; a walk's `Cursor` |
//! | [`cache`] | [`ArtCache`], the per-CS cache of internal nodes and its sound reverse check (§4.3) |
//! | [`rdwc`] | [`Rdwc`], read delegation and write combining, sound versions (§4.2); without combining, the E-HOCL write queue with hand-over of the rear lock (§5.3.1) |
//! | `slots` | the slot words of a node image, in per-thread recycled buffers (issue 32: no allocation per warm operation) |
//! | [`tree`] | [`SmartTree`]: open/create, attachments, allocation, validated READs |
//! | `search` | `get` (§4.5, Algorithm 1) and the walk helpers around the cache |
//! | `insert` | `insert`, `update`, `remove` (§4.1.2, Algorithm 2, Fig. 8): `descent`, `leaf` writes, `grow` (normal insert, type switch), `split` (leaf, header) |
//! | `scan` | ordered, count-bounded range scan (Algorithm 4) |
//! | [`baseline`] | the ladder's rungs: ROWEX node locks, RCU leaves, lock-table leaf locks |
//! | [`dolphin`] | [`DolphinTree`]: leaves of one 7-byte prefix, special nodes, Spear lock (Dolphin §III) |
//!
//! Modules depend one way, bottom to top: `keys`, `layout`, `slots` → `error`,
//! `config`, `cursor` → `cache`, `rdwc` → `tree` → `search`, `insert`,
//! `scan` → `baseline`, `dolphin` (inside it: `layout` → `mod` → `walk` →
//! `ops`, `smo`, `scan`); each operation file adds methods to [`SmartTree`].
//!
//! ## Invariants
//! - **Torn READs are rejected.** A leaf validates by checksum (a READ mixing
//!   two versions is READ again), and its lock word carries the item's
//!   sequence number, so a lock CAS from the image's `seq` proves the image
//!   still current. An internal node changes only by 8-byte CASes: slots are
//!   never emptied, a slot's partial key never changes, a header keeps its
//!   end position (`insert` docs); the header's type is authoritative, a
//!   slot's a READ-size hint, and a header that starts deeper than the walk
//!   expects sends it back to the slot (a header split moved the node).
//! - **The ART cache may return stale slot words**, never wrong answers: a
//!   failed reverse check drops the entry, a passed one is not trusted: every
//!   negative conclusion drawn through a cached word is confirmed by one
//!   8-byte READ of the cached slot (`cache` docs); with RCU leaves a cached
//!   leaf READ goes out with a READ of its slot.
//! - **RDWC serves a follower only from a remote operation that started
//!   after it joined** (a reader's batch is fixed when the leader's search
//!   starts; a writer is acknowledged only if the leader's WRITE carried its
//!   value or a later one), so delegation and combining stay linearizable.
//! - Memory is never freed (a removed SMART key stays as a tombstone leaf).
//! - **A dead CS's locks** (issue 33): with the CS joined to a membership
//!   ([`SmartTree::with_member`], `dm_runtime::lock::member`), SMART's
//!   rear-embedded leaf lock names its holder in the lock word's top 15
//!   bits ([`layout::lock_taken`]) and a waiter that finds the holder dead
//!   after the lease CASes the stale word to its own; the baseline's HOCL
//!   node and leaf locks are `dm_runtime::lock::NodeLocks`, taken over
//!   likewise. What a dead holder leaves: a rear lock taken at the image's
//!   `seq` means the leaf was never written (the one WRITE that stores the
//!   item also frees the lock, at `seq + 1`), so the taker's image is
//!   current; an internal node changes by 8-byte CASes, so a cut leaves old
//!   or new words, and a header split cut between its two CASes leaves the
//!   state every reader and writer already meets between them (invariant 3
//!   of `insert`); a leaf or node written but never published is leaked.
//!   A rear lock word nobody holds although its holder lives (soft-RoCE:
//!   an unreported CAS success, or a re-executed CAS torn with the unlock
//!   WRITE) is taken too: one naming the taker's own CS that the CS's
//!   ledger (`dm_runtime::lock::CsWords`) shows untouched, at once; one
//!   naming another live CS, released by that CS when asked; one no
//!   writer leaves, after a lease (`insert/leaf.rs`, docs/rdma.md). A
//!   writer that takes such a word READs the leaf again under it (a word
//!   can fall behind its leaf: docs/rdma-sim-faults.md).
//!   The lock-free ART takes no locks. Dolphin recovers in its lease mode
//!   ([`DolphinTree::with_member`]): the leaf lock word becomes a
//!   `NodeLocks` node lock naming its holder (Spear's FAA shares are
//!   anonymous), and a split cut between publishing its new leaf and
//!   rewriting the old one is rolled forward by the next taker of either
//!   (`dolphin` docs, "A compute server that dies").
//!
//! ## Use
//! Create the tree once with [`SmartTree::create`], then [`SmartTree::open`]
//! a handle on every core (the chunk carver is per core) with the same
//! [`SmartConfig`]. Attach per-CS objects shared by that CS's cores through
//! an `Arc`: [`SmartTree::with_cache`] (one [`ArtCache`] per CS),
//! [`SmartTree::with_rdwc`] (one [`Rdwc`] per CS), and for the baseline's
//! rungs [`SmartTree::with_local_locks`] (one
//! [`SmartTree::new_local_lock_table`] per CS). Dolphin works the same way
//! with [`DolphinConfig`] and one [`DolphinCache`] per CS. Per index rather
//! than per CS, every core's handle may share one
//! [`dm_runtime::lock::LockCounters`] ([`SmartTree::with_lock_counters`],
//! [`DolphinTree::with_lock_counters`]) and, for Dolphin, one
//! [`dolphin::DolphinCounters`] ([`DolphinTree::with_counters`]), so that
//! index's lock statistics are its own.
//!
//! Where the code departs from the papers, and why, is in the module docs
//! (`cache`, `rdwc`, `baseline`, `dolphin`, `layout`). Measurements:
//! `docs/experiments/smart.md` (SMART §5.2-5.3) and
//! `docs/experiments/dolphin.md` (Dolphin §IV).

#![forbid(unsafe_code)]

pub mod baseline;
pub mod cache;
mod config;
mod cursor;
pub mod dolphin;
mod error;
mod insert;
pub mod keys;
pub mod layout;
pub mod rdwc;
mod scan;
mod search;
mod slots;
pub mod tree;

pub use cache::{ArtCache, CacheStats};
pub use config::{SmartConfig, Techniques};
pub use dm_runtime::lock::LockTableConfig;
pub use dolphin::{DolphinCache, DolphinConfig, DolphinTree, DolphinUpdate};
pub use error::ArtError;
pub use keys::{KeyCodec, KeyLengthError};
pub use rdwc::{Rdwc, RdwcStats};
pub use tree::SmartTree;

/// Width of one SMART slot in bytes (SMART §4.1.1: a slot is changed by one 8-byte CAS).
pub const SLOT_BYTES: usize = 8;

//! The superblock map: who owns which bytes of the first
//! [`SUPERBLOCK_BYTES`](super::SUPERBLOCK_BYTES) (4 KiB) of every memory
//! server's host region.
//!
//! Issue 31: "The catalog owns the superblock; nothing else writes fixed
//! offsets". Two indexes on one fabric used to overwrite each other (SMART's
//! root slot sat at MS 0 offset 8, where `FgTree` keeps its host lock-table
//! pointer on every MS); every fixed offset now comes from this table, and
//! an index that shares its fabric with others takes a root area from
//! `dm_runtime::catalog` instead of a fixed root.
//!
//! | offset | bytes | MS | owner | what |
//! |---|---|---|---|---|
//! | 0 | 8 | 0 | hand-built `FgTree` / `DexTree` ([`FG_ROOT`]) | root pointer |
//! | 8 | 8 | every | hand-built `FgTree` ([`FG_ROOT`] + [`LOCK_TABLE_PTR`]) | host lock-table address (Sherman's GLT in host memory) |
//! | 16 | 8 | 0 | hand-built SMART / ART tree ([`SMART_ROOT`]) | root slot |
//! | 24 | 8 | every | hand-built ART baseline ([`SMART_ROOT`] + [`LOCK_TABLE_PTR`]) | host lock-table address |
//! | 32 | 8 | 0 | hand-built Dolphin tree ([`DOLPHIN_ROOT`]) | root slot |
//! | 40 | 8 | 0 | membership (`dm_runtime::lock::member`, [`MEMBERSHIP_PTR`]) | address of the membership table (CS incarnations and heartbeats, issue 33); 0 until a CS joins |
//! | 48 | 8 | | | reserved |
//! | 56 | 8 | | | reserved (dm-bench's FAA barrier word until 2026-11-28) |
//! | 64 | 8 | 0 | catalog ([`CATALOG_BUMP`]) | bytes of the root-area range handed out so far |
//! | 72 | 56 | 0 | dm-bench ([`BENCH_BARRIER`]) | barrier bytes of `--client I/N` runs: byte `I` is the number (mod 256) of the last barrier client process `I` reached, WRITTEN by it |
//! | 128 | 896 | 0 | catalog ([`CATALOG_ENTRIES`]) | [`CATALOG_SLOTS`] entries of [`CATALOG_ENTRY_BYTES`] (layout in `dm_runtime::catalog`) |
//! | 1024 | 1536 | every | catalog ([`ROOT_AREAS`]..[`ROOT_AREAS_END`]) | root areas the catalog hands out, at the same offset on every MS (an index may keep per-MS words in its area) |
//! | 2560 | 1536 | every | hand-built NAM tree ([`NAM_HEADERS`]) | 48-byte NAM headers (`dm_tree::nam::ms`), its default `header_off` |
//!
//! The words of a hand-built index (no catalog) are its configuration's
//! defaults; at most one hand-built index of each family can share a fabric.
//! A superblock is zeroed when the memory server starts, so every word here
//! starts at 0 (the catalog's bump and entries, the barrier).

/// Bytes of the superblock (the same as [`super::SUPERBLOCK_BYTES`]).
pub const BYTES: u64 = super::SUPERBLOCK_BYTES;

/// Where a host lock-table address sits relative to its index's root word:
/// `root + LOCK_TABLE_PTR`, on every MS (`dm_runtime::lock::NodeLocks`).
pub const LOCK_TABLE_PTR: u64 = 8;

/// Default root pointer of `dm_tree::TreeConfig::root_ptr` (MS 0); its host
/// lock-table address at `FG_ROOT + 8` on every MS.
pub const FG_ROOT: u64 = 0;
/// Default root slot of `dm_art::SmartConfig::root_slot` (MS 0); the ART
/// baseline's host lock-table address at `SMART_ROOT + 8` on every MS.
pub const SMART_ROOT: u64 = 16;
/// Default root slot of `dm_art::DolphinConfig::root_slot` (MS 0; Dolphin
/// takes no lock-table locks, so one word).
pub const DOLPHIN_ROOT: u64 = 32;
/// Address of the membership table (MS 0; `dm_runtime::lock::member`): CS
/// incarnations and heartbeats, 0 until the first CS joins.
pub const MEMBERSHIP_PTR: u64 = 40;
/// dm-bench's multi-client barrier bytes (MS 0): one per client process,
/// each WRITTEN only by its process (an FAA counter there was not safe
/// against soft-RoCE executing a retransmitted atomic twice, docs/rdma.md).
pub const BENCH_BARRIER: u64 = 72;
/// Bytes of [`BENCH_BARRIER`]: client processes a barrier serves at most.
pub const BENCH_BARRIER_BYTES: u64 = 56;
/// The catalog's bump word (MS 0): bytes of `[ROOT_AREAS, ROOT_AREAS_END)`
/// handed out so far.
pub const CATALOG_BUMP: u64 = 64;
/// First catalog entry (MS 0).
pub const CATALOG_ENTRIES: u64 = 128;
/// Bytes of one catalog entry.
pub const CATALOG_ENTRY_BYTES: u64 = 64;
/// Number of catalog entries.
pub const CATALOG_SLOTS: u64 = 14;
/// Start of the root areas the catalog hands out (every MS).
pub const ROOT_AREAS: u64 = 1024;
/// End (exclusive) of the root areas.
pub const ROOT_AREAS_END: u64 = 2560;
/// Default NAM header offset (`dm_tree::NamConfig::header_off`): up to the
/// end of the superblock, room for 32 headers of 48 bytes per MS.
pub const NAM_HEADERS: u64 = 2560;

const _: () = {
    assert!(FG_ROOT + LOCK_TABLE_PTR + 8 <= SMART_ROOT);
    assert!(SMART_ROOT + LOCK_TABLE_PTR + 8 <= DOLPHIN_ROOT);
    assert!(DOLPHIN_ROOT + 8 <= MEMBERSHIP_PTR);
    assert!(MEMBERSHIP_PTR + 8 <= CATALOG_BUMP);
    assert!(CATALOG_BUMP + 8 <= BENCH_BARRIER);
    assert!(BENCH_BARRIER + BENCH_BARRIER_BYTES <= CATALOG_ENTRIES);
    assert!(CATALOG_ENTRIES + CATALOG_SLOTS * CATALOG_ENTRY_BYTES == ROOT_AREAS);
    assert!(ROOT_AREAS < ROOT_AREAS_END && ROOT_AREAS_END <= NAM_HEADERS);
    assert!(NAM_HEADERS < BYTES);
};

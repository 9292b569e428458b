//! `dm-bench check --index smart` and the ART ladder's rungs (`art`, ...):
//! the radix tree with per-CS state that goes stale and conflicts often,
//! chosen per CS through `dm_index::CsOverride` (sim and real fabrics
//! alike).

use dm_index::{CsOverride, IndexConfig};

/// The family's part of the check's configuration, for CSs `0..num_cs`
/// (the `k`-th CS of a process is `cs % 2`): an ART cache (§4.3), roomy on
/// even CSs and too small for the tree on odd ones (misses and
/// evictions), each going stale behind the other's splits; read delegation
/// and write combining (§4.2) on every rung with 16 table entries for the
/// 48 keys, so same-key groups and hash conflicts both happen: even CSs
/// combine, odd CSs queue same-key writers without combining (E-HOCL).
/// The ladder's lock-table locks take the check's tiny lock table.
///
/// `absorb` (`check --art-absorb`): the queuing CSs absorb their queued
/// writers (`dm_art::Rdwc::absorb_writers`).
pub(super) fn configure(mut cfg: IndexConfig, num_cs: u16, absorb: bool) -> IndexConfig {
    for cs in 0..num_cs {
        let combine = cs % 2 == 0;
        cfg = cfg.with_cs_override(
            cs,
            CsOverride {
                cache_bytes: Some(if combine { 64 << 20 } else { 4 << 10 }),
                rdwc_entries: Some(16),
                read_delegation: Some(true),
                write_combining: Some(combine),
                queue_same_key_writers: Some(!combine),
                absorb_writers: Some(absorb && !combine),
            },
        );
    }
    cfg
}

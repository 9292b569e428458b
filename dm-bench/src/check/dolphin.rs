//! `dm-bench check --index dolphin`: keys 0..N (dense: with N above the
//! leaf's 40 items a leaf splits, and above 256 a second prefix hangs off
//! the ART), a Dolphin cache per CS of `--cache-nodes` KiB (tiny: stale
//! special nodes and backtracking all the time, 0 = none), torn READs and
//! delayed completions on sim; splits race updates (Spear), same-key
//! updates race (the key-word CAS), and readers backtrack through special
//! nodes under concurrent splits.

use super::args::Args;
use dm_index::IndexConfig;

/// The family's part of the check's configuration: the paper's 1 KiB
/// leaves (not `--node-bytes`, which sizes the B+trees' small nodes) and a
/// cache of `--cache-nodes` KiB per CS, and `--dolphin-update` (checked
/// by `Args::validate`).
pub(super) fn configure(cfg: IndexConfig, a: &Args) -> anyhow::Result<IndexConfig> {
    let mut cfg = cfg
        .with_node_bytes(dm_art::DolphinConfig::default().leaf_bytes)
        .with_cache_bytes(a.cache_nodes << 10);
    cfg.dolphin_update = crate::kv::dolphin_update(&a.dolphin_update, &a.index, a.leases())?;
    Ok(cfg)
}

//! Per-CS overrides and the lock-table override of `IndexConfig`.

use dm_index::{CsOverride, IndexConfig, IndexKind, Instance, Root, Site};
use dm_tree::LockTableConfig;
use dm_verbs::Caps;

fn site() -> Site {
    Site {
        chunk_bytes: 1 << 20,
        num_ms: 2,
        caps: Caps::default(),
        num_cs: 3,
        local_cs: 1..3,
    }
}

/// A CS override changes that CS's shared state only; the lock table
/// override replaces the one derived from the fabric.
#[test]
fn cs_overrides_apply_to_their_cs_alone() {
    let o = CsOverride {
        cache_bytes: Some(4096),
        rdwc_entries: Some(16),
        write_combining: Some(false),
        queue_same_key_writers: Some(false),
        ..Default::default()
    };
    let cfg = IndexConfig::new(IndexKind::Smart)
        .with_cache_bytes(1 << 20)
        .with_cs_override(2, CsOverride::default())
        .with_cs_override(2, o);
    let i = Instance::new("t", cfg, site(), Root::HandBuilt, 1).unwrap();
    assert_eq!(i.art_cache(1).unwrap().budget(), 1 << 20);
    assert_eq!(i.art_cache(2).unwrap().budget(), 4096);
    // SMART's default combines (its writers queue); CS 2 neither combines
    // nor queues.
    assert!(i.rdwc(1).unwrap().queues_writers());
    assert!(!i.rdwc(2).unwrap().queues_writers());
    assert!(i.art_cache(0).is_none(), "CS 0 is not local");
    let lt = LockTableConfig {
        device: false,
        lanes16: false,
        slots: 16,
    };
    let mut cfg = IndexConfig::new(IndexKind::Sherman);
    cfg.lock_table = Some(lt);
    let i = Instance::new("t", cfg, site(), Root::HandBuilt, 1).unwrap();
    assert_eq!(i.tree_config().unwrap().lock_table, lt);
}

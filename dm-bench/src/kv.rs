//! The `--index` names and the operations the checkers drive ([`Kv`]) over
//! the library's one API (`dm_index::Index`, which `check`, `ycsb` and
//! `trace` build their indexes through), and over a plain B+tree handle.
//! Errors become their display text (the checkers only report them).

/// The `--index` name of SMART (`check` and `ycsb`); the B+tree family's
/// names are `dm_tree::Techniques::NAMES`.
pub(crate) const SMART: &str = "smart";

/// The `--index` name of Dolphin (dm_art::dolphin).
pub(crate) const DOLPHIN: &str = "dolphin";

/// `--dolphin-update NAME` (`ycsb` and `check`) for `--index index`, with
/// or without leases: the update protocol, or why it is refused (for
/// Dolphin only; the paper's and the authors' have no lease mode).
pub(crate) fn dolphin_update(
    name: &str,
    index: &str,
    leases: bool,
) -> anyhow::Result<dm_art::DolphinUpdate> {
    let u = dm_art::DolphinUpdate::named(name).ok_or_else(|| {
        anyhow::anyhow!("--dolphin-update takes cas, paper or authors, got {name:?}")
    })?;
    if u != dm_art::DolphinUpdate::KeyWordCas && index != DOLPHIN {
        anyhow::bail!("--dolphin-update is for --index dolphin");
    }
    if u != dm_art::DolphinUpdate::KeyWordCas && leases {
        anyhow::bail!(
            "--dolphin-update {name} has no lease mode: drop --lease-ms (and --faults crash)"
        );
    }
    Ok(u)
}

/// The radix family's `--index` names in ladder order (SMART §5.3.1,
/// Fig. 18; `dm_art::baseline`): the DM-ported ART (ROWEX, RCU leaves,
/// HOCL), + lock-free internal nodes (the paper's "pure lock-free ART",
/// §4.6.4), + in-place leaves under a lock-table lock, + the rear-embedded
/// lock (SMART; read delegation and write combining on only for this one).
pub(crate) const RADIX: [(&str, dm_art::Techniques); 4] = [
    ("art", dm_art::Techniques::ART),
    ("lockfree-art", dm_art::Techniques::LOCK_FREE_INTERNAL),
    ("smart-inplace", dm_art::Techniques::IN_PLACE_LEAF),
    (SMART, dm_art::Techniques::SMART),
];

/// The radix rung called `name`, if it is one.
pub(crate) fn radix(name: &str) -> Option<dm_art::Techniques> {
    RADIX.iter().find(|r| r.0 == name).map(|r| r.1)
}

/// `--node-read NODE_READ` and `--sherman-cache SHERMAN_CACHE` (`ycsb`
/// and `check`) for `--index index`: both are switches of the fine-grained
/// B+trees ([`fine_btree`]); another index with either off its default is
/// refused, not run with the switch ignored.
pub(crate) fn btree_switches(
    index: &str,
    node_read: &str,
    sherman_cache: &str,
) -> anyhow::Result<()> {
    if node_read != "checksum" && !fine_btree(index) {
        anyhow::bail!("--node-read is for the fine-grained B+trees (fg and the sherman rungs)");
    }
    if sherman_cache != "ours" && !fine_btree(index) {
        anyhow::bail!("--sherman-cache is for the fine-grained B+trees (fg and the sherman rungs)");
    }
    Ok(())
}

/// A switch `flag` of the radix family, `given` away from its default on
/// an index outside it (`radix` false), is refused, not run ignored
/// (`ycsb` and `check`).
pub(crate) fn radix_only(flag: &str, given: bool, radix: bool) -> anyhow::Result<()> {
    if given && !radix {
        anyhow::bail!("{flag} is for the radix family (--index smart, art, ...)");
    }
    Ok(())
}

/// Whether `--index NAME` is a fine-grained B+tree (fg and the Sherman
/// rungs): the indexes the B+tree baselines' switches (`--node-read`,
/// `--sherman-cache`) apply to. Not DEX, the NAM designs, the radix
/// family or Dolphin; false for an unknown name.
pub(crate) fn fine_btree(name: &str) -> bool {
    dm_index::IndexKind::named(name)
        .is_ok_and(|k| k.family() == dm_index::Family::BTree && k.design() == dm_tree::Design::Fine)
}

/// What `--index NAME` selects (`dm_index::IndexKind`, the library's one
/// list of names): the B+tree techniques and design (FG+ and the
/// fine-grained design for the others, which do not use them) and the
/// radix rung, if NAME is one. An unknown name is an error listing every
/// name.
pub(crate) fn parse_index(
    name: &str,
) -> anyhow::Result<(
    dm_tree::Techniques,
    dm_tree::Design,
    Option<dm_art::Techniques>,
)> {
    let Ok(k) = dm_index::IndexKind::named(name) else {
        let names: Vec<&str> = dm_index::IndexKind::ALL.iter().map(|k| k.name()).collect();
        anyhow::bail!(
            "unknown --index {name:?}: this build has {}",
            names.join(", ")
        );
    };
    let rung = (k.family() == dm_index::Family::Radix).then(|| k.radix_techniques());
    Ok((k.tree_techniques(), k.design(), rung))
}

/// A key-value index with 8-byte values (keys as the index takes them).
pub(crate) trait Kv {
    async fn insert(&self, k: &[u8], v: u64) -> Result<(), String>;
    async fn update(&self, k: &[u8], v: u64) -> Result<bool, String>;
    async fn remove(&self, k: &[u8]) -> Result<bool, String>;
    async fn get(&self, k: &[u8]) -> Result<Option<u64>, String>;
    async fn scan(&self, from: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, String>;
}

macro_rules! impl_kv {
    ($t:ty) => {
        impl Kv for $t {
            async fn insert(&self, k: &[u8], v: u64) -> Result<(), String> {
                <$t>::insert(self, k, v).await.map_err(|e| e.to_string())
            }
            async fn update(&self, k: &[u8], v: u64) -> Result<bool, String> {
                <$t>::update(self, k, v).await.map_err(|e| e.to_string())
            }
            async fn remove(&self, k: &[u8]) -> Result<bool, String> {
                <$t>::remove(self, k).await.map_err(|e| e.to_string())
            }
            async fn get(&self, k: &[u8]) -> Result<Option<u64>, String> {
                <$t>::get(self, k).await.map_err(|e| e.to_string())
            }
            async fn scan(&self, from: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, String> {
                <$t>::scan(self, from, n).await.map_err(|e| e.to_string())
            }
        }
    };
}

// DEX's final check reads the pool through a plain B+tree handle.
impl_kv!(dm_tree::FgTree);

impl Kv for dm_index::Index {
    async fn insert(&self, k: &[u8], v: u64) -> Result<(), String> {
        dm_index::Index::insert(self, k, v)
            .await
            .map_err(|e| e.to_string())
    }
    async fn update(&self, k: &[u8], v: u64) -> Result<bool, String> {
        dm_index::Index::update(self, k, v)
            .await
            .map_err(|e| e.to_string())
    }
    async fn remove(&self, k: &[u8]) -> Result<bool, String> {
        dm_index::Index::remove(self, k)
            .await
            .map_err(|e| e.to_string())
    }
    async fn get(&self, k: &[u8]) -> Result<Option<u64>, String> {
        dm_index::Index::get(self, k)
            .await
            .map_err(|e| e.to_string())
    }
    async fn scan(&self, from: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, String> {
        dm_index::Index::scan(self, from, n)
            .await
            .map_err(|e| e.to_string())
    }
}

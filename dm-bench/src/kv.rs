//! The operations `check` drives, over every index family: the B+trees
//! (`dm_tree::FgTree`, every Sherman rung) and the radix family
//! (`dm_art::SmartTree`: SMART, the DM-ported ART and the ladder between).
//! Errors become their display text (the checker only reports them).

use dm_art::{DolphinTree, SmartTree};
use dm_tree::{DexTree, FgTree};

/// The `--index` name of SMART (`check` and `ycsb`); the B+tree family's
/// names are `dm_tree::Techniques::NAMES`.
pub(crate) const SMART: &str = "smart";

/// The `--index` name of Dolphin (dm_art::dolphin).
pub(crate) const DOLPHIN: &str = "dolphin";

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

/// The B+tree family member called `name`: a Sherman rung over the
/// fine-grained design, or one of Ziegler et al.'s NAM designs
/// (`nam-coarse`, `nam-hybrid`; `fg` is the fine-grained one) with FG+'s
/// leaf locking.
fn btree(name: &str) -> Option<(dm_tree::Techniques, dm_tree::Design)> {
    match (
        dm_tree::Techniques::named(name),
        dm_tree::Design::named(name),
    ) {
        (Some(t), _) => Some((t, dm_tree::Design::Fine)),
        (None, Some(d)) => Some((dm_tree::Techniques::FG_PLUS, d)),
        _ => None,
    }
}

/// What `--index NAME` selects: the B+tree techniques and design (FG+ and
/// the fine-grained design for the radix family, which does not use them)
/// and the radix rung, if NAME is one. An unknown name is an error listing
/// every name.
pub(crate) fn parse_index(
    name: &str,
) -> anyhow::Result<(
    dm_tree::Techniques,
    dm_tree::Design,
    Option<dm_art::Techniques>,
)> {
    let rung = radix(name);
    if name == crate::ycsb::dex::DEX || name == DOLPHIN {
        return Ok((dm_tree::Techniques::FG_PLUS, dm_tree::Design::Fine, None));
    }
    match (btree(name), rung) {
        (Some((t, d)), _) => Ok((t, d, rung)),
        (None, Some(_)) => Ok((dm_tree::Techniques::FG_PLUS, dm_tree::Design::Fine, rung)),
        (None, None) => anyhow::bail!("unknown --index {name:?}: this build has {}", index_names()),
    }
}

/// Every `--index` name, for error messages.
fn index_names() -> String {
    let mut v: Vec<&str> = dm_tree::Techniques::NAMES.to_vec();
    v.extend(dm_tree::Design::NAMES.iter().map(|d| d.0));
    v.extend(RADIX.iter().map(|r| r.0));
    v.push(crate::ycsb::dex::DEX);
    v.push(DOLPHIN);
    v.join(", ")
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

impl_kv!(FgTree);
impl_kv!(SmartTree);
impl_kv!(DexTree);
impl_kv!(DolphinTree);

/// One index handle of either family, for the benches that pick the index at
/// run time (`ycsb --index`).
pub(crate) enum AnyIndex {
    /// The B+tree family: FG+ and every Sherman rung.
    Tree(FgTree),
    /// The radix family (dm-art): SMART and its ladder down to ART.
    Smart(SmartTree),
    /// DEX (dm_tree::dex).
    Dex(DexTree),
    /// Dolphin (dm_art::dolphin).
    Dolphin(DolphinTree),
}

impl Kv for AnyIndex {
    async fn insert(&self, k: &[u8], v: u64) -> Result<(), String> {
        match self {
            AnyIndex::Tree(t) => Kv::insert(t, k, v).await,
            AnyIndex::Smart(t) => Kv::insert(t, k, v).await,
            AnyIndex::Dex(t) => Kv::insert(t, k, v).await,
            AnyIndex::Dolphin(t) => Kv::insert(t, k, v).await,
        }
    }
    async fn update(&self, k: &[u8], v: u64) -> Result<bool, String> {
        match self {
            AnyIndex::Tree(t) => Kv::update(t, k, v).await,
            AnyIndex::Smart(t) => Kv::update(t, k, v).await,
            AnyIndex::Dex(t) => Kv::update(t, k, v).await,
            AnyIndex::Dolphin(t) => Kv::update(t, k, v).await,
        }
    }
    async fn remove(&self, k: &[u8]) -> Result<bool, String> {
        match self {
            AnyIndex::Tree(t) => Kv::remove(t, k).await,
            AnyIndex::Smart(t) => Kv::remove(t, k).await,
            AnyIndex::Dex(t) => Kv::remove(t, k).await,
            AnyIndex::Dolphin(t) => Kv::remove(t, k).await,
        }
    }
    async fn get(&self, k: &[u8]) -> Result<Option<u64>, String> {
        match self {
            AnyIndex::Tree(t) => Kv::get(t, k).await,
            AnyIndex::Smart(t) => Kv::get(t, k).await,
            AnyIndex::Dex(t) => Kv::get(t, k).await,
            AnyIndex::Dolphin(t) => Kv::get(t, k).await,
        }
    }
    async fn scan(&self, from: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, String> {
        match self {
            AnyIndex::Tree(t) => Kv::scan(t, from, n).await,
            AnyIndex::Smart(t) => Kv::scan(t, from, n).await,
            AnyIndex::Dex(t) => Kv::scan(t, from, n).await,
            AnyIndex::Dolphin(t) => Kv::scan(t, from, n).await,
        }
    }
}

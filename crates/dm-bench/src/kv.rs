//! The operations `check` drives, over every index family: the B+trees
//! (`dm_tree::FgTree`, every Sherman rung) and SMART (`dm_art::SmartTree`).
//! Errors become their display text (the checker only reports them).

use dm_art::SmartTree;
use dm_tree::FgTree;

/// The `--index` name of SMART (`check` and `ycsb`); the B+tree family's
/// names are `dm_tree::Techniques::NAMES`.
pub(crate) const SMART: &str = "smart";

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

/// One index handle of either family, for the benches that pick the index at
/// run time (`ycsb --index`).
pub(crate) enum AnyIndex {
    /// The B+tree family: FG+ and every Sherman rung.
    Tree(FgTree),
    /// SMART (dm-art).
    Smart(SmartTree),
}

impl Kv for AnyIndex {
    async fn insert(&self, k: &[u8], v: u64) -> Result<(), String> {
        match self {
            AnyIndex::Tree(t) => Kv::insert(t, k, v).await,
            AnyIndex::Smart(t) => Kv::insert(t, k, v).await,
        }
    }
    async fn update(&self, k: &[u8], v: u64) -> Result<bool, String> {
        match self {
            AnyIndex::Tree(t) => Kv::update(t, k, v).await,
            AnyIndex::Smart(t) => Kv::update(t, k, v).await,
        }
    }
    async fn remove(&self, k: &[u8]) -> Result<bool, String> {
        match self {
            AnyIndex::Tree(t) => Kv::remove(t, k).await,
            AnyIndex::Smart(t) => Kv::remove(t, k).await,
        }
    }
    async fn get(&self, k: &[u8]) -> Result<Option<u64>, String> {
        match self {
            AnyIndex::Tree(t) => Kv::get(t, k).await,
            AnyIndex::Smart(t) => Kv::get(t, k).await,
        }
    }
    async fn scan(&self, from: &[u8], n: usize) -> Result<Vec<(Vec<u8>, u64)>, String> {
        match self {
            AnyIndex::Tree(t) => Kv::scan(t, from, n).await,
            AnyIndex::Smart(t) => Kv::scan(t, from, n).await,
        }
    }
}

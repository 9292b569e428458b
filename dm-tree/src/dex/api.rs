//! DEX's public operations: route to the owning CS (§4), then run there.

use super::op::{Op, Res};
use super::DexTree;
use crate::node::Fence;
use crate::tree::TreeError;
use dm_runtime::ScanBuf;

impl DexTree {
    /// The value stored under `key`, if any.
    pub async fn get(&self, key: &[u8]) -> Result<Option<u64>, TreeError> {
        self.t.check_key(key)?;
        let (c, _in) = self.enter(key).await?;
        match self.point(c, key, Op::Get).await? {
            Res::Get(v) => Ok(v),
            _ => unreachable!(),
        }
    }

    /// Inserts `key -> value`, replacing the value if the key exists.
    pub async fn insert(&self, key: &[u8], value: u64) -> Result<(), TreeError> {
        self.put(key, value, true).await.map(|_| ())
    }

    /// Replaces the value of an existing key; `false` if the key is absent.
    pub async fn update(&self, key: &[u8], value: u64) -> Result<bool, TreeError> {
        self.put(key, value, false).await
    }

    async fn put(&self, key: &[u8], value: u64, may_insert: bool) -> Result<bool, TreeError> {
        self.t.check_key(key)?;
        let (c, _in) = self.enter(key).await?;
        match self.point(c, key, Op::Put { value, may_insert }).await? {
            Res::Put(b) => Ok(b),
            _ => unreachable!(),
        }
    }

    /// Removes `key`; `false` if it was absent.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, TreeError> {
        self.t.check_key(key)?;
        let (c, _in) = self.enter(key).await?;
        match self.point(c, key, Op::Remove).await? {
            Res::Remove(b) => Ok(b),
            _ => unreachable!(),
        }
    }

    /// Up to `count` entries from `from` on, ascending
    /// ([`DexTree::scan_into`] into a new buffer).
    pub async fn scan(&self, from: &[u8], count: usize) -> Result<Vec<(Vec<u8>, u64)>, TreeError> {
        let mut out = ScanBuf::new();
        self.scan_into(from, count, &mut out).await?;
        Ok(out.to_entries())
    }

    /// Clears `out` and fills it with up to `count` entries from `from`
    /// on, ascending: repeated lookups, one leaf at a time, each continuing
    /// at the last leaf's high fence (§5.4; never offloaded). Each leaf's
    /// entries are one atomic snapshot; the scan as a whole is not. Without
    /// forwarding, the scan stops at the end of this CS's partition (as the
    /// paper's code does). On an error `out` holds what was found before it.
    pub async fn scan_into(
        &self,
        from: &[u8],
        count: usize,
        out: &mut ScanBuf,
    ) -> Result<(), TreeError> {
        self.t.check_key(from)?;
        out.clear();
        let mut k = crate::node::FenceKey::from_slice(from);
        while out.len() < count {
            let (c, _in) = match self.enter(&k).await {
                Ok(x) => x,
                Err(TreeError::NotOwner(_)) if !out.is_empty() || k.as_slice() != from => break,
                Err(e) => return Err(e),
            };
            let max = count - out.len();
            let Res::Scan(v, high) = self.point(c, &k, Op::Scan { max }).await? else {
                unreachable!()
            };
            for e in v.chunks_exact(k.len() + 8) {
                let (key, value) = e.split_at(k.len());
                out.push(key, u64::from_le_bytes(value.try_into().unwrap()));
            }
            dm_verbs::buf::give(v);
            match high {
                Fence::Key(h) => k = h,
                _ => break,
            }
        }
        Ok(())
    }
}

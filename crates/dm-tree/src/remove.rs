//! Remove: lock the leaf, drop the entry, write back, unlock. Nodes are never
//! merged or freed, so every pointer a reader may hold stays valid (Ziegler et
//! al. leave deletion without merging too).

use crate::tree::{FgTree, TreeError};

impl FgTree {
    /// Removes `key`; `false` if it was absent.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, TreeError> {
        self.check_key(key)?;
        loop {
            let (a, _) = self.find_leaf(key).await?;
            let Some((a, mut n)) = self.lock_covering(a, key).await? else {
                continue;
            };
            match n.find(key) {
                Ok(i) => {
                    n.entries.remove(i);
                    self.write_back_unlock(a, &n).await?;
                    return Ok(true);
                }
                Err(_) => {
                    self.unlock(a).await?;
                    return Ok(false);
                }
            }
        }
    }
}

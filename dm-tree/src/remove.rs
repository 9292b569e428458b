//! Remove: lock the leaf, drop the entry, write back (only the emptied slot
//! in an unsorted leaf, Sherman §4.4), unlock. Nodes are never
//! merged or freed, so every pointer a reader may hold stays valid (Ziegler et
//! al. leave deletion without merging too).

use crate::tree::{FgTree, TreeError};

impl FgTree {
    /// Removes `key`; `false` if it was absent.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, TreeError> {
        self.check_key(key)?;
        if self.cfg.design == crate::nam::Design::Coarse {
            return self.nam_remove(key).await;
        }
        loop {
            let (start, cached) = self.leaf_for_write(key).await?;
            let Some((a, mut n, held)) =
                self.lock_covering(start, key, 0, cached.is_some()).await?
            else {
                self.drop_stale(key, cached);
                continue;
            };
            self.moved_right(key, start, a, cached);
            match n.find(key) {
                Ok(i) => {
                    n.entries.remove(i);
                    if n.unsorted {
                        let s = n.slots.remove(i);
                        self.write_slot_unlock(held, a, n.version, s, None).await?;
                    } else {
                        self.write_back_unlock(held, a, n).await?;
                    }
                    return Ok(true);
                }
                Err(_) => {
                    self.release(held, Vec::new()).await?;
                    return Ok(false);
                }
            }
        }
    }
}

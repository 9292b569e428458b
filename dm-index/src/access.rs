//! What the one API does not cover, for tools that need a family's own
//! parts (`dm-bench`'s reports, bulk loading, DEX's repartitioning): the
//! resolved family configuration, each compute server's shared caches and
//! tables, and bulk loading of a sorted key set.

use crate::config::Plan;
use crate::error::Error;
use crate::index::Instance;
use dm_art::{ArtCache, DolphinCache, Rdwc, SmartConfig};
use dm_runtime::sync::LocalLockTable;
use dm_tree::{DexCluster, DexTree, FgTree, IndexCache, TreeConfig};
use std::sync::Arc;

impl Instance {
    /// The B+tree configuration (also DEX's tree, as its cluster holds it).
    pub fn tree_config(&self) -> Option<TreeConfig> {
        match &self.plan {
            Plan::BTree(c) => Some(*c),
            Plan::Dex(cl) => Some(cl.tree_config()),
            _ => None,
        }
    }

    /// The radix family's configuration.
    pub fn smart_config(&self) -> Option<SmartConfig> {
        match &self.plan {
            Plan::Radix(c) => Some(*c),
            _ => None,
        }
    }

    /// DEX's cluster of partitioned CS caches (§4-5).
    pub fn dex_cluster(&self) -> Option<&Arc<DexCluster>> {
        match &self.plan {
            Plan::Dex(cl) => Some(cl),
            _ => None,
        }
    }

    /// Compute servers of this process (each has its own caches and tables).
    pub fn local_cs(&self) -> std::ops::Range<u16> {
        self.site.local_cs.clone()
    }

    /// The shared state of local CS `cs`, if it is local.
    pub(crate) fn cs_state(&self, cs: u16) -> Option<&crate::index::CsState> {
        cs.checked_sub(self.site.local_cs.start)
            .and_then(|i| self.cs.get(i as usize))
    }

    /// CS `cs`'s B+tree index cache (Sherman §4.1), if any.
    pub fn tree_cache(&self, cs: u16) -> Option<&Arc<IndexCache>> {
        self.cs_state(cs)?.tree_cache.as_ref()
    }

    /// CS `cs`'s ART cache (SMART §4.4), if any.
    pub fn art_cache(&self, cs: u16) -> Option<&Arc<ArtCache>> {
        self.cs_state(cs)?.art_cache.as_ref()
    }

    /// CS `cs`'s Dolphin cache, if any.
    pub fn dolphin_cache(&self, cs: u16) -> Option<&Arc<DolphinCache>> {
        self.cs_state(cs)?.dolphin_cache.as_ref()
    }

    /// CS `cs`'s read-delegation and write-combining table (SMART §4.2.1).
    pub fn rdwc(&self, cs: u16) -> Option<&Arc<Rdwc>> {
        self.cs_state(cs)?.rdwc.as_ref()
    }

    /// CS `cs`'s local lock table (HOCL's local half, Sherman §4.3).
    pub fn local_lock_table(&self, cs: u16) -> Option<&Arc<LocalLockTable>> {
        self.cs_state(cs)?.llt.as_ref()
    }

    /// Builds the index bottom-up from `sorted` (strictly increasing keys
    /// of the index's width), leaves `fill` full, from core `core` of CS
    /// `cs`, instead of creating it empty (Sherman's and DEX's bulk load).
    /// The fine-grained B+trees and DEX only: `BadConfig` otherwise.
    pub async fn bulk_load<K: AsRef<[u8]>>(
        &self,
        (cs, core): (u16, u16),
        sorted: &[(K, u64)],
        fill: f64,
    ) -> Result<(), Error> {
        match &self.plan {
            Plan::BTree(c) if c.design == dm_tree::Design::Fine => {
                FgTree::bulk_load(*c, cs, core, sorted, fill).await?;
            }
            Plan::Dex(cl) => {
                DexTree::bulk_load(cl.clone(), cs, core, sorted, fill).await?;
            }
            _ => {
                return Err(Error::BadConfig(format!(
                    "bulk loading builds the fine-grained B+trees and dex, not {}",
                    self.config().kind
                )))
            }
        }
        Ok(())
    }
}

//! Bulk load from sorted input (Sherman §5 bulk-loads its trees 80% full).
//!
//! Leaves are filled to `fill` of their capacity and linked by sibling
//! pointers, then each internal level is built over the one below until one
//! node remains. Fences come from the first key of each node and of its right
//! neighbour; an internal node's first entry key is its low fence (zeros for
//! -inf, as elsewhere). Nodes are written with WRITEs posted 64 at a time; the
//! root pointer is written last, so nobody sees a partial tree through it.

use crate::node::{Fence, Node, NodeKey};
use crate::tree::{FgTree, TreeConfig, TreeError};
use dm_runtime::write;
use dm_verbs::GlobalAddr;

impl FgTree {
    /// Builds a tree holding `entries` (strictly increasing keys) with nodes
    /// filled to `fill` (0 < fill <= 1; Sherman and the default use 0.8), replacing
    /// whatever the root pointer referred to, and returns this core's handle.
    /// Errors: `KeyLength`, `BadConfig` for keys out of order or a bad fill,
    /// or any verb error (e.g. MS out of memory).
    pub async fn bulk_load<K: AsRef<[u8]>>(
        cfg: TreeConfig,
        cs: u16,
        core: u16,
        entries: &[(K, u64)],
        fill: f64,
    ) -> Result<Self, TreeError> {
        let t = Self::open(cfg, cs, core)?;
        if cfg.design != crate::nam::Design::Fine {
            return Err(TreeError::BadConfig(
                "bulk_load builds the fine-grained design only".into(),
            ));
        }
        let (per_leaf, per) = t.bulk_shape(entries, fill)?;
        t.create_lock_tables().await?;
        // Level 0, written 64 leaves at a time as it is built (the leaf
        // level is never held whole: bulk loads of tens of millions of keys).
        let (mut lows, mut addrs) = t.write_leaves(entries, per_leaf).await?;
        let mut level = 0u8;
        while addrs.len() > 1 {
            // The level above: children (low fence, address) in groups of `per`.
            level += 1;
            let children: Vec<(Fence, GlobalAddr)> = lows.iter().cloned().zip(addrs).collect();
            let groups: Vec<&[(Fence, GlobalAddr)]> = children.chunks(per).collect();
            let (mut next_nodes, mut next_lows) = (Vec::new(), Vec::new());
            for (i, g) in groups.iter().enumerate() {
                let low = g[0].0.clone();
                let high = if i + 1 == groups.len() {
                    Fence::PosInf
                } else {
                    groups[i + 1][0].0.clone()
                };
                let mut n = Node::empty(level, low.clone(), high);
                n.entries = g
                    .iter()
                    .map(|(f, a)| (f.first_entry_key(cfg.key_bytes), a.to_u64()))
                    .collect();
                next_lows.push(low);
                next_nodes.push(n);
            }
            lows = next_lows;
            addrs = t.write_level(&mut next_nodes).await?;
        }
        write(cfg.root_ptr, addrs[0].to_u64().to_le_bytes().to_vec()).await?;
        Ok(t)
    }

    /// Allocates the leaves of `entries` (`per_leaf` each; one empty leaf
    /// for none) left to right, then builds and writes them 64 at a time,
    /// linked by sibling pointers: the same nodes, addresses and WRITEs as
    /// [`FgTree::write_level`] over the whole leaf level, without holding
    /// it. Returns each leaf's low fence and address.
    async fn write_leaves<K: AsRef<[u8]>>(
        &self,
        entries: &[(K, u64)],
        per_leaf: usize,
    ) -> Result<(Vec<Fence>, Vec<GlobalAddr>), TreeError> {
        let n = entries.len().div_ceil(per_leaf).max(1);
        let mut addrs = Vec::with_capacity(n);
        for _ in 0..n {
            addrs.push(self.alloc_node().await?);
        }
        let group = |i: usize| {
            &entries[(i * per_leaf).min(entries.len())..((i + 1) * per_leaf).min(entries.len())]
        };
        let lows: Vec<Fence> = (0..n)
            .map(|i| {
                if i == 0 {
                    Fence::NegInf
                } else {
                    Fence::key(group(i)[0].0.as_ref())
                }
            })
            .collect();
        for first in (0..n).step_by(64) {
            let writes: Vec<_> = (first..(first + 64).min(n))
                .map(|i| {
                    let high = lows.get(i + 1).cloned().unwrap_or(Fence::PosInf);
                    let mut l = self.new_leaf(lows[i].clone(), high);
                    l.entries = group(i)
                        .iter()
                        .map(|(k, v)| (NodeKey::from_slice(k.as_ref()), *v))
                        .collect();
                    l.sibling = addrs.get(i + 1).copied().unwrap_or(GlobalAddr::NULL);
                    write(addrs[i], l.encode(&self.g))
                })
                .collect();
            for r in futures::future::join_all(writes).await {
                r?;
            }
        }
        Ok((lows, addrs))
    }

    /// Checks bulk-load input (`fill` in (0, 1], keys of the tree's length,
    /// strictly increasing) and returns the entries per leaf and per
    /// internal node at that fill. Shared by FG's and DEX's bulk loads.
    pub(crate) fn bulk_shape<K: AsRef<[u8]>>(
        &self,
        entries: &[(K, u64)],
        fill: f64,
    ) -> Result<(usize, usize), TreeError> {
        if !(fill > 0.0 && fill <= 1.0) {
            return Err(TreeError::BadConfig(format!("fill {fill} not in (0, 1]")));
        }
        for (k, _) in entries {
            self.check_key(k.as_ref())?;
        }
        if let Some(i) = entries
            .windows(2)
            .position(|w| w[0].0.as_ref() >= w[1].0.as_ref())
        {
            return Err(TreeError::BadConfig(format!(
                "bulk_load input not strictly sorted at entry {}",
                i + 1
            )));
        }
        let fill_of = |cap: usize| ((cap as f64 * fill).floor() as usize).clamp(2, cap);
        Ok((fill_of(self.leaf_capacity()), fill_of(self.node_capacity())))
    }

    /// Allocates and writes one level left to right, linking sibling pointers.
    async fn write_level(&self, nodes: &mut [Node]) -> Result<Vec<GlobalAddr>, TreeError> {
        let mut addrs = Vec::with_capacity(nodes.len());
        for _ in 0..nodes.len() {
            addrs.push(self.alloc_node().await?);
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            n.sibling = addrs.get(i + 1).copied().unwrap_or(GlobalAddr::NULL);
        }
        for (ns, as_) in nodes.chunks(64).zip(addrs.chunks(64)) {
            let writes = ns
                .iter()
                .zip(as_)
                .map(|(n, a)| write(*a, n.encode(&self.g)));
            for r in futures::future::join_all(writes).await {
                r?;
            }
        }
        Ok(addrs)
    }
}

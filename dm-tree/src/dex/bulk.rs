//! DEX's bulk load: FG's bottom-up build (leaves filled to `fill`, each
//! level over the one below, root pointer last), with two additions:
//! - leaves are cut at the partition bounds, so every leaf belongs to one
//!   CS (§4; a partition without keys still gets one empty leaf);
//! - placement (§4, code: `megaLevel`): the nodes at the offload level M
//!   are spread round-robin over the MSs and every node below one of them
//!   lives on its MS, so an offloaded traversal never leaves its MS; nodes
//!   above M go round-robin. A tree no taller than M lives on MS 0.

use super::{DexCluster, DexTree};
use crate::node::{Fence, Node, NodeKey};
use crate::tree::TreeError;
use dm_runtime::write;
use dm_verbs::GlobalAddr;
use std::sync::Arc;

/// Key-value entries of one leaf, sorted.
type Entries = Vec<(NodeKey, u64)>;

impl DexTree {
    /// Builds a tree holding `entries` (strictly increasing keys, nodes
    /// `fill` full, 0 < fill <= 1), replacing whatever the root pointer
    /// referred to, and returns this core's handle. Errors: `KeyLength`,
    /// `BadConfig` (keys out of order, bad fill), verb errors.
    pub async fn bulk_load<K: AsRef<[u8]>>(
        cl: Arc<DexCluster>,
        cs: u16,
        core: u16,
        entries: &[(K, u64)],
        fill: f64,
    ) -> Result<Self, TreeError> {
        let d = DexTree::open(cl, cs, core)?;
        let t = &d.t;
        let (per_leaf, per) = t.bulk_shape(entries, fill)?;
        t.create_lock_tables().await?;
        let bounds = d.cl.bounds();
        // Leaves: (low fence, entries), cut when full and at every bound.
        let mut leaves: Vec<(Fence, Entries)> = vec![(Fence::NegInf, Vec::new())];
        let mut next_bound = 0;
        for e in entries {
            let k = e.0.as_ref();
            while next_bound < bounds.len() && k >= &bounds[next_bound][..] {
                leaves.push((Fence::key(&bounds[next_bound]), Vec::new()));
                next_bound += 1;
            }
            let cur = leaves.last_mut().unwrap();
            if cur.1.len() == per_leaf {
                leaves.push((Fence::key(k), Vec::new()));
            }
            leaves
                .last_mut()
                .unwrap()
                .1
                .push((NodeKey::from_slice(k), e.1));
        }
        for b in &bounds[next_bound..] {
            leaves.push((Fence::key(b), Vec::new()));
        }
        // Levels bottom-up: nodes and, per node above 0, its children's indices.
        let mut levels: Vec<Vec<Node>> = Vec::new();
        let mut kids: Vec<Vec<std::ops::Range<usize>>> = Vec::new();
        let lows: Vec<Fence> = leaves.iter().map(|l| l.0.clone()).collect();
        levels.push(
            leaves
                .into_iter()
                .enumerate()
                .map(|(i, (low, es))| {
                    let high = lows.get(i + 1).cloned().unwrap_or(Fence::PosInf);
                    let mut n = t.new_leaf(low, high);
                    n.entries = es;
                    n
                })
                .collect(),
        );
        while levels.last().unwrap().len() > 1 {
            let below = levels.last().unwrap();
            let level = below[0].level + 1;
            let (mut ns, mut ks) = (Vec::new(), Vec::new());
            for start in (0..below.len()).step_by(per) {
                let r = start..(start + per).min(below.len());
                let high = below.get(r.end).map_or(Fence::PosInf, |n| n.low.clone());
                let mut n = Node::empty(level, below[start].low.clone(), high);
                n.entries = below[r.clone()]
                    .iter()
                    .map(|c| (c.low.first_entry_key(t.cfg.key_bytes), 0))
                    .collect();
                ns.push(n);
                ks.push(r);
            }
            levels.push(ns);
            kids.push(ks);
        }
        // Placement top-down, then addresses.
        let m = d.cl.cfg.offload_level as usize;
        let num_ms = t.cfg.num_ms.max(1);
        let top = levels.len() - 1;
        let mut ms: Vec<Vec<u16>> = levels.iter().map(|l| vec![0u16; l.len()]).collect();
        let mut rr = 0u16;
        for lv in (0..=top).rev() {
            for i in 0..levels[lv].len() {
                if lv >= m {
                    ms[lv][i] = rr % num_ms;
                    rr = rr.wrapping_add(1);
                }
                if lv > 0 && lv <= m {
                    for c in kids[lv - 1][i].clone() {
                        ms[lv - 1][c] = ms[lv][i];
                    }
                }
            }
        }
        let mut addrs: Vec<Vec<GlobalAddr>> = Vec::new();
        for on in &ms {
            let mut v = Vec::with_capacity(on.len());
            for &at in on {
                v.push(t.alloc_node_on(at).await?);
            }
            addrs.push(v);
        }
        for lv in 0..levels.len() {
            for i in 0..levels[lv].len() {
                levels[lv][i].sibling = addrs[lv].get(i + 1).copied().unwrap_or(GlobalAddr::NULL);
                if lv > 0 {
                    for (e, c) in kids[lv - 1][i].clone().enumerate() {
                        levels[lv][i].entries[e].1 = addrs[lv - 1][c].to_u64();
                    }
                }
            }
        }
        d.write_levels(&levels, &addrs).await?;
        write(
            t.cfg.root_ptr,
            addrs[top][0].to_u64().to_le_bytes().to_vec(),
        )
        .await?;
        Ok(d)
    }

    async fn write_levels(
        &self,
        levels: &[Vec<Node>],
        addrs: &[Vec<GlobalAddr>],
    ) -> Result<(), TreeError> {
        let all: Vec<(&Node, GlobalAddr)> = levels
            .iter()
            .zip(addrs)
            .flat_map(|(l, a)| l.iter().zip(a.iter().copied()))
            .collect();
        for chunk in all.chunks(64) {
            let w = chunk.iter().map(|(n, a)| write(*a, n.encode(&self.t.g)));
            for r in futures::future::join_all(w).await {
                r?;
            }
        }
        Ok(())
    }
}

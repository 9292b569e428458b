//! The NAM tree designs of Ziegler et al. (SIGMOD'19), beside the
//! fine-grained design that [`crate::FgTree`] already is (§4).
//!
//! - **Coarse-grained** ([`Design::Coarse`], §3): the keys are range
//!   partitioned over the memory servers; each MS holds an independent B+tree
//!   of its partition in its own memory and every operation is **one RPC**
//!   served by the MS's cores ([`ms::handler`]).
//! - **Hybrid** ([`Design::Hybrid`], §5): the upper levels are coarse-grained
//!   (one tree per partition on its MS, reached by RPC) and the leaf level is
//!   fine-grained: leaves live on every MS (the CS's chunk carver round-robins
//!   chunks) and are read and written with one-sided verbs under FgTree's
//!   leaf protocol. A lookup is one RPC that returns the leaf's address and
//!   one READ; an insert without split is that RPC plus the leaf's lock,
//!   READ, write-back and unlock; a split adds one RPC that installs the
//!   separator in the partition's upper levels (§5, "Insert").
//!
//! Both are switches of [`crate::TreeConfig::design`]: `FgTree`'s operations
//! route to the RPCs here, so every caller (the bench, `check`) drives the
//! three designs through one handle type.
//!
//! ## Partitioning
//! Partition `p` of [`NamConfig`] lives on MS `p % num_ms` and covers the
//! keys from its low fence (inclusive) to the next partition's (exclusive).
//! Fences are the first `min(8, key_bytes)` bytes of a split point (a u64,
//! big-endian, the key's first 8 bytes), padded with zeros to the key
//! length; routing compares keys with the fences byte-wise, so it agrees with
//! the trees' own fences exactly. [`NamConfig::uniform`] splits the prefix
//! space evenly (YCSB's hashed integer keys spread evenly);
//! [`NamConfig::weighted`] gives partitions shares of it;
//! [`NamConfig::from_sample`] takes quantiles of sample keys (string keys,
//! whose prefixes crowd), and [`NamConfig::from_sample_weighted`] gives
//! partitions shares of the sample keys (Ziegler §6's data skew, 80/12/5/3
//! of the data over 4 MSs; YCSB's hashed keys fill only the lower half of
//! the prefix space, so shares of the space would put them all in the
//! first 80%).
//!
//! In the hybrid, the leaf level is one B-link chain across partitions: the
//! create step makes one leaf per partition, with the partition's fences,
//! chained in key order, so a scan walks sibling pointers across partition
//! boundaries and a leaf never spans two partitions (splits only narrow).
//!
//! ## What differs from the paper, and why
//! - MS-side concurrency: the paper's MS threads use optimistic lock
//!   coupling; ours serialise the handlers of one MS (a mutex on real
//!   fabrics; on `sim` a handler runs as one event, and the MS's cores
//!   overlap handlers in virtual time with `MsConfig::cores`). That is
//!   linearizable, and the cost model (RPC dispatch plus
//!   [`NamConfig::ms_node_ns`] per node visited) still saturates the MS
//!   cores as the paper reports; what it does not model is the spin-lock
//!   waiting of §6 Exp. 3.
//! - Deletes remove the entry (no delete bit, no garbage collector), as the
//!   fine-grained tree does; nodes are never merged.
//! - Head nodes for scan prefetching (§5) are not built yet.

pub mod ms;
mod rpc;
pub use ms::RPC_NAM;
pub use rpc::SCAN_REPLY_BYTES;

use crate::node::Fence;
use dm_verbs::ms::superblock;

/// Most partitions a [`NamConfig`] describes.
pub const MAX_PARTITIONS: usize = 16;

/// Which of Ziegler et al.'s designs a [`crate::FgTree`] runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Design {
    /// Fine-grained, one-sided (§4): the FG/FG+ B-link tree. The default.
    #[default]
    Fine,
    /// Coarse-grained, two-sided (§3): one RPC per operation.
    Coarse,
    /// Hybrid (§5): upper levels by RPC, leaves one-sided.
    Hybrid,
}

impl Design {
    /// The bench's `--index` names of the designs that are not `fg`.
    pub const NAMES: [(&'static str, Design); 2] = [
        ("nam-coarse", Design::Coarse),
        ("nam-hybrid", Design::Hybrid),
    ];

    /// The design called `name` (`nam-coarse`, `nam-hybrid`).
    pub fn named(name: &str) -> Option<Design> {
        Self::NAMES.iter().find(|d| d.0 == name).map(|d| d.1)
    }
}

/// Partitioning and MS cost model of the coarse-grained and hybrid designs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamConfig {
    /// Superblock offset of the NAM headers ([`ms`] gives their layout): the
    /// header of partition `p` is at `header_off + (p / num_ms) *`
    /// [`ms::HEADER_BYTES`] on MS `p % num_ms`. Default
    /// [`superblock::NAM_HEADERS`] = 2560, the superblock's last 1,536 bytes
    /// (the map is [`dm_verbs::ms::superblock`]), room for all
    /// [`MAX_PARTITIONS`] headers on one MS. A tree that shares its fabric
    /// with other indexes puts them in a catalog root area of
    /// [`NamConfig::root_bytes`] instead (`TreeConfig::in_root_area`). Must
    /// lie in `[superblock::ROOT_AREAS, 4096)`: below are the fixed roots
    /// and the catalog (issue 31).
    pub header_off: u64,
    /// Simulated MS CPU time per node a handler reads or writes, in virtual ns
    /// (default 300: a binary search over a 1 KB node with a few cache
    /// misses; an estimate until the simulator is calibrated, issue 9).
    /// Charged on `sim` only; real fabrics spend real time.
    pub ms_node_ns: u32,
    /// Number of partitions (1..=[`MAX_PARTITIONS`]); 0 means one per MS,
    /// evenly split (resolved when the tree is opened).
    pub parts: u16,
    /// Split points: partition `p > 0` starts at `splits[p - 1]` (the key's
    /// first 8 bytes as a big-endian u64); strictly increasing.
    pub splits: [u64; MAX_PARTITIONS - 1],
}

impl Default for NamConfig {
    fn default() -> Self {
        NamConfig {
            header_off: superblock::NAM_HEADERS,
            ms_node_ns: 300,
            parts: 0,
            splits: [0; MAX_PARTITIONS - 1],
        }
    }
}

/// A key's first 8 bytes as a big-endian u64 (zero-padded).
fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl NamConfig {
    /// `parts` partitions splitting the 64-bit key-prefix space evenly.
    pub fn uniform(parts: u16) -> Self {
        Self::weighted(&vec![1; parts.max(1) as usize])
    }

    /// One partition per weight, each taking that share of the key-prefix
    /// space (Ziegler §6's skewed placement is `&[80, 12, 5, 3]`).
    pub fn weighted(weights: &[u32]) -> Self {
        Self::split(weights, |acc, total| {
            ((acc << 64) / total).min(u64::MAX as u128) as u64
        })
    }

    /// One partition per weight (at most [`MAX_PARTITIONS`]), partition
    /// `i + 1` starting at `at(acc, total)`: `acc` the weights of
    /// partitions `0..=i`, `total` all of them (at least 1).
    fn split(weights: &[u32], at: impl Fn(u128, u128) -> u64) -> Self {
        let mut c = NamConfig {
            parts: weights.len().clamp(1, MAX_PARTITIONS) as u16,
            ..Default::default()
        };
        let total: u128 = weights.iter().map(|&w| w as u128).sum::<u128>().max(1);
        let mut acc = 0u128;
        for (i, w) in weights.iter().take(c.parts as usize - 1).enumerate() {
            acc += *w as u128;
            c.splits[i] = at(acc, total);
        }
        c
    }

    /// `parts` partitions holding about equal numbers of `sorted` keys
    /// (quantiles of their prefixes; `sorted` ascending).
    pub fn from_sample(sorted: &[&[u8]], parts: u16) -> Self {
        let parts = parts.clamp(1, MAX_PARTITIONS as u16);
        Self::from_sample_weighted(sorted, &vec![1; parts as usize])
    }

    /// One partition per weight (at most [`MAX_PARTITIONS`]; more are cut
    /// off), each holding that share of the `sorted` keys (ascending): the
    /// data skew of Ziegler §6 ("80,12,5,3": 80% of the data on one
    /// server). Keys whose prefixes crowd part of the prefix space, as
    /// YCSB's hashed integers do (their top bit is 0), get the shares that
    /// [`NamConfig::weighted`] would give the prefix space instead. A zero
    /// weight, or shares that split between two keys of one prefix, make
    /// two partitions start at one fence, which [`crate::FgTree::open`]
    /// refuses. Without keys: [`NamConfig::weighted`].
    pub fn from_sample_weighted(sorted: &[&[u8]], weights: &[u32]) -> Self {
        if sorted.is_empty() {
            return Self::weighted(weights);
        }
        let n = sorted.len() as u128;
        Self::split(weights, |acc, total| {
            sorted
                .get((acc * n / total) as usize)
                .map_or(u64::MAX, |k| prefix(k))
        })
    }

    /// Superblock bytes the headers take from `header_off` on each of
    /// `num_ms` MSs: `ceil(parts / num_ms)` headers of [`ms::HEADER_BYTES`]
    /// (`parts == 0`: one per MS).
    pub fn root_bytes(&self, num_ms: u16) -> u32 {
        let n = num_ms.max(1) as u64;
        let parts = if self.parts == 0 {
            n
        } else {
            self.parts as u64
        };
        (parts.div_ceil(n) * ms::HEADER_BYTES) as u32
    }

    /// This configuration with `parts == 0` resolved to one even partition per MS.
    pub(crate) fn resolved(mut self, num_ms: u16) -> Self {
        if self.parts == 0 {
            let u = Self::uniform(num_ms.max(1));
            self.parts = u.parts;
            self.splits = u.splits;
        }
        self
    }

    /// The low fence of partition `p` (`p == parts`: +inf) for `key_bytes` keys.
    pub(crate) fn fence(&self, p: u16, key_bytes: usize) -> Fence {
        if p == 0 {
            return Fence::NegInf;
        }
        if p >= self.parts {
            return Fence::PosInf;
        }
        // Inline (a `FenceKey`): a scan crossing into the next partition
        // allocates nothing (issue 32).
        let mut k = crate::node::FenceKey::from_elem(0, key_bytes);
        let b = self.splits[p as usize - 1].to_be_bytes();
        let n = key_bytes.min(8);
        k[..n].copy_from_slice(&b[..n]);
        Fence::Key(k)
    }

    /// Where partition `p`'s header is: (MS, superblock offset).
    pub(crate) fn header(&self, p: u16, num_ms: u16) -> (u16, u64) {
        let n = num_ms.max(1);
        (p % n, self.header_off + (p / n) as u64 * ms::HEADER_BYTES)
    }

    /// Checks the resolved configuration for `key_bytes` keys on `num_ms`
    /// MSs: fences strictly increasing, every header inside the superblock
    /// and clear of its fixed roots and catalog ([`ms::header_in_bounds`]).
    pub(crate) fn validate(&self, key_bytes: usize, num_ms: u16) -> Result<(), String> {
        if self.parts == 0 || self.parts as usize > MAX_PARTITIONS {
            return Err(format!("{} NAM partitions, want 1..=16", self.parts));
        }
        let last = self.header(self.parts - 1, num_ms).1;
        if !ms::header_in_bounds(self.header_off) || !ms::header_in_bounds(last) {
            return Err(format!(
                "NAM headers from offset {} for {} partitions over {num_ms} MSs leave \
                 the superblock's header range [{}, {}) (8-byte aligned)",
                self.header_off,
                self.parts,
                superblock::ROOT_AREAS,
                superblock::BYTES
            ));
        }
        for p in 2..self.parts {
            if let (Fence::Key(a), Fence::Key(b)) =
                (self.fence(p - 1, key_bytes), self.fence(p, key_bytes))
            {
                if a >= b {
                    return Err(format!(
                        "NAM partitions {} and {p} start at the same {key_bytes}-byte key",
                        p - 1
                    ));
                }
            }
        }
        Ok(())
    }

    /// The partition whose fences cover `key`. Partition `p + 1`'s fence is
    /// the first `n = min(8, key_bytes)` bytes of `splits[p]` followed by
    /// zeros, so `key >= fence` exactly when `key[..n] >= splits[p][..n]`:
    /// the same answer as comparing with [`NamConfig::fence`], without
    /// building the fence (this runs once per operation).
    pub fn partition_of(&self, key: &[u8]) -> u16 {
        let n = key.len().min(8);
        let mut p = 0;
        while p + 1 < self.parts && key[..n] >= self.splits[p as usize].to_be_bytes()[..n] {
            p += 1;
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `partition_of` agrees with comparing keys against the fences that
    /// the trees are built with, for every key length (shorter and longer
    /// than the 8-byte prefix), keys on and next to each fence included.
    #[test]
    fn routing_agrees_with_the_fences() {
        let configs = [
            NamConfig::uniform(5),
            NamConfig::weighted(&[80, 12, 5, 3]),
            NamConfig::uniform(1),
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for c in configs {
            for kb in 1..=12usize {
                let mut keys: Vec<Vec<u8>> = Vec::new();
                for p in 1..c.parts {
                    if let Fence::Key(f) = c.fence(p, kb) {
                        keys.push(f.to_vec());
                        let mut below = f.to_vec();
                        if let Some(b) = below.iter_mut().rev().find(|b| **b > 0) {
                            *b -= 1;
                        }
                        keys.push(below);
                    }
                }
                for _ in 0..200 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let mut k = x.to_be_bytes().to_vec();
                    k.resize(kb, 0x5a);
                    keys.push(k);
                }
                for k in keys {
                    let by_fence = (1..c.parts)
                        .filter(|&p| match c.fence(p, kb) {
                            Fence::Key(f) => k[..] >= f[..],
                            _ => false,
                        })
                        .count() as u16;
                    assert_eq!(c.partition_of(&k), by_fence, "{k:?} with {kb}-byte keys");
                }
            }
        }
    }
}

//! [`IndexConfig`]: what a service chooses about an index (kind, key width,
//! node size, cache); everything the fabric decides (chunk size, MS count,
//! device memory and masked CAS for the lock table, the root's place in the
//! catalog) is derived when the cluster resolves it into the family's own
//! configuration (`Plan`).

use crate::error::Error;
use crate::kind::{Family, IndexKind};
use dm_art::{DolphinConfig, KeyCodec, SmartConfig};
use dm_tree::{DexCluster, DexConfig, LockTableConfig, NamConfig, TreeConfig};
use dm_verbs::Caps;
use std::ops::Range;
use std::sync::Arc;

/// An index's configuration. Build it with [`IndexConfig::new`] and the
/// `with_*` methods; the defaults are the papers' (and `dm-bench ycsb`'s).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexConfig {
    /// Which index.
    pub kind: IndexKind,
    /// Key width in bytes: every key has exactly this length (default 8:
    /// `u64::to_be_bytes`). [`IndexKind::key_rule`] gives the allowed range.
    pub key_bytes: usize,
    /// Node bytes of the B+trees and DEX, leaf bytes of Dolphin (default
    /// 1024, Sherman §5.1). Ignored by the radix family, whose catalog
    /// entries do not record it ([`IndexConfig::descriptor`]).
    pub node_bytes: usize,
    /// Index cache per compute server, bytes (default 64 MiB): Sherman's and
    /// FG+'s cache of leaf parents and top levels (Sherman §4.1), SMART's
    /// ART cache (§4.4), Dolphin's cache, DEX's partition cache (§5). 0: no
    /// cache.
    pub cache_bytes: u64,
    /// SMART's read-delegation and write-combining table entries per CS
    /// (§4.2; default 1024; 1 to [`MAX_RDWC_ENTRIES`]).
    pub rdwc_entries: usize,
    /// The NAM designs' partitions (default: one per MS, splitting the key
    /// space evenly; Ziegler et al. §3).
    pub nam: NamConfig,
    /// DEX's knobs (§4-6). Empty `bounds` (the default): the key space is
    /// split evenly over the cluster's compute servers by the keys' first
    /// two bytes. `local_cs` and `forward` are set by the cluster.
    pub dex: DexConfig,
    /// Sherman's techniques, if not the kind's own (a lock back-off, FAA
    /// unlock: `dm_runtime::lock::LockTechniques`).
    pub tree_techniques: Option<dm_tree::Techniques>,
    /// How the B+tree family READs a node without its lock (default: one
    /// READ checked by the node's checksum; `NodeRead::Optimistic`: the
    /// 3-READ optimistic read DEX §8.1 ran its Sherman baseline with).
    pub node_read: dm_tree::NodeRead,
    /// How the B+tree family uses its index cache when the tree changed
    /// under it (default: B-link moves right, the top two levels cached;
    /// `ShermanCache::Authors`: the published Sherman code's, which drops a
    /// stale entry and goes from the root, SMART §5.1.3's baseline).
    pub sherman_cache: dm_tree::ShermanCache,
    /// How Dolphin's updates publish their values (default: the sound
    /// key-word CAS; `dm_art::DolphinUpdate`, whose other variants are the
    /// paper's and its authors' protocols, kept to measure their claims).
    pub dolphin_update: dm_art::DolphinUpdate,
    /// The radix family's ART cache with its authors' central FIFO
    /// modelled on `sim`: virtual ns each admission holds a CS-wide lock
    /// (`dm_art::ArtCache::with_fifo_hold_ns`; DEX §2.3 and §8.2 measure
    /// what the artifact's FIFO costs). 0 (default): not modelled. No
    /// effect on wall-clock fabrics.
    pub art_fifo_hold_ns: u64,
    /// The radix family's same-key write queue absorbs its writers: a
    /// leader about to publish covers the writers queued so far, which
    /// return its result without writing (`dm_art::Rdwc::absorb_writers`;
    /// the sound version of the SMART artifact's ART baseline hand-over).
    /// Default false. No effect where writers do not queue or combine.
    pub art_absorb_writers: bool,
    /// The radix family's ART cache drops an entry whose node type hint
    /// proves stale, as the SMART artifact does, instead of refreshing the
    /// hint (`dm_art::ArtCache::with_stale_hints_dropped`). Default false.
    pub art_drop_stale_hints: bool,
    /// SMART's techniques, if not the rung's own (SMART §5.3.1's switches).
    pub radix_techniques: Option<dm_art::Techniques>,
    /// SMART's read delegation (§4.2.1); `None`: on for `smart` only.
    pub read_delegation: Option<bool>,
    /// SMART's write combining (§4.2.1); `None`: on for `smart` only.
    pub write_combining: Option<bool>,
    /// The global lock table of the lock-table-locked designs (Sherman §4.2
    /// and the ART rungs' HOCL): where it lives and its slots; `None`
    /// (default): derived from the fabric, `LockTableConfig::for_caps`
    /// (device memory with masked CAS if the NIC has it, else host memory).
    /// Every process of a deployment must choose the same.
    pub lock_table: Option<LockTableConfig>,
    /// Compute servers whose shared state differs from the rest
    /// ([`CsOverride`]: a machine with less DRAM gets a smaller cache).
    /// Later entries for one CS win.
    pub cs_overrides: Vec<(u16, CsOverride)>,
}

/// Most read-delegation/write-combining entries per CS (a table of 2^20
/// entries; SMART §4.2.1 finds 128 enough for 16 clients per CS).
pub const MAX_RDWC_ENTRIES: usize = 1 << 20;

/// What one compute server chooses differently from the index's
/// configuration: each `Some` replaces the [`IndexConfig`] field of the
/// same name for that CS's cores (the state they share per CS: the index
/// cache, SMART §4.2.1's read-delegation and write-combining table).
/// Purely local: the layout on the memory servers does not change, so CSs
/// with different overrides operate on one index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CsOverride {
    /// Index cache bytes of this CS (0: none).
    pub cache_bytes: Option<u64>,
    /// Read-delegation/write-combining table entries (SMART §4.2.1).
    pub rdwc_entries: Option<usize>,
    /// SMART's read delegation on this CS.
    pub read_delegation: Option<bool>,
    /// SMART's write combining on this CS.
    pub write_combining: Option<bool>,
    /// Whether same-key writers of this CS queue in its local lock table
    /// (E-HOCL, SMART §5.3.1); `None`: as
    /// [`IndexConfig::queues_same_key_writers`] derives it.
    pub queue_same_key_writers: Option<bool>,
    /// Whether this CS's queued same-key writers are absorbed
    /// ([`IndexConfig::art_absorb_writers`]).
    pub absorb_writers: Option<bool>,
}

impl IndexConfig {
    /// `kind` with every default.
    pub fn new(kind: IndexKind) -> Self {
        IndexConfig {
            kind,
            key_bytes: 8,
            node_bytes: dm_tree::DEFAULT_NODE_BYTES,
            cache_bytes: 64 << 20,
            rdwc_entries: 1024,
            nam: NamConfig::default(),
            dex: DexConfig {
                cache_bytes: 64 << 20,
                ..DexConfig::default()
            },
            tree_techniques: None,
            node_read: dm_tree::NodeRead::Checksum,
            sherman_cache: dm_tree::ShermanCache::Ours,
            dolphin_update: dm_art::DolphinUpdate::KeyWordCas,
            art_fifo_hold_ns: 0,
            art_drop_stale_hints: false,
            art_absorb_writers: false,
            radix_techniques: None,
            read_delegation: None,
            write_combining: None,
            lock_table: None,
            cs_overrides: Vec::new(),
        }
    }

    /// With CS `cs`'s shared state chosen by `o` ([`CsOverride`]).
    pub fn with_cs_override(mut self, cs: u16, o: CsOverride) -> Self {
        self.cs_overrides.push((cs, o));
        self
    }

    /// CS `cs`'s override (the last given), or none.
    pub fn cs_override(&self, cs: u16) -> CsOverride {
        self.cs_overrides
            .iter()
            .rev()
            .find(|(c, _)| *c == cs)
            .map(|(_, o)| *o)
            .unwrap_or_default()
    }

    /// With keys of `n` bytes.
    pub fn with_key_bytes(mut self, n: usize) -> Self {
        self.key_bytes = n;
        self
    }

    /// With `n`-byte nodes (B+trees, DEX) or leaves (Dolphin).
    pub fn with_node_bytes(mut self, n: usize) -> Self {
        self.node_bytes = n;
        self
    }

    /// With an index cache of `bytes` per compute server (DEX's too).
    pub fn with_cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self.dex.cache_bytes = bytes;
        self
    }

    /// SMART's radix rungs: whether same-key writers of a CS queue in its
    /// local lock table (HOCL's, which SMART §5.1.3 gives every baseline).
    /// Without write combining they do, in front of the rear lock (E-HOCL,
    /// §5.3.1, Fig. 19) and of RCU leaf writes; lock-table-locked leaves
    /// queue in HOCL's own table instead.
    pub fn queues_same_key_writers(&self) -> bool {
        let wc = self
            .write_combining
            .unwrap_or(self.kind == IndexKind::Smart);
        self.queues_without_combining(wc)
    }

    /// [`IndexConfig::queues_same_key_writers`] with write combining `wc`.
    pub(crate) fn queues_without_combining(&self, wc: bool) -> bool {
        let t = self
            .radix_techniques
            .unwrap_or(self.kind.radix_techniques());
        !wc && (t.rear_lock || !t.in_place_leaf)
    }

    /// Checks what can be checked without a fabric: the key width.
    pub fn validate(&self) -> Result<(), Error> {
        self.kind
            .key_rule()
            .check_width(self.kind, self.key_bytes)?;
        let entries = self.cs_overrides.iter().filter_map(|(_, o)| o.rdwc_entries);
        if let Some(n) = entries
            .chain([self.rdwc_entries])
            .find(|n| !(1..=MAX_RDWC_ENTRIES).contains(n))
        {
            return Err(Error::BadConfig(format!(
                "rdwc_entries {n}: 1 to {MAX_RDWC_ENTRIES}"
            )));
        }
        if self.kind == IndexKind::Dolphin && self.node_bytes < 64 {
            return Err(Error::BadConfig(format!(
                "dolphin leaves of {} bytes: at least 64",
                self.node_bytes
            )));
        }
        Ok(())
    }

    /// The catalog's kind descriptor: `kind code << 48 | key_bytes << 32 |
    /// node_bytes` (what a second process must agree on to open the index).
    /// The radix family has no node size (SMART's nodes are sized by their
    /// type, §4.1), so its descriptor records 0 there, and two processes
    /// that set different (ignored) `node_bytes` open the same index.
    pub fn descriptor(&self) -> u64 {
        (self.kind.code() as u64) << 48
            | (self.key_bytes as u64 & 0xffff) << 32
            | self.recorded_node_bytes() as u64 & 0xffff_ffff
    }

    /// `node_bytes` where the kind uses it, else 0 ([`IndexConfig::descriptor`]).
    fn recorded_node_bytes(&self) -> usize {
        match self.kind.family() {
            Family::Radix => 0,
            _ => self.node_bytes,
        }
    }

    /// The configuration a descriptor records, with local choices (cache
    /// size, table sizes) at their defaults (and the radix family's
    /// unused `node_bytes` at its default).
    pub fn from_descriptor(d: u64) -> Result<IndexConfig, Error> {
        let kind = IndexKind::from_code((d >> 48) as u8)
            .ok_or_else(|| Error::Catalog(format!("unknown index kind in descriptor {d:#x}")))?;
        let mut cfg = IndexConfig::new(kind).with_key_bytes((d >> 32 & 0xffff) as usize);
        if kind.family() != Family::Radix {
            cfg = cfg.with_node_bytes((d & 0xffff_ffff) as usize);
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// What the catalog records of this configuration, in words: "a
    /// Sherman with 8-byte keys and 1024-byte nodes" (no node size for the
    /// radix family).
    pub fn describe(&self) -> String {
        let mut s = format!("a {} with {}-byte keys", self.kind, self.key_bytes);
        if self.kind.family() != Family::Radix {
            s += &format!(" and {}-byte nodes", self.node_bytes);
        }
        s
    }

    /// Root-area bytes the index keeps in the superblock (the same offset
    /// on every MS), as its family's configuration states them
    /// (`TreeConfig::root_bytes`, `SmartConfig::ROOT_BYTES`,
    /// `DolphinConfig::ROOT_BYTES`).
    pub(crate) fn root_bytes(&self, site: &Site) -> u32 {
        match self.kind.family() {
            Family::BTree | Family::Dex => self.tree_config(site).root_bytes(),
            Family::Radix => SmartConfig::ROOT_BYTES,
            Family::Dolphin => DolphinConfig::ROOT_BYTES,
        }
    }

    /// The B+tree configuration (also DEX's tree) before its root is placed.
    fn tree_config(&self, site: &Site) -> TreeConfig {
        TreeConfig {
            node_bytes: self.node_bytes,
            key_bytes: self.key_bytes,
            chunk_bytes: site.chunk_bytes,
            num_ms: site.num_ms,
            techniques: self.tree_techniques.unwrap_or(self.kind.tree_techniques()),
            lock_table: self
                .lock_table
                .unwrap_or_else(|| LockTableConfig::for_caps(site.caps)),
            design: self.kind.design(),
            nam: self.nam,
            node_read: self.node_read,
            sherman_cache: self.sherman_cache,
            ..Default::default()
        }
    }

    /// The family's configuration for `site`, its root words at `root`.
    pub(crate) fn resolve(&self, site: &Site, root: Root) -> Result<Plan, Error> {
        self.validate()?;
        if self.node_bytes as u64 > site.chunk_bytes.min(u32::MAX as u64) {
            // A node lies in one chunk, and the catalog's descriptor keeps
            // 32 bits of its size.
            return Err(Error::BadConfig(format!(
                "node_bytes {} exceeds the memory servers' chunks of {} bytes",
                self.node_bytes, site.chunk_bytes
            )));
        }
        let place_t = |c: TreeConfig| match root {
            Root::Area(off) => c.in_root_area(off),
            Root::HandBuilt => c,
        };
        let tcfg = place_t(self.tree_config(site));
        Ok(match self.kind.family() {
            Family::BTree => Plan::BTree(tcfg),
            Family::Dex => {
                let mut d = self.dex.clone();
                if d.bounds.is_empty() {
                    d.bounds = even_bounds(self.key_bytes, site.num_cs);
                }
                d.local_cs = site.local_cs.clone();
                d.forward = true;
                Plan::Dex(DexCluster::new(tcfg, d, site.num_cs)?)
            }
            Family::Radix => Plan::Radix(placed(
                SmartConfig {
                    keys: KeyCodec::fixed(self.key_bytes),
                    chunk_bytes: site.chunk_bytes,
                    num_ms: site.num_ms,
                    techniques: self
                        .radix_techniques
                        .unwrap_or(self.kind.radix_techniques()),
                    lock_table: tcfg.lock_table,
                    ..Default::default()
                },
                root,
                SmartConfig::in_root_area,
            )),
            Family::Dolphin => Plan::Dolphin(placed(
                DolphinConfig {
                    chunk_bytes: site.chunk_bytes,
                    num_ms: site.num_ms,
                    leaf_bytes: self.node_bytes,
                    update: self.dolphin_update,
                    ..Default::default()
                },
                root,
                DolphinConfig::in_root_area,
            )),
        })
    }
}

/// `c` placed at `root` by `place` (or left at its defaults).
fn placed<C>(c: C, root: Root, place: fn(C, u64) -> C) -> C {
    match root {
        Root::Area(off) => place(c, off),
        Root::HandBuilt => c,
    }
}

/// Where an index keeps its root words in the superblock
/// (`dm_verbs::ms::superblock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// The root area a catalog entry owns, at this superblock offset (every
    /// MS): how [`crate::Cluster`] places every index.
    Area(u64),
    /// The family's hand-built defaults (FG 0, SMART 16, Dolphin 32, NAM
    /// headers from 2560): one index of each family per fabric, no catalog
    /// (`dm-bench`, which runs one index and meets its other processes at
    /// a barrier).
    HandBuilt,
}

/// `num_cs - 1` bounds splitting the key space evenly by the keys' first
/// two bytes (big-endian), `key_bytes` long.
fn even_bounds(key_bytes: usize, num_cs: u16) -> Vec<Vec<u8>> {
    (1..num_cs as u32)
        .map(|i| {
            let p = (i * 65536 / num_cs as u32) as u16;
            let mut k = vec![0u8; key_bytes];
            let b = p.to_be_bytes();
            let n = key_bytes.min(2);
            k[..n].copy_from_slice(&b[..n]);
            k
        })
        .collect()
}

/// What the cluster knows that an index configuration derives from.
#[derive(Clone, Debug)]
pub struct Site {
    /// `MsConfig::chunk_bytes` of the memory servers.
    pub chunk_bytes: u64,
    pub num_ms: u16,
    /// Device memory and masked CAS (where the global lock table goes).
    pub caps: Caps,
    /// Compute servers of the whole deployment (DEX's partitions).
    pub num_cs: u16,
    /// Those whose cores run in this process.
    pub local_cs: Range<u16>,
}

impl Site {
    /// The site of `fabric` for compute servers `local_cs` of this process,
    /// of `num_cs` in the deployment.
    pub fn of<F: dm_verbs::Fabric>(fabric: &F, local_cs: Range<u16>, num_cs: u16) -> Site {
        Site {
            chunk_bytes: fabric.ms_config().chunk_bytes,
            num_ms: fabric.num_ms(),
            caps: fabric.caps(),
            num_cs,
            local_cs,
        }
    }
}

/// An index configuration resolved against a cluster.
#[derive(Clone)]
pub(crate) enum Plan {
    BTree(TreeConfig),
    Dex(Arc<DexCluster>),
    Radix(SmartConfig),
    Dolphin(DolphinConfig),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_round_trip() {
        for k in IndexKind::ALL {
            let w = k.key_rule().max.min(16);
            let c = IndexConfig::new(k).with_key_bytes(w).with_node_bytes(512);
            let back = IndexConfig::from_descriptor(c.descriptor()).unwrap();
            let nodes = match k.family() {
                Family::Radix => IndexConfig::new(k).node_bytes,
                _ => 512,
            };
            assert_eq!((back.kind, back.key_bytes, back.node_bytes), (k, w, nodes));
        }
    }

    #[test]
    fn the_radix_familys_ignored_node_size_is_not_recorded() {
        for k in IndexKind::ALL {
            let a = IndexConfig::new(k).with_node_bytes(512);
            let b = IndexConfig::new(k).with_node_bytes(2048);
            let radix = k.family() == Family::Radix;
            assert_eq!(a.descriptor() == b.descriptor(), radix, "{k}");
            assert_eq!(a.describe().contains("nodes"), !radix, "{k}");
        }
    }

    /// Another process's index of another kind is named in words.
    #[test]
    fn a_kind_mismatch_across_processes_reads_in_words() {
        let e = Error::from(dm_runtime::catalog::CatalogError::KindMismatch {
            name: "users".into(),
            want: IndexConfig::new(IndexKind::Smart).descriptor(),
            found: IndexConfig::new(IndexKind::Sherman).descriptor(),
        });
        let want = "catalog name \"users\" is a sherman with 8-byte keys and 1024-byte nodes, \
                    not a smart with 8-byte keys";
        assert!(matches!(&e, Error::Catalog(m) if m == want), "{e:?}");
        let odd = Error::from(dm_runtime::catalog::CatalogError::KindMismatch {
            name: "x".into(),
            want: 0xff << 48,
            found: IndexConfig::new(IndexKind::Fg).descriptor(),
        });
        assert!(
            matches!(&odd, Error::Catalog(m) if m.ends_with("not an index of kind 0xff000000000000")),
            "{odd:?}"
        );
    }

    #[test]
    fn key_widths_outside_the_rule_are_refused() {
        assert!(IndexConfig::new(IndexKind::Sherman)
            .with_key_bytes(33)
            .validate()
            .is_err());
        assert!(IndexConfig::new(IndexKind::Smart)
            .with_key_bytes(255)
            .validate()
            .is_ok());
        assert!(IndexConfig::new(IndexKind::Smart)
            .with_key_bytes(0)
            .validate()
            .is_err());
        assert!(IndexConfig::new(IndexKind::Dolphin)
            .with_key_bytes(16)
            .validate()
            .is_err());
    }

    #[test]
    fn even_bounds_increase() {
        let b = even_bounds(8, 4);
        assert_eq!(b.len(), 3);
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        assert!(even_bounds(1, 3).windows(2).all(|w| w[0] < w[1]));
    }
}

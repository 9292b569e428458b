//! B-link node layout (FG, Ziegler et al. §4-5; FG+ as Sherman §5 describes it)
//! and its validation.
//!
//! Byte layout of one node (`node_bytes`, default 1024; `Kp` = key size
//! rounded up to 8; all integers little-endian):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | lock word: 0 free, else the holder's tag (CAS to take, WRITE 0 to release) |
//! | 8 | 8 | checksum of bytes `[16, node_bytes)` ([`dm_runtime::checksum`]) |
//! | 16 | 1 | level: 0 = leaf |
//! | 17 | 1 | flags: bit 0 low fence is -inf, bit 1 high fence is +inf, bit 2 unsorted leaf, bit 3 head node |
//! | 18 | 2 | count: entries in use |
//! | 20 | 4 | node version: bumped by every whole-node write of a node that was read (Sherman §4.4; see [`crate::two_level`]) |
//! | 24 | 8 | sibling pointer ([`GlobalAddr`] raw; NULL = rightmost) |
//! | 32 | Kp | low fence key (inclusive) |
//! | 32+Kp | Kp | high fence key (exclusive) |
//! | 32+2Kp | count x (Kp+8) | sorted entries: key, then value (leaf) or child pointer (internal) |
//!
//! Leaves of a tree with Sherman's two-level versions use the unsorted layout
//! of [`crate::two_level`] instead (flag bit 2): header checksum plus a check
//! word per entry slot, so one entry can be written back alone.
//!
//! A **head node** ([`crate::head`], Ziegler et al. §4) is a leaf-level node
//! with flag bit 3, an empty key range (low fence = high fence) and, as its
//! sorted entries, the low fence and address of each leaf it lists.
//!
//! An internal node's first entry key equals its low fence: entry *i*'s child
//! covers `[key_i, key_{i+1})` and the last one `[key_last, high fence)`.
//!
//! **Why a checksum.** A READ of more than 8 bytes is not a snapshot: its words
//! may come from different versions, in any order. A version word inside the
//! same READ proves nothing. So every write-back stores the checksum of the
//! node's bytes after the checksum word, and a reader accepts a node image only if
//! the checksum it recomputes matches ([`dm_runtime::checksum`] says why a
//! torn image is rejected). The lock word is
//! outside the checksum because it changes by CAS independently of the content.
//! Writers hold the lock, so their own READ after locking sees a complete
//! version (the previous holder's write-back completed before its unlock WRITE
//! on the same QP).
//!
//! **Files.** `codec.rs`: [`Node::encode`] and [`Node::decode`]. `view.rs`:
//! `View`, answers read straight from a validated image. `edit.rs`: a
//! sorted image changed in place (a value set, an entry inserted) to the
//! bytes the encode of the changed node gives. `order.rs`: a validated
//! image's entries in key order, in place (what a scan walks).

use dm_verbs::GlobalAddr;

mod codec;
mod edit;
mod order;
mod view;

pub(crate) use edit::{insert_sorted_in_place, set_sorted_value, set_sorted_value_same_version};
pub(crate) use view::{Loc, View};

/// Byte-string order of two keys of one tree (equal lengths), 8-byte keys
/// compared as one big-endian word: the same order without a `memcmp`
/// call per comparison (issue 32: keys as fixed-width words where the
/// layout allows; YCSB's keys are 8 bytes).
#[inline(always)]
pub(crate) fn cmp_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
        (Ok(a), Ok(b)) => u64::from_be_bytes(a).cmp(&u64::from_be_bytes(b)),
        _ => a.cmp(b),
    }
}

/// The index of the child covering `key` among `n` sorted separators
/// (`sep(i)`): the last separator <= `key`, else the first (0 when `n` is
/// 0). One binary search for every form of an internal node:
/// [`Node::child_for`], a node image in place, the index cache's flat
/// copies.
pub(crate) fn child_index<'a>(n: usize, sep: impl Fn(usize) -> &'a [u8], key: &[u8]) -> usize {
    // `lo` ends as the number of separators that are <= `key`.
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if cmp_keys(sep(mid), key).is_le() {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.saturating_sub(1)
}

pub const OFF_LOCK: usize = 0;
pub const OFF_CSUM: usize = 8;
const OFF_LEVEL: usize = 16;
const OFF_FLAGS: usize = 17;
const OFF_COUNT: usize = 18;
const OFF_VERSION: usize = 20;
const OFF_SIBLING: usize = 24;
const OFF_FENCES: usize = 32;
const FLAG_LOW_INF: u8 = 1;
const FLAG_HIGH_INF: u8 = 2;
const FLAG_UNSORTED: u8 = 4;
const FLAG_HEAD: u8 = 8;

/// The default node size of the B+tree family in bytes (Sherman §5, FG+: 1 KB).
pub const DEFAULT_NODE_BYTES: usize = 1024;

/// Node geometry derived from the tree configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub node_bytes: usize,
    /// Key size in bytes (1..=32).
    pub key_bytes: usize,
    /// Key slot size (key_bytes rounded up to 8).
    pub kp: usize,
}

impl Geometry {
    pub fn new(node_bytes: usize, key_bytes: usize) -> Self {
        Geometry {
            node_bytes,
            key_bytes,
            kp: key_bytes.div_ceil(8) * 8,
        }
    }

    pub(crate) fn entries_off(&self) -> usize {
        OFF_FENCES + 2 * self.kp
    }

    /// Bytes of one slot of an unsorted leaf: key, value, check word.
    pub fn slot_bytes(&self) -> usize {
        self.kp + 16
    }

    /// Entries an unsorted leaf ([`crate::two_level`]) holds (0 if the
    /// header and fences alone overflow the node).
    pub fn unsorted_capacity(&self) -> usize {
        self.node_bytes.saturating_sub(self.entries_off()) / self.slot_bytes()
    }

    fn entry_bytes(&self) -> usize {
        self.kp + 8
    }

    /// Entries a sorted node (internal, or an FG+ leaf) holds (0 if the
    /// header and fences alone overflow the node: a 64-byte node with
    /// 32-byte keys, whose two fences need 96 bytes past the header).
    pub fn capacity(&self) -> usize {
        self.node_bytes.saturating_sub(self.entries_off()) / self.entry_bytes()
    }
}

/// A fence key's bytes, inline up to 32 bytes (the family's longest key,
/// [`Geometry::key_bytes`]): cloning a fence allocates nothing (issue 32:
/// a DEX miss cloned its child's two fences twice, about 2.2 of the 4.9
/// heap allocations per get of a 1 MiB cache on loopback).
pub type FenceKey = smallvec::SmallVec<[u8; 32]>;

/// An entry's key bytes, inline as a [`FenceKey`]'s: decoding a node
/// allocates its entry array and nothing per entry (issue 32: a DEX leaf
/// admission made 31 of its about 40 allocations in the decode, one per
/// entry; `docs/experiments/cpu-ratios.md`).
pub type NodeKey = FenceKey;

/// A fence key: a key, or an infinity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fence {
    NegInf,
    Key(FenceKey),
    PosInf,
}

impl Fence {
    /// The fence at key `k`.
    pub fn key(k: &[u8]) -> Fence {
        Fence::Key(FenceKey::from_slice(k))
    }
}

impl Fence {
    /// The first entry key of an internal node whose low fence is `self`:
    /// the fence key, or `key_bytes` zeros for -inf (see the module docs).
    pub fn first_entry_key(&self, key_bytes: usize) -> NodeKey {
        match self {
            Fence::Key(k) => k.clone(),
            _ => NodeKey::from_elem(0, key_bytes),
        }
    }

    /// As a high fence: `key` is at or above it (belongs further right).
    pub(crate) fn high_excludes(&self, key: &[u8]) -> bool {
        match self {
            Fence::PosInf => false,
            Fence::Key(h) => cmp_keys(key, h).is_ge(),
            Fence::NegInf => true,
        }
    }
}

/// A decoded, validated node. Only [`Node::decode`] (checksum verified) makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub level: u8,
    pub low: Fence,
    pub high: Fence,
    pub sibling: GlobalAddr,
    /// Sorted by key; values are leaf values or child pointers.
    pub entries: Vec<(NodeKey, u64)>,
    /// Node version (offset 20); writers bump it before a whole-node write.
    pub version: u32,
    /// An unsorted leaf with entry check words ([`crate::two_level`]).
    pub unsorted: bool,
    /// A head node ([`crate::head`]): no keys of its own; its entries are
    /// (low fence, address) of the leaves that follow it.
    pub head: bool,
    /// For a decoded unsorted leaf: the slot of each entry, parallel to
    /// `entries` (empty otherwise). Whole-node writes ignore it: they lay the
    /// entries out sorted from slot 0 (§4.4: entries are sorted on split).
    pub slots: Vec<u16>,
}

impl Node {
    /// An empty node covering `[low, high)`.
    pub fn empty(level: u8, low: Fence, high: Fence) -> Self {
        Node {
            level,
            low,
            high,
            sibling: GlobalAddr::NULL,
            entries: Vec::new(),
            version: 0,
            unsorted: false,
            head: false,
            slots: Vec::new(),
        }
    }

    /// Entries this node can hold in its layout.
    pub fn capacity(&self, g: &Geometry) -> usize {
        if self.unsorted {
            g.unsorted_capacity()
        } else {
            g.capacity()
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Key is at or above the high fence: it belongs to a node further right.
    pub fn beyond_high(&self, key: &[u8]) -> bool {
        self.high.high_excludes(key)
    }

    /// Key is below the low fence (the node was reached through a stale pointer).
    pub fn below_low(&self, key: &[u8]) -> bool {
        match &self.low {
            Fence::NegInf => false,
            Fence::Key(l) => cmp_keys(key, l).is_lt(),
            Fence::PosInf => true,
        }
    }

    /// Index of the entry whose key equals `key`.
    pub fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| cmp_keys(k, key))
    }

    /// The B-link split: moves the upper half of the entries into a new right
    /// node covering `[separator, old high)` whose sibling is this node's old
    /// sibling, and makes this node end at the separator with the right node,
    /// to be written at `right_at`, as its sibling. Returns the separator
    /// (the right node's first key) and the right node. The caller writes
    /// the right node before this one, so a reader always finds moved keys
    /// through the sibling pointer.
    pub fn split_right(&mut self, right_at: GlobalAddr) -> (NodeKey, Node) {
        let right_entries = self.entries.split_off(self.entries.len() / 2);
        let sep = right_entries[0].0.clone();
        let mut right = Node::empty(self.level, Fence::key(&sep), self.high.clone());
        right.unsorted = self.unsorted;
        right.sibling = self.sibling;
        right.entries = right_entries;
        self.high = Fence::key(&sep);
        self.sibling = right_at;
        (sep, right)
    }

    /// The split of [`Node::split_right`] at `key` instead of the middle:
    /// entries below `key` stay, the rest move to the right node, which
    /// covers `[key, old high)` (`key` must lie inside this node's range;
    /// either side may end up empty). DEX uses it to make a partition bound
    /// a leaf fence (§4, re-partitioning). Returns the separator (`key`).
    pub fn split_at(&mut self, right_at: GlobalAddr, key: &[u8]) -> (NodeKey, Node) {
        let at = self.find(key).unwrap_or_else(|i| i);
        let right_entries = self.entries.split_off(at);
        let mut right = Node::empty(self.level, Fence::key(key), self.high.clone());
        right.unsorted = self.unsorted;
        right.sibling = self.sibling;
        right.entries = right_entries;
        self.high = Fence::key(key);
        self.sibling = right_at;
        (NodeKey::from_slice(key), right)
    }

    /// Internal node: the child covering `key` (last entry with key <= `key`).
    pub fn child_for(&self, key: &[u8]) -> GlobalAddr {
        let e = &self.entries;
        GlobalAddr::from_u64(e[child_index(e.len(), |i| &e[i].0, key)].1)
    }

    /// Bytes of MS memory holding live entries (for memory accounting).
    pub fn live_bytes(&self, g: &Geometry) -> usize {
        if self.head {
            return 0;
        }
        let per = if self.unsorted {
            g.slot_bytes()
        } else {
            g.entry_bytes()
        };
        self.entries.len() * per
    }
}

//! How a CS READs a remote node without its lock ([`NodeRead`],
//! [`crate::TreeConfig::node_read`]): our one READ validated by the node's
//! checksum, or the optimistic remote read DEX §8.1 ran its Sherman
//! baseline with (issue 34: the cause of DEX Table 2's 3.02 READs per
//! Sherman lookup); and how the index cache is used when the tree changed
//! under it ([`ShermanCache`]): ours, or the published Sherman code's.

use crate::tree::{FgTree, TreeError};
use dm_runtime::read;
use dm_verbs::GlobalAddr;

/// Byte offset and size of the word the optimistic read watches: level,
/// flags, count and the node version (offsets 16..24 of the node header,
/// [`crate::node`]); every whole-node write changes the version.
const VERSION_WORD: std::ops::Range<usize> = 16..24;

/// How [`FgTree`] READs a node it does not hold locked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeRead {
    /// One READ of the node, accepted when its checksum validates (torn or
    /// half-written images are READ again): 1 READ and 1 RTT per node.
    #[default]
    Checksum,
    /// The optimistic remote read (Ziegler et al. 2023; DEX §2.2 and §8.1:
    /// "an optimistic remote read needs two extra READs to verify", DEX's
    /// replacement for Sherman's version-based search): READ the node's
    /// version word, READ the node, READ the version word again; the image
    /// is accepted when the three agree and, as ever here, its checksum
    /// validates. 3 READs and 3 RTTs per node: the paper's baseline cost,
    /// for reproducing DEX Table 2 and Fig. 6 (`dm-bench ycsb --node-read
    /// optimistic`). A writer does as that baseline's did
    /// (baotonglu/dex `src/Tree.cpp` under `LOCK_VERSION`): one READ of
    /// the node it holds locked (`lock_and_read_page`), and before a
    /// release with writes that does not hand the lock over, one 8-byte
    /// READ for the version it writes back with the unlock
    /// (`write_page_and_unlock`; `FgTree::release`). Soundness still
    /// comes from the checksum: our lock word carries no version, so the
    /// watched word alone would not see a write that ends where it began.
    Optimistic,
}

impl NodeRead {
    /// The name `--node-read` takes.
    pub fn name(self) -> &'static str {
        match self {
            NodeRead::Checksum => "checksum",
            NodeRead::Optimistic => "optimistic",
        }
    }

    /// The protocol called `name` ([`NodeRead::name`]).
    pub fn named(name: &str) -> Option<NodeRead> {
        [NodeRead::Checksum, NodeRead::Optimistic]
            .into_iter()
            .find(|r| r.name() == name)
    }
}

/// How [`FgTree`] uses its index cache of leaf parents (Sherman §4.1)
/// when the tree has changed under it ([`crate::TreeConfig::sherman_cache`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShermanCache {
    /// Ours: a cached leaf that no longer covers a key is left by B-link
    /// moves right along sibling pointers (a reader at most 8; a writer
    /// under the lock, `FgTree::moved_right`), and the entry is dropped for
    /// the next operation; the cache also holds the top two levels, so a
    /// traversal for a miss or a split's parent starts below the root.
    #[default]
    Ours,
    /// The published Sherman's (thustorage/Sherman, `src/Tree.cpp`; the
    /// code SMART §5.1.3 ran as its Sherman baseline): the cache holds leaf
    /// parents only (`page_search` adds level-1 pages, the root pointer is
    /// the one thing above them kept); an operation whose cached leaf does
    /// not cover its key drops the entry and traverses from the root,
    /// READing every level (`Tree::search`; a writer first unlocks the leaf
    /// it locked and READ, `leaf_page_store` with `from_cache`); and a leaf
    /// split reached through the cache finds its parent from the root
    /// (`insert_internal`). A leaf reached from the root still moves right
    /// to its sibling, as ours. The root's address is kept per handle (the
    /// code's `g_root_ptr`, which a new root's RPC broadcast updates; here
    /// the pointer is READ again once that node has a right sibling, or is
    /// below the level sought), so a traversal READs the root node, not the
    /// pointer. Issue 34: the baseline SMART's Fig. 14 compared against
    /// (`dm-bench ycsb --sherman-cache authors`).
    Authors,
}

impl ShermanCache {
    /// The name `--sherman-cache` takes.
    pub fn name(self) -> &'static str {
        match self {
            ShermanCache::Ours => "ours",
            ShermanCache::Authors => "authors",
        }
    }

    /// The cache use called `name` ([`ShermanCache::name`]).
    pub fn named(name: &str) -> Option<ShermanCache> {
        [ShermanCache::Ours, ShermanCache::Authors]
            .into_iter()
            .find(|r| r.name() == name)
    }
}

impl FgTree {
    /// Whether the image `b` of the node at `a`, READ after the version word
    /// `before` ([`FgTree::version_word`]), stands under the optimistic
    /// read: a third READ of the version word must find it where it was,
    /// and the image must carry it too.
    pub(crate) async fn version_after(
        &self,
        a: GlobalAddr,
        before: u64,
        b: &[u8],
    ) -> Result<bool, TreeError> {
        let image = u64::from_le_bytes(b[VERSION_WORD].try_into().expect("8 bytes"));
        Ok(self.version_word(a).await? == before && image == before)
    }

    /// The version word of the node at `a`: the optimistic read's first
    /// READ, and its third ([`FgTree::version_after`]). The checksum read
    /// posts no verb around its READ (`FgTree::read_until`).
    pub(crate) async fn version_word(&self, a: GlobalAddr) -> Result<u64, TreeError> {
        let w = read(a.add(VERSION_WORD.start as u64), 8).await?;
        Ok(u64::from_le_bytes(w[..8].try_into().expect("8 bytes")))
    }
}

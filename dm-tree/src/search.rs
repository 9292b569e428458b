//! Traversal (Ziegler et al. §5.1, B-link search) and `get`.

use crate::cache::CacheId;
use crate::nam::Design;
use crate::node::{Node, View};
use crate::node_read::ShermanCache;
use crate::tree::{FgTree, TreeError};
use dm_verbs::GlobalAddr;

/// Outcome of a traversal towards `level`.
pub(crate) enum Found {
    /// The node at `level` covering the key (unlocked image).
    Node(GlobalAddr, Node),
    /// The tree's root is below `level`: (root address, root image).
    RootBelow(GlobalAddr),
}

impl FgTree {
    /// From the root down to the node at `level` whose fences cover `key`,
    /// moving right along sibling pointers where a concurrent split moved the
    /// key (B-link), restarting from the root if a node no longer covers it.
    ///
    /// With an index cache, the traversal starts below the cached highest two
    /// levels when it can (Sherman §4.1, type-2 cache), and caches the nodes
    /// of those levels and the leaf parents it reads from the root.
    pub(crate) async fn find(&self, key: &[u8], level: u8) -> Result<Found, TreeError> {
        // The published Sherman caches no level above the leaf parents
        // (`ShermanCache::Authors`): every traversal starts at the root.
        let tops = self.cfg.sherman_cache == ShermanCache::Ours;
        let mut from_top = self.cache.is_some() && tops;
        'restart: loop {
            let top = match (&self.cache, from_top) {
                (Some(c), true) => c.top_lookup(key, level),
                _ => None,
            };
            // The root level this traversal started under (0: from the cache).
            let (mut a, mut n, root_level) = match top {
                Some((a, want)) => {
                    let n = self.read_node(a).await?;
                    if n.level != want {
                        self.cache.as_ref().unwrap().invalidate_top();
                        from_top = false;
                        continue 'restart;
                    }
                    (a, n, 0)
                }
                None => {
                    let (root, n) = self.root_node(level).await?;
                    if n.level < level {
                        return Ok(Found::RootBelow(root));
                    }
                    let l = n.level;
                    (root, n, l)
                }
            };
            loop {
                if n.below_low(key) || (n.beyond_high(key) && n.sibling.is_null()) {
                    if root_level == 0 {
                        self.cache.as_ref().unwrap().invalidate_top();
                    }
                    from_top = false;
                    self.root_hint.set(0);
                    continue 'restart;
                }
                if let Some(c) = &self.cache {
                    if n.level == 1 {
                        c.insert(&n);
                    } else if root_level > 0 && tops {
                        c.insert_top(&n, root_level);
                    }
                }
                if n.beyond_high(key) {
                    a = n.sibling;
                } else if n.level == level {
                    return Ok(Found::Node(a, n));
                } else {
                    a = n.child_for(key);
                }
                n = self.read_node(a).await?;
            }
        }
    }

    /// The root and its image for a traversal towards `level`. Under
    /// [`ShermanCache::Authors`] the root the last traversal found is READ
    /// without the root pointer (the published Sherman keeps it in
    /// `g_root_ptr`, which a new root's RPC broadcast updates). A node
    /// with a right sibling is no longer the root (the root split): the
    /// pointer is READ then, as when the node is below `level`; the READ of
    /// the old root is this model's price for the broadcast.
    async fn root_node(&self, level: u8) -> Result<(GlobalAddr, Node), TreeError> {
        let hint = self.root_hint.get();
        if hint != 0 {
            let root = GlobalAddr::from_u64(hint);
            let n = self.read_node(root).await?;
            if n.level >= level && n.sibling.is_null() {
                return Ok((root, n));
            }
        }
        let root = self.read_root().await?;
        let n = self.read_node(root).await?;
        if self.cfg.sherman_cache == ShermanCache::Authors {
            self.root_hint.set(root.to_u64());
        }
        Ok((root, n))
    }

    /// The leaf covering `key` (unlocked image): through the index cache when
    /// it has the leaf's parent (one READ when fresh), else from the root.
    pub(crate) async fn find_leaf(&self, key: &[u8]) -> Result<(GlobalAddr, Node), TreeError> {
        if self.cfg.design == Design::Hybrid {
            return self.nam_find_leaf(key).await;
        }
        if let Some((a, b)) = self.cached_leaf(key).await? {
            let n = Node::decode(&self.g, &b).expect("an image View::new accepted decodes");
            return Ok((a, n));
        }
        self.leaf_from_root(key).await
    }

    /// [`FgTree::find_leaf`] as a validated image, not decoded ([`View::new`]
    /// accepts it): the leaf's READ buffer on the cache path and the NAM
    /// hybrid's; a leaf reached from the root is encoded again. What a scan
    /// starts from (issue 32: no allocation per warm scan).
    pub(crate) async fn find_leaf_image(
        &self,
        key: &[u8],
    ) -> Result<(GlobalAddr, dm_runtime::ReadBuf), TreeError> {
        if self.cfg.design == Design::Hybrid {
            return self.nam_find_leaf_image(key).await;
        }
        if let Some(found) = self.cached_leaf(key).await? {
            return Ok(found);
        }
        let (a, n) = self.leaf_from_root(key).await?;
        Ok((a, n.encode(&self.g).into()))
    }

    /// The cache path of [`FgTree::find_leaf`] ([`FgTree::cached_walk`])
    /// with the image validated by [`View::new`].
    async fn cached_leaf(
        &self,
        key: &[u8],
    ) -> Result<Option<(GlobalAddr, dm_runtime::ReadBuf)>, TreeError> {
        let found = self
            .cached_walk(key, |a| async move { Ok((self.read_valid(a).await?, ())) })
            .await?;
        Ok(found.map(|(a, b, ())| (a, b)))
    }

    /// The cache path to `key`'s leaf: the cached leaf parent's child for
    /// `key` (Sherman §4.1), moving right along siblings (B-link, at most 8
    /// hops), each image READ and validated by `read` (which also answers
    /// what it found in it, `T`). `None` (the miss recorded, a stale entry
    /// invalidated) when the cache has no entry that leads to the key's
    /// leaf; the caller traverses from the root.
    async fn cached_walk<T, F>(
        &self,
        key: &[u8],
        read: impl Fn(GlobalAddr) -> F,
    ) -> Result<Option<(GlobalAddr, dm_runtime::ReadBuf, T)>, TreeError>
    where
        F: std::future::Future<Output = Result<(dm_runtime::ReadBuf, T), TreeError>>,
    {
        let Some(c) = &self.cache else {
            return Ok(None);
        };
        if let Some((leaf, id)) = c.lookup(key) {
            let mut a = leaf;
            let mut hops = 0;
            loop {
                let (b, t) = read(a).await?;
                let n = View::validated_header(&self.g, &b);
                if n.level() != 0 || n.below_low(key) {
                    c.invalidate(key, id);
                    break;
                }
                if n.beyond_high(key) {
                    hops += 1;
                    // The published Sherman drops a stale entry at once and
                    // goes from the root (`Tree::search`, `page_search`
                    // with `from_cache`).
                    let authors = self.cfg.sherman_cache == ShermanCache::Authors;
                    if n.sibling().is_null() || hops > 8 || authors {
                        c.invalidate(key, id);
                        break;
                    }
                    a = n.sibling();
                    continue;
                }
                if hops > 0 {
                    // Keys moved right since the copy was taken: refresh it next time.
                    c.invalidate(key, id);
                }
                c.record(true);
                return Ok(Some((a, b, t)));
            }
        }
        c.record(false);
        Ok(None)
    }

    /// The leaf covering `key`, by a traversal from the root.
    async fn leaf_from_root(&self, key: &[u8]) -> Result<(GlobalAddr, Node), TreeError> {
        match self.find(key, 0).await? {
            Found::Node(a, n) => Ok((a, n)),
            Found::RootBelow(_) => unreachable!("the root is at level 0 or above"),
        }
    }

    /// The leaf that should cover `key`, for a writer that locks it and checks
    /// its fences under the lock (Sherman §4.2: no READ before the lock): the
    /// child pointer of the cached leaf parent, else of the level-1 node a
    /// traversal reaches (the root itself while the tree is one leaf). Also
    /// returns the cache entry used, for [`FgTree::drop_stale`].
    pub(crate) async fn leaf_for_write(
        &self,
        key: &[u8],
    ) -> Result<(GlobalAddr, Option<CacheId>), TreeError> {
        if self.cfg.design == Design::Hybrid {
            return Ok((self.nam_leaf(key).await?, None));
        }
        if let Some(c) = &self.cache {
            if let Some((leaf, id)) = c.lookup(key) {
                c.record(true);
                return Ok((leaf, Some(id)));
            }
            c.record(false);
        }
        match self.find(key, 1).await? {
            Found::Node(_, n) => {
                if let Some(c) = &self.cache {
                    c.insert(&n);
                }
                Ok((n.child_for(key), None))
            }
            Found::RootBelow(root) => Ok((root, None)),
        }
    }

    /// The cache entry `id` led a writer to a leaf that does not cover its
    /// key, `key`.
    pub(crate) fn drop_stale(&self, key: &[u8], id: Option<CacheId>) {
        if let (Some(c), Some(id)) = (&self.cache, id) {
            c.invalidate(key, id);
        }
    }

    /// A writer that started at the cached leaf `start` and locked `a`:
    /// if it moved right (keys left `start` in a split since the leaf
    /// parent was cached), the entry is dropped so that the next operation
    /// on these keys READs the parent afresh instead of locking, READing
    /// and releasing the old leaf again, as a reader drops it
    /// ([`FgTree::cached_walk`]). Keeping it cost our Sherman's insert load
    /// about 7% (docs/experiments/claims-smart.md, smart-fig14).
    pub(crate) fn moved_right(
        &self,
        key: &[u8],
        start: GlobalAddr,
        a: GlobalAddr,
        id: Option<CacheId>,
    ) {
        if a != start {
            self.drop_stale(key, id);
        }
    }

    /// The value stored under `key`, if any.
    pub async fn get(&self, key: &[u8]) -> Result<Option<u64>, TreeError> {
        self.check_key(key)?;
        match self.cfg.design {
            Design::Coarse => return self.nam_get(key).await,
            Design::Hybrid => return self.nam_get_hybrid(key).await,
            _ => {}
        }
        // A warm get: [`FgTree::find_leaf`]'s cache path
        // ([`FgTree::cached_walk`]: the same cache hits, misses and
        // invalidations) with each leaf image validated for `key` and
        // searched in place ([`View::for_key`]: the key's slot whole, or
        // every slot when the key is absent; no decoded node). Awaited
        // here, and `read_until` directly: no wrapper future to resume per
        // READ (issue 32). `None`: the cache had no entry that led to the
        // key's leaf, and the get traverses from the root, as `find_leaf`
        // does.
        let found = self
            .cached_walk(key, |a| {
                self.read_until(a, move |b| {
                    crate::node::View::for_key(&self.g, b, key).map(|(_, v)| v)
                })
            })
            .await?;
        if let Some((_, _, v)) = found {
            return Ok(v);
        }
        let (_, n) = self.leaf_from_root(key).await?;
        Ok(n.find(key).ok().map(|i| n.entries[i].1))
    }
}

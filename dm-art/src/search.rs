//! Search (SMART §4.5, Algorithm 1): start at the deepest cached node on
//! the key's path (or READ the root slot), then one node per level, then
//! the leaf; the walk helpers shared with the writers (cache fill, the
//! reverse check, confirmation of negative answers; see `cache`).

use crate::cache::Hit;
use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::layout::Slot;
use crate::rdwc::{Join, ReadResult};
use crate::tree::{NodeImage, SmartTree, MAX_RETRIES};
use dm_runtime::yield_now;
use dm_verbs::GlobalAddr;

impl SmartTree {
    /// The cursor at the root slot (one 8-byte READ).
    pub(crate) async fn root_cursor(&self) -> Result<Cursor, ArtError> {
        let word = self.read_word(self.cfg.root_slot).await?;
        Ok(Cursor::root(self.cfg.root_slot, word))
    }

    /// Where a walk for `path` starts: the ART cache's deepest slot on it
    /// (no verb), else the root slot (one READ).
    pub(crate) async fn start_cursor(
        &self,
        path: &[u8],
    ) -> Result<(Cursor, Option<Hit>), ArtError> {
        if let Some((c, hit)) = self.cached_start(path) {
            return Ok((c, Some(hit)));
        }
        Ok((self.root_cursor().await?, None))
    }

    /// The ART cache's start for `path`, if it has one (no verb; what
    /// [`SmartTree::start_cursor`] tries first, callable without a future).
    fn cached_start(&self, path: &[u8]) -> Option<(Cursor, Hit)> {
        self.cache.as_ref().and_then(|k| k.lookup(path))
    }

    /// Drops the cache entry a cached start came from (a check found it stale).
    pub(crate) fn invalidate(&self, path: &[u8], hit: Option<Hit>) {
        if let (Some(k), Some(h)) = (&self.cache, hit) {
            k.invalidate(path, h);
        }
    }

    /// The reverse check (§4.3.2 type 1) of a child reached through `c`:
    /// its reverse pointer `rev` must name `c`'s slot. A mismatch proves the
    /// cached word stale and drops the entry; a match proves nothing (the
    /// pointer is rewritten after a split's CAS), so `c` stays `cached`.
    pub(crate) fn reverse_check(&self, c: &Cursor, rev: GlobalAddr, path: &[u8], hit: Option<Hit>) {
        if c.cached && rev != c.slot_a {
            self.invalidate(path, hit);
        }
    }

    /// Confirms a negative conclusion drawn through `c`: `true` if `c` is
    /// fresh or its slot still holds the word (one 8-byte READ; slots change
    /// monotonically, so the conclusion held at that READ); else `c` takes
    /// the fresh word, the entry is dropped, and the walk must go on.
    pub(crate) async fn confirm(
        &self,
        c: &mut Cursor,
        path: &[u8],
        hit: Option<Hit>,
    ) -> Result<bool, ArtError> {
        if !c.cached {
            return Ok(true);
        }
        let w = self.read_word(c.slot_a).await?;
        let same = w == c.word;
        if !same {
            self.invalidate(path, hit);
        }
        c.fresh(w);
        Ok(same)
    }

    /// READs the leaf at `addr` named by `c`, for a cursor that
    /// [`SmartTree::leaf_needs_slot`] (any other READs the leaf alone,
    /// [`SmartTree::read_leaf`]). With RCU leaves (the ART baseline,
    /// `baseline`) a cached word may name a replaced leaf, so its slot is
    /// READ in the same round: `None` (cursor fresh, the cache entry
    /// patched with the new word, or dropped under
    /// [`crate::ArtCache::with_stale_hints_dropped`]) if the slot has moved
    /// on; else the leaf was current at that READ.
    pub(crate) async fn read_current_leaf(
        &self,
        c: &mut Cursor,
        addr: GlobalAddr,
        path: &[u8],
        hit: Option<Hit>,
    ) -> Result<Option<crate::layout::Leaf>, ArtError> {
        debug_assert!(self.leaf_needs_slot(c), "a leaf READ alone would do");
        let (w, l) = futures::join!(self.read_word(c.slot_a), self.read_leaf(addr));
        let w = w?;
        let same = w == c.word;
        if let (false, Some(k), Some(h)) = (same, &self.cache, hit) {
            match k.drops_stale_hints() {
                // The artifact's `search`: an invalid cached leaf drops
                // the whole cached node (issue 34, smart-fig22a's ART).
                true => k.invalidate(path, h),
                false => k.patch(path, h, c.slot_a, c.word, w),
            }
        }
        c.fresh(w);
        Ok(same.then_some(l?.0))
    }

    /// Whether a leaf named by `c` must be READ with its slot
    /// ([`SmartTree::read_current_leaf`]): a cached word under RCU leaves.
    fn leaf_needs_slot(&self, c: &Cursor) -> bool {
        c.cached && !self.cfg.techniques.in_place_leaf
    }

    /// Admits the node at `addr` just READ (its slots discriminate on path
    /// byte `end`) into the ART cache, after the modelled central FIFO's
    /// turn if the cache has one (`ArtCache::with_fifo_hold_ns`).
    pub(crate) async fn cache_fill(
        &self,
        path: &[u8],
        end: usize,
        addr: GlobalAddr,
        n: &NodeImage,
    ) {
        if let Some(k) = &self.cache {
            k.fifo_turn().await;
            k.insert(&path[..end], addr, &n.slots);
        }
    }

    /// The value of `key`, if present. Verbs without a cache hit: READ of
    /// the root slot (8 B), one READ per internal level (`16 + 8 x capacity`
    /// bytes; a second one if the node grew since its slot was written), one
    /// READ of the leaf; a leaf image that fails its checksum is READ again.
    /// With the parent cached: the leaf READ only, plus one 8-byte READ of
    /// the cached slot if the key turns out absent (`cache` docs).
    ///
    /// Linearizable: a slot names the only place a key with that path prefix
    /// can live, and a leaf's key never changes, so a validated leaf image
    /// with another key (or the valid bit clear) proves absence at the moment
    /// of that READ.
    ///
    /// With read delegation (SMART §4.2.2, `rdwc`), the answer may come from
    /// a same-key search of another core of this CS that started after this
    /// one was invoked.
    pub async fn get(&self, key: &[u8]) -> ReadResult {
        let mut buf = crate::keys::Path::new();
        let path = self.cfg.keys.path_in(key, &mut buf)?;
        let Some(t) = &self.rdwc else {
            return self.get_remote(key, path).await;
        };
        let lead = match t.join_read(key) {
            Join::Alone => return self.get_remote(key, path).await,
            Join::Lead(l) => l,
            Join::Follow(w) => match w.wait().await {
                Ok(r) => return r,
                Err(l) => l,
            },
        };
        // The delegation window, where the lead holds no mark (`rdwc` docs):
        // same-key readers ready now queue first.
        if lead.needs_window() {
            yield_now().await;
        }
        lead.start_read();
        let r = self.get_remote(key, path).await;
        lead.finish_read(&r);
        r
    }

    /// The remote search of [`SmartTree::get`] (`path`: the key's radix path).
    async fn get_remote(&self, key: &[u8], path: &[u8]) -> ReadResult {
        // The warm path (a cached start, a leaf READ alone) awaits no
        // nested future of its own: each level of async call costs a state
        // switch per poll (issue 32).
        let (mut c, hit) = match self.cached_start(path) {
            Some((c, hit)) => (c, Some(hit)),
            None => (self.root_cursor().await?, None),
        };
        for _ in 0..MAX_RETRIES {
            match Slot::decode(c.word) {
                Slot::Empty => return Ok(None),
                Slot::Leaf { addr, .. } => {
                    let (rev, found) = if self.leaf_needs_slot(&c) {
                        match self.read_current_leaf(&mut c, addr, path, hit).await? {
                            Some(l) => (
                                l.rev,
                                (l.key[..] == *key).then_some(l.valid.then_some(l.value)),
                            ),
                            None => continue,
                        }
                    } else {
                        self.read_leaf_for(addr, key).await?
                    };
                    self.reverse_check(&c, rev, path, hit);
                    if let Some(v) = found {
                        return Ok(v);
                    }
                    if self.confirm(&mut c, path, hit).await? {
                        return Ok(None);
                    }
                }
                Slot::Internal { addr, ty, .. } => {
                    let d = c.depth;
                    let Some((n, s)) = self.read_internal(&mut c, addr, ty, d, path.len()).await?
                    else {
                        continue;
                    };
                    self.reverse_check(&c, n.rev, path, hit);
                    self.refresh_type_hint(path, &c, n.header.ty);
                    let pre = &n.header.prefix[s..];
                    let p = c.depth + pre.len();
                    if path[c.depth..p] != *pre {
                        if self.confirm(&mut c, path, hit).await? {
                            return Ok(None);
                        }
                        continue;
                    }
                    self.cache_fill(path, p, addr, &n).await;
                    let Some((i, w)) = n.find(path[p]) else {
                        return Ok(None);
                    };
                    c = Cursor::child(addr, i, w, p + 1);
                }
            }
        }
        Err(ArtError::Corrupt(c.slot_a))
    }
}

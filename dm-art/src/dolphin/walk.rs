//! Pathfinding (Dolphin §III-B; the paper's algorithm text is lost, the
//! digest's B3.1 reconstructs it from the authors' code): exact byte
//! matches through the cached ART internal nodes on the first 7 key bytes,
//! a floor match on the last byte in a special node, and backtracking
//! through the special node when a leaf's range no longer covers the key
//! (it split after the path was cached or READ).

use super::layout::{
    floor, LeafImage, LeafView, SpecialImage, KIND_LEAF, KIND_SPECIAL, SPECIAL_BYTES,
};
use super::Counter;
use super::DolphinTree;
use crate::cache::Hit;
use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::layout::Slot;
use crate::tree::{NodeImage, MAX_RETRIES};
use dm_runtime::{read, yield_now, ReadBuf};
use dm_verbs::GlobalAddr;

/// Path bytes the ART discriminates on (the 7-byte prefix).
pub(crate) const ART_BYTES: usize = 7;

/// The leaf a walk reached.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub leaf: GlobalAddr,
    /// The ART slot naming the leaf or its special node.
    pub c: Cursor,
    pub hit: Option<Hit>,
    /// The special node the leaf was taken from, if any.
    pub special: Option<GlobalAddr>,
}

/// Where the key's prefix has no leaf.
pub(crate) enum Absent {
    /// The root slot is empty.
    Root(Cursor),
    /// Node `node` (image `n`, named by `c`) has no slot for path byte `p`.
    NoSlot {
        c: Cursor,
        node: GlobalAddr,
        n: NodeImage,
        p: usize,
    },
    /// The key leaves node `node`'s effective prefix `pre` at index `j`.
    Prefix {
        c: Cursor,
        node: GlobalAddr,
        n: NodeImage,
        pre: Vec<u8>,
        j: usize,
    },
    /// The slot at `c` names a leaf or special node of another prefix.
    Other { c: Cursor, prefix: u64 },
}

pub(crate) enum Place {
    Leaf(Target),
    Absent(Absent, Option<Hit>),
}

/// How a leaf image stands to a key.
pub(crate) enum Fit {
    Covers,
    /// The leaf holds another prefix (the ART path is compressed above it).
    OtherPrefix(u64),
    /// The key is past the leaf's range: it split since (backtrack).
    Beyond,
}

/// How a leaf of `prefix` that covers `key`'s last byte or not (`covers`)
/// stands to `key`.
pub(crate) fn fit(prefix: u64, covers: bool, key: u64) -> Fit {
    if prefix != key & !0xff {
        Fit::OtherPrefix(prefix)
    } else if covers {
        Fit::Covers
    } else {
        Fit::Beyond
    }
}

impl DolphinTree {
    /// Walks from `start` (else the deepest cached node, else the root slot)
    /// to the leaf that should hold `key` (`path`: its 8 bytes), or to where
    /// its prefix is absent. Verbs: one READ per uncached internal node and
    /// one of the special node if it is not cached; none with a warm cache.
    pub(crate) async fn locate(
        &self,
        path: &[u8; 8],
        start: Option<Cursor>,
    ) -> Result<Place, ArtError> {
        let (mut c, hit) = match start {
            Some(c) => (c, None),
            None => self.art.start_cursor(path).await?,
        };
        let prefix = u64::from_be_bytes(*path) & !0xff;
        for _ in 0..MAX_RETRIES {
            match Slot::decode(c.word) {
                Slot::Empty => return Ok(Place::Absent(Absent::Root(c), hit)),
                Slot::Internal { addr, ty, .. } => {
                    let d = c.depth;
                    let Some((n, s)) = self
                        .art
                        .read_internal(&mut c, addr, ty, d, ART_BYTES)
                        .await?
                    else {
                        continue;
                    };
                    self.art.reverse_check(&c, n.rev, path, hit);
                    self.art.refresh_type_hint(path, &c, n.header.ty);
                    let pre = n.header.prefix[s..].to_vec();
                    let p = d + pre.len();
                    if let Some(j) = (0..pre.len()).find(|&j| path[d + j] != pre[j]) {
                        let a = Absent::Prefix {
                            c,
                            node: addr,
                            n,
                            pre,
                            j,
                        };
                        return Ok(Place::Absent(a, hit));
                    }
                    self.art.cache_fill(path, p, addr, &n).await;
                    match n.find(path[p]) {
                        Some((i, w)) => c = Cursor::child(addr, i, w, p + 1),
                        None => {
                            let a = Absent::NoSlot {
                                c,
                                node: addr,
                                n,
                                p,
                            };
                            return Ok(Place::Absent(a, hit));
                        }
                    }
                }
                Slot::Leaf {
                    words: KIND_LEAF,
                    addr,
                    ..
                } => {
                    return Ok(Place::Leaf(Target {
                        leaf: addr,
                        c,
                        hit,
                        special: None,
                    }))
                }
                Slot::Leaf {
                    words: KIND_SPECIAL,
                    addr,
                    ..
                } => {
                    let last = path[7];
                    let cached = self
                        .cache
                        .as_ref()
                        .and_then(|k| k.special(prefix, addr, |e| floor(e, last)));
                    let leaf = match cached {
                        Some(l) => l,
                        None => {
                            let s = self.read_special(addr).await?;
                            self.art.reverse_check(&c, s.rev, path, hit);
                            if s.prefix != prefix {
                                let a = Absent::Other {
                                    c,
                                    prefix: s.prefix,
                                };
                                return Ok(Place::Absent(a, hit));
                            }
                            floor(&s.entries, last)
                        }
                    };
                    let leaf = leaf.ok_or(ArtError::Corrupt(addr))?;
                    return Ok(Place::Leaf(Target {
                        leaf,
                        c,
                        hit,
                        special: Some(addr),
                    }));
                }
                Slot::Leaf { addr, .. } => return Err(ArtError::Corrupt(addr)),
            }
        }
        Err(ArtError::Corrupt(c.slot_a))
    }

    /// READs the special node at `d` and caches its entries.
    pub(crate) async fn read_special(&self, d: GlobalAddr) -> Result<SpecialImage, ArtError> {
        let s = SpecialImage::decode(&read(d, SPECIAL_BYTES as u32).await?);
        if let Some(k) = &self.cache {
            k.put_special(s.prefix, d, s.entries.clone());
        }
        Ok(s)
    }

    /// READs the leaf at `a` until its image validates.
    pub(crate) async fn read_leaf(&self, a: GlobalAddr) -> Result<LeafImage, ArtError> {
        let b = self.read_leaf_buf(a).await?;
        LeafImage::decode(&self.g, &b).ok_or(ArtError::Corrupt(a))
    }

    /// READs the leaf at `a` until it validates ([`LeafView::new`]): the
    /// buffer, to read in place.
    pub(crate) async fn read_leaf_buf(&self, a: GlobalAddr) -> Result<ReadBuf, ArtError> {
        for _ in 0..MAX_RETRIES {
            let b = read(a, self.g.bytes as u32).await?;
            if LeafView::new(&self.g, &b).is_some() {
                return Ok(b);
            }
            self.bump(&self.rejected, Counter::rejected);
            yield_now().await;
        }
        Err(ArtError::Corrupt(a))
    }

    /// The reverse check (SMART §4.3.2) of a leaf reached straight from a
    /// cached ART slot.
    pub(crate) fn leaf_reverse_check(&self, t: &Target, rev: GlobalAddr, path: &[u8]) {
        if t.special.is_none() {
            self.art.reverse_check(&t.c, rev, path, t.hit);
        }
    }

    /// Backtracking (§III-B): the leaf reached through `t` no longer covers
    /// the key, so it has split and hangs from a special node now (its
    /// image's `special`); READ that node and take the leaf covering the
    /// key. +2 round trips with the next leaf READ, as in the paper. A
    /// stale ART cache entry that named the leaf directly is dropped.
    pub(crate) async fn backtrack(
        &self,
        t: &Target,
        special: GlobalAddr,
        path: &[u8; 8],
    ) -> Result<Target, ArtError> {
        self.bump(&self.backtracks, Counter::backtracks);
        if special.is_null() {
            return Err(ArtError::Corrupt(t.leaf));
        }
        if t.special.is_none() {
            self.art.invalidate(path, t.hit.filter(|_| t.c.cached));
        }
        let s = self.read_special(special).await?;
        let leaf = s.floor(path[7]).ok_or(ArtError::Corrupt(special))?;
        Ok(Target {
            leaf,
            special: Some(special),
            ..*t
        })
    }

    /// Confirms a negative answer drawn through `c` (SMART's `confirm`):
    /// `None` if it holds, else the fresh cursor to walk on from.
    pub(crate) async fn confirm(
        &self,
        mut c: Cursor,
        hit: Option<Hit>,
        path: &[u8],
    ) -> Result<Option<Cursor>, ArtError> {
        Ok(if self.art.confirm(&mut c, path, hit).await? {
            None
        } else {
            Some(c)
        })
    }

    /// Confirms an absence `a` found by `locate`: `None` if the key is
    /// absent, else where to walk on from. A missing slot in a node READ by
    /// this walk is conclusive (slots are never emptied, SMART's invariant 1).
    pub(crate) async fn confirm_absent(
        &self,
        a: Absent,
        hit: Option<Hit>,
        path: &[u8],
    ) -> Result<Option<Cursor>, ArtError> {
        match a {
            Absent::Root(_) | Absent::NoSlot { .. } => Ok(None),
            Absent::Prefix { c, .. } | Absent::Other { c, .. } => self.confirm(c, hit, path).await,
        }
    }
}

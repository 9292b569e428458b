//! Structure changes (Dolphin §III-B, Fig. 4): hanging a new leaf for a new
//! prefix into the ART (Fig. 4b; through SMART's normal insert, header split
//! and type switch, and a path split when the slot names another prefix),
//! and leaf splits under the exclusive Spear hold (Fig. 4d: a special node
//! replaces the leaf in its ART slot; Fig. 4e: a new leaf joins the special
//! node the leaf hangs from).

use super::layout::{
    special_entry, Item, KeyWord, LeafImage, SpecialImage, KIND_LEAF, KIND_SPECIAL, SPECIAL_ALIGN,
};
use super::ops::{Guard, Lease};
use super::walk::{Absent, Target, ART_BYTES};
use super::{DolphinTree, EXCLUSIVE};
use crate::error::ArtError;
use crate::insert::{internal_word, node_image};
use crate::layout::{capacity, slot_addr, Header, Slot};
use crate::tree::publish_took;
use dm_runtime::{cas, faa, write};
use dm_verbs::GlobalAddr;

/// The slot word naming a Dolphin object (`kind`: [`KIND_LEAF`] or
/// [`KIND_SPECIAL`]) under partial key `partial`.
pub(crate) fn object_word(partial: u8, kind: u8, a: GlobalAddr) -> Result<u64, ArtError> {
    Slot::Leaf {
        partial,
        words: kind,
        addr: a,
    }
    .encode()
    .map_err(|e| ArtError::BadConfig(format!("unaddressable leaf: {e:?}")))
}

/// `(key, value)` pairs as the items of a leaf at `version`.
pub(super) fn fill(img: &mut LeafImage, kvs: &[(u64, u64)]) {
    for (i, &(k, v)) in kvs.iter().enumerate() {
        img.items[i] = Item {
            key: KeyWord::valid(img.version, i, k as u8, 0, v),
            bufs: [v, 0],
        };
    }
}

impl DolphinTree {
    /// The whole image of a new leaf, lock word included.
    fn new_leaf_bytes(&self, img: &LeafImage, lock: i64) -> Vec<u8> {
        let mut b = img.encode(&self.g);
        b.extend_from_slice(&lock.to_le_bytes());
        b
    }

    /// This operation's new leaf (a spare left by a lost publish, else a
    /// fresh allocation).
    async fn new_leaf(&self) -> Result<GlobalAddr, ArtError> {
        match self.spare.take() {
            Some(a) => Ok(a),
            None => self.art.alloc_bytes(self.g.bytes as u64, 64).await,
        }
    }

    /// Hangs a new leaf holding only `key` into the ART where `locate`
    /// found its prefix absent (Fig. 4b): WRITE the leaf, then one CAS
    /// publishes it. `false` if the CAS lost (walk again).
    pub(crate) async fn hang(&self, a: Absent, key: u64, value: u64) -> Result<bool, ArtError> {
        let path = key.to_be_bytes();
        let la = self.new_leaf().await?;
        let mut img = LeafImage::new(&self.g, key & !0xff, 0, 255, 0);
        fill(&mut img, &[(key, value)]);
        let done = match a {
            Absent::Root(c) => {
                img.rev = c.slot_a;
                write(la, self.new_leaf_bytes(&img, 0)).await?;
                let w = object_word(0, KIND_LEAF, la)?;
                publish_took(cas(c.slot_a, 0, w).await?, 0, w)
            }
            Absent::NoSlot { c, node, n, p } => {
                let first = n.first_empty().unwrap_or(n.slots.len());
                let mut seen = smallvec::SmallVec::<[u64; 8]>::new();
                let mut i = first;
                let mut done = false;
                while i < 256 {
                    let sa = slot_addr(node, i);
                    img.rev = sa;
                    write(la, self.new_leaf_bytes(&img, 0)).await?;
                    let w = object_word(path[p], KIND_LEAF, la)?;
                    let got = cas(sa, 0, w).await?;
                    if publish_took(got, 0, w) {
                        if i >= capacity(n.header.ty) {
                            self.art
                                .type_switch(node, i, n.header_word, c, &path)
                                .await?;
                        }
                        // This CS's ART cache entry of the node takes the
                        // slots its CASes saw filled, as SMART's inserts do.
                        if let Some(k) = &self.art.cache {
                            seen.push(w);
                            k.note_filled(&path[..p], node, first, &seen);
                        }
                        done = true;
                        break;
                    }
                    if got as u8 == path[p] {
                        break;
                    }
                    seen.push(got);
                    i += 1;
                }
                done
            }
            Absent::Prefix { c, node, n, pre, j } => {
                let d = c.depth;
                let na = self.art.alloc_internal().await?;
                let h = Header {
                    depth: d as u8,
                    ty: 1,
                    prefix: crate::layout::Prefix::from_slice(&pre[..j]),
                };
                let slots = [
                    internal_word(pre[j], n.header.ty, node)?,
                    object_word(path[d + j], KIND_LEAF, la)?,
                ];
                img.rev = slot_addr(na, 1);
                let (x, y) = futures::join!(
                    write(na, node_image(c.slot_a, &h, &slots)),
                    write(la, self.new_leaf_bytes(&img, 0))
                );
                x?;
                y?;
                self.art
                    .publish_header_split(c, na, node, &n, d + j + 1)
                    .await?
                    .is_none()
            }
            Absent::Other { c, prefix } => {
                let d = c.depth;
                let other = prefix.to_be_bytes();
                let end = (d..ART_BYTES)
                    .find(|&i| other[i] != path[i])
                    .ok_or(ArtError::Corrupt(c.slot_a))?;
                let (kind, obj) = match Slot::decode(c.word) {
                    Slot::Leaf { words, addr, .. } => (words, addr),
                    _ => return Err(ArtError::Corrupt(c.slot_a)),
                };
                let na = self.art.alloc_internal().await?;
                let h = Header {
                    depth: d as u8,
                    ty: 1,
                    prefix: crate::layout::Prefix::from_slice(&path[d..end]),
                };
                let slots = [
                    object_word(other[end], kind, obj)?,
                    object_word(path[end], KIND_LEAF, la)?,
                ];
                img.rev = slot_addr(na, 1);
                let (x, y) = futures::join!(
                    write(na, node_image(c.slot_a, &h, &slots)),
                    write(la, self.new_leaf_bytes(&img, 0))
                );
                x?;
                y?;
                let nw = internal_word(c.word as u8, 1, na)?;
                let got = cas(c.slot_a, c.word, nw).await?;
                if publish_took(got, c.word, nw) {
                    // The moved object's reverse pointer (a cache hint only:
                    // backtracking uses the leaf's special-node field).
                    write(obj, dm_verbs::buf::le64(slot_addr(na, 0).to_u64())).await?;
                    true
                } else {
                    false
                }
            }
        };
        if !done {
            self.spare.set(Some(la));
        }
        Ok(done)
    }

    /// Splits the full leaf `t.leaf` (image `img`, held exclusively; `g`
    /// its lease-mode lock) evenly while inserting `key` (Fig. 4d/e). The
    /// new leaf is held before it is published (WRITTEN with lock word
    /// `-EXCLUSIVE`; in lease mode WRITTEN free and locked by CAS while
    /// nobody else can reach it) and released only after the old leaf's
    /// rewrite has landed, so no value changes while a key is in both.
    /// Releases the old leaf in every case; `false` if the ART slot moved
    /// on (walk again).
    pub(crate) async fn split(
        &self,
        t: &Target,
        img: LeafImage,
        g: Guard<'_>,
        key: u64,
        value: u64,
    ) -> Result<bool, ArtError> {
        let (old, fa, fg) = match self.split_prepare(t, &img, key, value).await {
            Ok(Some(x)) => x,
            Ok(None) => {
                self.release_exclusive(t.leaf, g, None).await?;
                return Ok(false);
            }
            Err(e) => {
                // The first error is the one to report (a broken QP fails both).
                let _ = self.release_exclusive(t.leaf, g, None).await;
                return Err(e);
            }
        };
        self.release_exclusive(t.leaf, g, Some(old.encode(&self.g)))
            .await?;
        match fg {
            Some(fg) => fg.release([]).await?,
            None => {
                faa(self.lock_addr(fa), EXCLUSIVE as u64).await?;
            }
        }
        if let Some(k) = &self.cache {
            k.drop_special(img.prefix);
        }
        Ok(true)
    }

    /// Releases the exclusive hold of leaf `a` (`g`: its lease-mode lock)
    /// after WRITING `image` (whole, from offset 0) if given: one doorbell.
    async fn release_exclusive(
        &self,
        a: GlobalAddr,
        g: Guard<'_>,
        image: Option<Vec<u8>>,
    ) -> Result<(), ArtError> {
        match (g, image) {
            (Some(g), image) => g.release(image.map(|b| (a, b))).await,
            (None, Some(b)) => {
                let (x, y) = futures::join!(write(a, b), self.unlock_exclusive(a));
                x?;
                y
            }
            (None, None) => self.unlock_exclusive(a).await,
        }
    }

    /// Holds the new leaf `fa`, WRITTEN but not yet published: in lease
    /// mode its node lock (nobody else can reach the leaf, so the CAS
    /// takes it at once); with Spear its image carried `-EXCLUSIVE`.
    async fn hold_new_leaf(&self, fa: GlobalAddr) -> Result<Guard<'_>, ArtError> {
        match &self.locks {
            Some(l) => Ok(Some(Lease::new(l, l.lock(self.lock_addr(fa)).await?))),
            None => Ok(None),
        }
    }

    /// The lock word a new leaf is WRITTEN with before it is published:
    /// Spear's exclusive hold, or free in lease mode (`hold_new_leaf`).
    fn new_leaf_lock(&self) -> i64 {
        if self.locks.is_some() {
            0
        } else {
            -EXCLUSIVE
        }
    }

    /// A split's new leaf that lost its publication: released, kept as
    /// the next publication's spare.
    async fn keep_spare(&self, fa: GlobalAddr, fg: Guard<'_>) -> Result<(), ArtError> {
        if let Some(fg) = fg {
            fg.release([]).await?;
        }
        self.spare.set(Some(fa));
        Ok(())
    }

    /// Everything of a split before the old leaf's rewrite: the new leaf
    /// (held) and its publication. `None` if the ART slot moved on; else the
    /// old leaf's new image, the new leaf's address and its lease-mode lock.
    #[allow(clippy::type_complexity)]
    async fn split_prepare(
        &self,
        t: &Target,
        img: &LeafImage,
        key: u64,
        value: u64,
    ) -> Result<Option<(LeafImage, GlobalAddr, Guard<'_>)>, ArtError> {
        let mut kvs = img.entries_raw();
        kvs.push((key, value));
        kvs.sort_unstable();
        let (left, right) = kvs.split_at(kvs.len() / 2);
        let sb = right[0].0 as u8;
        let fa = self.new_leaf().await?;
        let mut f = LeafImage::new(&self.g, img.prefix, sb, img.hi, 0);
        fill(&mut f, right);
        let mut old = LeafImage::new(
            &self.g,
            img.prefix,
            img.lo,
            sb - 1,
            img.version.wrapping_add(1),
        );
        fill(&mut old, left);
        old.rev = img.rev;
        old.special = img.special;
        let new_entry = object_word(sb, KIND_LEAF, fa)?;
        if img.special.is_null() {
            // Fig. 4d: a special node takes the leaf's ART slot.
            let d = self.art.alloc_bytes(SPECIAL_ALIGN, SPECIAL_ALIGN).await?;
            (old.special, f.special) = (d, d);
            (old.rev, f.rev) = (special_entry(d, 0), special_entry(d, 1));
            let s = SpecialImage {
                rev: t.c.slot_a,
                prefix: img.prefix,
                entries: smallvec::smallvec![object_word(img.lo, KIND_LEAF, t.leaf)?, new_entry],
            };
            let (x, y) = futures::join!(
                write(fa, self.new_leaf_bytes(&f, self.new_leaf_lock())),
                write(d, s.encode())
            );
            x?;
            y?;
            let fg = self.hold_new_leaf(fa).await?;
            let sw = object_word(t.c.word as u8, KIND_SPECIAL, d)?;
            if !publish_took(cas(t.c.slot_a, t.c.word, sw).await?, t.c.word, sw) {
                self.keep_spare(fa, fg).await?;
                return Ok(None);
            }
            Ok(Some((old, fa, fg)))
        } else {
            // Fig. 4e: the new leaf joins the special node.
            let d = img.special;
            f.special = d;
            debug_assert_eq!(old.special, d);
            let s = self.read_special(d).await?;
            for j in 0..s.entries.len() {
                if s.entries[j] != 0 {
                    continue;
                }
                f.rev = special_entry(d, j);
                write(fa, self.new_leaf_bytes(&f, self.new_leaf_lock())).await?;
                let fg = self.hold_new_leaf(fa).await?;
                let got = cas(special_entry(d, j), 0, new_entry).await?;
                if publish_took(got, 0, new_entry) {
                    return Ok(Some((old, fa, fg)));
                }
                if let Some(fg) = fg {
                    // Rewritten at the next slot: held again there.
                    fg.release([]).await?;
                }
            }
            // Even splits keep a prefix within 13 leaves (module docs).
            self.spare.set(Some(fa));
            Err(ArtError::Corrupt(d))
        }
    }
}

//! Insert, update and remove (SMART §4.1.2 and §4.5, Algorithm 2; Fig. 8):
//! internal nodes change only by CAS on one 8-byte word (normal insert,
//! leaf split, header split, node type switch); a leaf changes in place
//! under its rear lock, released by the WRITE that stores the new item.
//!
//! ## Invariants the lock-free cases rely on
//! 1. **Slots are never emptied**, so a node's filled slots form a prefix:
//!    every inserter CASes the first empty slot it saw and, when that CAS
//!    returns another partial key, the next one. An inserter therefore meets
//!    every filled slot before it fills one, and two slots of a node never
//!    carry the same partial key (the digest's duplicate-partial hazard comes
//!    from reusing holes left by deletes; `remove` here leaves none).
//! 2. **A slot's partial key never changes**; its word changes only from a
//!    leaf or node to a new node that contains it (splits), or in its type
//!    bits (a hint; the node header's type is authoritative).
//! 3. **A node's header keeps its end position** `depth + prefix length`;
//!    the second CAS of a header split only moves `depth` forward and drops
//!    the leading prefix bytes (a read-modify-CAS loop on the whole word, as
//!    plain RDMA has no masked CAS), so concurrent trims and type switches
//!    compose in any order.
//!
//! ## Removal
//! `remove` clears the leaf's valid bit under its lock (the digest's
//! Algorithm 3 also CASes the slot to empty and merges nodes; that reuse of
//! slots is what breaks invariant 1, and the published code has no delete).
//! The removed leaf stays as a tombstone in its slot and is revived in place
//! by a later insert of the same key; a leaf split keeps it like any leaf.
//! Memory of removed keys is therefore not returned, as nothing in SMART is.

use crate::layout::{
    capacity, lock_free, lock_taken, type_for_index, Header, Leaf, Slot, LEAF_OFF_META,
};
use crate::rdwc::{Join, Lead, WriteResult};
use crate::search::Cursor;
use crate::tree::{slot_addr, ArtError, SmartTree, MAX_RETRIES};
use dm_runtime::{cas, write, yield_now};
use dm_verbs::GlobalAddr;
use futures::future::{join, join_all};

/// What a write does to the key's leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Insert or overwrite.
    Upsert(u64),
    /// Overwrite only if present.
    Update(u64),
    /// Clear the valid bit if present.
    Remove,
}

impl Mode {
    /// The `(valid, value)` this write gives the leaf `l`, or `None` when it
    /// changes nothing (update or remove of an absent key).
    pub(crate) fn decide(self, l: &Leaf) -> Option<(bool, u64)> {
        match self {
            Mode::Upsert(v) => Some((true, v)),
            Mode::Update(v) if l.valid => Some((true, v)),
            Mode::Remove if l.valid => Some((false, l.value)),
            _ => None,
        }
    }
}

/// The leaf image a locked write stores: `decided` applied to `l`, the
/// sequence number bumped. A write-combining leader `wc` stores the WCB's
/// latest value, taken here, once the lock is held (SMART §4.2.3).
pub(crate) fn next_leaf(l: Leaf, decided: (bool, u64), wc: Option<&Lead<'_>>) -> Leaf {
    let (valid, value) = decided;
    let value = match wc {
        Some(w) if valid => w.consume().unwrap_or(value),
        _ => value,
    };
    Leaf {
        valid,
        value,
        seq: l.seq + 1,
        ..l
    }
}

/// Memory allocated by one operation and not yet published (reused by its
/// retries, so a lost CAS costs no new allocation).
#[derive(Default)]
pub(crate) struct Spare {
    pub(crate) leaf: Option<GlobalAddr>,
    nodes: Vec<GlobalAddr>,
    /// The reverse pointer `place_leaf` last WROTE the spare leaf with
    /// (`None` once anything else was written into it).
    placed: Option<GlobalAddr>,
}

impl SmartTree {
    /// Inserts `key` with `value`, or overwrites its value (upsert).
    /// Verbs: the traversal's READs (none past a cached parent: see
    /// `search`), then one of: an in-place
    /// update (leaf READ, lock CAS, one WRITE that also unlocks: 3 RTTs past
    /// the parent), a normal insert (leaf WRITE + slot CAS), a leaf or header
    /// split (one round of parallel WRITEs + one CAS, then the reverse
    /// pointer and header fix-ups in one round), or a type switch (normal
    /// insert behind the capacity, then header and parent-slot CAS in one round).
    ///
    /// With write combining (SMART §4.2.3, `rdwc`), a same-key write of
    /// another core of this CS may carry this value in its WRITE instead.
    pub async fn insert(&self, key: &[u8], value: u64) -> Result<(), ArtError> {
        self.combined(key, Mode::Upsert(value)).await.map(|_| ())
    }

    /// Overwrites the value of `key` if present; `false` (and nothing
    /// written) if absent.
    pub async fn update(&self, key: &[u8], value: u64) -> Result<bool, ArtError> {
        self.combined(key, Mode::Update(value)).await
    }

    /// Removes `key`; `false` if it was absent. See the module docs: the
    /// leaf stays as a tombstone.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, ArtError> {
        self.write_op(key, &self.path(key)?, Mode::Remove, None)
            .await
    }

    /// An upsert or update through this CS's write combining, if any: lead
    /// (run the remote write, WRITE the WCB's latest value if the leaf is
    /// updated in place), follow (wait for a leader whose WRITE covers this
    /// value), or, on a hash conflict, run alone.
    async fn combined(&self, key: &[u8], mode: Mode) -> WriteResult {
        let path = self.path(key)?;
        let (Some(t), Mode::Upsert(v) | Mode::Update(v)) = (&self.rdwc, mode) else {
            return self.write_op(key, &path, mode, None).await;
        };
        let lead = match t.join_write(key, v) {
            Join::Alone => return self.write_op(key, &path, mode, None).await,
            Join::Lead(l) => l,
            Join::Follow(w) => match w.wait().await {
                Ok(r) => return r,
                Err(l) => l,
            },
        };
        let r = self.write_op(key, &path, mode, Some(&lead)).await;
        lead.finish_write(&r);
        r
    }

    /// The remote write (`path`: the key's radix path).
    async fn write_op(
        &self,
        key: &[u8],
        path: &[u8],
        mode: Mode,
        wc: Option<&Lead<'_>>,
    ) -> WriteResult {
        let value = match mode {
            Mode::Upsert(v) => v,
            _ => 0,
        };
        let upsert = matches!(mode, Mode::Upsert(_));
        let mut spare = Spare::default();
        let (mut c, hit) = self.start_cursor(path).await?;
        'walk: for _ in 0..MAX_RETRIES {
            match Slot::decode(c.word) {
                Slot::Empty => {
                    // Only the root slot is ever followed while empty.
                    if !upsert {
                        return Ok(false);
                    }
                    let la = self.place_leaf(&mut spare, key, value, c.slot_a).await?;
                    let w = self.leaf_slot(c.word as u8, la)?;
                    let publish = async { Ok(cas(c.slot_a, 0, w).await?) };
                    let got = self.under_rowex(&[c.owner], publish).await?;
                    if got == 0 {
                        return Ok(true);
                    }
                    c.fresh(got);
                }
                Slot::Leaf { addr, .. } => {
                    let (l, lock) = self.read_leaf(addr).await?;
                    self.reverse_check(&c, l.rev, path, hit);
                    if l.key == key {
                        let t = self.cfg.techniques;
                        if t.in_place_leaf && t.rear_lock {
                            return self.leaf_write(addr, l, lock, mode, wc).await;
                        }
                        if t.in_place_leaf {
                            return self.table_locked_write(addr, mode, wc).await;
                        }
                        match self
                            .rcu_write(&mut spare, &mut c, path, hit, &l, mode, wc)
                            .await?
                        {
                            Some(r) => return Ok(r),
                            None => continue,
                        }
                    }
                    if !upsert {
                        if self.confirm(&mut c, path, hit).await? {
                            return Ok(false);
                        }
                        continue;
                    }
                    // The split's CAS expects the (possibly cached) word.
                    match self
                        .leaf_split(&mut spare, path, key, value, c, addr, &l)
                        .await?
                    {
                        None => return Ok(true),
                        Some(got) => {
                            self.invalidate(path, hit.filter(|_| c.cached));
                            c.fresh(got)
                        }
                    }
                }
                Slot::Internal { addr, ty, .. } => {
                    let d = c.depth;
                    let Some((n, s)) = self.read_internal(&mut c, addr, ty, d, path.len()).await?
                    else {
                        continue;
                    };
                    self.reverse_check(&c, n.rev, path, hit);
                    let pre = &n.header.prefix[s..];
                    let p = c.depth + pre.len();
                    if let Some(j) = (0..pre.len()).find(|&j| path[c.depth + j] != pre[j]) {
                        if !upsert {
                            if self.confirm(&mut c, path, hit).await? {
                                return Ok(false);
                            }
                            continue;
                        }
                        let pre = pre.to_vec();
                        match self
                            .header_split(&mut spare, path, key, value, c, addr, &n, &pre, j)
                            .await?
                        {
                            None => return Ok(true),
                            Some(got) => {
                                self.invalidate(path, hit.filter(|_| c.cached));
                                c.fresh(got)
                            }
                        }
                        continue;
                    }
                    self.cache_fill(path, p, addr, &c, &n);
                    if let Some((i, w)) = n.find(path[p]) {
                        c = Cursor {
                            slot_a: slot_addr(addr, i),
                            owner: addr,
                            word: w,
                            depth: p + 1,
                            cached: false,
                        };
                        continue;
                    }
                    if !upsert {
                        return Ok(false);
                    }
                    // ROWEX: the leaf is WRITTEN before the node is locked;
                    // a node read full locks its parent too (type switch).
                    let first = n.first_empty();
                    let i = first.unwrap_or(n.slots.len());
                    if i < 256 && self.locks.is_some() {
                        self.place_leaf(&mut spare, key, value, slot_addr(addr, i))
                            .await?;
                    }
                    let nodes = [addr, c.owner];
                    let nodes = if first.is_some() {
                        &nodes[..1]
                    } else {
                        &nodes[..]
                    };
                    let insert = self.normal_insert(&mut spare, key, value, path[p], addr, &n, c);
                    let Some((sa, got)) = self.under_rowex(nodes, insert).await? else {
                        return Ok(true);
                    };
                    c = Cursor {
                        slot_a: sa,
                        owner: addr,
                        word: got,
                        depth: p + 1,
                        cached: false,
                    };
                    continue 'walk;
                }
            }
        }
        Err(ArtError::Corrupt(c.slot_a))
    }

    /// Normal insert (Fig. 8b) of a leaf under partial key `b` into the
    /// first empty slot of the node at `addr` (image `n`, named by `c`),
    /// going on past the capacity (type switch, Fig. 8e) while CASes return
    /// others. `None` when inserted; `Some((slot, word))` when someone
    /// inserted partial key `b` first: the walk follows that slot.
    #[allow(clippy::too_many_arguments)]
    async fn normal_insert(
        &self,
        spare: &mut Spare,
        key: &[u8],
        value: u64,
        b: u8,
        addr: GlobalAddr,
        n: &crate::tree::NodeImage,
        c: Cursor,
    ) -> Result<Option<(GlobalAddr, u64)>, ArtError> {
        let mut i = n.first_empty().unwrap_or(n.slots.len());
        while i < 256 {
            let sa = slot_addr(addr, i);
            let la = self.place_leaf(spare, key, value, sa).await?;
            let got = cas(sa, 0, self.leaf_slot(b, la)?).await?;
            if got == 0 {
                if i >= capacity(n.header.ty) {
                    self.type_switch(addr, i, n.header_word, c).await?;
                }
                return Ok(None);
            }
            if got as u8 == b {
                return Ok(Some((sa, got)));
            }
            i += 1;
        }
        Err(ArtError::Corrupt(addr))
    }

    /// WRITEs this operation's new leaf (allocated once) with reverse pointer
    /// `rev` and returns its address.
    async fn place_leaf(
        &self,
        spare: &mut Spare,
        key: &[u8],
        value: u64,
        rev: GlobalAddr,
    ) -> Result<GlobalAddr, ArtError> {
        let written = spare.leaf.is_some() && spare.placed == Some(rev);
        let a = self.spare_leaf(spare).await?;
        if !written {
            write(a, self.new_leaf_image(key, value, rev)).await?;
        }
        spare.placed = Some(rev);
        Ok(a)
    }

    fn new_leaf_image(&self, key: &[u8], value: u64, rev: GlobalAddr) -> Vec<u8> {
        self.leaf.encode(&Leaf {
            rev,
            valid: true,
            seq: 0,
            key: key.to_vec(),
            value,
        })
    }

    /// This operation's new leaf: allocated on first use, reused by retries.
    /// Its image is the caller's to WRITE (`place_leaf` skips a WRITE that
    /// is already there).
    pub(crate) async fn spare_leaf(&self, spare: &mut Spare) -> Result<GlobalAddr, ArtError> {
        spare.placed = None;
        match spare.leaf {
            Some(a) => Ok(a),
            None => {
                let a = self.alloc_leaf().await?;
                spare.leaf = Some(a);
                Ok(a)
            }
        }
    }

    async fn spare_node(&self, spare: &mut Spare) -> Result<GlobalAddr, ArtError> {
        match spare.nodes.pop() {
            Some(a) => Ok(a),
            None => self.alloc_internal().await,
        }
    }

    /// In-place leaf write under the rear lock (§4.1.2): lock CAS from the
    /// free word of the image's sequence number, then one WRITE of
    /// `[8, leaf end)` carrying the new item, `seq + 1` and the free lock
    /// word. A failed CAS (someone wrote since the READ, or holds the lock)
    /// yields and READs the leaf again. A write-combining leader `wc` WRITEs
    /// the WCB's latest value, taken once the lock is held (§4.2.3).
    async fn leaf_write(
        &self,
        a: GlobalAddr,
        mut l: Leaf,
        mut lock: u64,
        mode: Mode,
        wc: Option<&Lead<'_>>,
    ) -> WriteResult {
        let lock_a = a.add(self.leaf.lock_off() as u64);
        for _ in 0..MAX_RETRIES {
            let Some(decided) = mode.decide(&l) else {
                return Ok(false);
            };
            if lock == lock_free(l.seq) {
                let got = cas(lock_a, lock, lock_taken(l.seq)).await?;
                if got == lock {
                    let img = self.leaf.encode(&next_leaf(l, decided, wc));
                    write(a.add(LEAF_OFF_META as u64), img[LEAF_OFF_META..].to_vec()).await?;
                    return Ok(true);
                }
            }
            yield_now().await;
            (l, lock) = self.read_leaf(a).await?;
        }
        Err(ArtError::LockStuck(a))
    }

    /// Leaf split (Fig. 8c): the new key and the leaf at `c` share
    /// `lcp` path bytes past `c.depth`; a chain of new nodes holds them
    /// (6 header bytes + 1 slot byte per intermediate node, at most 6 header
    /// bytes and two leaf slots in the last), WRITTEN in one round with the
    /// new leaf, then published by one CAS of the parent slot. `None` when
    /// published, else the slot word that CAS returned (retry from it).
    #[allow(clippy::too_many_arguments)]
    async fn leaf_split(
        &self,
        spare: &mut Spare,
        path: &[u8],
        key: &[u8],
        value: u64,
        c: Cursor,
        old: GlobalAddr,
        l: &Leaf,
    ) -> Result<Option<u64>, ArtError> {
        let old_path = self.path(&l.key)?;
        let d = c.depth;
        let lcp = (d..path.len())
            .take_while(|&i| path[i] == old_path[i])
            .count();
        if d + lcp >= path.len() {
            return Err(ArtError::Corrupt(old));
        }
        let la = self.spare_leaf(spare).await?;
        // Chain node k at depth pos_k; the last one discriminates at `end`.
        let mut depths = vec![d];
        let mut rem = lcp;
        while rem > 6 {
            depths.push(depths.last().unwrap() + 7);
            rem -= 7;
        }
        let mut nodes = Vec::with_capacity(depths.len());
        for _ in 0..depths.len() {
            nodes.push(self.spare_node(spare).await?);
        }
        let end = d + lcp;
        let mut images = Vec::with_capacity(nodes.len() + 1);
        for (k, (&na, &pos)) in nodes.iter().zip(&depths).enumerate() {
            let rev = if k == 0 {
                c.slot_a
            } else {
                slot_addr(nodes[k - 1], 0)
            };
            let last = k + 1 == nodes.len();
            let plen = if last { end - pos } else { 6 };
            let slots = if last {
                vec![
                    self.leaf_slot(old_path[end], old)?,
                    self.leaf_slot(path[end], la)?,
                ]
            } else {
                vec![internal_word(path[pos + 6], 1, nodes[k + 1])?]
            };
            let h = Header {
                depth: pos as u8,
                ty: 1,
                prefix: path[pos..pos + plen].to_vec(),
            };
            images.push((na, node_image(rev, &h, &slots)));
        }
        let last = *nodes.last().unwrap();
        images.push((la, self.new_leaf_image(key, value, slot_addr(last, 1))));
        for r in join_all(images.into_iter().map(|(a, b)| write(a, b))).await {
            r?;
        }
        let new_word = internal_word(c.word as u8, 1, nodes[0])?;
        // ROWEX (the ART baseline): the node holding the slot is locked
        // around the publishing CAS only; the new nodes are WRITTEN already.
        let publish = async { Ok(cas(c.slot_a, c.word, new_word).await?) };
        let got = self.under_rowex(&[c.owner], publish).await?;
        if got != c.word {
            spare.nodes.extend(nodes);
            return Ok(Some(got));
        }
        // The old leaf's reverse pointer now names its slot in the last node
        // (signalled and awaited before returning, unlike the artifact: digest
        // §5.2 pitfall on unsignalled reverse-pointer CASes).
        write(old, slot_addr(last, 0).to_u64().to_le_bytes().to_vec()).await?;
        spare.leaf = None;
        Ok(None)
    }

    /// Header split (Fig. 8d): the key leaves the node at `c` inside its
    /// (effective) prefix `pre` at index `j`. A new 4-slot node takes
    /// `pre[..j]` and points to the old node (partial `pre[j]`) and to the
    /// new leaf, both WRITTEN in one round; one CAS of the parent slot
    /// publishes it; then the old node's header drops `pre[..=j]` (CAS loop,
    /// invariant 3) and its reverse pointer names the new node, in one round.
    #[allow(clippy::too_many_arguments)]
    async fn header_split(
        &self,
        spare: &mut Spare,
        path: &[u8],
        key: &[u8],
        value: u64,
        c: Cursor,
        node: GlobalAddr,
        n: &crate::tree::NodeImage,
        pre: &[u8],
        j: usize,
    ) -> Result<Option<u64>, ArtError> {
        let d = c.depth;
        let la = self.spare_leaf(spare).await?;
        let na = self.spare_node(spare).await?;
        let h = Header {
            depth: d as u8,
            ty: 1,
            prefix: pre[..j].to_vec(),
        };
        let slots = [
            internal_word(pre[j], n.header.ty, node)?,
            self.leaf_slot(path[d + j], la)?,
        ];
        let (a, b) = join(
            write(na, node_image(c.slot_a, &h, &slots)),
            write(la, self.new_leaf_image(key, value, slot_addr(na, 1))),
        )
        .await;
        a?;
        b?;
        // ROWEX (the ART baseline): the parent and the node are locked
        // around the publishing CAS and the prefix trim.
        let publish = self.publish_header_split(c, na, node, n, d + j + 1);
        if let Some(got) = self.under_rowex(&[c.owner, node], publish).await? {
            spare.nodes.push(na);
            return Ok(Some(got));
        }
        spare.leaf = None;
        Ok(None)
    }

    /// The publishing half of a header split: the parent slot's CAS to the
    /// new node `na`, then the old node's header trimmed to start at depth
    /// `target` and its reverse pointer set, in one round. `Some(word)` if
    /// the CAS lost (nothing changed).
    pub(crate) async fn publish_header_split(
        &self,
        c: Cursor,
        na: GlobalAddr,
        node: GlobalAddr,
        n: &crate::tree::NodeImage,
        target: usize,
    ) -> Result<Option<u64>, ArtError> {
        let got = cas(c.slot_a, c.word, internal_word(c.word as u8, 1, na)?).await?;
        if got != c.word {
            return Ok(Some(got));
        }
        let target = target as u8;
        let trim = async {
            let mut hw = n.header_word;
            loop {
                let Some(h) = Header::decode(hw) else {
                    return Err(ArtError::Corrupt(node));
                };
                if h.depth >= target {
                    return Ok(());
                }
                let k = (target - h.depth) as usize;
                let nh = Header {
                    depth: target,
                    ty: h.ty,
                    prefix: h.prefix[k.min(h.prefix.len())..].to_vec(),
                };
                let got = cas(node.add(8), hw, nh.encode()).await?;
                if got == hw {
                    return Ok(());
                }
                hw = got;
            }
        };
        let rev = write(node, slot_addr(na, 0).to_u64().to_le_bytes().to_vec());
        let (t, r) = join(trim, rev).await;
        t?;
        r?;
        Ok(None)
    }

    /// Node type switch (Fig. 8e) after a leaf went into slot `i` at or past
    /// the capacity: the header's type becomes at least `type_for_index(i)`
    /// (CAS loop from the image's header word) and, as a READ-size hint, the
    /// parent slot's type bits too (one attempt), both in one round. The
    /// insert returns only when the header says so, so a reader after it
    /// READs the new slot.
    pub(crate) async fn type_switch(
        &self,
        node: GlobalAddr,
        i: usize,
        header_word: u64,
        c: Cursor,
    ) -> Result<(), ArtError> {
        let want = type_for_index(i).ok_or(ArtError::Corrupt(node))?;
        let header = async {
            let mut hw = header_word;
            loop {
                let Some(h) = Header::decode(hw) else {
                    return Err(ArtError::Corrupt(node));
                };
                if h.ty >= want {
                    return Ok(());
                }
                let got = cas(node.add(8), hw, Header { ty: want, ..h }.encode()).await?;
                if got == hw {
                    return Ok(());
                }
                hw = got;
            }
        };
        let hint = async {
            if let Slot::Internal { partial, ty, addr } = Slot::decode(c.word) {
                if addr == node && ty < want {
                    cas(c.slot_a, c.word, internal_word(partial, want, node)?).await?;
                }
            }
            Ok::<(), ArtError>(())
        };
        let (h, s) = join(header, hint).await;
        h?;
        s
    }
}

/// The slot word naming internal node `a` of type `ty`.
pub(crate) fn internal_word(partial: u8, ty: u8, a: GlobalAddr) -> Result<u64, ArtError> {
    Slot::Internal {
        partial,
        ty,
        addr: a,
    }
    .encode()
    .map_err(|e| ArtError::BadConfig(format!("unaddressable node: {e:?}")))
}

/// The first `16 + 8 x 4` bytes of a new type-1 node: reverse pointer,
/// header, slots (the rest of the reserve is zero: fresh chunk memory, and
/// reused spare nodes were never published).
pub(crate) fn node_image(rev: GlobalAddr, h: &Header, slots: &[u64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + 8 * capacity(1));
    b.extend_from_slice(&rev.to_u64().to_le_bytes());
    b.extend_from_slice(&h.encode().to_le_bytes());
    for k in 0..capacity(1) {
        b.extend_from_slice(&slots.get(k).copied().unwrap_or(0).to_le_bytes());
    }
    b
}

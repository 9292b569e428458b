//! The descent of a write (SMART §4.5, Algorithm 2): from the deepest
//! cached node (or the root slot) down to the key's slot, deciding at each
//! slot which case applies: a new leaf into an empty root slot, an update of
//! the key's leaf (in place or RCU, per [`crate::Techniques`]), a leaf split,
//! a header split, or a normal insert into the node that has no slot for
//! the key's next byte.

use super::leaf::{Mode, Spare};
use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::layout::{slot_addr, Slot};
use crate::rdwc::{Lead, WriteResult};
use crate::tree::{SmartTree, MAX_RETRIES};
use dm_runtime::cas;

impl SmartTree {
    /// The remote write (`path`: the key's radix path).
    pub(super) async fn write_op(
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
                    if crate::tree::publish_took(got, 0, w) {
                        return Ok(true);
                    }
                    spare.lost(0, None);
                    c.fresh(got);
                }
                Slot::Leaf { addr, .. } => {
                    let (l, lock) = self.read_leaf(addr).await?;
                    self.reverse_check(&c, l.rev, path, hit);
                    if l.key[..] == *key {
                        if let Some(m) = spare.maybe.take() {
                            if self.took_before(addr, &l, m).await? {
                                // A write-combining leader's WRITE covered
                                // the followers it had consumed then.
                                if let (Some(w), Some(upto)) = (wc, m.covered) {
                                    w.recover(upto);
                                }
                                spare.leaf = None;
                                return Ok(true);
                            }
                        }
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
                    self.refresh_type_hint(path, &c, n.header.ty);
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
                    self.cache_fill(path, p, addr, &n).await;
                    if let Some((i, w)) = n.find(path[p]) {
                        c = Cursor::child(addr, i, w, p + 1);
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
                    let insert = self.normal_insert(&mut spare, key, value, path, p, addr, &n, c);
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
}

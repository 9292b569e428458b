//! SMART's remote layout (SMART §4.1.1, Fig. 7; bit positions follow the
//! authors' code as the digest records them, adapted to dm's 64-byte aligned
//! allocations and to plain RDMA without masked CAS).
//!
//! All integers are little-endian u64 words; every field a CAS changes is a
//! whole 8-byte word, so a plain RDMA CAS suffices.
//!
//! ## Slot (8 B, changed by one CAS)
//!
//! | bits | field |
//! |---|---|
//! | 0..8 | partial key (the key byte this slot discriminates on) |
//! | 8..15 | leaf: leaf size in 8-byte words (so a reader READs just the leaf) |
//! | 8..13 | internal: node type of the child (1..=7; capacity `1 << (type+1)`) |
//! | 15 | leaf bit |
//! | 16..24 | MS id (up to 256 memory servers) |
//! | 24..64 | byte offset / 64 on that MS (40 bits: 64 TiB per MS) |
//!
//! The all-zero word is the empty slot: offset 0 of every MS is its
//! superblock, never a node. A slot's partial key never changes while the
//! slot is in use (§4.3.2); its pointer, type and leaf bit may.
//!
//! ## Internal node (reserved 2,064 B: room for 256 slots, §4.1.2)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | reverse pointer: raw [`GlobalAddr`] of the slot pointing here |
//! | 8 | 8 | header (below) |
//! | 16 | 8 x cap | slots, unsorted (insertion order) |
//!
//! Header: bits 0..8 depth (key bytes consumed before this node's prefix),
//! bits 8..13 node type (0 = deleted, §4.3.3), bits 13..16 prefix length
//! (0..=6), bits 16..64 the compressed prefix bytes (pessimistic path
//! compression: at most 6; longer prefixes go through chain nodes). Every
//! internal node reserves room for 256 slots so a type switch grows it in
//! place by CAS on the header; a READ fetches only `16 + 8 x capacity` bytes.
//!
//! ## Leaf (one item, updated in place)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | reverse pointer |
//! | 8 | 8 | meta: bit 0 valid, bits 8..16 key length, bits 16..64 sequence number |
//! | 16 | 8 | checksum of bytes `[8, 16)` and `[24, 32 + Kp)` |
//! | 24 | Kp | key, zero-padded to `Kp` (max key length rounded up to 8) |
//! | 24 + Kp | 8 | value |
//! | 32 + Kp | 8 | lock word: `seq << 1` free, `seq << 1 \| 1` taken |
//!
//! The lock is the last word (the paper's rear-embedded lock) so one WRITE of
//! `[8, 40 + Kp)` stores the new item and releases the lock, relying like
//! Sherman's command combination on the WRITE's data being placed before a
//! later CAS sees the lock free. Unlike the paper's lock byte, which shares a
//! word with the value and needs a masked CAS, it has its own word, so a
//! plain CAS takes it (the issue asks for this; rxe and upstream verbs have no
//! masked CAS). Readers validate by checksum: a torn READ mixing two versions
//! of the item is rejected (see `dm_runtime::checksum` for why a checksum and not a
//! version word).
//!
//! **Sequence number in the lock word (our addition).** Every locked write
//! bumps the item's `seq` and releases the lock to `(seq + 1) << 1`. A writer
//! takes the lock by CAS from `seq << 1`, the `seq` of the validated image it
//! decided on; the CAS fails if anything was written since that READ, so the
//! decision (present or removed, old value) is still true when the lock is
//! held, without the re-READ after locking that the digest's pitfall list
//! asks for (the artifact rewrites fields it read before locking). A torn
//! image whose lock word is newer than its item shows `lock != seq << 1` and
//! is read again.

use dm_verbs::GlobalAddr;

/// Bytes every internal node reserves: reverse pointer, header, 256 slots.
pub const INTERNAL_RESERVE: usize = 16 + 8 * 256;
/// Longest compressed prefix a header holds (§4.1.1).
pub const MAX_PREFIX: usize = 6;
/// Node types 1..=7, capacities 4, 8, ..., 256 (the authors' fine-grained types).
pub const MAX_TYPE: u8 = 7;
/// Allocation alignment the 40-bit slot offsets assume.
pub const ALIGN: u64 = 64;

/// Slots in a node of type `t` (1..=7).
pub fn capacity(t: u8) -> usize {
    1 << (t + 1)
}

/// Address of slot `i` of the internal node at `node`.
pub(crate) fn slot_addr(node: GlobalAddr, i: usize) -> GlobalAddr {
    node.add(16 + 8 * i as u64)
}

/// The smallest type whose capacity exceeds slot index `j` (`None` past 255).
pub fn type_for_index(j: usize) -> Option<u8> {
    (1..=MAX_TYPE).find(|&t| capacity(t) > j)
}

/// A decoded slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Empty,
    /// A leaf of `words` 8-byte words.
    Leaf {
        partial: u8,
        words: u8,
        addr: GlobalAddr,
    },
    /// An internal node of type `ty`.
    Internal {
        partial: u8,
        ty: u8,
        addr: GlobalAddr,
    },
}

/// Why a pointer cannot go into a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// MS id above 255, device memory, or an offset that is not 64-byte
    /// aligned or not below 2^46.
    Unaddressable(GlobalAddr),
    /// Leaf longer than 127 words or node type outside 1..=7.
    BadSize,
}

fn pack_addr(a: GlobalAddr) -> Result<u64, SlotError> {
    let off = a.offset();
    if a.ms() > 255 || a.is_device() || !off.is_multiple_of(ALIGN) || off >> 46 != 0 || off == 0 {
        return Err(SlotError::Unaddressable(a));
    }
    Ok((a.ms() as u64) << 16 | (off / ALIGN) << 24)
}

fn unpack_addr(w: u64) -> GlobalAddr {
    GlobalAddr::new(((w >> 16) & 0xff) as u16, (w >> 24) * ALIGN)
}

/// The 48 address bits of leaf `a` (MS id and offset / 64, as in its slot
/// word, bits 16..64 shifted down), which an RCU leaf keeps in its `seq`
/// field as the leaf it replaced (`Leaf::seq`); 0 for none.
pub fn chain_bits(a: GlobalAddr) -> u64 {
    pack_addr(a).map_or(0, |w| w >> 16)
}

/// The leaf address [`chain_bits`] made; `None` for 0 (no predecessor).
pub fn chain_addr(bits: u64) -> Option<GlobalAddr> {
    (bits != 0).then(|| unpack_addr((bits & SEQ_MASK) << 16))
}

impl Slot {
    /// The slot word.
    pub fn encode(&self) -> Result<u64, SlotError> {
        Ok(match *self {
            Slot::Empty => 0,
            Slot::Leaf {
                partial,
                words,
                addr,
            } => {
                if words == 0 || words > 127 {
                    return Err(SlotError::BadSize);
                }
                partial as u64 | (words as u64) << 8 | 1 << 15 | pack_addr(addr)?
            }
            Slot::Internal { partial, ty, addr } => {
                if ty == 0 || ty > MAX_TYPE {
                    return Err(SlotError::BadSize);
                }
                partial as u64 | (ty as u64) << 8 | pack_addr(addr)?
            }
        })
    }

    /// Decodes a slot word (any word decodes: a slot is one atomic word).
    pub fn decode(w: u64) -> Slot {
        if w == 0 {
            return Slot::Empty;
        }
        let partial = w as u8;
        let addr = unpack_addr(w);
        if w & 1 << 15 != 0 {
            Slot::Leaf {
                partial,
                words: ((w >> 8) & 0x7f) as u8,
                addr,
            }
        } else {
            Slot::Internal {
                partial,
                ty: ((w >> 8) & 0x1f) as u8,
                addr,
            }
        }
    }

    /// The partial key, if the slot is in use.
    pub fn partial(&self) -> Option<u8> {
        match *self {
            Slot::Empty => None,
            Slot::Leaf { partial, .. } | Slot::Internal { partial, .. } => Some(partial),
        }
    }
}

/// A header's compressed prefix: at most [`MAX_PREFIX`] bytes, inline.
pub type Prefix = smallvec::SmallVec<[u8; MAX_PREFIX]>;

/// An internal node's header (one CAS-able word at offset 8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Key bytes consumed before this node's prefix.
    pub depth: u8,
    /// 0 = deleted, else 1..=7.
    pub ty: u8,
    /// Compressed prefix (at most [`MAX_PREFIX`] bytes), inline: a
    /// decoded header allocates nothing (issue 32 item 2).
    pub prefix: Prefix,
}

impl Header {
    pub fn encode(&self) -> u64 {
        debug_assert!(self.prefix.len() <= MAX_PREFIX && self.ty <= MAX_TYPE);
        let mut w = self.depth as u64 | (self.ty as u64) << 8 | (self.prefix.len() as u64) << 13;
        for (i, b) in self.prefix.iter().enumerate() {
            w |= (*b as u64) << (16 + 8 * i);
        }
        w
    }

    /// `None` for an impossible word (prefix longer than 6 or type above 7).
    pub fn decode(w: u64) -> Option<Header> {
        let (ty, len) = (((w >> 8) & 0x1f) as u8, ((w >> 13) & 7) as usize);
        if ty > MAX_TYPE || len > MAX_PREFIX {
            return None;
        }
        Some(Header {
            depth: w as u8,
            ty,
            prefix: (0..len).map(|i| (w >> (16 + 8 * i)) as u8).collect(),
        })
    }
}

/// Leaf geometry for keys of at most `max_key` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafGeometry {
    pub max_key: usize,
    /// Key field size (`max_key` rounded up to 8).
    pub kp: usize,
}

/// A leaf item as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub rev: GlobalAddr,
    pub valid: bool,
    /// In-place leaves: locked writes so far (48 bits). RCU leaves (the
    /// ART baseline rungs, which never lock a leaf): the [`chain_bits`] of
    /// the leaf this one replaced in its slot, 0 for a key's first leaf
    /// (`SmartTree::took_before` walks it).
    pub seq: u64,
    /// Inline up to 24 bytes (no allocation per leaf READ of short keys).
    pub key: crate::keys::Path,
    pub value: u64,
}

/// A validated leaf image read in place ([`LeafGeometry::view`]): the
/// fields of [`Leaf`], the key borrowed from the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafView<'b> {
    pub rev: GlobalAddr,
    pub valid: bool,
    pub seq: u64,
    pub key: &'b [u8],
    pub value: u64,
}

impl LeafView<'_> {
    /// The decoded leaf (its key copied).
    pub fn to_leaf(&self) -> Leaf {
        Leaf {
            rev: self.rev,
            valid: self.valid,
            seq: self.seq,
            key: crate::keys::Path::from_slice(self.key),
            value: self.value,
        }
    }
}

pub const LEAF_OFF_META: usize = 8;
pub const LEAF_OFF_CSUM: usize = 16;
pub const LEAF_OFF_KEY: usize = 24;
/// The 48 bits of a leaf's sequence number.
pub const SEQ_MASK: u64 = (1 << 48) - 1;

/// The free lock word of a leaf at sequence number `seq`.
pub fn lock_free(seq: u64) -> u64 {
    (seq & SEQ_MASK) << 1
}

/// The taken lock word of a leaf at sequence number `seq`, by a taker
/// whose name (issue 33; 0 for a taker without a membership) is `holder`:
/// bits 49..64, `short_inc(incarnation) << 9 | cs`
/// (`dm_runtime::lock::member`). Layout: bit 0 taken, bits 1..49 `seq`.
pub fn lock_taken(seq: u64, holder: u64) -> u64 {
    lock_free(seq) | 1 | (holder & 0x7fff) << 49
}

/// For a taken rear lock word: the holder it names and the free word of
/// its `seq`, which releases it (the leaf was not written under it: the
/// WRITE that stores an item frees the lock at `seq + 1`). `None` for a
/// free word. The format SMART registers with its CS's
/// `dm_runtime::lock::CsWords`, so that CS releases a stale word of its own
/// when another CS's waiter asks (issue 33).
pub fn rear_release(word: u64) -> Option<(dm_runtime::lock::Holder, u64)> {
    (word & 1 == 1).then(|| (lock_holder(word), lock_free((word >> 1) & SEQ_MASK)))
}

/// The holder a taken rear lock word names ([`lock_taken`]).
pub fn lock_holder(word: u64) -> dm_runtime::lock::Holder {
    let x = word >> 49;
    dm_runtime::lock::Holder {
        cs: (x & 0x1ff) as u16,
        inc: (x >> 9) as u32,
        short: true,
    }
}

impl LeafGeometry {
    /// `max_key` in 1..=255.
    pub fn new(max_key: usize) -> Self {
        LeafGeometry {
            max_key,
            kp: max_key.div_ceil(8) * 8,
        }
    }

    /// Bytes of a leaf (a multiple of 8).
    pub fn bytes(&self) -> usize {
        40 + self.kp
    }

    /// Offset of the lock word.
    pub fn lock_off(&self) -> usize {
        32 + self.kp
    }

    fn checksum(&self, b: &[u8]) -> u64 {
        let meta = &b[LEAF_OFF_META..LEAF_OFF_CSUM];
        let item = &b[LEAF_OFF_KEY..LEAF_OFF_KEY + self.kp + 8];
        let mut h: u64 = 0x452821e638d01377;
        for w in meta.chunks_exact(8).chain(item.chunks_exact(8)) {
            let w = u64::from_le_bytes(w.try_into().unwrap());
            h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        }
        h
    }

    /// The whole leaf image with the lock word free at `l.seq` (so writing
    /// bytes `[8, ..)` of it also releases the lock).
    pub fn encode(&self, l: &Leaf) -> Vec<u8> {
        assert!(
            l.key.len() <= self.max_key,
            "key longer than the leaf holds"
        );
        let mut b = dm_verbs::buf::take(self.bytes());
        b.resize(self.bytes(), 0);
        b[..8].copy_from_slice(&l.rev.to_u64().to_le_bytes());
        let meta = l.valid as u64 | (l.key.len() as u64) << 8 | (l.seq & SEQ_MASK) << 16;
        b[LEAF_OFF_META..LEAF_OFF_META + 8].copy_from_slice(&meta.to_le_bytes());
        let lo = self.lock_off();
        b[lo..lo + 8].copy_from_slice(&lock_free(l.seq).to_le_bytes());
        b[LEAF_OFF_KEY..LEAF_OFF_KEY + l.key.len()].copy_from_slice(&l.key);
        let vo = LEAF_OFF_KEY + self.kp;
        b[vo..vo + 8].copy_from_slice(&l.value.to_le_bytes());
        let c = self.checksum(&b);
        b[LEAF_OFF_CSUM..LEAF_OFF_CSUM + 8].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Validates a READ image: `None` if the checksum does not match (torn or
    /// mid-write) or the key length is impossible. The lock word and the
    /// reverse pointer are outside the checksum (they change on their own).
    pub fn decode(&self, b: &[u8]) -> Option<Leaf> {
        Some(self.view(b)?.to_leaf())
    }

    /// [`LeafGeometry::decode`] without copying the key: the same checks,
    /// the fields read in place (a warm get's leaf, issue 32).
    pub fn view<'b>(&self, b: &'b [u8]) -> Option<LeafView<'b>> {
        if b.len() < self.bytes() {
            return None;
        }
        let stored = u64::from_le_bytes(b[LEAF_OFF_CSUM..LEAF_OFF_CSUM + 8].try_into().unwrap());
        if self.checksum(b) != stored {
            return None;
        }
        let len = b[LEAF_OFF_META + 1] as usize;
        if len > self.max_key {
            return None;
        }
        let vo = LEAF_OFF_KEY + self.kp;
        let meta = u64::from_le_bytes(b[LEAF_OFF_META..LEAF_OFF_META + 8].try_into().unwrap());
        Some(LeafView {
            rev: GlobalAddr::from_u64(u64::from_le_bytes(b[..8].try_into().unwrap())),
            valid: meta & 1 == 1,
            seq: meta >> 16,
            key: &b[LEAF_OFF_KEY..LEAF_OFF_KEY + len],
            value: u64::from_le_bytes(b[vo..vo + 8].try_into().unwrap()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip_and_reject_unaddressable_pointers() {
        let a = GlobalAddr::new(3, 64 * 12345);
        for s in [
            Slot::Empty,
            Slot::Leaf {
                partial: 0xab,
                words: 9,
                addr: a,
            },
            Slot::Internal {
                partial: 0,
                ty: 7,
                addr: GlobalAddr::new(255, (1 << 46) - 64),
            },
        ] {
            assert_eq!(Slot::decode(s.encode().unwrap()), s);
        }
        let bad = |addr| Slot::Internal {
            partial: 1,
            ty: 1,
            addr,
        };
        for addr in [
            GlobalAddr::new(256, 64),
            GlobalAddr::new(0, 65),
            GlobalAddr::new(0, 1 << 46),
            GlobalAddr::new(0, 0),
            GlobalAddr::device(0, 64),
        ] {
            assert_eq!(bad(addr).encode(), Err(SlotError::Unaddressable(addr)));
        }
        let leaf = |words| Slot::Leaf {
            partial: 1,
            words,
            addr: a,
        };
        assert_eq!(leaf(128).encode(), Err(SlotError::BadSize));
        assert_eq!(
            Slot::Internal {
                partial: 1,
                ty: 8,
                addr: a
            }
            .encode(),
            Err(SlotError::BadSize)
        );
    }

    #[test]
    fn headers_and_types() {
        let h = Header {
            depth: 9,
            ty: 3,
            prefix: smallvec::smallvec![1, 2, 3, 4, 5, 6],
        };
        assert_eq!(Header::decode(h.encode()), Some(h));
        assert_eq!(Header::decode(7 << 13), None);
        assert_eq!((capacity(1), capacity(MAX_TYPE)), (4, 256));
        assert_eq!(type_for_index(0), Some(1));
        assert_eq!(type_for_index(4), Some(2));
        assert_eq!(type_for_index(255), Some(7));
        assert_eq!(type_for_index(256), None);
        assert_eq!(INTERNAL_RESERVE, 2064);
    }

    #[test]
    fn leaves_round_trip_and_torn_images_are_rejected() {
        let g = LeafGeometry::new(32);
        assert_eq!((g.bytes(), g.lock_off()), (72, 64));
        let l = Leaf {
            rev: GlobalAddr::new(1, 128),
            valid: true,
            seq: 3,
            key: crate::keys::Path::from_slice(b"pypi-name"),
            value: 42,
        };
        let old = g.encode(&l);
        assert_eq!(g.decode(&old), Some(l.clone()));
        let new = g.encode(&Leaf {
            value: 43,
            key: crate::keys::Path::from_slice(b"pypi-other"),
            ..l.clone()
        });
        for w in 1..g.bytes() / 8 {
            for (a, b) in [(&old, &new), (&new, &old)] {
                let mut t = a.clone();
                t[w * 8..w * 8 + 8].copy_from_slice(&b[w * 8..w * 8 + 8]);
                if t != *a {
                    assert_eq!(g.decode(&t), None, "word {w}");
                }
            }
        }
        assert_eq!(
            u64::from_le_bytes(old[g.lock_off()..].try_into().unwrap()),
            lock_free(3)
        );
        // The lock word and reverse pointer are outside the checksum.
        let mut t = old.clone();
        t[g.lock_off()] = 5;
        t[0] = 9;
        assert!(g.decode(&t).is_some());
    }
}

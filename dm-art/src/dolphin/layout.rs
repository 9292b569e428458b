//! Dolphin's remote objects (Dolphin §III-A, Fig. 3; the digest's B2 gives
//! the authors' byte layout, changed here where soundness needs it: see the
//! module docs of [`dolphin`](super)).
//!
//! All integers are little-endian u64 words. Keys are 8 bytes, big-endian
//! (integer order); a leaf holds keys that share their first 7 bytes (the
//! *prefix*), so an item stores only the last byte.
//!
//! ## Leaf (`leaf_bytes`, default 1,024 B; `n = (leaf_bytes - 48) / 24` items)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | reverse pointer: raw [`GlobalAddr`] of the slot naming the leaf (a cache hint, not covered by the checksum) |
//! | 8 | 8 | header checksum of bytes `[16, 40)` |
//! | 16 | 8 | `min`: the 7-byte prefix and the lowest last byte `lo`, as one big-endian key |
//! | 24 | 8 | bits 0..8 `hi` (the highest last byte, inclusive), bits 32..64 the 32-bit leaf version |
//! | 32 | 8 | the special node this leaf hangs from (raw address; 0 while it hangs from an ART slot) |
//! | 40 + 24i | 8 | item `i`: key word (below) |
//! | 48 + 24i | 16 | item `i`: value buffers `V[0]`, `V[1]` |
//! | `leaf_bytes - 8` | 8 | Spear lock word (signed; changed only by FAA, never by a leaf WRITE) |
//!
//! The paper's range `[min, max)` becomes `[lo, hi]` on the last byte.
//!
//! ## Key word (one 8-byte word per item)
//!
//! | bits | field |
//! |---|---|
//! | 0..8 | the key's last byte |
//! | 8 | valid |
//! | 9..16 | sequence number `s` (7 bits): the current value is `V[s & 1]` |
//! | 16..32 | low 16 bits of the leaf version the item was written under |
//! | 32..64 | digest: 32 bits of a hash of (leaf version, item index, key word fields, `V[s & 1]`) |
//!
//! A reader accepts a leaf image only if the header checksum holds and every
//! key word carries the header's version, and accepts an item only if its
//! digest matches the value buffer it names.
//!
//! ## Special node (256 B reserved, 256-aligned; Dolphin §III-B "special" internal node)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | reverse pointer (the ART slot naming it) |
//! | 8 | 8 | the 7-byte prefix its leaves share, as a key with last byte 0 |
//! | 16 + 8j | 8 | entry `j` (of [`SPECIAL_ENTRIES`]): a slot word naming a leaf, whose partial key is the leaf's `lo`; 0 = empty |
//!
//! Entries are filled by CAS and never emptied; a lookup takes the leaf with
//! the largest `lo` at or below the key's last byte (floor match).

use dm_runtime::checksum::checksum;
use dm_verbs::GlobalAddr;

/// Header bytes before the first item.
pub const ITEMS_OFF: usize = 40;
/// Bytes per item: key word and two value buffers.
pub const ITEM_BYTES: usize = 24;
/// Leaves per special node (the authors' code uses 16; with even splits a
/// 7-byte prefix never needs more than 13 leaves of at least 32 items, see
/// [`dolphin`](super)).
pub const SPECIAL_ENTRIES: usize = 16;
/// Bytes of a special node READ (reverse pointer, prefix, entries).
pub const SPECIAL_BYTES: usize = 16 + 8 * SPECIAL_ENTRIES;
/// Alignment (and reservation) of special nodes, so a leaf's entry address
/// names its node.
pub const SPECIAL_ALIGN: u64 = 256;
/// The fewest items a leaf may have (even splits then keep every prefix
/// within [`SPECIAL_ENTRIES`] leaves).
pub const MIN_ITEMS: usize = 32;
/// The slot-word "leaf size" value of a slot naming a Dolphin leaf.
pub const KIND_LEAF: u8 = 2;
/// The slot-word "leaf size" value of a slot naming a special node.
pub const KIND_SPECIAL: u8 = 1;

/// Leaf geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafGeometry {
    pub bytes: usize,
    pub items: usize,
}

impl LeafGeometry {
    /// The geometry of `bytes`-byte leaves (`None` below [`MIN_ITEMS`] items
    /// or if not a multiple of 64).
    pub fn new(bytes: usize) -> Option<Self> {
        let items = bytes.checked_sub(ITEMS_OFF + 8)? / ITEM_BYTES;
        (items >= MIN_ITEMS && bytes.is_multiple_of(64)).then_some(LeafGeometry { bytes, items })
    }
    /// Offset of the Spear lock word.
    pub fn lock_off(&self) -> usize {
        self.bytes - 8
    }
    /// Offset of item `i`'s key word.
    pub fn item_off(i: usize) -> usize {
        ITEMS_OFF + ITEM_BYTES * i
    }
}

/// A key word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyWord {
    pub last: u8,
    pub valid: bool,
    pub seq: u8,
    pub ver16: u16,
    pub digest: u32,
}

impl KeyWord {
    pub fn encode(&self) -> u64 {
        self.last as u64
            | (self.valid as u64) << 8
            | ((self.seq & 0x7f) as u64) << 9
            | (self.ver16 as u64) << 16
            | (self.digest as u64) << 32
    }
    pub fn decode(w: u64) -> Self {
        KeyWord {
            last: w as u8,
            valid: w >> 8 & 1 == 1,
            seq: (w >> 9) as u8 & 0x7f,
            ver16: (w >> 16) as u16,
            digest: (w >> 32) as u32,
        }
    }
    /// The valid key word for `last` at sequence `seq` holding `value`, in
    /// item `i` of a leaf at `version`.
    pub fn valid(version: u32, i: usize, last: u8, seq: u8, value: u64) -> Self {
        let mut k = KeyWord {
            last,
            valid: true,
            seq: seq & 0x7f,
            ver16: version as u16,
            digest: 0,
        };
        k.digest = digest(version, i, &k, value);
        k
    }
    /// The empty key word of item `i` of a leaf at `version`.
    pub fn empty(version: u32) -> Self {
        KeyWord {
            last: 0,
            valid: false,
            seq: 0,
            ver16: version as u16,
            digest: 0,
        }
    }
}

/// 32 bits of a hash of the leaf version, the item index, the key word's
/// fields and the value (binds a value buffer to the key word naming it).
///
/// The workspace checksum folds the value last, and its top 32 bits depend
/// only on the value's low 35 bits (multiplication carries upwards only), so
/// two values differing above bit 34 shared a digest, and a reader could
/// accept one update's value under another's key word (found by
/// `dm-bench check --index dolphin --keys 1 --clients 16 --ops 20
/// --first-seed 45`). The checksum is therefore finished with MurmurHash3's
/// `fmix64`, a bijection whose every output bit depends on every input bit,
/// before the top half is taken: for a fixed key word the 64-bit hash is a
/// bijection of the value, and two values collide with probability about
/// 2^-32.
pub fn digest(version: u32, i: usize, k: &KeyWord, value: u64) -> u32 {
    let fields = k.last as u64 | (k.valid as u64) << 8 | (k.seq as u64) << 9;
    let w = [(version as u64) << 32 | i as u64, fields, value];
    let mut b = [0u8; 24];
    for (d, x) in b.chunks_exact_mut(8).zip(w) {
        d.copy_from_slice(&x.to_le_bytes());
    }
    (fmix64(checksum(&b)) >> 32) as u32
}

/// MurmurHash3's 64-bit finaliser (a bijection with full avalanche).
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// One item as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    pub key: KeyWord,
    pub bufs: [u64; 2],
}

impl Item {
    /// The value this item names, if its digest matches (`None`: a torn or
    /// mid-update image, READ again).
    pub fn value(&self, version: u32, i: usize) -> Option<u64> {
        let v = self.bufs[(self.key.seq & 1) as usize];
        (digest(version, i, &self.key, v) == self.key.digest).then_some(v)
    }
}

/// What [`LeafView::find`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Item index and value.
    Item(usize, u64),
    Absent,
    /// The item's value buffer does not match its digest (mid-update or
    /// torn): READ again.
    Torn,
}

/// A decoded, validated leaf image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafImage {
    pub rev: GlobalAddr,
    /// The 7 prefix bytes as a key with last byte 0.
    pub prefix: u64,
    pub lo: u8,
    pub hi: u8,
    pub version: u32,
    /// The special node this leaf hangs from (`NULL`: an ART slot).
    pub special: GlobalAddr,
    /// Inline up to 64 items (the default 1 KiB leaf holds 40 (a warm get decodes
    /// its leaf without allocating; larger leaves spill to the heap).
    pub items: smallvec::SmallVec<[Item; 64]>,
    /// The Spear lock word as READ (signed).
    pub lock: i64,
}

impl LeafImage {
    /// A fresh leaf for `prefix` covering last bytes `[lo, hi]`.
    pub fn new(g: &LeafGeometry, prefix: u64, lo: u8, hi: u8, version: u32) -> Self {
        LeafImage {
            rev: GlobalAddr::NULL,
            prefix,
            lo,
            hi,
            version,
            special: GlobalAddr::NULL,
            items: smallvec::smallvec![
                Item {
                    key: KeyWord::empty(version),
                    bufs: [0, 0],
                };
                g.items
            ],
            lock: 0,
        }
    }

    /// The valid items as (key, value), taking a value buffer whose digest
    /// does not match as it stands (exclusive holders only: see `smo`).
    pub fn entries_raw(&self) -> Vec<(u64, u64)> {
        self.items
            .iter()
            .filter(|it| it.key.valid)
            .map(|it| {
                (
                    self.prefix | it.key.last as u64,
                    it.bufs[(it.key.seq & 1) as usize],
                )
            })
            .collect()
    }

    /// The header words `[16, 40)`.
    fn header_words(&self) -> [u64; 3] {
        [
            self.prefix | self.lo as u64,
            self.hi as u64 | (self.version as u64) << 32,
            self.special.to_u64(),
        ]
    }

    /// Bytes `[0, leaf_bytes - 8)`: everything but the lock word (a leaf
    /// WRITE never covers it, Dolphin §III-C).
    /// In a buffer of this thread's pool (`dm_verbs::buf`) with room for
    /// the lock word too, which a WRITE of it gives back (issue 32: an
    /// insert's new leaf allocated twice here).
    pub fn encode(&self, g: &LeafGeometry) -> Vec<u8> {
        let mut b = dm_verbs::buf::take(g.bytes);
        let mut hb = [0u8; 24];
        for (d, w) in hb.chunks_exact_mut(8).zip(self.header_words()) {
            d.copy_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&self.rev.to_u64().to_le_bytes());
        b.extend_from_slice(&checksum(&hb).to_le_bytes());
        b.extend_from_slice(&hb);
        for it in &self.items {
            b.extend_from_slice(&it.key.encode().to_le_bytes());
            b.extend_from_slice(&it.bufs[0].to_le_bytes());
            b.extend_from_slice(&it.bufs[1].to_le_bytes());
        }
        b.resize(g.lock_off(), 0);
        b
    }

    /// Decodes a whole-leaf READ (`g.bytes` bytes); `None` if the header
    /// checksum fails or a key word carries another version (torn across a
    /// whole-leaf write: READ again).
    pub fn decode(g: &LeafGeometry, b: &[u8]) -> Option<LeafImage> {
        let w = |off: usize| u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
        if b.len() < g.bytes || checksum(&b[16..40]) != w(8) {
            return None;
        }
        let min = w(16);
        let version = (w(24) >> 32) as u32;
        let mut items = smallvec::SmallVec::with_capacity(g.items);
        for i in 0..g.items {
            let o = LeafGeometry::item_off(i);
            let key = KeyWord::decode(w(o));
            if key.ver16 != version as u16 {
                return None;
            }
            items.push(Item {
                key,
                bufs: [w(o + 8), w(o + 16)],
            });
        }
        Some(LeafImage {
            rev: GlobalAddr::from_u64(w(0)),
            prefix: min & !0xff,
            lo: min as u8,
            hi: w(24) as u8,
            version,
            special: GlobalAddr::from_u64(w(32)),
            items,
            lock: w(g.lock_off()) as i64,
        })
    }
}

/// A whole-leaf READ validated and read in place (issue 32, item 2: a get
/// copies no item out): valid exactly when [`LeafImage::decode`] would
/// decode the same bytes (header checksum, every key word at the header's
/// version), with the same fields. Gets and writers read a held or READ
/// leaf through it; [`LeafImage`] is for whole-leaf rewrites (splits,
/// repairs) and scans.
pub struct LeafView<'a> {
    b: &'a [u8],
    items: usize,
    version: u32,
}

impl<'a> LeafView<'a> {
    /// `None` where [`LeafImage::decode`] is `None` (READ again).
    pub fn new(g: &LeafGeometry, b: &'a [u8]) -> Option<Self> {
        if b.len() < g.bytes {
            return None;
        }
        let v = LeafView {
            b,
            items: g.items,
            version: 0,
        };
        if checksum(&b[16..40]) != v.w(8) {
            return None;
        }
        let version = (v.w(24) >> 32) as u32;
        let all = (0..g.items)
            .all(|i| KeyWord::decode(v.w(LeafGeometry::item_off(i))).ver16 == version as u16);
        all.then_some(LeafView { version, ..v })
    }

    /// A view of bytes [`LeafView::new`] accepted before (a held leaf's
    /// READ, passed on): checks nothing again.
    pub fn trusted(g: &LeafGeometry, b: &'a [u8]) -> Self {
        let v = LeafView {
            b,
            items: g.items,
            version: 0,
        };
        LeafView {
            version: (v.w(24) >> 32) as u32,
            ..v
        }
    }

    fn w(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.b[off..off + 8].try_into().unwrap())
    }

    /// [`LeafImage::version`].
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Item `i` (`i` below the geometry's item count).
    pub fn item(&self, i: usize) -> Item {
        let o = LeafGeometry::item_off(i);
        Item {
            key: KeyWord::decode(self.w(o)),
            bufs: [self.w(o + 8), self.w(o + 16)],
        }
    }

    /// The index of the valid item for last byte `last`, whatever its value
    /// buffer holds (writers need only the key word).
    pub fn position(&self, last: u8) -> Option<usize> {
        (0..self.items).find(|&i| {
            let key = KeyWord::decode(self.w(LeafGeometry::item_off(i)));
            key.valid && key.last == last
        })
    }

    /// The first free item, if any.
    pub fn free(&self) -> Option<usize> {
        (0..self.items).find(|&i| !KeyWord::decode(self.w(LeafGeometry::item_off(i))).valid)
    }

    /// [`LeafImage::rev`].
    pub fn rev(&self) -> GlobalAddr {
        GlobalAddr::from_u64(self.w(0))
    }

    /// [`LeafImage::prefix`].
    pub fn prefix(&self) -> u64 {
        self.w(16) & !0xff
    }

    /// [`LeafImage::special`].
    pub fn special(&self) -> GlobalAddr {
        GlobalAddr::from_u64(self.w(32))
    }

    /// Whether `key`'s last byte lies in `[lo, hi]` (same prefix assumed).
    pub fn covers(&self, key: u64) -> bool {
        (self.w(16) as u8..=self.w(24) as u8).contains(&(key as u8))
    }

    /// The index and value of the valid item for last byte `last`, reading
    /// only the key words up to it.
    pub fn find(&self, last: u8) -> Found {
        match self.position(last) {
            None => Found::Absent,
            Some(i) => match self.item(i).value(self.version, i) {
                Some(v) => Found::Item(i, v),
                None => Found::Torn,
            },
        }
    }
}

/// A special node as READ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecialImage {
    pub rev: GlobalAddr,
    pub prefix: u64,
    pub entries: SpecialEntries,
}

/// A special node's entry words, inline (decoding one, or caching it,
/// allocates nothing: issue 32).
pub type SpecialEntries = smallvec::SmallVec<[u64; SPECIAL_ENTRIES]>;

impl SpecialImage {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(SPECIAL_BYTES);
        b.extend_from_slice(&self.rev.to_u64().to_le_bytes());
        b.extend_from_slice(&self.prefix.to_le_bytes());
        for j in 0..SPECIAL_ENTRIES {
            let e = self.entries.get(j).copied().unwrap_or(0);
            b.extend_from_slice(&e.to_le_bytes());
        }
        b
    }
    pub fn decode(b: &[u8]) -> SpecialImage {
        let w = |off: usize| u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
        SpecialImage {
            rev: GlobalAddr::from_u64(w(0)),
            prefix: w(8),
            entries: (0..SPECIAL_ENTRIES).map(|j| w(16 + 8 * j)).collect(),
        }
    }
    /// The leaf covering last byte `last` (floor match on the entries' `lo`).
    pub fn floor(&self, last: u8) -> Option<GlobalAddr> {
        floor(&self.entries, last)
    }
}

/// Floor match over special-node entry words.
pub fn floor(entries: &[u64], last: u8) -> Option<GlobalAddr> {
    entries
        .iter()
        .filter(|&&e| e != 0 && e as u8 <= last)
        .max_by_key(|&&e| e as u8)
        .map(|&e| match crate::layout::Slot::decode(e) {
            crate::layout::Slot::Leaf { addr, .. } | crate::layout::Slot::Internal { addr, .. } => {
                addr
            }
            crate::layout::Slot::Empty => GlobalAddr::NULL,
        })
}

/// Address of entry `j` of the special node at `d`.
pub fn special_entry(d: GlobalAddr, j: usize) -> GlobalAddr {
    d.add(16 + 8 * j as u64)
}

/// The special node whose entry is at `entry` (nodes are [`SPECIAL_ALIGN`]-aligned).
pub fn special_of(entry: GlobalAddr) -> GlobalAddr {
    GlobalAddr::new(entry.ms(), entry.offset() & !(SPECIAL_ALIGN - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_round_trip_and_torn_versions_are_rejected() {
        let g = LeafGeometry::new(1024).unwrap();
        assert_eq!(g.items, 40);
        let mut l = LeafImage::new(&g, 0x0102_0304_0506_0700, 0, 255, 7);
        l.items[3] = Item {
            key: KeyWord::valid(7, 3, 9, 1, 42),
            bufs: [0, 42],
        };
        let mut b = l.encode(&g);
        b.extend_from_slice(&5i64.to_le_bytes());
        let d = LeafImage::decode(&g, &b).unwrap();
        assert_eq!(d.lock, 5);
        let v = LeafView::new(&g, &b).unwrap();
        assert_eq!(v.find(9), Found::Item(3, 42));
        assert_eq!(v.find(8), Found::Absent);
        assert_eq!(
            (v.version(), v.prefix(), v.position(9)),
            (7, d.prefix, Some(3))
        );
        // A value buffer torn against its key word.
        let mut t = b.clone();
        t[LeafGeometry::item_off(3) + 16] ^= 1;
        assert!(LeafImage::decode(&g, &t).is_some());
        assert_eq!(LeafView::new(&g, &t).unwrap().find(9), Found::Torn);
        // A key word from another leaf version.
        let other = LeafImage::new(&g, 0x0102_0304_0506_0700, 0, 255, 8).encode(&g);
        let o = LeafGeometry::item_off(5);
        t = b.clone();
        t[o..o + 8].copy_from_slice(&other[o..o + 8]);
        assert!(LeafImage::decode(&g, &t).is_none());
        assert!(LeafView::new(&g, &t).is_none());
        // A header torn between versions.
        t = b.clone();
        t[24..32].copy_from_slice(&other[24..32]);
        assert!(LeafImage::decode(&g, &t).is_none());
        assert!(LeafView::new(&g, &t).is_none());
        assert!(LeafGeometry::new(512).is_none());
    }

    /// Values that differ in one bit, any bit, never share a digest (the
    /// checksum's top half alone ignored bits 35..64 of the value), and
    /// random pairs collide no more than chance allows.
    #[test]
    fn the_digest_binds_every_bit_of_the_value() {
        let k = KeyWord::valid(0, 0, 0, 12, 0);
        for v in [0u64, 0x3_0000_000e, u64::MAX, 0x0123_4567_89ab_cdef] {
            for bit in 0..64 {
                assert_ne!(
                    digest(0, 0, &k, v),
                    digest(0, 0, &k, v ^ 1 << bit),
                    "value {v:#x}, bit {bit}"
                );
            }
        }
        // The pair that check seed 45 found: clients 3 and 11, same sequence.
        assert_ne!(
            digest(0, 0, &k, 12_884_901_902),
            digest(0, 0, &k, 47_244_640_270)
        );
        let mut seen = std::collections::HashSet::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            seen.insert(digest(0, 0, &k, x & 0xffff_ffff_0000_ffff));
        }
        // 10^5 draws from 2^32: about 1.2 collisions expected.
        assert!(seen.len() >= 100_000 - 10, "{} distinct", seen.len());
    }

    #[test]
    fn floor_picks_the_covering_leaf() {
        let a = |o: u64| GlobalAddr::new(0, o * 64);
        let e = |lo: u8, o: u64| {
            crate::layout::Slot::Leaf {
                partial: lo,
                words: KIND_LEAF,
                addr: a(o),
            }
            .encode()
            .unwrap()
        };
        let s = [e(100, 2), 0, e(0, 1), e(200, 3)];
        assert_eq!(floor(&s, 0), Some(a(1)));
        assert_eq!(floor(&s, 99), Some(a(1)));
        assert_eq!(floor(&s, 100), Some(a(2)));
        assert_eq!(floor(&s, 255), Some(a(3)));
        let d = GlobalAddr::new(1, 4096);
        assert_eq!(special_of(special_entry(d, 15)), d);
    }
}

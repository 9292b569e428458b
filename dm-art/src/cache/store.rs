//! The ART cache's storage (see the [module docs](super)): entries held in
//! the buckets of one hash map keyed by their key prefix, evicted in FIFO
//! order.
//!
//! A warm lookup touches the map's control bytes and one bucket: the
//! bucket, one 64-byte cache line ([`Bucket`]), holds the map key, the
//! node address and, for up to [`INLINE`] filled slots (most nodes below
//! the top levels of a tree of hashed keys), the slot words themselves.
//! Before 2026-11-28 a bucket held a slab index, the slab the entry, and
//! the entry a boxed slot array: three dependent cache misses per probe
//! that `perf` put at 18% of a warm SMART get on loopback
//! (docs/experiments/cpu-ratios.md; issue 32). Until 2026-11-29 a bucket
//! was 80 bytes (the long prefix's pointer inside it) at 8-byte alignment,
//! so nearly every probe touched two lines.

use dm_verbs::GlobalAddr;
use hashbrown::HashTable;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Filled slots an entry holds in its bucket; more go to a heap array.
pub(super) const INLINE: usize = 4;

/// An entry's slot words: in the bucket, or a heap array of a size class
/// ([`CLASSES`]) for more than [`INLINE`]; from class [`INDEXED`] on, the
/// array starts with a byte index ([`ByteIndex`]).
enum Slots {
    Inline([u64; INLINE]),
    Heap(Box<[u64]>),
    /// `[index (INDEX_WORDS words) | slot words (the class)]`.
    Indexed(Box<[u64]>),
}

/// Heap classes from this one on carry a byte index: a node this full is
/// one of the tree's top ones (a Node256 of a hashed-key tree fills about
/// 200 slots), which most lookups pass, and a scan of its slot words for a
/// byte read about 100 words (half the lookup's samples in `perf`, issue
/// 32).
pub(super) const INDEXED: usize = 32;

/// Words of a byte index: one byte per partial key (256 bytes).
const INDEX_WORDS: usize = 32;

/// Words a heap array of class `c` takes (its slot words, and the byte
/// index from [`INDEXED`] on).
fn alloc_words(c: usize) -> usize {
    c + if c >= INDEXED { INDEX_WORDS } else { 0 }
}

/// A byte index over an entry's filled slots: byte `b` of it is the
/// position of the first filled slot whose partial key (the word's low
/// byte) is `b`, or any position if none is. Answers are checked against
/// the slot word, so an absent byte needs no sentinel (a Node256 uses all
/// 256 positions).
struct ByteIndex<'a>(&'a mut [u64]);

impl ByteIndex<'_> {
    fn get(words: &[u64], b: u8) -> usize {
        (words[b as usize / 8] >> (8 * (b as usize % 8))) as u8 as usize
    }

    fn set(&mut self, b: u8, i: usize) {
        let sh = 8 * (b as usize % 8);
        let w = &mut self.0[b as usize / 8];
        *w = (*w & !(0xff << sh)) | ((i as u64) << sh);
    }

    /// Indexes `slots[from..]`, the slots before `from` indexed already:
    /// a byte keeps its first position.
    fn extend(&mut self, slots: &[u64], from: usize) {
        for (i, &w) in slots.iter().enumerate().skip(from) {
            let b = w as u8;
            let at = Self::get(self.0, b);
            if !(at < i && slots[at] as u8 == b) {
                self.set(b, i);
            }
        }
    }
}

impl Slots {
    fn words(&self) -> &[u64] {
        match self {
            Slots::Inline(a) => a,
            Slots::Heap(b) => b,
            Slots::Indexed(b) => &b[INDEX_WORDS..],
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        match self {
            Slots::Inline(a) => a,
            Slots::Heap(b) => b,
            Slots::Indexed(b) => &mut b[INDEX_WORDS..],
        }
    }

    /// Words on the heap (what the budget counts beyond the bucket).
    fn heap_words(&self) -> usize {
        match self {
            Slots::Inline(_) => 0,
            Slots::Heap(b) | Slots::Indexed(b) => b.len(),
        }
    }

    /// Indexes filled slots `from..filled` (slots before `from` indexed
    /// already; 0 rebuilds the index). No-op without an index.
    fn index(&mut self, from: usize, filled: usize) {
        if let Slots::Indexed(b) = self {
            let (idx, words) = b.split_at_mut(INDEX_WORDS);
            ByteIndex(idx).extend(&words[..filled], from);
        }
    }

    /// The heap array, if any (to keep as a spare).
    fn into_heap(self) -> Option<Box<[u64]>> {
        match self {
            Slots::Inline(_) => None,
            Slots::Heap(b) | Slots::Indexed(b) => Some(b),
        }
    }
}

/// One cached internal node: its address and its filled slots as READ (or
/// as this CS's own CASes filled them).
pub(super) struct Entry {
    pub(super) node: GlobalAddr,
    /// FIFO stamp of admission (wraps; only compared with the FIFO's
    /// records, which compaction keeps recent).
    pub(super) stamp: u32,
    filled: u32,
    /// At least `filled` words; the first `filled` are the node's filled
    /// slots. The budget counts a heap array whole.
    slots: Slots,
}

/// A map bucket: an entry under its map key ([`prefix_key`]), one cache
/// line. Layout (bytes): `0..8` the key, `8..16` the node address, `16..20`
/// the FIFO stamp, `20..24` the filled count, `24..64` the slot words (four
/// inline, or a heap array's pointer and length) and their variant's tag.
#[repr(C, align(64))]
struct Bucket {
    key: u64,
    e: Entry,
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// Entry `id` of `map`, for a caller that also borrows the [`Store`]'s
/// other fields.
fn entry_mut(map: &mut HashTable<Bucket>, id: u64) -> Option<&mut Entry> {
    map.find_mut(hash(id), |b| b.key == id).map(|b| &mut b.e)
}

/// The map's hash of a map key (every bit of it reaches the low bits).
fn hash(key: u64) -> u64 {
    let mut h = MixHasher::default();
    h.write_u64(key);
    h.finish()
}

impl Entry {
    /// The node's filled slots as cached.
    pub(super) fn slots(&self) -> &[u64] {
        &self.slots.words()[..self.filled as usize]
    }

    /// The position of the first filled slot whose partial key (low byte)
    /// is `b`: through the byte index if the entry has one, else a scan.
    pub(super) fn position(&self, b: u8) -> Option<usize> {
        let slots = self.slots();
        match &self.slots {
            Slots::Indexed(a) => {
                let i = ByteIndex::get(a, b);
                (i < slots.len() && slots[i] as u8 == b).then_some(i)
            }
            _ => slots.iter().position(|&w| w as u8 == b),
        }
    }

    /// Replaces filled slot `i`'s word by `new` if it holds `old` and `new`
    /// is not 0; true if it did.
    pub(super) fn replace(&mut self, i: usize, old: u64, new: u64) -> bool {
        let filled = self.filled as usize;
        let Some(w) = self.slots.words_mut()[..filled].get_mut(i) else {
            return false;
        };
        if *w != old || new == 0 {
            return false;
        }
        *w = new;
        if old as u8 != new as u8 {
            self.slots.index(0, filled);
        }
        true
    }
}

/// Bytes an entry with `heap_words` slot words on the heap (0 up to
/// [`INLINE`] filled slots) and a `long`-byte prefix occupies: its map
/// bucket (64), plus the heap array and the prefix copy (the budget's
/// unit).
pub(super) fn entry_bytes(heap_words: usize, long: usize) -> usize {
    std::mem::size_of::<Bucket>() + 8 * heap_words + long
}
/// The map key of a key prefix: up to 7 bytes packed with the length in
/// the low byte (exact); longer ones a hash of the bytes with `0x80` in
/// the low byte, checked against the copy in [`Store`]'s `longs`.
pub(super) fn prefix_key(p: &[u8]) -> u64 {
    if p.len() < 8 {
        let mut k = p.len() as u64;
        for (i, &b) in p.iter().enumerate() {
            k |= (b as u64) << (56 - 8 * i);
        }
        return k;
    }
    let mut h = MixHasher::default();
    h.write(p);
    (h.finish() & !0xff) | 0x80
}

/// splitmix64's finalizer over the written words: the map's keys are
/// structured (length in the low byte), so every bit must reach the low
/// bits the table indexes with.
#[derive(Default)]
pub(super) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, x: u64) {
        let mut z = (self.0 ^ x).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.0 = z ^ (z >> 31);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Slot words [`Spare`] keeps (128 KiB).
const SPARE_WORDS: usize = 16384;

/// Heap slot array sizes: an entry of `n` filled slots, `n` over
/// [`INLINE`], gets the smallest class of at least `n` (less than half
/// again as many words as filled).
const CLASSES: [usize; 12] = [6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];

/// The heap size class of `n` filled slots (`n` over [`INLINE`], at most
/// 256: a node's slots).
fn class(n: usize) -> usize {
    CLASSES
        .iter()
        .position(|&c| c >= n)
        .unwrap_or(CLASSES.len() - 1)
}

/// The entries, found by [`prefix_key`]: the key of an entry is its id
/// (what the FIFO records and [`Store::get`] take).
#[derive(Default)]
pub(super) struct Store {
    map: HashTable<Bucket>,
    /// The prefix of each entry whose prefix is 8 bytes or longer, by map
    /// key (the key is a hash then, checked against this); outside the
    /// buckets, which keys of up to 8 bytes never need.
    longs: HashMap<u64, Box<[u8]>, BuildHasherDefault<MixHasher>>,
    /// Entries per prefix length: a lookup probes only lengths that have some.
    pub(super) lens: Vec<u32>,
    pub(super) fifo: VecDeque<(u64, u32)>,
    pub(super) bytes: usize,
    next_stamp: u32,
    spare: Spare,
    /// Lookups that found a start below the root, and that did not: counted
    /// under the cache's mutex, which a lookup holds anyway (an atomic add
    /// beside it was one more locked instruction per get; issue 32).
    pub(super) hits: u64,
    pub(super) misses: u64,
}

/// Heap slot arrays of dropped entries per size class ([`CLASSES`]), for
/// later admissions of that class (an RCU leaf replacement drops an entry
/// that the next READ of the node admits again: no allocation, issue 32);
/// at most [`SPARE_WORDS`] words in all, outside the budget. One class per
/// array size keeps a node's arrays for that node's size (a smallest-fit
/// reuse let small entries take large arrays, and the large entries then
/// allocated again). Apart from the map, so that an entry being grown
/// stays borrowed while its new array is taken.
#[derive(Default)]
struct Spare {
    by_class: [Vec<Box<[u64]>>; CLASSES.len()],
    words: usize,
}

impl Spare {
    /// Keeps `b` for a later entry of its size class, making room by
    /// freeing kept arrays of the largest class.
    fn keep(&mut self, b: Box<[u64]>) {
        let Some(c) = CLASSES.iter().position(|&n| alloc_words(n) == b.len()) else {
            return;
        };
        while self.words + b.len() > SPARE_WORDS {
            let Some(l) = self.by_class.iter().rposition(|v| !v.is_empty()) else {
                return;
            };
            self.by_class[l].pop();
            self.words -= alloc_words(CLASSES[l]);
        }
        self.words += b.len();
        self.by_class[c].push(b);
    }

    /// Room for `n` slot words: in the bucket up to [`INLINE`], else an
    /// array of `n`'s size class, a kept one if there is one.
    fn slots_for(&mut self, n: usize) -> Slots {
        if n <= INLINE {
            return Slots::Inline([0; INLINE]);
        }
        let c = class(n);
        let b = match self.by_class[c].pop() {
            Some(b) => {
                self.words -= b.len();
                b
            }
            None => vec![0; alloc_words(CLASSES[c])].into_boxed_slice(),
        };
        if CLASSES[c] >= INDEXED {
            Slots::Indexed(b)
        } else {
            Slots::Heap(b)
        }
    }
}

impl Store {
    /// The id and entry of prefix `p`, if cached (one map probe; a long
    /// prefix is checked against the entry's copy).
    fn probe(&self, p: &[u8]) -> Option<(u64, &Entry)> {
        let key = prefix_key(p);
        let e = self.get(key)?;
        (p.len() < 8 || self.longs.get(&key).is_some_and(|l| **l == *p)).then_some((key, e))
    }

    /// The entry of prefix `p`, if cached.
    pub(super) fn find(&self, p: &[u8]) -> Option<&Entry> {
        Some(self.probe(p)?.1)
    }

    /// The id of the entry of prefix `p`, if cached.
    pub(super) fn find_id(&self, p: &[u8]) -> Option<u64> {
        Some(self.probe(p)?.0)
    }

    pub(super) fn get(&self, id: u64) -> Option<&Entry> {
        self.map.find(hash(id), |b| b.key == id).map(|b| &b.e)
    }

    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut Entry> {
        entry_mut(&mut self.map, id)
    }

    /// Entries held.
    pub(super) fn entries(&self) -> usize {
        self.map.len()
    }

    /// True if the FIFO record `(id, stamp)` still names a live entry.
    pub(super) fn current(&self, id: u64, stamp: u32) -> bool {
        self.get(id).map(|e| e.stamp) == Some(stamp)
    }

    /// Admits a new entry for prefix `p` (none cached: [`Store::find`]),
    /// dropping one whose long prefix shares the map key.
    pub(super) fn admit(&mut self, p: &[u8], node: GlobalAddr, slots: &[u64]) {
        let key = prefix_key(p);
        self.remove(key);
        let stamp = self.next_stamp;
        self.next_stamp = stamp.wrapping_add(1);
        let mut long = 0;
        if p.len() >= 8 {
            long = p.len();
            self.longs.insert(key, p.into());
        }
        let words = self.spare.slots_for(slots.len());
        let mut e = Entry {
            node,
            stamp,
            filled: slots.len() as u32,
            slots: words,
        };
        e.slots.words_mut()[..slots.len()].copy_from_slice(slots);
        e.slots.index(0, slots.len());
        self.bytes += entry_bytes(e.slots.heap_words(), long);
        self.map
            .insert_unique(hash(key), Bucket { key, e }, |b| hash(b.key));
        if self.lens.len() <= p.len() {
            self.lens.resize(p.len() + 1, 0);
        }
        self.lens[p.len()] += 1;
        self.fifo.push_back((key, stamp));
    }

    /// Drops entry `id` (a heap slot array kept as a spare).
    pub(super) fn remove(&mut self, id: u64) {
        let Ok(o) = self.map.find_entry(hash(id), |b| b.key == id) else {
            return;
        };
        let e = o.remove().0.e;
        let (len, long) = match self.longs.remove(&id) {
            Some(l) => (l.len(), l.len()),
            None => ((id & 0xff) as usize, 0),
        };
        self.lens[len] -= 1;
        self.bytes -= entry_bytes(e.slots.heap_words(), long);
        if let Some(b) = e.slots.into_heap() {
            self.spare.keep(b);
        }
    }

    /// Entry `id` takes `slots` (its filled prefix), in place when its
    /// array is long enough.
    pub(super) fn set_slots(&mut self, id: u64, slots: &[u64]) {
        self.write_slots(id, 0, slots);
    }

    /// Entry `id`'s slots from index `at` on become `words` (`at` at most
    /// its filled count; the slots before `at` stay), in place when its
    /// array is long enough.
    pub(super) fn write_slots(&mut self, id: u64, at: usize, words: &[u64]) {
        // The map alone is borrowed: the spare serves a grown array below.
        let Some(e) = entry_mut(&mut self.map, id) else {
            return;
        };
        let n = at + words.len();
        // Appended slots extend the byte index; anything else rebuilds it.
        let mut from = if at == e.filled as usize { at } else { 0 };
        if e.slots.words().len() < n {
            from = 0;
            let mut grown = self.spare.slots_for(n);
            grown.words_mut()[..at].copy_from_slice(&e.slots.words()[..at]);
            let had = e.slots.heap_words();
            // The outgrown array is freed, not kept: entries grow as the
            // tree fills and never shrink back, so small arrays kept here
            // would fill the spare with sizes no entry asks for again and
            // crowd out the arrays of dropped entries, which their next
            // admission wants.
            let now = grown.heap_words();
            e.slots = grown;
            self.bytes = self.bytes + 8 * now - 8 * had;
        }
        e.slots.words_mut()[at..n].copy_from_slice(words);
        e.filled = n as u32;
        e.slots.index(from, n);
    }
}

//! The ART cache's storage (see the [module docs](super)): entries in a
//! slab, found by key prefix through one hash map, evicted in FIFO order.

use dm_verbs::GlobalAddr;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// One cached internal node: its address and its filled slots as READ (or
/// as this CS's own CASes filled them).
pub(super) struct Entry {
    pub(super) node: GlobalAddr,
    /// The slot array, of the size class of `filled` ([`class`]) or
    /// larger: its first `filled` words are the node's filled slots. The
    /// budget counts the whole array.
    pub(super) slots: Box<[u64]>,
    pub(super) filled: u32,
    /// FIFO stamp of admission (wraps; only compared with the FIFO's
    /// records, which compaction keeps recent).
    pub(super) stamp: u32,
    /// The map key ([`prefix_key`]).
    key: u64,
    /// The prefix itself when it is 8 bytes or longer (its map key is a
    /// hash then, checked against this); empty (no allocation) otherwise.
    long: Box<[u8]>,
}

impl Entry {
    /// The node's filled slots as cached.
    pub(super) fn slots(&self) -> &[u64] {
        &self.slots[..self.filled as usize]
    }
}

/// Bytes an entry with a slot array of `words` words and a `long`-byte
/// prefix occupies: the entry, its map slot and its slot array (the
/// budget's unit).
pub(super) fn entry_bytes(words: usize, long: usize) -> usize {
    std::mem::size_of::<Option<Entry>>() + std::mem::size_of::<(u64, u32)>() + 8 * words + long
}

/// The map key of a key prefix: up to 7 bytes packed with the length in
/// the low byte (exact); longer ones a hash of the bytes with `0x80` in
/// the low byte, checked against [`Entry::long`].
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

/// Slot words [`Store::spare`] keeps (128 KiB).
const SPARE_WORDS: usize = 16384;

/// Slot array sizes: an entry of `n` filled slots gets the smallest class
/// of at least `n` (less than half again as many words as filled).
const CLASSES: [usize; 16] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];

/// The size class of `n` filled slots (`n` at most 256: a node's slots).
pub(super) fn class(n: usize) -> usize {
    CLASSES
        .iter()
        .position(|&c| c >= n)
        .unwrap_or(CLASSES.len() - 1)
}

#[derive(Default)]
pub(super) struct Store {
    map: HashMap<u64, u32, BuildHasherDefault<MixHasher>>,
    slab: Vec<Option<Entry>>,
    free: Vec<u32>,
    /// Entries per prefix length: a lookup probes only lengths that have some.
    pub(super) lens: Vec<u32>,
    pub(super) fifo: VecDeque<(u32, u32)>,
    pub(super) bytes: usize,
    next_stamp: u32,
    /// Slot arrays of dropped entries per size class ([`CLASSES`]), for
    /// later admissions of that class (an RCU leaf replacement drops an
    /// entry that the next READ of the node admits again: no allocation,
    /// issue 32); at most [`SPARE_WORDS`] words in all, outside the budget.
    /// One class per array size keeps a node's arrays for that node's size
    /// (a smallest-fit reuse let small entries take large arrays, and the
    /// large entries then allocated again).
    spare: [Vec<Box<[u64]>>; CLASSES.len()],
    spare_words: usize,
}

impl Store {
    /// The id of the entry of prefix `p`, if cached.
    pub(super) fn find(&self, p: &[u8]) -> Option<u32> {
        let id = *self.map.get(&prefix_key(p))?;
        let e = self.get(id)?;
        (p.len() < 8 || *e.long == *p).then_some(id)
    }

    pub(super) fn get(&self, id: u32) -> Option<&Entry> {
        self.slab.get(id as usize)?.as_ref()
    }

    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut Entry> {
        self.slab.get_mut(id as usize)?.as_mut()
    }

    /// Entries held (one map key each).
    pub(super) fn entries(&self) -> usize {
        self.map.len()
    }

    /// True if the FIFO record `(id, stamp)` still names a live entry.
    pub(super) fn current(&self, id: u32, stamp: u32) -> bool {
        self.get(id).map(|e| e.stamp) == Some(stamp)
    }

    /// Admits a new entry for prefix `p` (none cached: [`Store::find`]),
    /// dropping one whose long prefix shares the map key.
    pub(super) fn admit(&mut self, p: &[u8], node: GlobalAddr, slots: &[u64]) {
        let key = prefix_key(p);
        if let Some(&old) = self.map.get(&key) {
            self.remove(old);
        }
        let stamp = self.next_stamp;
        self.next_stamp = stamp.wrapping_add(1);
        let long: Box<[u8]> = if p.len() < 8 {
            Box::default()
        } else {
            p.into()
        };
        let b = self.slots_box(slots);
        self.bytes += entry_bytes(b.len(), long.len());
        let e = Entry {
            node,
            slots: b,
            filled: slots.len() as u32,
            stamp,
            key,
            long,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slab[id as usize] = Some(e);
                id
            }
            None => {
                self.slab.push(Some(e));
                (self.slab.len() - 1) as u32
            }
        };
        self.map.insert(key, id);
        if self.lens.len() <= p.len() {
            self.lens.resize(p.len() + 1, 0);
        }
        self.lens[p.len()] += 1;
        self.fifo.push_back((id, stamp));
    }

    /// Drops entry `id` (its slot array kept as a spare).
    pub(super) fn remove(&mut self, id: u32) {
        let Some(e) = self.slab.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        self.map.remove(&e.key);
        let len = if e.long.is_empty() {
            (e.key & 0xff) as usize
        } else {
            e.long.len()
        };
        self.lens[len] -= 1;
        self.bytes -= entry_bytes(e.slots.len(), e.long.len());
        self.free.push(id);
        self.keep_spare(e.slots);
    }

    /// Entry `id` takes `slots` (its filled prefix), in place when its
    /// array is long enough.
    pub(super) fn set_slots(&mut self, id: u32, slots: &[u64]) {
        self.write_slots(id, 0, slots);
    }

    /// Entry `id`'s slots from index `at` on become `words` (`at` at most
    /// its filled count; the slots before `at` stay), in place when its
    /// array is long enough.
    pub(super) fn write_slots(&mut self, id: u32, at: usize, words: &[u64]) {
        let Some(e) = self.get_mut(id) else {
            return;
        };
        let n = at + words.len();
        let had = e.slots.len();
        if had < n {
            let mut b = self.slots_box_of(class(n));
            let e = self.get_mut(id).unwrap();
            b[..at].copy_from_slice(&e.slots[..at]);
            self.bytes = self.bytes + 8 * b.len() - 8 * had;
            // The outgrown array is freed, not kept: entries grow as the
            // tree fills and never shrink back, so small arrays kept here
            // would fill the spare with sizes no entry asks for again and
            // crowd out the arrays of dropped entries, which their next
            // admission wants.
            self.get_mut(id).unwrap().slots = b;
        }
        let e = self.get_mut(id).unwrap();
        e.slots[at..n].copy_from_slice(words);
        e.filled = n as u32;
    }

    /// Keeps `b` for a later entry of its size class, making room by
    /// freeing kept arrays of the largest class.
    fn keep_spare(&mut self, b: Box<[u64]>) {
        let Some(c) = CLASSES.iter().position(|&n| n == b.len()) else {
            return;
        };
        while self.spare_words + b.len() > SPARE_WORDS {
            let Some(l) = self.spare.iter().rposition(|v| !v.is_empty()) else {
                return;
            };
            self.spare[l].pop();
            self.spare_words -= CLASSES[l];
        }
        self.spare_words += b.len();
        self.spare[c].push(b);
    }

    /// An array of `slots`' size class starting with `slots`.
    fn slots_box(&mut self, slots: &[u64]) -> Box<[u64]> {
        let mut b = self.slots_box_of(class(slots.len()));
        b[..slots.len()].copy_from_slice(slots);
        b
    }

    /// An array of size class `c`: a kept one, else a new one.
    fn slots_box_of(&mut self, c: usize) -> Box<[u64]> {
        match self.spare[c].pop() {
            Some(b) => {
                self.spare_words -= b.len();
                b
            }
            None => vec![0; CLASSES[c]].into_boxed_slice(),
        }
    }
}

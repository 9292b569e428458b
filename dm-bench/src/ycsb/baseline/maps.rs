//! The local ordered maps of `--baseline` ([`BaselineMap`]) and what the
//! baseline run needs of them ([`Map`]): `btree`, a
//! `std::sync::RwLock<BTreeMap<Vec<u8>, u64>>` (gets and scans under the read
//! lock, writes under the write lock), and `skiplist`, crossbeam's lock-free
//! `SkipMap<Vec<u8>, u64>`. Scans go through `range` from their start key,
//! `take(len)`, copied out as the index's scans are.

use crate::ycsb::Op;
use crossbeam_skiplist::SkipMap;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::RwLock;

/// A local ordered map to run the stream against (`--baseline`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaselineMap {
    /// `std::sync::RwLock<BTreeMap<Vec<u8>, u64>>`.
    Btree,
    /// `crossbeam_skiplist::SkipMap<Vec<u8>, u64>` (lock-free).
    Skiplist,
}

impl BaselineMap {
    /// The `--baseline` name (and the report's key).
    pub fn name(self) -> &'static str {
        match self {
            BaselineMap::Btree => "btree",
            BaselineMap::Skiplist => "skiplist",
        }
    }

    /// The map's type, for the report.
    pub fn what(self) -> &'static str {
        match self {
            BaselineMap::Btree => "std::sync::RwLock<BTreeMap<Vec<u8>, u64>>",
            BaselineMap::Skiplist => "crossbeam_skiplist::SkipMap<Vec<u8>, u64>",
        }
    }
}

/// The operations ycsb needs of a map.
pub(super) trait Map: Sync + Sized {
    fn empty() -> Self;
    /// The map of `sorted` (ascending, distinct keys).
    fn from_sorted(sorted: Vec<(Vec<u8>, u64)>) -> Self;
    /// Insert or overwrite.
    fn insert(&self, k: &[u8], v: u64);
    /// Overwrite if present; whether it was.
    fn update(&self, k: &[u8], v: u64) -> bool;
    fn remove(&self, k: &[u8]) -> bool;
    fn get(&self, k: &[u8]) -> Option<u64>;
    /// The get of run operation `j` (a map answers as [`Map::get`]; the
    /// harness's no-op index answers what a sound index would).
    fn get_at(&self, _j: usize, k: &[u8]) -> Option<u64> {
        self.get(k)
    }
    /// At most `n` pairs from `from` on, in key order.
    fn scan(&self, from: &[u8], n: usize) -> Vec<(Vec<u8>, u64)>;
}

fn from(k: &[u8]) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (Bound::Included(k), Bound::Unbounded)
}

impl Map for RwLock<BTreeMap<Vec<u8>, u64>> {
    fn empty() -> Self {
        RwLock::new(BTreeMap::new())
    }
    fn from_sorted(sorted: Vec<(Vec<u8>, u64)>) -> Self {
        // Sorted input: `from_iter` builds the tree bottom-up.
        RwLock::new(sorted.into_iter().collect())
    }
    fn insert(&self, k: &[u8], v: u64) {
        let k = k.to_vec();
        self.write().unwrap_or_else(|e| e.into_inner()).insert(k, v);
    }
    fn update(&self, k: &[u8], v: u64) -> bool {
        let mut m = self.write().unwrap_or_else(|e| e.into_inner());
        m.get_mut(k).map(|x| *x = v).is_some()
    }
    fn remove(&self, k: &[u8]) -> bool {
        let mut m = self.write().unwrap_or_else(|e| e.into_inner());
        m.remove(k).is_some()
    }
    fn get(&self, k: &[u8]) -> Option<u64> {
        self.read()
            .unwrap_or_else(|e| e.into_inner())
            .get(k)
            .copied()
    }
    fn scan(&self, k: &[u8], n: usize) -> Vec<(Vec<u8>, u64)> {
        let m = self.read().unwrap_or_else(|e| e.into_inner());
        m.range::<[u8], _>(from(k))
            .take(n)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

/// Lookups before a skiplist update decides that its key is absent (see
/// the `update` of `SkipMap`'s [`Map`] impl).
const SKIPLIST_MISS_RETRIES: usize = 100;

impl Map for SkipMap<Vec<u8>, u64> {
    fn empty() -> Self {
        SkipMap::new()
    }
    fn from_sorted(sorted: Vec<(Vec<u8>, u64)>) -> Self {
        let m = SkipMap::new();
        for (k, v) in sorted {
            m.insert(k, v);
        }
        m
    }
    fn insert(&self, k: &[u8], v: u64) {
        SkipMap::insert(self, k.to_vec(), v);
    }
    /// A lookup, then an insert: not atomic with a concurrent remove of the
    /// same key (which it may undo), unlike the index's update. YCSB's
    /// generated workloads remove nothing.
    ///
    /// crossbeam-skiplist 0.1.3 replaces an entry by marking the old node
    /// removed and then inserting the new one (its issue #1023), so a lookup
    /// between the two misses a key that is present before and after. A
    /// miss is therefore retried, yielding the OS thread so that a replacing
    /// thread that was preempted in that window can finish; only a key that
    /// stays absent through [`SKIPLIST_MISS_RETRIES`] lookups is absent.
    fn update(&self, k: &[u8], v: u64) -> bool {
        let found = self.contains_key(k)
            || (0..SKIPLIST_MISS_RETRIES).any(|_| {
                std::thread::yield_now();
                self.contains_key(k)
            });
        if found {
            SkipMap::insert(self, k.to_vec(), v);
        }
        found
    }
    fn remove(&self, k: &[u8]) -> bool {
        SkipMap::remove(self, k).is_some()
    }
    fn get(&self, k: &[u8]) -> Option<u64> {
        SkipMap::get(self, k).map(|e| *e.value())
    }
    fn scan(&self, k: &[u8], n: usize) -> Vec<(Vec<u8>, u64)> {
        self.range::<[u8], _>(from(k))
            .take(n)
            .map(|e| (e.key().clone(), *e.value()))
            .collect()
    }
}

/// The harness pass's index ([`super::harness`]): nothing stored, every
/// update finds its key, scans return nothing (without allocating), and
/// every get answers the value of a load record chosen by the key's first
/// bytes, so the read check does what it does for a real index: inverts
/// the value and compares the key with that record's (a random access to
/// the load's keys). Answering 0, as it did, named no record and skipped
/// that access: `harness_ns_per_op` came out 20-60 ns too low.
pub(super) struct Noop {
    /// Load records and the value record `i` is written with.
    records: usize,
    load_value: fn(usize) -> u64,
    /// Per run operation that reads: 1 + the last run operation before it
    /// in stream order that wrote its key (0: none), whose value
    /// (`run_value`) it answers, so that the read check takes the path a
    /// sound index's answer takes (a value a run operation wrote is
    /// checked against that operation's key, one random access into the
    /// run's write table; [`last_writers`]). Empty: every get answers a
    /// load record's value.
    last: Vec<u32>,
    run_value: fn(usize) -> u64,
}

/// For every run operation that reads (get, read-modify-write), 1 + the
/// last operation before it that wrote its key (insert, update,
/// read-modify-write), 0 if none or if a remove came after it; other
/// operations 0. One pass with a map of the keys written so far.
pub(super) fn last_writers(run: &[Op]) -> Vec<u32> {
    let mut at: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
    let mut out = vec![0u32; run.len()];
    for (j, op) in run.iter().enumerate() {
        match op {
            Op::Read(k) => out[j] = at.get(k.as_slice()).copied().unwrap_or(0),
            Op::ReadModifyWrite(k) => {
                out[j] = at.get(k.as_slice()).copied().unwrap_or(0);
                at.insert(k, j as u32 + 1);
            }
            Op::Insert(k) | Op::Update(k) => {
                at.insert(k, j as u32 + 1);
            }
            Op::Remove(k) => {
                at.remove(k.as_slice());
            }
            Op::Scan(..) => {}
        }
    }
    out
}

impl Noop {
    /// A no-op index whose gets answer values of `records` load records.
    pub(super) fn answering(records: usize, load_value: fn(usize) -> u64) -> Self {
        Noop {
            records,
            load_value,
            last: Vec::new(),
            run_value: |_| 0,
        }
    }

    /// [`Noop::answering`], whose gets of run operations answer the value
    /// of the last run operation that wrote the key (`last`, from
    /// [`last_writers`]) where there is one.
    pub(super) fn with_last_writers(mut self, last: Vec<u32>, run_value: fn(usize) -> u64) -> Self {
        self.last = last;
        self.run_value = run_value;
        self
    }
}

impl Map for Noop {
    fn empty() -> Self {
        Noop::answering(0, |_| 0)
    }
    fn from_sorted(_: Vec<(Vec<u8>, u64)>) -> Self {
        Noop::empty()
    }
    fn insert(&self, _: &[u8], _: u64) {}
    fn update(&self, _: &[u8], _: u64) -> bool {
        true
    }
    fn remove(&self, _: &[u8]) -> bool {
        true
    }
    fn get(&self, k: &[u8]) -> Option<u64> {
        if self.records == 0 {
            return Some(0);
        }
        let mut w = [0u8; 8];
        let n = k.len().min(8);
        w[..n].copy_from_slice(&k[..n]);
        let i = u64::from_le_bytes(w).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        Some((self.load_value)(i as usize % self.records))
    }
    fn get_at(&self, j: usize, k: &[u8]) -> Option<u64> {
        match self.last.get(j).copied().unwrap_or(0) {
            0 => self.get(k),
            w => Some((self.run_value)(w as usize - 1)),
        }
    }
    fn scan(&self, _: &[u8], _: usize) -> Vec<(Vec<u8>, u64)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::{last_writers, Map, Noop};
    use crate::ycsb::Op;

    /// A read answers the last write of its key before it; a remove
    /// forgets it; a read-modify-write reads, then writes.
    #[test]
    fn a_read_answers_the_last_write_of_its_key_before_it() {
        let (a, b) = (b"a".to_vec(), b"b".to_vec());
        let run = [
            Op::Update(a.clone()),
            Op::Read(a.clone()),
            Op::Remove(a.clone()),
            Op::Read(a.clone()),
            Op::Insert(b.clone()),
            Op::ReadModifyWrite(b.clone()),
            Op::Read(b.clone()),
            Op::Read(a.clone()),
        ];
        assert_eq!(last_writers(&run), [0, 1, 0, 0, 0, 5, 6, 0]);
        let noop = Noop::answering(3, |i| 100 + i as u64)
            .with_last_writers(last_writers(&run), |j| 1000 + j as u64);
        assert_eq!(
            noop.get_at(6, &b),
            Some(1005),
            "the read-modify-write's value"
        );
        assert_eq!(noop.get_at(1, &a), Some(1000));
        let v = noop.get_at(3, &a).unwrap();
        assert!(
            (100..103).contains(&v),
            "no writer: a load record's value, {v}"
        );
    }
}

//! A cached node's 8-byte keys laid out for a search of two cache lines
//! (issue 32). A warm DEX get is a walk of the CS's cached nodes (DEX
//! §5.1), a warm Sherman or FG+ get a search of one cached leaf parent
//! (Sherman §4.1, [`crate::cache`]), and on loopback most of that CPU was
//! cache misses: a binary search of a node's keys waits for one dependent
//! miss per probe, about five per 1 KB node. Here the search reads one line
//! of samples and then one block of keys.
//!
//! Tried and dropped: the samples inline in the frame (one line fewer to
//! wait for, but every frame 64 bytes longer): DEX YCSB C on loopback,
//! twelve rounds alternated, median index CPU 357 ns against 329 with the
//! samples in the key array (docs/experiments/cpu-ratios.md).

/// Samples per line: one 64-byte cache line of words.
const SAMPLES: usize = 8;

/// A node's entries with sorted 8-byte keys `k_0 .. k_n` (big-endian
/// words, so words order as the bytes) and their values `v_0 .. v_n`, in
/// one array: `[s_0 .. s_m | k_0 .. k_n | v_0 .. v_n]`. The keys fall in
/// blocks of `step = max(8, ceil(n / 8))` (one line each up to 64 keys,
/// the 1 KB nodes' capacity), and `s_j = k_{j * step}` is the first key of
/// block `j`, `m = ceil(n / step)` (at most 8). A search counts the
/// samples at or below the key and then the keys at or below it in that
/// block:
/// branch-free counts over whole lines, so two misses are its whole
/// dependent chain. One array, so a node admitted to the cache costs one
/// allocation here (`tests/allocs.rs` counts admissions).
#[derive(Debug, Default)]
pub(crate) struct Keys8 {
    words: Vec<u64>,
    /// Keys per block.
    step: usize,
    /// Blocks, so samples: `ceil(n / step)`.
    m: usize,
    /// Entries.
    n: usize,
}

impl Keys8 {
    /// Lays out `entries` (sorted by key; an inner node's separators may
    /// be equal, [`Keys8::find_with`] takes the last), or empties itself
    /// and returns false if there are none or any key is not 8 bytes
    /// (`None`).
    pub fn rebuild(&mut self, entries: impl Iterator<Item = (Option<u64>, u64)> + Clone) -> bool {
        self.words.clear();
        self.m = 0;
        self.n = 0;
        // One allocation for a fresh frame: room for the samples, keys and
        // values before the first push.
        let most = entries.clone().count();
        self.words.reserve_exact(2 * most + most.div_ceil(SAMPLES));
        for (k, _) in entries.clone() {
            match k {
                Some(k) => self.words.push(k),
                None => {
                    self.words.clear();
                    return false;
                }
            }
        }
        let n = self.words.len();
        if n == 0 {
            return false;
        }
        self.step = n.div_ceil(SAMPLES).max(SAMPLES);
        let m = n.div_ceil(self.step);
        self.words.extend(entries.map(|(_, v)| v));
        self.words.resize(m + 2 * n, 0);
        self.words.copy_within(0..2 * n, m);
        for j in 0..m {
            self.words[j] = self.words[m + j * self.step];
        }
        (self.m, self.n) = (m, n);
        true
    }

    /// Whether it holds the node's entries (every key 8 bytes).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Entry `i`'s value, if it holds the entries.
    #[inline]
    pub fn value(&self, i: usize) -> Option<u64> {
        (i < self.n).then(|| self.words[self.m + self.n + i])
    }

    /// Sets entry `i`'s value (its key unchanged), if it holds the entries.
    pub fn set_value(&mut self, i: usize, v: u64) {
        if i < self.n {
            self.words[self.m + self.n + i] = v;
        }
    }

    /// The address of entry `i`'s value (for a prefetch; may be past the
    /// end).
    #[inline]
    pub fn value_ptr(&self, i: usize) -> *const u64 {
        self.words.as_ptr().wrapping_add(self.m + self.n + i)
    }

    /// The last key at or below `key`: `Ok(i)` if key `i` equals `key`,
    /// else `Err(i)`, where `key` would be inserted. With unique keys (a
    /// leaf) that is `binary_search`; with equal separators in an inner
    /// node (a split at a partition bound may leave a child with an empty
    /// range, `Node::split_at`) it is the last of them, the child whose
    /// range holds `key` ([`last_at_or_below`]). Empty: `Err(0)`.
    #[cfg(test)]
    pub fn find(&self, key: u64) -> Result<usize, usize> {
        self.find_with(key, |_| {})
    }

    /// [`Keys8::find`], calling `block(lo)` once the answer is known to lie
    /// in `lo..=lo + step`, before that block's keys are read (to prefetch
    /// what the caller reads at the answer).
    #[inline]
    pub fn find_with(&self, key: u64, block: impl FnOnce(usize)) -> Result<usize, usize> {
        let (samples, rest) = self.words.split_at(self.m);
        let keys = &rest[..self.n];
        // The last block whose first key is at or below `key` holds the
        // last key at or below it: the next block's first key is above.
        let b = samples.iter().filter(|&&s| s <= key).count();
        if b == 0 {
            return Err(0);
        }
        let lo = (b - 1) * self.step;
        block(lo);
        let block = &keys[lo..keys.len().min(lo + self.step)];
        // At least 1: the block's first key is its sample.
        let i = lo + block.iter().filter(|&&k| k <= key).count() - 1;
        match keys[i] == key {
            true => Ok(i),
            false => Err(i + 1),
        }
    }
}

/// The reference for [`Keys8::find`] over any sorted entries: `Ok(i)` for
/// the last entry whose key equals `key`, else `Err(i)`, the insertion
/// point (`Node::find`, a binary search, may return any of equal keys).
pub(crate) fn last_at_or_below<K: Ord + ?Sized, E>(
    entries: &[E],
    key: &K,
    key_of: impl Fn(&E) -> &K,
) -> Result<usize, usize> {
    let p = entries.partition_point(|e| key_of(e) <= key);
    match p.checked_sub(1) {
        Some(i) if key_of(&entries[i]) == key => Ok(i),
        _ => Err(p),
    }
}

/// The entry of an inner node whose child covers a key, from the key's
/// place among the separators (`at`, as [`Keys8::find_with`] or
/// [`last_at_or_below`] gives it): the last separator at most the key,
/// else the first.
pub(crate) fn child_at(at: Result<usize, usize>) -> usize {
    match at {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    }
}

#[cfg(test)]
mod tests {
    use super::Keys8;
    use proptest::prelude::*;

    proptest! {
        /// [`Keys8::find`] answers as `last_at_or_below` (and so as a
        /// binary search where keys are unique), for every node size
        /// (partial last blocks, blocks longer than a line), with and
        /// without equal keys (runs of them across blocks), and for keys
        /// present, absent, below the first and above the last, `u64::MAX`
        /// included.
        #[test]
        fn keys8_finds_the_last_key_at_or_below(
            mut keys in proptest::collection::vec(any::<u64>(), 0..300),
            top in any::<bool>(),
            dups in any::<bool>(),
            probes in proptest::collection::vec(any::<u64>(), 0..40),
        ) {
            if dups {
                // Few values, so runs of equal keys, across blocks too.
                keys.iter_mut().for_each(|k| *k %= 40);
            }
            if top {
                keys.push(u64::MAX);
            }
            keys.sort_unstable();
            if !dups {
                keys.dedup();
            }
            let mut k8 = Keys8::default();
            let built = k8.rebuild(keys.iter().map(|&k| (Some(k), !k)));
            prop_assert_eq!(built, !keys.is_empty());
            let near = keys.iter().flat_map(|&k| [k.wrapping_sub(1), k, k.wrapping_add(1)]);
            for p in probes.into_iter().chain(near).chain([0, u64::MAX]) {
                if built {
                    let want = super::last_at_or_below(&keys, &p, |k| k);
                    prop_assert_eq!(k8.find(p), want, "probe {}", p);
                    if !dups {
                        prop_assert_eq!(want, keys.binary_search(&p));
                    }
                    if let Ok(i) = want {
                        prop_assert_eq!(k8.value(i), Some(!p));
                    }
                }
            }
        }
    }

    #[test]
    fn a_key_of_another_width_leaves_keys8_empty() {
        let mut k8 = Keys8::default();
        assert!(k8.rebuild([(Some(1), 10), (Some(2), 20)].into_iter()));
        assert_eq!(k8.find(2), Ok(1));
        k8.set_value(1, 21);
        assert_eq!(k8.value(1), Some(21));
        assert!(!k8.rebuild([(Some(1), 10), (None, 20)].into_iter()));
        assert!(k8.is_empty());
        assert_eq!(k8.find(1), Err(0));
        assert_eq!(k8.value(0), None);
    }
}

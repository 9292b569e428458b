//! [`ScanBuf`]: the entries of a range scan in flat arrays, which every
//! index's `scan_into` fills (issue 32: no allocation per returned key).
//!
//! Layout: `keys` holds the keys back to back, `ends[i]` is the end offset
//! (bytes) of key `i` in `keys`, `values[i]` its value. A scan clears the
//! buffer and pushes; the arrays keep their capacity, so a buffer reused
//! across scans allocates only when a scan returns more entries, or longer
//! keys in all, than any scan before it.

/// Entries of one scan, `(key, value)` in the order pushed (key order for a
/// scan). Reuse one per task: [`ScanBuf::clear`] keeps the capacity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanBuf {
    keys: Vec<u8>,
    ends: Vec<u32>,
    values: Vec<u64>,
}

impl ScanBuf {
    /// An empty buffer (no allocation until the first push).
    pub fn new() -> Self {
        ScanBuf::default()
    }

    /// Removes every entry, keeping the capacity.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.ends.clear();
        self.values.clear();
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Appends `(key, value)`.
    ///
    /// Panics if the keys held would pass 4 GiB in all (offsets are `u32`;
    /// a scan returns at most a few thousand keys of at most a few hundred
    /// bytes).
    pub fn push(&mut self, key: &[u8], value: u64) {
        self.keys.extend_from_slice(key);
        let end = u32::try_from(self.keys.len()).expect("ScanBuf: keys past 4 GiB");
        self.ends.push(end);
        self.values.push(value);
    }

    /// Key `i` (panics if `i >= len()`).
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.keys[start..self.ends[i] as usize]
    }

    /// Value `i` (panics if `i >= len()`).
    pub fn value(&self, i: usize) -> u64 {
        self.values[i]
    }

    /// The last entry's key, if any.
    pub fn last_key(&self) -> Option<&[u8]> {
        self.len().checked_sub(1).map(|i| self.key(i))
    }

    /// The entries in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], u64)> + '_ {
        (0..self.len()).map(|i| (self.key(i), self.values[i]))
    }

    /// The entries as owned pairs (one allocation per key): the form of
    /// the indexes' `scan`.
    pub fn to_entries(&self) -> Vec<(Vec<u8>, u64)> {
        self.iter().map(|(k, v)| (k.to_vec(), v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::ScanBuf;

    #[test]
    fn entries_come_back_as_pushed_and_clear_keeps_capacity() {
        let mut b = ScanBuf::new();
        assert!(b.is_empty() && b.last_key().is_none());
        b.push(b"a", 1);
        b.push(b"", 2);
        b.push(b"ccc", 3);
        assert_eq!(b.len(), 3);
        assert_eq!(
            (b.key(0), b.key(1), b.key(2)),
            (&b"a"[..], &b""[..], &b"ccc"[..])
        );
        assert_eq!(b.value(2), 3);
        assert_eq!(b.last_key(), Some(&b"ccc"[..]));
        let want = vec![(b"a".to_vec(), 1), (vec![], 2), (b"ccc".to_vec(), 3)];
        assert_eq!(b.to_entries(), want);
        assert_eq!(b.iter().len(), 3);
        let cap = (b.keys.capacity(), b.ends.capacity(), b.values.capacity());
        b.clear();
        assert!(b.is_empty());
        assert_eq!(
            cap,
            (b.keys.capacity(), b.ends.capacity(), b.values.capacity())
        );
    }
}

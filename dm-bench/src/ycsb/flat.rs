//! The load's keys in one flat array ([`Keys`]): every key of a run has
//! the same width (generated keys 8 bytes, string keys zero-padded to
//! `--key-bytes`), so key `i` is bytes `i * width ..` of one `Vec<u8>`.
//! Issue 32 item 1: the read check looks up the load record a value names
//! at random; a `Vec<Vec<u8>>` made that two cache misses (the header,
//! then the bytes) and about 40 bytes of heap per key, this one miss and
//! `width` bytes.

use super::Op;
use std::ops::Index;

/// Keys of one width, back to back (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Keys {
    width: usize,
    bytes: Vec<u8>,
}

impl Keys {
    /// No keys yet, each `width` bytes, room for `n`.
    pub(crate) fn with_capacity(width: usize, n: usize) -> Keys {
        Keys {
            width,
            bytes: Vec::with_capacity(width.saturating_mul(n)),
        }
    }

    /// Appends `k`, which must be `width` bytes (the plan pads every key;
    /// a key of another width is a bug in the plan, so this panics).
    pub(crate) fn push(&mut self, k: &[u8]) {
        assert_eq!(k.len(), self.width, "a load key of another width");
        self.bytes.extend_from_slice(k);
    }

    /// Keys `v`, all `width` bytes (tests).
    #[cfg(test)]
    pub(crate) fn from_vecs(width: usize, v: &[Vec<u8>]) -> Keys {
        let mut k = Keys::with_capacity(width, v.len());
        for x in v {
            k.push(x);
        }
        k
    }

    /// How many keys.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len().checked_div(self.width).unwrap_or(0)
    }

    /// The keys in order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone + '_ {
        self.bytes.chunks_exact(self.width.max(1))
    }

    /// Whether key `i` is `k` (8-byte keys compared as one word).
    pub(crate) fn is(&self, i: usize, k: &[u8]) -> bool {
        same(&self[i], k)
    }

    /// Whether some key is `k` (a scan: only on an error path).
    pub(crate) fn contains(&self, k: &[u8]) -> bool {
        self.iter().any(|x| same(x, k))
    }
}

impl Index<usize> for Keys {
    type Output = [u8];

    fn index(&self, i: usize) -> &[u8] {
        &self.bytes[i * self.width..(i + 1) * self.width]
    }
}

/// The key each run operation writes (insert, update, read-modify-write),
/// flat, and which operations write: the read check's other random access
/// (a value a run operation wrote names that operation), one line of a
/// flat array instead of an `Op` and its key's heap bytes (two misses into
/// a stream of a million operations).
#[derive(Clone, Debug, Default)]
pub(crate) struct Writes {
    /// Operation `j`'s key if it writes, else zeros.
    keys: Keys,
    /// Bit `j`: operation `j` writes.
    writes: Vec<u64>,
}

impl Writes {
    /// The writes of `run`, whose keys are `width` bytes.
    pub(crate) fn new(width: usize, run: &[Op]) -> Writes {
        let mut w = Writes {
            keys: Keys::with_capacity(width, run.len()),
            writes: vec![0; run.len().div_ceil(64)],
        };
        let zero = vec![0u8; width];
        for (j, o) in run.iter().enumerate() {
            match o {
                Op::Insert(k) | Op::Update(k) | Op::ReadModifyWrite(k) => {
                    w.keys.push(k);
                    w.writes[j / 64] |= 1 << (j % 64);
                }
                _ => w.keys.push(&zero),
            }
        }
        w
    }

    /// Whether run operation `j` exists and writes `key`.
    pub(crate) fn is(&self, j: usize, key: &[u8]) -> bool {
        j < self.keys.len() && self.writes[j / 64] & (1 << (j % 64)) != 0 && self.keys.is(j, key)
    }
}

/// `a == b`, with 8-byte keys compared as one word (no `memcmp` call).
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    match (<&[u8; 8]>::try_from(a), <&[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_index_iterate_and_compare() {
        let v: Vec<Vec<u8>> = (0u64..5).map(|i| (i * 3).to_be_bytes().to_vec()).collect();
        let k = Keys::from_vecs(8, &v);
        assert_eq!(k.len(), 5);
        assert_eq!(&k[2], &6u64.to_be_bytes()[..]);
        assert!(k.is(4, &12u64.to_be_bytes()));
        assert!(!k.is(4, &13u64.to_be_bytes()));
        assert!(k.contains(&9u64.to_be_bytes()) && !k.contains(&10u64.to_be_bytes()));
        assert_eq!(
            k.iter().collect::<Vec<_>>(),
            v.iter().map(|x| &x[..]).collect::<Vec<_>>()
        );
        let s = Keys::from_vecs(3, &[b"abc".to_vec(), b"abd".to_vec()]);
        assert!(s.is(1, b"abd") && !s.is(0, b"abd"));
        assert_eq!(Keys::with_capacity(8, 0).len(), 0);
        assert_eq!(Keys::with_capacity(0, 0).iter().count(), 0);
    }

    #[test]
    fn writes_name_the_key_of_each_writing_operation() {
        let k = |n: u64| n.to_be_bytes().to_vec();
        let mut run = vec![Op::Read(k(1)), Op::Update(k(2)), Op::Remove(k(3))];
        run.extend((0..70).map(|i| Op::Insert(k(10 + i))));
        run.push(Op::ReadModifyWrite(k(0)));
        let w = Writes::new(8, &run);
        assert!(!w.is(0, &k(1)), "a read writes nothing");
        assert!(w.is(1, &k(2)) && !w.is(1, &k(1)));
        assert!(!w.is(2, &k(3)), "nor does a remove");
        assert!(w.is(3, &k(10)) && w.is(72, &k(79)));
        assert!(w.is(73, &k(0)), "an all-zero key that is written");
        assert!(
            !w.is(2, &k(0)),
            "the zeros of an operation that writes nothing"
        );
        assert!(!w.is(74, &k(0)) && !w.is(usize::MAX, &k(0)));
    }
}

//! The load's keys in one flat array ([`Keys`]): every key of a run has
//! the same width (generated keys 8 bytes, string keys zero-padded to
//! `--key-bytes`), so key `i` is bytes `i * width ..` of one `Vec<u8>`.
//! Issue 32 item 1: the read check looks up the load record a value names
//! at random; a `Vec<Vec<u8>>` made that two cache misses (the header,
//! then the bytes) and about 40 bytes of heap per key, this one miss and
//! `width` bytes.

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
}

//! Keys as radix paths (SMART §4.3.1 pads keys to a fixed length; §4.6.1
//! leaves variable-length keys to future work).
//!
//! A radix tree discriminates on one key byte per level, so every key must
//! become a byte path of one length, and no path may be a prefix of another.
//! Fixed-length keys (8-byte integers as big-endian bytes) are their own path.
//! Variable-length keys of at most `max_key` bytes get the path
//! `key ++ zeros(max_key - len) ++ [len]`: zero padding alone would make `"a"`
//! and `"a\0"` one path; the trailing length byte separates them.
//!
//! **Order.** Path order equals byte-string order of the keys. For keys
//! `s < t`: if they differ at a first position `i < min(len)`, the paths
//! differ there the same way; else `s` is a proper prefix of `t`, and the
//! paths first differ either where `t` has its first non-zero byte past `s`
//! (0 in `s`'s padding against a non-zero byte) or, if `t`'s rest is all
//! zeros, at the length byte (`len s < len t`). So a range scan in path order
//! is a scan in key order.

/// How keys map to paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyCodec {
    /// Longest key (fixed: every key has exactly this length).
    pub max_key: usize,
    /// Keys have lengths 0..=max_key (else exactly max_key).
    pub variable: bool,
}

/// A key the codec cannot take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyLengthError {
    pub got: usize,
    pub max: usize,
    pub variable: bool,
}

impl std::fmt::Display for KeyLengthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.variable {
            write!(f, "key of {} bytes, at most {} allowed", self.got, self.max)
        } else {
            write!(
                f,
                "key of {} bytes, this tree takes {}-byte keys",
                self.got, self.max
            )
        }
    }
}

impl std::error::Error for KeyLengthError {}

impl KeyCodec {
    /// Fixed-length keys of `n` bytes (8 for integer keys).
    pub fn fixed(n: usize) -> Self {
        KeyCodec {
            max_key: n,
            variable: false,
        }
    }

    /// Keys of 0..=`max_key` bytes (`max_key` at most 255: the length byte).
    pub fn variable(max_key: usize) -> Self {
        assert!(max_key <= 255, "variable keys are at most 255 bytes");
        KeyCodec {
            max_key,
            variable: true,
        }
    }

    /// Bytes of every path.
    pub fn path_len(&self) -> usize {
        self.max_key + self.variable as usize
    }

    /// The radix path of `key`.
    pub fn path(&self, key: &[u8]) -> Result<Path, KeyLengthError> {
        let bad = key.len() > self.max_key || (!self.variable && key.len() != self.max_key);
        if bad {
            return Err(KeyLengthError {
                got: key.len(),
                max: self.max_key,
                variable: self.variable,
            });
        }
        let mut p = Path::from_slice(key);
        if self.variable {
            p.resize(self.max_key, 0);
            p.push(key.len() as u8);
        }
        Ok(p)
    }

    /// [`KeyCodec::path`] without a copy where the path is the key itself
    /// (fixed-width keys): `key`, checked, else the path made in `buf`
    /// (issue 32: a warm get's path was a copy into a `Path` and a move of
    /// it).
    pub fn path_in<'k>(
        &self,
        key: &'k [u8],
        buf: &'k mut Path,
    ) -> Result<&'k [u8], KeyLengthError> {
        if self.variable {
            *buf = self.path(key)?;
            return Ok(buf);
        }
        if key.len() != self.max_key {
            return Err(KeyLengthError {
                got: key.len(),
                max: self.max_key,
                variable: false,
            });
        }
        Ok(key)
    }

    /// The key of a path made by [`KeyCodec::path`].
    pub fn key(&self, path: &[u8]) -> Vec<u8> {
        if self.variable {
            path[..path[self.max_key] as usize].to_vec()
        } else {
            path.to_vec()
        }
    }
}

/// A key's radix path, inline up to 24 bytes (8-byte keys and short
/// strings: a warm operation allocates no path; issue 32).
pub type Path = smallvec::SmallVec<[u8; 24]>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lengths_are_checked() {
        let v = KeyCodec::variable(4);
        assert_eq!(v.path(b"a").unwrap().to_vec(), vec![b'a', 0, 0, 0, 1]);
        assert_ne!(v.path(b"a").unwrap(), v.path(b"a\0").unwrap());
        assert!(v.path(b"abcde").is_err());
        let f = KeyCodec::fixed(8);
        assert!(f.path(&[0; 7]).is_err());
        assert_eq!(f.path(&[7; 8]).unwrap().to_vec(), vec![7; 8]);
        let mut buf = Path::new();
        assert_eq!(f.path_in(&[7; 8], &mut buf).unwrap(), &[7; 8]);
        assert!(f.path_in(&[7; 9], &mut buf).is_err());
        let v = KeyCodec::variable(6);
        let want = v.path(b"ab").unwrap();
        assert_eq!(v.path_in(b"ab", &mut buf).unwrap(), &want[..]);
        assert!(v.path_in(b"abcdefg", &mut buf).is_err());
    }

    proptest! {
        #[test]
        fn path_order_is_key_order(
            s in proptest::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..6),
            t in proptest::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..6),
        ) {
            let c = KeyCodec::variable(6);
            let (ps, pt) = (c.path(&s).unwrap(), c.path(&t).unwrap());
            prop_assert_eq!(ps.len(), c.path_len());
            prop_assert_eq!(s.cmp(&t), ps.cmp(&pt));
            prop_assert_eq!(c.key(&ps), s);
        }
    }
}

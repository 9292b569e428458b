//! The node checksum behind every checksum-validated READ (Sherman §4.4's
//! node-level versions replaced by a hash, because a one-sided READ of more
//! than 8 bytes is not a snapshot: its 8-byte words may come from different
//! versions, in any order, and a version word inside the same READ proves
//! nothing). A writer stores the checksum of the bytes it covers; a reader
//! accepts an image only if the checksum it recomputes matches.
//!
//! The hash folds 8-byte little-endian words with `h = rotl((h ^ w) * P, 29)`,
//! a bijection of `w` for fixed `h` followed by bijections of `h`: an image
//! torn in one word is always rejected; with more differing words a false
//! accept has probability about 2^-64. Users: dm-tree's nodes (`node`,
//! `two_level`), dm-art's Dolphin leaves and headers.

/// Checksum of `bytes` (a multiple of 8 bytes long; a shorter tail is
/// ignored), see the module docs.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3;
    for w in bytes.chunks_exact(8) {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    h
}

//! The node checksum behind every checksum-validated READ (Sherman §4.4's
//! node-level versions replaced by a hash, because a one-sided READ of more
//! than 8 bytes is not a snapshot: its 8-byte words may come from different
//! versions, in any order, and a version word inside the same READ proves
//! nothing). A writer stores the checksum of the bytes it covers; a reader
//! accepts an image only if the checksum it recomputes matches.
//!
//! The hash folds 8-byte little-endian words into four lanes, word `i`
//! into lane `i % 4`, each with `h = rotl((h ^ w) * P, 29)`: a bijection of
//! `w` for fixed `h` followed by bijections of `h`, so one differing word
//! changes its lane's final value. The lanes end XORed at distinct
//! rotations and multiplied by `P`, which keeps a single changed lane
//! visible: an image torn in one word is always rejected; with more
//! differing words a false accept has probability about 2^-64. Four
//! independent chains let the CPU overlap the multiplications (a single
//! chain waits out each one: the checksum was an eighth of a warm get's
//! CPU on loopback, issue 32). Users: dm-tree's nodes (`node`,
//! `two_level`), dm-art's Dolphin leaves and headers, the NAM designs' MS
//! handlers.

const P: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline(always)]
fn fold(h: u64, w: &[u8]) -> u64 {
    let w = u64::from_le_bytes(w.try_into().unwrap());
    (h ^ w).wrapping_mul(P).rotate_left(29)
}

/// Checksum of `bytes` (a multiple of 8 bytes long; a shorter tail is
/// ignored), see the module docs.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: [u64; 4] = [
        0x243f_6a88_85a3_08d3,
        0x1319_8a2e_0370_7344,
        0xa409_3822_299f_31d0,
        0x082e_fa98_ec4e_6c89,
    ];
    let mut rows = bytes.chunks_exact(32);
    for r in &mut rows {
        h[0] = fold(h[0], &r[0..8]);
        h[1] = fold(h[1], &r[8..16]);
        h[2] = fold(h[2], &r[16..24]);
        h[3] = fold(h[3], &r[24..32]);
    }
    for (i, w) in rows.remainder().chunks_exact(8).enumerate() {
        h[i] = fold(h[i], w);
    }
    (h[0] ^ h[1].rotate_left(16) ^ h[2].rotate_left(32) ^ h[3].rotate_left(48)).wrapping_mul(P)
}

#[cfg(test)]
mod tests {
    use super::checksum;

    /// Every image differing from another in exactly one 8-byte word (a
    /// READ torn in one word) has another checksum, at every length and
    /// word position, for several values of the word.
    #[test]
    fn one_changed_word_always_changes_the_checksum() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for words in 0..=20usize {
            let mut b: Vec<u8> = (0..words * 8).map(|i| (i * 7 + 3) as u8).collect();
            let c = checksum(&b);
            for w in 0..words {
                for _ in 0..8 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let old: [u8; 8] = b[w * 8..w * 8 + 8].try_into().unwrap();
                    if u64::from_le_bytes(old) == x {
                        continue;
                    }
                    b[w * 8..w * 8 + 8].copy_from_slice(&x.to_le_bytes());
                    assert_ne!(checksum(&b), c, "{words} words, word {w}");
                    b[w * 8..w * 8 + 8].copy_from_slice(&old);
                }
            }
            assert_eq!(checksum(&b), c);
        }
    }

    /// A shorter tail than a word is ignored (callers hash whole words).
    #[test]
    fn a_partial_word_is_ignored() {
        let b = [5u8; 45];
        assert_eq!(checksum(&b), checksum(&b[..40]));
    }
}

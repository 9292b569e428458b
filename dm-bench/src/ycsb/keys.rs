//! String keys from a file (`--key-file`), one key a line, such as
//! `pypi-names.txt.gz` (886,323 PyPI package names, sorted, 1..188 bytes).
//!
//! The tree stores fixed-size keys (`--key-bytes`, at most 32), so each key is
//! zero-padded to that size. Keys longer than that are **skipped and counted**,
//! never truncated (truncation would merge distinct keys); keys that become
//! equal after padding (only possible when a key ends in NUL bytes) and
//! repeated lines are dropped and counted too. What remains is shuffled with a
//! fixed seed so that key number *n* of a workload (YCSB's record *n*) maps to a
//! random key of the file, as YCSB's hashed insert order does for its integer
//! keys; the mapping does not depend on `--seed`, so every run of one file
//! loads the same records.

use super::trace;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::io::BufRead;
use std::path::Path;

/// Seed of the key-number -> key shuffle (fixed: same file, same records).
const SHUFFLE_SEED: u64 = 0x6b65_7973;

/// The usable keys of a key file, in key-number order.
#[derive(Debug)]
pub struct KeyFile {
    /// Zero-padded keys of exactly `key_bytes`; key number n is `keys[n]`.
    pub keys: Vec<Vec<u8>>,
    /// Non-empty lines read.
    pub lines: u64,
    /// Keys skipped because they are longer than `key_bytes`.
    pub too_long: u64,
    /// Lines dropped as duplicates (after padding).
    pub duplicates: u64,
}

/// Longest key any index takes (the radix family's; the B+trees take 32).
pub const MAX_KEY_BYTES: usize = 255;

/// Reads `path` (plain, `.gz` or `.zst`), keeping keys of at most `key_bytes`
/// bytes (trailing `\r` and empty lines ignored). Errors: `key_bytes` not in
/// 1..=[`MAX_KEY_BYTES`], the file cannot be read, or no key fits.
pub fn load(path: &Path, key_bytes: usize) -> Result<KeyFile, String> {
    if key_bytes == 0 || key_bytes > MAX_KEY_BYTES {
        return Err(format!(
            "--key-bytes {key_bytes}: keys are 1 to {MAX_KEY_BYTES} bytes"
        ));
    }
    let mut keys = Vec::new();
    let (mut lines, mut too_long) = (0u64, 0u64);
    for line in trace::open(path)?.split(b'\n') {
        let mut k = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if k.last() == Some(&b'\r') {
            k.pop();
        }
        if k.is_empty() {
            continue;
        }
        lines += 1;
        if k.len() > key_bytes {
            too_long += 1;
            continue;
        }
        k.resize(key_bytes, 0);
        keys.push(k);
    }
    keys.sort_unstable();
    let before = keys.len();
    keys.dedup();
    let duplicates = (before - keys.len()) as u64;
    if keys.is_empty() {
        return Err(format!(
            "{}: no key of at most {key_bytes} bytes ({lines} lines, {too_long} longer)",
            path.display()
        ));
    }
    keys.shuffle(&mut ChaCha8Rng::seed_from_u64(SHUFFLE_SEED));
    Ok(KeyFile {
        keys,
        lines,
        too_long,
        duplicates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn pads_skips_long_keys_and_drops_duplicates() {
        let dir = std::env::temp_dir().join(format!("dm-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("k.txt.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&p).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all(b"numpy\r\nrequests\n\nnumpy\na-name-far-too-long-for-eight\nz\n")
            .unwrap();
        gz.finish().unwrap();
        let kf = load(&p, 8).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((kf.lines, kf.too_long, kf.duplicates), (5, 1, 1));
        let mut got = kf.keys.clone();
        got.sort();
        assert_eq!(
            got,
            vec![
                b"numpy\0\0\0".to_vec(),
                b"requests".to_vec(),
                b"z\0\0\0\0\0\0\0".to_vec()
            ]
        );
        assert!(load(Path::new("/nonexistent/keys"), 8).is_err());
        // Widths no index takes are refused before any padding.
        for n in [0, MAX_KEY_BYTES + 1, usize::MAX] {
            assert!(load(&p, n).unwrap_err().contains("1 to 255 bytes"), "{n}");
        }
    }
}

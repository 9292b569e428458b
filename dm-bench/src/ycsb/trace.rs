//! index-microbench trace files (the format SMART, CHIME and Dolphin read):
//! `load_<keytype>_workload<X>` and `txn_<keytype>_workload<X>`, one operation
//! per line, `OP KEY [LEN]`, OP in INSERT/READ/UPDATE/SCAN/REMOVE. Key type
//! `randint`: a decimal u64 (YCSB's key without `user`), stored as 8 big-endian
//! bytes; any other key type: the key's bytes as written. Files ending in `.gz`
//! or `.zst` are decompressed on the fly.

use super::Op;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Opens `path`, decompressing `.gz` and `.zst` by extension.
pub fn open(path: &Path) -> Result<Box<dyn BufRead>, String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let name = path.to_string_lossy();
    let r: Box<dyn Read> = if name.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(f))
    } else if name.ends_with(".zst") {
        // ruzstd's StreamingDecoder reads one frame; the traces are single-frame files.
        Box::new(
            ruzstd::decoding::StreamingDecoder::new(f)
                .map_err(|e| format!("{}: {e}", path.display()))?,
        )
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 16, r)))
}

/// Finds `<prefix>_<keytype>_workload<w>` in `dir`, plain or compressed.
pub fn find(dir: &Path, prefix: &str, keytype: &str, workload: &str) -> Result<PathBuf, String> {
    let base = format!(
        "{prefix}_{keytype}_workload{}",
        workload.to_ascii_lowercase()
    );
    for ext in ["", ".zst", ".gz"] {
        let p = dir.join(format!("{base}{ext}"));
        if p.exists() {
            return Ok(p);
        }
    }
    Err(format!("no {base}[.zst|.gz] in {}", dir.display()))
}

/// Parses one trace line. `int_keys`: keys are decimal u64s.
pub fn parse_line(line: &str, int_keys: bool) -> Result<Op, String> {
    let mut it = line.split_ascii_whitespace();
    let (op, key) = match (it.next(), it.next()) {
        (Some(o), Some(k)) => (o, k),
        _ => return Err(format!("malformed trace line {line:?}")),
    };
    let key = if int_keys {
        key.parse::<u64>()
            .map_err(|e| format!("bad integer key in {line:?}: {e}"))?
            .to_be_bytes()
            .to_vec()
    } else {
        key.as_bytes().to_vec()
    };
    Ok(match op {
        "INSERT" => Op::Insert(key),
        "READ" => Op::Read(key),
        "UPDATE" => Op::Update(key),
        "REMOVE" | "DELETE" => Op::Remove(key),
        "SCAN" => {
            let len = it
                .next()
                .ok_or_else(|| format!("SCAN without length in {line:?}"))?
                .parse::<u32>()
                .map_err(|e| format!("bad scan length in {line:?}: {e}"))?;
            Op::Scan(key, len)
        }
        other => return Err(format!("unknown operation {other:?} in {line:?}")),
    })
}

/// Reads every operation of a trace file (at most `limit`).
pub fn read_ops(path: &Path, int_keys: bool, limit: usize) -> Result<Vec<Op>, String> {
    read(path, int_keys, limit, Ok)
}

/// Reads the keys of a load file (`load_*`): INSERT lines only, in order.
/// Errors name the file and line of any other operation (a load inserts;
/// running a READ or REMOVE of it as an insert would lie about the load).
pub fn read_load(path: &Path, int_keys: bool) -> Result<Vec<Vec<u8>>, String> {
    read(path, int_keys, usize::MAX, |op| match op {
        Op::Insert(k) => Ok(k),
        other => Err(format!(
            "a load file may contain only INSERT lines, found {}",
            other.kind().to_uppercase()
        )),
    })
}

/// The lines of `path` parsed and turned into `T` by `each` (at most
/// `limit`); an error of either names the file and line.
fn read<T>(
    path: &Path,
    int_keys: bool,
    limit: usize,
    each: impl Fn(Op) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for (i, line) in open(path)?.lines().enumerate() {
        if out.len() >= limit {
            break;
        }
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(
            parse_line(&line, int_keys)
                .and_then(&each)
                .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_rejects_garbage() {
        assert_eq!(
            parse_line("INSERT 6284781860667377211", true),
            Ok(Op::Insert(6284781860667377211u64.to_be_bytes().to_vec()))
        );
        assert_eq!(
            parse_line("SCAN user12 7", false),
            Ok(Op::Scan(b"user12".to_vec(), 7))
        );
        assert!(parse_line("SCAN 5", true).is_err());
        assert!(parse_line("FROB 5", true).is_err());
        assert!(parse_line("READ notanumber", true).is_err());
    }

    #[test]
    fn reads_the_real_trace_sample() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let load = read_ops(
            &find(&dir, "load", "randint", "e").unwrap(),
            true,
            usize::MAX,
        )
        .unwrap();
        assert_eq!(load.len(), 2000);
        for (i, op) in load.iter().enumerate() {
            assert_eq!(
                op,
                &Op::Insert(crate::ycsb::int_key(i as u64)),
                "load key {i} is FNVhash64({i})"
            );
        }
        let txn = read_ops(&find(&dir, "txn", "randint", "E").unwrap(), true, 1500).unwrap();
        assert_eq!(txn.len(), 1500);
        assert!(txn
            .iter()
            .all(|o| matches!(o, Op::Scan(_, 1..=100) | Op::Insert(_))));
        assert!(find(&dir, "txn", "randint", "q").is_err());
    }
}

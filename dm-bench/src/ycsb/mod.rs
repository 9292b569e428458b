//! Workloads: YCSB A-F and LOAD, Sherman's Table 2 mixes, and index-microbench
//! traces, all as one deterministic operation stream.
//!
//! - [`gen`]: YCSB 0.11's generators (FNV key hashing, zipfian, scrambled
//!   zipfian, skewed latest).
//! - [`workload`]: the workload specs and the stream built from them.
//! - [`keys`]: string keys from a file (`--key-file`).
//! - [`trace`]: reading `load_*`/`txn_*` trace files (`.gz`, `.zst` or plain).

pub mod gen;
pub mod keys;
pub mod trace;
pub mod workload;

/// One index operation. Keys are bytes ordered lexicographically; YCSB's
/// integer keys are 8-byte big-endian.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read(Vec<u8>),
    Update(Vec<u8>),
    /// Insert; for Sherman's mixes an upsert of a key that may exist.
    Insert(Vec<u8>),
    /// Range scan of `len` records starting at the key.
    Scan(Vec<u8>, u32),
    /// YCSB F's read-modify-write: a read then an update of the same key.
    ReadModifyWrite(Vec<u8>),
    Remove(Vec<u8>),
}

impl Op {
    /// The key the operation addresses.
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Read(k)
            | Op::Update(k)
            | Op::Insert(k)
            | Op::Scan(k, _)
            | Op::ReadModifyWrite(k)
            | Op::Remove(k) => k,
        }
    }

    /// Short name used in reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Read(_) => "read",
            Op::Update(_) => "update",
            Op::Insert(_) => "insert",
            Op::Scan(..) => "scan",
            Op::ReadModifyWrite(_) => "rmw",
            Op::Remove(_) => "remove",
        }
    }
}

/// YCSB's integer key for key number `n` (`insertorder=hashed`) as index key bytes.
pub fn int_key(n: u64) -> Vec<u8> {
    gen::fnvhash64(n).to_be_bytes().to_vec()
}

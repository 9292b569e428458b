//! `dm-bench ycsb` and the workloads it runs: YCSB A-F and LOAD, Sherman's
//! Table 2 mixes, and index-microbench traces, all as one deterministic
//! operation stream (also what `check`, `workload`, `trace` and `figure`
//! run).
//!
//! The operation stream:
//! - [`gen`]: YCSB 0.11's generators (FNV key hashing, zipfian, scrambled
//!   zipfian, skewed latest).
//! - [`workload`]: the workload specs and the stream built from them.
//! - [`keys`]: string keys from a file (`--key-file`).
//! - [`trace`]: reading `load_*`/`txn_*` trace files (`.gz`, `.zst` or plain).
//!
//! The `ycsb` subcommand: load, then run a workload against an index on
//! `sim`, `loopback` or `rdma`, then verify every key touched.
//! - [`args`]: its flags ([`Args`]).
//! - [`flat`]: the load's keys in one flat array.
//! - [`plan`]: the load's keys, the run's operations, and every value each
//!   key is ever written (a hash of the operation's index), so verification
//!   is exact under concurrency: each read returns a value written to that
//!   key (or nothing for a key not inserted yet), an update of a loaded key
//!   finds it, each scan is ordered, starts at its key and stays within its
//!   length; at the end every key touched holds one of its written values
//!   and a full scan returns exactly the keys loaded or inserted.
//! - [`measure`](mod@measure): the run, phase by phase (options, cluster,
//!   index, the coroutines' load and run on `sim` or on OS threads,
//!   verification, report); its module doc lists the files.
//! - [`dex`]: DEX's cluster, routing and report section (`--index dex`).
//! - [`head`]: head-node maintenance passes (`--head-nodes`).
//! - [`baseline`]: the same stream against local ordered maps (`--baseline`).
//!
//! The run phase's operations are split round-robin over every coroutine of
//! every CS core. Throughput and latency are in virtual time on `sim`, wall
//! time on `loopback`; on the wall-clock fabrics the report adds the core
//! threads' CPU time per operation and Mops per core ([`crate::cpu_time`]).

pub mod gen;
pub mod keys;
pub mod trace;
pub mod workload;

mod args;
pub(crate) mod baseline;
pub(crate) mod dex;
pub(crate) mod flat;
mod head;
pub(crate) mod measure;
mod plan;

pub use args::Args;
pub(crate) use measure::{check_sizes, measure_with, Warm};
pub use measure::{measure, run};
pub(crate) use plan::generated_key;

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

//! `dm-bench workload`: statistics of an operation stream, generated in-process
//! or read from an index-microbench trace, so the two can be compared: operations
//! by kind, distinct keys addressed, the hottest key's share, mean scan length.

use crate::report::write_json;
use crate::ycsb::workload::{Spec, Stream};
use crate::ycsb::{trace, Op};
use anyhow::{anyhow, bail, Result};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// a-f, load, write-only, write-intensive, read-intensive, range-only, range-write.
    #[arg(long, default_value = "a")]
    pub workload: String,
    /// Records loaded before the run.
    #[arg(long, default_value_t = 200_000)]
    pub keys: u64,
    /// Run-phase operations.
    #[arg(long, default_value_t = 200_000)]
    pub ops: u64,
    /// Zipfian constant, 0 <= theta < 1 (0 = uniform; YCSB's zipfian is
    /// undefined at 1).
    #[arg(
        long,
        default_value_t = 0.99,
        allow_negative_numbers = true,
        value_parser = crate::ycsb::workload::parse_theta
    )]
    pub theta: f64,
    /// Range length of Sherman's range mixes, at least 1 (records per
    /// range).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub scan_len: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Read `txn_<key-type>_workload<W>` from this directory instead of generating.
    #[arg(long)]
    pub trace_dir: Option<PathBuf>,
    /// Key type of the trace files (randint keys are decimal u64s).
    #[arg(long, default_value = "randint")]
    pub key_type: String,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Bytes an operation of the stream takes here (the operation and its
/// key's count; measured about 45 B with 8-byte keys).
const OP_BYTES: u128 = 160;

pub fn run(a: Args) -> Result<()> {
    crate::limits::at_most(
        "--ops",
        a.ops,
        crate::limits::MAX_COUNT,
        "operations of one stream",
    )?;
    crate::limits::fits_memory(
        &format!("the stream of --ops {}", a.ops),
        a.ops as u128 * OP_BYTES,
        "take fewer --ops",
    )?;
    let (source, ops): (String, Vec<Op>) = match &a.trace_dir {
        Some(dir) => {
            let p = trace::find(dir, "txn", &a.key_type, &a.workload).map_err(|e| anyhow!(e))?;
            let ops = trace::read_ops(&p, a.key_type == "randint", a.ops as usize)
                .map_err(|e| anyhow!(e))?;
            if ops.is_empty() {
                bail!("{} holds no operations", p.display());
            }
            (p.display().to_string(), ops)
        }
        None => {
            let spec = Spec::named(&a.workload, a.theta, a.scan_len).map_err(|e| anyhow!(e))?;
            let mut s = Stream::new(spec, a.keys, a.ops, a.seed).map_err(|e| anyhow!(e))?;
            (
                "generator".to_string(),
                (0..a.ops).map(|_| s.next_op()).collect(),
            )
        }
    };
    let mut kinds: HashMap<&str, u64> = HashMap::new();
    let mut per_key: HashMap<&[u8], u64> = HashMap::new();
    let (mut scans, mut scan_len) = (0u64, 0u64);
    for o in &ops {
        *kinds.entry(o.kind()).or_default() += 1;
        if !matches!(o, Op::Insert(_)) {
            *per_key.entry(o.key()).or_default() += 1;
        }
        if let Op::Scan(_, l) = o {
            scans += 1;
            scan_len += *l as u64;
        }
    }
    let addressed: u64 = per_key.values().sum();
    let hottest = per_key.values().max().copied().unwrap_or(0) as f64 / addressed.max(1) as f64;
    let mean_scan = scan_len as f64 / scans.max(1) as f64;
    let mut kv: Vec<_> = kinds.iter().collect();
    kv.sort();
    println!("dm-bench workload {} ({source})", a.workload);
    println!(
        "  operations     {} ({})",
        ops.len(),
        kv.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  distinct keys  {} addressed by non-insert operations",
        per_key.len()
    );
    println!(
        "  hottest key    {:.2}% of key-addressed operations",
        100.0 * hottest
    );
    if scans > 0 {
        println!("  mean scan      {mean_scan:.1} records");
    }
    write_json(
        a.json.as_deref(),
        &json!({
            "workload": a.workload, "source": source, "ops": ops.len(), "by_kind": kinds,
            "distinct_keys": per_key.len(), "hottest_share": hottest, "mean_scan_len": mean_scan,
        }),
    )
}

//! What one `ycsb` run executes ([`Plan`]): the load's keys and the run's
//! operations, generated ([`super::workload`], `--key-file`) or read from
//! index-microbench traces (`--trace-dir`), padded to the tree's key size,
//! and every value each key is ever written (a hash of the operation's
//! index: [`load_value`], [`run_value`]), which makes verification exact
//! under concurrency.

use super::dex::Repartition;
use super::head::HeadMaint;
use super::workload::{Mix, Spec, Stream};
use super::{gen::fnvhash64, keys, trace, Args, Op};
use anyhow::{anyhow, bail, Result};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// Everything the coroutines share (read-only).
pub(super) struct Plan {
    pub load: Vec<Vec<u8>>,
    pub run: Vec<Op>,
    /// Values ever written to each key (load and run).
    pub allowed: HashMap<Vec<u8>, Vec<u64>>,
    /// Where the keys come from, for the report.
    pub keys_info: serde_json::Value,
    /// DEX: the mid-run repartitioning (`--dex-repartition-at`).
    pub repartition: Option<Arc<Repartition>>,
    /// Head-node maintenance passes (`--head-nodes`).
    pub heads: Option<Arc<HeadMaint>>,
    /// The process-wide counters before this run (a process may run several:
    /// `dm-bench figure`), subtracted in the report.
    pub carved0: u64,
    pub dolphin0: dm_art::dolphin::DolphinStats,
}

pub(crate) fn load_value(i: usize) -> u64 {
    fnvhash64(i as u64 ^ 0x5eed_0000_0000)
}

pub(crate) fn run_value(j: usize) -> u64 {
    fnvhash64(j as u64 ^ 0x7a11_0000_0000)
}

pub(super) fn allowed(plan: &Plan, key: &[u8], v: u64) -> bool {
    plan.allowed.get(key).is_some_and(|vs| vs.contains(&v))
}

fn pad(k: &[u8], n: usize) -> Result<Vec<u8>> {
    if k.len() > n {
        bail!(
            "key {:?} is longer than --key-bytes {n}",
            String::from_utf8_lossy(k)
        );
    }
    let mut v = k.to_vec();
    v.resize(n, 0);
    Ok(v)
}

/// Tree key size: `--key-bytes`, else 8 for integer keys and 32 for strings.
pub(super) fn key_bytes(a: &Args) -> usize {
    let strings = a.key_file.is_some() || (a.trace_dir.is_some() && a.key_type != "randint");
    a.key_bytes.unwrap_or(if strings { 32 } else { 8 })
}

pub(super) fn build_plan(a: &Args) -> Result<Plan> {
    let mut keys_info =
        json!({"kind": "integer (YCSB FNV-hashed key numbers)", "key_bytes": key_bytes(a)});
    let (load, run): (Vec<Vec<u8>>, Vec<Op>) = match &a.trace_dir {
        Some(_) if a.key_file.is_some() => {
            bail!("--key-file applies to generated workloads; a trace brings its own keys")
        }
        Some(_) if a.mix.is_some() => {
            bail!("--mix applies to generated workloads; a trace brings its own operations")
        }
        Some(dir) => {
            let ints = a.key_type == "randint";
            if !ints {
                keys_info = json!({"kind": format!("trace key type {}", a.key_type), "key_bytes": key_bytes(a)});
            }
            let lp = trace::find(dir, "load", &a.key_type, &a.workload).map_err(|e| anyhow!(e))?;
            let tp = trace::find(dir, "txn", &a.key_type, &a.workload).map_err(|e| anyhow!(e))?;
            let load = trace::read_load(&lp, ints).map_err(|e| anyhow!(e))?;
            let run = trace::read_ops(&tp, ints, a.ops as usize).map_err(|e| anyhow!(e))?;
            let n = key_bytes(a);
            let load = load.iter().map(|k| pad(k, n)).collect::<Result<_>>()?;
            let run = run
                .into_iter()
                .map(|o| {
                    Ok(match o {
                        Op::Read(k) => Op::Read(pad(&k, n)?),
                        Op::Update(k) => Op::Update(pad(&k, n)?),
                        Op::Insert(k) => Op::Insert(pad(&k, n)?),
                        Op::Scan(k, l) => Op::Scan(pad(&k, n)?, l),
                        Op::ReadModifyWrite(k) => Op::ReadModifyWrite(pad(&k, n)?),
                        Op::Remove(k) => Op::Remove(pad(&k, n)?),
                    })
                })
                .collect::<Result<_>>()?;
            (load, run)
        }
        None => {
            let mut spec = Spec::named(&a.workload, a.theta, a.scan_len).map_err(|e| anyhow!(e))?;
            if let Some(m) = &a.mix {
                spec.mix = Mix::parse_percent(m)?;
            }
            let mut s = Stream::new(spec, a.keys, a.ops, a.seed).map_err(|e| anyhow!(e))?;
            match &a.key_file {
                Some(path) => {
                    let kf = keys::load(path, key_bytes(a)).map_err(|e| anyhow!(e))?;
                    keys_info = json!({
                        "kind": "strings",
                        "file": path.display().to_string(),
                        "key_bytes": key_bytes(a),
                        "lines": kf.lines,
                        "usable": kf.keys.len(),
                        "skipped_too_long": kf.too_long,
                        "duplicates": kf.duplicates,
                    });
                    s = s.with_key_list(Arc::new(kf.keys));
                }
                None if key_bytes(a) != 8 => {
                    bail!("generated integer keys are 8 bytes; --key-bytes applies to string keys")
                }
                None if a.key_order == "ordered" => {
                    keys_info = json!({"kind": "integer (YCSB ordered key numbers: dense)", "key_bytes": 8});
                    s = s.with_ordered_keys();
                }
                None => {}
            }
            if a.key_order != "hashed" && (a.key_order != "ordered" || a.key_file.is_some()) {
                bail!("--key-order takes hashed or ordered, for generated integer keys only");
            }
            let load = (0..a.keys).map(|n| s.key(n)).collect();
            let run = (0..a.ops).map(|_| s.next_op()).collect();
            if let Some(usable) = keys_info["usable"].as_u64() {
                if s.key_numbers_used() > usable {
                    bail!(
                        "{}: the key file has {usable} usable keys; this workload uses {} \
                         (records or key space, plus inserts of new keys)",
                        a.key_file.as_ref().unwrap().display(),
                        s.key_numbers_used()
                    );
                }
            }
            (load, run)
        }
    };
    let mut allowed: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for (i, k) in load.iter().enumerate() {
        allowed.entry(k.clone()).or_default().push(load_value(i));
    }
    for (j, o) in run.iter().enumerate() {
        match o {
            Op::Insert(k) | Op::Update(k) | Op::ReadModifyWrite(k) => {
                allowed.entry(k.clone()).or_default().push(run_value(j))
            }
            _ => {}
        }
    }
    // Updates of keys never inserted write nothing; keep only keys something inserted.
    let inserted: std::collections::HashSet<&Vec<u8>> = load
        .iter()
        .chain(
            run.iter()
                .filter_map(|o| if let Op::Insert(k) = o { Some(k) } else { None }),
        )
        .collect();
    allowed.retain(|k, _| inserted.contains(k));
    Ok(Plan {
        carved0: dm_runtime::alloc::bytes_carved(),
        dolphin0: dm_art::dolphin::totals(),
        load,
        run,
        allowed,
        keys_info,
        repartition: None,
        heads: None,
    })
}

/// The load as sorted (key, value) pairs; a key loaded twice keeps its last value.
pub(super) fn sorted_load(plan: &Plan) -> Vec<(Vec<u8>, u64)> {
    let mut m: std::collections::BTreeMap<Vec<u8>, u64> = std::collections::BTreeMap::new();
    for (i, k) in plan.load.iter().enumerate() {
        m.insert(k.clone(), load_value(i));
    }
    m.into_iter().collect()
}

/// The key of generated key number `n` (`--key-order` hashed or ordered):
/// the load inserts key numbers `0..--keys`.
pub(crate) fn generated_key(a: &Args, n: u64) -> Result<Vec<u8>> {
    if a.key_file.is_some() || a.trace_dir.is_some() {
        bail!("key numbers name generated integer keys (no --key-file, --trace-dir)");
    }
    let spec = Spec::named(&a.workload, a.theta, a.scan_len).map_err(|e| anyhow!(e))?;
    let s = Stream::new(spec, a.keys, a.ops, a.seed).map_err(|e| anyhow!(e))?;
    Ok(match a.key_order.as_str() {
        "ordered" => s.with_ordered_keys().key(n),
        _ => s.key(n),
    })
}

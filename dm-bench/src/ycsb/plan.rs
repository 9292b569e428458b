//! What one `ycsb` run executes ([`Plan`]): the load's keys and the run's
//! operations, generated ([`super::workload`], `--key-file`) or read from
//! index-microbench traces (`--trace-dir`), padded to the tree's key size,
//! and the keys written ([`Written`]). Every value names the operation
//! that wrote it ([`load_value`], [`run_value`]: bijections of the load
//! record's and the run operation's index), so a value read is checked by
//! inverting it and comparing that operation's key ([`allows`]): exact
//! under concurrency, and no map of values per key (which took about
//! 100 bytes per loaded key and a hash lookup per checked read).

use super::dex::Repartition;
use super::flat::{Keys, Writes};
use super::head::HeadMaint;
use super::workload::{Mix, Spec, Stream};
use super::{keys, trace, Args, Op};
use anyhow::{anyhow, bail, Result};
use serde_json::json;
use std::sync::Arc;

/// Everything the coroutines share (read-only).
pub(super) struct Plan {
    /// The load's keys, one width, flat ([`Keys`]).
    pub load: Keys,
    /// The warm-up's operations (`--warmup`), then the measured run's.
    pub run: Vec<Op>,
    /// The key each of `run`'s operations writes, flat (the read check's).
    pub writes: Writes,
    /// How many of `run`'s first operations are the warm-up's.
    pub warm: usize,
    /// `--split chunks`: each coroutine runs a contiguous chunk of every
    /// phase's operations instead of every N-th one.
    pub chunks: bool,
    /// The keys something inserted (load or run), sorted, each once.
    pub written: Written,
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

const LOAD_SEED: u64 = 0x5eed_0000_0000;
const RUN_SEED: u64 = 0x7a11_0000_0000;

/// The value load record `i` writes.
pub(crate) fn load_value(i: usize) -> u64 {
    mix(i as u64 ^ LOAD_SEED)
}

/// The value run operation `j` writes.
pub(crate) fn run_value(j: usize) -> u64 {
    mix(j as u64 ^ RUN_SEED)
}

/// SplitMix64's finaliser: a bijection of `u64` (so [`unmix`] recovers the
/// writer's index from a value).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The multiplicative inverse of odd `a` modulo 2^64 (Newton's iteration).
const fn inverse(a: u64) -> u64 {
    let mut x = a;
    let mut i = 0;
    while i < 6 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// Undoes `z ^= z >> s` (for `s` >= 1).
fn unshift(z: u64, s: u32) -> u64 {
    let mut x = z;
    let mut k = s;
    while k < 64 {
        x = z ^ (x >> s);
        k += s;
    }
    x
}

/// The inverse of [`mix`].
fn unmix(z: u64) -> u64 {
    let z = unshift(z, 31);
    let z = unshift(z.wrapping_mul(inverse(0x94d0_49bb_1331_11eb)), 27);
    unshift(z.wrapping_mul(inverse(0xbf58_476d_1ce4_e5b9)), 30)
}

/// Whether `v` is a value some operation wrote to `key`: the load record
/// or run operation whose index `v` names has this key (a run operation
/// that writes: insert, update, read-modify-write). An update of a key
/// that nothing inserted writes nothing; the final scan's comparison with
/// [`Written`] catches an index that wrote it anyway.
pub(crate) fn allows(load: &Keys, run: &Writes, key: &[u8], v: u64) -> bool {
    let x = unmix(v);
    let i = x ^ LOAD_SEED;
    if i < load.len() as u64 && load.is(i as usize, key) {
        return true;
    }
    let j = x ^ RUN_SEED;
    usize::try_from(j).is_ok_and(|j| run.is(j, key))
}

pub(super) fn allowed(plan: &Plan, key: &[u8], v: u64) -> bool {
    allows(&plan.load, &plan.writes, key, v)
}

/// The keys something inserted (a load record or a run insert), sorted and
/// each once, as references into the load and the run (8 bytes a key).
pub(crate) struct Written {
    /// Load index `i`, or run index `j | RUN_BIT`.
    refs: Vec<u64>,
}

const RUN_BIT: u64 = 1 << 63;

impl Written {
    pub(crate) fn new(load: &Keys, run: &[Op]) -> Written {
        let mut refs: Vec<u64> = (0..load.len() as u64).collect();
        refs.extend(
            run.iter()
                .enumerate()
                .filter_map(|(j, o)| matches!(o, Op::Insert(_)).then_some(j as u64 | RUN_BIT)),
        );
        let key = |r: &u64| Self::key_of(load, run, *r);
        refs.sort_unstable_by(|a, b| key(a).cmp(key(b)));
        refs.dedup_by(|a, b| key(a) == key(b));
        Written { refs }
    }

    fn key_of<'a>(load: &'a Keys, run: &'a [Op], r: u64) -> &'a [u8] {
        if r & RUN_BIT == 0 {
            &load[r as usize]
        } else {
            match &run[(r & !RUN_BIT) as usize] {
                Op::Insert(k) => k,
                _ => unreachable!("only inserts are referenced"),
            }
        }
    }

    /// How many keys.
    pub(crate) fn len(&self) -> usize {
        self.refs.len()
    }

    /// The keys in order.
    pub(crate) fn keys<'a>(
        &'a self,
        load: &'a Keys,
        run: &'a [Op],
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.refs.iter().map(move |&r| Self::key_of(load, run, r))
    }
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

/// The warm-up's and the run's operations together (`--warmup`, `--ops`;
/// both at most `limits::MAX_COUNT`, checked before the plan is built).
pub(super) fn total_ops(a: &Args) -> usize {
    a.warmup.saturating_add(a.ops) as usize
}

/// Tree key size: `--key-bytes`, else 8 for integer keys and 32 for strings.
pub(super) fn key_bytes(a: &Args) -> usize {
    let strings = a.key_file.is_some() || (a.trace_dir.is_some() && a.key_type != "randint");
    a.key_bytes.unwrap_or(if strings { 32 } else { 8 })
}

pub(super) fn build_plan(a: &Args) -> Result<Plan> {
    let mut keys_info =
        json!({"kind": "integer (YCSB FNV-hashed key numbers)", "key_bytes": key_bytes(a)});
    let width = key_bytes(a);
    let (load, run): (Keys, Vec<Op>) = match &a.trace_dir {
        Some(_) if a.key_file.is_some() => {
            bail!("--key-file applies to generated workloads; a trace brings its own keys")
        }
        Some(_) if a.mix.is_some() => {
            bail!("--mix applies to generated workloads; a trace brings its own operations")
        }
        Some(_) if a.load_fraction.is_some() => {
            bail!("--load-fraction applies to generated workloads; a trace brings its own keys")
        }
        Some(dir) => {
            let ints = a.key_type == "randint";
            let kind = if ints {
                "integer (the trace's key numbers)".to_string()
            } else {
                format!("trace key type {}", a.key_type)
            };
            keys_info = json!({"kind": kind, "key_bytes": key_bytes(a)});
            let lp = trace::find(dir, "load", &a.key_type, &a.workload).map_err(|e| anyhow!(e))?;
            let tp = trace::find(dir, "txn", &a.key_type, &a.workload).map_err(|e| anyhow!(e))?;
            let load = trace::read_load(&lp, ints).map_err(|e| anyhow!(e))?;
            let run = trace::read_ops(&tp, ints, total_ops(a)).map_err(|e| anyhow!(e))?;
            if run.len() as u64 <= a.warmup {
                bail!(
                    "{} holds {} operations: none left to measure after --warmup {}",
                    tp.display(),
                    run.len(),
                    a.warmup
                );
            }
            let n = key_bytes(a);
            let mut keys = Keys::with_capacity(n, load.len());
            for k in &load {
                keys.push(&pad(k, n)?);
            }
            let load = keys;
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
            let mut s = Stream::new(spec(a)?, a.keys, total_ops(a) as u64, a.seed)
                .map_err(|e| anyhow!(e))?;
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
                None => {
                    if let Some((order, kind)) = key_order(&a.key_order)? {
                        keys_info = json!({"kind": kind, "key_bytes": 8});
                        s = order.apply(s);
                    }
                }
            }
            if key_order(&a.key_order)?.is_some() && a.key_file.is_some() {
                bail!("--key-order takes hashed, ordered, half or scattered, for generated integer keys only");
            }
            // The run first: with a key file, the check below must come
            // before the load asks for keys the file does not have
            // (`Stream::key` has none to give past its list). Neither
            // order moves a key: the load draws no random number.
            let run = (0..total_ops(a)).map(|_| s.next_op()).collect();
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
            let mut load = Keys::with_capacity(width, a.keys as usize);
            for n in 0..a.keys {
                load.push(&s.key(n));
            }
            (load, run)
        }
    };
    let written = Written::new(&load, &run);
    let writes = Writes::new(width, &run);
    let warm = (a.warmup as usize).min(run.len());
    Ok(Plan {
        warm,
        chunks: a.split == "chunks",
        carved0: dm_runtime::alloc::bytes_carved(),
        dolphin0: dm_art::dolphin::totals(),
        load,
        run,
        writes,
        written,
        keys_info,
        repartition: None,
        heads: None,
    })
}

/// The load as sorted (key, value) pairs, keys borrowed from the plan; a
/// key loaded twice keeps its last value. Sorts the records' indices (no
/// map, no copy of the keys).
pub(crate) fn sorted_load(plan: &Plan) -> Vec<(&[u8], u64)> {
    let load = &plan.load;
    let mut idx: Vec<usize> = (0..load.len()).collect();
    // Stable: equal keys stay in load order, so the last is the last loaded.
    idx.sort_by(|&a, &b| load[a].cmp(&load[b]));
    let mut out: Vec<(&[u8], u64)> = Vec::with_capacity(idx.len());
    for i in idx {
        match out.last_mut() {
            Some(last) if last.0 == &load[i][..] => last.1 = load_value(i),
            _ => out.push((&load[i][..], load_value(i))),
        }
    }
    out
}

/// The generated workload's spec: `--workload` with `--theta` and
/// `--scan-len`, its mix replaced by `--mix`, its key space by
/// `--load-fraction`.
fn spec(a: &Args) -> Result<Spec> {
    let mut spec = Spec::named(&a.workload, a.theta, a.scan_len).map_err(|e| anyhow!(e))?;
    if let Some(m) = &a.mix {
        spec.mix = Mix::parse_percent(m)?;
    }
    // Flags of Sherman's upsert mixes only.
    let upsert_mix = spec.upsert_load_fraction.is_some();
    let upserts = |flag: &str| -> Result<()> {
        if !upsert_mix {
            bail!(
                "{flag} is for Sherman's upsert mixes (write-only, write-intensive, \
                 read-intensive, range-only, range-write); workload {} inserts new keys",
                a.workload
            );
        }
        Ok(())
    };
    if let Some(f) = a.load_fraction {
        upserts("--load-fraction")?;
        spec.upsert_load_fraction = Some(f);
    }
    if a.upsert_uniform {
        upserts("--upsert-uniform")?;
        spec.upsert_uniform = true;
    }
    Ok(spec)
}

/// The key of generated key number `n` (`--key-order` hashed or ordered):
/// the load inserts key numbers `0..--keys`.
pub(crate) fn generated_key(a: &Args, n: u64) -> Result<Vec<u8>> {
    if a.key_file.is_some() || a.trace_dir.is_some() {
        bail!("key numbers name generated integer keys (no --key-file, --trace-dir)");
    }
    let s = Stream::new(spec(a)?, a.keys, total_ops(a) as u64, a.seed).map_err(|e| anyhow!(e))?;
    Ok(match key_order(&a.key_order)? {
        Some((order, _)) => order.apply(s).key(n),
        None => s.key(n),
    })
}

/// How `--key-order` maps key numbers to keys, besides YCSB's hash.
#[derive(Clone, Copy)]
enum KeyOrder {
    /// Key number n is `n x stride`.
    Stride(u64),
    /// [`Stream::with_scattered_keys`].
    Scattered,
}

impl KeyOrder {
    fn apply(self, s: Stream) -> Stream {
        match self {
            KeyOrder::Stride(k) => s.with_key_stride(k),
            KeyOrder::Scattered => s.with_scattered_keys(),
        }
    }
}

/// `--key-order`: `None` for `hashed` (YCSB's FNV of the key number), else
/// the mapping and the report's `keys.kind`.
fn key_order(order: &str) -> Result<Option<(KeyOrder, &'static str)>> {
    Ok(match order {
        "hashed" => None,
        "ordered" => Some((KeyOrder::Stride(1), "integer (YCSB ordered key numbers: dense)")),
        "half" => Some((
            KeyOrder::Stride(2),
            "integer (key number n is 2n: a key space half filled)",
        )),
        "scattered" => Some((
            KeyOrder::Scattered,
            "integer (key numbers scattered one to one over twice their count: dense, half filled, no order)",
        )),
        _ => bail!(
            "--key-order takes hashed, ordered, half or scattered, for generated integer keys only"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values name their writer: `unmix` inverts `mix`, and a value is
    /// allowed exactly for the key its load record or writing run operation
    /// has.
    #[test]
    fn values_name_their_writer() {
        for x in [0u64, 1, 0x5eed_0000_0000, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(unmix(mix(x)), x);
        }
        let k = |n: u64| n.to_be_bytes().to_vec();
        let load = Keys::from_vecs(8, &[k(1), k(2), k(1)]);
        let run = vec![
            Op::Read(k(2)),
            Op::Update(k(2)),
            Op::Insert(k(9)),
            Op::Remove(k(1)),
            Op::Update(k(7)),
        ];
        let ops = run;
        let run = Writes::new(8, &ops);
        assert!(allows(&load, &run, &k(1), load_value(0)));
        assert!(allows(&load, &run, &k(1), load_value(2)));
        assert!(!allows(&load, &run, &k(2), load_value(0)));
        assert!(allows(&load, &run, &k(2), run_value(1)));
        assert!(allows(&load, &run, &k(9), run_value(2)));
        assert!(
            !allows(&load, &run, &k(2), run_value(0)),
            "a read writes nothing"
        );
        assert!(
            !allows(&load, &run, &k(1), run_value(3)),
            "nor does a remove"
        );
        assert!(!allows(&load, &run, &k(2), 42));
        let w = Written::new(&load, &ops);
        let keys: Vec<&[u8]> = w.keys(&load, &ops).collect();
        assert_eq!(keys, vec![&k(1)[..], &k(2)[..], &k(9)[..]]);
        assert_eq!(w.len(), 3);
    }
}

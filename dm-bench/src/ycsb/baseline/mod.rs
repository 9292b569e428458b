//! `dm-bench ycsb --baseline btree,skiplist` (issue 9, item 4: "CPU cost per
//! operation on loopback"): the run's operation stream against a local
//! in-memory ordered map, so that the cost of going through the fabric shows
//! as a ratio.
//!
//! The maps ([`maps`]): `btree` is `std::sync::RwLock<BTreeMap<Vec<u8>,
//! u64>>`, `skiplist` is `crossbeam_skiplist::SkipMap<Vec<u8>, u64>`
//! (lock-free). This module runs the stream against one and reports it.
//!
//! The same stream: the load keys and run operations the index got, with the
//! same values (so the same checks hold), on as many plain OS threads as the
//! index had core threads, pinned to the same CPUs; thread `i` executes the
//! operations core `i`'s coroutines did, in stream order (one at a time:
//! a local map has nothing to wait for). The load phase is the index's too:
//! the same per-thread inserts, or for `--load bulk` one thread building the
//! map from the sorted records. Each operation does the bookkeeping the
//! index's coroutines do (a latency sample into a histogram, one clock
//! read per operation: the end of one is the start of the next; the check
//! of a read against the values ever written), so the
//! ratio compares the index with the map and not the harness with itself.
//!
//! Measured as the index is ([`crate::cpu_time`]): thread CPU time of the
//! run phase (ns, `CLOCK_THREAD_CPUTIME_ID`, read by each thread around its
//! operations) per operation, and operations per second of wall time per
//! thread. Then the final contents are verified like the index's: every key
//! written holds one of its written values (or is gone, if the run removed
//! it), and a full scan returns exactly the keys written.
//!
//! Ratios are the index's number over the baseline's: `cpu_ratio` > 1 means
//! the index spends that many times the CPU per operation, and
//! `throughput_ratio` < 1 that it completes that fraction of the baseline's
//! operations per second.
//!
//! Only on wall-clock fabrics (`loopback`, `rdma` with `--client 0/1`): on
//! `sim` the index's throughput is in virtual time, so a ratio to a real
//! map would mean nothing; `ycsb` rejects `--baseline` there.

mod maps;

pub use maps::BaselineMap;

use crate::cpu_time::{thread_cpu_ns, CpuCost};
use crate::ycsb::Op;
use crossbeam_skiplist::SkipMap;
use hdrhistogram::Histogram;
use maps::Map;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Instant;

/// One ycsb run's operation stream, as the index's core threads ran it.
pub(crate) struct Stream<'a> {
    /// Load records; record `i` is written with `load_value(i)`.
    pub load: &'a crate::ycsb::flat::Keys,
    /// The key each run operation writes (the read check's).
    pub writes: &'a crate::ycsb::flat::Writes,
    /// Run operations; operation `j` writes `run_value(j)`.
    pub run: &'a [Op],
    /// The keys something inserted (`crate::ycsb::plan::Written`).
    pub written: &'a crate::ycsb::plan::Written,
    pub load_value: fn(usize) -> u64,
    pub run_value: fn(usize) -> u64,
    /// The load records each core thread inserted; `None`: a bulk load
    /// (`--load bulk`), built by one thread from the sorted records.
    pub load_by_thread: Option<Vec<Vec<usize>>>,
    /// The run operations each core thread executed, in stream order.
    pub run_by_thread: Vec<Vec<usize>>,
}

/// The operations that coroutines `first..first + coros` of a core run, as
/// `ycsb`'s coroutines pick them: coroutine `id` takes every `all`-th
/// operation from `id` on, of all `n` (`ids`: `None`), or of the listed ones
/// (DEX's per-CS lists). In increasing order.
pub(crate) fn core_ops(
    first: usize,
    coros: usize,
    all: usize,
    ids: Option<&[usize]>,
    n: usize,
) -> Vec<usize> {
    let all = all.max(1);
    let mut v: Vec<usize> = match ids {
        None => (first..first + coros)
            .flat_map(|id| (id..n).step_by(all))
            .collect(),
        Some(l) => (first..first + coros)
            .flat_map(|id| l.iter().copied().skip(id).step_by(all))
            .collect(),
    };
    v.sort_unstable();
    v
}

/// What a baseline run measured.
pub(crate) struct Baseline {
    pub map: BaselineMap,
    /// Wall time of the load phase, ns.
    pub load_ns: u64,
    pub loaded: u64,
    /// The run phase: thread CPU time, threads, operations, wall ns.
    pub cost: CpuCost,
    /// Operation latency quantiles (p50, p99, p99.9), us.
    pub latency_us: [f64; 3],
    /// Keys whose final value checked out.
    pub verified: u64,
    pub mismatches: u64,
    pub first_mismatch: Option<String>,
}

/// Runs `s` against a new `map`: load, run (measured), verify.
pub(crate) fn run(map: BaselineMap, s: &Stream) -> Baseline {
    match map {
        BaselineMap::Btree => run_on::<RwLock<BTreeMap<Vec<u8>, u64>>>(map, s),
        BaselineMap::Skiplist => run_on::<SkipMap<Vec<u8>, u64>>(map, s),
    }
}

/// Mismatches found by one thread.
#[derive(Default)]
struct Check {
    mismatches: u64,
    first: Option<String>,
}

impl Check {
    /// Counts a mismatch; `what` is formatted for the first one only.
    fn bad(&mut self, what: impl FnOnce() -> String) {
        self.mismatches += 1;
        if self.first.is_none() {
            self.first = Some(what());
        }
    }
}

fn allowed(s: &Stream, k: &[u8], v: u64) -> bool {
    crate::ycsb::plan::allows(s.load, s.writes, k, v)
}

/// One run operation with `ycsb`'s checks (see `crate::ycsb::measure`'s `run_op`).
fn run_op<M: Map>(m: &M, s: &Stream, j: usize, c: &mut Check) {
    match &s.run[j] {
        Op::Read(k) => {
            if let Some(v) = m.get_at(j, k) {
                if !allowed(s, k, v) {
                    c.bad(|| format!("get {k:?} returned {v:#x}, never written"));
                }
            }
        }
        Op::Insert(k) => m.insert(k, (s.run_value)(j)),
        Op::Update(k) => {
            if !m.update(k, (s.run_value)(j)) && s.load.contains(k) {
                c.bad(|| format!("update of loaded key {k:?} did not find it"));
            }
        }
        Op::Remove(k) => {
            m.remove(k);
        }
        Op::Scan(k, len) => {
            let r = m.scan(k, *len as usize);
            let sorted = r.windows(2).all(|w| w[0].0 < w[1].0);
            if !sorted || r.len() > *len as usize || r.first().is_some_and(|(f, _)| f < k) {
                c.bad(|| format!("scan from {k:?} returned an unordered or out-of-range result"));
            }
        }
        Op::ReadModifyWrite(k) => {
            let _ = m.get(k);
            m.update(k, (s.run_value)(j));
        }
    }
}

/// Runs `f(i)` on one OS thread per entry of `n`, thread `i` pinned to CPU
/// `i` when it exists (as `dm_runtime::run_threads` pins core threads);
/// returns the outputs in order and the wall time, ns.
fn threads<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> (Vec<T>, u64) {
    let cpus = core_affinity::get_core_ids().unwrap_or_default();
    let t0 = Instant::now();
    let outs = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let f = &f;
                let cpu = cpus.get(i).copied();
                sc.spawn(move || {
                    if let Some(c) = cpu {
                        core_affinity::set_for_current(c);
                    }
                    f(i)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("baseline thread panicked"))
            .collect()
    });
    (outs, t0.elapsed().as_nanos() as u64)
}

fn run_on<M: Map>(map: BaselineMap, s: &Stream) -> Baseline {
    let (m, load_ns) = match &s.load_by_thread {
        Some(lists) => {
            let m = M::empty();
            let (_, ns) = threads(lists.len(), |i| {
                for &r in &lists[i] {
                    m.insert(&s.load[r], (s.load_value)(r));
                }
            });
            (m, ns)
        }
        None => {
            let t0 = Instant::now();
            let mut sorted = BTreeMap::new();
            for (i, k) in s.load.iter().enumerate() {
                sorted.insert(k.to_vec(), (s.load_value)(i));
            }
            let m = M::from_sorted(sorted.into_iter().collect());
            (m, t0.elapsed().as_nanos() as u64)
        }
    };
    let (cost, hist, mut check) = run_phase(&m, s);
    let verified = verify(&m, s, &mut check);
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    Baseline {
        map,
        load_ns,
        loaded: s.load.len() as u64,
        cost,
        latency_us: [us(0.5), us(0.99), us(0.999)],
        verified,
        mismatches: check.mismatches,
        first_mismatch: check.first,
    }
}

/// The run phase on `m`: each thread's operations in stream order with
/// the index's per-operation bookkeeping (a latency sample, the checks);
/// the threads' CPU cost, the latency histogram and the mismatches.
fn run_phase<M: Map>(m: &M, s: &Stream) -> (CpuCost, Histogram<u64>, Check) {
    let lists = &s.run_by_thread;
    let (outs, run_ns) = threads(lists.len(), |i| {
        let mut hist = Histogram::<u64>::new(3).expect("3 significant digits");
        let mut c = Check::default();
        let (cpu0, a0) = (thread_cpu_ns(), crate::alloc_count::thread_allocs());
        // One clock read per operation, as the index's coroutines: the end
        // of one operation is the start of the next.
        let mut t0 = Instant::now();
        for &j in &lists[i] {
            run_op(m, s, j, &mut c);
            let t1 = Instant::now();
            let _ = hist.record(((t1 - t0).as_nanos() as u64).max(1));
            t0 = t1;
        }
        let allocs = crate::alloc_count::thread_allocs().saturating_sub(a0);
        (thread_cpu_ns().saturating_sub(cpu0), allocs, hist, c)
    });
    let mut hist = Histogram::<u64>::new(3).expect("3 significant digits");
    let mut check = Check::default();
    let (mut cpu, mut allocs) = (0, 0);
    for (ns, n, h, c) in outs {
        cpu += ns;
        allocs += n;
        let _ = hist.add(&h);
        check.mismatches += c.mismatches;
        if check.first.is_none() {
            check.first = c.first;
        }
    }
    let cost = CpuCost {
        thread_cpu_ns: cpu,
        threads: lists.len(),
        ops: lists.iter().map(|l| l.len() as u64).sum(),
        run_ns,
        allocs,
    };
    (cost, hist, check)
}

/// The harness alone (issue 32, item 1): the run's stream with the same
/// per-operation bookkeeping against an index that does nothing
/// ([`maps::Noop`]: a get finds the value of the last run operation that
/// wrote its key, else of some load record, so the check of a read's value
/// takes the path it takes for a real index). Its CPU per operation is
/// what the bench itself costs; `ycsb` subtracts it from the index's.
pub(crate) fn harness(s: &Stream) -> CpuCost {
    let noop = maps::Noop::answering(s.load.len(), s.load_value)
        .with_last_writers(maps::last_writers(s.run), s.run_value);
    run_phase(&noop, s).0
}

/// The final check of `ycsb`'s `verify` on the map: every written key
/// holds a value written to it (or is gone, if the run removed it), and
/// without removes a full scan returns exactly the written keys. Returns the
/// keys verified.
fn verify<M: Map>(m: &M, s: &Stream, c: &mut Check) -> u64 {
    let keys: Vec<&[u8]> = s.written.keys(s.load, s.run).collect();
    let mut verified = 0;
    for k in &keys {
        match m.get(k) {
            Some(v) if allowed(s, k, v) => verified += 1,
            Some(v) => c.bad(|| format!("key {k:?} holds {v:#x}, never written")),
            None if s
                .run
                .iter()
                .any(|o| matches!(o, Op::Remove(r) if r[..] == **k)) =>
            {
                verified += 1
            }
            None => c.bad(|| format!("key {k:?} is missing")),
        }
    }
    let removed = s.run.iter().any(|o| matches!(o, Op::Remove(_)));
    let all = m.scan(&[], usize::MAX);
    let present: Vec<&[u8]> = all.iter().map(|(k, _)| &k[..]).collect();
    if !removed && present != keys {
        c.bad(|| {
            format!(
                "full scan returned {} keys, {} were written",
                present.len(),
                keys.len()
            )
        });
    }
    verified
}

/// The report's lines and its `baseline` object (keyed by map name), each
/// with its ratios to the index's run `index` (`cpu_ratio`: index CPU ns
/// per op / the map's; `throughput_ratio`: index Mops / the map's).
pub(crate) fn report(bs: &[Baseline], index: &CpuCost) -> (Vec<String>, Value) {
    let mut lines = Vec::new();
    let mut obj = serde_json::Map::new();
    for b in bs {
        let c = &b.cost;
        let cpu_ratio = index.cpu_ns_per_op() / c.cpu_ns_per_op().max(f64::MIN_POSITIVE);
        let tput_ratio = index.mops() / c.mops().max(f64::MIN_POSITIVE);
        let load_mops = b.loaded as f64 / (b.load_ns.max(1) as f64 / 1e9) / 1e6;
        lines.push(format!(
            "{}: {}, {} OS thread{}, the same load and operations: load {} Mops, run {} Mops, {:.0} ns of thread CPU per op, {} Mops per core, p50 {:.2} us, p99 {:.2} us; verified {} keys, {} mismatches",
            b.map.name(),
            b.map.what(),
            c.threads,
            if c.threads == 1 { "" } else { "s" },
            crate::report::mops(load_mops),
            crate::report::mops(c.mops()),
            c.cpu_ns_per_op(),
            crate::report::mops(c.per_core_mops()),
            b.latency_us[0],
            b.latency_us[1],
            b.verified,
            b.mismatches
        ));
        lines.push(format!(
            "  index / {}: {cpu_ratio:.2}x the CPU per op, {tput_ratio:.3}x the throughput",
            b.map.name()
        ));
        obj.insert(
            b.map.name().to_string(),
            json!({
                "map": b.map.what(),
                "threads": c.threads,
                "ops": c.ops,
                "load_throughput_mops": load_mops,
                "throughput_mops": c.mops(),
                "cpu_ns_per_op": c.cpu_ns_per_op(),
                "per_core_mops": c.per_core_mops(),
                "latency_us": {"p50": b.latency_us[0], "p99": b.latency_us[1], "p999": b.latency_us[2]},
                "cpu": c.json(),
                "time": {"load_ns": b.load_ns, "run_ns": c.run_ns},
                "verified": b.verified,
                "mismatches": b.mismatches,
                "first_mismatch": b.first_mismatch,
                "cpu_ratio": cpu_ratio,
                "throughput_ratio": tput_ratio,
            }),
        );
    }
    (lines, Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_ops_split_every_operation_once() {
        // 3 cores x 2 coroutines over 20 operations, round-robin.
        let mut all: Vec<usize> = (0..3)
            .flat_map(|i| core_ops(i * 2, 2, 6, None, 20))
            .collect();
        assert_eq!(core_ops(2, 2, 6, None, 20), vec![2, 3, 8, 9, 14, 15]);
        all.sort();
        assert_eq!(all, (0..20).collect::<Vec<_>>());
        // A listed subset (DEX's per-CS lists), 2 coroutines in one core.
        let l = [4, 7, 9, 11, 12];
        assert_eq!(core_ops(0, 1, 2, Some(&l), 20), vec![4, 9, 12]);
        assert_eq!(core_ops(1, 1, 2, Some(&l), 20), vec![7, 11]);
    }

    fn stream_checks_out<M: Map>() {
        let load: Vec<Vec<u8>> = (0u64..50).map(|i| (i * 2).to_be_bytes().to_vec()).collect();
        let load = crate::ycsb::flat::Keys::from_vecs(8, &load);
        let run = vec![
            Op::Read(4u64.to_be_bytes().to_vec()),
            Op::Insert(5u64.to_be_bytes().to_vec()),
            Op::Update(6u64.to_be_bytes().to_vec()),
            Op::Scan(7u64.to_be_bytes().to_vec(), 3),
            Op::ReadModifyWrite(8u64.to_be_bytes().to_vec()),
        ];
        let (lv, rv) = (crate::ycsb::plan::load_value, crate::ycsb::plan::run_value);
        let written = crate::ycsb::plan::Written::new(&load, &run);
        let writes = crate::ycsb::flat::Writes::new(8, &run);
        let s = Stream {
            load: &load,
            writes: &writes,
            run: &run,
            written: &written,
            load_value: lv,
            run_value: rv,
            load_by_thread: Some(vec![(0..25).collect(), (25..50).collect()]),
            run_by_thread: vec![vec![0, 2, 4], vec![1, 3]],
        };
        let b = run_on::<M>(BaselineMap::Btree, &s);
        assert_eq!(
            (b.mismatches, b.verified),
            (0, 51),
            "{:?}",
            b.first_mismatch
        );
        assert_eq!((b.cost.ops, b.cost.threads), (5, 2));
        // A map missing a loaded key fails the final check.
        let bulk = Stream {
            load_by_thread: None,
            ..s
        };
        let m = M::from_sorted(vec![(0u64.to_be_bytes().to_vec(), lv(0))]);
        let mut c = Check::default();
        assert_eq!(verify(&m, &bulk, &mut c), 1);
        assert!(c.first.unwrap().contains("missing"));
    }

    #[test]
    fn btree_and_skiplist_run_and_verify_a_small_stream() {
        stream_checks_out::<RwLock<BTreeMap<Vec<u8>, u64>>>();
        stream_checks_out::<SkipMap<Vec<u8>, u64>>();
    }
}

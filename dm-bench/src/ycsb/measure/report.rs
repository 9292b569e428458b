//! The run's report ([`report`]): the text (unless `--quiet`) and the JSON
//! (`--json`, and returned to `dm-bench figure`): throughput and latency in
//! virtual time on `sim`, wall time otherwise; verbs and round trips per
//! operation; the cache, locks, memory and index-specific sections; CPU
//! time per operation and the `--baseline` maps on the wall-clock fabrics;
//! and the verification, whose mismatches make the run fail.

use super::cache::CacheReport;
use super::locks::locks;
use super::phase::Out;
use super::{Bench, Ran};
use crate::cpu_time::CpuCost;
use crate::report::{efficiency, per_op, verbs_posted, write_json};
use crate::verbs_bench::FabricArg;
use crate::ycsb::baseline::Baseline;
use crate::ycsb::plan::key_bytes;
use anyhow::{bail, Result};
use dm_tree::Design;
use dm_verbs::VerbStats;
use hdrhistogram::Histogram;
use serde_json::json;

/// Operation kinds in reports.
const KINDS: [&str; 6] = ["get", "insert", "update", "remove", "scan", "rmw"];

/// Heap allocations per operation of each kind that ran, counted while
/// the operation was polled (`phase::counted`; run phase).
fn allocs_by_kind(out: &Out) -> serde_json::Map<String, serde_json::Value> {
    KINDS
        .iter()
        .enumerate()
        .filter(|(i, _)| out.counts[*i] > 0)
        .map(|(i, k)| {
            let v = out.allocs[i] as f64 / out.counts[i] as f64;
            (k.to_string(), json!(v))
        })
        .collect()
}

/// A report section: its name, line and JSON.
type Section = (&'static str, String, serde_json::Value);

/// What the report shows besides the phases' counters.
pub(super) struct Parts {
    pub cache: CacheReport,
    /// Wall seconds of the load, run and verification (and set-up on sim).
    pub wall_s: f64,
    pub baselines: Vec<Baseline>,
    /// The harness pass's cost (wall-clock fabrics): the same stream
    /// against a no-op index (`crate::ycsb::baseline::harness`).
    pub harness: Option<CpuCost>,
}

/// Reports the run; fails if the index or a baseline map failed a check,
/// or a head-node maintenance pass failed.
pub(super) fn report(b: &Bench, ran: Ran, parts: Parts) -> Result<serde_json::Value> {
    let a = &b.a;
    let locks = locks(b);
    // The NAM designs' partitioning and MS cost model (null for the others).
    let nam_json = nam_json(b);
    let sections = sections(b, &ran.run);
    let s = Summary::new(b, ran, &parts.baselines);
    let mut v = s.json(b, &locks, nam_json, &sections, &parts);
    v["warmup_ops"] = json!(b.plan.warm);
    if !a.quiet {
        s.print(b, &v, &locks, &sections, &parts);
    }
    let (mismatches, first) = (s.mismatches, s.first);
    let baselines = parts.baselines;
    write_json(a.json.as_deref(), &v)?;
    if mismatches > 0 {
        bail!(
            "{mismatches} mismatches; first: {}",
            first.unwrap_or_default()
        );
    }
    if let Some(e) = b.plan.heads.as_ref().and_then(|h| h.failed()) {
        bail!("{e}");
    }
    if let Some(b) = baselines.iter().find(|b| b.mismatches > 0) {
        bail!(
            "baseline {}: {} mismatches; first: {}",
            b.map.name(),
            b.mismatches,
            b.first_mismatch.as_deref().unwrap_or_default()
        );
    }
    Ok(v)
}

/// The NAM designs' partitions and MS cost model (`None` for the others).
fn nam_json(b: &Bench) -> Option<serde_json::Value> {
    let (design, tcfg) = (b.c.design, &b.cl.tcfg);
    (design != Design::Fine).then(|| {
        let shares: Vec<f64> = (0..tcfg.nam.parts as usize)
            .map(|p| {
                let lo = if p == 0 { 0 } else { tcfg.nam.splits[p - 1] };
                let hi = if p + 1 == tcfg.nam.parts as usize {
                    u64::MAX
                } else {
                    tcfg.nam.splits[p]
                };
                (hi - lo) as f64 / u64::MAX as f64
            })
            .collect();
        // What the placement gives each partition of the loaded keys.
        let mut keys = vec![0u64; tcfg.nam.parts as usize];
        for k in b.plan.load.iter() {
            keys[tcfg.nam.partition_of(k) as usize] += 1;
        }
        let n = b.plan.load.len().max(1) as f64;
        let key_shares: Vec<f64> = keys.iter().map(|&c| c as f64 / n).collect();
        json!({"design": format!("{design:?}").to_lowercase(), "partitions": tcfg.nam.parts,
            "prefix_shares": shares, "key_shares": key_shares, "ms_node_ns": tcfg.nam.ms_node_ns})
    })
}

/// The index-specific sections: DEX's, the head nodes'.
fn sections(b: &Bench, out: &Out) -> Vec<Section> {
    let (a, plan) = (&b.a, &b.plan);
    let mut sections = Vec::new();
    if let Some(cl) = b.cl.dexcl() {
        let (l, v) = crate::ycsb::dex::report(cl, a.dex.dex_forward, plan.repartition.as_deref());
        sections.push(("dex", l, v));
    }
    if let Some(h) = &plan.heads {
        let (l, v) = h.report(out.head_prefetch);
        sections.push(("head nodes", l, v));
    }
    sections
}

/// The run's counters turned into the report's figures.
struct Summary {
    ran: Ran,
    clock: &'static str,
    ops: u64,
    hist: Histogram<u64>,
    total: VerbStats,
    load_total: VerbStats,
    loaded: u64,
    mops: f64,
    load_mops: f64,
    cost: Option<CpuCost>,
    baseline_lines: Vec<String>,
    baseline_json: Option<serde_json::Value>,
    eff: serde_json::Value,
    eff_line: Option<String>,
    ver: u64,
    carved: u64,
    live: u64,
    mismatches: u64,
    first: Option<String>,
    source: String,
}

impl Summary {
    fn new(b: &Bench, mut ran: Ran, baselines: &[Baseline]) -> Self {
        let (a, plan) = (&b.a, &b.plan);
        let (load, out) = (&ran.load, &mut ran.run);
        let (load_ns, run_ns, run_cpu) = (ran.load_ns, ran.run_ns, ran.run_cpu);
        let clock = if a.fabric == FabricArg::Sim {
            "virtual"
        } else {
            "wall"
        };
        let ops: u64 = out.counts.iter().sum();
        let hist = out.hist.take().unwrap();
        let mut total = VerbStats::default();
        for s in &out.stats {
            total.add(s);
        }
        let mut load_total = VerbStats::default();
        for s in &load.stats {
            load_total.add(s);
        }
        let loaded = load.counts.iter().sum::<u64>();
        let mops = ops as f64 / (run_ns.max(1) as f64 / 1e9) / 1e6;
        let load_mops = loaded as f64 / (load_ns.max(1) as f64 / 1e9) / 1e6;
        // Real fabrics: the core threads' CPU time in the run (crate::cpu_time).
        let cost = run_cpu.map(|(c, allocs)| crate::cpu_time::CpuCost {
            thread_cpu_ns: c,
            threads: a.cs as usize * a.threads as usize,
            ops,
            run_ns,
            allocs,
        });
        let (baseline_lines, baseline_json) = match &cost {
            Some(c) if !baselines.is_empty() => {
                let (l, v) = crate::ycsb::baseline::report(baselines, c);
                (l, Some(v))
            }
            _ => (Vec::new(), None),
        };
        // Run phase only; with --client I/N, this process's share.
        let (eff, eff_line) = efficiency(verbs_posted(&total), run_ns, &a.perftest);
        let (ver, ver_bad, first_bad) = ran.verified.clone();
        // Memory (Dolphin's comparison, issue 8): what this process's chunk
        // carvers handed out (MS-side RPC handlers allocate inside their own
        // chunks, counted in `ms_used` only), against the bytes the verified
        // items themselves take (key and 8-byte value).
        let carved = dm_runtime::alloc::bytes_carved() - plan.carved0;
        let live = ver * (key_bytes(a) as u64 + 8);
        let mismatches = out.mismatches + load.mismatches + ver_bad;
        let first = out.first_mismatch.clone().or(first_bad);
        let source = a
            .trace_dir
            .as_ref()
            .map_or("generator".to_string(), |d| d.display().to_string());
        Summary {
            ran,
            clock,
            ops,
            hist,
            total,
            load_total,
            loaded,
            mops,
            load_mops,
            cost,
            baseline_lines,
            baseline_json,
            eff,
            eff_line,
            ver,
            carved,
            live,
            mismatches,
            first,
            source,
        }
    }

    /// Latency quantile `q` in us.
    fn us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    /// The report's JSON.
    fn json(
        &self,
        b: &Bench,
        locks: &(String, serde_json::Value),
        nam_json: Option<serde_json::Value>,
        sections: &[Section],
        parts: &Parts,
    ) -> serde_json::Value {
        let (a, plan, out) = (&b.a, &b.plan, &self.ran.run);
        let (load_ns, run_ns) = (self.ran.load_ns, self.ran.run_ns);
        let (fabric_detail, ms_used) = (&self.ran.fabric_detail, self.ran.ms_used);
        let (cache, wall_s) = (&parts.cache, parts.wall_s);
        let (clock, ops, mops, load_mops, cost) =
            (self.clock, self.ops, self.mops, self.load_mops, self.cost);
        let (total, load_total, loaded) = (self.total, self.load_total, self.loaded);
        let (eff, baseline_json) = (&self.eff, &self.baseline_json);
        let (ver, carved, live) = (self.ver, self.carved, self.live);
        let (mismatches, first, source) = (self.mismatches, &self.first, &self.source);
        let us = |q: f64| self.us(q);
        let by_kind: serde_json::Map<String, serde_json::Value> = KINDS
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), per_op(&out.stats[i], out.counts[i])))
            .collect();
        let counts: serde_json::Map<String, serde_json::Value> = KINDS
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), json!(out.counts[i])))
            .collect();
        let mut v = json!({
            "index": a.index,
            "workload": a.workload,
            "mix": a.mix,
            "source": source,
            "fabric": format!("{:?}", a.fabric).to_lowercase(),
            "clock": clock,
            "keys": plan.load.len(),
            "key_source": plan.keys_info,
            "load": {"mode": a.load, "fill": (a.load == "bulk").then_some(a.fill), "ns": load_ns, "per_op": per_op(&load_total, loaded)},
            "ops": ops,
            "ops_by_kind": counts,
            "cluster": {"ms": a.ms, "cs": a.cs, "threads": a.threads, "coros": a.coros, "ms_cores": a.ms_cores, "split": a.split},
            "nam": nam_json,
            "dex": sections.iter().find(|s| s.0 == "dex").map(|s| s.2.clone()),
            "head_nodes": sections.iter().find(|s| s.0 == "head nodes").map(|s| s.2.clone()),
            "theta": a.theta,
            "throughput_mops": mops,
            "load_throughput_mops": load_mops,
            "latency_us": {"p50": us(0.5), "p99": us(0.99), "p999": us(0.999)},
            "per_op": per_op(&total, ops),
            "per_op_by_kind": by_kind,
            "cache": cache.json,
            "memory": {"ms_bytes_used": ms_used, "ms_bytes_allocated": carved,
                "ms_bytes_live_items": live, "cs_cache_bytes": cache.bytes,
                "cs_cache_items": cache.json["items"], "cs_cache_hit_ratio": cache.json["hit_ratio"]},
            "verified": ver,
            "mismatches": mismatches,
            "first_mismatch": first,
            "time": {"virtual": a.fabric == FabricArg::Sim, "load_ns": load_ns, "run_ns": run_ns, "seconds": wall_s},
            "fabric_detail": fabric_detail,
            "locks": locks.1,
            "locks_recovered": locks.1["locks_recovered"],
            "recovery_ns": locks.1["recovery_ns"],
            "verbs_per_s": eff["verbs_per_s"],
            "perftest_read_mops": eff["perftest_read_mops"],
            "rdma_efficiency": eff["rdma_efficiency"],
            "cpu_ns_per_op": cost.map(|c| c.cpu_ns_per_op()),
            "harness_ns_per_op": parts.harness.map(|h| h.cpu_ns_per_op()),
            "index_cpu_ns_per_op": cost
                .zip(parts.harness)
                .map(|(c, h)| (c.cpu_ns_per_op() - h.cpu_ns_per_op()).max(0.0)),
            "allocs_per_op": cost.map(|c| c.allocs_per_op()),
            "per_core_mops": cost.map(|c| c.per_core_mops()),
            "cpu": cost.map(|c| c.json()),
            "baseline": baseline_json,
        });
        v["allocs_per_op_by_kind"] = json!(cost.map(|_| allocs_by_kind(out)));
        v
    }

    /// The report's text.
    fn print(
        &self,
        b: &Bench,
        v: &serde_json::Value,
        locks: &(String, serde_json::Value),
        sections: &[Section],
        parts: &Parts,
    ) {
        let (a, plan, out) = (&b.a, &b.plan, &self.ran.run);
        let (load_ns, run_ns, ms_used) = (self.ran.load_ns, self.ran.run_ns, self.ran.ms_used);
        let (cache, wall_s) = (&parts.cache, parts.wall_s);
        let (clock, ops, mops, load_mops, cost) =
            (self.clock, self.ops, self.mops, self.load_mops, self.cost);
        let (total, eff_line) = (self.total, &self.eff_line);
        let (ver, carved, live, mismatches) = (self.ver, self.carved, self.live, self.mismatches);
        let source = &self.source;
        let us = |q: f64| self.us(q);
        println!(
            "dm-bench ycsb: index {}, workload {}{} ({source}), {} fabric ({clock} time)",
            a.index,
            a.workload,
            a.mix
                .as_ref()
                .map_or(String::new(), |m| format!(" with --mix {m}")),
            v["fabric"].as_str().unwrap()
        );
        println!(
            "  cluster      {} MS ({} RPC cores each), {} CS x {} threads x {} coroutines{}",
            a.ms,
            a.ms_cores,
            a.cs,
            a.threads,
            a.coros,
            if a.split == "chunks" {
                ", the stream split in contiguous chunks"
            } else {
                ""
            }
        );
        println!(
            "  keys         {}",
            plan.keys_info["kind"].as_str().unwrap_or_default()
        );
        if plan.warm > 0 {
            println!(
                "  warm-up      {} operations after the load, checked, in no figure below",
                plan.warm
            );
        }
        println!("  locks        {}", locks.0);
        if let Some(f) = plan.keys_info["file"].as_str() {
            println!(
                "               {f}: {} usable of {} lines at {} bytes ({} longer skipped, {} duplicates)",
                plan.keys_info["usable"],
                plan.keys_info["lines"],
                plan.keys_info["key_bytes"],
                plan.keys_info["skipped_too_long"],
                plan.keys_info["duplicates"]
            );
        }
        println!(
            "  load         {} keys by {}, {} Mops",
            plan.load.len(),
            if a.load == "bulk" {
                format!("bulk load at fill {}", a.fill)
            } else {
                "inserts".to_string()
            },
            crate::report::mops(load_mops)
        );
        let kinds: Vec<String> = KINDS
            .iter()
            .enumerate()
            .filter(|(i, _)| out.counts[*i] > 0)
            .map(|(i, k)| format!("{k} {}", out.counts[i]))
            .collect();
        println!(
            "  run          {ops} ops ({}), {} Mops",
            kinds.join(", "),
            crate::report::mops(mops)
        );
        println!(
            "  latency      p50 {:.2} us, p99 {:.2} us, p99.9 {:.2} us",
            us(0.5),
            us(0.99),
            us(0.999)
        );
        if let Some(c) = &cost {
            println!("  cpu          {} (run phase)", c.line());
            let by: Vec<String> = allocs_by_kind(out)
                .iter()
                .map(|(k, v)| format!("{k} {:.3}", v.as_f64().unwrap_or(0.0)))
                .collect();
            println!(
                "  allocs       {} heap allocations per op while the operation is polled",
                by.join(", ")
            );
            if let Some(h) = &parts.harness {
                println!(
                    "  harness      {:.0} ns of thread CPU per op (the same stream against a no-op index, {:.2} allocations per op): the index {:.0} ns per op",
                    h.cpu_ns_per_op(),
                    h.allocs_per_op(),
                    (c.cpu_ns_per_op() - h.cpu_ns_per_op()).max(0.0)
                );
            }
        }
        if let Some(l) = eff_line {
            println!("  efficiency   {l} (run phase)");
        }
        let d = ops.max(1) as f64;
        println!(
            "  per op       read {:.2} write {:.2} cas {:.2} rpc {:.2} | bytes r {:.0} w {:.0} | rtts {:.2}",
            total.read as f64 / d,
            total.write as f64 / d,
            total.cas as f64 / d,
            total.rpc as f64 / d,
            total.bytes_read as f64 / d,
            total.bytes_written as f64 / d,
            total.rtts as f64 / d
        );
        println!("  cache        {}", cache.line);
        for (name, line, _) in sections {
            println!("  {name:<12} {line}");
        }
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "  memory       {:.1} MiB of chunks on the MSs, {:.1} MiB allocated in them ({:.2}x the {:.1} MiB of live items); CS caches {:.1} MiB in {} items",
            mib(ms_used),
            mib(carved),
            carved as f64 / live.max(1) as f64,
            mib(live),
            mib(cache.bytes),
            cache.json["items"]
        );
        println!("  verified     {ver} keys, {mismatches} mismatches");
        for l in &self.baseline_lines {
            let head = if l.starts_with(' ') { "" } else { "baseline" };
            println!("  {head:<12} {}", l.trim_start());
        }
        if a.fabric == FabricArg::Sim {
            println!("  wall time    {wall_s:.2} s");
        } else {
            // Load and run are timed on this clock; the rest is set-up, barriers and verification.
            println!(
                "  wall time    {wall_s:.2} s (load {:.2} s, run {:.2} s)",
                load_ns as f64 / 1e9,
                run_ns as f64 / 1e9
            );
        }
    }
}

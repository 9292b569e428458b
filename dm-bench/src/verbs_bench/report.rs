//! The report of `dm-bench verbs`: the coroutines' results added up
//! ([`Totals`]), the verification's verdict, the printed summary and the
//! `--json` report.

use super::ops::CoroOut;
use super::{Args, FabricArg};
use crate::report::{efficiency, per_op, verbs_posted, write_json};
use anyhow::{bail, Result};
use dm_verbs::VerbStats;
use hdrhistogram::Histogram;
use serde_json::json;

/// The coroutines' results added up.
pub(super) struct Totals {
    hist: Histogram<u64>,
    stats: VerbStats,
    /// Operations by kind: read, write, cas-increment, faa.
    counts: [u64; 4],
    /// Bad data words the coroutines' READs saw.
    bad_reads: u64,
}

impl Totals {
    /// An error if a coroutine stopped on a verb error.
    pub(super) fn of(outs: &[CoroOut]) -> Result<Self> {
        let mut hist = Histogram::<u64>::new(3).unwrap();
        let mut stats = VerbStats::default();
        let mut counts = [0u64; 4];
        let mut bad_reads = 0;
        if let Some(e) = outs.iter().find_map(|o| o.error.as_ref()) {
            let n = outs.iter().filter(|o| o.error.is_some()).count();
            bail!("{n} coroutines stopped on a verb error; first: {e}");
        }
        for o in outs {
            hist.add(&o.hist).unwrap();
            stats.add(&o.stats);
            for (c, x) in counts.iter_mut().zip(o.counts) {
                *c += x;
            }
            bad_reads += o.bad_words;
        }
        Ok(Totals {
            hist,
            stats,
            counts,
            bad_reads,
        })
    }
}

/// Prints the report and writes the JSON (`--json`); an error if the
/// verification found mismatches.
pub(super) fn report(
    a: &Args,
    t: &Totals,
    elapsed_ns: u64,
    extra: serde_json::Value,
    verified: (u64, u64, u64),
    wall_s: f64,
) -> Result<()> {
    let Totals {
        hist,
        stats,
        counts,
        bad_reads,
    } = t;
    let (counts, bad_reads) = (*counts, *bad_reads);
    let ops: u64 = counts.iter().sum();
    let (faa_sum, cas_sum, bad_mem) = verified;
    let mismatches =
        (faa_sum != counts[3]) as u64 + (cas_sum != counts[2]) as u64 + bad_mem + bad_reads;
    let clock = match a.fabric {
        FabricArg::Sim => "virtual",
        FabricArg::Loopback | FabricArg::Rdma => "wall",
    };
    let mops = ops as f64 / (elapsed_ns.max(1) as f64 / 1e9) / 1e6;
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let (eff, eff_line) = efficiency(verbs_posted(stats), elapsed_ns, &a.perftest);
    let report = json!({
        "bench": "verbs",
        "fabric": format!("{:?}", a.fabric).to_lowercase(),
        "clock": clock,
        "ops": ops,
        "ops_by_kind": {"read": counts[0], "write": counts[1], "cas_increment": counts[2], "faa": counts[3]},
        "cluster": {"ms": a.ms, "cs": a.cs, "threads": a.threads, "coros": a.coros},
        "size": a.size,
        "throughput_mops": mops,
        "latency_us": {"p50": us(0.5), "p99": us(0.99), "p999": us(0.999)},
        "per_op": per_op(stats, ops),
        "verified": {"faa_sum": faa_sum, "cas_sum": cas_sum, "bad_words_in_reads": bad_reads, "bad_words_in_memory": bad_mem},
        "mismatches": mismatches,
        "time": {"elapsed_ns": elapsed_ns, "clock": clock, "wall_seconds": wall_s},
        "fabric_detail": extra,
        "verbs_per_s": eff["verbs_per_s"],
        "perftest_read_mops": eff["perftest_read_mops"],
        "rdma_efficiency": eff["rdma_efficiency"],
    });
    println!(
        "dm-bench verbs on {} ({clock} time)",
        report["fabric"].as_str().unwrap()
    );
    println!(
        "  cluster      {} MS, {} CS x {} threads x {} coroutines",
        a.ms, a.cs, a.threads, a.coros
    );
    println!(
        "  ops          {ops} (read {}, write {}, cas-increment {}, faa {})",
        counts[0], counts[1], counts[2], counts[3]
    );
    println!(
        "  throughput   {} Mops ({clock})",
        crate::report::mops(mops)
    );
    if let Some(l) = eff_line {
        println!("  efficiency   {l}");
    }
    println!(
        "  latency      p50 {:.2} us, p99 {:.2} us, p99.9 {:.2} us",
        us(0.5),
        us(0.99),
        us(0.999)
    );
    let d = ops.max(1) as f64;
    println!(
        "  per op       read {:.2} write {:.2} cas {:.2} faa {:.2} | bytes r {:.1} w {:.1} | rtts {:.2} doorbells {:.2}",
        stats.read as f64 / d,
        stats.write as f64 / d,
        stats.cas as f64 / d,
        stats.faa as f64 / d,
        stats.bytes_read as f64 / d,
        stats.bytes_written as f64 / d,
        stats.rtts as f64 / d,
        stats.doorbells as f64 / d
    );
    println!("  verified     faa sum {faa_sum}, cas sum {cas_sum}, bad words {}; mismatches {mismatches}", bad_mem + bad_reads);
    println!("  wall time    {wall_s:.2} s");
    write_json(a.json.as_deref(), &report)?;
    if mismatches > 0 {
        bail!("{mismatches} mismatches in verification");
    }
    Ok(())
}

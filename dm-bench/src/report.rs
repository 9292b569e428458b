//! Shared report pieces: JSON output and verb accounting as JSON.

use dm_verbs::VerbStats;
use serde_json::{json, Value};

/// Per-operation averages of `s` over `ops` operations.
pub fn per_op(s: &VerbStats, ops: u64) -> Value {
    let d = ops.max(1) as f64;
    json!({
        "read": s.read as f64 / d,
        "write": s.write as f64 / d,
        "cas": s.cas as f64 / d,
        "faa": s.faa as f64 / d,
        "rpc": s.rpc as f64 / d,
        "bytes_read": s.bytes_read as f64 / d,
        "bytes_written": s.bytes_written as f64 / d,
        "rtts": s.rtts as f64 / d,
        "doorbells": s.doorbells as f64 / d,
    })
}

/// Verbs posted: READ, WRITE, CAS (masked included), FAA and RPC.
pub fn verbs_posted(s: &VerbStats) -> u64 {
    s.read + s.write + s.cas + s.faa + s.rpc
}

/// `--perftest-read-mops`: perftest's READ message rate on the same device.
#[derive(clap::Args, Clone, Debug)]
pub struct PerftestArgs {
    /// perftest's READ message rate on the same device and machine, M READs/s
    /// (the MsgRate[Mpps] column of `ib_read_bw -s 64`). The report then adds
    /// `rdma_efficiency` = this run's verbs per second / that rate. Wall-clock
    /// fabrics only.
    #[arg(long)]
    pub perftest_read_mops: Option<f64>,
}

impl PerftestArgs {
    /// Errors: a rate that is not positive, or one given for sim (virtual time).
    pub fn check(&self, virtual_time: bool) -> anyhow::Result<()> {
        match self.perftest_read_mops {
            Some(r) if !(r > 0.0 && r.is_finite()) => {
                anyhow::bail!("--perftest-read-mops must be a positive rate, got {r}")
            }
            Some(_) if virtual_time => anyhow::bail!(
                "--perftest-read-mops compares wall-clock rates: use --fabric loopback or rdma"
            ),
            _ => Ok(()),
        }
    }
}

/// Verbs per second of `verbs` posted in `ns` wall ns, and their ratio to
/// perftest's READ rate (`rdma_efficiency`, if the rate was given), as JSON
/// fields and a report line.
pub fn efficiency(verbs: u64, ns: u64, p: &PerftestArgs) -> (Value, Option<String>) {
    let per_s = verbs as f64 / (ns.max(1) as f64 / 1e9);
    let eff = p.perftest_read_mops.map(|r| per_s / (r * 1e6));
    let v = json!({"verbs_per_s": per_s, "perftest_read_mops": p.perftest_read_mops, "rdma_efficiency": eff});
    let line = p.perftest_read_mops.zip(eff).map(|(r, e)| {
        format!(
            "{:.4} M verbs/s = {e:.3} x perftest's READ rate ({r:.4} M READs/s, ib_read_bw)",
            per_s / 1e6
        )
    });
    (v, line)
}

/// A rate in Mops for the report: 3 decimals, or 3 significant digits below
/// 0.1 Mops (soft-RoCE in an emulated guest runs at a few kops).
pub fn mops(x: f64) -> String {
    if x > 0.0 && x < 0.1 {
        let d = (2.0 - x.log10().floor()).clamp(3.0, 9.0) as usize;
        format!("{x:.d$}")
    } else {
        format!("{x:.3}")
    }
}

/// Writes `v` pretty-printed to `path` if given.
pub fn write_json(path: Option<&std::path::Path>, v: &Value) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(v)? + "\n")
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Locks taken over from dead holders and how long each took (ns; virtual
/// on sim), for the `locks_recovered N; recovery_ns p50 X max Y` text and
/// the `locks_recovered` / `recovery_ns` JSON fields (issue 33): the text
/// and `{"p50", "max"}` (null when nothing was recovered).
pub fn recoveries(ns: &[u64]) -> (String, Value, Value) {
    let mut v = ns.to_vec();
    v.sort_unstable();
    let n = v.len();
    let (p50, max) = match n {
        0 => return ("locks_recovered 0".into(), json!(0), Value::Null),
        _ => (v[(n - 1) / 2], v[n - 1]),
    };
    (
        format!("locks_recovered {n}; recovery_ns p50 {p50} max {max}"),
        json!(n),
        json!({"p50": p50, "max": max}),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn mops_keeps_three_significant_digits_below_a_tenth() {
        assert_eq!(super::mops(1.30812), "1.308");
        assert_eq!(super::mops(0.0), "0.000");
        assert_eq!(super::mops(0.000_412_3), "0.000412");
        assert_eq!(super::mops(0.0237), "0.0237");
        assert_eq!(super::mops(0.1234), "0.123");
    }
}

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

/// Writes `v` pretty-printed to `path` if given.
pub fn write_json(path: Option<&std::path::Path>, v: &Value) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(v)? + "\n")
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

//! Sizes checked before anything is allocated (issue 33: no flag value may
//! exhaust memory, wrap an integer or keep a run going for ever; each
//! refusal names the limit and why).
//!
//! Two kinds of limit:
//! - fixed caps ([`MAX_CORES`], [`MAX_TASKS`], ...), far above any shape
//!   the papers or the figures run, that keep products of flags (cores x
//!   coroutines, MSs x region) from overflowing or mapping more address
//!   space than a process has, and work counts from meaning "for ever";
//! - memory: an estimate of what a run allocates (its keys, operations,
//!   coroutines, tables) against this machine's memory, `MemTotal` in
//!   `/proc/meminfo` ([`fits_memory`]). The estimates are generous per
//!   item (measured with `/usr/bin/time -f %M`), so a refusal means the run
//!   could not have fit.

use anyhow::{bail, Result};

/// Memory servers on sim and loopback: each is a region of this process's
/// address space (`dm-bench verbs` has always taken at most 64).
pub const MAX_MS: u64 = 64;
/// Cores (CS threads, simulated or OS) of one run.
pub const MAX_CORES: u64 = 4096;
/// Tasks of one run (coroutines over all cores, `check`'s clients).
pub const MAX_TASKS: u64 = 1 << 20;
/// Work counts (operations, verbs, awaits, seeds): 2^40, days of work at
/// millions a second, so a larger one would never finish.
pub const MAX_COUNT: u64 = 1 << 40;
/// Repetitions of a micro-benchmark (the best one is reported).
pub const MAX_REPS: u64 = 1000;
/// SMART's read-delegation / write-combining table, entries per CS (each a
/// mutex and a waiter list, allocated up front; the paper finds 128 enough).
pub const MAX_RDWC_ENTRIES: u64 = 1 << 24;
/// An index cache per CS, MiB (1 TiB).
pub const MAX_CACHE_MB: u64 = 1 << 20;
/// Tree node sizes, bytes: from a cache line (smaller ones cannot hold a
/// header and 4 entries) to 1 MiB (a chunk, from which nodes are carved,
/// is 1 MiB in `check` and 8 MiB in `ycsb`).
pub const NODE_BYTES: std::ops::RangeInclusive<u64> = 64..=1 << 20;

/// `--node-bytes` within [`NODE_BYTES`], a multiple of 8.
pub fn check_node_bytes(n: u64) -> Result<()> {
    if !NODE_BYTES.contains(&n) {
        bail!(
            "--node-bytes {n}: take {} to {} (a node holds a header and at least 4 entries, \
             and is carved from a chunk)",
            NODE_BYTES.start(),
            NODE_BYTES.end()
        );
    }
    if !n.is_multiple_of(8) {
        bail!(
            "--node-bytes {n}: take a multiple of 8 (a node is READ and written in 8-byte \
             words: {} or {})",
            n / 8 * 8,
            n.div_ceil(8) * 8
        );
    }
    Ok(())
}

/// `flag`'s value `v` is at most `max`; otherwise an error that says why.
pub fn at_most(flag: &str, v: u64, max: u64, why: &str) -> Result<()> {
    if v > max {
        bail!("{flag} {v}: at most {max} ({why})");
    }
    Ok(())
}

/// This machine's memory in bytes: `MemTotal` of `/proc/meminfo`, or
/// `None` where there is none to read.
pub fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Bytes as GiB with one decimal.
fn gib(b: u128) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Refuses a run whose estimated `bytes` exceed this machine's memory;
/// `what` names the allocation ("the load's keys and the run's operations
/// (--keys 4000000000, --ops 10)"), `fix` what to change.
pub fn fits_memory(what: &str, bytes: u128, fix: &str) -> Result<()> {
    let Some(have) = memory_bytes() else {
        return Ok(());
    };
    if bytes > have as u128 {
        bail!(
            "{what} would take about {} of memory, more than this machine's {} \
             (MemTotal in /proc/meminfo); {fix}",
            gib(bytes),
            gib(have as u128)
        );
    }
    Ok(())
}

/// Checks a run's shape: `ms` memory servers (sim, loopback), `cores`
/// cores, `tasks` tasks over them (each estimated at `task_bytes`).
pub fn check_shape(ms: Option<u64>, cores: u128, tasks: u128, task_bytes: u128) -> Result<()> {
    if let Some(ms) = ms {
        at_most(
            "--ms",
            ms,
            MAX_MS,
            "memory servers on sim and loopback, each a region of this process",
        )?;
    }
    if cores > MAX_CORES as u128 {
        bail!("{cores} cores: at most {MAX_CORES} (--cs x --threads, or --cores)");
    }
    if tasks > MAX_TASKS as u128 {
        bail!("{tasks} tasks: at most {MAX_TASKS} (coroutines or clients over all cores)");
    }
    fits_memory(
        &format!("{tasks} tasks"),
        tasks * task_bytes,
        "run fewer coroutines or clients",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_themselves() {
        assert!(at_most("--x", 5, 5, "why").is_ok());
        let e = at_most("--x", 6, 5, "why").unwrap_err().to_string();
        assert_eq!(e, "--x 6: at most 5 (why)");
        if let Some(m) = memory_bytes() {
            assert!(m > 1 << 20);
            assert!(fits_memory("it", m as u128, "less").is_ok());
            let e = fits_memory("it", m as u128 + 1, "less").unwrap_err();
            assert!(e.to_string().contains("more than this machine's"), "{e}");
        }
        assert!(check_shape(Some(65), 1, 1, 1).is_err());
        assert!(check_shape(Some(2), 4097, 1, 1).is_err());
        assert!(check_shape(None, 1, (1 << 20) + 1, 1).is_err());
        assert!(check_shape(None, 1, 8, 1 << 20).is_ok());
    }
}

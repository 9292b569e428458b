//! The verdict of `dm-bench check`: the one-line summary on stdout and the
//! `--json` report, for a checked run or `--histories` ([`report`]) and for
//! one of several `--client I/N` processes, which only records
//! ([`report_process`]).

use super::args::Args;
use super::btree::HEAD_CHANGES;
use super::linearizable::Failure;
use crate::report::write_json;
use anyhow::{bail, Result};
use serde_json::json;

/// Prints the verdict and writes the JSON report (`source`: "sim fabric",
/// "2 histories (16 clients)"); an error if a seed failed.
pub(super) fn report(
    a: &Args,
    source: &str,
    faults: &str,
    seeds: u64,
    ops: u64,
    failed: Option<(u64, Failure)>,
) -> Result<()> {
    // Histories read back carry their own shape (`source` names it).
    let shape = if a.histories.is_empty() {
        format!("{} clients x {} ops, ", a.clients, a.ops)
    } else {
        String::new()
    };
    let heads = HEAD_CHANGES.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "dm-bench check: index {}, {source}, {seeds} seeds, {shape}{} keys, faults {faults}: {ops} operations, {}{}{}",
        a.index,
        a.keys,
        match &failed {
            None => "linearizable",
            Some((_, Failure::Violation(_))) => "NOT linearizable",
            Some((_, Failure::GaveUp(_))) => "NOT PROVEN linearizable (check budget exhausted)",
        },
        if a.histories.is_empty() {
            format!("; {} locks taken over (own-tag ledger)", dm_runtime::lock::lock_takeovers())
        } else {
            String::new()
        },
        if a.head_nodes > 0 {
            format!("; {heads} head nodes installed, refreshed or unlinked")
        } else {
            String::new()
        }
    );
    let (rtext, rn, rns) = crate::report::recoveries(&super::crash::take_recoveries());
    let (crashes, restarts) = super::crash::crashes();
    if a.crash() {
        println!("  crashes {crashes} (CS killed mid-run), restarts {restarts}; {rtext}");
    } else if a.histories.is_empty() {
        println!("  {rtext}");
    }
    // Undecided (the budget ran out): neither true nor false.
    let gave_up = matches!(failed, Some((_, Failure::GaveUp(_))));
    let linearizable = if gave_up {
        None
    } else {
        Some(failed.is_none())
    };
    write_json(
        a.json.as_deref(),
        &json!({"index": a.index, "source": source, "seeds": seeds, "operations": ops, "linearizable": linearizable, "gave_up": gave_up, "failed_seed": failed.as_ref().map(|f| f.0), "reason": failed.as_ref().map(|f| f.1.to_string()), "lock_takeovers": dm_runtime::lock::lock_takeovers(), "head_node_changes": heads, "locks_recovered": rn, "recovery_ns": rns, "crashes": crashes, "restarts": restarts}),
    )?;
    if let Some((seed, why)) = failed {
        bail!("seed {seed}: {why}");
    }
    Ok(())
}

/// The summary of client process `ci` of `cn` (`fabric`: "rdma"), which
/// recorded `ops` operations over `done` seeds for `--histories` to check.
pub(super) fn report_process(
    a: &Args,
    fabric: &str,
    (ci, cn): (usize, usize),
    done: u64,
    ops: u64,
) -> Result<()> {
    println!(
        "dm-bench check: index {}, {fabric} fabric, client {ci}/{cn}: {done} seeds, {} clients x {} ops, {} keys: {ops} operations recorded in {}; check the union with --histories; {} locks taken over (own-tag ledger)",
        a.index,
        a.clients,
        a.ops,
        a.keys,
        a.history_out.as_ref().unwrap().display(),
        dm_runtime::lock::lock_takeovers()
    );
    write_json(
        a.json.as_deref(),
        &json!({"index": a.index, "fabric": fabric, "client": ci, "clients_processes": cn, "seeds": done, "operations": ops, "linearizable": null, "lock_takeovers": dm_runtime::lock::lock_takeovers()}),
    )
}

//! `dm-bench check`: concurrent random operations against an index on `sim`
//! with faults (torn READs, delayed completions, a CS that dies), or on a real fabric
//! (`loopback`, `rdma`), histories checked for linearizability.
//!
//! Each seed builds a fresh cluster of two CSs with small nodes, a tiny
//! index cache per CS (`--cache-nodes`) and a tiny lock table, runs
//! `--clients` clients of random get / insert / update / remove / scan on a
//! small key space, and records every operation with its call and return
//! times. The history is then checked: per key with Wing & Gong's algorithm
//! (Lowe's memoisation) against a register, within `--check-budget` states
//! per key (past it the run stops undecided, an error), and every scan
//! against the writes around it. A failing seed is printed so it can be
//! replayed on sim with `--first-seed S --seeds 1`; `--history-out FILE`
//! writes the last (or the failing) seed's history as JSON lines.
//!
//! With `--client I/N` (rdma), N processes run the same command with
//! distinct I, each writing every seed's history to its `--history-out`;
//! `dm-bench check --histories F0,F1,..` then checks their union per seed.
//! The processes must share a clock (one machine); the memory servers must
//! be fresh (the barrier bytes start at 0, `crate::barrier`). With DEX,
//! process I's clients draw only keys its two CSs own (see [`dex`]).
//!
//! What lives where:
//! - this module: the command ([`run`]): the seed loop and `--histories`;
//! - [`args`]: the flags, their checks, the sim faults;
//! - [`cluster`]: a seed's cluster (sim fabric and cores, the index built
//!   through `dm_index::Instance` with a tiny lock table and per-CS
//!   overrides), each core's `dm_index::Index` handle; the families' parts
//!   of the configuration and their extra tasks: [`btree`] (FG+, Sherman,
//!   NAM; the head-node maintainer), [`smart`] (SMART and the ART ladder:
//!   two CSs that differ), [`dex`] (partitions, the mover), [`dolphin`];
//! - [`client`]: the client workload; [`sim`] and [`real`] run the clients
//!   on sim tasks or on OS threads (with the `--client I/N` barriers);
//! - [`crash`]: `--faults crash`, a CS killed at a random verb boundary and
//!   restarted with a new incarnation (issue 33), its cut-off operations
//!   kept in the history as maybes, a final scan;
//! - [`history`]: events and their JSON lines; [`linearizable`]: the checker,
//!   per key with [`wgl`]'s search and for scans;
//! - [`report`]: the verdict line and the `--json` report.

mod args;
mod btree;
mod client;
mod cluster;
mod crash;
mod dex;
mod dolphin;
mod history;
mod linearizable;
mod real;
mod report;
mod sim;
mod smart;
mod wgl;

pub use args::Args;

use crate::kv::parse_index;
use crate::verbs_bench::FabricArg;
use anyhow::Result;
use dm_runtime::{ExecConfig, Executor};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::{Fabric, MsConfig};
use history::{read_histories, write_history, Event};
use linearizable::{check_history, Failure};
use real::Proc;
use report::{report, report_process};
#[cfg(feature = "rdma")]
use std::cell::RefCell;
use std::rc::Rc;

/// Produces one seed's history (`round` = seeds done before).
type SeedRunner<'a> = Box<dyn FnMut(u64, u64) -> Result<Vec<Event>> + 'a>;

pub fn run(a: Args) -> Result<()> {
    let (t, d, _) = parse_index(&a.index)?;
    let mut a = a;
    a.techniques = t;
    a.design = d;
    if !a.histories.is_empty() {
        return check_files(&a);
    }
    let (ci, cn) = a.validate()?;
    let n_ms = a.ms_spec.count();
    let a = Rc::new(a);
    #[cfg(feature = "rdma")]
    let rdma = match a.fabric {
        FabricArg::Rdma => {
            let f = crate::fabric_arg::connect(&a.ms_spec, &a.rdma)?;
            let q = f.try_open_queues((2 * ci) as u16, 0)?;
            let ex = Executor::new(q, f.num_ms(), ExecConfig::default());
            Some((f, ex))
        }
        _ => None,
    };
    #[cfg(feature = "rdma")]
    let rdma = RefCell::new(rdma);
    let mut produce: SeedRunner = match a.fabric {
        FabricArg::Sim => Box::new(|seed, _| cluster::run_seed(&a, seed)),
        FabricArg::Loopback => Box::new(|seed, round| {
            // A fresh cluster per seed (memory is not reused).
            let chunk = 1 << 20;
            let f = LoopbackFabric::new(LoopbackConfig {
                num_ms: n_ms,
                ms: MsConfig {
                    region_bytes: 4096 + (a.cores as u64 + 4) * chunk,
                    chunk_bytes: chunk,
                    ..Default::default()
                },
                ..Default::default()
            });
            dm_index::register_handlers(&f);
            let mut ex = Executor::new(f.open_queues(0, 0), n_ms, ExecConfig::default());
            cluster::run_seed_real(&f, &mut ex, &a, seed, Proc { ci, cn, round })
        }),
        #[cfg(feature = "rdma")]
        FabricArg::Rdma => Box::new(|seed, round| {
            let mut g = rdma.borrow_mut();
            let (f, ex) = g.as_mut().expect("connected above");
            cluster::run_seed_real(f, ex, &a, seed, Proc { ci, cn, round })
        }),
        #[cfg(not(feature = "rdma"))]
        FabricArg::Rdma => return Err(crate::fabric_arg::no_rdma()),
    };
    let seeds = run_seeds(&a, cn, &mut produce)?;
    drop(produce);
    if let Some(p) = &a.history_out {
        write_history(p, &seeds.kept)?;
    }
    let fabric = format!("{:?}", a.fabric).to_lowercase();
    let faults = match a.fabric {
        FabricArg::Sim => a.faults.clone().unwrap_or_else(|| "torn,delay".into()),
        _ => "none injected".into(),
    };
    if cn > 1 {
        return report_process(&a, &fabric, (ci, cn), seeds.done, seeds.ops);
    }
    report(
        &a,
        &format!("{fabric} fabric"),
        &faults,
        seeds.done,
        seeds.ops,
        seeds.failed,
    )
}

/// What the seed loop did.
struct Seeds {
    /// Seeds run.
    done: u64,
    /// Operations recorded over all of them.
    ops: u64,
    /// The first failing seed and why.
    failed: Option<(u64, Failure)>,
    /// The histories to write (`--history-out`): every seed's with
    /// `--client I/N`, N > 1, else the last (or the failing) seed's.
    kept: Vec<(u64, Vec<Event>)>,
}

/// Runs the seeds `--first-seed..` with `produce`, checking each history
/// (unless `cn` > 1: then the union of the processes' histories is checked
/// later), up to the first failure.
fn run_seeds(a: &Args, cn: usize, produce: &mut SeedRunner) -> Result<Seeds> {
    let mut ops = 0u64;
    let mut failed = None;
    let mut kept: Vec<(u64, Vec<Event>)> = Vec::new();
    let mut done = 0;
    for (round, seed) in a.seed_range()?.enumerate() {
        let h = produce(seed, round as u64)?;
        ops += h.len() as u64;
        done += 1;
        if cn > 1 {
            kept.push((seed, h));
            continue;
        }
        let r = check_history(&h, a.budget());
        kept = vec![(seed, h)];
        if let Err(why) = r {
            tell(seed, &why);
            if matches!(why, Failure::GaveUp(_)) {
                // Nothing to replay: the history is undecided.
            } else if a.fabric == FabricArg::Sim {
                eprintln!("  replay: {}", replay_line(std::env::args().skip(1), seed));
            } else {
                eprintln!("  (a real fabric's interleaving cannot be replayed; --history-out keeps the evidence)");
            }
            failed = Some((seed, why));
            break;
        }
    }
    Ok(Seeds {
        done,
        ops,
        failed,
        kept,
    })
}

/// The command line that replays `seed` alone on sim: this run's arguments
/// (`args`, without the program name) with `--first-seed`, `--seeds` and
/// `--history-out` replaced, so every other flag (`--keys`, `--clients`,
/// `--ops`, faults, techniques) is kept as given.
fn replay_line(args: impl Iterator<Item = String>, seed: u64) -> String {
    const REPLACED: [&str; 3] = ["--first-seed", "--seeds", "--history-out"];
    let mut out = vec!["dm-bench".to_string()];
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let flag = arg.split('=').next().unwrap_or("");
        if REPLACED.contains(&flag) {
            skip_value = !arg.contains('=');
            continue;
        }
        let plain = !arg.is_empty()
            && arg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_=./,:".contains(&b));
        out.push(if plain {
            arg
        } else {
            format!("'{}'", arg.replace('\'', "'\\''"))
        });
    }
    out.push(format!(
        "--first-seed {seed} --seeds 1 --history-out h.jsonl"
    ));
    out.join(" ")
}

/// Prints why `seed` did not pass.
fn tell(seed: u64, why: &Failure) {
    match why {
        Failure::Violation(w) => eprintln!("dm-bench check: seed {seed} FAILED: {w}"),
        Failure::GaveUp(w) => eprintln!("dm-bench check: seed {seed} UNDECIDED: {w}"),
    }
}

/// `--histories`: the union of the files, checked per seed. Scans are
/// bounded by the key range each operation recorded (`hi`), not `--keys`.
fn check_files(a: &Args) -> Result<()> {
    let by_seed = read_histories(&a.histories, a.keys)?;
    let (mut ops, mut failed, mut seeds) = (0u64, None, 0);
    let mut clients = std::collections::HashSet::new();
    for (seed, h) in &by_seed {
        ops += h.len() as u64;
        seeds += 1;
        clients.extend(h.iter().map(|e| e.client));
        if let Err(why) = check_history(h, a.budget()) {
            tell(*seed, &why);
            failed = Some((*seed, why));
            break;
        }
    }
    let what = format!(
        "{} history files ({} clients)",
        a.histories.len(),
        clients.len()
    );
    // The key space the histories recorded (each operation's client range
    // end), which bounds the scans; --keys counts only for lines without it.
    let mut a = a.clone();
    a.keys = by_seed
        .values()
        .flatten()
        .map(|e| e.hi)
        .max()
        .unwrap_or(a.keys);
    report(&a, &what, "as recorded", seeds, ops, failed)
}

#[cfg(test)]
mod tests {
    use super::replay_line;

    #[test]
    fn the_replay_line_keeps_every_flag_but_the_seeds() {
        let args = "check --index dolphin --keys 1 --clients=16 --ops 20 --seeds 100 --first-seed=3 --history-out x y --faults torn";
        let line = replay_line(args.split(' ').map(String::from), 45);
        assert_eq!(
            line,
            "dm-bench check --index dolphin --keys 1 --clients=16 --ops 20 y --faults torn \
             --first-seed 45 --seeds 1 --history-out h.jsonl"
        );
        let odd = replay_line(["check".to_string(), "a b'c".to_string()].into_iter(), 1);
        assert!(odd.contains(r"'a b'\''c'"), "{odd}");
    }
}

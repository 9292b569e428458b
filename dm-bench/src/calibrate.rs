//! `dm-bench calibrate`: the hardware facts the papers state, measured on
//! the `sim` fabric with a NIC preset (`--nic`), next to the papers' numbers.
//!
//! Each fact is a verb-level micro-benchmark (closed loop: every client task
//! posts one verb, waits for its completion, posts the next), in virtual time,
//! without the per-operation CPU charge of `ycsb` (`cpu.op_ns`): these are the
//! perftest-style numbers the papers quote for the NIC itself.
//!
//! | fact | clients | verb | paper |
//! |---|---|---|---|
//! | `rtt` | 1 | 8-byte READ | ~2 µs (Sherman §3.1) |
//! | `read-iops` | 8 CS x 16 x 4 on 1 MS | 64-byte READ (SMART's values) | ~45 Mops (SMART §3.2.2, §5.2) |
//! | `read-bandwidth` | 8 CS x 16 x 4 on 1 MS | 3,171-byte READ (Sherman leaf of 32 96-byte items, SMART §3.2.1) | 4.17 Mops (SMART §3.2.2, Fig. 4c) |
//! | `on-chip-cas` | 8 CS x 16 x 4 on 1 MS | CAS on device memory, random word | ~110 Mops (Sherman §4.3) |
//! | `lock-uniform`, `lock-skewed` | 7 CS x 22 on 1 MS | CAS acquire (spin), FAA release of 10,240 host-memory locks, zipf 0 / 0.99 | Fig. 1 (Sherman §3.2.2), lost as an image: no number |
//!
//! Sherman's Table 1 (FG on 8 MS + 8 CS) is a whole-index fact: it is the
//! figure `dm-bench figure sherman-table1`. `docs/simulator.md` has both
//! tables and the reasoning behind every default.

use crate::fabric_arg::SimNetArgs;
use crate::ycsb::gen::Zipfian;
use anyhow::{bail, Result};
use dm_runtime::SimRuntime;
use dm_verbs::ms::SUPERBLOCK_BYTES;
use dm_verbs::sim::{NetModel, SimConfig, SimFabric};
use dm_verbs::GlobalAddr;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    #[command(flatten)]
    pub net: SimNetArgs,
    /// Verbs (lock benchmarks: acquire-release pairs) per client task, at
    /// least 8 (the read-bandwidth and lock facts run a quarter of them).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(8..))]
    pub ops: u64,
    /// Write the facts as CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Fail unless every fact with a paper number is within this factor of it
    /// (e.g. 1.25: ours / paper in [0.8, 1.25]).
    #[arg(long)]
    pub check: Option<f64>,
}

/// One measured fact (a CSV row).
#[derive(serde::Serialize, Clone, Debug)]
pub struct Fact {
    pub fact: &'static str,
    pub unit: &'static str,
    /// The paper's number, where it states one.
    pub paper: Option<f64>,
    pub ours: f64,
    pub source: &'static str,
}

/// What every client task does in a loop.
#[derive(Clone, Copy)]
enum Pattern {
    /// READ `len` bytes at a random 64-byte-aligned offset of the first 64 MiB.
    Read { len: u32 },
    /// CAS a random word of device memory from its value to value + 1.
    OnChipCas,
    /// Acquire one of `locks` 8-byte host-memory locks (zipf `theta`) by CAS
    /// 0 -> 1, retrying at once on failure; release by FAA -1 (FG's verbs).
    Lock { locks: u64, theta: f64 },
}

/// Runs `cs x threads x coros` clients on `ms` memory servers, each doing
/// `ops` iterations of `p`; returns (iterations per virtual µs = Mops,
/// mean iteration latency in µs).
fn bench(net: NetModel, cs: u16, threads: u16, coros: u32, ops: u64, p: Pattern) -> (f64, f64) {
    let cfg = SimConfig {
        num_ms: 1,
        net,
        seed: 7,
        ..Default::default()
    };
    let fabric = SimFabric::new(cfg);
    let mut rt = SimRuntime::new(fabric.clone());
    let dev_words = cfg.ms.device_bytes / 8;
    let lat_sum = Rc::new(Cell::new(0u64));
    let zipf_n = match p {
        Pattern::Lock { locks, theta } if theta > 0.0 => {
            Some((locks, crate::ycsb::gen::zeta(locks, theta)))
        }
        _ => None,
    };
    let t0 = fabric.now_ns();
    for c in 0..cs {
        for t in 0..threads {
            let core = rt.add_core(c, t);
            for k in 0..coros {
                let lat_sum = lat_sum.clone();
                let seed = ((c as u64) << 40) | ((t as u64) << 20) | k as u64;
                rt.spawn_on(core, async move {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed);
                    let mut zipf = match (p, zipf_n) {
                        (Pattern::Lock { theta, .. }, Some((n, z))) => {
                            Some(Zipfian::new(0, n - 1, theta, Some(z)))
                        }
                        _ => None,
                    };
                    for _ in 0..ops {
                        let s = dm_runtime::now_ns();
                        match p {
                            Pattern::Read { len } => {
                                let off = SUPERBLOCK_BYTES + 64 * rng.gen_range(0..1u64 << 20);
                                dm_runtime::read(GlobalAddr::new(0, off), len)
                                    .await
                                    .expect("calibrate: READ");
                            }
                            Pattern::OnChipCas => {
                                let a = GlobalAddr::device(0, 8 * rng.gen_range(0..dev_words));
                                dm_runtime::cas(a, 0, 0).await.expect("calibrate: CAS");
                            }
                            Pattern::Lock { locks, .. } => {
                                let i = match zipf.as_mut() {
                                    Some(z) => z.next(&mut rng),
                                    None => rng.gen_range(0..locks),
                                };
                                let a = GlobalAddr::new(0, SUPERBLOCK_BYTES + 8 * i);
                                while dm_runtime::cas(a, 0, 1).await.expect("calibrate: CAS") != 0 {
                                }
                                dm_runtime::faa(a, u64::MAX).await.expect("calibrate: FAA");
                            }
                        }
                        lat_sum.set(lat_sum.get() + dm_runtime::now_ns() - s);
                    }
                });
            }
        }
    }
    let t1 = rt.run();
    let n = cs as u64 * threads as u64 * coros as u64 * ops;
    (
        n as f64 * 1e3 / (t1 - t0) as f64,
        lat_sum.get() as f64 / n as f64 / 1e3,
    )
}

/// Measures every fact with `net` (`ops` iterations per client).
pub fn facts(net: NetModel, ops: u64) -> Vec<Fact> {
    let (_, rtt) = bench(net, 1, 1, 1, ops, Pattern::Read { len: 8 });
    let (iops, _) = bench(net, 8, 16, 4, ops, Pattern::Read { len: 64 });
    let (bw, _) = bench(net, 8, 16, 4, ops / 4, Pattern::Read { len: 3171 });
    let (cas, _) = bench(net, 8, 16, 4, ops, Pattern::OnChipCas);
    let lock = |theta| {
        bench(
            net,
            7,
            22,
            1,
            ops / 4,
            Pattern::Lock {
                locks: 10_240,
                theta,
            },
        )
    };
    let (lu, _) = lock(0.0);
    let (ls, _) = lock(0.99);
    vec![
        Fact {
            fact: "rtt",
            unit: "us",
            paper: Some(2.0),
            ours: rtt,
            source: "Sherman §3.1: ~2 us round trip of commodity RNICs",
        },
        Fact {
            fact: "read-iops",
            unit: "Mops",
            paper: Some(45.0),
            ours: iops,
            source: "SMART §3.2.2, §5.2: one RNIC's ~45 Mops of small READs",
        },
        Fact {
            fact: "read-bandwidth",
            unit: "Mops",
            paper: Some(4.17),
            ours: bw,
            source: "SMART §3.2.2 (Fig. 4c): Sherman's 3 KB leaves saturate 100 Gbps at 4.17 Mops",
        },
        Fact {
            fact: "on-chip-cas",
            unit: "Mops",
            paper: Some(110.0),
            ours: cas,
            source: "Sherman §4.3: ~110 Mops of CAS on the NIC's on-chip memory",
        },
        Fact {
            fact: "lock-uniform",
            unit: "Mops",
            paper: None,
            ours: lu,
            source: "Sherman §3.2.2 (Fig. 1): 154 threads, 10,240 host-memory locks, uniform",
        },
        Fact {
            fact: "lock-skewed",
            unit: "Mops",
            paper: None,
            ours: ls,
            source: "Sherman §3.2.2 (Fig. 1): the same, zipf 0.99: the collapse",
        },
    ]
}

pub fn run(a: Args) -> Result<()> {
    crate::limits::at_most(
        "--ops",
        a.ops,
        crate::limits::MAX_COUNT,
        "iterations per client task",
    )?;
    if let Some(t) = a.check.filter(|t| !(t.is_finite() && *t >= 1.0)) {
        anyhow::bail!(
            "--check {t}: a factor, finite and at least 1 (1.25: ours / paper in [0.8, 1.25])"
        );
    }
    let net = a.net.net();
    let facts = facts(net, a.ops);
    println!("dm-bench calibrate: sim, --nic {:?}, {net:?}", a.net.nic);
    println!("| fact | unit | paper | ours | ours / paper | source |");
    println!("|---|---|---|---|---|---|");
    for f in &facts {
        let (p, r) = match f.paper {
            Some(p) => (format!("{p}"), format!("{:.2}", f.ours / p)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "| {} | {} | {p} | {:.3} | {r} | {} |",
            f.fact, f.unit, f.ours, f.source
        );
    }
    if let Some(path) = &a.csv {
        crate::figure::write_csv(path, &facts)?;
    }
    if let Some(tol) = a.check {
        let off: Vec<_> = facts
            .iter()
            .filter(|f| {
                f.paper
                    .is_some_and(|p| f.ours / p > tol || p / f.ours > tol)
            })
            .map(|f| f.fact)
            .collect();
        if !off.is_empty() {
            bail!("calibrate: outside x{tol} of the paper: {}", off.join(", "));
        }
    }
    Ok(())
}

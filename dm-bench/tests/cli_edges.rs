//! Every subcommand's numeric flags at their edges (issue 33): 0, 1, 2, the
//! type's maximum, a huge value (10^13, past every size cap), a negative
//! one, and NaN, infinities and 1e308 for floats, one or two at a time on top
//! of a small configuration whose valid runs take milliseconds. Each run
//! must end within [`SECS`] (the hang guard, [`common::run_within`]),
//! never panic, and either succeed or say why on an `error:` line.
//!
//! Deterministic: a fixed proptest seed per subcommand, [`CASES`] cases
//! each, no failure files.

mod common;

use common::run_within;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

/// Seconds a run may take (valid ones take well under one in release).
const SECS: u64 = 30;
/// Cases per subcommand.
const CASES: u32 = 150;

/// The type of a numeric flag, which picks its edge values.
#[derive(Clone, Copy, Debug)]
enum Ty {
    U8,
    U16,
    U32,
    U64,
    F64,
}

fn edges(t: Ty) -> Vec<String> {
    let max = match t {
        Ty::U8 => u8::MAX.to_string(),
        Ty::U16 => u16::MAX.to_string(),
        Ty::U32 => u32::MAX.to_string(),
        Ty::U64 => u64::MAX.to_string(),
        Ty::F64 => {
            return ["0", "1", "0.5", "-1", "NaN", "inf", "-inf", "1e308"]
                .map(String::from)
                .to_vec()
        }
    };
    let mut v: Vec<String> = ["0", "1", "2", "10000000000000", "-1"]
        .map(String::from)
        .to_vec();
    v.push(max);
    v
}

/// A subcommand: its small base configuration (the subcommand and
/// switches, then numeric flags with their values, which a drawn value of
/// the same flag replaces) and its numeric flags.
struct Cmd {
    base: &'static [&'static str],
    sizes: &'static [(&'static str, &'static str)],
    flags: &'static [(&'static str, Ty)],
}

/// The simulated network's timing flags (`ycsb`, `calibrate`).
const NET: [(&str, Ty); 5] = [
    ("--rtt-ns", Ty::U64),
    ("--host-atomic-ns", Ty::U64),
    ("--host-cas-fail-ns", Ty::U64),
    ("--atomic-bucket-shift", Ty::U32),
    ("--op-cpu-ns", Ty::U64),
];

const YCSB_FLAGS: &[(&str, Ty)] = &[
    ("--keys", Ty::U64),
    ("--ops", Ty::U64),
    ("--warmup", Ty::U64),
    ("--ms", Ty::U16),
    ("--cs", Ty::U16),
    ("--threads", Ty::U16),
    ("--coros", Ty::U32),
    ("--theta", Ty::F64),
    ("--scan-len", Ty::U32),
    ("--seed", Ty::U64),
    ("--key-bytes", Ty::U64),
    ("--fill", Ty::F64),
    ("--cache-mb", Ty::U64),
    ("--node-bytes", Ty::U64),
    ("--lock-backoff", Ty::U32),
    ("--rdwc-entries", Ty::U64),
    ("--ms-cores", Ty::U16),
    ("--nam-node-ns", Ty::U32),
    ("--dex-offload-level", Ty::U8),
    ("--dex-leaf-admission", Ty::F64),
    ("--dex-node-ns", Ty::U32),
    ("--dex-repartition-at", Ty::F64),
    ("--head-nodes", Ty::U64),
    ("--head-every", Ty::U64),
    ("--perftest-read-mops", Ty::F64),
    ("--rdma-gid-index", Ty::U8),
    ("--rdma-timeout", Ty::U8),
    ("--rdma-staging-kib", Ty::U64),
    NET[0],
    NET[1],
    NET[2],
    NET[3],
    NET[4],
];

/// Every subcommand but `trace` and `figure`, which write files (their
/// base configurations are built in [`with_files`]).
fn commands() -> Vec<(&'static str, Cmd)> {
    vec![
        (
            "ycsb",
            Cmd {
                base: &["ycsb"],
                sizes: &[
                    ("--keys", "200"),
                    ("--ops", "200"),
                    ("--cs", "1"),
                    ("--threads", "1"),
                    ("--coros", "2"),
                ],
                flags: YCSB_FLAGS,
            },
        ),
        (
            "ycsb-scan",
            Cmd {
                base: &["ycsb", "--workload", "e", "--index", "smart"],
                sizes: &[
                    ("--keys", "200"),
                    ("--ops", "100"),
                    ("--cs", "1"),
                    ("--threads", "1"),
                    ("--coros", "2"),
                ],
                flags: YCSB_FLAGS,
            },
        ),
        (
            "check",
            Cmd {
                base: &["check"],
                sizes: &[("--seeds", "1"), ("--clients", "3"), ("--ops", "10")],
                flags: &[
                    ("--seeds", Ty::U64),
                    ("--first-seed", Ty::U64),
                    ("--clients", Ty::U32),
                    ("--cores", Ty::U16),
                    ("--ops", Ty::U32),
                    ("--keys", Ty::U64),
                    ("--node-bytes", Ty::U64),
                    ("--cache-nodes", Ty::U64),
                    ("--head-nodes", Ty::U64),
                    ("--check-budget", Ty::U64),
                    ("--ms", Ty::U16),
                ],
            },
        ),
        (
            "workload",
            Cmd {
                base: &["workload"],
                sizes: &[("--keys", "200"), ("--ops", "200")],
                flags: &[
                    ("--keys", Ty::U64),
                    ("--ops", Ty::U64),
                    ("--theta", Ty::F64),
                    ("--scan-len", Ty::U32),
                    ("--seed", Ty::U64),
                ],
            },
        ),
        (
            "verbs",
            Cmd {
                base: &["verbs"],
                sizes: &[
                    ("--ops", "200"),
                    ("--cs", "1"),
                    ("--threads", "1"),
                    ("--coros", "2"),
                ],
                flags: &[
                    ("--ms", Ty::U16),
                    ("--cs", Ty::U16),
                    ("--threads", Ty::U16),
                    ("--coros", Ty::U32),
                    ("--ops", Ty::U64),
                    ("--size", Ty::U32),
                    ("--chunk-kib", Ty::U64),
                    ("--seed", Ty::U64),
                    ("--perftest-read-mops", Ty::F64),
                ],
            },
        ),
        (
            "runtime",
            Cmd {
                base: &["runtime"],
                sizes: &[("--tasks", "10"), ("--iters", "10"), ("--reps", "1")],
                flags: &[
                    ("--tasks", Ty::U64),
                    ("--iters", Ty::U64),
                    ("--reps", Ty::U32),
                ],
            },
        ),
        (
            "calibrate",
            Cmd {
                base: &["calibrate"],
                sizes: &[("--ops", "8")],
                flags: &[
                    ("--ops", Ty::U64),
                    ("--check", Ty::F64),
                    NET[0],
                    NET[1],
                    NET[2],
                    NET[3],
                    NET[4],
                ],
            },
        ),
        (
            "sim-speed",
            Cmd {
                base: &["sim-speed"],
                sizes: &[("--cores", "1"), ("--coros", "2"), ("--verbs", "10")],
                flags: &[
                    ("--cores", Ty::U16),
                    ("--coros", Ty::U32),
                    ("--verbs", Ty::U64),
                    ("--reps", Ty::U32),
                ],
            },
        ),
    ]
}

/// Runs `args` and checks the outcome (see the module docs).
fn one_run(args: &[String]) -> Result<(), TestCaseError> {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, text) = run_within(SECS, &argv);
    prop_assert!(
        !text.contains("panicked") && !text.contains("a core thread failed"),
        "{argv:?} panicked:\n{text}"
    );
    prop_assert!(
        code.is_some() && code != Some(101),
        "{argv:?}: exit {code:?}\n{text}"
    );
    if code != Some(0) {
        prop_assert!(
            text.lines()
                .any(|l| l.starts_with("error:") || l.starts_with("dm-bench: error:")),
            "{argv:?}: exit {code:?} without an error line:\n{text}"
        );
    }
    Ok(())
}

/// Draws 1 to 3 of `cmd`'s flags at edge values, `CASES` times, with a
/// fixed seed; `extra` is appended to every run (output files).
fn edges_of(name: &str, seed: u64, cmd: &Cmd, extra: &[String]) {
    let config = Config {
        cases: CASES,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 32,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let n = cmd.flags.len();
    let strategy = prop::collection::vec((0..n, 0..8usize), 1..=2);
    let result = runner.run(&strategy, |picks| {
        let mut sizes: Vec<(String, String)> = cmd
            .sizes
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect();
        for (f, e) in picks {
            let (flag, ty) = cmd.flags[f];
            let vs = edges(ty);
            let v = vs[e % vs.len()].clone();
            match sizes.iter_mut().find(|(g, _)| g == flag) {
                Some(s) => s.1 = v,
                None => sizes.push((flag.to_string(), v)),
            }
        }
        // `--flag=value`: a negative value is a value, not a flag.
        let args: Vec<String> = cmd
            .base
            .iter()
            .map(|s| s.to_string())
            .chain(sizes.iter().map(|(f, v)| format!("{f}={v}")))
            .chain(extra.iter().cloned())
            .collect();
        one_run(&args)
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

#[test]
fn numeric_flags_at_their_edges_end_cleanly() {
    let t = std::time::Instant::now();
    for (i, (name, cmd)) in commands().iter().enumerate() {
        edges_of(name, 33 + i as u64, cmd, &[]);
    }
    eprintln!("edges: {:.1} s", t.elapsed().as_secs_f64());
}

/// `trace` and `figure`, their files in a temporary directory.
#[test]
fn trace_and_figure_flags_at_their_edges_end_cleanly() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let svg = tmp.path().join("t.svg").display().to_string();
    let out = tmp.path().display().to_string();
    let trace = Cmd {
        base: &["trace", "--op", "get"],
        sizes: &[("--keys", "100"), ("--warmup", "50")],
        flags: &[
            ("--key", Ty::U64),
            ("--keys", Ty::U64),
            ("--warmup", Ty::U64),
            ("--scan-len", Ty::U32),
            ("--ms", Ty::U16),
            ("--cs", Ty::U16),
            ("--threads", Ty::U16),
            ("--coros", Ty::U32),
            ("--seed", Ty::U64),
        ],
    };
    edges_of("trace", 133, &trace, &["--svg".into(), svg]);
    let figure = Cmd {
        base: &["figure", "sherman-table1", "--quick"],
        sizes: &[("--keys", "50"), ("--ops", "50")],
        flags: &[("--keys", Ty::U64), ("--ops", Ty::U64)],
    };
    edges_of("figure", 134, &figure, &["--out".into(), out]);
}

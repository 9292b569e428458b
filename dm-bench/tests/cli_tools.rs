//! The small commands end to end: `runtime`, `sim-speed` and `workload`.

mod common;

use common::{bench, refuses_within, rejects};

#[test]
fn runtime_and_sim_speed_write_their_keys() {
    let (ok, text, v) = bench(&["runtime", "--tasks", "50", "--iters", "50", "--reps", "1"]);
    assert!(ok, "{text}");
    for k in [
        "dm_runtime_ns_per_switch",
        "tokio_localset_ns_per_switch",
        "dm_runtime_ns_per_yield",
        "tokio_localset_ns_per_yield",
    ] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}");
    }
    let (ok, text, v) = bench(&[
        "sim-speed",
        "--cores",
        "2",
        "--coros",
        "2",
        "--verbs",
        "100",
    ]);
    assert!(ok, "{text}");
    assert!(v["sim_verbs_per_sec"].as_f64().unwrap() > 0.0);
}

/// A zero count is refused, never run as a vacuous or altered figure:
/// sim-speed's cores, coroutines, verbs and repetitions, runtime's
/// repetitions, and calibrate's verbs per task below 8 (its bandwidth and
/// lock facts run a quarter of them). runtime's `--dm-only` is `--only
/// dm-verb`, so it does not go with another `--only`.
#[test]
fn zero_counts_and_a_second_variant_are_refused() {
    for flag in ["--cores", "--coros", "--verbs", "--reps"] {
        rejects(
            &["sim-speed", flag, "0"],
            &format!("invalid value '0' for '{flag}"),
        );
    }
    rejects(&["runtime", "--reps", "0"], "invalid value '0' for '--reps");
    rejects(
        &["runtime", "--dm-only", "--only", "tokio-yield"],
        "'--dm-only' cannot be used with '--only",
    );
    for ops in ["0", "7"] {
        refuses_within(
            30,
            &["calibrate", "--ops", ops],
            &format!("invalid value '{ops}' for '--ops"),
        );
    }
    let args = ["runtime", "--tasks", "10", "--iters", "10", "--reps", "1"];
    let (ok, text, _) = bench(&[&args[..], &["--dm-only"]].concat());
    assert!(ok && text.contains("DmVerb: "), "{text}");
}

#[test]
fn workload_stats_from_generator_and_trace_sample() {
    let (ok, text, v) = bench(&[
        "workload",
        "--workload",
        "e",
        "--keys",
        "20000",
        "--ops",
        "20000",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["ops"], 20000);
    let scans = v["by_kind"]["scan"].as_u64().unwrap();
    assert!((18_600..19_400).contains(&scans), "{scans}");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/data");
    let (ok, text, v) = bench(&["workload", "--workload", "e", "--trace-dir", dir]);
    assert!(ok, "{text}");
    assert_eq!(v["ops"], 2000);
    rejects(&["workload", "--workload", "nope"], "unknown workload");
}

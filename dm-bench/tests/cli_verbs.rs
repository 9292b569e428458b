//! `dm-bench verbs` end to end, small sizes: verification on sim (deterministic)
//! and loopback, bad flags, and the RDMA efficiency against perftest's rate.

mod common;

use common::{bench, rejects};

#[test]
fn verbs_on_sim_verifies_and_is_deterministic() {
    let args = [
        "verbs",
        "--fabric",
        "sim",
        "--ms",
        "2",
        "--cs",
        "2",
        "--threads",
        "2",
        "--coros",
        "4",
        "--ops",
        "4000",
    ];
    let (ok, text, v) = bench(&args);
    assert!(ok, "{text}");
    assert_eq!(v["mismatches"], 0);
    assert_eq!(v["ops"], 4000);
    assert_eq!(v["clock"], "virtual");
    assert!(v["throughput_mops"].as_f64().unwrap() > 0.0);
    assert!(v["per_op"]["rtts"].as_f64().unwrap() >= 1.0);
    // A second run into its own report file (bench's fresh directory).
    let (ok2, text2, v2) = bench(&args);
    assert!(ok2, "{text2}");
    assert_eq!(v2["mismatches"], 0);
    assert!(v["fabric_detail"]["trace_hash"].is_string(), "{text}");
    assert_eq!(
        v["fabric_detail"]["trace_hash"],
        v2["fabric_detail"]["trace_hash"]
    );
}

#[test]
fn verbs_on_loopback_verifies() {
    let (ok, text, v) = bench(&[
        "verbs",
        "--fabric",
        "loopback",
        "--cs",
        "1",
        "--threads",
        "2",
        "--coros",
        "4",
        "--ops",
        "4000",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["mismatches"], 0);
    assert_eq!(v["clock"], "wall");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let (ok, text, _) = bench(&["verbs", "--mix", "50,50"]);
    assert!(!ok);
    assert!(text.contains("--mix"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

/// `--ops N` runs exactly N operations, not N rounded up to a multiple of
/// the coroutines (8 here), and the report counts the ones run; `--ops 0`,
/// and `--tear` on a fabric whose READs tear as the hardware tears them,
/// are refused.
#[test]
fn verbs_runs_exactly_the_ops_asked_for() {
    for n in [1u64, 2001] {
        let ops = n.to_string();
        let shape = ["--cs", "1", "--threads", "2", "--coros", "4"];
        let (ok, text, v) = bench(&[&["verbs", "--ops", &ops][..], &shape].concat());
        assert!(ok, "{text}");
        assert_eq!(v["ops"], n, "{text}");
        let kinds = ["read", "write", "cas_increment", "faa"];
        let sum: u64 = kinds
            .iter()
            .map(|k| v["ops_by_kind"][k].as_u64().unwrap())
            .sum();
        assert_eq!(sum, n, "{v}");
        assert_eq!(v["mismatches"], 0);
        assert!(text.contains(&format!("ops          {n} (")), "{text}");
    }
    rejects(&["verbs", "--ops", "0"], "invalid value '0' for '--ops");
    rejects(
        &[
            "verbs", "--fabric", "loopback", "--tear", "line", "--ops", "100",
        ],
        "--tear sets the sim fabric's torn READs",
    );
}

/// `--perftest-read-mops R` adds rdma_efficiency = verbs per second / (R M/s)
/// on wall-clock fabrics; sim (virtual time) refuses it.
#[test]
fn rdma_efficiency_is_verbs_per_second_over_perftest_read_rate() {
    let (ok, text, v) = bench(&[
        "verbs",
        "--fabric",
        "loopback",
        "--cs",
        "1",
        "--threads",
        "1",
        "--ops",
        "2000",
        "--perftest-read-mops",
        "2.5",
    ]);
    assert!(ok, "{text}");
    let per_s = v["verbs_per_s"].as_f64().unwrap();
    let verbs: f64 = ["read", "write", "cas", "faa", "rpc"]
        .iter()
        .map(|k| v["per_op"][k].as_f64().unwrap() * v["ops"].as_f64().unwrap())
        .sum();
    let secs = v["time"]["elapsed_ns"].as_f64().unwrap() / 1e9;
    assert!((per_s - verbs / secs).abs() <= 1e-6 * per_s, "{v}");
    let eff = v["rdma_efficiency"].as_f64().unwrap();
    assert!((eff - per_s / 2.5e6).abs() <= 1e-9 * eff.max(1.0), "{v}");
    assert!(text.contains("efficiency"), "{text}");
    let (ok, text, v) = bench(&["verbs", "--fabric", "loopback", "--ops", "100"]);
    assert!(ok, "{text}");
    assert!(v["rdma_efficiency"].is_null());
    rejects(&["verbs", "--perftest-read-mops", "2"], "wall-clock");
    rejects(
        &["ycsb", "--fabric", "loopback", "--perftest-read-mops", "0"],
        "positive",
    );
}

//! `dm-bench calibrate` and the FG switches that Sherman's Table 1 needs.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dm-bench"))
        .args(args)
        .output()
        .expect("run dm-bench");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Every NIC fact of both presets is within 1.25x of its paper's number,
/// and the skewed lock benchmark collapses against the uniform one.
#[test]
fn presets_reproduce_the_papers_nic_facts() {
    let dir = tempfile::Builder::new()
        .prefix("dm-bench-calibrate-")
        .tempdir()
        .expect("a temporary directory");
    for nic in ["cx5", "cx6"] {
        let csv = dir.path().join(format!("{nic}.csv"));
        let (ok, text) = run(&[
            "calibrate",
            "--nic",
            nic,
            "--ops",
            "400",
            "--check",
            "1.25",
            "--csv",
            csv.to_str().unwrap(),
        ]);
        assert!(ok, "{text}");
        let mut r = csv::Reader::from_path(&csv).unwrap();
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        let ours = |fact: &str| -> f64 {
            rows.iter().find(|x| &x[0] == fact).unwrap()[3]
                .parse()
                .unwrap()
        };
        assert_eq!(rows.len(), 6, "{text}");
        assert!(
            ours("lock-skewed") * 10.0 < ours("lock-uniform"),
            "no collapse: {text}"
        );
    }
}

/// FG's lock (no back-off, FAA release) keeps the tree correct.
#[test]
fn fg_with_faa_unlock_and_no_backoff_verifies() {
    let (ok, text) = run(&[
        "ycsb",
        "--index",
        "fg",
        "--workload",
        "write-intensive",
        "--keys",
        "3000",
        "--ops",
        "3000",
        "--lock-backoff",
        "0",
        "--unlock-faa",
        "--quiet",
    ]);
    assert!(ok, "{text}");
}

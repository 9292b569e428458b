//! `dm-bench ycsb` end to end on the radix trees: SMART on sim and loopback, and
//! the ART ladder below it (`--index art` and the ladder flags).

mod common;

use common::bench;
use serde_json::json;

/// `--index art` and the ladder flags on YCSB A: every key verified; RCU
/// leaves leave cached leaf addresses stale (Fig. 5b), in-place leaves do
/// not; the report names the techniques.
#[test]
fn ycsb_art_and_the_smart_ladder() {
    let base = [
        "ycsb",
        "--workload",
        "a",
        "--keys",
        "3000",
        "--ops",
        "6000",
        "--threads",
        "2",
    ];
    let (ok, text, v) = bench(&[&base[..], &["--index", "art"]].concat());
    assert!(ok && v["mismatches"] == 0, "{text}");
    let t = &v["locks"]["techniques"];
    assert_eq!(
        (
            &t["lock_free_internal"],
            &t["in_place_leaf"],
            &t["rear_lock"]
        ),
        (&json!(false), &json!(false), &json!(false)),
        "{text}"
    );
    assert_eq!(v["locks"]["global_lock_table"], true, "{text}");
    assert_eq!(v["locks"]["rdwc"]["read_delegation"], false, "{text}");
    // HOCL's local lock in front of the RCU writes (SMART §5.1.3).
    assert_eq!(v["locks"]["rdwc"]["write_queue"], true, "{text}");
    assert!(
        v["locks"]["rdwc"]["queued_writes"].as_u64().unwrap() > 0,
        "{text}"
    );
    assert!(v["cache"]["stale_leaves"].as_u64().unwrap() > 0, "{text}");
    let off = ["--index", "smart", "--smart-off", "rear,rd,wc"];
    let (ok, text, v) = bench(&[&base[..], &off].concat());
    assert!(ok && v["mismatches"] == 0, "{text}");
    let t = &v["locks"]["techniques"];
    assert_eq!(
        (&t["in_place_leaf"], &t["rear_lock"]),
        (&json!(true), &json!(false)),
        "{text}"
    );
    assert_eq!(v["cache"]["stale_leaves"], 0, "{text}");
    assert_eq!(
        v["locks"]["rdwc"]["write_queue"], false,
        "HOCL's own table: {text}"
    );
    // In-place update under a lock-table lock: READ, lock CAS + READ, WRITE,
    // unlock (a masked CAS in device memory); more CASes and round trips
    // than SMART's READ + CAS + WRITE with the lock released by the WRITE.
    let (ok, text, w) = bench(&[&base[..], &["--index", "smart", "--smart-off", "rd,wc"]].concat());
    assert!(ok, "{text}");
    assert_eq!(w["locks"]["rdwc"]["write_queue"], true, "E-HOCL: {text}");
    for verb in ["cas", "rtts"] {
        let (lt, rear) = (&v["per_op"][verb], &w["per_op"][verb]);
        assert!(
            lt.as_f64().unwrap() > rear.as_f64().unwrap(),
            "{verb}: {lt} vs {rear}\n{text}"
        );
    }
}

#[test]
fn ycsb_smart_on_sim_and_loopback_verifies_every_key() {
    for (fabric, workload) in [("sim", "a"), ("loopback", "e")] {
        let (ok, text, v) = bench(&[
            "ycsb",
            "--index",
            "smart",
            "--fabric",
            fabric,
            "--workload",
            workload,
            "--keys",
            "3000",
            "--ops",
            "3000",
            "--threads",
            "2",
            "--coros",
            "4",
        ]);
        assert!(ok, "{text}");
        assert_eq!(v["mismatches"], 0, "{text}");
        assert!(v["verified"].as_u64().unwrap() >= 3000, "{text}");
        assert_eq!(v["locks"]["index"], "smart", "{text}");
        // The ART cache starts most walks below the root: on YCSB A well
        // under the uncached root slot + node + leaf READs per op (scans of
        // E READ the leaves they return).
        assert!(v["cache"]["hit_ratio"].as_f64().unwrap() > 0.9, "{text}");
        if workload == "a" {
            assert!(v["per_op"]["read"].as_f64().unwrap() < 2.0, "{text}");
        }
    }
    let args = [
        "ycsb",
        "--index",
        "smart",
        "--workload",
        "c",
        "--keys",
        "3000",
    ];
    let (ok, text, v) = bench(&[&args[..], &["--ops", "3000", "--cache-mb", "0"]].concat());
    assert!(ok, "{text}");
    assert_eq!(v["cache"]["hits"], 0, "{text}");
    assert!(v["per_op"]["read"].as_f64().unwrap() >= 3.0, "{text}");
    // SMART §4.2 on a skewed YCSB A: same-key writes on a CS are combined;
    // switched off, nothing is.
    let args = [
        "ycsb",
        "--index",
        "smart",
        "--workload",
        "a",
        "--keys",
        "3000",
    ];
    let (ok, text, v) = bench(&[&args[..], &["--ops", "6000"]].concat());
    assert!(ok, "{text}");
    let r = &v["locks"]["rdwc"];
    assert!(r["combined_writes"].as_u64().unwrap() > 0, "{text}");
    assert_eq!(r["read_delegation"], true, "{text}");
    let off = ["--ops", "6000", "--smart-off", "rd,wc,cache"];
    let (ok, text, v) = bench(&[&args[..], &off].concat());
    assert!(ok, "{text}");
    let r = &v["locks"]["rdwc"];
    let counts = (r["combined_writes"].as_u64(), r["delegated_reads"].as_u64());
    assert_eq!(counts, (Some(0), Some(0)), "{text}");
    assert_eq!(v["cache"]["hits"], 0, "{text}");
    let (ok, text, _) = bench(&[&args[..], &["--smart-off", "lock-free"]].concat());
    assert!(
        !ok && text.contains("--smart-off takes lfi, ipl, rear, rd, wc and cache"),
        "{text}"
    );
    let (ok, text, _) = bench(&["ycsb", "--index", "smart", "--load", "bulk"]);
    assert!(
        !ok && text.contains("--load bulk is for the B+tree family"),
        "{text}"
    );
}

//! The other designs end to end, `check` and `ycsb` each: Ziegler et al.'s NAM
//! coarse-grained and hybrid designs, DEX, head nodes, Dolphin.

mod common;

use common::{bench, rejects};

/// Ziegler et al.'s coarse-grained and hybrid designs: `check` is
/// linearizable with torn READs (more partitions than MSs, splits in the MS
/// trees and of one-sided leaves racing separator RPCs), also on loopback;
/// YCSB E (scans across partitions, inserts) verifies every key on sim and
/// loopback; a coarse-grained get is one RPC, a hybrid get one RPC and one
/// READ; the skewed placement is reported; bad flags are errors.
#[test]
fn nam_designs_check_and_ycsb() {
    for index in ["nam-coarse", "nam-hybrid"] {
        let (ok, text, v) = bench(&["check", "--index", index, "--seeds", "150"]);
        assert!(ok, "{index}: a failing seed is printed for replay:\n{text}");
        assert_eq!(v["linearizable"], true, "{index}");
        let args = ["check", "--index", index, "--seeds", "20", "--keys", "3000"];
        let (ok, text, v) = bench(&args);
        assert!(ok && v["linearizable"] == true, "{index}: {text}");
        let args = [
            "check", "--index", index, "--fabric", "loopback", "--seeds", "3",
        ];
        let (ok, text, v) = bench(&args);
        assert!(ok && v["linearizable"] == true, "{index}: {text}");
        for fabric in ["sim", "loopback"] {
            let (ok, text, v) = bench(&[
                "ycsb",
                "--index",
                index,
                "--workload",
                "e",
                "--keys",
                "3000",
                "--ops",
                "3000",
                "--threads",
                "2",
                "--ms",
                "3",
                "--ms-cores",
                "2",
                "--fabric",
                fabric,
            ]);
            assert!(ok && v["mismatches"] == 0, "{index} {fabric}: {text}");
            assert_eq!(v["nam"]["partitions"], 3, "{text}");
            assert_eq!(v["cluster"]["ms_cores"], 2, "{text}");
        }
        let (ok, text, v) = bench(&[
            "ycsb",
            "--index",
            index,
            "--workload",
            "c",
            "--keys",
            "3000",
            "--ops",
            "3000",
            "--nam-skew",
            "80,12,5,3",
            "--ms",
            "4",
        ]);
        assert!(ok && v["mismatches"] == 0, "{index}: {text}");
        // Shares of the loaded keys (of the prefix space, YCSB's hashed
        // keys all fell in the first 80%).
        let shares = v["nam"]["key_shares"].as_array().unwrap().clone();
        assert!((shares[0].as_f64().unwrap() - 0.8).abs() < 1e-6, "{text}");
        let get = &v["per_op_by_kind"]["get"];
        let want = if index == "nam-coarse" { 0.0 } else { 1.0 };
        assert_eq!(
            (get["rpc"].as_f64(), get["read"].as_f64()),
            (Some(1.0), Some(want)),
            "{text}"
        );
    }
    rejects(
        &["ycsb", "--index", "nam-coarse", "--load", "bulk"],
        "fine-grained design only",
    );
    rejects(
        &["ycsb", "--index", "fg", "--nam-skew", "1,1"],
        "--nam-skew is for",
    );
}

/// DEX: `check` is linearizable with torn READs, tiny caches, offloads and
/// two repartitions per seed (and on loopback); YCSB verifies the pool after
/// the caches are flushed, routed to owners and forwarded, with offloads
/// when the cache is tiny and none with a roomy one; bad flags are errors.
#[test]
fn dex_check_and_ycsb() {
    let (ok, text, v) = bench(&["check", "--index", "dex", "--seeds", "150"]);
    assert!(ok && v["linearizable"] == true, "{text}");
    let (ok, text, v) = bench(&["check", "--index", "dex", "--seeds", "15", "--keys", "2000"]);
    assert!(ok && v["linearizable"] == true, "{text}");
    let args = [
        "check", "--index", "dex", "--fabric", "loopback", "--seeds", "3",
    ];
    let (ok, text, v) = bench(&args);
    assert!(ok && v["linearizable"] == true, "{text}");
    let base = [
        "ycsb",
        "--index",
        "dex",
        "--keys",
        "20000",
        "--ops",
        "20000",
        "--cs",
        "2",
        "--threads",
        "2",
        "--ms",
        "2",
        "--load",
        "bulk",
    ];
    for (extra, offloads) in [
        (
            &["--workload", "a", "--cache-mb", "0", "--dex-forward"][..],
            true,
        ),
        (&["--workload", "e", "--cache-mb", "8"][..], false),
        (
            &["--workload", "a", "--fabric", "loopback", "--cache-mb", "1"][..],
            false,
        ),
    ] {
        let (ok, text, v) = bench(&[&base[..], extra].concat());
        assert!(ok && v["mismatches"] == 0, "{extra:?}: {text}");
        let d = &v["dex"];
        assert_eq!(d["partitions"], 2, "{text}");
        assert_eq!(
            d["offloads"].as_u64().unwrap() > 0,
            offloads,
            "{extra:?}: {text}"
        );
    }
    // A repartitioning half-way through a write-heavy run (DEX Fig. 10):
    // CS 0's moved keys are forwarded to CS 1 afterwards, nothing is lost.
    let extra = [
        "--workload",
        "a",
        "--cache-mb",
        "1",
        "--dex-repartition-at",
        "0.5",
    ];
    let (ok, text, v) = bench(&[&base[..], &extra[..]].concat());
    assert!(ok && v["mismatches"] == 0, "{text}");
    let r = &v["dex"]["repartition"];
    assert!(r["ran"] == true && r["ns"].as_u64().unwrap() > 0, "{text}");
    assert_eq!(r["after_ops"], 10000, "{text}");
    assert!(v["dex"]["forwarded"].as_u64().unwrap() > 0, "{text}");
    assert!(
        text.contains("handed the upper half of its range"),
        "{text}"
    );
    rejects(
        &["ycsb", "--index", "dex", "--dex-leaf-admission", "2"],
        "probabilities",
    );
    rejects(
        &["ycsb", "--index", "dex", "--dex-repartition-at", "1.5"],
        "must lie in (0, 1)",
    );
    rejects(
        &["ycsb", "--index", "fg", "--dex-repartition-at", "0.5"],
        "is for --index dex",
    );
}

/// Head nodes (Ziegler et al. §4-5): checks with a maintainer racing the
/// clients on every one-sided B+tree design, and a low-load ycsb scan run
/// that takes fewer round trips and less time per scan with them.
#[test]
fn head_nodes_check_and_ycsb() {
    for index in ["fg", "sherman", "nam-hybrid"] {
        let args = [
            "check",
            "--index",
            index,
            "--head-nodes",
            "2",
            "--seeds",
            "60",
        ];
        let (ok, text, v) = bench(&args);
        assert!(ok && v["linearizable"] == true, "{index}: {text}");
        assert!(
            v["head_node_changes"].as_u64().unwrap() > 0,
            "{index}: {text}"
        );
    }
    let scan = [
        "ycsb",
        "--index",
        "fg",
        "--workload",
        "range-only",
        "--keys",
        "20000",
        "--ops",
        "200",
        "--cs",
        "1",
        "--threads",
        "1",
        "--coros",
        "1",
        "--cache-mb",
        "0",
        "--scan-len",
        "1000",
    ];
    let (ok, text, plain) = bench(&scan);
    assert!(ok && plain["mismatches"] == 0, "{text}");
    let (ok, text, heads) = bench(&[&scan[..], &["--head-nodes", "8"][..]].concat());
    assert!(ok && heads["mismatches"] == 0, "{text}");
    let h = &heads["head_nodes"];
    assert!(h["installed"].as_u64().unwrap() > 0, "{text}");
    assert!(h["prefetched_used"].as_u64().unwrap() > 0, "{text}");
    let rtts = |v: &serde_json::Value| v["per_op"]["rtts"].as_f64().unwrap();
    let p50 = |v: &serde_json::Value| v["latency_us"]["p50"].as_f64().unwrap();
    assert!(rtts(&heads) * 1.5 < rtts(&plain), "{text}");
    assert!(p50(&heads) < p50(&plain), "{text}");
    rejects(
        &["ycsb", "--index", "smart", "--head-nodes", "4"],
        "one-sided B+trees",
    );
    rejects(
        &[
            "check",
            "--index",
            "fg",
            "--fabric",
            "loopback",
            "--head-nodes",
            "2",
        ],
        "--fabric sim",
    );
}

/// Dolphin (dm_art::dolphin): linearizable with torn READs over dense keys
/// that split leaves (48 keys: one prefix; 600: three prefixes and ART path
/// splits), with tiny and no caches, and on loopback threads; `ycsb` on
/// ordered (dense) and hashed keys verifies every key; bad options fail.
#[test]
fn dolphin_check_and_ycsb() {
    for extra in [
        &["--seeds", "150"][..],
        &["--seeds", "40", "--keys", "600", "--ops", "300"],
        &["--seeds", "30", "--keys", "300", "--cache-nodes", "0"],
        &["--seeds", "5", "--fabric", "loopback", "--keys", "300"],
    ] {
        let mut args = vec!["check", "--index", "dolphin"];
        args.extend_from_slice(extra);
        let (ok, text, v) = bench(&args);
        assert!(ok && v["linearizable"] == true, "{args:?}: {text}");
    }
    for order in ["ordered", "hashed", "scattered"] {
        let args = [
            "ycsb",
            "--index",
            "dolphin",
            "--keys",
            "20000",
            "--ops",
            "20000",
            "--workload",
            "a",
            "--key-order",
            order,
        ];
        let (ok, text, v) = bench(&args);
        assert!(ok, "{text}");
        assert_eq!(v["mismatches"], 0, "{text}");
        assert_eq!(v["verified"], 20000, "{text}");
        assert!(v["cache"]["hit_ratio"].as_f64().unwrap() > 0.9, "{text}");
    }
    rejects(
        &["ycsb", "--index", "dolphin", "--load", "bulk"],
        "loads by insert",
    );
    rejects(
        &["ycsb", "--index", "dolphin", "--key-bytes", "16"],
        "8-byte integer keys",
    );
    rejects(&["ycsb", "--key-order", "random"], "--key-order takes");
}

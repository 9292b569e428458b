//! Bad input ends in a clear error (issue 33: no input hangs, panics or
//! silently lies): each case names the limit it broke. Hangs are caught by
//! [`common::refuses_within`], which kills a run that outlives its bound.

mod common;

use common::{bench, refuses_within, rejects};

/// Seconds a refused run may take (each fails before loading anything).
const QUICK: u64 = 60;

/// `--keys 0` with a workload that reads loaded records spun forever in
/// the zipfian redraw loop (no key number is below 0).
#[test]
fn keys_0_is_an_error_where_a_workload_reads_records() {
    for w in ["a", "b", "c", "d", "e", "f"] {
        refuses_within(
            QUICK,
            &["ycsb", "--keys", "0", "--workload", w, "--ops", "100"],
            "--keys 0: workload",
        );
    }
    refuses_within(QUICK, &["workload", "--keys", "0"], "needs at least 1");
    refuses_within(
        QUICK,
        &["trace", "--keys", "0", "--op", "insert"],
        "--keys 0: trace",
    );
    rejects(&["check", "--keys", "0"], "--keys 0");
    // An insert-only load from no records still runs and verifies.
    let (ok, text, v) = bench(&["ycsb", "--keys", "0", "--workload", "load", "--ops", "500"]);
    assert!(ok, "{text}");
    assert_eq!(v["verified"], 500, "{text}");
}

/// Key widths the indexes cannot take (a capacity overflow, then a padded
/// key of a gigabyte) are refused with the index's limit.
#[test]
fn key_bytes_beyond_the_index_limit_are_refused() {
    for n in ["18446744073709551615", "1000000000", "0", "33"] {
        rejects(&["ycsb", "--key-bytes", n], "takes keys of 1 to 32 bytes");
    }
    rejects(
        &["ycsb", "--index", "smart", "--key-bytes", "1000000000"],
        "takes keys of 1 to 255 bytes",
    );
    rejects(
        &["ycsb", "--index", "dolphin", "--key-bytes", "1000000000"],
        "8-byte integer keys",
    );
}

/// `--first-seed` near u64::MAX wrapped to "0 seeds ... linearizable".
#[test]
fn check_seed_range_is_checked() {
    let max = u64::MAX.to_string();
    rejects(
        &["check", "--first-seed", &max, "--seeds", "2"],
        "at most 1 seeds start at",
    );
    rejects(&["check", "--seeds", "0"], "--seeds");
    // The one seed that exists there runs.
    let (ok, text, v) = bench(&[
        "check",
        "--first-seed",
        &max,
        "--seeds",
        "1",
        "--clients",
        "4",
        "--ops",
        "20",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["linearizable"], true, "{text}");
    assert_eq!(v["operations"], 80, "{text}");
}

/// A zipfian constant outside 0 <= theta < 1 is refused.
#[test]
fn theta_outside_0_to_1_is_refused() {
    for t in ["1.0", "1", "NaN", "inf", "2", "-1"] {
        rejects(
            &["ycsb", "--theta", t],
            "must be finite, at least 0 and below 1",
        );
        refuses_within(QUICK, &["workload", "--theta", t], "below 1");
    }
}

/// Simulated timings near u64::MAX wrapped virtual time; they are bounded
/// at 1 s.
#[test]
fn sim_timing_flags_are_bounded() {
    let max = u64::MAX.to_string();
    for f in [
        "--rtt-ns",
        "--op-cpu-ns",
        "--host-atomic-ns",
        "--host-cas-fail-ns",
    ] {
        rejects(&["ycsb", f, &max], "not in 0..=1000000000");
        rejects(&["ycsb", f, "1000000001"], "not in 0..=1000000000");
    }
    for f in ["--nam-node-ns", "--dex-node-ns"] {
        rejects(&["ycsb", f, "4000000000"], "not in 0..=1000000000");
    }
    rejects(&["ycsb", "--atomic-bucket-shift", "64"], "not in 0..=63");
}

/// `runtime --tasks 0` / `--iters 0` printed inf and NaN; `figure --keys 0`
/// / `--ops 0` wrote numbers.
#[test]
fn zero_sizes_are_refused() {
    rejects(&["runtime", "--tasks", "0"], "--tasks");
    rejects(&["runtime", "--iters", "0"], "--iters");
    rejects(
        &["runtime", "--tasks", "18446744073709551615", "--iters", "2"],
        "overflows",
    );
    for f in ["--keys", "--ops"] {
        refuses_within(
            QUICK,
            &["figure", "sherman-table1", "--quick", f, "0"],
            "0 is not in 1..",
        );
    }
}

/// `--node-bytes` off a multiple of 8 was refused as holding "fewer than
/// 4 entries"; the error now says what is wrong and what to take.
#[test]
fn node_bytes_off_a_word_name_the_words_on_each_side() {
    rejects(
        &["ycsb", "--index", "sherman", "--node-bytes", "817"],
        "take a multiple of 8 (a node is READ and written in 8-byte words: 816 or 824)",
    );
    rejects(
        &["check", "--index", "fg", "--node-bytes", "130"],
        "--node-bytes 130: take a multiple of 8",
    );
}

/// `--lock-slots` on an index without a global lock table (FG+'s in-node
/// locks, DEX, the NAM designs, Dolphin, SMART's rear lock) changed
/// nothing, silently.
#[test]
fn lock_slots_without_a_lock_table_are_refused() {
    for i in [
        "fg",
        "dex",
        "nam-hybrid",
        "dolphin",
        "smart",
        "lockfree-art",
    ] {
        rejects(
            &["ycsb", "--index", i, "--lock-slots", "64"],
            "--lock-slots is for the indexes whose locks are in a global lock table",
        );
    }
}

/// `--art-absorb` where no writer queues without write combining changed
/// nothing, silently.
#[test]
fn art_absorb_without_a_write_queue_is_refused() {
    rejects(
        &["ycsb", "--index", "smart", "--art-absorb"],
        "with --index smart, write combining is on",
    );
    rejects(
        &["ycsb", "--index", "smart-inplace", "--art-absorb"],
        "with --index smart-inplace, its leaves' writers queue in HOCL's lock table",
    );
}

/// Lock and DEX flags on an index they do not reach changed nothing,
/// silently.
#[test]
fn flags_for_another_family_are_refused() {
    rejects(
        &["ycsb", "--index", "smart", "--lock-backoff", "0"],
        "--lock-backoff and --unlock-faa are for the B+tree family's node locks, not --index smart",
    );
    rejects(
        &["ycsb", "--index", "dolphin", "--unlock-faa"],
        "not --index dolphin",
    );
    rejects(
        &["ycsb", "--index", "sherman", "--unlock-faa"],
        "--unlock-faa is for locks in the node (fg, sherman-combine)",
    );
    rejects(
        &["ycsb", "--index", "sherman", "--dex-leaf-admission", "0.5"],
        "--dex-leaf-admission is for --index dex",
    );
    rejects(
        &["ycsb", "--index", "sherman", "--smart-drop-stale-hints"],
        "--smart-drop-stale-hints is for the radix family",
    );
    rejects(
        &["ycsb", "--index", "nam-hybrid", "--cache-mb", "32"],
        "--cache-mb 32: the NAM designs run without a CS cache",
    );
    rejects(
        &["ycsb", "--index", "sherman", "--rdwc-entries", "128"],
        "--rdwc-entries is for the radix family",
    );
    rejects(
        &["ycsb", "--index", "fg", "--nam-node-ns", "500"],
        "--nam-node-ns is for --index nam-coarse and nam-hybrid",
    );
}

/// The sim's model flags on a wall-clock fabric changed nothing, silently.
#[test]
fn sim_model_flags_on_a_wall_clock_fabric_are_refused() {
    for (f, v) in [
        ("--rtt-ns", "100"),
        ("--op-cpu-ns", "100"),
        ("--nic", "cx6"),
        ("--nic-pus", "64"),
    ] {
        rejects(
            &["ycsb", "--index", "fg", "--fabric", "loopback", f, v],
            &format!("{f} sets the sim fabric's network model"),
        );
    }
    rejects(
        &[
            "ycsb", "--index", "fg", "--fabric", "loopback", "--tear", "line",
        ],
        "--tear sets the sim fabric's torn READs",
    );
}

/// `--rdwc-entries 0` ran with one entry, silently.
#[test]
fn rdwc_entries_0_is_refused() {
    rejects(
        &["ycsb", "--index", "smart", "--rdwc-entries", "0"],
        "--rdwc-entries 0: at least 1",
    );
}

/// A failed head-node pass (a group size the tree cannot take) was
/// reported as "1 failed" with exit 0.
#[test]
fn a_failed_head_node_pass_fails_the_run() {
    for n in ["1", "100000"] {
        rejects(
            &["ycsb", "--head-nodes", n, "--keys", "2000", "--ops", "500"],
            "head-node maintenance passes failed",
        );
    }
}

/// READ and REMOVE lines of a trace's load file were run as inserts.
#[test]
fn a_load_file_takes_only_inserts() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path();
    let txn = dir.join("txn_randint_workloada");
    std::fs::write(&txn, "READ 1\nUPDATE 2\n").unwrap();
    let load = dir.join("load_randint_workloada");
    let d = dir.to_str().unwrap();
    let args = ["ycsb", "--trace-dir", d, "--workload", "a"];
    for (body, op) in [
        ("INSERT 1\nINSERT 2\nREAD 2\nINSERT 3\n", "READ"),
        ("INSERT 1\n\nREMOVE 2\n", "REMOVE"),
    ] {
        std::fs::write(&load, body).unwrap();
        rejects(
            &args,
            &format!(
                "load_randint_workloada:3: a load file may contain only INSERT lines, found {op}"
            ),
        );
    }
    std::fs::write(&load, "INSERT 1\nINSERT 2\nINSERT 3\n").unwrap();
    let (ok, text, v) = bench(&args);
    assert!(ok, "{text}");
    assert_eq!(v["verified"], 3, "{text}");
}

/// `check --histories F --keys 10` bounded a short scan by `--keys` instead
/// of the key range the history recorded (`hi`), and passed a scan that
/// dropped key 20 of 48. Lines without `hi` (older files) still take
/// `--keys`.
#[test]
fn check_histories_bound_scans_by_the_recorded_key_range() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let line = |client: u32, op: &str, key: u64, value: &str, call: u64, ret: u64, result: &str| {
        format!(
            r#"{{"seed": 7, "client": {client}, "op": "{op}", "key": {key}, "hi": 48, "value": {value}, "call": {call}, "ret": {ret}, "result": {result}}}"#
        )
    };
    // Key 20 inserted, then a scan from 0 asking for 30 records returns
    // only key 3: it ran out of keys, so it covered 0..48 and missed 20.
    let h = [
        line(0, "insert", 3, "11", 0, 10, "null"),
        line(0, "insert", 20, "12", 20, 30, "null"),
        line(1, "scan", 0, "30", 40, 50, "[[3, 11]]"),
    ]
    .join("\n");
    let f = tmp.path().join("h.jsonl");
    std::fs::write(&f, &h).unwrap();
    let p = f.to_str().unwrap();
    for keys in ["10", "48", "1000"] {
        let (ok, text, v) = bench(&["check", "--histories", p, "--keys", keys]);
        assert!(
            !ok && text.contains("missed key 20"),
            "--keys {keys}: {text}"
        );
        assert_eq!(v["linearizable"], false, "{text}");
    }
    // The scan that returns key 20 passes; the report names the recorded range.
    std::fs::write(&f, h.replace("[[3, 11]]", "[[3, 11], [20, 12]]")).unwrap();
    let (ok, text, v) = bench(&["check", "--histories", p, "--keys", "10"]);
    assert!(ok && v["linearizable"] == true, "{text}");
    assert!(text.contains("48 keys"), "{text}");
    // Without `hi`, --keys bounds the scan: key 20 lies beyond 0..10.
    std::fs::write(&f, h.replace(r#", "hi": 48"#, "")).unwrap();
    let (ok, text, _) = bench(&["check", "--histories", p, "--keys", "10"]);
    assert!(ok, "{text}");
    let (ok, text, _) = bench(&["check", "--histories", p, "--keys", "48"]);
    assert!(!ok && text.contains("missed key 20"), "{text}");
}

/// Sizes that would exhaust memory before any work (a plan of 4e9 keys,
/// 65535 x 65535 cores, 2^32 lock entries, a cache of 2^64 MiB) are refused
/// up front with the limit they broke, in every subcommand that takes them.
#[test]
fn sizes_beyond_the_machine_are_refused_before_allocating() {
    let max = u64::MAX.to_string();
    let more_memory = "more than this machine's";
    for (args, why) in [
        (
            &["ycsb", "--keys", "4000000000", "--ops", "10"][..],
            more_memory,
        ),
        (
            &["ycsb", "--ops", "4000000000", "--keys", "10"],
            more_memory,
        ),
        (
            &["ycsb", "--warmup", "4000000000", "--keys", "10"],
            "--warmup 4000000000) would take about",
        ),
        (
            &["ycsb", "--cs", "65535", "--threads", "65535"],
            "at most 4096",
        ),
        (&["ycsb", "--coros", "4294967295"], "at most 1048576"),
        (&["ycsb", "--ms", "65535"], "--ms 65535: at most 64"),
        (
            &["ycsb", "--index", "smart", "--rdwc-entries", "4294967295"],
            "--rdwc-entries 4294967295: at most 16777216",
        ),
        (
            &["ycsb", "--index", "dex", "--cache-mb", &max],
            "at most 1048576 (an index cache of at most 1 TiB",
        ),
        (&["workload", "--ops", "4000000000"], more_memory),
        (
            &["trace", "--op", "get", "--keys", "4000000000"],
            more_memory,
        ),
        (&["trace", "--op", "get", "--warmup", &max], "--warmup"),
        (
            &[
                "trace",
                "--op",
                "get",
                "--cs",
                "65535",
                "--threads",
                "65535",
            ],
            "at most 4096",
        ),
        (
            &[
                "figure",
                "sherman-table1",
                "--quick",
                "--keys",
                "4000000000",
            ],
            more_memory,
        ),
        (
            &["figure", "sherman-table1", "--quick", "--ops", "4000000000"],
            more_memory,
        ),
        (
            &["check", "--clients", "2", "--ops", "4294967295"],
            more_memory,
        ),
        (&["check", "--clients", "4294967295"], "at most 1048576"),
        (&["check", "--cores", "65535"], "at most 4096"),
        (&["check", "--keys", "5000000000"], "at most 4294967296"),
        (&["check", "--cache-nodes", &max], "--cache-nodes"),
        (&["check", "--seeds", &max], "at most 1099511627776"),
        (
            &["verbs", "--cs", "65535", "--threads", "65535"],
            "at most 4096",
        ),
        (&["verbs", "--ops", &max], "at most 1099511627776"),
        (&["verbs", "--chunk-kib", "4294967295"], "at most 1048576"),
        (
            &["runtime", "--tasks", "100000000"],
            "--tasks 100000000: at most",
        ),
        (
            &["runtime", "--reps", "4294967295"],
            "--reps 4294967295: at most 1000",
        ),
        (&["sim-speed", "--coros", "4294967295"], "at most 1048576"),
        (&["sim-speed", "--verbs", &max], "at most 1099511627776"),
        (&["calibrate", "--ops", &max], "at most 1099511627776"),
        (&["calibrate", "--check", "NaN"], "finite and at least 1"),
    ] {
        refuses_within(QUICK, args, why);
    }
}

/// `--lock-slots` outside what the NIC's device memory holds is refused;
/// inside it, the run says the table it used.
#[test]
fn lock_slots_are_bounded_by_the_device_memory() {
    for n in ["0", "131073"] {
        rejects(
            &["ycsb", "--index", "sherman", "--lock-slots", n],
            "holds 1 to 131072 slots per MS",
        );
    }
    let (ok, text, v) = bench(&[
        "ycsb",
        "--index",
        "smart-inplace",
        "--workload",
        "a",
        "--keys",
        "2000",
        "--ops",
        "2000",
        "--lock-slots",
        "16",
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("16 16-bit masked-CAS slots per MS"), "{text}");
    assert_eq!(v["verified"], 2000, "{text}");
}

/// Found by a sweep of bad inputs (2026-11-29): each ran with exit 0 and a
/// wrong, empty or silently altered result.
#[test]
fn silent_runs_are_refused() {
    // Percentages summed in u32 wrapped to 100 and ran all gets.
    rejects(
        &[
            "ycsb",
            "--keys",
            "200",
            "--ops",
            "200",
            "--mix=4294967295,0,0,0,101",
        ],
        "summing to 100",
    );
    // A run of nothing reported a throughput; a check of nothing passed.
    rejects(&["ycsb", "--ops", "0"], "0 is not in 1..");
    rejects(&["check", "--ops", "0"], "0 is not in 1..");
    rejects(
        &["ycsb", "--workload", "e", "--scan-len", "0"],
        "0 is not in 1..",
    );
    refuses_within(QUICK, &["workload", "--scan-len", "0"], "0 is not in 1..");
    // --head-every 0 ran a pass per operation; alone it did nothing.
    rejects(
        &["ycsb", "--head-nodes", "4", "--head-every", "0"],
        "0 is not in 1..",
    );
    rejects(
        &["ycsb", "--keys", "200", "--head-every", "10"],
        "set --head-nodes too",
    );
    // Flags of the rdma fabric were ignored on sim.
    for f in [
        ["--rdma-device", "rxe0"],
        ["--rdma-gid-index", "1"],
        ["--rdma-timeout", "14"],
    ] {
        rejects(&["ycsb", f[0], f[1]], "is for --fabric rdma");
        rejects(&["check", f[0], f[1]], "is for --fabric rdma");
    }
    // More shares than partitions were cut to 16; a zero share left a
    // partition without keys.
    let skew = |s: &str| {
        rejects(
            &[
                "ycsb",
                "--index",
                "nam-coarse",
                "--keys",
                "200",
                "--nam-skew",
                s,
            ],
            "--nam-skew takes 1 to 16 shares",
        )
    };
    skew(&["1"; 17].join(","));
    skew("0,0");
    skew("80,0,20");
    // Leases shorter than the OS's time slices took over live holders.
    for ms in ["1", "9"] {
        rejects(
            &["ycsb", "--fabric", "loopback", "--lease-ms", ms],
            "not in 10..=60000",
        );
        rejects(
            &["check", "--fabric", "loopback", "--lease-ms", ms],
            "not in 10..=60000",
        );
    }
}

/// `--nam-skew` gives the partitions shares of the loaded keys (Ziegler
/// §6's data skew): as shares of the prefix space, YCSB's hashed keys
/// (all below 2^63) all fell in the first partition of 80,12,5,3.
#[test]
fn nam_skew_shares_the_keys() {
    let (ok, text, v) = bench(&[
        "ycsb",
        "--index",
        "nam-coarse",
        "--workload",
        "c",
        "--keys",
        "2000",
        "--ops",
        "200",
        "--ms",
        "4",
        "--nam-skew",
        "80,12,5,3",
        "--theta",
        "0",
    ]);
    assert!(ok, "{text}");
    let shares: Vec<f64> = serde_json::from_value(v["nam"]["key_shares"].clone()).unwrap();
    assert_eq!(shares, vec![0.8, 0.12, 0.05, 0.03], "{text}");
    // The MS-side handlers' nodes count as allocated.
    assert!(
        v["memory"]["ms_bytes_allocated"].as_u64().unwrap() > 0,
        "{text}"
    );
}

/// An empty trace, or one that `--warmup` uses up, ran and reported 0
/// operations with exit 0.
#[test]
fn a_trace_with_nothing_to_measure_is_refused() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path();
    std::fs::write(dir.join("load_randint_workloada"), "INSERT 1\nINSERT 2\n").unwrap();
    let txn = dir.join("txn_randint_workloada");
    let d = dir.to_str().unwrap();
    std::fs::write(&txn, "").unwrap();
    rejects(
        &["ycsb", "--trace-dir", d, "--workload", "a"],
        "holds 0 operations",
    );
    refuses_within(
        QUICK,
        &["workload", "--trace-dir", d, "--workload", "a"],
        "holds no operations",
    );
    std::fs::write(&txn, "READ 1\nUPDATE 2\n").unwrap();
    rejects(
        &["ycsb", "--trace-dir", d, "--workload", "a", "--warmup", "2"],
        "none left to measure after --warmup 2",
    );
    let (ok, text, v) = bench(&["ycsb", "--trace-dir", d, "--workload", "a", "--warmup", "1"]);
    assert!(ok, "{text}");
    assert_eq!(v["ops"], 1, "{text}");
    assert_eq!(
        v["key_source"]["kind"], "integer (the trace's key numbers)",
        "{text}"
    );
}

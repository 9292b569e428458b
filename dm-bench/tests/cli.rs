//! The dm-bench binary end to end, small sizes.

use serde_json::json;
use std::process::Command;

fn bench(args: &[&str]) -> (bool, String, serde_json::Value) {
    let dir = std::env::temp_dir().join(format!(
        "dm-bench-test-{}-{}",
        std::process::id(),
        args.join("_").len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let name: String = args
        .join("_")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let json = dir.join(format!("{name}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_dm-bench"))
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run dm-bench");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let v = std::fs::read_to_string(&json)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    (out.status.success(), text, v)
}

/// Runs dm-bench with `args` and asserts that it fails with `why` in its output.
fn rejects(args: &[&str], why: &str) {
    let (ok, text, _) = bench(args);
    assert!(!ok && text.contains(why), "{args:?}: {text}");
}

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
    let (_, _, v2) = bench(&args);
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

#[test]
fn ycsb_fg_on_sim_verifies_every_key() {
    let (ok, text, v) = bench(&[
        "ycsb",
        "--index",
        "fg",
        "--workload",
        "a",
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
    assert_eq!(v["verified"], 3000);
    assert_eq!(v["clock"], "virtual");
    assert!(
        v["per_op_by_kind"]["update"]["cas"].as_f64().unwrap() >= 1.0,
        "an update takes the leaf lock"
    );
    for k in [
        "throughput_mops",
        "latency_us",
        "per_op",
        "cache",
        "memory",
        "time",
        "cluster",
    ] {
        assert!(!v[k].is_null(), "{k} missing");
    }
}

#[test]
fn ycsb_fg_on_trace_sample_and_loopback() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/data");
    let (ok, text, v) = bench(&[
        "ycsb",
        "--workload",
        "e",
        "--trace-dir",
        dir,
        "--threads",
        "2",
        "--coros",
        "4",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["mismatches"], 0, "{text}");
    assert_eq!(
        v["ops_by_kind"]["scan"].as_u64().unwrap() + v["ops_by_kind"]["insert"].as_u64().unwrap(),
        2000
    );
    let (ok, text, v) = bench(&[
        "ycsb",
        "--fabric",
        "loopback",
        "--workload",
        "b",
        "--keys",
        "2000",
        "--ops",
        "2000",
        "--cs",
        "1",
        "--threads",
        "2",
        "--coros",
        "2",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["mismatches"], 0, "{text}");
    assert_eq!(v["clock"], "wall");
    rejects(&["ycsb", "--index", "nope"], "unknown --index");
}

#[test]
fn check_fg_is_linearizable_over_300_seeds_with_faults() {
    let (ok, text, v) = bench(&[
        "check",
        "--index",
        "fg",
        "--seeds",
        "300",
        "--faults",
        "torn,delay",
    ]);
    assert!(ok, "a failing seed is printed for replay:\n{text}");
    assert_eq!(v["linearizable"], true);
    assert_eq!(v["seeds"], 300);
}

/// SMART's lock-free internal nodes and rear-locked leaves, with torn READs
/// and delays, on the same random histories (a lock release that keeps the
/// leaf's sequence number fails this at seed 0), an ART cache per CS.
#[test]
fn check_smart_is_linearizable_over_300_seeds_with_faults() {
    let (ok, text, v) = bench(&["check", "--index", "smart", "--seeds", "300"]);
    assert!(ok, "a failing seed is printed for replay:\n{text}");
    assert_eq!(v["linearizable"], true);
    assert_eq!(v["seeds"], 300);
    // A wide key space: splits behind the other CS's stale ART cache (a
    // reader that trusts a passed reverse check fails this at seed 6).
    let args = [
        "check", "--index", "smart", "--seeds", "60", "--keys", "5000",
    ];
    let (ok, text, v) = bench(&args);
    assert!(ok && v["linearizable"] == true, "{text}");
    // Real threads: wakes of delegation/combining followers cross cores.
    let args = [
        "check", "--index", "smart", "--fabric", "loopback", "--seeds", "5",
    ];
    let (ok, text, v) = bench(&args);
    assert!(ok && v["linearizable"] == true, "{text}");
    rejects(&["check", "--index", "btree"], "smart");
}

/// The ladder below SMART (SMART §5.3.1; `dm_art::baseline`) on the same
/// random histories: the DM-ported ART (ROWEX node locks in a tiny shared
/// lock table, RCU leaves; a write-combining leader whose slot CAS lost but
/// still acknowledged its followers failed at seed 11), the pure lock-free
/// ART, and in-place leaves under a lock-table lock.
#[test]
fn check_art_ladder_is_linearizable_with_faults() {
    for index in ["art", "lockfree-art", "smart-inplace"] {
        let (ok, text, v) = bench(&["check", "--index", index, "--seeds", "150"]);
        assert!(ok, "{index}: a failing seed is printed for replay:\n{text}");
        assert_eq!(v["linearizable"], true, "{text}");
        assert_eq!(v["index"], index, "{text}");
    }
    let args = ["check", "--index", "art", "--seeds", "30", "--keys", "5000"];
    let (ok, text, v) = bench(&args);
    assert!(ok && v["linearizable"] == true, "{text}");
}

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
fn check_writes_its_history() {
    let out = std::env::temp_dir().join(format!("dm-check-history-{}.jsonl", std::process::id()));
    let (ok, text, _) = bench(&[
        "check",
        "--seeds",
        "2",
        "--clients",
        "4",
        "--ops",
        "20",
        "--faults",
        "torn-line",
        "--history-out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 80);
    for l in &lines {
        for k in ["client", "op", "key", "value", "call", "ret", "result"] {
            assert!(l.get(k).is_some(), "{k} missing in {l}");
        }
        assert!(l["call"].as_u64() <= l["ret"].as_u64());
    }
    rejects(&["check", "--faults", "gremlins"], "unknown fault");
}

/// `check` on real threads (loopback), and `--histories`: the union of
/// history files split by client is checked per seed; a forged read fails it.
#[test]
fn check_on_loopback_and_merged_histories() {
    let dir = std::env::temp_dir().join(format!("dm-check-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let h = dir.join("h.jsonl");
    for index in ["fg", "sherman-hier"] {
        let (ok, text, v) = bench(&[
            "check",
            "--fabric",
            "loopback",
            "--index",
            index,
            "--seeds",
            "4",
            "--cores",
            "2",
            "--clients",
            "6",
            "--ops",
            "60",
            "--history-out",
            h.to_str().unwrap(),
        ]);
        assert!(ok, "{index}: {text}");
        assert_eq!(v["linearizable"], true, "{index}");
        assert_eq!(v["operations"], 4 * 6 * 60, "{index}");
    }
    // Split the last seed's history by client into two files, as two
    // `--client I/2` processes would write them.
    let lines: Vec<String> = std::fs::read_to_string(&h)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), 6 * 60);
    let (mut f0, mut f1) = (String::new(), String::new());
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["seed"], 3);
        let f = if v["client"].as_u64().unwrap() < 3 {
            &mut f0
        } else {
            &mut f1
        };
        f.push_str(l);
        f.push('\n');
    }
    let (p0, p1) = (dir.join("h0.jsonl"), dir.join("h1.jsonl"));
    std::fs::write(&p0, &f0).unwrap();
    std::fs::write(&p1, &f1).unwrap();
    let both = format!("{},{}", p0.display(), p1.display());
    let (ok, text, v) = bench(&["check", "--histories", &both]);
    assert!(ok, "{text}");
    assert_eq!(v["linearizable"], true);
    assert_eq!(v["operations"], 6 * 60);
    // The same file twice is refused; a get of a value never written fails.
    let twice = format!("{},{}", p0.display(), p0.display());
    rejects(&["check", "--histories", &twice], "appears in");
    // (Which client issues which operation is fixed by the seed, so there is a get.)
    let mut forged_one = false;
    let forged: String = f1
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if !forged_one && v["op"] == "get" {
                v["result"] = 12345.into();
                forged_one = true;
            }
            v.to_string() + "\n"
        })
        .collect();
    assert!(forged_one);
    std::fs::write(&p1, forged).unwrap();
    let (ok, text, v) = bench(&["check", "--histories", &both]);
    assert!(!ok, "{text}");
    assert_eq!(v["linearizable"], false);
    // Real fabrics inject no faults; several processes are rdma only.
    rejects(
        &["check", "--fabric", "loopback", "--faults", "torn"],
        "simulator",
    );
    rejects(
        &["check", "--fabric", "loopback", "--client", "0/2"],
        "rdma",
    );
    std::fs::remove_dir_all(&dir).unwrap();
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

#[test]
fn ycsb_fg_bulk_load() {
    let (ok, text, v) = bench(&[
        "ycsb",
        "--workload",
        "d",
        "--keys",
        "5000",
        "--ops",
        "3000",
        "--load",
        "bulk",
        "--threads",
        "2",
        "--coros",
        "4",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["mismatches"], 0, "{text}");
    assert_eq!(v["keys"], 5000);
    assert_eq!(v["load"]["mode"], "bulk");
    // A bulk load writes whole nodes: no per-key READs or lock CASes.
    assert_eq!(v["load"]["per_op"]["cas"], 0.0, "{text}");
    let (ok, text, v) = bench(&[
        "ycsb",
        "--workload",
        "d",
        "--keys",
        "5000",
        "--ops",
        "3000",
        "--threads",
        "2",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["load"]["mode"], "insert");
    assert!(
        v["load"]["per_op"]["cas"].as_f64().unwrap() >= 1.0,
        "{text}"
    );
    rejects(&["ycsb", "--load", "sideways"], "--load");
}

/// String keys from a gzip'd file: padded to --key-bytes, long keys skipped
/// and counted, every key verified after a run with inserts and scans.
#[test]
fn ycsb_fg_on_string_keys_from_a_key_file() {
    use std::io::Write;
    let dir = std::env::temp_dir().join(format!("dm-bench-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("names.txt.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    for i in 0..3000u32 {
        // Shared prefixes, as in package names; every 100th name is 40 bytes.
        if i % 100 == 99 {
            writeln!(gz, "{}", "x".repeat(39) + &(i % 10).to_string()).unwrap();
        } else {
            writeln!(gz, "django-plugin-{i}").unwrap();
        }
    }
    gz.finish().unwrap();
    let p = path.to_str().unwrap();
    let (ok, text, v) = bench(&[
        "ycsb",
        "--workload",
        "e",
        "--keys",
        "2000",
        "--ops",
        "2000",
        "--key-file",
        p,
        "--threads",
        "2",
        "--coros",
        "4",
    ]);
    assert!(ok, "{text}");
    assert_eq!(v["mismatches"], 0, "{text}");
    assert_eq!(v["key_source"]["key_bytes"], 32);
    assert_eq!(v["key_source"]["skipped_too_long"], 30, "{text}");
    assert_eq!(v["key_source"]["usable"], 2970);
    assert!(v["verified"].as_u64().unwrap() >= 2000, "{text}");
    // 2000 records plus up to 2000 inserts need more keys than the file has.
    rejects(
        &[
            "ycsb",
            "--workload",
            "d",
            "--keys",
            "2900",
            "--ops",
            "2000",
            "--key-file",
            p,
        ],
        "usable keys",
    );
    rejects(
        &["ycsb", "--key-file", "/nonexistent/keys.gz"],
        "cannot open",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every rung of Sherman's ladder, 100 seeds each with torn READs and delayed
/// completions (even seeds: 16-bit lanes in device memory; odd: a host table).
#[test]
fn check_sherman_ladder_is_linearizable() {
    for index in [
        "sherman-combine",
        "sherman-onchip",
        "sherman-hier",
        "sherman",
    ] {
        let (ok, text, v) = bench(&["check", "--index", index, "--seeds", "100"]);
        assert!(ok, "{index}: a failing seed is printed for replay:\n{text}");
        assert_eq!(v["linearizable"], true, "{index}");
    }
    rejects(
        &["check", "--index", "sherman-magic", "--seeds", "1"],
        "sherman-hier",
    );
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
        let shares = v["nam"]["prefix_shares"].as_array().unwrap().clone();
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
    for order in ["ordered", "hashed"] {
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

/// Issue 9, item 4: on loopback the report has the core threads' CPU ns per
/// operation and Mops per core; `--baseline` runs the same load and
/// operations against local maps (RwLock<BTreeMap>, crossbeam's SkipMap) on
/// as many threads, verifies them and gives the index's ratios to them (for
/// generated and bulk loads, and DEX's per-CS operation lists); on sim the
/// CPU keys are null and `--baseline` is an error. No timing is asserted:
/// only that each number was measured.
#[test]
fn ycsb_cpu_per_op_and_baselines_on_loopback() {
    let base = [
        "ycsb",
        "--fabric",
        "loopback",
        "--keys",
        "2000",
        "--ops",
        "2000",
        "--threads",
        "2",
        "--coros",
        "2",
    ];
    let positive =
        |v: &serde_json::Value, p: &str| v.pointer(p).and_then(|x| x.as_f64()) > Some(0.0);
    for (extra, maps) in [
        (
            &["--index", "fg", "--cs", "1", "--workload", "a"][..],
            &[][..],
        ),
        (
            &[
                "--index",
                "fg",
                "--cs",
                "1",
                "--workload",
                "a",
                "--baseline",
                "btree,skiplist",
            ][..],
            &["btree", "skiplist"][..],
        ),
        (
            &[
                "--index",
                "smart",
                "--cs",
                "1",
                "--workload",
                "e",
                "--baseline",
                "skiplist",
            ][..],
            &["skiplist"][..],
        ),
        (
            &[
                "--index",
                "dex",
                "--cs",
                "2",
                "--load",
                "bulk",
                "--workload",
                "b",
                "--baseline",
                "btree",
            ][..],
            &["btree"][..],
        ),
    ] {
        let (ok, text, v) = bench(&[&base[..], extra].concat());
        assert!(ok && v["mismatches"] == 0, "{extra:?}: {text}");
        assert!(positive(&v, "/cpu_ns_per_op"), "{extra:?}: {text}");
        assert!(positive(&v, "/per_core_mops"), "{extra:?}: {text}");
        assert!(positive(&v, "/cpu/thread_cpu_ns"), "{extra:?}: {text}");
        assert!(text.contains("ns of thread CPU per op"), "{text}");
        if maps.is_empty() {
            assert!(v["baseline"].is_null(), "{text}");
        }
        for m in maps {
            let b = &v["baseline"][m];
            assert_eq!(b["mismatches"], 0, "{m}: {text}");
            assert_eq!(b["verified"], v["verified"], "{m}: {text}");
            assert_eq!(b["ops"], v["ops"], "{m}: {text}");
            assert_eq!(b["threads"], v["cpu"]["threads"], "{m}: {text}");
            for k in [
                "cpu_ns_per_op",
                "per_core_mops",
                "throughput_mops",
                "cpu_ratio",
                "throughput_ratio",
            ] {
                assert!(positive(b, &format!("/{k}")), "{m} {k}: {text}");
            }
            assert!(text.contains(&format!("index / {m}:")), "{text}");
        }
    }
    let (ok, text, v) = bench(&["ycsb", "--keys", "500", "--ops", "500"]);
    assert!(ok, "{text}");
    assert!(
        v["cpu_ns_per_op"].is_null() && v["per_core_mops"].is_null(),
        "{text}"
    );
    rejects(&["ycsb", "--baseline", "btree"], "use --fabric loopback");
    rejects(
        &["ycsb", "--fabric", "loopback", "--baseline", "hashmap"],
        "--baseline",
    );
}

//! `dm-bench trace` (issue 9): the timeline of one operation on a warmed-up
//! index on sim. Deterministic (seeded sim); 3,000 keys and 300 warm-up reads
//! keep each run well under a second in release.

use std::process::{Command, Output};

fn trace(args: &[&str]) -> Output {
    let mut a = vec!["trace", "--keys", "3000", "--warmup", "300"];
    a.extend_from_slice(args);
    Command::new(env!("CARGO_BIN_EXE_dm-bench"))
        .args(&a)
        .output()
        .expect("run dm-bench")
}

/// The timeline's text of a run that must succeed.
fn timeline(args: &[&str]) -> String {
    let out = trace(args);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "dm-bench trace {args:?} failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `name` in a temporary directory (removed when the guard drops).
fn svg_path(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("dm-bench-trace-test-")
        .tempdir()
        .expect("a temporary directory");
    let p = dir.path().join(name);
    (dir, p)
}

/// The core's `post` lines: (ns, verb text).
fn posts(text: &str) -> Vec<(i64, String)> {
    text.lines()
        .filter(|l| l.contains("CS0 core0  post "))
        .map(|l| {
            let ns = l.split_whitespace().next().unwrap().parse().unwrap();
            let v = l.split("  post ").nth(1).unwrap().to_string();
            (ns, v)
        })
        .collect()
}

#[test]
fn fg_insert_locks_reads_writes_and_unlocks() {
    let (_tmp, svg) = svg_path("fg.svg");
    let text = timeline(&[
        "--index",
        "fg",
        "--op",
        "insert",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let p = posts(&text);
    let kinds: Vec<&str> = p
        .iter()
        .map(|(_, v)| v.split_whitespace().next().unwrap())
        .collect();
    // FG+ (Sherman §3.1's baseline): lock CAS, leaf READ, leaf WRITE, unlock WRITE, each its own round trip.
    assert_eq!(kinds, ["CAS", "READ", "WRITE", "WRITE"], "{text}");
    assert!(
        p[3].1.contains(" 8 B "),
        "the unlock writes the 8-byte lock word: {text}"
    );
    let lock_addr = p[0].1.split_whitespace().nth(1).unwrap();
    assert_eq!(
        p[3].1.split_whitespace().nth(1).unwrap(),
        lock_addr,
        "{text}"
    );
    assert!(text.contains("swapped"), "the lock CAS succeeds: {text}");
    assert!(
        text.contains("summary      4 round trips, 4 doorbells"),
        "{text}"
    );
    // Every stage appears, at the NIC and the MS.
    for stage in [
        "CS0 NIC    sends CAS",
        "NIC receives READ",
        "executes WRITE",
        "in the CQ",
    ] {
        assert!(text.contains(stage), "{stage:?} missing:\n{text}");
    }
    // Same seed, same timeline.
    let again = timeline(&[
        "--index",
        "fg",
        "--op",
        "insert",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(text, again);
}

#[test]
fn sherman_insert_is_three_round_trips_with_write_back_and_unlock_in_one_doorbell() {
    let (_tmp, svg) = svg_path("sherman.svg");
    let text = timeline(&[
        "--index",
        "sherman",
        "--op",
        "insert",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        text.contains("summary      3 round trips, 3 doorbells"),
        "{text}"
    );
    // Sherman §4.5: the write-back and the release go in one post list.
    let db = text
        .lines()
        .position(|l| l.contains("doorbell: post list of 2 WRs"))
        .unwrap_or_else(|| panic!("no two-WR doorbell:\n{text}"));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[db - 2].contains("post WRITE"), "{text}");
    assert!(lines[db - 1].contains("post MASKED-CAS"), "{text}");
    assert!(lines[db].contains("(round trip 3)"), "{text}");
    // Two-level version (§4.4): the entry, not the node, is written back.
    let w = &lines[db - 2];
    assert!(w.contains(" 24 B "), "{w}");
}

#[test]
fn svg_names_the_actors() {
    let (_tmp, svg) = svg_path("get.svg");
    timeline(&[
        "--index",
        "sherman",
        "--op",
        "get",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let s = std::fs::read_to_string(&svg).expect("the SVG is written");
    assert!(s.starts_with("<svg"));
    for actor in ["CS0 core0", "CS0 NIC", "MS0", "MS1", "READ ms"] {
        assert!(s.contains(actor), "{actor} not in the SVG");
    }
}

#[test]
fn bad_index_or_op_gives_a_clear_error() {
    let err = |args: &[&str]| {
        let out = trace(args);
        assert!(!out.status.success(), "{args:?} should fail");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = err(&["--index", "fg", "--op", "delete"]);
    assert!(e.contains("unknown --op \"delete\""), "{e}");
    assert!(e.contains("get, insert, update, remove, scan"), "{e}");
    let e = err(&["--index", "btree", "--op", "get"]);
    assert!(e.contains("unknown --index \"btree\""), "{e}");
    let e = err(&["--index", "smart", "--op", "insert", "--key", "5"]);
    assert!(e.contains("insert of a new key"), "{e}");
    let e = err(&["--index", "smart", "--op", "get", "--key", "3000"]);
    assert!(e.contains("needs a loaded key"), "{e}");
}

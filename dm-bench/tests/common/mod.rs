//! What the `cli_*` tests share: running the dm-bench binary with a
//! `--json` report ([`bench`]) and expecting it to refuse ([`rejects`]).
//! Each test binary uses some of these (`mod common;`), hence no dead-code
//! warnings for the rest.
#![allow(dead_code)]

use std::process::Command;

/// Runs dm-bench with `args` and `--json FILE`: whether it succeeded, its
/// stdout and stderr, and the JSON report (`null` if none was written).
/// FILE is in a fresh temporary directory per call, removed on return, so
/// a run that writes no report never returns an earlier run's.
pub fn bench(args: &[&str]) -> (bool, String, serde_json::Value) {
    let dir = tempfile::Builder::new()
        .prefix("dm-bench-test-")
        .tempdir()
        .expect("a temporary directory");
    let json = dir.path().join("report.json");
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

/// Runs dm-bench with `args` (no `--json`) for at most `secs` seconds
/// (killed after: a hang fails the test): its exit code (`None`: killed by
/// a signal) and its stdout and stderr. The pipes are drained while it runs,
/// so a run that prints much cannot block on them.
pub fn run_within(secs: u64, args: &[&str]) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_dm-bench"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run dm-bench");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            r.read_to_end(&mut b).ok();
            String::from_utf8_lossy(&b).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for dm-bench") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("{args:?}: still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let text = out.join().unwrap() + &err.join().unwrap();
    (status.code(), text)
}

/// Runs dm-bench with `args` (no `--json`: for subcommands without it)
/// and asserts that it fails within `secs` seconds (killed after: a hang
/// fails the test) with `why` in its output, as an error: no panic, no
/// failed core thread.
pub fn refuses_within(secs: u64, args: &[&str], why: &str) {
    let (code, text) = run_within(secs, args);
    assert!(code != Some(0) && text.contains(why), "{args:?}: {text}");
    assert!(
        !text.contains("panicked") && !text.contains("a core thread failed"),
        "{args:?} panicked: {text}"
    );
}

/// Runs dm-bench with `args` and asserts that it fails with `why` in its
/// output, as an error: no panic, no failed core thread.
pub fn rejects(args: &[&str], why: &str) {
    let (ok, text, _) = bench(args);
    assert!(!ok && text.contains(why), "{args:?}: {text}");
    assert!(
        !text.contains("panicked") && !text.contains("a core thread failed"),
        "{args:?} panicked: {text}"
    );
}

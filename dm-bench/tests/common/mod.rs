//! What the `cli_*` tests share: running the dm-bench binary with a
//! `--json` report ([`bench`]) and expecting it to refuse ([`rejects`]).
//! Each test binary uses some of these (`mod common;`), hence no dead-code
//! warnings for the rest.
#![allow(dead_code)]

use std::process::Command;

/// Runs dm-bench with `args` and `--json FILE`: whether it succeeded, its
/// stdout and stderr, and the JSON report (`null` if none was written).
pub fn bench(args: &[&str]) -> (bool, String, serde_json::Value) {
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
pub fn rejects(args: &[&str], why: &str) {
    let (ok, text, _) = bench(args);
    assert!(!ok && text.contains(why), "{args:?}: {text}");
}

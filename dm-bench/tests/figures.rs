//! `dm-bench figure NAME --quick` for every figure (issue 9: every figure
//! command runs in quick mode in CI and its CSV has the expected rows): the
//! CSV has one verified row per row the figure lists, the claims CSV has a
//! measured value for every claim, the SVG names every series, and
//! `--replot` rewrites the same claims from the CSV.

use std::process::Command;

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dm-bench"))
        .args(args)
        .output()
        .expect("run dm-bench");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "dm-bench {args:?} failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Runs dm-bench with `args`, which must fail (without a panic): its stderr.
fn fails(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dm-bench"))
        .args(args)
        .output()
        .expect("run dm-bench");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "dm-bench {args:?} succeeded:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !err.contains("panicked"),
        "dm-bench {args:?} panicked:\n{err}"
    );
    err
}

/// A temporary directory, removed when the returned guard drops.
fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("a temporary directory")
}

/// (quick rows, claims) of `name`, from `figure list`.
fn listed(name: &str) -> (usize, usize) {
    let list = bench(&["figure", "list"]);
    let line = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{name} not in figure list:\n{list}"));
    let num = |what: &str| -> usize {
        let i = line.find(what).expect(what);
        line[..i]
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap()
    };
    (num(" quick"), num(" claims"))
}

fn figure_runs_quick(name: &str) {
    let (rows, claims) = listed(name);
    assert!(rows > 0);
    let tmp = tempdir("dm-bench-figure-");
    let dir = tmp.path();
    let out = bench(&["figure", name, "--quick", "--out", dir.to_str().unwrap()]);
    let mut csv = csv::Reader::from_path(dir.join(format!("{name}.csv"))).unwrap();
    let heads = csv.headers().unwrap().clone();
    let col = |h: &str| heads.iter().position(|x| x == h).unwrap();
    let recs: Vec<csv::StringRecord> = csv.records().map(|r| r.unwrap()).collect();
    assert_eq!(recs.len(), rows, "{name}: CSV rows\n{out}");
    let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
    assert!(svg.contains("<svg"), "{name}: not an SVG");
    for r in &recs {
        assert_eq!(&r[col("figure")], name);
        assert!(
            r[col("verified")].parse::<u64>().unwrap() > 0,
            "{name}: {r:?}"
        );
        assert!(
            r[col("mops")].parse::<f64>().unwrap() > 0.0,
            "{name}: {r:?}"
        );
        assert!(
            svg.contains(&r[col("series")]),
            "{name}: SVG lacks {}",
            &r[col("series")]
        );
    }
    let claims_path = dir.join(format!("{name}.claims.csv"));
    // --replot redraws the SVG and rewrites the same claims from the CSV.
    let written = std::fs::read_to_string(&claims_path).unwrap();
    std::fs::remove_file(&claims_path).unwrap();
    let dir_s = dir.to_str().unwrap();
    bench(&["figure", name, "--quick", "--replot", "--out", dir_s]);
    assert_eq!(std::fs::read_to_string(&claims_path).unwrap(), written);
    if claims == 0 {
        // No claims (the paper states no number): an empty file.
        assert_eq!(std::fs::read_to_string(&claims_path).unwrap(), "");
        return;
    }
    let mut cl = csv::Reader::from_path(&claims_path).unwrap();
    let ch = cl.headers().unwrap().clone();
    let ours = ch.iter().position(|x| x == "ours").unwrap();
    let crecs: Vec<csv::StringRecord> = cl.records().map(|r| r.unwrap()).collect();
    assert_eq!(crecs.len(), claims, "{name}: claims");
    for c in &crecs {
        assert!(
            c[ours].parse::<f64>().is_ok(),
            "{name}: claim not measured: {c:?}"
        );
    }
}

macro_rules! figure_tests {
    ($($t:ident => $name:literal),* $(,)?) => {
        $(#[test] fn $t() { figure_runs_quick($name); })*

        /// Every listed figure has a test here.
        #[test]
        fn every_figure_has_a_test() {
            let list = bench(&["figure", "list"]);
            let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
            assert_eq!(names, vec![$($name),*]);
        }
    };
}

figure_tests! {
    sherman_table1 => "sherman-table1",
    sherman_fig5 => "sherman-fig5",
    sherman_fig6 => "sherman-fig6",
    sherman_fig7 => "sherman-fig7",
    sherman_table3 => "sherman-table3",
    smart_fig14 => "smart-fig14",
    smart_fig16 => "smart-fig16",
    smart_fig18 => "smart-fig18",
    smart_fig22a => "smart-fig22a",
    dex_fig6 => "dex-fig6",
    dex_table2 => "dex-table2",
    nam_clients => "nam-clients",
    dolphin_memory => "dolphin-memory",
    dolphin_ycsb => "dolphin-ycsb",
}

/// docs/experiments/README.md's table is what `dm-bench figure table` makes
/// of the committed claims files (issue 9: regenerated by one command and
/// matching the committed CSVs).
#[test]
fn experiments_table_matches_the_claims_files() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/experiments");
    bench(&[
        "figure",
        "table",
        "--out",
        docs.join("figures").to_str().unwrap(),
        "--check",
        docs.join("README.md").to_str().unwrap(),
    ]);
}

/// `--keys` and `--ops` resize every row (a larger run than the full size,
/// e.g. Sherman's ladder at 10 M keys): the args column records the sizes
/// the rows ran, and each row verified the loaded keys plus its inserts.
#[test]
fn figure_keys_and_ops_override_every_row() {
    let tmp = tempdir("dm-bench-figure-resize-");
    let dir = tmp.path();
    bench(&[
        "figure",
        "sherman-table1",
        "--quick",
        "--keys",
        "3000",
        "--ops",
        "2000",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let mut csv = csv::Reader::from_path(dir.join("sherman-table1.csv")).unwrap();
    let heads = csv.headers().unwrap().clone();
    let col = |h: &str| heads.iter().position(|x| x == h).unwrap();
    let recs: Vec<csv::StringRecord> = csv.records().map(|r| r.unwrap()).collect();
    assert_eq!(
        recs.len(),
        12,
        "four mixes, as run, with Table 1's atomic times and on a NIC with processing units"
    );
    for r in &recs {
        let args = &r[col("args")];
        assert!(
            args.contains("--keys 3000 ") && args.contains("--ops 2000 "),
            "{args}"
        );
        assert!(!args.contains("--keys 10000"), "{args}");
        let verified: u64 = r[col("verified")].parse().unwrap();
        assert!((3000..5000).contains(&verified), "{r:?}");
    }
}

/// `--with` adds flags to every row: the args column records them and the
/// rows run with them (here the simulator's old post order, which moves
/// SMART's throughput); a flag `ycsb` does not take fails before any row.
#[test]
fn figure_with_adds_flags_to_every_row() {
    let tmp = tempdir("dm-bench-figure-with-");
    let dir = tmp.path().to_str().unwrap();
    let mops = |with: Option<&str>| -> Vec<(String, f64)> {
        let mut args = vec!["figure", "dolphin-ycsb", "--quick", "--out", dir];
        args.extend(with);
        bench(&args);
        let path = tmp.path().join("dolphin-ycsb.csv");
        let mut csv = csv::Reader::from_path(path).unwrap();
        let heads = csv.headers().unwrap().clone();
        let col = |h: &str| heads.iter().position(|x| x == h).unwrap();
        csv.records()
            .map(|r| r.unwrap())
            .map(|r| (r[col("args")].to_string(), r[col("mops")].parse().unwrap()))
            .collect()
    };
    let plain = mops(None);
    let old = mops(Some("--with=--posts-in-tick-order"));
    assert_eq!(plain.len(), old.len());
    assert!(old
        .iter()
        .all(|(a, _)| a.ends_with(" --posts-in-tick-order")));
    assert!(plain.iter().all(|(a, _)| !a.contains("tick-order")));
    assert!(
        plain.iter().zip(&old).any(|(p, o)| p.1 != o.1),
        "no row moved"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dm-bench"))
        .args([
            "figure",
            "dolphin-ycsb",
            "--quick",
            "--out",
            dir,
            "--with",
            "--no-such-flag",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--no-such-flag"), "{err}");
}

/// Issue 34: a claim whose cause was found carries it in the claims CSV
/// (one line, the switch, the claim measured with it), and `--series S
/// --merge` reruns only S's rows into the existing CSV.
#[test]
fn causes_are_measured_and_merge_reruns_only_the_series_given() {
    let tmp = tempdir("dm-bench-figure-cause-");
    let dir = tmp.path().to_str().unwrap();
    bench(&["figure", "dex-table2", "--quick", "--out", dir]);
    let rows = |p: &str| -> Vec<csv::StringRecord> {
        let mut r = csv::Reader::from_path(tmp.path().join(p)).unwrap();
        r.records().map(|r| r.unwrap()).collect()
    };
    let before = rows("dex-table2.csv");
    let out = bench(&[
        "figure",
        "dex-table2",
        "--quick",
        "--out",
        dir,
        "--series",
        "sherman-dex",
        "--merge",
    ]);
    assert!(out.contains("cause: DEX's Sherman"), "{out}");
    let after = rows("dex-table2.csv");
    assert_eq!(after.len(), before.len(), "the other rows are kept");
    // Sim is deterministic: the rerun rows are the same rows.
    assert_eq!(after, before);
    let mut cl = csv::Reader::from_path(tmp.path().join("dex-table2.claims.csv")).unwrap();
    let h = cl.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let (claim, switch, side) = (col("claim"), col("switch"), col("paper_side_ratio"));
    for c in cl.records().map(|r| r.unwrap()) {
        if c[claim].starts_with("Sherman") {
            assert_eq!(&c[switch], "--node-read optimistic");
            let r: f64 = c[side].parse().unwrap();
            assert!((0.9..1.3).contains(&r), "{c:?}");
        } else if c[claim].starts_with("DEX") {
            // Scale and warm-up: at the quick size everything is cached.
            assert!(c[switch].contains("--warmup"), "{c:?}");
            assert!(c[side].parse::<f64>().is_ok(), "{c:?}");
        } else {
            // SMART's: the dense keys.
            assert!(c[claim].starts_with("SMART"), "{c:?}");
            assert_eq!(&c[switch], "--key-order ordered", "{c:?}");
            assert!(c[side].parse::<f64>().is_ok(), "{c:?}");
        }
    }
}

/// `figure table` on a directory without claims files, or with one that
/// holds no claims or does not parse, and `--replot` of an empty or
/// header-only CSV fail naming the directory or file, instead of printing
/// an empty table or redrawing a figure of no rows.
#[test]
fn table_and_replot_refuse_missing_or_empty_inputs() {
    let tmp = tempdir("dm-bench-figure-empty-");
    let (dir, d) = (tmp.path(), tmp.path().to_str().unwrap());
    let err = fails(&["figure", "table", "--out", d]);
    assert!(
        err.contains(d) && err.contains("no figure's claims file"),
        "{err}"
    );
    let claims = dir.join("sherman-table3.claims.csv");
    for text in ["garbage\n", "", "figure,claim\nsherman-table3,x\n"] {
        std::fs::write(&claims, text).unwrap();
        let err = fails(&["figure", "table", "--out", d]);
        assert!(err.contains(claims.to_str().unwrap()), "{text:?}: {err}");
    }
    std::fs::remove_file(&claims).unwrap();
    let csv = dir.join("sherman-table3.csv");
    for text in ["", "figure,series,x,mops,value,paper,args\n"] {
        std::fs::write(&csv, text).unwrap();
        let err = fails(&["figure", "sherman-table3", "--replot", "--out", d]);
        assert!(
            err.contains(csv.to_str().unwrap()) && err.contains("no rows"),
            "{err}"
        );
        assert!(!claims.exists() && !dir.join("sherman-table3.svg").exists());
    }
}

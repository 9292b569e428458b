//! `dm-bench figure NAME --quick` for every figure (issue 9: every figure
//! command runs in quick mode in CI and its CSV has the expected rows): the
//! CSV has one verified row per row the figure lists, the claims CSV has a
//! measured value for every claim, and the SVG names every series.

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
    let dir = std::env::temp_dir().join(format!("dm-bench-figure-{name}-{}", std::process::id()));
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
    if claims == 0 {
        // No claims (the paper states no number): an empty file.
        assert_eq!(std::fs::read_to_string(&claims_path).unwrap(), "");
        std::fs::remove_dir_all(&dir).ok();
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
    std::fs::remove_dir_all(&dir).ok();
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

//! `dm-bench figure <name>`: a paper's headline figure or table in one
//! command (issue 9). Each figure is a list of rows ([`defs`]); a row is one
//! `dm-bench ycsb` run on the `sim` fabric at the paper's cluster shape,
//! given as its command-line flags, so that any row can be rerun (and
//! studied) on its own. The command runs the rows in this process, then
//! writes `<out>/<name>.csv` (every row's measurements, [`Record`]) and
//! `<out>/<name>.svg` (the figure's plotted metric, [`plot`]), and prints the
//! table with the paper's number beside ours where the paper states one.
//!
//! Sizes: the full size keeps the paper's cluster shape (MSs, CSs, threads,
//! coroutines) and loads as many keys as a run of minutes allows (each
//! figure's doc says how that compares with the paper's); `--quick` keeps
//! the shape (SMART's with 4 CSs instead of 16) at 10,000 keys and a few
//! thousand operations, so that every figure runs in seconds (CI runs them
//! all, `tests/figures.rs`). Quick numbers are not results: they only show
//! that the figure's rows run, verify and fill the CSV, claims and SVG.

mod defs;
mod plot;
mod table;

use crate::ycsb;
use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub use defs::{Figure, Row, FIGURES};

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// A figure's name, `all` (every figure, one after another), `list`
    /// (the names, with what each reproduces) or `table` (the markdown table
    /// of the headline claims from the claims files in --out, as in
    /// docs/experiments/README.md).
    pub name: String,
    /// With `table`: compare the table with the one in this file (between
    /// its markers) instead of printing it; an error if they differ.
    #[arg(long)]
    pub check: Option<PathBuf>,
    /// With `table`: write the table into this file, between its markers.
    #[arg(long)]
    pub update: Option<PathBuf>,
    /// Redraw the SVG and rewrite the claims file from the figure's CSV in
    /// --out instead of running it (after merging rows of separate runs).
    #[arg(long)]
    pub replot: bool,
    /// CI size: 10,000 keys at the figure's cluster shape (SMART's with 4
    /// CSs); every figure in seconds. Writes to target/figures-quick unless
    /// --out says.
    #[arg(long)]
    pub quick: bool,
    /// Output directory of the CSV and SVG files (default
    /// docs/experiments/figures; target/figures-quick with --quick).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Only the rows whose series is one of these (comma list).
    #[arg(long, value_delimiter = ',')]
    pub series: Vec<String>,
    /// With --series: keep the other rows of the figure's CSV in --out and
    /// replace (or add) only the rows run (the claims and the plot are made
    /// from the merged rows).
    #[arg(long, requires = "series")]
    pub merge: bool,
    /// Load this many keys in every row instead of the figure's size (a
    /// larger run than the full size; the CSV's `args` column records it).
    /// At least 1: every row measures operations on loaded keys.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub keys: Option<u64>,
    /// Run this many operations in every row instead of the figure's size
    /// (at least 1: every row measures its run phase).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: Option<u64>,
    /// `dm-bench ycsb` flags added to every row (one string, split at
    /// whitespace; the CSV's `args` column records them), to rerun a
    /// figure with one thing switched: `--with="--posts-in-tick-order
    /// --half-duplex-ms-links"` gives the simulator every figure before
    /// 2026-11-27 ran with.
    /// Errors: a flag `ycsb` does not take, or one a row already sets.
    #[arg(long, allow_hyphen_values = true)]
    pub with: Option<String>,
}

/// `args` with the value after `flag` replaced by `v` (`None`: unchanged).
fn with_flag(args: &str, flag: &str, v: Option<u64>) -> String {
    let Some(v) = v else {
        return args.to_string();
    };
    let mut toks: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    match toks.iter().position(|t| t == flag) {
        Some(i) if i + 1 < toks.len() => toks[i + 1] = v.to_string(),
        _ => toks.extend([flag.to_string(), v.to_string()]),
    }
    toks.join(" ")
}

/// One row of a figure's CSV: what the row ran and what it measured (the
/// `ycsb --json` report, flattened). Times are virtual (sim).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Record {
    pub figure: String,
    pub series: String,
    pub x: String,
    /// Run-phase throughput, M operations per virtual second.
    pub mops: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub rtts_per_op: f64,
    pub reads_per_op: f64,
    pub writes_per_op: f64,
    pub cas_per_op: f64,
    pub faa_per_op: f64,
    pub rpcs_per_op: f64,
    pub bytes_read_per_op: f64,
    pub bytes_written_per_op: f64,
    /// Index caches of all CSs, MiB.
    pub cs_cache_mib: f64,
    /// MS memory the index allocated (nodes, leaves, locks), MiB.
    pub ms_allocated_mib: f64,
    /// Keys verified after the run (every key touched).
    pub verified: u64,
    /// The figure's plotted metric for this row ([`Figure::metric`]).
    pub value: f64,
    /// The paper's number for that metric, where the paper states one.
    pub paper: Option<f64>,
    /// The `dm-bench ycsb` flags of the row.
    pub args: String,
}

/// `ycsb`'s flags parsed on their own (a row's `args`).
#[derive(Parser)]
struct YcsbFlags {
    #[command(flatten)]
    a: ycsb::Args,
}

/// Parses a row's flags into `ycsb`'s arguments. Errors: flags `ycsb` does
/// not take (a figure definition out of date).
pub fn row_args(row: &Row) -> Result<ycsb::Args> {
    let argv = std::iter::once("ycsb").chain(row.args.split_whitespace());
    let f = YcsbFlags::try_parse_from(argv)
        .map_err(|e| anyhow!("row {} {}: {e}", row.series, row.x))?;
    Ok(f.a)
}

/// Runs one row, quietly: its record. Errors: the run's (a mismatch included).
pub fn run_row(fig: &Figure, row: &Row) -> Result<Record> {
    let mut a = row_args(row)?;
    a.quiet = true;
    let v = ycsb::measure(a).with_context(|| format!("{} row {}", fig.name, row.args))?;
    Ok(record(fig, row, &v))
}

fn record(fig: &Figure, row: &Row, v: &Value) -> Record {
    let f = |p: &str| v.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
    let mib = |p: &str| f(p) / (1u64 << 20) as f64;
    let mut r = Record {
        figure: fig.name.to_string(),
        series: row.series.clone(),
        x: row.x.clone(),
        mops: f("/throughput_mops"),
        p50_us: f("/latency_us/p50"),
        p99_us: f("/latency_us/p99"),
        rtts_per_op: f("/per_op/rtts"),
        reads_per_op: f("/per_op/read"),
        writes_per_op: f("/per_op/write"),
        cas_per_op: f("/per_op/cas"),
        faa_per_op: f("/per_op/faa"),
        rpcs_per_op: f("/per_op/rpc"),
        bytes_read_per_op: f("/per_op/bytes_read"),
        bytes_written_per_op: f("/per_op/bytes_written"),
        cs_cache_mib: mib("/memory/cs_cache_bytes"),
        ms_allocated_mib: mib("/memory/ms_bytes_allocated"),
        verified: v["verified"].as_u64().unwrap_or(0),
        value: 0.0,
        paper: row.paper,
        args: row.args.clone(),
    };
    r.value = fig.metric.of(&r);
    r
}

pub fn run(a: Args) -> Result<()> {
    if a.name == "table" {
        let dir = a
            .out
            .clone()
            .unwrap_or_else(|| "docs/experiments/figures".into());
        return table::run(&dir, a.check.as_deref(), a.update.as_deref());
    }
    if a.name == "list" {
        for f in FIGURES {
            println!(
                "{:<16} {} ({}); {} rows, {} quick, {} claims",
                f.name,
                f.title,
                f.source,
                (f.rows)(false).len(),
                (f.rows)(true).len(),
                f.claims.len()
            );
        }
        return Ok(());
    }
    let figs: Vec<&Figure> = if a.name == "all" {
        FIGURES.iter().collect()
    } else {
        vec![FIGURES.iter().find(|f| f.name == a.name).ok_or_else(|| {
            let names: Vec<&str> = FIGURES.iter().map(|f| f.name).collect();
            anyhow!("no figure {:?}; figures: {}", a.name, names.join(", "))
        })?]
    };
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(if a.quick {
            "target/figures-quick"
        } else {
            "docs/experiments/figures"
        })
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    for fig in figs {
        let rows: Vec<Row> = (fig.rows)(a.quick)
            .into_iter()
            .filter(|r| a.series.is_empty() || a.series.contains(&r.series))
            .map(|mut r| {
                r.args = with_flag(&r.args, "--keys", a.keys);
                r.args = with_flag(&r.args, "--ops", a.ops);
                if let Some(w) = &a.with {
                    r.args = format!("{} {}", r.args, w.trim());
                }
                r
            })
            .collect();
        for r in &rows {
            // Every row's flags parse (a bad or repeated `--with` fails
            // here, before any row runs).
            row_args(r)?;
        }
        if rows.is_empty() {
            bail!("{}: no rows of series {:?}", fig.name, a.series);
        }
        let csv_path = out.join(format!("{}.csv", fig.name));
        if a.replot {
            let recs: Vec<Record> = read_csv(&csv_path)?;
            if recs.is_empty() {
                bail!(
                    "{}: no rows to replot (run `dm-bench figure {}` to write them)",
                    csv_path.display(),
                    fig.name
                );
            }
            let (svg_path, claims_path) = report(fig, &out, &recs, a.quick)?;
            println!(
                "  redrew {} and rewrote {} from {}",
                svg_path.display(),
                claims_path.display(),
                csv_path.display()
            );
            continue;
        }
        println!(
            "== {}: {} ({}){}",
            fig.name,
            fig.title,
            fig.source,
            if a.quick { ", quick size" } else { "" }
        );
        let mut recs = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let t = std::time::Instant::now();
            let r = run_row(fig, row)?;
            eprintln!(
                "  [{}/{}] {} {}: {} {:.3} ({:.1} s)",
                i + 1,
                rows.len(),
                r.series,
                r.x,
                fig.metric.label(),
                r.value,
                t.elapsed().as_secs_f64()
            );
            recs.push(r);
        }
        if a.merge {
            recs = merged(fig, &csv_path, recs)?;
        }
        write_csv(&csv_path, &recs)?;
        let (svg_path, claims_path) = report(fig, &out, &recs, a.quick)?;
        println!(
            "  wrote {}, {} and {}",
            csv_path.display(),
            svg_path.display(),
            claims_path.display()
        );
    }
    Ok(())
}

/// The records of `path` (a figure's CSV) with `new` in place of those
/// of the same (series, x), the rest added, in the order of the figure's
/// full-size rows.
fn merged(fig: &Figure, path: &Path, new: Vec<Record>) -> Result<Vec<Record>> {
    let mut recs: Vec<Record> = read_csv(path)?;
    recs.retain(|r| !new.iter().any(|n| n.series == r.series && n.x == r.x));
    recs.extend(new);
    let order: Vec<(String, String)> = (fig.rows)(false)
        .into_iter()
        .map(|r| (r.series, r.x))
        .collect();
    recs.sort_by_key(|r| {
        order
            .iter()
            .position(|(s, x)| *s == r.series && *x == r.x)
            .unwrap_or(usize::MAX)
    });
    Ok(recs)
}

/// From a figure's records: draws `<name>.svg`, prints the table and the
/// claims, and writes `<name>.claims.csv` into `out`. Returns both paths.
fn report(fig: &Figure, out: &Path, recs: &[Record], quick: bool) -> Result<(PathBuf, PathBuf)> {
    let svg_path = out.join(format!("{}.svg", fig.name));
    plot::svg(&svg_path, fig, recs, quick)?;
    print_table(fig, recs);
    let claims = claim_records(fig, recs);
    print_claims(&claims);
    let claims_path = out.join(format!("{}.claims.csv", fig.name));
    write_csv(&claims_path, &claims)?;
    Ok((svg_path, claims_path))
}

/// One headline claim as measured: a line of `<name>.claims.csv`, which
/// docs/experiments/README.md's table is made from.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ClaimRecord {
    pub figure: String,
    pub claim: String,
    pub metric: String,
    pub paper: f64,
    /// None: a row of the claim was not run (`--series`).
    pub ours: Option<f64>,
    /// ours / paper.
    pub ratio: Option<f64>,
    /// The cause of the difference found by experiment (issue 34): one
    /// line, the flag that switches it to the paper's side, and the claim
    /// measured so (and / paper); empty when none is found yet.
    #[serde(default)]
    pub cause: Option<String>,
    #[serde(default)]
    pub switch: Option<String>,
    #[serde(default)]
    pub paper_side: Option<f64>,
    #[serde(default)]
    pub paper_side_ratio: Option<f64>,
}

fn claim_records(fig: &Figure, recs: &[Record]) -> Vec<ClaimRecord> {
    fig.claims
        .iter()
        .map(|c| {
            let ours = c.ours(recs);
            let side = c.paper_side(recs);
            ClaimRecord {
                figure: fig.name.to_string(),
                claim: c.what.to_string(),
                metric: c.metric.label().to_string(),
                paper: c.paper,
                ours,
                ratio: ours.map(|o| o / c.paper),
                cause: c.cause.as_ref().map(|x| x.what.to_string()),
                switch: c.cause.as_ref().map(|x| x.switch.to_string()),
                paper_side: side,
                paper_side_ratio: side.map(|o| o / c.paper),
            }
        })
        .collect()
}

fn print_claims(claims: &[ClaimRecord]) {
    if claims.is_empty() {
        return;
    }
    println!(
        "  {:<62} {:>10} {:>10} {:>7}",
        "claim", "paper", "ours", "ratio"
    );
    for c in claims {
        let (o, r) = match (c.ours, c.ratio) {
            (Some(o), Some(r)) => (format!("{o:.3}"), format!("{r:.2}")),
            _ => ("-".into(), "-".into()),
        };
        println!("  {:<62} {:>10.3} {:>10} {:>7}", c.claim, c.paper, o, r);
        if let (Some(why), Some(sw)) = (&c.cause, &c.switch) {
            let side = match (c.paper_side, c.paper_side_ratio) {
                (Some(o), Some(r)) => format!("{o:.3} ({r:.2} of the paper's)"),
                _ => "not run".into(),
            };
            println!("    cause: {why}; with {sw}: {side}");
        }
    }
}

/// The records of a CSV that [`write_csv`] wrote.
fn read_csv<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let mut r = csv::Reader::from_path(path).with_context(|| format!("{}", path.display()))?;
    let recs = r.deserialize().collect::<Result<_, _>>();
    recs.with_context(|| format!("{}", path.display()))
}

pub(crate) fn write_csv<T: Serialize>(path: &Path, recs: &[T]) -> Result<()> {
    let mut w = csv::Writer::from_path(path).with_context(|| format!("{}", path.display()))?;
    for r in recs {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}

/// The figure as a table: a line per row, the paper's number and the ratio
/// (ours / paper's) where the paper gives one.
fn print_table(fig: &Figure, recs: &[Record]) {
    println!(
        "  {:<18} {:<18} {:>12} {:>12} {:>7}  {:>8} {:>8}",
        "series",
        fig.x_label,
        fig.metric.label(),
        "paper",
        "ratio",
        "rtts/op",
        "p99 us"
    );
    for r in recs {
        let (p, ratio) = match r.paper {
            Some(p) => (format!("{p:.3}"), format!("{:.2}", r.value / p)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "  {:<18} {:<18} {:>12.3} {:>12} {:>7}  {:>8.2} {:>8.1}",
            r.series, r.x, r.value, p, ratio, r.rtts_per_op, r.p99_us
        );
    }
}

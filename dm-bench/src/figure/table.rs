//! `dm-bench figure table`: docs/experiments/README.md's table of headline
//! claims, made from the `<name>.claims.csv` files of full-size runs (the
//! committed ones in docs/experiments/figures). A row per claim: the
//! paper's number, ours, ours / paper, the cause of a difference where an
//! experiment found it (issue 34: one line, the flag that switches it to
//! the paper's side, the claim measured with it and that / paper), and the
//! command that measured it.
//! `--update FILE` writes it between the markers in FILE (`dm-bench figure
//! table --update docs/experiments/README.md`); `--check FILE` compares it
//! with what is there (a test keeps the committed README honest).

use super::{read_csv, ClaimRecord, FIGURES};
use anyhow::{bail, Context, Result};
use std::path::Path;

/// The markers around the generated table in docs/experiments/README.md.
pub const BEGIN: &str = "<!-- figure table: begin (dm-bench figure table) -->";
pub const END: &str = "<!-- figure table: end -->";

fn fmt(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// The markdown table of every figure with a claims file in `dir`. Errors:
/// no figure's claims file in `dir`, or one that holds no claims (a figure
/// with claims writes a row for each) or does not parse.
pub fn markdown(dir: &Path) -> Result<String> {
    let mut s = String::from(
        "| figure | claim | paper | ours | ours / paper | cause (switched to the paper's side by) | with it | with it / paper | command |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut files = 0;
    for f in FIGURES {
        let p = dir.join(format!("{}.claims.csv", f.name));
        if !p.exists() || f.claims.is_empty() {
            continue;
        }
        files += 1;
        let claims = read_csv::<ClaimRecord>(&p)?;
        if claims.is_empty() {
            bail!(
                "{}: no claims (the figure writes a row per claim; rerun it, or --replot it from its CSV)",
                p.display()
            );
        }
        for c in claims {
            let (o, r) = match (c.ours, c.ratio) {
                (Some(o), Some(r)) => (fmt(o), format!("{r:.2}")),
                _ => ("-".into(), "-".into()),
            };
            let cause = match (&c.cause, &c.switch) {
                (Some(why), Some(sw)) => format!("{why} (`{sw}`)"),
                _ => "-".into(),
            };
            let (so, sr) = match (c.paper_side, c.paper_side_ratio) {
                (Some(o), Some(r)) => (fmt(o), format!("{r:.2}")),
                _ => ("-".into(), "-".into()),
            };
            s += &format!(
                "| [{}](figures/{}.svg) | {} | {} | {} | {} | {} | {} | {} | `dm-bench figure {}` |\n",
                f.name,
                f.name,
                c.claim,
                fmt(c.paper),
                o,
                r,
                cause,
                so,
                sr,
                f.name
            );
        }
    }
    if files == 0 {
        bail!(
            "{}: no figure's claims file (<name>.claims.csv, which `dm-bench figure <name>` writes)",
            dir.display()
        );
    }
    Ok(s)
}

/// Prints the table; with `update`, writes it into that file between
/// [`BEGIN`] and [`END`]; with `check`, fails unless that file's text there
/// is the table.
pub fn run(dir: &Path, check: Option<&Path>, update: Option<&Path>) -> Result<()> {
    let table = markdown(dir)?;
    let Some(file) = check.or(update) else {
        print!("{table}");
        return Ok(());
    };
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        bail!("{}: no {BEGIN} ... {END} markers", file.display());
    };
    if update.is_some() {
        let new = format!("{}{BEGIN}\n{table}{}", &text[..b], &text[e..]);
        std::fs::write(file, new).with_context(|| format!("{}", file.display()))?;
        println!("{}: table written from {}", file.display(), dir.display());
        return Ok(());
    }
    let inside = text[b + BEGIN.len()..e].trim();
    if inside != table.trim() {
        bail!(
            "{}'s table differs from the claims files in {}: regenerate it with `dm-bench figure table`",
            file.display(),
            dir.display()
        );
    }
    println!("{}: the table matches {}", file.display(), dir.display());
    Ok(())
}

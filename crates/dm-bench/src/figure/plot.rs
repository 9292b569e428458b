//! A figure's SVG (plotters, SVG backend; no font files needed: the text is
//! SVG `<text>` and its size is estimated). Numeric x values give a line per
//! series, as the papers' scalability and sweep plots; categorical ones
//! (workloads, rungs) give grouped bars. The paper's numbers, where a row has
//! one, are drawn as hollow circles of the series' colour on lines and as a
//! black mark across a bar.

use super::{Figure, Record};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// Series in first-seen order, and the x values in first-seen order.
fn axes(recs: &[Record]) -> (Vec<String>, Vec<String>) {
    let mut series: Vec<String> = Vec::new();
    let mut xs: Vec<String> = Vec::new();
    for r in recs {
        if !series.contains(&r.series) {
            series.push(r.series.clone());
        }
        if !xs.contains(&r.x) {
            xs.push(r.x.clone());
        }
    }
    (series, xs)
}

/// Writes the figure's plotted metric of `recs` to `path`.
pub fn svg(path: &Path, fig: &Figure, recs: &[Record], quick: bool) -> Result<()> {
    let e = |e: &dyn std::fmt::Debug| anyhow!("plotting {}: {e:?}", path.display());
    let (series, xs) = axes(recs);
    let ymax = recs
        .iter()
        .flat_map(|r| [Some(r.value), r.paper])
        .flatten()
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let title = format!(
        "{}: {}{}",
        fig.name,
        fig.title,
        if quick { " (quick size)" } else { "" }
    );
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let numeric = fig.x_numeric && xs.iter().all(|x| x.parse::<f64>().is_ok());
    let (x0, x1) = if numeric {
        let v: Vec<f64> = xs.iter().map(|x| x.parse().unwrap()).collect();
        let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let pad = ((hi - lo) * 0.05).max(0.5);
        (lo - pad, hi + pad)
    } else {
        (-0.5, xs.len() as f64 - 0.5)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..ymax)
        .map_err(|x| e(&x))?;
    let xs_fmt = xs.clone();
    let fmt = move |x: &f64| -> String {
        if numeric {
            format!("{x}")
        } else {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < xs_fmt.len() {
                xs_fmt[i as usize].clone()
            } else {
                String::new()
            }
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(fig.x_label)
        .y_desc(fig.metric.label())
        .x_label_formatter(&fmt);
    if !numeric {
        mesh.x_labels(xs.len() + 1).disable_x_mesh();
    }
    mesh.draw().map_err(|x| e(&x))?;
    let n = series.len().max(1) as f64;
    for (si, s) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        let mine: Vec<&Record> = recs.iter().filter(|r| &r.series == s).collect();
        let xpos = |r: &Record| -> f64 {
            if numeric {
                r.x.parse().unwrap()
            } else {
                xs.iter().position(|x| x == &r.x).unwrap() as f64
            }
        };
        if numeric {
            let pts: Vec<(f64, f64)> = mine.iter().map(|r| (xpos(r), r.value)).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(s.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(|x| e(&x))?;
        } else {
            let w = 0.8 / n;
            let bars = mine.iter().map(|r| {
                let l = xpos(r) - 0.4 + w * si as f64;
                Rectangle::new([(l, 0.0), (l + w * 0.9, r.value)], color.filled())
            });
            chart
                .draw_series(bars)
                .map_err(|x| e(&x))?
                .label(s.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        // The paper's numbers: hollow circles of the series' colour on a
        // line, a black bar across the bar.
        if numeric {
            let paper = mine.iter().filter_map(|r| {
                r.paper
                    .map(|p| Circle::new((xpos(r), p), 5, color.stroke_width(2)))
            });
            chart.draw_series(paper).map_err(|x| e(&x))?;
        } else {
            let w = 0.8 / n;
            let paper = mine.iter().filter_map(|r| {
                let l = xpos(r) - 0.4 + w * si as f64;
                r.paper.map(|p| {
                    PathElement::new(vec![(l, p), (l + w * 0.9, p)], BLACK.stroke_width(3))
                })
            });
            chart.draw_series(paper).map_err(|x| e(&x))?;
        }
    }
    if !numeric && recs.iter().any(|r| r.paper.is_some()) {
        // A legend entry for the paper's marks.
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())
            .map_err(|x| e(&x))?
            .label("the paper's number")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

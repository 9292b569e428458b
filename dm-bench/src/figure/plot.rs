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
    let data_max = recs
        .iter()
        .flat_map(|r| [Some(r.value), r.paper])
        .flatten()
        .fold(0.0f64, f64::max)
        .max(1e-9);
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
    let paper_entry = !numeric && recs.iter().any(|r| r.paper.is_some());
    let labels = series
        .iter()
        .map(|s| s.chars().count())
        .chain(paper_entry.then_some("the paper's number".len()))
        .max()
        .unwrap_or(0);
    let legend = legend_px(series.len() + usize::from(paper_entry), labels);
    let marks = marks(recs, &series, &xs, numeric);
    let (legend_left, ymax) = place_legend(&marks, (x0, x1), data_max * 1.1, legend);
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
    for (si, s) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        let mine: Vec<&Record> = recs.iter().filter(|r| &r.series == s).collect();
        let xpos = |r: &Record| x_of(r, &xs, numeric);
        let bar = |r: &Record| bar_span(xpos(r), si, series.len());
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
            let bars = mine.iter().map(|r| {
                let (l, h) = bar(r);
                Rectangle::new([(l, 0.0), (h, r.value)], color.filled())
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
            let paper = mine.iter().filter_map(|r| {
                let (l, h) = bar(r);
                r.paper
                    .map(|p| PathElement::new(vec![(l, p), (h, p)], BLACK.stroke_width(3)))
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
        .position(if legend_left {
            SeriesLabelPosition::UpperLeft
        } else {
            SeriesLabelPosition::UpperRight
        })
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// The plotting area of the 900 x 520 SVG, px: what is left of the margins
/// (12), the caption, the x label area (40) and the y label area (64).
const PLOT_W: f64 = 812.0;
const PLOT_H: f64 = 431.0;

/// (width, height) in px of a legend of `entries` rows whose longest label
/// has `label_chars` characters, as plotters draws it in these SVGs: 15 px
/// per row plus 15, 7.5 px per character plus 35 (read off the legend boxes
/// of the committed figures: 9 rows of up to 10 characters, 105 x 150; 3 of
/// 7, 88 x 60).
fn legend_px(entries: usize, label_chars: usize) -> (f64, f64) {
    (
        7.5 * label_chars as f64 + 35.0,
        15.0 * entries as f64 + 15.0,
    )
}

/// A record's x in data units: its value on a numeric axis, else its
/// category's index.
fn x_of(r: &Record, xs: &[String], numeric: bool) -> f64 {
    if numeric {
        r.x.parse().unwrap()
    } else {
        xs.iter().position(|x| x == &r.x).unwrap() as f64
    }
}

/// The x span of series `si`'s bar (of `series` side by side) in the
/// category at `x`: the group takes 0.8 of the category, each bar 0.9 of
/// its share.
fn bar_span(x: f64, si: usize, series: usize) -> (f64, f64) {
    let w = 0.8 / series.max(1) as f64;
    let l = x - 0.4 + w * si as f64;
    (l, l + w * 0.9)
}

/// What the figure draws, as `(x from, x to, top)` in data units: each bar
/// and the paper's mark on it, each point and each line segment (spanning
/// its two points, as high as the higher).
fn marks(recs: &[Record], series: &[String], xs: &[String], numeric: bool) -> Vec<(f64, f64, f64)> {
    let mut out = Vec::new();
    for (si, s) in series.iter().enumerate() {
        let mine: Vec<&Record> = recs.iter().filter(|r| &r.series == s).collect();
        let top = |r: &Record| r.paper.map_or(r.value, |p| p.max(r.value));
        if numeric {
            let pts: Vec<(f64, f64)> = mine
                .iter()
                .map(|r| (x_of(r, xs, numeric), top(r)))
                .collect();
            out.extend(pts.iter().map(|&(x, y)| (x, x, y)));
            out.extend(
                pts.windows(2)
                    .map(|w| (w[0].0.min(w[1].0), w[0].0.max(w[1].0), w[0].1.max(w[1].1))),
            );
        } else {
            for r in mine {
                let (l, h) = bar_span(x_of(r, xs, numeric), si, series.len());
                out.push((l, h, top(r)));
            }
        }
    }
    out
}

/// The legend's corner (true: upper left, else upper right) and the top of
/// the y axis, at least `ymin`, that keeps every mark below the legend box
/// (`legend`: its width and height in px, drawn 5 px inside the corner).
/// The corner that needs the lower axis wins; on a tie, the right one.
fn place_legend(
    marks: &[(f64, f64, f64)],
    (x0, x1): (f64, f64),
    ymin: f64,
    legend: (f64, f64),
) -> (bool, f64) {
    let span = (x1 - x0) * (legend.0 + 10.0) / PLOT_W;
    // The share of the axis height the box and a gap take from the top.
    let share = ((legend.1 + 10.0) / PLOT_H).min(0.9);
    let need = |lo: f64, hi: f64| {
        marks
            .iter()
            .filter(|m| m.0 <= hi && m.1 >= lo)
            .map(|m| m.2 / (1.0 - share))
            .fold(ymin, f64::max)
    };
    let right = need(x1 - span, x1);
    let left = need(x0, x0 + span);
    if left < right {
        (true, left)
    } else {
        (false, right)
    }
}

#[cfg(test)]
mod tests {
    use super::{legend_px, place_legend};

    /// Bars high on the right push the legend left; where both corners are
    /// high the axis grows until the box clears every mark.
    #[test]
    fn the_legend_clears_every_mark() {
        let legend = legend_px(3, 7);
        let (left, ymax) = place_legend(
            &[(-0.4, 0.3, 5.0), (2.6, 3.3, 30.0)],
            (-0.5, 3.5),
            33.0,
            legend,
        );
        assert!(left);
        assert_eq!(ymax, 33.0, "the left corner needs no headroom");
        let marks = [(-0.4, 0.3, 30.0), (2.6, 3.3, 30.0)];
        let (_, ymax) = place_legend(&marks, (-0.5, 3.5), 33.0, legend);
        let bottom = ymax * (1.0 - (legend.1 + 10.0) / super::PLOT_H);
        assert!(ymax > 33.0 && bottom >= 30.0 - 1e-9);
    }
}

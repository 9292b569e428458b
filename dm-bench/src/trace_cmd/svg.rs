//! The sequence diagram of a traced operation, as plain SVG text (no fonts,
//! no plotting library): one column (lifeline) per actor, the CS cores,
//! the CS NICs and the memory servers; virtual time runs down, linearly,
//! with the op's start at the top. Per WR: core -> CS NIC (posted, sent),
//! CS NIC -> MS (half an RTT on the wire; a box on the MS's lifeline from
//! arrival to the reply), MS -> CS NIC (the completion reaches the CQ),
//! CS NIC -> core (the CQ poll that hands it to the task). Doorbells, task
//! switches and lock-table waits are marked on the core's lifeline. Colour
//! by verb: READ blue, WRITE green, CAS red, FAA orange, RPC purple.

use super::{actor_name, summary, wr_label, Actor, Line, Traced, What};
use dm_verbs::VerbKind;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

const COL_W: f64 = 250.0;
/// Room left of the first lifeline for the core's marks and the time axis.
const LEFT: f64 = 330.0;
const TOP: f64 = 90.0;
/// Drawing height for the whole operation, px.
const SPAN_PX: f64 = 1100.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn colour(k: VerbKind) -> &'static str {
    match k {
        VerbKind::Read => "#1f77b4",
        VerbKind::Write => "#2ca02c",
        VerbKind::Cas => "#d62728",
        VerbKind::Faa => "#ff7f0e",
        VerbKind::Rpc => "#9467bd",
    }
}

/// Where things go: the columns' x and the virtual time's y.
struct Layout {
    /// One column per actor, in [`Actor`] order (cores, CS NICs, MSs).
    cols: Vec<Actor>,
    x_of: HashMap<Actor, f64>,
    /// The first and last ns drawn (relative to the op's start).
    lo: i64,
    hi: i64,
    scale: f64,
    width: f64,
    height: f64,
}

impl Layout {
    /// A column per actor of `lines` and per MS; time from the first line
    /// (or the op's start) to the last over [`SPAN_PX`].
    fn new(t: &Traced, lines: &[Line]) -> Self {
        let mut actors: BTreeSet<Actor> = lines.iter().map(|l| l.actor).collect();
        for m in 0..t.num_ms {
            actors.insert(Actor::Ms(m));
        }
        let cols: Vec<Actor> = actors.into_iter().collect();
        let x_of: HashMap<Actor, f64> = cols
            .iter()
            .enumerate()
            .map(|(i, &a)| (a, LEFT + COL_W * (i as f64 + 0.5)))
            .collect();
        let lo = lines.iter().map(|l| l.ns).min().unwrap_or(0).min(0);
        let hi = lines.iter().map(|l| l.ns).max().unwrap_or(1).max(lo + 1);
        let scale = SPAN_PX / (hi - lo) as f64;
        let width = LEFT + COL_W * cols.len() as f64 + 20.0;
        let mut l = Layout {
            cols,
            x_of,
            lo,
            hi,
            scale,
            width,
            height: 0.0,
        };
        l.height = l.y(hi) + 70.0;
        l
    }

    /// The y of `ns` (relative to the op's start).
    fn y(&self, ns: i64) -> f64 {
        TOP + (ns - self.lo) as f64 * self.scale
    }
}

/// The SVG document for `t` and its timeline `lines`.
pub fn render(t: &Traced, lines: &[Line]) -> String {
    let l = Layout::new(t, lines);
    let mut s = String::new();
    header(&mut s, t, &l);
    lifelines(&mut s, t, &l);
    time_axis(&mut s, &l);
    wrs(&mut s, t, lines, &l);
    core_marks(&mut s, t, lines, &l);
    s.push_str("</svg>\n");
    s
}

/// The document's opening, the arrowhead, the title and the summary.
fn header(s: &mut String, t: &Traced, l: &Layout) {
    let (width, height) = (l.width, l.height);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="10">"#
    );
    let _ = writeln!(
        s,
        r##"<defs><marker id="arr" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs><rect width="100%" height="100%" fill="white"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        esc(&format!(
            "dm-bench trace: {} {} of key #{} (sim, virtual ns from the op's start)",
            t.index, t.op, t.key_number
        ))
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="38" font-size="11">{}</text>"#,
        esc(&summary(t))
    );
}

/// Each actor's name box and dashed lifeline.
fn lifelines(s: &mut String, t: &Traced, l: &Layout) {
    for &a in &l.cols {
        let x = l.x_of[&a];
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="22" fill="#eeeeee" stroke="#333"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="12" font-weight="bold">{}</text><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="4 3"/>"##,
            x - 80.0,
            TOP - 40.0,
            160.0,
            TOP - 25.0,
            esc(&actor_name(t, a)),
            TOP - 18.0,
            l.height - 30.0
        );
    }
}

/// The time axis: a tick per 1000 ns (5000 ns over long spans).
fn time_axis(s: &mut String, l: &Layout) {
    let (lo, hi) = (l.lo, l.hi);
    let step = if hi - lo > 20_000 { 5_000 } else { 1_000 };
    let mut tick = (lo / step) * step;
    while tick <= hi {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#666">{tick} ns</text><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#eee"/>"##,
            55.0,
            l.y(tick) + 3.0,
            60.0,
            l.y(tick),
            l.width - 20.0,
            l.y(tick)
        );
        tick += step;
    }
}

/// An arrow from `(x1, y1)` to `(x2, y2)` in colour `c`, dashed for replies.
fn arrow(s: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64), c: &str, dash: bool) {
    let _ = writeln!(
        s,
        r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{c}" stroke-width="1.4" marker-end="url(#arr)"{}/>"#,
        if dash {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        }
    );
}

/// Per WR of the recorder: its arrows core -> CS NIC -> MS -> CS NIC ->
/// core, its box on the MS's lifeline and its labels.
fn wrs(s: &mut String, t: &Traced, lines: &[Line], lay: &Layout) {
    let (x_of, y) = (&lay.x_of, |ns: i64| lay.y(ns));
    let polled: HashMap<usize, i64> = lines
        .iter()
        .filter_map(|l| match l.what {
            What::Polled(Some(i)) => Some((i, l.ns)),
            _ => None,
        })
        .collect();
    let rel = |ns: u64| ns as i64 - t.t0 as i64;
    // Labels at one x move down below the previous one there (WRs of one
    // post list travel together); arrows and boxes stay at their times.
    let mut taken: HashMap<i64, f64> = HashMap::new();
    let mut place = |x: f64, y: f64| {
        let p = taken.entry(x.round() as i64).or_insert(f64::MIN);
        let ty = y.max(*p + 11.0);
        *p = ty;
        ty
    };
    for (i, w) in t.sim.wrs.iter().enumerate() {
        let c = colour(w.kind);
        let cs = t.cores.get(w.core).map_or(w.cs, |c| c.cs);
        let (Some(&xc), Some(&xn), Some(&xm)) = (
            x_of.get(&Actor::Core(w.core)),
            x_of.get(&Actor::CsNic(cs)),
            x_of.get(&Actor::Ms(w.ms)),
        ) else {
            continue;
        };
        let (yp, yt, ya, ye, yd, yq) = (
            y(rel(w.posted_ns)),
            y(rel(w.nic_tx_ns)),
            y(rel(w.ms_arrive_ns)),
            y(rel(w.exec_ns)),
            y(rel(w.ms_done_ns)),
            y(rel(w.cq_ns)),
        );
        arrow(s, (xc, yp), (xn, yt), c, false);
        arrow(s, (xn, yt), (xm, ya), c, false);
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{ya:.1}" width="8" height="{:.1}" fill="{c}" fill-opacity="0.35" stroke="{c}"/>"#,
            xm - 4.0,
            (yd - ya).max(1.5)
        );
        // The request's label, near the middle of the wire.
        let (mx, my) = ((xn + xm) / 2.0, (yt + ya) / 2.0);
        let _ = writeln!(
            s,
            r#"<text x="{mx:.1}" y="{:.1}" text-anchor="middle" fill="{c}">{}</text>"#,
            place(mx, my - 3.0),
            esc(&format!("{} @{} ns", wr_label(w), rel(w.posted_ns)))
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" fill="{c}">{}</text>"#,
            xm + 7.0,
            place(xm + 7.0, ye + 3.0),
            esc(&format!("exec @{}", rel(w.exec_ns)))
        );
        arrow(s, (xm, yd), (xn, yq), c, true);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" fill="{c}">{}</text>"#,
            xn + 4.0,
            place(xn + 4.0, yq + 11.0),
            esc(&format!("CQ @{}", rel(w.cq_ns)))
        );
        if let Some(&p) = polled.get(&i) {
            arrow(s, (xn, yq), (xc, y(p)), c, true);
        }
    }
}

/// Marks on the cores' lifelines: doorbells, runtime events, and the op's
/// start and end (with a line across the diagram).
fn core_marks(s: &mut String, t: &Traced, lines: &[Line], lay: &Layout) {
    let (x_of, y, width) = (&lay.x_of, |ns: i64| lay.y(ns), lay.width);
    // A label too close to the one above it moves down (the dot stays at
    // its time).
    let mut label_y: HashMap<Actor, f64> = HashMap::new();
    for l in lines {
        let Actor::Core(_) = l.actor else { continue };
        let x = x_of[&l.actor];
        let yy = y(l.ns);
        let prev = label_y.entry(l.actor).or_insert(f64::MIN);
        let ty = (yy - 3.0).max(*prev + 11.0);
        *prev = ty;
        let (mark, text) = match &l.what {
            What::Doorbell { db, rt } => {
                let d = &t.sim.doorbells[*db];
                (
                    "#000",
                    format!(
                        "{} ns: doorbell, {} WR{} -> MS{} (RT {rt})",
                        l.ns,
                        d.wrs.len(),
                        if d.wrs.len() == 1 { "" } else { "s" },
                        d.ms
                    ),
                )
            }
            What::Runtime => ("#777", format!("{} ns: {}", l.ns, l.text)),
            What::OpStart | What::OpEnd => {
                let _ = writeln!(
                    s,
                    r##"<line x1="{LEFT:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#000" stroke-dasharray="2 2"/>"##,
                    width - 20.0
                );
                ("#000", format!("{} ns: {}", l.ns, l.text))
            }
            _ => continue,
        };
        let _ = writeln!(
            s,
            r#"<circle cx="{x:.1}" cy="{yy:.1}" r="3" fill="{mark}"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="{mark}">{}</text>"#,
            x - 6.0,
            ty,
            esc(&text)
        );
    }
}

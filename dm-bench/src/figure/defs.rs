//! The figure catalogue: what each figure reproduces, its rows as `ycsb`
//! flags at the full and the quick size, and the paper's numbers.
//! The rows of one paper's figures are in that paper's module:
//! [`sherman`], [`smart`], [`dex`], [`nam`], [`dolphin`].

use super::Record;

mod dex;
mod dolphin;
mod nam;
mod sherman;
mod smart;

/// One `dm-bench ycsb` run of a figure.
#[derive(Clone, Debug)]
pub struct Row {
    /// The line or bar group (an index, a rung, a workload).
    pub series: String,
    /// The x value: a number (threads, clients, skew) or a category.
    pub x: String,
    /// `ycsb` flags, space-separated (no quoting).
    pub args: String,
    /// The paper's number for the figure's metric, where it states one.
    pub paper: Option<f64>,
}

/// A figure's plotted (and compared) metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Run-phase throughput, Mops (virtual time).
    Mops,
    /// 99th-percentile latency, µs (virtual time).
    P99Us,
    /// Index caches of all CSs, MiB.
    CsCacheMib,
    /// Median latency, µs (virtual time).
    P50Us,
    /// READs per operation.
    ReadsPerOp,
    /// Bytes READ plus bytes written per operation.
    BytesPerOp,
}

impl Metric {
    pub fn label(self) -> &'static str {
        match self {
            Metric::Mops => "Mops",
            Metric::P99Us => "p99 us",
            Metric::CsCacheMib => "CS cache MiB",
            Metric::P50Us => "p50 us",
            Metric::ReadsPerOp => "READs/op",
            Metric::BytesPerOp => "bytes/op",
        }
    }

    pub fn of(self, r: &Record) -> f64 {
        match self {
            Metric::Mops => r.mops,
            Metric::P99Us => r.p99_us,
            Metric::CsCacheMib => r.cs_cache_mib,
            Metric::P50Us => r.p50_us,
            Metric::ReadsPerOp => r.reads_per_op,
            Metric::BytesPerOp => r.bytes_read_per_op + r.bytes_written_per_op,
        }
    }
}

/// A headline figure or table of a paper.
pub struct Figure {
    /// `dm-bench figure <name>`.
    pub name: &'static str,
    pub title: &'static str,
    /// Paper, figure or table, section.
    pub source: &'static str,
    pub x_label: &'static str,
    /// x values are numbers (lines) rather than categories (grouped bars).
    pub x_numeric: bool,
    pub metric: Metric,
    /// The rows at the full size (`false`) or the quick size (`true`).
    pub rows: fn(bool) -> Vec<Row>,
    /// The paper's headline claims this figure checks.
    pub claims: &'static [Claim],
}

/// A headline claim of the paper: a number (`den` = None) or a ratio of two
/// rows' values of `metric`, each row named by (series, x).
/// The x of a claim's row that stands for the series' peak ([`Claim::ours`]).
pub const PEAK: &str = "peak";

pub struct Claim {
    pub what: &'static str,
    pub metric: Metric,
    pub num: (&'static str, &'static str),
    pub den: Option<(&'static str, &'static str)>,
    /// The paper's number (a factor for a ratio).
    pub paper: f64,
    /// Why ours differs, shown by experiment (issue 34), if found.
    pub cause: Option<Cause>,
}

/// The cause of a claim's difference from the paper, switched to the
/// paper's side by a flag (issue 34): the claim measured again on rows of
/// the same figure that run with the flag.
pub struct Cause {
    /// One line: what differs between the paper's setting and ours.
    pub what: &'static str,
    /// The flag that switches the cause to the paper's side.
    pub switch: &'static str,
    /// The claim's numerator and denominator series with the switch on
    /// (each at the claim's own x); `None`: the claim's own series.
    pub num: Option<&'static str>,
    pub den: Option<&'static str>,
}

impl Claim {
    /// The paper's number `paper` for row (series, x)'s `metric`.
    pub const fn value(
        what: &'static str,
        metric: Metric,
        num: (&'static str, &'static str),
        paper: f64,
    ) -> Claim {
        Claim {
            what,
            metric,
            num,
            den: None,
            paper,
            cause: None,
        }
    }

    /// The paper's factor `paper` between two rows' `metric`: num / den.
    pub const fn ratio(
        what: &'static str,
        metric: Metric,
        num: (&'static str, &'static str),
        den: (&'static str, &'static str),
        paper: f64,
    ) -> Claim {
        Claim {
            what,
            metric,
            num,
            den: Some(den),
            paper,
            cause: None,
        }
    }

    /// This claim with its cause `c` found.
    pub const fn because(self, c: Cause) -> Claim {
        Claim {
            cause: Some(c),
            ..self
        }
    }

    /// Ours, from the figure's records; None if a row is missing (a
    /// `--series` selection) or the denominator is 0. A row named
    /// `(series, PEAK)` is the series' largest value over its x (the
    /// paper quotes a peak, wherever it falls).
    pub fn ours(&self, recs: &[Record]) -> Option<f64> {
        self.measure(recs, self.num, self.den)
    }

    /// The claim measured with its cause switched to the paper's side
    /// (the cause's series at the claim's x); None without a cause or
    /// when those rows were not run.
    pub fn paper_side(&self, recs: &[Record]) -> Option<f64> {
        let c = self.cause.as_ref()?;
        let num = (c.num.unwrap_or(self.num.0), self.num.1);
        let den = self.den.map(|d| (c.den.unwrap_or(d.0), d.1));
        self.measure(recs, num, den)
    }

    fn measure(
        &self,
        recs: &[Record],
        num: (&str, &str),
        den: Option<(&str, &str)>,
    ) -> Option<f64> {
        let v = |(s, x): (&str, &str)| {
            let mut vals = recs
                .iter()
                .filter(|r| r.series == s && (x == PEAK || r.x == x))
                .map(|r| self.metric.of(r));
            if x == PEAK {
                vals.reduce(f64::max)
            } else {
                vals.next()
            }
        };
        let n = v(num)?;
        match den {
            None => Some(n),
            Some(d) => {
                let d = v(d)?;
                (d != 0.0).then(|| n / d)
            }
        }
    }
}

/// A cluster shape and data size: the flags every row of a figure shares.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub ms: u32,
    pub cs: u32,
    pub threads: u32,
    pub coros: u32,
    pub keys: u64,
    pub ops: u64,
}

impl Shape {
    /// The shape's flags followed by `extra`.
    pub fn flags(&self, extra: &str) -> String {
        format!(
            "--ms {} --cs {} --threads {} --coros {} --keys {} --ops {} {extra}",
            self.ms, self.cs, self.threads, self.coros, self.keys, self.ops
        )
    }

    /// The same proportions of clients to data at the quick size: at most
    /// `keys` keys and `ops` operations.
    pub fn quick(mut self, keys: u64, ops: u64) -> Shape {
        self.keys = self.keys.min(keys);
        self.ops = self.ops.min(ops);
        self
    }
}

/// A row: `series` at `x`, the shape's flags and `extra`, the paper's number.
pub fn row(series: &str, x: impl ToString, s: Shape, extra: &str, paper: Option<f64>) -> Row {
    Row {
        series: series.to_string(),
        x: x.to_string(),
        args: s.flags(extra).trim().to_string(),
        paper,
    }
}

/// Every figure, in the order `figure all` runs them.
pub static FIGURES: &[Figure] = &[
    sherman::TABLE1,
    sherman::FIG5,
    sherman::FIG6,
    sherman::FIG7,
    sherman::TABLE3,
    smart::FIG14,
    smart::FIG16,
    smart::FIG18,
    smart::FIG22A,
    dex::FIG6,
    dex::TABLE2,
    nam::CLIENTS,
    dolphin::MEMORY,
    dolphin::YCSB,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(series: &str, x: &str, mops: f64) -> Record {
        Record {
            series: series.into(),
            x: x.into(),
            mops,
            ..Default::default()
        }
    }

    #[test]
    fn a_peak_row_is_the_series_largest_value_wherever_it_falls() {
        let recs = [
            rec("a", "88", 3.0),
            rec("a", "176", 9.0),
            rec("a", "528", 6.0),
            rec("b", "88", 4.0),
            rec("b", "176", 2.0),
        ];
        let peak = Claim::value("", Metric::Mops, ("a", PEAK), 0.0);
        assert_eq!(peak.ours(&recs), Some(9.0));
        let peaks = Claim::ratio("", Metric::Mops, ("a", PEAK), ("b", PEAK), 0.0);
        assert_eq!(peaks.ours(&recs), Some(9.0 / 4.0));
        let at = Claim::ratio("", Metric::Mops, ("a", "528"), ("b", "176"), 0.0);
        assert_eq!(at.ours(&recs), Some(3.0));
        let missing = Claim::value("", Metric::Mops, ("c", PEAK), 0.0);
        assert_eq!(missing.ours(&recs), None);
    }
}

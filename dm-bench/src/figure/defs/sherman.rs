//! Sherman (SIGMOD'22; the text in ../shared/seeds/000): Table 1, Fig. 5-7,
//! Table 3. Cluster of §5.1: 8 MS, 8 CS x 22 threads, 1 KB nodes, 8-byte keys
//! and values bulk-loaded at 80% node fill, a 500 MB index cache per CS.
//! The ladders and Table 3 run 3 coroutines per thread (528 clients, as
//! Fig. 7's top point); §5 states 22 client threads per CS, 176 in all,
//! and the authors' `test/benchmark.cpp` defines `kCoroCnt = 3` but leaves
//! `USE_CORO` commented out, so it runs one client per thread: Table 1 and
//! the `-176` rows run 1 (issue 34). The paper loads 1 B keys; the full
//! size here loads 2 M (the leaf parents all fit the cache either way).
//! Workloads (Sherman Table 2): `write-only` (upserts), `write-intensive`
//! (50% upsert / 50% lookup), `read-intensive` (5/95), `range-only`,
//! `range-write` (50% upsert / 50% range).

use super::{row, Cause, Claim, Figure, Metric, Row, Shape, PEAK};

fn shape(quick: bool, coros: u32) -> Shape {
    let s = Shape {
        ms: 8,
        cs: 8,
        threads: 22,
        coros,
        keys: 2_000_000,
        ops: 400_000,
    };
    if quick {
        s.quick(10_000, 4_000)
    } else {
        s
    }
}

const COMMON: &str = "--load bulk --fill 0.8 --cache-mb 500 --node-bytes 1024";

/// Sherman's rungs, bottom to top (§5.1.1).
const RUNGS: [&str; 5] = [
    "fg",
    "sherman-combine",
    "sherman-onchip",
    "sherman-hier",
    "sherman",
];

pub const TABLE1: Figure = Figure {
    name: "sherman-table1",
    title: "FG (one-sided, index cache) under four mixes",
    source: "Sherman Table 1, §3",
    x_label: "mix",
    x_numeric: false,
    metric: Metric::Mops,
    rows: table1,
    claims: &[
        Claim::value(
            "FG write-intensive skewed collapses (Mops)",
            Metric::Mops,
            ("fg", "write-int. zipf"),
            0.34,
        )
        .because(NIC_PUS_T1),
        Claim::value(
            "FG write-intensive skewed p99 (us)",
            Metric::P99Us,
            ("fg", "write-int. zipf"),
            19890.0,
        )
        .because(NIC_PUS_T1),
        Claim::value(
            "FG read-intensive uniform (Mops)",
            Metric::Mops,
            ("fg", "read-int. uniform"),
            31.8,
        ),
        Claim::value(
            "FG write-intensive uniform (Mops)",
            Metric::Mops,
            ("fg", "write-int. uniform"),
            18.7,
        ),
    ],
};

/// Table 1's series with its cause switched (issue 34): the host-memory
/// atomics' bucket times of [`ATOMICS_2US`].
const FG_2US: &str = "fg-atomics-2us";

/// Twice the sim's default bucket times (1,000 and 500 ns), as the cause
/// of Table 1's collapse claims sets them.
const ATOMICS_2US: &str = "--host-atomic-ns 2000 --host-cas-fail-ns 1000";

fn table1(quick: bool) -> Vec<Row> {
    let s = shape(quick, 1);
    let cells = [
        ("read-int. uniform", "read-intensive", 0.0, 31.8),
        ("read-int. zipf", "read-intensive", 0.99, 32.9),
        ("write-int. uniform", "write-intensive", 0.0, 18.7),
        ("write-int. zipf", "write-intensive", 0.99, 0.34),
    ];
    let mut v = Vec::new();
    for (series, atomics) in [("fg", ""), (FG_2US, ATOMICS_2US), (FG_PUS, PUS)] {
        for &(x, w, theta, paper) in &cells {
            // FG retries a taken lock at once (Sherman §3.2.2) and releases
            // it by FAA (§3.1): no back-off, no WRITE unlock (FG+'s change).
            let extra = format!(
                "--index fg --workload {w} --theta {theta} --lock-backoff 0 --unlock-faa \
                 {COMMON} {atomics}"
            );
            v.push(row(series, x, s, extra.trim(), Some(paper)));
        }
    }
    v
}

/// Table 1's series on a NIC with processing units ([`PUS`]).
const FG_PUS: &str = "fg-nic-pus";

/// [`PUS`]'s flag, as a literal for `concat!` into the switches that add
/// to it (one place for the calibrated count).
macro_rules! pus {
    () => {
        "--nic-pus 64"
    };
}

/// The NIC processing units of the cause of Table 1's and Fig. 5's
/// collapse claims (`dm_verbs::sim::NetModel::nic_pus`): 64, the count
/// of {32, 48, 64, 80, 96, 128} whose larger deviation from Table 1's two
/// collapse figures is the least (docs/simulator.md).
const PUS: &str = pus!();

/// The cause of Table 1's collapse claims (issue 34). Table 1's atomic
/// times ([`ATOMICS_2US`]) land them too; the processing units also land
/// Fig. 5's ([`FIG5_PUS`]).
const NIC_PUS_T1: Cause = Cause {
    what: "the paper's NIC runs requests on a bounded set of processing units, each QP's in order, so a lock CAS waiting on its hot bucket holds back the other QPs of its unit (modelled, the count calibrated to this collapse); the sim's NIC lets only the bucket's own atomics wait, and the other three columns stay within 0.75-1.25",
    switch: PUS,
    num: Some(FG_PUS),
    den: None,
};

/// The ladder on the three mixes at skew `theta`: series = mix, x = rung.
fn ladder(quick: bool, theta: f64) -> Vec<Row> {
    let s = shape(quick, 3);
    let mut v = Vec::new();
    for w in ["write-only", "write-intensive", "read-intensive"] {
        for r in RUNGS {
            let extra = format!("--index {r} --workload {w} --theta {theta} {COMMON}");
            v.push(row(w, r, s, &extra, None));
        }
    }
    v
}

/// A ratio of two rungs' `metric` on mix `w`.
const fn step(
    what: &'static str,
    w: &'static str,
    m: Metric,
    hi: &'static str,
    lo: &'static str,
    paper: f64,
) -> Claim {
    Claim::ratio(what, m, (w, hi), (w, lo), paper)
}

pub const FIG5: Figure = Figure {
    name: "sherman-fig5",
    title: "technique ladder, skewed (zipf 0.99)",
    source: "Sherman Fig. 5, §5.1.1",
    x_label: "rung",
    x_numeric: false,
    metric: Metric::Mops,
    rows: fig5,
    claims: &[
        step(
            "write-intensive: Sherman / FG+ throughput",
            "write-intensive",
            Metric::Mops,
            "sherman",
            "fg",
            23.6,
        )
        .because(fig5_pus(FIG5_PUS[1].1)),
        step(
            "write-intensive: FG+ p99 / Sherman p99",
            "write-intensive",
            Metric::P99Us,
            "fg",
            "sherman",
            30.2,
        )
        .because(fig5_pus(FIG5_PUS[1].1)),
        step(
            "write-intensive: +combine throughput",
            "write-intensive",
            Metric::Mops,
            "sherman-combine",
            "fg",
            3.37,
        ),
        step(
            "write-intensive: +on-chip lock throughput",
            "write-intensive",
            Metric::Mops,
            "sherman-onchip",
            "sherman-combine",
            3.06,
        ),
        step(
            "write-intensive: +hierarchical lock throughput",
            "write-intensive",
            Metric::Mops,
            "sherman-hier",
            "sherman-onchip",
            2.22,
        ),
        step(
            "write-intensive: +two-level versions throughput",
            "write-intensive",
            Metric::Mops,
            "sherman",
            "sherman-hier",
            1.03,
        ),
        step(
            "write-only: Sherman / FG+ throughput",
            "write-only",
            Metric::Mops,
            "sherman",
            "fg",
            24.7,
        )
        .because(fig5_pus(FIG5_PUS[0].1)),
        step(
            "write-only: FG+ p99 / Sherman p99",
            "write-only",
            Metric::P99Us,
            "fg",
            "sherman",
            35.8,
        )
        .because(fig5_pus(FIG5_PUS[0].1)),
    ],
};

/// Fig. 5's write mixes at §5's 176 client threads on a NIC with
/// processing units ([`PUS`]): FG+ and Sherman, series `<mix>-176-pus`
/// (issue 34).
const FIG5_PUS: [(&str, &str); 2] = [
    ("write-only", "write-only-176-pus"),
    ("write-intensive", "write-intensive-176-pus"),
];

fn fig5(quick: bool) -> Vec<Row> {
    ladder_and_176(quick, 0.99, FIG5_PUS, PUS)
}

/// The ladder at skew `theta` ([`ladder`]), then FG+ and Sherman at §5's
/// 176 client threads (one coroutine each) on each `(mix, series)` of
/// `at`, with the sim flags `extra`.
fn ladder_and_176(quick: bool, theta: f64, at: [(&str, &str); 2], extra: &str) -> Vec<Row> {
    let mut v = ladder(quick, theta);
    let s = shape(quick, 1);
    for (w, series) in at {
        for r in ["fg", "sherman"] {
            let args = format!("--index {r} --workload {w} --theta {theta} {COMMON} {extra}");
            v.push(row(series, r, s, args.trim(), None));
        }
    }
    v
}

/// The cause of Fig. 5's end-to-end claims (issue 34), on mix series
/// `series`: the client count of Fig. 6's p99 cause and the processing
/// units of Table 1's ([`NIC_PUS_T1`]). The middle rungs' split it does
/// not give (docs/experiments/claims-sherman.md, sherman-fig5).
const fn fig5_pus(series: &'static str) -> Cause {
    Cause {
        what: "the paper runs 176 client threads (§5), on NICs whose processing units let a hot lock's queued CASes hold back other QPs' verbs (modelled, the count calibrated to Table 1's FG collapse); at our 528 without units FG+ collapses deeper, at 176 without them it does not collapse",
        switch: concat!("--coros 1 ", pus!()),
        num: Some(series),
        den: Some(series),
    }
}

/// Fig. 6's write mixes at the 176 client threads §5 states ("22 client
/// threads per CS, 176 in total"; the ladder's rows run 3 coroutines per
/// thread, 528): FG+ and Sherman, series `<mix>-176` (issue 34).
const AT_176: [(&str, &str); 2] = [
    ("write-only", "write-only-176"),
    ("write-intensive", "write-intensive-176"),
];

fn fig6(quick: bool) -> Vec<Row> {
    ladder_and_176(quick, 0.0, AT_176, "")
}

/// The cause of Fig. 6's p99 claims (issue 34), on mix series `series`.
const fn at_176(series: &'static str) -> Cause {
    Cause {
        what: "the paper runs 176 client threads (§5: 22 per CS; the authors' benchmark leaves USE_CORO off); ours run 3 coroutines per thread, 528, which keep the MS NICs near saturation, where every rung's p99 is queueing",
        switch: "--coros 1",
        num: Some(series),
        den: Some(series),
    }
}

pub const FIG6: Figure = Figure {
    name: "sherman-fig6",
    title: "technique ladder, uniform",
    source: "Sherman Fig. 6, §5.1.2",
    x_label: "rung",
    x_numeric: false,
    metric: Metric::Mops,
    rows: fig6,
    claims: &[
        step(
            "write-only: Sherman / FG+ throughput",
            "write-only",
            Metric::Mops,
            "sherman",
            "fg",
            1.24,
        ),
        step(
            "write-intensive: Sherman / FG+ throughput",
            "write-intensive",
            Metric::Mops,
            "sherman",
            "fg",
            1.15,
        ),
        step(
            "write-only: FG+ p99 / Sherman p99",
            "write-only",
            Metric::P99Us,
            "fg",
            "sherman",
            2.01,
        )
        .because(at_176(AT_176[0].1)),
        step(
            "write-intensive: FG+ p99 / Sherman p99",
            "write-intensive",
            Metric::P99Us,
            "fg",
            "sherman",
            1.27,
        )
        .because(at_176(AT_176[1].1)),
    ],
};

/// Clients (all CSs) of Fig. 7's x axis: threads per CS x coroutines.
const FIG7_CLIENTS: [(u32, u32); 4] = [(11, 1), (22, 1), (22, 2), (22, 3)];

fn fig7(quick: bool) -> Vec<Row> {
    let mut v = Vec::new();
    for (tag, theta) in [("uniform", 0.0), ("zipf 0.9", 0.9), ("zipf 0.99", 0.99)] {
        for idx in ["sherman", "fg"] {
            for (t, c) in FIG7_CLIENTS {
                if quick && (t, c) != (22, 1) && (t, c) != (22, 3) {
                    continue;
                }
                let mut s = shape(quick, c);
                s.threads = t;
                let extra =
                    format!("--index {idx} --workload write-intensive --theta {theta} {COMMON}");
                v.push(row(&format!("{idx} {tag}"), 8 * t * c, s, &extra, None));
            }
        }
    }
    v
}

pub const FIG7: Figure = Figure {
    name: "sherman-fig7",
    title: "scalability, write-intensive",
    source: "Sherman Fig. 7, §5.3",
    x_label: "clients",
    x_numeric: true,
    metric: Metric::Mops,
    rows: fig7,
    claims: &[
        Claim::value(
            "Sherman uniform at 528 clients (Mops)",
            Metric::Mops,
            ("sherman uniform", "528"),
            44.0,
        ),
        Claim::ratio(
            "uniform, 528 clients: Sherman / FG+",
            Metric::Mops,
            ("sherman uniform", "528"),
            ("fg uniform", "528"),
            1.14,
        ),
        Claim::value(
            "Sherman zipf 0.9, peak over clients (Mops)",
            Metric::Mops,
            ("sherman zipf 0.9", PEAK),
            21.0,
        ),
        Claim::ratio(
            "zipf 0.9, peaks: Sherman / FG+",
            Metric::Mops,
            ("sherman zipf 0.9", PEAK),
            ("fg zipf 0.9", PEAK),
            1.44,
        ),
        Claim::value(
            "Sherman zipf 0.99, peak over clients (Mops)",
            Metric::Mops,
            ("sherman zipf 0.99", PEAK),
            9.0,
        ),
        Claim::ratio(
            "zipf 0.99, peaks: Sherman / FG+",
            Metric::Mops,
            ("sherman zipf 0.99", PEAK),
            ("fg zipf 0.99", PEAK),
            1.4,
        ),
    ],
};

fn table3(quick: bool) -> Vec<Row> {
    let s = shape(quick, 3);
    let mut v = Vec::new();
    for (idx, papers) in [
        ("fg", [26.09, 5.77, 7.74, 2.49]),
        ("sherman", [25.55, 5.76, 14.08, 3.12]),
    ] {
        let cells = [
            ("range-only", 100),
            ("range-only", 1000),
            ("range-write", 100),
            ("range-write", 1000),
        ];
        for ((w, len), p) in cells.iter().zip(papers) {
            let extra =
                format!("--index {idx} --workload {w} --scan-len {len} --theta 0.99 {COMMON}");
            v.push(row(idx, format!("{w} {len}"), s, &extra, Some(p)));
        }
        // The claim's cell at the paper's 176 clients (issue 34).
        let extra =
            format!("--index {idx} --workload range-write --scan-len 100 --theta 0.99 {COMMON}");
        let s1 = shape(quick, 1);
        v.push(row(
            &format!("{idx}-176"),
            "range-write 100",
            s1,
            &extra,
            None,
        ));
    }
    v
}

pub const TABLE3: Figure = Figure {
    name: "sherman-table3",
    title: "range queries (skewed starts)",
    source: "Sherman Table 3, §5.2",
    x_label: "mix, range size",
    x_numeric: false,
    metric: Metric::Mops,
    rows: table3,
    claims: &[Claim::ratio(
        "range-write 100: Sherman / FG+",
        Metric::Mops,
        ("sherman", "range-write 100"),
        ("fg", "range-write 100"),
        1.82,
    )
    .because(Cause {
        what: "the paper runs 176 client threads (§5: 22 per CS; the authors' benchmark leaves USE_CORO off); at our 3 coroutines per thread, 528, FG+ collapses on the hot leaves' locks as in the write-intensive mix (sherman-fig5), at 176 it does not",
        switch: "--coros 1",
        num: Some("sherman-176"),
        den: Some("fg-176"),
    })],
};

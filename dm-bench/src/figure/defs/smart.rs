//! SMART (OSDI'23; the journal text in ../shared/seeds/001 numbers its
//! figures differently: 14 = OSDI 11, 16 = 13, 18 = 15, 22a = 18a). Cluster
//! of §5.1: 2 MS, 16 CS, 2 coroutines per thread (the artifact), 8-byte
//! integer keys and values, zipf 0.99; the paper loads 60 M keys with a
//! 600 MB cache per CS, the full size here 1 M keys with the default 64 MiB
//! (SMART's cache holds every internal node either way).
//! Series: `smart` (all techniques), `sherman` (32 entries per leaf, as
//! SMART ran it: `SHERMAN_SPAN_32`), `art` (the DM-ported ART:
//! ROWEX node locks, RCU leaves, HOCL); in smart-fig14 also each at 56
//! threads per CS (`-896`), D with the trace in chunks (`-chunks`), and
//! Sherman with the published code's cache use (`-authors`).

use super::{Cause, Claim, Figure, Metric, Row, Shape};

/// A row on SMART's testbed NIC (§5.1.1: ConnectX-6; `--nic cx6`), with
/// Sherman's nodes as SMART ran them ([`SHERMAN_SPAN_32`]).
fn row(series: &str, x: impl ToString, s: Shape, extra: &str, paper: Option<f64>) -> Row {
    let extra = if extra.starts_with("--index sherman ") {
        format!("{extra} {SHERMAN_SPAN_32} --nic cx6")
    } else {
        format!("{extra} --nic cx6")
    };
    super::row(series, x, s, &extra, paper)
}

/// SMART ran Sherman "with the default configuration (e.g., a span size
/// of 32 ...)" (§5.1.3; §3.2.1 "Sherman, whose span size is 32"; the
/// artifact's fork sets `spanSize = 32` for every figure): 32 entries per
/// leaf. Our unsorted leaf holds them in 816 bytes with 8-byte keys (48
/// bytes of header and fence keys, then 24-byte slots: key, value, check
/// word), where the artifact's 18-byte entries make a 623-byte leaf.
const SHERMAN_SPAN_32: &str = "--node-bytes 816";

fn shape(quick: bool, threads: u32) -> Shape {
    let s = Shape {
        ms: 2,
        cs: 16,
        threads,
        coros: 2,
        keys: 1_000_000,
        ops: 1_000_000,
    };
    if quick {
        // 4 CSs: the DM-ported ART's insert load from an empty tree with
        // 16 CSs of clients retries its root lock for seconds of wall time.
        Shape {
            cs: 4,
            ..s.quick(10_000, 5_000)
        }
    } else {
        s
    }
}

const INDEXES: [&str; 3] = ["smart", "sherman", "art"];

/// Client threads per CS at the top of the paper's throughput-latency
/// curves (§5.1: 16-896 clients over 16 CNs, each client a core with 2
/// coroutines); Fig. 11/14's ratios compare those curves' peaks.
const PEAK_THREADS: u32 = 56;

/// Each index's series: at 8 client threads per CS and at [`PEAK_THREADS`]
/// (16 x 56 client threads).
const SMART: (&str, &str) = ("smart", "smart-896");
const SHERMAN: (&str, &str) = ("sherman", "sherman-896");
const ART: (&str, &str) = ("art", "art-896");
const SERIES: [(&str, &str); 3] = [SMART, SHERMAN, ART];

/// The cause of the Fig. 14 claims (issue 34): our rows run 8 client
/// threads per CS, where SMART is bound by its clients' CPU (the charge
/// per operation) and Sherman already by the two MS links; the paper's
/// ratios are at the top of its curves, 56 threads per CN.
const AT_PEAK: Cause = Cause {
    what: "the paper compares its curves' peaks (up to 56 client threads per CN); ours run 8 per CS, where SMART is bound by client CPU and Sherman already by the MS links",
    switch: "--threads 56",
    num: Some(SMART.1),
    den: None,
};

/// [`AT_PEAK`] for a claim over index `den`'s series.
const fn at_peak(den: &'static str) -> Cause {
    Cause {
        den: Some(den),
        ..AT_PEAK
    }
}

/// `a / b` of Mops on workload `x`.
const fn ratio(
    what: &'static str,
    x: &'static str,
    a: &'static str,
    b: &'static str,
    paper: f64,
) -> Claim {
    Claim::ratio(what, Metric::Mops, (a, x), (b, x), paper)
}

/// SMART over baseline `b` on workload `x`.
const fn over(
    what: &'static str,
    x: &'static str,
    b: (&'static str, &'static str),
    paper: f64,
) -> Claim {
    ratio(what, x, SMART.0, b.0, paper)
}

/// [`over`], with [`AT_PEAK`] as its cause: only the claims it explains
/// (LOAD and A over ART move further from the paper at the peak, D needs
/// [`d_chunks`] too; docs/experiments/claims-smart.md gives those numbers).
/// Over Sherman the paper's side is also the published Sherman's cache
/// use ([`PEAK_AUTHORS`]).
const fn over_at_peak(
    what: &'static str,
    x: &'static str,
    b: (&'static str, &'static str),
    paper: f64,
) -> Claim {
    over(what, x, b, paper).because(at_peak(b.1))
}

/// The Sherman series at [`PEAK_THREADS`] with the published code's cache
/// use (`--sherman-cache authors`), on A, B and C, and on D with the
/// trace in chunks ([`D_CHUNKS`]).
const SHERMAN_PEAK_AUTHORS: &str = "sherman-896-authors";
const SHERMAN_CHUNKS_AUTHORS: &str = "sherman-896-chunks-authors";

/// The cause of the A, B and C claims over Sherman (issue 34): the
/// client count of [`AT_PEAK`], and the Sherman SMART ran: its code as
/// published (§5.1.3, [`AUTHORS_CACHE`]), whose index cache holds leaf
/// parents only, so a miss READs every level from the root where ours
/// READs below its cached top two levels.
const PEAK_AUTHORS: Cause = Cause {
    what: "the paper compares its curves' peaks (up to 56 client threads per CN), and ran the published Sherman code, whose cache holds leaf parents only (a miss READs from the root); ours run 8 per CS, where SMART is bound by client CPU and Sherman already by the MS links",
    switch: "--threads 56 (both); --sherman-cache authors (Sherman)",
    num: Some(SMART.1),
    den: Some(SHERMAN_PEAK_AUTHORS),
};

/// [`over`] Sherman, with [`PEAK_AUTHORS`] as its cause.
const fn over_sherman_at_peak(what: &'static str, x: &'static str, paper: f64) -> Claim {
    over(what, x, SHERMAN, paper).because(PEAK_AUTHORS)
}

const WORKLOADS: [&str; 5] = ["load", "a", "b", "c", "d"];

/// Each index's YCSB D series at [`PEAK_THREADS`] with the trace dealt to
/// the clients in contiguous chunks (`--split chunks`).
const D_CHUNKS: [(&str, &str); 3] = [
    ("smart", "smart-896-chunks"),
    ("sherman", "sherman-896-chunks"),
    ("art", "art-896-chunks"),
];

/// The cause of the D claims (issue 34): the client count of [`AT_PEAK`],
/// and the artifact's split of its trace (`ycsb/split_workload.py`: client
/// i replays the i-th contiguous chunk), under which YCSB D's reads of the
/// latest keys mostly find keys their own client inserted, and cached, just
/// before; ours deal operations round-robin, so such a key was inserted by
/// another CS and SMART's and ART's caches miss its new slot.
const fn d_chunks(den: &'static str) -> Cause {
    Cause {
        what: "the paper compares its curves' peaks (56 client threads per CN), and its artifact deals the trace to clients in contiguous chunks, so a D read of a latest key mostly finds one its own client inserted and cached; ours deal operations round-robin over 8 threads per CS",
        switch: "--threads 56 --split chunks",
        num: Some(D_CHUNKS[0].1),
        den: Some(den),
    }
}

/// [`d_chunks`] over Sherman as SMART ran it ([`PEAK_AUTHORS`]): its
/// inserts split leaves, and a cached leaf parent a split left stale
/// sends the published code's next operation there back to the root.
const D_CHUNKS_AUTHORS: Cause = Cause {
    what: "the paper compares its curves' peaks (56 client threads per CN), its artifact deals the trace to clients in contiguous chunks (a D read of a latest key mostly finds one its own client inserted and cached), and it ran the published Sherman code, whose cache holds leaf parents only; ours deal operations round-robin over 8 threads per CS",
    switch: "--threads 56 --split chunks (both); --sherman-cache authors (Sherman)",
    num: Some(D_CHUNKS[0].1),
    den: Some(SHERMAN_CHUNKS_AUTHORS),
};

/// The Sherman series with the published code's cache use
/// (`--sherman-cache authors`), on the LOAD workload.
const SHERMAN_AUTHORS: &str = "sherman-authors";

/// The cause of the LOAD claim over Sherman (issue 34): SMART ran
/// Sherman's code as published (§5.1.3), which drops a cached leaf parent
/// a split left stale and traverses from the root, READing each level
/// (`dm_tree::ShermanCache::Authors`); ours moves right along siblings and
/// caches the top two levels too. Inserts split leaves, so LOAD is where
/// the two differ; the Sherman row is bound by its MS links' READ bytes.
const AUTHORS_CACHE: Cause = Cause {
    what: "SMART ran the published Sherman code, which drops a cache entry a split left stale and traverses from the root (its cache holds leaf parents only); ours moves right along siblings and caches the top two levels",
    switch: "--sherman-cache authors",
    num: None,
    den: Some(SHERMAN_AUTHORS),
};

fn fig14(quick: bool) -> Vec<Row> {
    let mut v = Vec::new();
    for (threads, at_peak) in [(8, false), (PEAK_THREADS, true)] {
        let s = shape(quick, threads);
        for (idx, peak) in SERIES {
            let series = if at_peak { peak } else { idx };
            for w in WORKLOADS {
                let extra = format!("--index {idx} --workload {w}");
                v.push(row(series, w, s, &extra, None));
            }
        }
    }
    let s = shape(quick, PEAK_THREADS);
    for (idx, series) in D_CHUNKS {
        let extra = format!("--index {idx} --workload d --split chunks");
        v.push(row(series, "d", s, &extra, None));
    }
    let extra = "--index sherman --workload load --sherman-cache authors";
    v.push(row(SHERMAN_AUTHORS, "load", shape(quick, 8), extra, None));
    for w in ["a", "b", "c"] {
        let extra = format!("--index sherman --workload {w} --sherman-cache authors");
        v.push(row(SHERMAN_PEAK_AUTHORS, w, s, &extra, None));
    }
    let extra = "--index sherman --workload d --split chunks --sherman-cache authors";
    v.push(row(SHERMAN_CHUNKS_AUTHORS, "d", s, extra, None));
    v
}

pub const FIG14: Figure = Figure {
    name: "smart-fig14",
    title:
        "YCSB LOAD, A-D, integer keys, 8 and 56 client threads per CS (256 and 1,792 coroutines)",
    source: "SMART Fig. 11 (journal Fig. 14), §5.2",
    x_label: "workload",
    x_numeric: false,
    metric: Metric::Mops,
    rows: fig14,
    claims: &[
        over_sherman_at_peak("A: SMART / Sherman", "a", 6.1),
        over("A: SMART / ART", "a", ART, 3.4),
        over_sherman_at_peak("B: SMART / Sherman", "b", 2.4),
        over_at_peak("B: SMART / ART", "b", ART, 1.8),
        over_sherman_at_peak("C: SMART / Sherman", "c", 2.8),
        over("C: SMART / ART", "c", ART, 1.2),
        over("D: SMART / Sherman", "d", SHERMAN, 2.4).because(D_CHUNKS_AUTHORS),
        over("D: SMART / ART", "d", ART, 1.4).because(d_chunks(D_CHUNKS[2].1)),
        over("LOAD: SMART / Sherman", "load", SHERMAN, 1.6).because(AUTHORS_CACHE),
        over("LOAD: SMART / ART", "load", ART, 1.5),
    ],
};

fn fig16(quick: bool) -> Vec<Row> {
    let mut v = Vec::new();
    for idx in INDEXES {
        for t in [4, 8, 16, 28] {
            if quick && t != 4 && t != 28 {
                continue;
            }
            let s = shape(quick, t);
            let clients = s.cs * s.threads * s.coros;
            v.push(row(
                idx,
                clients,
                s,
                &format!("--index {idx} --workload a"),
                None,
            ));
        }
    }
    v
}

pub const FIG16: Figure = Figure {
    name: "smart-fig16",
    title: "scalability, YCSB A (zipf 0.99)",
    source: "SMART Fig. 13 (journal Fig. 16), §5.2.1",
    x_label: "clients",
    x_numeric: true,
    metric: Metric::Mops,
    rows: fig16,
    // The paper states no number: ART collapses with more clients, SMART scales.
    claims: &[],
};

/// SMART's factor analysis (§5.3.1): each technique added to the one below,
/// measured on the workload the paper uses for it.
const FIG18_ROWS: [(&str, &str, &str); 10] = [
    ("+lock-free internal", "load", "--index art"),
    ("+lock-free internal", "load", "--index lockfree-art"),
    ("+in-place leaf", "b", "--index lockfree-art"),
    ("+in-place leaf", "b", "--index smart-inplace"),
    ("+rear-embedded lock", "a", "--index smart-inplace"),
    (
        "+rear-embedded lock",
        "a",
        "--index smart --smart-off rd,wc",
    ),
    ("+read delegation", "c", "--index smart --smart-off rd,wc"),
    ("+read delegation", "c", "--index smart --smart-off wc"),
    ("+write combining", "a", "--index smart --smart-off wc"),
    ("+write combining", "a", "--index smart"),
];

fn fig18(quick: bool) -> Vec<Row> {
    let s = shape(quick, 12);
    FIG18_ROWS
        .iter()
        .enumerate()
        .map(|(i, &(tech, w, idx))| {
            let x = if i % 2 == 0 { "before" } else { "after" };
            row(tech, x, s, &format!("{idx} --workload {w}"), None)
        })
        .collect()
}

const fn step(what: &'static str, tech: &'static str, paper: f64) -> Claim {
    Claim::ratio(what, Metric::Mops, (tech, "after"), (tech, "before"), paper)
}

pub const FIG18: Figure = Figure {
    name: "smart-fig18",
    title: "factor analysis: each technique on its workload, 384 clients",
    source: "SMART Fig. 15 (journal Fig. 18), §5.3.1",
    x_label: "technique",
    x_numeric: false,
    metric: Metric::Mops,
    rows: fig18,
    claims: &[
        step(
            "lock-free internal nodes (LOAD)",
            "+lock-free internal",
            1.5,
        ),
        step("update-in-place leaves (B)", "+in-place leaf", 1.5),
        step("rear-embedded lock (A)", "+rear-embedded lock", 3.0),
        step("read delegation (C)", "+read delegation", 1.1),
        step("write combining (A)", "+write combining", 1.1),
    ],
};

const THETAS: [f64; 6] = [0.5, 0.6, 0.7, 0.8, 0.9, 0.99];

fn fig22a(quick: bool) -> Vec<Row> {
    let s = shape(quick, 8);
    let mut v = Vec::new();
    for idx in INDEXES {
        for th in THETAS {
            if quick && th != 0.5 && th != 0.99 {
                continue;
            }
            let extra = format!("--index {idx} --workload a --theta {th}");
            v.push(row(idx, th, s, &extra, None));
        }
    }
    v
}

const fn fall(what: &'static str, idx: &'static str, paper: f64) -> Claim {
    Claim::ratio(what, Metric::Mops, (idx, "0.5"), (idx, "0.99"), paper)
}

pub const FIG22A: Figure = Figure {
    name: "smart-fig22a",
    title: "skew sweep, 50% search / 50% update, 256 clients",
    source: "SMART Fig. 18a (journal Fig. 22a), §5.4.1",
    x_label: "zipf theta",
    x_numeric: true,
    metric: Metric::Mops,
    rows: fig22a,
    claims: &[
        fall("SMART: throughput at 0.5 / at 0.99", "smart", 2.6),
        fall("ART: throughput at 0.5 / at 0.99", "art", 2.6),
        fall("Sherman: throughput at 0.5 / at 0.99", "sherman", 7.4),
    ],
};

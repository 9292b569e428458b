//! Dolphin (../shared/seeds/004): Table II / Fig. 6 (memory) and Fig. 7
//! (YCSB). Cluster of §IV-A: 4 MS, 4 CS x 18 threads, 2 coroutines per
//! thread (as docs/experiments/dolphin.md), 1 KB leaves, 8-byte values,
//! dense integer keys (`--key-order ordered`), zipf 0.99. The paper loads
//! 512 M keys; the full size here 200,000 (YCSB) and 1 M (memory).
//! Not expressible: Marlin; a key space only half filled.

use super::{row, Claim, Figure, Metric, Row, Shape};

fn shape(quick: bool, keys: u64) -> Shape {
    let s = Shape {
        ms: 4,
        cs: 4,
        threads: 18,
        coros: 2,
        keys,
        ops: 400_000,
    };
    if quick {
        s.quick(10_000, 4_000)
    } else {
        s
    }
}

const INDEXES: [&str; 3] = ["dolphin", "smart", "sherman"];

fn ycsb(quick: bool) -> Vec<Row> {
    let s = shape(quick, 200_000);
    let mut v = Vec::new();
    for idx in INDEXES {
        for w in ["load", "a", "c"] {
            let extra = format!("--index {idx} --workload {w} --key-order ordered --cache-mb 64");
            v.push(row(idx, w, s, &extra, None));
        }
    }
    v
}

pub const YCSB: Figure = Figure {
    name: "dolphin-ycsb",
    title: "YCSB LOAD, A, C with a large cache",
    source: "Dolphin Fig. 7, §IV-C",
    x_label: "workload",
    x_numeric: false,
    metric: Metric::Mops,
    rows: ycsb,
    claims: &[
        Claim::value("A: Dolphin p50 (us)", Metric::P50Us, ("dolphin", "a"), 5.5),
        Claim::ratio(
            "A: Dolphin / Sherman (paper: 1.25-1.45x the others)",
            Metric::Mops,
            ("dolphin", "a"),
            ("sherman", "a"),
            1.25,
        ),
        Claim::ratio(
            "A: Dolphin / SMART (paper: 1.25-1.45x the others)",
            Metric::Mops,
            ("dolphin", "a"),
            ("smart", "a"),
            1.25,
        ),
        Claim::ratio(
            "LOAD: Dolphin / SMART (paper: SMART about 1.54x lower)",
            Metric::Mops,
            ("dolphin", "load"),
            ("smart", "load"),
            1.54,
        ),
    ],
};

/// Cache sizes per CS (MiB) of the sweep; the last is past every index's plateau.
const CACHE_MB: [u32; 6] = [0, 2, 4, 8, 32, 64];

fn memory(quick: bool) -> Vec<Row> {
    let s = shape(quick, 1_000_000);
    let mut v = Vec::new();
    for idx in INDEXES {
        for mb in CACHE_MB {
            if quick && mb != 0 && mb != 64 {
                continue;
            }
            let extra = format!("--index {idx} --workload c --key-order ordered --cache-mb {mb}");
            v.push(row(idx, mb, s, &extra, None));
        }
    }
    v
}

pub const MEMORY: Figure = Figure {
    name: "dolphin-memory",
    title: "throughput over the CS cache size, YCSB C (the CS cache MiB column: Table II)",
    source: "Dolphin Table II and Fig. 6, §IV-B/F",
    x_label: "cache per CS, MiB",
    x_numeric: true,
    metric: Metric::Mops,
    rows: memory,
    claims: &[
        Claim::ratio(
            "CS cache at the plateau: SMART / Dolphin",
            Metric::CsCacheMib,
            ("smart", "64"),
            ("dolphin", "64"),
            16.25,
        ),
        Claim::ratio(
            "CS cache at the plateau: Sherman / Dolphin",
            Metric::CsCacheMib,
            ("sherman", "64"),
            ("dolphin", "64"),
            1.44,
        ),
    ],
};

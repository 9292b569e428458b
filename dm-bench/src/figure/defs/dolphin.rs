//! Dolphin (../shared/seeds/004): Table II / Fig. 6 (memory) and Fig. 7
//! (YCSB). Cluster of §IV-A: 4 MS, 4 CS x 18 threads, 2 coroutines per
//! thread (as docs/experiments/dolphin.md; the `-72` rows run one, as the
//! authors' benchmark does, issue 34), 1 KB leaves, 8-byte values,
//! dense integer keys (`--key-order ordered`), zipf 0.99. The paper loads
//! 512 M keys; the full size here 200,000 (YCSB) and 1 M (memory).
//! Not expressible: Marlin; a key space only half filled.

use super::{row, Cause, Claim, Figure, Metric, Row, Shape};

fn shape(quick: bool, keys: u64) -> Shape {
    shape_coros(quick, keys, 2)
}

fn shape_coros(quick: bool, keys: u64, coros: u32) -> Shape {
    let s = Shape {
        ms: 4,
        cs: 4,
        threads: 18,
        coros,
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

/// Dolphin with the paper's update (issue 34): one WRITE of the item, last
/// writer wins (`--dolphin-update paper`), and with the authors' code's,
/// which also returns without waiting for that WRITE (`authors`). YCSB A
/// only: LOAD and C run no update.
const DOLPHIN_PAPER: &str = "dolphin-paper";
const DOLPHIN_AUTHORS: &str = "dolphin-authors";

fn ycsb(quick: bool) -> Vec<Row> {
    let s = shape(quick, 200_000);
    let mut v = Vec::new();
    let flags = |idx: &str, w: &str| {
        format!("--workload {w} --key-order ordered --cache-mb 64 --index {idx}")
    };
    for idx in INDEXES {
        for w in ["load", "a", "c"] {
            v.push(row(idx, w, s, &flags(idx, w), None));
        }
    }
    for (series, update) in [(DOLPHIN_PAPER, "paper"), (DOLPHIN_AUTHORS, "authors")] {
        let extra = format!("{} --dolphin-update {update}", flags("dolphin", "a"));
        v.push(row(series, "a", s, &extra, None));
    }
    for (series, idx) in SCATTERED {
        let extra = flags(idx, "load").replace("--key-order ordered", "--key-order scattered");
        v.push(row(series, "load", s, &extra, None));
    }
    let extra = format!("{} --smart-drop-stale-hints", flags("smart", "load"));
    v.push(row(SMART_DROP, "load", s, &extra, None));
    let s1 = shape_coros(quick, 200_000, 1);
    for (series, idx) in AT_72 {
        v.push(row(series, "a", s1, &flags(idx, "a"), None));
    }
    v
}

/// YCSB A at the paper's 72 client threads (issue 34): §IV-A runs 18
/// threads per CS, and the authors' `test/ycsb_test.cpp` leaves
/// `USE_CORO` undefined, so each thread has one operation in flight; our
/// rows run 2 coroutines per thread, 144 clients.
const AT_72: [(&str, &str); 3] = [
    ("dolphin-72", "dolphin"),
    ("smart-72", "smart"),
    ("sherman-72", "sherman"),
];

/// The cause of Dolphin / Sherman on YCSB A (issue 34): the client count.
/// At 144 clients the hot keys' concurrent updates collide (Dolphin's lost
/// CASes run again, Sherman's writers queue on leaf locks); at 72 every
/// index is bound by its round trips per operation, the paper's argument
/// for Dolphin's lead (2 RTTs per update against 3).
const AT_72_CAUSE: Cause = Cause {
    what: "the paper runs 72 client threads (§IV-A: 18 per CS; the authors' ycsb_test leaves USE_CORO off); ours run 2 coroutines per thread, 144, where a hot key's concurrent updates collide; at 72 each index is bound by its round trips per operation",
    switch: "--coros 1",
    num: Some(AT_72[0].0),
    den: Some(AT_72[2].0),
};

/// LOAD with the keys inserted in no order (issue 34): each index's
/// series with `--key-order scattered` (dense keys, half the key space
/// filled, scrambled insertion order).
const SCATTERED: [(&str, &str); 3] = [
    ("dolphin-scattered", "dolphin"),
    ("smart-scattered", "smart"),
    ("sherman-scattered", "sherman"),
];

/// SMART's LOAD with the artifact's ART cache policy for a stale node
/// type hint: the entry is dropped (`--smart-drop-stale-hints`).
const SMART_DROP: &str = "smart-drop-stale";

/// The cause of the LOAD claim (issue 34): the authors' SMART drops a
/// cached node whose type hint a READ finds stale, where ours refreshes
/// the hint; with the dense keys inserted in order each insert grows the
/// last nodes, so the authors' SMART READs their parents again (the
/// paper's own reason: "each insert invalidates a cached internal node").
/// Until 2026-11-28 our cache kept stale hints, and the claim's cause was
/// the insertion order (the `-scattered` rows, kept).
const STALE_HINTS: Cause = Cause {
    what: "the authors' SMART drops a cached node whose type hint a READ finds stale (the paper: each insert invalidates a cached internal node), ours refreshes the hint; dense keys inserted in order grow the last nodes on every insert",
    switch: "--smart-drop-stale-hints",
    num: None,
    den: Some(SMART_DROP),
};

/// The cause of Dolphin's YCSB A throughput (issue 34): our update CASes
/// the item's key word so that a READ torn at 8 bytes cannot pair a key
/// word with another value, and only one of a hot key's concurrent
/// updates wins its CAS (the others run again); the paper's update WRITEs
/// the item and lets the last WRITE win, relying on 64-byte WRITE
/// atomicity.
const PAPER_UPDATE: Cause = Cause {
    what: "our update CASes the key word (sound under 8-byte torn READs), so of a hot key's concurrent updates one wins and the rest run again; the paper's WRITEs the item, last writer wins (64-byte WRITE atomicity assumed)",
    switch: "--dolphin-update paper",
    num: Some(DOLPHIN_PAPER),
    den: None,
};

/// The cause of Dolphin's YCSB A p50 (issue 34): the authors' code posts
/// an update's second doorbell unsignaled and does not wait for it, so an
/// update takes one round trip, not two.
const AUTHORS_UPDATE: Cause = Cause {
    what: "the authors' code returns from an update without waiting for its WRITE (one round trip; not linearizable), ours waits for both round trips",
    switch: "--dolphin-update authors",
    num: Some(DOLPHIN_AUTHORS),
    den: None,
};

pub const YCSB: Figure = Figure {
    name: "dolphin-ycsb",
    title: "YCSB LOAD, A, C with a large cache",
    source: "Dolphin Fig. 7, §IV-C",
    x_label: "workload",
    x_numeric: false,
    metric: Metric::Mops,
    rows: ycsb,
    claims: &[
        Claim::value("A: Dolphin p50 (us)", Metric::P50Us, ("dolphin", "a"), 5.5)
            .because(AUTHORS_UPDATE),
        Claim::ratio(
            "A: Dolphin / Sherman (paper: 1.25-1.45x the others)",
            Metric::Mops,
            ("dolphin", "a"),
            ("sherman", "a"),
            1.25,
        )
        .because(AT_72_CAUSE),
        Claim::ratio(
            "A: Dolphin / SMART (paper: 1.25-1.45x the others)",
            Metric::Mops,
            ("dolphin", "a"),
            ("smart", "a"),
            1.25,
        )
        .because(PAPER_UPDATE),
        Claim::ratio(
            "LOAD: Dolphin / SMART (paper: SMART about 1.54x lower)",
            Metric::Mops,
            ("dolphin", "load"),
            ("smart", "load"),
            1.54,
        )
        .because(STALE_HINTS),
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

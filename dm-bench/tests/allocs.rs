//! Heap allocations per warm operation (issue 32, item 2), read from
//! `ycsb`'s counting allocator (`allocs_per_op`, run phase) on loopback.
//! A regression guard, not yet the zero: the warm get and update
//! paths of these indexes allocate nothing (READ buffers and WRITE
//! payloads from `dm_verbs::buf`, leaves searched and updated in place,
//! key paths inline, the own-tag ledger's in-flight list inline); what
//! remains per op is occasional (cache admissions, the first operations
//! after the load), measured in `docs/experiments/allocs.md`.

mod common;

use common::bench;

#[test]
fn warm_gets_and_updates_barely_allocate() {
    // (index, workload, most allocations per op)
    let cells = [
        ("fg", "c", 0.2),
        ("fg", "a", 0.25),
        ("sherman", "c", 0.2),
        ("sherman", "a", 0.2),
        ("smart", "c", 0.3),
        ("smart", "a", 0.3),
        ("art", "c", 0.3),
        ("art", "a", 0.3),
        ("smart-inplace", "a", 0.3),
        ("dolphin", "a", 0.3),
        ("nam-hybrid", "c", 0.1),
        ("nam-hybrid", "a", 0.1),
        ("nam-coarse", "a", 0.1),
        ("dex", "c", 0.8),
    ];
    for (index, w, most) in cells {
        let args = [
            "ycsb",
            "--index",
            index,
            "--workload",
            w,
            "--fabric",
            "loopback",
            "--cs",
            "1",
            "--threads",
            "1",
            "--coros",
            "8",
            "--keys",
            "20000",
            "--ops",
            "100000",
        ];
        let (ok, text, v) = bench(&args);
        assert!(ok, "{index} {w}: {text}");
        let a = v["allocs_per_op"]
            .as_f64()
            .expect("allocs_per_op on loopback");
        assert!(
            a <= most,
            "{index} YCSB {w}: {a} allocations per op (at most {most})"
        );
    }
}

//! Ziegler et al. (SIGMOD'19; ../shared/seeds/003), Exp. 1 (Fig. 8, uniform
//! data): the coarse-grained (RPC), fine-grained (one-sided) and hybrid
//! designs over the number of clients. Cluster of §6.1: 4 MS of 10 RPC
//! cores each, compute servers of 20 closed-loop clients (one operation in
//! flight each), no CS cache, uniform point lookups. The paper loads 100 M
//! keys; the full size here 200,000 (trees of four levels at 1 KiB nodes,
//! as docs/experiments/nam.md). `fg` without a cache is the fine-grained
//! design. The paper states no absolute numbers: coarse-grained leads only
//! at about 20 clients and stalls once the MS CPUs are busy; hybrid is the
//! most robust.

use super::{row, Figure, Metric, Row, Shape};

fn clients(quick: bool) -> Vec<Row> {
    let mut v = Vec::new();
    for idx in ["nam-coarse", "fg", "nam-hybrid"] {
        for cs in [1, 3, 6, 12] {
            if quick && cs != 1 && cs != 12 {
                continue;
            }
            let s = Shape {
                ms: 4,
                cs,
                threads: 20,
                coros: 1,
                keys: 200_000,
                ops: 50_000,
            };
            let s = if quick { s.quick(10_000, 4_000) } else { s };
            let extra = format!("--index {idx} --workload c --theta 0 --cache-mb 0 --ms-cores 10");
            v.push(row(idx, 20 * cs, s, &extra, None));
        }
    }
    v
}

pub const CLIENTS: Figure = Figure {
    name: "nam-clients",
    title: "coarse vs fine vs hybrid, point lookups, uniform",
    source: "Ziegler et al. Fig. 8, §6.1 Exp. 1",
    x_label: "clients",
    x_numeric: true,
    metric: Metric::Mops,
    rows: clients,
    claims: &[],
};

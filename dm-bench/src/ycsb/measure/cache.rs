//! The report's `cache` line and JSON, summed over the CSs: the B+trees'
//! index cache (leaf parents and top levels), DEX's cache of node frames
//! (DEX §5), Dolphin's cache of ART nodes and special nodes, and SMART's
//! ART cache (SMART §4.3).

use super::{Bench, Ran};
use dm_art::{ArtCache, DolphinCache};
use dm_tree::IndexCache;
use serde_json::json;
use std::sync::Arc;

/// The report's cache line and JSON object, summed over the CSs.
pub(super) struct CacheReport {
    pub line: String,
    pub json: serde_json::Value,
    pub bytes: u64,
}

impl Bench {
    /// Admissions through the modelled central FIFO of SMART's ART caches
    /// and the virtual ns they waited for or held it, over this process's
    /// CSs ((0, 0) for the other families).
    pub(super) fn fifo_totals(&self) -> (u64, u64) {
        if !self.c.smart {
            return (0, 0);
        }
        let inst = &self.cl.inst;
        inst.local_cs()
            .filter_map(|cs| inst.art_cache(cs))
            .map(|k| k.stats())
            .fold((0, 0), |(a, n), s| (a + s.fifo_admissions, n + s.fifo_ns))
    }
}

impl CacheReport {
    /// The cache report of the run's index (`ran`: the run phase's share
    /// of a modelled central FIFO, `--smart-fifo-ns`).
    pub(super) fn of(b: &Bench, ran: &Ran) -> Self {
        let (a, inst) = (&b.a, &b.cl.inst);
        let each =
            |f: &dyn Fn(u16) -> bool| inst.local_cs().filter(|&cs| f(cs)).collect::<Vec<u16>>();
        if let Some(cl) = b.cl.dexcl() {
            CacheReport::dex(cl)
        } else if b.c.dolphin {
            let c: Vec<_> = each(&|_| true)
                .iter()
                .filter_map(|&cs| inst.dolphin_cache(cs).cloned())
                .collect();
            CacheReport::dolphin(&c, a.cs)
        } else if b.c.smart {
            let c: Vec<_> = each(&|_| true)
                .iter()
                .filter_map(|&cs| inst.art_cache(cs).cloned())
                .collect();
            let mut r = CacheReport::art(&c, a.cs);
            let (adm, ns) = ran.run_fifo;
            if adm > 0 {
                // The cores' time in the run phase: the calibration's
                // denominator (DEX §8.2's 49% of SMART's cycles).
                let cores = a.cs as f64 * a.threads as f64;
                let share = ns as f64 / (cores * ran.run_ns.max(1) as f64);
                r.line += &format!(
                    "; in the run phase {adm} admissions, {:.1}% of the cores' time in the FIFO",
                    100.0 * share
                );
                r.json["run_fifo_admissions"] = json!(adm);
                r.json["run_fifo_ns"] = json!(ns);
                r.json["run_fifo_share"] = json!(share);
            }
            r
        } else {
            let c: Vec<_> = each(&|_| true)
                .iter()
                .filter_map(|&cs| inst.tree_cache(cs).cloned())
                .collect();
            CacheReport::tree(&c, a.cs)
        }
    }

    fn tree(caches: &[Arc<IndexCache>], cs: u16) -> Self {
        let mut c = dm_tree::CacheStats::default();
        for k in caches {
            let s = k.stats();
            c.hits += s.hits;
            c.misses += s.misses;
            c.bytes += s.bytes;
            c.nodes += s.nodes;
            c.top_nodes += s.top_nodes;
        }
        CacheReport {
            line: format!(
                "hit ratio {:.3} (load and run), {} leaf parents + {} top-level nodes, {:.1} MiB over {cs} CS",
                c.hit_ratio(),
                c.nodes,
                c.top_nodes,
                c.bytes as f64 / (1 << 20) as f64,
            ),
            json: json!({"hit_ratio": c.hit_ratio(), "bytes": c.bytes, "items": c.nodes, "top_items": c.top_nodes, "hits": c.hits, "misses": c.misses}),
            bytes: c.bytes,
        }
    }

    /// DEX (§5): one frame per cached node image (inner and leaf nodes
    /// alike), `node_bytes` each; the hit ratio is over traversals (a
    /// traversal that reached its leaf without I/O is a hit).
    fn dex(cl: &dm_tree::DexCluster) -> Self {
        let n = cl.num_cs();
        let (mut hits, mut misses, mut frames) = (0u64, 0u64, 0u64);
        for c in 0..n {
            let s = cl.stats(c);
            hits += s.cache.hits;
            misses += s.cache.misses;
            frames += cl.cache_frames(c).0 as u64;
        }
        let bytes = frames * cl.tree_config().node_bytes as u64;
        let ratio = hits as f64 / (hits + misses).max(1) as f64;
        CacheReport {
            line: format!(
                "DEX cache: hit ratio {ratio:.3} (traversals without I/O, load and run), {frames} node frames (inner and leaf), {:.1} MiB over {n} CS",
                bytes as f64 / (1 << 20) as f64,
            ),
            json: json!({"hit_ratio": ratio, "bytes": bytes, "items": frames, "hits": hits, "misses": misses}),
            bytes,
        }
    }

    fn dolphin(caches: &[Arc<DolphinCache>], cs: u16) -> Self {
        let mut c = dm_art::dolphin::DolphinCacheStats::default();
        for k in caches {
            let s = k.stats();
            c.art.hits += s.art.hits;
            c.art.misses += s.art.misses;
            c.art.entries += s.art.entries;
            c.art.invalidations += s.art.invalidations;
            c.specials += s.specials;
            c.special_hits += s.special_hits;
            c.special_misses += s.special_misses;
            c.bytes += s.bytes;
        }
        let ratio = |h: u64, m: u64| h as f64 / (h + m).max(1) as f64;
        let (ra, rs) = (
            ratio(c.art.hits, c.art.misses),
            ratio(c.special_hits, c.special_misses),
        );
        let items = c.art.entries + c.specials;
        CacheReport {
            line: format!(
                "Dolphin cache: ART hit ratio {ra:.3}, special-node hit ratio {rs:.3}; {} node snapshots + {} special nodes, {:.1} MiB over {cs} CS, {} stale entries dropped",
                c.art.entries,
                c.specials,
                c.bytes as f64 / (1 << 20) as f64,
                c.art.invalidations,
            ),
            json: json!({"hit_ratio": ra, "special_hit_ratio": rs, "bytes": c.bytes, "items": items, "art_items": c.art.entries, "special_items": c.specials, "hits": c.art.hits, "misses": c.art.misses, "invalidations": c.art.invalidations}),
            bytes: c.bytes,
        }
    }

    fn art(caches: &[Arc<ArtCache>], cs: u16) -> Self {
        let mut c = dm_art::CacheStats::default();
        for k in caches {
            let s = k.stats();
            c.hits += s.hits;
            c.misses += s.misses;
            c.invalidations += s.invalidations;
            c.evictions += s.evictions;
            c.stale_leaves += s.stale_leaves;
            c.entries += s.entries;
            c.bytes += s.bytes;
            c.fifo_admissions += s.fifo_admissions;
            c.fifo_ns += s.fifo_ns;
        }
        let ratio = c.hits as f64 / (c.hits + c.misses).max(1) as f64;
        // --smart-fifo-ns: what the modelled central FIFO cost.
        let fifo = if c.fifo_admissions > 0 {
            format!(
                "; central FIFO modelled: {} admissions (load and run), {:.0} ns each waited or held",
                c.fifo_admissions,
                c.fifo_ns as f64 / c.fifo_admissions as f64
            )
        } else {
            String::new()
        };
        CacheReport {
            line: format!(
                "ART cache: hit ratio {ratio:.3} (load and run; a hit starts below the root), {} node snapshots, {:.1} MiB over {cs} CS, {} stale entries dropped, {} evicted, {} cached leaf addresses found replaced (RCU){fifo}",
                c.entries,
                c.bytes as f64 / (1 << 20) as f64,
                c.invalidations,
                c.evictions,
                c.stale_leaves,
            ),
            json: json!({"hit_ratio": ratio, "bytes": c.bytes, "items": c.entries, "hits": c.hits, "misses": c.misses, "invalidations": c.invalidations, "evictions": c.evictions, "stale_leaves": c.stale_leaves, "fifo_admissions": c.fifo_admissions, "fifo_ns": c.fifo_ns}),
            bytes: c.bytes,
        }
    }
}

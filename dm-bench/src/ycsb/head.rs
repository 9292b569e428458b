//! `dm-bench ycsb --head-nodes N`: head nodes on the leaf level (Ziegler et
//! al. §4-5, [`dm_tree::head`]) for the one-sided B+trees (fg, the Sherman
//! rungs, nam-hybrid). The paper's background thread becomes maintenance
//! passes: one from the first core between load and run (not timed), and
//! with `--head-every K` one more by the coroutine that completes every
//! K-th run operation (timed: it runs among the clients); the report gives
//! what the passes did and how many leaves scans READ ahead from head lists
//! and used.

use anyhow::{bail, Result};
use dm_index::{Handle, Index};
use dm_tree::HeadPass;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct HeadArgs {
    /// Head nodes with groups of N leaves (0: none): one-sided B+trees only
    /// (fg, sherman*, nam-hybrid).
    #[arg(long, default_value_t = 0)]
    pub head_nodes: usize,
    /// With --head-nodes: also run a head-node maintenance pass after every
    /// K run operations, K at least 1 (default: only the pass before the
    /// run).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..usize::MAX as u64))]
    pub head_every: Option<u64>,
}

/// The passes of a run.
pub(crate) struct HeadMaint {
    n: usize,
    every: Option<usize>,
    done: AtomicUsize,
    passes: Mutex<Vec<Result<HeadPass, String>>>,
}

impl HeadMaint {
    /// `None` without `--head-nodes`; an error for an index without a
    /// one-sided leaf level.
    pub(crate) fn plan(a: &HeadArgs, one_sided_btree: bool) -> Result<Option<Arc<Self>>> {
        if a.head_nodes == 0 {
            if a.head_every.is_some() {
                bail!("--head-every paces the maintenance passes of --head-nodes: set --head-nodes too");
            }
            return Ok(None);
        }
        if !one_sided_btree {
            bail!("--head-nodes is for the one-sided B+trees: fg, sherman*, nam-hybrid");
        }
        Ok(Some(Arc::new(HeadMaint {
            n: a.head_nodes,
            every: a.head_every.map(|k| k as usize),
            done: AtomicUsize::new(0),
            passes: Mutex::new(Vec::new()),
        })))
    }

    /// One pass through `t` (a B+tree handle; nothing for other indexes).
    pub(crate) async fn pass(&self, t: &Index) {
        if let Handle::BTree(t) = t.handle() {
            let r = t
                .maintain_head_nodes(self.n)
                .await
                .map_err(|e| e.to_string());
            self.passes.lock().unwrap().push(r);
        }
    }

    /// Counts one completed run operation; every `--head-every`-th runs a
    /// pass through `t`.
    pub(crate) async fn tick(&self, t: &Index) {
        let i = self.done.fetch_add(1, SeqCst) + 1;
        if self.every.is_some_and(|k| i.is_multiple_of(k)) {
            self.pass(t).await;
        }
    }

    /// Whether a pass failed: how many of how many, and the first error
    /// (which makes the run fail after its report).
    pub(crate) fn failed(&self) -> Option<String> {
        let passes = self.passes.lock().unwrap();
        let errors: Vec<&String> = passes.iter().filter_map(|p| p.as_ref().err()).collect();
        let first = errors.first()?;
        Some(format!(
            "--head-nodes {}: {} of {} head-node maintenance passes failed; first: {first}",
            self.n,
            errors.len(),
            passes.len()
        ))
    }

    /// The report's line and JSON; `prefetch` = (leaves READ from head
    /// lists, used) over all handles.
    pub(crate) fn report(&self, prefetch: (u64, u64)) -> (String, serde_json::Value) {
        let passes = self.passes.lock().unwrap();
        let mut sum = HeadPass::default();
        let mut errors = Vec::new();
        for p in passes.iter() {
            match p {
                Ok(p) => {
                    sum.installed += p.installed;
                    sum.refreshed += p.refreshed;
                    sum.removed += p.removed;
                    sum.skipped += p.skipped;
                }
                Err(e) => errors.push(e.clone()),
            }
        }
        let last = passes.iter().rev().find_map(|p| p.as_ref().ok());
        let line = format!(
            "groups of {} leaves: {} passes ({} failed) installed {}, refreshed {}, unlinked {}, skipped {}; last pass saw {} leaves, {} heads; scans READ {} leaves ahead from head lists, used {}",
            self.n,
            passes.len(),
            errors.len(),
            sum.installed,
            sum.refreshed,
            sum.removed,
            sum.skipped,
            last.map_or(0, |p| p.leaves),
            last.map_or(0, |p| p.heads_seen),
            prefetch.0,
            prefetch.1
        );
        let v = json!({"group": self.n, "passes": passes.len(), "errors": errors,
            "installed": sum.installed, "refreshed": sum.refreshed, "removed": sum.removed,
            "skipped": sum.skipped, "prefetched_leaves": prefetch.0, "prefetched_used": prefetch.1});
        (line, v)
    }
}

//! `dm-bench check` on the B+tree family (`fg`, `sherman*`, `nam-coarse`,
//! `nam-hybrid`): per CS, an index cache of `--cache-nodes` leaf parents
//! (tiny, so lookups through stale and evicted copies are frequent) and a
//! local lock table. On sim, `--head-nodes N` adds a maintainer task on the
//! last core that installs, refreshes and unlinks head nodes (Ziegler et al.
//! §4-5) while the clients' scans cross them.

use super::args::Args;
use super::history::Event;
use anyhow::{bail, Result};
use dm_index::{Handle, Index, IndexConfig};
use dm_runtime::{JoinError, JoinHandle, SimCore, SimRuntime};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Head nodes installed, refreshed or unlinked by `--head-nodes` maintainers.
pub(super) static HEAD_CHANGES: AtomicU64 = AtomicU64::new(0);

/// The family's part of the check's configuration: `--index`'s techniques
/// and an index cache of `--cache-nodes` nodes per CS (none for 0).
pub(super) fn configure(mut cfg: IndexConfig, a: &Args) -> IndexConfig {
    cfg.tree_techniques = Some(a.techniques);
    cfg.sherman_cache =
        dm_tree::ShermanCache::named(&a.sherman_cache).expect("clap checked the name");
    cfg.node_read = dm_tree::NodeRead::named(&a.node_read).expect("clap checked the name");
    cfg.with_cache_bytes(a.cache_nodes.saturating_mul(a.node_bytes() as u64))
}

/// `--head-nodes N` (B+trees on sim): a task on `core` (the last) that runs
/// head-node passes with groups of N, 2, N+1 leaves, over and over until
/// the clients have logged every operation; its result is the number of
/// head-node changes.
pub(super) fn spawn_head_maintainer(
    rt: &mut SimRuntime,
    (core, t): (SimCore, Rc<Index>),
    a: &Rc<Args>,
    log: &Rc<RefCell<Vec<Event>>>,
) -> Option<JoinHandle<Result<u64, String>>> {
    if a.head_nodes == 0 || !matches!(t.handle(), Handle::BTree(_)) {
        return None;
    }
    let total = a.clients as usize * a.ops as usize;
    let (n, log) = (a.head_nodes, log.clone());
    Some(rt.spawn_on(core, async move {
        let Handle::BTree(t) = t.handle() else {
            unreachable!("checked above")
        };
        let mut changes = 0;
        for g in [n, 2, n.saturating_add(1)].into_iter().cycle() {
            if log.borrow().len() >= total {
                break;
            }
            let p = t.maintain_head_nodes(g).await.map_err(|e| e.to_string())?;
            changes += p.installed + p.refreshed + p.removed;
            dm_runtime::yield_until(dm_runtime::now_ns() + 2_000).await;
        }
        Ok::<u64, String>(changes)
    }))
}

/// The maintainer's outcome, once the simulation drained: its changes are
/// counted ([`HEAD_CHANGES`]); a failure or a maintainer that never
/// finished fails the seed.
pub(super) fn finish_head_maintainer(
    m: Option<JoinHandle<Result<u64, String>>>,
    seed: u64,
) -> Result<()> {
    let Some(m) = m else { return Ok(()) };
    match m.try_take().map(|r| r.unwrap_or_else(JoinError::resume)) {
        Some(Ok(n)) => {
            HEAD_CHANGES.fetch_add(n, Ordering::Relaxed);
            Ok(())
        }
        Some(Err(e)) => bail!("seed {seed}: head-node maintenance failed: {e}"),
        None => bail!("seed {seed}: head-node maintenance never finished"),
    }
}

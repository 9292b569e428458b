//! The final check, after the run: every key touched holds one of the
//! values written to it (or is gone, if the run removed it), and a full scan
//! returns exactly the keys loaded or inserted. For DEX, the check reads the
//! pool itself after every CS's dirty pages are written back.

use super::phase::Out;
use crate::kv::Kv;
use crate::ycsb::plan::{allowed, Plan};
use crate::ycsb::Op;
use dm_index::{Handle, Index};
use dm_tree::FgTree;
use std::rc::Rc;
use std::sync::Arc;

/// The final check of `tree`; for DEX, of the pool itself after every
/// CS's dirty pages are written back (so the write-backs are checked too).
pub(super) async fn verify_view(tree: Index, plan: Arc<Plan>) -> (u64, u64, Option<String>) {
    if let Handle::Dex(d) = tree.handle() {
        if let Err(e) = d.flush().await {
            return (0, 1, Some(format!("flushing DEX's caches: {e}")));
        }
        let t = FgTree::open(d.cluster().tree_config(), 0, 0).expect("checked at creation");
        return verify(Rc::new(t), plan).await;
    }
    verify(Rc::new(tree), plan).await
}

/// Final check: every key's value, then a full scan. Returns (verified, mismatches, first).
/// The gets run [`VERIFY_DEPTH`] at a time in the one task (a real fabric's
/// RTT, milliseconds in the soft-RoCE guest, would otherwise make the check
/// of a few thousand keys the longest part of a run).
async fn verify<T: Kv>(tree: Rc<T>, plan: Arc<Plan>) -> (u64, u64, Option<String>) {
    use futures::stream::{self, StreamExt};
    let keys: Vec<&[u8]> = plan.written.keys(&plan.load, &plan.run).collect();
    let mut out = Out::new();
    let mut verified = 0;
    // Streamed (not collected: one result per key of a 50-million-key run
    // would be gigabytes); a failed get is a mismatch, not a panic.
    let mut got = stream::iter(&keys)
        .map(|k| {
            let t = tree.clone();
            async move { (*k, t.get(k).await) }
        })
        .buffered(VERIFY_DEPTH);
    while let Some((k, got)) = got.next().await {
        match got {
            Ok(Some(v)) if allowed(&plan, k, v) => verified += 1,
            Ok(Some(v)) => out.bad(format!("key {k:?} holds {v:#x}, never written")),
            Ok(None)
                if plan
                    .run
                    .iter()
                    .any(|o| matches!(o, Op::Remove(r) if r[..] == *k)) =>
            {
                verified += 1
            }
            Ok(None) => out.bad(format!("key {k:?} is missing")),
            Err(e) => out.bad(format!("get {k:?} failed: {e}")),
        }
    }
    drop(got);
    // The full scan: one scan up to SINGLE_SCAN_KEYS written keys (as
    // every committed figure was verified: the scan's path through the
    // index cache shows in the report's `cs_cache_mib`), above that in
    // batches of SCAN_BATCH compared as they come (one scan of everything
    // held every key twice more in memory).
    let batch_len = if keys.len() <= SINGLE_SCAN_KEYS {
        usize::MAX
    } else {
        SCAN_BATCH
    };
    let removed = plan.run.iter().any(|o| matches!(o, Op::Remove(_)));
    let mut from = vec![0; tree_key_bytes(&keys)];
    let (mut present, mut same) = (0usize, true);
    // After the first batch, `from` is the last key seen, which the next
    // scan returns again first.
    let mut resumed = false;
    loop {
        let want = batch_len.saturating_add(resumed as usize);
        let batch = match tree.scan(&from, want).await {
            Ok(b) => b,
            Err(e) => {
                out.bad(format!("the full scan failed: {e}"));
                return (verified, out.mismatches, out.first_mismatch);
            }
        };
        let skip = resumed && batch.first().is_some_and(|(k, _)| *k == from);
        for (k, _) in &batch[skip as usize..] {
            same &= keys.get(present).is_some_and(|w| *w == &k[..]);
            present += 1;
        }
        match batch.last() {
            Some((k, _)) if batch.len() == want => {
                from.clone_from(k);
                resumed = true;
            }
            _ => break,
        }
    }
    let complete = same && present == keys.len();
    if !removed && !complete {
        out.bad(format!(
            "full scan returned {present} keys, {} were written",
            keys.len()
        ));
    }
    (verified, out.mismatches, out.first_mismatch)
}

/// Gets in flight at once in [`verify`].
const VERIFY_DEPTH: usize = 16;

/// Entries per scan of [`verify`]'s full scan above [`SINGLE_SCAN_KEYS`].
const SCAN_BATCH: usize = 4096;

/// Written keys up to which [`verify`] scans everything at once.
const SINGLE_SCAN_KEYS: usize = 1 << 22;

fn tree_key_bytes(keys: &[&[u8]]) -> usize {
    keys.first().map_or(8, |k| k.len())
}

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
    let got: Vec<_> = stream::iter(&keys)
        .map(|k| tree.get(k))
        .buffered(VERIFY_DEPTH)
        .collect()
        .await;
    for (k, got) in keys.iter().zip(got) {
        match got.expect("get") {
            Some(v) if allowed(&plan, k, v) => verified += 1,
            Some(v) => out.bad(format!("key {k:?} holds {v:#x}, never written")),
            None if plan
                .run
                .iter()
                .any(|o| matches!(o, Op::Remove(r) if r[..] == **k)) =>
            {
                verified += 1
            }
            None => out.bad(format!("key {k:?} is missing")),
        }
    }
    let all = tree
        .scan(&vec![0; tree_key_bytes(&keys)], usize::MAX)
        .await
        .expect("scan");
    let present: Vec<&[u8]> = all.iter().map(|(k, _)| &k[..]).collect();
    let removed = plan.run.iter().any(|o| matches!(o, Op::Remove(_)));
    if !removed && present != keys {
        out.bad(format!(
            "full scan returned {} keys, {} were written",
            present.len(),
            keys.len()
        ));
    }
    (verified, out.mismatches, out.first_mismatch)
}

/// Gets in flight at once in [`verify`].
const VERIFY_DEPTH: usize = 16;

fn tree_key_bytes(keys: &[&[u8]]) -> usize {
    keys.first().map_or(8, |k| k.len())
}

//! Offloading a miss (§6.2): the rest of the operation goes to the missed
//! node's MS as one RPC ([`super::ms`] runs it there); the reply's leaf is
//! dropped from the cooling map, or, if this CS holds it hot, the reply is
//! dropped and the operation retried through the cache
//! ([`super::cache::Cache::invalidate`]).

use super::miss::{Miss, MissOut};
use super::ms::{self, RPC_DEX};
use super::op::{Op, Res};
use super::{DexCs, DexTree};
use crate::tree::TreeError;
use dm_runtime::{now_ns, rpc};
use dm_verbs::{GlobalAddr, VerbError};
use std::sync::atomic::Ordering::SeqCst;

impl DexTree {
    /// Pushes the rest of the operation down to the missed node's MS (§6.2).
    pub(super) async fn offload(
        &self,
        c: &DexCs,
        key: &[u8],
        op: &Op,
        m: &Miss,
    ) -> Result<MissOut, TreeError> {
        let (code, value, may_insert) = match op {
            Op::Get => (ms::OP_GET, 0, false),
            Op::Put { value, may_insert } => (ms::OP_UPSERT, *value, *may_insert),
            Op::Remove => (ms::OP_REMOVE, 0, false),
            Op::Scan { .. } => unreachable!("scans are never offloaded"),
        };
        let req = ms::request(
            code,
            &self.t.g,
            self.cl.cfg.ms_node_ns,
            m.child,
            key,
            value,
            may_insert,
        );
        c.offloads.fetch_add(1, SeqCst);
        let t0 = now_ns();
        let rep = rpc(m.child.ms(), RPC_DEX, req).await?;
        c.cost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record_offload(now_ns() - t0);
        if rep.len() != 17 {
            return Err(TreeError::Verb(VerbError::RpcFailed {
                ms: m.child.ms(),
                handler: RPC_DEX,
                reason: format!("reply of {} bytes", rep.len()),
            }));
        }
        let v = u64::from_le_bytes(rep[1..9].try_into().unwrap());
        let leaf = GlobalAddr::from_u64(u64::from_le_bytes(rep[9..17].try_into().unwrap()));
        if rep[0] == 0 {
            c.fallbacks.fetch_add(1, SeqCst);
            return Ok(MissOut::NoOffload);
        }
        if !c.locked().await.invalidate(leaf) {
            // The leaf is hot here: its frame, now dirty, is the truth.
            return Ok(MissOut::NoOffload);
        }
        Ok(MissOut::Done(match op {
            Op::Get => Res::Get((rep[0] == 1).then_some(v)),
            Op::Put { .. } => Res::Put(v == 1),
            _ => Res::Remove(v == 1),
        }))
    }
}

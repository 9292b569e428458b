//! The MS side of DEX's offloading (§6.2): from the missed node down to the
//! leaf in the MS's own memory, then the operation on the leaf.
//!
//! The handler takes no locks: the CS that offloads owns the sub-tree (its
//! partition), has marked the missed node in flight in its mapping table
//! and pinned its parent, has no other miss in flight over the node's key
//! range (`cache::IoRange`), and by the path-aware cache rules holds no
//! newer copy of any node below it (see `dex/cache.rs`; where a stale
//! cached inner node breaks that rule, the CS finds the returned leaf hot,
//! drops the reply and retries, and its write-back overwrites the change).
//! Inner nodes are written through (see [`crate::dex`]), so the pool's
//! images are the newest. The
//! handler never splits: a full leaf, a pointer to another MS, a key outside
//! a node's fences without a same-MS sibling, or an image that fails its
//! checksum sends the operation back to the CS (status 0).
//!
//! **Request** (integers little-endian): `op u8` (1 get, 2 upsert, 3
//! remove), `key_bytes u8`, `node_bytes u32`, `node_ns u32` (MS CPU ns
//! charged per node visited, sim), `start u64` (the missed node's
//! `GlobalAddr`), `key`, then for upsert `value u64`, `may_insert u8`.
//!
//! **Reply**: `status u8` (0 back to the CS, 1 done, 2 get: key absent),
//! `value u64` (get: the value; upsert/remove: 1 applied, 0 not), `leaf u64`
//! (the leaf's address, which the CS drops from its cooling map).
//!
//! Errors: `RpcFailed` for a malformed request.

use crate::node::{Geometry, Node, NodeKey};
use dm_verbs::{GlobalAddr, MsMemory, RpcHandler, VerbError};
use std::sync::Arc;

/// The fabric RPC handler id of DEX's offload handler ([`handler`]).
pub const RPC_DEX: u16 = 17;

pub(crate) const OP_GET: u8 = 1;
pub(crate) const OP_UPSERT: u8 = 2;
pub(crate) const OP_REMOVE: u8 = 3;

/// Nodes visited before giving up (a sibling chain that never ends).
const MAX_NODES: usize = 64;

/// The offload handler, to register under [`RPC_DEX`] on every MS.
pub fn handler() -> RpcHandler {
    Arc::new(|mem: &mut dyn MsMemory, req: &[u8]| {
        let ms = mem.ms_id();
        serve(mem, req).ok_or_else(|| VerbError::RpcFailed {
            ms,
            handler: RPC_DEX,
            reason: "malformed DEX offload request".into(),
        })?
    })
}

/// A request (built by the CS, see the module docs).
pub(crate) fn request(
    op: u8,
    g: &Geometry,
    node_ns: u32,
    start: GlobalAddr,
    key: &[u8],
    value: u64,
    may_insert: bool,
) -> Vec<u8> {
    let mut r = vec![op, key.len() as u8];
    r.extend_from_slice(&(g.node_bytes as u32).to_le_bytes());
    r.extend_from_slice(&node_ns.to_le_bytes());
    r.extend_from_slice(&start.to_u64().to_le_bytes());
    r.extend_from_slice(key);
    r.extend_from_slice(&value.to_le_bytes());
    r.push(may_insert as u8);
    r
}

fn reply(status: u8, value: u64, leaf: GlobalAddr) -> Vec<u8> {
    let mut r = vec![status];
    r.extend_from_slice(&value.to_le_bytes());
    r.extend_from_slice(&leaf.to_u64().to_le_bytes());
    r
}

/// `None`: malformed request; `Some(Err)`: a verb error of the MS memory.
fn serve(mem: &mut dyn MsMemory, req: &[u8]) -> Option<Result<Vec<u8>, VerbError>> {
    let (&op, rest) = req.split_first()?;
    let (&kb, rest) = rest.split_first()?;
    let kb = kb as usize;
    if rest.len() != 16 + kb + 9 || !(1..=32).contains(&kb) {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().unwrap());
    let node_bytes = u32_at(0) as usize;
    let node_ns = u32_at(4) as u64;
    let mut a = GlobalAddr::from_u64(u64::from_le_bytes(rest[8..16].try_into().unwrap()));
    let key = &rest[16..16 + kb];
    let value = u64::from_le_bytes(rest[16 + kb..24 + kb].try_into().unwrap());
    let may_insert = rest[24 + kb] != 0;
    if !(64..=1 << 16).contains(&node_bytes) || !node_bytes.is_multiple_of(8) {
        return None;
    }
    let g = Geometry::new(node_bytes, kb);
    let back = Some(Ok(reply(0, 0, GlobalAddr::NULL)));
    for _ in 0..MAX_NODES {
        if a.is_null() || a.ms() != mem.ms_id() {
            return back;
        }
        let b = match mem.read(a, node_bytes) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        mem.charge_cpu(node_ns);
        let Some(mut n) = Node::decode(&g, &b) else {
            return back;
        };
        if n.below_low(key) {
            return back;
        }
        if n.beyond_high(key) {
            a = n.sibling;
            continue;
        }
        if !n.is_leaf() {
            a = n.child_for(key);
            continue;
        }
        let (status, v, changed) = match (op, n.find(key)) {
            (OP_GET, Ok(i)) => (1, n.entries[i].1, false),
            (OP_GET, Err(_)) => (2, 0, false),
            (OP_UPSERT, Ok(i)) => {
                n.entries[i].1 = value;
                (1, 1, true)
            }
            (OP_UPSERT, Err(_)) if !may_insert => (1, 0, false),
            (OP_UPSERT, Err(i)) => {
                if n.entries.len() >= n.capacity(&g) {
                    return back; // a split: the CS does it (§6.2)
                }
                n.entries.insert(i, (NodeKey::from_slice(key), value));
                (1, 1, true)
            }
            (OP_REMOVE, Ok(i)) => {
                n.entries.remove(i);
                (1, 1, true)
            }
            (OP_REMOVE, Err(_)) => (1, 0, false),
            _ => return None,
        };
        if changed {
            // The lock word (offset 0) stays as it is.
            let img = n.encode(&g);
            if let Err(e) = mem.write(a.add(8), &img[8..]) {
                return Some(Err(e));
            }
            mem.charge_cpu(node_ns);
        }
        return Some(Ok(reply(status, v, a)));
    }
    back
}

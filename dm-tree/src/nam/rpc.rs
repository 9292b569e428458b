//! The CS side of the NAM designs: [`FgTree`]'s operations as RPCs to the
//! partition's MS (coarse-grained, Ziegler et al. §3: one RPC per operation)
//! and the hybrid's two RPCs (§5: the leaf for a key; a separator after a
//! leaf split). Encodings: [`super::ms`].

use super::ms::{self, put_fence, RPC_NAM};
use super::Design;
use crate::node::{Fence, FenceKey, Node, View};
use crate::tree::{FgTree, TreeError};
use dm_runtime::{rpc, write, ScanBuf};
use dm_verbs::{GlobalAddr, VerbError};

/// Largest scan reply the CS asks for, in bytes: real RDMA RPC messages are
/// 4 KiB (`dm_verbs::rdma`), less their header.
pub const SCAN_REPLY_BYTES: usize = 4000;

/// The next key of the same length (big-endian increment); `None` after the last.
fn successor(k: &[u8]) -> Option<FenceKey> {
    let mut s = FenceKey::from_slice(k);
    for b in s.iter_mut().rev() {
        if *b == 0xff {
            *b = 0;
        } else {
            *b += 1;
            return Some(s);
        }
    }
    None
}

/// Times a hybrid lookup asks the upper levels again after landing on a
/// leaf that does not cover its key, before reporting `TreeError::Corrupt`.
const MAX_REROUTES: u32 = 1000;

fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}

impl FgTree {
    /// A request for `op` on partition `p`: op code and the partition's
    /// header offset.
    fn nam_req(&self, op: u8, p: u16) -> Vec<u8> {
        // From the thread's buffer pool: the fabric gives it back once sent.
        let mut r = dm_verbs::buf::take(64);
        r.push(op);
        let off = self.cfg.nam.header(p, self.cfg.num_ms).1;
        r.extend_from_slice(&(off as u32).to_le_bytes());
        r
    }

    /// The error for a reply from partition `p`'s MS that does not parse.
    fn nam_bad_reply(&self, p: u16, reason: String) -> TreeError {
        TreeError::Verb(VerbError::RpcFailed {
            ms: self.cfg.nam.header(p, self.cfg.num_ms).0,
            handler: RPC_NAM,
            reason,
        })
    }

    /// Sends `req` to partition `p`'s MS and checks the reply is `len`
    /// bytes long (`None`: any length).
    async fn nam_call(
        &self,
        p: u16,
        req: Vec<u8>,
        len: Option<usize>,
    ) -> Result<Vec<u8>, TreeError> {
        let ms = self.cfg.nam.header(p, self.cfg.num_ms).0;
        let b = rpc(ms, RPC_NAM, req).await?;
        if len.is_some_and(|l| b.len() != l) {
            return Err(self.nam_bad_reply(p, format!("reply of {} bytes", b.len())));
        }
        Ok(b)
    }

    /// Creates the per-partition trees (and, for the hybrid, the first leaf
    /// of every partition, chained in key order) on their MSs.
    pub(crate) async fn nam_create(&self) -> Result<(), TreeError> {
        let c = self.cfg.nam;
        let kb = self.cfg.key_bytes;
        let hybrid = self.cfg.design == Design::Hybrid;
        let mut next = GlobalAddr::NULL;
        let mut leaves = vec![GlobalAddr::NULL; c.parts as usize];
        if hybrid {
            // Right to left, so each leaf is written after its sibling.
            for p in (0..c.parts).rev() {
                let mut leaf = self.new_leaf(c.fence(p, kb), c.fence(p + 1, kb));
                leaf.sibling = next;
                let a = self.alloc_node().await?;
                write(a, leaf.encode(&self.g)).await?;
                leaves[p as usize] = a;
                next = a;
            }
        }
        for p in 0..c.parts {
            let mut r = self.nam_req(ms::OP_CREATE, p);
            r.extend_from_slice(&(self.cfg.node_bytes as u32).to_le_bytes());
            r.push(kb as u8);
            r.push(hybrid as u8);
            r.extend_from_slice(&c.ms_node_ns.to_le_bytes());
            r.extend_from_slice(&self.cfg.chunk_bytes.to_le_bytes());
            put_fence(&mut r, &c.fence(p, kb), kb);
            put_fence(&mut r, &c.fence(p + 1, kb), kb);
            r.extend_from_slice(&leaves[p as usize].to_u64().to_le_bytes());
            self.nam_call(p, r, Some(0)).await?;
        }
        Ok(())
    }

    /// Coarse-grained get: one RPC.
    pub(crate) async fn nam_get(&self, key: &[u8]) -> Result<Option<u64>, TreeError> {
        let p = self.cfg.nam.partition_of(key);
        let mut r = self.nam_req(ms::OP_GET, p);
        r.extend_from_slice(key);
        let b = self.nam_call(p, r, Some(9)).await?;
        let v = (b[0] != 0).then(|| le64(&b[1..]));
        dm_verbs::buf::give(b);
        Ok(v)
    }

    /// Coarse-grained upsert (`may_insert`) or update: one RPC.
    pub(crate) async fn nam_upsert(
        &self,
        key: &[u8],
        value: u64,
        may_insert: bool,
    ) -> Result<bool, TreeError> {
        let p = self.cfg.nam.partition_of(key);
        let mut r = self.nam_req(ms::OP_UPSERT, p);
        r.push(may_insert as u8);
        r.extend_from_slice(key);
        r.extend_from_slice(&value.to_le_bytes());
        let b = self.nam_call(p, r, Some(1)).await?;
        let applied = b[0] != 0;
        dm_verbs::buf::give(b);
        Ok(applied)
    }

    /// Coarse-grained remove: one RPC.
    pub(crate) async fn nam_remove(&self, key: &[u8]) -> Result<bool, TreeError> {
        let p = self.cfg.nam.partition_of(key);
        let mut r = self.nam_req(ms::OP_REMOVE, p);
        r.extend_from_slice(key);
        Ok(self.nam_call(p, r, Some(1)).await?[0] != 0)
    }

    /// Coarse-grained scan: one RPC per partition it touches (range
    /// partitioning: only the partitions overlapping the range, §3), more
    /// where a reply would pass [`SCAN_REPLY_BYTES`]; appends to `out`.
    pub(crate) async fn nam_scan(
        &self,
        from: &[u8],
        count: usize,
        out: &mut ScanBuf,
    ) -> Result<(), TreeError> {
        let kb = self.cfg.key_bytes;
        let per_reply = (SCAN_REPLY_BYTES - 4) / (kb + 8);
        // Inline up to 32 bytes, and each reply back to the pool: a scan
        // allocates nothing (issue 32).
        let mut at = FenceKey::from_slice(from);
        while out.len() < count {
            let want = (count - out.len()).min(per_reply);
            let p = self.cfg.nam.partition_of(&at);
            let mut r = self.nam_req(ms::OP_SCAN, p);
            r.extend_from_slice(&(want as u32).to_le_bytes());
            r.extend_from_slice(&at);
            let b = self.nam_call(p, r, None).await?;
            let n = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
            if n > want || b.len() != 4 + n * (kb + 8) {
                let why = format!("scan reply of {} bytes for {n} entries", b.len());
                return Err(self.nam_bad_reply(p, why));
            }
            for e in b[4..].chunks_exact(kb + 8) {
                out.push(&e[..kb], le64(&e[kb..]));
            }
            dm_verbs::buf::give(b);
            if n == want {
                // A full reply: go on after its last key, in the same partition.
                match successor(out.last_key().unwrap()) {
                    Some(k) => at = k,
                    None => break,
                }
                continue;
            }
            // This partition is exhausted: continue at the next one's low fence.
            match self.cfg.nam.fence(p + 1, kb) {
                Fence::Key(k) => at = k,
                _ => break,
            }
        }
        Ok(())
    }

    /// Hybrid: the leaf the partition's upper levels route `key` to (one RPC;
    /// the caller follows sibling pointers from there, B-link).
    pub(crate) async fn nam_leaf(&self, key: &[u8]) -> Result<GlobalAddr, TreeError> {
        let p = self.cfg.nam.partition_of(key);
        let mut r = self.nam_req(ms::OP_LEAF, p);
        r.extend_from_slice(key);
        let b = self.nam_call(p, r, Some(8)).await?;
        let a = GlobalAddr::from_u64(le64(&b));
        dm_verbs::buf::give(b);
        Ok(a)
    }

    /// Hybrid get: [`FgTree::nam_find_leaf`]'s walk (the same RPC, READs
    /// and sibling hops) with each leaf image validated and searched in
    /// place ([`View`]: no decoded node, issue 32).
    pub(crate) async fn nam_get_hybrid(&self, key: &[u8]) -> Result<Option<u64>, TreeError> {
        let mut a = GlobalAddr::NULL;
        for _ in 0..MAX_REROUTES {
            a = self.nam_leaf(key).await?;
            loop {
                let b = self.read_valid(a).await?;
                let n = View::validated(&self.g, &b);
                if n.level() != 0 || n.below_low(key) {
                    break;
                }
                if n.beyond_high(key) && !n.sibling().is_null() {
                    a = n.sibling();
                    continue;
                }
                return Ok(n.get(key));
            }
        }
        Err(TreeError::Corrupt(a))
    }

    /// Hybrid: the leaf covering `key` (unlocked image), decoded: see
    /// [`FgTree::nam_find_leaf_image`].
    pub(crate) async fn nam_find_leaf(&self, key: &[u8]) -> Result<(GlobalAddr, Node), TreeError> {
        let (a, b) = self.nam_find_leaf_image(key).await?;
        let n = Node::decode(&self.g, &b).expect("an image View::new accepted decodes");
        Ok((a, n))
    }

    /// Hybrid: the leaf covering `key` as a validated image ([`View::new`]):
    /// one RPC, one READ, and a READ per sibling hop past splits the upper
    /// levels do not know yet.
    pub(crate) async fn nam_find_leaf_image(
        &self,
        key: &[u8],
    ) -> Result<(GlobalAddr, dm_runtime::ReadBuf), TreeError> {
        let mut a = GlobalAddr::NULL;
        for _ in 0..MAX_REROUTES {
            a = self.nam_leaf(key).await?;
            loop {
                let b = self.read_valid(a).await?;
                let n = View::validated(&self.g, &b);
                if n.level() != 0 || n.below_low(key) {
                    // Cannot happen (leaves never move left, the upper
                    // levels only gain separators); ask again, a bounded
                    // number of times.
                    break;
                }
                if n.beyond_high(key) && !n.sibling().is_null() {
                    a = n.sibling();
                    continue;
                }
                return Ok((a, b));
            }
        }
        Err(TreeError::Corrupt(a))
    }

    /// Hybrid: installs `sep -> right` in the upper levels after a leaf
    /// split (§5, "Insert": one more RPC).
    pub(crate) async fn nam_insert_sep(
        &self,
        sep: &[u8],
        right: GlobalAddr,
    ) -> Result<(), TreeError> {
        let p = self.cfg.nam.partition_of(sep);
        let mut r = self.nam_req(ms::OP_SEP, p);
        r.extend_from_slice(sep);
        r.extend_from_slice(&right.to_u64().to_le_bytes());
        self.nam_call(p, r, Some(0)).await.map(|_| ())
    }
}

//! The MS side of the NAM designs: one B+tree per partition in the MS's own
//! memory, run by RPC handlers (Ziegler et al. §3 for the coarse-grained
//! tree; §5 for the hybrid's upper levels).
//!
//! The tree uses [`crate::node`]'s layout (sorted nodes, fences, sibling
//! pointers). Its bottom level is `base`: level 0 for the coarse-grained
//! design (entries are key -> value), level 1 for the hybrid (entries are
//! separator -> leaf address; the leaves are the CS's, one-sided). Only the
//! handlers touch these nodes, and the handlers of one MS are serialised
//! (see [`crate::nam`]), so the tree needs neither locks nor B-link moves.
//!
//! **Header** at `header_off` of the MS's superblock (little-endian; the
//! offset lies in `[1024, 4096)`, clear of the fixed roots and the catalog,
//! see [`dm_verbs::ms::superblock`] and [`header_in_bounds`]):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | root node address (`GlobalAddr` raw) |
//! | 8 | 8 | carve cursor: next free byte of the MS-local chunk |
//! | 16 | 8 | end of that chunk |
//! | 24 | 4 | node bytes |
//! | 28 | 1 | key bytes |
//! | 29 | 1 | base level: 0 coarse-grained, 1 hybrid |
//! | 32 | 4 | MS CPU ns charged per node read or written (sim) |
//! | 40 | 8 | chunk bytes of this MS's allocator |
//!
//! **Requests** are `[op u8][header_off u32]` then the op's fields; keys are
//! `key_bytes` long, integers little-endian; a fence is a tag byte
//! (0 -inf, 1 key, 2 +inf) followed by `key_bytes` bytes:
//!
//! | op | fields | reply |
//! |---|---|---|
//! | 1 create | node_bytes u32, key_bytes u8, base u8, node_ns u32, chunk_bytes u64, low fence, high fence, first child u64 (hybrid) | empty |
//! | 2 get | key | found u8, value u64 |
//! | 3 upsert | may_insert u8, key, value u64 | applied u8 |
//! | 4 remove | key | removed u8 |
//! | 5 scan | count u32, from key | n u32, n x (key, value u64), all of this partition |
//! | 6 leaf | key | address u64 of the leaf the hybrid's upper levels route `key` to |
//! | 7 separator | key, right leaf u64 | empty |
//!
//! **Errors**: `MsOutOfMemory` when a split finds no chunk (checked before
//! anything is written, so the operation did not happen); `RpcFailed` for a
//! malformed request, an op the tree's base level does not serve, a key
//! outside the partition, or a node that fails its checksum.

use super::rpc::SCAN_REPLY_BYTES;
use crate::node::{set_sorted_value_same_version, Fence, Geometry, Loc, Node, NodeKey, View};
use dm_verbs::{GlobalAddr, MsMemory, RpcHandler, VerbError};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

/// Bytes of the per-MS header.
pub const HEADER_BYTES: u64 = 48;

/// True when a header at superblock offset `off` is 8-byte aligned and lies
/// in `[superblock::ROOT_AREAS, superblock::BYTES)`: the catalog's root
/// areas or the hand-built NAM headers, never the fixed roots or the
/// catalog entries below (issue 31).
pub fn header_in_bounds(off: u64) -> bool {
    use dm_verbs::ms::superblock;
    off.is_multiple_of(8)
        && off >= superblock::ROOT_AREAS
        && off + HEADER_BYTES <= superblock::BYTES
}

/// RPC id of the NAM designs' handler ([`handler`]) on every MS.
pub const RPC_NAM: u16 = 16;

pub(crate) const OP_CREATE: u8 = 1;
pub(crate) const OP_GET: u8 = 2;
pub(crate) const OP_UPSERT: u8 = 3;
pub(crate) const OP_REMOVE: u8 = 4;
pub(crate) const OP_SCAN: u8 = 5;
pub(crate) const OP_LEAF: u8 = 6;
pub(crate) const OP_SEP: u8 = 7;

/// The NAM handler, to register under [`RPC_NAM`] on every MS
/// (`Fabric::register_rpc`, or `dm-memserver`'s registry). Handlers of one
/// MS run one at a time (a mutex per MS id modulo 64).
pub fn handler() -> RpcHandler {
    let locks: Arc<Vec<Mutex<()>>> = Arc::new((0..64).map(|_| Mutex::new(())).collect());
    Arc::new(move |mem: &mut dyn MsMemory, req: &[u8]| {
        let ms = mem.ms_id();
        let _serial = locks[ms as usize % 64]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        serve(mem, req).map_err(|e| match e {
            Fail::Verb(v) => v,
            Fail::Bad(reason) => VerbError::RpcFailed {
                ms,
                handler: RPC_NAM,
                reason,
            },
        })
    })
}

enum Fail {
    Verb(VerbError),
    Bad(String),
}

impl From<VerbError> for Fail {
    fn from(e: VerbError) -> Self {
        Fail::Verb(e)
    }
}

fn bad<T>(s: impl Into<String>) -> Result<T, Fail> {
    Err(Fail::Bad(s.into()))
}

/// A cursor over a request.
struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        if self.0.len() < n {
            return bad("request too short");
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, Fail> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Fail> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, Fail> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn fence(&mut self, kb: usize) -> Result<Fence, Fail> {
        let tag = self.u8()?;
        let k = self.take(kb)?;
        match tag {
            0 => Ok(Fence::NegInf),
            1 => Ok(Fence::key(k)),
            2 => Ok(Fence::PosInf),
            _ => bad("bad fence tag"),
        }
    }
}

/// Appends fence `f` for `kb`-byte keys in the request encoding.
pub(crate) fn put_fence(out: &mut Vec<u8>, f: &Fence, kb: usize) {
    match f {
        Fence::NegInf => out.push(0),
        Fence::Key(_) => out.push(1),
        Fence::PosInf => out.push(2),
    }
    match f {
        Fence::Key(k) => out.extend_from_slice(k),
        _ => out.extend(std::iter::repeat_n(0, kb)),
    }
}

#[derive(Clone, Copy)]
struct Header {
    root: u64,
    cursor: u64,
    end: u64,
    node_bytes: u32,
    key_bytes: u8,
    base: u8,
    node_ns: u32,
    chunk_bytes: u64,
}

impl Header {
    fn decode(b: &[u8]) -> Header {
        let u = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let w = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        Header {
            root: u(0),
            cursor: u(8),
            end: u(16),
            node_bytes: w(24),
            key_bytes: b[28],
            base: b[29],
            node_ns: w(32),
            chunk_bytes: u(40),
        }
    }
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&self.root.to_le_bytes());
        b[8..16].copy_from_slice(&self.cursor.to_le_bytes());
        b[16..24].copy_from_slice(&self.end.to_le_bytes());
        b[24..28].copy_from_slice(&self.node_bytes.to_le_bytes());
        b[28] = self.key_bytes;
        b[29] = self.base;
        b[32..36].copy_from_slice(&self.node_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.chunk_bytes.to_le_bytes());
        b
    }
}

/// One handler run's view of its MS's tree.
struct Local<'m> {
    mem: &'m mut dyn MsMemory,
    at: GlobalAddr,
    h: Header,
    g: Geometry,
    /// Nodes read or written (CPU charged per node).
    nodes: u64,
}

fn serve(mem: &mut dyn MsMemory, req: &[u8]) -> Result<Vec<u8>, Fail> {
    let mut r = Rd(req);
    let op = r.u8()?;
    let off = r.u32()? as u64;
    if !header_in_bounds(off) {
        return bad("NAM header offset outside the superblock's header range");
    }
    let at = GlobalAddr::new(mem.ms_id(), off);
    if op == OP_CREATE {
        return create(mem, at, &mut r);
    }
    let hb = mem.read(at, HEADER_BYTES as usize)?;
    let h = Header::decode(&hb);
    dm_verbs::buf::give(hb);
    if h.root == 0 {
        return bad("no NAM tree on this MS (create it first)");
    }
    let g = Geometry::new(h.node_bytes as usize, h.key_bytes as usize);
    let mut t = Local {
        mem,
        at,
        h,
        g,
        nodes: 0,
    };
    let kb = h.key_bytes as usize;
    let want_base = if op == OP_LEAF || op == OP_SEP { 1 } else { 0 };
    if h.base != want_base {
        return bad(format!("op {op} on a tree whose base level is {}", h.base));
    }
    let out = match op {
        OP_GET => {
            let key = r.take(kb)?;
            let (_, b) = t.descend(key, 0)?;
            let mut out = dm_verbs::buf::take(9);
            match View::validated(&t.g, &b).get(key) {
                Some(v) => {
                    out.push(1);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                None => out.resize(9, 0),
            }
            dm_verbs::buf::give(b);
            out
        }
        OP_UPSERT => {
            let may_insert = r.u8()? != 0;
            let key = r.take(kb)?;
            let v = r.u64()?;
            // A present key (every update, YCSB's hot path) changes in
            // place, nothing decoded; a new key goes through `put`, which
            // walks the path again (its reads charged once).
            let before = t.nodes;
            let (a, mut b) = t.descend(key, 0)?;
            let loc = View::validated(&t.g, &b).locate(key);
            let applied = match loc {
                Some(Loc::Sorted(off, _)) => {
                    set_sorted_value_same_version(&mut b, off, v);
                    t.nodes += 1;
                    t.mem.write(a, &b)?;
                    true
                }
                None if !may_insert => false,
                _ => {
                    t.nodes = before;
                    t.put(key, v, may_insert, 0)?
                }
            };
            dm_verbs::buf::give(b);
            let mut out = dm_verbs::buf::take(1);
            out.push(applied as u8);
            out
        }
        OP_REMOVE => {
            let key = r.take(kb)?;
            let (a, mut n) = t.path(key, 0)?.pop().unwrap();
            match n.find(key) {
                Ok(i) => {
                    n.entries.remove(i);
                    t.write(a, &n)?;
                    vec![1]
                }
                Err(_) => vec![0],
            }
        }
        OP_SCAN => {
            let count = r.u32()? as usize;
            let from = r.take(kb)?;
            t.scan(from, count)?
        }
        OP_LEAF => {
            let key = r.take(kb)?;
            let (a, b) = t.descend(key, 1)?;
            let child = View::validated(&t.g, &b).child_for(key);
            dm_verbs::buf::give(b);
            let Some(child) = child else {
                return bad(format!("NAM node at {a:?} routes no key (no entries)"));
            };
            let mut out = dm_verbs::buf::take(8);
            out.extend_from_slice(&child.to_u64().to_le_bytes());
            out
        }
        OP_SEP => {
            let key = r.take(kb)?;
            let right = r.u64()?;
            t.put(key, right, true, 1)?;
            Vec::new()
        }
        _ => return bad(format!("unknown NAM op {op}")),
    };
    t.mem.charge_cpu(t.nodes * t.h.node_ns as u64);
    Ok(out)
}

/// Op 1: (re)creates this MS's tree: a root at the base level covering the
/// partition's fences, holding the hybrid's first leaf pointer.
fn create(mem: &mut dyn MsMemory, at: GlobalAddr, r: &mut Rd) -> Result<Vec<u8>, Fail> {
    let node_bytes = r.u32()?;
    let key_bytes = r.u8()?;
    let base = r.u8()?;
    let node_ns = r.u32()?;
    let chunk_bytes = r.u64()?;
    let kb = key_bytes as usize;
    if !(1..=32).contains(&kb) || base > 1 || node_bytes < 64 || node_bytes as u64 > chunk_bytes {
        return bad("bad NAM tree shape");
    }
    let low = r.fence(kb)?;
    let high = r.fence(kb)?;
    let child = r.u64()?;
    let h = Header {
        root: 0,
        cursor: 0,
        end: 0,
        node_bytes,
        key_bytes,
        base,
        node_ns,
        chunk_bytes,
    };
    let g = Geometry::new(node_bytes as usize, kb);
    if g.capacity() < 4 {
        return bad("NAM nodes hold fewer than 4 entries");
    }
    let mut t = Local {
        mem,
        at,
        h,
        g,
        nodes: 0,
    };
    t.reserve(1)?;
    let mut root = Node::empty(base, low.clone(), high);
    if base == 1 {
        root.entries.push((low.first_entry_key(kb), child));
    }
    let a = t.alloc();
    t.write(a, &root)?;
    t.h.root = a.to_u64();
    t.save()?;
    Ok(Vec::new())
}

impl Local<'_> {
    fn save(&mut self) -> Result<(), Fail> {
        Ok(self.mem.write(self.at, &self.h.encode())?)
    }

    fn read(&mut self, a: GlobalAddr) -> Result<Node, Fail> {
        self.nodes += 1;
        let b = self.mem.read(a, self.h.node_bytes as usize)?;
        let n = Node::decode(&self.g, &b);
        dm_verbs::buf::give(b);
        match n {
            Some(n) => Ok(n),
            None => bad(format!("NAM node at {a:?} fails its checksum")),
        }
    }

    fn write(&mut self, a: GlobalAddr, n: &Node) -> Result<(), Fail> {
        self.nodes += 1;
        Ok(self.mem.write(a, &n.encode(&self.g))?)
    }

    /// Makes room for `k` nodes in the current chunk, taking a new chunk
    /// from this MS's allocator if needed (the rest of the old one is left).
    fn reserve(&mut self, k: u64) -> Result<(), Fail> {
        let need = k * self.h.node_bytes as u64;
        if self.h.cursor == 0 || self.h.cursor + need > self.h.end {
            if need > self.h.chunk_bytes {
                return bad("NAM split needs more than a chunk");
            }
            let c = self.mem.alloc_chunk()?.to_u64();
            self.h.cursor = c;
            self.h.end = c + self.h.chunk_bytes;
        }
        Ok(())
    }

    /// A node's worth of the reserved room.
    fn alloc(&mut self) -> GlobalAddr {
        let a = GlobalAddr::from_u64(self.h.cursor);
        self.h.cursor += self.h.node_bytes as u64;
        dm_runtime::alloc::count_carved(self.h.node_bytes as u64);
        a
    }

    /// The image of the node at `level` covering `key`, and its address:
    /// [`Local::path`]'s walk with each node validated and routed in place
    /// ([`View`]: no decoded node, issue 32), the same nodes read and
    /// charged. The image is a `dm_verbs::buf` buffer to give back.
    fn descend(&mut self, key: &[u8], level: u8) -> Result<(GlobalAddr, Vec<u8>), Fail> {
        let mut a = GlobalAddr::from_u64(self.h.root);
        let mut b = self.read_image(a)?;
        let v = View::validated(&self.g, &b);
        if v.below_low(key) || v.beyond_high(key) {
            dm_verbs::buf::give(b);
            return bad("key outside this MS's partition");
        }
        loop {
            let v = View::validated(&self.g, &b);
            if v.level() <= level {
                return Ok((a, b));
            }
            let Some(c) = v.child_for(key) else {
                dm_verbs::buf::give(b);
                return bad(format!("NAM node at {a:?} routes no key (no entries)"));
            };
            dm_verbs::buf::give(b);
            a = c;
            b = self.read_image(a)?;
        }
    }

    /// The image at `a`, checked as [`Local::read`] checks it.
    fn read_image(&mut self, a: GlobalAddr) -> Result<Vec<u8>, Fail> {
        self.nodes += 1;
        let b = self.mem.read(a, self.h.node_bytes as usize)?;
        if View::new(&self.g, &b).is_none() {
            dm_verbs::buf::give(b);
            return bad(format!("NAM node at {a:?} fails its checksum"));
        }
        Ok(b)
    }

    /// Root-to-`level` path of nodes covering `key`.
    fn path(&mut self, key: &[u8], level: u8) -> Result<Vec<(GlobalAddr, Node)>, Fail> {
        let mut a = GlobalAddr::from_u64(self.h.root);
        let mut n = self.read(a)?;
        if n.below_low(key) || n.beyond_high(key) {
            return bad("key outside this MS's partition");
        }
        let mut path = Vec::new();
        while n.level > level {
            let c = n.child_for(key);
            path.push((a, n));
            a = c;
            n = self.read(a)?;
        }
        path.push((a, n));
        Ok(path)
    }

    /// Sets `key -> v` at `level`; splits upwards and grows the root as
    /// needed. `false` if `key` is absent and `may_insert` is not set.
    fn put(&mut self, key: &[u8], v: u64, may_insert: bool, level: u8) -> Result<bool, Fail> {
        let mut path = self.path(key, level)?;
        let (mut a, mut n) = path.pop().unwrap();
        match n.find(key) {
            Ok(i) => n.entries[i].1 = v,
            Err(_) if !may_insert => return Ok(false),
            Err(i) => n.entries.insert(i, (NodeKey::from_slice(key), v)),
        }
        if n.entries.len() <= self.g.capacity() {
            self.write(a, &n)?;
            return Ok(true);
        }
        // Every node a split chain may need (one per level and a new root),
        // taken before anything is written: out of memory changes nothing.
        self.reserve(path.len() as u64 + 2)?;
        loop {
            let ra = self.alloc();
            let (sep, right) = n.split_right(ra);
            self.write(ra, &right)?;
            self.write(a, &n)?;
            let Some((pa, mut p)) = path.pop() else {
                let kb = self.h.key_bytes as usize;
                let mut root = Node::empty(n.level + 1, n.low.clone(), right.high.clone());
                root.entries = vec![(n.low.first_entry_key(kb), a.to_u64()), (sep, ra.to_u64())];
                let r = self.alloc();
                self.write(r, &root)?;
                self.h.root = r.to_u64();
                self.save()?;
                return Ok(true);
            };
            let i = p.find(&sep).unwrap_or_else(|i| i);
            p.entries.insert(i, (sep, ra.to_u64()));
            if p.entries.len() <= self.g.capacity() {
                self.write(pa, &p)?;
                self.save()?;
                return Ok(true);
            }
            (a, n) = (pa, p);
        }
    }

    /// Up to `count` entries from `from` on, within this partition: the
    /// leaf images read in place ([`View::for_each_in_order`]) into a reply
    /// from the thread's buffer pool, which the caller gives back (no
    /// decoded node or reply allocated per scan once warm: issue 32). The
    /// same nodes read and charged as a walk of decoded nodes.
    fn scan(&mut self, from: &[u8], count: usize) -> Result<Vec<u8>, Fail> {
        let (_, mut b) = self.descend(from, 0)?;
        let per = self.h.key_bytes as usize + 8;
        let mut out = dm_verbs::buf::take(4 + count.min(SCAN_REPLY_BYTES / per) * per);
        out.extend_from_slice(&[0; 4]);
        let mut got = 0u32;
        loop {
            let v = View::validated(&self.g, &b);
            v.for_each_in_order(|k, val| {
                if got as usize == count {
                    return ControlFlow::Break(());
                }
                if k >= from {
                    out.extend_from_slice(k);
                    out.extend_from_slice(&val.to_le_bytes());
                    got += 1;
                }
                ControlFlow::Continue(())
            });
            let sibling = v.sibling();
            dm_verbs::buf::give(b);
            if got as usize == count || sibling.is_null() {
                break;
            }
            b = self.read_image(sibling)?;
        }
        out[..4].copy_from_slice(&got.to_le_bytes());
        Ok(out)
    }
}

//! Writing dirty leaf pages back to the pool (§4, §5.3): leaves are
//! modified in the CS cache only and written back whole when a dirty page
//! is chosen to cool (`make_room`), on [`DexTree::flush`] and before a
//! repartition (`flush_cs`). A page's generation tells whether the write
//! carried its newest content. In lease mode ([`DexTree::with_member`])
//! every change of a cached leaf is written through instead, before its
//! operation returns ([`Through`]).

use super::cache::Frame;
use super::{DexCs, DexTree};
use crate::node::Node;
use crate::tree::TreeError;
use dm_runtime::write;
use dm_verbs::GlobalAddr;

/// Lease mode: a changed cached leaf to write through. Its frame is
/// flushing from the change on, so no other operation of the CS reads or
/// changes it until the WRITE completed (`traverse` waits on flushing
/// leaves in lease mode): writes of one page are ordered, and what a reader
/// sees is in the pool.
pub(crate) struct Through {
    frame: u32,
    addr: GlobalAddr,
    node: Node,
    gen: u64,
}

impl Through {
    /// The page of frame `frame` (`f`, just changed and set flushing).
    pub(super) fn of(frame: u32, f: &Frame) -> Self {
        Through {
            frame,
            addr: f.addr,
            node: f.node.clone(),
            gen: f.gen,
        }
    }
}

/// Ends a write-through however its operation ends: the frame stops
/// flushing, and is clean if the WRITE completed with its newest content.
/// A failed or cancelled one leaves a change that may be missing from the
/// pool, which no reader may see (a dead CS would take it with it, issue
/// 33): the frame is marked to be READ again (`Frame::reread`) and clean,
/// so it is neither served nor written back as it is.
struct ThroughGuard<'a> {
    c: &'a DexCs,
    frame: u32,
    addr: GlobalAddr,
    gen: u64,
    written: bool,
}

impl Drop for ThroughGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.c.lock();
        if let Some(f) = st.frames.get_mut(self.frame as usize) {
            if f.addr == self.addr {
                f.flushing = false;
                if self.written && f.gen == self.gen {
                    f.dirty = false;
                } else if !self.written {
                    f.reread = true;
                    f.dirty = false;
                }
            }
        }
    }
}

impl DexTree {
    /// Lease mode: writes the changed leaf `w` through (one WRITE of the
    /// page) before its operation returns.
    pub(super) async fn write_through(&self, c: &DexCs, w: Through) -> Result<(), TreeError> {
        let mut g = ThroughGuard {
            c,
            frame: w.frame,
            addr: w.addr,
            gen: w.gen,
            written: false,
        };
        self.write_page(c, w.addr, &w.node).await?;
        g.written = true;
        Ok(())
    }

    /// Writes a whole leaf page back (lock word 0: leaves are never
    /// locked remotely).
    pub(super) async fn write_page(
        &self,
        c: &DexCs,
        a: GlobalAddr,
        n: &Node,
    ) -> Result<(), TreeError> {
        self.write_image(c, a, n.encode(&self.t.g)).await
    }

    /// Writes the node image `b` to `a` (one WRITE of the page), counted as
    /// a write-back.
    pub(super) async fn write_image(
        &self,
        c: &DexCs,
        a: GlobalAddr,
        b: Vec<u8>,
    ) -> Result<(), TreeError> {
        let len = b.len() as u64;
        write(a, b).await?;
        let mut st = c.locked().await;
        st.counters.write_backs += 1;
        st.counters.write_back_bytes += len;
        Ok(())
    }

    /// Makes room for one more frame (§5.3): evict a cooling page, else cool
    /// a sampled one (writing it back first if dirty). Gives up after a few
    /// rounds and lets the cache run over budget rather than stall.
    pub(super) async fn make_room(&self, c: &DexCs) -> Result<(), TreeError> {
        for _ in 0..16 {
            let job = {
                let mut st = c.locked().await;
                if st.frames.len() < st.budget || st.evict_one() {
                    if st.frames.len() < st.budget {
                        return Ok(());
                    }
                    continue;
                }
                let Some(v) = st.sample() else { continue };
                let f = &mut st.frames[v as usize];
                if !f.dirty {
                    st.cool(v);
                    continue;
                }
                f.flushing = true;
                (v, f.addr, f.node.clone(), f.gen)
            };
            let (v, a, n, gen) = job;
            let r = self.write_page(c, a, &n).await;
            let mut st = c.locked().await;
            let f = &mut st.frames[v as usize];
            f.flushing = false;
            r?;
            if f.gen == gen {
                f.dirty = false;
                if st.may_cool(v) {
                    st.cool(v);
                }
            }
        }
        Ok(())
    }

    /// Writes back every dirty page of CS `c` (they stay cached, clean).
    pub(crate) async fn flush_cs(&self, c: &DexCs) -> Result<u64, TreeError> {
        let jobs: Vec<(u32, GlobalAddr, Node, u64)> = {
            let mut st = c.locked().await;
            st.frames
                .iter_mut()
                .filter(|(_, f)| f.dirty && !f.flushing)
                .map(|(i, f)| {
                    f.flushing = true;
                    (i as u32, f.addr, f.node.clone(), f.gen)
                })
                .collect()
        };
        let mut res = Ok(jobs.len() as u64);
        for chunk in jobs.chunks(64) {
            let w = chunk.iter().map(|(_, a, n, _)| self.write_page(c, *a, n));
            for (r, (v, _, _, gen)) in futures::future::join_all(w).await.into_iter().zip(chunk) {
                let mut st = c.locked().await;
                let f = &mut st.frames[*v as usize];
                f.flushing = false;
                match r {
                    Ok(()) if f.gen == *gen => f.dirty = false,
                    Ok(()) => {}
                    Err(e) => res = Err(e),
                }
            }
        }
        res
    }
}

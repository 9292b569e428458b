//! Two-sided RPCs at the MS: a handler runs on a free MS core (or waits in
//! the MS's RPC queue), charged `ms_rpc_ns` plus the CPU time it reports, and
//! sees its MS through [`MsMemory`].

use super::world::{Event, World};
use crate::{GlobalAddr, MsMemory, VerbError, VerbOutput};

impl World {
    pub(super) fn run_rpc(
        &mut self,
        core: usize,
        wr_id: u64,
        ms: u16,
        ms_core: usize,
        handler: u16,
        payload: Vec<u8>,
    ) {
        let base = self.cfg.net.ms_rpc_ns;
        let h = self.ms[ms as usize].rpc.get(handler).cloned();
        let (reply, cost) = match h {
            None => (Err(VerbError::UnknownRpc { ms, handler }), base),
            Some(h) => {
                let mut view = MsView {
                    w: self,
                    ms,
                    cpu_ns: 0,
                };
                let r = crate::ms::call_handler(ms, handler, || h(&mut view, &payload));
                let c = view.cpu_ns;
                (r, base + c)
            }
        };
        self.ms[ms as usize].cores_busy[ms_core] = true;
        let done = self.now + cost;
        if let Some(r) = self.rec.as_deref_mut() {
            r.exec(core, wr_id, self.now);
        }
        self.push(
            done,
            Event::RpcDone {
                core,
                wr_id,
                ms,
                ms_core,
                reply,
            },
        );
    }

    pub(super) fn rpc_done(
        &mut self,
        core: usize,
        wr_id: u64,
        ms: u16,
        ms_core: usize,
        reply: Result<Vec<u8>, VerbError>,
    ) {
        let len = reply.as_ref().map_or(0, |r| r.len() as u64);
        let t = self.link(ms, self.now, len);
        let t = self.return_path(core, t, len);
        self.complete(core, wr_id, t, reply.map(VerbOutput::Rpc));
        self.ms[ms as usize].cores_busy[ms_core] = false;
        if let Some((c, w, h, p)) = self.ms[ms as usize].rpc_queue.pop_front() {
            self.run_rpc(c, w, ms, ms_core, h, p);
        }
    }
}

/// An RPC handler's view of its MS.
struct MsView<'a> {
    w: &'a mut World,
    ms: u16,
    cpu_ns: u64,
}

impl MsView<'_> {
    fn local(&self, addr: GlobalAddr) -> Result<(), VerbError> {
        if addr.ms() != self.ms {
            return Err(VerbError::OutOfBounds { addr, len: 0 });
        }
        Ok(())
    }
}

impl MsMemory for MsView<'_> {
    fn ms_id(&self) -> u16 {
        self.ms
    }
    fn read(&mut self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        self.local(addr)?;
        self.w.peek(addr, len)
    }
    fn write(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        self.local(addr)?;
        self.w.store(addr, data)
    }
    fn cas(&mut self, addr: GlobalAddr, expect: u64, swap: u64) -> Result<u64, VerbError> {
        self.local(addr)?;
        self.w.atomic(addr, |old| (old == expect).then_some(swap))
    }
    fn faa(&mut self, addr: GlobalAddr, add: u64) -> Result<u64, VerbError> {
        self.local(addr)?;
        self.w.atomic(addr, |old| Some(old.wrapping_add(add)))
    }
    fn alloc_chunk(&mut self) -> Result<GlobalAddr, VerbError> {
        let ms = self.ms;
        match self.w.ms[ms as usize].alloc.alloc() {
            Some(off) => Ok(GlobalAddr::new(ms, off)),
            None => Err(VerbError::MsOutOfMemory { ms }),
        }
    }
    fn free_chunk(&mut self, off: u64) -> Result<(), String> {
        self.w.ms[self.ms as usize].alloc.free(off)
    }
    fn charge_cpu(&mut self, ns: u64) {
        self.cpu_ns += ns;
    }
}

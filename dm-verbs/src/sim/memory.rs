//! MS memory as the simulator sees it: bounds-checked byte arrays (host
//! region and device memory), read, written and updated in place by atomics.

use super::world::{mix, World};
use crate::ms::check_bounds;
use crate::{GlobalAddr, VerbError};

impl World {
    pub(super) fn peek(&self, addr: GlobalAddr, len: usize) -> Result<Vec<u8>, VerbError> {
        let off = self.bounds(addr, len as u64)? as usize;
        let m = &self.ms[addr.ms() as usize];
        let mem = if addr.is_device() {
            &m.dev[..]
        } else {
            &m.host[..]
        };
        let mut out = crate::buf::take(len);
        out.extend_from_slice(&mem[off..off + len]);
        Ok(out)
    }

    pub(super) fn bounds(&self, addr: GlobalAddr, len: u64) -> Result<u64, VerbError> {
        check_bounds(
            addr,
            len,
            self.cfg.num_ms,
            self.cfg.ms.region_bytes,
            self.cfg.ms.device_bytes,
        )
    }

    pub(super) fn store(&mut self, addr: GlobalAddr, data: &[u8]) -> Result<(), VerbError> {
        let off = self.bounds(addr, data.len() as u64)? as usize;
        let m = &mut self.ms[addr.ms() as usize];
        let mem = if addr.is_device() {
            &mut m.dev[..]
        } else {
            &mut m.host[..]
        };
        mem[off..off + data.len()].copy_from_slice(data);
        self.note_write(addr, data.len() as u64);
        Ok(())
    }

    pub(super) fn atomic(
        &mut self,
        addr: GlobalAddr,
        f: impl FnOnce(u64) -> Option<u64>,
    ) -> Result<u64, VerbError> {
        if !addr.local_offset().is_multiple_of(8) {
            return Err(VerbError::Misaligned { addr });
        }
        // In place: one bounds check, no buffer (an atomic is a third of the verbs).
        let off = self.bounds(addr, 8)? as usize;
        if !self.writebacks.is_empty() {
            self.settle_write_backs(addr);
        }
        let m = &mut self.ms[addr.ms() as usize];
        let mem = if addr.is_device() {
            &mut m.dev[..]
        } else {
            &mut m.host[..]
        };
        let word: &mut [u8; 8] = (&mut mem[off..off + 8]).try_into().unwrap();
        let old = u64::from_le_bytes(*word);
        if let Some(new) = f(old) {
            *word = new.to_le_bytes();
        }
        self.trace_hash = mix(self.trace_hash, old);
        Ok(old)
    }
}

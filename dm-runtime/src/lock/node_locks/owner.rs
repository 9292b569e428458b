//! This handle's entry in its member's owner table (`super::super::ask`):
//! registered on the executor it locks from, before its first lock CAS
//! there; gone when the handle is.

use super::NodeLocks;
use crate::yield_now;

impl NodeLocks {
    /// Registers this handle's name on the current executor in the member's
    /// owner table (`super::ask`) before its first lock CAS there, waiting
    /// while a retired name's word is being released.
    pub(super) async fn register_owner(&self) {
        let exec = crate::core::with_current(|c| c.exec_id) as u64;
        if self.owner_exec.get() == exec + 1 {
            return;
        }
        let Some(m) = &self.member else {
            return;
        };
        self.unregister_owner();
        let hocl = (self.t.hier_lock && !self.table.lanes16)
            .then(|| self.local.clone())
            .flatten()
            .map(|local| super::super::ask::Hocl {
                local,
                slots: self.table.slots,
                device: self.table.device,
                glt_ptr_off: self.glt_ptr_off,
            });
        while !m
            .owners()
            .register(self.tag, exec as u32, &self.counters, hocl.clone())
        {
            yield_now().await;
        }
        self.owner_exec.set(exec + 1);
    }

    pub(super) fn unregister_owner(&self) {
        let e = self.owner_exec.replace(0);
        if let (Some(m), true) = (&self.member, e != 0) {
            m.owners().unregister(self.tag, (e - 1) as u32);
        }
    }
}

impl Drop for NodeLocks {
    fn drop(&mut self) {
        self.unregister_owner();
    }
}

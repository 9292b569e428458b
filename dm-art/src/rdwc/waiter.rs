//! A client queued in a lock entry's group ([`Waiter`]): waiting for the
//! result that covers it or for the lead, and leaving the queue cleanly
//! when dropped (the module docs' "Cancellation").

use super::{Cell, CellsOf, Lead, Msg, Rdwc, SPARE};
use std::sync::Arc;

/// A queued client; dropping it leaves the queue (or passes a lead on).
pub(crate) struct Waiter<'a, T: Clone> {
    pub(super) t: &'a Rdwc,
    pub(super) idx: usize,
    pub(super) write: bool,
    pub(super) cell: Cell<T>,
    /// Where its entry keeps reset cells of its kind.
    pub(super) cells: CellsOf<T>,
    pub(super) settled: bool,
}

impl<'a, T: Clone> Waiter<'a, T> {
    /// Waits for the covering result, or for the lead.
    pub(crate) async fn wait(mut self) -> Result<T, Lead<'a>> {
        let m = self.cell.get().await;
        self.settled = true;
        match m {
            Msg::Done(r) => Ok(r),
            Msg::Lead => Err(Lead {
                t: self.t,
                idx: self.idx,
                write: self.write,
                finished: false,
                marked: false,
            }),
        }
    }
}

impl<T: Clone> Drop for Waiter<'_, T> {
    fn drop(&mut self) {
        if self.settled {
            // The leader drops its clone under the entry's mutex after it
            // sets the message: once that mutex is ours, a cell nobody else
            // holds is kept (reset) for a later follower.
            let _e = self.t.entries[self.idx].m.lock().unwrap();
            if Arc::strong_count(&self.cell) == 1 {
                let mut sp = self.t.spare.lock().unwrap();
                let kept = (self.cells)(&mut sp);
                if kept.len() < SPARE {
                    self.cell.reset();
                    kept.push(self.cell.clone());
                }
            }
            return;
        }
        // Every message is set under the entry's mutex: it cannot change now.
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        match self.cell.try_get() {
            Some(Msg::Lead) if self.write => self.t.promote_write(&mut e),
            Some(Msg::Lead) => self.t.promote_read(&mut e),
            Some(Msg::Done(_)) => {}
            None => {
                let me = Arc::as_ptr(&self.cell) as *const ();
                let g = &mut e.read;
                g.batch.retain(|c| !is(c, me));
                g.next.retain(|c| !is(c, me));
                if let Some(g) = &mut e.write {
                    g.members.retain(|(_, c)| !is(c, me));
                }
            }
        }
    }
}

/// Whether `c` is the cell at `me` (a queued client leaving finds itself
/// in the read or the write group, whose cells differ in type).
fn is<T>(c: &Cell<T>, me: *const ()) -> bool {
    Arc::as_ptr(c) as *const () == me
}

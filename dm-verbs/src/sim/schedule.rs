//! The event loop: pops events in `(time, push order)` order until some
//! simulated core is due to run, and wakes cores when completions arrive.

use super::world::{mix, Event, World};
use crate::Completion;

impl World {
    pub(super) fn next_core(&mut self) -> Option<usize> {
        while let Some((time, ev)) = self.events.pop() {
            self.now = time;
            match ev {
                Event::CoreWake(c) => {
                    self.trace_hash = mix(mix(self.trace_hash, self.now), c as u64);
                    let core = &mut self.cores[c];
                    core.scheduled = false;
                    core.clock.set(core.clock.get().max(self.now));
                    return Some(c);
                }
                Event::Exec { core, wr_id, verb } => self.exec(core, wr_id, verb),
                Event::Replay(verb) => self.replay(verb),
                Event::WriteBack(id) => self.write_back(id),
                Event::Redo { core, wr_id, verb } => self.redo(core, wr_id, verb),
                Event::Post {
                    core,
                    ms,
                    t0,
                    mut wrs,
                } => {
                    self.post_at(core, ms, t0, &mut wrs);
                    self.spare_lists.push(wrs);
                }
                Event::ReadEnd {
                    core,
                    wr_id,
                    addr,
                    old,
                } => self.read_end(core, wr_id, addr, old),
                Event::RpcDone {
                    core,
                    wr_id,
                    ms,
                    ms_core,
                    reply,
                } => self.rpc_done(core, wr_id, ms, ms_core, reply),
                Event::Deliver { core, c } => {
                    if let Some(r) = self.rec.as_deref_mut() {
                        r.delivered(core, c.wr_id, self.now);
                    }
                    self.trace_hash =
                        mix(mix(mix(self.trace_hash, self.now), core as u64), c.wr_id);
                    self.cores[core].cq.push(c);
                    let k = &mut self.cores[core];
                    if !k.scheduled && k.clock.get() <= self.now {
                        // Idle core, due now: run it at once instead of a CoreWake round trip
                        // through the heap (same virtual time, same determinism).
                        self.trace_hash = mix(mix(self.trace_hash, self.now), core as u64);
                        k.clock.set(self.now);
                        return Some(core);
                    }
                    self.wake(core);
                }
            }
        }
        None
    }

    pub(super) fn wake(&mut self, core: usize) {
        if !self.cores[core].scheduled {
            self.cores[core].scheduled = true;
            let t = self.cores[core].clock.get().max(self.now);
            self.push(t, Event::CoreWake(core));
        }
    }

    pub(super) fn core_yielded(&mut self, core: usize, runnable: bool) {
        if runnable || !self.cores[core].cq.is_empty() {
            self.wake(core);
        }
    }

    pub(super) fn notify(&mut self, core: usize) {
        self.wake(core);
    }

    pub(super) fn poll_cq(&mut self, core: usize, out: &mut Vec<Completion>, max: usize) -> usize {
        let cq = &mut self.cores[core].cq;
        let n = cq.len().min(max);
        if n == cq.len() {
            out.append(cq);
        } else {
            out.extend(cq.drain(..n));
        }
        n
    }
}

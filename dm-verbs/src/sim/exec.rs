//! One-sided verbs executing at the MS: READs (torn when the fault model
//! says so, by mixing the snapshots at start and end), WRITEs, CAS, masked
//! CAS and FAA, and the NIC atomic bucket a successful CAS holds on for its
//! write-back (Sherman §3.2.2).

use super::network::bucket;
use super::world::{mix, Event, World};
use crate::ms::masked_cas_apply;
use crate::{Capability, GlobalAddr, Verb, VerbError, VerbOutput};
use rand::Rng;

impl World {
    pub(super) fn exec(&mut self, core: usize, wr_id: u64, verb: Verb) {
        self.verbs_executed += 1;
        self.trace_hash = mix(mix(mix(self.trace_hash, self.now), core as u64), wr_id);
        let now = self.now;
        match verb {
            Verb::Read { addr, len } => {
                let res = self.peek(addr, len as usize);
                match (res, self.cfg.faults.tear.granule(len as usize)) {
                    (Ok(old), Some(_)) => {
                        let end =
                            self.link(addr.ms(), now, len as u64) + self.cfg.faults.tear_window_ns;
                        self.push(
                            end,
                            Event::ReadEnd {
                                core,
                                wr_id,
                                addr,
                                old,
                            },
                        );
                    }
                    (Ok(data), None) => {
                        let t = self.link(addr.ms(), now, len as u64);
                        let t = self.return_path(core, t, len as u64);
                        self.complete(core, wr_id, t, Ok(VerbOutput::Read(data)));
                    }
                    (Err(e), _) => {
                        let t = self.return_path(core, now, 0);
                        self.complete(core, wr_id, t, Err(e));
                    }
                }
            }
            Verb::Write { addr, data } => {
                let res = self.store(addr, &data);
                let len = data.len() as u64;
                crate::buf::give(data);
                self.trace_hash = mix(self.trace_hash, len);
                let t = self.link_in(addr.ms(), now, len);
                let t = self.return_path(core, t, 0);
                self.complete(core, wr_id, t, res.map(|_| VerbOutput::Write));
            }
            Verb::Cas { addr, expect, swap } => {
                let mut res = self.atomic(addr, |old| (old == expect).then_some(swap));
                if let Ok(old) = res {
                    if old != expect {
                        self.maybe_write_back_failed_cas(addr, old);
                    }
                }
                if res == Ok(expect) {
                    self.cas_write_back(addr);
                    if expect != swap {
                        self.maybe_replay(Verb::Cas { addr, expect, swap });
                        if self.maybe_redo(core, wr_id, Verb::Cas { addr, expect, swap }) {
                            return;
                        }
                    }
                    let p = self.cfg.faults.unreported_cas_prob;
                    if p > 0.0 && expect != swap && self.rng.gen_bool(p.min(1.0)) {
                        res = Ok(swap);
                    }
                }
                let t = self.return_path(core, now, 8);
                self.complete(core, wr_id, t, res.map(VerbOutput::Atomic));
            }
            Verb::MaskedCas {
                addr,
                expect,
                swap,
                compare_mask,
                swap_mask,
            } => {
                let res = if self.cfg.masked_cas {
                    let cas = |old| masked_cas_apply(old, expect, swap, compare_mask, swap_mask);
                    let res = self.atomic(addr, cas);
                    if res.as_ref().is_ok_and(|&old| cas(old).is_some()) {
                        self.cas_write_back(addr);
                    }
                    res
                } else {
                    Err(VerbError::Unsupported(Capability::MaskedCas))
                };
                let t = self.return_path(core, now, 8);
                self.complete(core, wr_id, t, res.map(VerbOutput::Atomic));
            }
            Verb::Faa { addr, add } => {
                let res = self.atomic(addr, |old| Some(old.wrapping_add(add)));
                if res.is_ok() && add != 0 {
                    self.maybe_replay(Verb::Faa { addr, add });
                }
                let t = self.return_path(core, now, 8);
                self.complete(core, wr_id, t, res.map(VerbOutput::Atomic));
            }
            Verb::Rpc {
                ms,
                handler,
                payload,
            } => {
                let m = &mut self.ms[ms as usize];
                if let Some(i) = m.cores_busy.iter().position(|b| !b) {
                    self.run_rpc(core, wr_id, ms, i, handler, payload);
                } else {
                    m.rpc_queue.push_back((core, wr_id, handler, payload));
                }
            }
        }
    }

    pub(super) fn read_end(&mut self, core: usize, wr_id: u64, addr: GlobalAddr, old: Vec<u8>) {
        let g = self.cfg.faults.tear.granule(old.len()).unwrap_or(8);
        let mut out = old;
        let off = self
            .bounds(addr, out.len() as u64)
            .expect("bounds checked at start") as usize;
        let m = &self.ms[addr.ms() as usize];
        let mem = if addr.is_device() {
            &m.dev[off..]
        } else {
            &m.host[off..]
        };
        // Granules are aligned to absolute addresses; each keeps the value seen at
        // the start of the READ or takes the one in memory now, at random.
        let base = addr.local_offset();
        let mut i = 0usize;
        let (mut bits, mut left) = (0u64, 0u32);
        while i < out.len() {
            let abs = base + i as u64;
            let end = ((abs / g + 1) * g - base) as usize;
            let end = end.min(out.len());
            if left == 0 {
                bits = self.rng.gen();
                left = 64;
            }
            if bits & 1 == 0 {
                out[i..end].copy_from_slice(&mem[i..end]);
            }
            bits >>= 1;
            left -= 1;
            i = end;
        }
        let len = out.len() as u64;
        let t = self.link(addr.ms(), self.now, 0);
        let t = self.return_path(core, t, len);
        self.complete(core, wr_id, t, Ok(VerbOutput::Read(out)));
    }

    /// After an atomic `verb` changed its word: with
    /// `Faults::replay_prob`, its second execution is scheduled
    /// ([`World::replay`]).
    fn maybe_replay(&mut self, verb: Verb) {
        let f = &self.cfg.faults;
        if f.replay_prob > 0.0 && self.rng.gen_bool(f.replay_prob.min(1.0)) {
            let at = self.second_execution_at();
            self.push(at, Event::Replay(verb));
        }
    }

    /// After a CAS took its word: with `Faults::redo_cas_prob`, its second
    /// execution is scheduled and will complete it ([`World::redo`]);
    /// `true` if so (the caller does not complete it now).
    fn maybe_redo(&mut self, core: usize, wr_id: u64, verb: Verb) -> bool {
        let f = &self.cfg.faults;
        if f.redo_cas_prob > 0.0 && self.rng.gen_bool(f.redo_cas_prob.min(1.0)) {
            let at = self.second_execution_at();
            self.push(at, Event::Redo { core, wr_id, verb });
            return true;
        }
        false
    }

    /// When a replayed or redone atomic runs again: uniform in `(now, now +
    /// Faults::replay_max_ns]`.
    fn second_execution_at(&mut self) -> u64 {
        let max = self.cfg.faults.replay_max_ns.max(1);
        self.now + self.rng.gen_range(1..=max)
    }

    /// The second execution of a CAS whose completion it reports
    /// (`Faults::redo_cas_prob`): takes effect only if the word holds
    /// `expect` again; the completion carries the word's value now.
    pub(super) fn redo(&mut self, core: usize, wr_id: u64, verb: Verb) {
        self.trace_hash = mix(self.trace_hash, self.now);
        let Verb::Cas { addr, expect, swap } = verb else {
            unreachable!("only a CAS is redone");
        };
        let res = self.atomic(addr, |old| (old == expect).then_some(swap));
        if res == Ok(expect) {
            tracing::trace!(addr = ?addr, "sim: a CAS executed a second time (redo fault)");
            self.cas_write_back(addr);
        }
        let t = self.return_path(core, self.now, 8);
        self.complete(core, wr_id, t, res.map(VerbOutput::Atomic));
    }

    /// The second execution of an atomic (`Faults::replay_prob`): applied
    /// as the first was, with no completion; a replayed CAS takes effect
    /// only if its word holds `expect` again.
    pub(super) fn replay(&mut self, verb: Verb) {
        self.trace_hash = mix(self.trace_hash, self.now);
        let changed = match verb {
            Verb::Cas { addr, expect, swap } => {
                let r = self.atomic(addr, |old| (old == expect).then_some(swap));
                r.is_ok_and(|old| old == expect).then_some(addr)
            }
            Verb::Faa { addr, add } => {
                let r = self.atomic(addr, |old| Some(old.wrapping_add(add)));
                r.is_ok().then_some(addr)
            }
            _ => None,
        };
        if let Some(addr) = changed {
            tracing::trace!(addr = ?addr, "sim: an atomic executed a second time (replay fault)");
            self.cas_write_back(addr);
        }
    }

    /// A CAS verb on `addr` succeeded: on host memory its write-back's PCIe
    /// transaction holds the NIC bucket on (post reserved the read only).
    /// Atomics already queued behind keep their times: a model
    /// approximation, see docs/simulator.md. Not for the MS CPU's atomics
    /// in RPC handlers, which do not go through the NIC.
    pub(super) fn cas_write_back(&mut self, addr: GlobalAddr) {
        if !addr.is_device() {
            let net = self.cfg.net;
            let m = &mut self.ms[addr.ms() as usize];
            let b = bucket(addr, &net, m.buckets.len());
            m.buckets[b] = m.buckets[b].max(self.now + net.host_atomic_ns);
        }
    }
}

//! The network model of a WR's trip: posting through the CS NIC (message
//! rate, link), half an RTT, the MS NIC (message rate, atomic bucket,
//! in-order execution per QP); and the way back: the MS link, half an RTT,
//! the CS NIC's receive side, and the completion (with an injected delay).

use super::world::{Event, World};
use crate::{Completion, GlobalAddr, Verb, VerbError, VerbOutput, WorkRequest};
use rand::Rng;

impl World {
    /// Completes `wr_id` on `core` at `at` (+ an injected delay).
    pub(super) fn complete(
        &mut self,
        core: usize,
        wr_id: u64,
        at: u64,
        result: Result<VerbOutput, VerbError>,
    ) {
        let f = self.cfg.faults;
        let mut t = at;
        if f.delay_prob > 0.0 && self.rng.gen_bool(f.delay_prob.min(1.0)) {
            t += self.rng.gen_range(0..=f.delay_max_ns);
        }
        if let Some(r) = self.rec.as_deref_mut() {
            let old = match &result {
                Ok(VerbOutput::Atomic(v)) => Some(*v),
                _ => None,
            };
            r.complete(core, wr_id, t, result.is_ok(), old);
        }
        self.push(
            t,
            Event::Deliver {
                core,
                c: Completion { wr_id, result },
            },
        );
    }

    /// Time for a response of `bytes` to get back to `core`'s CS from now-ish `t`.
    pub(super) fn return_path(&mut self, core: usize, t: u64, bytes: u64) -> u64 {
        let x = self.transfer_ns(bytes);
        let cs = self.cores[core].cs as usize;
        let arrive = t + self.cfg.net.rtt_ns / 2;
        let done = occupy(&mut self.cs_nics[cs].rx_free, arrive, x);
        if let Some(r) = self.rec.as_deref_mut() {
            r.reply = Some((t, bytes));
        }
        done
    }

    pub(super) fn post_list(&mut self, core: usize, ms: u16, wrs: &mut Vec<WorkRequest>) {
        let t0 = self.cores[core].clock.get();
        if self.cfg.net.posts_in_time_order && t0 > self.now {
            // Taken at the NICs when virtual time reaches t0, after every
            // event before it (`NetModel::posts_in_time_order`).
            // Moved into a pooled list: the caller keeps its capacity.
            let mut list = self.spare_lists.pop().unwrap_or_default();
            list.append(wrs);
            self.push(
                t0,
                Event::Post {
                    core,
                    ms,
                    t0,
                    wrs: list,
                },
            );
            return;
        }
        self.post_at(core, ms, t0, wrs);
    }

    /// [`World::post_list`] at the NICs, the core's clock being `t0`.
    pub(super) fn post_at(&mut self, core: usize, ms: u16, t0: u64, wrs: &mut Vec<WorkRequest>) {
        assert!(
            t0 >= self.now,
            "sim: core {core} posts at {t0} ns, before global time {} ns",
            self.now
        );
        let net = self.cfg.net;
        let db = self.rec.as_deref_mut().map(|r| r.doorbell(core, ms, t0));
        for wr in wrs.drain(..) {
            if ms >= self.cfg.num_ms || self.cores[core].broken[ms as usize] {
                let err = if ms >= self.cfg.num_ms {
                    VerbError::OutOfBounds {
                        addr: GlobalAddr::new(ms.min(0x7fff), 0),
                        len: 0,
                    }
                } else {
                    VerbError::QpError { ms }
                };
                if let (Some(r), Some(db)) = (self.rec.as_deref_mut(), db) {
                    let cs = self.cores[core].cs;
                    let t = (t0, t0, t0, t0);
                    r.post(db, core, cs, ms, wr.wr_id, &wr.verb, t);
                }
                self.complete(core, wr.wr_id, t0 + net.rtt_ns, Err(err));
                continue;
            }
            // CS NIC: message rate, then the outgoing payload on the link.
            let cs = self.cores[core].cs as usize;
            let out = self.transfer_ns(wr.verb.bytes_out());
            let sent = occupy(&mut self.cs_nics[cs].tx_free, t0, net.nic_msg_ns + out);
            let arrive = sent + net.rtt_ns / 2;
            // MS NIC: message rate; in-order execution per QP.
            let m = &mut self.ms[ms as usize];
            let target = wr.verb.addr();
            let on_chip = target.is_some_and(|a| a.is_device());
            let mut exec = arrive.max(m.nic_free);
            m.nic_free = exec
                + if on_chip {
                    net.device_msg_ns
                } else {
                    net.nic_msg_ns
                };
            let is_atomic = matches!(
                wr.verb,
                Verb::Cas { .. } | Verb::MaskedCas { .. } | Verb::Faa { .. }
            );
            if let (true, Some(addr)) = (is_atomic, target) {
                // The bucket is reserved here, in post order; a host CAS
                // reserves its PCIe read only, and `atomic` extends the
                // reservation by the write-back if it succeeds (Sherman
                // §3.2.2: a failed CAS skips it).
                let b = bucket(addr, &net, m.buckets.len());
                exec = exec.max(m.buckets[b]);
                m.buckets[b] = exec
                    + match wr.verb {
                        _ if on_chip => net.device_atomic_ns,
                        Verb::Faa { .. } => net.host_atomic_ns,
                        _ => net.host_cas_fail_ns,
                    };
            } else if net.word_writes_wait_atomics {
                // A word WRITE waits for its bucket's queue without holding
                // the bucket (`NetModel::word_writes_wait_atomics`).
                if let (Verb::Write { data, .. }, Some(addr)) = (&wr.verb, target) {
                    if data.len() <= 8 {
                        exec = exec.max(m.buckets[bucket(addr, &net, m.buckets.len())]);
                    }
                }
            }
            let q = &mut self.cores[core].qp_last_exec[ms as usize];
            exec = exec.max(*q);
            if !m.pus.is_empty() {
                // The QP's PU holds the request until it starts.
                let p = core % m.pus.len();
                exec = exec.max(m.pus[p]);
                m.pus[p] = exec + net.nic_msg_ns;
            }
            *q = exec;
            if let (Some(r), Some(db)) = (self.rec.as_deref_mut(), db) {
                let t = (t0, arrive - net.rtt_ns / 2, arrive, exec);
                r.post(db, core, cs as u16, ms, wr.wr_id, &wr.verb, t);
            }
            self.push(
                exec,
                Event::Exec {
                    core,
                    wr_id: wr.wr_id,
                    verb: wr.verb,
                },
            );
        }
    }

    /// Occupies MS `ms`'s incoming link for `bytes` (a WRITE's payload)
    /// starting no earlier than `t`; returns the end. The same resource as
    /// [`World::link`]'s unless `NetModel::full_duplex_ms_links`.
    pub(super) fn link_in(&mut self, ms: u16, t: u64, bytes: u64) -> u64 {
        let x = self.transfer_ns(bytes);
        let duplex = self.cfg.net.full_duplex_ms_links;
        let m = &mut self.ms[ms as usize];
        let free = match duplex {
            true => &mut m.link_in_free,
            false => &mut m.link_free,
        };
        occupy(free, t, x)
    }

    /// Occupies MS `ms`'s link for `bytes` starting no earlier than `t`; returns the end.
    pub(super) fn link(&mut self, ms: u16, t: u64, bytes: u64) -> u64 {
        let x = self.transfer_ns(bytes);
        occupy(&mut self.ms[ms as usize].link_free, t, x)
    }
}

/// Occupies a resource free again at `*free` for `x` ns starting no earlier
/// than `t`: the end, which is also when it is free again.
fn occupy(free: &mut u64, t: u64, x: u64) -> u64 {
    *free = t.max(*free) + x;
    *free
}

/// The NIC atomic bucket of `addr`: the 12 LSBs of its 8-byte word's index
/// by default (Sherman §3.2.2; [`super::NetModel::atomic_bucket_shift`]).
pub(super) fn bucket(addr: GlobalAddr, net: &super::NetModel, buckets: usize) -> usize {
    (addr.local_offset() >> net.atomic_bucket_shift) as usize % buckets
}

//! A group's leader ([`Lead`]): it runs the remote operation for the
//! clients its round covers, hands them the result and passes the lead on
//! (the module docs' read delegation and write combining); dropping it
//! unfinished passes the lead on too.

use super::*;

/// The leader's duty; dropping it unfinished passes the lead on.
pub(crate) struct Lead<'a> {
    pub(super) t: &'a Rdwc,
    pub(super) idx: usize,
    pub(super) write: bool,
    pub(super) finished: bool,
    /// A read leader that took its group's mark when it joined: it needs
    /// no delegation window, and starts without the mutex when nobody
    /// queued in `next` ([`Lead::start_read`]).
    pub(super) marked: bool,
}

impl Lead<'_> {
    /// For the write leader holding the leaf lock: the value to WRITE (the
    /// WCB's latest), marking every follower queued so far as covered;
    /// `None` without write combining (the leader writes its own value).
    ///
    /// With [`Rdwc::absorb_writers`] (and no write combining): `None`, the
    /// leader writes its own value, and if the key is `present` before that
    /// write, every follower queued so far is covered, linearized just
    /// before it (an update follower then finds the key: it returns `true`,
    /// [`Lead::finish_write`]). An absent key covers nobody: an update
    /// linearized before the leader's upsert would find nothing.
    pub(crate) fn consume(&self, present: bool) -> Option<u64> {
        let covers = self.t.write_combining || (self.t.absorb && present);
        if !covers {
            return None;
        }
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        let g = e.write.as_mut().expect("a write leader's group");
        if !self.t.write_combining {
            // At most ABSORB_MAX of them, the first queued.
            let n = g.members.len().min(ABSORB_MAX);
            g.consumed = n.checked_sub(1).map(|i| g.members[i].0);
            return None;
        }
        g.consumed = Some(g.latest.0);
        Some(g.latest.1)
    }

    /// E-HOCL (the write queue, without combining or absorbing; module
    /// docs): whether this leader, holding its leaf's rear lock after
    /// `count` hand-overs, passes it to the next queued same-key writer
    /// instead of freeing it: one is queued, and `count` is below HOCL's
    /// limit (`HOCL.max_handover`, Sherman §4.3).
    pub(crate) fn can_hand_over(&self, count: u32) -> bool {
        let t = self.t;
        if !t.hands_over() || count >= crate::config::HOCL.max_handover {
            return false;
        }
        let e = t.entries[self.idx].m.lock().unwrap();
        e.write.as_ref().is_some_and(|g| !g.members.is_empty())
    }

    /// Leaves the rear lock `h` for the writer [`Lead::finish_write`]
    /// promotes next (an orphan if the group has ended, which a leader's
    /// group does not before it finishes).
    pub(crate) fn hand_over(&self, h: Handed) {
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        match e.write.as_mut() {
            Some(g) => g.handed = Some(h),
            None => self.t.orphan(h),
        }
    }

    /// The rear lock the writer before this promoted leader handed over,
    /// if it did.
    pub(crate) fn take_handed(&self) -> Option<Handed> {
        if !self.t.hands_over() {
            return None;
        }
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        e.write.as_mut().and_then(|g| g.handed.take())
    }

    /// For a write leader whose publication of the consumed value failed
    /// (the RCU baseline's slot CAS lost, `baseline`): nothing is covered
    /// until the next `consume`. Returns what was covered, for
    /// [`Lead::recover`].
    pub(crate) fn unconsume(&self) -> Option<u64> {
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        e.write.as_mut().and_then(|g| g.consumed.take())
    }

    /// For a write leader that found its publication reported failed had
    /// taken effect after all (`SmartTree::took_before`): the followers
    /// covered then, `upto` as [`Lead::unconsume`] returned it, are covered.
    pub(crate) fn recover(&self, upto: u64) {
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        if let Some(g) = e.write.as_mut() {
            g.consumed = Some(upto);
        }
    }

    /// Whether this read leader must yield once before it starts, so that
    /// same-key readers ready now can queue for its batch: a leader that
    /// holds no mark (on `sim`, or promoted) does; a marked one's batch
    /// takes such readers as they join.
    pub(crate) fn needs_window(&self) -> bool {
        !self.marked && dm_runtime::unposted_mark().is_none()
    }

    /// A read leader starts its remote search: every reader queued so far
    /// joins its batch (they were all invoked before the search starts),
    /// and a leader without a mark (promoted) takes one on a wall clock,
    /// so that its core's readers of this round join the batch as well.
    pub(crate) fn start_read(&self) {
        let entry = &self.t.entries[self.idx];
        if self.marked && !entry.queued.load(Relaxed) {
            // No reader queued since the last start ([`Entry`]), and the
            // mark taken at the join stands.
            return;
        }
        let mut e = entry.m.lock().unwrap();
        entry.queued.store(false, Relaxed);
        let g = &mut e.read;
        if g.active {
            if !self.marked {
                g.mark = dm_runtime::unposted_mark();
            }
            if g.batch.is_empty() {
                // No copy, and the queue keeps the batch's memory.
                std::mem::swap(&mut g.batch, &mut g.next);
            } else {
                g.batch.append(&mut g.next);
            }
        }
    }

    /// A read leader's result: to its batch, then the lead to the next batch.
    pub(crate) fn finish_read(mut self, r: &ReadResult) {
        self.finished = true;
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        let g = &mut e.read;
        if g.active && !g.batch.is_empty() {
            for c in g.batch.drain(..) {
                self.t.delegated.fetch_add(1, Relaxed);
                c.set(Msg::Done(r.clone()));
            }
        }
        self.t.promote_read(&mut e);
    }

    /// A write leader's result: to the followers its WRITE covered, then the
    /// lead to the first one it did not. Absorbed followers (linearized
    /// before the leader's write, the key present) get `true` unless the
    /// leader failed.
    pub(crate) fn finish_write(mut self, r: &WriteResult) {
        self.finished = true;
        // Without write combining only absorbed followers are covered.
        let r = match r {
            Ok(_) if self.t.absorb && !self.t.write_combining => Ok(true),
            r => r.clone(),
        };
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        if let Some(g) = &mut e.write {
            if let Some(upto) = g.consumed {
                // The covered followers, in arrival order, get the result.
                g.members.retain(|(s, c)| {
                    if *s > upto {
                        return true;
                    }
                    self.t.combined.fetch_add(1, Relaxed);
                    c.set(Msg::Done(r.clone()));
                    false
                });
            }
        }
        self.t.promote_write(&mut e);
    }
}

impl std::fmt::Debug for Lead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lead(entry {}, write {})", self.idx, self.write)
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut e = self.t.entries[self.idx].m.lock().unwrap();
        if self.write {
            self.t.promote_write(&mut e);
        } else {
            self.t.promote_read(&mut e);
        }
    }
}

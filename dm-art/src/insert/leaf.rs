//! Leaf writes of insert, update and remove (SMART §4.1.1-4.1.2): what a
//! write does to the key's leaf ([`Mode`]), the new leaf an insert WRITEs
//! before publishing it (allocated once per operation and reused by its
//! retries, [`Spare`]), and the in-place update under the leaf's rear lock,
//! released by the WRITE that stores the new item.

use crate::error::ArtError;
use crate::layout::{lock_free, lock_holder, lock_taken, Leaf, LEAF_OFF_META, SEQ_MASK};
use crate::rdwc::{Handed, Lead, WriteResult};
use crate::tree::{SmartTree, MAX_RETRIES};
use dm_runtime::lock::member::short_inc;
use dm_runtime::lock::{while_releasing, CsCas, CsHeld, LeaseWatch, LockEvent};
use dm_runtime::{cas, write, yield_now};
use dm_verbs::GlobalAddr;

/// What a write does to the key's leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Insert or overwrite.
    Upsert(u64),
    /// Overwrite only if present.
    Update(u64),
    /// Clear the valid bit if present.
    Remove,
}

impl Mode {
    /// The `(valid, value)` this write gives the leaf `l`, or `None` when it
    /// changes nothing (update or remove of an absent key).
    pub(crate) fn decide(self, l: &Leaf) -> Option<(bool, u64)> {
        match self {
            Mode::Upsert(v) => Some((true, v)),
            Mode::Update(v) if l.valid => Some((true, v)),
            Mode::Remove if l.valid => Some((false, l.value)),
            _ => None,
        }
    }
}

/// The leaf image a locked write stores: `decided` applied to `l`, the
/// sequence number bumped. A write-combining leader `wc` stores the WCB's
/// latest value, taken here, once the lock is held (SMART §4.2.3).
pub(crate) fn next_leaf(l: Leaf, decided: (bool, u64), wc: Option<&Lead<'_>>) -> Leaf {
    let (valid, value) = decided;
    let value = match wc {
        Some(w) if valid => w.consume(l.valid).unwrap_or(value),
        _ => value,
    };
    Leaf {
        valid,
        value,
        seq: l.seq + 1,
        ..l
    }
}

/// Memory allocated by one operation and not yet published (reused by its
/// retries, so a lost CAS costs no new allocation).
#[derive(Default)]
pub(crate) struct Spare {
    pub(crate) leaf: Option<GlobalAddr>,
    pub(super) nodes: Vec<GlobalAddr>,
    /// The reverse pointer `place_leaf` last WROTE the spare leaf with
    /// (`None` once anything else was written into it).
    placed: Option<GlobalAddr>,
    /// A CAS that would have published [`Spare::leaf`] reported failure, and
    /// may yet have taken its slot (`SmartTree::took_before`).
    pub(crate) maybe: Option<Maybe>,
}

/// A publishing CAS whose failure may be a success soft-RoCE reported from
/// a second execution, after another writer had changed the slot
/// (`dm_verbs::sim::Faults::redo_cas_prob`; docs/rdma.md): `leaf` is the
/// spare leaf it carried, `stop` the [`crate::layout::chain_bits`] of the
/// leaf it expected to replace (0: it filled an empty slot or split),
/// `covered` the write-combining followers its WRITE carried (SMART
/// §4.2.3; `rdwc::Lead::unconsume`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Maybe {
    pub(crate) leaf: GlobalAddr,
    pub(crate) stop: u64,
    pub(crate) covered: Option<u64>,
}

impl Spare {
    /// Notes that the CAS that carried the spare leaf in a slot where it
    /// would replace the leaf of chain bits `stop` (and the followers
    /// `covered`) reported failure.
    pub(crate) fn lost(&mut self, stop: u64, covered: Option<u64>) {
        if let Some(leaf) = self.leaf {
            self.maybe = Some(Maybe {
                leaf,
                stop,
                covered,
            });
        }
    }
}

impl SmartTree {
    /// WRITEs this operation's new leaf (allocated once) with reverse pointer
    /// `rev` and returns its address.
    pub(super) async fn place_leaf(
        &self,
        spare: &mut Spare,
        key: &[u8],
        value: u64,
        rev: GlobalAddr,
    ) -> Result<GlobalAddr, ArtError> {
        let written = spare.leaf.is_some() && spare.placed == Some(rev);
        let a = self.spare_leaf(spare).await?;
        if !written {
            write(a, self.new_leaf_image(key, value, rev)).await?;
        }
        spare.placed = Some(rev);
        Ok(a)
    }

    pub(super) fn new_leaf_image(&self, key: &[u8], value: u64, rev: GlobalAddr) -> Vec<u8> {
        self.leaf.encode(&Leaf {
            rev,
            valid: true,
            seq: 0,
            key: crate::keys::Path::from_slice(key),
            value,
        })
    }

    /// This operation's new leaf: allocated on first use, reused by retries.
    /// Its image is the caller's to WRITE (`place_leaf` skips a WRITE that
    /// is already there).
    pub(crate) async fn spare_leaf(&self, spare: &mut Spare) -> Result<GlobalAddr, ArtError> {
        spare.placed = None;
        match spare.leaf {
            Some(a) => Ok(a),
            None => {
                let a = self.alloc_leaf().await?;
                spare.leaf = Some(a);
                Ok(a)
            }
        }
    }

    pub(super) async fn spare_node(&self, spare: &mut Spare) -> Result<GlobalAddr, ArtError> {
        match spare.nodes.pop() {
            Some(a) => Ok(a),
            None => self.alloc_internal().await,
        }
    }

    /// In-place leaf write under the rear lock (§4.1.2): lock CAS from the
    /// free word of the image's sequence number, then one WRITE of
    /// `[8, leaf end)` carrying the new item, `seq + 1` and the free lock
    /// word (or, under E-HOCL with a same-key writer queued, the word
    /// still taken: [`Self::locked_write`]). A failed CAS (someone wrote
    /// since the READ, or holds the lock) yields and READs the leaf again.
    /// A write-combining leader `wc` WRITEs the WCB's latest value, taken
    /// once the lock is held (§4.2.3).
    ///
    /// With a membership (issue 33) a word that is not free is CASed from
    /// its stale value instead when [`Self::stale_rear`] says nobody holds
    /// it: a dead member's lock taken at the image's `seq` (a holder's
    /// WRITE either freed the lock at `seq + 1` or, handing it over, left
    /// it taken at the `seq` it wrote), a word naming this CS that no task
    /// of it holds ([`dm_runtime::lock::CsWords`]), or a word no writer
    /// leaves; the leaf is then READ again under the lock
    /// ([`Self::write_after_stale`]).
    /// Every lock CAS of a member is in its CS ledger from post to the
    /// WRITE's completion. Counted ([`dm_runtime::lock::LockStats`]): the
    /// acquisition, a failed CAS, an image whose lock word was not free (a
    /// wait), a recovery or a takeover.
    pub(super) async fn leaf_write(
        &self,
        a: GlobalAddr,
        mut l: Leaf,
        mut lock: u64,
        mode: Mode,
        wc: Option<&Lead<'_>>,
    ) -> WriteResult {
        let lock_a = a.add(self.leaf.lock_off() as u64);
        let mut watch = StaleWatch::default();
        for _ in 0..MAX_RETRIES {
            let Some(decided) = mode.decide(&l) else {
                return Ok(false);
            };
            let mut stale = None;
            if lock != lock_free(l.seq) {
                self.count_lock(LockEvent::Waited);
                stale = self.stale_rear(&mut watch, lock, &l, lock_a).await?;
            }
            if lock == lock_free(l.seq) || stale.is_some() {
                let reg = match &mut stale {
                    Some(Stale::OwnCs(c)) => c.take(),
                    _ => self
                        .member
                        .as_ref()
                        .map(|m| m.cs_words().begin(lock_a.to_u64())),
                };
                let got = cas(lock_a, lock, lock_taken(l.seq, self.rear_name())).await?;
                if got == lock {
                    let Some(s) = stale else {
                        let held = reg.map(|r| r.took());
                        self.count_lock(LockEvent::Acquired);
                        return self.locked_write(a, l, decided, 0, held, wc).await;
                    };
                    let held = reg.map(|r| self.took_stale(a, lock, s, r));
                    self.count_lock(LockEvent::Acquired);
                    return self.write_after_stale(a, mode, held, wc).await;
                }
                watch = StaleWatch::default();
                self.count_lock(LockEvent::CasFailed);
            }
            yield_now().await;
            (l, lock) = self.read_leaf(a).await?;
        }
        Err(ArtError::LockStuck(a))
    }

    /// The write of leaf `a` under its rear lock, taken from a stale word
    /// ([`Self::stale_rear`]) and held: the leaf is READ again and `mode`
    /// decided on that image, not on the one the word was found on. A
    /// stale word taken at the image's `seq` says the image is current only
    /// while a word always follows its leaf's last WRITE, and soft-RoCE's
    /// failed CAS that stores the word it read breaks that (`--faults
    /// writeback`): it put a word taken at `seq` back after the WRITE that
    /// stored `seq + 1` and freed it had landed, this CS's next writer
    /// claimed that word on the image of `seq` READ before the WRITE, and
    /// removed a key a second time (`dm-bench check --index smart --faults
    /// torn,delay,unreported,replay,redo,writeback,crash --clients 64 --keys
    /// 32 --cores 4 --first-seed 101147`). Held, the leaf changes under
    /// nobody else; a write that changes nothing frees the word at the
    /// image's `seq`.
    async fn write_after_stale(
        &self,
        a: GlobalAddr,
        mode: Mode,
        held: Option<CsHeld<'_>>,
        wc: Option<&Lead<'_>>,
    ) -> WriteResult {
        let (l, _) = self.read_leaf(a).await?;
        let Some(decided) = mode.decide(&l) else {
            while_releasing(held, self.free_rear_word(a, l.seq)).await?;
            return Ok(false);
        };
        self.locked_write(a, l, decided, 0, held, wc).await
    }

    /// The WRITE of leaf `a` under its rear lock, held (image `l`, on which
    /// `decided` was taken): `[8, leaf end)` with the next item, `seq + 1`
    /// and the lock word free, which releases it (§4.1.1). With a same-key
    /// writer of this CS queued and fewer than the limit's hand-overs
    /// (`count`) before it, the word stays taken at the new `seq` and the
    /// lock passes to that writer once the WRITE completed (E-HOCL, §5.3.1:
    /// [`crate::rdwc::Handed`]). Cancelled mid-WRITE, the CS ledger's hold
    /// stays: a claimer on another core must not take the word before the
    /// WRITE that frees it lands (`while_releasing`).
    async fn locked_write(
        &self,
        a: GlobalAddr,
        l: Leaf,
        decided: (bool, u64),
        count: u32,
        held: Option<CsHeld<'_>>,
        wc: Option<&Lead<'_>>,
    ) -> WriteResult {
        let next = next_leaf(l, decided, wc);
        let img = self.leaf.encode(&next);
        let mut tail = dm_verbs::buf::take(img.len() - LEAF_OFF_META);
        tail.extend_from_slice(&img[LEAF_OFF_META..]);
        dm_verbs::buf::give(img);
        let to = a.add(LEAF_OFF_META as u64);
        let Some(lead) = wc.filter(|w| w.can_hand_over(count)) else {
            while_releasing(held, write(to, tail)).await?;
            return Ok(true);
        };
        let lo = self.leaf.lock_off() - LEAF_OFF_META;
        let taken = lock_taken(next.seq, self.rear_name());
        tail[lo..lo + 8].copy_from_slice(&taken.to_le_bytes());
        // The hold outlives the WRITE: the receiver adopts it.
        let releasing = held.map(CsHeld::releasing);
        if let Err(e) = write(to, tail).await {
            if let Some(r) = releasing {
                r.done();
            }
            return Err(e.into());
        }
        let hold = releasing.and_then(|r| {
            std::mem::forget(r);
            let word = a.add(self.leaf.lock_off() as u64).to_u64();
            self.member.clone().map(|m| (m, word))
        });
        lead.hand_over(Handed {
            leaf: a,
            image: next,
            count: count + 1,
            hold,
        });
        Ok(true)
    }

    /// An upsert or update whose leaf's rear lock the same-key writer
    /// before it handed over (E-HOCL, §5.3.1; `crate::rdwc::Handed`): no
    /// READ and no lock CAS; it decides on the image that writer stored
    /// and WRITEs (or hands over again). One that changes nothing (an
    /// update of a removed key) frees the word at the image's `seq` with
    /// an 8-byte WRITE.
    pub(crate) async fn handed_write(
        &self,
        mut h: Handed,
        mode: Mode,
        lead: &Lead<'_>,
    ) -> WriteResult {
        self.count_lock(LockEvent::HandedOver);
        let hold = h.hold.take();
        let held = hold.as_ref().map(|(m, w)| m.cs_words().adopt(*w));
        let (a, l) = (h.leaf, h.image.clone());
        let Some(decided) = mode.decide(&l) else {
            while_releasing(held, self.free_rear_word(a, l.seq)).await?;
            return Ok(false);
        };
        self.locked_write(a, l, decided, h.count, held, Some(lead))
            .await
    }

    /// Frees the rear locks this CS's table holds as orphans (hand-overs
    /// whose receivers were cancelled, without a membership:
    /// `crate::rdwc::Handed`): an 8-byte WRITE of each word, free at the
    /// `seq` it is taken at (the leaf holds what its last writer stored).
    /// One relaxed load when there are none, the usual case.
    pub(crate) async fn free_orphans(&self, t: &crate::rdwc::Rdwc) -> Result<(), ArtError> {
        for (leaf, seq) in t.take_orphans() {
            self.free_rear_word(leaf, seq).await?;
        }
        Ok(())
    }

    /// The 8-byte WRITE that frees leaf `a`'s rear lock word at `seq`
    /// (the leaf holds the image of that `seq`; nothing else changes).
    fn free_rear_word(&self, a: GlobalAddr, seq: u64) -> dm_runtime::Verbed<()> {
        let mut free = dm_verbs::buf::take(8);
        free.extend_from_slice(&lock_free(seq).to_le_bytes());
        write(a.add(self.leaf.lock_off() as u64), free)
    }

    /// This handle's name in the rear lock words it takes (0 without a
    /// membership: as before issue 33).
    fn rear_name(&self) -> u64 {
        self.member.as_ref().map_or(0, |m| {
            (short_inc(m.incarnation()) as u64) << 9 | m.cs() as u64
        })
    }

    /// Whether the rear lock word `lock`, found on image `l` and not free,
    /// is one nobody holds (always `None` without a membership):
    /// - taken at the image's `seq` by this CS's incarnation, with no task
    ///   of the CS holding it or CASing it: a CAS whose success went
    ///   unreported took it (soft-RoCE, docs/rdma.md; claimed at once);
    /// - taken at the image's `seq` by a member found dead
    ///   ([`LeaseWatch`], after a lease and a still heartbeat); a live
    ///   member's name that stays for a lease is a request to its CS to
    ///   release the word if none of its tasks holds it
    ///   ([`LeaseWatch::ask_cs`]);
    /// - a word no writer leaves on this image (free bit clear with a
    ///   name, or taken at another `seq`), unchanged for a lease: the
    ///   image's last WRITE completed long ago, and only a second
    ///   execution of an old lock CAS torn with that WRITE, or a WRITE cut
    ///   between the item and the lock word by its writer's death, leaves
    ///   one. A live taker's CAS expects the free word, so none holds it.
    ///
    /// Errors: the membership record's READ.
    async fn stale_rear(
        &self,
        watch: &mut StaleWatch,
        lock: u64,
        l: &Leaf,
        lock_a: GlobalAddr,
    ) -> Result<Option<Stale<'_>>, ArtError> {
        let Some(me) = &self.member else {
            return Ok(None);
        };
        let at_seq = lock & 1 == 1 && (lock >> 1) & SEQ_MASK == l.seq & SEQ_MASK;
        if !at_seq {
            let now = dm_runtime::now_ns();
            if watch.odd.0 != lock || watch.odd.1 != l.seq || watch.odd.2 == 0 {
                watch.odd = (lock, l.seq, now.max(1));
                return Ok(None);
            }
            let waited = now.saturating_sub(watch.odd.2);
            return Ok((waited >= me.lease().lease_ns).then_some(Stale::Odd(waited)));
        }
        if lock == lock_taken(l.seq, self.rear_name()) {
            return Ok(me
                .cs_words()
                .claim(lock_a.to_u64())
                .map(|c| Stale::OwnCs(Some(c))));
        }
        let dead = watch.lease.dead(me, lock, lock_holder(lock)).await?;
        if dead.is_none() {
            // A live CS's name for a lease: ask it to release the word if
            // none of its tasks holds it (an unreported CAS of its own).
            watch
                .lease
                .ask_cs(me, lock_a, lock, lock_holder(lock))
                .await?;
        }
        Ok(dead.map(Stale::Dead))
    }

    /// Registers the take of a stale rear lock word `lock` of leaf `a`
    /// ([`Self::stale_rear`]): counted, recorded and warned.
    fn took_stale<'a>(&self, a: GlobalAddr, lock: u64, s: Stale<'_>, reg: CsCas<'a>) -> CsHeld<'a> {
        let c = self.lock_counters();
        let (held, why, ns) = match s {
            Stale::OwnCs(_) => {
                self.count_lock(LockEvent::TakenOver);
                (reg.took_over(), "this CS's CAS took it unreported", None)
            }
            Stale::Dead(ns) => (reg.took(), "its holder is dead (lease expired)", Some(ns)),
            Stale::Odd(ns) => (
                reg.took(),
                "no writer leaves that word (lease expired)",
                Some(ns),
            ),
        };
        if let Some(ns) = ns {
            c.recovered(ns);
            self.count_lock(LockEvent::Recovered);
        }
        tracing::warn!(leaf = ?a, word = format_args!("{lock:#x}"), why, "took over a stale rear leaf lock");
        held
    }
}

/// What a rear lock's waiter watches ([`SmartTree::stale_rear`]): a
/// holder's lease, and a word no writer leaves (value, image `seq`, since
/// when on the waiter's clock).
#[derive(Default)]
struct StaleWatch {
    lease: LeaseWatch,
    odd: (u64, u64, u64),
}

/// A rear lock word nobody holds, and why ([`SmartTree::stale_rear`]).
enum Stale<'a> {
    /// Names this CS's incarnation, claimed in its ledger.
    OwnCs(Option<CsCas<'a>>),
    /// Its holder died; ns since the waiter last knew it alive.
    Dead(u64),
    /// No writer leaves it; ns it stood unchanged.
    Odd(u64),
}

//! `get`, `update`, `insert`, `remove` and the Spear lock (Dolphin §III-B,
//! §III-C; the sound protocol is in the [`crate::dolphin`] docs).

use super::layout::{Found, Item, KeyWord, LeafGeometry, LeafImage, LeafView};
use super::walk::{fit, Absent, Fit, Place, Target};
use super::Counter;
use super::{key_u64, DolphinTree, DolphinUpdate, EXCLUSIVE};
use crate::cache::Hit;
use crate::cursor::Cursor;
use crate::error::ArtError;
use crate::tree::MAX_RETRIES;
use dm_runtime::lock::{Held, NodeLocks};
use dm_runtime::{cas, faa, read, write, yield_now, ReadBuf};
use dm_verbs::buf::le64;
use dm_verbs::GlobalAddr;

/// Where the next attempt of an operation starts.
enum Next {
    /// The cache or the root.
    Top,
    /// A fresh ART cursor.
    From(Cursor),
    /// A leaf found by backtracking.
    Leaf(Target),
}

/// How an attempt holds the leaf it READs (Spear, §III-C; lookups take
/// none and read the leaf in place, [`DolphinTree::get`]).
#[derive(Clone, Copy)]
enum Hold {
    /// An IDU share, FAA +1 (updates).
    Share,
    /// The exclusive hold, FAA -EXCLUSIVE (inserts, removes, splits).
    Exclusive,
}

/// A leaf held in lease mode ([`DolphinTree::with_member`]): its lock
/// word taken as a node lock.
pub(crate) struct Lease<'a> {
    locks: &'a NodeLocks,
    held: Held<'a>,
}

impl<'a> Lease<'a> {
    /// A lease-mode hold of a leaf by `locks`.
    pub(crate) fn new(locks: &'a NodeLocks, held: Held<'a>) -> Self {
        Lease { locks, held }
    }

    /// Releases the lock after `writes` (one doorbell with the unlock WRITE
    /// when on the leaf's MS: command combination).
    pub(crate) async fn release(
        self,
        writes: impl IntoIterator<Item = (GlobalAddr, Vec<u8>)>,
    ) -> Result<(), ArtError> {
        Ok(self.locks.release(self.held, writes).await?)
    }
}

/// How a held leaf is held beyond its [`Hold`]: `Some` in lease mode.
pub(crate) type Guard<'a> = Option<Lease<'a>>;

/// What an attempt reached.
#[allow(clippy::large_enum_variant)] // moved once per attempt; boxing would allocate
enum Reached<'a> {
    /// The leaf covering the key, held, with its validated READ (read in
    /// place through [`LeafView::trusted`]).
    Leaf(Target, ReadBuf, Guard<'a>),
    /// No leaf for the key's prefix.
    Absent(Absent, Option<Hit>),
}

/// One attempt of an operation for which a confirmed absence is final
/// (get, update, remove): see [`DolphinTree::reach`].
#[allow(clippy::large_enum_variant)] // as `Reached`
enum Step<'a> {
    /// The leaf covering the key, held, with its validated READ.
    Leaf(Target, ReadBuf, Guard<'a>),
    /// The key's absence is confirmed.
    Absent,
    /// Try again from where `next` now says.
    Again,
}

/// The next attempt's place: walks unless backtracking gave a leaf.
async fn next_place(t: &DolphinTree, path: &[u8; 8], next: Next) -> Result<Place, ArtError> {
    match next {
        Next::Top => t.locate(path, None).await,
        Next::From(c) => t.locate(path, Some(c)).await,
        Next::Leaf(l) => Ok(Place::Leaf(l)),
    }
}

/// The 24 bytes of an item.
pub(crate) fn item_bytes(it: &Item) -> Vec<u8> {
    let mut b = dm_verbs::buf::take(24);
    b.extend_from_slice(&it.key.encode().to_le_bytes());
    b.extend_from_slice(&it.bufs[0].to_le_bytes());
    b.extend_from_slice(&it.bufs[1].to_le_bytes());
    b
}

impl DolphinTree {
    pub(crate) fn lock_addr(&self, leaf: GlobalAddr) -> GlobalAddr {
        leaf.add(self.g.lock_off() as u64)
    }

    /// One attempt to reach the leaf of `k` (`path`: its bytes) from `*next`
    /// and hold it as `hold` (the hold's verbs go in the leaf READ's
    /// doorbell). `Reached::Leaf` when the leaf covers `k` (held);
    /// `Reached::Absent` where `k`'s prefix has no leaf (a leaf of another
    /// prefix is released and reported as `Absent::Other`); `None` to try
    /// again from `*next` (a backtrack, or a hold that must wait).
    async fn attempt(
        &self,
        path: &[u8; 8],
        k: u64,
        next: &mut Next,
        hold: Hold,
    ) -> Result<Option<Reached<'_>>, ArtError> {
        let t = match next_place(self, path, std::mem::replace(next, Next::Top)).await? {
            Place::Absent(a, hit) => return Ok(Some(Reached::Absent(a, hit))),
            Place::Leaf(t) => t,
        };
        // In lease mode the lock's guard. The lease-mode lock's future is
        // boxed: unboxed it doubles Spear's update future (2.6 -> 5.3 KiB;
        // each operation's future is copied when it is awaited).
        let mut g = None;
        let held = match (hold, &self.locks) {
            (_, Some(l)) => Box::pin(self.lock_leased(l, t.leaf, &mut g)).await?,
            (Hold::Share, None) => self.lock_shared(t.leaf).await?,
            (Hold::Exclusive, None) => self.lock_exclusive(t.leaf).await?,
        };
        let Some(b) = held else {
            *next = Next::Leaf(t);
            return Ok(None);
        };
        let v = LeafView::trusted(&self.g, &b);
        self.leaf_reverse_check(&t, v.rev(), path);
        let (fit, special) = (fit(v.prefix(), v.covers(k), k), v.special());
        match fit {
            Fit::Covers => Ok(Some(Reached::Leaf(t, b, g))),
            Fit::Beyond => {
                self.release(t.leaf, hold, g).await?;
                *next = Next::Leaf(self.backtrack(&t, special, path).await?);
                Ok(None)
            }
            Fit::OtherPrefix(prefix) => {
                self.release(t.leaf, hold, g).await?;
                Ok(Some(Reached::Absent(
                    Absent::Other { c: t.c, prefix },
                    t.hit,
                )))
            }
        }
    }

    /// [`DolphinTree::attempt`] for a reader or a writer of an existing
    /// key, with an absence settled: confirmed ([`Step::Absent`]) or not,
    /// in which case `*next` is where to walk on from ([`Step::Again`]).
    async fn reach(
        &self,
        path: &[u8; 8],
        k: u64,
        next: &mut Next,
        hold: Hold,
    ) -> Result<Step<'_>, ArtError> {
        Ok(match self.attempt(path, k, next, hold).await? {
            None => Step::Again,
            Some(Reached::Absent(a, hit)) => match self.confirm_absent(a, hit, path).await? {
                None => Step::Absent,
                Some(c) => {
                    *next = Next::From(c);
                    Step::Again
                }
            },
            Some(Reached::Leaf(t, img, g)) => Step::Leaf(t, img, g),
        })
    }

    /// Lease mode: takes the lock word of the leaf at `a` as a node lock,
    /// the leaf READ in the CAS's doorbell (`NodeLocks::lock_and_read`):
    /// the image, the lock in `*guard`. Taken from a holder that never
    /// released it, what that holder's split left half done is rolled
    /// forward first (`settle`); if that rewrote this leaf, it is released
    /// and `None` says try again.
    async fn lock_leased<'a>(
        &'a self,
        l: &'a NodeLocks,
        a: GlobalAddr,
        guard: &mut Guard<'a>,
    ) -> Result<Option<ReadBuf>, ArtError> {
        let (held, b) = l
            .lock_and_read(self.lock_addr(a), Some((a, self.g.bytes as u32)))
            .await?;
        let g = Lease { locks: l, held };
        let img = match b.filter(|b| LeafView::new(&self.g, b).is_some()) {
            Some(b) => Ok(b),
            None => self.read_leaf_buf(a).await,
        };
        let stale = g.held.taken_stale();
        let settled = match img {
            // Rare (a takeover): decoded whole and boxed, so its future
            // does not grow every operation's.
            Ok(b) if stale => match LeafImage::decode(&self.g, &b) {
                Some(img) => Box::pin(self.settle(l, a, &img)).await.map(|w| (b, w)),
                None => Err(ArtError::Corrupt(a)),
            },
            Ok(b) => Ok((b, false)),
            Err(e) => Err(e),
        };
        match settled {
            Ok((img, false)) => {
                *guard = Some(g);
                Ok(Some(img))
            }
            Ok((_, true)) => {
                g.release([]).await?;
                Ok(None)
            }
            Err(e) => {
                // The first error is the one to report.
                let _ = g.release([]).await;
                Err(e)
            }
        }
    }

    /// Drops a hold taken by `attempt`.
    async fn release(&self, leaf: GlobalAddr, hold: Hold, g: Guard<'_>) -> Result<(), ArtError> {
        if let Some(g) = g {
            return g.release([]).await;
        }
        match hold {
            Hold::Share => {
                faa(self.lock_addr(leaf), (-1i64) as u64).await?;
                Ok(())
            }
            Hold::Exclusive => self.unlock_exclusive(leaf).await,
        }
    }

    /// The value of `key`, if present. Verbs with the ART nodes and the
    /// special node cached: one READ of the leaf (1 round trip, §III-B);
    /// +1 READ per uncached level; +2 (special node and leaf) per
    /// backtrack; a negative answer through a cached slot of another prefix
    /// READs that slot (8 B) to confirm it.
    ///
    /// Linearizable: items do not move within a leaf version, so the
    /// validated image holds the key iff it was present when its item was
    /// READ, with the value its digest binds. The image is read in place
    /// ([`LeafView`]). A get walks on its own rather than through `reach`
    /// with a lockless hold: through `reach` its future carries the
    /// writers' lock futures, and a loopback YCSB C get cost 1.15-1.22x
    /// the CPU (paired runs, docs/experiments/allocs-asserted.md).
    pub async fn get(&self, key: &[u8]) -> Result<Option<u64>, ArtError> {
        let k = key_u64(key)?;
        let path = k.to_be_bytes();
        let mut next = Next::Top;
        for _ in 0..MAX_RETRIES {
            let place = next_place(self, &path, std::mem::replace(&mut next, Next::Top)).await?;
            let (absent, hit) = match place {
                Place::Absent(a, hit) => (a, hit),
                Place::Leaf(t) => {
                    let b = read(t.leaf, self.g.bytes as u32).await?;
                    // What the validated leaf says (`None`: torn, READ again).
                    let seen = LeafView::new(&self.g, &b).map(|v| {
                        self.leaf_reverse_check(&t, v.rev(), &path);
                        let fit = fit(v.prefix(), v.covers(k), k);
                        let found = matches!(fit, Fit::Covers).then(|| v.find(k as u8));
                        (fit, v.special(), found)
                    });
                    drop(b);
                    match seen {
                        Some((_, _, Some(Found::Item(_, v)))) => return Ok(Some(v)),
                        Some((_, _, Some(Found::Absent))) => return Ok(None),
                        None | Some((_, _, Some(Found::Torn))) => {
                            self.bump(&self.rejected, Counter::rejected);
                            yield_now().await;
                            next = Next::Leaf(t);
                            continue;
                        }
                        Some((Fit::OtherPrefix(prefix), _, None)) => {
                            (Absent::Other { c: t.c, prefix }, t.hit)
                        }
                        Some((_, special, None)) => {
                            next = Next::Leaf(self.backtrack(&t, special, &path).await?);
                            continue;
                        }
                    }
                }
            };
            match self.confirm_absent(absent, hit, &path).await? {
                None => return Ok(None),
                Some(c) => next = Next::From(c),
            }
        }
        Err(ArtError::Corrupt(GlobalAddr::NULL))
    }

    /// Overwrites the value of `key` if present (`false`, nothing written,
    /// if absent). Verbs past the cache: [FAA +1, READ leaf] in one
    /// doorbell, then [WRITE value buffer (8 B), CAS key word, FAA -1] in one
    /// doorbell: 2 round trips (§III-C, Fig. 5a). A lost CAS (a concurrent
    /// update of the same key) runs the update again. With
    /// [`DolphinUpdate::Paper`] or [`DolphinUpdate::Authors`] the second
    /// doorbell is the paper's ([`DolphinTree::write_item`]).
    pub async fn update(&self, key: &[u8], value: u64) -> Result<bool, ArtError> {
        let k = key_u64(key)?;
        let path = k.to_be_bytes();
        let mut next = Next::Top;
        for _ in 0..MAX_RETRIES {
            let (t, b, g) = match self.reach(&path, k, &mut next, Hold::Share).await? {
                Step::Again => continue,
                Step::Absent => return Ok(false),
                Step::Leaf(t, b, g) => (t, b, g),
            };
            let last = k as u8;
            let v = LeafView::trusted(&self.g, &b);
            let (found, version) = (v.position(last).map(|i| (i, v.item(i).key)), v.version());
            drop(b);
            let Some((i, kw)) = found else {
                self.release(t.leaf, Hold::Share, g).await?;
                return Ok(false);
            };
            let seq = kw.seq.wrapping_add(1) & 0x7f;
            let nk = KeyWord::valid(version, i, last, seq, value);
            let ka = t.leaf.add(LeafGeometry::item_off(i) as u64);
            let va = ka.add(8 + 8 * (seq & 1) as u64);
            if let Some(g) = g {
                // Lease mode: nobody else writes the leaf meanwhile; the
                // value lands before the key word naming it (one QP).
                let (v, kb) = (le64(value), le64(nk.encode()));
                g.release([(va, v), (ka, kb)]).await?;
                return Ok(true);
            }
            if self.update != DolphinUpdate::KeyWordCas {
                let item = Item {
                    key: nk,
                    bufs: [value; 2],
                };
                self.write_item(ka, &item, self.lock_addr(t.leaf)).await?;
                return Ok(true);
            }
            let (w, got, f) = futures::join!(
                write(va, le64(value)),
                cas(ka, kw.encode(), nk.encode()),
                faa(self.lock_addr(t.leaf), (-1i64) as u64)
            );
            w?;
            f?;
            if got? == kw.encode() {
                return Ok(true);
            }
            self.bump(&self.lost_cas, Counter::lost_cas);
            next = Next::Leaf(t);
        }
        Err(ArtError::Corrupt(GlobalAddr::NULL))
    }

    /// The paper's update, second doorbell ([`DolphinUpdate::Paper`]):
    /// [WRITE `item` at `ka` (24 B; the update's value in both buffers),
    /// FAA -1 on `lock`]; last WRITE wins. [`DolphinUpdate::Authors`]
    /// posts both and returns without waiting (the futures are polled once,
    /// which appends their WRs to this round's post list, and dropped: the
    /// runtime frees their slots when the completions arrive).
    async fn write_item(
        &self,
        ka: GlobalAddr,
        item: &Item,
        lock: GlobalAddr,
    ) -> Result<(), ArtError> {
        let mut both = std::pin::pin!(futures::future::join(
            write(ka, item_bytes(item)),
            faa(lock, (-1i64) as u64)
        ));
        if self.update == DolphinUpdate::Authors {
            // Posted, not waited for: dropping the pinned join abandons both.
            let _ = futures::poll!(both.as_mut());
            return Ok(());
        }
        let (w, f) = both.await;
        w?;
        f?;
        Ok(())
    }

    /// Inserts `key` with `value`, or overwrites its value (upsert). Verbs
    /// past the cache, into a leaf with a free item: [FAA -EXCLUSIVE, READ
    /// leaf], then [WRITE item (24 B), FAA +EXCLUSIVE]: 2 round trips (the
    /// paper's insert takes 3 under a share; see the module docs for why
    /// inserts are exclusive here). A new prefix hangs a new leaf into the
    /// ART (WRITE leaf, CAS slot; Fig. 4b); a full leaf splits (`smo`).
    pub async fn insert(&self, key: &[u8], value: u64) -> Result<(), ArtError> {
        let k = key_u64(key)?;
        let path = k.to_be_bytes();
        let mut next = Next::Top;
        for _ in 0..MAX_RETRIES {
            let (t, b, g) = match self.attempt(&path, k, &mut next, Hold::Exclusive).await? {
                None => continue,
                Some(Reached::Absent(a, hit)) => {
                    if self.hang(a, k, value).await? {
                        return Ok(());
                    }
                    // The publishing CAS lost: the word it expected may be
                    // a stale cached one, which the next walk must not
                    // start from again (it would lose the same CAS forever).
                    self.art.invalidate(&path, hit);
                    continue;
                }
                Some(Reached::Leaf(t, b, g)) => (t, b, g),
            };
            let last = k as u8;
            let v = LeafView::trusted(&self.g, &b);
            let (pos, free, version) = (
                v.position(last).map(|i| (i, v.item(i))),
                v.free(),
                v.version(),
            );
            let (i, seq, mut bufs) = match pos {
                Some((i, it)) => (i, it.key.seq.wrapping_add(1) & 0x7f, it.bufs),
                None => match free {
                    Some(j) => (j, 0, [0, 0]),
                    None => {
                        // A full leaf splits (rare): decoded whole.
                        let img = LeafImage::decode(&self.g, &b);
                        drop(b);
                        let img = img.ok_or(ArtError::Corrupt(t.leaf))?;
                        if self.split(&t, img, g, k, value).await? {
                            return Ok(());
                        }
                        continue;
                    }
                },
            };
            bufs[(seq & 1) as usize] = value;
            drop(b);
            let it = Item {
                key: KeyWord::valid(version, i, last, seq, value),
                bufs,
            };
            let ia = t.leaf.add(LeafGeometry::item_off(i) as u64);
            if let Some(g) = g {
                // Lease mode: the value buffer, then the key word naming it
                // (one QP: in order, so a cut leaves the old item whole).
                let va = ia.add(8 + 8 * (seq & 1) as u64);
                let (v, kb) = (le64(value), le64(it.key.encode()));
                g.release([(va, v), (ia, kb)]).await?;
                return Ok(());
            }
            let (w, f) = futures::join!(write(ia, item_bytes(&it)), self.unlock_exclusive(t.leaf));
            w?;
            f?;
            return Ok(());
        }
        Err(ArtError::Corrupt(GlobalAddr::NULL))
    }

    /// Removes `key`; `false` if it was absent. Verbs past the cache: [FAA
    /// -EXCLUSIVE, READ leaf], then [WRITE key word (8 B), FAA +EXCLUSIVE]:
    /// 2 round trips, as the paper's delete. The item's slot is reused by
    /// later inserts; leaves never merge.
    pub async fn remove(&self, key: &[u8]) -> Result<bool, ArtError> {
        let k = key_u64(key)?;
        let path = k.to_be_bytes();
        let mut next = Next::Top;
        for _ in 0..MAX_RETRIES {
            let (t, b, g) = match self.reach(&path, k, &mut next, Hold::Exclusive).await? {
                Step::Again => continue,
                Step::Absent => return Ok(false),
                Step::Leaf(t, b, g) => (t, b, g),
            };
            let v = LeafView::trusted(&self.g, &b);
            let (pos, version) = (v.position(k as u8), v.version());
            drop(b);
            let Some(i) = pos else {
                self.release(t.leaf, Hold::Exclusive, g).await?;
                return Ok(false);
            };
            let ka = t.leaf.add(LeafGeometry::item_off(i) as u64);
            let empty = le64(KeyWord::empty(version).encode());
            if let Some(g) = g {
                g.release([(ka, empty)]).await?;
                return Ok(true);
            }
            let (w, f) = futures::join!(write(ka, empty), self.unlock_exclusive(t.leaf));
            w?;
            f?;
            return Ok(true);
        }
        Err(ArtError::Corrupt(GlobalAddr::NULL))
    }

    /// Takes a share of the leaf at `a` (Spear's IDU side): FAA +1 and the
    /// leaf READ in one doorbell. `Some(image)` once held; `None` if an
    /// exclusive holder was there (the add is undone and this waits until
    /// the word is free) or, defensively, if the image does not validate
    /// (under a share no whole-leaf WRITE is in flight): the caller tries
    /// again.
    /// A hold taken counts as a lock acquisition, a wait as a lock wait
    /// (both Spear holds; [`DolphinTree::with_lock_counters`]).
    async fn lock_shared(&self, a: GlobalAddr) -> Result<Option<ReadBuf>, ArtError> {
        let lock = self.lock_addr(a);
        let (old, b) = futures::join!(faa(lock, 1), read(a, self.g.bytes as u32));
        let (old, b) = (old? as i64, b?);
        if old < 0 {
            faa(lock, (-1i64) as u64).await?;
            self.wait_free(lock).await?;
            return Ok(None);
        }
        if LeafView::new(&self.g, &b).is_none() {
            drop(b);
            faa(lock, (-1i64) as u64).await?;
            self.bump(&self.rejected, Counter::rejected);
            return Ok(None);
        }
        self.count_hold();
        Ok(Some(b))
    }

    /// Takes the leaf at `a` exclusively (Spear's SMO side): FAA
    /// -EXCLUSIVE and the leaf READ in one doorbell. `Some(image)` once held,
    /// the image READ after every share drained (a consistent leaf); `None`
    /// if another exclusive holder was there (the add is undone and this
    /// waits until the word is free: the caller tries again).
    pub(crate) async fn lock_exclusive(&self, a: GlobalAddr) -> Result<Option<ReadBuf>, ArtError> {
        let lock = self.lock_addr(a);
        let (old, b) = futures::join!(faa(lock, (-EXCLUSIVE) as u64), read(a, self.g.bytes as u32));
        let (old, b) = (old? as i64, b?);
        if old < 0 {
            faa(lock, EXCLUSIVE as u64).await?;
            self.wait_free(lock).await?;
            return Ok(None);
        }
        self.count_hold();
        if old == 0 {
            if LeafView::new(&self.g, &b).is_some() {
                return Ok(Some(b));
            }
        } else {
            self.bump(&self.lock_waits, Counter::lock_waits);
            self.wait_word(lock, |w| w == -EXCLUSIVE).await?;
        }
        drop(b);
        Ok(Some(self.read_leaf_buf(a).await?))
    }

    /// Releases an exclusive hold of the leaf at `a`.
    pub(crate) async fn unlock_exclusive(&self, a: GlobalAddr) -> Result<(), ArtError> {
        faa(self.lock_addr(a), EXCLUSIVE as u64).await?;
        Ok(())
    }

    /// Waits (READs of the lock word) until no exclusive holder is left.
    async fn wait_free(&self, lock: GlobalAddr) -> Result<(), ArtError> {
        self.bump(&self.lock_waits, Counter::lock_waits);
        self.wait_word(lock, |w| w >= 0).await
    }

    async fn wait_word(&self, lock: GlobalAddr, ok: impl Fn(i64) -> bool) -> Result<(), ArtError> {
        for _ in 0..MAX_RETRIES {
            let w = u64::from_le_bytes(read(lock, 8).await?.try_into().unwrap()) as i64;
            if ok(w) {
                return Ok(());
            }
            yield_now().await;
        }
        Err(ArtError::LockStuck(lock))
    }
}

//! [`Client`]: a `Clone + Send + Sync` handle on one index, callable from
//! any thread or executor (tokio, a plain thread). Each request goes to a
//! core of this process through that core's submission queue
//! (`dm_runtime::service`), runs there against the core's own handle
//! ([`Index`], opened on the core's first request) and its result comes
//! back through a future awaitable on the caller's executor.
//!
//! Routing: by a hash of the key (the same key always reaches the same
//! core, so SMART's write combining and HOCL's local queue see same-key
//! writers together); DEX by owner (§4: a key goes to a core of the
//! compute server whose partition holds it, `NotOwner` if that CS runs in
//! another process); scans and [`Client::run`] without a key round-robin.

use crate::error::Error;
use crate::index::{Index, Instance};
use crate::stats::IndexStats;
use dm_runtime::service::Spawner;
use dm_runtime::ScanBuf;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A key carried to a core without a heap allocation (up to 32 bytes).
type KeyBuf = SmallVec<[u8; 32]>;

/// Entries of a scan or range: `(key, value)` in key order.
pub type Entries = Vec<(Vec<u8>, u64)>;

thread_local! {
    /// Each core's handles, by (instance id, core index): opened on the
    /// core's first request for that index, kept for the thread's life.
    static HANDLES: RefCell<HashMap<(u64, usize), Rc<Index>>> = RefCell::new(HashMap::new());
}

/// Core `i`'s handle on `inst` (opened now if this is its first request).
fn handle(inst: &Arc<Instance>, i: usize, (cs, core): (u16, u16)) -> Result<Rc<Index>, Error> {
    let key = (inst.id(), i);
    if let Some(h) = HANDLES.with(|h| h.borrow().get(&key).cloned()) {
        return Ok(h);
    }
    let h = Rc::new(inst.open(cs, core, i)?);
    HANDLES.with(|m| m.borrow_mut().insert(key, h.clone()));
    Ok(h)
}

/// A handle on one index of a [`crate::Cluster`]: `Clone + Send + Sync`,
/// cheap to clone (an `Arc`). Every method may be called from any thread
/// that is not one of the cluster's core threads; the `async` ones return
/// futures that any executor can await, the `*_blocking` ones wait on the
/// calling thread. Errors: the operation's ([`Error`]), or `QueueFull`
/// never (the async methods wait for room), `ShutDown` after the cluster
/// shut down.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    inst: Arc<Instance>,
    spawners: Vec<Spawner>,
    cores: Vec<(u16, u16)>,
    local_cs: Range<u16>,
    per_cs: usize,
    next: AtomicUsize,
}

impl Client {
    pub(crate) fn new(
        inst: Arc<Instance>,
        spawners: Vec<Spawner>,
        cores: Vec<(u16, u16)>,
        local_cs: Range<u16>,
    ) -> Self {
        let per_cs = cores.len() / local_cs.len().max(1);
        Client {
            inner: Arc::new(Inner {
                inst,
                spawners,
                cores,
                local_cs,
                per_cs: per_cs.max(1),
                next: AtomicUsize::new(0),
            }),
        }
    }

    /// The index's process-wide state (name, configuration, statistics).
    pub fn instance(&self) -> &Arc<Instance> {
        &self.inner.inst
    }

    /// What the index did in this process so far.
    pub fn stats(&self) -> IndexStats {
        self.inner.inst.stats()
    }

    /// The core a request on `key` goes to (see the module docs).
    pub fn core_of(&self, key: &[u8]) -> Result<usize, Error> {
        let n = &self.inner;
        // The width first: routing a malformed key by owner would send it
        // to another process as `NotOwner`.
        crate::KeyRule::exact(n.inst.config().key_bytes).check_key(key)?;
        let h = hash(key);
        match n.inst.owner(key) {
            Some(cs) if n.local_cs.contains(&cs) => {
                Ok((cs - n.local_cs.start) as usize * n.per_cs + h % n.per_cs)
            }
            Some(cs) => Err(Error::NotOwner(cs)),
            None => Ok(h % n.cores.len()),
        }
    }

    fn any_core(&self) -> usize {
        self.inner.next.fetch_add(1, Ordering::Relaxed) % self.inner.cores.len()
    }

    /// Runs `f` with core `core`'s handle on that core and returns its
    /// output: several operations on one core in one task (a read-modify-
    /// write, a batch), or timing inside the core. `core`: from
    /// [`Client::core_of`] (DEX needs the owner's core), or `None` for
    /// round-robin.
    pub async fn run<T, F, Fut>(&self, core: Option<usize>, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(Rc<Index>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Error>> + 'static,
    {
        let (i, inst, ids) = self.target(core);
        let job = move || async move { f(handle(&inst, i, ids)?).await };
        self.inner.spawners[i].spawn(job).await?.await?
    }

    /// The core a request goes to (`core`, or round-robin), with what its
    /// job needs to reach that core's handle.
    fn target(&self, core: Option<usize>) -> (usize, Arc<Instance>, (u16, u16)) {
        let i = core.unwrap_or_else(|| self.any_core()) % self.inner.cores.len();
        (i, self.inner.inst.clone(), self.inner.cores[i])
    }

    /// As [`Client::run`], waiting on the calling thread.
    pub fn run_blocking<T, F, Fut>(&self, core: Option<usize>, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(Rc<Index>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Error>> + 'static,
    {
        let (i, inst, ids) = self.target(core);
        let job = move || async move { f(handle(&inst, i, ids)?).await };
        self.inner.spawners[i].block_on(job)?
    }

    /// The value of `key`, if present ([`Index::get`]).
    pub async fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        let k = KeyBuf::from_slice(key);
        self.run(Some(self.core_of(key)?), move |ix| async move {
            ix.get(&k).await
        })
        .await
    }

    /// Sets `key` to `value`, inserting it if absent ([`Index::insert`]).
    pub async fn insert(&self, key: &[u8], value: u64) -> Result<(), Error> {
        let k = KeyBuf::from_slice(key);
        self.run(Some(self.core_of(key)?), move |ix| async move {
            ix.insert(&k, value).await
        })
        .await
    }

    /// Sets `key` to `value` if present ([`Index::update`]).
    pub async fn update(&self, key: &[u8], value: u64) -> Result<bool, Error> {
        let k = KeyBuf::from_slice(key);
        self.run(Some(self.core_of(key)?), move |ix| async move {
            ix.update(&k, value).await
        })
        .await
    }

    /// Removes `key` ([`Index::remove`]).
    pub async fn remove(&self, key: &[u8]) -> Result<bool, Error> {
        let k = KeyBuf::from_slice(key);
        self.run(Some(self.core_of(key)?), move |ix| async move {
            ix.remove(&k).await
        })
        .await
    }

    /// Up to `n` entries with key >= `from` ([`Index::scan`]).
    pub async fn scan(&self, from: &[u8], n: usize) -> Result<Entries, Error> {
        let k = KeyBuf::from_slice(from);
        let core = self.scan_core(from)?;
        self.run(core, move |ix| async move { ix.scan(&k, n).await })
            .await
    }

    /// [`Index::scan_into`]: clears `out` and fills it with up to `n`
    /// entries with key >= `from`, without an allocation per entry. The
    /// buffer travels to the serving core and back with its capacity; on
    /// an error `out` is left empty.
    pub async fn scan_into(&self, from: &[u8], n: usize, out: &mut ScanBuf) -> Result<(), Error> {
        let k = KeyBuf::from_slice(from);
        let core = self.scan_core(from)?;
        let mut buf = std::mem::take(out);
        *out = self
            .run(core, move |ix| async move {
                ix.scan_into(&k, n, &mut buf).await.map(|()| buf)
            })
            .await?;
        Ok(())
    }

    /// Up to `limit` entries with `lo <= key < hi` ([`Index::range`]).
    pub async fn range(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Entries, Error> {
        let (l, h) = (KeyBuf::from_slice(lo), KeyBuf::from_slice(hi));
        let core = self.scan_core(lo)?;
        self.run(core, move |ix| async move { ix.range(&l, &h, limit).await })
            .await
    }

    /// A scan starts on the owner of its first key under DEX (forwarding
    /// follows the partitions), anywhere otherwise.
    fn scan_core(&self, from: &[u8]) -> Result<Option<usize>, Error> {
        Ok(match self.inner.inst.owner(from) {
            Some(_) => Some(self.core_of(from)?),
            None => None,
        })
    }

    /// [`Client::get`] on the calling thread.
    pub fn get_blocking(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        let k = KeyBuf::from_slice(key);
        self.run_blocking(Some(self.core_of(key)?), move |ix| async move {
            ix.get(&k).await
        })
    }

    /// [`Client::insert`] on the calling thread.
    pub fn insert_blocking(&self, key: &[u8], value: u64) -> Result<(), Error> {
        let k = KeyBuf::from_slice(key);
        self.run_blocking(Some(self.core_of(key)?), move |ix| async move {
            ix.insert(&k, value).await
        })
    }

    /// [`Client::update`] on the calling thread.
    pub fn update_blocking(&self, key: &[u8], value: u64) -> Result<bool, Error> {
        let k = KeyBuf::from_slice(key);
        self.run_blocking(Some(self.core_of(key)?), move |ix| async move {
            ix.update(&k, value).await
        })
    }

    /// [`Client::remove`] on the calling thread.
    pub fn remove_blocking(&self, key: &[u8]) -> Result<bool, Error> {
        let k = KeyBuf::from_slice(key);
        self.run_blocking(Some(self.core_of(key)?), move |ix| async move {
            ix.remove(&k).await
        })
    }

    /// [`Client::scan`] on the calling thread.
    pub fn scan_blocking(&self, from: &[u8], n: usize) -> Result<Entries, Error> {
        let k = KeyBuf::from_slice(from);
        let core = self.scan_core(from)?;
        self.run_blocking(core, move |ix| async move { ix.scan(&k, n).await })
    }

    /// [`Client::scan_into`] on the calling thread.
    pub fn scan_into_blocking(
        &self,
        from: &[u8],
        n: usize,
        out: &mut ScanBuf,
    ) -> Result<(), Error> {
        let k = KeyBuf::from_slice(from);
        let core = self.scan_core(from)?;
        let mut buf = std::mem::take(out);
        *out = self.run_blocking(core, move |ix| async move {
            ix.scan_into(&k, n, &mut buf).await.map(|()| buf)
        })?;
        Ok(())
    }

    /// [`Client::range`] on the calling thread.
    pub fn range_blocking(&self, lo: &[u8], hi: &[u8], limit: usize) -> Result<Entries, Error> {
        let (l, h) = (KeyBuf::from_slice(lo), KeyBuf::from_slice(hi));
        let core = self.scan_core(lo)?;
        self.run_blocking(core, move |ix| async move { ix.range(&l, &h, limit).await })
    }
}

/// FNV-1a over the key: cheap, and spreads fixed-width integer keys.
fn hash(key: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    (h ^ (h >> 32)) as usize
}

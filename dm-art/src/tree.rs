//! [`SmartTree`]: one core's handle on a global SMART radix tree; opening
//! and creating it, its attachments (ART cache, RDWC table, the baseline's
//! locks), allocation and the validated READs every operation uses (SMART
//! §4.1, §4.5). Its configuration and errors live in `config` and `error`
//! and are re-exported here.

use crate::cache::ArtCache;
use crate::config::HOCL;
use crate::cursor::Cursor;
use crate::layout::{capacity, Header, Leaf, LeafGeometry, Slot, ALIGN, INTERNAL_RESERVE};
use crate::rdwc::Rdwc;
use dm_runtime::alloc::ChunkAlloc;
use dm_runtime::lock::{LockCounters, LockEvent, NodeLocks};
use dm_runtime::sync::LocalLockTable;
use dm_runtime::{read, yield_now};
use dm_verbs::GlobalAddr;
use std::cell::Cell;
use std::sync::Arc;

pub use crate::config::SmartConfig;
pub use crate::error::ArtError;

/// READs of one leaf (or lock attempts) before giving up.
pub(crate) const MAX_RETRIES: u32 = 1_000_000;

/// Whether a publishing slot CAS from `expected` to `new` took, given the
/// old value `got` it returned. `new` names memory this operation
/// allocated and has not published (a spare leaf or node), so no other
/// writer can have put it in the slot: `got == new` means this CAS took
/// the slot while its completion reported the value found by a second
/// execution (soft-RoCE, docs/rdma-guest-findings.md, "Node locks taken without the CAS
/// reporting it"). Read as a failure, the spare would be reused and its
/// published image overwritten: keys under it lost (a guest `ycsb --index
/// art` step, 2026-11-27). On `sim` only with `Faults::unreported_cas_prob`
/// (which plays exactly this); never on `loopback`. Dolphin's publishing
/// CASes (`dolphin::smo`) use it too. A second execution after another
/// writer changed the slot reports that writer's word instead
/// (`Faults::redo_cas_prob`): the operation's retry settles it
/// ([`SmartTree::took_before`]).
pub(crate) fn publish_took(got: u64, expected: u64, new: u64) -> bool {
    if got == new && got != expected {
        tracing::warn!(
            word = format_args!("{new:#x}"),
            "a publishing CAS returned its own new word: it took the slot unreported"
        );
        return true;
    }
    got == expected
}

/// An internal node as READ: reverse pointer, header, and the slot words of
/// the capacity that was read (filled slots form a prefix: slots are never
/// emptied, see `insert`).
#[derive(Clone, Debug)]
pub(crate) struct NodeImage {
    /// Reverse pointer: the slot that names this node (the ART cache's
    /// reverse check, SMART §4.3.2).
    pub rev: GlobalAddr,
    pub header: Header,
    /// The header word as read (the CAS expectation of header updates).
    pub header_word: u64,
    pub slots: crate::slots::Slots,
}

impl NodeImage {
    /// The index and word of the slot whose partial key is `b`.
    pub fn find(&self, b: u8) -> Option<(usize, u64)> {
        self.slots
            .iter()
            .take_while(|&&w| w != 0)
            .enumerate()
            .find(|(_, &w)| w as u8 == b)
            .map(|(i, &w)| (i, w))
    }

    /// Index of the first empty slot read, if any.
    pub fn first_empty(&self) -> Option<usize> {
        self.slots.iter().position(|&w| w == 0)
    }
}

/// One core's handle on the tree (the chunk carver is per core). Create the
/// tree once with [`SmartTree::create`], then [`SmartTree::open`] it on every
/// other core.
pub struct SmartTree {
    pub(crate) cfg: SmartConfig,
    pub(crate) leaf: LeafGeometry,
    alloc: ChunkAlloc,
    /// Leaf images rejected (torn or mid-write) and read again.
    rejected: Cell<u64>,
    /// This CS's ART cache (SMART §4.3), shared by its cores.
    pub(crate) cache: Option<Arc<ArtCache>>,
    /// This CS's read delegation / write combining table (SMART §4.2).
    pub(crate) rdwc: Option<Arc<Rdwc>>,
    /// The baseline's node and leaf locks (HOCL), when a technique is off
    /// that needs them (`baseline`).
    pub(crate) locks: Option<NodeLocks>,
    /// Where this handle counts its lock events (the rear-embedded leaf
    /// lock, §4.1.1, and `locks`): its own unless shared per index
    /// ([`SmartTree::with_lock_counters`]).
    lock_counters: Arc<LockCounters>,
    /// The CS's membership (issue 33): names this handle in the rear lock
    /// words it takes and lets it take over dead members' locks.
    pub(crate) member: Option<Arc<dm_runtime::lock::Member>>,
}

impl SmartTree {
    /// A handle for core `core` of compute server `cs` (no verbs).
    pub fn open(cfg: SmartConfig, cs: u16, core: u16) -> Result<Self, ArtError> {
        if cfg.keys.max_key == 0 || cfg.keys.max_key > 255 {
            return Err(ArtError::BadConfig(format!(
                "keys of {} bytes: 1..=255 supported",
                cfg.keys.max_key
            )));
        }
        if cfg.chunk_bytes < INTERNAL_RESERVE as u64 * 2 {
            return Err(ArtError::BadConfig(format!(
                "chunk of {} bytes is smaller than two internal nodes",
                cfg.chunk_bytes
            )));
        }
        let t = cfg.techniques;
        if t.rear_lock && !t.in_place_leaf {
            return Err(ArtError::BadConfig(
                "rear_lock needs in_place_leaf (RCU leaves are never locked)".into(),
            ));
        }
        let locks = if t.needs_locks() {
            Some(NodeLocks::new(
                HOCL,
                cfg.lock_table,
                cs,
                core,
                cfg.root_slot.offset() + dm_verbs::ms::superblock::LOCK_TABLE_PTR,
                cfg.chunk_bytes,
            )?)
        } else {
            None
        };
        let first_ms = (cs as u32 * 31 + core as u32) as u16 % cfg.num_ms.max(1);
        Ok(SmartTree {
            cfg,
            leaf: LeafGeometry::new(cfg.keys.max_key),
            alloc: ChunkAlloc::new(cfg.num_ms, cfg.chunk_bytes, first_ms),
            rejected: Cell::new(0),
            cache: None,
            rdwc: None,
            locks,
            lock_counters: Arc::default(),
            member: None,
        })
    }

    /// Counts this handle's lock events into `c`, one per index shared by
    /// every core's handle of it ([`dm_runtime::lock::LockStats`]): SMART's
    /// rear-embedded leaf lock (§4.1.1), and the baseline's HOCL node and
    /// leaf locks (§5.1.3) on the rungs that take them.
    pub fn with_lock_counters(mut self, c: Arc<LockCounters>) -> Self {
        if let Some(l) = &mut self.locks {
            l.set_counters(c.clone());
        }
        self.lock_counters = c;
        self
    }

    /// The lock counters this handle counts into.
    pub fn lock_counters(&self) -> &Arc<LockCounters> {
        &self.lock_counters
    }

    /// Joins this handle's locks to its CS's membership `m` (issue 33,
    /// [`dm_runtime::lock::member`]): SMART's rear-embedded leaf lock
    /// (§4.1.1; the holder's name in the lock word's top 15 bits,
    /// [`crate::layout::lock_taken`]) and the baseline's HOCL node and leaf
    /// locks (§5.1.3) name `m`'s incarnation, and dead members' locks are
    /// taken over after the lease. Errors: [`ArtError::BadConfig`] as
    /// `NodeLocks::set_member`, or a CS id of 512 or more (the rear lock
    /// word has 9 bits for it).
    pub fn with_member(mut self, m: Arc<dm_runtime::lock::Member>) -> Result<Self, ArtError> {
        if m.cs() >= 512 {
            return Err(ArtError::BadConfig(format!(
                "CS {}: the rear lock word names members below CS 512 only",
                m.cs()
            )));
        }
        if let Some(l) = &mut self.locks {
            l.set_member(m.clone())?;
        }
        m.cs_words().set_format(crate::layout::rear_release);
        self.member = Some(m);
        Ok(self)
    }

    /// Counts the bytes this handle's chunk carver hands out (nodes,
    /// leaves; padding included) into `c`, one per index shared by its
    /// handles, besides the process total (`dm_runtime::alloc::bytes_carved`).
    pub fn with_carved_counter(mut self, c: Arc<std::sync::atomic::AtomicU64>) -> Self {
        self.alloc.set_carved_counter(c);
        self
    }

    /// Counts one lock event of this handle (one Relaxed `fetch_add`).
    pub(crate) fn count_lock(&self, e: LockEvent) {
        self.lock_counters.count(e);
    }

    /// Uses `t` (one per CS, shared by its cores; from
    /// [`SmartTree::new_local_lock_table`]) as the local lock table of the
    /// baseline's hierarchical locks (Sherman §4.3). No effect when every
    /// technique is on (SMART takes no lock-table locks).
    pub fn with_local_locks(mut self, t: Arc<LocalLockTable>) -> Self {
        if let Some(l) = &mut self.locks {
            l.set_local(t);
        }
        self
    }

    /// A local lock table for the cores of one CS (hand-over bound 4, Sherman §4.3).
    pub fn new_local_lock_table() -> Arc<LocalLockTable> {
        NodeLocks::new_local_table(&HOCL)
    }

    /// Uses `t`, the read delegation and write combining table of this
    /// handle's compute server (one per CS, shared by its cores; SMART §4.2).
    pub fn with_rdwc(mut self, t: Arc<Rdwc>) -> Self {
        self.rdwc = Some(t);
        self
    }

    /// This handle's read delegation / write combining table, if any.
    pub fn rdwc(&self) -> Option<&Arc<Rdwc>> {
        self.rdwc.as_ref()
    }

    /// Uses `cache`, the ART cache of this handle's compute server (one per
    /// CS, shared by its cores through the `Arc`; SMART §4.3).
    pub fn with_cache(mut self, cache: Arc<ArtCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// This handle's ART cache, if any.
    pub fn cache(&self) -> Option<&Arc<ArtCache>> {
        self.cache.as_ref()
    }

    /// Creates an empty tree (the root slot set to empty) and returns this
    /// core's handle.
    pub async fn create(cfg: SmartConfig, cs: u16, core: u16) -> Result<Self, ArtError> {
        let t = Self::open(cfg, cs, core)?;
        if let Some(l) = &t.locks {
            l.create_tables(cfg.num_ms).await?;
        }
        dm_runtime::write(cfg.root_slot, vec![0; 8]).await?;
        Ok(t)
    }

    /// Images this handle rejected (torn or mid-write) and read again.
    pub fn rejected_images(&self) -> u64 {
        self.rejected.get()
    }

    /// The radix path of `key` (errors: [`ArtError::KeyLength`]).
    pub(crate) fn path(&self, key: &[u8]) -> Result<crate::keys::Path, ArtError> {
        Ok(self.cfg.keys.path(key)?)
    }

    pub(crate) async fn alloc_internal(&self) -> Result<GlobalAddr, ArtError> {
        Ok(self.alloc.alloc(INTERNAL_RESERVE as u64, ALIGN).await?)
    }

    /// `size` bytes aligned to `align` from this handle's chunk carver.
    pub(crate) async fn alloc_bytes(&self, size: u64, align: u64) -> Result<GlobalAddr, ArtError> {
        Ok(self.alloc.alloc(size, align).await?)
    }

    pub(crate) async fn alloc_leaf(&self) -> Result<GlobalAddr, ArtError> {
        Ok(self.alloc.alloc(self.leaf.bytes() as u64, ALIGN).await?)
    }

    /// One step of a walk into the internal node at `addr` (slot type hint
    /// `ty`), named by cursor `c`'s slot word, the walk being at byte `d` of
    /// a `len`-byte path: the node's image and where its effective prefix
    /// starts in `header.prefix` (it covers path bytes
    /// `d..d + prefix.len() - start`). `None` when a header split moved the
    /// node down since: its new parent is in the slot now, and `c` takes the
    /// slot word READ again. [`ArtError::Corrupt`] if the prefix reaches the
    /// path's end.
    pub(crate) async fn read_internal(
        &self,
        c: &mut Cursor,
        addr: GlobalAddr,
        ty: u8,
        d: usize,
        len: usize,
    ) -> Result<Option<(NodeImage, usize)>, ArtError> {
        let n = self.read_node(addr, ty).await?;
        let Some(pre) = effective_prefix(&n.header, d) else {
            let w = self.read_word(c.slot_a).await?;
            c.fresh(w);
            return Ok(None);
        };
        if d + pre.len() >= len {
            return Err(ArtError::Corrupt(addr));
        }
        let start = n.header.prefix.len() - pre.len();
        Ok(Some((n, start)))
    }

    /// The node the slot word `c.word` names is of type `ty`, past the
    /// word's type hint (the header's type is authoritative, a slot's a
    /// READ-size hint: SMART §4.3.2): this CS's cached copy of that word
    /// (the owner's entry at `path[..c.depth - 1]`) takes `ty`, so a READ
    /// through it is sized right from then on. The artifact drops such an
    /// entry instead; kept as it was, the stale hint made every later READ
    /// of the node a second READ (80% of the inserts of a 1M-key LOAD READ
    /// their node twice; issue 34). No-op without a cache, for a word that
    /// is not an internal node's, or if the entry changed.
    pub(crate) fn refresh_type_hint(&self, path: &[u8], c: &Cursor, ty: u8) {
        let Some(k) = &self.cache else { return };
        let Slot::Internal {
            partial,
            ty: hint,
            addr,
        } = Slot::decode(c.word)
        else {
            return;
        };
        if ty <= hint || c.depth == 0 || c.depth > path.len() {
            return;
        }
        if k.drops_stale_hints() {
            // The artifact's policy: a cached start with a stale hint
            // drops its entry.
            if c.cached {
                let hit = crate::cache::Hit {
                    prefix_len: c.depth - 1,
                    node: c.owner,
                };
                k.invalidate(path, hit);
            }
            return;
        }
        if let Ok(w) = crate::insert::internal_word(partial, ty, addr) {
            k.replace_word(&path[..c.depth - 1], c.owner, c.slot_a, c.word, w);
        }
    }

    /// One 8-byte READ of a slot word (atomic).
    pub(crate) async fn read_word(&self, a: GlobalAddr) -> Result<u64, ArtError> {
        let b = read(a, 8).await?;
        Ok(u64::from_le_bytes(b.try_into().unwrap()))
    }

    /// READs the internal node at `a` with `ty`'s capacity, and again with the
    /// header's if the node has grown since the slot was read (§4.3.2: the
    /// header's type is authoritative, a slot's is a hint for the READ size).
    /// [`ArtError::Corrupt`] for a hint past [`crate::layout::MAX_TYPE`] (a
    /// corrupt slot word) or a header that does not decode.
    pub(crate) async fn read_node(&self, a: GlobalAddr, ty: u8) -> Result<NodeImage, ArtError> {
        // A slot word's type field has 5 bits: one past the largest type
        // is a corrupt word, not a READ of 2^(ty+1) slots.
        if ty > crate::layout::MAX_TYPE {
            return Err(ArtError::Corrupt(a));
        }
        let mut ty = ty.max(1);
        loop {
            let b = read(a, (16 + 8 * capacity(ty)) as u32).await?;
            let w = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
            let header_word = w(1);
            let Some(header) = Header::decode(header_word) else {
                return Err(ArtError::Corrupt(a));
            };
            if header.ty == 0 {
                return Err(ArtError::Corrupt(a));
            }
            if header.ty > ty {
                ty = header.ty;
                continue;
            }
            return Ok(NodeImage {
                rev: GlobalAddr::from_u64(w(0)),
                header,
                header_word,
                slots: crate::slots::Slots::collect(capacity(ty), |i| w(2 + i)),
            });
        }
    }

    /// READs the leaf a slot names until its checksum validates; returns it
    /// with the lock word of the same READ.
    pub(crate) fn read_leaf(
        &self,
        a: GlobalAddr,
    ) -> impl std::future::Future<Output = Result<(Leaf, u64), ArtError>> + '_ {
        self.read_leaf_as(a, |b, v| (v.to_leaf(), self.leaf_lock_word(b)))
    }

    /// [`SmartTree::read_leaf`] for a search of `key`, the leaf read in
    /// place (no decoded key): its reverse pointer, and `Some(value if
    /// valid)` if it holds `key`, `None` if it holds another key (issue 32:
    /// a warm get's `Leaf` was a key copy and two moves of it).
    pub(crate) fn read_leaf_for<'a>(
        &'a self,
        a: GlobalAddr,
        key: &'a [u8],
    ) -> impl std::future::Future<Output = Result<(GlobalAddr, Option<Option<u64>>), ArtError>> + 'a
    {
        self.read_leaf_as(a, move |_, v| {
            (v.rev, (v.key == key).then_some(v.valid.then_some(v.value)))
        })
    }

    /// READs the leaf at `a` until its image validates
    /// ([`SmartTree::view_leaf`]; after an image that does not, the READ
    /// repeats after a yield), then
    /// `f` of the image and its view.
    async fn read_leaf_as<T>(
        &self,
        a: GlobalAddr,
        f: impl Fn(&[u8], crate::layout::LeafView<'_>) -> T,
    ) -> Result<T, ArtError> {
        let n = self.leaf.bytes();
        for _ in 0..MAX_RETRIES {
            let b = read(a, n as u32).await?;
            if let Some(v) = self.view_leaf(&b) {
                return Ok(f(&b, v));
            }
            yield_now().await;
        }
        Err(ArtError::Corrupt(a))
    }

    /// A leaf READ's bytes `b` as the leaf and its lock word, or `None`
    /// (counted as rejected) if the image does not validate: torn, or
    /// mid-update.
    pub(crate) fn validate_leaf(&self, b: &[u8]) -> Option<(Leaf, u64)> {
        Some((self.view_leaf(b)?.to_leaf(), self.leaf_lock_word(b)))
    }

    /// [`crate::layout::LeafGeometry::view`] of leaf image `b`; an image
    /// that does not validate is counted as rejected.
    fn view_leaf<'b>(&self, b: &'b [u8]) -> Option<crate::layout::LeafView<'b>> {
        let v = self.leaf.view(b);
        if v.is_none() {
            self.rejected.set(self.rejected.get() + 1);
        }
        v
    }

    /// The lock word of leaf image `b` (outside its checksum).
    fn leaf_lock_word(&self, b: &[u8]) -> u64 {
        let lo = self.leaf.lock_off();
        u64::from_le_bytes(b[lo..lo + 8].try_into().unwrap())
    }

    /// The slot word naming a leaf at `a` under partial key `partial`.
    pub(crate) fn leaf_slot(&self, partial: u8, a: GlobalAddr) -> Result<u64, ArtError> {
        Slot::Leaf {
            partial,
            words: (self.leaf.bytes() / 8) as u8,
            addr: a,
        }
        .encode()
        .map_err(|e| ArtError::BadConfig(format!("unaddressable leaf: {e:?}")))
    }
}

/// The prefix bytes of `h` still to be matched by a traversal that expects
/// the node at depth `d` (its parent consumed path bytes `[0, d)`), or `None`
/// when the header starts deeper than `d` (a header split moved its leading
/// bytes into a new parent after this traversal read the old parent slot:
/// re-read that slot, §3.6 of the digest / SMART §4.1.2).
///
/// A header whose depth is below `d` has not yet been trimmed by the second
/// CAS of a header split; its leading bytes repeat what the new parent
/// matched, so they are skipped. Every header of a node names the same end
/// position `depth + prefix.len()` (trimming moves the start only).
fn effective_prefix(h: &Header, d: usize) -> Option<&[u8]> {
    let hd = h.depth as usize;
    if hd > d || d - hd > h.prefix.len() {
        return None;
    }
    Some(&h.prefix[d - hd..])
}

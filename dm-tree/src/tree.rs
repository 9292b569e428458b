//! [`FgTree`]: one core's handle on a global B-link tree.

use crate::nam::{Design, NamConfig};
use crate::node::{Fence, Geometry, Node};
use crate::node_read::{NodeRead, ShermanCache};
use crate::techniques::Techniques;
use dm_runtime::alloc::ChunkAlloc;
use dm_runtime::lock::{Held, LockCounters, LockError, LockTableConfig, Member, NodeLocks};
use dm_runtime::sync::LocalLockTable;
use dm_runtime::{cas, read, write, yield_now};
use dm_verbs::ms::superblock;
use dm_verbs::{GlobalAddr, VerbError};
use std::fmt;
use std::sync::Arc;

/// Where the tree lives and its shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeConfig {
    /// Node size in bytes (default 1024); at least room for 4 entries.
    pub node_bytes: usize,
    /// Key size in bytes, 1..=32 (default 8: u64 keys as big-endian bytes).
    /// Every key must have exactly this length.
    pub key_bytes: usize,
    /// Address of the 8-byte root pointer (default: MS 0, superblock offset
    /// [`superblock::FG_ROOT`] = 0); the host lock table's address, when
    /// `lock_table` puts it in host memory, is kept at `root_ptr.offset() + 8`
    /// on every MS. A tree that shares its fabric with other indexes takes a
    /// root area of [`TreeConfig::root_bytes`] from `dm_runtime::catalog`
    /// and is placed there with [`TreeConfig::in_root_area`] (issue 31).
    pub root_ptr: GlobalAddr,
    /// Chunk size the MSs hand out (must match the fabric's `MsConfig::chunk_bytes`).
    pub chunk_bytes: u64,
    /// Number of memory servers nodes are spread over (round-robin chunks).
    pub num_ms: u16,
    /// Sherman's techniques in use (default: none, i.e. FG+); see [`Techniques`]
    /// and, for the locks, [`dm_runtime::lock`].
    pub techniques: Techniques,
    /// Global lock table placement, used when `techniques.locks.onchip_lock` is on
    /// (build it from the fabric with [`LockTableConfig::for_caps`]).
    pub lock_table: LockTableConfig,
    /// Ziegler et al.'s design: fine-grained (default), coarse-grained or
    /// hybrid ([`crate::nam`]; the latter two need [`crate::nam::ms::handler`]
    /// registered under [`crate::nam::RPC_NAM`] on every MS).
    pub design: Design,
    /// Partitioning and MS cost model of the coarse-grained and hybrid designs.
    pub nam: NamConfig,
    /// DEX's placement (§4, "sub-trees rooted at level M live on one MS"):
    /// `Some(M)` allocates the new right node of a split at level <= M, and
    /// a new root at level <= M, on the MS of the node it splits from; nodes
    /// above M go round-robin. `None` (default): every node round-robin.
    pub subtree_level: Option<u8>,
    /// How a node is READ without its lock (default: one READ validated by
    /// its checksum; [`NodeRead::Optimistic`]: DEX's Sherman baseline).
    pub node_read: NodeRead,
    /// How the index cache is used when the tree changed under it (default:
    /// B-link moves right and the top two levels cached;
    /// [`ShermanCache::Authors`]: the published Sherman code's).
    pub sherman_cache: ShermanCache,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            node_bytes: crate::node::DEFAULT_NODE_BYTES,
            key_bytes: 8,
            root_ptr: GlobalAddr::new(0, superblock::FG_ROOT),
            chunk_bytes: 8 << 20,
            num_ms: 1,
            techniques: Techniques::FG_PLUS,
            lock_table: LockTableConfig::default(),
            design: Design::Fine,
            nam: NamConfig::default(),
            subtree_level: None,
            node_read: NodeRead::Checksum,
            sherman_cache: ShermanCache::Ours,
        }
    }
}

impl TreeConfig {
    /// Root-area bytes at `root_ptr` on (issue 31): the root pointer (MS 0)
    /// and the host lock-table address at `+8` (every MS).
    pub const ROOT_BYTES: u32 = 16;

    /// Root-area bytes this tree needs: [`TreeConfig::ROOT_BYTES`] for the
    /// fine-grained design (and DEX, whose `DexCluster` takes this
    /// configuration); the coarse-grained and hybrid designs add their NAM
    /// headers ([`NamConfig::root_bytes`]), placed right after those 16
    /// bytes by [`TreeConfig::in_root_area`].
    pub fn root_bytes(&self) -> u32 {
        match self.design {
            Design::Fine => Self::ROOT_BYTES,
            _ => Self::ROOT_BYTES + self.nam.root_bytes(self.num_ms),
        }
    }

    /// This configuration placed in a root area at superblock offset
    /// `root_off` (a catalog entry's `root_off`, [`TreeConfig::root_bytes`]
    /// long): the root pointer at MS 0 `root_off`, its lock-table address
    /// at `root_off + 8` on every MS, and for the NAM designs the headers
    /// from `root_off + 16` ([`NamConfig::header_off`]).
    pub fn in_root_area(mut self, root_off: u64) -> Self {
        self.root_ptr = GlobalAddr::new(0, root_off);
        if self.design != Design::Fine {
            self.nam.header_off = root_off + Self::ROOT_BYTES as u64;
        }
        self
    }
}

/// Why a tree operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeError {
    /// The key's length differs from `TreeConfig::key_bytes`.
    KeyLength { got: usize, want: usize },
    /// The configuration is impossible (node too small for 4 entries, key size 0 or above 32).
    BadConfig(String),
    /// A node never validated after many READs (a writer died mid-write-back).
    Corrupt(GlobalAddr),
    /// A verb failed (QP error, out of bounds, MS out of memory, ...).
    Verb(VerbError),
    /// The lock of the node at this address stayed taken through a million
    /// attempts: its holder died or never released it.
    LockStuck(GlobalAddr),
    /// DEX (§4): the key lies in the partition of this CS (the owner), and
    /// forwarding is off; send the operation to a core of that CS.
    NotOwner(u16),
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeError::KeyLength { got, want } => {
                write!(f, "key of {got} bytes, this tree takes {want}-byte keys")
            }
            TreeError::BadConfig(s) => write!(f, "bad tree configuration: {s}"),
            TreeError::Corrupt(a) => write!(f, "node at {a:?} never validated"),
            TreeError::Verb(e) => write!(f, "{e}"),
            TreeError::LockStuck(a) => write!(f, "lock of node {a:?} never released"),
            TreeError::NotOwner(cs) => write!(f, "key belongs to the partition of CS {cs}"),
        }
    }
}

impl std::error::Error for TreeError {}

impl From<VerbError> for TreeError {
    fn from(e: VerbError) -> Self {
        TreeError::Verb(e)
    }
}

/// The node locks' errors keep their meaning (and their message).
impl From<LockError> for TreeError {
    fn from(e: LockError) -> Self {
        match e {
            LockError::BadConfig(s) => TreeError::BadConfig(s),
            LockError::Verb(e) => TreeError::Verb(e),
            LockError::LockStuck(a) => TreeError::LockStuck(a),
        }
    }
}

/// READs of one node before it is declared corrupt.
const MAX_VALIDATION_RETRIES: u32 = 100_000;

/// One core's handle on the tree (the chunk carver is per core). Create the tree
/// once with [`FgTree::create`], then [`FgTree::open`] it on every other core.
pub struct FgTree {
    pub(crate) cfg: TreeConfig,
    pub(crate) g: Geometry,
    alloc: ChunkAlloc,
    /// One carver per MS for [`TreeConfig::subtree_level`] placement (a
    /// chunk is fetched from an MS only when a node is first placed there).
    near: Vec<ChunkAlloc>,
    /// Node images this handle rejected because their checksum did not match.
    rejected: std::cell::Cell<u64>,
    /// Scans through head nodes: (leaves READ from a head's list, of those
    /// used in the chain) ([`FgTree::head_prefetch_stats`]).
    pub(crate) head_reads: std::cell::Cell<(u64, u64)>,
    /// The CS's index cache, if any.
    pub(crate) cache: Option<std::sync::Arc<crate::cache::IndexCache>>,
    /// Node locks: in-node words or the global lock table, HOCL's local table
    /// ([`dm_runtime::lock`]).
    pub(crate) locks: NodeLocks,
    /// Under [`ShermanCache::Authors`], the root address the last traversal
    /// READ from the root pointer (the published Sherman's `g_root_ptr`),
    /// where the next traversal starts without READing the pointer; 0 none.
    pub(crate) root_hint: std::cell::Cell<u64>,
}

impl FgTree {
    /// A handle for core `core` of compute server `cs` (no verbs). Its lock tag
    /// is `(cs << 16 | core) + 1`: at most one thread may run handles with a
    /// given `(cs, core)` at a time (the own-tag ledger of [`dm_runtime::lock`]
    /// relies on it, as does every lock holder's identity).
    pub fn open(mut cfg: TreeConfig, cs: u16, core: u16) -> Result<Self, TreeError> {
        if cfg.design != Design::Fine {
            cfg.nam = cfg.nam.resolved(cfg.num_ms);
            cfg.nam
                .validate(cfg.key_bytes, cfg.num_ms)
                .map_err(TreeError::BadConfig)?;
        }
        if cfg.key_bytes == 0 || cfg.key_bytes > 32 {
            return Err(TreeError::BadConfig(format!(
                "key_bytes {} not in 1..=32",
                cfg.key_bytes
            )));
        }
        let g = Geometry::new(cfg.node_bytes, cfg.key_bytes);
        let leaf_cap = if cfg.techniques.two_level {
            g.unsorted_capacity()
        } else {
            g.capacity()
        };
        if !cfg.node_bytes.is_multiple_of(8) {
            return Err(TreeError::BadConfig(format!(
                "node_bytes {} is not a multiple of 8 (nodes are 8-byte words)",
                cfg.node_bytes
            )));
        }
        if cfg.node_bytes < 64 || leaf_cap < 4 {
            return Err(TreeError::BadConfig(format!(
                "node_bytes {} holds fewer than 4 entries",
                cfg.node_bytes
            )));
        }
        let first_ms = (cs as u32 * 31 + core as u32) as u16 % cfg.num_ms.max(1);
        Ok(FgTree {
            cfg,
            g,
            alloc: ChunkAlloc::new(cfg.num_ms, cfg.chunk_bytes, first_ms),
            near: (0..cfg.num_ms)
                .map(|ms| ChunkAlloc::on_ms(ms, cfg.chunk_bytes))
                .collect(),
            rejected: std::cell::Cell::new(0),
            head_reads: std::cell::Cell::new((0, 0)),
            cache: None,
            root_hint: std::cell::Cell::new(0),
            locks: NodeLocks::new(
                cfg.techniques.locks,
                cfg.lock_table,
                cs,
                core,
                cfg.root_ptr.offset() + superblock::LOCK_TABLE_PTR,
                cfg.chunk_bytes,
            )?,
        })
    }

    /// Creates an empty tree (one empty root leaf) and returns this core's handle.
    pub async fn create(cfg: TreeConfig, cs: u16, core: u16) -> Result<Self, TreeError> {
        let t = Self::open(cfg, cs, core)?;
        t.create_lock_tables().await?;
        if cfg.design != Design::Fine {
            t.nam_create().await?;
            return Ok(t);
        }
        let leaf = t.new_leaf(Fence::NegInf, Fence::PosInf);
        let a = t.alloc_node().await?;
        write(a, leaf.encode(&t.g)).await?;
        write(cfg.root_ptr, a.to_u64().to_le_bytes().to_vec()).await?;
        Ok(t)
    }

    /// Sets up host-memory lock tables when the configuration asks for them
    /// (one chunk per MS, its address at `root_ptr.offset() + 8` of that
    /// MS's superblock, [`superblock::LOCK_TABLE_PTR`]); no-op otherwise.
    pub(crate) async fn create_lock_tables(&self) -> Result<(), TreeError> {
        Ok(self.locks.create_tables(self.cfg.num_ms).await?)
    }

    /// Takes the lock of the node at `a` ([`NodeLocks::lock`]).
    pub(crate) async fn lock(&self, a: GlobalAddr) -> Result<Held<'_>, TreeError> {
        Ok(self.locks.lock(a).await?)
    }

    /// Releases `held` after `writes` ([`NodeLocks::release`]).
    ///
    /// Under [`NodeRead::Optimistic`] a release with writes that does not
    /// hand the lock over first READs 8 bytes at the last write's node (the
    /// locked node's, on its MS): DEX's Sherman baseline READs the node's
    /// version from beside its lock in device memory, to write it back
    /// incremented with the unlock (baotonglu/dex `src/Tree.cpp`,
    /// `write_page_and_unlock` under `LOCK_VERSION`; a hand-over writes the
    /// page alone). Our lock words carry no version, so the value goes
    /// unused: the READ stands for that round trip under the lock.
    pub(crate) async fn release(
        &self,
        held: Held<'_>,
        writes: impl IntoIterator<Item = (GlobalAddr, Vec<u8>)>,
    ) -> Result<(), TreeError> {
        if self.cfg.node_read == NodeRead::Optimistic {
            // Boxed, and made out of line: the default path's future and
            // code stay as they were (issue 32).
            return self.release_boxed(held, writes.into_iter().collect()).await;
        }
        Ok(self.locks.release(held, writes).await?)
    }

    /// [`FgTree::release_versioned`]'s future, boxed, out of the default
    /// path's code.
    #[cold]
    #[inline(never)]
    fn release_boxed<'a>(
        &'a self,
        held: Held<'a>,
        writes: smallvec::SmallVec<[(GlobalAddr, Vec<u8>); 2]>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), TreeError>> + 'a>> {
        Box::pin(self.release_versioned(held, writes))
    }

    /// [`FgTree::release`] under [`NodeRead::Optimistic`]: the version's
    /// READ first, unless the release hands the lock over or writes nothing.
    async fn release_versioned(
        &self,
        held: Held<'_>,
        writes: smallvec::SmallVec<[(GlobalAddr, Vec<u8>); 2]>,
    ) -> Result<(), TreeError> {
        let Some(&(at, _)) = writes.last() else {
            return Ok(self.locks.release(held, writes).await?);
        };
        if held.hands_over() {
            return Ok(self.locks.release(held, writes).await?);
        }
        // Decided: no hand-over, even if a waiter queues during the READ
        // (the baseline checks `can_hand_over` before it READs).
        let word = GlobalAddr::new(at.ms(), at.offset() & !7);
        if let Err(e) = read(word, 8).await {
            let _ = self.locks.release_remote(held, []).await;
            return Err(e.into());
        }
        Ok(self.locks.release_remote(held, writes).await?)
    }

    /// Uses `locks` (one per CS, shared by its cores) as the local lock table of
    /// Sherman's hierarchical lock; needed when `techniques.locks.hier_lock` is on.
    pub fn with_local_locks(mut self, locks: Arc<LocalLockTable>) -> Self {
        self.locks.set_local(locks);
        self
    }

    /// Counts this handle's node-lock events (FG+'s lock word, or Sherman's
    /// GLT slot and HOCL, §4.3) into `c`, one per index shared by every
    /// core's handle of it, instead of this handle's own counters
    /// ([`dm_runtime::lock::LockStats`]).
    pub fn with_lock_counters(mut self, c: Arc<LockCounters>) -> Self {
        self.locks.set_counters(c);
        self
    }

    /// The lock counters this handle counts into.
    pub fn lock_counters(&self) -> &Arc<LockCounters> {
        self.locks.counters()
    }

    /// Joins this handle's node locks to its CS's membership `m` (issue 33,
    /// [`dm_runtime::lock::member`]): its lock words name `m`'s incarnation
    /// and it takes over the locks of dead members after the lease. Every
    /// CS of one tree joins, or none. Errors: [`TreeError::BadConfig`] as
    /// [`NodeLocks::set_member`].
    pub fn with_member(mut self, m: Arc<Member>) -> Result<Self, TreeError> {
        self.locks.set_member(m)?;
        Ok(self)
    }

    /// Counts the bytes this handle's chunk carvers hand out (nodes;
    /// padding included) into `c`, one per index shared by its
    /// handles, besides the process total (`dm_runtime::alloc::bytes_carved`).
    pub fn with_carved_counter(mut self, c: Arc<std::sync::atomic::AtomicU64>) -> Self {
        for a in std::iter::once(&mut self.alloc).chain(self.near.iter_mut()) {
            a.set_carved_counter(c.clone());
        }
        self
    }

    /// A local lock table for the cores of one CS with this tree's hand-over bound.
    pub fn new_local_lock_table(cfg: &TreeConfig) -> Arc<LocalLockTable> {
        NodeLocks::new_local_table(&cfg.techniques.locks)
    }

    /// Uses `cache` (shared by the cores of this CS) for leaf-parent lookups.
    pub fn with_cache(mut self, cache: std::sync::Arc<crate::cache::IndexCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Leaves this handle's scans READ ahead from head nodes' lists, and how
    /// many of them the scans used (the rest were stale: [`crate::head`]).
    pub fn head_prefetch_stats(&self) -> (u64, u64) {
        self.head_reads.get()
    }

    /// Node images this handle rejected (torn or mid-write) and read again.
    pub fn rejected_images(&self) -> u64 {
        self.rejected.get()
    }

    /// Entries per internal node (and per FG+ leaf).
    pub fn node_capacity(&self) -> usize {
        self.g.capacity()
    }

    /// Entries per leaf this handle creates (fewer when leaves are unsorted:
    /// each entry carries a check word, see [`crate::two_level`]).
    pub fn leaf_capacity(&self) -> usize {
        if self.cfg.techniques.two_level {
            self.g.unsorted_capacity()
        } else {
            self.g.capacity()
        }
    }

    /// An empty leaf in the layout this tree creates leaves in.
    pub(crate) fn new_leaf(&self, low: Fence, high: Fence) -> Node {
        if self.cfg.techniques.two_level {
            Node::empty_unsorted_leaf(low, high)
        } else {
            Node::empty(0, low, high)
        }
    }

    pub(crate) fn check_key(&self, key: &[u8]) -> Result<(), TreeError> {
        if key.len() != self.cfg.key_bytes {
            return Err(TreeError::KeyLength {
                got: key.len(),
                want: self.cfg.key_bytes,
            });
        }
        Ok(())
    }

    pub(crate) async fn alloc_node(&self) -> Result<GlobalAddr, TreeError> {
        Ok(self.alloc.alloc(self.cfg.node_bytes as u64, 64).await?)
    }

    /// A node on MS `ms` (placement; see [`TreeConfig::subtree_level`]).
    pub(crate) async fn alloc_node_on(&self, ms: u16) -> Result<GlobalAddr, TreeError> {
        match self.near.get(ms as usize) {
            Some(a) => Ok(a.alloc(self.cfg.node_bytes as u64, 64).await?),
            None => self.alloc_node().await,
        }
    }

    /// A node for level `level` next to the node at `beside`: on its MS
    /// when `level` is at or below [`TreeConfig::subtree_level`], else
    /// round-robin.
    pub(crate) async fn alloc_node_near(
        &self,
        level: u8,
        beside: GlobalAddr,
    ) -> Result<GlobalAddr, TreeError> {
        match self.cfg.subtree_level {
            Some(m) if level <= m => self.alloc_node_on(beside.ms()).await,
            _ => self.alloc_node().await,
        }
    }

    /// The root node's address (one 8-byte READ: atomic).
    pub(crate) async fn read_root(&self) -> Result<GlobalAddr, TreeError> {
        let b = read(self.cfg.root_ptr, 8).await?;
        Ok(GlobalAddr::from_u64(u64::from_le_bytes(
            b.try_into().unwrap(),
        )))
    }

    /// Swings the root pointer from `old` to `new`; true on success.
    pub(crate) async fn cas_root(
        &self,
        old: GlobalAddr,
        new: GlobalAddr,
    ) -> Result<bool, TreeError> {
        Ok(cas(self.cfg.root_ptr, old.to_u64(), new.to_u64()).await? == old.to_u64())
    }

    /// READs the node at `a` until its checksum validates (a torn or
    /// half-written image is retried after a yield).
    pub(crate) async fn read_node(&self, a: GlobalAddr) -> Result<Node, TreeError> {
        let (_, n) = self.read_until(a, |b| Node::decode(&self.g, b)).await?;
        Ok(n)
    }

    /// [`FgTree::read_node`] of a node this handle holds locked: one READ
    /// per try under every [`NodeRead`] (no writer can change the node, and
    /// DEX's Sherman baseline READs a locked page once: `lock_and_read_page`).
    pub(crate) async fn read_node_locked(&self, a: GlobalAddr) -> Result<Node, TreeError> {
        let (_, n) = self
            .read_until_as(a, true, |b| Node::decode(&self.g, b))
            .await?;
        Ok(n)
    }

    /// The image of the node at `a`, READ until [`View::new`] accepts it (as
    /// [`FgTree::read_node`] retries until it decodes), not decoded.
    pub(crate) async fn read_valid(&self, a: GlobalAddr) -> Result<dm_runtime::ReadBuf, TreeError> {
        let (b, ()) = self
            .read_until(a, |b| crate::node::View::new(&self.g, b).map(drop))
            .await?;
        Ok(b)
    }

    /// READs the node at `a` until `accept` takes the image (a torn or
    /// half-written one is retried after a yield, counted as rejected),
    /// at most [`MAX_VALIDATION_RETRIES`] times: [`TreeError::Corrupt`].
    ///
    /// Not an `async fn`: the caller awaits [`FgTree::read_until_as`]'s
    /// future itself, one future fewer to resume per READ (issue 32).
    pub(crate) fn read_until<'a, T: 'a>(
        &'a self,
        a: GlobalAddr,
        accept: impl Fn(&[u8]) -> Option<T> + 'a,
    ) -> impl std::future::Future<Output = Result<(dm_runtime::ReadBuf, T), TreeError>> + 'a {
        self.read_until_as(a, false, accept)
    }

    /// [`FgTree::read_until`]; `locked`: this handle holds the node's lock,
    /// so the optimistic read's version steps are left out.
    pub(crate) async fn read_until_as<T>(
        &self,
        a: GlobalAddr,
        locked: bool,
        accept: impl Fn(&[u8]) -> Option<T>,
    ) -> Result<(dm_runtime::ReadBuf, T), TreeError> {
        let steps = self.cfg.node_read == NodeRead::Optimistic && !locked;
        for _ in 0..MAX_VALIDATION_RETRIES {
            // The optimistic read's version steps (`node_read`); under the
            // checksum read (the default) there are none to await, so a
            // warm READ's completion resumes no futures of theirs (issue 32).
            let v0 = match steps {
                false => None,
                true => Some(self.version_word(a).await?),
            };
            let b = read(a, self.cfg.node_bytes as u32).await?;
            if let Some(t) = accept(&b) {
                let stands = match v0 {
                    None => true,
                    Some(v0) => self.version_after(a, v0, &b).await?,
                };
                if stands {
                    return Ok((b, t));
                }
            }
            self.rejected.set(self.rejected.get() + 1);
            yield_now().await;
        }
        Err(TreeError::Corrupt(a))
    }

    /// Writes `n` back to `a` (everything after the in-node lock word) under a
    /// new node version and releases `held` ([`FgTree::release`]: 2 RTTs on
    /// FG+, 1 combined).
    pub(crate) async fn write_back_unlock(
        &self,
        held: Held<'_>,
        a: GlobalAddr,
        mut n: Node,
    ) -> Result<(), TreeError> {
        n.version = n.version.wrapping_add(1);
        self.release(held, [(a.add(8), n.encode_after_lock(&self.g))])
            .await
    }

    /// Writes slot `slot` of the unsorted leaf at `a` (node version
    /// `version`; `entry`, or empty) and releases `held`: the entry-level
    /// write-back of Sherman §4.4, one WRITE of `Kp + 16` bytes instead of
    /// the node.
    pub(crate) async fn write_slot_unlock(
        &self,
        held: Held<'_>,
        a: GlobalAddr,
        version: u32,
        slot: u16,
        entry: Option<(&[u8], u64)>,
    ) -> Result<(), TreeError> {
        let b = crate::two_level::slot_image(&self.g, version, slot, entry);
        let at = a.add(crate::two_level::slot_offset(&self.g, slot) as u64);
        if self.cfg.node_read == NodeRead::Optimistic {
            return self.release(held, [(at, b)]).await;
        }
        // `NodeLocks::release` directly, as `FgTree::release` would call
        // it: one async layer fewer to resume (issue 32).
        Ok(self.locks.release(held, [(at, b)]).await?)
    }
}

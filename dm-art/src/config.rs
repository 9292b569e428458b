//! How a SMART tree is configured: where it lives and its key shape
//! ([`SmartConfig`]), which of SMART's concurrency techniques are on
//! ([`Techniques`], SMART §5.3.1), and the lock techniques the ART baseline
//! takes from Sherman ([`HOCL`], SMART §5.1.3). What the switches do is in
//! the `baseline` module docs.

use crate::keys::KeyCodec;
use dm_runtime::lock::{LockTableConfig, LockTechniques};
use dm_verbs::ms::superblock;
use dm_verbs::GlobalAddr;

/// Where the tree lives and its key shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmartConfig {
    /// How keys become radix paths: `KeyCodec::fixed(8)` for u64 keys as
    /// big-endian bytes (the default), `KeyCodec::variable(n)` for byte
    /// strings of 0..=n bytes (n at most 255).
    pub keys: KeyCodec,
    /// Address of the 8-byte root slot (default: MS 0, superblock offset
    /// [`superblock::SMART_ROOT`] = 16). A tree that shares its fabric with
    /// other indexes takes a root area of [`SmartConfig::root_bytes`] from
    /// `dm_runtime::catalog` and puts its root slot there
    /// (`GlobalAddr::new(0, entry.root_off)`).
    pub root_slot: GlobalAddr,
    /// Chunk size the MSs hand out (must match the fabric's `MsConfig::chunk_bytes`).
    pub chunk_bytes: u64,
    /// Number of memory servers nodes and leaves are spread over.
    pub num_ms: u16,
    /// SMART's concurrency techniques as switches (default: all on); all
    /// off is the DM-ported ART baseline (`baseline` module docs). Every
    /// handle on one tree must use the same techniques.
    pub techniques: Techniques,
    /// Where the baseline's node and leaf locks live (Sherman's global lock
    /// table, `dm_runtime::lock`); unused when every technique is on. Its host
    /// table's address is kept at `root_slot.offset() + 8` on every MS
    /// ([`superblock::LOCK_TABLE_PTR`]).
    pub lock_table: LockTableConfig,
}

impl Default for SmartConfig {
    fn default() -> Self {
        SmartConfig {
            keys: KeyCodec::fixed(8),
            root_slot: GlobalAddr::new(0, superblock::SMART_ROOT),
            chunk_bytes: 8 << 20,
            num_ms: 1,
            techniques: Techniques::SMART,
            lock_table: LockTableConfig::default(),
        }
    }
}

impl SmartConfig {
    /// Root-area bytes the tree needs from `root_slot` on (issue 31): the
    /// root slot (MS 0) and the host lock-table address at `+8` (every MS;
    /// written only when a technique that takes lock-table locks is off).
    pub const ROOT_BYTES: u32 = 16;

    /// Root-area bytes this tree needs: [`SmartConfig::ROOT_BYTES`].
    pub fn root_bytes(&self) -> u32 {
        Self::ROOT_BYTES
    }

    /// This configuration placed in a root area at superblock offset
    /// `root_off` (a catalog entry's): the root slot at MS 0 `root_off`,
    /// the lock-table address at `root_off + 8` on every MS.
    pub fn in_root_area(mut self, root_off: u64) -> Self {
        self.root_slot = GlobalAddr::new(0, root_off);
        self
    }
}

/// Which of SMART's concurrency techniques are on (SMART §5.3.1, Fig. 18's
/// first three rungs); [`Techniques::SMART`] by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Techniques {
    /// Internal nodes change by CAS alone (§4.1.2); off: ROWEX node locks.
    pub lock_free_internal: bool,
    /// Leaves updated in place under a lock (§4.1.1); off: RCU leaves.
    pub in_place_leaf: bool,
    /// The leaf lock is the leaf's last word, released by the data WRITE
    /// (§4.1.1); off: a lock-table word released by its own WRITE. Needs
    /// `in_place_leaf`.
    pub rear_lock: bool,
}

impl Techniques {
    /// The DM-ported ART (`--index art`): ROWEX, RCU leaves, HOCL.
    pub const ART: Techniques = Techniques {
        lock_free_internal: false,
        in_place_leaf: false,
        rear_lock: false,
    };
    /// ART + lock-free internal nodes.
    pub const LOCK_FREE_INTERNAL: Techniques = Techniques {
        lock_free_internal: true,
        ..Self::ART
    };
    /// ... + update-in-place leaves (lock-table leaf lock).
    pub const IN_PLACE_LEAF: Techniques = Techniques {
        in_place_leaf: true,
        ..Self::LOCK_FREE_INTERNAL
    };
    /// ... + the rear-embedded lock: SMART.
    pub const SMART: Techniques = Techniques {
        rear_lock: true,
        ..Self::IN_PLACE_LEAF
    };

    /// True when some technique is off that takes lock-table locks.
    pub fn needs_locks(&self) -> bool {
        !self.lock_free_internal || (self.in_place_leaf && !self.rear_lock)
    }
}

impl Default for Techniques {
    fn default() -> Self {
        Self::SMART
    }
}

/// The lock techniques the baseline takes from Sherman (§5.1.3): global
/// lock table, hierarchical lock with at most 4 hand-overs, no command
/// combination (`baseline` module docs).
pub const HOCL: LockTechniques = LockTechniques {
    combine: false,
    onchip_lock: true,
    hier_lock: true,
    max_handover: 4,
    lock_backoff: 32,
    unlock_faa: false,
};

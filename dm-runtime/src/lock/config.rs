//! What a [`super::NodeLocks`] is built with: which of Sherman's lock
//! techniques are on ([`LockTechniques`], Sherman §4.3 and §4.5, the Fig. 5
//! ladder) and where the global lock table lives ([`LockTableConfig`], §4.3).

use dm_verbs::Caps;

/// Which of Sherman's lock techniques a [`super::NodeLocks`] uses (Sherman
/// §4.3 and §4.5; the B+tree's rungs of the Fig. 5 ladder are built from
/// these in `dm_tree::Techniques`, the ART baseline's HOCL in dm-art).
/// The default is FG+'s lock (§5): in the node, released by a separate
/// WRITE, no lock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockTechniques {
    /// Command combination (§4.5): write-back + unlock in one doorbell.
    pub combine: bool,
    /// Locks in a global lock table per MS instead of in the node (§4.3).
    pub onchip_lock: bool,
    /// CS-local lock table with FIFO wait queues and hand-over (§4.3);
    /// needs `onchip_lock` (hand-over is per GLT slot).
    pub hier_lock: bool,
    /// Consecutive hand-overs allowed before the GLT slot is released (§4.3: 4).
    pub max_handover: u32,
    /// Most yields between two failed remote lock CASes (doubling from 1).
    /// 0 retries at once, as FG and FG+ do ("blindly retries", Sherman
    /// §3.2.2): what collapses them under skew (Table 1). Every rung
    /// defaults to 32, which keeps a spinning task from flooding its NIC
    /// bucket; `dm-bench ycsb --lock-backoff 0` gives the papers' spin.
    pub lock_backoff: u32,
    /// Release an in-node lock by FAA, as FG does (Sherman §3.1), instead of
    /// by WRITE, FG+'s change (§5.1). The FAA queues behind the spinners'
    /// CASes in the NIC's atomic bucket (§3.2.2); the WRITE does not.
    pub unlock_faa: bool,
}

impl LockTechniques {
    /// FG+'s lock (Sherman §5): in-node lock word, separate unlock WRITE.
    pub const FG_PLUS: LockTechniques = LockTechniques {
        combine: false,
        onchip_lock: false,
        hier_lock: false,
        max_handover: 4,
        lock_backoff: 32,
        unlock_faa: false,
    };
}

impl Default for LockTechniques {
    fn default() -> Self {
        Self::FG_PLUS
    }
}

/// Where the global lock table lives and its shape (used when
/// `LockTechniques::onchip_lock` is on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockTableConfig {
    /// In the MS NIC's device memory (else a host-memory chunk per MS).
    pub device: bool,
    /// 16-bit lanes taken by masked CAS (else one 64-bit word per slot).
    pub lanes16: bool,
    /// Lock slots per MS.
    pub slots: u64,
}

impl LockTableConfig {
    /// Sherman's choice for a fabric: device memory with 16-bit lanes when
    /// offered (256 KiB = 131,072 locks), 64-bit words in device memory without
    /// masked CAS (32,768), else 32,768 64-bit words in host memory.
    pub fn for_caps(caps: Caps) -> Self {
        if caps.device_memory_bytes >= 8 {
            LockTableConfig {
                device: true,
                lanes16: caps.masked_cas,
                slots: if caps.masked_cas {
                    caps.device_memory_bytes / 2
                } else {
                    caps.device_memory_bytes / 8
                },
            }
        } else {
            Self::default()
        }
    }

    /// Bytes of table per MS.
    pub fn bytes(&self) -> u64 {
        if self.lanes16 {
            self.slots.div_ceil(4) * 8
        } else {
            self.slots * 8
        }
    }
}

impl Default for LockTableConfig {
    /// Host memory, 32,768 64-bit slots per MS (Sherman's code: 256 KiB / 8).
    fn default() -> Self {
        LockTableConfig {
            device: false,
            lanes16: false,
            slots: 32_768,
        }
    }
}

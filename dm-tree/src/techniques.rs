//! Sherman's ladder of techniques over FG+ (Sherman §4, Fig. 5): the lock
//! techniques ([`LockTechniques`], implemented by [`dm_runtime::lock`]) plus
//! two-level versions with unsorted leaves (§4.4, [`crate::two_level`]).
//!
//! | rung (`--index`) | lock word | release |
//! |---|---|---|
//! | `fg` (FG+) | node offset 0, 64-bit CAS `0 -> tag` | write-back WRITE completes, then WRITE 0 (2 RTTs) |
//! | `sherman-combine` | same | write-back and WRITE 0 in one doorbell on the node's QP (1 RTT, §4.5) |
//! | `sherman-onchip` | global lock table (GLT) slot on the node's MS (§4.3) | combined |
//! | `sherman-hier` | GLT slot under a CS-local lock with FIFO queue and hand-over (§4.3) | combined, or hand-over |
//! | `sherman` | as `sherman-hier`, leaves unsorted with two-level versions (§4.4, [`crate::two_level`]) | a plain insert/update/remove writes back one entry |

use dm_runtime::lock::LockTechniques;

/// Which of Sherman's techniques are on (Sherman §4, the Fig. 5 ladder).
/// Each rung is a constant; [`Techniques::named`] maps `--index` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Techniques {
    /// The lock techniques: command combination (§4.5), the global lock
    /// table (§4.3), the hierarchical lock (§4.3), back-off and FG's FAA
    /// unlock ([`LockTechniques`]).
    pub locks: LockTechniques,
    /// Two-level versions (§4.4): leaves created unsorted with a check word
    /// per entry, so a plain insert, update or remove writes back one entry
    /// instead of the node ([`crate::two_level`]). Only affects leaves this
    /// tree creates: a leaf's layout is recorded in its header.
    pub two_level: bool,
}

impl Techniques {
    /// FG+ as Sherman describes it (§5): in-node lock, separate unlock WRITE.
    pub const FG_PLUS: Techniques = Techniques {
        locks: LockTechniques::FG_PLUS,
        two_level: false,
    };
    /// FG+ with command combination.
    pub const SHERMAN_COMBINE: Techniques = Techniques {
        locks: LockTechniques {
            combine: true,
            ..LockTechniques::FG_PLUS
        },
        ..Self::FG_PLUS
    };
    /// ... plus the global lock table.
    pub const SHERMAN_ONCHIP: Techniques = Techniques {
        locks: LockTechniques {
            onchip_lock: true,
            ..Self::SHERMAN_COMBINE.locks
        },
        ..Self::SHERMAN_COMBINE
    };
    /// ... plus the CS-local lock table with hand-over.
    pub const SHERMAN_HIER: Techniques = Techniques {
        locks: LockTechniques {
            hier_lock: true,
            ..Self::SHERMAN_ONCHIP.locks
        },
        ..Self::SHERMAN_ONCHIP
    };

    /// Sherman: every technique, i.e. `SHERMAN_HIER` plus two-level versions.
    pub const SHERMAN: Techniques = Techniques {
        two_level: true,
        ..Self::SHERMAN_HIER
    };

    /// The rung called `name` (`fg`, `sherman-combine`, `sherman-onchip`,
    /// `sherman-hier`, `sherman`).
    pub fn named(name: &str) -> Option<Techniques> {
        Some(match name {
            "fg" | "fg+" => Self::FG_PLUS,
            "sherman-combine" => Self::SHERMAN_COMBINE,
            "sherman-onchip" => Self::SHERMAN_ONCHIP,
            "sherman-hier" => Self::SHERMAN_HIER,
            "sherman" => Self::SHERMAN,
            _ => return None,
        })
    }

    /// Names [`Techniques::named`] knows, in ladder order.
    pub const NAMES: [&'static str; 5] = [
        "fg",
        "sherman-combine",
        "sherman-onchip",
        "sherman-hier",
        "sherman",
    ];
}

impl Default for Techniques {
    fn default() -> Self {
        Self::FG_PLUS
    }
}

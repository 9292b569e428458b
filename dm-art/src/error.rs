//! [`ArtError`]: why an operation of any tree in this crate failed, and its
//! conversions from the verbs', the key codec's and the lock table's errors.

use crate::keys::KeyLengthError;
use dm_runtime::lock::LockError;
use dm_verbs::{GlobalAddr, VerbError};
use std::fmt;

/// Why a tree operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArtError {
    /// The key does not fit the tree's [`KeyCodec`](crate::keys::KeyCodec)
    /// (too long, or not the fixed length). Nothing was changed.
    KeyLength(KeyLengthError),
    /// The configuration is impossible (keys longer than 255 bytes, a chunk
    /// smaller than an internal node).
    BadConfig(String),
    /// A node or leaf never validated after many READs (a writer died
    /// mid-write, or the memory is not a tree).
    Corrupt(GlobalAddr),
    /// The leaf lock at this address stayed taken through a million attempts:
    /// its holder died or never released it.
    LockStuck(GlobalAddr),
    /// A verb failed (QP error, out of bounds, MS out of memory, ...). An
    /// insert that fails with `MsOutOfMemory` has not taken effect: new
    /// leaves and nodes are allocated before anything is published.
    Verb(VerbError),
}

impl fmt::Display for ArtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArtError::KeyLength(e) => write!(f, "{e}"),
            ArtError::BadConfig(s) => write!(f, "bad tree configuration: {s}"),
            ArtError::Corrupt(a) => write!(f, "node at {a:?} never validated"),
            ArtError::LockStuck(a) => write!(f, "lock of leaf {a:?} never released"),
            ArtError::Verb(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ArtError {}

impl From<VerbError> for ArtError {
    fn from(e: VerbError) -> Self {
        ArtError::Verb(e)
    }
}

/// Errors of the baseline's [`NodeLocks`](dm_runtime::lock::NodeLocks), with
/// their meaning (and message).
impl From<LockError> for ArtError {
    fn from(e: LockError) -> Self {
        match e {
            LockError::Verb(e) => ArtError::Verb(e),
            LockError::LockStuck(a) => ArtError::LockStuck(a),
            LockError::BadConfig(s) => ArtError::BadConfig(s),
        }
    }
}

impl From<KeyLengthError> for ArtError {
    fn from(e: KeyLengthError) -> Self {
        ArtError::KeyLength(e)
    }
}

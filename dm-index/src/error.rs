//! [`Error`]: the one error type of every index operation, the cluster and
//! the client handle.

use crate::kind::KeyRule;
use dm_verbs::{GlobalAddr, VerbError};
use std::fmt;

/// Why an index operation, or building a cluster or an index, failed.
///
/// What to do about each is in `docs/guide.md` ("Errors").
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// The key's length breaks the index's [`KeyRule`] (or differs from the
    /// width the index was created with). Nothing was changed.
    KeyLength { got: usize, want: KeyRule },
    /// A memory server has no chunk left (`MsConfig::region_bytes` too
    /// small for the data): the write that needed a new node failed;
    /// earlier writes stand.
    OutOfMemory { ms: u16 },
    /// A verb failed: the QP to that MS is in the error state (a broken
    /// link, a dead MS), an access outside the registered region, an RPC
    /// the MS rejected. The operation may or may not have taken effect
    /// (as with any lost reply); retry or fail the request.
    Verb(VerbError),
    /// A node never validated after many READs (its checksum or versions
    /// never matched): a writer died halfway through a write-back.
    Corrupt(GlobalAddr),
    /// A lock stayed taken through the index's retry bound: its holder died
    /// or never released it (lock recovery is issue 33's work).
    LockStuck(GlobalAddr),
    /// DEX (§4): the key belongs to the partition of compute server `cs`,
    /// which is not in this process; route the request to that process.
    NotOwner(u16),
    /// The configuration is impossible or disagrees with the fabric or with
    /// what the catalog recorded when the index was created.
    BadConfig(String),
    /// The catalog of named indexes on memory server 0 refused: no such
    /// name, full, a name being created by a client that has not finished.
    Catalog(String),
    /// The core's submission queue is full (`ServiceConfig::queue_depth`);
    /// the request was not submitted. Back off or use the awaiting call.
    QueueFull,
    /// The cluster is shutting down or gone; the request was not run.
    ShutDown,
    /// The operation's task panicked (a bug: please report it with the
    /// message); the core goes on serving other requests.
    Panicked(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::KeyLength { got, want } if want.min == want.max => {
                write!(
                    f,
                    "key of {got} bytes, this index takes {}-byte keys",
                    want.max
                )
            }
            Error::KeyLength { got, want } => write!(
                f,
                "key of {got} bytes, this index takes {}..={} bytes",
                want.min, want.max
            ),
            Error::OutOfMemory { ms } => write!(f, "memory server {ms} is out of memory"),
            Error::Verb(e) => write!(f, "{e}"),
            Error::Corrupt(a) => write!(f, "node at {a:?} never validated"),
            Error::LockStuck(a) => write!(f, "lock at {a:?} never released"),
            Error::NotOwner(cs) => write!(f, "key belongs to the partition of CS {cs}"),
            Error::BadConfig(s) => write!(f, "bad configuration: {s}"),
            Error::Catalog(s) => write!(f, "catalog: {s}"),
            Error::QueueFull => f.write_str("the core's submission queue is full"),
            Error::ShutDown => f.write_str("the cluster is shut down"),
            Error::Panicked(m) => write!(f, "the operation's task panicked: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<VerbError> for Error {
    fn from(e: VerbError) -> Self {
        match e {
            VerbError::MsOutOfMemory { ms } => Error::OutOfMemory { ms },
            e => Error::Verb(e),
        }
    }
}

impl From<dm_tree::TreeError> for Error {
    fn from(e: dm_tree::TreeError) -> Self {
        use dm_tree::TreeError as T;
        match e {
            T::KeyLength { got, want } => Error::KeyLength {
                got,
                want: KeyRule::exact(want),
            },
            T::BadConfig(s) => Error::BadConfig(s),
            T::Corrupt(a) => Error::Corrupt(a),
            T::Verb(v) => v.into(),
            T::LockStuck(a) => Error::LockStuck(a),
            T::NotOwner(cs) => Error::NotOwner(cs),
        }
    }
}

impl From<dm_art::ArtError> for Error {
    fn from(e: dm_art::ArtError) -> Self {
        use dm_art::ArtError as A;
        match e {
            A::KeyLength(k) => Error::KeyLength {
                got: k.got,
                want: KeyRule {
                    min: if k.variable { 0 } else { k.max },
                    max: k.max,
                },
            },
            A::BadConfig(s) => Error::BadConfig(s),
            A::Corrupt(a) => Error::Corrupt(a),
            A::LockStuck(a) => Error::LockStuck(a),
            A::Verb(v) => v.into(),
        }
    }
}

impl From<dm_runtime::lock::LockError> for Error {
    fn from(e: dm_runtime::lock::LockError) -> Self {
        dm_tree::TreeError::from(e).into()
    }
}

impl From<dm_runtime::catalog::CatalogError> for Error {
    fn from(e: dm_runtime::catalog::CatalogError) -> Self {
        use dm_runtime::catalog::CatalogError as C;
        match e {
            C::Verb(v) => v.into(),
            // The descriptors in words where they decode (`IndexConfig::describe`).
            C::KindMismatch { name, want, found } => {
                let words = |d: u64| match crate::IndexConfig::from_descriptor(d) {
                    Ok(c) => c.describe(),
                    Err(_) => format!("an index of kind {d:#x}"),
                };
                Error::Catalog(format!(
                    "catalog name {name:?} is {}, not {}",
                    words(found),
                    words(want)
                ))
            }
            e => Error::Catalog(e.to_string()),
        }
    }
}

impl From<dm_runtime::service::SubmitError> for Error {
    fn from(e: dm_runtime::service::SubmitError) -> Self {
        use dm_runtime::service::SubmitError as S;
        match e {
            S::QueueFull => Error::QueueFull,
            S::ShutDown => Error::ShutDown,
            S::Panicked(j) => Error::Panicked(j.message().to_string()),
        }
    }
}

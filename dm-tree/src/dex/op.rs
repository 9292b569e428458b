//! The operations DEX runs on a leaf (§5.2): [`Op`], its result [`Res`], and
//! `apply` on a leaf that is a cached frame or a scratch copy of a leaf not
//! admitted (an offloaded operation runs in [`super::ms`] instead).

use crate::node::{Fence, Node, NodeKey};

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Get,
    Put {
        value: u64,
        may_insert: bool,
    },
    Remove,
    /// Up to `max` entries from the key, and the leaf's high fence.
    Scan {
        max: usize,
    },
}

pub(crate) enum Res {
    Get(Option<u64>),
    Put(bool),
    Remove(bool),
    /// The entries packed in a buffer of the thread's pool
    /// (`dm_verbs::buf`; give it back): each is the key (the tree's
    /// `key_bytes`) then its value, 8 bytes little-endian. No allocation
    /// per leaf of a warm scan (issue 32).
    Scan(Vec<u8>, Fence),
}

/// What [`apply`] changed in the leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Nothing.
    None,
    /// A present key's value only: the keys are as they were.
    Value,
    /// The set of keys (an insert or a remove).
    Keys,
}

impl Change {
    /// Whether the leaf changed at all.
    pub(super) fn any(self) -> bool {
        self != Change::None
    }
}

/// Runs `op` on leaf `n`, where `at` is `key`'s place among its entries
/// (as [`Node::find`] gives it); `None` when an insert needs a split
/// first. The [`Change`] says what changed in `n`.
pub(super) fn apply(
    n: &mut Node,
    at: Result<usize, usize>,
    cap: usize,
    key: &[u8],
    op: &Op,
) -> Option<(Res, Change)> {
    Some(match op {
        Op::Get => (Res::Get(at.ok().map(|i| n.entries[i].1)), Change::None),
        Op::Put { value, may_insert } => match at {
            Ok(i) => {
                n.entries[i].1 = *value;
                (Res::Put(true), Change::Value)
            }
            Err(_) if !may_insert => (Res::Put(false), Change::None),
            Err(i) => {
                if n.entries.len() >= cap {
                    return None;
                }
                n.entries.insert(i, (NodeKey::from_slice(key), *value));
                (Res::Put(true), Change::Keys)
            }
        },
        Op::Remove => match at {
            Ok(i) => {
                n.entries.remove(i);
                (Res::Remove(true), Change::Keys)
            }
            Err(_) => (Res::Remove(false), Change::None),
        },
        Op::Scan { max } => {
            let i = at.unwrap_or_else(|i| i);
            let taken = &n.entries[i..];
            let taken = &taken[..taken.len().min(*max)];
            let mut v = dm_verbs::buf::take(taken.len() * (key.len() + 8));
            for (k, value) in taken {
                v.extend_from_slice(k);
                v.extend_from_slice(&value.to_le_bytes());
            }
            (Res::Scan(v, n.high.clone()), Change::None)
        }
    })
}

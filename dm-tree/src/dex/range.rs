//! Key ranges as fences (the `[low, high)` of [`crate::node`]): fence order,
//! whether two ranges meet, whether a node covers a key or lies inside a
//! partition (§4), and the range and index of an inner node's child.

use crate::node::{cmp_keys, Fence, Node};
use std::cmp::Ordering;

/// Fences in key order: -inf < every key < +inf.
pub(crate) fn fcmp(a: &Fence, b: &Fence) -> Ordering {
    let rank = |f: &Fence| match f {
        Fence::NegInf => 0,
        Fence::Key(_) => 1,
        Fence::PosInf => 2,
    };
    match (a, b) {
        (Fence::Key(x), Fence::Key(y)) => cmp_keys(x, y),
        _ => rank(a).cmp(&rank(b)),
    }
}

fn fence_lt(a: &Fence, b: &Fence) -> bool {
    fcmp(a, b) == Ordering::Less
}

/// Whether the half-open key ranges `a` and `b` share a key.
pub(super) fn meets(a: (&Fence, &Fence), b: (&Fence, &Fence)) -> bool {
    fence_lt(a.0, b.1) && fence_lt(b.0, a.1)
}

#[inline]
pub(super) fn covers(n: &Node, key: &[u8]) -> bool {
    !n.below_low(key) && !n.beyond_high(key)
}

/// `[low, high)` lies inside `[plo, phi)`.
pub(super) fn within(low: &Fence, high: &Fence, part: &(Fence, Fence)) -> bool {
    fcmp(&part.0, low) != Ordering::Greater && fcmp(high, &part.1) != Ordering::Greater
}

/// The range of child `i` of the inner node `n` (see [`crate::node`]).
pub(super) fn child_range(n: &Node, i: usize) -> (Fence, Fence) {
    let low = if i == 0 {
        n.low.clone()
    } else {
        Fence::key(&n.entries[i].0)
    };
    let high = match n.entries.get(i + 1) {
        Some(e) => Fence::key(&e.0),
        None => n.high.clone(),
    };
    (low, high)
}

/// A handle's copy of the partition bounds (§4): taken at bounds epoch
/// `epoch` (`u64::MAX`: none yet), with each CS's partition `[low, high)`
/// under them, so that a cached operation neither read-locks the shared
/// bounds nor clones a fence (issue 32: the per-operation copy allocated
/// with more than one CS).
pub(crate) struct BoundsCopy {
    pub(super) epoch: u64,
    pub(super) keys: Vec<Vec<u8>>,
    pub(super) parts: Vec<(Fence, Fence)>,
}

impl BoundsCopy {
    pub(super) fn none() -> BoundsCopy {
        BoundsCopy {
            epoch: u64::MAX,
            keys: Vec::new(),
            parts: Vec::new(),
        }
    }

    /// The copy of bounds `keys` (ascending; CS `i` owns `[keys[i - 1],
    /// keys[i])`, the ends open) of a cluster of `num_cs` CSs.
    pub(super) fn new(epoch: u64, keys: Vec<Vec<u8>>, num_cs: u16) -> BoundsCopy {
        let parts = (0..num_cs as usize)
            .map(|i| {
                let low = match i {
                    0 => Fence::NegInf,
                    _ => keys.get(i - 1).map_or(Fence::PosInf, |k| Fence::key(k)),
                };
                let high = keys.get(i).map_or(Fence::PosInf, |k| Fence::key(k));
                (low, high)
            })
            .collect();
        BoundsCopy { epoch, keys, parts }
    }
}

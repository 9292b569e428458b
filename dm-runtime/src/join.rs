//! [`join_inline`]: `futures::future::join_all` without its heap
//! allocations for a handful of futures (issue 32: a scan's round of leaf
//! READs should not allocate).
//!
//! `join_all` keeps its futures in a `Box<[MaybeDone<F>]>` and collects
//! their outputs into a `Vec`: two allocations per round. [`JoinInline`]
//! keeps both in `SmallVec`s of [`JOIN_INLINE`] (more spill to the heap)
//! and polls in the same order as `join_all`'s small case: every
//! unfinished future, first to last, on each poll. So a round posts its
//! verbs in the same order, and a `sim` run is the same run either way.

use futures::future::MaybeDone;
use smallvec::SmallVec;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Futures (and outputs) [`JoinInline`] holds without a heap allocation.
/// The inline arrays move with the join whole, whatever the count: keep
/// the joined futures and their outputs small (join READ buffers and
/// decode after, not decoded images). At 16, with Dolphin's 1 KB leaf
/// images joined, a scan ran 23% slower (docs/experiments/cpu-ratios.md).
pub const JOIN_INLINE: usize = 8;

/// The future of [`join_inline`].
#[must_use = "futures do nothing unless awaited"]
pub struct JoinInline<F: Future> {
    /// Never moved or resized after construction: each element stays where
    /// it was when first polled (inline in this pinned struct, or in the
    /// spilled heap buffer) until it is dropped in place.
    futs: SmallVec<[MaybeDone<F>; JOIN_INLINE]>,
}

/// Runs `futs` concurrently and returns their outputs in order, as
/// `futures::future::join_all` does, with no heap allocation for up to
/// [`JOIN_INLINE`] futures. Panics if polled again after it completed.
pub fn join_inline<F: Future>(futs: impl IntoIterator<Item = F>) -> JoinInline<F> {
    JoinInline {
        futs: futs.into_iter().map(MaybeDone::Future).collect(),
    }
}

impl<F: Future> Future for JoinInline<F> {
    type Output = SmallVec<[F::Output; JOIN_INLINE]>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `futs` is structurally pinned: it is never moved, pushed
        // to or popped from once this future is pinned (see its field doc),
        // so each element keeps its address until `SmallVec`'s drop drops
        // it in place. Nothing here moves an element.
        let futs = unsafe { &mut self.get_unchecked_mut().futs };
        let mut done = true;
        for f in futs.iter_mut() {
            // SAFETY: as above.
            if unsafe { Pin::new_unchecked(f) }.poll(cx).is_pending() {
                done = false;
            }
        }
        if !done {
            return Poll::Pending;
        }
        Poll::Ready(
            futs.iter_mut()
                // SAFETY: as above; `take_output` leaves `Gone` in place.
                .map(|f| unsafe { Pin::new_unchecked(f) }.take_output())
                .map(|o| o.expect("JoinInline polled after completion"))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn outputs_come_in_order_inline_and_spilled() {
        for n in [0usize, 1, 3, JOIN_INLINE, JOIN_INLINE + 5] {
            let out = block_on(join_inline((0..n).map(|i| async move {
                // Not ready on its first poll.
                crate::yield_now().await;
                i * 2
            })));
            assert_eq!(out.to_vec(), (0..n).map(|i| i * 2).collect::<Vec<_>>());
        }
    }
}

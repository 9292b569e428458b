//! [`join_inline`]: `futures::future::join_all` without its heap
//! allocations for a handful of futures (issue 32: a scan's round of leaf
//! READs should not allocate); [`read_round`]: a round of any number of
//! READs whose storage is recycled per thread.
//!
//! `join_all` keeps its futures in a `Box<[MaybeDone<F>]>` and collects
//! their outputs into a `Vec`: two allocations per round. [`JoinInline`]
//! keeps both in `SmallVec`s of [`JOIN_INLINE`] (more spill to the heap)
//! and polls in the same order as `join_all`'s small case: every
//! unfinished future, first to last, on each poll. So a round posts its
//! verbs in the same order, and a `sim` run is the same run either way.

use crate::verbs::{read, ReadBuf, Verbed};
use dm_verbs::{GlobalAddr, VerbError};
use futures::future::MaybeDone;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::future::Future;
use std::ops::Deref;
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

/// Vectors of each kind [`read_round`] keeps per thread for reuse.
const ROUND_KEEP: usize = 16;

type RoundFuts = Vec<MaybeDone<Verbed<ReadBuf>>>;
type RoundOuts = Vec<Result<ReadBuf, VerbError>>;

thread_local! {
    /// Recycled storage of [`ReadRoundFuture`]s and [`ReadRound`]s.
    static ROUND_POOL: RefCell<(Vec<RoundFuts>, Vec<RoundOuts>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
}

/// A vector of this thread's pool (the list `pick` names), or a new one.
fn take_round<T>(
    pick: impl FnOnce(&mut (Vec<RoundFuts>, Vec<RoundOuts>)) -> &mut Vec<Vec<T>>,
) -> Vec<T> {
    ROUND_POOL
        .try_with(|p| pick(&mut p.borrow_mut()).pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Gives `v`, cleared, back to this thread's pool (dropped if full).
fn give_round<T>(
    v: Vec<T>,
    pick: impl FnOnce(&mut (Vec<RoundFuts>, Vec<RoundOuts>)) -> &mut Vec<Vec<T>>,
) {
    if v.capacity() == 0 {
        return;
    }
    let mut v = v;
    v.clear();
    let _ = ROUND_POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let list = pick(&mut p);
        if list.len() < ROUND_KEEP {
            list.push(v);
        }
    });
}

/// READs of `len` bytes at each address of `reads`, posted in that order
/// in one round (as [`join_inline`] of [`read`]s: one doorbell per QP, the
/// same verbs in the same order) and awaited together; the buffers come in
/// the same order. For rounds of any size: the futures and the buffers'
/// list live in vectors recycled per thread, so a warm round allocates
/// nothing however many READs it holds (issue 32: a SMART scan's run of up
/// to 100 leaves spilled [`join_inline`]'s inline arrays, two allocations
/// per round). Every READ's result comes in its place, an error
/// included, and the round waits for all of them (a failed WR moves its QP
/// to the error state, so the READs after it on that QP fail too, with
/// [`VerbError::QpError`]). Dropped before it completes, the READs posted
/// are abandoned as a dropped [`read`] is.
pub fn read_round(reads: impl IntoIterator<Item = (GlobalAddr, u32)>) -> ReadRoundFuture {
    let mut futs = take_round(|p| &mut p.0);
    futs.extend(
        reads
            .into_iter()
            .map(|(a, len)| MaybeDone::Future(read(a, len))),
    );
    ReadRoundFuture { futs }
}

/// The future of [`read_round`].
#[must_use = "futures do nothing unless awaited"]
pub struct ReadRoundFuture {
    futs: RoundFuts,
}

impl Future for ReadRoundFuture {
    type Output = ReadRound;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ReadRound> {
        // Everything here is `Unpin` (a `Verbed` is plain data).
        let futs = &mut self.get_mut().futs;
        let mut done = true;
        for f in futs.iter_mut() {
            if Pin::new(f).poll(cx).is_pending() {
                done = false;
            }
        }
        if !done {
            return Poll::Pending;
        }
        let mut bufs = take_round(|p| &mut p.1);
        bufs.extend(futs.iter_mut().map(|f| {
            Pin::new(f)
                .take_output()
                .expect("ReadRoundFuture polled after completion")
        }));
        futs.clear();
        Poll::Ready(ReadRound { bufs })
    }
}

impl Drop for ReadRoundFuture {
    fn drop(&mut self) {
        give_round(std::mem::take(&mut self.futs), |p| &mut p.0);
    }
}

/// The buffers of a [`read_round`], in the order of its addresses; reads
/// as a slice. Dropping it gives the buffers to their pool and the list to
/// this thread's.
pub struct ReadRound {
    bufs: RoundOuts,
}

impl ReadRound {
    /// Takes the results out in order (the list stays for reuse).
    pub fn drain(&mut self) -> std::vec::Drain<'_, Result<ReadBuf, VerbError>> {
        self.bufs.drain(..)
    }
}

impl Deref for ReadRound {
    type Target = [Result<ReadBuf, VerbError>];
    fn deref(&self) -> &Self::Target {
        &self.bufs
    }
}

impl Drop for ReadRound {
    fn drop(&mut self) {
        give_round(std::mem::take(&mut self.bufs), |p| &mut p.1);
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

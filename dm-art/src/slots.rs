//! [`Slots`]: the slot words of an internal node image, in a buffer
//! recycled per thread (issue 32: a warm operation allocates nothing).
//! [`crate::tree::NodeImage`] holds one; dropping it gives the buffer back.
//! Capacities are the node types' (`layout::capacity`: powers of two up to
//! 256 slots), one free list per capacity, at most [`KEEP`] buffers each.

use std::cell::RefCell;
use std::ops::Deref;

/// Buffers kept per capacity and thread.
const KEEP: usize = 64;

/// Capacity classes: 2^0 ..= 2^9 slots.
const CLASSES: usize = 10;

thread_local! {
    static POOL: RefCell<[Vec<Vec<u64>>; CLASSES]> = RefCell::new(Default::default());
}

/// Slot words (a node image's `16 + 8 * capacity` bytes after the header),
/// dereferencing to `[u64]`.
#[derive(Debug, Default)]
pub(crate) struct Slots(Vec<u64>);

impl Slots {
    /// The `n` words `word(0..n)`, in a recycled buffer when this thread
    /// has one of `n.next_power_of_two()` capacity.
    pub(crate) fn collect(n: usize, word: impl Fn(usize) -> u64) -> Slots {
        let cap = n.max(1).next_power_of_two();
        let c = cap.trailing_zeros() as usize;
        let got = (c < CLASSES)
            .then(|| POOL.try_with(|p| p.borrow_mut()[c].pop()).ok().flatten())
            .flatten();
        let mut v = got.unwrap_or_else(|| Vec::with_capacity(cap));
        v.extend((0..n).map(word));
        Slots(v)
    }
}

impl Deref for Slots {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.0
    }
}

impl Clone for Slots {
    fn clone(&self) -> Self {
        Slots::collect(self.0.len(), |i| self.0[i])
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        let mut v = std::mem::take(&mut self.0);
        let cap = v.capacity();
        if !cap.is_power_of_two() {
            return;
        }
        let c = cap.trailing_zeros() as usize;
        if c >= CLASSES {
            return;
        }
        v.clear();
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p[c].len() < KEEP {
                p[c].push(v);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_is_reused_for_the_same_capacity() {
        let a = Slots::collect(16, |i| i as u64);
        assert_eq!(&a[..3], &[0, 1, 2]);
        let p = a.0.as_ptr();
        drop(a);
        let b = Slots::collect(16, |i| 100 + i as u64);
        assert_eq!(b.0.as_ptr(), p);
        assert_eq!(b.len(), 16);
        assert_eq!(b[15], 115);
        let c = b.clone();
        assert_eq!(&c[..], &b[..]);
    }
}

//! Recycled verb buffers: a per-thread pool of `Vec<u8>` by power-of-two
//! capacity, so that a warm operation's READ results and WRITE payloads
//! reuse memory instead of allocating (issue 32: no heap allocation per
//! warm operation).
//!
//! Who takes and who gives back:
//! - the backends take a READ's (and an RPC reply's) output buffer with
//!   [`take`] and give a WRITE's (and an RPC's) payload back with [`give`]
//!   once executed or copied to the NIC's staging memory;
//! - `dm_runtime::read` hands the READ buffer to the caller inside a
//!   `ReadBuf`, which gives it back when dropped; writers that build their
//!   payload with [`take`] get it back through the backend.
//!
//! A buffer given back on another thread (a core's buffer dropped by a
//! submitter) joins that thread's pool. Each size class keeps at most
//! [`KEEP_BYTES`] of buffers, and at least [`KEEP`] buffers (8-byte words:
//! 32,768; 4 KiB nodes: 64), so a core with a thousand READs in flight
//! recycles them all instead of freeing most (`dm-bench runtime`: 1,000
//! tasks); buffers above [`MAX_CLASS_BYTES`] or with a capacity that is not
//! a power of two are freed, so a pool stays small (at most about 3.5 MiB
//! of buffers of classes up to 4 KiB plus 64 x (8 + 16 + 32 + 64) KiB, under
//! 12 MiB per thread) whatever it is given.

use std::cell::RefCell;

/// Buffers kept per size class and thread, at least.
pub const KEEP: usize = 64;
/// Bytes of buffers kept per size class and thread, at most (unless
/// [`KEEP`] buffers of the class are more).
pub const KEEP_BYTES: usize = 256 << 10;
/// The largest capacity kept (64 KiB: a node, a leaf, a scan's batch).
pub const MAX_CLASS_BYTES: usize = 64 << 10;
/// The smallest class (8 bytes: a lock word).
const MIN_CLASS: u32 = 3;
const CLASSES: usize = (MAX_CLASS_BYTES.trailing_zeros() - MIN_CLASS + 1) as usize;

/// How many buffers class `c` keeps.
fn keep(c: usize) -> usize {
    (KEEP_BYTES >> (c as u32 + MIN_CLASS)).max(KEEP)
}

thread_local! {
    static POOL: RefCell<[Vec<Vec<u8>>; CLASSES]> = RefCell::new(Default::default());
}

/// The size class of a request for `n` bytes (capacity `1 << (class + 3)`).
fn class_of(n: usize) -> Option<usize> {
    let c = n.max(1).next_power_of_two();
    (c <= MAX_CLASS_BYTES).then(|| (c.trailing_zeros().max(MIN_CLASS) - MIN_CLASS) as usize)
}

/// An empty buffer with room for at least `n` bytes: a recycled one of
/// this thread if there is one, else a new one with a power-of-two
/// capacity (so it can be recycled when given back).
pub fn take(n: usize) -> Vec<u8> {
    let Some(c) = class_of(n) else {
        return Vec::with_capacity(n);
    };
    let got = POOL.try_with(|p| p.borrow_mut()[c].pop()).ok().flatten();
    got.unwrap_or_else(|| Vec::with_capacity(1 << (c as u32 + MIN_CLASS)))
}

/// An 8-byte WRITE payload holding `w` little-endian (a slot, a value, a
/// lock or key word), from the pool: `w.to_le_bytes().to_vec()` without
/// an allocation when the pool has one.
pub fn le64(w: u64) -> Vec<u8> {
    let mut v = take(8);
    v.extend_from_slice(&w.to_le_bytes());
    v
}

/// Gives `v` back to this thread's pool (cleared), or frees it if its
/// capacity is not a class's or the class is full.
pub fn give(mut v: Vec<u8>) {
    let cap = v.capacity();
    if !cap.is_power_of_two() || cap < 1 << MIN_CLASS {
        return;
    }
    let Some(c) = class_of(cap) else { return };
    v.clear();
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p[c].len() < keep(c) {
            p[c].push(v);
        }
    });
}

/// Buffers this thread's pool holds now (tests, statistics).
pub fn pooled() -> usize {
    POOL.try_with(|p| p.borrow().iter().map(Vec::len).sum())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_by_class_and_the_pool_is_bounded() {
        let a = take(100);
        assert!(a.capacity() >= 100 && a.capacity().is_power_of_two());
        let p = a.as_ptr();
        give(a);
        let b = take(128);
        assert_eq!(b.as_ptr(), p, "the same class reuses the buffer");
        assert!(b.is_empty());
        give(b);
        // Odd capacities and huge buffers are freed, not kept.
        let before = pooled();
        give(Vec::with_capacity(100));
        give(Vec::with_capacity(MAX_CLASS_BYTES * 2));
        assert_eq!(pooled(), before);
        for _ in 0..KEEP * 2 {
            give(Vec::with_capacity(4096));
        }
        assert!(pooled() <= before + KEEP);
        let before = pooled();
        for _ in 0..KEEP_BYTES {
            give(Vec::with_capacity(8));
        }
        assert!(pooled() <= before + KEEP_BYTES / 8);
        assert!(take(MAX_CLASS_BYTES + 1).capacity() > MAX_CLASS_BYTES);
        assert!(take(0).capacity() >= 8);
    }
}

//! Heap allocations per operation (issue 32, item 2: "a counting global
//! allocator in dm-bench reports `allocs_per_op`"): the binary's allocator
//! (mimalloc, `main.rs` says why) wrapped so that every allocation and
//! reallocation bumps a counter of the calling thread. Frees are not
//! counted. `ycsb` on the wall-clock fabrics reads each core thread's
//! counter when its share of the run phase starts and ends
//! ([`crate::cpu_time::on_thread`]), so `allocs_per_op` is the run phase's
//! allocations of the core threads per completed operation: the index, the
//! runtime, loopback's verb execution and the bench's own per-operation
//! bookkeeping together.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

thread_local! {
    /// Allocations and reallocations of this thread. `const`-initialised and
    /// without a destructor, so reaching it never allocates (it is read
    /// from inside the allocator).
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Allocations (and reallocations) the calling thread has made so far.
pub fn thread_allocs() -> u64 {
    ALLOCS.try_with(|c| c.get()).unwrap_or(0)
}

fn count() {
    // A thread being torn down has no counter any more: not counted.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

/// `A` with every allocation counted per thread.
pub struct Counting<A>(pub A);

// SAFETY: every method forwards to `A` with the caller's arguments
// unchanged, so `A`'s guarantees are the wrapper's; counting touches only a
// thread-local integer and never allocates.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as received (the caller upholds `alloc`'s contract).
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as received.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded as received (`ptr` came from this allocator).
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received (`ptr` came from this allocator).
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn allocations_are_counted_on_their_thread() {
        // The test binary's allocator is the system's, not `Counting`: the
        // counter only moves in the dm-bench binary. Here: it is readable
        // and does not go backwards.
        let a = super::thread_allocs();
        let v: Vec<u64> = Vec::with_capacity(16);
        std::hint::black_box(&v);
        assert!(super::thread_allocs() >= a);
    }
}

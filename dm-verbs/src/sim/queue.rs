//! The simulator's event queue: a timing wheel of 1 ns slots over the next
//! [`HORIZON`] ns, with a binary heap for events further out.
//!
//! Order: events pop in `(time, push order)` order, exactly as a min-heap
//! keyed by `(time, sequence number)` would give them; `tests` below check
//! that against `BinaryHeap` on random schedules. So replacing the heap
//! changed no simulated run (the `sim-speed` trace hash stayed the same).
//!
//! Layout:
//! - `nodes`: a pool of events, each with the index of the next event of
//!   its slot; free nodes are chained through the same field.
//! - `tails[s]`: the last event of slot `s`, whose `next` is the first (a
//!   circular list: one index per slot gives both ends), or `NIL`.
//! - `bits` / `summary`: which slots / which 64-slot words are occupied.
//! - `far`: events at `now + HORIZON` or later, keyed `(time, seq)`.
//!
//! Why a wheel: every event is a few µs ahead of `now` (an RTT half, a NIC
//! queue), so with 1 ns slots the next event is a bit scan away, where a
//! binary heap of a few hundred entries pays ~8 dependent, mispredicted
//! sift steps per pop (the heap's sift was the simulator's hottest loop in
//! `perf`). Slot `time % HORIZON` is unique for every time in
//! `[now, now + HORIZON)`; an event of the same slot and time goes behind
//! those already there, which is push order. A far event moves into the
//! wheel as soon as `now` comes within `HORIZON` of it, before anything
//! else can be pushed for its time, so it keeps its place too.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::mem::MaybeUninit;

/// Span of the wheel, ns (a power of two; 64 x 64 slots).
pub(super) const HORIZON: u64 = 4096;
const WORDS: usize = (HORIZON / 64) as usize;
const NIL: u32 = u32::MAX;

/// A pool entry. `val` is initialised exactly while the node is linked in
/// a slot or held by `far` (not while it is on the free list). It is not an
/// `Option`: taking an `Option<Event>` read its tag, then copied the rest
/// as a blob two bytes off alignment, and the handler's loads of the fields
/// from that copy could not be forwarded from its stores (a seventh of the
/// event loop's `perf` samples).
struct Node<T> {
    next: u32,
    val: MaybeUninit<T>,
}

pub(super) struct EventQueue<T> {
    /// No pending event is earlier; the time of the last pop.
    now: u64,
    nodes: Vec<Node<T>>,
    free: u32,
    tails: Box<[u32]>,
    bits: [u64; WORDS],
    summary: u64,
    far: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    len: usize,
}

impl<T> EventQueue<T> {
    pub(super) fn new() -> Self {
        EventQueue {
            now: 0,
            nodes: Vec::new(),
            free: NIL,
            tails: vec![NIL; HORIZON as usize].into_boxed_slice(),
            bits: [0; WORDS],
            summary: 0,
            far: BinaryHeap::new(),
            seq: 0,
            len: 0,
        }
    }

    /// Pending events.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    /// Queues `val` at `time` (clamped to the last popped time: nothing is
    /// scheduled in the past). Inlined so that the caller's event is built
    /// straight in its node, not built on the stack and copied there with
    /// wide loads over narrow stores (half of this function's `perf`
    /// samples when it was a call).
    #[inline(always)]
    pub(super) fn push(&mut self, time: u64, val: T) {
        let time = time.max(self.now);
        let node = self.alloc();
        // One write after the node is found: with the value moved into
        // either of two branches it was built on the stack first.
        self.nodes[node as usize].val.write(val);
        self.len += 1;
        if time - self.now < HORIZON {
            self.link(time, node);
        } else {
            self.seq += 1;
            self.far.push(Reverse((time, self.seq, node)));
        }
    }

    /// The earliest event and its time.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<(u64, T)> {
        let slot = match self.next_slot() {
            Some(s) => s,
            None => {
                // The wheel is empty: jump to the first far event.
                let &Reverse((t, _, _)) = self.far.peek()?;
                self.now = t;
                self.migrate();
                self.next_slot().expect("a migrated event is in the wheel")
            }
        };
        let p = (self.now % HORIZON) as usize;
        let time = self.now + ((slot + HORIZON as usize - p) % HORIZON as usize) as u64;
        let tail = self.tails[slot];
        let head = self.nodes[tail as usize].next;
        if head == tail {
            self.tails[slot] = NIL;
            let w = slot / 64;
            self.bits[w] &= !(1u64 << (slot % 64));
            if self.bits[w] == 0 {
                self.summary &= !(1u64 << w);
            }
        } else {
            self.nodes[tail as usize].next = self.nodes[head as usize].next;
        }
        let n = &mut self.nodes[head as usize];
        // SAFETY: a linked node's value is initialised (see `Node`); the node
        // goes to the free list right here, so it is read once.
        let val = unsafe { n.val.assume_init_read() };
        n.next = self.free;
        self.free = head;
        self.len -= 1;
        if time != self.now {
            self.now = time;
            // Tested here, not in a call: `far` is empty almost always.
            if !self.far.is_empty() {
                self.migrate();
            }
        }
        Some((time, val))
    }

    /// A free node (its value uninitialised).
    #[inline(always)]
    fn alloc(&mut self) -> u32 {
        if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            i
        } else {
            let i = u32::try_from(self.nodes.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("sim: more than 2^32 - 1 events pending");
            self.nodes.push(Node {
                next: NIL,
                val: MaybeUninit::uninit(),
            });
            i
        }
    }

    /// Appends node `node` to the slot of `time` (within the horizon).
    #[inline]
    fn link(&mut self, time: u64, node: u32) {
        let slot = (time % HORIZON) as usize;
        let tail = self.tails[slot];
        if tail == NIL {
            self.nodes[node as usize].next = node;
            self.bits[slot / 64] |= 1u64 << (slot % 64);
            self.summary |= 1u64 << (slot / 64);
        } else {
            self.nodes[node as usize].next = self.nodes[tail as usize].next;
            self.nodes[tail as usize].next = node;
        }
        self.tails[slot] = node;
    }

    /// Moves the far events that `now` has come within `HORIZON` of into
    /// the wheel, in `(time, seq)` order.
    #[inline(never)]
    fn migrate(&mut self) {
        while let Some(&Reverse((t, _, node))) = self.far.peek() {
            if t - self.now >= HORIZON {
                break;
            }
            self.far.pop();
            self.link(t, node);
        }
    }

    /// The first occupied slot at or after `now`'s, circularly.
    #[inline]
    fn next_slot(&self) -> Option<usize> {
        let p = (self.now % HORIZON) as usize;
        let w = p / 64;
        let m = self.bits[w] & (!0u64 << (p % 64));
        if m != 0 {
            return Some(w * 64 + m.trailing_zeros() as usize);
        }
        // Later words, then (wrapping round) words 0..=w, whose occupied
        // slots are all before `p` in word w (none at or after it).
        let later = if w == WORDS - 1 {
            0
        } else {
            self.summary & (!0u64 << (w + 1))
        };
        let s = if later != 0 { later } else { self.summary };
        if s == 0 {
            return None;
        }
        let w2 = s.trailing_zeros() as usize;
        Some(w2 * 64 + self.bits[w2].trailing_zeros() as usize)
    }
}

impl<T> Drop for EventQueue<T> {
    /// Drops the events still pending (linked in the wheel or in `far`).
    fn drop(&mut self) {
        for s in 0..HORIZON as usize {
            let tail = self.tails[s];
            if tail == NIL {
                continue;
            }
            let mut i = tail;
            loop {
                let n = &mut self.nodes[i as usize];
                // SAFETY: linked nodes hold values; each is visited once.
                unsafe { n.val.assume_init_drop() };
                i = n.next;
                if i == tail {
                    break;
                }
            }
        }
        for Reverse((_, _, i)) in self.far.drain() {
            // SAFETY: as above; a far node is in no slot.
            unsafe { self.nodes[i as usize].val.assume_init_drop() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Random pushes (near, far, equal times, in the past) interleaved with
    /// pops give the order of a `(time, seq)` min-heap.
    #[test]
    fn pops_in_time_then_push_order() {
        for seed in 0..20 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            let (mut seq, mut now) = (0u64, 0u64);
            for _ in 0..20_000 {
                if rng.gen_bool(0.52) || reference.is_empty() {
                    let ahead = match rng.gen_range(0..10) {
                        0 => 0,
                        1 => rng.gen_range(0..3),
                        2 => rng.gen_range(HORIZON - 5..HORIZON + 5),
                        3 => rng.gen_range(0..5 * HORIZON),
                        _ => rng.gen_range(0..2_500),
                    };
                    let t = now + ahead;
                    seq += 1;
                    q.push(t, seq);
                    reference.push(Reverse((t, seq)));
                } else {
                    let Reverse((t, s)) = reference.pop().unwrap();
                    assert_eq!(q.pop(), Some((t, s)), "seed {seed}");
                    now = t;
                }
                assert_eq!(q.len(), reference.len());
            }
            while let Some(Reverse((t, s))) = reference.pop() {
                assert_eq!(q.pop(), Some((t, s)), "seed {seed}");
            }
            assert_eq!(q.pop(), None);
        }
    }

    /// Pending events (in slots and far) are dropped with the queue, once.
    #[test]
    fn drop_drops_pending_events_once() {
        let v = std::rc::Rc::new(());
        {
            let mut q = EventQueue::new();
            for t in [5, 5, 9, 3 * HORIZON, 3 * HORIZON] {
                q.push(t, v.clone());
            }
            drop(q.pop());
            assert_eq!(std::rc::Rc::strong_count(&v), 5);
        }
        assert_eq!(std::rc::Rc::strong_count(&v), 1);
    }

    #[test]
    fn past_times_are_clamped_to_now() {
        let mut q = EventQueue::new();
        q.push(100, 'a');
        assert_eq!(q.pop(), Some((100, 'a')));
        q.push(50, 'b');
        q.push(100, 'c');
        assert_eq!(q.pop(), Some((100, 'b')));
        assert_eq!(q.pop(), Some((100, 'c')));
    }
}

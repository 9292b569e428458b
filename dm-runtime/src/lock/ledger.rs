//! The own-tag ledger (not in the papers; see the [module docs](super)):
//! per (tag, 64-bit lock word), how many locks this thread's handles hold,
//! which lock CASes are in flight, and an epoch bumped at every take and
//! release seen complete. It recognises a CAS of ours that took a lock
//! without its success being reported.

use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

/// One (tag, lock word) in this thread's ledger (see the module docs).
#[derive(Default)]
pub(super) struct Entry {
    pub(super) held: u32,
    /// Post numbers of the lock CASes in flight, in post order (inline for
    /// the usual few: an entry comes and goes with each lock, and a heap
    /// `Vec` here was an allocation per lock, issue 32 item 2).
    pub(super) in_flight: smallvec::SmallVec<[u64; 8]>,
    next_post: u64,
    pub(super) epoch: u64,
    /// Release requests of this core on the word in flight (`super::ask`).
    asks: u32,
}

thread_local! {
    // FxHash: a lock takes and releases go through this map 3-4 times, and
    // SipHash of the 16-byte key was 2.8% of an fg YCSB A run (issue 32).
    static LEDGER: RefCell<FxHashMap<(u64, u64), Entry>> = RefCell::new(FxHashMap::default());
    /// The last take count a member's name carried ([`next_take`]).
    static TAKES: Cell<u16> = const { Cell::new(0) };
}

/// Bits 32..48 of a member's 64-bit lock word: the take count
/// (`super::member`, "Holder names in lock words").
const TAKE_BITS: u64 = 0xffff << 32;

/// The holder's name in the 64-bit lock value `v`, without its take count:
/// the own-tag ledger's and the owner table's key.
pub(super) fn name_of(v: u64) -> u64 {
    v & !TAKE_BITS
}

/// The take count for this thread's next take of a member's 64-bit lock
/// word, shifted into place: one count per thread, so every handle of a
/// core names each of its takes apart (it wraps after 65,536 takes).
pub(super) fn next_take() -> u64 {
    TAKES.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        (n as u64) << 32
    })
}

/// Locks of this process taken over through the own-tag ledger.
pub(super) static LEDGER_TAKEOVERS: AtomicU64 = AtomicU64::new(0);

/// How many locks this process took over because a CAS of its own had taken
/// them without reporting success (module docs, "own-tag ledger"). A
/// process-wide total, kept beside the per-index
/// [`LockStats::takeovers`](super::LockStats::takeovers) for the reports that
/// sum over every index of the process.
pub fn lock_takeovers() -> u64 {
    LEDGER_TAKEOVERS.load(Ordering::Relaxed)
}

pub(super) fn ledger<R>(key: (u64, u64), f: impl FnOnce(&mut Entry) -> R) -> R {
    LEDGER.with(|l| {
        let mut l = l.borrow_mut();
        let e = l.entry(key).or_default();
        let r = f(e);
        if e.held == 0 && e.in_flight.is_empty() {
            l.remove(&key);
        }
        r
    })
}

/// A lock CAS in flight: in the ledger until dropped (also on error or
/// cancellation), with its post number and the entry's epoch at posting.
/// One per CAS posted: a retry is a new post and takes a new one (its
/// place in post order is what [`InFlight::unexplained`] reasons from).
pub(super) struct InFlight {
    key: (u64, u64),
    post: u64,
    epoch: u64,
    /// A release request's CAS (`super::ask`), counted in `Entry::asks`.
    ask: bool,
    /// A release request of this core on the word was in flight when this
    /// entry was made ([`InFlight::asking`]).
    asking: bool,
}

impl InFlight {
    pub(super) fn new(key: (u64, u64)) -> Self {
        Self::make(key, false)
    }

    /// The entry of a release request's CAS (`super::ask`).
    pub(super) fn new_ask(key: (u64, u64)) -> Self {
        Self::make(key, true)
    }

    fn make(key: (u64, u64), ask: bool) -> Self {
        let (post, epoch, asking) = ledger(key, |e| {
            let p = e.next_post;
            e.next_post += 1;
            e.in_flight.push(p);
            let asking = e.asks > 0;
            e.asks += ask as u32;
            (p, e.epoch, asking)
        });
        InFlight {
            key,
            post,
            epoch,
            ask,
            asking,
        }
    }

    /// Whether a release request of this core on the word was in flight
    /// when this entry was made. A lock CAS then waits for it to complete
    /// before it posts: soft-RoCE runs a duplicated CAS a second time
    /// before it reports it (`--faults redo`), and the request's second
    /// execution, which expects this core's name, would free the word
    /// again after a task of ours had taken it with that name (`check
    /// --index sherman-onchip --faults torn,delay,unreported,replay,redo,
    /// writeback,crash --clients 64 --keys 32 --cores 4 --first-seed
    /// 84039`).
    pub(super) fn asking(&self) -> bool {
        self.asking
    }

    /// True if this CAS's own-tag result cannot be explained by anything the
    /// ledger saw (module docs): no holder, no take or release since it was
    /// posted, no earlier CAS of ours still in flight (one QP executes them in
    /// post order, so later ones cannot have run first).
    pub(super) fn unexplained(&self) -> bool {
        ledger(self.key, |e| {
            e.held == 0 && e.epoch == self.epoch && e.in_flight.first() == Some(&self.post)
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        ledger(self.key, |e| {
            e.in_flight.retain(|p| *p != self.post);
            e.asks -= self.ask as u32;
        });
    }
}

/// Forgets every entry of this thread's own-tag ledger. For a simulator
/// that runs independent clusters one after another on one thread: a
/// killed CS's tasks are never polled again nor dropped (a dead process
/// runs nothing), so the locks they held stay in the ledger, and the next
/// cluster, which reuses tags and addresses, found its own name on a word
/// its ledger showed held and waited for ever (`dm-bench check --index
/// dolphin --faults replay,crash`, seed 34 after seed 4's crash). Call it
/// only when no task of this thread holds or is taking a lock.
pub fn forget_thread_ledger() {
    LEDGER.with(|l| l.borrow_mut().clear());
    // A seed replayed alone (`check --first-seed S --seeds 1`) then names
    // its takes as it did among the others.
    TAKES.with(|t| t.set(0));
}

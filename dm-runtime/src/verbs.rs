//! Verb futures: what index code awaits.
//!
//! Polling a [`VerbFuture`] the first time appends its WR to this round's post
//! list for the target MS and parks the task (a switch point); the executor rings
//! one doorbell per QP at the end of the round and wakes the task when the CQ
//! returns its `wr_id`. `wr_id = (generation << 32) | in-flight slot index`, so a
//! late completion for a dropped future can never wake a reused slot.

use crate::core::{try_current, with_current, CoreState};
use crate::waiter::Waiter;
use crate::waker::local_key;
use dm_verbs::{GlobalAddr, Verb, VerbError, VerbOutput, WorkRequest};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A posted (or about to be posted) verb. Resolves to the verb's output or its error.
///
/// A verb future belongs to the core that polls it: its WR sits in that
/// core's in-flight table, so it is `!Send` (it cannot be moved to, or
/// dropped on, another core's thread). A future dropped while its WR is in
/// flight abandons its slot, checked by generation, and the completion
/// frees it.
///
/// ```compile_fail
/// fn needs_send<T: Send>(_: T) {}
/// needs_send(dm_runtime::read(dm_verbs::GlobalAddr::new(0, 0), 8));
/// ```
pub struct VerbFuture {
    state: State,
    /// `!Send` and `!Sync`: the in-flight slot is the posting core's.
    _core_bound: PhantomData<*const ()>,
}

enum State {
    Init(Verb),
    Posted { key: u32, gen: u32 },
    Done,
}

impl VerbFuture {
    pub fn new(verb: Verb) -> Self {
        VerbFuture {
            state: State::Init(verb),
            _core_bound: PhantomData,
        }
    }
}

impl Future for VerbFuture {
    type Output = Result<VerbOutput, VerbError>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `VerbFuture` is `Unpin`: the state is plain data. The closures
        // are forced inline: left to the compiler, each became a function
        // of its own called per poll, and the verb's kind, built just
        // before the first poll, was no longer known inside it (about 27
        // instructions and 3 ns per verb switch; the binary's text grows
        // by 7%; docs/experiments/runtime.md).
        let this = self.get_mut();
        if let State::Posted { key, gen } = this.state {
            let r = with_current(
                #[inline(always)]
                |c| poll_posted(c, key, gen, cx),
            );
            if r.is_ready() {
                this.state = State::Done;
            }
            return r;
        }
        let State::Init(v) = &mut this.state else {
            panic!("VerbFuture polled after completion");
        };
        let (key, gen) = with_current(
            #[inline(always)]
            |c| post_verb(c, v, cx),
        );
        this.state = State::Posted { key, gen };
        Poll::Pending
    }
}

/// Counts verb `v`, takes an in-flight slot for it and appends its WR to
/// this round's post list; the slot's key and generation. Inlined into the
/// poll with everything it calls: a value handed through memory from a
/// caller's frame (the target MS, say) is read back before the store can
/// be forwarded, which stalled this path.
#[inline(always)]
fn post_verb(c: &CoreState, v: &mut Verb, cx: &mut Context<'_>) -> (u32, u32) {
    let ms = v.ms();
    // SAFETY: as in `CoreState::post`.
    unsafe { (*c.cur_stats.get()).count_post(v) };
    // Generation 0 marks a free in-flight slot: skip it on wrap.
    let gen = c.next_gen.get().wrapping_add(1).max(1);
    c.next_gen.set(gen);
    let key = c.inflight.borrow_mut().insert(gen, c.waiter(cx.waker()));
    let wr_id = ((gen as u64) << 32) | key as u64;
    if c.trace_on.get() {
        tracing::trace!(key, wr_id, ms, kind = ?v.kind(), "post");
    }
    c.post(ms, |list| push_taken(list, wr_id, v));
    (key, gen)
}

/// Appends the WR `wr_id` for verb `v` to `list`, moving the verb out field
/// by field and writing each arm's WR straight into the list. The verb was
/// usually written a few instructions earlier (the future is built right
/// before its first poll): copying the enum as a whole, or building the WR
/// on the stack and copying it into the list, makes wide loads that
/// straddle narrow stores the CPU cannot forward (a stall of a dozen
/// cycles or more; `perf annotate` put a fifth of the verb future's samples
/// on it).
#[inline(always)]
fn push_taken(list: &mut Vec<WorkRequest>, wr_id: u64, v: &mut Verb) {
    list.reserve(1);
    let n = list.len();
    // SAFETY: `reserve` made room for one more element at index `n`; each
    // arm writes both fields of that element, and only then is the length
    // raised. Nothing in between can panic (the moves out of `v` leave
    // empty vectors behind, as `take` does).
    unsafe {
        let dst = list.as_mut_ptr().add(n);
        std::ptr::addr_of_mut!((*dst).wr_id).write(wr_id);
        let verb = std::ptr::addr_of_mut!((*dst).verb);
        // Each arm writes its variant straight into the list: building the
        // verb first and pushing it merged the arms through a stack slot,
        // whose narrow stores the wide copy into the list could not forward.
        match v {
            Verb::Read { addr, len } => verb.write(Verb::Read {
                addr: *addr,
                len: *len,
            }),
            Verb::Write { addr, data } => verb.write(Verb::Write {
                addr: *addr,
                data: std::mem::take(data),
            }),
            Verb::Cas { addr, expect, swap } => verb.write(Verb::Cas {
                addr: *addr,
                expect: *expect,
                swap: *swap,
            }),
            Verb::MaskedCas {
                addr,
                expect,
                swap,
                compare_mask,
                swap_mask,
            } => verb.write(Verb::MaskedCas {
                addr: *addr,
                expect: *expect,
                swap: *swap,
                compare_mask: *compare_mask,
                swap_mask: *swap_mask,
            }),
            Verb::Faa { addr, add } => verb.write(Verb::Faa {
                addr: *addr,
                add: *add,
            }),
            Verb::Rpc {
                ms,
                handler,
                payload,
            } => verb.write(Verb::Rpc {
                ms: *ms,
                handler: *handler,
                payload: std::mem::take(payload),
            }),
        }
        list.set_len(n + 1);
    }
}

/// Takes the result of in-flight slot `key` if it has arrived; otherwise makes
/// sure the slot wakes the waker of this poll.
#[inline(always)]
fn poll_posted(
    c: &CoreState,
    key: u32,
    gen: u32,
    cx: &mut Context<'_>,
) -> Poll<Result<VerbOutput, VerbError>> {
    let mut inf = c.inflight.borrow_mut();
    match inf.take_result(key) {
        Some(r) => {
            drop(inf);
            if let Ok(out) = &r {
                // SAFETY: as in `CoreState::post`.
                unsafe { (*c.cur_stats.get()).count_completion(out) };
            }
            Poll::Ready(r)
        }
        None => {
            let slot = inf.get_mut(key).expect("a posted verb's slot is taken");
            debug_assert_eq!(slot.gen, gen);
            let same = match &slot.waiter {
                // An abandoned slot's key matches no waker's.
                Waiter::Task(k) => local_key(cx.waker(), c.exec_id) == Some(*k),
                Waiter::Waker(w) => w.will_wake(cx.waker()),
            };
            if !same {
                slot.waiter = c.waiter(cx.waker());
            }
            Poll::Pending
        }
    }
}

impl Drop for VerbFuture {
    /// Inlined test of the state (a completed future is `Done` and has
    /// nothing to free); the abandoning path is a call.
    #[inline]
    fn drop(&mut self) {
        if let State::Posted { key, gen } = self.state {
            abandon(key, gen);
        }
    }
}

/// Frees in-flight slot `key` of a future dropped while posted, or marks it
/// abandoned if its WR is still in flight (the completion then frees it).
/// A slot of another generation is not this future's (it was dropped on a
/// core that is not the one that posted it): it is left alone.
#[cold]
fn abandon(key: u32, gen: u32) {
    try_current(|c| {
        let mut inf = c.inflight.borrow_mut();
        if let Some(slot) = inf.get_mut(key).filter(|s| s.gen == gen) {
            if slot.result.is_some() {
                inf.remove(key);
            } else {
                slot.waiter = Waiter::ABANDONED;
            }
        }
    });
}

/// What a verb's completion becomes in [`Verbed`]: the bytes of a READ or
/// an RPC reply (`Vec<u8>`), nothing for a WRITE (`()`), the old value of an
/// atomic (`u64`). Chosen by type, so the mapping is inlined into the poll.
pub trait VerbResult: Sized {
    /// Maps a completion; a completion of the wrong shape is a fabric bug.
    fn from_completion(r: Result<VerbOutput, VerbError>) -> Result<Self, VerbError>;
}

impl VerbResult for Vec<u8> {
    #[inline(always)]
    fn from_completion(r: Result<VerbOutput, VerbError>) -> Result<Self, VerbError> {
        match r? {
            VerbOutput::Read(b) | VerbOutput::Rpc(b) => Ok(b),
            other => unreachable!("READ/RPC completed with {other:?}"),
        }
    }
}

/// The bytes of a READ: a buffer of the core thread's pool
/// (`dm_verbs::buf`), given back when dropped, so a warm READ allocates
/// nothing. Reads as `&[u8]` (`Deref`); [`ReadBuf::into_vec`] keeps the
/// bytes (the buffer then leaves the pool).
pub struct ReadBuf(Vec<u8>);

impl ReadBuf {
    /// The bytes as an owned `Vec` (not given back to the pool).
    pub fn into_vec(mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

/// A buffer built on the CS (an encoded node image standing in for one
/// READ): given to this thread's pool when dropped, as a READ's is.
impl From<Vec<u8>> for ReadBuf {
    fn from(v: Vec<u8>) -> Self {
        ReadBuf(v)
    }
}

impl Drop for ReadBuf {
    #[inline]
    fn drop(&mut self) {
        if self.0.capacity() != 0 {
            dm_verbs::buf::give(std::mem::take(&mut self.0));
        }
    }
}

impl std::ops::Deref for ReadBuf {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for ReadBuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// A READ of exactly `N` bytes as an array (a lock or pointer word);
/// the buffer goes back to the pool.
impl<const N: usize> TryFrom<ReadBuf> for [u8; N] {
    type Error = std::array::TryFromSliceError;
    fn try_from(b: ReadBuf) -> Result<Self, Self::Error> {
        <[u8; N]>::try_from(&b[..])
    }
}

impl PartialEq for ReadBuf {
    fn eq(&self, o: &ReadBuf) -> bool {
        self.0 == o.0
    }
}

impl Eq for ReadBuf {}

impl PartialEq<Vec<u8>> for ReadBuf {
    fn eq(&self, o: &Vec<u8>) -> bool {
        &self.0 == o
    }
}

impl PartialEq<[u8]> for ReadBuf {
    fn eq(&self, o: &[u8]) -> bool {
        self.0 == o
    }
}

impl AsRef<[u8]> for ReadBuf {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for ReadBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReadBuf").field(&self.0).finish()
    }
}

impl VerbResult for ReadBuf {
    #[inline(always)]
    fn from_completion(r: Result<VerbOutput, VerbError>) -> Result<Self, VerbError> {
        match r? {
            VerbOutput::Read(b) => Ok(ReadBuf(b)),
            other => unreachable!("READ completed with {other:?}"),
        }
    }
}

impl VerbResult for u64 {
    #[inline(always)]
    fn from_completion(r: Result<VerbOutput, VerbError>) -> Result<Self, VerbError> {
        match r? {
            VerbOutput::Atomic(v) => Ok(v),
            other => unreachable!("atomic completed with {other:?}"),
        }
    }
}

impl VerbResult for () {
    #[inline(always)]
    fn from_completion(r: Result<VerbOutput, VerbError>) -> Result<Self, VerbError> {
        r.map(|_| ())
    }
}

/// A [`VerbFuture`] whose output is mapped to the verb's result type `T`
/// (see [`VerbResult`]): what [`read`], [`write`](fn@write), [`cas`],
/// [`masked_cas`], [`faa`] and [`rpc`] return. A plain struct rather than
/// an `async fn`, so awaiting a verb adds no state machine of its own (one
/// less resume per poll on the hot path).
pub struct Verbed<T> {
    inner: VerbFuture,
    _out: PhantomData<fn() -> T>,
}

impl<T> Verbed<T> {
    /// The same verb with its result dropped (success or the error), so
    /// verbs of several result types go in one collection and complete
    /// together (`NodeLocks::release`'s WRITEs and unlock).
    #[inline(always)]
    pub fn discard(self) -> Verbed<()> {
        Verbed {
            inner: self.inner,
            _out: PhantomData,
        }
    }
}

impl<T: VerbResult> Future for Verbed<T> {
    type Output = Result<T, VerbError>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Verbed` is `Unpin` (a `VerbFuture` and a marker).
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll(cx) {
            Poll::Ready(r) => Poll::Ready(T::from_completion(r)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[inline(always)]
fn verbed<T: VerbResult>(verb: Verb) -> Verbed<T> {
    Verbed {
        inner: VerbFuture::new(verb),
        _out: PhantomData,
    }
}

/// RDMA READ of `len` bytes at `addr`. Not a snapshot above 8 bytes. The
/// bytes come in a pooled [`ReadBuf`].
#[inline]
pub fn read(addr: GlobalAddr, len: u32) -> Verbed<ReadBuf> {
    verbed(Verb::Read { addr, len })
}

/// RDMA WRITE of `data` at `addr`.
#[inline]
pub fn write(addr: GlobalAddr, data: Vec<u8>) -> Verbed<()> {
    verbed(Verb::Write { addr, data })
}

/// 8-byte CAS; returns the old value (success iff it equals `expect`).
#[inline]
pub fn cas(addr: GlobalAddr, expect: u64, swap: u64) -> Verbed<u64> {
    verbed(Verb::Cas { addr, expect, swap })
}

/// Masked CAS (needs `Capability::MaskedCas`); returns the old value.
#[inline]
pub fn masked_cas(
    addr: GlobalAddr,
    expect: u64,
    swap: u64,
    compare_mask: u64,
    swap_mask: u64,
) -> Verbed<u64> {
    verbed(Verb::MaskedCas {
        addr,
        expect,
        swap,
        compare_mask,
        swap_mask,
    })
}

/// 8-byte FAA; returns the old value.
#[inline]
pub fn faa(addr: GlobalAddr, add: u64) -> Verbed<u64> {
    verbed(Verb::Faa { addr, add })
}

/// Two-sided RPC to handler `handler` on MS `ms`; returns the reply.
#[inline]
pub fn rpc(ms: u16, handler: u16, payload: Vec<u8>) -> Verbed<Vec<u8>> {
    verbed(Verb::Rpc {
        ms,
        handler,
        payload,
    })
}

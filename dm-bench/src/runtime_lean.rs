//! The leanest executor `dm-bench runtime` compares with: a lower bound on
//! what any executor pays per verb switch on the loopback fabric, so that
//! dm-runtime's verb-switch figure can be read against what is left above
//! the fabric.
//!
//! It keeps only what the verb variant's workload needs: each task has at
//! most one READ in flight, so the `wr_id` is the task's index and the
//! result goes into a per-task slot; wakers carry the index and push it on a
//! thread-local run queue; every round drains the CQ, polls the woken tasks
//! and posts one list. No in-flight table, generations, waiter kinds, per-MS
//! lists, accounting, bounded rounds, cross-core wakes or tracing: the
//! features the foundation issue asks of dm-runtime, and what they cost is
//! the gap between this figure and dm-runtime's.

use dm_verbs::{Completion, Fabric, GlobalAddr, Queues, Verb, VerbOutput, WorkRequest};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::Instant;

/// The round's state the tasks reach: woken task indexes, this round's WRs,
/// and each task's arrived READ result.
#[derive(Default)]
struct Lean {
    run: Vec<u32>,
    wrs: Vec<WorkRequest>,
    results: Vec<Option<Vec<u8>>>,
}

thread_local! {
    static LEAN: RefCell<Lean> = RefCell::new(Lean::default());
}

fn wake(d: *const ()) {
    LEAN.with(|l| l.borrow_mut().run.push(d as usize as u32));
}

static VTABLE: RawWakerVTable =
    RawWakerVTable::new(|d| RawWaker::new(d, &VTABLE), wake, wake, |_| {});

/// An 8-byte READ whose `wr_id` is the polling task's index (the waker's data).
struct LeanRead {
    addr: GlobalAddr,
    posted: bool,
}

impl Future for LeanRead {
    type Output = Vec<u8>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<u8>> {
        let task = cx.waker().data() as usize;
        LEAN.with(|l| {
            let mut l = l.borrow_mut();
            if !self.posted {
                self.posted = true;
                let verb = Verb::Read {
                    addr: self.addr,
                    len: 8,
                };
                l.wrs.push(WorkRequest {
                    wr_id: task as u64,
                    verb,
                });
                return Poll::Pending;
            }
            match l.results[task].take() {
                Some(b) => Poll::Ready(b),
                None => Poll::Pending,
            }
        })
    }
}

/// ns per switch: `tasks` tasks each await `iters` READs of `addr`.
pub(crate) fn run<F: Fabric>(fabric: &F, addr: GlobalAddr, tasks: u64, iters: u64) -> f64 {
    let mut q = fabric.open_queues(0, 0);
    let live = Rc::new(Cell::new(tasks));
    let mut futs: Vec<Option<Pin<Box<dyn Future<Output = ()>>>>> = (0..tasks)
        .map(|_| {
            let live = live.clone();
            let f: Pin<Box<dyn Future<Output = ()>>> = Box::pin(async move {
                for _ in 0..iters {
                    let r = LeanRead {
                        addr,
                        posted: false,
                    };
                    drop(r.await);
                }
                live.set(live.get() - 1);
            });
            Some(f)
        })
        .collect();
    LEAN.with(|l| {
        let mut l = l.borrow_mut();
        *l = Lean::default();
        l.results.resize(tasks as usize, None);
        l.run.extend(0..tasks as u32);
    });
    let (mut cq, mut run, mut wrs) = (Vec::<Completion>::with_capacity(64), Vec::new(), Vec::new());
    let t = Instant::now();
    while live.get() > 0 {
        loop {
            let n = q.poll_cq(&mut cq, 64);
            LEAN.with(|l| {
                let mut l = l.borrow_mut();
                for c in cq.drain(..) {
                    if let Ok(VerbOutput::Read(b)) = c.result {
                        l.results[c.wr_id as usize] = Some(b);
                    }
                    l.run.push(c.wr_id as u32);
                }
            });
            if n < 64 {
                break;
            }
        }
        LEAN.with(|l| std::mem::swap(&mut l.borrow_mut().run, &mut run));
        for k in run.drain(..) {
            // SAFETY: `RawWaker`'s contract is about what `data` points to, and
            // `VTABLE` never dereferences it: `clone` copies the integer into a
            // new `RawWaker` with the same vtable, `wake`/`wake_by_ref` push it
            // on the calling thread's `LEAN` run queue, `drop` does nothing. So
            // there is no pointee to keep alive or free, and all four are sound
            // from any thread (a waker woken on another thread would only queue
            // the index in that thread's `LEAN`, never touch this one's).
            let w = unsafe { Waker::from_raw(RawWaker::new(k as usize as *const (), &VTABLE)) };
            if let Some(f) = futs[k as usize].as_mut() {
                if f.as_mut().poll(&mut Context::from_waker(&w)).is_ready() {
                    futs[k as usize] = None;
                }
            }
        }
        LEAN.with(|l| std::mem::swap(&mut l.borrow_mut().wrs, &mut wrs));
        if !wrs.is_empty() {
            q.post_list(addr.ms(), &mut wrs);
        }
    }
    t.elapsed().as_nanos() as f64 / (tasks * iters) as f64
}

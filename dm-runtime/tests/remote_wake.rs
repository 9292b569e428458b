//! A million wakes of a task from another thread (a service thread, or
//! another core) leave memory flat (issue 31): nothing is recorded per wake
//! off a sim thread, the inbox's queue is reused, and a wake takes only its
//! target's mutex. Its own test binary, so the process's RSS is this test's.

use dm_runtime::{ExecConfig, Executor};
use dm_verbs::Fabric;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

mod common;

use common::loopback_fabric;

/// Resident set size of this process, bytes (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_million_wakes_from_another_thread_leave_memory_flat() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), f.num_ms(), ExecConfig::default());
    let waker: Arc<Mutex<Option<Waker>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let polls = Rc::new(Cell::new(0u64));
    let (w, st, p) = (waker.clone(), stop.clone(), polls.clone());
    let h = ex.spawn(std::future::poll_fn(move |cx| {
        *w.lock().unwrap() = Some(cx.waker().clone());
        p.set(p.get() + 1);
        if st.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }));
    ex.tick();
    let remote = waker.lock().unwrap().clone().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let waking = std::thread::spawn(move || {
        let mut before = 0;
        for i in 0..1_000_000u32 {
            if i == 10_000 {
                before = rss_bytes();
            }
            remote.wake_by_ref();
        }
        let after = rss_bytes();
        d.store(true, Ordering::Release);
        (before, after)
    });
    while !done.load(Ordering::Acquire) {
        ex.tick();
    }
    let (before, after) = waking.join().unwrap();
    stop.store(true, Ordering::Release);
    waker.lock().unwrap().take().unwrap().wake();
    while !h.is_finished() {
        ex.tick();
    }
    // The first poll, then at least one for the wakes (how many depends on
    // how the two threads interleave: repeated wakes before a drain are one).
    assert!(polls.get() >= 2, "the wakes reached the task");
    // Before the fix, the waking thread kept every woken executor id
    // (4 MB for a million) and took a process-wide mutex per wake.
    assert!(
        after.saturating_sub(before) < 1 << 20,
        "RSS grew by {} bytes over a million wakes",
        after - before
    );
}

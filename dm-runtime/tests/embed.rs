//! What a service that embeds the runtime relies on (issue 31, "safe to
//! embed"): a panicking task fails alone and its core goes on; a panic
//! caught around a tick leaves no dangling current core; a panic nobody can
//! observe still fails a run-to-completion driver. (Wakes from another
//! thread: `tests/remote_wake.rs`, alone in its process for an honest RSS.)

use dm_runtime::{read, yield_now, ExecConfig, Executor, JoinError};
use dm_verbs::ms::SUPERBLOCK_BYTES;
use dm_verbs::{Fabric, GlobalAddr};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

mod common;

use common::loopback_fabric;

fn addr() -> GlobalAddr {
    GlobalAddr::new(0, SUPERBLOCK_BYTES)
}

/// Ticks `ex` until every handle's task is finished.
fn run_until<Q: dm_verbs::Queues>(ex: &mut Executor<Q>, done: impl Fn() -> bool) {
    for _ in 0..1_000_000 {
        if done() {
            return;
        }
        ex.tick();
    }
    panic!("tasks never finished");
}

#[test]
fn a_panicking_task_fails_alone_and_its_core_goes_on() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), f.num_ms(), ExecConfig::default());
    let bad = ex.spawn(async {
        read(addr(), 8).await.unwrap();
        // A verb in flight when the task dies: its slot is abandoned and
        // freed by its completion.
        let mut in_flight = Box::pin(read(addr(), 64));
        assert!(futures::poll!(&mut in_flight).is_pending());
        let v: Option<u64> = std::hint::black_box(None);
        v.expect("no value in this task")
    });
    let good = ex.spawn(async {
        let mut n = 0;
        for _ in 0..10 {
            n += read(addr(), 8).await.unwrap().len();
            yield_now().await;
        }
        n
    });
    run_until(&mut ex, || bad.is_finished() && good.is_finished());
    let e: JoinError = bad.try_take().unwrap().unwrap_err();
    assert_eq!(e.message(), "no value in this task");
    assert_eq!(e.to_string(), "task panicked: no value in this task");
    assert_eq!(good.try_take().unwrap().unwrap(), 80);
    // The core still serves new work, and no verb is left behind.
    assert_eq!(
        ex.block_on(async { read(addr(), 8).await.unwrap().len() }),
        8
    );
    assert_eq!(ex.inflight(), 0);
}

/// Ready at once; panics when dropped (after the task finished, in the
/// executor's tick, outside the task's poll).
struct PanicOnDrop;

impl Future for PanicOnDrop {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("dropped");
    }
}

fn outside_a_task_panics() -> bool {
    catch_unwind(dm_runtime::now_ns).is_err()
}

#[test]
fn a_panic_caught_around_a_tick_leaves_no_current_core() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), f.num_ms(), ExecConfig::default());
    let _h = ex.spawn(PanicOnDrop);
    assert!(catch_unwind(AssertUnwindSafe(|| ex.tick())).is_err());
    // The tick's guard restored "no current core" while unwinding.
    assert!(outside_a_task_panics());
    drop(ex);
    assert!(outside_a_task_panics());
    // A new executor on this thread works as usual.
    let mut ex = Executor::new(f.open_queues(0, 1), f.num_ms(), ExecConfig::default());
    assert_eq!(
        ex.block_on(async { read(addr(), 8).await.unwrap().len() }),
        8
    );
}

#[test]
fn a_detached_task_panic_resumes_from_block_on() {
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), f.num_ms(), ExecConfig::default());
    drop(ex.spawn(async { panic!("detached") }));
    let r = catch_unwind(AssertUnwindSafe(|| {
        ex.block_on(async {
            for _ in 0..3 {
                yield_now().await;
            }
        })
    }));
    let payload = r.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"detached"));
}

#[test]
fn on_sim_a_joined_panic_is_an_error_and_a_detached_one_fails_the_run() {
    let mut rt = common::rt(common::small_cfg());
    let c = rt.add_core(0, 0);
    let kept = rt.spawn_on(c, async { panic!("kept") });
    let fine = rt.spawn_on(c, async {
        read(addr(), 8).await.unwrap();
        1
    });
    rt.run();
    assert_eq!(kept.try_take().unwrap().unwrap_err().message(), "kept");
    assert_eq!(fine.try_take().unwrap().unwrap(), 1);

    drop(rt.spawn_on(c, async { panic!("detached") }));
    let r = catch_unwind(AssertUnwindSafe(|| rt.run()));
    assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"detached"));
}

/// `unposted_mark` (what SMART's read delegation batches by): equal across
/// polls of a core that rang no doorbell, different once it rang one, and
/// `None` on sim's virtual clocks and outside a task.
#[test]
fn a_post_mark_moves_when_the_core_rings_and_sim_gives_none() {
    assert_eq!(dm_runtime::unposted_mark(), None, "outside a task");
    let f = loopback_fabric();
    let mut ex = Executor::new(f.open_queues(0, 0), f.num_ms(), ExecConfig::default());
    ex.block_on(async {
        let m = dm_runtime::unposted_mark().expect("a wall-clock core marks");
        yield_now().await;
        assert_eq!(dm_runtime::unposted_mark(), Some(m), "nothing was rung");
        read(addr(), 8).await.unwrap();
        assert_ne!(dm_runtime::unposted_mark(), Some(m), "the READ was rung");
    });
    let mut r = common::rt(common::small_cfg());
    let c = r.add_core(0, 0);
    let m = r.block_on(c, async { dm_runtime::unposted_mark() });
    assert_eq!(
        m,
        Some(None),
        "sim: a post takes effect at its virtual time"
    );
}

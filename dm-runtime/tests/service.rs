//! The embeddable runtime (`dm_runtime::service`): submissions from plain
//! threads, tokio and other cores; panics, back-pressure, shutdown;
//! parking and the wakes that end it, on loopback and on the simulator.
//!
//! Deterministic: no sleeps, no wall-clock assertions. Where a test waits
//! for a core to park it spins on `std::thread::yield_now` with a bound.

use dm_runtime::sync::SharedCell;
use dm_runtime::{faa, now_ns, read, write, Runtime, ServiceConfig, Spawner, SubmitError};
use dm_verbs::ms::SUPERBLOCK_BYTES;
use dm_verbs::sim::SimFabric;
use dm_verbs::GlobalAddr;
use futures::executor::block_on;
use std::sync::mpsc;
use std::sync::Arc;

mod common;

use common::{loopback_fabric, small_cfg};

/// What a service relies on to hold and share these types.
#[test]
fn the_handles_are_send_and_sync() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync + Clone>() {}
    send::<Runtime>();
    send_sync::<Spawner>();
    send::<dm_runtime::Submitted<u64>>();
    let rt = loopback(&[(0, 0)], ServiceConfig::default());
    let sp = rt.spawner(0);
    // The future of `spawn` is Send too (tokio::spawn needs it).
    fn send_val<T: Send>(_: &T) {}
    send_val(&sp.spawn(|| async { 1u8 }));
    assert_eq!(
        (rt.cores(), rt.core_ids(), sp.core()),
        (1, &[(0, 0)][..], 0)
    );
    rt.shutdown();
}

/// A superblock word of MS 0 that nothing else uses in these tests.
fn word() -> GlobalAddr {
    GlobalAddr::new(0, 3072)
}

/// An 8-byte slot of MS 1 for job `n` (past the superblock).
fn slot(n: u64) -> GlobalAddr {
    GlobalAddr::new(1, SUPERBLOCK_BYTES + 8 * n)
}

fn loopback(cores: &[(u16, u16)], cfg: ServiceConfig) -> Runtime {
    Runtime::start(Arc::new(loopback_fabric()), cores, cfg)
}

/// Spins (yielding the CPU) until `cond` holds; fails after a bound of
/// iterations, not of time.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..50_000_000u64 {
        if cond() {
            return;
        }
        std::thread::yield_now();
    }
    panic!("never happened: {what}");
}

/// The value of `word()`, read through `sp`.
fn read_word(sp: &Spawner) -> u64 {
    sp.block_on(|| async { u64::from_le_bytes(read(word(), 8).await.unwrap().try_into().unwrap()) })
        .unwrap()
}

/// A job whose `make` blocks its core thread until the test sends on the
/// returned channel; returns once the core is blocked in it.
fn block_core(sp: &Spawner) -> (mpsc::Sender<u64>, dm_runtime::Submitted<u64>) {
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<u64>();
    let sub = sp
        .try_spawn(move || {
            started_tx.send(()).unwrap();
            let v = release_rx.recv().unwrap();
            async move { v }
        })
        .unwrap();
    started_rx.recv().unwrap();
    (release_tx, sub)
}

#[test]
fn four_threads_submit_ten_thousand_verb_jobs_each() {
    const JOBS: u64 = 10_000;
    let rt = loopback(&[(0, 0), (0, 1)], ServiceConfig::default());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let sp = rt.spawner(t as usize % 2);
            std::thread::spawn(move || {
                // Submit all (waiting for room when a queue is full), then
                // collect: batches of jobs meet each drain.
                let subs: Vec<_> = (0..JOBS)
                    .map(|i| {
                        let n = t * JOBS + i;
                        block_on(sp.spawn(move || async move {
                            let old = faa(word(), 1).await.unwrap();
                            write(slot(n), n.to_le_bytes().to_vec()).await.unwrap();
                            let back = read(slot(n), 8).await.unwrap();
                            (old, u64::from_le_bytes(back.try_into().unwrap()))
                        }))
                        .unwrap()
                    })
                    .collect();
                subs.into_iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let (old, back) = block_on(s).unwrap();
                        assert_eq!(back, t * JOBS + i as u64, "the job read its own write");
                        old
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut olds: Vec<u64> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    olds.sort_unstable();
    assert_eq!(
        olds,
        (0..4 * JOBS).collect::<Vec<_>>(),
        "each FAA saw a distinct value"
    );
    assert_eq!(read_word(&rt.spawner(1)), 4 * JOBS);
    let stats = rt.shutdown();
    assert_eq!(stats.len(), 2);
    assert_eq!(stats.iter().map(|s| s.faa).sum::<u64>(), 4 * JOBS);
    assert_eq!(stats.iter().map(|s| s.write).sum::<u64>(), 4 * JOBS);
    assert_eq!(stats.iter().map(|s| s.read).sum::<u64>(), 4 * JOBS + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_tasks_submit_and_await() {
    let rt = loopback(&[(0, 0), (0, 1)], ServiceConfig::default());
    let handles: Vec<_> = (0..32u64)
        .map(|t| {
            let sp = rt.spawner(t as usize % 2);
            tokio::spawn(async move {
                let mut sum = 0;
                for j in 0..50u64 {
                    let sub = sp
                        .spawn(move || async move {
                            faa(word(), 1).await.unwrap();
                            t * 1_000 + j
                        })
                        .await
                        .unwrap();
                    sum += sub.await.unwrap();
                }
                sum
            })
        })
        .collect();
    for (t, h) in handles.into_iter().enumerate() {
        let t = t as u64;
        assert_eq!(h.await.unwrap(), 50 * t * 1_000 + (0..50).sum::<u64>());
    }
    let sp = rt.spawner(0);
    let total = sp
        .spawn(|| async { u64::from_le_bytes(read(word(), 8).await.unwrap().try_into().unwrap()) })
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(total, 32 * 50);
    // `shutdown` joins the core threads: off the tokio workers.
    tokio::task::spawn_blocking(move || rt.shutdown())
        .await
        .unwrap();
}

/// Ready at once; panics when dropped.
struct PanicOnDrop;

impl std::future::Future for PanicOnDrop {
    type Output = u64;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<u64> {
        std::task::Poll::Ready(1)
    }
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("dropped");
    }
}

#[test]
fn a_panicking_job_fails_alone_and_the_core_goes_on() {
    let rt = loopback(&[(0, 0)], ServiceConfig::default());
    let sp = rt.spawner(0);
    let e = sp
        .block_on(|| async {
            read(word(), 8).await.unwrap();
            let v: Option<u64> = std::hint::black_box(None);
            v.expect("no value in this job")
        })
        .unwrap_err();
    match &e {
        SubmitError::Panicked(j) => assert_eq!(j.message(), "no value in this job"),
        other => panic!("expected Panicked, got {other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "submitted job failed: task panicked: no value in this job"
    );
    // A panic in `make` (on the core thread, before any future) too.
    let e = sp
        .block_on(|| -> std::future::Ready<u64> { panic!("make failed") })
        .unwrap_err();
    assert!(
        matches!(&e, SubmitError::Panicked(j) if j.message() == "make failed"),
        "{e:?}"
    );
    // A future that panics when dropped, after its output was ready.
    let e = sp.block_on(|| PanicOnDrop).unwrap_err();
    assert!(
        matches!(&e, SubmitError::Panicked(j) if j.message() == "dropped"),
        "{e:?}"
    );
    // The next job on that core works.
    assert_eq!(
        sp.block_on(|| async { read(word(), 8).await.unwrap().len() })
            .unwrap(),
        8
    );
    let stats = rt.shutdown();
    assert_eq!(stats[0].read, 2);
}

#[test]
fn a_full_queue_fails_try_spawn_and_makes_spawn_wait() {
    let cfg = ServiceConfig {
        queue_depth: 1,
        ..Default::default()
    };
    let rt = loopback(&[(0, 0)], cfg);
    let sp = rt.spawner(0);
    let (release, blocker) = block_core(&sp);
    // The core thread is inside the first job's `make`: one job fits.
    let queued = sp.try_spawn(|| async { 2u64 }).unwrap();
    assert!(matches!(
        sp.try_spawn(|| async { 3u64 }),
        Err(SubmitError::QueueFull)
    ));
    let sp2 = sp.clone();
    let waiting = std::thread::spawn(move || {
        block_on(async { sp2.spawn(|| async { 4u64 }).await.unwrap().await.unwrap() })
    });
    release.send(1).unwrap();
    assert_eq!(block_on(blocker).unwrap(), 1);
    assert_eq!(block_on(queued).unwrap(), 2);
    assert_eq!(waiting.join().unwrap(), 4);
    rt.shutdown();
}

#[test]
fn shutdown_runs_queued_jobs_and_returns_stats() {
    let rt = loopback(&[(0, 0)], ServiceConfig::default());
    let sp = rt.spawner(0);
    let (release, blocker) = block_core(&sp);
    let subs: Vec<_> = (0..100u64)
        .map(|n| {
            sp.try_spawn(move || async move {
                write(slot(n), n.to_le_bytes().to_vec()).await.unwrap();
                let back = read(slot(n), 8).await.unwrap();
                u64::from_le_bytes(back.try_into().unwrap())
            })
            .unwrap()
        })
        .collect();
    let shutting = std::thread::spawn(move || rt.shutdown());
    // Intake stops first; the queued jobs still wait behind the blocker.
    wait_until("intake closed", || {
        matches!(sp.try_spawn(|| async {}), Err(SubmitError::ShutDown))
    });
    release.send(7).unwrap();
    let stats = shutting.join().unwrap();
    assert_eq!(block_on(blocker).unwrap(), 7);
    for (n, s) in subs.into_iter().enumerate() {
        assert_eq!(block_on(s).unwrap(), n as u64);
    }
    assert_eq!((stats[0].write, stats[0].read), (100, 100));
    assert!(stats[0].doorbells > 0);
    // After the shutdown every way in says so.
    assert!(matches!(
        sp.try_spawn(|| async {}),
        Err(SubmitError::ShutDown)
    ));
    assert!(matches!(
        block_on(sp.spawn(|| async {})),
        Err(SubmitError::ShutDown)
    ));
    assert!(matches!(
        sp.block_on(|| async {}),
        Err(SubmitError::ShutDown)
    ));
}

#[test]
fn an_idle_core_parks_and_a_submission_wakes_it() {
    // Default spin: an idle core polls for 50 µs, then parks.
    let rt = loopback(&[(0, 0)], ServiceConfig::default());
    let sp = rt.spawner(0);
    // Idle from the start: it parks before anything is submitted.
    wait_until("core 0 parked", || rt.parks()[0] >= 1);
    assert_eq!(
        sp.block_on(|| async { faa(word(), 1).await.unwrap() })
            .unwrap(),
        0
    );
    assert!(rt.wakes()[0] >= 1, "the submission unparked the core");
    // Only that submission could end the first park, so a second park
    // comes after the job: the core is asleep again, and nothing but the
    // next submission can wake it.
    wait_until("core 0 parked again", || rt.parks()[0] >= 2);
    let wakes = rt.wakes()[0];
    assert_eq!(
        sp.block_on(|| async { faa(word(), 1).await.unwrap() })
            .unwrap(),
        1
    );
    assert!(rt.wakes()[0] > wakes, "the submission unparked the core");
    rt.shutdown();
}

#[test]
fn a_cross_core_wake_unparks_a_core() {
    let cfg = ServiceConfig {
        spin_ns: 0,
        ..Default::default()
    };
    let rt = loopback(&[(0, 0), (0, 1)], cfg);
    let cell = Arc::new(SharedCell::<u64>::new());
    wait_until("core 0 parked", || rt.parks()[0] >= 1);
    let c = cell.clone();
    let waiting = rt
        .spawner(0)
        .try_spawn(move || async move {
            let v = c.get().await;
            // Verbs still work after the wake.
            faa(word(), 1).await.unwrap();
            v + 1
        })
        .unwrap();
    // The submission unparked core 0, which spawned and polled the task
    // (it waits on the cell, nothing in flight), then parked again.
    wait_until("core 0 parked again", || rt.parks()[0] >= 2);
    let wakes = rt.wakes()[0];
    let c = cell.clone();
    rt.spawner(1)
        .block_on(move || async move {
            let v = faa(word(), 10).await.unwrap();
            assert!(c.set(v + 41));
        })
        .unwrap();
    assert_eq!(block_on(waiting).unwrap(), 42);
    assert!(rt.wakes()[0] > wakes, "core 1's wake unparked core 0");
    assert_eq!(read_word(&rt.spawner(1)), 11);
    rt.shutdown();
}

#[test]
fn a_job_awaits_a_submission_to_another_core() {
    let rt = loopback(&[(0, 0), (0, 1)], ServiceConfig::default());
    let other = rt.spawner(1);
    let got = rt
        .spawner(0)
        .block_on(move || async move {
            let mut sum = 0;
            for i in 0..100u64 {
                let sub = other
                    .spawn(move || async move { faa(word(), 1).await.unwrap() + i })
                    .await
                    .unwrap();
                sum += sub.await.unwrap();
            }
            sum
        })
        .unwrap();
    assert_eq!(got, 2 * (0..100).sum::<u64>());
    rt.shutdown();
}

#[test]
fn block_on_on_a_core_thread_is_a_clear_panic() {
    let rt = loopback(&[(0, 0)], ServiceConfig::default());
    let sp = rt.spawner(0);
    let inner = sp.clone();
    let e = sp
        .block_on(move || {
            let r = inner.block_on(|| async { 1 });
            async move { r.is_ok() }
        })
        .unwrap_err();
    match e {
        SubmitError::Panicked(j) => assert!(j.message().contains("core thread"), "{}", j.message()),
        other => panic!("expected Panicked, got {other:?}"),
    }
    rt.shutdown();
}

#[test]
fn the_sim_runtime_answers_two_threads() {
    const JOBS: u64 = 1_000;
    let rt = Runtime::start_sim(
        || SimFabric::new(small_cfg()),
        &[(0, 0), (0, 1)],
        ServiceConfig::default(),
    );
    let threads: Vec<_> = (0..2usize)
        .map(|t| {
            let sp = rt.spawner(t);
            std::thread::spawn(move || {
                let subs: Vec<_> = (0..JOBS)
                    .map(|_| {
                        block_on(sp.spawn(|| async {
                            let old = faa(word(), 1).await.unwrap();
                            (old, now_ns())
                        }))
                        .unwrap()
                    })
                    .collect();
                subs.into_iter()
                    .map(|s| block_on(s).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<(u64, u64)> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert!(answers.iter().all(|&(_, t)| t > 0), "virtual time passed");
    let mut olds: Vec<u64> = answers.iter().map(|a| a.0).collect();
    olds.sort_unstable();
    assert_eq!(olds, (0..2 * JOBS).collect::<Vec<_>>());
    // The sim thread parks when idle, and a later submission wakes it.
    wait_until("the sim thread parked", || rt.parks()[0] > 0);
    assert_eq!(read_word(&rt.spawner(1)), 2 * JOBS);
    let stats = rt.shutdown();
    assert_eq!(stats.iter().map(|s| s.faa).sum::<u64>(), 2 * JOBS);
}

#[test]
fn a_sim_task_woken_from_another_thread_runs() {
    let cfg = ServiceConfig {
        spin_ns: 0,
        ..Default::default()
    };
    let rt = Runtime::start_sim(|| SimFabric::new(small_cfg()), &[(0, 0), (0, 1)], cfg);
    wait_until("the sim thread parked", || rt.parks()[0] >= 1);
    let (tx, rx) = futures::channel::oneshot::channel::<u64>();
    let waiting = rt
        .spawner(1)
        .try_spawn(move || async move { faa(word(), 1).await.unwrap() + rx.await.unwrap() })
        .unwrap();
    wait_until("the sim thread parked again", || rt.parks()[0] >= 2);
    let wakes = rt.wakes()[0];
    // Wakes the sim core's task from this (non-sim) thread.
    tx.send(5).unwrap();
    assert_eq!(block_on(waiting).unwrap(), 5);
    assert!(rt.wakes()[0] > wakes);
    rt.shutdown();
}

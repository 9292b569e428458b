//! [`Spawner`]: the `Send + Sync` handle that submits jobs to one core, and
//! [`Submitted`], the `Send` future of a job's output.
//!
//! A request allocates the job box (`make` and the reply's sender) and one
//! `futures::channel::oneshot` cell; on the core, the spawned task is the
//! executor's usual allocation.

use super::intake::{Intake, Job};
use super::{on_service_thread, SubmitError};
use crate::task::JoinError;
use futures::channel::oneshot;
use futures::FutureExt;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Submits jobs to one core of a [`super::Runtime`] from any thread
/// (`Clone + Send + Sync`; clones share the core's queue).
#[derive(Clone)]
pub struct Spawner {
    pub(super) intake: Arc<Intake>,
    pub(super) core: usize,
}

impl fmt::Debug for Spawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawner").field("core", &self.core).finish()
    }
}

/// The job of a submission, and the future of its output.
fn job<T, Fut, M>(make: M) -> (Job, Submitted<T>)
where
    M: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let (tx, rx) = oneshot::channel::<Result<T, JoinError>>();
    let job: Job = Box::new(move || match catch_unwind(AssertUnwindSafe(make)) {
        Ok(fut) => {
            // The future is dropped inside the caught poll (the inner
            // block owns it), so a panicking drop fails this job too:
            // the "redundant" block is what moves the drop inside.
            #[allow(clippy::redundant_async_block)]
            let task = async move {
                let r = AssertUnwindSafe(async move { fut.await })
                    .catch_unwind()
                    .await
                    .map_err(JoinError::from_panic);
                if let Err(e) = &r {
                    tracing::error!(error = %e, "dm-runtime: a submitted job panicked; its core goes on");
                }
                // The submitter may have dropped its `Submitted`.
                let _ = tx.send(r);
            };
            drop(crate::spawn(task));
        }
        Err(payload) => {
            let e = JoinError::from_panic(payload);
            tracing::error!(error = %e, "dm-runtime: a submitted job's make() panicked; its core goes on");
            let _ = tx.send(Err(e));
        }
    });
    (job, Submitted { rx })
}

impl Spawner {
    /// The index (into the runtime's `cores`) of the core this submits to.
    pub fn core(&self) -> usize {
        self.core
    }

    /// Submits a job: `make()` runs on the core thread, which spawns the
    /// future it returns there (so the future need not be `Send`; only
    /// `make` and the output are). The output comes through the returned
    /// [`Submitted`]. Errors: [`SubmitError::QueueFull`] when
    /// `queue_depth` jobs are waiting to be spawned on this core,
    /// [`SubmitError::ShutDown`] once the runtime's shutdown started.
    pub fn try_spawn<T, Fut, M>(&self, make: M) -> Result<Submitted<T>, SubmitError>
    where
        M: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let (job, sub) = job(make);
        match self.intake.push(job, None) {
            Ok(()) => Ok(sub),
            Err((e, _job)) => Err(e),
        }
    }

    /// As [`Spawner::try_spawn`], but waits for room instead of failing
    /// with `QueueFull`. Awaitable on any executor (tokio, a dm-runtime
    /// core, `futures::executor`); the future is `Send`. Fails only with
    /// [`SubmitError::ShutDown`].
    pub async fn spawn<T, Fut, M>(&self, make: M) -> Result<Submitted<T>, SubmitError>
    where
        M: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let (job, sub) = job(make);
        let mut job = Some(job);
        std::future::poll_fn(|cx| {
            let j = job
                .take()
                .expect("dm-runtime: Spawner::spawn polled after it finished");
            match self.intake.push(j, Some(cx.waker())) {
                Ok(()) => Poll::Ready(Ok(())),
                Err((SubmitError::QueueFull, j)) => {
                    job = Some(j);
                    Poll::Pending
                }
                Err((e, _job)) => Poll::Ready(Err(e)),
            }
        })
        .await?;
        Ok(sub)
    }

    /// Submits (waiting for room) and blocks the calling thread until the
    /// output is there. Errors as [`Submitted`] (`Panicked`, `ShutDown`).
    ///
    /// # Panics
    /// On a core thread of any [`super::Runtime`] or inside any dm-runtime
    /// task: blocking a core would stall its tasks, and deadlock if the job
    /// needs that core. There, `spawner.spawn(make).await?.await` instead.
    pub fn block_on<T, Fut, M>(&self, make: M) -> Result<T, SubmitError>
    where
        M: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        assert!(
            !on_service_thread() && crate::core::try_current(|_| ()).is_none(),
            "dm-runtime: Spawner::block_on called on a dm-runtime core thread; it would block \
             the core (a deadlock if the job needs it): await Spawner::spawn instead"
        );
        futures::executor::block_on(async { self.spawn(make).await?.await })
    }
}

/// The output of a submitted job: a `Send` future, awaitable on any
/// executor or thread (`futures::executor::block_on`, tokio, a dm-runtime
/// task on any core). `Err(Panicked)` if the job (its `make` or its
/// future) panicked, `Err(ShutDown)` if the job never ran (its core thread
/// died first).
pub struct Submitted<T> {
    rx: oneshot::Receiver<Result<T, JoinError>>,
}

impl<T> fmt::Debug for Submitted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submitted").finish_non_exhaustive()
    }
}

impl<T> Future for Submitted<T> {
    type Output = Result<T, SubmitError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|r| match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(SubmitError::Panicked(e)),
            Err(oneshot::Canceled) => Err(SubmitError::ShutDown),
        })
    }
}

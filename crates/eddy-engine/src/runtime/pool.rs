//! The worker pool jobs' tasks run on: a fixed number of worker threads
//! (one per core by default, `--workers N`) shared by every job of a
//! process, so that a server's thread count follows its cores, not the
//! nodes of the jobs it holds.
//!
//! ```text
//!  job A: task 0, task 2, task 4 ─┐
//!  job B: task 0                  ├─> run queue ─> worker 0 .. worker N-1
//!  job C: task 0, task 1          ┘
//! ```
//!
//! A task ([`crate::chains`]) is a future: it waits for input, for room
//! in a full channel downstream, or for a timer without holding a worker,
//! and gives its worker back after a bounded amount of work ([`Budget`]:
//! [`TASK_BUDGET`] messages or [`TASK_SLICE`] of time, whichever comes
//! first) so that the other tasks queued on it run: a busy job's tasks
//! take turns with every other task instead of holding the workers.
//! What blocks stays off the workers: each source reads on a thread of its
//! own, and writing a checkpoint or committing sinks hands the worker's
//! other tasks to another thread while it blocks (`block_in_place`).
//!
//! The pool is split between jobs, not tasks ([`super::share`]): at most
//! `⌈workers / busy jobs⌉` of a job's tasks are in a poll at once, so a
//! job of many tasks gets no more of the pool than a job of one.
//!
//! The pool is a tokio multi-thread runtime, which brings the run queue,
//! work stealing between workers, timers, and wakers for the channels.
//!
//! ```
//! use eddy_engine::runtime::WorkerPool;
//!
//! let pool = WorkerPool::new(2).unwrap();
//! assert_eq!(pool.workers(), 2);
//! // Jobs given `JobConfig { pool: Some(pool.clone()), .. }` share its two
//! // worker threads; without one they share `WorkerPool::shared()`.
//! ```

use std::future::Future;
use std::sync::{Arc, OnceLock};

use super::share::{Fairness, JobShare, Shares};
use crate::error::{EngineError, Result};

/// Messages a task handles before it lets the other tasks on its worker
/// run.
pub(crate) const TASK_BUDGET: usize = 64;

/// Time a task works before it lets the other tasks on its worker run.
pub(crate) const TASK_SLICE: std::time::Duration = std::time::Duration::from_millis(2);

/// A task's share of its worker: counts what it handled since it last
/// yielded, and yields once that passes [`TASK_BUDGET`] messages or
/// [`TASK_SLICE`].
pub(crate) struct Budget {
    handled: usize,
    since: std::time::Instant,
}

impl Budget {
    pub fn new() -> Self {
        Self {
            handled: 0,
            since: std::time::Instant::now(),
        }
    }

    /// One message handled; yields the worker when the share is spent.
    pub async fn spend(&mut self) {
        self.handled += 1;
        if self.handled >= TASK_BUDGET || self.since.elapsed() >= TASK_SLICE {
            super::share::yielding_with_work();
            tokio::task::yield_now().await;
            self.handled = 0;
            self.since = std::time::Instant::now();
        }
    }
}

/// A fixed set of worker threads that run the tasks of any number of jobs.
#[derive(Debug)]
pub struct WorkerPool {
    runtime: Option<tokio::runtime::Runtime>,
    workers: usize,
    shares: Arc<Shares>,
}

impl WorkerPool {
    /// A pool of `workers` threads (at least one), named `eddy-worker`,
    /// split evenly between busy jobs ([`Fairness::PerJob`]).
    pub fn new(workers: usize) -> Result<Arc<Self>> {
        Self::with_fairness(workers, Fairness::PerJob)
    }

    /// A pool of `workers` threads split as `fairness` says
    /// ([`super::share`]).
    pub fn with_fairness(workers: usize, fairness: Fairness) -> Result<Arc<Self>> {
        let workers = workers.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("eddy-worker")
            .enable_time()
            .build()
            .map_err(|e| EngineError::Graph(format!("cannot start the worker pool: {e}")))?;
        Ok(Arc::new(Self {
            runtime: Some(runtime),
            workers,
            shares: Shares::new(workers, fairness),
        }))
    }

    /// The process's pool for jobs not given one, started with the first
    /// such job: `EDDY_WORKERS` workers (what `--workers` reads), or one
    /// per core.
    pub fn shared() -> Result<Arc<Self>> {
        static SHARED: OnceLock<Arc<WorkerPool>> = OnceLock::new();
        if let Some(pool) = SHARED.get() {
            return Ok(pool.clone());
        }
        let workers = std::env::var("EDDY_WORKERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(default_workers);
        let pool = Self::new(workers)?;
        Ok(SHARED.get_or_init(|| pool).clone())
    }

    /// How many worker threads run tasks.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// A new job's share of the pool: its tasks run through it. Jobs
    /// given the same share ([`super::JobConfig::share`]) are one job to
    /// the pool.
    pub fn job_share(&self) -> Arc<JobShare> {
        JobShare::new(self.shares.clone())
    }

    /// Jobs busy on the pool now (see [`super::share`]).
    pub fn busy_jobs(&self) -> usize {
        self.shares.busy_jobs()
    }

    /// Starts `task` on the pool.
    pub(crate) fn spawn<F>(&self, task: F) -> Result<tokio::task::JoinHandle<()>>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| EngineError::Graph("the worker pool has shut down".into()))?;
        Ok(runtime.spawn(task))
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        // Dropped from inside an async context (a server's handler, or
        // the last task of its own last job), a runtime must not wait for
        // its workers: it is shut down from a thread of its own.
        if let Some(runtime) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::Builder::new()
                    .name("eddy-pool-end".into())
                    .spawn(move || runtime.shutdown_background());
            } else {
                runtime.shutdown_background();
            }
        }
    }
}

/// Waits until `deadline`, or for ever when there is none: the timer arm
/// of a task's wait, so that a task with nothing due is never woken by it.
pub(crate) async fn until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// The default number of workers: the machine's cores.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_runs_many_more_tasks_than_it_has_workers() {
        let pool = WorkerPool::new(2).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let tx = tx.clone();
                pool.spawn(async move {
                    tokio::task::yield_now().await;
                    tx.send((i, std::thread::current().name().map(String::from)))
                        .unwrap();
                })
                .unwrap()
            })
            .collect();
        for handle in handles {
            futures::executor::block_on(handle).unwrap();
        }
        drop(tx);
        let ran: Vec<_> = rx.iter().collect();
        assert_eq!(ran.len(), 200);
        assert!(ran
            .iter()
            .all(|(_, name)| name.as_deref() == Some("eddy-worker")));
    }

    #[test]
    fn a_pool_dropped_inside_an_async_context_does_not_panic() {
        let outer = WorkerPool::new(1).unwrap();
        let inner = WorkerPool::new(1).unwrap();
        let done = outer
            .spawn(async move {
                drop(inner);
            })
            .unwrap();
        futures::executor::block_on(done).unwrap();
    }
}

//! Each job's share of the worker pool: the pool is split between jobs,
//! not between tasks, so that a job of thirty tasks gets no more of it
//! than a job of one.
//!
//! In: a job's task futures ([`JobShare::run`]). Out: the same futures,
//! let into a poll only while their job runs on fewer workers than its
//! share, and the pool time each job used ([`JobShare::pool_time`]).
//!
//! ```text
//!   job A  a1 a2 a3 .. a30 ─┐ at most ⌈workers / busy jobs⌉ of A's tasks
//!                           ├─> in a poll at once; the rest wait in A's
//!   job B  b1 ──────────────┘ queue, first come first let in
//! ```
//!
//! A task *wants a worker* while it is in a poll, waits to be let in, or
//! gave its worker up with work left ([`super::pool::Budget`]); a task
//! waiting for input, for room downstream or for a timer does not. A job
//! is *busy* while a task of it wants a worker. While no more tasks want a
//! worker than there are workers, nothing is limited; nor is a job none of
//! whose tasks has work left over from a turn (a light job, whose tasks are
//! through in one turn each): a server of many light jobs pays no
//! queueing. Past that, a busy job's share is `⌈workers / busy jobs⌉`, at
//! least one:
//!
//! - a job alone, or beside idle ones, may use every worker;
//! - two busy jobs on two workers get one each, whatever their task
//!   counts; three busy jobs of one task each on four workers still use
//!   them all (work conserving);
//! - among tasks let in, the runtime's run queue takes turns, and a task
//!   gives its worker up after a bounded slice of work, so busy jobs get
//!   about equal time, and a waiting task is let in within a slice.
//!
//! Nothing waits for anything but its own job's slots, and a slot is held
//! only within one poll, so a job can always make progress with one task.
//! [`Fairness::PerTask`] turns the shares off (every task runs whenever
//! the runtime polls it), which `eddy serve --pool-share task` keeps for
//! comparison.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How a worker pool is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fairness {
    /// Between jobs: each busy job gets an equal share of the workers.
    #[default]
    PerJob,
    /// Between tasks: every task runs whenever the runtime polls it, so a
    /// job of many tasks gets more turns than a job of few.
    PerTask,
}

impl std::str::FromStr for Fairness {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "job" => Ok(Self::PerJob),
            "task" => Ok(Self::PerTask),
            other => Err(format!("unknown pool share {other:?}: job or task")),
        }
    }
}

/// What every job's share is computed from: the pool's workers and how
/// many jobs are busy now.
#[derive(Debug)]
pub(crate) struct Shares {
    workers: usize,
    fairness: Fairness,
    busy_jobs: AtomicUsize,
    /// Tasks of every job in a poll, waiting to be let in, or yielded
    /// with work left.
    demand: AtomicUsize,
}

impl Shares {
    pub fn new(workers: usize, fairness: Fairness) -> Arc<Self> {
        Arc::new(Self {
            workers: workers.max(1),
            fairness,
            busy_jobs: AtomicUsize::new(0),
            demand: AtomicUsize::new(0),
        })
    }

    /// Jobs busy now.
    pub fn busy_jobs(&self) -> usize {
        self.busy_jobs.load(Ordering::Relaxed)
    }

    /// How many of one job's tasks may be in a poll at once now: no limit
    /// while the tasks wanting a worker are no more than the workers.
    fn share(&self) -> usize {
        match self.fairness {
            Fairness::PerJob if self.demand.load(Ordering::Relaxed) > self.workers => {
                self.workers.div_ceil(self.busy_jobs().max(1)).max(1)
            }
            _ => usize::MAX,
        }
    }
}

thread_local! {
    /// Set by a task giving its worker up with work left; read by the
    /// share around the poll that did.
    static YIELDED_WITH_WORK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the poll in progress as giving its worker up with work left, so
/// that its job stays busy until the task's next turn.
pub(crate) fn yielding_with_work() {
    YIELDED_WITH_WORK.with(|y| y.set(true));
}

/// One job's share of the pool. See the module docs.
#[derive(Debug)]
pub struct JobShare {
    shares: Arc<Shares>,
    state: Mutex<ShareState>,
    used_ns: AtomicU64,
    next_task: AtomicU64,
}

#[derive(Debug, Default)]
struct ShareState {
    /// Tasks in a poll now.
    running: usize,
    /// Tasks in a poll, waiting to be let in, or yielded with work left.
    demand: usize,
    /// Tasks yielded with work left (or waiting to be let in after such
    /// a yield): while there are none, the job is light and nothing of it
    /// waits.
    yielded: usize,
    /// Tasks waiting to be let in, first come first.
    waiting: VecDeque<(u64, Waker)>,
}

impl JobShare {
    pub(crate) fn new(shares: Arc<Shares>) -> Arc<Self> {
        Arc::new(Self {
            shares,
            state: Mutex::new(ShareState::default()),
            used_ns: AtomicU64::new(0),
            next_task: AtomicU64::new(0),
        })
    }

    /// Time the job's tasks spent in polls on the pool's workers.
    pub fn pool_time(&self) -> Duration {
        Duration::from_nanos(self.used_ns.load(Ordering::Relaxed))
    }

    /// `task`, run within this job's share.
    pub(crate) fn run<F: Future>(self: &Arc<Self>, task: F) -> Shared<F> {
        Shared {
            task: Box::pin(task),
            share: self.clone(),
            id: self.next_task.fetch_add(1, Ordering::Relaxed),
            in_demand: false,
            yielded: false,
            queued: false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ShareState> {
        // The state is counters and wakers, whole after any panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn add_demand(&self, state: &mut ShareState) {
        self.shares.demand.fetch_add(1, Ordering::Relaxed);
        state.demand += 1;
        if state.demand == 1 {
            self.shares.busy_jobs.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn drop_demand(&self, state: &mut ShareState) {
        self.shares.demand.fetch_sub(1, Ordering::Relaxed);
        state.demand -= 1;
        if state.demand == 0 {
            self.shares.busy_jobs.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Lets as many waiting tasks in as the share has room for.
    fn wake_waiting(&self, state: &mut ShareState) {
        let room = self.shares.share().saturating_sub(state.running);
        for _ in 0..room {
            match state.waiting.pop_front() {
                Some((_, waker)) => waker.wake(),
                None => break,
            }
        }
    }
}

/// A task run within its job's share ([`JobShare::run`]).
pub(crate) struct Shared<F> {
    /// Boxed once, so that the wrapper is `Unpin`.
    task: Pin<Box<F>>,
    share: Arc<JobShare>,
    id: u64,
    /// Counted in the job's demand.
    in_demand: bool,
    /// Counted in the job's yielded tasks.
    yielded: bool,
    /// In the job's waiting queue (or woken from it, not yet polled).
    queued: bool,
}

impl<F: Future> Future for Shared<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let share = this.share.clone();
        {
            let mut state = share.lock();
            if !this.in_demand {
                share.add_demand(&mut state);
                this.in_demand = true;
            }
            if this.queued {
                let id = this.id;
                state.waiting.retain(|(waiting, _)| *waiting != id);
                this.queued = false;
            }
            // Only a job with work left over from a turn (a busy job) is
            // held to its share: a light job's tasks, through in one turn
            // each, never queue behind each other.
            if state.yielded > 0 && state.running >= share.shares.share() {
                state.waiting.push_back((this.id, cx.waker().clone()));
                this.queued = true;
                return Poll::Pending;
            }
            if this.yielded {
                state.yielded -= 1;
                this.yielded = false;
            }
            state.running += 1;
        }
        YIELDED_WITH_WORK.with(|y| y.set(false));
        let started = Instant::now();
        // Let go of the slot even when the poll unwinds.
        let mut slot = Slot {
            share: &share,
            after: After::Unwound,
        };
        let result = this.task.as_mut().poll(cx);
        let used = started.elapsed().as_nanos() as u64;
        share.used_ns.fetch_add(used, Ordering::Relaxed);
        if result.is_pending() && YIELDED_WITH_WORK.with(|y| y.replace(false)) {
            slot.after = After::Yielded;
            this.yielded = true;
        } else {
            slot.after = After::Idle;
            this.in_demand = false;
        }
        drop(slot);
        result
    }
}

/// How a poll ended, for its slot to account.
enum After {
    /// It yielded with work left: the task still wants a worker.
    Yielded,
    /// It ended, or waits for something: the task wants no worker.
    Idle,
    /// It unwound: the task is dropped next, which accounts for it.
    Unwound,
}

/// A slot of a job's share held within one poll.
struct Slot<'a> {
    share: &'a JobShare,
    after: After,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = self.share.lock();
        state.running -= 1;
        match self.after {
            After::Yielded => state.yielded += 1,
            After::Idle => self.share.drop_demand(&mut state),
            After::Unwound => {}
        }
        self.share.wake_waiting(&mut state);
    }
}

impl<F> Drop for Shared<F> {
    fn drop(&mut self) {
        let this = self;
        if !this.in_demand && !this.queued && !this.yielded {
            return;
        }
        let share = this.share.clone();
        let mut state = share.lock();
        if this.queued {
            let id = this.id;
            state.waiting.retain(|(waiting, _)| *waiting != id);
        }
        if this.in_demand {
            share.drop_demand(&mut state);
        }
        if this.yielded {
            state.yielded -= 1;
        }
        // A waiter this task was woken in place of gets its turn.
        share.wake_waiting(&mut state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A future that spends 200 µs in each poll and yields with work left
    /// until `left` polls are done or `stop` is set.
    struct Busy {
        left: usize,
        stop: Arc<AtomicBool>,
        inside: Arc<AtomicUsize>,
        most_inside: Arc<AtomicUsize>,
    }

    impl Busy {
        fn new(
            left: usize,
            stop: &Arc<AtomicBool>,
            inside: &Arc<AtomicUsize>,
            most: &Arc<AtomicUsize>,
        ) -> Self {
            Self {
                left,
                stop: stop.clone(),
                inside: inside.clone(),
                most_inside: most.clone(),
            }
        }
    }

    impl Future for Busy {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_inside.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_micros(200));
            self.inside.fetch_sub(1, Ordering::SeqCst);
            if self.left == 0 || self.stop.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            self.left -= 1;
            yielding_with_work();
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    fn runtime(workers: usize) -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .build()
            .unwrap()
    }

    /// A job of eight busy tasks beside a job of one on two workers for
    /// 300 ms: the pool time of each.
    fn big_beside_small(fairness: Fairness) -> (Duration, Duration) {
        let runtime = runtime(2);
        let shares = Shares::new(2, fairness);
        let (big, small) = (JobShare::new(shares.clone()), JobShare::new(shares.clone()));
        let stop = Arc::new(AtomicBool::new(false));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut handles =
            vec![runtime.spawn(small.run(Busy::new(usize::MAX, &stop, &inside, &most)))];
        for _ in 0..8 {
            handles.push(runtime.spawn(big.run(Busy::new(usize::MAX, &stop, &inside, &most))));
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::SeqCst);
        for handle in handles {
            futures::executor::block_on(handle).unwrap();
        }
        assert_eq!(shares.busy_jobs(), 0, "every job idle at the end");
        (big.pool_time(), small.pool_time())
    }

    #[test]
    fn a_job_of_many_tasks_gets_no_more_of_the_pool_than_a_job_of_one() {
        // Split between jobs: a worker each.
        let (big, small) = big_beside_small(Fairness::PerJob);
        let ratio = big.as_secs_f64() / small.as_secs_f64();
        assert!((0.5..2.0).contains(&ratio), "{big:?} against {small:?}");
        // Split between tasks: eight turns for the big job to one.
        let (big, small) = big_beside_small(Fairness::PerTask);
        let ratio = big.as_secs_f64() / small.as_secs_f64();
        assert!(ratio > 3.0, "{big:?} against {small:?}");
    }

    #[test]
    fn a_job_alone_uses_every_worker() {
        let runtime = runtime(4);
        let shares = Shares::new(4, Fairness::PerJob);
        let job = JobShare::new(shares.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..8)
            .map(|_| runtime.spawn(job.run(Busy::new(40, &stop, &inside, &most))))
            .collect();
        for handle in handles {
            futures::executor::block_on(handle).unwrap();
        }
        assert!(most.load(Ordering::SeqCst) >= 3, "{most:?}");
        assert!(job.pool_time() >= Duration::from_millis(8 * 41 / 5));
    }

    #[test]
    fn a_task_waiting_for_input_leaves_its_job_idle() {
        let runtime = runtime(2);
        let shares = Shares::new(2, Fairness::PerJob);
        let job = JobShare::new(shares.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let started = Arc::new(AtomicBool::new(false));
        let seen = started.clone();
        let handle = runtime.spawn(job.run(async move {
            seen.store(true, Ordering::SeqCst);
            rx.await.unwrap();
        }));
        while !started.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(shares.busy_jobs(), 0);
        tx.send(()).unwrap();
        futures::executor::block_on(handle).unwrap();
        assert_eq!(shares.busy_jobs(), 0);
    }

    #[test]
    fn a_task_dropped_while_waiting_gives_its_place_up() {
        let shares = Shares::new(1, Fairness::PerJob);
        let job = JobShare::new(shares.clone());
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // A task that gave its worker up with work left makes the job busy.
        let mut busy = Box::pin(job.run(std::future::poll_fn(|_| {
            yielding_with_work();
            Poll::<()>::Pending
        })));
        assert!(busy.as_mut().poll(&mut cx).is_pending());
        // One task in a poll holds the only slot, so another must wait.
        let mut waiting = Box::pin(job.run(std::future::ready(())));
        let mut holding = Box::pin(job.run(std::future::poll_fn(|cx| {
            assert!(waiting.as_mut().poll(cx).is_pending());
            assert_eq!(job.lock().waiting.len(), 1);
            drop(std::mem::replace(
                &mut waiting,
                Box::pin(job.run(std::future::ready(()))),
            ));
            Poll::Ready(())
        })));
        assert!(holding.as_mut().poll(&mut cx).is_ready());
        {
            let state = job.lock();
            assert!(state.waiting.is_empty());
            assert_eq!((state.running, state.demand, state.yielded), (0, 1, 1));
        }
        drop(busy);
        let state = job.lock();
        assert_eq!((state.running, state.demand, state.yielded), (0, 0, 0));
        assert_eq!(shares.busy_jobs(), 0);
    }

    #[test]
    fn a_light_job_never_waits_for_its_share() {
        let shares = Shares::new(1, Fairness::PerJob);
        let job = JobShare::new(shares.clone());
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // No task of the job has work left over from a turn: a second
        // task is let in beside the one in a poll.
        let mut inner = Box::pin(job.run(std::future::ready(())));
        let mut outer = Box::pin(job.run(std::future::poll_fn(|cx| {
            assert!(inner.as_mut().poll(cx).is_ready());
            Poll::Ready(())
        })));
        assert!(outer.as_mut().poll(&mut cx).is_ready());
        assert_eq!(shares.busy_jobs(), 0);
    }
}

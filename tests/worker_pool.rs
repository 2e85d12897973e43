//! The worker pool: jobs' tasks share a fixed set of worker threads.
//!
//! - An idle job is not woken at all: a job reading a silent stdin, with
//!   no timer due, makes no context switch for seconds, and still answers
//!   the row that then comes.
//! - Many jobs on a pool of two workers each give the output they give
//!   alone, and a busy job does not hold back a small one beside it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eddy_cli::job;
use eddy_connectors::stdout::StdoutTarget;
use eddy_connectors::ConnectorConfig;
use eddy_engine::parallel::Parallelism;
use eddy_engine::runtime::{Fairness, JobConfig, JobState, WorkerPool};
use eddy_sql::SqlFile;

/// Context switches of every thread of a process so far (Linux).
fn context_switches(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status =
            std::fs::read_to_string(task.unwrap().path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

#[test]
fn an_idle_job_is_never_woken_and_still_answers_the_next_row() {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("job.sql");
    std::fs::write(
        &sql,
        "CREATE TABLE clicks (user_id VARCHAR, ts BIGINT,
           event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
           WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND)
         WITH (connector = 'stdin');
         SELECT user_id, window_start, count(*) AS n
         FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
         GROUP BY user_id, window_start, window_end;",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["run", "--quiet", "--workers", "2", "--parallelism", "2"])
        .arg(&sql)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(1500));
    let before = context_switches(pid);
    std::thread::sleep(Duration::from_secs(3));
    let woken = context_switches(pid) - before;
    // Nothing to read, no timer due: no thread of the job runs. (A
    // thread-per-node runtime polling every 20-50 ms made hundreds.)
    assert!(
        woken <= 10,
        "an idle job's threads were switched in {woken} times in 3 s"
    );
    let mut stdin = child.stdin.take().unwrap();
    for (user, ts) in [("a", 1_000), ("a", 1_500), ("b", 1_200), ("a", 5_000)] {
        writeln!(stdin, r#"{{"user_id": "{user}", "ts": {ts}}}"#).unwrap();
    }
    drop(stdin);
    let mut lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    assert!(child.wait().unwrap().success());
    lines.sort();
    let counts: Vec<(String, i64)> = lines
        .iter()
        .map(|line| {
            let json = line.split_once("> ").map_or(line.as_str(), |(_, j)| j);
            let row: serde_json::Value = serde_json::from_str(json).unwrap();
            (
                row["user_id"].as_str().unwrap().to_string(),
                row["n"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [("a".into(), 2), ("a".into(), 1), ("b".into(), 1)],
        "{lines:?}"
    );
}

/// A tumbling count over `rows` generated payments, printed to a buffer.
fn window_job(rows: u64) -> Vec<SqlFile> {
    vec![SqlFile {
        name: "window.sql".into(),
        text: format!(
            "CREATE TABLE payments (
               payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE,
               payment_ts BIGINT NOT NULL, method VARCHAR,
               event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
               WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
             WITH (connector = 'generator', stream = 'payments', seed = '7', rate = '500', count = '{rows}');
             SELECT method, window_start, count(*) AS n, sum(paid_amount) AS total
             FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
             GROUP BY method, window_start, window_end;"
        ),
    }]
}

/// Starts `files` on `pool` at parallelism 2; its output buffer and
/// handle.
fn start_on(
    files: &[SqlFile],
    pool: &Arc<WorkerPool>,
) -> (Arc<Mutex<Vec<u8>>>, eddy_engine::runtime::JobHandle) {
    start_at(files, pool, 2)
}

/// Starts `files` on `pool` at `parallelism`; its output buffer and
/// handle.
fn start_at(
    files: &[SqlFile],
    pool: &Arc<WorkerPool>,
    parallelism: usize,
) -> (Arc<Mutex<Vec<u8>>>, eddy_engine::runtime::JobHandle) {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let config = ConnectorConfig {
        settings: eddy_connectors::settings::ConnectorSettings::default()
            .with(StdoutTarget::Buffer(buffer.clone())),
        ..ConnectorConfig::default()
    };
    let compiled = job::compile_files(files, &BTreeMap::new()).unwrap();
    let handle = job::start_compiled(
        compiled,
        config,
        &JobConfig {
            parallelism: Parallelism::Fixed(parallelism),
            pool: Some(pool.clone()),
            ..JobConfig::default()
        },
    )
    .unwrap();
    (buffer, handle)
}

fn sorted_lines(buffer: &Mutex<Vec<u8>>) -> Vec<String> {
    let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
    common::sorted(text.lines().map(str::to_string).collect())
}

#[test]
fn forty_jobs_on_two_workers_each_give_what_they_give_alone() {
    let _alone_here = LOADS_THE_WORKERS.lock().unwrap_or_else(|e| e.into_inner());
    let files = window_job(20_000);
    let alone = {
        let pool = WorkerPool::new(2).unwrap();
        let (buffer, handle) = start_on(&files, &pool);
        assert_eq!(handle.wait().unwrap().state, JobState::Finished);
        sorted_lines(&buffer)
    };
    assert!(alone.len() > 5, "{} lines", alone.len());
    let pool = WorkerPool::new(2).unwrap();
    let jobs: Vec<_> = (0..40).map(|_| start_on(&files, &pool)).collect();
    for (i, (buffer, handle)) in jobs.into_iter().enumerate() {
        assert_eq!(handle.wait().unwrap().state, JobState::Finished, "job {i}");
        assert_eq!(sorted_lines(&buffer), alone, "job {i}");
    }
}

#[test]
fn busy_jobs_do_not_hold_back_a_small_one_on_the_same_workers() {
    let _alone_here = LOADS_THE_WORKERS.lock().unwrap_or_else(|e| e.into_inner());
    let pool = WorkerPool::new(2).unwrap();
    let small = window_job(2_000);
    // Four jobs that would keep both workers busy for many seconds.
    let busy: Vec<_> = (0..4)
        .map(|_| start_on(&window_job(20_000_000), &pool))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (buffer, handle) = start_on(&small, &pool);
    assert_eq!(handle.wait().unwrap().state, JobState::Finished);
    let beside_busy = started.elapsed();
    let still_busy = busy
        .iter()
        .filter(|(_, h)| h.wait_timeout(Duration::ZERO).is_none())
        .count();
    for (_, handle) in &busy {
        handle.cancel();
    }
    assert_eq!(still_busy, 4, "the busy jobs ended before the small one");
    assert!(!sorted_lines(&buffer).is_empty());
    // Tasks give their worker up every millisecond or so of work, so the
    // small job runs between the busy ones' batches, not after them.
    assert!(
        beside_busy < Duration::from_secs(5),
        "the small job took {beside_busy:?} beside four busy ones"
    );
}

/// A job whose work is on the pool, not in its source: `queries`
/// queries over one generated stream, each counting every payment in 20
/// sliding windows of its own key, the counts discarded. Each query is a
/// task of its own, all busy at once.
fn sliding_job(queries: usize) -> Vec<SqlFile> {
    let mut text = "CREATE TABLE payments (
           payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE,
           payment_ts BIGINT NOT NULL, method VARCHAR,
           event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
           WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
         WITH (connector = 'generator', stream = 'payments', seed = '7', rate = '500', count = '100000000');"
        .to_string();
    for q in 0..queries {
        text.push_str(&format!(
            "CREATE TABLE counts_{q} (payment_id VARCHAR, window_start TIMESTAMP, n BIGINT)
             WITH (connector = 'blackhole');
             INSERT INTO counts_{q}
             SELECT payment_id, window_start, count(*) AS n
             FROM TABLE(HOP(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND, INTERVAL '20' SECOND))
             GROUP BY payment_id, window_start, window_end;"
        ));
    }
    vec![SqlFile {
        name: "sliding.sql".into(),
        text,
    }]
}

/// The pool time a busy job of one query gets over three seconds on two
/// workers split by `fairness`, beside a busy job of six queries when
/// `beside_many`; and the other job's.
fn one_query_job(fairness: Fairness, beside_many: bool) -> (Duration, Duration) {
    let pool = WorkerPool::with_fairness(2, fairness).unwrap();
    let (_, one) = start_at(&sliding_job(1), &pool, 1);
    let many = beside_many.then(|| start_at(&sliding_job(6), &pool, 1).1);
    std::thread::sleep(Duration::from_secs(3));
    let one_time = one.pool_time();
    let many_time = many.as_ref().map_or(Duration::ZERO, |m| m.pool_time());
    for handle in std::iter::once(&one).chain(many.as_ref()) {
        assert_eq!(handle.state(), JobState::Running, "the job ended early");
        handle.cancel();
        handle.wait().ok();
    }
    (one_time, many_time)
}

/// The tests that load both workers run one at a time, so that each
/// measures its own jobs.
static LOADS_THE_WORKERS: Mutex<()> = Mutex::new(());

#[test]
fn a_job_of_many_tasks_gets_no_more_of_the_pool_than_a_job_of_one() {
    let _alone_here = LOADS_THE_WORKERS.lock().unwrap_or_else(|e| e.into_inner());
    let (alone, _) = one_query_job(Fairness::PerJob, false);
    // Split between jobs (the default), the job of one query still gets
    // about the time it takes alone, a worker at most: the job of six
    // gets the rest.
    let (per_job, many) = one_query_job(Fairness::PerJob, true);
    eprintln!("alone {alone:?}; per job {per_job:?} beside {many:?}");
    assert!(
        per_job.as_secs_f64() >= 0.75 * alone.as_secs_f64(),
        "beside a job of six queries, the job of one had {per_job:?} of the pool; alone, {alone:?}"
    );
    // Split between tasks, the job of six takes six turns to its one.
    let (per_task, many) = one_query_job(Fairness::PerTask, true);
    eprintln!("per task {per_task:?} beside {many:?}");
    assert!(
        per_task.as_secs_f64() < 0.8 * per_job.as_secs_f64(),
        "split between tasks, the job of one query had {per_task:?}, split between jobs {per_job:?}"
    );
}

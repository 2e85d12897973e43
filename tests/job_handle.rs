//! The job handle as every front end uses it: state, live metrics, stop,
//! cancel, wait; and the checks every front end shares.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use eddy_cli::job;
use eddy_connectors::{ConnectorConfig, OutputFormat};
use eddy_engine::checkpoint::CheckpointConfig;
use eddy_engine::runtime::{JobConfig, JobHandle, JobState};
use eddy_engine::EngineError;
use eddy_sql::SqlFile;

fn sql(text: &str) -> Vec<SqlFile> {
    vec![SqlFile {
        name: "job.sql".into(),
        text: text.into(),
    }]
}

const GENERATED: &str = "
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = 'generator', stream = 'orders', count = '50000000', batch_size = '1000');
CREATE TABLE copy (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, event_time TIMESTAMP)
  WITH (connector = 'parquet', path = 'unused');
INSERT INTO copy SELECT order_id, customer_id, order_amount, event_time FROM orders;
";

const FROM_PIPE: &str = "
CREATE TABLE t (k VARCHAR, ts BIGINT) WITH (connector = 'file', path = 'unused');
CREATE TABLE copy (k VARCHAR, ts BIGINT) WITH (connector = 'ndjson', path = 'unused');
INSERT INTO copy SELECT k, ts FROM t;
";

/// A named pipe with a writer that keeps it open and silent while the
/// returned guard lives.
struct SilentPipe {
    _done: std::sync::mpsc::Sender<()>,
}

fn silent_pipe(path: &Path) -> SilentPipe {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _writer = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        let _ = wait.recv();
    });
    SilentPipe { _done: done }
}

/// Waits until `condition` holds, failing after `within` with `what`.
fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < within,
            "{what} did not happen within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Rows the job's source `orders` has read so far.
fn orders_read(handle: &JobHandle) -> u64 {
    handle
        .metrics()
        .iter()
        .find(|n| n.name == "orders")
        .map_or(0, |n| n.metrics.rows_in)
}

/// Waits until the job's sink has opened its output (every node has
/// started: the source is blocked reading the silent pipe).
fn wait_until_open(dir: &Path) {
    let output = dir.join("out/copy.ndjson");
    wait_until(Duration::from_secs(10), "opening the output", || {
        output.exists()
    });
}

fn pipe_job(dir: &Path, checkpoints: bool) -> (JobHandle, SilentPipe) {
    let pipe = dir.join("in.pipe");
    let guard = silent_pipe(&pipe);
    let config = ConnectorConfig {
        inputs: BTreeMap::from([("t".to_string(), pipe.display().to_string())]),
        output_dir: Some(dir.join("out")),
        ..ConnectorConfig::default()
    };
    let job = JobConfig {
        checkpoints: checkpoints.then(|| CheckpointConfig::new(dir.join("state"))),
        ..JobConfig::default()
    };
    let handle = job::start(&sql(FROM_PIPE), &BTreeMap::new(), config, &job).unwrap();
    (handle, guard)
}

#[test]
fn stop_ends_a_job_blocked_on_a_silent_pipe_within_a_second() {
    for checkpoints in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (handle, _pipe) = pipe_job(dir.path(), checkpoints);
        wait_until_open(dir.path());
        assert_eq!(handle.state(), JobState::Running);
        let asked = Instant::now();
        handle.stop();
        let report = handle
            .wait_timeout(Duration::from_secs(1))
            .expect("stopped within a second")
            .unwrap();
        assert!(asked.elapsed() < Duration::from_secs(1));
        assert_eq!(report.state, JobState::Stopped);
        assert_eq!(handle.state(), JobState::Stopped);
        assert_eq!(
            report.checkpoints.completed,
            u64::from(checkpoints),
            "a stop takes a final checkpoint when checkpoints are on"
        );
        assert!(dir.path().join("out/copy.ndjson").exists());
    }
}

#[test]
fn cancel_reports_cancelled_not_success() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, _pipe) = pipe_job(dir.path(), true);
    wait_until_open(dir.path());
    // What a front end records at a job's end is called once it ended, with
    // the final state set; registered afterwards, at once.
    let (told, heard) = std::sync::mpsc::channel();
    let watched = handle.clone();
    let before = told.clone();
    handle.on_end(move || before.send(("before", watched.state())).unwrap());
    assert!(heard.try_recv().is_err(), "called before the job ended");
    let clone = handle.clone();
    clone.cancel();
    let result = handle
        .wait_timeout(Duration::from_secs(1))
        .expect("cancelled within a second");
    assert!(matches!(result, Err(EngineError::Cancelled)), "{result:?}");
    assert_eq!(handle.state(), JobState::Cancelled);
    assert_eq!(
        handle.checkpoints().completed,
        0,
        "a cancelled job commits nothing"
    );
    assert_eq!(
        heard.recv_timeout(Duration::from_secs(1)).unwrap(),
        ("before", JobState::Cancelled)
    );
    let watched = handle.clone();
    handle.on_end(move || told.send(("after", watched.state())).unwrap());
    assert_eq!(heard.try_recv().unwrap(), ("after", JobState::Cancelled));
}

fn parquet_rows(dir: &Path) -> usize {
    let mut rows = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        assert!(
            !path.file_name().unwrap().to_string_lossy().starts_with('.'),
            "in-progress file left: {}",
            path.display()
        );
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        rows += reader.map(|b| b.unwrap().num_rows()).sum::<usize>();
    }
    rows
}

#[test]
fn a_stopped_job_leaves_readable_parquet_files_with_its_rows() {
    for checkpoints in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = ConnectorConfig {
            output_dir: Some(dir.path().join("out")),
            output_format: OutputFormat::Parquet,
            ..ConnectorConfig::default()
        };
        let job = JobConfig {
            checkpoints: checkpoints.then(|| CheckpointConfig {
                interval: Duration::from_millis(100),
                ..CheckpointConfig::new(dir.path().join("state"))
            }),
            ..JobConfig::default()
        };
        let handle = job::start(&sql(GENERATED), &BTreeMap::new(), config, &job).unwrap();
        // Live metrics grow while the job runs.
        wait_until(Duration::from_secs(20), "reading rows", || {
            orders_read(&handle) > 0
        });
        let early = orders_read(&handle);
        wait_until(Duration::from_secs(20), "reading more rows", || {
            orders_read(&handle) > early
        });
        handle.stop();
        let report = handle.wait().unwrap();
        assert_eq!(report.state, JobState::Stopped);
        let written = report
            .nodes
            .iter()
            .find(|n| n.name == "copy")
            .unwrap()
            .metrics
            .rows_in as usize;
        assert!(written > 0);
        assert_eq!(
            parquet_rows(&dir.path().join("out/copy")),
            written,
            "checkpoints: {checkpoints}"
        );
    }
}

#[test]
fn a_failing_node_fails_the_job_with_its_name() {
    let text = "
CREATE TABLE orders (order_id VARCHAR, order_ts BIGINT)
  WITH (connector = 'generator', stream = 'orders', count = '1000');
CREATE TABLE out (n INT) WITH (connector = 'blackhole');
INSERT INTO out SELECT CAST(order_id AS INT) FROM orders;
";
    let handle = job::start(
        &sql(text),
        &BTreeMap::new(),
        ConnectorConfig::default(),
        &JobConfig::default(),
    )
    .unwrap();
    let error = handle.wait().unwrap_err().to_string();
    assert!(
        error.contains("calc#") && error.contains("order-"),
        "{error}"
    );
    assert!(matches!(handle.state(), JobState::Failed(message) if message == error));
}

#[test]
fn every_front_end_gets_the_same_checks_before_anything_runs() {
    let config = ConnectorConfig {
        inputs: BTreeMap::from([("nope".to_string(), "x.ndjson".to_string())]),
        ..ConnectorConfig::default()
    };
    let error = job::start(
        &sql(GENERATED),
        &BTreeMap::new(),
        config,
        &JobConfig::default(),
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no query reads a source table named 'nope'"),
        "{error}"
    );
}

#[test]
fn a_stopped_job_resumes_and_its_counters_continue() {
    let dir = tempfile::tempdir().unwrap();
    let text = GENERATED.replace("count = '50000000'", "count = '3000000'");
    let config = || ConnectorConfig {
        output_dir: Some(dir.path().join("out")),
        output_format: OutputFormat::Parquet,
        ..ConnectorConfig::default()
    };
    let job = JobConfig {
        checkpoints: Some(CheckpointConfig::new(dir.path().join("state"))),
        ..JobConfig::default()
    };
    let handle = job::start(&sql(&text), &BTreeMap::new(), config(), &job).unwrap();
    wait_until(Duration::from_secs(20), "reading 100,000 rows", || {
        orders_read(&handle) >= 100_000
    });
    handle.stop();
    let stopped = handle.wait().unwrap();
    let read_before = stopped
        .nodes
        .iter()
        .find(|n| n.name == "orders")
        .unwrap()
        .metrics
        .rows_in;
    assert!(
        read_before > 0 && read_before < 3_000_000,
        "stopped part-way ({read_before} rows read)"
    );
    assert_eq!(
        parquet_rows(&dir.path().join("out/copy")) as u64,
        read_before,
        "what was read before the stop is published"
    );

    let resumed = job::start(&sql(&text), &BTreeMap::new(), config(), &job)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(resumed.state, JobState::Finished);
    assert_eq!(
        resumed.checkpoints.restored_from,
        stopped.checkpoints.last_id
    );
    let source = resumed
        .nodes
        .iter()
        .find(|n| n.name == "orders")
        .unwrap()
        .metrics
        .clone();
    let sink = resumed
        .nodes
        .iter()
        .find(|n| n.name == "copy")
        .unwrap()
        .metrics
        .clone();
    assert_eq!(
        source.rows_in, 3_000_000,
        "the source's count continues from the checkpoint"
    );
    assert_eq!(sink.rows_in, 3_000_000);
    assert_eq!(
        parquet_rows(&dir.path().join("out/copy")),
        3_000_000,
        "every row once"
    );
    let checkpoints = std::fs::read_dir(dir.path().join("state")).unwrap().count();
    assert!(
        checkpoints <= 2,
        "only the last two checkpoints are kept ({checkpoints})"
    );
}

//! Operator chaining: nodes that need no channel between them run as one
//! task. Chained and unchained runs write the same rows; `eddy explain`
//! lists the tasks; an error in a chained node names that node; a live job
//! holds a thread per task, not per node.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eddy_cli::job;
use eddy_connectors::stdout::StdoutTarget;
use eddy_connectors::ConnectorConfig;
use eddy_engine::chains::Chains;
use eddy_engine::parallel::Parallelism;
use eddy_engine::runtime::JobConfig;
use eddy_sql::SqlFile;

fn sql(text: &str) -> Vec<SqlFile> {
    vec![SqlFile {
        name: "job.sql".into(),
        text: text.into(),
    }]
}

/// The stdout lines of `files`, sorted, run with chaining on or off.
fn run(
    files: &[SqlFile],
    batch_size: usize,
    parallelism: usize,
    chaining: bool,
) -> Result<Vec<String>, eddy_cli::CliError> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let config = ConnectorConfig {
        batch_size,
        settings: eddy_connectors::settings::ConnectorSettings::default()
            .with(StdoutTarget::Buffer(buffer.clone())),
        ..ConnectorConfig::default()
    };
    job::run(
        files,
        &BTreeMap::new(),
        config,
        &JobConfig {
            parallelism: Parallelism::Fixed(parallelism),
            batch_rows: batch_size,
            disable_chaining: !chaining,
            ..Default::default()
        },
    )?;
    let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
    Ok(common::sorted(text.lines().map(str::to_string).collect()))
}

/// A window, an interval join and a processing-time window over generated
/// streams: chains through calcs, a window, a join's sides and sinks.
const QUERIES: &str = "
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = 'generator', stream = 'orders', count = '3000', seed = '5');
CREATE TABLE payments (payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = 'generator', stream = 'payments', count = '3000', seed = '5');
CREATE TABLE per_customer (customer_id VARCHAR, window_end TIMESTAMP, n BIGINT, total DOUBLE)
  WITH (connector = 'stdout', tag = 'W');
CREATE TABLE matched (payment_id VARCHAR, customer_id VARCHAR, paid_amount DOUBLE)
  WITH (connector = 'stdout', tag = 'J');
INSERT INTO per_customer
SELECT customer_id, window_end, count(*), sum(order_amount)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
WHERE order_amount > 5
GROUP BY customer_id, window_start, window_end;
INSERT INTO matched
SELECT p.payment_id, o.customer_id, p.paid_amount
FROM payments p JOIN orders o ON p.order_id = o.order_id
 AND o.event_time BETWEEN p.event_time - INTERVAL '10' SECOND AND p.event_time + INTERVAL '10' SECOND;
";

#[test]
fn chained_and_unchained_runs_write_the_same_rows() {
    let reference = job::load_sql(&[common::repo_root().join("queries")]).unwrap();
    for (name, files) in [("reference pipeline", reference), ("queries", sql(QUERIES))] {
        let unchained = run(&files, 8192, 1, false).unwrap();
        assert!(unchained.len() > 100, "{name}: {} lines", unchained.len());
        for (batch_size, parallelism) in [(1, 1), (64, 1), (8192, 1), (64, 2)] {
            assert_eq!(
                run(&files, batch_size, parallelism, true).unwrap(),
                unchained,
                "{name}: batch size {batch_size}, parallelism {parallelism}"
            );
        }
    }
}

#[test]
fn explain_lists_the_tasks_and_the_graph_chains_what_it_can() {
    let compiled = job::compile_files(&sql(QUERIES), &BTreeMap::new()).unwrap();
    let graph = eddy_engine::distribute::physical::PhysicalGraph::for_parallelism(
        std::sync::Arc::new(compiled.graph.clone()),
        1,
    );
    let chains = Chains::of(&graph);
    // Each source feeds the window's calc and the join: two consumers, so
    // the sources head tasks of their own; the window's chain runs to its
    // sink, the join's from the join to its sink.
    assert!(chains.tasks().len() < graph.nodes.len());
    let text = graph.explain();
    assert!(
        text.contains(&format!(
            "{} node(s) run as {} task(s)",
            graph.nodes.len(),
            chains.tasks().len()
        )),
        "{text}"
    );
    let window_task = chains
        .tasks()
        .iter()
        .find(|task| {
            task.iter()
                .any(|&id| graph.nodes[id].name.starts_with("window_aggregate"))
        })
        .expect("a window task");
    assert_eq!(
        graph.nodes[*window_task.last().unwrap()].name,
        "per_customer",
        "the window's chain ends at its sink: {text}"
    );
    assert!(window_task.len() >= 3, "{text}");
    for task in chains.tasks() {
        // A chain is a path: each node reads the one before it.
        for pair in task.windows(2) {
            assert_eq!(graph.nodes[pair[1]].inputs.len(), 1);
            assert_eq!(graph.nodes[pair[1]].inputs[0].from, pair[0]);
        }
    }
}

#[test]
fn an_error_in_a_chained_node_names_that_node() {
    let files = sql("
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
  WITH (connector = 'generator', stream = 'orders', count = '10');
CREATE TABLE out (q BIGINT) WITH (connector = 'stdout');
INSERT INTO out SELECT CAST(order_ts AS BIGINT) / CAST(order_amount * 0 AS BIGINT) FROM orders;
");
    let compiled = job::compile_files(&files, &BTreeMap::new()).unwrap();
    let graph = eddy_engine::distribute::physical::PhysicalGraph::for_parallelism(
        std::sync::Arc::new(compiled.graph.clone()),
        1,
    );
    let chains = Chains::of(&graph);
    assert_eq!(chains.tasks().len(), 1, "{}", graph.explain());
    let calc = graph
        .nodes
        .iter()
        .find(|n| n.name.starts_with("calc"))
        .expect("a calc")
        .name
        .clone();
    for chaining in [true, false] {
        let error = run(&files, 8192, 1, chaining).unwrap_err().to_string();
        assert!(
            error.contains(&calc) && error.to_lowercase().contains("divide by zero"),
            "chaining {chaining}: {error}"
        );
    }
}

/// Threads of a process (Linux).
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `queries/` with its generators paced on the wall clock (a live job).
fn live_queries(dir: &std::path::Path) {
    for entry in std::fs::read_dir(common::repo_root().join("queries")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let live = text.replace(
            "rate = '${RATE:2}'",
            "rate = '${RATE:2}', realtime = 'true'",
        );
        std::fs::write(dir.join(path.file_name().unwrap()), live).unwrap();
    }
}

/// The most threads a live reference pipeline holds over two seconds.
fn live_threads(queries: &std::path::Path, extra: &[&str]) -> usize {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_eddy"))
        .arg("run")
        .arg(queries)
        .args(["--quiet", "--parallelism", "1"])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut most = 0;
    while started.elapsed() < Duration::from_secs(2) {
        most = most.max(threads(child.id()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    most
}

#[test]
fn a_live_job_holds_its_workers_and_a_reader_per_source_not_a_thread_per_task() {
    let dir = tempfile::tempdir().unwrap();
    live_queries(dir.path());
    let files = job::load_sql(&[dir.path().to_path_buf()]).unwrap();
    let compiled = job::compile_files(&files, &BTreeMap::new()).unwrap();
    let graph = eddy_engine::distribute::physical::PhysicalGraph::for_parallelism(
        std::sync::Arc::new(compiled.graph.clone()),
        1,
    );
    let tasks = Chains::of(&graph).tasks().len();
    let sources = graph
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, eddy_engine::graph::NodeKind::Source { .. }))
        .count();
    let workers = 2;
    // The pool's workers and one reader per source, the main thread and
    // the signal handler's, and one for what blocks (a checkpoint's
    // writes, a sink's commit) while it runs.
    let expected = workers + sources + 3;
    assert!(
        expected < tasks,
        "the pipeline has {tasks} tasks, more than a thread each would fit"
    );
    for extra in [
        &["--workers", "2"][..],
        &["--workers", "2", "--no-chaining"],
    ] {
        let held = live_threads(dir.path(), extra);
        assert!(
            held <= expected && held > sources,
            "{extra:?}: {held} threads for {tasks} tasks and {sources} sources (at most {expected})"
        );
    }
}

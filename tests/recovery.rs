//! Jobs that survive: real processes killed with SIGKILL at seeded random
//! moments and started again with the same `--state-dir` and `--output`.
//!
//! - The reference pipeline over generated NDJSON inputs, and a windows +
//!   join job on the generator writing Parquet: after at least ten kills
//!   (`EDDY_KILLS` to change) the final outputs equal an uninterrupted run's
//!   as row multisets (nothing lost, nothing twice).
//! - MATCH_RECOGNIZE per customer on the generator: its partial matches
//!   survive kills, the matches equal an uninterrupted run's.
//! - A Debezium change feed, mirrored and aggregated into Debezium sinks:
//!   the table its source holds (to check each change) is restored with
//!   its position, so every round's changelogs replay exactly.
//! - Per-key totals over 100,000 keys of which few change between two
//!   checkpoints: written as their changes, checkpoints are a fraction of
//!   whole tables (`--full-checkpoints`), and kills lose nothing.
//! - The same totals, DISTINCT aggregates (multisets per group), a LEFT
//!   JOIN, an interval LEFT JOIN, a Top-N, tumbling and hopping windows
//!   per key, session windows per key and a window Top-N, spilling to
//!   disk under a 1 MiB memory limit: kills lose nothing.
//! - A damaged checkpoint (a truncated state file, a flipped byte in a
//!   manifest) is skipped with a warning; the previous one is used and the
//!   output is still exact.
//! - A changed query is refused with the operator named; `--ignore-state`
//!   starts afresh.
//! - A resumed job runs as many instances of each keyed operator as its
//!   checkpoint was taken with; another N, given explicitly, is refused.
//! - A finished job run again says so and writes nothing; one whose final
//!   commit was cut short commits it again and is marked done.
//! - SIGTERM stops a job blocked on silent stdin within a second, with its
//!   output committed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eddy_connectors::generator::GeneratedStream;
use eddy_connectors::json_lines::encode_json_lines;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn eddy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    // The tests choose the instances themselves, or test the default.
    command.env_remove("EDDY_PARALLELISM");
    command.current_dir(common::repo_root());
    command
}

/// How many kills each kill test makes.
fn kills() -> usize {
    std::env::var("EDDY_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(10)
}

/// Writes `count` rows of a generated stream as NDJSON.
fn write_stream(path: &Path, stream: GeneratedStream, count: u64) {
    std::fs::write(path, common::generated_ndjson(stream, count)).unwrap();
}

/// The sorted lines of every `*.ndjson` file in `dir`, by file name.
fn ndjson_outputs(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".ndjson") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(
                name,
                common::sorted(text.lines().map(str::to_string).collect()),
            );
        }
    }
    out
}

/// The rows of every sink directory of Parquet files in `dir` (partition
/// directories included, each row prefixed with its partition), as sorted
/// JSON lines per sink; also checks no hidden in-progress file is left.
fn parquet_outputs(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let sink = entry.unwrap().path();
        if !sink.is_dir() {
            continue;
        }
        let mut lines = Vec::new();
        for (partition, batch) in common::read_parquet_tree(&sink) {
            let mut text = Vec::new();
            encode_json_lines(&batch, &mut text).unwrap();
            lines.extend(
                String::from_utf8(text)
                    .unwrap()
                    .lines()
                    .map(|l| format!("{partition}{l}")),
            );
        }
        out.insert(
            sink.file_name().unwrap().to_string_lossy().to_string(),
            common::sorted(lines),
        );
    }
    out
}

/// A job as a command line (without `--state-dir` and `--output`).
struct JobArgs(Vec<String>);

impl JobArgs {
    fn command(&self, output: &Path, state: Option<&Path>) -> Command {
        let mut command = eddy();
        command
            .arg("run")
            .arg("--quiet")
            .args(&self.0)
            .arg("--output")
            .arg(output);
        if let Some(state) = state {
            command
                .arg("--state-dir")
                .arg(state)
                .args(["--checkpoint-interval", "100ms"]);
        }
        command
            .env("EDDY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }
}

/// What a run with kills went through.
#[derive(Default)]
struct KillRun {
    kills: usize,
    rounds: usize,
    resumed_from: Vec<u64>,
}

fn resumed_from(stderr: &str) -> Option<u64> {
    let at = stderr.find("resuming from checkpoint ")?;
    stderr[at + "resuming from checkpoint ".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn stderr_of(child: Child) -> String {
    String::from_utf8_lossy(&child.wait_with_output().unwrap().stderr).to_string()
}

/// Runs `job` with checkpoints and kills it with SIGKILL at random moments
/// (a fraction of `baseline`, the uninterrupted run's duration) until it
/// has been killed `kills` times, then lets it finish. Whenever the job
/// finishes between kills (a fast machine), its output is checked with
/// `verify` and a new round starts from empty state and output, so every
/// round is checked and the kills add up.
fn run_with_kills(
    job: &JobArgs,
    dir: &Path,
    kills: usize,
    baseline: Duration,
    seed: u64,
    verify: &dyn Fn(&Path, &KillRun),
) -> KillRun {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut run = KillRun::default();
    let low = (baseline.as_millis() as u64 / 12).max(300);
    loop {
        run.rounds += 1;
        let (output, state) = (
            dir.join(format!("out-{}", run.rounds)),
            dir.join(format!("state-{}", run.rounds)),
        );
        let mut finished_early = false;
        while run.kills < kills {
            let mut child = job.command(&output, Some(&state)).spawn().unwrap();
            let deadline = Instant::now() + Duration::from_millis(rng.random_range(low..low * 3));
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
            if child.try_wait().unwrap().is_some() {
                let stderr = stderr_of(child);
                run.resumed_from.extend(resumed_from(&stderr));
                finished_early = true;
                break;
            }
            child.kill().unwrap(); // SIGKILL
            let stderr = stderr_of(child);
            run.resumed_from.extend(resumed_from(&stderr));
            run.kills += 1;
        }
        if !finished_early {
            let out = job.command(&output, Some(&state)).output().unwrap();
            common::assert_success(&out, "the final run");
            run.resumed_from
                .extend(resumed_from(&String::from_utf8_lossy(&out.stderr)));
        }
        verify(&output, &run);
        if run.kills >= kills {
            return run;
        }
    }
}

/// A job of one SQL file written into `dir` with `args`, and how long its
/// uninterrupted run into `dir/expected` took.
fn sql_job_and_baseline(dir: &Path, sql: &str, args: &[&str]) -> (JobArgs, Duration) {
    let path = dir.join("job.sql");
    std::fs::write(&path, sql).unwrap();
    let mut all = vec![path.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    let job = JobArgs(all);
    let started = Instant::now();
    let out = job.command(&dir.join("expected"), None).output().unwrap();
    common::assert_success(&out, "the uninterrupted run");
    (job, started.elapsed())
}

fn reference_job(dir: &Path, rows: u64) -> JobArgs {
    let mut args = vec![common::repo_root().join("queries").display().to_string()];
    for (name, stream) in [
        ("orders", GeneratedStream::Orders),
        ("payments", GeneratedStream::Payments),
        ("devices", GeneratedStream::Devices),
    ] {
        let path = dir.join(format!("{name}.ndjson"));
        write_stream(&path, stream, rows);
        args.push("--input".into());
        args.push(format!("{name}={}", path.display()));
    }
    JobArgs(args)
}

#[test]
fn the_reference_pipeline_survives_kills() {
    let dir = tempfile::tempdir().unwrap();
    let job = reference_job(dir.path(), 1_000_000);
    let started = Instant::now();
    let out = job
        .command(&dir.path().join("expected"), None)
        .output()
        .unwrap();
    common::assert_success(&out, "the uninterrupted run");
    let baseline = started.elapsed();
    let expected = ndjson_outputs(&dir.path().join("expected"));
    assert_eq!(
        expected.len(),
        7,
        "every sink of the reference pipeline wrote a file"
    );
    assert!(expected["enriched_payments.ndjson"].len() == 1_000_000);

    let verify = |output: &Path, run: &KillRun| {
        let actual = ndjson_outputs(output);
        for (sink, rows) in &expected {
            assert!(
                actual.get(sink) == Some(rows),
                "{sink} differs after {} kills",
                run.kills
            );
        }
        assert_eq!(
            actual.len(),
            expected.len(),
            "no other file is visible in the output directory"
        );
    };
    let run = run_with_kills(&job, dir.path(), kills(), baseline, 42, &verify);
    assert!(run.kills >= kills());
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "reference pipeline: {} kills in {} round(s), every round's output exact; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        run.kills, run.rounds, run.resumed_from
    );
}

const WINDOWS_AND_JOIN: &str = "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', rate = '300', seed = '5');
CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'payments', count = '${ROWS}', rate = '300', seed = '5');
CREATE TABLE per_country (window_start TIMESTAMP, country VARCHAR, payments BIGINT, unmatched BIGINT, revenue DOUBLE)
  WITH (connector = 'stdout');
CREATE TABLE per_method (window_start TIMESTAMP, window_end TIMESTAMP, method VARCHAR, n BIGINT, biggest DOUBLE)
  WITH (connector = 'parquet', path = 'per_method', partition_by = 'method', rolling_rows = '300');
CREATE VIEW enriched AS
SELECT p.payment_id, p.method, p.paid_amount, o.country, o.order_id IS NULL AS unmatched, p.event_time
FROM payments p LEFT JOIN orders o
  ON p.order_id = o.order_id
 AND o.event_time BETWEEN p.event_time - INTERVAL '10' SECOND AND p.event_time + INTERVAL '10' SECOND;
INSERT INTO per_country
SELECT w.start, country, n, unmatched, revenue FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, country, count(*) AS n,
         count(*) FILTER (WHERE unmatched) AS unmatched, round(sum(paid_amount), 2) AS revenue
  FROM enriched GROUP BY w, country);
INSERT INTO per_method
SELECT w.start, w.end, method, n, biggest FROM (
  SELECT hop(INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS w, method, count(*) AS n, max(paid_amount) AS biggest
  FROM enriched GROUP BY w, method);
";

#[test]
fn windows_and_a_join_on_the_generator_survive_kills_writing_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let (job, baseline) = sql_job_and_baseline(
        dir.path(),
        WINDOWS_AND_JOIN,
        &["--set", "ROWS=1500000", "--format", "parquet"],
    );
    let expected = parquet_outputs(&dir.path().join("expected"));
    assert_eq!(expected.len(), 2);
    assert!(
        expected.values().all(|rows| rows.len() > 100),
        "both sinks have rows"
    );
    assert!(
        expected["per_method"]
            .iter()
            .all(|row| row.starts_with("method=")),
        "per_method is partitioned by method"
    );

    let verify = |output: &Path, run: &KillRun| {
        assert!(
            parquet_outputs(output) == expected,
            "Parquet output differs after {} kills",
            run.kills
        );
        let parts = std::fs::read_dir(output.join("per_country"))
            .unwrap()
            .count();
        assert!(
            parts > 1,
            "checkpoints publish one file per interval ({parts})"
        );
    };
    // The killed runs run the join and the windows as two instances each:
    // they resume their instances' state and write what one instance wrote.
    let mut in_parallel = job.0.clone();
    in_parallel.extend(["--parallelism".to_string(), "2".to_string()]);
    let run = run_with_kills(
        &JobArgs(in_parallel),
        dir.path(),
        kills(),
        baseline,
        7,
        &verify,
    );
    assert!(run.kills >= kills());
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "windows + join (killed runs at --parallelism 2): {} kills in {} round(s), every round's output exact; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        run.kills, run.rounds, run.resumed_from
    );
}

/// Late rows kept (the default): the generators' disorder of up to 1.5 s
/// against a watermark with no bound makes about half the rows late, so
/// every operator judges late rows at their marks: windows (tumbling,
/// sliced hops) count them in the windows still open there, the left
/// join pairs or pads them, the join's output goes late into a window, and
/// OVER drops what its order had passed.
const LATE_ROWS_KEPT: &str = "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time
) WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', rate = '300', seed = '9');
CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time
) WITH (connector = 'generator', stream = 'payments', count = '${ROWS}', rate = '300', seed = '9');
CREATE TABLE per_second (w BIGINT, country VARCHAR, n BIGINT) WITH (connector = 'stdout');
CREATE TABLE hopping (w BIGINT, country VARCHAR, n BIGINT) WITH (connector = 'stdout');
CREATE TABLE paid (w BIGINT, method VARCHAR, n BIGINT, unmatched BIGINT) WITH (connector = 'stdout');
CREATE TABLE running (customer_id VARCHAR, order_ts BIGINT, n BIGINT) WITH (connector = 'stdout');
CREATE TABLE late_orders (w BIGINT, n BIGINT) WITH (connector = 'stdout');
INSERT INTO per_second SELECT CAST(w.start AS BIGINT), country, n FROM (
  SELECT tumble(INTERVAL '1' SECOND) AS w, country, count(*) AS n FROM orders GROUP BY w, country);
INSERT INTO hopping SELECT CAST(w.start AS BIGINT), country, n FROM (
  SELECT hop(INTERVAL '1' SECOND, INTERVAL '3' SECOND) AS w, country, count(*) AS n FROM orders GROUP BY w, country);
INSERT INTO paid SELECT CAST(w.start AS BIGINT), method, n, unmatched FROM (
  SELECT tumble(INTERVAL '2' SECOND) AS w, method, count(*) AS n, count(*) FILTER (WHERE order_id IS NULL) AS unmatched
  FROM (SELECT p.method, o.order_id, p.event_time FROM payments p LEFT JOIN orders o
          ON p.order_id = o.order_id
         AND o.event_time BETWEEN p.event_time - INTERVAL '5' SECOND AND p.event_time + INTERVAL '1' SECOND)
  GROUP BY w, method);
INSERT INTO running SELECT customer_id, order_ts, n FROM (
  SELECT customer_id, order_ts, count(*) OVER (PARTITION BY customer_id ORDER BY event_time) AS n FROM orders)
WHERE n % 10 = 0;
INSERT INTO late_orders SELECT CAST(w.start AS BIGINT), n FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, count(*) AS n FROM late_rows(orders) GROUP BY w);
";

#[test]
fn late_rows_kept_by_every_operator_survive_kills() {
    let dir = tempfile::tempdir().unwrap();
    let (job, baseline) =
        sql_job_and_baseline(dir.path(), LATE_ROWS_KEPT, &["--set", "ROWS=1200000"]);
    let expected = ndjson_outputs(&dir.path().join("expected"));
    assert_eq!(expected.len(), 5, "{:?}", expected.keys());
    assert!(
        expected.values().all(|rows| rows.len() > 10),
        "every sink has rows"
    );
    let verify = |output: &Path, run: &KillRun| {
        let got = ndjson_outputs(output);
        for (sink, rows) in &expected {
            assert!(
                got.get(sink) == Some(rows),
                "{sink} differs after {} kills",
                run.kills
            );
        }
    };
    let mut in_parallel = job.0.clone();
    in_parallel.extend(["--parallelism".to_string(), "2".to_string()]);
    let run = run_with_kills(
        &JobArgs(in_parallel),
        dir.path(),
        kills(),
        baseline,
        11,
        &verify,
    );
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "late rows kept (killed runs at --parallelism 2): {} kills in {} round(s), every round's output exact; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        run.kills, run.rounds, run.resumed_from
    );
}

const ROW_PATTERNS: &str = "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', rate = '300', seed = '5');
CREATE TABLE bursts (customer_id VARCHAR, first_order VARCHAR, lows BIGINT, high DOUBLE, mean_low DOUBLE)
  WITH (connector = 'stdout');
INSERT INTO bursts
SELECT * FROM orders MATCH_RECOGNIZE (
  PARTITION BY customer_id ORDER BY event_time
  MEASURES FIRST(LOW.order_id) AS first_order, COUNT(LOW.*) AS lows, HIGH.order_amount AS high,
           AVG(LOW.order_amount) AS mean_low
  PATTERN (LOW+ HIGH) WITHIN INTERVAL '20' SECOND
  DEFINE LOW AS LOW.order_amount < 150, HIGH AS HIGH.order_amount > 1.2 * AVG(LOW.order_amount));
";

/// MATCH_RECOGNIZE keeps partial matches (rows of undecided starts) and
/// pending rows in its checkpoints: killed and resumed, its matches are
/// exactly an uninterrupted run's.
#[test]
fn row_patterns_survive_kills() {
    let dir = tempfile::tempdir().unwrap();
    let (job, baseline) = sql_job_and_baseline(
        dir.path(),
        ROW_PATTERNS,
        &["--set", "ROWS=600000", "--parallelism", "2"],
    );
    let expected = ndjson_outputs(&dir.path().join("expected"));
    assert!(
        expected.values().all(|rows| rows.len() > 1_000),
        "matches to compare: {:?}",
        expected.values().map(Vec::len).collect::<Vec<_>>()
    );
    let verify = |output: &Path, run: &KillRun| {
        assert!(
            ndjson_outputs(output) == expected,
            "matches differ after {} kills",
            run.kills
        );
    };
    let run = run_with_kills(&job, dir.path(), kills(), baseline, 11, &verify);
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "row patterns: {} kills in {} round(s), every round's output exact; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        run.kills, run.rounds, run.resumed_from
    );
}

const PYTHON_AGGREGATES: &str = "
CREATE AGGREGATE spread(x DOUBLE) RETURNS VARCHAR LANGUAGE PYTHON AS $$
class spread:
    def __init__(self):
        self.values = []
    def accumulate(self, x):
        if x is not None:
            self.values.append(round(x * 100))
    def retract(self, x):
        if x is not None:
            self.values.remove(round(x * 100))
    def merge(self, other):
        self.values.extend(other.values)
    def finish(self):
        v = sorted(self.values)
        return f'{len(v)}:{v[0]}..{v[len(v) // 2]}..{v[-1]}' if v else None
$$;
CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'payments', count = '${ROWS}', rate = '300', seed = '5');
CREATE TABLE per_window (window_start TIMESTAMP, method VARCHAR, n BIGINT, spread VARCHAR)
  WITH (connector = 'stdout');
CREATE TABLE per_method (method VARCHAR, n BIGINT, spread VARCHAR)
  WITH (connector = 'ndjson', path = 'per_method.ndjson', format = 'debezium-json');
INSERT INTO per_window
SELECT window_start, method, count(*), spread(paid_amount)
FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, method;
INSERT INTO per_method SELECT method, count(*), spread(paid_amount) FROM payments GROUP BY method;
";

#[test]
fn python_aggregates_survive_kills() {
    // Their states (pickled instances) live in eddy's checkpoints; each
    // run starts new Python workers.
    let dir = tempfile::tempdir().unwrap();
    let (job, baseline) = sql_job_and_baseline(
        dir.path(),
        PYTHON_AGGREGATES,
        &["--set", "ROWS=200000", "--parallelism", "2"],
    );
    let expected_windows = ndjson_outputs(&dir.path().join("expected"));
    let windows = &expected_windows["per_window.ndjson"];
    assert!(windows.len() > 100, "{} windows", windows.len());
    let expected = common::debezium_table(&dir.path().join("expected").join("per_method.ndjson"));
    assert!(expected.len() >= 3, "{expected:?}");
    let verify = |output: &Path, run: &KillRun| {
        assert!(
            ndjson_outputs(output)["per_window.ndjson"] == *windows,
            "the windows differ after {} kills",
            run.kills
        );
        assert!(
            common::debezium_table(&output.join("per_method.ndjson")) == expected,
            "the per-method table differs after {} kills",
            run.kills
        );
    };
    let run = run_with_kills(&job, dir.path(), kills(), baseline, 31, &verify);
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "python aggregates: {} kills in {} round(s), every round's output exact; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        run.kills, run.rounds, run.resumed_from
    );
}

const UPDATING: &str = "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR
) WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', rate = '300', seed = '5');
CREATE TABLE per_customer (customer_id VARCHAR, orders BIGINT, cents BIGINT, biggest DOUBLE)
  WITH (connector = 'ndjson', path = 'per_customer.ndjson', format = 'debezium-json');
CREATE TABLE order_counts (orders BIGINT, customers BIGINT, countries BIGINT)
  WITH (connector = 'ndjson', path = 'order_counts.ndjson', format = 'debezium-json');
CREATE TABLE top_customers (customer_id VARCHAR, orders BIGINT, rn BIGINT)
  WITH (connector = 'ndjson', path = 'top_customers.ndjson', format = 'debezium-json');
CREATE VIEW totals AS
SELECT customer_id, count(*) AS orders, sum(CAST(order_amount * 100 AS BIGINT)) AS cents,
       max(order_amount) AS biggest, min(country) AS country
FROM orders GROUP BY customer_id;
INSERT INTO per_customer SELECT customer_id, orders, cents, biggest FROM totals;
INSERT INTO order_counts
SELECT orders, count(*), count(DISTINCT country) FROM totals GROUP BY orders;
INSERT INTO top_customers
SELECT customer_id, orders, rn FROM (
  SELECT customer_id, orders, ROW_NUMBER() OVER (ORDER BY orders DESC, customer_id) AS rn FROM totals
) WHERE rn <= 3;
";

#[test]
fn updating_queries_survive_kills_writing_debezium_changelogs() {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("job.sql");
    std::fs::write(&sql, UPDATING).unwrap();
    let job = JobArgs(vec![
        sql.display().to_string(),
        "--set".into(),
        "ROWS=3000000".into(),
    ]);
    let started = Instant::now();
    let out = job
        .command(&dir.path().join("expected"), None)
        .output()
        .unwrap();
    common::assert_success(&out, "the uninterrupted run");
    let baseline = started.elapsed();
    let sinks = [
        "per_customer.ndjson",
        "order_counts.ndjson",
        "top_customers.ndjson",
    ];
    let expected: Vec<Vec<String>> = sinks
        .iter()
        .map(|s| common::debezium_table(&dir.path().join("expected").join(s)))
        .collect();
    assert!(expected[0].len() > 100, "many customers");
    assert!(expected[1].len() > 3, "several order counts");
    assert_eq!(expected[2].len(), 3, "a top 3");
    let verify = |output: &Path, run: &KillRun| {
        for (sink, rows) in sinks.iter().zip(&expected) {
            assert!(
                common::debezium_table(&output.join(sink)) == *rows,
                "{sink}: the replayed changelog differs after {} kills",
                run.kills
            );
        }
    };
    let mut in_parallel = job.0.clone();
    in_parallel.extend(["--parallelism".to_string(), "2".to_string()]);
    let run = run_with_kills(
        &JobArgs(in_parallel),
        dir.path(),
        kills(),
        baseline,
        11,
        &verify,
    );
    assert!(run.kills >= kills());
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "updating aggregates and a Top-N of them (killed runs at --parallelism 2): {} kills in {} round(s), every round's changelog replays exactly; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        run.kills, run.rounds, run.resumed_from
    );
}

const TOTALS: &str = "
CREATE TABLE events (k VARCHAR, v BIGINT) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE totals (k VARCHAR, n BIGINT, total BIGINT)
  WITH (connector = 'ndjson', path = 'totals.ndjson', format = 'debezium-json');
INSERT INTO totals SELECT k, count(*), sum(v) FROM events GROUP BY k;
";

/// 100,000 accounts opened, then `hot` events on 100 of them: a keyed
/// table of which few keys change between two checkpoints.
fn account_events(path: &Path, hot: usize) {
    use std::fmt::Write;
    let mut rng = SmallRng::seed_from_u64(3);
    let mut text = String::with_capacity((100_000 + hot) * 24);
    for i in 0..100_000 {
        writeln!(text, "{{\"k\":\"a{i}\",\"v\":{}}}", i % 7).unwrap();
    }
    for _ in 0..hot {
        let k = rng.random_range(0..100) * 997;
        writeln!(
            text,
            "{{\"k\":\"a{k}\",\"v\":{}}}",
            rng.random_range(0..100)
        )
        .unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// The MiB the run summary says its checkpoints wrote in all, and how
/// many it took.
fn checkpoint_figures(stderr: &str) -> (f64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("checkpoints: "))
        .unwrap_or_else(|| panic!("no checkpoint line in the summary:\n{stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    (words[3].parse().unwrap(), words[1].parse().unwrap())
}

#[test]
fn a_large_keyed_table_is_checkpointed_as_its_changes_and_survives_kills() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.ndjson");
    account_events(&events, 4_000_000);
    let events = format!("EVENTS={}", events.display());
    let (job, baseline) = sql_job_and_baseline(
        dir.path(),
        TOTALS,
        &["--set", &events, "--parallelism", "1"],
    );
    let expected = common::debezium_table(&dir.path().join("expected").join("totals.ndjson"));
    assert_eq!(expected.len(), 100_000, "a row per account");
    // Whole tables at every checkpoint, then as changes: the same
    // output, a fraction of the bytes per checkpoint.
    let mut per_checkpoint = Vec::new();
    for full in [true, false] {
        let name = if full { "full" } else { "changes" };
        let mut command = eddy();
        command
            .arg("run")
            .args(&job.0)
            .arg("--output")
            .arg(dir.path().join(name))
            .arg("--state-dir")
            .arg(dir.path().join(format!("state-{name}")))
            .args(["--checkpoint-interval", "20ms"]);
        if full {
            command.arg("--full-checkpoints");
        }
        let out = command.output().unwrap();
        common::assert_success(&out, name);
        let (mib, taken) = checkpoint_figures(&String::from_utf8_lossy(&out.stderr));
        assert!(taken >= 4, "{name}: only {taken} checkpoints");
        per_checkpoint.push(mib / taken as f64);
        assert!(
            common::debezium_table(&dir.path().join(name).join("totals.ndjson")) == expected,
            "{name}: the totals differ from an uninterrupted run's"
        );
    }
    assert!(
        per_checkpoint[1] * 3.0 < per_checkpoint[0],
        "MiB per checkpoint: whole tables {:.2}, changes {:.2}",
        per_checkpoint[0],
        per_checkpoint[1]
    );

    // Killed and resumed (each resumed run reads a full table and the
    // changes written after it), the totals stay exact.
    let verify = |output: &Path, run: &KillRun| {
        assert!(
            common::debezium_table(&output.join("totals.ndjson")) == expected,
            "the totals differ after {} kills",
            run.kills
        );
    };
    let run = run_with_kills(&job, dir.path(), kills(), baseline, 29, &verify);
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "per-key totals over 100,000 keys: {:.2} MiB per checkpoint whole, {:.2} as changes; {} kills in {} round(s), exact; resumed from {:?}",
        per_checkpoint[0], per_checkpoint[1], run.kills, run.rounds, run.resumed_from
    );
}

/// The per-key totals at a memory limit a tenth of their state: the
/// aggregate spills groups to disk and reads them back, its checkpoints
/// hold every group on disk or not, and after kills the totals equal an
/// uninterrupted run's without a limit.
/// Runs `sql` (its `--set` assignments `sets`) without a limit, then at
/// 1 MiB with kills at random moments (seeded by `seed`), resuming each
/// time: each Debezium table of `tables` equals the unlimited run's after
/// every round. The unlimited tables.
fn spilled_under_kills(
    dir: &Path,
    sql: &str,
    sets: &[String],
    tables: &[&str],
    seed: u64,
) -> Vec<Vec<String>> {
    let mut args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s.as_str()]).collect();
    args.extend(["--parallelism", "1"]);
    let (unlimited, _) = sql_job_and_baseline(dir, sql, &args);
    let files: Vec<String> = tables.iter().map(|t| format!("{t}.ndjson")).collect();
    let expected: Vec<Vec<String>> = files
        .iter()
        .map(|f| common::debezium_table(&dir.join("expected").join(f)))
        .collect();
    let limited = JobArgs(
        unlimited
            .0
            .iter()
            .cloned()
            .chain(["--memory-limit".to_string(), "1MiB".to_string()])
            .collect(),
    );
    let started = Instant::now();
    let out = limited
        .command(&dir.join("limited"), Some(&dir.join("state")))
        .output()
        .unwrap();
    // Tens of MiB of state under 1 MiB: the run ends only if the operator
    // spills (else it fails for memory; tests/spill.rs reads the spill
    // figures).
    common::assert_success(&out, "the limited run");
    let baseline = started.elapsed();
    let verify = |output: &Path, run: &KillRun| {
        for ((table, file), expected) in tables.iter().zip(&files).zip(&expected) {
            assert!(
                common::debezium_table(&output.join(file)) == *expected,
                "the spilled {table} differs after {} kills",
                run.kills
            );
        }
    };
    let run = run_with_kills(&limited, dir, kills().min(5), baseline, seed, &verify);
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "{tables:?} spilling under 1 MiB: {} kills in {} round(s), exact; resumed from {:?}",
        run.kills, run.rounds, run.resumed_from
    );
    expected
}

#[test]
fn state_spilled_past_the_memory_limit_survives_kills() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.ndjson");
    account_events(&events, 1_000_000);
    let sets = [format!("EVENTS={}", events.display())];
    let totals = spilled_under_kills(dir.path(), TOTALS, &sets, &["totals"], 31);
    assert_eq!(totals[0].len(), 100_000, "a row per account");
}

#[test]
fn distinct_aggregates_spilled_past_the_memory_limit_survive_kills() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.ndjson");
    account_events(&events, 300_000);
    let sets = [format!("EVENTS={}", events.display())];
    let tables = ["seen", "spreads"];
    let got = spilled_under_kills(dir.path(), common::DISTINCT, &sets, &tables, 53);
    assert_eq!(got[1].len(), 100_000, "a row per account");
}

#[test]
fn a_join_spilled_past_the_memory_limit_survives_kills() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::orders_and_payments(dir.path(), 300_000);
    let paid = spilled_under_kills(dir.path(), common::PAID, &sets, &["paid"], 37);
    assert!(paid[0].len() > 300_000, "{} rows", paid[0].len());
}

#[test]
fn windows_spilled_past_the_memory_limit_survive_kills() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::keyed_timed_events(dir.path(), 300_000, 100_000);
    let tables = ["per_window", "per_hop"];
    let fired = spilled_under_kills(dir.path(), common::KEYED_WINDOWS, &sets, &tables, 41);
    assert!(fired[0].len() > 100_000, "{} windows", fired[0].len());
}

#[test]
fn a_top_n_spilled_past_the_memory_limit_survives_kills() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.ndjson");
    account_events(&events, 300_000);
    let sets = [format!("EVENTS={}", events.display())];
    let top = spilled_under_kills(dir.path(), common::TOP, &sets, &["top2"], 47);
    assert!(top[0].len() > 100_000, "{} rows", top[0].len());
}

#[test]
fn a_window_top_n_spilled_past_the_memory_limit_survives_kills() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::keyed_timed_events(dir.path(), 300_000, 100_000);
    let top = spilled_under_kills(dir.path(), common::WINDOW_TOP, &sets, &["window_top2"], 43);
    assert!(top[0].len() > 100_000, "{} rows", top[0].len());
}

#[test]
fn session_windows_spilled_past_the_memory_limit_survive_kills() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::keyed_timed_events(dir.path(), 300_000, 100_000);
    let fired = spilled_under_kills(
        dir.path(),
        common::KEYED_SESSIONS,
        &sets,
        &["per_session"],
        59,
    );
    assert!(fired[0].len() > 100_000, "{} sessions", fired[0].len());
}

const FEED: &str = "
CREATE TABLE accounts (id BIGINT NOT NULL, owner VARCHAR, balance BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'file', path = '${FEED}', format = 'debezium-json');
CREATE TABLE mirror (id BIGINT, owner VARCHAR, balance BIGINT)
  WITH (connector = 'ndjson', path = 'mirror.ndjson', format = 'debezium-json');
CREATE TABLE per_owner (owner VARCHAR, accounts BIGINT, total BIGINT)
  WITH (connector = 'ndjson', path = 'per_owner.ndjson', format = 'debezium-json');
INSERT INTO mirror SELECT * FROM accounts;
INSERT INTO per_owner SELECT owner, count(*), sum(balance) FROM accounts GROUP BY owner;
";

/// `events` Debezium change events over 5,000 accounts: creates, updates,
/// deletes whose old row holds only the key, and now and then an update
/// of a key never created (a bad row).
fn account_changes(events: usize) -> String {
    let mut rng = SmallRng::seed_from_u64(17);
    let mut held: Vec<Option<(u32, u32)>> = vec![None; 5000];
    let mut feed = String::with_capacity(events * 100);
    for i in 0..events {
        let id = rng.random_range(0..held.len());
        let new = (rng.random_range(0..20u32), rng.random_range(0..1000u32));
        let image = |(owner, balance): (u32, u32)| {
            format!("{{\"id\":{id},\"owner\":\"o{owner}\",\"balance\":{balance}}}")
        };
        let line = match held[id] {
            _ if i % 1000 == 999 => format!(
                "{{\"before\":{{\"id\":{}}},\"after\":{{\"id\":{}}},\"op\":\"u\"}}",
                100_000 + i,
                100_000 + i
            ),
            None => {
                held[id] = Some(new);
                format!("{{\"before\":null,\"after\":{},\"op\":\"c\"}}", image(new))
            }
            Some(_) if rng.random_range(0..5) == 0 => {
                held[id] = None;
                format!("{{\"before\":{{\"id\":{id}}},\"after\":null,\"op\":\"d\"}}")
            }
            Some(old) => {
                held[id] = Some(new);
                format!(
                    "{{\"before\":{},\"after\":{},\"op\":\"u\",\"ts_ms\":{i}}}",
                    image(old),
                    image(new)
                )
            }
        };
        feed.push_str(&line);
        feed.push('\n');
    }
    feed
}

#[test]
fn a_change_feed_survives_kills_with_the_table_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("feed.sql");
    std::fs::write(&sql, FEED).unwrap();
    let feed = dir.path().join("accounts.ndjson");
    std::fs::write(&feed, account_changes(1_500_000)).unwrap();
    let job = JobArgs(vec![
        sql.display().to_string(),
        "--set".into(),
        format!("FEED={}", feed.display()),
    ]);
    let started = Instant::now();
    let out = job
        .command(&dir.path().join("expected"), None)
        .output()
        .unwrap();
    common::assert_success(&out, "the uninterrupted run");
    let baseline = started.elapsed();
    let sinks = ["mirror.ndjson", "per_owner.ndjson"];
    let expected: Vec<Vec<String>> = sinks
        .iter()
        .map(|s| common::debezium_table(&dir.path().join("expected").join(s)))
        .collect();
    assert!(expected[0].len() > 3000, "most accounts are held");
    assert_eq!(expected[1].len(), 20, "every owner has accounts");
    // A restored source that lost its table would find the deletes and
    // updates of keys created before the checkpoint unknown.
    let verify = |output: &Path, run: &KillRun| {
        for (sink, rows) in sinks.iter().zip(&expected) {
            assert!(
                common::debezium_table(&output.join(sink)) == *rows,
                "{sink}: the replayed changelog differs after {} kills",
                run.kills
            );
        }
    };
    let run = run_with_kills(&job, dir.path(), kills(), baseline, 23, &verify);
    assert!(
        !run.resumed_from.is_empty(),
        "no run resumed from a checkpoint"
    );
    eprintln!(
        "a Debezium feed mirrored and aggregated: {} kills in {} round(s), exact; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        run.kills, run.rounds, run.resumed_from
    );
}

/// Runs until at least two checkpoints are complete, then kills the job.
fn kill_after_two_checkpoints(job: &JobArgs, output: &Path, state: &Path) {
    let mut child = job.command(output, Some(state)).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let complete = std::fs::read_dir(state)
            .map(|entries| {
                entries
                    .filter(|e| e.as_ref().is_ok_and(|e| e.path().join("MANIFEST").exists()))
                    .count()
            })
            .unwrap_or(0);
        if complete >= 2 {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the job ended before two checkpoints"
        );
        assert!(
            Instant::now() < deadline,
            "no two checkpoints within a minute"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

fn newest_checkpoint(state: &Path) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("MANIFEST").exists())
        .collect();
    dirs.sort();
    dirs.pop().unwrap()
}

/// The reference job over `rows` rows of each stream, and the outputs of
/// an uninterrupted run of it.
fn reference_job_and_output(dir: &Path, rows: u64) -> (JobArgs, BTreeMap<String, Vec<String>>) {
    let job = reference_job(dir, rows);
    let out = job.command(&dir.join("expected"), None).output().unwrap();
    common::assert_success(&out, "the uninterrupted run");
    let expected = ndjson_outputs(&dir.join("expected"));
    (job, expected)
}

#[test]
fn a_damaged_checkpoint_is_skipped_and_the_one_before_it_used() {
    let dir = tempfile::tempdir().unwrap();
    let (job, expected) = reference_job_and_output(dir.path(), 400_000);

    type Damage = fn(&Path);
    let truncate_a_state_file: Damage = |checkpoint| {
        let file = std::fs::read_dir(checkpoint)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "arrow"))
            .max_by_key(|p| p.metadata().unwrap().len())
            .unwrap();
        let len = file.metadata().unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    };
    let flip_a_manifest_byte: Damage = |checkpoint| {
        let path = checkpoint.join("MANIFEST");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x01;
        std::fs::write(&path, bytes).unwrap();
    };
    for (name, damage) in [
        ("truncated state file", truncate_a_state_file),
        ("flipped manifest byte", flip_a_manifest_byte),
    ] {
        let (output, state) = (
            dir.path().join(format!("out-{name}")),
            dir.path().join(format!("state-{name}")),
        );
        kill_after_two_checkpoints(&job, &output, &state);
        let damaged = newest_checkpoint(&state);
        damage(&damaged);
        let out = job.command(&output, Some(&state)).output().unwrap();
        common::assert_success(&out, "the run after the damage");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let id: u64 = damaged
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_start_matches("chk-")
            .parse()
            .unwrap();
        assert!(
            stderr.contains(&format!("checkpoint {id} in")) && stderr.contains("is unusable"),
            "{name}: {stderr}"
        );
        assert_eq!(
            resumed_from(&stderr),
            Some(id - 1),
            "{name}: the previous checkpoint is used\n{stderr}"
        );
        assert!(
            ndjson_outputs(&output) == expected,
            "{name}: output differs"
        );
    }
}

#[test]
fn a_checkpoint_taken_at_two_instances_resumes_at_one_two_or_four() {
    let dir = tempfile::tempdir().unwrap();
    let (job, expected) = reference_job_and_output(dir.path(), 400_000);
    let with_instances = |n: &str| {
        let mut args = job.0.clone();
        args.extend(["--parallelism".to_string(), n.to_string()]);
        JobArgs(args)
    };
    for resumed_at in ["1", "2", "4"] {
        let (output, state) = (
            dir.path().join(format!("out-{resumed_at}")),
            dir.path().join(format!("state-{resumed_at}")),
        );
        kill_after_two_checkpoints(&with_instances("2"), &output, &state);
        let out = with_instances(resumed_at)
            .command(&output, Some(&state))
            .output()
            .unwrap();
        common::assert_success(&out, "the resumed run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let says = if resumed_at == "2" {
            "running 2 instance(s) of each keyed operator over 128 key groups (as the checkpoint)"
                .to_string()
        } else {
            format!(
                "running {resumed_at} instance(s) of each keyed operator over 128 key groups (the checkpoint's state spread from 2)"
            )
        };
        assert!(stderr.contains(&says), "{stderr}");
        assert!(resumed_from(&stderr).is_some(), "{stderr}");
        assert!(
            ndjson_outputs(&output) == expected,
            "resumed at {resumed_at} instances: output differs"
        );
    }

    // Without the option a job resumes with its checkpoint's N (the
    // default would be this machine's cores); above its key groups it is
    // refused before anything runs.
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    kill_after_two_checkpoints(&with_instances("3"), &output, &state);
    let out = with_instances("200")
        .command(&output, Some(&state))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "200 instances of each keyed operator exceed the job's maximum parallelism of 128"
        ),
        "{stderr}"
    );
    let out = job.command(&output, Some(&state)).output().unwrap();
    common::assert_success(&out, "the resumed run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "running 3 instance(s) of each keyed operator over 128 key groups (as the checkpoint)"
        ),
        "{stderr}"
    );
    assert!(ndjson_outputs(&output) == expected, "output differs");
}

/// Copies the files of `from` into a fresh `to`.
fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn a_job_stopped_with_a_savepoint_at_two_starts_from_it_at_one_two_or_four() {
    let dir = tempfile::tempdir().unwrap();
    let (job, expected) = reference_job_and_output(dir.path(), 400_000);
    let with = |extra: &[&str]| {
        let mut args = job.0.clone();
        args.extend(extra.iter().map(|a| a.to_string()));
        JobArgs(args)
    };
    // Run at 2 until two checkpoints are in, then stop it (SIGTERM: a
    // final checkpoint, output committed) and keep a savepoint.
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    let mut child = with(&["--parallelism", "2"])
        .command(&output, Some(&state))
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(state.exists()
        && std::fs::read_dir(&state)
            .unwrap()
            .filter(|e| e.as_ref().is_ok_and(|e| e.path().join("MANIFEST").exists()))
            .count()
            >= 2)
    {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the job ended before two checkpoints"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no two checkpoints within a minute"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    common::assert_success(&child.wait_with_output().unwrap(), "the stopped job");
    let savepoint = dir.path().join("savepoint");
    let out = eddy()
        .args(["savepoint", "--state-dir"])
        .arg(&state)
        .arg(&savepoint)
        .args(["--name", "reference", "--sql"])
        .arg(common::repo_root().join("queries"))
        .output()
        .unwrap();
    common::assert_success(&out, "eddy savepoint");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("(Stopped) of 2 instance(s), 128 key groups"),
        "{said}"
    );
    let described = std::fs::read_to_string(savepoint.join("SAVEPOINT")).unwrap();
    assert!(
        described.contains("\"job\": \"reference\"") && described.contains("CREATE TABLE orders"),
        "the savepoint names its job and holds its SQL: {described}"
    );
    // The savepoint stands alone: the state directory goes.
    std::fs::remove_dir_all(&state).unwrap();
    let stopped_output = dir.path().join("stopped-output");
    copy_dir(&output, &stopped_output);

    for n in ["1", "2", "4"] {
        copy_dir(&stopped_output, &output);
        let state = dir.path().join(format!("state-{n}"));
        let resume = with(&[
            "--parallelism",
            n,
            "--from-savepoint",
            savepoint.to_str().unwrap(),
        ]);
        let out = resume.command(&output, Some(&state)).output().unwrap();
        common::assert_success(&out, "the run from the savepoint");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("starting from the savepoint"), "{stderr}");
        assert!(
            ndjson_outputs(&output) == expected,
            "started from the savepoint at {n} instances: output differs"
        );
        // Run again with the same command line: it resumes from its own
        // (finished) checkpoints, not from the savepoint, and writes nothing more.
        let out = resume.command(&output, Some(&state)).output().unwrap();
        common::assert_success(&out, "the run again");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("continue the savepoint"), "{stderr}");
        assert!(
            ndjson_outputs(&output) == expected,
            "run again at {n}: output differs"
        );
    }
    // A state directory of another run is not overwritten by a savepoint.
    let out = with(&["--from-savepoint", savepoint.to_str().unwrap()])
        .command(&output, Some(&dir.path().join("state-1")))
        .output()
        .unwrap();
    assert!(out.status.success(), "the same savepoint: resumes");
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    kill_after_two_checkpoints(&job, &dir.path().join("other-out"), &other);
    let out = with(&["--from-savepoint", savepoint.to_str().unwrap()])
        .command(&dir.path().join("other-out"), Some(&other))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already holds checkpoints of a job not started from the savepoint"),
        "{stderr}"
    );
}

#[test]
fn a_changed_query_is_refused_naming_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("job.sql");
    std::fs::write(&sql, WINDOWS_AND_JOIN).unwrap();
    let job = |rows: &str, width: &str| {
        let text = WINDOWS_AND_JOIN.replace(
            "tumble(INTERVAL '10' SECOND)",
            &format!("tumble(INTERVAL '{width}' SECOND)"),
        );
        std::fs::write(&sql, text).unwrap();
        JobArgs(vec![
            sql.display().to_string(),
            "--set".into(),
            format!("ROWS={rows}"),
        ])
    };
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    kill_after_two_checkpoints(&job("2000000", "10"), &output, &state);

    let out = job("2000000", "20")
        .command(&output, Some(&state))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the query changed since checkpoint"),
        "{stderr}"
    );
    assert!(
        stderr.contains("window_aggregate#") && stderr.contains("tumble(10000ms)"),
        "the window whose state has no place in the changed query is named: {stderr}"
    );
    assert!(
        stderr.contains("--allow-dropped-state") && stderr.contains("--ignore-state"),
        "{stderr}"
    );

    // --ignore-state starts afresh: the output is the changed query's, whole.
    let changed = job("20000", "20");
    let expected_dir = dir.path().join("expected");
    common::assert_success(
        &changed.command(&expected_dir, None).output().unwrap(),
        "the changed query",
    );
    let mut afresh = changed.command(&output, Some(&state));
    afresh.arg("--ignore-state");
    common::assert_success(&afresh.output().unwrap(), "--ignore-state");
    assert!(ndjson_outputs(&output) == ndjson_outputs(&expected_dir));
}

/// A job that grows: windows per country first; then big orders (a
/// filter) and windows per customer added; then the customer windows
/// removed again.
const EVOLVING: &str = "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', rate = '300', seed = '5');
CREATE TABLE per_country (window_start TIMESTAMP, country VARCHAR, n BIGINT, total DOUBLE)
  WITH (connector = 'ndjson', path = 'per_country.ndjson');
INSERT INTO per_country
SELECT window_start, country, count(*), round(sum(order_amount), 2)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, country;
";

const BIG_ORDERS: &str = "
CREATE TABLE big_orders (order_id VARCHAR, order_amount DOUBLE)
  WITH (connector = 'ndjson', path = 'big_orders.ndjson');
INSERT INTO big_orders SELECT order_id, order_amount FROM orders WHERE order_amount > 130;
";

const PER_CUSTOMER: &str = "
CREATE TABLE per_customer (window_start TIMESTAMP, customer_id VARCHAR, n BIGINT)
  WITH (connector = 'ndjson', path = 'per_customer.ndjson');
INSERT INTO per_customer
SELECT window_start, customer_id, count(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, customer_id;
";

/// A job of the evolving tests: `sql` written to `DIR/NAME.sql`, run with
/// `ROWS=1500000` and `extra` arguments.
fn evolving_job(dir: &Path, name: &str, sql: &str, extra: &[&str]) -> JobArgs {
    let path = dir.join(format!("{name}.sql"));
    std::fs::write(&path, sql).unwrap();
    let mut args = vec![
        path.display().to_string(),
        "--set".into(),
        "ROWS=1500000".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    JobArgs(args)
}

/// Asserts that the sink file `late` (a query added to a running job)
/// holds exactly the last rows of `whole` (its uninterrupted run's), some
/// but not all: it read from where its source stood.
fn assert_holds_a_suffix(whole: &Path, late: &Path) {
    let (whole, late) = (lines_of(whole), lines_of(late));
    assert!(
        !late.is_empty() && late.len() < whole.len() && whole.ends_with(&late),
        "the new sink holds the rows from the resume point on: {} of {}",
        late.len(),
        whole.len()
    );
}

/// What a run that must fail said: asserts it failed, returns its stderr.
fn refusal(out: std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "the run should have failed: {stderr}"
    );
    stderr
}

/// A sink file's lines, in order.
fn lines_of(path: &Path) -> Vec<String> {
    // Whole lines only: a job killed mid-write may leave its last line cut
    // short (its next run truncates the file to what it committed); a
    // finished run's file ends with a newline, so a line it cut short
    // would show as a missing row.
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole.lines().map(str::to_string).collect()
}

/// A sink file's lines, sorted (instances interleave their rows).
fn sorted_lines_of(path: &Path) -> Vec<String> {
    let mut lines = lines_of(path);
    lines.sort();
    lines
}

#[test]
fn a_changed_query_keeps_the_state_of_what_it_still_computes() {
    let dir = tempfile::tempdir().unwrap();
    let job = |name: &str, sql: &str, extra: &[&str]| evolving_job(dir.path(), name, sql, extra);
    let first = EVOLVING.to_string();
    let grown = format!("{EVOLVING}{BIG_ORDERS}{PER_CUSTOMER}");
    let shrunk = format!("{EVOLVING}{BIG_ORDERS}");
    // What uninterrupted runs write.
    let expected = dir.path().join("expected");
    common::assert_success(
        &job("grown", &grown, &["--parallelism", "2"])
            .command(&expected, None)
            .output()
            .unwrap(),
        "the uninterrupted run",
    );

    // Adding a query and a sink: the old sink goes on exactly, the new ones
    // start from where the source stands (here at 3 instances, from 2).
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    kill_after_two_checkpoints(
        &job("first", &first, &["--parallelism", "2"]),
        &output,
        &state,
    );
    let out = job("grown", &grown, &["--parallelism", "3"])
        .command(&output, Some(&state))
        .output()
        .unwrap();
    common::assert_success(&out, "the grown query");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("start(s) afresh")
            && stderr.contains("big_orders")
            && stderr.contains("per_customer"),
        "{stderr}"
    );
    assert!(resumed_from(&stderr).is_some(), "{stderr}");
    assert!(
        sorted_lines_of(&output.join("per_country.ndjson"))
            == sorted_lines_of(&expected.join("per_country.ndjson")),
        "the unchanged query's output continues exactly"
    );
    assert_holds_a_suffix(
        &expected.join("big_orders.ndjson"),
        &output.join("big_orders.ndjson"),
    );

    // Removing a query drops its state: refused unless allowed.
    let (output, state) = (dir.path().join("out2"), dir.path().join("state2"));
    kill_after_two_checkpoints(
        &job("grown", &grown, &["--parallelism", "2"]),
        &output,
        &state,
    );
    let out = job("shrunk", &shrunk, &["--parallelism", "2"])
        .command(&output, Some(&state))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has no place in it")
            && stderr.contains("per_customer")
            && stderr.contains("--allow-dropped-state"),
        "{stderr}"
    );
    let out = job(
        "shrunk",
        &shrunk,
        &["--parallelism", "2", "--allow-dropped-state"],
    )
    .command(&output, Some(&state))
    .output()
    .unwrap();
    common::assert_success(&out, "the shrunk query, dropping state");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("dropped the state of"), "{stderr}");
    for sink in ["per_country.ndjson", "big_orders.ndjson"] {
        assert!(
            sorted_lines_of(&output.join(sink)) == sorted_lines_of(&expected.join(sink)),
            "{sink}: the queries kept go on exactly"
        );
    }
}

/// A named query (`uid` hint) whose filter threshold changes: its window
/// state moves by name. `${MIN}` is the threshold.
const NAMED_WINDOWS: &str = "
CREATE TABLE big_windows (window_start TIMESTAMP, country VARCHAR, n BIGINT${EXTRA_COLUMN})
  WITH (connector = 'ndjson', path = 'big_windows.ndjson');
INSERT INTO big_windows ${UID}
SELECT window_start, country, count(*)${EXTRA_VALUE}
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
WHERE order_amount > ${MIN}
GROUP BY window_start, window_end, country;
";

/// `(window_start, country)` -> (n, total), of a big_windows file.
fn window_rows(path: &Path) -> BTreeMap<(String, String), (i64, Option<f64>)> {
    lines_of(path)
        .iter()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let key = (
                row["window_start"].as_str().unwrap().to_string(),
                row["country"].as_str().unwrap().to_string(),
            );
            (key, (row["n"].as_i64().unwrap(), row["total"].as_f64()))
        })
        .collect()
}

/// `(window_start, country)` -> n, of a big_windows file.
fn window_counts(path: &Path) -> BTreeMap<(String, String), i64> {
    window_rows(path)
        .into_iter()
        .map(|(key, (n, _))| (key, n))
        .collect()
}

#[test]
fn a_named_query_keeps_its_state_when_its_filter_changes_and_its_sink_gains_a_column() {
    let dir = tempfile::tempdir().unwrap();
    let job = |name: &str, uid: &str, min: &str, extra: (&str, &str)| {
        let named = NAMED_WINDOWS
            .replace("${UID}", uid)
            .replace("${EXTRA_COLUMN}", extra.0)
            .replace("${EXTRA_VALUE}", extra.1);
        let min = format!("MIN={min}");
        evolving_job(
            dir.path(),
            name,
            &format!("{EVOLVING}{named}"),
            &["--set", &min],
        )
    };
    let uid = "/*+ uid('big_windows') */";
    let plain = ("", "");
    let with_end = (", window_end TIMESTAMP", ", window_end");
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    kill_after_two_checkpoints(&job("first", uid, "100", plain), &output, &state);
    let before = window_counts(&output.join("big_windows.ndjson"));
    let expected = |name: &str, min: &str| {
        let out_dir = dir.path().join(name);
        common::assert_success(
            &job(name, uid, min, plain)
                .command(&out_dir, None)
                .output()
                .unwrap(),
            "an uninterrupted run",
        );
        out_dir
    };
    let (at_100, at_50) = (expected("at_100", "100"), expected("at_50", "50"));

    // Without a name the changed filter makes the window a new operator:
    // its state has no place, refused.
    let (output_plain, state_plain) =
        (dir.path().join("out_plain"), dir.path().join("state_plain"));
    kill_after_two_checkpoints(&job("plain", "", "100", plain), &output_plain, &state_plain);
    let out = job("plain50", "", "50", plain)
        .command(&output_plain, Some(&state_plain))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no place in it"));

    // Another width under the same name does not fit the window's state:
    // refused, naming it and why.
    let wider = NAMED_WINDOWS
        .replace("INTERVAL '10' SECOND", "INTERVAL '20' SECOND")
        .replace("${UID}", uid)
        .replace("${EXTRA_COLUMN}", "")
        .replace("${EXTRA_VALUE}", "");
    let stderr = refusal(
        evolving_job(
            dir.path(),
            "wider",
            &format!("{EVOLVING}{wider}"),
            &["--set", "MIN=100"],
        )
        .command(&output, Some(&state))
        .output()
        .unwrap(),
    );
    assert!(
        stderr.contains("its state no longer fits: uid big_windows: window_aggregate 0, it was `shape/1 operator window_aggregate {window=tumble(10000ms);")
            && stderr.contains("it is now `shape/1 operator window_aggregate {window=tumble(20000ms);"),
        "{stderr}"
    );

    // sum appended (to another run killed as the first): the counts go on
    // exactly, the sum is NULL in windows begun before the change and
    // exact in every window after.
    let (output_sum, state_sum) = (dir.path().join("out_sum"), dir.path().join("state_sum"));
    kill_after_two_checkpoints(&job("first", uid, "100", plain), &output_sum, &state_sum);
    let before_sum = window_counts(&output_sum.join("big_windows.ndjson"));
    let with_sum = (", total DOUBLE", ", round(sum(order_amount), 2)");
    let whole = dir.path().join("with_sum");
    common::assert_success(
        &job("sum_whole", uid, "100", with_sum)
            .command(&whole, None)
            .output()
            .unwrap(),
        "an uninterrupted run with the sum",
    );
    let out = job("sum", uid, "100", with_sum)
        .command(&output_sum, Some(&state_sum))
        .output()
        .unwrap();
    common::assert_success(&out, "the query with a sum appended");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("keep(s) its state by name"), "{stderr}");
    let (want, got) = (
        window_rows(&whole.join("big_windows.ndjson")),
        window_rows(&output_sum.join("big_windows.ndjson")),
    );
    assert_eq!(
        lines_of(&output_sum.join("big_windows.ndjson")).len(),
        want.len(),
        "each window once"
    );
    let (mut missed, mut exact) = (0, 0);
    for (window, (n, total)) in &got {
        let (want_n, want_total) = want[window];
        assert_eq!(*n, want_n, "{window:?}: the count goes on exactly");
        match total {
            None => missed += 1,
            Some(total) => {
                assert_eq!(Some(*total), want_total, "{window:?}");
                exact += 1;
            }
        }
    }
    assert!(
        missed > before_sum.len() && exact > 0,
        "windows begun before the change have no sum ({missed}, {} written before), those after an exact one ({exact})",
        before_sum.len()
    );

    // The threshold lowered and the sink given a nullable column: the
    // window keeps its counts by name, the sink its file.
    let out = job("lowered", uid, "50", with_end)
        .command(&output, Some(&state))
        .output()
        .unwrap();
    common::assert_success(&out, "the changed named query");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("keep(s) its state by name") && stderr.contains("big_windows"),
        "{stderr}"
    );
    assert!(resumed_from(&stderr).is_some(), "{stderr}");
    let lines = lines_of(&output.join("big_windows.ndjson"));
    let (old, new) = (
        window_counts(&at_100.join("big_windows.ndjson")),
        window_counts(&at_50.join("big_windows.ndjson")),
    );
    let got = window_counts(&output.join("big_windows.ndjson"));
    assert_eq!(got.len(), lines.len(), "each window once");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        new.keys().collect::<Vec<_>>(),
        "every window of the lowered threshold, none twice"
    );
    // A window open at the change counts its rows over 100 from before it
    // (kept state) and those over 50 after: at least the old run's count,
    // at most the new one's. Started afresh, it would lack the rows before
    // the change and fall below the old count.
    for (window, n) in &got {
        let (low, high) = (old.get(window).copied().unwrap_or(0), new[window]);
        if let Some(first) = before.get(window) {
            assert_eq!(first, &low, "{window:?} was written before the change");
        } else {
            assert!(
                low <= *n && *n <= high,
                "{window:?}: {n} counts rows over 100 before the change and over 50 after, so it lies in [{low}, {high}]"
            );
        }
    }
    // Lines written after the change carry the new column.
    let added = lines.iter().filter(|l| l.contains("window_end")).count();
    assert!(
        added > 0
            && lines[..lines.len() - added]
                .iter()
                .all(|l| !l.contains("window_end"))
    );
    assert!(
        sorted_lines_of(&output.join("per_country.ndjson"))
            == sorted_lines_of(&at_100.join("per_country.ndjson")),
        "the unnamed, unchanged query goes on exactly"
    );
}

/// Where a new query starts is the user's choice, made in SQL: on a table
/// the job already reads it starts where that table's source stands; on a
/// table of its own (the same connector, declared again) it reads from the
/// beginning.
#[test]
fn a_new_query_on_a_table_of_its_own_reads_from_the_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let replay = EVOLVING
        .split("CREATE TABLE per_country")
        .next()
        .unwrap()
        .replace("CREATE TABLE orders (", "CREATE TABLE orders_again (");
    let added = format!(
        "{replay}
CREATE TABLE all_big (order_id VARCHAR, order_amount DOUBLE)
  WITH (connector = 'ndjson', path = 'all_big.ndjson');
INSERT INTO all_big SELECT order_id, order_amount FROM orders_again WHERE order_amount > 130;
CREATE TABLE big_orders (order_id VARCHAR, order_amount DOUBLE)
  WITH (connector = 'ndjson', path = 'big_orders.ndjson');
INSERT INTO big_orders SELECT order_id, order_amount FROM orders WHERE order_amount > 130;
"
    );
    let job = |name: &str, sql: &str| evolving_job(dir.path(), name, sql, &[]);
    let grown = format!("{EVOLVING}{added}");
    let expected = dir.path().join("expected");
    common::assert_success(
        &job("grown", &grown)
            .command(&expected, None)
            .output()
            .unwrap(),
        "the uninterrupted run",
    );
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    kill_after_two_checkpoints(&job("first", EVOLVING), &output, &state);
    let out = job("grown", &grown)
        .command(&output, Some(&state))
        .output()
        .unwrap();
    common::assert_success(&out, "the grown query");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(resumed_from(&stderr).is_some(), "{stderr}");
    // On its own table: every row since the beginning.
    let all = sorted_lines_of(&expected.join("all_big.ndjson"));
    assert!(!all.is_empty() && sorted_lines_of(&output.join("all_big.ndjson")) == all);
    // On the table the job reads: from where its source stood.
    assert_holds_a_suffix(
        &expected.join("big_orders.ndjson"),
        &output.join("big_orders.ndjson"),
    );
    assert!(
        sorted_lines_of(&output.join("per_country.ndjson"))
            == sorted_lines_of(&expected.join("per_country.ndjson"))
    );
}

#[test]
fn a_query_added_on_a_source_that_already_ended_ends_too() {
    let dir = tempfile::tempdir().unwrap();
    let small = "
CREATE TABLE few (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR)
  WITH (connector = 'generator', stream = 'orders', count = '10', seed = '9');
CREATE TABLE few_copy (order_id VARCHAR) WITH (connector = 'ndjson', path = 'few_copy.ndjson');
INSERT INTO few_copy SELECT order_id FROM few;
";
    let again = "
CREATE TABLE few_again (order_id VARCHAR) WITH (connector = 'ndjson', path = 'few_again.ndjson');
INSERT INTO few_again SELECT order_id FROM few;
";
    let job = |name: &str, sql: &str| evolving_job(dir.path(), name, sql, &[]);
    let first = format!("{EVOLVING}{small}");
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    kill_after_two_checkpoints(&job("first", &first), &output, &state);
    let expected = dir.path().join("expected");
    common::assert_success(
        &job("first", &first)
            .command(&expected, None)
            .output()
            .unwrap(),
        "the uninterrupted run",
    );
    // `few` ended long before the kill; a query added on it has nothing
    // to read and ends, and the rest goes on exactly.
    let out = job("again", &format!("{first}{again}"))
        .command(&output, Some(&state))
        .output()
        .unwrap();
    common::assert_success(&out, "the query added on an ended source");
    assert!(lines_of(&output.join("few_again.ndjson")).is_empty());
    for sink in ["per_country.ndjson", "few_copy.ndjson"] {
        assert!(
            sorted_lines_of(&output.join(sink)) == sorted_lines_of(&expected.join(sink)),
            "{sink}: output differs"
        );
    }
}

#[test]
fn a_finished_job_run_again_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("job.sql");
    std::fs::write(&sql, WINDOWS_AND_JOIN).unwrap();
    let job = JobArgs(vec![
        sql.display().to_string(),
        "--set".into(),
        "ROWS=20000".into(),
    ]);
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    common::assert_success(
        &job.command(&output, Some(&state)).output().unwrap(),
        "the first run",
    );
    let first = ndjson_outputs(&output);
    let modified = std::fs::metadata(output.join("per_country.ndjson"))
        .unwrap()
        .modified()
        .unwrap();
    let again = job.command(&output, Some(&state)).output().unwrap();
    common::assert_success(&again, "the second run");
    assert!(String::from_utf8_lossy(&again.stderr).contains("had already finished"));
    assert!(ndjson_outputs(&output) == first);
    assert_eq!(
        std::fs::metadata(output.join("per_country.ndjson"))
            .unwrap()
            .modified()
            .unwrap(),
        modified
    );
    // The final checkpoint is marked once its sinks are committed. A
    // process killed between the two leaves it unmarked (a group leaves
    // such a task to whoever it assigns it next): starting the job again
    // commits again, idempotently, and marks it.
    let store = eddy_engine::checkpoint::store::StateDir::open(&state).unwrap();
    assert!(store.finished_and_committed().unwrap());
    std::fs::remove_file(newest_checkpoint(&state).join("COMMITTED")).unwrap();
    assert!(store.finished().unwrap());
    assert!(!store.finished_and_committed().unwrap());
    let third = job.command(&output, Some(&state)).output().unwrap();
    common::assert_success(&third, "the run after a cut-short final commit");
    assert!(String::from_utf8_lossy(&third.stderr).contains("had already finished"));
    assert!(store.finished_and_committed().unwrap());
    assert!(ndjson_outputs(&output) == first);
}

#[test]
fn sigterm_stops_a_job_on_silent_stdin_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("job.sql");
    std::fs::write(
        &sql,
        "CREATE TABLE t (k VARCHAR, ts BIGINT) WITH (connector = 'stdin');
         CREATE TABLE copy (k VARCHAR, ts BIGINT) WITH (connector = 'ndjson', path = 'unused');
         INSERT INTO copy SELECT k, ts FROM t;",
    )
    .unwrap();
    let (output, state) = (dir.path().join("out"), dir.path().join("state"));
    let mut child = eddy()
        .args(["run", "--output"])
        .arg(&output)
        .arg("--state-dir")
        .arg(&state)
        .args(["--checkpoint-interval", "50ms"])
        .arg(&sql)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        stdin
            .write_all(b"{\"k\":\"a\",\"ts\":1}\n{\"k\":\"b\",\"ts\":2}\n")
            .unwrap();
        stdin.flush().unwrap();
    }
    // The job has read both rows once a checkpoint counts them at the sink;
    // then it waits on stdin.
    let started = Instant::now();
    loop {
        let counted = std::fs::read_dir(&state)
            .map(|entries| {
                entries.filter_map(Result::ok).any(|e| {
                    std::fs::read_to_string(e.path().join("MANIFEST"))
                        .is_ok_and(|m| m.matches("\"rows_in\":2").count() >= 2)
                })
            })
            .unwrap_or(false);
        if counted {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no checkpoint counted both rows"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(child.try_wait().unwrap().is_none());
    let signalled = Instant::now();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    while child.try_wait().unwrap().is_none() {
        assert!(
            signalled.elapsed() < Duration::from_secs(1),
            "not stopped within a second"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    common::assert_success(&out, "the stopped job");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopping") && stderr.contains("stopped in"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(output.join("copy.ndjson")).unwrap(),
        "{\"k\":\"a\",\"ts\":1}\n{\"k\":\"b\",\"ts\":2}\n",
        "the stopped job's output is committed"
    );
}

#[test]
fn an_interval_join_spilled_past_the_memory_limit_survives_kills() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::timed_orders_and_payments(dir.path(), 200_000);
    let paid = spilled_under_kills(
        dir.path(),
        common::PAID_IN_TIME,
        &sets,
        &["paid_in_time"],
        53,
    );
    assert!(paid[0].len() > 200_000, "{} rows", paid[0].len());
}

//! Sinks on a bucket, against a real S3-compatible server (s3s-fs, which
//! `scripts/s3-server.sh` builds from crates.io) started per test on a
//! free port, reached through the standard AWS environment variables:
//!
//! - Parquet (partitioned) and NDJSON sinks on `s3://`, and `--output
//!   s3://...`, write the rows a local run writes.
//! - A job writing Parquet and NDJSON to the bucket, killed with SIGKILL
//!   again and again and resumed from its checkpoints, leaves exactly the
//!   uninterrupted run's rows there, and no staged object: with its
//!   checkpoints on the local disk, and with them in the bucket too
//!   (`--state-dir s3://...`, every run from an empty working copy).
//! - The same on Azure Blob Storage (Azurite, `scripts/azurite.sh`):
//!   `az://` sinks, state and Delta through kills.
//! - pyarrow and DuckDB (httpfs) read the Parquet files from the bucket
//!   (their own S3 clients).
//! - An NDJSON source in the bucket reads what a local copy gives, and
//!   resumes at its checkpointed offset after kills; a Parquet source
//!   reads a bucket prefix (partitions, pushed-down filter) as it reads a
//!   local directory.
//! - The store stopped for seconds mid-run: nothing lost or repeated.
//! - A Delta table in the bucket, exact through kills, read by `deltalake`
//!   and by eddy; a log version already written is refused to another
//!   writer.
//! - Merging Delta tables in the bucket, compacted and vacuumed, read as
//!   the local disk's.
//! - A server whose output root is a bucket prefix keeps jobs inside it.
//! - A server whose state is in the bucket (`--state-dir s3://...`),
//!   killed mid-job, is replaced by one sharing nothing else with it,
//!   which resumes the job exactly; a second live server on that state is
//!   refused; savepoints go to the bucket. Tables and materialized views
//!   declared over its PostgreSQL port move with it.
//! - The deployment files (docker/compose.s3.yaml, deploy/kubernetes/)
//!   start servers that write to the bucket with this binary.
//! - A lease in the bucket (what holds a group job's task there) has one
//!   holder at a time, passes on when let go, and its holder learns when
//!   another process took it over.
//! - A table's `storage.` options reach a bucket the environment does not
//!   describe; checkpoints hold none of them.
//! - Credentials never show: a path holding some is refused without
//!   repeating them, and a refused secret is not in the error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::azurite::Azurite;
use common::s3::{S3Server, StoreServer};
use datafusion::arrow::json::writer::LineDelimitedWriter;
use eddy_connectors::generator::GeneratedStream;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Windows and a filter of the generator's orders, into a partitioned
/// Parquet sink and an NDJSON sink under `${OUT}`.
const JOB: &str = "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', seed = '5');
CREATE TABLE per_country (w BIGINT, country VARCHAR, n BIGINT, total DOUBLE)
  WITH (connector = 'parquet', path = '${OUT}/per_country', partition_by = 'country', rolling_rows = '4000');
CREATE TABLE big (order_id VARCHAR, country VARCHAR, order_amount DOUBLE)
  WITH (connector = 'file', path = '${OUT}/big.ndjson');
INSERT INTO per_country SELECT CAST(w.start AS BIGINT), country, n, total FROM (
  SELECT tumble(INTERVAL '1' SECOND) AS w, country, count(*) AS n, sum(order_amount) AS total
  FROM orders GROUP BY w, country);
INSERT INTO big SELECT order_id, country, order_amount FROM orders WHERE order_amount > 150;
";

/// The rows of a downloaded output: each sink's sorted JSON lines (Parquet
/// rows prefixed with their partition). Fails on a staged object left.
fn rows_of(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut parquet = Vec::new();
    for (partition, batch) in common::read_parquet_tree(&dir.join("per_country")) {
        let mut writer = LineDelimitedWriter::new(Vec::new());
        writer.write(&batch).unwrap();
        writer.finish().unwrap();
        let text = String::from_utf8(writer.into_inner()).unwrap();
        parquet.extend(text.lines().map(|l| format!("{partition}{l}")));
    }
    out.insert("per_country".to_string(), common::sorted(parquet));
    // A local NDJSON sink is one file; a bucket's is a set of files.
    let big = dir.join("big.ndjson");
    let files: Vec<PathBuf> = if big.is_file() {
        vec![big]
    } else {
        std::fs::read_dir(&big)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    let mut lines = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(!name.starts_with('.'), "a staged object is left: {name}");
        let text = std::fs::read_to_string(&path).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    out.insert("big".to_string(), common::sorted(lines));
    out
}

fn write_job(dir: &Path) -> PathBuf {
    let path = dir.join("job.sql");
    std::fs::write(&path, JOB).unwrap();
    path
}

#[test]
fn sinks_on_a_bucket_write_what_local_sinks_write() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path());
    let local = dir.path().join("local");
    for (out, extra) in [
        (local.display().to_string(), vec![]),
        ("s3://lake/direct".to_string(), vec![]),
        (
            "s3://lake/staged".to_string(),
            vec![
                "--state-dir".to_string(),
                dir.path().join("state").display().to_string(),
                "--checkpoint-interval".to_string(),
                "50ms".to_string(),
            ],
        ),
    ] {
        let result = server
            .eddy()
            .args(["run", "--quiet"])
            .arg(&job)
            .args(["--set", "ROWS=20000", "--set", &format!("OUT={out}")])
            .args(extra)
            .output()
            .unwrap();
        common::assert_success(&result, &out);
    }
    let expected = rows_of(&local);
    assert!(expected["per_country"].len() > 100 && expected["big"].len() > 100);
    for prefix in ["direct", "staged"] {
        let copy = dir.path().join(prefix);
        server.download(prefix, &copy);
        assert!(
            rows_of(&copy) == expected,
            "s3://lake/{prefix} differs from the local run"
        );
    }
    // The checkpointed run published one file per checkpoint interval.
    let files = server.bucket("staged/big.ndjson").list().unwrap();
    assert!(files.len() > 1, "{files:?}");

    // `--output s3://...` puts each sink under the prefix, Parquet as asked.
    let result = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args(["--set", "ROWS=20000", "--set", "OUT=unused"])
        .args(["--output", "s3://lake/output", "--format", "parquet"])
        .output()
        .unwrap();
    common::assert_success(&result, "--output s3://lake/output");
    let names: Vec<String> = server.names("output");
    assert!(
        names.iter().any(|n| n.starts_with("per_country/country="))
            && names
                .iter()
                .any(|n| n.starts_with("big/part-") && n.ends_with(".parquet")),
        "{names:?}"
    );

    // pyarrow reads the partitioned Parquet from the bucket with its own
    // S3 client, and counts every order the windows counted.
    let out = Command::new("bash")
        .arg(common::repo_root().join("scripts/bucket-read.py.sh"))
        .arg("lake/direct/per_country")
        .envs(server.env())
        .output()
        .unwrap();
    common::assert_success(&out, "pyarrow reading s3://lake/direct/per_country");
    let counted: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(counted, 20000, "every order is in one window's count");
    // And DuckDB, through its httpfs extension's S3 client.
    let out = Command::new("bash")
        .arg(common::repo_root().join("scripts/bucket-read.py.sh"))
        .args(["--duckdb", "lake/direct/per_country"])
        .envs(server.env())
        .output()
        .unwrap();
    common::assert_success(&out, "DuckDB reading s3://lake/direct/per_country");
    let counted: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(counted, 20000, "DuckDB counts every order too");
}

/// The rows the job `job` writes with `rows` (`ROWS=...`) and `extra`
/// arguments, run uninterrupted to `s3://lake/expected` (downloaded under
/// `dir`).
fn uninterrupted_rows(
    server: &dyn StoreServer,
    job: &Path,
    rows: &str,
    extra: &[&str],
    dir: &Path,
) -> BTreeMap<String, Vec<String>> {
    let out = format!("OUT={}://lake/expected", server.scheme());
    let baseline = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(job)
        .args(["--set", rows, "--set", &out])
        .args(extra)
        .output()
        .unwrap();
    common::assert_success(&baseline, "the uninterrupted run");
    let expected_dir = dir.join("expected");
    server.download("expected", &expected_dir);
    rows_of(&expected_dir)
}

/// Runs the job writing to `s3://lake/killed` with `--state-dir state`,
/// killed with SIGKILL a few times and resumed at another parallelism each
/// time, and checks the bucket holds exactly what an uninterrupted run
/// writes; returns the final run's stderr.
fn exact_through_kills(
    server: &dyn StoreServer,
    dir: &Path,
    state: &str,
    extra: &[&str],
) -> String {
    let out = format!("OUT={}://lake/killed", server.scheme());
    let job = write_job(dir);
    let rows = "ROWS=300000";
    let started = Instant::now();
    let expected = uninterrupted_rows(server, &job, rows, extra, dir);
    let took = started.elapsed();

    // Each run at another parallelism (2, 3, 1, ...): every resume from
    // the bucket rescales the state too.
    let runs = std::cell::Cell::new(0usize);
    let run = || {
        let parallelism = [2, 3, 1][runs.get() % 3].to_string();
        runs.set(runs.get() + 1);
        let mut command = server.eddy();
        command
            .args(["run", "--quiet"])
            .arg(&job)
            .args(["--set", rows, "--set", &out])
            .args(["--state-dir", state])
            .args([
                "--checkpoint-interval",
                "100ms",
                "--parallelism",
                &parallelism,
            ])
            .args(extra)
            .env("EDDY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    };
    let Runs {
        kills,
        resumed,
        rescaled,
        last_stderr: stderr,
    } = kill_and_finish(server, &run, state, took);
    let killed_dir = dir.join("killed");
    server.download("killed", &killed_dir);
    assert!(
        rows_of(&killed_dir) == expected,
        "the bucket's rows differ after {kills} kills (state in {state})"
    );
    assert!(
        kills >= 2,
        "the job was killed ({kills} kills, run of {took:?})"
    );
    assert!(resumed >= 1, "no run resumed from a checkpoint");
    assert!(rescaled >= 1, "no run rescaled its checkpoint");
    eprintln!(
        "bucket sinks, state in {state}: {kills} kills, {resumed} resumed runs, output exact (uninterrupted run {took:?})"
    );
    stderr
}

/// Runs the job `run` makes, killing it with SIGKILL (once it has a
/// checkpoint in `state`) up to four times at random moments of about a
/// fraction of `took`, then lets it finish.
fn kill_and_finish(
    server: &dyn StoreServer,
    run: &dyn Fn() -> Command,
    state: &str,
    took: Duration,
) -> Runs {
    let mut rng = SmallRng::seed_from_u64(11);
    let low = (took.as_millis() as u64 / 8).max(100);
    let mut runs = Runs::default();
    for _ in 0..4 {
        let mut child = run().spawn().unwrap();
        std::thread::sleep(Duration::from_millis(rng.random_range(low..low * 2)));
        // Killed once there is a checkpoint to resume from.
        while !has_checkpoint(server, state) && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        child.kill().unwrap(); // SIGKILL
        let stderr = String::from_utf8_lossy(&child.wait_with_output().unwrap().stderr).to_string();
        runs.count(&stderr);
        runs.kills += 1;
    }
    let out = run().output().unwrap();
    common::assert_success(&out, "the final run");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    runs.count(&stderr);
    runs.last_stderr = stderr;
    runs
}

/// What [`kill_and_finish`] saw.
#[derive(Debug, Default)]
struct Runs {
    kills: usize,
    /// Runs that resumed from a checkpoint.
    resumed: usize,
    /// Runs that resumed at another parallelism than their checkpoint's.
    rescaled: usize,
    /// The final run's stderr.
    last_stderr: String,
}

impl Runs {
    fn count(&mut self, stderr: &str) {
        self.resumed += usize::from(stderr.contains("resuming from checkpoint"));
        self.rescaled += usize::from(stderr.contains("the checkpoint's state spread from"));
    }
}

/// Whether the state directory `state` (local, or `s3://lake/...`) holds a
/// complete checkpoint.
fn has_checkpoint(server: &dyn StoreServer, state: &str) -> bool {
    match state.strip_prefix(&format!("{}://lake/", server.scheme())) {
        Some(prefix) => server
            .bucket(prefix)
            .list()
            .unwrap()
            .iter()
            .any(|o| o.name.ends_with("/MANIFEST")),
        None => std::fs::read_dir(state).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.path().join("MANIFEST").exists())
        }),
    }
}

/// The same on Azure Blob Storage (Azurite): `az://` sinks and state
/// through kills and rescales, exact; a Delta table there read back by
/// eddy.
#[test]
fn sinks_and_checkpoints_on_azure_are_exact_through_kills() {
    let azurite = Azurite::start();
    let dir = tempfile::tempdir().unwrap();
    exact_through_kills(&azurite, dir.path(), "az://lake/state/job", &[]);
    let job = dir.path().join("delta.sql");
    std::fs::write(
        &job,
        "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR)
           WITH (connector = 'generator', stream = 'orders', count = '20000', seed = '5');
         CREATE TABLE lake (order_id VARCHAR, country VARCHAR) WITH (connector = 'delta', path = 'az://lake/delta');
         INSERT INTO lake SELECT order_id, country FROM orders;",
    )
    .unwrap();
    let out = azurite
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args(["--state-dir", "az://lake/state/delta"])
        .output()
        .unwrap();
    common::assert_success(&out, "a Delta table on Azure");
    assert_eq!(
        delta_counts(&azurite, "az://lake/delta", dir.path()),
        (20000, 20000)
    );
}

#[test]
fn sinks_on_a_bucket_are_exact_through_kills() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state").display().to_string();
    exact_through_kills(&server, dir.path(), &state, &[]);
}

/// The orders read from an NDJSON object in the bucket (`--input
/// orders=s3://...`, ranged reads): the same rows as from a local copy of
/// the file, and a killed job resumes reading at its checkpointed offset.
#[test]
fn a_file_source_in_a_bucket_reads_like_a_local_file_and_resumes_at_its_offset() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let text = common::generated_ndjson(GeneratedStream::Orders, 300_000);
    let local = dir.path().join("orders.ndjson");
    std::fs::write(&local, &text).unwrap();
    server.bucket("in/orders.ndjson").put("", text).unwrap();
    let job = write_job(dir.path());
    for (input, out) in [
        (local.display().to_string(), "from_local"),
        ("s3://lake/in/orders.ndjson".to_string(), "from_bucket"),
    ] {
        let result = server
            .eddy()
            .args(["run", "--quiet"])
            .arg(&job)
            .args(["--set", "ROWS=0", "--set", &format!("OUT=s3://lake/{out}")])
            .args(["--input", &format!("orders={input}")])
            .output()
            .unwrap();
        common::assert_success(&result, &input);
        server.download(out, &dir.path().join(out));
    }
    let from_local = rows_of(&dir.path().join("from_local"));
    assert!(from_local["big"].len() > 1000);
    assert!(rows_of(&dir.path().join("from_bucket")) == from_local);
    let stderr = exact_through_kills(
        &server,
        dir.path(),
        "s3://lake/state/from_bucket",
        &["--input", "orders=s3://lake/in/orders.ndjson"],
    );
    assert!(!stderr.contains("error"), "{stderr}");
}

/// Output and checkpoints both in the bucket, nothing shared on the local
/// disk: every run starts from an empty working copy, so a run that
/// resumes does so from the checkpoints in the bucket.
#[test]
fn checkpoints_in_a_bucket_resume_a_killed_job_exactly() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    exact_through_kills(&server, dir.path(), "s3://lake/state/job", &[]);
    // The bucket holds the finished job's complete checkpoints (a
    // manifest each, written last) and no working copy is left behind.
    let names: Vec<String> = server.names("state/job");
    let manifests = names.iter().filter(|n| n.ends_with("/MANIFEST")).count();
    assert!(
        (1..=3).contains(&manifests),
        "retention keeps at most three checkpoints: {names:?}"
    );
    assert!(names.iter().any(|n| n.ends_with("/COMMITTED")), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with(".arrow")), "{names:?}");
    // Started again, the job finds its work done in the bucket.
    let again = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(dir.path().join("job.sql"))
        .args(["--set", "ROWS=300000", "--set", "OUT=s3://lake/killed"])
        .args(["--state-dir", "s3://lake/state/job"])
        .output()
        .unwrap();
    common::assert_success(&again, "the finished job started again");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already finished"), "{stderr}");
}

/// Parquet written to the bucket read back by a `parquet` source (ranged
/// reads of footers and the column chunks asked for, Hive partitions from
/// the object names, a pushed-down filter): the same rows as the same
/// source over a local copy of the directory.
#[test]
fn a_parquet_source_reads_a_bucket_prefix_like_a_local_directory() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path());
    let written = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args(["--set", "ROWS=20000", "--set", "OUT=s3://lake/written"])
        .output()
        .unwrap();
    common::assert_success(&written, "writing Parquet to the bucket");
    let local = dir.path().join("written");
    server.download("written", &local);
    let read = dir.path().join("read.sql");
    std::fs::write(
        &read,
        "CREATE TABLE pc (w BIGINT, n BIGINT, total DOUBLE, country VARCHAR)
           WITH (connector = 'parquet', path = '${SRC}');
         CREATE TABLE all_rows (w BIGINT, n BIGINT, total DOUBLE, country VARCHAR) WITH (connector = 'stdout');
         CREATE TABLE filtered (w BIGINT, n BIGINT) WITH (connector = 'stdout');
         INSERT INTO all_rows SELECT * FROM pc;
         INSERT INTO filtered SELECT w, n FROM pc WHERE country = 'GB' AND total > 40;",
    )
    .unwrap();
    let lines = |source: String| {
        let out = server
            .eddy()
            .args(["run", "--quiet"])
            .arg(&read)
            .args(["--set", &format!("SRC={source}")])
            .output()
            .unwrap();
        common::assert_success(&out, &source);
        common::sorted(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_string)
                .collect(),
        )
    };
    let from_local = lines(local.join("per_country").display().to_string());
    assert!(
        from_local
            .iter()
            .filter(|l| l.starts_with("FILTERED>"))
            .count()
            > 10
    );
    assert!(
        from_local
            .iter()
            .filter(|l| l.starts_with("ALL_ROWS>"))
            .count()
            > 100
    );
    assert_eq!(
        lines("s3://lake/written/per_country".to_string()),
        from_local
    );
    // One file named by its full object path reads alone.
    let one = server
        .bucket("written/per_country")
        .list()
        .unwrap()
        .into_iter()
        .find(|o| o.name.starts_with("country=GB/"))
        .unwrap();
    let single = lines(format!("s3://lake/written/per_country/{}", one.name));
    assert!(!single.is_empty() && single.len() < from_local.len());
}

/// A savepoint taken from checkpoints in the bucket into the bucket
/// (`eddy savepoint --state-dir s3://... s3://...`) starts the job
/// again with a fresh state directory (`--from-savepoint s3://...`), and
/// the bucket ends with exactly the uninterrupted run's rows.
#[test]
fn a_savepoint_in_a_bucket_moves_a_job_to_a_fresh_state_directory() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path());
    let rows = "ROWS=300000";
    let expected = uninterrupted_rows(&server, &job, rows, &[], dir.path());

    let state = "s3://lake/state/before";
    let mut first = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args(["--set", rows, "--set", "OUT=s3://lake/moved"])
        .args(["--state-dir", state, "--checkpoint-interval", "100ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while !has_checkpoint(&server, state) {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the job ended before a checkpoint"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let taken = server
        .eddy()
        .args([
            "savepoint",
            "--state-dir",
            state,
            "s3://lake/savepoints/one",
        ])
        .output()
        .unwrap();
    common::assert_success(&taken, "eddy savepoint into the bucket");
    let names: Vec<String> = server.names("savepoints/one");
    assert!(
        names.contains(&"SAVEPOINT".to_string()) && names.contains(&"MANIFEST".to_string()),
        "{names:?}"
    );
    let again = server
        .eddy()
        .args([
            "savepoint",
            "--state-dir",
            state,
            "s3://lake/savepoints/one",
        ])
        .output()
        .unwrap();
    assert!(
        !again.status.success(),
        "a savepoint over another is refused"
    );

    let resumed = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args(["--set", rows, "--set", "OUT=s3://lake/moved"])
        .args(["--from-savepoint", "s3://lake/savepoints/one"])
        .arg("--state-dir")
        .arg(dir.path().join("fresh-state"))
        .env("EDDY_LOG", "info")
        .output()
        .unwrap();
    common::assert_success(&resumed, "the run from the savepoint");
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(stderr.contains("savepoint"), "{stderr}");
    let moved = dir.path().join("moved");
    server.download("moved", &moved);
    assert!(
        rows_of(&moved) == expected,
        "the rows differ after the move"
    );
}

/// A Delta table in the bucket (data files uploaded under their final
/// names, commits by put-if-absent): a job killed again and again with its
/// state in the bucket too leaves the rows an uninterrupted run leaves in
/// a local table, as the `deltalake` package reads them from the bucket,
/// and eddy's own Delta source reads them back.
#[test]
fn a_delta_table_in_a_bucket_is_exact_through_kills() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("delta.sql");
    std::fs::write(
        &job,
        "CREATE TABLE orders (
           order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
           event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
           WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
         ) WITH (connector = 'generator', stream = 'orders', count = '300000', seed = '5');
         CREATE TABLE lake (order_id VARCHAR, country VARCHAR, order_amount DOUBLE)
           WITH (connector = 'delta', path = '${OUT}', partition_by = 'country', target_file_size = '256KB');
         INSERT INTO lake SELECT order_id, country, order_amount FROM orders;",
    )
    .unwrap();
    let local = dir.path().join("expected_delta");
    let started = Instant::now();
    let baseline = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args(["--set", &format!("OUT={}", local.display())])
        .output()
        .unwrap();
    common::assert_success(&baseline, "the uninterrupted run");
    let took = started.elapsed();
    let state = "s3://lake/state/delta";
    let run = || {
        let mut command = server.eddy();
        command
            .args(["run", "--quiet"])
            .arg(&job)
            .args(["--set", "OUT=s3://lake/delta"])
            .args(["--state-dir", state, "--checkpoint-interval", "100ms"])
            .env("EDDY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    };
    let Runs { kills, resumed, .. } = kill_and_finish(&server, &run, state, took);
    assert!(
        kills >= 2 && resumed >= 1,
        "{kills} kills, {resumed} resumed runs"
    );
    let dump = |table: &str| {
        let out = Command::new(common::repo_root().join("scripts/bucket-read.py.sh"))
            .args(["--delta", table])
            .envs(server.env())
            .output()
            .unwrap();
        common::assert_success(&out, &format!("deltalake reading {table}"));
        String::from_utf8(out.stdout).unwrap()
    };
    let expected = dump(&local.display().to_string());
    assert_eq!(expected.lines().count(), 300_000);
    assert!(
        dump("s3://lake/delta") == expected,
        "the bucket's Delta table differs after {kills} kills"
    );
    // eddy's Delta source over the bucket.
    assert_eq!(
        delta_counts(&server, "s3://lake/delta", dir.path()),
        (300_000, 300_000)
    );
    eprintln!("delta in a bucket: {kills} kills, {resumed} resumed runs, deltalake reads the uninterrupted run's rows");
}

/// The rows and distinct `order_id`s of the Delta table at `table`, as
/// eddy's Delta source reads them (a job file written under `dir`).
fn delta_counts(server: &dyn StoreServer, table: &str, dir: &Path) -> (u64, u64) {
    let read = dir.join("read.sql");
    std::fs::write(
        &read,
        format!(
            "CREATE TABLE lake (order_id VARCHAR) WITH (connector = 'delta', path = '{table}');
             CREATE TABLE n (c BIGINT, d BIGINT) WITH (connector = 'stdout');
             INSERT INTO n SELECT count(*), count(DISTINCT order_id) FROM lake;"
        ),
    )
    .unwrap();
    let out = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&read)
        .output()
        .unwrap();
    common::assert_success(&out, &format!("eddy reading the Delta table {table}"));
    let printed = String::from_utf8_lossy(&out.stdout);
    let last = printed.lines().last().unwrap_or_default();
    let json = last.find('{').map_or(last, |at| &last[at..]);
    let row: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {printed}"));
    (row["c"].as_u64().unwrap(), row["d"].as_u64().unwrap())
}

/// Merging Delta sinks in a bucket (an upsert per key: a MERGE commit per
/// checkpoint), one compacted every 4 commits, both vacuumed with no
/// retention: deltalake reads from the bucket the tables a run to the local
/// disk leaves; the log holds OPTIMIZE commits, and vacuum deleted the
/// objects no version reads any more.
#[test]
fn merging_delta_tables_in_a_bucket_compact_and_vacuum_as_on_a_local_disk() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("merge.sql");
    std::fs::write(
        &job,
        "CREATE TABLE payments (
           payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR
         ) WITH (connector = 'generator', stream = 'payments', count = '60000', rate = '20000', realtime = 'true', seed = '7');
         CREATE TABLE per_suffix (suffix VARCHAR NOT NULL, n BIGINT, total DOUBLE, PRIMARY KEY (suffix) NOT ENFORCED)
           WITH (connector = 'delta', path = '${OUT}/per_suffix', vacuum_retention = '0s');
         CREATE TABLE latest (payment_id VARCHAR NOT NULL, method VARCHAR, paid_amount DOUBLE, PRIMARY KEY (payment_id) NOT ENFORCED)
           WITH (connector = 'delta', path = '${OUT}/latest', optimize_every = '4', vacuum_retention = '0s');
         INSERT INTO per_suffix SELECT right(payment_id, 2), count(*), round(sum(paid_amount), 2)
           FROM payments GROUP BY right(payment_id, 2);
         INSERT INTO latest SELECT payment_id, method, paid_amount FROM payments WHERE payment_id LIKE '%7';",
    )
    .unwrap();
    let run = |out: &str, state: &Path| {
        let out = server
            .eddy()
            .args(["run", "--quiet"])
            .arg(&job)
            .args(["--set", &format!("OUT={out}")])
            .arg("--state-dir")
            .arg(state)
            .args(["--checkpoint-interval", "100ms"])
            .output()
            .unwrap();
        common::assert_success(&out, "the merging job");
    };
    let local = dir.path().join("local");
    run(
        &local.display().to_string(),
        &dir.path().join("state-local"),
    );
    run("s3://lake/merge", &dir.path().join("state-bucket"));
    let dump = |table: &str| {
        let out = Command::new(common::repo_root().join("scripts/bucket-read.py.sh"))
            .args(["--delta", table])
            .envs(server.env())
            .output()
            .unwrap();
        common::assert_success(&out, &format!("deltalake reading {table}"));
        String::from_utf8(out.stdout).unwrap()
    };
    for table in ["per_suffix", "latest"] {
        let expected = dump(&local.join(table).display().to_string());
        assert!(expected.lines().count() >= 100, "{table}: {expected}");
        assert!(
            dump(&format!("s3://lake/merge/{table}")) == expected,
            "{table}: the bucket's table differs from the local disk's"
        );
    }
    let latest = server.bucket("merge/latest");
    let objects = latest.list().unwrap();
    let log: Vec<String> = objects
        .iter()
        .filter(|o| o.name.starts_with("_delta_log/") && o.name.ends_with(".json"))
        .map(|o| String::from_utf8(latest.get(&o.name).unwrap().unwrap()).unwrap())
        .collect();
    assert!(
        log.iter().any(|commit| commit.contains("\"OPTIMIZE\"")),
        "compacted in the bucket ({} commits)",
        log.len()
    );
    let added = log
        .iter()
        .map(|c| c.matches("\"add\":").count())
        .sum::<usize>();
    let parquet = objects
        .iter()
        .filter(|o| !o.name.starts_with("_delta_log/") && o.name.ends_with(".parquet"))
        .count();
    assert!(
        parquet < added,
        "vacuum deleted replaced files: {parquet} objects for {added} files ever added"
    );
}

/// `eddy serve --output-root s3://lake/jobs`: a submitted job's relative
/// sink path lands under the prefix; a path outside it is refused at
/// submission, naming the root; the server's or its groups' state inside
/// it is refused at start.
#[test]
fn a_server_with_a_bucket_output_root_keeps_jobs_inside_it() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let mut command = common::serve_command(
        &dir.path().join("data"),
        Path::new("s3://lake/jobs"),
        &dir.path().join("state"),
        "100ms",
    );
    command.envs(server.env());
    let (mut child, base) = common::spawn_server(command);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let submit = |sink_path: &str| {
        let sql = format!(
            "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR)
               WITH (connector = 'generator', stream = 'orders', count = '5000', seed = '5');
             CREATE TABLE out (order_id VARCHAR, country VARCHAR) WITH (connector = 'parquet', path = '{sink_path}');
             INSERT INTO out SELECT order_id, country FROM orders;"
        );
        let mut response = agent
            .post(format!("{base}/api/v1/jobs"))
            .send_json(serde_json::json!({ "name": "to-bucket", "sql": sql }))
            .unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.body_mut().read_json().unwrap();
        (status, body)
    };
    let (status, job) = submit("orders");
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut response = agent
            .get(format!("{base}/api/v1/jobs/{id}"))
            .call()
            .unwrap();
        let job: serde_json::Value = response.body_mut().read_json().unwrap();
        if job["state"] == "finished" {
            break;
        }
        assert!(job["state"] != "failed", "{job}");
        assert!(Instant::now() < deadline, "the job did not finish: {job}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let written = server.bucket("jobs/orders").list().unwrap();
    assert!(
        written.iter().any(|o| o.name.ends_with(".parquet")),
        "{written:?}"
    );
    for outside in ["s3://lake/elsewhere", "../elsewhere", "/tmp/x"] {
        let (status, body) = submit(outside);
        assert_eq!(status, 400, "{outside}: {body}");
        assert!(
            body.to_string().contains("s3://lake/jobs"),
            "{outside}: {body}"
        );
    }
    // Nor another store for a path inside the root: the server's settings
    // are every job's.
    let (status, body) = submit("inside', 'storage.endpoint' = 'http://127.0.0.1:1");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains("the server's storage settings"),
        "{body}"
    );
    let _ = child.kill();
    let _ = child.wait();
    // State in the bucket, but not where jobs write.
    let local_state = dir.path().join("state").display().to_string();
    for (state, group_state, refusal) in [
        (
            local_state.as_str(),
            "s3://lake/jobs/groups",
            "inside --output-root",
        ),
        (
            "s3://lake/jobs/state",
            "s3://lake/groups",
            "inside --output-root",
        ),
    ] {
        let mut command = common::serve_command(
            &dir.path().join("data"),
            Path::new("s3://lake/jobs"),
            Path::new(state),
            "100ms",
        );
        command
            .args(["--group-state-dir", group_state])
            .envs(server.env());
        let out = refused_at_start(command);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(refusal),
            "{state} {group_state}: {stderr}"
        );
    }
}

/// `eddy serve --state-dir s3://lake/server`: the server's jobs, their
/// checkpoints and savepoints are kept in the bucket. A server killed while
/// its job runs is replaced by one on "another machine" (directories of
/// its own, nothing shared but the bucket), which waits out the dead one's
/// lease and resumes the job from its checkpoint there: the output is
/// exactly an uninterrupted run's. A server started on the same state
/// while one lives is refused; a savepoint goes to the bucket.
#[test]
fn a_server_with_its_state_in_a_bucket_is_replaced_on_another_machine() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path());
    let rows = "ROWS=400000";
    let expected = uninterrupted_rows(&s3, &job, rows, &[], dir.path());

    let server = |name: &str| {
        let home = dir.path().join(name);
        std::fs::create_dir_all(home.join("data")).unwrap();
        std::fs::create_dir_all(home.join("tmp")).unwrap();
        let mut command = common::serve_command(
            &home.join("data"),
            Path::new("s3://lake/jobs"),
            Path::new("s3://lake/server"),
            "100ms",
        );
        command.envs(s3.env()).env("TMPDIR", home.join("tmp"));
        command
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let job_view = |base: &str, id: &str| -> serde_json::Value {
        agent
            .get(format!("{base}/api/v1/jobs/{id}"))
            .call()
            .unwrap()
            .body_mut()
            .read_json()
            .unwrap()
    };
    let (mut a, base_a) = common::spawn_server(server("a"));
    let mut response = agent
        .post(format!("{base_a}/api/v1/jobs"))
        .send_json(serde_json::json!({
            "name": "replaced",
            "sql": JOB,
            "params": { "ROWS": "400000", "OUT": "replaced" },
        }))
        .unwrap();
    let submitted: serde_json::Value = response.body_mut().read_json().unwrap();
    let id = submitted["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{submitted}"))
        .to_string();
    // Killed once the job has a checkpoint in the bucket.
    let state = format!("s3://lake/server/jobs/{id}/state");
    let started = Instant::now();
    while !has_checkpoint(&s3, &state) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no checkpoint in {state}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(job_view(&base_a, &id)["state"], "running", "killed mid-run");
    a.kill().unwrap(); // SIGKILL
    let _ = a.wait();
    assert!(
        s3.bucket(&format!("server/jobs/{id}"))
            .list()
            .unwrap()
            .iter()
            .any(|o| o.name == "job.json"),
        "the job's record is in the bucket"
    );

    // Another machine: waits out the dead server's lease, then resumes.
    let (mut b, base_b) = common::spawn_server(server("b"));
    // A third server on the same state while that one lives is refused.
    let third = std::thread::spawn({
        let command = server("c");
        move || refused_at_start(command)
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let view = loop {
        let view = job_view(&base_b, &id);
        if view["state"] != "running" {
            break view;
        }
        assert!(Instant::now() < deadline, "still running: {view}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(view["state"], "finished", "{view}");
    assert!(
        view["checkpoints"]["restored_from"]
            .as_u64()
            .is_some_and(|c| c >= 1),
        "resumed from the bucket: {view}"
    );
    s3.download("jobs/replaced", &dir.path().join("replaced"));
    assert!(
        rows_of(&dir.path().join("replaced")) == expected,
        "the replaced server's output differs from the uninterrupted run's"
    );
    let refused = third.join().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("another server holds this state directory"),
        "{stderr}"
    );

    // A savepoint of a job on this server lands in the bucket.
    let mut response = agent
        .post(format!("{base_b}/api/v1/jobs"))
        .send_json(serde_json::json!({
            "name": "saved",
            "sql": JOB,
            "params": { "ROWS": "400000", "OUT": "saved" },
        }))
        .unwrap();
    let submitted: serde_json::Value = response.body_mut().read_json().unwrap();
    let saved = submitted["id"].as_str().unwrap().to_string();
    while !has_checkpoint(&s3, &format!("s3://lake/server/jobs/{saved}/state")) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut response = agent
        .post(format!("{base_b}/api/v1/jobs/{saved}/stop"))
        .send_json(serde_json::json!({ "savepoint": true }))
        .unwrap();
    let stopped: serde_json::Value = response.body_mut().read_json().unwrap();
    let savepoint = stopped["savepoints"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{stopped}"))
        .to_string();
    let objects: Vec<String> = s3.names(&format!("server/savepoints/{savepoint}"));
    assert!(objects.iter().any(|n| n == "SAVEPOINT"), "{objects:?}");
    let _ = b.kill();
    let _ = b.wait();
}

#[test]
fn views_and_tables_declared_over_the_postgresql_port_move_with_bucket_state() {
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let orders =
        common::generated_ndjson(eddy_connectors::generator::GeneratedStream::Orders, 2000);
    // Two machines: each its own data directory (the same orders file) and
    // TMPDIR; the state is the bucket's.
    let server = |name: &str| {
        let home = dir.path().join(name);
        std::fs::create_dir_all(home.join("data")).unwrap();
        std::fs::create_dir_all(home.join("tmp")).unwrap();
        std::fs::write(home.join("data/orders.ndjson"), &orders).unwrap();
        let mut command = common::serve_command(
            &home.join("data"),
            &home.join("output"),
            Path::new("s3://lake/pgstate"),
            "100ms",
        );
        command
            .args(["--pg-addr", "127.0.0.1:0", "--view-refresh", "100ms"])
            .envs(s3.env())
            .env("TMPDIR", home.join("tmp"));
        common::spawn_server_logged(command, true)
    };
    let psql = |pg, sql: &str| common::psql(pg, sql, "disable");
    let per_customer = "SELECT customer_id, count(*) AS orders FROM orders GROUP BY customer_id";
    let read = |pg| psql(pg, "SELECT * FROM per_customer ORDER BY customer_id");
    let wait_finished = |pg, job: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let state = psql(
                pg,
                &format!("SELECT state FROM eddy.jobs WHERE name = '{job}'"),
            )
            .unwrap();
            if state.trim() == "finished" {
                return;
            }
            assert!(Instant::now() < deadline, "{job}: {state}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    let mut a = server("a");
    let pg_a = a.pg.unwrap();
    psql(
        pg_a,
        "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR) \
         WITH (connector = 'file', path = 'orders.ndjson')",
    )
    .unwrap();
    psql(
        pg_a,
        &format!("CREATE MATERIALIZED VIEW per_customer AS {per_customer}"),
    )
    .unwrap();
    wait_finished(pg_a, "view per_customer");
    let rows = read(pg_a).unwrap();
    assert!(rows.lines().count() > 10, "{rows}");
    assert!(
        s3.names("pgstate/pg").iter().any(|n| n == "catalog.json"),
        "the session catalog is in the bucket"
    );
    a.child.kill().unwrap(); // SIGKILL
    let _ = a.child.wait();

    // Another machine, sharing only the bucket: the view answers the same
    // (its job had ended: restored from its last checkpoint), and the
    // table declared on the first is known.
    let mut b = server("b");
    let pg_b = b.pg.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let moved = loop {
        match read(pg_b) {
            Ok(moved) if !moved.is_empty() => break moved,
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(moved, rows, "the view on the second machine");
    psql(
        pg_b,
        "CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM orders",
    )
    .unwrap();
    wait_finished(pg_b, "view total");
    let deadline = Instant::now() + Duration::from_secs(60);
    while psql(pg_b, "SELECT n FROM total").unwrap().trim() != "2000" {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            psql(pg_b, "SELECT n FROM total")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = b.child.kill();
    let _ = b.child.wait();
}

/// Runs a server command that must refuse to start: its output, or a
/// failure (the server killed) if it is still running after 60 s.
fn refused_at_start(mut command: Command) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the server started: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A YAML file of the repository as JSON.
fn yaml(path: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(common::repo_root().join(path)).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .collect()
}

/// `${NAME:-default}` as its default.
fn compose_default(value: &str) -> String {
    match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
        Some(inner) => inner
            .split_once(":-")
            .map(|(_, d)| d)
            .unwrap_or_default()
            .to_string(),
        None => value.to_string(),
    }
}

/// Starts `eddy <args>` as a deployment file writes it (its address and
/// state directory swapped for this machine's, its store for `s3`),
/// submits a job writing `sink` below the output root, waits for it to
/// finish, and returns the objects written there.
fn serve_as_deployed(
    s3: &S3Server,
    args: &[String],
    env: &[(String, String)],
    token: &str,
    sink: &str,
) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| match a.as_str() {
            "0.0.0.0:8080" => "127.0.0.1:0".to_string(),
            "/state" => dir.path().join("state").display().to_string(),
            other => other.to_string(),
        })
        .collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command
        .args(&args)
        .current_dir(dir.path())
        .env_remove("EDDY_TOKEN")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(s3.env())
        .stdout(Stdio::null());
    let (mut child, base) = common::spawn_server(command);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let health = agent.get(format!("{base}/healthz")).call().unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let sql = format!(
        "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR)
           WITH (connector = 'generator', stream = 'orders', count = '1000');
         CREATE TABLE out (order_id VARCHAR) WITH (connector = 'parquet', path = '{sink}');
         INSERT INTO out SELECT order_id FROM orders;"
    );
    let auth = format!("Bearer {token}");
    let mut response = agent
        .post(format!("{base}/api/v1/jobs"))
        .header("Authorization", &auth)
        .send_json(serde_json::json!({ "name": "deployed", "sql": sql }))
        .unwrap();
    let job: serde_json::Value = response.body_mut().read_json().unwrap();
    let id = job["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{job}"))
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut response = agent
            .get(format!("{base}/api/v1/jobs/{id}"))
            .header("Authorization", &auth)
            .call()
            .unwrap();
        let job: serde_json::Value = response.body_mut().read_json().unwrap();
        if job["state"] == "finished" {
            break;
        }
        assert!(
            job["state"] != "failed" && Instant::now() < deadline,
            "{job}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    s3.names(&format!("output/{sink}"))
}

/// The deployment files run against the binary built here: the compose
/// file's and the Kubernetes Deployment's server command lines serve (a
/// job submitted with the Secret's token writes below the bucket output
/// root), ports and probes agree, and the StatefulSet's job compiles with
/// the flags it is started with.
#[test]
fn the_deployment_files_run_against_this_binary() {
    let s3 = S3Server::start();
    let as_strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };

    // docker/compose.s3.yaml
    let compose = &yaml("docker/compose.s3.yaml")[0]["services"];
    let eddy = &compose["eddy"];
    let env: Vec<(String, String)> = eddy["environment"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), compose_default(v.as_str().unwrap())))
        .filter(|(k, _)| k != "AWS_ENDPOINT_URL")
        .collect();
    assert_eq!(
        eddy["environment"]["AWS_ENDPOINT_URL"], "http://s3:9000",
        "the server reaches the store's service"
    );
    let store_args: Vec<String> = as_strings(&compose["s3"]["command"])
        .iter()
        .map(|a| compose_default(a))
        .collect();
    let key = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(store_args[1], key("AWS_ACCESS_KEY_ID").unwrap());
    assert_eq!(store_args[3], key("AWS_SECRET_ACCESS_KEY").unwrap());
    let dockerfile =
        std::fs::read_to_string(common::repo_root().join("docker/s3.Dockerfile")).unwrap();
    assert!(dockerfile.contains(r#""--port", "9000""#));
    let written = serve_as_deployed(&s3, &as_strings(&eddy["command"]), &env, "", "compose");
    assert!(
        written.iter().any(|n| n.ends_with(".parquet")),
        "{written:?}"
    );

    // deploy/kubernetes
    let secret = yaml("deploy/kubernetes/secret.yaml").remove(0);
    let env: Vec<(String, String)> = secret["stringData"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .filter(|(k, _)| !k.starts_with("AWS_"))
        .collect();
    let server = yaml("deploy/kubernetes/server.yaml");
    let kind = |docs: &[serde_json::Value], kind: &str| {
        docs.iter().find(|d| d["kind"] == kind).unwrap().clone()
    };
    let deployment = kind(&server, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["envFrom"][0]["secretRef"]["name"],
        secret["metadata"]["name"]
    );
    let args = as_strings(&container["args"]);
    let addr = &args[args.iter().position(|a| a == "--addr").unwrap() + 1];
    let port: u64 = addr.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(container["ports"][0]["containerPort"], port);
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], port, "{probe}");
        assert_eq!(container[probe]["httpGet"]["path"], "/healthz", "{probe}");
    }
    assert_eq!(
        kind(&server, "Service")["spec"]["ports"][0]["targetPort"],
        port
    );
    // No volume: the state is in the bucket, the working copy in /tmp.
    let state = &args[args.iter().position(|a| a == "--state-dir").unwrap() + 1];
    assert!(
        state.starts_with("s3://lake/"),
        "server state in the bucket: {state}"
    );
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/tmp");
    assert!(!server
        .iter()
        .any(|doc| doc["kind"] == "PersistentVolumeClaim"));
    let token = secret["stringData"]["EDDY_TOKEN"].as_str().unwrap();
    let written = serve_as_deployed(&s3, &args, &env, token, "kubernetes");
    assert!(
        written.iter().any(|n| n.ends_with(".parquet")),
        "{written:?}"
    );

    // The group workers' job compiles, and its flags are `eddy run`'s.
    let workers = yaml("deploy/kubernetes/group-workers.yaml");
    let sql = kind(&workers, "ConfigMap")["data"]["job.sql"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.sql"), sql).unwrap();
    let explained = s3
        .eddy()
        .arg("explain")
        .arg(dir.path().join("job.sql"))
        .output()
        .unwrap();
    common::assert_success(&explained, "the group workers' job");
    let set = kind(&workers, "StatefulSet");
    let container = &set["spec"]["template"]["spec"]["containers"][0];
    let args = as_strings(&container["args"]);
    assert_eq!(args[0], "run");
    let help = s3.eddy().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        assert!(help.contains(flag.as_str()), "eddy run has no {flag}");
    }
    let mounts: Vec<String> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap().to_string())
        .collect();
    assert!(
        mounts.iter().any(|m| args[1].starts_with(&format!("{m}/"))),
        "the SQL is mounted"
    );
    // The pods share no disk: the tasks' state is in the bucket, each
    // pod's working copies under its own writable /tmp.
    let state = &args[args.iter().position(|a| a == "--state-dir").unwrap() + 1];
    assert!(
        state.starts_with("s3://lake/"),
        "group state in the bucket: {state}"
    );
    assert!(
        mounts.iter().any(|m| m == "/tmp"),
        "a working directory: {mounts:?}"
    );
    assert!(
        !workers
            .iter()
            .any(|doc| doc["kind"] == "PersistentVolumeClaim"),
        "no shared volume"
    );
}

/// The store goes away for a few seconds while a job writes its output
/// and checkpoints there: the job rides it out (the client retries), or
/// fails naming the bucket and resumes from its last checkpoint; either
/// way the bucket ends with exactly the uninterrupted run's rows.
#[test]
fn a_store_outage_mid_run_loses_and_repeats_nothing() {
    let mut server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path());
    let rows = "ROWS=300000";
    let expected = uninterrupted_rows(&server, &job, rows, &[], dir.path());

    let run = |server: &S3Server| {
        let mut command = server.eddy();
        command
            .args(["run", "--quiet"])
            .arg(&job)
            .args(["--set", rows, "--set", "OUT=s3://lake/outage"])
            .args(["--state-dir", "s3://lake/state/outage"])
            .args(["--checkpoint-interval", "100ms"])
            .env("EDDY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    };
    let child = run(&server).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    server.outage(Duration::from_secs(3));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let rode_it_out = out.status.success();
    if !rode_it_out {
        assert!(
            stderr.contains("s3://lake/"),
            "the failure names the bucket: {stderr}"
        );
        let again = run(&server).output().unwrap();
        common::assert_success(&again, "the run after the outage");
        let stderr = String::from_utf8_lossy(&again.stderr);
        assert!(stderr.contains("resuming from checkpoint"), "{stderr}");
    }
    let copy = dir.path().join("outage");
    server.download("outage", &copy);
    assert!(
        rows_of(&copy) == expected,
        "the bucket's rows differ after the outage"
    );
    eprintln!(
        "a 3 s store outage: {}",
        if rode_it_out {
            "the job retried through it".to_string()
        } else {
            format!(
                "the job failed and resumed: {}",
                stderr.lines().last().unwrap_or_default()
            )
        }
    );
}

/// A Delta commit is a put-if-absent (`If-None-Match: *`): a second
/// writer of a version that exists is refused and the object keeps the
/// first writer's bytes. (Writers racing at the same instant are refused
/// by the store's atomic check on S3, GCS and Azure; the s3s-fs test
/// server checks and writes in two steps, so that race is not tested
/// here.)
#[test]
fn a_log_version_already_written_is_refused_to_another_writer() {
    let server = S3Server::start();
    let bucket = server.bucket("race/_delta_log");
    let version = "00000000000000000000.json";
    assert!(bucket.put_if_absent(version, b"first".to_vec()).unwrap());
    assert!(!bucket.put_if_absent(version, b"second".to_vec()).unwrap());
    assert_eq!(bucket.get(version).unwrap().unwrap(), b"first".to_vec());
}

/// A file larger than an upload part goes up as a multipart upload and
/// comes back whole, through a plain read and through the ranged reader
/// the sources use (across its chunk boundaries, from an offset too).
#[test]
fn a_large_file_goes_up_in_parts_and_reads_back_whole() {
    use std::io::Read;
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let bytes: Vec<u8> = (0..20_000_123).map(|_| rng.random::<u8>()).collect();
    let local = dir.path().join("big.bin");
    std::fs::write(&local, &bytes).unwrap();
    let bucket = server.bucket("large");
    bucket.upload(&local, "big.bin").unwrap();
    assert_eq!(bucket.size("big.bin").unwrap(), bytes.len() as u64);
    assert!(bucket.get("big.bin").unwrap().unwrap() == bytes);
    for offset in [0, 8 << 20, 12_345_678] {
        let mut read = Vec::new();
        eddy_connectors::storage::ObjectReader::open(&bucket, "big.bin", offset)
            .unwrap()
            .read_to_end(&mut read)
            .unwrap();
        assert!(read == bytes[offset as usize..], "from {offset}");
    }
}

#[test]
fn a_lease_in_the_bucket_has_one_holder_and_its_holder_learns_when_it_is_taken_over() {
    // What a group job's task is held by when its state is in a bucket
    // (the group takes a killed process's tasks over in tests/kafka.rs).
    use eddy_connectors::storage::{LeaseLost, LeaseWatch};
    let server = S3Server::start();
    let bucket = server.bucket("state/leases/task-0");
    let ttl = Duration::from_secs(2);
    let (mut watch_a, mut watch_b) = (LeaseWatch::default(), LeaseWatch::default());
    let a = watch_a
        .try_acquire(&bucket, "a", ttl)
        .unwrap()
        .expect("free at first");
    assert_eq!((a.epoch(), a.holder()), (1, "a"));
    // Held and renewed: another process does not get it, however long
    // it watches.
    let started = Instant::now();
    while started.elapsed() < ttl * 2 {
        assert!(watch_b.try_acquire(&bucket, "b", ttl).unwrap().is_none());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(a.check().is_ok());
    // Let go: the next asker gets it at once, as the next epoch.
    drop(a);
    let b = watch_b
        .try_acquire(&bucket, "b", ttl)
        .unwrap()
        .expect("released");
    assert_eq!(b.epoch(), 2);
    // Taken over behind its back (as by a process that found it silent
    // for its time to live): its holder is told at its next check, and
    // its renewing thread finds it too.
    assert!(bucket
        .put_if_absent(
            "00000000000000000003",
            br#"{"holder":"c","beat":0,"released":false}"#.to_vec()
        )
        .unwrap());
    let refused = b.check().unwrap_err();
    assert!(
        matches!(refused, LeaseLost::Superseded { epoch: 3, .. }),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("taken over by another process (epoch 3)"),
        "{refused}"
    );
    assert!(b.lost().is_some());
    // Its taker never renews it (died at once): a process that watched it
    // stand still for its time to live takes it; epochs before the
    // previous one are cleared as the lease moves on.
    drop(b);
    let mut watch_d = LeaseWatch::default();
    assert!(
        watch_d.try_acquire(&bucket, "d", ttl).unwrap().is_none(),
        "watched first"
    );
    std::thread::sleep(ttl + Duration::from_millis(200));
    let d = watch_d
        .try_acquire(&bucket, "d", ttl)
        .unwrap()
        .expect("silent for its time to live");
    assert_eq!(d.epoch(), 4);
    let names: Vec<String> = bucket.list().unwrap().into_iter().map(|o| o.name).collect();
    assert_eq!(names, ["00000000000000000003", "00000000000000000004"]);
}

/// A table's own `storage.` options reach a bucket the environment does
/// not describe (no AWS_* variables at all): a Parquet and a Delta sink
/// with the endpoint, region and keys as options, the secret read from a
/// variable named by `env:`; checkpoints hold none of it. A key the store
/// does not have, an unset variable and options on a local path are
/// refused by name.
#[test]
fn a_tables_storage_options_reach_a_bucket_the_environment_does_not_describe() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let sql = |storage: &str, parquet_path: &str| {
        format!(
            "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR)
               WITH (connector = 'generator', stream = 'orders', count = '20000', seed = '5');
             CREATE TABLE archive (order_id VARCHAR, country VARCHAR)
               WITH (connector = 'parquet', path = '{parquet_path}', {storage});
             CREATE TABLE lake (order_id VARCHAR, order_amount DOUBLE)
               WITH (connector = 'delta', path = 's3://lake/opts/delta', {storage});
             INSERT INTO archive SELECT order_id, country FROM orders;
             INSERT INTO lake SELECT order_id, order_amount FROM orders;"
        )
    };
    let storage = |secret: &str| {
        format!(
            "'storage.endpoint' = '{}', 'storage.allow_http' = 'true', 'storage.region' = 'us-east-1', \
             'storage.access_key_id' = '{}', 'storage.secret_access_key' = '{secret}'",
            server.endpoint(),
            common::s3::ACCESS_KEY
        )
    };
    let eddy = |sql: &str, state: &Path| {
        let job = dir.path().join("job.sql");
        std::fs::write(&job, sql).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
        for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
            command.env_remove(key);
        }
        command
            .args(["run", "--quiet"])
            .arg(&job)
            .arg("--state-dir")
            .arg(state)
            .env("LAKE_SECRET", common::s3::SECRET_KEY)
            .output()
            .unwrap()
    };
    let state = dir.path().join("state");
    let out = eddy(
        &sql(&storage("env:LAKE_SECRET"), "s3://lake/opts/archive"),
        &state,
    );
    common::assert_success(&out, "sinks configured by their options");
    let archive = dir.path().join("archive");
    server.download("opts/archive", &archive);
    let rows: usize = common::read_parquet_tree(&archive)
        .iter()
        .map(|(_, batch)| batch.num_rows())
        .sum();
    assert_eq!(rows, 20000);
    let log = server.bucket("opts/delta/_delta_log").list().unwrap();
    assert!(log.iter().any(|o| o.name.ends_with(".json")), "{log:?}");

    // A secret written as a literal reaches no checkpoint.
    let state = dir.path().join("state-literal");
    let out = eddy(
        &sql(&storage(common::s3::SECRET_KEY), "s3://lake/opts/again"),
        &state,
    );
    common::assert_success(&out, "a literal secret");
    let mut files = vec![state.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes
                    .windows(common::s3::SECRET_KEY.len())
                    .any(|w| w == common::s3::SECRET_KEY.as_bytes()),
                "{} holds the secret",
                path.display()
            );
        }
    }

    for (storage, path, refusal) in [
        (
            storage("env:LAKE_SECRET").replace("storage.region", "storage.regoin"),
            "s3://lake/opts/x",
            "storage.regoin",
        ),
        (
            storage("env:NOT_SET_ANYWHERE"),
            "s3://lake/opts/x",
            "NOT_SET_ANYWHERE is not set",
        ),
        (storage("env:LAKE_SECRET"), "opts-local", "is a local path"),
    ] {
        let out = eddy(&sql(&storage, path), &dir.path().join("state-refused"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(refusal),
            "{refusal}: {stderr}"
        );
        assert!(!stderr.contains(common::s3::SECRET_KEY), "{stderr}");
    }
}

#[test]
fn credentials_never_show() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path());
    // A path with credentials in it is refused without repeating them.
    let out = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args([
            "--set",
            "ROWS=10",
            "--set",
            "OUT=s3://AKIDEXAMPLE:hunter2@lake/x",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("credentials do not belong in a path"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("hunter2") && !stderr.contains("AKIDEXAMPLE"),
        "{stderr}"
    );
    // A wrong secret fails naming the object, never the secret.
    let out = server
        .eddy()
        .args(["run", "--quiet"])
        .arg(&job)
        .args(["--set", "ROWS=10", "--set", "OUT=s3://lake/denied"])
        .env("AWS_SECRET_ACCESS_KEY", "not-the-secret-xyz")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("s3://lake/denied"), "{stderr}");
    assert!(!stderr.contains("not-the-secret-xyz"), "{stderr}");
}

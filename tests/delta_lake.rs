//! Delta Lake tables, end to end through the `eddy` binary, checked by
//! readers that are not eddy (`tests/python/check_delta.py`: delta-rs's
//! `deltalake` package and polars, from the test environment):
//!
//! - the reference pipeline with every sink a Delta table: each table holds
//!   what its NDJSON sink writes;
//! - a table holds exactly what the NDJSON sink writes for the same query,
//!   partitioned or not, every type and NULL, with and without checkpoints;
//!   with checkpoints every commit is one checkpoint's and each earlier
//!   version reads back exactly the rows committed up to it;
//! - a job killed 100 times (SIGKILL) and resumed leaves the table an
//!   uninterrupted run leaves, with no checkpoint committed twice;
//! - Delta and Parquet (a Hive-partitioned directory) read back as sources
//!   give the rows of the original input, at batch sizes 1, 7 and 8192, and
//!   an earlier version of the table (time travel) gives that version's rows;
//! - a table of other columns is refused before the job runs, naming the
//!   column, and left untouched.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A Python with deltalake and polars: the test environment's.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("bash")
            .current_dir(common::repo_root())
            .args([
                "-c",
                "source scripts/python-env.sh && python_env deltalake==1.6.6 polars==2.1.0 >&2 && echo \"$VENV\"",
            ])
            .output()
            .unwrap();
        common::assert_success(&out, "the test environment's Python");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("bin/python")
    })
}

/// Runs the independent checker with `args`; returns what it printed.
fn check_delta(args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(common::repo_root().join("tests/python/check_delta.py"))
        .args(args)
        .output()
        .unwrap();
    common::assert_success(&out, &format!("check_delta.py {args:?}"));
    String::from_utf8(out.stdout).unwrap()
}

fn eddy(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command.current_dir(dir).env_remove("EDDY_PARALLELISM");
    command
}

fn input() -> String {
    let countries = [Some("US"), Some("DE"), Some("a/b é"), None];
    (0..200)
        .map(|i: i64| {
            let mut row = serde_json::Map::new();
            row.insert("id".into(), i.into());
            if i % 5 != 0 {
                row.insert("n".into(), (i * 3 - 40).into());
            }
            if i % 7 != 3 {
                row.insert("amount".into(), (i as f64 * 1.25 - 7.5).into());
            }
            row.insert("ok".into(), (i % 3 == 0).into());
            row.insert(
                "country".into(),
                countries[(i % 4) as usize].map_or(serde_json::Value::Null, Into::into),
            );
            row.insert("note".into(), format!("row \"{i}\" é,/").into());
            row.insert("ts".into(), (1_700_000_000_000 + i * 1_000).into());
            serde_json::Value::Object(row).to_string() + "\n"
        })
        .collect()
}

const COLUMNS: &str =
    "id BIGINT NOT NULL, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3)";

fn write_job(dir: &Path) {
    std::fs::write(dir.join("in.ndjson"), input()).unwrap();
    std::fs::write(
        dir.join("write.sql"),
        format!(
            "CREATE TABLE events ({COLUMNS}, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
               WITH (connector = 'file', path = 'in.ndjson');
             CREATE TABLE plain ({COLUMNS}) WITH (connector = 'ndjson', path = 'out/plain.ndjson');
             CREATE TABLE by_country ({COLUMNS})
               WITH (connector = 'delta', path = 'out/by_country', partition_by = 'country', target_file_size = '1KB');
             CREATE TABLE flat ({COLUMNS}) WITH (connector = 'delta', path = 'out/flat', compression = 'snappy');
             CREATE TABLE files ({COLUMNS}) WITH (connector = 'parquet', path = 'out/files', partition_by = 'country', rolling_rows = '30');
             INSERT INTO plain SELECT * FROM events;
             INSERT INTO by_country SELECT * FROM events;
             INSERT INTO flat SELECT * FROM events;
             INSERT INTO files SELECT * FROM events;"
        ),
    )
    .unwrap();
}

fn run_ok(command: &mut Command, what: &str) -> String {
    let out = command.output().unwrap();
    common::assert_success(&out, what);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_delta_table_holds_what_the_ndjson_sink_writes_and_reads_back_as_a_source() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write_job(dir);
    let summary = run_ok(
        eddy(dir).args(["run", "write.sql", "--batch-size", "10"]),
        "the writing job",
    );
    let plain = dir.join("out/plain.ndjson");
    let plain = plain.to_str().unwrap();
    let report = check_delta(&[
        "verify",
        dir.join("out/by_country").to_str().unwrap(),
        plain,
        "--partition-by",
        "country",
    ]);
    eprint!("{report}");
    let files: usize = report
        .split("; ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(files > 4, "target_file_size rolls files: {report}");
    // The run summary counts what each Delta sink committed.
    assert!(
        summary.contains("delta sink by_country: ")
            && summary.contains(&format!(" {files} files, ")),
        "{summary}"
    );
    assert!(
        summary.contains("delta sink flat: 1 commits, 1 files, "),
        "{summary}"
    );
    eprint!(
        "{}",
        check_delta(&["verify", dir.join("out/flat").to_str().unwrap(), plain])
    );

    // Appending a second run makes a second commit of the same rows.
    run_ok(eddy(dir).args(["run", "write.sql"]), "the second run");
    let twice = check_delta(&["dump", dir.join("out/flat").to_str().unwrap()]);
    let once = check_delta(&["dump", dir.join("out/flat").to_str().unwrap(), "1"]);
    assert_eq!(twice.lines().count(), 400);
    assert_eq!(once.lines().count(), 200, "version 1 is the first run's");

    // Read back: the Delta table (newest, and version 1), and the Parquet
    // directory with its partition column from the paths, at three batch
    // sizes, each equal to reading the original NDJSON.
    std::fs::write(
        dir.join("read.sql"),
        format!(
            "CREATE TABLE original ({COLUMNS}) WITH (connector = 'file', path = 'in.ndjson');
             CREATE TABLE lake ({COLUMNS}) WITH (connector = 'delta', path = 'out/by_country');
             CREATE TABLE first_run ({COLUMNS}) WITH (connector = 'delta', path = 'out/flat', version = '1');
             CREATE TABLE files ({COLUMNS}) WITH (connector = 'parquet', path = 'out/files');
             CREATE TABLE a (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
               WITH (connector = 'ndjson', path = 'back/original.ndjson');
             CREATE TABLE b (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
               WITH (connector = 'ndjson', path = 'back/lake.ndjson');
             CREATE TABLE c (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
               WITH (connector = 'ndjson', path = 'back/first_run.ndjson');
             CREATE TABLE d (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
               WITH (connector = 'ndjson', path = 'back/files.ndjson');
             INSERT INTO a SELECT * FROM original;
             INSERT INTO b SELECT * FROM lake;
             INSERT INTO c SELECT * FROM first_run;
             INSERT INTO d SELECT * FROM files;"
        ),
    )
    .unwrap();
    let mut outputs = Vec::new();
    for batch_size in ["1", "7", "8192"] {
        let _ = std::fs::remove_dir_all(dir.join("back"));
        run_ok(
            eddy(dir).args(["run", "read.sql", "--batch-size", batch_size]),
            "the reading job",
        );
        let read = |name: &str| {
            common::sorted(
                std::fs::read_to_string(dir.join("back").join(name))
                    .unwrap()
                    .lines()
                    .map(str::to_string)
                    .collect(),
            )
        };
        let original = read("original.ndjson");
        assert_eq!(original.len(), 200);
        for name in ["first_run.ndjson", "files.ndjson"] {
            assert!(
                read(name) == original,
                "{name} at batch size {batch_size} differs from the original"
            );
        }
        // The partitioned table holds both runs.
        let twice = common::sorted(original.iter().chain(&original).cloned().collect());
        assert!(
            read("lake.ndjson") == twice,
            "lake.ndjson at batch size {batch_size} differs from the original twice"
        );
        outputs.push(read("lake.ndjson"));
    }
    assert!(outputs.windows(2).all(|w| w[0] == w[1]));
}

/// The reference pipeline (`queries/` on the built-in generator) with
/// every sink a Delta table: each table holds exactly what the NDJSON
/// sinks of `--output` hold for the same run (rows and values, read by
/// deltalake and polars).
#[test]
fn the_reference_pipeline_into_delta_tables_equals_its_ndjson_output() {
    const STDOUT: &str = "WITH (connector = 'stdout', tag = '";
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::create_dir_all(dir.join("queries")).unwrap();
    let mut sinks = Vec::new();
    for entry in std::fs::read_dir(common::repo_root().join("queries")).unwrap() {
        let path = entry.unwrap().path();
        let mut text = std::fs::read_to_string(&path).unwrap();
        while let Some(start) = text.find(STDOUT) {
            let end = start + text[start..].find(')').unwrap() + 1;
            let name = text[..start].rfind("CREATE TABLE ").unwrap() + "CREATE TABLE ".len();
            let sink: String = text[name..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            text.replace_range(
                start..end,
                &format!("WITH (connector = 'delta', path = 'lake/{sink}')"),
            );
            sinks.push(sink);
        }
        std::fs::write(dir.join("queries").join(path.file_name().unwrap()), text).unwrap();
    }
    assert_eq!(sinks.len(), 7, "{sinks:?}");
    let summary = run_ok(
        eddy(dir).args(["run", "queries", "--batch-size", "64"]),
        "the reference pipeline into Delta",
    );
    run_ok(
        eddy(dir).args(["run", "queries", "--batch-size", "64", "--output", "ndjson"]),
        "the reference pipeline into NDJSON",
    );
    for sink in &sinks {
        assert!(
            summary.contains(&format!("delta sink {sink}: ")),
            "{summary}"
        );
        let ndjson = dir.join("ndjson").join(format!("{sink}.ndjson"));
        if !ndjson.exists() {
            std::fs::write(&ndjson, "").unwrap();
        }
        let lines = std::fs::read_to_string(&ndjson).unwrap().lines().count();
        let table = dir.join("lake").join(sink);
        let report = check_delta(&["verify", table.to_str().unwrap(), ndjson.to_str().unwrap()]);
        eprint!("{sink}: {lines} NDJSON lines; {report}");
    }
}

#[test]
fn a_table_of_other_columns_is_refused_before_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write_job(dir);
    run_ok(eddy(dir).args(["run", "write.sql"]), "the writing job");
    let log_before: Vec<_> = std::fs::read_dir(dir.join("out/flat/_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    std::fs::write(
        dir.join("other.sql"),
        "CREATE TABLE events (id BIGINT NOT NULL, note VARCHAR) WITH (connector = 'file', path = 'in.ndjson');
         CREATE TABLE flat (id BIGINT NOT NULL, n VARCHAR, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
           WITH (connector = 'delta', path = 'out/flat');
         INSERT INTO flat SELECT id, note AS n, 1.0, true, 'x', note, NULL FROM events;",
    )
    .unwrap();
    let out = eddy(dir).args(["run", "other.sql"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("column 'n'")
            && stderr.contains("\"integer\"")
            && stderr.contains("other.sql:2"),
        "{stderr}"
    );
    let log_after: Vec<_> = std::fs::read_dir(dir.join("out/flat/_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(log_before, log_after, "nothing was committed");
    // A table that is not there yet is not created by a check.
    std::fs::write(
        dir.join("bad_partition.sql"),
        "CREATE TABLE events (id BIGINT NOT NULL, ts TIMESTAMP(3)) WITH (connector = 'file', path = 'in.ndjson');
         CREATE TABLE t (id BIGINT, ts TIMESTAMP(3)) WITH (connector = 'delta', path = 'out/new', partition_by = 'ts');
         INSERT INTO t SELECT * FROM events;",
    )
    .unwrap();
    let out = eddy(dir)
        .args(["run", "bad_partition.sql"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("CAST(... AS DATE)"),
        "{stderr}"
    );
    assert!(!dir.join("out/new").exists());
}

const STREAMING: &str = "
CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'generator', stream = 'payments', count = '${ROWS}', rate = '300', seed = '5');
CREATE TABLE per_method (window_start TIMESTAMP, method VARCHAR, n BIGINT, total DOUBLE)
  WITH (connector = 'delta', path = 'out/per_method', partition_by = 'method');
CREATE TABLE raw (payment_id VARCHAR, method VARCHAR, paid_amount DOUBLE, event_time TIMESTAMP)
  WITH (connector = 'delta', path = 'out/raw', target_file_size = '64KB');
CREATE TABLE per_method_lines (window_start TIMESTAMP, method VARCHAR, n BIGINT, total DOUBLE)
  WITH (connector = 'ndjson', path = 'out/per_method.ndjson');
INSERT INTO per_method SELECT w.start, method, n, total FROM (
  SELECT tumble(INTERVAL '1' SECOND) AS w, method, count(*) AS n, round(sum(paid_amount), 2) AS total
  FROM payments GROUP BY w, method);
INSERT INTO per_method_lines SELECT w.start, method, n, total FROM (
  SELECT tumble(INTERVAL '1' SECOND) AS w, method, count(*) AS n, round(sum(paid_amount), 2) AS total
  FROM payments GROUP BY w, method);
INSERT INTO raw SELECT payment_id, method, paid_amount, event_time FROM payments WHERE payment_id LIKE '%37';
";

/// Runs a job under `kills` SIGKILLs, 0.3-0.9 s apart, in rounds: a
/// round's job (`command(run_dir, Some(state_dir))`) is killed and resumed
/// until it finishes or the kills are spent, then run to its end, and
/// `check(run_dir, kills so far, round)` judges its output. Returns the
/// kills, the rounds and the checkpoints runs said they resumed from.
fn kill_rounds(
    dir: &Path,
    command: &dyn Fn(&Path, Option<&Path>) -> Command,
    kills: usize,
    seed: u64,
    check: &mut dyn FnMut(&Path, usize, usize),
) -> (usize, usize, Vec<u64>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Kills come every 0.3-0.9 s whatever the job's length, so a round
    // holds many of them (each checked round costs the checker's reads).
    let low = 300;
    let (mut killed, mut rounds, mut resumed) = (0, 0, Vec::new());
    while killed < kills {
        rounds += 1;
        let run = dir.join(format!("round-{rounds}"));
        let state = run.join("state");
        let mut finished = false;
        while killed < kills {
            let mut child = command(&run, Some(&state)).spawn().unwrap();
            let deadline = Instant::now() + Duration::from_millis(rng.random_range(low..low * 3));
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
            if child.try_wait().unwrap().is_some() {
                let out = child.wait_with_output().unwrap();
                common::assert_success(&out, "a run between kills");
                resumed.extend(resumed_from(&String::from_utf8_lossy(&out.stderr)));
                finished = true;
                break;
            }
            child.kill().unwrap(); // SIGKILL
            let out = child.wait_with_output().unwrap();
            resumed.extend(resumed_from(&String::from_utf8_lossy(&out.stderr)));
            killed += 1;
        }
        if !finished {
            let stderr = run_ok(&mut command(&run, Some(&state)), "the final run");
            resumed.extend(resumed_from(&stderr));
        }
        check(&run, killed, rounds);
    }
    (killed, rounds, resumed)
}

fn kills() -> usize {
    std::env::var("EDDY_DELTA_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(100)
}

/// The number of the checkpoint a run's log says it resumed from.
fn resumed_from(stderr: &str) -> Option<u64> {
    let at = stderr.find("resuming from checkpoint ")?;
    stderr[at + "resuming from checkpoint ".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn a_job_writing_delta_survives_100_kills_and_commits_each_checkpoint_once() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("job.sql"), STREAMING).unwrap();
    let command = |run: &Path, state: Option<&Path>| {
        std::fs::create_dir_all(run).unwrap();
        let mut command = eddy(run);
        command
            .args([
                "run",
                "--quiet",
                "--set",
                "ROWS=8000000",
                "--parallelism",
                "2",
            ])
            .arg(dir.join("job.sql"))
            .env("EDDY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(state) = state {
            command
                .arg("--state-dir")
                .arg(state)
                .args(["--checkpoint-interval", "100ms"]);
        }
        command
    };
    let expected_dir = dir.join("expected");
    let started = Instant::now();
    run_ok(&mut command(&expected_dir, None), "the uninterrupted run");
    let baseline = started.elapsed();
    let expected = |table: &str| {
        check_delta(&[
            "dump",
            expected_dir.join("out").join(table).to_str().unwrap(),
        ])
    };
    let (per_method, raw) = (expected("per_method"), expected("raw"));
    assert!(per_method.lines().count() > 100 && raw.lines().count() > 10_000);

    let (killed, rounds, resumed) =
        kill_rounds(dir, &command, kills(), 11, &mut |run, killed, rounds| {
            let table = |name: &str| run.join("out").join(name);
            for (name, rows) in [("per_method", &per_method), ("raw", &raw)] {
                assert!(
                &check_delta(&["dump", table(name).to_str().unwrap()]) == rows,
                "{name} differs from the uninterrupted run's after {killed} kills (round {rounds})"
            );
            }
            eprint!(
                "{}",
                check_delta(&[
                    "verify",
                    table("per_method").to_str().unwrap(),
                    run.join("out/per_method.ndjson").to_str().unwrap(),
                    "--partition-by",
                    "method",
                    "--streaming",
                ])
            );
        });
    assert!(!resumed.is_empty(), "no run resumed from a checkpoint");
    eprintln!(
        "delta sink: {killed} kills in {rounds} round(s), both tables exact every round; resumed from checkpoints {:?}; uninterrupted run {baseline:?}",
        &resumed[..resumed.len().min(20)]
    );
}

/// `examples/delta`: payments written to a Delta table, then read back as
/// history before a switch instant and from the live stream after it
/// (NDJSON standing in for the Kafka topic): whether the switch is at the
/// start, in the middle or after the end, the windows are the same. The
/// table read as of an instant between its two commits (time travel by
/// `timestamp`) holds the first commit's rows.
#[test]
fn a_backfill_from_delta_then_live_counts_each_payment_once() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(
        dir.join("payments.ndjson"),
        common::generated_ndjson(
            eddy_connectors::generator::GeneratedStream::Payments,
            20_000,
        ),
    )
    .unwrap();
    let examples = common::repo_root().join("examples/delta");
    run_ok(
        eddy(dir)
            .arg("run")
            .arg(examples.join("payments_to_lake.sql"))
            .args(["--set", "LAKE=lake", "--set", "DIR=."]),
        "payments_to_lake.sql",
    );
    let middle: i64 = {
        let text = std::fs::read_to_string(dir.join("payments.ndjson")).unwrap();
        let row: serde_json::Value =
            serde_json::from_str(text.lines().nth(10_000).unwrap()).unwrap();
        row["payment_ts"].as_i64().unwrap()
    };
    let mut outputs = Vec::new();
    for switch in [0, middle, i64::MAX / 2] {
        let out = eddy(dir)
            .arg("run")
            .arg(examples.join("backfill_then_live.sql"))
            .args(["--set", "LAKE=lake", "--set"])
            .arg(format!("SWITCH_MS={switch}"))
            .args(["--input", "live_payments=payments.ndjson"])
            .output()
            .unwrap();
        common::assert_success(&out, "backfill_then_live.sql");
        let lines = common::sorted(
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect(),
        );
        assert!(lines.len() >= 9, "{lines:?}");
        outputs.push(lines);
    }
    assert!(outputs[0] == outputs[1] && outputs[1] == outputs[2]);

    // A second commit, then the table as of an instant before it.
    std::thread::sleep(Duration::from_millis(20));
    let log = dir.join("lake/payments/_delta_log");
    let first_commit = std::fs::read_to_string(log.join("00000000000000000001.json")).unwrap();
    let committed_at = first_commit
        .lines()
        .find_map(|line| {
            let action: serde_json::Value = serde_json::from_str(line).ok()?;
            action["commitInfo"]["timestamp"].as_i64()
        })
        .unwrap();
    run_ok(
        eddy(dir)
            .arg("run")
            .arg(examples.join("payments_to_lake.sql"))
            .args(["--set", "LAKE=lake", "--set", "DIR=."]),
        "the second run of payments_to_lake.sql",
    );
    let count_rows = |options: &str| {
        std::fs::write(
            dir.join("count.sql"),
            format!(
                "CREATE TABLE t (payment_id VARCHAR NOT NULL) WITH (connector = 'delta', path = 'lake/payments'{options});
                 CREATE TABLE out (payment_id VARCHAR) WITH (connector = 'ndjson', path = 'count.ndjson');
                 INSERT INTO out SELECT payment_id FROM t;"
            ),
        )
        .unwrap();
        run_ok(eddy(dir).args(["run", "count.sql"]), "count.sql");
        std::fs::read_to_string(dir.join("count.ndjson"))
            .unwrap()
            .lines()
            .count()
    };
    assert_eq!(count_rows(""), 40_000);
    assert_eq!(
        count_rows(&format!(", timestamp = '{committed_at}'")),
        20_000
    );
    assert_eq!(count_rows(", version = '1'"), 20_000);
}

/// The current result of `SELECT id % 23 AS bucket, count(*), sum(id) ...
/// HAVING count(*) < 9` and of the per-country counts over [`input`],
/// computed here, as the checker prints rows.
fn merged_expected() -> (Vec<String>, Vec<String>) {
    let mut buckets = Vec::new();
    for bucket in 0..23i64 {
        let ids: Vec<i64> = (0..200).filter(|i| i % 23 == bucket).collect();
        if ids.len() < 9 {
            buckets.push(format!(
                "{{\"bucket\": {bucket}, \"n\": {}, \"total\": {}}}",
                ids.len(),
                ids.iter().sum::<i64>()
            ));
        }
    }
    let mut countries = Vec::new();
    for (i, country) in ["\"US\"", "\"DE\"", "\"a/b é\"", "null"].iter().enumerate() {
        let total: i64 = (0..200).filter(|id| id % 4 == i as i64).sum();
        countries.push(format!(
            "{{\"country\": {country}, \"even\": true, \"n\": 50, \"total\": {total}}}"
        ));
    }
    (common::sorted(buckets), common::sorted(countries))
}

/// An updating query (GROUP BY without a window, HAVING taking groups out
/// again) into Delta tables with a PRIMARY KEY: each table holds the
/// query's current result (checked by deltalake against the result
/// computed here), one row per key at every version, at batch sizes 1,
/// 10 and 8192. `per_country`'s rows move between partitions (`even`
/// flips with each count) and its key holds a NULL. A table without a
/// PRIMARY KEY is refused, saying to declare one.
#[test]
fn an_updating_query_merges_into_a_delta_table_by_its_primary_key() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("in.ndjson"), input()).unwrap();
    std::fs::write(
        dir.join("merge.sql"),
        format!(
            "CREATE TABLE events ({COLUMNS}) WITH (connector = 'file', path = 'in.ndjson');
             CREATE TABLE buckets (bucket BIGINT NOT NULL, n BIGINT, total BIGINT, PRIMARY KEY (bucket) NOT ENFORCED)
               WITH (connector = 'delta', path = 'out/buckets');
             CREATE TABLE per_country (country VARCHAR, n BIGINT, total BIGINT, even BOOLEAN, PRIMARY KEY (country) NOT ENFORCED)
               WITH (connector = 'delta', path = 'out/per_country', partition_by = 'even');
             INSERT INTO buckets SELECT id % 23, count(*), sum(id) FROM events GROUP BY id % 23 HAVING count(*) < 9;
             INSERT INTO per_country SELECT country, count(*), sum(id), count(*) % 2 = 0 FROM events GROUP BY country;"
        ),
    )
    .unwrap();
    let (buckets, countries) = merged_expected();
    assert_eq!((buckets.len(), countries.len()), (7, 4));
    for batch_size in ["1", "10", "8192"] {
        let _ = std::fs::remove_dir_all(dir.join("out"));
        let summary = run_ok(
            eddy(dir).args(["run", "merge.sql", "--batch-size", batch_size]),
            "the merging job",
        );
        assert!(
            summary.contains("delta sink buckets: 1 commits"),
            "{summary}"
        );
        let dump = |table: &str| {
            check_delta(&["dump", dir.join("out").join(table).to_str().unwrap()])
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(dump("buckets"), buckets, "batch size {batch_size}");
        assert_eq!(dump("per_country"), countries, "batch size {batch_size}");
    }
    // Run again: the second run's merge leaves the same result (each key
    // replaced, none twice), in new files.
    run_ok(eddy(dir).args(["run", "merge.sql"]), "the second run");
    let history = check_delta(&[
        "history",
        dir.join("out/buckets").to_str().unwrap(),
        "--key",
        "bucket",
    ]);
    let last: serde_json::Value = serde_json::from_str(history.lines().last().unwrap()).unwrap();
    assert_eq!(last["operation"], "MERGE", "{history}");
    assert_eq!(
        last["removes"], 1,
        "the first run's file is rewritten: {history}"
    );
    assert_eq!(last["rows"], 7, "{history}");
    assert_eq!(last["repeated_keys"], 0, "{history}");
    assert_eq!(
        check_delta(&["dump", dir.join("out/buckets").to_str().unwrap()])
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>(),
        buckets
    );

    // Without a key, an updating query is refused before anything runs.
    std::fs::write(
        dir.join("keyless.sql"),
        format!(
            "CREATE TABLE events ({COLUMNS}) WITH (connector = 'file', path = 'in.ndjson');
             CREATE TABLE counts (country VARCHAR, n BIGINT) WITH (connector = 'delta', path = 'out/keyless');
             INSERT INTO counts SELECT country, count(*) FROM events GROUP BY country;"
        ),
    )
    .unwrap();
    let out = eddy(dir).args(["run", "keyless.sql"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("PRIMARY KEY (...) NOT ENFORCED"),
        "{stderr}"
    );
    assert!(!dir.join("out/keyless").exists());
}

const MERGING: &str = "
CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR
) WITH (connector = 'generator', stream = 'payments', count = '${ROWS}', rate = '300', seed = '7');
CREATE TABLE per_suffix (suffix VARCHAR NOT NULL, n BIGINT, total DOUBLE, PRIMARY KEY (suffix) NOT ENFORCED)
  WITH (connector = 'delta', path = 'out/per_suffix', vacuum_retention = '0s');
CREATE TABLE latest (payment_id VARCHAR NOT NULL, method VARCHAR, paid_amount DOUBLE, PRIMARY KEY (payment_id) NOT ENFORCED)
  WITH (connector = 'delta', path = 'out/latest', optimize_every = '4', vacuum_retention = '0s');
CREATE TABLE per_suffix_changes (suffix VARCHAR NOT NULL, n BIGINT, total DOUBLE)
  WITH (connector = 'ndjson', path = 'out/per_suffix.ndjson', format = 'debezium-json');
INSERT INTO per_suffix SELECT right(payment_id, 3), count(*), round(sum(paid_amount), 2)
  FROM payments GROUP BY right(payment_id, 3) HAVING count(*) % 7 <> 3;
INSERT INTO per_suffix_changes SELECT right(payment_id, 3), count(*), round(sum(paid_amount), 2)
  FROM payments GROUP BY right(payment_id, 3) HAVING count(*) % 7 <> 3;
INSERT INTO latest SELECT payment_id, method, paid_amount FROM payments WHERE payment_id LIKE '%37';
";

/// The table a Debezium changelog file leaves: replayed by key.
fn replayed(path: &Path) -> Vec<String> {
    let mut table = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(before) = event["before"].as_object() {
            table.remove(&before["suffix"].to_string());
        }
        if let Some(after) = event["after"].as_object() {
            let total = after["total"].as_f64().unwrap();
            table.insert(
                after["suffix"].to_string(),
                format!(
                    "{{\"n\": {}, \"suffix\": {}, \"total\": {}}}",
                    after["n"],
                    after["suffix"],
                    serde_json::to_string(&total).unwrap()
                ),
            );
        }
    }
    common::sorted(table.into_values().collect())
}

/// A merging job checkpointing every 100 ms (a MERGE commit per
/// checkpoint, compaction every 4 commits, vacuum with no retention):
/// the table equals its changelog (Debezium NDJSON of the same query)
/// replayed, every version holds each key once, every merge carries its
/// checkpoint's transaction, and vacuum leaves only the live files. Then
/// the job killed `EDDY_DELTA_MERGE_KILLS` times (default 20) ends with
/// the table of the run without kills.
#[test]
fn a_merging_job_survives_kills_with_compaction_and_vacuum() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("job.sql"), MERGING).unwrap();
    let command = |run: &Path, state: Option<&Path>| {
        std::fs::create_dir_all(run).unwrap();
        let mut command = eddy(run);
        command
            .args(["run", "--set", "ROWS=3000000", "--parallelism", "2"])
            .arg(dir.join("job.sql"))
            .env("EDDY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .arg("--state-dir")
            .arg(state.map_or_else(|| run.join("state"), Path::to_path_buf))
            .args(["--checkpoint-interval", "100ms"]);
        command
    };
    let expected_dir = dir.join("expected");
    let started = Instant::now();
    let summary = run_ok(&mut command(&expected_dir, None), "the run without kills");
    let baseline = started.elapsed();
    let table = expected_dir.join("out/per_suffix");
    let expected = check_delta(&["dump", table.to_str().unwrap()]);
    let rows: Vec<String> = expected.lines().map(str::to_string).collect();
    assert!(rows.len() > 500, "{} rows", rows.len());
    assert_eq!(rows, replayed(&expected_dir.join("out/per_suffix.ndjson")));
    let latest = expected_dir.join("out/latest");
    let expected_latest = check_delta(&["dump", latest.to_str().unwrap()]);
    assert!(expected_latest.lines().count() > 1000);
    // Every commit: a merge of one checkpoint (transactions rising) or a
    // compaction; every version still readable holds each key once.
    let mut compactions = 0;
    for (table, key) in [(&table, "suffix"), (&latest, "payment_id")] {
        let history = check_delta(&["history", table.to_str().unwrap(), "--key", key]);
        let (mut merges, mut txns, mut vacuumed) = (0, Vec::new(), 0);
        let (mut skipped, mut newest_read) = (0, false);
        for line in history.lines() {
            let commit: serde_json::Value = serde_json::from_str(line).unwrap();
            skipped += commit["files_skipped"].as_u64().unwrap();
            newest_read = commit.get("rows").is_some();
            if newest_read {
                assert_eq!(commit["repeated_keys"], 0, "{line}");
            }
            if commit.get("vacuumed").is_some() {
                vacuumed += 1;
            }
            match commit["operation"].as_str().unwrap() {
                "MERGE" => {
                    merges += 1;
                    txns.push(commit["txn"][1].as_i64().unwrap());
                }
                "OPTIMIZE" => compactions += 1,
                "CREATE TABLE" => {}
                other => panic!("unexpected {other} commit: {line}"),
            }
        }
        assert!(merges > 5, "{history}");
        assert!(txns.windows(2).all(|w| w[0] < w[1]), "{txns:?}");
        // Versions whose files vacuum deleted no longer read (as in
        // Delta); the newest does. With no retention, a compaction and
        // the vacuum after it can leave the newest the only one readable.
        assert!(newest_read && vacuumed > 0, "{history}");
        let files: serde_json::Value =
            serde_json::from_str(&check_delta(&["files", table.to_str().unwrap()])).unwrap();
        let (live, on_disk, added) = (
            files["live"].as_u64().unwrap(),
            files["on_disk"].as_u64().unwrap(),
            files["ever_added"].as_u64().unwrap(),
        );
        assert!(
            live <= on_disk && on_disk < added,
            "vacuum leaves the live files and those removed since: {files}"
        );
        if key == "payment_id" {
            // New payment ids: a merge rules some older files out by their
            // key statistics, unread (ids are text, so ranges overlap).
            assert!(skipped > 0, "{history}");
        }
        eprintln!(
            "{}: {merges} merges, {skipped} files skipped by statistics; {files}",
            table.display()
        );
    }
    assert!(compactions > 0, "latest is compacted every 4 commits");
    assert!(
        summary.contains("compactions") && summary.contains("vacuumed"),
        "{summary}"
    );
    eprintln!("merge without kills: {compactions} compactions in {baseline:?}");

    let (killed, rounds, resumed) = kill_rounds(
        dir,
        &command,
        std::env::var("EDDY_DELTA_MERGE_KILLS")
            .ok()
            .and_then(|k| k.parse().ok())
            .unwrap_or(20),
        13,
        &mut |run, killed, rounds| {
            for (name, rows) in [("per_suffix", &expected), ("latest", &expected_latest)] {
                let got = check_delta(&["dump", run.join("out").join(name).to_str().unwrap()]);
                assert!(
                    &got == rows,
                    "{name} differs from the run without kills after {killed} kills (round {rounds})"
                );
            }
        },
    );
    assert!(!resumed.is_empty(), "no run resumed from a checkpoint");
    eprintln!(
        "merging delta sink: {killed} kills in {rounds} round(s), the table exact every round; resumed from checkpoints {:?}",
        &resumed[..resumed.len().min(20)]
    );
}

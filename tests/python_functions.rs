//! Python functions (`CREATE FUNCTION ... LANGUAGE PYTHON`) run by real
//! `eddy run` processes over real CPython: their results checked by a
//! separate Python program that applies the same functions (pyarrow for
//! the vectorized one) to the job's output, aggregates checked against the
//! built-in aggregate computing the same thing in the same query, across
//! batch sizes and instances; raising rows, crashes, hangs, wrong return
//! values and modules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A Python with pyarrow: the test environment's (scripts/python-env.sh).
fn python_with_pyarrow() -> &'static Path {
    common::python_with_pyarrow()
}

fn eddy(python: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command
        .current_dir(common::repo_root())
        .env_remove("EDDY_PARALLELISM")
        .env_remove("EDDY_UDF_PATH")
        .env("EDDY_PYTHON", python);
    command
}

/// `eddy run` of `sql` (written to `dir/job.sql`) with `args`.
fn run(dir: &Path, sql: &str, args: &[&str]) -> Output {
    let path = dir.join("job.sql");
    std::fs::write(&path, sql).unwrap();
    eddy(python_with_pyarrow())
        .arg("run")
        .arg(&path)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Rows with unicode and empty names, NULLs in every nullable column, and
/// event times a little out of order.
fn write_events(path: &Path, rows: usize) {
    use std::fmt::Write;
    let names = ["ana", "bé", "", "Zoë 🚀", "x"];
    let mut text = String::new();
    for i in 0..rows {
        let ts = 1_700_000_000_000i64 + (i as i64) * 37 - if i % 5 == 0 { 300 } else { 0 };
        let name = if i % 11 == 0 {
            "null".to_string()
        } else {
            format!("\"{}\"", names[i % names.len()])
        };
        let amount = if i % 13 == 0 {
            "null".to_string()
        } else {
            format!("{}", (i % 97) as f64 * 1.25)
        };
        let flag = match i % 3 {
            0 => "true",
            1 => "false",
            _ => "null",
        };
        writeln!(
            text,
            "{{\"id\":{i},\"uid\":{},\"name\":{name},\"qty\":{},\"amount\":{amount},\"flag\":{flag},\"ts\":{ts}}}",
            i % 7,
            ((i * 7919) % 1000) as i64 - 300
        )
        .unwrap();
    }
    std::fs::write(path, text).unwrap();
    let mut users = String::new();
    for u in 0..7 {
        writeln!(
            users,
            "{{\"id\":{u},\"tier\":\"tier-{}\",\"ts\":1699999000000}}",
            u % 3
        )
        .unwrap();
    }
    std::fs::write(path.with_file_name("users.ndjson"), users).unwrap();
}

const FUNCTIONS: &str = r#"
CREATE FUNCTION label(name VARCHAR, qty INT, flag BOOLEAN) RETURNS VARCHAR LANGUAGE PYTHON AS $$
    def label(name, qty, flag):
        return f"{name!r}/{qty}/{flag}"
$$;
CREATE FUNCTION scaled(amount DOUBLE, qty INT) RETURNS DOUBLE LANGUAGE PYTHON
WITH (vectorized = true) AS $$
import pyarrow.compute as pc
def scaled(amount, qty):
    return pc.multiply(amount, pc.cast(qty, 'double'))
$$;
CREATE FUNCTION later(ts TIMESTAMP, qty INT) RETURNS TIMESTAMP LANGUAGE PYTHON AS $$
import datetime
def later(ts, qty):
    return ts + datetime.timedelta(milliseconds=qty)
$$;
CREATE AGGREGATE py_sum(x BIGINT) RETURNS BIGINT LANGUAGE PYTHON AS $$
class py_sum:
    def __init__(self):
        self.total = 0
        self.seen = 0
    def accumulate(self, x):
        if x is not None:
            self.total += x
            self.seen += 1
    def retract(self, x):
        if x is not None:
            self.total -= x
            self.seen -= 1
    def merge(self, other):
        self.total += other.total
        self.seen += other.seen
    def finish(self):
        return self.total if self.seen else None
$$;
CREATE TABLE events (
  id BIGINT, uid BIGINT, name VARCHAR, qty INT, amount DOUBLE, flag BOOLEAN, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE users (
  id BIGINT, tier VARCHAR, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time
) WITH (connector = 'file', path = '${USERS}');
"#;

const QUERIES: &str = r#"
SELECT id, name, qty, flag, amount, event_time,
       label(name, qty, flag) AS l, scaled(amount, qty) AS s, later(event_time, qty) AS t
FROM events;
SELECT window_start, uid, py_sum(qty) AS p, sum(qty) AS b
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, uid;
SELECT e.id, e.name, e.qty, e.flag, label(u.tier, e.qty, e.flag) AS l
FROM events e JOIN users u ON e.uid = u.id
  AND e.event_time BETWEEN u.event_time AND u.event_time + INTERVAL '1' HOUR;
SELECT id, py_sum(qty) OVER w AS p, sum(qty) OVER w AS b
FROM events WINDOW w AS (PARTITION BY uid ORDER BY event_time ROWS BETWEEN 20 PRECEDING AND CURRENT ROW);
SELECT uid, py_sum(qty) AS p, sum(qty) AS b FROM events GROUP BY uid;
"#;

fn tagged<'a>(out: &'a str, tag: &str) -> Vec<&'a str> {
    let prefix = format!("{tag}> ");
    out.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect()
}

#[test]
fn python_functions_give_what_python_gives_in_calc_windows_joins_over_and_updating_aggregates() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.ndjson");
    write_events(&events, 3_000);
    let sql = format!("{FUNCTIONS}{QUERIES}");
    let set_events = format!("EVENTS={}", events.display());
    let set_users = format!("USERS={}", dir.path().join("users.ndjson").display());
    let mut reference: Option<Vec<Vec<String>>> = None;
    for (batch, parallelism) in [(1, 1), (7, 2), (8192, 1)] {
        let what = format!("batch size {batch}, {parallelism} instance(s)");
        let out = run(
            dir.path(),
            &sql,
            &[
                "--set",
                &set_events,
                "--set",
                &set_users,
                "--batch-size",
                &batch.to_string(),
                "--parallelism",
                &parallelism.to_string(),
            ],
        );
        common::assert_success(&out, &what);
        let stdout = String::from_utf8(out.stdout.clone()).unwrap();

        // Scalar functions: a separate Python program applies the same
        // functions to the output's input columns.
        let calc = tagged(&stdout, "QUERY1");
        assert_eq!(calc.len(), 3_000, "{what}");
        let join = tagged(&stdout, "QUERY3");
        assert_eq!(join.len(), 3_000, "{what}: every event has its user");
        let rows = dir.path().join("rows.ndjson");
        std::fs::write(&rows, calc.join("\n")).unwrap();
        let joined = dir.path().join("joined.ndjson");
        std::fs::write(&joined, join.join("\n")).unwrap();
        let check = Command::new(python_with_pyarrow())
            .arg(common::repo_root().join("tests/python/check_functions.py"))
            .arg(&rows)
            .arg(&joined)
            .arg(&events)
            .output()
            .unwrap();
        common::assert_success(&check, &format!("{what}: the independent check"));

        // Aggregates: the Python sum equals the built-in one, row by row.
        for tag in ["QUERY2", "QUERY4"] {
            let rows = common::json_rows(tagged(&stdout, tag));
            assert!(!rows.is_empty(), "{what}: {tag} is empty");
            for row in &rows {
                assert_eq!(row["p"], row["b"], "{what}: {tag}: {row}");
            }
        }
        // The updating aggregate retracts (its changelog replays to the
        // built-in's totals).
        let updates: Vec<String> = stdout
            .lines()
            .filter(|l| l.starts_with("QUERY5> "))
            .map(str::to_string)
            .collect();
        let table = common::replay_changelog(&updates).unwrap();
        assert_eq!(table.len(), 7, "{what}: a row per uid: {table:?}");
        for row in common::json_rows(table.iter().map(String::as_str)) {
            assert_eq!(row["p"], row["b"], "{what}: {row}");
        }

        let report = stderr(&out);
        assert!(
            report.contains("python function label: 6000 rows in"),
            "{what}: {report}"
        );
        let outputs: Vec<Vec<String>> = ["QUERY1", "QUERY2", "QUERY3", "QUERY4"]
            .iter()
            .map(|t| common::sorted(tagged(&stdout, t).iter().map(|s| s.to_string()).collect()))
            .collect();
        match &reference {
            None => reference = Some(outputs),
            Some(first) => assert!(
                first == &outputs,
                "{what}: the output differs from batch size 1's"
            ),
        }
    }
}

const ONE_TABLE: &str = "
CREATE TABLE events (id BIGINT, qty INT) WITH (connector = 'file', path = '${EVENTS}');";

fn small_events(dir: &Path) -> String {
    let path = dir.join("events.ndjson");
    let text: String = (0..50)
        .map(|i| format!("{{\"id\":{i},\"qty\":{}}}\n", i % 10))
        .collect();
    std::fs::write(&path, text).unwrap();
    format!("EVENTS={}", path.display())
}

#[test]
fn a_raising_row_becomes_null_and_is_counted_or_fails_the_job_with_the_traceback() {
    let dir = tempfile::tempdir().unwrap();
    let events = small_events(dir.path());
    let function = |policy: &str| {
        format!(
            "CREATE FUNCTION inverse(qty INT) RETURNS DOUBLE LANGUAGE PYTHON {policy} AS $$
def inverse(qty):
    return 1 / qty
$$;{ONE_TABLE}
SELECT id, qty, inverse(qty) AS v FROM events;"
        )
    };
    let out = run(dir.path(), &function(""), &["--set", &events]);
    common::assert_success(&out, "on_error = null");
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let rows = common::json_rows(stdout.lines());
    assert_eq!(rows.len(), 50, "no row vanishes");
    for row in &rows {
        if row["qty"] == 0 {
            assert!(row["v"].is_null(), "{row}");
        } else {
            let expected = 1.0 / row["qty"].as_f64().unwrap();
            assert_eq!(row["v"].as_f64().unwrap(), expected, "{row}");
        }
    }
    let report = stderr(&out);
    assert!(
        report.contains("python function inverse: 50 rows in 1 calls, 5 raised (value NULL; the first: ZeroDivisionError: division by zero)"),
        "{report}"
    );

    let out = run(
        dir.path(),
        &function("WITH (on_error = 'fail')"),
        &["--set", &events],
    );
    assert!(!out.status.success());
    let report = stderr(&out);
    assert!(
        report.contains("python function inverse: inverse raised on row 0:")
            && report.contains("Traceback")
            && report.contains("return 1 / qty")
            && report.contains("ZeroDivisionError"),
        "{report}"
    );
}

#[test]
fn a_function_that_crashes_hangs_or_returns_the_wrong_thing_fails_its_job_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let events = small_events(dir.path());
    let cases = [
        (
            "import ctypes\ndef f(qty):\n    return ctypes.string_at(0)",
            "BIGINT",
            "",
            "the Python worker ended while it ran (signal 11 (SIGSEGV: a crash))",
        ),
        (
            "import time\ndef f(qty):\n    time.sleep(600)",
            "BIGINT",
            "WITH (timeout = '1s')",
            "python function f did not return within 1s",
        ),
        (
            "def f(qty):\n    return 'many'",
            "BIGINT",
            "",
            "f returned 'many' (str) for row 0, where BIGINT was declared",
        ),
        (
            "def f(qty):\n    return qty",
            "VARCHAR",
            "",
            "f returned 0 (int) for row 0, where VARCHAR was declared",
        ),
        (
            "import pyarrow as pa\ndef f(qty):\n    return pa.array(['a'] * len(qty))",
            "BIGINT",
            "WITH (vectorized = true)",
            "f returned an array of string where BIGINT (int64) was declared",
        ),
        (
            "def g(qty):\n    return qty",
            "BIGINT",
            "",
            "job.sql:1:63: python function f: the body of f defines no function named f (it defines g)",
        ),
        (
            "def f(qty):\n    return qty",
            "BIGINT",
            "WITH (timeout = '1s', timeout = '2s')",
            "job.sql:1:81: f: option timeout is given twice",
        ),
        (
            "def f(qty):\n    return qty",
            "BIGINT",
            "WITH (vectorised = true)",
            "f: unknown option 'vectorised' for a Python function (options: vectorized, on_error, timeout)",
        ),
        (
            "def f(qty):\n    return qty",
            "BIGINT",
            "STRICT",
            "CALLED ON NULL INPUT / RETURNS NULL ON NULL INPUT / STRICT is not taken for a Python function",
        ),
        (
            "def f(qty) return qty",
            "BIGINT",
            "",
            "job.sql:2:1: python function f: the body of f does not parse: expected ':' (File \"<function f>\", line 1: def f(qty) return qty)",
        ),
    ];
    for (body, returns, options, expected) in cases {
        let sql = format!(
            "CREATE FUNCTION f(qty INT) RETURNS {returns} LANGUAGE PYTHON {options} AS $$\n{body}\n$$;{ONE_TABLE}
SELECT id, f(qty) AS v FROM events;"
        );
        let started = Instant::now();
        let out = run(dir.path(), &sql, &["--set", &events]);
        assert!(!out.status.success(), "{body}: the job did not fail");
        let report = stderr(&out);
        assert!(report.contains(expected), "{body}: {report}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{body}: took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn functions_come_from_modules_on_the_function_path() {
    let dir = tempfile::tempdir().unwrap();
    let events = small_events(dir.path());
    let modules = dir.path().join("udfs");
    std::fs::create_dir_all(modules.join("scoring")).unwrap();
    std::fs::write(modules.join("scoring/__init__.py"), "").unwrap();
    std::fs::write(
        modules.join("scoring/rules.py"),
        "def double(qty):\n    return qty * 2\n\nclass total:\n    def __init__(self):\n        self.t = 0\n    def accumulate(self, x):\n        self.t += x\n    def merge(self, other):\n        self.t += other.t\n    def finish(self):\n        return self.t\n",
    )
    .unwrap();
    let sql = format!(
        "CREATE FUNCTION double(qty INT) RETURNS BIGINT LANGUAGE PYTHON AS 'scoring.rules:double';
CREATE AGGREGATE total(qty INT) RETURNS BIGINT LANGUAGE PYTHON AS 'scoring.rules:total';{ONE_TABLE}
SELECT sum(double(qty)) AS d, total(qty) AS t FROM events;"
    );
    let out = run(
        dir.path(),
        &sql,
        &[
            "--set",
            &events,
            "--udf-path",
            &modules.display().to_string(),
        ],
    );
    common::assert_success(&out, "modules on --udf-path");
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let updates: Vec<String> = stdout.lines().map(str::to_string).collect();
    let table = common::replay_changelog(&updates).unwrap();
    let rows = common::json_rows(table.iter().map(String::as_str));
    assert_eq!(rows, [serde_json::json!({"d": 450, "t": 225})], "{stdout}");

    let out = run(dir.path(), &sql, &["--set", &events]);
    assert!(!out.status.success());
    let report = stderr(&out);
    assert!(
        report.contains("python function double: cannot import module scoring.rules")
            && report.contains("No module named 'scoring'"),
        "{report}"
    );
}

#[test]
fn row_functions_need_only_the_standard_library() {
    // The system Python (no packages) runs row-at-a-time functions and
    // says what a vectorized one needs.
    let dir = tempfile::tempdir().unwrap();
    let events = small_events(dir.path());
    let sql = format!(
        "CREATE FUNCTION plus(qty INT) RETURNS BIGINT LANGUAGE PYTHON AS $$
def plus(qty):
    return qty + 1
$$;{ONE_TABLE}
SELECT id, plus(qty) AS v FROM events;"
    );
    let path = dir.path().join("job.sql");
    std::fs::write(&path, &sql).unwrap();
    let python = PathBuf::from("python3");
    let out = eddy(&python)
        .args(["run", "--set", &events])
        .arg(&path)
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .unwrap();
    common::assert_success(&out, "a row function on python3");
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 50);

    let vectorized = sql.replace(
        "LANGUAGE PYTHON AS",
        "LANGUAGE PYTHON WITH (vectorized = true) AS",
    );
    std::fs::write(&path, vectorized).unwrap();
    let bare = dir.path().join("bare-venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&bare)
        .output()
        .unwrap();
    common::assert_success(&made, "a bare venv");
    let out = eddy(&bare.join("bin/python"))
        .args(["run", "--set", &events])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("vectorized Python functions need pyarrow"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn functions_declared_with_the_eddy_udf_package_run_as_it_tests_them() {
    // python/eddy_udf checks functions on pyarrow tables and writes their
    // declarations; eddy runs those declarations over the same module.
    let dir = tempfile::tempdir().unwrap();
    let check = Command::new(python_with_pyarrow())
        .arg(common::repo_root().join("tests/python/check_eddy_udf.py"))
        .arg(dir.path())
        .output()
        .unwrap();
    common::assert_success(&check, "the eddy_udf checks");
    let declarations = std::fs::read_to_string(dir.path().join("functions.sql")).unwrap();
    assert!(
        declarations.contains(
            "CREATE FUNCTION tripled(qty INT) RETURNS BIGINT LANGUAGE PYTHON AS 'shop:tripled';"
        ),
        "{declarations}"
    );
    let events = small_events(dir.path());
    let sql = format!(
        "{declarations}{ONE_TABLE}
SELECT sum(tripled(qty)) AS t, biggest(qty) AS b FROM events;"
    );
    let path = format!(
        "{}:{}",
        dir.path().join("udfs").display(),
        common::repo_root().join("python").display()
    );
    let out = run(dir.path(), &sql, &["--set", &events, "--udf-path", &path]);
    common::assert_success(&out, "the declared functions");
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let updates: Vec<String> = stdout.lines().map(str::to_string).collect();
    let table = common::replay_changelog(&updates).unwrap();
    let rows = common::json_rows(table.iter().map(String::as_str));
    assert_eq!(rows, [serde_json::json!({"t": 675, "b": 9})], "{stdout}");
}

#[test]
fn a_worker_is_held_to_the_jobs_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let events = small_events(dir.path());
    let sql = format!(
        "CREATE FUNCTION hog(qty INT) RETURNS BIGINT LANGUAGE PYTHON WITH (on_error = 'fail') AS $$
def hog(qty):
    return len(bytearray(1 << 29) if qty == 0 else b'') + qty
$$;{ONE_TABLE}
SELECT id, hog(qty) AS v FROM events;"
    );
    let out = run(dir.path(), &sql, &["--set", &events]);
    common::assert_success(&out, "without a limit");
    let out = run(
        dir.path(),
        &sql,
        &["--set", &events, "--memory-limit", "256MiB"],
    );
    assert!(!out.status.success());
    let report = stderr(&out);
    assert!(
        report.contains("python function hog: hog raised on row 0:")
            && report.contains("MemoryError"),
        "{report}"
    );
}

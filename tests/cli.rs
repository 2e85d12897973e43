//! The `eddy` binary as users run it: exit codes, error messages on stderr,
//! output files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::process::Command;

fn eddy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    // The tests choose the instances themselves, or test the default.
    command.env_remove("EDDY_PARALLELISM");
    command.current_dir(common::repo_root());
    command
}

#[test]
fn sql_errors_name_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.sql");
    std::fs::write(
        &path,
        "CREATE TABLE t (a BIGINT) WITH (connector = 'file', path = 'x');\n\nSELECT b FROM t;\n",
    )
    .expect("write");
    let out = eddy().arg("run").arg(&path).output().expect("run eddy");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:3:8: column 'b' not found", path.display())),
        "{stderr}"
    );
}

#[test]
fn bad_ndjson_lines_are_reported_and_the_job_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in.ndjson");
    std::fs::write(&input, "{\"a\": 1}\n{\"a\": \"x\"}\n{oops\n{\"a\": 4}\n").expect("write");
    let sql = dir.path().join("q.sql");
    std::fs::write(&sql, "CREATE TABLE t (a BIGINT) WITH (connector = 'file', path = 'unused');\nSELECT a * 10 AS b FROM t;\n")
        .expect("write");
    let out = eddy()
        .args(["run", "--input"])
        .arg(format!("t={}", input.display()))
        .arg(&sql)
        .output()
        .expect("run eddy");
    common::assert_success(&out, "eddy");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "QUERY1> {\"b\": 10}\nQUERY1> {\"b\": 40}\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("bad input row at {}:2", input.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("bad input row at {}:3", input.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("source t: 4 rows read = 2 on time + 0 late + 2 bad"),
        "{stderr}"
    );
}

#[test]
fn stdin_input_and_output_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sql = dir.path().join("q.sql");
    std::fs::write(
        &sql,
        "CREATE TABLE t (k VARCHAR, ts BIGINT, et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
           WATERMARK FOR et AS et - INTERVAL '1' SECOND) WITH (connector = 'file', path = 'unused');
         CREATE TABLE counts (window_start TIMESTAMP, k VARCHAR, n BIGINT) WITH (connector = 'stdout');
         INSERT INTO counts SELECT w.start, k, n FROM (SELECT tumble(INTERVAL '1' SECOND) AS w, k, count(*) AS n FROM t GROUP BY w, k);",
    )
    .expect("write");
    let out_dir = dir.path().join("out");
    let mut child = eddy()
        .args(["run", "--quiet", "--input", "t=-", "--output"])
        .arg(&out_dir)
        .arg(&sql)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn eddy");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"{\"k\":\"a\",\"ts\":1000}\n{\"k\":\"a\",\"ts\":1500}\n{\"k\":\"b\",\"ts\":2100}\n").expect("feed");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "with --output nothing goes to stdout"
    );
    let written = std::fs::read_to_string(out_dir.join("counts.ndjson")).expect("counts.ndjson");
    let mut lines: Vec<&str> = written.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "{\"window_start\":\"1970-01-01T00:00:01Z\",\"k\":\"a\",\"n\":2}",
            "{\"window_start\":\"1970-01-01T00:00:02Z\",\"k\":\"b\",\"n\":1}",
        ]
    );
}

#[test]
fn generate_prints_the_same_bytes_for_the_same_seed() {
    let run = |seed: &str| {
        let out = eddy()
            .args([
                "generate", "--stream", "payments", "--seed", seed, "--count", "500",
            ])
            .output()
            .expect("eddy generate");
        assert!(out.status.success());
        out.stdout
    };
    let a = run("7");
    assert_eq!(a, run("7"));
    assert_ne!(a, run("8"));
    let text = String::from_utf8(a).expect("utf8");
    assert_eq!(text.lines().count(), 500);
    assert!(
        text.starts_with("{\"payment_id\":\"pay-"),
        "{}",
        &text[..80]
    );
}

#[test]
fn explain_prints_the_operator_graph() {
    let out = eddy()
        .args(["explain", "queries/"])
        .output()
        .expect("eddy explain");
    common::assert_success(&out, "eddy");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("source devices [connector=generator"),
        "{text}"
    );
    assert!(
        text.contains("window_aggregate hop(slide 1000ms, width 5000ms)"),
        "{text}"
    );
    assert!(
        text.contains("sink device_metrics [connector=stdout]"),
        "{text}"
    );
    // Window columns DataFusion names after their interval arguments read
    // as the SQL that wrote them, not as Rust debug text.
    assert!(
        text.contains("hop(INTERVAL '1' SECOND,INTERVAL '5' SECOND)"),
        "{text}"
    );
    assert!(!text.contains("IntervalMonthDayNano"), "{text}");
    // A join's inputs are hashed by its keys, each side by its own.
    assert!(
        text.contains("hash(order_id@1), #3 hash(order_id@0)"),
        "{text}"
    );
}

#[test]
fn explain_shows_the_instances_of_a_parallel_run() {
    let out = eddy()
        .args(["explain", "queries/", "--parallelism", "2"])
        .output()
        .expect("eddy explain");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    // The join's two sides split by order_id, its second instance reading
    // port 1 of each split, a union of the two instances after them.
    assert!(
        text.contains(
            "#2 key_split hash(order_id@1) over 2 instances (mix64, 128 key groups) <- #0"
        ),
        "{text}"
    );
    assert!(
        text.contains("<- #2.1 hash(order_id@1), #3.1 hash(order_id@0)"),
        "{text}"
    );
    assert!(text.contains("#6 union 2 inputs <- #4, #5"), "{text}");
    // The anomaly rules' OVER and hop window both key matched payments by
    // customer: one split hashes them for both.
    let customer_splits = text
        .lines()
        .filter(|l| l.contains("key_split hash(customer_id@0)"))
        .count();
    assert_eq!(customer_splits, 1, "{text}");
    // Without --parallelism: one instance per core.
    let out = eddy()
        .args(["explain", "queries/"])
        .output()
        .expect("eddy explain");
    let text = String::from_utf8_lossy(&out.stdout);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        assert!(
            text.contains(&format!("over {cores} instances")),
            "{cores} cores: {text}"
        );
    } else {
        assert!(!text.contains("key_split"), "{text}");
    }
}

#[test]
fn explain_takes_sql_text() {
    let sql = "CREATE TABLE t (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'stdin'); \
               SELECT k, n FROM (SELECT tumble('1 minute') AS w, k, count(*) AS n FROM t GROUP BY w, k)";
    let out = eddy()
        .args(["explain", sql])
        .output()
        .expect("eddy explain");
    common::assert_success(&out, "eddy");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("window_aggregate tumble(60000ms) on ts"),
        "{text}"
    );
    assert!(text.contains("hash(k@0)"), "{text}");
}

/// `eddy explain` refuses what `eddy run` would refuse before starting:
/// an unknown option or connector, named with where it is declared.
#[test]
fn explain_checks_connectors_and_options_as_run_does() {
    let table = |with: &str| {
        format!(
            "CREATE TABLE t (k VARCHAR) WITH ({with}); \
             CREATE TABLE o (k VARCHAR) WITH (connector = 'stdout'); \
             INSERT INTO o SELECT k FROM t"
        )
    };
    for (with, refusal) in [
        (
            "connector = 'generator', stream = 'orders', bogus = '1'",
            "unknown option 'bogus' for a generator source",
        ),
        ("connector = 'nosuch'", "nosuch"),
    ] {
        for command in ["explain", "run"] {
            let out = eddy().args([command, &table(with)]).output().expect("eddy");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && stderr.contains(refusal),
                "{command} {with}: {stderr}"
            );
        }
    }
}

#[test]
fn unknown_set_and_input_names_are_rejected() {
    let out = eddy()
        .args(["run", "queries/", "--set", "NOT_A_PARAM=1"])
        .output()
        .expect("eddy run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--set NOT_A_PARAM names no parameter"));
    let out = eddy()
        .args(["run", "queries/", "--input", "nope=x.ndjson"])
        .output()
        .expect("eddy run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no query reads a source table named 'nope'")
    );
}

#[test]
fn parquet_output_holds_the_same_rows_as_ndjson() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ndjson_dir, parquet_dir) = (dir.path().join("ndjson"), dir.path().join("parquet"));
    for (out, format) in [(&ndjson_dir, "ndjson"), (&parquet_dir, "parquet")] {
        let status = eddy()
            .args(["run", "--quiet", "queries/", "--format", format, "--output"])
            .arg(out)
            .status()
            .expect("eddy run");
        assert!(status.success());
    }
    let mut expected: Vec<String> =
        std::fs::read_to_string(ndjson_dir.join("enriched_payments.ndjson"))
            .expect("ndjson output")
            .lines()
            .map(str::to_string)
            .collect();
    let batches = common::read_parquet_tree(&parquet_dir.join("enriched_payments"));
    assert_eq!(batches.len(), 1, "one file, one row group");
    let mut text = Vec::new();
    for (_, batch) in &batches {
        eddy_connectors::json_lines::encode_json_lines(batch, &mut text).expect("encode");
    }
    let mut actual: Vec<String> = String::from_utf8(text)
        .expect("utf8")
        .lines()
        .map(str::to_string)
        .collect();
    expected.sort();
    actual.sort();
    assert_eq!(actual.len(), 103);
    assert_eq!(actual, expected);
}

#[test]
fn realtime_generation_follows_the_wall_clock() {
    let started = std::time::Instant::now();
    // 1,500 events at 1,000 per second span about 1.5 s of event time.
    let out = eddy()
        .args([
            "generate",
            "--stream",
            "devices",
            "--rate",
            "1000",
            "--count",
            "1500",
            "--realtime",
        ])
        .output()
        .expect("eddy generate");
    assert!(out.status.success());
    let elapsed = started.elapsed();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1500);
    assert!(
        elapsed >= std::time::Duration::from_millis(1_200),
        "paced output took only {elapsed:?}"
    );
    // Paced or not, the bytes are the same.
    let fast = eddy()
        .args([
            "generate", "--stream", "devices", "--rate", "1000", "--count", "1500",
        ])
        .output()
        .expect("eddy generate");
    assert_eq!(fast.stdout, out.stdout);
}

/// `eddy connectors` prints the reference generated from the connectors'
/// declared options; docs/CONNECTORS.md is that output (rewrite it with
/// `EDDY_UPDATE_GOLDEN=1`), so the docs cannot drift from the code.
#[test]
fn the_connector_reference_is_generated_and_docs_match_it() {
    let out = eddy().arg("connectors").output().expect("run eddy");
    common::assert_success(&out, "eddy");
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    for expected in [
        "## kafka",
        "| `stop` | never, latest |",
        "## stdout\n",
        "Also named: print.",
        "| `rolling_bytes` | size (64MB, 1GiB) |",
    ] {
        assert!(printed.contains(expected), "{expected}\n{printed}");
    }
    let docs = common::repo_root().join("docs/CONNECTORS.md");
    if common::updating_golden() {
        std::fs::write(&docs, &printed).expect("write docs");
    }
    let written = std::fs::read_to_string(&docs).unwrap_or_default();
    assert!(
        written == printed,
        "docs/CONNECTORS.md differs from `eddy connectors` (rerun with EDDY_UPDATE_GOLDEN=1)"
    );
}

/// A job whose operator state passes `--memory-limit` in an operator that
/// cannot spill (a global DISTINCT aggregate: one group) fails with
/// an error naming the budget and the operator holding most, instead of
/// growing until the machine runs out; under a limit it has room in, it
/// finishes.
#[test]
fn a_job_past_its_memory_limit_fails_naming_the_operator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sql = dir.path().join("keys.sql");
    let write = |count: u64| {
        std::fs::write(
            &sql,
            format!(
                "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
                   WITH (connector = 'generator', stream = 'orders', count = '{count}');
                 CREATE TABLE distinct_orders (n BIGINT) WITH (connector = 'blackhole');
                 INSERT INTO distinct_orders SELECT count(DISTINCT order_id) AS n FROM orders;"
            ),
        )
        .expect("write sql");
    };
    write(20_000_000);
    let out = eddy()
        .args(["run", "--memory-limit", "1MiB", "--parallelism", "1"])
        .arg(&sql)
        .output()
        .expect("run eddy");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("over the job's memory budget"), "{stderr}");
    assert!(
        stderr.contains("of 1.0 MiB (updating_aggregate#"),
        "{stderr}"
    );
    assert!(stderr.contains("--memory-limit"), "{stderr}");

    write(10_000);
    let out = eddy()
        .args(["run", "--memory-limit", "1GiB"])
        .arg(&sql)
        .output()
        .expect("run eddy");
    common::assert_success(&out, "eddy");

    let out = eddy()
        .args(["run", "--memory-limit", "lots"])
        .arg(&sql)
        .output()
        .expect("run eddy");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("'lots' is not a size"));
}

/// `eddy bench compare`, which the benchmark scripts rely on to fail when
/// two engines' results differ: equal rows in any order and either
/// engine's spelling pass; a changed value, a missing row or a duplicated
/// one fail, naming both files.
#[test]
fn bench_compare_passes_equal_results_and_fails_on_any_difference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let compare = |query: &str, a: &std::path::Path, b: &std::path::Path| {
        eddy()
            .args(["bench", "compare", "--query", query, "--output"])
            .arg(a)
            .arg("--against")
            .arg(b)
            .output()
            .expect("run eddy")
    };
    // eddy's spelling (zone, explicit null) against DataFusion's (no zone,
    // null left out, keys in another order), rows in another order.
    let eddy_windows = write(
        "eddy.ndjson",
        "{\"window_start\":\"2023-11-14T22:13:10Z\",\"customer_id\":\"c1\",\"n\":2,\"total\":30.1}\n\
         {\"window_start\":\"2023-11-14T22:13:20Z\",\"customer_id\":\"c1\",\"n\":1,\"total\":0.3}\n",
    );
    let df_windows = write(
        "df.ndjson",
        "{\"customer_id\":\"c1\",\"window_start\":\"2023-11-14T22:13:20\",\"n\":1,\"total\":0.30000000000000004}\n\
         {\"window_start\":\"2023-11-14T22:13:10\",\"customer_id\":\"c1\",\"n\":2,\"total\":30.1}\n",
    );
    let out = compare("hop", &eddy_windows, &df_windows);
    common::assert_success(&out, "eddy bench compare");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"differing_rows\":0"));

    let changed = write(
        "changed.ndjson",
        "{\"window_start\":\"2023-11-14T22:13:10Z\",\"customer_id\":\"c1\",\"n\":3,\"total\":30.1}\n\
         {\"window_start\":\"2023-11-14T22:13:20Z\",\"customer_id\":\"c1\",\"n\":1,\"total\":0.3}\n",
    );
    let out = compare("window", &changed, &df_windows);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the window results differ"), "{stderr}");
    assert!(stderr.contains(&changed.display().to_string()), "{stderr}");

    let eddy_join = write(
        "join_eddy.ndjson",
        "{\"payment_id\":\"p1\",\"customer_id\":null,\"mismatch\":null}\n\
         {\"payment_id\":\"p2\",\"customer_id\":\"c1\",\"mismatch\":false}\n",
    );
    let df_join = write(
        "join_df.ndjson",
        "{\"payment_id\":\"p2\",\"customer_id\":\"c1\",\"mismatch\":false}\n{\"payment_id\":\"p1\"}\n",
    );
    common::assert_success(&compare("join", &eddy_join, &df_join), "equal joins");
    let doubled = write(
        "join_doubled.ndjson",
        "{\"payment_id\":\"p2\",\"customer_id\":\"c1\",\"mismatch\":false}\n\
         {\"payment_id\":\"p2\",\"customer_id\":\"c1\",\"mismatch\":false}\n",
    );
    assert!(!compare("join", &eddy_join, &doubled).status.success());
    let missing = write(
        "join_missing.ndjson",
        "{\"payment_id\":\"p2\",\"customer_id\":\"c1\",\"mismatch\":false}\n",
    );
    assert!(!compare("join", &eddy_join, &missing).status.success());
}

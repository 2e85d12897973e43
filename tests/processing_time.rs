//! Processing time, end to end: windows over a `PROCTIME()` column close on
//! the wall clock (a real process whose input stays open, so no end of
//! input and no event time can close them), whether the column is a
//! table's computed column or a view's `PROCTIME()`; and the lookup join
//! (`FOR SYSTEM_TIME AS OF` a `PROCTIME()` column) on a bounded table
//! equals the batch join, across batch sizes and parallelism.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn epoch_ms(text: &str) -> i64 {
    datafusion::arrow::compute::kernels::cast_utils::string_to_timestamp_nanos(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        / 1_000_000
}

/// Runs `sql` reading stdin, feeds `rows` lines and keeps stdin open;
/// returns the output lines that came within `wait`, with when each came.
fn run_open(sql: &str, rows: &[&str], wait: Duration) -> (i64, Vec<(Instant, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("proc.sql");
    std::fs::write(&file, sql).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["run", "--quiet"])
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn eddy");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    // Let the job start before the rows come, so that they are read now.
    std::thread::sleep(Duration::from_millis(500));
    let fed_at = wall_clock_ms();
    let stdin = child.stdin.as_mut().unwrap();
    for row in rows {
        writeln!(stdin, "{row}").unwrap();
    }
    stdin.flush().unwrap();
    let until = Instant::now() + wait;
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
        lines.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    (fed_at, lines)
}

fn field(line: &str, name: &str) -> serde_json::Value {
    let json = line.split_once("> ").map(|(_, j)| j).unwrap_or(line);
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value[name].clone()
}

#[test]
fn tumbling_windows_over_a_proctime_column_close_on_the_wall_clock() {
    let sql =
        "CREATE TABLE clicks (user_id VARCHAR, proc AS PROCTIME()) WITH (connector = 'stdin');
        SELECT window_start, window_end, count(*) AS n
        FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(proc), INTERVAL '1' SECOND))
        GROUP BY window_start, window_end;";
    let rows = vec![r#"{"user_id": "a"}"#; 5];
    let started = Instant::now();
    let (fed_at, lines) = run_open(sql, &rows, Duration::from_secs(6));
    assert!(
        !lines.is_empty(),
        "no window closed within 6 s although the wall clock passed its end"
    );
    // Five rows read within a few milliseconds: one window, or two if a
    // second boundary fell between them.
    let total: i64 = lines
        .iter()
        .map(|(_, l)| field(l, "n").as_i64().unwrap())
        .sum();
    assert_eq!(total, 5, "{lines:?}");
    assert!(lines.len() <= 2, "{lines:?}");
    for (came, line) in &lines {
        let start = epoch_ms(field(line, "window_start").as_str().unwrap());
        let end = epoch_ms(field(line, "window_end").as_str().unwrap());
        assert_eq!(end - start, 1_000, "{line}");
        assert_eq!(start % 1_000, 0, "{line}");
        // The window holds the moment the rows were read...
        assert!(
            end > fed_at && start <= fed_at + 1_000,
            "window [{start}, {end}) for rows fed at {fed_at}: {line}"
        );
        // ...and closed soon after the wall clock passed its end.
        let closed_after_start = came.duration_since(started).as_millis() as i64;
        let end_after_start = end - (fed_at - 500);
        assert!(
            closed_after_start < end_after_start + 2_000,
            "window ending {end_after_start} ms into the run came {closed_after_start} ms in: {line}"
        );
    }
}

#[test]
fn a_views_proctime_column_is_a_time_attribute_for_hopping_windows() {
    let sql = "CREATE TABLE bids (bidder BIGINT) WITH (connector = 'stdin');
        CREATE VIEW b AS SELECT *, PROCTIME() AS p_time FROM bids;
        SELECT bidder, count(*) AS n, window_start, window_end
        FROM TABLE(HOP(TABLE b, DESCRIPTOR(p_time), INTERVAL '500' MILLISECOND, INTERVAL '1' SECOND))
        GROUP BY bidder, window_start, window_end;";
    let rows = [r#"{"bidder": 1}"#, r#"{"bidder": 1}"#, r#"{"bidder": 2}"#];
    let (_, lines) = run_open(sql, &rows, Duration::from_secs(5));
    // Each row is in two hopping windows (width / slide), each of which
    // closes on the wall clock.
    let count = |bidder: i64| -> i64 {
        lines
            .iter()
            .filter(|(_, l)| field(l, "bidder").as_i64() == Some(bidder))
            .map(|(_, l)| field(l, "n").as_i64().unwrap())
            .sum()
    };
    assert_eq!((count(1), count(2)), (4, 2), "{lines:?}");
}

#[test]
fn a_lookup_join_on_a_bounded_table_equals_the_batch_join() {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let dir = tempfile::tempdir().unwrap();
    // Probe rows over keys 0..60 (some NULL); the table holds keys 0..40,
    // some twice, so a probe row may meet no row, one, or two.
    let probe_path = dir.path().join("probe.ndjson");
    let table_path = dir.path().join("side.ndjson");
    let mut probe = String::new();
    for id in 0..3_000u64 {
        let k = (id * 7919 % 61) as i64;
        if k == 60 {
            probe.push_str(&format!("{{\"id\": {id}, \"k\": null}}\n"));
        } else {
            probe.push_str(&format!("{{\"id\": {id}, \"k\": {k}}}\n"));
        }
    }
    let mut table = String::new();
    for k in 0..40 {
        table.push_str(&format!("{{\"k\": {k}, \"v\": \"v{k}\"}}\n"));
        if k % 3 == 0 {
            table.push_str(&format!("{{\"k\": {k}, \"v\": \"w{k}\"}}\n"));
        }
    }
    std::fs::write(&probe_path, probe).unwrap();
    std::fs::write(&table_path, table).unwrap();
    let probe_schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("k", DataType::Int64, true),
    ]);
    let table_schema = Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Utf8, true),
    ]);
    for (join, batch_join) in [("JOIN", "JOIN"), ("LEFT JOIN", "LEFT JOIN")] {
        let mut expected = common::json_rows(
            common::datafusion_json_lines(
                &[
                    ("probe", probe_path.to_str().unwrap(), probe_schema.clone()),
                    ("side", table_path.to_str().unwrap(), table_schema.clone()),
                ],
                &format!("SELECT p.id, p.k, s.v FROM probe p {batch_join} side s ON p.k = s.k"),
            )
            .iter()
            .map(String::as_str),
        );
        expected.sort_by_key(common::row_key);
        assert!(expected.len() > 3_000 / 2, "{}", expected.len());
        for (batch_size, parallelism) in common::SWEEP {
            let what = format!("{join} (batch {batch_size}, parallelism {parallelism})");
            let file = eddy_sql::SqlFile {
                name: "<lookup>".into(),
                text: format!(
                    "CREATE TABLE probe (id BIGINT, k BIGINT, proc AS PROCTIME()) WITH (connector = 'file', path = '{}');
                     CREATE TABLE side (k BIGINT, v VARCHAR) WITH (connector = 'file', path = '{}');
                     SELECT p.id, p.k, s.v FROM probe p {join} side FOR SYSTEM_TIME AS OF p.proc AS s ON p.k = s.k;",
                    probe_path.display(),
                    table_path.display()
                ),
            };
            let captured = common::run_captured_in_parallel(
                &[file],
                &BTreeMap::new(),
                BTreeMap::new(),
                batch_size,
                parallelism,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let mut actual = common::json_rows(captured.lines.iter().map(String::as_str));
            actual.sort_by_key(common::row_key);
            common::assert_same_rows(&actual, &expected, &what);
        }
    }
}

#[test]
fn window_deduplication_over_a_proctime_window_emits_as_each_window_closes() {
    let sql = "CREATE TABLE clicks (user_id VARCHAR, url VARCHAR, proc AS PROCTIME()) WITH (connector = 'stdin');
        SELECT user_id, url, window_start FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, user_id ORDER BY proc) AS rn
          FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(proc), INTERVAL '1' SECOND))
        ) WHERE rn = 1;";
    let rows = [
        r#"{"user_id": "a", "url": "x"}"#,
        r#"{"user_id": "a", "url": "y"}"#,
        r#"{"user_id": "b", "url": "z"}"#,
    ];
    // Planned as a window Top-N on the clock, whose state goes with each
    // window (not a ranking that keeps every window's keys for ever).
    let graph = eddy_sql::compile(
        &[eddy_sql::SqlFile {
            name: "dedup.sql".into(),
            text: sql.into(),
        }],
        &BTreeMap::new(),
    )
    .unwrap()
    .graph;
    let kinds: Vec<&str> = graph
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            eddy_engine::graph::NodeKind::Operator(plan) => Some(plan.kind()),
            _ => None,
        })
        .collect();
    assert!(
        kinds.contains(&"processing_time") && kinds.contains(&"window_rank"),
        "{kinds:?}"
    );
    let (_, lines) = run_open(sql, &rows, Duration::from_secs(5));
    // The input stays open: whatever came, came as windows closed on the
    // clock. One row per user and window (two windows if a boundary fell
    // between the rows).
    let mut users: Vec<String> = lines
        .iter()
        .map(|(_, l)| field(l, "user_id").as_str().unwrap().to_string())
        .collect();
    users.dedup();
    assert!(
        (2..=3).contains(&lines.len())
            && users.contains(&"a".into())
            && users.contains(&"b".into()),
        "{lines:?}"
    );
    for (_, line) in &lines {
        let start = epoch_ms(field(line, "window_start").as_str().unwrap());
        assert_eq!(start % 1_000, 0, "{line}");
    }
}

//! Late rows and idle sources, end to end.
//!
//! - Property: on randomized input with heavy disorder, exactly the rows the
//!   lateness rule names are in `late_rows(...)`, each once; a plain
//!   `SELECT` loses none of them by default (`late_rows = 'keep'`), and a
//!   late router (`late_rows = 'divert'`) sends every row exactly once,
//!   either on the on-time path or to `late_rows(...)` — for several
//!   bounds, allowed lateness and batch sizes.
//! - Idle source: when one input of a job stops sending, the other input's
//!   windows still close once `idle_timeout` has passed (a real process,
//!   one source on a named pipe that stays silent, the other on stdin).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[test]
fn late_rows_are_named_once_and_a_plain_select_keeps_them_unless_diverted() {
    let dir = tempfile::tempdir().expect("tempdir");
    for seed in [1u64, 2, 3] {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut base = 1_700_000_000_000i64;
        let mut times = Vec::new();
        let mut text = String::new();
        for id in 0..3_000 {
            base += rng.random_range(0..30);
            let ts = base - rng.random_range(0..6_000); // far more disorder than the bound
            times.push(ts);
            text.push_str(&format!("{{\"id\":{id},\"ts\":{ts}}}\n"));
        }
        let path = dir.path().join(format!("in-{seed}.ndjson"));
        std::fs::write(&path, text).expect("write");
        for (bound_ms, lateness_ms, divert) in [
            (0i64, 0i64, false),
            (2_000, 0, true),
            (2_000, 1_500, false),
            (2_000, 1_500, true),
        ] {
            // The rule, computed independently: late when below max(earlier) - bound - lateness.
            let mut max = i64::MIN;
            let mut expected_late = Vec::new();
            for (id, &t) in times.iter().enumerate() {
                if max != i64::MIN && t < max - bound_ms - lateness_ms {
                    expected_late.push(id as i64);
                } else {
                    max = max.max(t);
                }
            }
            let sql = format!(
                "CREATE TABLE t (id BIGINT, ts BIGINT, et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
                   WATERMARK FOR et AS et - INTERVAL '{bound_ms}' MILLISECOND)
                 WITH (connector = 'file', path = 'x', allowed_lateness = '{lateness_ms}ms', late_rows = '{}');
                 SELECT 'on' AS path, id FROM t UNION ALL SELECT 'late' AS path, id FROM late_rows(t);",
                if divert { "divert" } else { "keep" }
            );
            for batch_size in [1usize, 7, 8192] {
                let inputs = BTreeMap::from([("t".to_string(), path.display().to_string())]);
                let file = SqlFile {
                    name: "<late>".into(),
                    text: sql.clone(),
                };
                let captured = common::run_captured(&[file], &BTreeMap::new(), inputs, batch_size)
                    .expect("run");
                let mut on_path = vec![0u32; times.len()];
                let mut late = Vec::new();
                for line in &captured.lines {
                    let row: serde_json::Value =
                        serde_json::from_str(line.split_once("> ").expect("tag").1).expect("json");
                    let id = row["id"].as_i64().expect("id");
                    if row["path"] == "late" {
                        late.push(id);
                    } else {
                        on_path[id as usize] += 1;
                    }
                }
                let case = format!("seed {seed}, bound {bound_ms}, lateness {lateness_ms}, divert {divert}, batch {batch_size}");
                late.sort();
                for (id, &n) in on_path.iter().enumerate() {
                    // Kept: every row goes on. Diverted: only on-time ones.
                    let expected = u32::from(!divert || late.binary_search(&(id as i64)).is_err());
                    assert_eq!(n, expected, "{case}: row {id} went on {n} times");
                }
                assert_eq!(late, expected_late, "{case}");
                let source = captured
                    .report
                    .nodes
                    .iter()
                    .find(|n| n.kind == "source")
                    .expect("source");
                assert_eq!(
                    source.metrics.late_rows as usize,
                    expected_late.len(),
                    "the late count is in the job metrics"
                );
            }
        }
    }
}

fn idle_job(dir: &std::path::Path, idle_timeout: &str) -> std::process::Child {
    let fifo = dir.join("quiet.pipe");
    let _ = std::fs::remove_file(&fifo);
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let sql = dir.join("idle.sql");
    std::fs::write(
        &sql,
        format!(
            "CREATE TABLE quiet (k VARCHAR, ts BIGINT, et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
               WATERMARK FOR et AS et - INTERVAL '1' SECOND) WITH (connector = 'file', path = '{}'{idle_timeout});
             CREATE TABLE busy (k VARCHAR, ts BIGINT, et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
               WATERMARK FOR et AS et - INTERVAL '1' SECOND) WITH (connector = 'stdin');
             SELECT w.start AS window_start, n FROM (
               SELECT tumble(INTERVAL '1' SECOND) AS w, count(*) AS n FROM (
                 SELECT k, et FROM quiet UNION ALL SELECT k, et FROM busy) GROUP BY w);",
            fifo.display()
        ),
    )
    .expect("write sql");
    let child = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["run", "--quiet"])
        .arg(&sql)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn eddy");
    // Open the pipe for writing so that the quiet source's open() returns; write nothing.
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open fifo");
    std::mem::forget(writer); // stays open (silent) until the process ends
    child
}

fn first_line_within(child: &mut std::process::Child, wait: Duration) -> Option<String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx.recv_timeout(wait).ok()
}

fn feed_busy(child: &mut std::process::Child) {
    let stdin = child.stdin.as_mut().expect("stdin");
    for i in 0..40 {
        writeln!(stdin, "{{\"k\":\"a\",\"ts\":{}}}", 1_000 + i * 100).expect("feed");
    }
    stdin.flush().expect("flush");
}

#[test]
fn an_idle_source_stops_holding_back_the_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");

    // Without idle_timeout the silent source holds every window open.
    let mut child = idle_job(dir.path(), "");
    feed_busy(&mut child);
    let line = first_line_within(&mut child, Duration::from_millis(1_500));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        line, None,
        "no window may close while the silent source holds the watermark back"
    );

    // With idle_timeout the busy source's windows close while the job runs.
    let mut child = idle_job(dir.path(), ", idle_timeout = '300ms'");
    feed_busy(&mut child);
    let line = first_line_within(&mut child, Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("a window closed after the idle timeout");
    assert_eq!(
        line,
        r#"QUERY1> {"window_start": "1970-01-01T00:00:01Z", "n": 10}"#
    );
}

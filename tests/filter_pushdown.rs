//! Filter pushdown into the `parquet` and `delta` sources, end to end
//! through the `eddy` binary: a `WHERE` over a table read from stored files
//! lets the source skip the files (Delta statistics) and row groups
//! (Parquet footers) that hold no wanted row, and changes no result.
//!
//! The input is made so that skipping could change results: blocks of 100
//! rows alternate between `card` and `wire`, and near the end of each
//! `wire` block one row jumps 40 s ahead in event time, which makes the
//! next `card` block's first rows late. A query for `card` rows skips the
//! `wire` blocks; its windows must still leave those rows out of the
//! windows that had fired at them (and count them in the others), exactly
//! as the same query whose filter cannot be pushed (`lower(method)
//! = 'card'`). With `max_future_skew` the jumps are bad rows instead, and
//! are counted as bad whether their blocks were skipped or not.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;
use std::process::Command;

const BASE_MS: i64 = 1_700_000_000_000;
const ROWS: i64 = 2_000;

fn input() -> String {
    (0..ROWS)
        .map(|i| {
            let block = i / 100;
            let method = if block % 2 == 0 { "card" } else { "wire" };
            let ahead = if block % 2 == 1 && i % 100 == 95 {
                40_000
            } else {
                0
            };
            format!(
                "{{\"id\":{i},\"method\":\"{method}\",\"amount\":{},\"ts\":{}}}\n",
                i as f64 * 0.5,
                BASE_MS + i * 1_000 + ahead
            )
        })
        .collect()
}

/// The `card` rows a one-minute window counts (DESIGN: the watermark at a
/// row is the largest event time before it less the 2 s bound, over every
/// row of the input, skipped or not; a late row counts while its window has
/// not fired there, `end > watermark`); fewer than all of them, and more
/// than the rows that are on time.
fn counted_card_rows() -> u64 {
    let mut max_seen = i64::MIN;
    let (mut counted, mut on_time) = (0, 0);
    for line in input().lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let ts = row["ts"].as_i64().unwrap();
        let watermark = max_seen.saturating_sub(2_000);
        let late = max_seen != i64::MIN && ts < watermark;
        let window_end = ts - ts.rem_euclid(60_000) + 60_000;
        if row["method"] == "card" {
            counted += u64::from(max_seen == i64::MIN || window_end > watermark);
            on_time += u64::from(!late);
        }
        max_seen = max_seen.max(ts);
    }
    assert!(
        counted < 1_000 && counted > on_time,
        "{counted} counted, {on_time} on time"
    );
    counted
}

const COLUMNS: &str = "id BIGINT NOT NULL, method VARCHAR, amount DOUBLE, ts BIGINT NOT NULL";

fn eddy(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command.current_dir(dir).env_remove("EDDY_PARALLELISM");
    command
}

/// Writes the input as a Delta table of small files (50 rows) and as a Parquet
/// directory of 100-row files in 25-row row groups.
fn write_tables(dir: &Path) {
    std::fs::write(dir.join("in.ndjson"), input()).unwrap();
    std::fs::write(
        dir.join("write.sql"),
        format!(
            "CREATE TABLE events ({COLUMNS}) WITH (connector = 'file', path = 'in.ndjson');
             CREATE TABLE lake ({COLUMNS}) WITH (connector = 'delta', path = 'lake', target_file_size = '1KB', row_group_size = '50');
             CREATE TABLE files ({COLUMNS})
               WITH (connector = 'parquet', path = 'files', rolling_rows = '100', row_group_size = '25');
             INSERT INTO lake SELECT * FROM events;
             INSERT INTO files SELECT * FROM events;"
        ),
    )
    .unwrap();
    let out = eddy(dir)
        .args(["run", "write.sql", "--batch-size", "50"])
        .output()
        .unwrap();
    common::assert_success(&out, "the writing job");
}

/// Per-minute counts of `connector` at `path` for the rows `condition`
/// keeps; returns the sorted output lines and what the run logged.
fn per_minute(
    dir: &Path,
    connector: &str,
    path: &str,
    condition: &str,
    batch_size: &str,
    options: &str,
) -> (Vec<String>, String) {
    std::fs::write(
        dir.join("read.sql"),
        format!(
            "CREATE TABLE hist ({COLUMNS},
               event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
               WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
               WITH (connector = '{connector}', path = '{path}'{options});
             CREATE TABLE out (window_start TIMESTAMP, n BIGINT, total DOUBLE)
               WITH (connector = 'ndjson', path = 'out.ndjson');
             INSERT INTO out SELECT w.start, n, total FROM (
               SELECT tumble(INTERVAL '1' MINUTE) AS w, count(*) AS n, sum(amount) AS total
               FROM hist WHERE {condition} GROUP BY w);"
        ),
    )
    .unwrap();
    let _ = std::fs::remove_file(dir.join("out.ndjson"));
    let out = eddy(dir)
        .args(["run", "read.sql", "--batch-size", batch_size])
        .env("EDDY_LOG", "info")
        .output()
        .unwrap();
    common::assert_success(&out, &format!("{connector} WHERE {condition}"));
    let lines = std::fs::read_to_string(dir.join("out.ndjson"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    (
        common::sorted(lines),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `skipped A of B files and C of D row groups` from a run's log.
fn skipped(log: &str) -> [usize; 4] {
    let line = log
        .lines()
        .find(|l| l.contains("the pushed-down filter skipped"))
        .unwrap_or_else(|| panic!("no pushdown line in the log:\n{log}"));
    let numbers: Vec<usize> = line
        .split("skipped ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    [numbers[0], numbers[1], numbers[2], numbers[3]]
}

#[test]
fn a_pushed_filter_skips_files_and_row_groups_and_changes_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write_tables(dir);

    // What the plan says.
    std::fs::write(
        dir.join("explain.sql"),
        format!(
            "CREATE TABLE hist ({COLUMNS}) WITH (connector = 'delta', path = 'lake');
             SELECT id FROM hist WHERE method = 'card' AND amount > 10 AND lower(method) <> 'x';"
        ),
    )
    .unwrap();
    let out = eddy(dir).args(["explain", "explain.sql"]).output().unwrap();
    common::assert_success(&out, "eddy explain");
    let plan = String::from_utf8_lossy(&out.stdout);
    // The conditions over columns; not the one calling a function.
    assert!(
        plan.contains(r#"pushed filter: (("method" = 'card') AND (amount > 10.0))]"#),
        "{plan}"
    );

    for (connector, path) in [("delta", "lake"), ("parquet", "files")] {
        let mut outputs = Vec::new();
        for batch_size in ["1", "8192"] {
            let (pushed, log) = per_minute(dir, connector, path, "method = 'card'", batch_size, "");
            let [files_skipped, files, groups_skipped, groups] = skipped(&log);
            eprintln!(
                "{connector} at batch size {batch_size}: skipped {files_skipped} of {files} files, \
                 {groups_skipped} of {groups} row groups"
            );
            match connector {
                // Delta statistics rule whole files out.
                "delta" => assert!(files_skipped * 3 > files, "{log}"),
                // A directory's files have no statistics; their row groups do.
                _ => assert!(files_skipped == 0 && groups_skipped * 3 > groups, "{log}"),
            }
            let (not_pushed, log) = per_minute(
                dir,
                connector,
                path,
                "lower(method) = 'card'",
                batch_size,
                "",
            );
            assert!(!log.contains("the pushed-down filter skipped"), "{log}");
            assert!(
                pushed == not_pushed,
                "{connector} at batch size {batch_size}: pushed {pushed:?}, not pushed {not_pushed:?}"
            );
            // Rows after each jump are late, skipped rows or not: the
            // count is the one the watermark in input order gives.
            let counted: u64 = pushed
                .iter()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["n"]
                        .as_u64()
                        .unwrap()
                })
                .sum();
            assert_eq!(
                counted,
                counted_card_rows(),
                "card rows counted: were the skipped rows' event times lost?"
            );
            outputs.push(pushed);
        }
        assert!(outputs[0] == outputs[1]);

        // With max_future_skew the jumps are bad rows instead (and nothing
        // is late): skipped or not, each is reported.
        let skew = ", max_future_skew = '30 s'";
        let (pushed, pushed_log) =
            per_minute(dir, connector, path, "method = 'card'", "8192", skew);
        let pushed_bad = bad_rows(&pushed_log);
        let (not_pushed, log) =
            per_minute(dir, connector, path, "lower(method) = 'card'", "8192", skew);
        assert_eq!(
            pushed_bad,
            bad_rows(&log),
            "pushed: {pushed_log}\nnot pushed: {log}"
        );
        assert_eq!(pushed_bad, 10, "one per wire block: {log}");
        assert!(pushed == not_pushed);
    }
}

/// The bad rows a run's summary counts for `hist`.
fn bad_rows(log: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.starts_with("source hist: "))
        .unwrap_or_else(|| panic!("no source line:\n{log}"));
    line.rsplit(" + ")
        .next()
        .and_then(|b| b.strip_suffix(" bad"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"))
}

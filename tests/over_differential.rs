//! Differential tests of OVER aggregates: eddy's streaming results must equal
//! DataFusion's batch window functions over the whole input ordered by event
//! time — running aggregates (both running frames and the RANGE default,
//! the native forms on NULLs and BIGINTs), eddy's Welford UDAFs, `row_number`, `lag` and `lead` — on randomized data with
//! disorder inside the watermark bound, for batch sizes 1, 7, 1024 and 8192.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::{BTreeMap, HashSet};

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const SOURCE: &str = "CREATE TABLE events (
  k VARCHAR, v DOUBLE, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = 'bound-by---input');";

/// Unique event times (SQL leaves the order of ties open), disorder < 2 s.
fn random_input(seed: u64, rows: usize) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut base = 1_700_000_000_000i64;
    let mut seen = HashSet::new();
    let mut out = String::new();
    for _ in 0..rows {
        base += rng.random_range(1..50);
        let mut ts = base - rng.random_range(0..1_500);
        while !seen.insert(ts) {
            ts += 1;
        }
        let k = format!("k{}", rng.random_range(0..12));
        let v = f64::from(rng.random_range(0..50_000)) / 100.0;
        out.push_str(&format!("{{\"k\":\"{k}\",\"v\":{v},\"ts\":{ts}}}\n"));
    }
    out
}

const QUERIES: [&str; 7] = [
    "SELECT k, ts, v,
        count(*) OVER (PARTITION BY k ORDER BY event_time) AS c,
        sum(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS s,
        avg(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS a_before,
        max(v) OVER (PARTITION BY k ORDER BY event_time) AS hi,
        lag(v) OVER (PARTITION BY k ORDER BY event_time) AS prev,
        lag(v, 2, -1.0) OVER (PARTITION BY k ORDER BY event_time) AS prev2,
        row_number() OVER (PARTITION BY k ORDER BY event_time) AS rn
     FROM events",
    "SELECT k, ts,
        welford_mean(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS m,
        welford_stddev_pop(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS sd,
        dynamic_threshold(v, 3.0, 400.0, 5) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS th
     FROM events",
    "SELECT k, ts, count(*) OVER (ORDER BY event_time) AS c, min(v) OVER (ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS lo
     FROM events WHERE v > 100",
    // The native running aggregates on NULLs and BIGINTs, every running frame.
    "SELECT k, ts,
        count(CASE WHEN v > 250 THEN v END) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS c,
        sum(CAST(v * 100 AS BIGINT)) OVER (PARTITION BY k ORDER BY event_time) AS si,
        avg(CASE WHEN v > 100 THEN v END) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS a,
        sum(CASE WHEN v < 50 THEN v END) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS low
     FROM events",
    // Sliding frames: rows leave the aggregate as they fall out of the frame.
    "SELECT k, ts,
        sum(v) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND CURRENT ROW) AS s2,
        count(*) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN INTERVAL '500' MILLISECOND PRECEDING AND CURRENT ROW) AS c,
        max(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS hi3,
        avg(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS a2
     FROM events",
    // Leads: rows wait for their successors, with the other functions.
    "SELECT k, ts, v,
        lead(v) OVER (PARTITION BY k ORDER BY event_time) AS next,
        lead(v, 3, -1.0) OVER (PARTITION BY k ORDER BY event_time) AS next3,
        lag(v) OVER (PARTITION BY k ORDER BY event_time) AS prev,
        count(*) OVER (PARTITION BY k ORDER BY event_time) AS c
     FROM events",
    "SELECT k, ts, lead(ts, 2) OVER (ORDER BY event_time) AS later FROM events WHERE v > 300",
];

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|r| format!("{}{}", r["k"], r["ts"]));
    rows
}

fn batch_rows(input: &str, sql: &str) -> Vec<Value> {
    sorted(batch_rows_in_order(input, sql))
}

/// DataFusion's rows for `sql` over the input, in the order it gives them.
fn batch_rows_in_order(input: &str, sql: &str) -> Vec<Value> {
    let schema = Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Float64, true),
        Field::new("ts", DataType::Int64, true),
    ]);
    let sql =
        format!("WITH events AS (SELECT *, to_timestamp_millis(ts) AS event_time FROM raw) {sql}");
    let lines = common::datafusion_json_lines(&[("raw", input, schema)], &sql);
    common::json_rows(lines.iter().map(String::as_str))
}

/// eddy's rows for `query` over the input file, in the order it writes them.
fn eddy_rows(input: &str, query: &str, batch_size: usize, parallelism: usize) -> Vec<Value> {
    let file = SqlFile {
        name: "<over>".into(),
        text: format!("{SOURCE}\n{query};"),
    };
    let inputs = BTreeMap::from([("events".to_string(), input.to_string())]);
    let captured = common::run_captured_in_parallel(
        &[file],
        &BTreeMap::new(),
        inputs,
        batch_size,
        parallelism,
    )
    .unwrap_or_else(|e| panic!("{query}: {e}"));
    common::json_rows(captured.lines.iter().map(String::as_str))
}

#[test]
fn over_aggregates_match_datafusion_window_functions() {
    let dir = tempfile::tempdir().expect("tempdir");
    for seed in [21u64, 22] {
        let path = dir.path().join(format!("events-{seed}.ndjson"));
        std::fs::write(&path, random_input(seed, 2_000)).expect("write");
        let input = path.display().to_string();
        for query in QUERIES {
            let expected = batch_rows(&input, query);
            assert!(expected.len() > 500);
            for (batch_size, parallelism) in common::SWEEP {
                let actual = sorted(eddy_rows(&input, query, batch_size, parallelism));
                common::assert_same_rows(
                    &actual,
                    &expected,
                    &format!(
                        "{query} (seed {seed}, batch {batch_size}, parallelism {parallelism})"
                    ),
                );
            }
        }
    }
}

/// `SET 'table.exec.state.ttl'`: a key's row more than the TTL after its
/// previous row starts from empty state. The batch equivalent numbers each
/// key's runs of rows separated by gaps over the TTL and partitions by them.
#[test]
fn state_ttl_restarts_idle_keys_like_a_batch_query_over_gap_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.ndjson");
    std::fs::write(&path, random_input(31, 3_000)).expect("write");
    let input = path.display().to_string();
    let expected = batch_rows(
        &input,
        "SELECT k, ts, count(*) OVER (PARTITION BY k, s ORDER BY event_time) AS c,
                sum(v) OVER (PARTITION BY k, s ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS total,
                lead(ts) OVER (PARTITION BY k, s ORDER BY event_time) AS next
         FROM (SELECT *, sum(fresh) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS s
               FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY event_time) > 300 THEN 1 ELSE 0 END AS fresh
                     FROM events))",
    );
    let restarts = expected.iter().filter(|r| r["c"] == 1).count();
    assert!(
        restarts > 12 * 5,
        "the TTL restarts keys often ({restarts})"
    );
    for batch_size in [1usize, 64, 8192] {
        let file = SqlFile {
            name: "<ttl>".into(),
            text: format!(
                "{SOURCE}\nSET 'table.exec.state.ttl' = '300ms';
                 SELECT k, ts, count(*) OVER (PARTITION BY k ORDER BY event_time) AS c,
                        sum(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS total,
                        lead(ts) OVER (PARTITION BY k ORDER BY event_time) AS next
                 FROM events;"
            ),
        };
        let inputs = BTreeMap::from([("events".to_string(), input.clone())]);
        let captured =
            common::run_captured(&[file], &BTreeMap::new(), inputs, batch_size).expect("ttl job");
        let actual = sorted(common::json_rows(captured.lines.iter().map(String::as_str)));
        assert_eq!(actual.len(), expected.len());
        for (a, e) in actual.iter().zip(&expected) {
            assert!(
                common::same_json(a, e),
                "batch {batch_size}:\n  eddy:       {a}\n  datafusion: {e}"
            );
        }
    }
}

/// Rows waiting for their leads hold the watermark back: a window over
/// them counts every row in its window, none taken for late.
#[test]
fn windows_over_leads_see_every_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.ndjson");
    std::fs::write(&path, random_input(41, 2_000)).expect("write");
    let input = path.display().to_string();
    let expected = batch_rows_in_order(
        &input,
        "SELECT date_bin(INTERVAL '2' SECOND, event_time) AS window_start, count(*) AS n,
                sum(gap) AS gaps
         FROM (SELECT event_time, lead(ts) OVER (PARTITION BY k ORDER BY event_time) - ts AS gap
               FROM events WHERE k IN ('k1', 'k2'))
         GROUP BY 1 ORDER BY 1",
    );
    assert!(expected.len() > 20);
    let query = "CREATE VIEW gaps AS
         SELECT event_time, lead(ts) OVER (PARTITION BY k ORDER BY event_time) - ts AS gap
         FROM events WHERE k IN ('k1', 'k2');
         SELECT window_start, count(*) AS n, sum(gap) AS gaps
         FROM TABLE(TUMBLE(TABLE gaps, DESCRIPTOR(event_time), INTERVAL '2' SECOND))
         GROUP BY window_start, window_end";
    for (batch_size, parallelism) in common::SWEEP {
        let mut actual = eddy_rows(&input, query, batch_size, parallelism);
        actual.sort_by_key(|r| r["window_start"].to_string());
        common::assert_same_rows(
            &actual,
            &expected,
            &format!("windows over leads (batch {batch_size}, parallelism {parallelism})"),
        );
    }
}

/// OVER in another order than event time, over a table without event time,
/// and over an updating query: eddy's changelog, replayed, ends as
/// DataFusion's window functions over the whole input.
#[test]
fn updating_over_ends_as_datafusion_window_functions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.ndjson");
    std::fs::write(&path, random_input(51, 600)).expect("write");
    let input = path.display().to_string();
    let no_time = "CREATE TABLE events (k VARCHAR, v DOUBLE, ts BIGINT)
        WITH (connector = 'file', path = 'bound-by---input');";
    let cases = [
        (
            SOURCE,
            "SELECT k, ts, v,
                sum(v) OVER (PARTITION BY k ORDER BY v, ts) AS s,
                lead(ts) OVER (PARTITION BY k ORDER BY v, ts) AS nxt,
                first_value(ts) OVER (PARTITION BY k ORDER BY v, ts ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING) AS fv,
                count(*) OVER (PARTITION BY k ORDER BY v DESC, ts) AS above
             FROM events",
        ),
        (
            no_time,
            "SELECT k, ts, avg(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS a,
                lag(v, 2) OVER (PARTITION BY k ORDER BY ts) AS before2,
                max(v) OVER (PARTITION BY k) AS top
             FROM events",
        ),
        (
            SOURCE,
            "SELECT k, c, sum(c) OVER (ORDER BY c, k) AS running, lead(k) OVER (ORDER BY c, k) AS next_k
             FROM (SELECT k, count(*) AS c FROM events WHERE v > 100 GROUP BY k)",
        ),
    ];
    for (source, query) in cases {
        let mut expected = batch_rows_in_order(&input, query);
        expected.sort_by_key(common::row_key);
        assert!(expected.len() >= 12);
        for (batch_size, parallelism) in common::SWEEP {
            let file = SqlFile {
                name: "<over>".into(),
                text: format!("{source}\n{query};"),
            };
            let inputs = BTreeMap::from([("events".to_string(), input.clone())]);
            let captured = common::run_captured_in_parallel(
                &[file],
                &BTreeMap::new(),
                inputs,
                batch_size,
                parallelism,
            )
            .unwrap_or_else(|e| panic!("{query}: {e}"));
            assert!(
                common::is_changelog(&captured.lines),
                "an updating output: {:?}",
                captured.lines.first()
            );
            let table = common::replay_changelog(&captured.lines).expect("a consistent changelog");
            let mut actual = common::json_rows(table.iter().map(String::as_str));
            actual.sort_by_key(common::row_key);
            common::assert_same_rows(
                &actual,
                &expected,
                &format!("{query} (batch {batch_size}, parallelism {parallelism})"),
            );
        }
    }
}

/// Keys that stop sending are dropped from memory once the TTL has passed
/// them; without a TTL they stay.
#[test]
fn state_ttl_bounds_the_keys_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rotating.ndjson");
    // 100 keys, each active for 40 rows (about 1 s of event time), never again.
    let text: String = (0..4_000)
        .map(|i| {
            format!(
                "{{\"k\":\"k{}\",\"v\":1.0,\"ts\":{}}}\n",
                i / 40,
                1_700_000_000_000i64 + i * 25
            )
        })
        .collect();
    std::fs::write(&path, text).expect("write");
    let held = |settings: &str| {
        let file = SqlFile {
            name: "<ttl>".into(),
            text: format!("{SOURCE}\n{settings}\nSELECT k, count(*) OVER (PARTITION BY k ORDER BY event_time) AS c FROM events;"),
        };
        let inputs = BTreeMap::from([("events".to_string(), path.display().to_string())]);
        let captured = common::run_captured(&[file], &BTreeMap::new(), inputs, 100).expect("job");
        captured
            .report
            .nodes
            .iter()
            .find(|n| n.kind == "over")
            .expect("over node")
            .metrics
            .state_rows
    };
    assert_eq!(held(""), 100, "without a TTL every key stays");
    let with_ttl = held("SET 'table.exec.state.ttl' = '2s';");
    assert!(
        with_ttl <= 5,
        "with a 2 s TTL only the last keys stay ({with_ttl})"
    );
}

/// `ORDER BY event_time, v DESC` on the stream: the rows in exactly the
/// order DataFusion's batch ORDER BY gives (times are unique, so the order
/// is total), whatever the batch size and parallelism upstream.
#[test]
fn order_by_event_time_equals_a_batch_order_by() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.ndjson");
    std::fs::write(&path, random_input(23, 3_000)).expect("write");
    let input = path.display().to_string();
    let query = "SELECT k, ts, v FROM events WHERE v > 50 ORDER BY event_time, v DESC";
    let expected = batch_rows_in_order(&input, query);
    assert!(expected.len() > 1_000);
    for (batch_size, parallelism) in common::SWEEP {
        // Not sorted: the order is the result.
        let actual = eddy_rows(&input, query, batch_size, parallelism);
        common::assert_same_rows(
            &actual,
            &expected,
            &format!("{query} (batch {batch_size}, parallelism {parallelism})"),
        );
    }
}

//! Differential tests: windowed queries run by eddy's streaming engine must
//! produce exactly the rows DataFusion computes for the same aggregation as
//! one batch query over the whole input (tumble, hop, cumulate and session
//! windows, cascading windows, window Top-N, window joins) — on randomized inputs with bounded
//! disorder (no late rows), for batch sizes 1, 7, 1024 and 8192.
//!
//! Rows are compared as JSON objects after sorting; floating-point values
//! (whose last bits depend on summation order) within 1e-9 relative error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::io::Write;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const T0: i64 = 1_700_000_000_000;
const BOUND_MS: i64 = 2_000;

const SOURCE: &str = "CREATE TABLE events (
  k VARCHAR, v DOUBLE, n BIGINT, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = 'bound-by---input');";

/// Random rows in arrival order: event time disorder below the watermark
/// bound, so that no row is late.
fn random_input(seed: u64, rows: usize) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut base = T0 + rng.random_range(0..10_000);
    let mut out = String::new();
    for _ in 0..rows {
        base += rng.random_range(0..40);
        let ts = base - rng.random_range(0..BOUND_MS);
        let k = format!("k{:02}", rng.random_range(0..17));
        let v = f64::from(rng.random_range(0..100_000)) / 100.0;
        let n = rng.random_range(0..40);
        out.push_str(&format!(
            "{{\"k\":\"{k}\",\"v\":{v},\"n\":{n},\"ts\":{ts}}}\n"
        ));
    }
    out
}

/// The batch equivalent of hop(slide, width): one branch per window a row can fall in.
fn hop_rows(slide_s: i64, width_s: i64) -> String {
    let branches = (width_s + slide_s - 1) / slide_s;
    let parts: Vec<String> = (0..branches)
        .map(|j| {
            format!(
                "SELECT date_bin(INTERVAL '{slide_s} seconds', event_time) - INTERVAL '{} seconds' AS ws, k, v, n, event_time FROM e",
                j * slide_s
            )
        })
        .collect();
    format!(
        "(SELECT * FROM ({}) WHERE event_time < ws + INTERVAL '{width_s} seconds')",
        parts.join(" UNION ALL ")
    )
}

struct Case {
    name: &'static str,
    streaming: String,
    batch: String,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "tumble per key, many aggregates",
            streaming: "SELECT w.start AS ws, w.end AS we, k, c, s, lo, hi, a, d, sd FROM (
                SELECT tumble(INTERVAL '10' SECOND) AS w, k, count(*) AS c, sum(v) AS s, min(n) AS lo, max(n) AS hi,
                       avg(v) AS a, count(DISTINCT n) AS d, stddev(v) AS sd
                FROM events GROUP BY w, k)"
                .into(),
            batch: "SELECT date_bin(INTERVAL '10 seconds', event_time) AS ws,
                           date_bin(INTERVAL '10 seconds', event_time) + INTERVAL '10 seconds' AS we, k,
                           count(*) AS c, sum(v) AS s, min(n) AS lo, max(n) AS hi, avg(v) AS a,
                           count(DISTINCT n) AS d, stddev(v) AS sd
                    FROM e GROUP BY 1, 2, 3"
                .into(),
        },
        Case {
            name: "hop 2s/6s per key",
            streaming: "SELECT w.start AS ws, w.end AS we, k, c, s FROM (
                SELECT hop(INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS w, k, count(*) AS c, sum(v) AS s
                FROM events GROUP BY w, k)"
                .into(),
            batch: format!(
                "SELECT ws, ws + INTERVAL '6 seconds' AS we, k, count(*) AS c, sum(v) AS s FROM {} GROUP BY 1, 2, 3",
                hop_rows(2, 6)
            ),
        },
        Case {
            name: "hop 3s/5s (width not a multiple of slide)",
            streaming: "SELECT w.start AS ws, k, hi, lo FROM (
                SELECT hop(INTERVAL '3' SECOND, INTERVAL '5' SECOND) AS w, k, max(v) AS hi, min(v) AS lo
                FROM events GROUP BY w, k)"
                .into(),
            batch: format!("SELECT ws, k, max(v) AS hi, min(v) AS lo FROM {} GROUP BY 1, 2", hop_rows(3, 5)),
        },
        Case {
            name: "tumble without keys, FILTER and HAVING",
            streaming: "SELECT w.start AS ws, c, big FROM (
                SELECT tumble(INTERVAL '7' SECOND) AS w, count(*) AS c, count(*) FILTER (WHERE v > 500) AS big
                FROM events GROUP BY w HAVING count(*) > 150)"
                .into(),
            batch: "SELECT date_bin(INTERVAL '7 seconds', event_time) AS ws, count(*) AS c,
                           count(*) FILTER (WHERE v > 500) AS big
                    FROM e GROUP BY 1 HAVING count(*) > 150"
                .into(),
        },
        Case {
            name: "window over a filtered projection with a computed key",
            streaming: "SELECT w.start AS ws, bucket, c FROM (
                SELECT tumble(INTERVAL '5' SECOND) AS w, n % 3 AS bucket, count(*) AS c
                FROM (SELECT n, event_time FROM events WHERE k <> 'k03') GROUP BY w, n % 3)"
                .into(),
            batch: "SELECT date_bin(INTERVAL '5 seconds', event_time) AS ws, n % 3 AS bucket, count(*) AS c
                    FROM e WHERE k <> 'k03' GROUP BY 1, 2"
                .into(),
        },
        Case {
            name: "cumulate 2s/10s per key",
            streaming: "SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS c, SUM(v) AS s
                FROM TABLE(CUMULATE(TABLE events, DESCRIPTOR(event_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
                GROUP BY window_start, window_end, k"
                .into(),
            batch: format!(
                "SELECT ws, we, k, count(*) AS c, sum(v) AS s FROM ({}) WHERE event_time < we GROUP BY 1, 2, 3",
                (1..=5)
                    .map(|j| format!("SELECT date_bin(INTERVAL '10 seconds', event_time) AS ws, date_bin(INTERVAL '10 seconds', event_time) + INTERVAL '{} seconds' AS we, k, v, event_time FROM e", 2 * j))
                    .collect::<Vec<_>>()
                    .join(" UNION ALL ")
            ),
        },
        Case {
            name: "session windows, gap 1.5s, per key",
            streaming: "SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS c, SUM(v) AS s, MAX(n) AS hi
                FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(event_time), INTERVAL '1.5' SECOND))
                GROUP BY window_start, window_end, k"
                .into(),
            // A row opens a session when the key's previous row is more than
            // 1.5 s before it; sessions are numbered by a running sum of those.
            batch: "SELECT min(event_time) AS ws, max(event_time) + INTERVAL '1500 milliseconds' AS we, k,
                           count(*) AS c, sum(v) AS s, max(n) AS hi
                    FROM (SELECT *, sum(fresh) OVER (PARTITION BY k ORDER BY ts, seq ROWS UNBOUNDED PRECEDING) AS session
                          FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts, seq) <= 1500 THEN 0 ELSE 1 END AS fresh
                                FROM (SELECT *, row_number() OVER () AS seq FROM e)))
                    GROUP BY k, session"
                .into(),
        },
        Case {
            name: "cascading windows: 20 s over 5 s results",
            streaming: "WITH five AS (
                    SELECT window_time AS rowtime, k, SUM(v) AS partial
                    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
                    GROUP BY window_start, window_end, window_time, k)
                SELECT window_start AS ws, window_end AS we, COUNT(*) AS groups, SUM(partial) AS s
                FROM TABLE(TUMBLE(TABLE five, DESCRIPTOR(rowtime), INTERVAL '20' SECOND))
                GROUP BY window_start, window_end"
                .into(),
            batch: "SELECT date_bin(INTERVAL '20 seconds', ws5) AS ws, date_bin(INTERVAL '20 seconds', ws5) + INTERVAL '20 seconds' AS we,
                           count(*) AS groups, sum(partial) AS s
                    FROM (SELECT date_bin(INTERVAL '5 seconds', event_time) AS ws5, k, sum(v) AS partial FROM e GROUP BY 1, 2)
                    GROUP BY 1, 2"
                .into(),
        },
        Case {
            name: "window Top-N: row_number, rank and dense_rank per 10 s",
            streaming: "SELECT * FROM (
                SELECT ws, k, c, ROW_NUMBER() OVER (PARTITION BY ws, we ORDER BY c DESC, k) AS rn,
                       RANK() OVER (PARTITION BY ws, we ORDER BY c DESC, k) AS r,
                       DENSE_RANK() OVER (PARTITION BY ws, we ORDER BY c DESC, k) AS dr
                FROM (SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS c
                      FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
                      GROUP BY window_start, window_end, k)) WHERE rn <= 3"
                .into(),
            batch: "SELECT * FROM (
                SELECT ws, k, c, ROW_NUMBER() OVER (PARTITION BY ws ORDER BY c DESC, k) AS rn,
                       RANK() OVER (PARTITION BY ws ORDER BY c DESC, k) AS r,
                       DENSE_RANK() OVER (PARTITION BY ws ORDER BY c DESC, k) AS dr
                FROM (SELECT date_bin(INTERVAL '10 seconds', event_time) AS ws, k, count(*) AS c FROM e GROUP BY 1, 2)) WHERE rn <= 3"
                .into(),
        },
        Case {
            name: "window Top-N with ties: rank over counts",
            streaming: "SELECT ws, k, c, r FROM (
                SELECT ws, k, c, RANK() OVER (PARTITION BY ws, we ORDER BY c DESC) AS r
                FROM (SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS c
                      FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
                      GROUP BY window_start, window_end, k)) WHERE r <= 2"
                .into(),
            batch: "SELECT ws, k, c, r FROM (
                SELECT ws, k, c, RANK() OVER (PARTITION BY ws ORDER BY c DESC) AS r
                FROM (SELECT date_bin(INTERVAL '10 seconds', event_time) AS ws, k, count(*) AS c FROM e GROUP BY 1, 2)) WHERE r <= 2"
                .into(),
        },
        Case {
            name: "window FULL join of two window aggregates",
            streaming: "SELECT COALESCE(l.ws, r.ws) AS ws, COALESCE(l.k, r.k) AS k, l.c AS even, r.s AS odd_sum
                FROM (SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS c
                      FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
                      WHERE n % 2 = 0 GROUP BY window_start, window_end, k) l
                FULL JOIN (SELECT window_start AS ws, window_end AS we, k, SUM(v) AS s
                      FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
                      WHERE n % 2 = 1 AND k <> 'k03' GROUP BY window_start, window_end, k) r
                ON l.ws = r.ws AND l.we = r.we AND l.k = r.k"
                .into(),
            batch: "SELECT COALESCE(l.ws, r.ws) AS ws, COALESCE(l.k, r.k) AS k, l.c AS even, r.s AS odd_sum
                FROM (SELECT date_bin(INTERVAL '5 seconds', event_time) AS ws, k, count(*) AS c FROM e WHERE n % 2 = 0 GROUP BY 1, 2) l
                FULL JOIN (SELECT date_bin(INTERVAL '5 seconds', event_time) AS ws, k, sum(v) AS s FROM e WHERE n % 2 = 1 AND k <> 'k03' GROUP BY 1, 2) r
                ON l.ws = r.ws AND l.k = r.k"
                .into(),
        },
        Case {
            name: "window join of window table functions' rows",
            streaming: "SELECT a.k, a.ts AS ta, b.ts AS tb, a.window_start AS ws
                FROM (SELECT * FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '2' SECOND)) WHERE v < 30) a
                JOIN (SELECT * FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '2' SECOND)) WHERE v > 970) b
                ON a.k = b.k AND a.window_start = b.window_start AND a.window_end = b.window_end"
                .into(),
            batch: "SELECT a.k, a.ts AS ta, b.ts AS tb, a.ws
                FROM (SELECT *, date_bin(INTERVAL '2 seconds', event_time) AS ws FROM e WHERE v < 30) a
                JOIN (SELECT *, date_bin(INTERVAL '2 seconds', event_time) AS ws FROM e WHERE v > 970) b
                ON a.k = b.k AND a.ws = b.ws"
                .into(),
        },
    ]
}

fn batch_rows(input: &str, sql: &str) -> Vec<Value> {
    let schema = Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Float64, true),
        Field::new("n", DataType::Int64, true),
        Field::new("ts", DataType::Int64, true),
    ]);
    let sql =
        format!("WITH e AS (SELECT *, to_timestamp_millis(ts) AS event_time FROM events) {sql}");
    let lines = common::datafusion_json_lines(&[("events", input, schema)], &sql);
    common::json_rows(lines.iter().map(String::as_str))
}

#[test]
fn windows_match_datafusion_batch_queries() {
    let dir = tempfile::tempdir().expect("tempdir");
    for seed in [1u64, 2, 3] {
        let path = dir.path().join(format!("events-{seed}.ndjson"));
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(random_input(seed, 4_000).as_bytes()))
            .expect("write input");
        let input = path.display().to_string();
        for case in cases() {
            let mut expected = batch_rows(&input, &case.batch);
            assert!(
                !expected.is_empty(),
                "{}: the batch query returned nothing",
                case.name
            );
            expected.sort_by_key(common::row_key);
            for (batch_size, parallelism) in common::SWEEP {
                let file = SqlFile {
                    name: "<differential>".into(),
                    text: format!("{SOURCE}\n{};", case.streaming),
                };
                let inputs = BTreeMap::from([("events".to_string(), input.clone())]);
                let captured = common::run_captured_in_parallel(
                    &[file],
                    &BTreeMap::new(),
                    inputs,
                    batch_size,
                    parallelism,
                )
                .unwrap_or_else(|e| {
                    panic!(
                        "{} (seed {seed}, batch {batch_size}, parallelism {parallelism}): {e}",
                        case.name
                    )
                });
                assert_eq!(
                    common::late_rows(&captured.report),
                    0,
                    "the generated input has no late rows"
                );
                let mut actual = common::json_rows(captured.lines.iter().map(String::as_str));
                actual.sort_by_key(common::row_key);
                common::assert_same_rows(
                    &actual,
                    &expected,
                    &format!(
                        "{} (seed {seed}, batch {batch_size}, parallelism {parallelism})",
                        case.name
                    ),
                );
            }
        }
    }
}

//! Differential tests of the interval join: eddy's streaming join must give
//! exactly the rows of the same join run by DataFusion as a batch query over
//! the whole input — inner, left, right and full, with inclusive and
//! exclusive bounds and a residual predicate — on randomized keys, times and
//! disorder (within the watermark bound), for batch sizes 1, 7, 1024, 8192.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const T0: i64 = 1_700_000_000_000;

fn table(name: &str, value: &str) -> String {
    format!(
        "CREATE TABLE {name} (k VARCHAR, {value} BIGINT, ts BIGINT,
           et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
           WATERMARK FOR et AS et - INTERVAL '2' SECOND) WITH (connector = 'file', path = 'bound-by---input');"
    )
}

/// Rows with keys from a domain of `keys` values (some NULL) and disorder
/// below 2 s.
fn random_side(seed: u64, rows: usize, keys: u32, value: &str) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut base = T0;
    let mut out = String::new();
    for i in 0..rows {
        base += rng.random_range(0..60);
        let ts = base - rng.random_range(0..2_000);
        let key = if rng.random_range(0..25) == 0 {
            "null".to_string()
        } else {
            format!("\"k{}\"", rng.random_range(0..keys))
        };
        out.push_str(&format!("{{\"k\":{key},\"{value}\":{i},\"ts\":{ts}}}\n"));
    }
    out
}

fn join_sql(kind: &str, condition: &str) -> String {
    format!(
        "SELECT l.k AS lk, l.a, l.ts AS lts, r.k AS rk, r.b, r.ts AS rts
         FROM l {kind} JOIN r ON l.k = r.k AND {condition}"
    )
}

fn batch_rows(left: &str, right: &str, sql: &str) -> Vec<String> {
    let schema = |value: &str| {
        Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new(value, DataType::Int64, true),
            Field::new("ts", DataType::Int64, true),
        ])
    };
    let sql = format!(
        "WITH l AS (SELECT *, to_timestamp_millis(ts) AS et FROM l_raw),
              r AS (SELECT *, to_timestamp_millis(ts) AS et FROM r_raw) {sql}"
    );
    let lines = common::datafusion_json_lines(
        &[("l_raw", left, schema("a")), ("r_raw", right, schema("b"))],
        &sql,
    );
    canonical(lines.iter().map(String::as_str))
}

fn canonical<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut rows: Vec<String> = lines
        .map(|l| {
            let json = l.split_once("> ").map(|(_, j)| j).unwrap_or(l);
            serde_json::from_str::<serde_json::Value>(json)
                .expect("json")
                .to_string()
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn interval_joins_match_datafusion_batch_joins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conditions = [
        "r.et BETWEEN l.et - INTERVAL '1' SECOND AND l.et + INTERVAL '3' SECOND",
        "r.et >= l.et AND r.et < l.et + INTERVAL '2' SECOND AND l.a % 3 <> r.b % 3",
        "l.et > r.et - INTERVAL '500' MILLISECOND AND l.et <= r.et + INTERVAL '4' SECOND",
    ];
    // Seed 13: one hot key (every row in one index bucket, evicted out of
    // arrival order), the case where removing rows from a bucket must not
    // cost the bucket's length.
    for (seed, rows, keys) in [(11u64, 1_500usize, 30u32), (12, 1_500, 30), (13, 400, 1)] {
        let left = dir.path().join(format!("l-{seed}.ndjson"));
        let right = dir.path().join(format!("r-{seed}.ndjson"));
        std::fs::write(&left, random_side(seed, rows, keys, "a")).expect("write");
        std::fs::write(&right, random_side(seed + 100, rows, keys, "b")).expect("write");
        let (left, right) = (left.display().to_string(), right.display().to_string());
        for kind in ["INNER", "LEFT", "RIGHT", "FULL"] {
            for condition in conditions {
                let sql = join_sql(kind, condition);
                let expected = batch_rows(&left, &right, &sql);
                assert!(!expected.is_empty());
                for (batch_size, parallelism) in common::SWEEP {
                    let text = format!("{}\n{}\n{sql};", table("l", "a"), table("r", "b"));
                    let inputs = BTreeMap::from([
                        ("l".to_string(), left.clone()),
                        ("r".to_string(), right.clone()),
                    ]);
                    let captured = common::run_captured_in_parallel(
                        &[SqlFile {
                            name: "<join>".into(),
                            text,
                        }],
                        &BTreeMap::new(),
                        inputs,
                        batch_size,
                        parallelism,
                    )
                    .unwrap_or_else(|e| panic!("{kind} JOIN ON {condition}: {e}"));
                    let actual = canonical(captured.lines.iter().map(String::as_str));
                    if actual != expected {
                        let missing: Vec<_> = expected
                            .iter()
                            .filter(|r| !actual.contains(r))
                            .take(3)
                            .collect();
                        let extra: Vec<_> = actual
                            .iter()
                            .filter(|r| !expected.contains(r))
                            .take(3)
                            .collect();
                        panic!(
                            "{kind} JOIN ON {condition} (seed {seed}, batch {batch_size}, parallelism {parallelism}): {} rows, expected {}\n missing {missing:?}\n extra {extra:?}",
                            actual.len(),
                            expected.len()
                        );
                    }
                    // One join node, or one per instance: together they
                    // saw every row once and hold none at the end.
                    let joins: Vec<_> = captured
                        .report
                        .nodes
                        .iter()
                        .filter(|n| n.kind == "interval_join")
                        .collect();
                    assert_eq!(joins.len(), parallelism);
                    let mut rows_in = vec![0u64, 0];
                    for join in &joins {
                        assert_eq!(join.metrics.state_rows, 0, "state is empty at the end");
                        for (total, n) in rows_in.iter_mut().zip(&join.metrics.rows_in_by_input) {
                            *total += n;
                        }
                    }
                    assert_eq!(rows_in, vec![rows as u64, rows as u64]);
                }
            }
        }
    }
}

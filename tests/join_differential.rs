//! Differential tests of the interval join: eddy's streaming join must give
//! exactly the rows of the same join run by DataFusion as a batch query over
//! the whole input — inner, left, right, full, semi and anti, with inclusive and
//! exclusive bounds and a residual predicate — on randomized keys, times and
//! disorder (within the watermark bound), for batch sizes 1, 7, 1024, 8192.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_engine::graph::NodeKind;
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
        "SELECT l.k AS lk, l.a, l.ts AS lts, r.k AS rk, r.b, r.ts AS rts,
                l.a IS NULL AS l_missing, r.b IS NULL AS r_missing
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
                let case = format!("{kind} JOIN ON {condition} (seed {seed})");
                assert_streaming_join_equals(
                    &case,
                    &sql,
                    &sql,
                    (&left, &right),
                    rows,
                    "interval_join",
                );
            }
        }
    }
}

/// EXISTS and NOT EXISTS bounded by event time are semi and anti interval
/// joins (each left row once, or the left rows no partner met, with
/// bounded state); without the bound they stay updating joins.
#[test]
fn semi_and_anti_interval_joins_match_datafusion_batch_joins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (rows, seed) = (1_200usize, 31u64);
    let left = dir.path().join("l.ndjson");
    let right = dir.path().join("r.ndjson");
    std::fs::write(&left, random_side(seed, rows, 40, "a")).expect("write");
    std::fs::write(&right, random_side(seed + 100, rows, 40, "b")).expect("write");
    let (left, right) = (left.display().to_string(), right.display().to_string());
    for negated in ["", "NOT "] {
        for condition in [
            "r.et BETWEEN l.et - INTERVAL '1' SECOND AND l.et + INTERVAL '2' SECOND",
            "r.et >= l.et AND r.et < l.et + INTERVAL '3' SECOND AND l.a % 3 <> r.b % 3",
        ] {
            let sql = format!(
                "SELECT l.k AS lk, l.a, l.ts AS lts FROM l
                 WHERE {negated}EXISTS (SELECT 1 FROM r WHERE r.k = l.k AND {condition})"
            );
            assert_streaming_join_equals(
                &format!("{negated}EXISTS ({condition})"),
                &sql,
                &sql,
                (&left, &right),
                rows,
                "interval_join",
            );
        }
    }
}

/// A join without a time bound: INNER is a regular join (every row kept,
/// pairs whatever their times); with `SET 'table.exec.state.ttl'` any kind
/// is an interval join of plus or minus the TTL.
#[test]
fn regular_and_ttl_bounded_joins_match_datafusion_batch_joins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (rows, seed) = (500usize, 21u64);
    let left = dir.path().join("l.ndjson");
    let right = dir.path().join("r.ndjson");
    std::fs::write(&left, random_side(seed, rows, 40, "a")).expect("write");
    std::fs::write(&right, random_side(seed + 100, rows, 40, "b")).expect("write");
    let (left, right) = (left.display().to_string(), right.display().to_string());
    let sides = (left.as_str(), right.as_str());
    let regular = join_sql("INNER", "l.a % 3 <> r.b % 3");
    assert_streaming_join_equals(
        "regular join",
        &regular,
        &regular,
        sides,
        rows,
        "regular_join",
    );
    let comma =
        "SELECT l.k AS lk, l.a, l.ts AS lts, r.k AS rk, r.b, r.ts AS rts FROM l, r WHERE l.k = r.k";
    assert_streaming_join_equals("comma join", comma, comma, sides, rows, "regular_join");
    // Few columns read, conditions on one side: a side's own conditions
    // filter it before the join unless the join preserves that side, and
    // only the columns read, keys and times reach the join's state.
    let narrow = [
        "SELECT l.a, r.b FROM l JOIN r ON l.k = r.k WHERE l.ts % 2 = 0 AND r.b % 3 <> 1",
        "SELECT r.b, l.a IS NULL AS l_missing FROM l RIGHT JOIN r ON l.k = r.k
           AND r.et BETWEEN l.et - INTERVAL '1' SECOND AND l.et AND r.b % 2 = 0 AND l.a % 3 = 0",
        "SELECT l.a, r.ts IS NULL AS r_missing FROM l LEFT JOIN r ON l.k = r.k
           AND r.et BETWEEN l.et - INTERVAL '1' SECOND AND l.et AND r.b % 2 = 0 AND l.a % 3 = 0",
    ];
    // What the join does to each input on arrival: the inner join filters
    // both sides, the RIGHT join only the left, the LEFT join only the
    // right; each keeps the columns read, keys and event times.
    let prepared = [
        [
            "left input: filter(ts@2 % 2 = 0) columns[0, 1]",
            "right input: filter(b@1 % 3 != 1) columns[0, 1]",
        ],
        [
            "left input: filter(a@1 % 3 = 0) columns[0, 1, 3]",
            "right input: columns[0, 1, 3]",
        ],
        [
            "left input: columns[0, 1, 3]",
            "right input: filter(b@1 % 2 = 0) columns[0, 2, 3]",
        ],
    ];
    for (i, (sql, prepared)) in narrow.into_iter().zip(prepared).enumerate() {
        let kind = if i == 0 {
            "regular_join"
        } else {
            "interval_join"
        };
        let plan = join_plan(sql, kind);
        for expected in prepared {
            assert!(plan.contains(expected), "narrow join {i}: {plan}");
        }
        assert_streaming_join_equals(&format!("narrow join {i}"), sql, sql, sides, rows, kind);
    }
    for kind in ["INNER", "LEFT", "FULL"] {
        let streaming = format!(
            "SET 'table.exec.state.ttl' = '1500 ms';\n{}",
            join_sql(kind, "l.a >= 0")
        );
        let batch = join_sql(
            kind,
            "r.et BETWEEN l.et - INTERVAL '1500' MILLISECOND AND l.et + INTERVAL '1500' MILLISECOND",
        );
        let case = format!("{kind} JOIN with a state TTL");
        assert_streaming_join_equals(&case, &streaming, &batch, sides, rows, "interval_join");
    }
}

/// Temporal and lookup joins run keyed: each key's versions (or table
/// rows) and probe rows meet in one instance, so at 1, 2 and 4 instances
/// they equal the batch join. The event-time temporal join takes, for each
/// left row, the right row of its key with the latest time at or before
/// the left row's (the later in the file among rows of one time); the
/// lookup join against a bounded table, every right row of its key.
#[test]
fn temporal_and_lookup_joins_run_keyed_and_match_datafusion_batch_joins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = 400usize;
    let left = dir.path().join("l.ndjson");
    let right = dir.path().join("r.ndjson");
    std::fs::write(&left, random_side(31, rows, 30, "a")).expect("write");
    std::fs::write(&right, random_side(131, rows, 30, "b")).expect("write");
    let (left, right) = (left.display().to_string(), right.display().to_string());
    let sides = (left.as_str(), right.as_str());
    let columns = "l.k AS lk, l.a, l.ts AS lts, r.k AS rk, r.b, r.ts AS rts,
                   l.a IS NULL AS l_missing, r.b IS NULL AS r_missing";
    for kind in ["INNER", "LEFT"] {
        let temporal = format!(
            "SELECT {columns} FROM l {kind} JOIN r FOR SYSTEM_TIME AS OF l.et ON l.k = r.k"
        );
        let latest = format!(
            "SELECT lk, a, lts, rk, b, rts, l_missing, r_missing FROM (
               SELECT {columns}, ROW_NUMBER() OVER (PARTITION BY l.a ORDER BY r.et DESC, r.b DESC) AS rn
               FROM l {kind} JOIN r ON l.k = r.k AND r.et <= l.et) WHERE rn = 1"
        );
        assert_streaming_join_equals(
            &format!("{kind} temporal join"),
            &temporal,
            &latest,
            sides,
            rows,
            "temporal_join",
        );
        let lookup = format!(
            "SELECT {columns} FROM (SELECT *, PROCTIME() AS p FROM l) l
               {kind} JOIN r FOR SYSTEM_TIME AS OF l.p ON l.k = r.k"
        );
        let joined = format!("SELECT {columns} FROM l {kind} JOIN r ON l.k = r.k");
        assert_streaming_join_equals(
            &format!("{kind} lookup join"),
            &lookup,
            &joined,
            sides,
            rows,
            "lookup_join",
        );
    }
}

/// Runs `streaming_sql` over the two files with every batch size and
/// parallelism of the sweep and checks its rows against `batch_sql` run by
/// DataFusion, and that the join nodes (of `node_kind`, one per instance)
/// saw every row once and, but for a temporal or lookup join's table, hold
/// none at the end.
fn assert_streaming_join_equals(
    case: &str,
    streaming_sql: &str,
    batch_sql: &str,
    (left, right): (&str, &str),
    rows: usize,
    node_kind: &str,
) {
    let expected = batch_rows(left, right, batch_sql);
    assert!(!expected.is_empty(), "{case}: the batch join has rows");
    for (batch_size, parallelism) in common::SWEEP {
        let captured = run_join(streaming_sql, (left, right), batch_size, parallelism)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
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
                "{case} (batch {batch_size}, parallelism {parallelism}): {} rows, expected {}\n missing {missing:?}\n extra {extra:?}",
                actual.len(),
                expected.len()
            );
        }
        // One join node, or one per instance: together they saw every row
        // once and hold none at the end.
        let joins: Vec<_> = captured
            .report
            .nodes
            .iter()
            .filter(|n| n.kind == node_kind)
            .collect();
        assert_eq!(joins.len(), parallelism, "{case}: {node_kind} nodes");
        let mut rows_in = [0u64, 0];
        // A temporal join keeps each key's latest version and a lookup
        // join its table to the end: the rest hold nothing then.
        let keeps_a_table = matches!(node_kind, "temporal_join" | "lookup_join");
        for join in &joins {
            if !keeps_a_table {
                assert_eq!(join.metrics.state_rows, 0, "state is empty at the end");
            }
            for (total, n) in rows_in.iter_mut().zip(&join.metrics.rows_in_by_input) {
                *total += n;
            }
        }
        assert_eq!(rows_in, [rows as u64; 2], "{case}: rows into the join");
    }
}

/// The description of the `kind` node that `sql` over tables `l` and `r`
/// plans.
fn join_plan(sql: &str, kind: &str) -> String {
    let text = format!("{}\n{}\n{sql};", table("l", "a"), table("r", "b"));
    let job = eddy_sql::compile(
        &[SqlFile {
            name: "<join>".into(),
            text,
        }],
        &BTreeMap::new(),
    )
    .expect("plans");
    job.graph
        .nodes
        .iter()
        .find_map(|node| match &node.kind {
            NodeKind::Operator(plan) if plan.kind() == kind => Some(plan.describe()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {kind} node"))
}

/// Two files over overlapping periods (the right one starts 100 s later):
/// read at full speed, the right file's rows would wait in the join until
/// the left one's watermark reached them, 10,000 of them at once. Bounded
/// sources are read in step by event time (no more than 5 s apart), so
/// the join holds a few batches' worth at most, and the result is the
/// batch join's.
#[test]
fn bounded_sources_are_read_in_step_so_a_join_buffers_little() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = 20_000usize;
    let side = |offset_ms: i64, value: &str| {
        (0..rows)
            .map(|i| {
                let ts = T0 + offset_ms + i as i64 * 10;
                format!("{{\"k\":\"k{}\",\"{value}\":{i},\"ts\":{ts}}}\n", i % 50)
            })
            .collect::<String>()
    };
    let left = dir.path().join("l.ndjson");
    let right = dir.path().join("r.ndjson");
    std::fs::write(&left, side(0, "a")).expect("write");
    std::fs::write(&right, side(100_000, "b")).expect("write");
    let (left, right) = (left.display().to_string(), right.display().to_string());
    let sql = join_sql("INNER", "r.et BETWEEN l.et - INTERVAL '1' SECOND AND l.et");
    let expected = batch_rows(&left, &right, &sql);
    assert!(!expected.is_empty());
    let captured = run_join(&sql, (&left, &right), 256, 1).expect("runs");
    assert_eq!(
        canonical(captured.lines.iter().map(String::as_str)),
        expected
    );
    let join = captured
        .report
        .nodes
        .iter()
        .find(|n| n.kind == "interval_join")
        .expect("a join");
    assert!(
        join.metrics.peak_state_rows < 3_000,
        "the join held {} rows at once",
        join.metrics.peak_state_rows
    );
}

/// Runs `sql` over tables `l` and `r` read from the two files.
fn run_join(
    sql: &str,
    (left, right): (&str, &str),
    batch_size: usize,
    parallelism: usize,
) -> Result<common::Captured, eddy_cli::CliError> {
    let text = format!("{}\n{}\n{sql};", table("l", "a"), table("r", "b"));
    let inputs = BTreeMap::from([
        ("l".to_string(), left.to_string()),
        ("r".to_string(), right.to_string()),
    ]);
    common::run_captured_in_parallel(
        &[SqlFile {
            name: "<join>".into(),
            text,
        }],
        &BTreeMap::new(),
        inputs,
        batch_size,
        parallelism,
    )
}

/// A lookup table read from Parquet files ends: whether a table ends is
/// asked of its source when the job starts (not of a list of connector
/// names in the planner), so probe rows wait until the files are read
/// whole and the result is the regular join's, at every batch size and
/// parallelism — not the rows of a table still being read.
#[test]
fn a_lookup_table_read_from_parquet_is_read_whole_before_rows_join() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = 400usize;
    let left = dir.path().join("l.ndjson");
    let right = dir.path().join("r.ndjson");
    std::fs::write(&left, random_side(41, rows, 30, "a")).expect("write");
    std::fs::write(&right, random_side(141, rows, 30, "b")).expect("write");
    // eddy writes the table side as Parquet files.
    let parquet = dir.path().join("r_parquet");
    let copy = format!(
        "{}\nCREATE TABLE rp (k VARCHAR, b BIGINT, ts BIGINT) WITH (connector = 'parquet', path = '{}');
         INSERT INTO rp SELECT k, b, ts FROM r;",
        table("r", "b"),
        parquet.display()
    );
    common::run_captured_in_parallel(
        &[SqlFile {
            name: "<copy>".into(),
            text: copy,
        }],
        &BTreeMap::new(),
        BTreeMap::from([("r".to_string(), right.display().to_string())]),
        8192,
        1,
    )
    .expect("writing the table as Parquet");
    let lookup = format!(
        "{}\nCREATE TABLE r (k VARCHAR, b BIGINT, ts BIGINT,
           et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED)
           WITH (connector = 'parquet', path = '{}');
         SELECT l.k AS lk, l.a, r.k AS rk, r.b FROM (SELECT *, PROCTIME() AS p FROM l) l
           LEFT JOIN r FOR SYSTEM_TIME AS OF l.p ON l.k = r.k;",
        table("l", "a"),
        parquet.display()
    );
    let expected = batch_rows(
        &left.display().to_string(),
        &right.display().to_string(),
        "SELECT l.k AS lk, l.a, r.k AS rk, r.b FROM l LEFT JOIN r ON l.k = r.k",
    );
    assert!(expected.len() > rows);
    for (batch_size, parallelism) in common::SWEEP {
        let captured = common::run_captured_in_parallel(
            &[SqlFile {
                name: "<lookup>".into(),
                text: lookup.clone(),
            }],
            &BTreeMap::new(),
            BTreeMap::from([("l".to_string(), left.display().to_string())]),
            batch_size,
            parallelism,
        )
        .expect("the lookup join");
        let actual = canonical(captured.lines.iter().map(String::as_str));
        assert!(
            actual == expected,
            "batch {batch_size}, parallelism {parallelism}: {} rows, expected {}",
            actual.len(),
            expected.len()
        );
    }
}

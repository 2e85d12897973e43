//! Flink's spellings of windows give exactly what eddy's own spellings
//! give, across batch sizes: legacy group windows (`GROUP BY TUMBLE(ts,
//! size)`, `HOP(ts, slide, size)` with `TUMBLE_START/_END/_ROWTIME`,
//! `HOP_START/_END`) and window table functions (`TABLE(TUMBLE(TABLE t,
//! DESCRIPTOR(ts), size))`, `HOP`). eddy's own windows are checked against
//! DataFusion batch queries in `differential.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use eddy_sql::SqlFile;

const SOURCE: &str = "
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL, page VARCHAR NOT NULL, amount DOUBLE, ts BIGINT,
  event_time TIMESTAMP(3) GENERATED ALWAYS AS (TO_TIMESTAMP_LTZ(ts, 3)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
";

/// (Flink spelling, eddy spelling) pairs; each selects the same columns.
const PAIRS: &[(&str, &str, &str)] = &[
    (
        "legacy TUMBLE with START, END and ROWTIME",
        "SELECT user_id, TUMBLE_START(event_time, INTERVAL '5' SECOND) AS window_start,
                TUMBLE_END(event_time, INTERVAL '5' SECOND) AS window_end,
                TUMBLE_ROWTIME(event_time, INTERVAL '5' SECOND) AS window_time,
                COUNT(*) AS n, SUM(amount) AS total
         FROM clicks GROUP BY TUMBLE(event_time, INTERVAL '5' SECOND), user_id",
        "SELECT user_id, w.start AS window_start, w.end AS window_end,
                w.end - INTERVAL '1' MILLISECOND AS window_time, n, total
         FROM (SELECT tumble(INTERVAL '5' SECOND) AS w, user_id, count(*) AS n, sum(amount) AS total
               FROM clicks GROUP BY w, user_id)",
    ),
    (
        "window table function TUMBLE",
        "SELECT window_start, window_end, window_time, user_id, COUNT(*) AS n, SUM(amount) AS total
         FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
         GROUP BY window_start, window_end, user_id",
        "SELECT w.start AS window_start, w.end AS window_end,
                w.end - INTERVAL '1' MILLISECOND AS window_time, user_id, n, total
         FROM (SELECT tumble(INTERVAL '5' SECOND) AS w, user_id, count(*) AS n, sum(amount) AS total
               FROM clicks GROUP BY w, user_id)",
    ),
    (
        "legacy HOP with START and END",
        "SELECT HOP_START(event_time, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS window_start,
                HOP_END(event_time, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS window_end,
                page, MAX(amount) AS biggest
         FROM clicks GROUP BY HOP(event_time, INTERVAL '2' SECOND, INTERVAL '6' SECOND), page",
        "SELECT w.start AS window_start, w.end AS window_end, page, biggest
         FROM (SELECT hop(INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS w, page, max(amount) AS biggest
               FROM clicks GROUP BY w, page)",
    ),
    (
        "window table function HOP",
        "SELECT window_start, window_end, page, MAX(amount) AS biggest
         FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '2' SECOND, INTERVAL '6' SECOND))
         GROUP BY window_start, window_end, page",
        "SELECT w.start AS window_start, w.end AS window_end, page, biggest
         FROM (SELECT hop(INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS w, page, max(amount) AS biggest
               FROM clicks GROUP BY w, page)",
    ),
];

fn run(query: &str, batch_size: usize) -> Vec<String> {
    let params = BTreeMap::from([(
        "DATA".to_string(),
        common::repo_root().join("tests/data").display().to_string(),
    )]);
    let files = [SqlFile {
        name: "flink.sql".into(),
        text: format!("{SOURCE}{query};\n"),
    }];
    let captured = common::run_captured(&files, &params, BTreeMap::new(), batch_size)
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    common::sorted(captured.lines)
}

#[test]
fn flink_window_spellings_equal_eddys() {
    for (what, flink, eddy) in PAIRS {
        for batch_size in [1, 7, 8192] {
            let expected = run(eddy, batch_size);
            assert!(expected.len() > 5, "{what}: the windows have rows");
            assert_eq!(
                run(flink, batch_size),
                expected,
                "{what}, batch size {batch_size}"
            );
        }
    }
}

#[test]
fn a_window_table_function_needs_a_window_group_by() {
    let params = BTreeMap::from([("DATA".to_string(), "unused".to_string())]);
    let files = [SqlFile {
        name: "flink.sql".into(),
        text: format!(
            "{SOURCE}SELECT user_id, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND)) GROUP BY user_id;\n"
        ),
    }];
    let error = eddy_sql::compile(&files, &params)
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("flink.sql:7:37: a window table function over clicks needs GROUP BY window_start, window_end"),
        "{error}"
    );
}

#[test]
fn a_window_over_another_column_than_event_time_is_refused() {
    let params = BTreeMap::from([("DATA".to_string(), "unused".to_string())]);
    for query in [
        "SELECT COUNT(*) FROM clicks GROUP BY TUMBLE(ts, INTERVAL '5' SECOND)",
        "SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end",
    ] {
        let files = [SqlFile {
            name: "flink.sql".into(),
            text: format!("{SOURCE}{query};\n"),
        }];
        let error = eddy_sql::compile(&files, &params).err().unwrap().to_string();
        assert!(
            error.contains("eddy windows by the input's event time, 'event_time': name that column"),
            "{query}: {error}"
        );
    }
}

#[test]
fn flinks_computed_column_shorthand_takes_its_expressions_type() {
    let flink_source = "
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL, page VARCHAR NOT NULL, amount DOUBLE, ts BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  cents AS CAST(amount * 100 AS BIGINT),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
";
    let query = "SELECT window_start, user_id, COUNT(*) AS n, SUM(cents) AS cents
         FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
         GROUP BY window_start, window_end, user_id";
    let params = BTreeMap::from([(
        "DATA".to_string(),
        common::repo_root().join("tests/data").display().to_string(),
    )]);
    let expected_source = SOURCE.replace(
        "  WATERMARK FOR",
        "  cents BIGINT GENERATED ALWAYS AS (CAST(amount * 100 AS BIGINT)) STORED,\n  WATERMARK FOR",
    );
    let run_with = |source: &str| {
        let files = [SqlFile {
            name: "flink.sql".into(),
            text: format!("{source}{query};\n"),
        }];
        common::sorted(
            common::run_captured(&files, &params, BTreeMap::new(), 8192)
                .unwrap_or_else(|e| panic!("{e}"))
                .lines,
        )
    };
    let expected = run_with(&expected_source);
    assert!(expected.len() > 5);
    assert_eq!(run_with(flink_source), expected);
}

#[test]
fn interval_join_bounds_count_in_where_and_comma_joins() {
    let tables = "
CREATE TABLE clicks (
  user_id VARCHAR, page VARCHAR, amount DOUBLE, ts BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
CREATE TABLE signups (
  user_id VARCHAR, ts BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/signups.ndjson');
";
    let on = "SELECT c.user_id, c.ts AS click_ts, s.ts AS signup_ts FROM clicks c JOIN signups s
          ON c.user_id = s.user_id AND s.event_time BETWEEN c.event_time - INTERVAL '1' SECOND AND c.event_time";
    let spellings = [
        "SELECT c.user_id, c.ts AS click_ts, s.ts AS signup_ts FROM clicks c JOIN signups s ON c.user_id = s.user_id
          WHERE s.event_time BETWEEN c.event_time - INTERVAL '1' SECOND AND c.event_time",
        "SELECT c.user_id, c.ts AS click_ts, s.ts AS signup_ts FROM clicks c, signups s
          WHERE c.user_id = s.user_id AND s.event_time >= c.event_time - INTERVAL '1' SECOND AND s.event_time <= c.event_time",
    ];
    let params = BTreeMap::from([(
        "DATA".to_string(),
        common::repo_root().join("tests/data").display().to_string(),
    )]);
    let run_query = |query: &str, batch_size: usize| {
        let files = [SqlFile {
            name: "join.sql".into(),
            text: format!("{tables}{query};\n"),
        }];
        common::sorted(
            common::run_captured(&files, &params, BTreeMap::new(), batch_size)
                .unwrap_or_else(|e| panic!("{query}: {e}"))
                .lines,
        )
    };
    for batch_size in [1, 8192] {
        let expected = run_query(on, batch_size);
        assert!(!expected.is_empty());
        for query in spellings {
            assert_eq!(run_query(query, batch_size), expected, "{query}");
        }
    }
}

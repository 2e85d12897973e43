//! Lateness as DESIGN.md's contract states it, checked against an oracle
//! written from the contract alone.
//!
//! Two sources with heavy disorder (rows behind the watermark in windows
//! that are still open, in windows that have fired, and far behind), read
//! with `late_rows = 'keep'` (the default), feed a plain `SELECT`, tumbling,
//! hopping and cumulating window counts, an inner and a left interval join,
//! and a running count OVER. The oracle computes, for each row, the
//! watermark at its position in its own source (the largest event time of
//! the rows before it, less the bound) and from it alone what every
//! operator keeps:
//!
//! - a plain `SELECT` keeps every row; `late_rows(t)` names each row behind
//!   the watermark less the allowed lateness, once;
//! - a window counts a row in each of its windows that had not fired at the
//!   row's position (`end + lateness > watermark`): a hop row can miss its
//!   oldest windows and count in the newer ones;
//! - an interval join pairs rows only with partners still held at each
//!   late row's horizon, and a left join pads every left row it pairs with
//!   nothing;
//! - OVER drops the rows whose place in event-time order had passed.
//!
//! Every run (batch sizes 1, 7 and 2048; parallelism 1, 2 and 4) must equal
//! the oracle row for row. `tests/recovery.rs` kills the same kind of job
//! and checks it against its uninterrupted run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The watermark bound of both sources (ms).
const BOUND: i64 = 1_000;
/// Tumbling window, hop slide and width, cumulate step and size (ms).
const TUMBLE: i64 = 5_000;
const HOP_SLIDE: i64 = 2_000;
const HOP_WIDTH: i64 = 6_000;
const CUMULATE_STEP: i64 = 2_000;
const CUMULATE_MAX: i64 = 6_000;
/// The interval join: right.t - left.t in [LOWER, UPPER].
const LOWER: i64 = -3_000;
const UPPER: i64 = 2_000;
const T0: i64 = 1_700_000_000_000;

/// One input row, in source order.
#[derive(Debug, Clone)]
struct Row {
    id: i64,
    k: &'static str,
    v: i64,
    t: i64,
}

/// A row with the watermark at its position in its source.
#[derive(Debug, Clone)]
struct Judged {
    row: Row,
    /// `None` for the first row (no watermark yet).
    watermark: Option<i64>,
}

impl Judged {
    /// Where state was final at this row's position.
    fn horizon(&self, lateness: i64) -> i64 {
        self.watermark.map_or(i64::MIN, |w| w - lateness)
    }

    fn is_late(&self, lateness: i64) -> bool {
        self.row.t < self.horizon(lateness)
    }
}

fn judge(rows: &[Row]) -> Vec<Judged> {
    let mut max: Option<i64> = None;
    rows.iter()
        .map(|row| {
            let judged = Judged {
                row: row.clone(),
                watermark: max.map(|m| m - BOUND),
            };
            max = Some(max.map_or(row.t, |m| m.max(row.t)));
            judged
        })
        .collect()
}

/// Rows with mostly small disorder, some rows a few seconds behind (their
/// window open or fired by then), a few far behind, and planted rows at the
/// edges: exactly at a window's end less the lateness, one past it.
fn rows(seed: u64, first_id: i64, count: usize) -> Vec<Row> {
    const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut base = T0;
    let mut out = Vec::with_capacity(count + 4);
    for i in 0..count {
        base += rng.random_range(0..40);
        let behind = match rng.random_range(0..100) {
            0..=69 => rng.random_range(0..300),
            70..=89 => rng.random_range(800..4_000),
            90..=97 => rng.random_range(4_000..9_000),
            _ => rng.random_range(9_000..30_000),
        };
        out.push(Row {
            id: first_id + i as i64,
            k: KEYS[rng.random_range(0..KEYS.len())],
            v: rng.random_range(1..100),
            t: base - behind,
        });
    }
    // At the very end, rows just behind the last watermark, at window
    // edges: the window ending at the horizon has fired, the next has not.
    let max = out.iter().map(|r| r.t).max().unwrap_or(T0);
    let watermark = max - BOUND;
    let edge = watermark - watermark.rem_euclid(TUMBLE);
    for (n, t) in [edge - 1, edge, edge + 1, watermark - 1]
        .into_iter()
        .enumerate()
    {
        out.push(Row {
            id: first_id + (count + n) as i64,
            k: "a",
            v: 1,
            t,
        });
    }
    out
}

fn ndjson(rows: &[Row]) -> String {
    rows.iter()
        .map(|r| {
            format!(
                "{{\"id\":{},\"k\":\"{}\",\"v\":{},\"ts\":{}}}\n",
                r.id, r.k, r.v, r.t
            )
        })
        .collect()
}

fn sql(lateness: i64) -> String {
    let table = |name: &str| {
        format!(
            "CREATE TABLE {name} (id BIGINT, k VARCHAR, v BIGINT, ts BIGINT,
               et TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
               WATERMARK FOR et AS et - INTERVAL '{BOUND}' MILLISECOND)
             WITH (connector = 'file', path = '{name}', allowed_lateness = '{lateness}ms');"
        )
    };
    format!(
        "{}\n{}\n
CREATE TABLE all_rows (id BIGINT) WITH (connector = 'stdout', tag = 'ALL');
CREATE TABLE late (id BIGINT, watermark_ms BIGINT) WITH (connector = 'stdout', tag = 'LATE');
CREATE TABLE tumbled (w BIGINT, k VARCHAR, n BIGINT, total BIGINT) WITH (connector = 'stdout', tag = 'TUMBLE');
CREATE TABLE hopped (w BIGINT, k VARCHAR, n BIGINT, total BIGINT) WITH (connector = 'stdout', tag = 'HOP');
CREATE TABLE cumulated (w BIGINT, e BIGINT, k VARCHAR, n BIGINT) WITH (connector = 'stdout', tag = 'CUMULATE');
CREATE TABLE joined (l BIGINT, r BIGINT) WITH (connector = 'stdout', tag = 'JOIN');
CREATE TABLE left_joined (l BIGINT, r BIGINT) WITH (connector = 'stdout', tag = 'LEFT');
CREATE TABLE running (k VARCHAR, ts BIGINT, n BIGINT) WITH (connector = 'stdout', tag = 'OVER');
INSERT INTO all_rows SELECT id FROM l;
INSERT INTO late SELECT id, watermark_ms FROM late_rows(l);
INSERT INTO tumbled SELECT CAST(window_start AS BIGINT), k, count(*), sum(v)
  FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(et), INTERVAL '{TUMBLE}' MILLISECOND))
  GROUP BY window_start, window_end, k;
INSERT INTO hopped SELECT CAST(window_start AS BIGINT), k, count(*), sum(v)
  FROM TABLE(HOP(TABLE l, DESCRIPTOR(et), INTERVAL '{HOP_SLIDE}' MILLISECOND, INTERVAL '{HOP_WIDTH}' MILLISECOND))
  GROUP BY window_start, window_end, k;
INSERT INTO cumulated SELECT CAST(window_start AS BIGINT), CAST(window_end AS BIGINT), k, count(*)
  FROM TABLE(CUMULATE(TABLE l, DESCRIPTOR(et), INTERVAL '{CUMULATE_STEP}' MILLISECOND, INTERVAL '{CUMULATE_MAX}' MILLISECOND))
  GROUP BY window_start, window_end, k;
INSERT INTO joined SELECT l.id, r.id FROM l JOIN r
  ON l.k = r.k AND r.et BETWEEN l.et - INTERVAL '{}' MILLISECOND AND l.et + INTERVAL '{UPPER}' MILLISECOND;
INSERT INTO left_joined SELECT l.id, r.id FROM l LEFT JOIN r
  ON l.k = r.k AND r.et BETWEEN l.et - INTERVAL '{}' MILLISECOND AND l.et + INTERVAL '{UPPER}' MILLISECOND;
INSERT INTO running SELECT k, ts, count(*) OVER (PARTITION BY k ORDER BY et ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM l;
",
        table("l"),
        table("r"),
        -LOWER,
        -LOWER,
    )
}

/// What the contract says each query writes, as sorted tagged lines.
fn oracle(left: &[Judged], right: &[Judged], lateness: i64) -> Vec<String> {
    let mut out = Vec::new();
    for j in left {
        out.push(format!("ALL> {{\"id\": {}}}", j.row.id));
        if j.is_late(lateness) {
            out.push(format!(
                "LATE> {{\"id\": {}, \"watermark_ms\": {}}}",
                j.row.id,
                j.watermark.unwrap_or_default()
            ));
        }
    }
    // Windows: (tag, start, end) -> key -> (count, sum).
    type Counts<'a> = BTreeMap<&'a str, (i64, i64)>;
    let mut windows: BTreeMap<(&str, i64, i64), Counts> = BTreeMap::new();
    for j in left {
        let (t, horizon) = (j.row.t, j.horizon(lateness));
        let mut count_in = |tag: &'static str, start: i64, end: i64| {
            if end > horizon {
                let cell = windows
                    .entry((tag, start, end))
                    .or_default()
                    .entry(j.row.k)
                    .or_default();
                cell.0 += 1;
                cell.1 += j.row.v;
            }
        };
        let start = t - t.rem_euclid(TUMBLE);
        count_in("TUMBLE", start, start + TUMBLE);
        let mut start = t - t.rem_euclid(HOP_SLIDE);
        while start + HOP_WIDTH > t {
            count_in("HOP", start, start + HOP_WIDTH);
            start -= HOP_SLIDE;
        }
        let start = t - t.rem_euclid(CUMULATE_MAX);
        let mut end = start + CUMULATE_STEP;
        while end <= start + CUMULATE_MAX {
            if end > t {
                count_in("CUMULATE", start, end);
            }
            end += CUMULATE_STEP;
        }
    }
    for ((tag, start, end), keys) in windows {
        for (k, (n, total)) in keys {
            out.push(match tag {
                "CUMULATE" => format!(
                    "CUMULATE> {{\"w\": {start}, \"e\": {end}, \"k\": \"{k}\", \"n\": {n}}}"
                ),
                _ => format!(
                    "{tag}> {{\"w\": {start}, \"k\": \"{k}\", \"n\": {n}, \"total\": {total}}}"
                ),
            });
        }
    }
    // The interval join: a pair meets when its late row (either) still
    // held the other at its horizon; a left row without partners is padded.
    for l in left {
        let mut paired = false;
        for r in right {
            let d = r.row.t - l.row.t;
            if l.row.k == r.row.k
                && (LOWER..=UPPER).contains(&d)
                && r.row.t >= l.horizon(lateness).saturating_add(LOWER)
                && l.row.t >= r.horizon(lateness).saturating_sub(UPPER)
            {
                paired = true;
                out.push(format!(
                    "JOIN> {{\"l\": {}, \"r\": {}}}",
                    l.row.id, r.row.id
                ));
                out.push(format!(
                    "LEFT> {{\"l\": {}, \"r\": {}}}",
                    l.row.id, r.row.id
                ));
            }
        }
        if !paired {
            out.push(format!("LEFT> {{\"l\": {}, \"r\": null}}", l.row.id));
        }
    }
    // OVER: the rows whose place in time order had not passed, per key in
    // (time, arrival) order.
    let mut by_key: BTreeMap<&str, Vec<(i64, usize)>> = BTreeMap::new();
    for (i, j) in left.iter().enumerate() {
        if !j.is_late(lateness) {
            by_key.entry(j.row.k).or_default().push((j.row.t, i));
        }
    }
    for (k, mut rows) in by_key {
        rows.sort();
        for (n, (t, _)) in rows.iter().enumerate() {
            out.push(format!(
                "OVER> {{\"k\": \"{k}\", \"ts\": {t}, \"n\": {}}}",
                n + 1
            ));
        }
    }
    normalized(&out)
}

/// `TAG> {json}` lines in one form (the JSON re-encoded, keys sorted),
/// sorted.
fn normalized(lines: &[String]) -> Vec<String> {
    common::sorted(
        lines
            .iter()
            .map(|line| {
                let (tag, json) = line.split_once("> ").expect("tagged line");
                let value: serde_json::Value = serde_json::from_str(json).expect("json");
                format!("{tag}> {value}")
            })
            .collect(),
    )
}

#[test]
fn every_operator_keeps_exactly_what_the_contract_says_at_every_batch_size_and_parallelism() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (seed, lateness) in [(7u64, 0i64), (8, 700)] {
        let left = rows(seed, 0, 1_500);
        let right = rows(seed + 100, 100_000, 1_500);
        let (left_path, right_path) = (dir.path().join("l.ndjson"), dir.path().join("r.ndjson"));
        std::fs::write(&left_path, ndjson(&left)).unwrap();
        std::fs::write(&right_path, ndjson(&right)).unwrap();
        let (left, right) = (judge(&left), judge(&right));
        let late = left.iter().filter(|j| j.is_late(lateness)).count();
        let expected = oracle(&left, &right, lateness);
        // The data plants what the contract distinguishes.
        let count = |tag: &str| expected.iter().filter(|l| l.starts_with(tag)).count();
        assert!(late > 100, "{late} late rows");
        assert!(
            count("LEFT> ") > count("JOIN> "),
            "some left rows are padded"
        );
        let in_open_windows = left
            .iter()
            .filter(|j| j.is_late(lateness))
            .filter(|j| {
                let end = j.row.t - j.row.t.rem_euclid(TUMBLE) + TUMBLE;
                end > j.horizon(lateness)
            })
            .count();
        assert!(
            in_open_windows > 10 && in_open_windows < late,
            "late rows in open windows ({in_open_windows}) and in fired ones ({late})"
        );
        let files = [SqlFile {
            name: "lateness.sql".into(),
            text: sql(lateness),
        }];
        let inputs = BTreeMap::from([
            ("l".to_string(), left_path.display().to_string()),
            ("r".to_string(), right_path.display().to_string()),
        ]);
        for batch_size in [1usize, 7, 2048] {
            for parallelism in [1usize, 2, 4] {
                let captured = common::run_captured_in_parallel(
                    &files,
                    &BTreeMap::new(),
                    inputs.clone(),
                    batch_size,
                    parallelism,
                )
                .expect("run");
                let actual = normalized(&captured.lines);
                let case =
                    format!("lateness {lateness}ms, batch {batch_size}, parallelism {parallelism}");
                if actual != expected {
                    let missing: Vec<_> = expected
                        .iter()
                        .filter(|l| actual.binary_search(l).is_err())
                        .take(8)
                        .collect();
                    let extra: Vec<_> = actual
                        .iter()
                        .filter(|l| expected.binary_search(l).is_err())
                        .take(8)
                        .collect();
                    panic!(
                        "{case}: {} lines, {} expected\nmissing: {missing:#?}\nextra: {extra:#?}",
                        actual.len(),
                        expected.len()
                    );
                }
                // Every drop is counted by the operator that made it.
                let dropped: u64 = captured
                    .report
                    .nodes
                    .iter()
                    .filter(|n| n.kind != "source")
                    .map(|n| n.metrics.late_rows)
                    .sum();
                assert!(dropped > 0, "{case}: operators counted their drops");
            }
        }
    }
}

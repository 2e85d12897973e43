//! Differential tests of MATCH_RECOGNIZE: eddy's streaming matches must
//! equal a straightforward reference, written here independently of eddy's
//! matcher: each key's rows sorted by event time, and from each start row a
//! recursive backtracking search in the SQL standard's order of preference
//! (greedy quantifiers try one more repetition first, reluctant ones one
//! fewer, alternations their leftmost branch), with each query's DEFINE
//! conditions and MEASURES written out in Rust. Randomized input with
//! disorder inside the watermark bound; swept over batch sizes and
//! parallelism (restores are covered in `checkpoint_operators.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::{BTreeMap, HashSet};

use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const SOURCE: &str = "CREATE TABLE events (
  k VARCHAR, v DOUBLE, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = 'bound-by---input');";

#[derive(Clone, Copy)]
struct Row {
    k: usize,
    v: f64,
    ts: i64,
}

/// Unique event times (SQL leaves the order of ties open), disorder < 2 s.
fn random_rows(seed: u64, rows: usize) -> Vec<Row> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut base = 1_700_000_000_000i64;
    let mut seen = HashSet::new();
    (0..rows)
        .map(|_| {
            base += rng.random_range(1..400);
            let mut ts = base - rng.random_range(0..1_500);
            while !seen.insert(ts) {
                ts += 1;
            }
            Row {
                k: rng.random_range(0..6),
                v: f64::from(rng.random_range(0..100)),
                ts,
            }
        })
        .collect()
}

fn ndjson(rows: &[Row]) -> String {
    rows.iter()
        .map(|r| format!("{{\"k\":\"k{}\",\"v\":{},\"ts\":{}}}\n", r.k, r.v, r.ts))
        .collect()
}

/// A pattern of the reference matcher.
enum P {
    V(usize),
    Seq(Vec<P>),
    Alt(Vec<P>),
    /// Part, min, max, greedy.
    Rep(Box<P>, u32, Option<u32>, bool),
}

/// One query: its SQL, and the same written out for the reference.
struct Case {
    sql: &'static str,
    partitioned: bool,
    pattern: P,
    within_ms: Option<i64>,
    /// `cond(var, the partition's rows up to the tested one, where the
    /// match starts in them, the vars of the match's rows so far)`.
    cond: Cond,
    /// The output row of a match (rows, vars).
    measures: fn(&[Row], &[usize]) -> Value,
    /// Where the next start is, from the match's first row (rows, vars).
    skip: fn(&[usize]) -> usize,
}

type Cond = fn(usize, &[Row], usize, &[usize]) -> bool;

/// The reference search: from `pos`, match `p`, then call `k`.
struct Search<'a> {
    /// The partition's rows up to the last one a match may take.
    rows: &'a [Row],
    /// Where the match starts.
    start: usize,
    cond: Cond,
}

impl Search<'_> {
    fn m(
        &self,
        p: &P,
        pos: usize,
        vars: &mut Vec<usize>,
        k: &mut dyn FnMut(usize, &mut Vec<usize>) -> bool,
    ) -> bool {
        match p {
            P::V(v) => {
                if pos >= self.rows.len() {
                    return false;
                }
                vars.push(*v);
                if (self.cond)(*v, &self.rows[..=pos], self.start, vars) && k(pos + 1, vars) {
                    return true;
                }
                vars.pop();
                false
            }
            P::Seq(parts) => self.seq(parts, pos, vars, k),
            P::Alt(branches) => branches.iter().any(|b| self.m(b, pos, vars, k)),
            P::Rep(inner, min, max, greedy) => {
                self.rep(inner, *min, *max, *greedy, 0, pos, vars, k)
            }
        }
    }

    fn seq(
        &self,
        parts: &[P],
        pos: usize,
        vars: &mut Vec<usize>,
        k: &mut dyn FnMut(usize, &mut Vec<usize>) -> bool,
    ) -> bool {
        match parts.split_first() {
            None => k(pos, vars),
            Some((first, rest)) => {
                self.m(first, pos, vars, &mut |p, vars| self.seq(rest, p, vars, k))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rep(
        &self,
        inner: &P,
        min: u32,
        max: Option<u32>,
        greedy: bool,
        done: u32,
        pos: usize,
        vars: &mut Vec<usize>,
        k: &mut dyn FnMut(usize, &mut Vec<usize>) -> bool,
    ) -> bool {
        let more_allowed = max.is_none_or(|m| done < m);
        let more = |vars: &mut Vec<usize>, k: &mut dyn FnMut(usize, &mut Vec<usize>) -> bool| {
            more_allowed
                && self.m(inner, pos, vars, &mut |p, vars| {
                    self.rep(inner, min, max, greedy, done + 1, p, vars, k)
                })
        };
        // The order of the two tries is the quantifier's preference.
        let tries: [bool; 2] = if greedy { [true, false] } else { [false, true] };
        for again in tries {
            let found = if again {
                more(vars, k)
            } else {
                done >= min && k(pos, vars)
            };
            if found {
                return true;
            }
        }
        false
    }
}

/// Every match of `case` over one key's rows, sorted by time.
fn reference_matches(case: &Case, rows: &[Row], out: &mut Vec<Value>) {
    let mut start = 0;
    while start < rows.len() {
        let end = match case.within_ms {
            Some(w) => start + rows[start..].partition_point(|r| r.ts <= rows[start].ts + w),
            None => rows.len(),
        };
        let search = Search {
            rows: &rows[..end],
            start,
            cond: case.cond,
        };
        let mut found: Option<Vec<usize>> = None;
        let mut vars = Vec::new();
        search.m(&case.pattern, start, &mut vars, &mut |_, vars| {
            found = Some(vars.clone());
            true
        });
        match found {
            Some(vars) => {
                let matched = &rows[start..start + vars.len()];
                let mut row = (case.measures)(matched, &vars);
                if case.partitioned {
                    row["k"] = json!(format!("k{}", rows[start].k));
                }
                out.push(row);
                start += (case.skip)(&vars).max(1);
            }
            None => start += 1,
        }
    }
}

fn reference(case: &Case, rows: &[Row]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut by_key: BTreeMap<usize, Vec<Row>> = BTreeMap::new();
    for r in rows {
        by_key
            .entry(if case.partitioned { r.k } else { 0 })
            .or_default()
            .push(*r);
    }
    for rows in by_key.values_mut() {
        rows.sort_by_key(|r| r.ts);
        reference_matches(case, rows, &mut out);
    }
    out
}

fn last_of(rows: &[Row], vars: &[usize], var: usize) -> Option<Row> {
    rows.iter()
        .zip(vars)
        .rev()
        .find(|(_, &v)| v == var)
        .map(|(r, _)| *r)
}

fn first_of(rows: &[Row], vars: &[usize], var: usize) -> Option<Row> {
    rows.iter()
        .zip(vars)
        .find(|(_, &v)| v == var)
        .map(|(r, _)| *r)
}

fn of(rows: &[Row], vars: &[usize], var: usize) -> Vec<Row> {
    rows.iter()
        .zip(vars)
        .filter(|(_, &v)| v == var)
        .map(|(r, _)| *r)
        .collect()
}

/// `PREV(x)` of the tested row: the row before it in the partition (before
/// the match's first row too).
fn prev(rows: &[Row]) -> Option<Row> {
    rows.len().checked_sub(2).map(|i| rows[i])
}

fn cases() -> Vec<Case> {
    vec![
        // Small ones, then one over twice the last of them, within 5 s.
        Case {
            sql: "SELECT * FROM events MATCH_RECOGNIZE (
                PARTITION BY k ORDER BY event_time
                MEASURES FIRST(S.ts) AS s_ts, COUNT(S.*) AS n_s, L.ts AS l_ts, L.v AS l_v
                PATTERN (S+ L) WITHIN INTERVAL '5' SECOND
                DEFINE S AS S.v < 30, L AS L.v > 2 * LAST(S.v))",
            partitioned: true,
            pattern: P::Seq(vec![P::Rep(Box::new(P::V(0)), 1, None, true), P::V(1)]),
            within_ms: Some(5_000),
            cond: |var, rows, start, vars| {
                let row = rows[rows.len() - 1];
                match var {
                    0 => row.v < 30.0,
                    _ => last_of(&rows[start..], vars, 0).is_some_and(|s| row.v > 2.0 * s.v),
                }
            },
            measures: |rows, vars| {
                json!({"s_ts": first_of(rows, vars, 0).unwrap().ts, "n_s": of(rows, vars, 0).len(),
                       "l_ts": last_of(rows, vars, 1).unwrap().ts, "l_v": last_of(rows, vars, 1).unwrap().v})
            },
            skip: |vars| vars.len(),
        },
        // A high row, as few low rows as reach a middle one; one match per start row.
        Case {
            sql: "SELECT * FROM events MATCH_RECOGNIZE (
                PARTITION BY k ORDER BY event_time
                MEASURES A.ts AS a_ts, COUNT(B.*) AS n_b, SUM(B.v) AS sum_b, C.ts AS c_ts
                AFTER MATCH SKIP TO NEXT ROW
                PATTERN (A B*? C)
                DEFINE A AS A.v > 80, B AS B.v < 50, C AS C.v >= 50)",
            partitioned: true,
            pattern: P::Seq(vec![P::V(0), P::Rep(Box::new(P::V(1)), 0, None, false), P::V(2)]),
            within_ms: None,
            cond: |var, rows, _, _| {
                let v = rows[rows.len() - 1].v;
                match var {
                    0 => v > 80.0,
                    1 => v < 50.0,
                    _ => v >= 50.0,
                }
            },
            measures: |rows, vars| {
                let b = of(rows, vars, 1);
                let sum: Option<f64> = (!b.is_empty()).then(|| b.iter().map(|r| r.v).sum());
                json!({"a_ts": rows[0].ts, "n_b": b.len(), "sum_b": sum, "c_ts": rows[rows.len() - 1].ts})
            },
            skip: |_| 1,
        },
        // Two or three rises (the first against the row before the match:
        // PREV reaches out of it) and a fall, skipping to the last rise.
        Case {
            sql: "SELECT * FROM events MATCH_RECOGNIZE (
                PARTITION BY k ORDER BY event_time
                MEASURES FIRST(UP.ts) AS first_ts, LAST(UP.v) AS top,
                         DOWN.v AS down_v, COUNT(UP.v) AS ups
                AFTER MATCH SKIP TO LAST UP
                PATTERN (UP{2,3} DOWN)
                DEFINE UP AS UP.v > PREV(UP.v), DOWN AS DOWN.v < PREV(DOWN.v, 1))",
            partitioned: true,
            pattern: P::Seq(vec![P::Rep(Box::new(P::V(0)), 2, Some(3), true), P::V(1)]),
            within_ms: None,
            cond: |var, rows, _, _| {
                let v = rows[rows.len() - 1].v;
                match var {
                    0 => prev(rows).is_some_and(|p| v > p.v),
                    _ => prev(rows).is_some_and(|p| v < p.v),
                }
            },
            measures: |rows, vars| {
                json!({"first_ts": rows[0].ts, "top": last_of(rows, vars, 0).unwrap().v,
                       "down_v": last_of(rows, vars, 1).unwrap().v, "ups": of(rows, vars, 0).len()})
            },
            skip: |vars| vars.iter().rposition(|&v| v == 0).unwrap(),
        },
        // Over the whole stream: a low and a high row in either order, then
        // a middle one if it comes (a greedy optional end waits for it).
        Case {
            sql: "SELECT * FROM events MATCH_RECOGNIZE (
                ORDER BY event_time
                MEASURES FIRST(ts) AS first_ts, CLASSIFIER() AS last_var, COUNT(*) AS n, LAST(ts) AS last_ts
                PATTERN (PERMUTE(P, Q) R?)
                DEFINE P AS P.v < 20, Q AS Q.v > 80, R AS R.v BETWEEN 40 AND 60)",
            partitioned: false,
            pattern: P::Seq(vec![
                P::Alt(vec![P::Seq(vec![P::V(0), P::V(1)]), P::Seq(vec![P::V(1), P::V(0)])]),
                P::Rep(Box::new(P::V(2)), 0, Some(1), true),
            ]),
            within_ms: None,
            cond: |var, rows, _, _| {
                let v = rows[rows.len() - 1].v;
                match var {
                    0 => v < 20.0,
                    1 => v > 80.0,
                    _ => (40.0..=60.0).contains(&v),
                }
            },
            measures: |rows, vars| {
                let names = ["P", "Q", "R"];
                json!({"first_ts": rows[0].ts, "last_var": names[vars[vars.len() - 1]],
                       "n": rows.len(), "last_ts": rows[rows.len() - 1].ts})
            },
            skip: |vars| vars.len(),
        },
    ]
}

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|r| r.to_string());
    rows
}

#[test]
fn match_recognize_equals_a_reference_matcher() {
    let dir = tempfile::tempdir().expect("tempdir");
    for seed in [31u64, 32] {
        let rows = random_rows(seed, 3_000);
        let path = dir.path().join(format!("events-{seed}.ndjson"));
        std::fs::write(&path, ndjson(&rows)).expect("write");
        let input = path.display().to_string();
        for case in cases() {
            let expected = sorted(reference(&case, &rows));
            assert!(
                expected.len() > 20,
                "{}: only {} matches",
                case.sql,
                expected.len()
            );
            for (batch_size, parallelism) in common::SWEEP {
                let file = SqlFile {
                    name: "<match>".into(),
                    text: format!("{SOURCE}\n{};", case.sql),
                };
                let inputs = BTreeMap::from([("events".to_string(), input.clone())]);
                let captured = common::run_captured_in_parallel(
                    &[file],
                    &BTreeMap::new(),
                    inputs,
                    batch_size,
                    parallelism,
                )
                .unwrap_or_else(|e| panic!("{}: {e}", case.sql));
                let actual = sorted(common::json_rows(captured.lines.iter().map(String::as_str)));
                common::assert_same_rows(
                    &actual,
                    &expected,
                    &format!(
                        "{} (seed {seed}, batch {batch_size}, parallelism {parallelism})",
                        case.sql
                    ),
                );
            }
        }
    }
}

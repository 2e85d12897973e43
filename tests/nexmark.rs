//! The Nexmark queries in `bench/nexmark/` against DataFusion: each query
//! run by eddy over the `nexmark` source equals the same query written for
//! a batch engine and run by DataFusion over the same generated rows
//! (taken from the same source connector), for several batch sizes. The
//! updating queries (q4, q9) are compared by the table their changelog
//! replays to.
//!
//! The stream is generated at 200 events per second of event time, so
//! 40,000 events span 200 s: twenty 10-second windows, a hundred hops.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use eddy_connectors::nexmark::{NexmarkConfig, NexmarkSource};
use eddy_engine::graph::NodeKind;
use eddy_engine::source::{SourceContext, SourceReader};
use serde_json::Value;

const EVENTS: u64 = 40_000;
const RATE: u64 = 200;

/// A hop of 10 s every 2 s over `bid`, as a batch engine writes it: each
/// bid once per window it falls in.
const HOP_BIDS: &str = "(SELECT auction, ws FROM (
      SELECT auction, date_time, date_bin(INTERVAL '2 seconds', date_time) AS ws FROM bid
      UNION ALL SELECT auction, date_time, date_bin(INTERVAL '2 seconds', date_time) - INTERVAL '2 seconds' FROM bid
      UNION ALL SELECT auction, date_time, date_bin(INTERVAL '2 seconds', date_time) - INTERVAL '4 seconds' FROM bid
      UNION ALL SELECT auction, date_time, date_bin(INTERVAL '2 seconds', date_time) - INTERVAL '6 seconds' FROM bid
      UNION ALL SELECT auction, date_time, date_bin(INTERVAL '2 seconds', date_time) - INTERVAL '8 seconds' FROM bid
    ) WHERE date_time < ws + INTERVAL '10 seconds')";

/// Each query's batch form.
fn batch_sql(query: &str) -> String {
    match query {
        "q0" => "SELECT auction, bidder, price, date_time, extra FROM bid".into(),
        "q1" => "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid".into(),
        "q2" => "SELECT auction, price FROM bid WHERE auction % 123 = 0".into(),
        "q3" => "SELECT P.name, P.city, P.state, A.id FROM auction A JOIN person P ON A.seller = P.id
             WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')"
            .into(),
        "q5" => format!(
            "WITH ab AS (
               SELECT auction, count(*) AS num, ws AS starttime, ws + INTERVAL '10 seconds' AS endtime
               FROM {HOP_BIDS} GROUP BY auction, ws),
             mb AS (SELECT max(num) AS maxn, starttime, endtime FROM ab GROUP BY starttime, endtime)
             SELECT ab.auction, ab.num, ab.starttime, ab.endtime
             FROM ab JOIN mb ON ab.starttime = mb.starttime AND ab.endtime = mb.endtime AND ab.num >= mb.maxn"
        ),
        "q7" => "WITH w AS (
               SELECT max(price) AS maxprice, date_bin(INTERVAL '10 seconds', date_time) + INTERVAL '10 seconds' AS we
               FROM bid GROUP BY date_bin(INTERVAL '10 seconds', date_time))
             SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
             FROM bid B JOIN w ON B.price = w.maxprice
             WHERE B.date_time >= w.we - INTERVAL '10 seconds' AND B.date_time < w.we"
            .into(),
        "q8" => "WITH p AS (
               SELECT id, name, date_bin(INTERVAL '10 seconds', date_time) AS starttime FROM person
               GROUP BY id, name, date_bin(INTERVAL '10 seconds', date_time)),
             a AS (
               SELECT seller, date_bin(INTERVAL '10 seconds', date_time) AS starttime FROM auction
               GROUP BY seller, date_bin(INTERVAL '10 seconds', date_time))
             SELECT p.id, p.name, p.starttime FROM p JOIN a ON p.id = a.seller AND p.starttime = a.starttime"
            .into(),
        "q4" => "SELECT Q.category AS id, AVG(Q.final) AS final FROM (
               SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
               WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
               GROUP BY A.id, A.category) Q
             GROUP BY Q.category"
            .into(),
        "q9" => "SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra,
               auction, bidder, price, bid_date_time, bid_extra
             FROM (
               SELECT A.*, B.auction, B.bidder, B.price, B.date_time AS bid_date_time, B.extra AS bid_extra,
                 ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC) AS rownum
               FROM auction A, bid B
               WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires)
             WHERE rownum <= 1"
            .into(),
        other => panic!("no batch form of {other}"),
    }
}

fn params() -> BTreeMap<String, String> {
    [
        ("EVENTS", EVENTS.to_string()),
        ("RATE", RATE.to_string()),
        ("SINK", "stdout".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Runs `sql` with DataFusion over the rows each Nexmark table of `files`
/// generates.
fn datafusion_rows(files: &[eddy_sql::SqlFile], sql: &str) -> Vec<Value> {
    let job = eddy_sql::compile(files, &params()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ctx = datafusion::prelude::SessionContext::new();
        for node in &job.graph.nodes {
            let NodeKind::Source { spec, .. } = &node.kind else {
                continue;
            };
            let config = NexmarkConfig {
                stream: spec.options["stream"].parse().unwrap(),
                events: EVENTS,
                rate: RATE,
                batch_size: 8192,
                ..Default::default()
            };
            let mut source = NexmarkSource::new(config, spec.schema.clone(), None).unwrap();
            let mut batches: Vec<RecordBatch> = Vec::new();
            let mut reading = SourceContext::new(&spec.table);
            while let Some(batch) = source.next_batch(&mut reading).unwrap() {
                batches.push(batch);
            }
            let table = MemTable::try_new(spec.schema.clone(), vec![batches]).unwrap();
            ctx.register_table(spec.table.as_str(), Arc::new(table))
                .unwrap();
        }
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let mut text = Vec::new();
        for b in &batches {
            eddy_connectors::json_lines::encode_json_lines(b, &mut text).unwrap();
        }
        common::json_rows(String::from_utf8(text).unwrap().lines())
    })
}

fn sort_key(row: &Value) -> String {
    row.to_string()
}

#[test]
fn nexmark_queries_match_datafusion_batch_queries() {
    for query in ["q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9"] {
        let path = common::repo_root().join(format!("bench/nexmark/{query}.sql"));
        let files = eddy_cli::job::load_sql(&[path]).unwrap();
        let mut expected = datafusion_rows(&files, &batch_sql(query));
        // Nexmark has five categories: q4 has a row each.
        let least = if query == "q4" { 5 } else { 10 };
        assert!(
            expected.len() >= least,
            "{query}: the batch query returned {} rows",
            expected.len()
        );
        expected.sort_by_key(sort_key);
        for (batch_size, parallelism) in [(7usize, 1usize), (1024, 1), (1024, 2)] {
            let captured = common::run_captured_in_parallel(
                &files,
                &params(),
                BTreeMap::new(),
                batch_size,
                parallelism,
            )
            .unwrap_or_else(|e| {
                panic!("{query} (batch {batch_size}, parallelism {parallelism}): {e}")
            });
            assert_eq!(
                common::late_rows(&captured.report),
                0,
                "{query}: Nexmark's stream is in order"
            );
            // q4 and q9 are updating queries: their changelogs replayed.
            let lines = if common::is_changelog(&captured.lines) {
                common::replay_changelog(&captured.lines)
                    .unwrap_or_else(|e| panic!("{query} (batch {batch_size}): {e}"))
            } else {
                captured.lines
            };
            let mut actual = common::json_rows(lines.iter().map(String::as_str));
            actual.sort_by_key(sort_key);
            common::assert_same_rows(
                &actual,
                &expected,
                &format!("{query} (batch {batch_size}, parallelism {parallelism})"),
            );
            eprintln!(
                "{query} (batch {batch_size}, parallelism {parallelism}): {} rows equal",
                actual.len()
            );
        }
    }
}

/// Nexmark's parameters as the suite's own files name them (and q13's
/// side input).
fn suite_params(query: &str) -> BTreeMap<String, String> {
    let side_input = common::repo_root().join("bench/nexmark/flink/side_input.ndjson");
    let mut params: BTreeMap<String, String> = [
        ("TPS", RATE.to_string()),
        ("EVENTS_NUM", EVENTS.to_string()),
        ("PERSON_PROPORTION", "1".to_string()),
        ("AUCTION_PROPORTION", "3".to_string()),
        ("BID_PROPORTION", "46".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if query == "q13" {
        params.insert("SIDE_INPUT".into(), side_input.display().to_string());
    }
    params
}

/// `bench/nexmark/flink/ddl.sql` and a query of the suite's form, its
/// blackhole sink printing instead.
fn suite_files(query: &str) -> Vec<eddy_sql::SqlFile> {
    let dir = common::repo_root().join("bench/nexmark/flink");
    let mut files =
        eddy_cli::job::load_sql(&[dir.join("ddl.sql"), dir.join(format!("{query}.sql"))]).unwrap();
    for file in &mut files {
        file.text = file.text.replace("'blackhole'", "'stdout'");
    }
    files
}

/// A job's rows (an updating job's replayed), with column names read
/// without case or underscores (the suite's `dateTime` is eddy's
/// `date_time`), sorted.
fn comparable_rows(lines: Vec<String>, what: &str) -> Vec<Value> {
    let lines = if common::is_changelog(&lines) {
        common::replay_changelog(&lines).unwrap_or_else(|e| panic!("{what}: {e}"))
    } else {
        lines
    };
    let mut rows: Vec<Value> = common::json_rows(lines.iter().map(String::as_str))
        .into_iter()
        .map(|row| {
            let Value::Object(fields) = row else {
                panic!("{what}: a row is no JSON object: {row}")
            };
            Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k.replace('_', "").to_lowercase(), v))
                    .collect(),
            )
        })
        .collect();
    rows.sort_by_key(sort_key);
    rows
}

#[test]
fn the_suites_own_ddl_and_queries_give_what_eddys_forms_give() {
    // The same queries over one `datagen` table of ROW columns, its views,
    // quoted camel-case names and Flink's option names: the rows of eddy's
    // per-stream forms above (themselves checked against DataFusion).
    // q7 is left out: the suite's bounds its window with BETWEEN, inclusive
    // at both ends, eddy's form as the window is (end exclusive).
    for query in ["q0", "q1", "q2", "q3", "q4", "q5", "q8", "q9"] {
        let ours = eddy_cli::job::load_sql(&[
            common::repo_root().join(format!("bench/nexmark/{query}.sql"))
        ])
        .unwrap();
        let ours = common::run_captured(&ours, &params(), BTreeMap::new(), 1024)
            .unwrap_or_else(|e| panic!("{query}: {e}"));
        let theirs = common::run_captured(
            &suite_files(query),
            &suite_params(query),
            BTreeMap::new(),
            1024,
        )
        .unwrap_or_else(|e| panic!("{query} as the suite writes it: {e}"));
        let theirs = comparable_rows(theirs.lines, query);
        let mut ours = comparable_rows(ours.lines, query);
        // eddy's q5 also prints each window's bounds; the suite's q4 sink
        // takes the average as a BIGINT (a cast: truncated).
        if let Some(Value::Object(first)) = theirs.first() {
            for row in &mut ours {
                if let Value::Object(fields) = row {
                    // eddy's q8 names the window start as its query does,
                    // the suite's sink `stime`.
                    if let (Some(start), true) =
                        (fields.remove("starttime"), first.contains_key("stime"))
                    {
                        fields.insert("stime".into(), start);
                    }
                    fields.retain(|k, _| first.contains_key(k));
                    if query == "q4" {
                        if let Some(average) = fields.get("final").and_then(Value::as_f64) {
                            fields.insert("final".into(), Value::from(average.trunc() as i64));
                        }
                    }
                }
            }
            ours.sort_by_key(sort_key);
        }
        assert!(!theirs.is_empty(), "{query}: no rows");
        common::assert_same_rows(&theirs, &ours, &format!("{query} as the suite writes it"));
    }
}

#[test]
fn the_suites_other_queries_run_as_written() {
    // Processing time (q12), the lookup join on a side input (q13), legacy
    // session windows (q11), FILTER and DISTINCT (q15-q17), deduplication
    // and Top-N (q18, q19), joins (q20, q23), REGEXP_EXTRACT and
    // SPLIT_INDEX (q21, q22); q10 has a test of its own below. Not run: q6
    // (Flink's own runner skips it: its ranking's WHERE reads a column of
    // the same SELECT), q14 (a Java function class, refused).
    for query in [
        "q11", "q12", "q13", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22", "q23",
    ] {
        let captured = common::run_captured(
            &suite_files(query),
            &suite_params(query),
            BTreeMap::new(),
            1024,
        )
        .unwrap_or_else(|e| panic!("{query} as the suite writes it: {e}"));
        assert!(!captured.lines.is_empty(), "{query}: no rows");
    }
    // q13: every bid meets its auction's side-input row (keys 0..9999).
    let captured = common::run_captured(
        &suite_files("q13"),
        &suite_params("q13"),
        BTreeMap::new(),
        1024,
    )
    .unwrap();
    let rows = common::json_rows(captured.lines.iter().map(String::as_str));
    assert_eq!(rows.len() as u64, EVENTS / 50 * 46, "one row per bid");
    for row in &rows {
        let auction = row["auction"].as_i64().unwrap();
        assert_eq!(
            row["value"],
            Value::String((auction % 10_000 * 2 + 1).to_string())
        );
    }
}

#[test]
fn the_suites_q10_writes_csv_files_partitioned_by_day_and_minute() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = suite_params("q10");
    params.insert("NEXMARK_DIR".into(), dir.path().display().to_string());
    params.insert("SUBMIT_TIME".into(), "run1".into());
    let files = suite_files("q10");
    common::run_captured(&files, &params, BTreeMap::new(), 1024).unwrap();
    // Every bid once, as a CSV line of its five columns, in the directory
    // of its day and minute.
    let root = dir.path().join("data/output/run1/bid");
    let mut lines = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "csv") {
                let partition = path
                    .parent()
                    .unwrap()
                    .strip_prefix(&root)
                    .unwrap()
                    .to_path_buf();
                for line in std::fs::read_to_string(&path).unwrap().lines() {
                    lines.push((partition.display().to_string(), line.to_string()));
                }
            }
        }
    }
    assert_eq!(lines.len() as u64, EVENTS / 50 * 46, "one line per bid");
    let q0 = common::run_captured(
        &suite_files("q0"),
        &suite_params("q0"),
        BTreeMap::new(),
        1024,
    )
    .unwrap();
    let mut expected: Vec<String> = common::json_rows(q0.lines.iter().map(String::as_str))
        .iter()
        .map(|row| {
            let time = row["dateTime"]
                .as_str()
                .unwrap()
                .replace('T', " ")
                .replace('Z', "");
            let time = if time.contains('.') {
                time
            } else {
                format!("{time}.000")
            };
            format!(
                "{},{},{},{},{}",
                row["auction"],
                row["bidder"],
                row["price"],
                time,
                row["extra"].as_str().unwrap()
            )
        })
        .collect();
    expected.sort();
    let mut actual: Vec<String> = lines.iter().map(|(_, l)| l.clone()).collect();
    actual.sort();
    assert_eq!(actual.len(), expected.len());
    for (a, e) in actual.iter().zip(&expected) {
        assert_eq!(a, e);
    }
    for (partition, line) in &lines {
        let time = line.split(',').nth(3).unwrap();
        let (day, clock) = time.split_once(' ').unwrap();
        assert!(
            partition.starts_with(&format!("dt={day}")) && partition.contains(&clock[..2]),
            "{line} in {partition}"
        );
    }
}

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

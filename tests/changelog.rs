//! Differential tests of updating queries (GROUP BY without a window,
//! global aggregates, DISTINCT, Top-N and deduplication, regular joins
//! without a time bound over append-only and updating inputs, and queries
//! over their results): the changelog a sink receives,
//! replayed (`+I`/`+U` add a row, `-U`/`-D` take one out), must give the
//! table DataFusion computes for the same SQL as one batch query over the
//! whole input, for batch sizes 1, 7 and 2048 and 1, 2 and 4 instances per
//! keyed operator. A retraction of a row the sink does not hold fails the
//! test, and so does an aggregate emitting more than one change per key
//! and input batch (checked at batch size 1: one row in, at most -U/+U out).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::io::Write;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const SOURCE: &str = "CREATE TABLE orders (
  k VARCHAR, v DOUBLE, n BIGINT, ts BIGINT
) WITH (connector = 'file', path = 'bound-by---input');
CREATE TABLE payments (
  k VARCHAR, p BIGINT, ts BIGINT
) WITH (connector = 'file', path = 'bound-by---input');";

/// Payments for customers c00..c16 (orders have c00..c12), some keys NULL.
fn random_payments(seed: u64, rows: usize) -> String {
    let mut rng = SmallRng::seed_from_u64(seed + 100);
    let mut out = String::new();
    for i in 0..rows {
        let p = rng.random_range(-5..40);
        if rng.random_range(0..25) == 0 {
            out.push_str(&format!("{{\"p\":{p},\"ts\":{i}}}\n"));
        } else if rng.random_range(0..40) == 0 {
            // A NULL amount: NOT IN's NULL rule blocks its key's rows.
            let k = format!("c{:02}", rng.random_range(0..17));
            out.push_str(&format!("{{\"k\":\"{k}\",\"ts\":{i}}}\n"));
        } else {
            let k = format!("c{:02}", rng.random_range(0..17));
            out.push_str(&format!("{{\"k\":\"{k}\",\"p\":{p},\"ts\":{i}}}\n"));
        }
    }
    out
}

/// Batch sizes and instances swept.
const SWEEP: [(usize, usize); 6] = [(1, 1), (7, 1), (2048, 1), (7, 2), (2048, 4), (1, 4)];

fn random_input(seed: u64, rows: usize) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = String::new();
    for i in 0..rows {
        let k = format!("c{:02}", rng.random_range(0..13));
        let v = f64::from(rng.random_range(0..10_000)) / 100.0;
        let n = rng.random_range(-5..40);
        // Some NULL amounts: aggregates skip them, counts of rows do not.
        if rng.random_range(0..20) == 0 {
            out.push_str(&format!("{{\"k\":\"{k}\",\"v\":{v},\"ts\":{i}}}\n"));
        } else {
            out.push_str(&format!(
                "{{\"k\":\"{k}\",\"v\":{v},\"n\":{n},\"ts\":{i}}}\n"
            ));
        }
    }
    out
}

/// The updating queries: each runs as written in both engines.
const QUERIES: [(&str, &str); 27] = [
    (
        "group by with every kind of aggregate",
        "SELECT k, count(*) AS c, count(n) AS cn, sum(n) AS s, min(n) AS lo, max(n) AS hi, avg(n) AS a, sum(v) AS sv, avg(v) AS av, min(v) AS vlo FROM orders GROUP BY k",
    ),
    (
        "count distinct and having",
        "SELECT k, count(DISTINCT n) AS d, sum(n) AS s FROM orders GROUP BY k HAVING count(*) > 20",
    ),
    (
        "select distinct",
        "SELECT DISTINCT k, n % 4 AS r FROM orders WHERE n IS NOT NULL",
    ),
    (
        "global aggregate",
        "SELECT count(*) AS c, sum(n) AS s, max(v) AS top FROM orders",
    ),
    (
        "filter aggregate",
        "SELECT k, count(*) FILTER (WHERE n > 20) AS big, sum(n) FILTER (WHERE n < 0) AS refunds FROM orders GROUP BY k",
    ),
    (
        "aggregate of an aggregate: how many customers have each order count",
        "SELECT c, count(*) AS customers, min(k) AS first_customer FROM (SELECT k, count(*) AS c FROM orders GROUP BY k) GROUP BY c",
    ),
    (
        "global aggregate over an updating input",
        "SELECT max(s) AS top, min(s) AS bottom, sum(s) AS total, count(DISTINCT s) AS sums FROM (SELECT k, sum(n) AS s FROM orders GROUP BY k)",
    ),
    (
        "union of an updating and an append-only query",
        "SELECT k, count(*) AS c FROM orders GROUP BY k UNION ALL SELECT k, n AS c FROM orders WHERE n > 37",
    ),
    (
        "top 3 amounts per customer",
        "SELECT k, n, ts, rn FROM (SELECT k, n, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY n DESC, ts) AS rn FROM orders) WHERE rn <= 3",
    ),
    (
        "keep-last deduplication",
        "SELECT k, v, ts FROM (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM orders) WHERE rn = 1",
    ),
    (
        "rank with ties",
        "SELECT k, n, r FROM (SELECT k, n, RANK() OVER (PARTITION BY k ORDER BY n DESC) AS r FROM orders WHERE n IS NOT NULL) WHERE r <= 2",
    ),
    (
        "top 3 customers by an updating sum",
        "SELECT k, s, rn FROM (SELECT k, s, ROW_NUMBER() OVER (ORDER BY s DESC, k) AS rn FROM (SELECT k, sum(n) AS s FROM orders GROUP BY k)) WHERE rn <= 3",
    ),
    (
        "left join without a time bound, with a residual condition",
        "SELECT o.k, o.n, p.p FROM orders o LEFT JOIN payments p ON o.k = p.k AND p.p > o.n + 30",
    ),
    (
        "full join without a time bound",
        "SELECT o.k AS ok, o.n, p.k AS pk, p.p FROM orders o FULL JOIN payments p ON o.k = p.k AND o.n = p.p",
    ),
    (
        "inner join of two updating aggregates",
        "SELECT t.k, t.s, c.c FROM (SELECT k, sum(n) AS s FROM orders GROUP BY k) t JOIN (SELECT k, count(*) AS c FROM payments GROUP BY k) c ON t.k = c.k",
    ),
    (
        "right join of an updating aggregate and a stream",
        "SELECT t.k, t.hi, p.p FROM (SELECT k, max(n) AS hi FROM orders GROUP BY k) t RIGHT JOIN payments p ON t.k = p.k",
    ),
    (
        "exists (a semi join)",
        "SELECT k, n FROM orders o WHERE EXISTS (SELECT 1 FROM payments p WHERE p.k = o.k AND p.p > 30)",
    ),
    (
        "not exists (an anti join) over an updating subquery",
        "SELECT k, n FROM orders o WHERE n > 30 AND NOT EXISTS (SELECT 1 FROM (SELECT k, count(*) AS c FROM payments GROUP BY k) p WHERE p.k = o.k AND p.c > 9)",
    ),
    (
        "in (a semi join)",
        "SELECT k, n FROM orders WHERE k IN (SELECT k FROM payments WHERE p < 0)",
    ),
    (
        "not in (a null-aware anti join)",
        "SELECT k, n FROM orders WHERE k NOT IN (SELECT k FROM payments WHERE p > 30 AND k IS NOT NULL)",
    ),
    (
        "union distinct",
        "SELECT k FROM orders UNION SELECT k FROM payments",
    ),
    (
        "intersect",
        "SELECT k, n FROM orders INTERSECT SELECT k, p FROM payments",
    ),
    (
        "except",
        "SELECT k, n FROM orders EXCEPT SELECT k, p FROM payments",
    ),
    (
        "grouping sets",
        "SELECT k, n % 3 AS r, count(*) AS c, sum(n) AS s FROM orders GROUP BY GROUPING SETS ((k), (n % 3), (k, n % 3), ())",
    ),
    (
        "rollup with grouping()",
        "SELECT k, v > 50 AS big, count(*) AS c, grouping(k) AS gk FROM orders GROUP BY ROLLUP (k, v > 50)",
    ),
    (
        "cube over an updating input",
        "SELECT k, s > 100 AS high, count(*) AS c FROM (SELECT k, sum(n) AS s FROM orders GROUP BY k) GROUP BY CUBE (k, s > 100)",
    ),
    (
        "projection and expressions over an updating stream",
        "SELECT upper(k) AS customer, s * 2 AS doubled FROM (SELECT k, sum(n) AS s FROM orders GROUP BY k) WHERE s > 100",
    ),
];

fn batch_rows(input: &str, sql: &str) -> Vec<Value> {
    let schema = Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Float64, true),
        Field::new("n", DataType::Int64, true),
        Field::new("ts", DataType::Int64, true),
    ]);
    let payments = Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("p", DataType::Int64, true),
        Field::new("ts", DataType::Int64, true),
    ]);
    let payments_path = format!("{input}.payments");
    let lines = common::datafusion_json_lines(
        &[
            ("orders", input, schema),
            ("payments", &payments_path, payments),
        ],
        sql,
    );
    common::json_rows(lines.iter().map(String::as_str))
}

/// The table a run's changelog replays to, as JSON rows.
fn replay(lines: &[String], what: &str) -> Vec<Value> {
    assert!(
        lines.is_empty() || common::is_changelog(lines),
        "{what}: the lines carry no row kinds"
    );
    let table = common::replay_changelog(lines).unwrap_or_else(|e| panic!("{what}: {e}"));
    common::json_rows(table.iter().map(String::as_str))
}

#[test]
fn replayed_changelogs_equal_datafusion_batch_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    for seed in [1u64, 2] {
        let input = write_inputs(dir.path(), seed);
        for (name, sql) in QUERIES {
            sweep(name, sql, sql, &input, seed);
        }
    }
}

/// Writes seed `seed`'s orders (and payments beside them); the orders' path.
fn write_inputs(dir: &std::path::Path, seed: u64) -> String {
    let path = dir.join(format!("orders-{seed}.ndjson"));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(random_input(seed, 700).as_bytes()))
        .expect("write input");
    let input = path.display().to_string();
    std::fs::write(format!("{input}.payments"), random_payments(seed, 150))
        .expect("write payments");
    input
}

/// Runs `sql` over the inputs at every batch size and parallelism of the
/// sweep; the replayed changelog must equal `batch_sql` run by DataFusion.
fn sweep(name: &str, sql: &str, batch_sql: &str, input: &str, seed: u64) {
    let payments = format!("{input}.payments");
    let mut expected = batch_rows(input, batch_sql);
    assert!(
        !expected.is_empty(),
        "{name}: the batch query returned nothing"
    );
    expected.sort_by_key(common::row_key);
    for (batch_size, parallelism) in SWEEP {
        let what = format!("{name} (seed {seed}, batch {batch_size}, parallelism {parallelism})");
        let file = SqlFile {
            name: "<changelog>".into(),
            text: format!("{SOURCE}\n{sql};"),
        };
        let mut inputs = BTreeMap::from([("orders".to_string(), input.to_string())]);
        if sql.contains("payments") {
            inputs.insert("payments".to_string(), payments.clone());
        }
        let captured = common::run_captured_in_parallel(
            &[file],
            &BTreeMap::new(),
            inputs,
            batch_size,
            parallelism,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        let mut actual = replay(&captured.lines, &what);
        actual.sort_by_key(common::row_key);
        common::assert_same_rows(&actual, &expected, &what);
    }
}

#[test]
fn a_correlated_not_in_follows_sqls_null_rule_row_by_row() {
    // DataFusion's batch engine runs no correlated NOT IN (its null-aware
    // anti join takes one key column); the reference spells the rule out:
    // a row passes when no payment shares its key, or when its amount is
    // not NULL, no payment of its key has that amount and none has NULL.
    let batch = "SELECT o.k, o.n FROM orders o
        LEFT JOIN (SELECT k, count(*) AS c, count(p) AS cp FROM payments GROUP BY k) s ON s.k = o.k
        WHERE s.c IS NULL
           OR (o.n IS NOT NULL AND s.c = s.cp
               AND NOT EXISTS (SELECT 1 FROM payments q WHERE q.k = o.k AND q.p = o.n))";
    let dir = tempfile::tempdir().expect("tempdir");
    for seed in [1u64, 2] {
        let input = write_inputs(dir.path(), seed);
        sweep(
            "correlated NOT IN",
            "SELECT k, n FROM orders o WHERE n NOT IN (SELECT p FROM payments q WHERE q.k = o.k)",
            batch,
            &input,
            seed,
        );
    }
}

#[test]
fn an_aggregate_emits_one_change_per_key_and_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("orders.ndjson");
    let input = random_input(5, 400);
    std::fs::write(&path, &input).expect("write input");
    let rows = input.lines().count();
    for (batch_size, most) in [(1, 2 * rows), (2048, 2 * 13)] {
        let file = SqlFile {
            name: "<changelog>".into(),
            text: format!("{SOURCE}\nSELECT k, count(*) AS c FROM orders GROUP BY k;"),
        };
        let inputs = BTreeMap::from([("orders".to_string(), path.display().to_string())]);
        let captured =
            common::run_captured_in_parallel(&[file], &BTreeMap::new(), inputs, batch_size, 1)
                .expect("run");
        // One batch of 400 rows over 13 keys: one +I per key, nothing else.
        assert!(
            captured.lines.len() <= most,
            "batch {batch_size}: {} changes for {rows} rows",
            captured.lines.len()
        );
        if batch_size == 2048 {
            assert!(captured.lines.iter().all(|l| l.contains("> +I ")));
        }
    }
}

#[test]
fn updating_queries_are_refused_by_append_only_operators_and_sinks() {
    let cases = [
        (
            "SELECT k, count(*) AS c FROM (SELECT k, count(*) AS c FROM orders GROUP BY k) GROUP BY k, tumble(INTERVAL '1' SECOND)",
            "a window aggregate takes only an append-only input, but its input is updating",
        ),
        (
            "SELECT k, c FROM (SELECT k, count(*) AS c FROM orders GROUP BY k) ORDER BY c",
            "ORDER BY takes only an append-only input",
        ),
    ];
    for (sql, expected) in cases {
        let file = SqlFile {
            name: "q.sql".into(),
            text: format!("{SOURCE}\n{sql};"),
        };
        let err = match eddy_sql::compile(&[file], &BTreeMap::new()) {
            Ok(_) => panic!("planned: {sql}"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(expected), "{sql}: {err}");
        assert!(
            err.contains("the GROUP BY without a window at q.sql:7:"),
            "the message names what made the input updating: {err}"
        );
    }
    // A sink that takes only appends.
    let file = SqlFile {
        name: "q.sql".into(),
        text: format!(
            "{SOURCE}\nCREATE TABLE totals (k VARCHAR, c BIGINT) WITH (connector = 'ndjson', path = 'totals.ndjson');\n\
             INSERT INTO totals SELECT k, count(*) FROM orders GROUP BY k;"
        ),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("orders.ndjson");
    std::fs::write(&path, random_input(3, 10)).expect("write input");
    let inputs = BTreeMap::from([("orders".to_string(), path.display().to_string())]);
    let err = match common::run_captured(&[file], &BTreeMap::new(), inputs, 16) {
        Ok(_) => panic!("an updating query ran into a plain NDJSON sink"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("table 'totals': connector 'ndjson' takes only appends")
            && err.contains("the GROUP BY without a window at q.sql:8:")
            && err.contains("format = 'debezium-json'"),
        "{err}"
    );
}

#[test]
fn a_debezium_sink_writes_change_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("orders.ndjson");
    std::fs::write(
        &input,
        "{\"k\":\"a\",\"n\":1,\"ts\":1}\n{\"k\":\"b\",\"n\":2,\"ts\":2}\n{\"k\":\"a\",\"n\":3,\"ts\":3}\n",
    )
    .expect("write input");
    let out = dir.path().join("totals.ndjson");
    let file = SqlFile {
        name: "q.sql".into(),
        text: format!(
            "{SOURCE}\nCREATE TABLE totals (k VARCHAR, s BIGINT) WITH (connector = 'ndjson', path = '{}', format = 'debezium-json');\n\
             CREATE TABLE cdc (k VARCHAR, s BIGINT) WITH (connector = 'stdout', tag = 'CDC', format = 'debezium-json');\n\
             CREATE VIEW sums AS SELECT k, sum(n) AS s FROM orders GROUP BY k;\n\
             INSERT INTO totals SELECT * FROM sums;\n\
             INSERT INTO cdc SELECT * FROM sums;",
            out.display()
        ),
    };
    let inputs = BTreeMap::from([("orders".to_string(), input.display().to_string())]);
    let run = common::run_captured(&[file], &BTreeMap::new(), inputs, 1).expect("run");
    assert_eq!(
        run.lines.last().map(String::as_str),
        Some("CDC> {\"before\": {\"k\": \"a\", \"s\": 1}, \"after\": {\"k\": \"a\", \"s\": 4}, \"op\": \"u\"}"),
        "stdout prints the same events: {:?}",
        run.lines
    );
    let text = std::fs::read_to_string(&out).expect("sink file");
    assert_eq!(
        text,
        concat!(
            "{\"before\":null,\"after\":{\"k\":\"a\",\"s\":1},\"op\":\"c\"}\n",
            "{\"before\":null,\"after\":{\"k\":\"b\",\"s\":2},\"op\":\"c\"}\n",
            "{\"before\":{\"k\":\"a\",\"s\":1},\"after\":{\"k\":\"a\",\"s\":4},\"op\":\"u\"}\n",
        )
    );
}

/// Debezium events over accounts 0..40 (create, update, delete as the
/// account exists or not), a few malformed, and the table they leave.
fn account_feed(seed: u64, events: usize) -> (String, String, usize, Vec<usize>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut accounts: BTreeMap<i64, (String, i64)> = BTreeMap::new();
    let mut feed = String::new();
    let mut bad = 0;
    // Lines (from 1) of changes to keys the feed never created.
    let mut unknown_keys = Vec::new();
    let image = |id: i64, (owner, balance): &(String, i64)| {
        format!("{{\"id\":{id},\"owner\":\"{owner}\",\"balance\":{balance}}}")
    };
    for i in 0..events {
        if i % 97 == 13 {
            feed.push_str("{\"before\":null,\"after\":{\"id\":1},\"op\":\"x\"}\n");
            bad += 1;
            continue;
        }
        if i % 89 == 7 || i % 83 == 5 {
            // An update or a delete of a key never created.
            let ghost = (format!("ghost{i}"), 1);
            feed.push_str(&if i % 89 == 7 {
                format!(
                    "{{\"before\":{},\"after\":{},\"op\":\"u\"}}\n",
                    image(1000 + i as i64, &ghost),
                    image(1000 + i as i64, &ghost)
                )
            } else {
                format!(
                    "{{\"before\":{{\"id\":{}}},\"after\":null,\"op\":\"d\"}}\n",
                    1000 + i
                )
            });
            bad += 1;
            unknown_keys.push(feed.lines().count());
            continue;
        }
        let id = rng.random_range(0..40);
        let new = (
            format!("o{}", rng.random_range(0..5)),
            rng.random_range(0..100),
        );
        let line = match accounts.get(&id).cloned() {
            None => {
                let line = format!(
                    "{{\"before\":null,\"after\":{},\"op\":\"c\",\"ts_ms\":{i}}}",
                    image(id, &new)
                );
                accounts.insert(id, new);
                if rng.random_range(0..8) == 0 {
                    // A create delivered twice (at-least-once delivery).
                    feed.push_str(&line);
                    feed.push('\n');
                }
                line
            }
            Some(old) if rng.random_range(0..4) == 0 => {
                accounts.remove(&id);
                if rng.random_range(0..2) == 0 {
                    // The old row of a delete as PostgreSQL logs it by
                    // default: its key only.
                    format!("{{\"before\":{{\"id\":{id}}},\"after\":null,\"op\":\"d\"}}")
                } else {
                    format!("{{\"before\":{},\"after\":null,\"op\":\"d\",\"source\":{{\"table\":\"accounts\"}}}}", image(id, &old))
                }
            }
            Some(old) => {
                // Now and then an old row that lags the one the feed holds.
                let before = if rng.random_range(0..6) == 0 {
                    (old.0.clone(), -1)
                } else {
                    old
                };
                let line = format!(
                    "{{\"before\":{},\"after\":{},\"op\":\"u\"}}",
                    image(id, &before),
                    image(id, &new)
                );
                accounts.insert(id, new);
                line
            }
        };
        feed.push_str(&line);
        feed.push('\n');
    }
    let table: String = accounts
        .iter()
        .map(|(id, row)| format!("{}\n", image(*id, row)))
        .collect();
    (feed, table, bad, unknown_keys)
}

const ACCOUNTS: &str = "CREATE TABLE accounts (
  id BIGINT NOT NULL, owner VARCHAR, balance BIGINT,
  PRIMARY KEY (id) NOT ENFORCED
) WITH (connector = 'file', path = 'bound-by---input', format = 'debezium-json');";

#[test]
fn a_debezium_change_feed_reads_as_its_current_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (feed, table, bad, unknown_keys) = account_feed(9, 600);
    let feed_path = dir.path().join("accounts.ndjson");
    let table_path = dir.path().join("accounts-now.ndjson");
    std::fs::write(&feed_path, feed).expect("write feed");
    std::fs::write(&table_path, table).expect("write table");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("owner", DataType::Utf8, true),
        Field::new("balance", DataType::Int64, true),
    ]);
    let queries = [
        "SELECT id, owner, balance FROM accounts WHERE balance > 30",
        "SELECT owner, count(*) AS n, sum(balance) AS total, max(balance) AS top FROM accounts GROUP BY owner",
        "SELECT owner, id, balance, rn FROM (SELECT owner, id, balance, ROW_NUMBER() OVER (PARTITION BY owner ORDER BY balance DESC, id) AS rn FROM accounts) WHERE rn <= 2",
    ];
    for sql in queries {
        let lines = common::datafusion_json_lines(
            &[(
                "accounts",
                table_path.to_str().expect("path"),
                schema.clone(),
            )],
            sql,
        );
        let mut expected = common::json_rows(lines.iter().map(String::as_str));
        expected.sort_by_key(common::row_key);
        for (batch_size, parallelism) in SWEEP {
            let what = format!("{sql} (batch {batch_size}, parallelism {parallelism})");
            let file = SqlFile {
                name: "<feed>".into(),
                text: format!("{ACCOUNTS}\n{sql};"),
            };
            let inputs =
                BTreeMap::from([("accounts".to_string(), feed_path.display().to_string())]);
            let captured = common::run_captured_in_parallel(
                &[file],
                &BTreeMap::new(),
                inputs,
                batch_size,
                parallelism,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let bad_rows: u64 = captured
                .report
                .nodes
                .iter()
                .map(|n| n.metrics.bad_rows)
                .sum();
            assert_eq!(
                bad_rows, bad as u64,
                "{what}: malformed events are bad rows"
            );
            let mut actual = replay(&captured.lines, &what);
            actual.sort_by_key(common::row_key);
            common::assert_same_rows(&actual, &expected, &what);
        }
    }
    // Changes to keys the feed never created are bad rows at their lines.
    let file = SqlFile {
        name: "<feed>".into(),
        text: format!("{ACCOUNTS}\nSELECT line, reason FROM bad_rows(accounts) WHERE reason LIKE '%never created%';"),
    };
    let inputs = BTreeMap::from([("accounts".to_string(), feed_path.display().to_string())]);
    let captured = common::run_captured_in_parallel(&[file], &BTreeMap::new(), inputs, 7, 1)
        .expect("bad rows");
    let rows = common::json_rows(captured.lines.iter().map(String::as_str));
    let mut lines: Vec<usize> = rows
        .iter()
        .map(|r| r["line"].as_u64().expect("a line") as usize)
        .collect();
    lines.sort_unstable();
    assert_eq!(lines, unknown_keys, "{rows:?}");
    assert!(
        rows.iter().any(|r| r["reason"]
            .as_str()
            .is_some_and(|t| t.starts_with("op \"d\" of key (id=10"))),
        "{rows:?}"
    );
    // The feed's mode and key show in the plan.
    let graph = eddy_sql::compile(
        &[SqlFile {
            name: "q.sql".into(),
            text: format!("{ACCOUNTS}\nSELECT * FROM accounts;"),
        }],
        &BTreeMap::new(),
    )
    .expect("plan")
    .graph;
    assert!(
        graph
            .explain()
            .contains("changelog: updating (+I -U +U -D), upsert key (id)"),
        "{}",
        graph.explain()
    );
}

/// Rates for customers c00..c12: a new rate now and then, times rising.
fn random_rates(seed: u64, rows: usize, span: i64) -> String {
    let mut rng = SmallRng::seed_from_u64(seed + 200);
    let mut out = String::new();
    for i in 0..rows {
        let k = format!("c{:02}", rng.random_range(0..13));
        let rate = rng.random_range(1..500);
        let ts = (i as i64) * span / rows as i64 + rng.random_range(0..3);
        out.push_str(&format!("{{\"k\":\"{k}\",\"rate\":{rate},\"ts\":{ts}}}\n"));
    }
    out
}

const TEMPORAL_SOURCES: &str = "CREATE TABLE orders (
  k VARCHAR, v DOUBLE, n BIGINT, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '0.005' SECOND
) WITH (connector = 'file', path = 'bound-by---input');
CREATE TABLE rates (
  k VARCHAR, rate BIGINT, ts BIGINT,
  rate_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR rate_time AS rate_time - INTERVAL '0.005' SECOND
) WITH (connector = 'file', path = 'bound-by---input');";

#[test]
fn a_temporal_join_meets_the_version_valid_at_each_rows_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let orders = dir.path().join("orders.ndjson");
    let rates = dir.path().join("rates.ndjson");
    std::fs::write(&orders, random_input(4, 700)).expect("write orders");
    std::fs::write(&rates, random_rates(4, 120, 700)).expect("write rates");
    let order_schema = Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Float64, true),
        Field::new("n", DataType::Int64, true),
        Field::new("ts", DataType::Int64, true),
    ]);
    let rate_schema = Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("rate", DataType::Int64, true),
        Field::new("ts", DataType::Int64, true),
    ]);
    for (join, outer) in [("LEFT JOIN", true), ("JOIN", false)] {
        let streaming = format!(
            "SELECT o.k, o.n, o.ts, r.rate, r.ts AS rate_ts FROM orders o {join} rates FOR SYSTEM_TIME AS OF o.event_time AS r ON o.k = r.k"
        );
        // The batch form: each order with the latest rate at or before it.
        let batch = format!(
            "SELECT k, n, ts, rate, rate_ts FROM (
               SELECT o.k, o.n, o.ts, r.rate, r.ts AS rate_ts,
                      ROW_NUMBER() OVER (PARTITION BY o.ts ORDER BY r.ts DESC) AS rn
               FROM orders o LEFT JOIN rates r ON o.k = r.k AND r.ts <= o.ts)
             WHERE rn = 1 {}",
            if outer { "" } else { "AND rate IS NOT NULL" }
        );
        let lines = common::datafusion_json_lines(
            &[
                (
                    "orders",
                    orders.to_str().expect("path"),
                    order_schema.clone(),
                ),
                ("rates", rates.to_str().expect("path"), rate_schema.clone()),
            ],
            &batch,
        );
        let mut expected = common::json_rows(lines.iter().map(String::as_str));
        expected.sort_by_key(common::row_key);
        assert!(expected.len() > 100, "{join}: {} rows", expected.len());
        for (batch_size, parallelism) in SWEEP {
            let what = format!("{join} (batch {batch_size}, parallelism {parallelism})");
            let file = SqlFile {
                name: "<temporal>".into(),
                text: format!("{TEMPORAL_SOURCES}\n{streaming};"),
            };
            let inputs = BTreeMap::from([
                ("orders".to_string(), orders.display().to_string()),
                ("rates".to_string(), rates.display().to_string()),
            ]);
            let captured = common::run_captured_in_parallel(
                &[file],
                &BTreeMap::new(),
                inputs,
                batch_size,
                parallelism,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                !common::is_changelog(&captured.lines),
                "{what}: append-only"
            );
            assert_eq!(
                common::late_rows(&captured.report),
                0,
                "{what}: no late rows"
            );
            let mut actual = common::json_rows(captured.lines.iter().map(String::as_str));
            actual.sort_by_key(common::row_key);
            common::assert_same_rows(&actual, &expected, &what);
        }
    }
}

#[test]
fn a_state_ttl_forgets_keys_the_watermark_left_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("orders.ndjson");
    // a and b at 0, then c every 100 ms to 5 s, then a again at 6 s.
    let mut input = String::from(
        "{\"k\":\"a\",\"v\":1.0,\"n\":1,\"ts\":0}\n{\"k\":\"b\",\"v\":1.0,\"n\":2,\"ts\":0}\n",
    );
    for ts in (1000..=5000).step_by(100) {
        input.push_str(&format!("{{\"k\":\"c\",\"v\":1.0,\"n\":0,\"ts\":{ts}}}\n"));
    }
    input.push_str("{\"k\":\"a\",\"v\":1.0,\"n\":5,\"ts\":6000}\n");
    std::fs::write(&path, input).expect("write input");
    let query = "SELECT k, count(*) AS c, sum(n) AS s FROM orders GROUP BY k";
    let inputs = BTreeMap::from([("orders".to_string(), path.display().to_string())]);
    let run = |ttl: &str| {
        let file = SqlFile {
            name: "<ttl>".into(),
            text: format!("{ttl}\n{TEMPORAL_SOURCES}\n{query};"),
        };
        let captured =
            common::run_captured_in_parallel(&[file], &BTreeMap::new(), inputs.clone(), 1, 1)
                .expect("run");
        let mut rows = replay(&captured.lines, ttl);
        rows.sort_by_key(common::row_key);
        rows
    };
    let row = |k: &str, c: i64, s: i64| serde_json::json!({"k": k, "c": c, "s": s});
    let sorted = |mut rows: Vec<Value>| {
        rows.sort_by_key(common::row_key);
        rows
    };
    // Without a TTL, a holds both its rows.
    assert_eq!(
        run(""),
        sorted(vec![row("a", 2, 6), row("b", 1, 2), row("c", 41, 0)])
    );
    // With 2 s, a was forgotten long before 6 s: it starts afresh with a +I
    // of its own, next to the result it had (a TTL bounds state, as in
    // Flink; the sink keeps what it was sent).
    assert_eq!(
        run("SET 'table.exec.state.ttl' = '2 s';"),
        vec![
            row("a", 1, 1),
            row("a", 1, 5),
            row("b", 1, 2),
            row("c", 41, 0)
        ]
    );
}

#[test]
fn deduplication_on_arrival_keeps_the_first_or_the_last_row_of_each_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("orders.ndjson");
    let input = random_input(6, 500);
    std::fs::write(&path, &input).expect("write input");
    // The first and the last row of each key, in file order.
    let mut first: BTreeMap<String, Value> = BTreeMap::new();
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    for line in input.lines() {
        let row: Value = serde_json::from_str(line).expect("json");
        let k = row["k"].as_str().expect("k").to_string();
        let kept = serde_json::json!({"k": row["k"], "ts": row["ts"]});
        first.entry(k.clone()).or_insert_with(|| kept.clone());
        last.insert(k, kept);
    }
    let source = "CREATE TABLE orders (
      k VARCHAR, v DOUBLE, n BIGINT, ts BIGINT, proc AS PROCTIME()
    ) WITH (connector = 'file', path = 'bound-by---input');";
    for (order, expected, append_only) in [("ASC", &first, true), ("DESC", &last, false)] {
        let query = format!(
            "SELECT k, ts FROM (SELECT k, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY proc {order}) AS rn FROM orders) WHERE rn = 1"
        );
        let mut expected: Vec<Value> = expected.values().cloned().collect();
        expected.sort_by_key(common::row_key);
        for (batch_size, parallelism) in SWEEP {
            let what = format!("{order} (batch {batch_size}, parallelism {parallelism})");
            let file = SqlFile {
                name: "<arrival>".into(),
                text: format!("{source}\n{query};"),
            };
            let inputs = BTreeMap::from([("orders".to_string(), path.display().to_string())]);
            let captured = common::run_captured_in_parallel(
                &[file],
                &BTreeMap::new(),
                inputs,
                batch_size,
                parallelism,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                !common::is_changelog(&captured.lines),
                append_only,
                "{what}: keep-first is append-only, keep-last updating"
            );
            let mut actual = if append_only {
                common::json_rows(captured.lines.iter().map(String::as_str))
            } else {
                replay(&captured.lines, &what)
            };
            actual.sort_by_key(common::row_key);
            common::assert_same_rows(&actual, &expected, &what);
        }
    }
    // Over an updating input, arrival is refused, naming what made it so.
    let Err(err) = eddy_sql::compile(
        &[SqlFile {
            name: "q.sql".into(),
            text: format!("{source}\nSELECT k FROM (SELECT k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY proc) AS rn FROM (SELECT k, proc FROM orders WHERE k IN (SELECT k FROM orders WHERE n > 30))) WHERE rn = 1;"),
        }],
        &BTreeMap::new(),
    ) else {
        panic!("ranking an updating input by arrival was not refused");
    };
    let err = err.to_string();
    assert!(err.contains("ranking by arrival"), "{err}");
}

/// A Debezium feed of rates for c00..c12: creates, updates and deletes at
/// increasing commit times (`source.ts_ms`) over 0..700 ms, and per key
/// the history it describes: (time, rate, or None once deleted).
/// Per key, its changes: (time, rate, or None for a delete).
type RateHistory = BTreeMap<String, Vec<(i64, Option<i64>)>>;

fn rate_feed(seed: u64, events: usize) -> (String, RateHistory) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut held: BTreeMap<String, i64> = BTreeMap::new();
    let mut history = RateHistory::new();
    let mut feed = String::new();
    let mut t = 0i64;
    for _ in 0..events {
        t += rng.random_range(1..=9);
        let k = format!("c{:02}", rng.random_range(0..13));
        let rate = rng.random_range(1..100);
        let image = |rate: i64| format!("{{\"k\":\"{k}\",\"rate\":{rate}}}");
        let meta = format!(
            "\"source\":{{\"ts_ms\":{t},\"db\":\"fx\"}},\"ts_ms\":{}",
            t + 3
        );
        let line = match held.get(&k).copied() {
            None => {
                held.insert(k.clone(), rate);
                history.entry(k.clone()).or_default().push((t, Some(rate)));
                format!(
                    "{{\"before\":null,\"after\":{},\"op\":\"c\",{meta}}}",
                    image(rate)
                )
            }
            Some(_) if rng.random_range(0..5) == 0 => {
                held.remove(&k);
                history.entry(k.clone()).or_default().push((t, None));
                // The old row as PostgreSQL logs it by default: the key.
                format!("{{\"before\":{{\"k\":\"{k}\"}},\"after\":null,\"op\":\"d\",{meta}}}")
            }
            Some(old) => {
                held.insert(k.clone(), rate);
                history.entry(k.clone()).or_default().push((t, Some(rate)));
                format!(
                    "{{\"before\":{},\"after\":{},\"op\":\"u\",{meta}}}",
                    image(old),
                    image(rate)
                )
            }
        };
        feed.push_str(&line);
        feed.push('\n');
    }
    (feed, history)
}

#[test]
fn a_temporal_join_against_a_change_feed_meets_the_version_valid_at_each_rows_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let orders_path = dir.path().join("orders.ndjson");
    let rates_path = dir.path().join("rates.ndjson");
    let orders = random_input(8, 700);
    std::fs::write(&orders_path, &orders).expect("write orders");
    let (feed, history) = rate_feed(8, 160);
    std::fs::write(&rates_path, feed).expect("write rates");
    // Each order with the rate its key had at its time (none before the
    // key's first version or while it is deleted), worked out here.
    let mut expected: Vec<Value> = orders
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).expect("json");
            let k = row["k"].as_str().expect("k");
            let ts = row["ts"].as_i64().expect("ts");
            let rate = history
                .get(k)
                .and_then(|h| h.iter().rev().find(|(t, _)| *t <= ts))
                .and_then(|(_, rate)| *rate);
            serde_json::json!({"k": k, "n": row["n"], "ts": ts, "rate": rate})
        })
        .collect();
    expected.sort_by_key(common::row_key);
    let deleted = expected.iter().filter(|r| r["rate"].is_null()).count();
    assert!(
        deleted > 20 && deleted < 600,
        "{deleted} orders meet no rate"
    );
    let sources = "CREATE TABLE orders (
      k VARCHAR, v DOUBLE, n BIGINT, ts BIGINT,
      event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
      WATERMARK FOR event_time AS event_time - INTERVAL '0.005' SECOND
    ) WITH (connector = 'file', path = 'bound-by---input');
    CREATE TABLE rates (
      k VARCHAR NOT NULL, rate BIGINT,
      changed TIMESTAMP(3) METADATA FROM 'value.source.timestamp' VIRTUAL,
      WATERMARK FOR changed AS changed - INTERVAL '0.005' SECOND,
      PRIMARY KEY (k) NOT ENFORCED
    ) WITH (connector = 'file', path = 'bound-by---input', format = 'debezium-json');";
    let query = "SELECT o.k, o.n, o.ts, r.rate FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.event_time AS r ON o.k = r.k";
    for (batch_size, parallelism) in SWEEP {
        let what = format!("batch {batch_size}, parallelism {parallelism}");
        let file = SqlFile {
            name: "<temporal feed>".into(),
            text: format!("{sources}\n{query};"),
        };
        let inputs = BTreeMap::from([
            ("orders".to_string(), orders_path.display().to_string()),
            ("rates".to_string(), rates_path.display().to_string()),
        ]);
        let captured = common::run_captured_in_parallel(
            &[file],
            &BTreeMap::new(),
            inputs,
            batch_size,
            parallelism,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            !common::is_changelog(&captured.lines),
            "{what}: a temporal join's output is append-only"
        );
        let mut actual = common::json_rows(captured.lines.iter().map(String::as_str));
        actual.sort_by_key(common::row_key);
        common::assert_same_rows(&actual, &expected, &what);
    }
}

#[test]
fn a_feeds_metadata_columns_stay_out_of_operators_that_match_retractions_by_value() {
    let rates = "CREATE TABLE rates (
      k VARCHAR NOT NULL, rate BIGINT,
      changed TIMESTAMP(3) METADATA FROM 'value.source.timestamp' VIRTUAL,
      PRIMARY KEY (k) NOT ENFORCED
    ) WITH (connector = 'file', path = 'bound-by---input', format = 'debezium-json');";
    for (sql, operator) in [
        ("SELECT k, rate FROM rates WHERE changed > TIMESTAMP '2024-01-01 00:00:00'", "this WHERE"),
        ("SELECT k, max(changed) AS last FROM rates GROUP BY k", "the GROUP BY"),
        ("SELECT DISTINCT k, changed FROM rates", "the SELECT DISTINCT"),
        ("SELECT a.k, b.changed FROM rates a JOIN rates b ON a.k = b.k", "this INNER JOIN"),
        ("SELECT k, changed FROM (SELECT k, changed, ROW_NUMBER() OVER (PARTITION BY k ORDER BY rate DESC) AS rn FROM rates) WHERE rn <= 2", "a Top-N"),
    ] {
        let Err(err) = eddy_sql::compile(
            &[SqlFile {
                name: "q.sql".into(),
                text: format!("{rates}\n{sql};"),
            }],
            &BTreeMap::new(),
        ) else {
            panic!("planned: {sql}");
        };
        let err = err.to_string();
        assert!(
            err.contains(operator) && err.contains("column 'changed' holds each change's own metadata"),
            "{sql}: {err}"
        );
    }
    // Read as it is, or used apart from it, the column is fine.
    for sql in [
        "SELECT k, rate, changed FROM rates",
        "SELECT k, count(*) AS n, sum(rate) AS total FROM rates GROUP BY k",
    ] {
        eddy_sql::compile(
            &[SqlFile {
                name: "q.sql".into(),
                text: format!("{rates}\n{sql};"),
            }],
            &BTreeMap::new(),
        )
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

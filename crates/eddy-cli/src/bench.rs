//! `eddy bench`: the measuring side of the benchmarks in `bench/`.
//!
//! Each invocation runs one engine over one input file and prints one JSON
//! line: rows, seconds, rows per second and the process's peak resident
//! memory. `bench/*.sh` runs eddy and the DataFusion batch baseline as
//! separate processes (so each peak-memory figure is its own) and prints the
//! ratio.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use datafusion::prelude::{JsonReadOptions, SessionContext};
use eddy_connectors::ConnectorConfig;
use eddy_engine::runtime::JobConfig;
use eddy_sql::SqlFile;

use crate::error::{CliError, Result};

/// The generated orders stream as a table read from `$path`.
macro_rules! orders_table {
    ($path:literal) => {
        concat!(
            "
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '",
            $path,
            "');"
        )
    };
}

/// A count/sum per customer over `$window` of the orders in `${INPUT}`.
macro_rules! window_sql {
    ($window:literal) => {
        concat!(
            orders_table!("${INPUT}"),
            "
CREATE TABLE out (window_start TIMESTAMP, customer_id VARCHAR, n BIGINT, total DOUBLE) WITH (connector = 'blackhole');
INSERT INTO out
SELECT w.start, customer_id, n, total FROM (
  SELECT ",
            $window,
            " AS w, customer_id, count(*) AS n, sum(order_amount) AS total
  FROM orders GROUP BY w, customer_id
);
"
        )
    };
}

/// The benchmark query on the streaming engine.
pub const WINDOW_SQL: &str = window_sql!("tumble(INTERVAL '10' SECOND)");

/// The same aggregation as a DataFusion batch query.
pub const WINDOW_BATCH_SQL: &str = "
SELECT date_bin(INTERVAL '10 seconds', to_timestamp_millis(order_ts)) AS window_start, customer_id,
       count(*) AS n, sum(order_amount) AS total
FROM orders GROUP BY 1, 2";

/// The hopping-window benchmark: 5 s windows every second (each row in 5).
pub const HOP_SQL: &str = window_sql!("hop(INTERVAL '1' SECOND, INTERVAL '5' SECOND)");

/// The same hopping aggregation as a DataFusion batch query: each row's five
/// window starts unnested.
pub const HOP_BATCH_SQL: &str = "
SELECT window_start, customer_id, count(*) AS n, sum(order_amount) AS total
FROM (
  SELECT unnest(make_array(d, d - INTERVAL '1 second', d - INTERVAL '2 seconds',
                           d - INTERVAL '3 seconds', d - INTERVAL '4 seconds')) AS window_start,
         customer_id, order_amount
  FROM (SELECT date_bin(INTERVAL '1 second', to_timestamp_millis(order_ts)) AS d, customer_id, order_amount
        FROM orders))
GROUP BY 1, 2";

/// The join benchmark on the streaming engine: the enrichment join.
pub const JOIN_SQL: &str = concat!(
    orders_table!("${ORDERS}"),
    "
CREATE TABLE payments (
  payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${PAYMENTS}');
CREATE TABLE out (payment_id VARCHAR, customer_id VARCHAR, mismatch BOOLEAN) WITH (connector = 'blackhole');
INSERT INTO out
SELECT p.payment_id, o.customer_id, abs(p.paid_amount - o.order_amount) > 0.01
FROM payments p LEFT JOIN orders o
  ON p.order_id = o.order_id
 AND o.event_time BETWEEN p.event_time - INTERVAL '10' SECOND AND p.event_time + INTERVAL '10' SECOND;
"
);

/// The same join as a DataFusion batch query.
pub const JOIN_BATCH_SQL: &str = "
SELECT count(*) FROM (
  SELECT p.payment_id, o.customer_id, abs(p.paid_amount - o.order_amount) > 0.01 AS mismatch
  FROM payments p LEFT JOIN orders o
    ON p.order_id = o.order_id
   AND to_timestamp_millis(o.order_ts) BETWEEN to_timestamp_millis(p.payment_ts) - INTERVAL '10 seconds'
                                           AND to_timestamp_millis(p.payment_ts) + INTERVAL '10 seconds'
)";

/// Runs the join benchmark with `engine` over orders and payments files.
pub fn join(
    engine: &str,
    orders: &Path,
    payments: &Path,
    batch_size: Option<usize>,
    job: &JobConfig,
) -> Result<String> {
    let (orders, payments) = (orders.display().to_string(), payments.display().to_string());
    match engine {
        "eddy" => run_eddy(
            JOIN_SQL,
            BTreeMap::from([
                ("ORDERS".to_string(), orders),
                ("PAYMENTS".to_string(), payments),
            ]),
            batch_size,
            job,
        ),
        "datafusion" => run_datafusion(batch_size, |ctx, started| async move {
            use eddy_connectors::generator::GeneratedStream;
            register_stream(&ctx, "orders", &orders, GeneratedStream::Orders).await?;
            register_stream(&ctx, "payments", &payments, GeneratedStream::Payments).await?;
            let out = count_of(&ctx.sql(JOIN_BATCH_SQL).await?.collect().await?);
            let rows = count_lines(&orders)? + count_lines(&payments)?;
            Ok(report("datafusion", rows, out, started))
        }),
        other => Err(CliError::Usage(format!(
            "unknown engine '{other}' (use eddy or datafusion)"
        ))),
    }
}

/// The reference pipeline's stages a batch engine can run, as DataFusion
/// batch queries over the same files: the enrichment join (stage 10), the
/// payment metrics per 10 s window of it (20) and the device metrics per
/// 5 s window every second and site (30). The anomaly rules' running
/// statistics, the late-event report and the health checks over the
/// pipeline itself have no batch form. Each query's output rows are
/// counted.
pub const PIPELINE_BATCH_SQL: [(&str, &str); 3] = [
    (
        "enriched_payments",
        "SELECT count(*) FROM (
  SELECT p.payment_id, p.order_id, p.paid_amount, p.method, p.payment_ts,
         o.order_id IS NULL AS unmatched, o.customer_id, o.order_amount, o.country,
         coalesce(abs(p.paid_amount - o.order_amount) > 0.01, false) AS amount_mismatch
  FROM payments p LEFT JOIN orders o
    ON p.order_id = o.order_id
   AND to_timestamp_millis(o.order_ts) BETWEEN to_timestamp_millis(p.payment_ts) - INTERVAL '10 seconds'
                                           AND to_timestamp_millis(p.payment_ts) + INTERVAL '10 seconds')",
    ),
    (
        "payment_metrics",
        "SELECT count(*) FROM (
  SELECT date_bin(INTERVAL '10 seconds', to_timestamp_millis(p.payment_ts)) AS w,
         count(*) FILTER (WHERE o.order_id IS NOT NULL) AS joined_count,
         count(*) FILTER (WHERE o.order_id IS NULL) AS unmatched_payments,
         count(*) FILTER (WHERE abs(p.paid_amount - o.order_amount) > 0.01) AS amount_mismatches,
         coalesce(sum(p.paid_amount) FILTER (WHERE o.order_id IS NOT NULL), 0.0) AS total_revenue
  FROM payments p LEFT JOIN orders o
    ON p.order_id = o.order_id
   AND to_timestamp_millis(o.order_ts) BETWEEN to_timestamp_millis(p.payment_ts) - INTERVAL '10 seconds'
                                           AND to_timestamp_millis(p.payment_ts) + INTERVAL '10 seconds'
  GROUP BY 1)",
    ),
    (
        "device_metrics",
        "SELECT count(*) FROM (
  SELECT window_start, site_id, count(*) AS event_count,
         count(*) FILTER (WHERE event_type = 'fault') AS fault_count,
         count(*) FILTER (WHERE event_type = 'reboot') AS reboot_count,
         count(*) FILTER (WHERE event_type = 'firmware_update' AND status = 'failed') AS firmware_failures
  FROM (
    SELECT unnest(make_array(d, d - INTERVAL '1 second', d - INTERVAL '2 seconds',
                             d - INTERVAL '3 seconds', d - INTERVAL '4 seconds')) AS window_start,
           site_id, event_type, status
    FROM (SELECT date_bin(INTERVAL '1 second', to_timestamp_millis(event_ts)) AS d, site_id, event_type, status
          FROM devices))
  GROUP BY 1, 2)",
    ),
];

/// Runs [`PIPELINE_BATCH_SQL`] on DataFusion over the three files (eddy's
/// side of this benchmark is `eddy run queries/` itself, see
/// `bench/pipeline.sh`). The report's output rows are all three queries';
/// `outputs` names each.
pub fn pipeline_batch(
    orders: &Path,
    payments: &Path,
    devices: &Path,
    batch_size: Option<usize>,
) -> Result<String> {
    let paths = [orders, payments, devices].map(|p| p.display().to_string());
    run_datafusion(batch_size, |ctx, started| async move {
        use eddy_connectors::generator::GeneratedStream;
        let streams = [
            ("orders", GeneratedStream::Orders),
            ("payments", GeneratedStream::Payments),
            ("devices", GeneratedStream::Devices),
        ];
        for ((name, stream), path) in streams.into_iter().zip(&paths) {
            register_stream(&ctx, name, path, stream).await?;
        }
        let mut outputs = Vec::new();
        for (name, sql) in PIPELINE_BATCH_SQL {
            outputs.push((name, count_of(&ctx.sql(sql).await?.collect().await?)));
        }
        let mut rows = 0;
        for path in &paths {
            rows += count_lines(path)?;
        }
        let out = outputs.iter().map(|(_, n)| n).sum();
        let line = report("datafusion", rows, out, started);
        let named: Vec<String> = outputs
            .iter()
            .map(|(name, n)| format!("\"{name}\":{n}"))
            .collect();
        Ok(format!(
            "{},\"outputs\":{{{}}}}}",
            line.trim_end_matches('}'),
            named.join(",")
        ))
    })
}

/// The value of a `SELECT count(*)` query's result.
fn count_of(batches: &[datafusion::arrow::record_batch::RecordBatch]) -> u64 {
    batches
        .first()
        .and_then(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<datafusion::arrow::array::Int64Array>()
                .map(|a| a.value(0))
        })
        .unwrap_or(0) as u64
}

/// Lines of a file (the batch baseline's input row count; measured outside
/// the timed query would be fairer, but it is a small share of the time).
fn count_lines(path: &str) -> Result<u64> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|source| CliError::Io {
        path: path.to_string(),
        source,
    })?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = file.read(&mut buffer).map_err(|source| CliError::Io {
            path: path.to_string(),
            source,
        })?;
        if n == 0 {
            return Ok(lines);
        }
        lines += buffer[..n].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

/// Peak resident set size of this process in bytes (Linux), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn report(engine: &str, rows: u64, output_rows: u64, started: Instant) -> String {
    let seconds = started.elapsed().as_secs_f64();
    format!(
        "{{\"engine\":\"{engine}\",\"input_rows\":{rows},\"output_rows\":{output_rows},\"seconds\":{seconds:.3},\"rows_per_second\":{:.0},\"peak_rss_bytes\":{}}}",
        rows as f64 / seconds.max(1e-9),
        peak_rss_bytes().unwrap_or(0)
    )
}

/// Runs eddy on benchmark SQL and reports source rows in, sink rows out.
fn run_eddy(
    sql: &str,
    params: BTreeMap<String, String>,
    batch_size: Option<usize>,
    job: &JobConfig,
) -> Result<String> {
    let files = [SqlFile {
        name: "<bench>".into(),
        text: sql.into(),
    }];
    let started = Instant::now();
    let config = ConnectorConfig {
        batch_size: batch_size.unwrap_or(eddy_connectors::DEFAULT_BATCH_SIZE),
        ..ConnectorConfig::default()
    };
    let ended = crate::job::run(&files, &params, config, job)?;
    let rows = ended
        .nodes
        .iter()
        .filter(|n| n.kind == "source")
        .map(|n| n.metrics.rows_in)
        .sum();
    let out = ended
        .nodes
        .iter()
        .filter(|n| n.kind == "sink")
        .map(|n| n.metrics.rows_in)
        .sum();
    let line = report("eddy", rows, out, started);
    if job.checkpoints.is_none() {
        return Ok(line);
    }
    // Checkpoint figures go at the end of the same JSON object.
    let c = &ended.checkpoints;
    let mean = c.total_duration_ms.checked_div(c.completed).unwrap_or(0);
    Ok(format!(
        "{},\"checkpoints\":{},\"checkpoint_bytes\":{},\"checkpoint_max_bytes\":{},\"checkpoint_total_bytes\":{},\"checkpoint_mean_ms\":{mean},\"checkpoint_max_ms\":{}}}",
        line.trim_end_matches('}'),
        c.completed,
        c.last_bytes,
        c.max_bytes,
        c.total_bytes,
        c.max_duration_ms
    ))
}

/// Runs a DataFusion batch baseline on a multi-threaded runtime.
fn run_datafusion<F>(
    batch_size: Option<usize>,
    body: impl FnOnce(SessionContext, Instant) -> F,
) -> Result<String>
where
    F: std::future::Future<Output = Result<String>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| CliError::Io {
            path: "tokio runtime".into(),
            source,
        })?;
    let started = Instant::now();
    // DataFusion at its own default batch size unless one is given.
    let mut config = datafusion::prelude::SessionConfig::new();
    if let Some(batch_size) = batch_size {
        config = config.with_batch_size(batch_size);
    }
    runtime.block_on(body(SessionContext::new_with_config(config), started))
}

async fn register_stream(
    ctx: &SessionContext,
    name: &str,
    path: &str,
    stream: eddy_connectors::generator::GeneratedStream,
) -> datafusion::error::Result<()> {
    let schema = eddy_connectors::generator::stream_schema(stream);
    let options = JsonReadOptions::default()
        .schema(schema.as_ref())
        .file_extension("");
    ctx.register_json(name, path, options).await
}

/// Which windowed aggregation a benchmark runs.
#[derive(Debug, Clone, Copy)]
pub enum WindowQuery {
    /// 10 s tumbling windows ([`WINDOW_SQL`]).
    Tumble,
    /// 5 s windows every second ([`HOP_SQL`]).
    Hop,
}

/// Runs a window benchmark with `engine` (`eddy` or `datafusion`).
/// With `job.checkpoints`, eddy checkpoints as it runs and the report adds
/// the checkpoint count, the last one's size and their mean and longest
/// duration. The rows reported are the input rows (for a hop, DataFusion's
/// counts are divided by the windows a row falls in).
pub fn window(
    query: WindowQuery,
    engine: &str,
    input: &Path,
    batch_size: Option<usize>,
    job: &JobConfig,
) -> Result<String> {
    let path = input.display().to_string();
    let (sql, batch_sql, windows_per_row) = match query {
        WindowQuery::Tumble => (WINDOW_SQL, WINDOW_BATCH_SQL, 1),
        WindowQuery::Hop => (HOP_SQL, HOP_BATCH_SQL, 5),
    };
    match engine {
        "eddy" => run_eddy(
            sql,
            BTreeMap::from([("INPUT".to_string(), path)]),
            batch_size,
            job,
        ),
        "datafusion" => {
            run_datafusion(batch_size, |ctx, started| async move {
                register_stream(
                    &ctx,
                    "orders",
                    &path,
                    eddy_connectors::generator::GeneratedStream::Orders,
                )
                .await?;
                let batches = ctx.sql(batch_sql).await?.collect().await?;
                let out: usize = batches.iter().map(|b| b.num_rows()).sum();
                // Every input row is counted in exactly one window.
                let rows: i64 = batches
                    .iter()
                    .filter_map(|b| {
                        b.column(2)
                            .as_any()
                            .downcast_ref::<datafusion::arrow::array::Int64Array>()
                    })
                    .map(|counts| counts.values().iter().sum::<i64>())
                    .sum();
                let rows = rows as u64 / windows_per_row;
                Ok(report("datafusion", rows, out as u64, started))
            })
        }
        other => Err(CliError::Usage(format!(
            "unknown engine '{other}' (use eddy or datafusion)"
        ))),
    }
}

/// The job each load client submits: a generator of `rows` orders copied
/// to a stdout sink (rows only counted, and tailed).
const API_LOAD_SQL: &str = "
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
  WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', batch_size = '1000');
SELECT order_id, order_amount FROM orders;
";

/// Latency figures of the API load benchmark.
fn percentile(sorted: &[std::time::Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// `eddy bench api`: `clients` threads for `seconds` against a running
/// server, each looping: submit a job, poll `GET /api/v1/jobs/{id}` while it
/// runs (timed), read 100 rows of its tail, delete it. Prints one JSON line:
/// requests, errors, jobs, and the GET latency percentiles in ms.
pub fn api(server: &str, token: Option<String>, clients: usize, seconds: u64) -> Result<String> {
    use crate::client::Client;
    use std::io::BufRead;
    let deadline = Instant::now() + std::time::Duration::from_secs(seconds);
    let results: Vec<(Vec<std::time::Duration>, u64, u64, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                let token = token.clone();
                scope.spawn(move || {
                    let client = Client::new(server, token.clone());
                    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
                    let (mut latencies, mut requests, mut errors, mut jobs) = (Vec::new(), 0u64, 0u64, 0u64);
                    while Instant::now() < deadline {
                        let body = serde_json::json!({ "name": "load", "sql": API_LOAD_SQL, "params": { "ROWS": "3000000" } });
                        requests += 1;
                        let Ok(job) = client.post("/api/v1/jobs", &body) else {
                            errors += 1;
                            continue;
                        };
                        jobs += 1;
                        let id = job["id"].as_str().unwrap_or_default().to_string();
                        let mut tail = agent.get(format!("{server}/api/v1/jobs/{id}/sinks/query1/tail"));
                        if let Some(token) = &token {
                            tail = tail.header("Authorization", format!("Bearer {token}"));
                        }
                        requests += 1;
                        match tail.call() {
                            Ok(response) if response.status().is_success() => {
                                let reader = std::io::BufReader::new(response.into_body().into_reader());
                                let _ = reader.lines().map_while(|l| l.ok()).filter(|l| l.starts_with("data: ")).take(100).count();
                            }
                            _ => errors += 1,
                        }
                        for _ in 0..20 {
                            let started = Instant::now();
                            requests += 1;
                            match client.get(&format!("/api/v1/jobs/{id}")) {
                                Ok(job) => {
                                    latencies.push(started.elapsed());
                                    if job["state"] != "running" {
                                        break;
                                    }
                                }
                                Err(_) => errors += 1,
                            }
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                        requests += 1;
                        if client.delete(&format!("/api/v1/jobs/{id}")).is_err() {
                            errors += 1;
                        }
                    }
                    (latencies, requests, errors, jobs)
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    });
    let mut latencies: Vec<std::time::Duration> =
        results.iter().flat_map(|r| r.0.iter().copied()).collect();
    latencies.sort();
    let requests: u64 = results.iter().map(|r| r.1).sum();
    let errors: u64 = results.iter().map(|r| r.2).sum();
    let jobs: u64 = results.iter().map(|r| r.3).sum();
    Ok(format!(
        "{{\"clients\":{clients},\"seconds\":{seconds},\"requests\":{requests},\"errors\":{errors},\"jobs\":{jobs},\"get_job_samples\":{},\"get_job_p50_ms\":{:.2},\"get_job_p99_ms\":{:.2},\"get_job_max_ms\":{:.2}}}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0)
    ))
}

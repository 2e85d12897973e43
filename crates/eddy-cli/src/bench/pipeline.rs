//! `eddy bench pipeline`: DataFusion's batch form of the reference
//! pipeline's stages 10-30 over the pipeline's input files (eddy's side of
//! `bench/pipeline.sh` is `eddy run queries/` itself).
//!
//! In: the orders, payments and device events files, and where results
//! go (a directory: one NDJSON file per stage, `DIR/<stage>.ndjson`, as
//! eddy writes every tagged line; or nowhere). Out: one JSON line, its
//! output rows those of all three queries, `outputs` naming each.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::engines::{
    count_lines, datafusion_runtime, datafusion_session, register_stream, report, write_results,
    Results,
};
use crate::error::Result;

/// The reference pipeline's stages a batch engine can run, as DataFusion
/// batch queries over the same files: the enrichment join (stage 10), the
/// payment metrics per 10 s window of it (20, reading stage 10's rows as
/// eddy's stage 20 does: the join is computed once) and the device metrics
/// per 5 s window every second and site (30). The anomaly rules' running
/// statistics, the late-event report and the health checks over the
/// pipeline itself have no batch form. Each query writes the columns eddy's
/// stage writes, so the two outputs compare by value (bench/pipeline.sh).
/// Each query's rows are written or
/// drained, their count reported; a query's rows are a table named after
/// it for the queries after it.
pub const PIPELINE_BATCH_SQL: [(&str, &str); 3] = [
    (
        "enriched_payments",
        "SELECT 'enriched_payment' AS record_type, p.payment_id, p.order_id, p.paid_amount, p.method,
         p.payment_ts AS payment_ts_ms, o.order_id IS NULL AS unmatched, o.customer_id,
         o.order_amount, o.country,
         coalesce(abs(p.paid_amount - o.order_amount) > 0.01, false) AS amount_mismatch
  FROM payments p LEFT JOIN orders o
    ON p.order_id = o.order_id
   AND to_timestamp_millis(o.order_ts) BETWEEN to_timestamp_millis(p.payment_ts) - INTERVAL '10 seconds'
                                           AND to_timestamp_millis(p.payment_ts) + INTERVAL '10 seconds'",
    ),
    (
        "payment_metrics",
        "SELECT 'window_metrics' AS record_type, window_start_ms, window_start_ms + 10000 AS window_end_ms,
         joined_count, unmatched_payments, amount_mismatches, round(total_revenue, 2) AS total_revenue
  FROM (
    SELECT payment_ts_ms - payment_ts_ms % 10000 AS window_start_ms,
           count(*) FILTER (WHERE NOT unmatched) AS joined_count,
           count(*) FILTER (WHERE unmatched) AS unmatched_payments,
           count(*) FILTER (WHERE amount_mismatch) AS amount_mismatches,
           coalesce(sum(paid_amount) FILTER (WHERE NOT unmatched), 0.0) AS total_revenue
    FROM enriched_payments
    GROUP BY 1)",
    ),
    (
        "device_metrics",
        "SELECT 'device_metrics' AS record_type, site_id, window_start,
         window_start + INTERVAL '5 seconds' AS window_end,
         event_count, fault_count, reboot_count, firmware_failures,
         round(CAST(fault_count AS DOUBLE) / event_count, 4) AS fault_rate
  FROM (
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

/// Runs [`PIPELINE_BATCH_SQL`] on DataFusion over the three files.
pub fn pipeline_batch(
    orders: &Path,
    payments: &Path,
    devices: &Path,
    batch_size: Option<usize>,
    output: Option<&Path>,
) -> Result<String> {
    let written: Vec<Option<PathBuf>> = PIPELINE_BATCH_SQL
        .iter()
        .map(|(name, _)| output.map(|dir| dir.join(format!("{name}.ndjson"))))
        .collect();
    if let Some(dir) = output {
        std::fs::create_dir_all(dir).map_err(|source| crate::error::CliError::Io {
            path: dir.display().to_string(),
            source,
        })?;
    }
    let files = [orders, payments, devices];
    let mut rows = 0;
    for path in files {
        rows += count_lines(path)?;
    }
    let runtime = datafusion_runtime()?;
    let started = Instant::now();
    let outputs = runtime.block_on(async move {
        use eddy_connectors::generator::GeneratedStream;
        let ctx = datafusion_session(batch_size);
        let streams = [
            ("orders", GeneratedStream::Orders),
            ("payments", GeneratedStream::Payments),
            ("devices", GeneratedStream::Devices),
        ];
        for ((name, stream), path) in streams.into_iter().zip(files) {
            register_stream(&ctx, name, &path.display().to_string(), stream).await?;
        }
        let mut outputs = Vec::new();
        for ((name, sql), path) in PIPELINE_BATCH_SQL.into_iter().zip(&written) {
            let results = match path {
                Some(path) => Results::Ndjson(path),
                None => Results::Nowhere,
            };
            // Held in memory, so the queries after it read its rows
            // without computing them again.
            let rows = ctx.sql(sql).await?.cache().await?;
            ctx.register_table(name, rows.clone().into_view())?;
            outputs.push((name, write_results(rows, results).await?));
        }
        Ok::<_, datafusion::error::DataFusionError>(outputs)
    })?;
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
}

//! Running one benchmark query on one engine, timed, with its results
//! written where [`Results`] says, and the figures as one JSON line.
//!
//! Each engine's timer covers the same work: planning the query, reading
//! the input files, computing, and writing every result row (or handing
//! it to a sink that drops it). Counting the input rows happens before the
//! timer starts.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Instant;

use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::prelude::{DataFrame, JsonReadOptions, SessionContext};
use eddy_connectors::ConnectorConfig;
use eddy_engine::runtime::JobConfig;
use eddy_sql::SqlFile;
use futures::StreamExt;

use crate::error::{CliError, Result};

/// Where a benchmark's result rows go.
#[derive(Debug, Clone, Copy)]
pub enum Results<'a> {
    /// Nowhere: eddy's blackhole sink, DataFusion's result stream drained.
    Nowhere,
    /// One NDJSON file at this path, written by the engine's own JSON
    /// writer (eddy's `file` sink, DataFusion's `write_json`).
    Ndjson(&'a Path),
}

impl Results<'_> {
    /// The options of eddy's sink table for these results (the `${SINK}`
    /// of the benchmark queries).
    pub fn eddy_sink(&self) -> String {
        match self {
            Results::Nowhere => "connector = 'blackhole'".into(),
            Results::Ndjson(path) => format!(
                "connector = 'file', path = '{}'",
                path.display().to_string().replace('\'', "''")
            ),
        }
    }
}

/// Peak resident set size of this process in bytes (Linux), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The figures of one run as a JSON line.
pub(crate) fn report(engine: &str, rows: u64, output_rows: u64, started: Instant) -> String {
    let seconds = started.elapsed().as_secs_f64();
    format!(
        "{{\"engine\":\"{engine}\",\"input_rows\":{rows},\"output_rows\":{output_rows},\"seconds\":{seconds:.3},\"rows_per_second\":{:.0},\"peak_rss_bytes\":{}}}",
        rows as f64 / seconds.max(1e-9),
        peak_rss_bytes().unwrap_or(0)
    )
}

/// Runs eddy on benchmark SQL and reports source rows in, sink rows out.
pub(crate) fn run_eddy(
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
    let rows_of = |kind: &str| -> u64 {
        ended
            .nodes
            .iter()
            .filter(|n| n.kind == kind)
            .map(|n| n.metrics.rows_in)
            .sum()
    };
    let line = report("eddy", rows_of("source"), rows_of("sink"), started);
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

/// A multi-threaded runtime for DataFusion (one worker per core, its
/// default).
pub(crate) fn datafusion_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| CliError::Io {
            path: "tokio runtime".into(),
            source,
        })
}

/// A DataFusion session at `batch_size` rows per batch (its own default,
/// 8192, when `None`).
pub(crate) fn datafusion_session(batch_size: Option<usize>) -> SessionContext {
    let mut config = datafusion::prelude::SessionConfig::new();
    if let Some(batch_size) = batch_size {
        config = config.with_batch_size(batch_size);
    }
    SessionContext::new_with_config(config)
}

/// Runs a DataFusion batch query, timed: `query` registers the input
/// tables and plans the query on the session; its rows are then written
/// to `results`. `input_rows` (counted before) is the report's row count.
pub(crate) fn run_datafusion<F>(
    batch_size: Option<usize>,
    input_rows: u64,
    results: Results<'_>,
    query: impl FnOnce(SessionContext) -> F,
) -> Result<String>
where
    F: Future<Output = datafusion::error::Result<DataFrame>>,
{
    let runtime = datafusion_runtime()?;
    let started = Instant::now();
    let output_rows = runtime.block_on(async move {
        let frame = query(datafusion_session(batch_size)).await?;
        write_results(frame, results).await
    })?;
    Ok(report("datafusion", input_rows, output_rows, started))
}

/// Writes a query's rows to `results`; returns how many there were.
pub(crate) async fn write_results(
    frame: DataFrame,
    results: Results<'_>,
) -> datafusion::error::Result<u64> {
    match results {
        Results::Nowhere => {
            let mut rows = 0;
            let mut stream = frame.execute_stream().await?;
            while let Some(batch) = stream.next().await {
                rows += batch?.num_rows() as u64;
            }
            Ok(rows)
        }
        Results::Ndjson(path) => {
            let options = DataFrameWriteOptions::new().with_single_file_output(true);
            let written = frame
                .write_json(&path.display().to_string(), options, None)
                .await?;
            Ok(count_of(&written))
        }
    }
}

/// The single count a `write_json` or `SELECT count(*)` returns.
pub(crate) fn count_of(batches: &[datafusion::arrow::record_batch::RecordBatch]) -> u64 {
    use datafusion::arrow::array::{Array, Int64Array, UInt64Array};
    let Some(column) = batches.first().map(|b| b.column(0)) else {
        return 0;
    };
    if column.is_empty() {
        return 0;
    }
    if let Some(counts) = column.as_any().downcast_ref::<UInt64Array>() {
        return counts.value(0);
    }
    column
        .as_any()
        .downcast_ref::<Int64Array>()
        .map_or(0, |counts| counts.value(0) as u64)
}

/// Registers an NDJSON file of a generated stream as table `name`.
pub(crate) async fn register_stream(
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

/// Lines of a file: the batch baseline's input row count, counted before
/// its timer starts.
pub(crate) fn count_lines(path: &Path) -> Result<u64> {
    use std::io::Read;
    let io = |source| CliError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = file.read(&mut buffer).map_err(io)?;
        if n == 0 {
            return Ok(lines);
        }
        lines += buffer[..n].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

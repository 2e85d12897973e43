//! `eddy bench`: the measuring side of the benchmarks in `bench/`.
//!
//! Each invocation runs one engine on one benchmark query over input files
//! and prints one JSON line: rows in and out, seconds, rows per second and
//! the process's peak resident memory. `bench/*.sh` runs eddy and the
//! DataFusion batch baseline as separate processes (so each peak-memory
//! figure is its own), has both write the same result columns the same
//! way ([`Results`]), compares them by value ([`compare`]) and prints the
//! ratios.
//!
//! - [`queries`]: the queries in both engines' forms;
//! - [`engines`]: running one, timed;
//! - [`compare`]: two results compared by value;
//! - [`decode`]: the NDJSON source alone, on one thread;
//! - [`pipeline`]: DataFusion's form of the reference pipeline's stages;
//! - [`api`]: load on a running server.

pub mod api;
pub mod compare;
pub mod decode;
pub mod engines;
pub mod pipeline;
pub mod queries;
pub mod views;

use std::collections::BTreeMap;
use std::path::Path;

use eddy_connectors::generator::GeneratedStream;
use eddy_engine::runtime::JobConfig;

pub use api::api;
pub use compare::compare;
pub use decode::decode;
use engines::{count_lines, register_stream, run_datafusion, run_eddy};
pub use engines::{peak_rss_bytes, Results};
pub use pipeline::{pipeline_batch, PIPELINE_BATCH_SQL};
use queries::*;

use crate::error::{CliError, Result};

/// A benchmark query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// Count/sum per customer in 10 s tumbling windows.
    Tumble,
    /// Count/sum per customer in 5 s windows every second.
    Hop,
    /// Payments LEFT JOIN orders within 10 s.
    Join,
    /// Running statistics per customer (OVER ... ORDER BY event time).
    Over,
}

impl Query {
    /// The name `eddy bench` knows it by.
    pub fn name(self) -> &'static str {
        match self {
            Query::Tumble => "window",
            Query::Hop => "hop",
            Query::Join => "join",
            Query::Over => "over",
        }
    }

    /// The query named `name`, if any.
    pub fn named(name: &str) -> Option<Self> {
        [Query::Tumble, Query::Hop, Query::Join, Query::Over]
            .into_iter()
            .find(|q| q.name() == name)
    }
}

/// What a benchmark query reads.
#[derive(Debug, Clone, Copy)]
pub enum Inputs<'a> {
    /// Orders (window, hop, over).
    Orders(&'a Path),
    /// Orders and payments (join).
    OrdersAndPayments(&'a Path, &'a Path),
}

/// Runs `query` with `engine` over `inputs`, its results written to
/// `results`. Engines: `eddy`, `datafusion`, and for the hop
/// `datafusion-slices` (the hop as per-second slices added into windows).
pub fn run(
    query: Query,
    engine: &str,
    inputs: Inputs<'_>,
    batch_size: Option<usize>,
    results: Results<'_>,
    job: &JobConfig,
) -> Result<String> {
    let show = |p: &Path| p.display().to_string();
    let files: Vec<(&str, &Path, GeneratedStream)> = match inputs {
        Inputs::Orders(orders) => vec![("orders", orders, GeneratedStream::Orders)],
        Inputs::OrdersAndPayments(orders, payments) => vec![
            ("orders", orders, GeneratedStream::Orders),
            ("payments", payments, GeneratedStream::Payments),
        ],
    };
    let (sql, batch_sql) = match (query, engine) {
        (Query::Tumble, "eddy" | "datafusion") => (WINDOW_SQL, WINDOW_BATCH_SQL),
        (Query::Hop, "eddy" | "datafusion") => (HOP_SQL, HOP_BATCH_SQL),
        (Query::Hop, "datafusion-slices") => (HOP_SQL, HOP_SLICES_BATCH_SQL),
        (Query::Join, "eddy" | "datafusion") => (JOIN_SQL, JOIN_BATCH_SQL),
        (Query::Over, "eddy" | "datafusion") => (OVER_SQL, OVER_BATCH_SQL),
        (_, other) => {
            return Err(CliError::Usage(format!(
                "unknown engine '{other}' for {} (use eddy or datafusion{})",
                query.name(),
                if query == Query::Hop {
                    ", or datafusion-slices"
                } else {
                    ""
                }
            )))
        }
    };
    if engine == "eddy" {
        let mut params = BTreeMap::from([("SINK".to_string(), results.eddy_sink())]);
        for (table, path, _) in &files {
            let name = match (query, *table) {
                (Query::Join, table) => table.to_ascii_uppercase(),
                _ => "INPUT".to_string(),
            };
            params.insert(name, show(path));
        }
        return run_eddy(sql, params, batch_size, job);
    }
    let mut input_rows = 0;
    for (_, path, _) in &files {
        input_rows += count_lines(path)?;
    }
    run_datafusion(batch_size, input_rows, results, |ctx| async move {
        for (table, path, stream) in files {
            register_stream(&ctx, table, &show(path), stream).await?;
        }
        for udaf in eddy_sql::functions::running_stats::aggregate_functions() {
            ctx.register_udaf(udaf);
        }
        ctx.sql(batch_sql).await
    })
}

//! `eddy bench compare`: two engines' results of one benchmark query,
//! compared by value.
//!
//! In: two NDJSON files of a query's results (any key order, nulls written
//! or left out, timestamps as RFC 3339 text with or without a zone). Out:
//! one JSON line with both row counts and the rows found in one file and
//! not the other; an error when there are any. Rows are compared as a
//! multiset; sums of doubles, added up in another order by each engine,
//! may differ in their last bits (relative 1e-9).

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::prelude::{JsonReadOptions, SessionContext};

use super::engines::{count_of, datafusion_runtime};
use super::Query;
use crate::error::{CliError, Result};

/// The columns of a query's results.
fn result_schema(query: Query) -> Schema {
    match query {
        Query::Tumble | Query::Hop => Schema::new(vec![
            Field::new(
                "window_start",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
            Field::new("customer_id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
            Field::new("total", DataType::Float64, false),
        ]),
        Query::Join => Schema::new(vec![
            Field::new("payment_id", DataType::Utf8, false),
            Field::new("customer_id", DataType::Utf8, true),
            Field::new("mismatch", DataType::Boolean, true),
        ]),
        Query::Over => Schema::new(vec![
            Field::new("order_id", DataType::Utf8, false),
            Field::new("customer_id", DataType::Utf8, false),
            Field::new("order_ts", DataType::Int64, false),
            Field::new("n", DataType::Int64, false),
            Field::new("total", DataType::Float64, false),
            Field::new("threshold", DataType::Float64, true),
            Field::new("gap_ms", DataType::Int64, true),
        ]),
    }
}

/// Rows of `a` without an equal row in `b`, plus the other way round.
fn differing_sql(query: Query) -> &'static str {
    match query {
        // One row per window and customer in each: matched on the key.
        Query::Tumble | Query::Hop => {
            "SELECT count(*) FROM a FULL JOIN b
               ON a.window_start = b.window_start AND a.customer_id = b.customer_id
             WHERE a.customer_id IS NULL OR b.customer_id IS NULL OR a.n <> b.n
                OR abs(a.total - b.total) > 1e-9 * greatest(1.0, abs(a.total))"
        }
        // One row per order: matched on it (the generator's order ids are
        // unique), running values equal (sums to the last bits).
        Query::Over => {
            "SELECT count(*) FROM a FULL JOIN b ON a.order_id = b.order_id
             WHERE a.order_id IS NULL OR b.order_id IS NULL
                OR a.customer_id <> b.customer_id OR a.order_ts <> b.order_ts OR a.n <> b.n
                OR abs(a.total - b.total) > 1e-9 * greatest(1.0, abs(a.total))
                OR (a.threshold IS NULL) <> (b.threshold IS NULL)
                OR abs(a.threshold - b.threshold) > 1e-9 * greatest(1.0, abs(a.threshold))
                OR a.gap_ms IS DISTINCT FROM b.gap_ms"
        }
        // Whole rows with their multiplicity.
        Query::Join => {
            "WITH ga AS (SELECT payment_id, customer_id, mismatch, count(*) AS c FROM a GROUP BY 1, 2, 3),
                  gb AS (SELECT payment_id, customer_id, mismatch, count(*) AS c FROM b GROUP BY 1, 2, 3)
             SELECT coalesce(sum(coalesce(ga.c, 0) + coalesce(gb.c, 0)), 0) FROM ga FULL JOIN gb
               ON ga.payment_id = gb.payment_id
              AND (ga.customer_id IS NOT DISTINCT FROM gb.customer_id)
              AND (ga.mismatch IS NOT DISTINCT FROM gb.mismatch)
              AND ga.c = gb.c
             WHERE ga.payment_id IS NULL OR gb.payment_id IS NULL"
        }
    }
}

/// Compares the results of `query` in files `a` and `b`.
///
/// ```no_run
/// use eddy_cli::bench::{compare, Query};
/// let line = compare(Query::Hop, "eddy.ndjson".as_ref(), "datafusion.ndjson".as_ref())?;
/// # Ok::<(), eddy_cli::CliError>(())
/// ```
pub fn compare(query: Query, a: &Path, b: &Path) -> Result<String> {
    let schema = Arc::new(result_schema(query));
    let (rows_a, rows_b, differing) = datafusion_runtime()?.block_on(async {
        let ctx = SessionContext::new();
        for (name, path) in [("a", a), ("b", b)] {
            let options = JsonReadOptions::default()
                .schema(schema.as_ref())
                .file_extension("");
            ctx.register_json(name, &path.display().to_string(), options)
                .await?;
        }
        let count = |sql: &'static str| {
            let ctx = ctx.clone();
            async move { Ok::<_, CliError>(count_of(&ctx.sql(sql).await?.collect().await?)) }
        };
        Ok::<_, CliError>((
            count("SELECT count(*) FROM a").await?,
            count("SELECT count(*) FROM b").await?,
            count(differing_sql(query)).await?,
        ))
    })?;
    let line = format!(
        "{{\"query\":\"{}\",\"rows\":[{rows_a},{rows_b}],\"differing_rows\":{differing}}}",
        query.name()
    );
    if rows_a != rows_b || differing > 0 {
        return Err(CliError::Differs(format!(
            "the {} results differ: {} holds {rows_a} rows, {} {rows_b}; {differing} rows differ or are in one only",
            query.name(),
            a.display(),
            b.display()
        )));
    }
    Ok(line)
}

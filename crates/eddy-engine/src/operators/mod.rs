//! The built-in operators. Each file holds one operator: its immutable plan
//! (an [`crate::operator::OperatorPlan`]) and its per-run state (an
//! [`crate::operator::Operator`]).

pub mod calc;
pub mod changelog_normalize;
pub(crate) mod event_order;
pub mod event_time_sort;
pub mod interval_join;
pub mod join_state;
pub mod key_lookup_join;
pub mod key_split;
pub mod lookup_join;
pub mod match_recognize;
pub(crate) mod ordered_rows;
pub mod over;
pub mod probe_join;
pub mod processing_time;
pub mod session_aggregate;
pub mod spilled_rows;
pub(crate) mod spilled_windows;
pub mod temporal_join;
pub mod ttl;
pub mod union;
pub mod unnest;
pub mod updating_aggregate;
pub mod updating_join;
pub mod updating_over;
pub mod updating_rank;
pub mod window_aggregate;
pub mod window_rank;
pub mod windowed_group_by;

#[cfg(test)]
pub(crate) mod testing;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{EngineError, Result};

/// One aggregate call of a GROUP BY (windowed or not).
#[derive(Debug, Clone)]
pub struct AggregateCall {
    /// The DataFusion aggregate (function, arguments, DISTINCT, output field).
    pub expr: Arc<datafusion::physical_expr::aggregate::AggregateFunctionExpr>,
    /// The `FILTER (WHERE ...)` clause, if any.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
}

impl AggregateCall {
    /// The call as its shape names it (`crate::shape`): the function with
    /// its arguments, and its `FILTER`.
    pub fn shape(&self) -> String {
        match &self.filter {
            Some(filter) => format!("{} filter {filter}", self.expr.name()),
            None => self.expr.name().to_string(),
        }
    }
}

/// The fields of named key expressions over `schema` (nullable).
pub(crate) fn key_fields(
    keys: &[(Arc<dyn PhysicalExpr>, String)],
    schema: &Schema,
) -> Result<Vec<datafusion::arrow::datatypes::Field>> {
    keys.iter()
        .map(|(expr, name)| {
            Ok(datafusion::arrow::datatypes::Field::new(
                name,
                expr.data_type(schema)?,
                true,
            ))
        })
        .collect()
}

/// `columns` as a batch of `schema`, each cast to its field's type where
/// it differs (a scalar column built from `ScalarValue`s, a decoded row).
pub(crate) fn batch_of(
    schema: &datafusion::arrow::datatypes::SchemaRef,
    columns: Vec<ArrayRef>,
) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema.clone(),
        cast_to(schema, columns)?,
    )?)
}

/// [`batch_of`] with its row count given (a batch may have no column).
pub(crate) fn batch_of_rows(
    schema: &datafusion::arrow::datatypes::SchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cast_to(schema, columns)?,
        &datafusion::arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

/// Each of `columns` cast to the type of `schema`'s field in its place,
/// where it differs.
fn cast_to(
    schema: &datafusion::arrow::datatypes::SchemaRef,
    columns: Vec<ArrayRef>,
) -> Result<Vec<ArrayRef>> {
    columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c)
            } else {
                Ok(datafusion::arrow::compute::cast(&c, f.data_type())?)
            }
        })
        .collect()
}

/// Whether an aggregate's sliding accumulator takes back any rows, in any
/// order, keeping exactly the state of the rows left: sums, counts,
/// averages, variances (min and max retract oldest-first, for window
/// frames).
pub(crate) fn retracts_in_any_order(
    expr: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
) -> bool {
    matches!(
        expr.fun().name(),
        "sum"
            | "count"
            | "avg"
            | "mean"
            | "var"
            | "var_samp"
            | "var_pop"
            | "variance"
            | "stddev"
            | "stddev_samp"
            | "stddev_pop"
    )
}

/// A join's key pairs as `eddy explain` shows them: `l = r and ...`.
pub(crate) fn describe_key_pairs(
    left: &[Arc<dyn PhysicalExpr>],
    right: &[Arc<dyn PhysicalExpr>],
) -> String {
    left.iter()
        .zip(right)
        .map(|(l, r)| format!("{l} = {r}"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// A row converter for key expressions. With no keys every row gets the same
/// key (a constant column), so keyed state code needs no special case.
pub(crate) fn key_converter(
    keys: &[Arc<dyn PhysicalExpr>],
    schema: &Schema,
) -> Result<RowConverter> {
    let fields = if keys.is_empty() {
        vec![SortField::new(DataType::Boolean)]
    } else {
        keys.iter()
            .map(|k| Ok(SortField::new(k.data_type(schema)?)))
            .collect::<Result<Vec<_>>>()?
    };
    Ok(RowConverter::new(fields)?)
}

/// How a state table whose first column holds keys row-encoded by
/// [`key_converter`]`(keys, schema)` is keyed.
pub(crate) fn encoded_key(
    keys: &[Arc<dyn PhysicalExpr>],
    schema: &Schema,
) -> Result<crate::state::declared::TableKey> {
    let types = if keys.is_empty() {
        vec![DataType::Boolean]
    } else {
        keys.iter()
            .map(|k| Ok(k.data_type(schema)?))
            .collect::<Result<Vec<_>>>()?
    };
    Ok(crate::state::declared::TableKey::Encoded(types))
}

/// The key columns of a state table's column of row-encoded keys
/// (`converter`'s rows as `Binary`), to find each row's key group when a
/// job resumes at another parallelism ([`crate::rescale`]).
pub(crate) fn decoded_keys(converter: &RowConverter, encoded: &ArrayRef) -> Result<Vec<ArrayRef>> {
    let encoded = encoded
        .as_any()
        .downcast_ref::<datafusion::arrow::array::BinaryArray>()
        .ok_or_else(|| EngineError::State("a key column of a state table is not binary".into()))?;
    let parser = converter.parser();
    Ok(converter.convert_rows(encoded.iter().map(|k| parser.parse(k.unwrap_or_default())))?)
}

/// A row converter for whole rows of `schema` (every column, in order).
pub(crate) fn row_converter(schema: &Schema) -> Result<RowConverter> {
    Ok(RowConverter::new(
        schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect(),
    )?)
}

/// Evaluates key expressions on `batch` and converts them to rows; also
/// returns the evaluated key columns (empty when there are no keys).
pub(crate) fn key_rows(
    converter: &RowConverter,
    keys: &[Arc<dyn PhysicalExpr>],
    batch: &RecordBatch,
) -> Result<(Rows, Vec<ArrayRef>)> {
    let n = batch.num_rows();
    let columns = keys
        .iter()
        .map(|k| Ok(k.evaluate(batch)?.into_array(n)?))
        .collect::<Result<Vec<ArrayRef>>>()?;
    let rows = if columns.is_empty() {
        converter.convert_columns(&[Arc::new(BooleanArray::from(vec![true; n])) as ArrayRef])?
    } else {
        converter.convert_columns(&columns)?
    };
    Ok((rows, columns))
}

/// Each row's key under `keys`, encoded by `converter`; `None` for a row
/// with a NULL key column (it meets nothing in an equi-join).
pub(crate) fn nullable_key_rows(
    converter: &RowConverter,
    keys: &[Arc<dyn PhysicalExpr>],
    batch: &RecordBatch,
) -> Result<Vec<Option<Box<[u8]>>>> {
    let n = batch.num_rows();
    let columns = keys
        .iter()
        .map(|k| Ok(k.evaluate(batch)?.into_array(n)?))
        .collect::<Result<Vec<ArrayRef>>>()?;
    let rows = converter.convert_columns(&columns)?;
    Ok((0..n)
        .map(|r| (!columns.iter().any(|c| c.is_null(r))).then(|| rows.row(r).data().into()))
        .collect())
}

/// Evaluates a predicate on `batch` as a filter mask: NULL counts as false.
pub(crate) fn predicate_mask(
    predicate: &Arc<dyn PhysicalExpr>,
    batch: &RecordBatch,
    operator: &str,
) -> Result<BooleanArray> {
    let mask = predicate.evaluate(batch)?.into_array(batch.num_rows())?;
    let mask = mask
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| crate::error::EngineError::operator(operator, "condition is not boolean"))?;
    Ok(if mask.null_count() > 0 {
        datafusion::arrow::compute::prep_null_mask_filter(mask)
    } else {
        mask.clone()
    })
}

/// Late rows for an operator that orders rows by event time (OVER,
/// MATCH_RECOGNIZE, `ORDER BY` the event time, sessions, a temporal join's
/// probe side): a row whose time is behind its horizon (its mark less
/// `lateness_ms`) had its place in that order passed at its source's
/// watermark and is dropped; the rest go on as on-time rows. Returns the
/// rows kept and how many were dropped. Rows without a time are kept (the
/// operator treats them as it treats any such row).
pub(crate) fn late_rows_in_order(
    late: crate::message::LateBatch,
    time_column: usize,
    lateness_ms: i64,
) -> Result<(RecordBatch, u64)> {
    let times = crate::time::to_epoch_millis(late.rows().column(time_column))?;
    let keep: BooleanArray = (0..late.num_rows())
        .map(|row| Some(times.is_null(row) || times.value(row) >= late.horizon(row, lateness_ms)))
        .collect();
    let dropped = (keep.len() - keep.true_count()) as u64;
    if dropped == 0 {
        return Ok((late.into_rows(), 0));
    }
    Ok((late.filter(&keep)?.into_rows(), dropped))
}

//! What an aggregation over event-time windows by key computes, whatever
//! its windows are (fixed: tumble, hop, cumulate; or sessions): the part of
//! the plan `window_aggregate` and `session_aggregate` share.
//!
//! In: the input rows' schema, their event-time column and lateness, the
//! keys and the aggregates. Out: the parameters, explain text, input
//! distribution and state columns each of those plans starts from, and a
//! fired window's group-by columns (window struct, window start, keys) in
//! output order.

use std::fmt::Display;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StructArray};
use datafusion::arrow::datatypes::{Field, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{EngineError, Result};
use crate::operator::Distribution;
use crate::shape::Parameters;

/// Where a group-by output column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupColumn {
    /// The window struct `{start, end}`.
    Window,
    /// The window's start as a timestamp (for `GROUP BY <event time>`,
    /// planned as 1 ms windows: the start is the time).
    WindowStart,
    /// The `i`-th key expression.
    Key(usize),
}

/// A GROUP BY over event-time windows, by key.
#[derive(Debug, Clone)]
pub struct WindowedGroupBy {
    /// Schema of the input rows.
    pub input_schema: SchemaRef,
    /// Schema of the emitted rows: the group-by columns, then the
    /// aggregates.
    pub output_schema: SchemaRef,
    /// Index of the event-time column in the input.
    pub time_column: usize,
    /// Extra time rows may come late, and windows wait, after the
    /// watermark.
    pub allowed_lateness_ms: i64,
    /// Group-by output columns in order.
    pub group_columns: Vec<GroupColumn>,
    /// Key expressions with their output names: windows are per key.
    pub keys: Vec<(Arc<dyn PhysicalExpr>, String)>,
    /// The aggregates, in output order.
    pub aggregates: Vec<super::AggregateCall>,
}

impl WindowedGroupBy {
    /// The grouping keys, as expressions over the input rows.
    pub(crate) fn key_exprs(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.keys.iter().map(|(expr, _)| Arc::clone(expr)).collect()
    }

    /// The plan's parameters (`crate::shape`): `windows`, the windows' own,
    /// then the event time, the lateness, the group-by columns, the keys
    /// and the aggregates.
    pub(crate) fn parameters(&self, windows: Parameters) -> Parameters {
        windows
            .column("time", &self.input_schema, self.time_column)
            .value("allowed_lateness_ms", self.allowed_lateness_ms)
            .debug("group_columns", &self.group_columns)
            .exprs("keys", &self.key_exprs())
            .list(
                "aggregates",
                self.aggregates.iter().map(super::AggregateCall::shape),
            )
    }

    /// `eddy explain`'s line: `{windows} on {time} ({fires}): [aggregates]`.
    pub(crate) fn describe(&self, windows: impl Display, fires: impl Display) -> String {
        let aggregates: Vec<&str> = self.aggregates.iter().map(|a| a.expr.name()).collect();
        format!(
            "{windows} on {} ({fires}): [{}]",
            self.input_schema.field(self.time_column).name(),
            aggregates.join(", ")
        )
    }

    /// Rows of a key meet in one instance.
    pub(crate) fn distribution(&self) -> Distribution {
        Distribution::hash(self.key_exprs())
    }

    /// `leading` (a state table's own columns) followed by every
    /// aggregate's state columns, each named after its place.
    pub(crate) fn with_state_fields(&self, mut leading: Vec<Field>) -> Result<Vec<Field>> {
        for aggregate in &self.aggregates {
            for field in aggregate.expr.state_fields()? {
                let name = format!("{}_{}", leading.len(), field.name());
                leading.push(Field::new(name, field.data_type().clone(), true));
            }
        }
        Ok(leading)
    }

    /// A fired batch's group-by columns in output order, from its windows
    /// (a window struct column) and its key columns; `kind` names the
    /// operator in errors.
    pub(crate) fn group_by_columns(
        &self,
        windows: &ArrayRef,
        keys: &[ArrayRef],
        kind: &'static str,
    ) -> Result<Vec<ArrayRef>> {
        self.group_columns
            .iter()
            .map(|column| match column {
                GroupColumn::Window => Ok(Arc::clone(windows)),
                GroupColumn::WindowStart => windows
                    .as_any()
                    .downcast_ref::<StructArray>()
                    .map(|w| Arc::clone(w.column(0)))
                    .ok_or_else(|| EngineError::operator(kind, "window column is not a struct")),
                GroupColumn::Key(i) => keys
                    .get(*i)
                    .cloned()
                    .ok_or_else(|| EngineError::operator(kind, "missing key column")),
            })
            .collect()
    }
}

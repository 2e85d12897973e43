//! What a node's checkpointed state depends on, as data: the fingerprint a
//! checkpoint records for each node, and the identity a changed query's
//! state moves by ([`crate::identity`]).
//!
//! In: a node of a job graph, its inputs named by the caller. Out: its
//! shape, a canonical text built from what the node is, never from `eddy
//! explain`'s wording, so rewording an explain line changes no checkpoint:
//!
//! - an operator: its kind, its parameters ([`OperatorPlan::parameters`]),
//!   its declared state tables (name, column types, key:
//!   [`crate::state::declared`]) and its output columns;
//! - a source: its table, connector, event time (column, bound, allowed
//!   lateness), pushed filter and columns; a sink: its table, connector
//!   and columns (their options follow, as before);
//! - every input: where it comes from, its port, and the keys it is hashed
//!   by ([`crate::operator::Distribution`]).
//!
//! A shape starts with [`SHAPE_MARK`]. Checkpoints written before shapes
//! recorded explain's text instead; a resumed job compares those with the
//! same text of its own nodes ([`crate::graph::JobGraph::legacy_fingerprint`]),
//! so they still restore.
//!
//! ```
//! use eddy_engine::shape::Parameters;
//! let text = Parameters::new().value("gap_ms", 500).flag("left_outer", true).text();
//! assert_eq!(text, "gap_ms=500; left_outer=true");
//! ```
//!
//! [`OperatorPlan::parameters`]: crate::operator::OperatorPlan::parameters

use std::fmt::{Debug, Display};
use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::physical_expr::PhysicalExpr;

use crate::state::declared::{TableKey, TableSpec};

/// How every shape starts (a checkpoint's fingerprint without it was
/// written as explain's text).
pub const SHAPE_MARK: &str = "shape/1 ";

/// An operator's parameters: what, besides its tables and schemas, makes
/// its state mean what it does (a window's size, a join's keys and
/// bounds, an aggregate's functions), each by name, in a fixed order.
#[derive(Debug, Default, Clone)]
pub struct Parameters {
    entries: Vec<(&'static str, String)>,
}

impl Parameters {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// `name` is `value`.
    pub fn value(mut self, name: &'static str, value: impl Display) -> Self {
        self.entries.push((name, value.to_string()));
        self
    }

    /// `name` is `value`, a value of eddy's own types written as Rust
    /// writes its fields (enums of variants and numbers, never an
    /// expression).
    pub fn debug(mut self, name: &'static str, value: impl Debug) -> Self {
        self.entries.push((name, format!("{value:?}")));
        self
    }

    /// `name` is on or off.
    pub fn flag(self, name: &'static str, on: bool) -> Self {
        self.value(name, on)
    }

    /// `name` is the list of `values`.
    pub fn list<T: Display>(
        mut self,
        name: &'static str,
        values: impl IntoIterator<Item = T>,
    ) -> Self {
        let items: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
        self.entries.push((name, format!("[{}]", items.join(", "))));
        self
    }

    /// `name` is the expressions `exprs` (as DataFusion writes them).
    pub fn exprs(self, name: &'static str, exprs: &[Arc<dyn PhysicalExpr>]) -> Self {
        self.list(name, exprs.iter())
    }

    /// `name` is `expr`, or none.
    pub fn expr(self, name: &'static str, expr: Option<&Arc<dyn PhysicalExpr>>) -> Self {
        match expr {
            Some(expr) => self.value(name, expr),
            None => self.value(name, "-"),
        }
    }

    /// `name` is the sort keys `keys` (an expression, descending or not).
    pub fn sort_keys(self, name: &'static str, keys: &[(Arc<dyn PhysicalExpr>, bool)]) -> Self {
        self.list(
            name,
            keys.iter()
                .map(|(e, desc)| format!("{e}{}", if *desc { " DESC" } else { "" })),
        )
    }

    /// `name` is column `index` of `schema`, by name.
    pub fn column(self, name: &'static str, schema: &Schema, index: usize) -> Self {
        match schema.fields().get(index) {
            Some(field) => self.value(name, field.name()),
            None => self.value(name, format!("#{index}")),
        }
    }

    /// `name=value; ...`.
    pub fn text(&self) -> String {
        let parts: Vec<String> = self
            .entries
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        parts.join("; ")
    }
}

/// A declared table as its shape: name, column types, key.
pub(crate) fn table_shape(spec: &TableSpec) -> String {
    let types: Vec<String> = spec
        .schema()
        .fields()
        .iter()
        .map(|f| f.data_type().to_string())
        .collect();
    let key = match spec.key() {
        TableKey::Whole => "whole".to_string(),
        TableKey::Columns(range) => format!("columns {}..{}", range.start, range.end),
        TableKey::Encoded(types) => {
            let types: Vec<String> = types.iter().map(|t| t.to_string()).collect();
            format!("encoded({})", types.join(", "))
        }
        TableKey::Exprs(exprs) => {
            let exprs: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
            format!("exprs({})", exprs.join(", "))
        }
        TableKey::Dependent { on, by } => format!("on {on} {by:?}"),
    };
    format!("{}({}; key {key})", spec.name(), types.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::physical_expr::expressions::col;

    #[test]
    fn parameters_are_written_in_order_by_name() {
        let schema = Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("t", DataType::Int64, false),
        ]);
        let keys = vec![col("k", &schema).unwrap()];
        let text = Parameters::new()
            .exprs("keys", &keys)
            .column("time", &schema, 1)
            .column("missing", &schema, 7)
            .expr("residual", None)
            .debug("bound", Some(3))
            .list("functions", ["count", "sum"])
            .text();
        assert_eq!(
            text,
            "keys=[k@0]; time=t; missing=#7; residual=-; bound=Some(3); functions=[count, sum]"
        );
    }

    #[test]
    fn a_table_shape_has_its_types_and_key_not_its_column_names() {
        let schema = |name: &str| {
            Arc::new(Schema::new(vec![
                Field::new(name, DataType::Utf8, true),
                Field::new("n", DataType::Int64, false),
            ]))
        };
        let a = TableSpec::new("groups", schema("key")).keyed(TableKey::Columns(0..1));
        let b = TableSpec::new("groups", schema("other_name")).keyed(TableKey::Columns(0..1));
        assert_eq!(table_shape(&a), "groups(Utf8, Int64; key columns 0..1)");
        assert_eq!(table_shape(&a), table_shape(&b));
    }
}

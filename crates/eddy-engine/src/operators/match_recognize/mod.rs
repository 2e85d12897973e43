//! Row pattern recognition: `MATCH_RECOGNIZE (PARTITION BY k ORDER BY t
//! MEASURES ... ONE ROW PER MATCH AFTER MATCH SKIP ... PATTERN (...) WITHIN
//! ... DEFINE ...)`.
//!
//! In: batches with an event-time column, and watermarks. Out: one row per
//! match, the plan's `outputs` (the partition columns, then the measures).
//!
//! ```text
//!   on_batch:      rows wait in `pending` (rows behind the released
//!                  horizon are late: counted, dropped)
//!   on_watermark:  rows with t < W - allowed_lateness are released, sorted
//!                  by (t, ORDER BY's other keys, arrival), appended to their
//!                  partition; each partition is then matched from its first
//!                  undecided row
//! ```
//!
//! Matching follows the SQL standard: from a start row the pattern's
//! preferred match is searched ([`pattern::Program`]); none: the next row
//! starts; a match: one output row, and matching goes on where `AFTER MATCH
//! SKIP` says (default `PAST LAST ROW`). Rows are contiguous: a match is
//! consecutive rows of its partition. A start row waits while its preferred
//! path needs rows not yet released: a greedy quantifier at the end of the
//! pattern waits for the first row that does not continue it, so a match is
//! reported exactly as a batch run over the whole input would report it
//! (Flink refuses a greedy last quantifier instead). `WITHIN interval`
//! bounds a match to rows at most that much event time after its first
//! row (a match that lasts longer is no match, as Flink documents it), and decides a waiting start once the watermark has passed that
//! bound, so partial matches never outlive it.
//!
//! Conditions are evaluated in one of two ways: a condition that reads only
//! the row it tests (`A AS A.amount < 10`) is a column computed for all rows
//! at once when they are released; one that reads other rows of the match
//! (`B AS B.amount > 10 * A.amount`, `LAST(A.x, 1)`, `SUM(A.x)`) is evaluated
//! per tested row over its navigation values ([`navigation`]). Measures are
//! evaluated once per released batch of matches, column-wise.
//!
//! The output watermark is held at the earliest row still kept, so a match
//! decided later is never behind a watermark already forwarded; a measure
//! `MATCH_ROWTIME()` (the time of the match's last row) is the output's
//! event time.
//!
//! Checkpoints: table `pending` (rows waiting for the watermark), table
//! `rows` (per partition, in order, the kept rows' key, event time, whether
//! decided (kept as far back as `PREV` reaches) and argument columns), and
//! the released horizon and late count as meta.
//!
//! Files: here the plan; `pattern` patterns and the matcher; `navigation`
//! the values conditions and measures read; `operator` the operator;
//! `tests` the operator driven through the `Operator` trait.

pub mod navigation;
mod operator;
pub mod pattern;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use self::navigation::Navigation;
use self::pattern::{Pattern, Program};
use crate::error::Result;
use crate::operator::{Operator, OperatorPlan};

/// A pattern variable's `DEFINE` condition.
#[derive(Debug, Clone)]
pub enum Condition {
    /// No `DEFINE`: every row qualifies.
    Always,
    /// Reads only the tested row: the boolean argument column `args[i]`.
    Row(usize),
    /// Reads rows of the match: `expr` over one column per navigation
    /// (`schema`), evaluated per tested row.
    Navigating {
        /// The values the condition reads.
        navigations: Vec<Navigation>,
        /// One column per navigation.
        schema: SchemaRef,
        /// The condition over those columns.
        expr: Arc<dyn PhysicalExpr>,
    },
}

/// Where matching goes on after a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterMatch {
    /// At the row after the match (the default).
    PastLastRow,
    /// At the row after the match's first row.
    ToNextRow,
    /// At the first row mapped to the variable.
    ToFirst(usize),
    /// At the last row mapped to the variable.
    ToLast(usize),
}

/// Plan of a MATCH_RECOGNIZE node.
#[derive(Debug, Clone)]
pub struct MatchRecognizePlan {
    /// Input schema.
    pub input_schema: SchemaRef,
    /// `PARTITION BY` expressions over the input.
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// The event-time column (`ORDER BY`'s first key).
    pub time_column: usize,
    /// `ORDER BY`'s further keys (expression, descending), ties broken by
    /// arrival.
    pub order_by: Vec<(Arc<dyn PhysicalExpr>, bool)>,
    /// Allowed lateness of the input's event time.
    pub allowed_lateness_ms: i64,
    /// Pattern variable names, as numbered in `pattern`.
    pub variables: Vec<String>,
    /// `PATTERN`.
    pub pattern: Pattern,
    /// Per variable, its `DEFINE`.
    pub conditions: Vec<Condition>,
    /// Columns computed per input row that conditions and measures read
    /// (argument expressions over the input; row conditions).
    pub args: Vec<Arc<dyn PhysicalExpr>>,
    /// The values the outputs read from a match.
    pub measures: Vec<Navigation>,
    /// One column per measure navigation.
    pub measure_schema: SchemaRef,
    /// The output columns over `measure_schema`.
    pub outputs: Vec<Arc<dyn PhysicalExpr>>,
    /// Output schema.
    pub output_schema: SchemaRef,
    /// `AFTER MATCH SKIP`.
    pub after_match: AfterMatch,
    /// `WITHIN`: a match's rows are at most this much event time after its
    /// first row.
    pub within_ms: Option<i64>,
}

impl MatchRecognizePlan {
    /// The compiled pattern (refused as [`crate::error::EngineError::Pattern`] when it
    /// can match no rows or is too large).
    pub fn program(&self) -> Result<Program> {
        Ok(Program::compile(&self.pattern)?)
    }

    /// A navigation as `eddy explain` shows it: `LAST(A.amount@1, 1)`.
    fn describe_navigation(&self, nav: &Navigation) -> String {
        use self::navigation::{Aggregate, Reach};
        let var = nav
            .var
            .and_then(|v| self.variables.get(v))
            .map(|v| format!("{v}."))
            .unwrap_or_default();
        let arg = nav
            .arg
            .and_then(|a| self.args.get(a))
            .map(|a| format!("{var}{a}"))
            .unwrap_or_else(|| format!("{var}*"));
        match nav.reach {
            Reach::Last(0) => arg,
            Reach::Last(n) => format!("LAST({arg}, {n})"),
            Reach::First(n) => format!("FIRST({arg}, {n})"),
            Reach::Prev(n) => format!("PREV({arg}, {n})"),
            Reach::Classifier => "CLASSIFIER()".into(),
            Reach::Aggregate(a) => {
                let name = match a {
                    Aggregate::Count => "COUNT",
                    Aggregate::Sum => "SUM",
                    Aggregate::Avg => "AVG",
                    Aggregate::Min => "MIN",
                    Aggregate::Max => "MAX",
                };
                format!("{name}({arg})")
            }
        }
    }

    /// How many rows before a match's first row `PREV` reads: each
    /// partition keeps that many decided rows.
    pub fn prev_reach(&self) -> usize {
        let conditions = self.conditions.iter().flat_map(|c| match c {
            Condition::Navigating { navigations, .. } => navigations.as_slice(),
            _ => &[],
        });
        conditions
            .chain(&self.measures)
            .filter_map(|n| match n.reach {
                navigation::Reach::Prev(n) => Some(n),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Schema of the `rows` checkpoint table: key, time, whether the row
    /// is decided (kept for `PREV` only), then the args.
    fn rows_schema(&self) -> Result<SchemaRef> {
        let mut fields = vec![
            Field::new("key", DataType::Binary, false),
            Field::new("time", DataType::Int64, false),
            Field::new("decided", DataType::Boolean, false),
        ];
        for (i, arg) in self.args.iter().enumerate() {
            fields.push(Field::new(
                format!("arg{i}"),
                arg.data_type(&self.input_schema)?,
                true,
            ));
        }
        Ok(Arc::new(Schema::new(fields)))
    }
}

impl OperatorPlan for MatchRecognizePlan {
    fn kind(&self) -> &'static str {
        "match_recognize"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        let conditions: Vec<String> = self
            .conditions
            .iter()
            .map(|c| match c {
                Condition::Always => "always".to_string(),
                Condition::Row(i) => format!("row({i})"),
                Condition::Navigating {
                    navigations, expr, ..
                } => format!("{expr} over {navigations:?}"),
            })
            .collect();
        P::new()
            .exprs("partition_by", &self.partition_by)
            .column("time", &self.input_schema, self.time_column)
            .sort_keys("order_by", &self.order_by)
            .value("allowed_lateness_ms", self.allowed_lateness_ms)
            .list("variables", &self.variables)
            .value("pattern", self.pattern.display(&self.variables))
            .list("conditions", conditions)
            .exprs("args", &self.args)
            .debug("measures", &self.measures)
            .exprs("outputs", &self.outputs)
            .debug("after_match", self.after_match)
            .debug("within_ms", self.within_ms)
    }

    fn describe(&self) -> String {
        let within = self
            .within_ms
            .map(|w| format!(" within {w}ms"))
            .unwrap_or_default();
        let skip = match self.after_match {
            AfterMatch::PastLastRow => "past last row".to_string(),
            AfterMatch::ToNextRow => "to next row".to_string(),
            AfterMatch::ToFirst(v) => format!("to first {}", self.variables[v]),
            AfterMatch::ToLast(v) => format!("to last {}", self.variables[v]),
        };
        let defines: Vec<String> = self
            .conditions
            .iter()
            .zip(&self.variables)
            .filter_map(|(c, name)| match c {
                Condition::Always => None,
                Condition::Row(i) => Some(format!("{name} AS {}", self.args[*i])),
                Condition::Navigating {
                    expr, navigations, ..
                } => {
                    // `__nav0@0 > 10 * __nav1@1` with the navigations written out.
                    let mut text = expr.to_string();
                    for (i, nav) in navigations.iter().enumerate().rev() {
                        text = text.replace(
                            &format!("{}@{i}", navigation::column_name(i)),
                            &self.describe_navigation(nav),
                        );
                    }
                    Some(format!("{name} AS {text}"))
                }
            })
            .collect();
        format!(
            "pattern ({}){within} ordered by {} (released at watermark > t + {}ms), skip {skip}; define [{}]; outputs [{}]",
            self.pattern.display(&self.variables),
            self.input_schema.field(self.time_column).name(),
            self.allowed_lateness_ms,
            defines.join(", "),
            self.output_schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::hash(self.partition_by.clone())
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(operator::MatchRecognizeOperator::new(
            self.clone(),
        )?))
    }

    /// `pending` holds input rows not yet in event-time order (keyed by
    /// the partition columns), `rows` each partition's rows: the partition
    /// key row-encoded, the time, whether the row's match was decided, and
    /// the pattern's arguments over it.
    fn state_tables(&self) -> Result<Vec<crate::state::declared::TableSpec>> {
        use crate::state::declared::{TableKey, TableSpec};
        Ok(vec![
            TableSpec::new("pending", self.input_schema.clone())
                .keyed(TableKey::Exprs(self.partition_by.clone())),
            TableSpec::new("rows", self.rows_schema()?)
                .keyed(super::encoded_key(&self.partition_by, &self.input_schema)?),
        ])
    }

    fn rescale_state(
        &self,
        parts: Vec<crate::rescale::InstanceState>,
        keys: &crate::rescale::KeyRange,
    ) -> Result<crate::state::StateSnapshot> {
        operator::rescale_state(self, parts, keys)
    }
}

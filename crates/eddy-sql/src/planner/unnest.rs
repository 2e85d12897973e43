//! Plans a logical `Unnest` (`unnest(list)` in a SELECT; Flink's `CROSS
//! JOIN UNNEST`, rewritten into one by `dialect::unnest_joins`) into an
//! `unnest` node.
//!
//! Accepted: lists (one level; several are zipped), over an append-only
//! stream; the event time passes through (each element row keeps its row's
//! time). Refused with the reason: unnesting a struct into columns, more
//! than one level, an updating input.

use std::sync::Arc;

use datafusion::common::NullHandling;
use datafusion::logical_expr::Unnest;
use eddy_engine::operators::unnest::{UnnestNulls, UnnestPlan};

use super::stream::{add_operator, Stream, TimeAttr};
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;

impl Compiler {
    pub(super) fn plan_unnest(&mut self, unnest: &Unnest, cx: &StatementText) -> Result<Stream> {
        let at = cx.anchor(&["UNNEST"]);
        let refuse = |why: &str| SqlError::at(&at, format!("UNNEST: {why}"));
        if !unnest.struct_type_columns.is_empty() {
            return Err(refuse("unnesting a struct into columns is not supported; read its fields (s.field or s['field'])"));
        }
        if unnest.list_type_columns.iter().any(|(_, l)| l.depth != 1)
            || unnest.options.recursions.iter().any(|r| r.depth != 1)
        {
            return Err(refuse("one level of a list at a time is supported: unnest the inner lists in a second step"));
        }
        let mut input = self.plan_stream(&unnest.input, cx)?;
        input
            .append_only("UNNEST")
            .map_err(|m| SqlError::at(&at, m.to_string()))?;
        let mut lists: Vec<usize> = unnest.list_type_columns.iter().map(|(i, _)| *i).collect();
        lists.dedup();
        // Columns passed through keep what they carry: the event time, a
        // window's bounds.
        let passed = |column: usize| {
            unnest
                .dependency_indices
                .iter()
                .position(|&source| source == column && !lists.contains(&source))
        };
        let time = input
            .time
            .and_then(|t| passed(t.column).map(|column| TimeAttr { column, ..t }));
        let windows: Vec<_> = input
            .windows
            .iter()
            .filter_map(|w| {
                passed(w.column).map(|column| super::stream::WindowColumn { column, ..*w })
            })
            .collect();
        let plan = UnnestPlan {
            input_schema: Arc::new(input.schema.as_arrow().clone()),
            output_schema: Arc::new(unnest.schema.as_arrow().clone()),
            lists,
            sources: unnest.dependency_indices.clone(),
            nulls: match unnest.options.null_handling {
                NullHandling::Drop => UnnestNulls::Drop,
                NullHandling::Preserve => UnnestNulls::Preserve,
                NullHandling::PreserveAndExpandEmpty => UnnestNulls::PreserveAndExpandEmpty,
            },
        };
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        let mut stream = Stream::of_node(node, &self.graph, unnest.schema.clone(), time);
        stream.windows = windows;
        if time.is_none() {
            stream.time_lost = input.time_lost.clone();
        }
        Ok(stream)
    }
}

//! A source's event time and the options that go with it: the watermark
//! clause's column and bound, `allowed_lateness`, `max_future_skew`,
//! `late_rows`, and the source's `idle_timeout` and `bad_rows`.
//!
//! In: the table's options (these taken out), its watermark clause and
//! output schema. Out: [`SourcePolicies`], the [`EventTimeSpec`].

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use eddy_engine::source::{BadRowPolicy, EventTimeSpec, LatePolicy};

use crate::dialect::identifiers::IdentifierCase;
use crate::dialect::statements::WatermarkClause;
use crate::error::{Position, Result, SqlError};

/// What a source does with lateness, idleness, bad and late rows.
pub(super) struct SourcePolicies {
    pub allowed_lateness_ms: i64,
    pub idle_timeout: Option<std::time::Duration>,
    pub bad_rows: BadRowPolicy,
    pub late_rows: Option<LatePolicy>,
    pub max_future_skew_ms: Option<i64>,
}

impl SourcePolicies {
    /// Takes the options out of `options`, each checked.
    pub(super) fn take(
        options: &mut BTreeMap<String, String>,
        position: &Position,
    ) -> Result<Self> {
        let allowed_lateness_ms = match options.remove("allowed_lateness") {
            Some(text) => eddy_engine::time::parse_duration(&text)
                .map_err(|e| SqlError::at(position, format!("allowed_lateness: {e}")))?
                .as_millis() as i64,
            None => 0,
        };
        let idle_timeout = match options.remove("idle_timeout") {
            Some(text) => Some(
                eddy_engine::time::parse_duration(&text)
                    .map_err(|e| SqlError::at(position, format!("idle_timeout: {e}")))?,
            )
            .filter(|d| !d.is_zero()),
            None => None,
        };
        let bad_rows = match options.remove("bad_rows") {
            Some(text) => text
                .parse::<BadRowPolicy>()
                .map_err(|e| SqlError::at(position, format!("bad_rows: {e}")))?,
            None => BadRowPolicy::default(),
        };
        let late_rows = match options.remove("late_rows") {
            Some(text) => Some(
                text.parse::<LatePolicy>()
                    .map_err(|e| SqlError::at(position, format!("late_rows: {e}")))?,
            ),
            None => None,
        };
        let max_future_skew_ms = match options.remove("max_future_skew") {
            Some(text) => Some(
                eddy_engine::time::parse_duration(&text)
                    .map_err(|e| SqlError::at(position, format!("max_future_skew: {e}")))?
                    .as_millis() as i64,
            ),
            None => None,
        };
        Ok(Self {
            allowed_lateness_ms,
            idle_timeout,
            bad_rows,
            late_rows,
            max_future_skew_ms,
        })
    }
}

/// The table's event time: the watermark clause's column (a TIMESTAMP or
/// BIGINT of `output`) with its bound and the policies; none without a
/// clause, where the policies that need one are refused.
pub(super) fn event_time(
    watermark: Option<&WatermarkClause>,
    policies: &SourcePolicies,
    output_schema: &SchemaRef,
    case: IdentifierCase,
    name: &str,
    position: &Position,
) -> Result<Option<EventTimeSpec>> {
    let normalize = |ident: &datafusion::sql::sqlparser::ast::Ident| case.name(ident);
    let SourcePolicies {
        allowed_lateness_ms,
        late_rows,
        max_future_skew_ms,
        ..
    } = *policies;
    Ok(match watermark {
        None => {
            if allowed_lateness_ms > 0 {
                return Err(SqlError::at(
                    position,
                    "allowed_lateness needs a WATERMARK FOR clause",
                ));
            }
            if max_future_skew_ms.is_some() {
                return Err(SqlError::at(
                    position,
                    "max_future_skew needs a WATERMARK FOR clause (it guards the watermark)",
                ));
            }
            if late_rows == Some(LatePolicy::Divert) {
                return Err(SqlError::at(
                    position,
                    "late_rows = 'divert' needs a WATERMARK FOR clause (rows are late against the watermark)",
                ));
            }
            None
        }
        Some(w) => {
            let column_name = normalize(&w.column);
            if normalize(&w.bound_column) != column_name {
                return Err(SqlError::at(
                    &w.position,
                    format!(
                        "the watermark of '{column_name}' is taken from '{}': a watermark must be `WATERMARK FOR col AS col` or `WATERMARK FOR col AS col - INTERVAL '2' SECOND`",
                        normalize(&w.bound_column)
                    ),
                ));
            }
            let column = output_schema.index_of(&column_name).map_err(|_| {
                SqlError::at(
                    &w.position,
                    format!("watermark column '{column_name}' is not a column of '{name}'"),
                )
            })?;
            match output_schema.field(column).data_type() {
                DataType::Timestamp(_, _) | DataType::Int64 => {}
                other => {
                    return Err(SqlError::at(
                        &w.position,
                        format!("watermark column '{column_name}' must be a TIMESTAMP (or BIGINT epoch ms), not {other}"),
                    ))
                }
            }
            Some(EventTimeSpec {
                column,
                bound_ms: w.bound_ms,
                allowed_lateness_ms,
                max_future_skew_ms,
                late_rows: late_rows.unwrap_or_default(),
            })
        }
    })
}

//! The `datagen` connector's reader: batches of the rows a
//! [`DatagenPlan`] makes, paced on the wall clock.
//!
//! In: the plan, the table's physical schema, and a checkpointed position
//! (`{"row": N}`) to resume from. Out: batches of rows `N..`, each column
//! from its [`super::FieldGen`]; `None` after the last row of a bounded
//! table.

use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::DatagenPlan;
use crate::error::{ConnectorError, Result};

/// Where a datagen table resumes: the next row's number.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct DatagenPosition {
    row: u64,
}

/// See the module docs.
pub struct DatagenSource {
    plan: DatagenPlan,
    schema: SchemaRef,
    /// The next row's number.
    row: u64,
    /// Rows made since the pace started, and when it started (the first
    /// batch): row `k` of them is not handed on before `k / rows_per_second`.
    paced: Option<(u64, Instant)>,
}

impl DatagenSource {
    /// A reader of `plan`'s rows as `schema`'s columns, from row 0 or from
    /// `resume`.
    pub fn new(
        plan: DatagenPlan,
        schema: SchemaRef,
        resume: Option<&serde_json::Value>,
    ) -> Result<Self> {
        let row = match resume {
            None => 0,
            Some(value) => {
                serde_json::from_value::<DatagenPosition>(value.clone())
                    .map_err(|e| ConnectorError::position(value, e))?
                    .row
            }
        };
        Ok(Self {
            plan,
            schema,
            row,
            paced: None,
        })
    }

    /// Rows in the next batch: the batch size, or at a slow pace about a
    /// twentieth of a second's rows, so rows come out evenly.
    fn batch_rows(&self) -> u64 {
        let paced = (self.plan.rows_per_second / 20).max(1);
        let mut rows = (self.plan.batch_size.max(1) as u64).min(paced);
        if let Some(total) = self.plan.rows {
            rows = rows.min(total.saturating_sub(self.row));
        }
        rows
    }

    /// Waits until `rows` more rows are due at the table's pace.
    fn pace(&mut self, rows: u64) {
        let (made, started) = self.paced.get_or_insert((0, Instant::now()));
        *made += rows;
        let due = Duration::from_secs_f64(*made as f64 / self.plan.rows_per_second as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

impl SourceReader for DatagenSource {
    /// A table of so many rows (a sequence, `number-of-rows`) is read in
    /// step with the job's other bounded inputs by event time; one without
    /// an end is a live feed.
    fn bounded(&self) -> bool {
        self.plan.rows.is_some()
    }

    fn next_batch(&mut self, ctx: &mut SourceContext) -> EngineResult<Option<RecordBatch>> {
        let rows = self.batch_rows();
        if rows == 0 {
            return Ok(None);
        }
        let range = self.row..self.row + rows;
        let table = ctx.table().to_string();
        let columns = self
            .plan
            .fields
            .iter()
            .map(|f| f.column(range.clone()))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.for_table(&table))?;
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| ConnectorError::from(e).for_table(&table))?;
        self.pace(rows);
        self.row = range.end;
        Ok(Some(batch))
    }

    fn position(&self) -> serde_json::Value {
        serde_json::to_value(DatagenPosition { row: self.row }).unwrap_or_default()
    }
}

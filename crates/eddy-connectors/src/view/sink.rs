//! The view sink: keeps a query's current result, replaying its changelog
//! into a multiset of rows, and hands the result to the [`ViewCatalog`] at
//! each checkpoint.
//!
//! In: append-only or updating batches (`+I`/`+U` add a row, `-U`/`-D` take
//! one out). Out: at each barrier the whole result staged in the catalog
//! for that epoch, and in the checkpoint the rows changed since the last
//! one (a [`KeyedRows`] table keyed by the row's own bytes, valued by its
//! count), so a resumed job's view starts from its checkpointed result.
//!
//! ```text
//!  write*: rows ─ RowConverter ─> count[row] ± 1
//!  precommit(n): stage(n, rows × count) ; checkpoint ← changed (row, count)
//!  resume(state): count ← checkpoint ; publish(epoch of state)
//! ```

use std::sync::Arc;

use datafusion::arrow::array::UInt32Array;
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use eddy_engine::changelog;
use eddy_engine::error::EngineError;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::SinkWriter;
use eddy_engine::state::keyed_rows::KeyedRows;
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result;
use serde::{Deserialize, Serialize};

use super::catalog::ViewCatalog;

/// Rows per batch of a published result.
const PUBLISHED_BATCH_ROWS: usize = 8192;

/// The checkpoint table of held rows.
const ROWS_TABLE: &str = "view_rows";

/// What a view sink's checkpoint says besides its rows.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ViewMeta {
    /// The view's name.
    pub view: String,
    /// The epoch the rows are the result of.
    pub epoch: u64,
    /// Retractions of rows the view did not hold (counted, not applied).
    #[serde(default)]
    pub unmatched_retractions: u64,
}

/// See the module docs.
pub struct ViewSink {
    name: String,
    catalog: ViewCatalog,
    owner: u64,
    schema: SchemaRef,
    converter: RowConverter,
    /// Each distinct row's bytes, valued by its count (8 bytes, little
    /// endian).
    counts: KeyedRows,
    /// The epoch last staged or restored.
    epoch: u64,
    unmatched_retractions: u64,
}

impl std::fmt::Debug for ViewSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewSink")
            .field("name", &self.name)
            .field("rows", &self.counts.len())
            .field("epoch", &self.epoch)
            .finish()
    }
}

fn count_of(bytes: &[u8]) -> i64 {
    bytes.try_into().map(i64::from_le_bytes).unwrap_or_default()
}

impl ViewSink {
    /// A sink writing view `name` of these columns (a row-kind column, if
    /// any, is not one of them), resumed from `resume` when given.
    pub fn open(
        name: &str,
        schema: &Schema,
        catalog: ViewCatalog,
        resume: Option<&StateSnapshot>,
    ) -> Result<Self> {
        let mut sink = Self::unopened(name, schema, catalog)?;
        let mut restored = None;
        if let Some(state) = resume.filter(|s| !s.is_empty()) {
            restored = Some(sink.restore(state)?);
        }
        sink.owner = sink
            .catalog
            .declare(&sink.name, sink.schema.clone(), restored);
        Ok(sink)
    }

    /// A sink that has not declared its view.
    fn unopened(name: &str, schema: &Schema, catalog: ViewCatalog) -> Result<Self> {
        let fields: Vec<_> = schema
            .fields()
            .iter()
            .filter(|f| !changelog::is_row_kind_field(f))
            .cloned()
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let converter = RowConverter::new(
            schema
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        Ok(Self {
            name: name.to_string(),
            catalog,
            owner: 0,
            schema,
            converter,
            counts: KeyedRows::default(),
            epoch: 0,
            unmatched_retractions: 0,
        })
    }

    /// Holds the rows of a checkpoint (whole, as a resume reads it back);
    /// its epoch and result.
    fn restore(&mut self, state: &StateSnapshot) -> Result<(u64, Vec<RecordBatch>)> {
        let meta: ViewMeta = state.meta()?;
        let mut state = state.clone();
        let rows = state.take_table(ROWS_TABLE)?;
        self.counts.restore(&rows, &format!("view {}", self.name))?;
        self.epoch = meta.epoch;
        self.unmatched_retractions = meta.unmatched_retractions;
        Ok((self.epoch, self.result()?))
    }

    /// The result in `state`, a whole checkpoint of a view sink, published
    /// as view `name` when nothing holds it (a job that ended is resumed
    /// without running: its last checkpoint is all there is of its view).
    pub fn restore_ended(
        name: &str,
        schema: &Schema,
        catalog: &ViewCatalog,
        state: &StateSnapshot,
    ) -> Result<bool> {
        if catalog.contains(name) || state.keyed.iter().any(|k| k.change.is_some()) {
            return Ok(false);
        }
        let mut reader = Self::unopened(name, schema, catalog.clone())?;
        let (epoch, batches) = reader.restore(state)?;
        Ok(catalog.restore(name, reader.schema.clone(), epoch, batches))
    }

    /// The view's columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The result held: each distinct row as many times as it counts.
    fn result(&self) -> Result<Vec<RecordBatch>> {
        let parser = self.converter.parser();
        let mut distinct = self.converter.empty_rows(self.counts.len(), 0);
        let mut repeats: Vec<u32> = Vec::with_capacity(self.counts.len());
        for (i, (row, count)) in self.counts.iter().enumerate() {
            distinct.push(parser.parse(row));
            let times = count_of(count).max(0) as usize;
            repeats.extend(std::iter::repeat_n(i as u32, times));
        }
        let columns = self.converter.convert_rows(&distinct)?;
        let distinct = RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &datafusion::arrow::record_batch::RecordBatchOptions::new()
                .with_row_count(Some(self.counts.len())),
        )?;
        let all_once = repeats.len() == distinct.num_rows();
        repeats
            .chunks(PUBLISHED_BATCH_ROWS)
            .map(|chunk| {
                if all_once && chunk.len() == distinct.num_rows() {
                    return Ok(distinct.clone());
                }
                let indices = UInt32Array::from(chunk.to_vec());
                Ok(take_record_batch(&distinct, &indices)?)
            })
            .collect()
    }

    fn apply(&mut self, batch: &RecordBatch) -> Result<()> {
        let kinds = changelog::row_kinds(batch).cloned();
        if let Some(kinds) = &kinds {
            changelog::check_kinds(kinds)?;
        }
        let data = changelog::data_columns(batch)?;
        if data.num_columns() != self.schema.fields().len() {
            return Err(EngineError::State(format!(
                "view {}: a batch of {} columns reached a view of {}",
                self.name,
                data.num_columns(),
                self.schema.fields().len()
            )));
        }
        let rows = self.converter.convert_columns(data.columns())?;
        for (i, row) in rows.iter().enumerate() {
            let retract = kinds
                .as_ref()
                .is_some_and(|k| changelog::is_retraction_byte(k.value(i)));
            let key = row.as_ref();
            let held = self.counts.get(key).map(count_of).unwrap_or(0);
            let count = if retract { held - 1 } else { held + 1 };
            if count > 0 {
                self.counts.upsert(key, &count.to_le_bytes());
            } else {
                if count < 0 {
                    self.unmatched_retractions += 1;
                }
                self.counts.remove(key);
            }
        }
        Ok(())
    }
}

impl SinkWriter for ViewSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.apply(batch)
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        _completed: CheckpointId,
    ) -> Result<StateSnapshot> {
        // The last checkpoint of a bounded job has the largest id there is;
        // its view's epoch is the one after the last.
        self.epoch = if checkpoint == CheckpointId::MAX {
            self.epoch + 1
        } else {
            checkpoint.max(self.epoch + 1)
        };
        let batches = self.result()?;
        self.catalog
            .stage(&self.name, self.owner, self.epoch, batches);
        let mut snapshot = StateSnapshot::with_meta(&ViewMeta {
            view: self.name.clone(),
            epoch: self.epoch,
            unmatched_retractions: self.unmatched_retractions,
        })?;
        let (table, keyed) = self.counts.snapshot_incremental(ROWS_TABLE)?;
        snapshot.push_table(ROWS_TABLE, table);
        snapshot.keyed.push(keyed);
        Ok(snapshot)
    }

    fn finish(&mut self) -> Result<()> {
        // Without checkpoints the result is readable once the input ends.
        self.epoch += 1;
        let batches = self.result()?;
        self.catalog
            .publish(&self.name, self.owner, self.epoch, batches);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, Int8Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field};

    fn updating_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
            changelog::row_kind_field(&[]),
        ]))
    }

    fn changes(rows: &[(&str, i64, i8)]) -> RecordBatch {
        RecordBatch::try_new(
            updating_schema(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(Int8Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .expect("a batch")
    }

    fn sorted_rows(catalog: &ViewCatalog) -> Vec<(String, i64)> {
        let snapshot = catalog.snapshot("v").expect("declared");
        let mut rows = Vec::new();
        for batch in &snapshot.batches {
            let keys = batch
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("strings");
            let values = batch
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("integers");
            for i in 0..batch.num_rows() {
                rows.push((keys.value(i).to_string(), values.value(i)));
            }
        }
        rows.sort();
        rows
    }

    #[test]
    fn a_changelog_replays_into_its_result_at_each_completed_checkpoint() {
        let catalog = ViewCatalog::default();
        let mut sink =
            ViewSink::open("v", &updating_schema(), catalog.clone(), None).expect("opens");
        assert_eq!(sink.schema().fields().len(), 2, "no row-kind column");
        sink.write(&changes(&[("a", 1, 0), ("b", 1, 0), ("b", 1, 0)]))
            .expect("writes");
        let first = sink.precommit(1, 0).expect("precommits");
        assert!(sorted_rows(&catalog).is_empty(), "not complete yet");
        catalog.commit("v", 1);
        assert_eq!(
            sorted_rows(&catalog),
            vec![("a".into(), 1), ("b".into(), 1), ("b".into(), 1)]
        );
        sink.write(&changes(&[("a", 1, 1), ("a", 2, 2), ("b", 1, 3)]))
            .expect("writes");
        let second = sink.precommit(2, 1).expect("precommits");
        catalog.commit("v", 2);
        assert_eq!(
            sorted_rows(&catalog),
            vec![("a".into(), 2), ("b".into(), 1)]
        );
        assert_eq!(second.keyed.len(), 1, "rows checkpointed by key");

        // A resume from the first checkpoint shows its result at once.
        let resumed = ViewCatalog::default();
        let sink = ViewSink::open("v", &updating_schema(), resumed.clone(), Some(&first))
            .expect("resumes");
        assert_eq!(resumed.snapshot("v").expect("declared").epoch, 1);
        assert_eq!(sorted_rows(&resumed).len(), 3);
        drop(sink);
    }

    #[test]
    fn a_retraction_of_a_row_never_held_is_counted_not_applied() {
        let catalog = ViewCatalog::default();
        let mut sink =
            ViewSink::open("v", &updating_schema(), catalog.clone(), None).expect("opens");
        sink.write(&changes(&[("a", 1, 3), ("b", 2, 0)]))
            .expect("writes");
        let state = sink.precommit(1, 0).expect("precommits");
        let meta: ViewMeta = state.meta().expect("meta");
        assert_eq!(meta.unmatched_retractions, 1);
        catalog.commit("v", 1);
        assert_eq!(sorted_rows(&catalog), vec![("b".into(), 2)]);
    }

    #[test]
    fn without_checkpoints_the_result_is_published_at_the_end() {
        let catalog = ViewCatalog::default();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
        ]));
        let mut sink = ViewSink::open("v", &schema, catalog.clone(), None).expect("opens");
        let rows = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["x", "y"])),
                Arc::new(Int64Array::from(vec![1, 2])),
            ],
        )
        .expect("a batch");
        sink.write(&rows).expect("writes");
        sink.finish().expect("finishes");
        assert_eq!(
            sorted_rows(&catalog),
            vec![("x".into(), 1), ("y".into(), 2)]
        );
    }
}

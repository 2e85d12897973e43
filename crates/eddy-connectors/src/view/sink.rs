//! The view sink: keeps a query's current result, replaying its changelog
//! into the view's rows, and hands the result to the [`ViewCatalog`] at
//! each checkpoint.
//!
//! In: append-only or updating batches (`+I`/`+U` add a row, `-U`/`-D` take
//! one out). Out: at each barrier the result staged in the catalog for that
//! epoch (a persistent map, shared, not copied: [`ViewRows`]), and in the
//! checkpoint the keys changed since the last one (a [`KeyedRows`] table:
//! key bytes, then each key's count and row), so a resumed job's view
//! starts from its checkpointed result.
//!
//! A view is keyed by its table's primary key (the server gives a view
//! its query's upsert key): one row per key, found without a scan. A view
//! without one holds a multiset of whole rows.
//!
//! ```text
//!  write*: rows ─ RowCodec ─> (key, row) ─> ViewRows ± row ; KeyedRows[key] = (count, row)
//!  precommit(n): stage(n, ViewRows clone) ; checkpoint ← changed keys
//!  resume(state): ViewRows ← checkpoint ; readers see it at once
//! ```

use std::sync::Arc;

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::changelog;
use eddy_engine::error::EngineError;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::SinkWriter;
use eddy_engine::state::keyed_rows::KeyedRows;
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result;
use serde::{Deserialize, Serialize};

use super::catalog::{ViewCatalog, ViewSnapshot};
use super::rows::{Held, RowCodec, ViewRows};

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
    codec: Arc<RowCodec>,
    rows: ViewRows,
    /// The same rows for checkpoints: key bytes to count (8 bytes, little
    /// endian) and row.
    checkpointed: KeyedRows,
    /// The epoch last staged or restored.
    epoch: u64,
    unmatched_retractions: u64,
}

impl std::fmt::Debug for ViewSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewSink")
            .field("name", &self.name)
            .field("rows", &self.rows.len())
            .field("epoch", &self.epoch)
            .finish()
    }
}

fn checkpoint_value(held: &Held) -> Vec<u8> {
    let mut value = Vec::with_capacity(8 + held.row.len());
    value.extend_from_slice(&held.count.to_le_bytes());
    value.extend_from_slice(&held.row);
    value
}

fn held_of(value: &[u8]) -> Option<Held> {
    let (count, row) = value.split_at_checked(8)?;
    Some(Held {
        count: u64::from_le_bytes(count.try_into().ok()?),
        row: Arc::from(row),
    })
}

impl ViewSink {
    /// A sink writing view `name` of these columns (a row-kind column, if
    /// any, is not one of them), keyed by `key` columns (none: by the whole
    /// row), resumed from `resume` when given.
    pub fn open(
        name: &str,
        schema: &Schema,
        key: &[String],
        catalog: ViewCatalog,
        resume: Option<&StateSnapshot>,
    ) -> Result<Self> {
        let mut sink = Self::unopened(name, schema, key, catalog)?;
        let mut restored = None;
        if let Some(state) = resume.filter(|s| !s.is_empty()) {
            restored = Some(sink.restore(state)?);
        }
        let empty = ViewSnapshot::of_rows(0, ViewRows::default(), sink.codec.clone());
        sink.owner = sink.catalog.declare(&sink.name, empty, restored);
        Ok(sink)
    }

    /// A sink that has not declared its view.
    fn unopened(name: &str, schema: &Schema, key: &[String], catalog: ViewCatalog) -> Result<Self> {
        let fields: Vec<_> = schema
            .fields()
            .iter()
            .filter(|f| !changelog::is_row_kind_field(f))
            .cloned()
            .collect();
        let schema = Arc::new(Schema::new(fields));
        // A key naming a column the view lacks keys nothing: whole rows.
        let key: Vec<usize> = key
            .iter()
            .map(|k| schema.index_of(k).ok())
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        Ok(Self {
            name: name.to_string(),
            catalog,
            owner: 0,
            codec: Arc::new(RowCodec::new(schema, key)?),
            rows: ViewRows::default(),
            checkpointed: KeyedRows::default(),
            epoch: 0,
            unmatched_retractions: 0,
        })
    }

    /// Holds the rows of a checkpoint (whole, as a resume reads it back);
    /// the snapshot readers see of it.
    fn restore(&mut self, state: &StateSnapshot) -> Result<ViewSnapshot> {
        let meta: ViewMeta = state.meta()?;
        let mut state = state.clone();
        let table = state.take_table(ROWS_TABLE)?;
        self.checkpointed
            .restore(&table, &format!("view {}", self.name))?;
        let mut rows = ViewRows::default();
        for (key, value) in self.checkpointed.iter() {
            let held = held_of(value).ok_or_else(|| {
                EngineError::State(format!(
                    "view {}: a checkpointed row is cut short",
                    self.name
                ))
            })?;
            rows.put(Arc::from(key), held);
        }
        self.rows = rows;
        self.epoch = meta.epoch;
        self.unmatched_retractions = meta.unmatched_retractions;
        Ok(self.snapshot())
    }

    fn snapshot(&self) -> ViewSnapshot {
        ViewSnapshot::of_rows(self.epoch, self.rows.clone(), self.codec.clone())
    }

    /// The result in `state`, a whole checkpoint of a view sink, published
    /// as view `name` when nothing holds it (a job that ended is resumed
    /// without running: its last checkpoint is all there is of its view).
    pub fn restore_ended(
        name: &str,
        schema: &Schema,
        key: &[String],
        catalog: &ViewCatalog,
        state: &StateSnapshot,
    ) -> Result<bool> {
        if catalog.contains(name) || state.keyed.iter().any(|k| k.change.is_some()) {
            return Ok(false);
        }
        let mut reader = Self::unopened(name, schema, key, catalog.clone())?;
        let snapshot = reader.restore(state)?;
        Ok(catalog.restore(name, snapshot))
    }

    /// The view's columns.
    pub fn schema(&self) -> &SchemaRef {
        self.codec.schema()
    }

    fn apply(&mut self, batch: &RecordBatch) -> Result<()> {
        let kinds = changelog::row_kinds(batch).cloned();
        if let Some(kinds) = &kinds {
            changelog::check_kinds(kinds)?;
        }
        let data = changelog::data_columns(batch)?;
        if data.num_columns() != self.schema().fields().len() {
            return Err(EngineError::State(format!(
                "view {}: a batch of {} columns reached a view of {}",
                self.name,
                data.num_columns(),
                self.schema().fields().len()
            )));
        }
        for (i, (key, row)) in self.codec.encode(data.columns())?.into_iter().enumerate() {
            let retract = kinds
                .as_ref()
                .is_some_and(|k| changelog::is_retraction_byte(k.value(i)));
            if retract {
                if !self.rows.take(&key, &row) {
                    self.unmatched_retractions += 1;
                    continue;
                }
            } else {
                self.rows.add(key.clone(), row);
            }
            match self.rows.get(&key) {
                Some(held) => {
                    self.checkpointed.upsert(&key, &checkpoint_value(held));
                }
                None => {
                    self.checkpointed.remove(&key);
                }
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
        self.catalog.stage(&self.name, self.owner, self.snapshot());
        let mut snapshot = StateSnapshot::with_meta(&ViewMeta {
            view: self.name.clone(),
            epoch: self.epoch,
            unmatched_retractions: self.unmatched_retractions,
        })?;
        let (table, keyed) = self.checkpointed.snapshot_incremental(ROWS_TABLE)?;
        snapshot.push_table(ROWS_TABLE, table);
        snapshot.keyed.push(keyed);
        Ok(snapshot)
    }

    fn finish(&mut self) -> Result<()> {
        // Without checkpoints the result is readable once the input ends.
        self.epoch += 1;
        self.catalog
            .publish(&self.name, self.owner, self.snapshot());
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
        for batch in &snapshot.batches().expect("batches") {
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
            ViewSink::open("v", &updating_schema(), &[], catalog.clone(), None).expect("opens");
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
        let sink = ViewSink::open("v", &updating_schema(), &[], resumed.clone(), Some(&first))
            .expect("resumes");
        assert_eq!(resumed.snapshot("v").expect("declared").epoch, 1);
        assert_eq!(sorted_rows(&resumed).len(), 3);
        drop(sink);
    }

    #[test]
    fn a_keyed_view_finds_a_key_s_row_and_upserts_it() {
        use datafusion::arrow::array::ArrayRef;
        let catalog = ViewCatalog::default();
        let mut sink = ViewSink::open(
            "v",
            &updating_schema(),
            &["k".to_string()],
            catalog.clone(),
            None,
        )
        .expect("opens");
        sink.write(&changes(&[
            ("a", 1, 0),
            ("b", 5, 0),
            ("a", 1, 1),
            ("a", 2, 2),
        ]))
        .expect("writes");
        let state = sink.precommit(1, 0).expect("precommits");
        catalog.commit("v", 1);
        let snapshot = catalog.snapshot("v").expect("declared");
        assert_eq!(snapshot.key_columns(), Some(&[0][..]));
        let key: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["a"]))];
        let found = snapshot.lookup(&key).expect("looks up").expect("keyed");
        assert_eq!(found.num_rows(), 1);
        let n = found
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("integers");
        assert_eq!(n.value(0), 2);
        let missing: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["z"]))];
        assert_eq!(
            snapshot
                .lookup(&missing)
                .expect("looks up")
                .expect("keyed")
                .num_rows(),
            0
        );

        // Read back from its checkpoint, the view is the same.
        let resumed = ViewCatalog::default();
        ViewSink::open(
            "v",
            &updating_schema(),
            &["k".to_string()],
            resumed.clone(),
            Some(&state),
        )
        .expect("resumes");
        assert_eq!(
            sorted_rows(&resumed),
            vec![("a".into(), 2), ("b".into(), 5)]
        );
    }

    #[test]
    fn a_retraction_of_a_row_never_held_is_counted_not_applied() {
        let catalog = ViewCatalog::default();
        let mut sink =
            ViewSink::open("v", &updating_schema(), &[], catalog.clone(), None).expect("opens");
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
        let mut sink = ViewSink::open("v", &schema, &[], catalog.clone(), None).expect("opens");
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

//! Checkpointed state of one node, in the form the checkpoint store writes.
//!
//! In: what an operator, source or sink hands over at a checkpoint barrier.
//! Out: the same, handed back to a freshly created node when a job resumes.
//!
//! A [`StateSnapshot`] has two parts: `meta`, small values (watermarks,
//! counters, positions) as JSON, and `tables`, the bulk of the state as
//! named Arrow record batches (window accumulators, join buffers, pending
//! rows), which the store writes as Arrow IPC files. A table may be several
//! batches under one name ([`StateSnapshot::push_batches`]): a pending
//! buffer is checkpointed as it is held, shared rather than copied. Operators build their
//! tables with Arrow kernels; nothing here is on a per-row path.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::Int64Array;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::state::StateSnapshot;
//!
//! #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
//! struct Meta { watermark: i64 }
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
//! let rows = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap();
//! let mut snapshot = StateSnapshot::with_meta(&Meta { watermark: 7 }).unwrap();
//! snapshot.push_table("pending", rows);
//!
//! let mut restored = snapshot.clone();
//! assert_eq!(restored.meta::<Meta>().unwrap(), Meta { watermark: 7 });
//! assert_eq!(restored.take_table("pending").unwrap().num_rows(), 2);
//! ```

pub mod changed_keys;
pub mod declared;
pub mod keyed_rows;
pub mod owned_batch;
pub mod table_file;

use datafusion::arrow::array::{new_empty_array, ArrayRef};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{EngineError, Result};

/// A named table of a snapshot.
#[derive(Debug, Clone)]
pub struct StateTable {
    /// Name, unique within the snapshot (a file-name-safe word).
    pub name: String,
    /// The rows.
    pub batch: RecordBatch,
}

/// The state of one node at a checkpoint.
#[derive(Debug, Clone, Default)]
pub struct StateSnapshot {
    /// Small values (JSON); `Null` when there are none.
    pub meta: serde_json::Value,
    /// Bulk state as Arrow batches.
    pub tables: Vec<StateTable>,
    /// Tables of rows by key whose later snapshots may hand over only what
    /// changed ([`KeyedTable`]); empty in any snapshot but one taken by
    /// [`crate::operator::Operator::snapshot_incremental`].
    pub keyed: Vec<KeyedTable>,
    /// Tables already written to files ([`table_file`]): state too large
    /// to hold in memory twice. A name is in `tables` or here, not both.
    pub files: Vec<table_file::TableFile>,
}

/// A table of a snapshot that holds one row per key (its first
/// `key_columns` columns), numbered so that the next snapshot can hand
/// over only the keys that changed since it.
///
/// The checkpoint store writes a full table as a file and each change as a
/// file of its own, and reads a table back as its full table with every
/// later change applied in order ([`crate::checkpoint::changes`]): a
/// checkpoint then writes what changed since the last one, not every key.
/// Changes are written against the node's previous snapshot in the same
/// run, so the first snapshot after a start or a restore is always full.
#[derive(Debug, Clone)]
pub struct KeyedTable {
    /// The table's name in [`StateSnapshot::tables`].
    pub table: String,
    /// Its key columns: the first this many.
    pub key_columns: usize,
    /// This snapshot's number among the node's snapshots in this run.
    pub serial: u64,
    /// `None`: the table holds every key. `Some`: it holds only the rows
    /// of keys that changed since snapshot `base`, and these keys went.
    pub change: Option<KeyedChange>,
}

/// What a [`KeyedTable`] that holds only changes says besides its rows.
#[derive(Debug, Clone)]
pub struct KeyedChange {
    /// The snapshot (its [`KeyedTable::serial`]) the change is to.
    pub base: u64,
    /// The keys (key columns only) that are no longer in the table; a key
    /// both removed and among the changed rows is in the table.
    pub removed: RecordBatch,
}

/// When an operator that snapshots incrementally writes its keyed table
/// whole: every this many snapshots, so that reading a checkpoint back
/// applies at most this many changes (and a damaged file costs at most
/// the checkpoints back to the previous full table).
pub const FULL_SNAPSHOT_EVERY: u32 = 8;

impl StateSnapshot {
    /// A snapshot carrying `meta` and no tables.
    pub fn with_meta<T: Serialize>(meta: &T) -> Result<Self> {
        let meta = serde_json::to_value(meta)
            .map_err(|e| EngineError::State(format!("cannot encode state: {e}")))?;
        Ok(Self {
            meta,
            tables: Vec::new(),
            keyed: Vec::new(),
            files: Vec::new(),
        })
    }

    /// Whether the snapshot holds nothing (a stateless node).
    pub fn is_empty(&self) -> bool {
        self.meta.is_null() && self.tables.is_empty() && self.files.is_empty()
    }

    /// Decodes `meta`.
    pub fn meta<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.meta.clone())
            .map_err(|e| EngineError::State(format!("cannot decode state: {e}")))
    }

    /// Adds a table.
    pub fn push_table(&mut self, name: impl Into<String>, batch: RecordBatch) {
        self.tables.push(StateTable {
            name: name.into(),
            batch,
        });
    }

    /// Adds a table held as several batches of `schema` (an operator's
    /// pending buffer as it is): the batches are shared, not copied, so a
    /// snapshot costs nothing per row; the store writes them into one file
    /// and [`StateSnapshot::take_table`] gives them back as one batch.
    pub fn push_batches(
        &mut self,
        name: impl Into<String>,
        schema: &datafusion::arrow::datatypes::SchemaRef,
        batches: impl IntoIterator<Item = RecordBatch>,
    ) {
        let name = name.into();
        let mut pushed = false;
        for batch in batches {
            pushed = true;
            self.push_table(name.clone(), batch);
        }
        if !pushed {
            self.push_table(name, RecordBatch::new_empty(schema.clone()));
        }
    }

    /// Reads the tables held as files ([`Self::files`]) into `tables`,
    /// for what works on the rows in memory.
    pub fn read_files(&mut self) -> Result<()> {
        for file in std::mem::take(&mut self.files) {
            let batch = file.read()?;
            self.push_table(file.name, batch);
        }
        Ok(())
    }

    /// Removes and returns the table `name` (its batches as one); an error
    /// if there is none.
    pub fn take_table(&mut self, name: &str) -> Result<RecordBatch> {
        if let Some(at) = self.files.iter().position(|f| f.name == name) {
            return self.files.remove(at).read();
        }
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.tables.len() {
            if self.tables[i].name == name {
                parts.push(self.tables.remove(i).batch);
            } else {
                i += 1;
            }
        }
        match parts.len() {
            0 => Err(EngineError::State(format!(
                "checkpoint has no table '{name}'"
            ))),
            1 => Ok(parts.remove(0)),
            _ => Ok(datafusion::arrow::compute::concat_batches(
                &parts[0].schema(),
                &parts,
            )?),
        }
    }

    /// Like [`StateSnapshot::take_table`], but `None` when the snapshot
    /// has no table `name` (one a checkpoint written before the table was
    /// added lacks).
    pub fn take_table_if_present(&mut self, name: &str) -> Result<Option<RecordBatch>> {
        if self.tables.iter().any(|t| t.name == name) || self.files.iter().any(|f| f.name == name) {
            self.take_table(name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Bytes of Arrow memory the tables hold.
    pub fn table_bytes(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.batch.get_array_memory_size())
            .sum()
    }
}

/// Builds a column from scalars of type `data_type` (an empty column when
/// there are none). For checkpoint code paths, not for hot paths.
pub fn scalars_to_array(values: Vec<ScalarValue>, data_type: &DataType) -> Result<ArrayRef> {
    if values.is_empty() {
        return Ok(new_empty_array(data_type));
    }
    let array = ScalarValue::iter_to_array(values)?;
    if array.data_type() == data_type {
        Ok(array)
    } else {
        Ok(datafusion::arrow::compute::cast(&array, data_type)?)
    }
}

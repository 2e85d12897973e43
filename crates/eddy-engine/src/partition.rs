//! Which of N parallel instances (or exchange partitions) a row belongs to:
//! one hash of the row's key, the same in every thread and every process.
//!
//! In: the key columns of a batch and the instance count. Out: each row's
//! instance, or (as [`KeyPartitionExpr`], a filter over batches) whether
//! each row belongs to one instance.
//!
//! The hash is FNV-1a over the key's Arrow row encoding, not a seeded hash,
//! so the processes of a group agree on it and a restart routes as before.
//! Without key columns every row belongs to instance 0.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{ArrayRef, StringArray};
//! use eddy_engine::partition::partition_rows;
//!
//! let keys: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["a", "b", "a"]))];
//! let parts = partition_rows(&keys, 3, 4).unwrap();
//! assert_eq!(parts[0], parts[2]); // one key, one instance
//! assert!(parts.iter().all(|&p| p < 4));
//! ```

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The instance (`0..partitions`) of each of `rows` rows with key columns
/// `keys`.
pub fn partition_rows(keys: &[ArrayRef], rows: usize, partitions: u32) -> Result<Vec<u32>> {
    if keys.is_empty() || partitions <= 1 {
        return Ok(vec![0; rows]);
    }
    let fields = keys
        .iter()
        .map(|k| SortField::new(k.data_type().clone()))
        .collect();
    let converter = RowConverter::new(fields)?;
    let encoded = converter.convert_columns(keys)?;
    Ok(encoded
        .iter()
        .map(|row| (fnv1a(row.as_ref()) % u64::from(partitions)) as u32)
        .collect())
}

/// A filter: true for the rows whose key belongs to instance `index` of
/// `partitions`. What feeds each instance of a parallel keyed operator.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct KeyPartitionExpr {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    partitions: u32,
    index: u32,
}

impl KeyPartitionExpr {
    /// The rows of instance `index` of `partitions` by `keys`.
    pub fn new(keys: Vec<Arc<dyn PhysicalExpr>>, partitions: u32, index: u32) -> Self {
        Self {
            keys,
            partitions,
            index,
        }
    }
}

impl fmt::Display for KeyPartitionExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(
            f,
            "hash({}) % {} = {}",
            keys.join(", "),
            self.partitions,
            self.index
        )
    }
}

impl PhysicalExpr for KeyPartitionExpr {
    fn data_type(&self, _input_schema: &Schema) -> datafusion::error::Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, _input_schema: &Schema) -> datafusion::error::Result<bool> {
        Ok(false)
    }

    fn evaluate(&self, batch: &RecordBatch) -> datafusion::error::Result<ColumnarValue> {
        let rows = batch.num_rows();
        let keys = self
            .keys
            .iter()
            .map(|k| k.evaluate(batch)?.into_array(rows))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let parts = partition_rows(&keys, rows, self.partitions)
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let selected: BooleanArray = parts.iter().map(|&p| Some(p == self.index)).collect();
        Ok(ColumnarValue::Array(Arc::new(selected)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.keys.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> datafusion::error::Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(Self::new(children, self.partitions, self.index)))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

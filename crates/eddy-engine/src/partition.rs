//! Which of N parallel instances (or exchange partitions) a row belongs to:
//! one hash of the row's key, the same in every thread and every process.
//!
//! In: the key columns of a batch and the instance count. Out: each row's
//! instance (what [`crate::operators::key_split`] routes by, and Kafka
//! exchanges partition by).
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

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::row::{RowConverter, SortField};

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

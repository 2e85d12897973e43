//! Keyed tables written as changes: a checkpoint writes the keys that
//! changed since the previous one, not every key.
//!
//! In: a keyed table ([`crate::state::KeyedTable`]) as the store read it
//! back: its last full rows, then the changes written after it, oldest
//! first, each the rows of the keys that changed and the keys that went.
//! Out: the table as of the newest change, one row per key, the rows of
//! the full table first (in their order), then those of each change.
//!
//! Keys are compared in Arrow's row format, so any key type works and
//! NULL keys are keys like any other. This runs when a checkpoint is read
//! back (a restore, a rescale, a savepoint check), never on a job's path.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::checkpoint::changes::{apply, Change};
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Utf8, true),
//!     Field::new("n", DataType::Int64, false),
//! ]));
//! let rows = |k: Vec<&str>, n: Vec<i64>| {
//!     RecordBatch::try_new(
//!         schema.clone(),
//!         vec![Arc::new(StringArray::from(k)), Arc::new(Int64Array::from(n))],
//!     )
//!     .unwrap()
//! };
//! let gone = RecordBatch::try_new(
//!     Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)])),
//!     vec![Arc::new(StringArray::from(vec!["b"]))],
//! )
//! .unwrap();
//! let table = apply(
//!     rows(vec!["a", "b", "c"], vec![1, 2, 3]),
//!     vec![
//!         Change { changed: rows(vec!["a"], vec![10]), removed: Some(gone) },
//!         Change { changed: rows(vec!["d", "a"], vec![4, 11]), removed: None },
//!     ],
//!     1,
//! )
//! .unwrap();
//! // c kept, b removed, a's newest row, d added.
//! assert_eq!(table, rows(vec!["c", "d", "a"], vec![3, 4, 11]));
//! ```

use std::collections::HashSet;

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::compute::{concat_batches, filter_record_batch};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, Rows, SortField};

use super::damage::ChangesMismatch;

/// One change of a keyed table.
#[derive(Debug, Clone)]
pub struct Change {
    /// The rows of the keys that changed (the table's schema).
    pub changed: RecordBatch,
    /// The keys that went (key columns only); `None` when none did.
    pub removed: Option<RecordBatch>,
}

/// The table `base` with `changes` applied in order; its first
/// `key_columns` columns are the key. The error says what does not fit.
pub fn apply(
    base: RecordBatch,
    changes: Vec<Change>,
    key_columns: usize,
) -> std::result::Result<RecordBatch, ChangesMismatch> {
    if changes.is_empty() {
        return Ok(base);
    }
    let schema = base.schema();
    if key_columns == 0 || key_columns > schema.fields().len() {
        return Err(ChangesMismatch::KeyWidth {
            columns: schema.fields().len(),
            key_columns,
        });
    }
    let key_types: Vec<_> = schema.fields()[..key_columns]
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    let converter = RowConverter::new(key_types.iter().cloned().map(SortField::new).collect())?;
    let keys_of = |batch: &RecordBatch, what: &str| -> std::result::Result<Rows, ChangesMismatch> {
        let columns = &batch.columns()[..key_columns.min(batch.num_columns())];
        let types: Vec<_> = columns.iter().map(|c| c.data_type().clone()).collect();
        if types != key_types {
            return Err(ChangesMismatch::KeyTypes {
                what: what.to_string(),
                found: types,
                table: key_types.clone(),
            });
        }
        Ok(converter.convert_columns(columns)?)
    };
    for (i, change) in changes.iter().enumerate() {
        if change.changed.schema().fields() != schema.fields() {
            return Err(ChangesMismatch::Columns { change: i + 1 });
        }
    }
    let base_keys = keys_of(&base, "the table")?;
    let changed_keys = changes
        .iter()
        .enumerate()
        .map(|(i, c)| keys_of(&c.changed, &format!("change {}", i + 1)))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let removed_keys = changes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.removed
                .as_ref()
                .map(|r| keys_of(r, &format!("the keys removed by change {}", i + 1)))
                .transpose()
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;

    // Newest first: a key is settled by the newest change that names it.
    let mut settled: HashSet<&[u8]> = HashSet::new();
    let mut kept_changes = Vec::with_capacity(changes.len());
    for i in (0..changes.len()).rev() {
        let keep = unsettled(&changed_keys[i], &settled);
        kept_changes.push(filter_record_batch(&changes[i].changed, &keep)?);
        settled.extend(changed_keys[i].iter().map(|row| row.data()));
        if let Some(removed) = &removed_keys[i] {
            settled.extend(removed.iter().map(|row| row.data()));
        }
    }
    let keep = unsettled(&base_keys, &settled);
    let mut parts = vec![filter_record_batch(&base, &keep)?];
    parts.extend(kept_changes.into_iter().rev());
    Ok(concat_batches(&schema, &parts)?)
}

/// Per row, whether its key is not yet settled.
fn unsettled(keys: &Rows, settled: &HashSet<&[u8]>) -> BooleanArray {
    keys.iter()
        .map(|row| Some(!settled.contains(row.data())))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("g", DataType::Int64, true),
            Field::new("n", DataType::Int64, false),
        ]))
    }

    fn rows(keys: &[(Option<&str>, i64)], n: &[i64]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(
                    keys.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    keys.iter().map(|(_, g)| *g).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(n.to_vec())),
            ],
        )
        .unwrap()
    }

    fn keys(keys: &[(Option<&str>, i64)]) -> RecordBatch {
        rows(keys, &vec![0; keys.len()]).project(&[0, 1]).unwrap()
    }

    #[test]
    fn a_key_of_several_columns_with_nulls_is_settled_by_its_newest_change() {
        let base = rows(&[(Some("a"), 1), (None, 1), (Some("a"), 2)], &[1, 2, 3]);
        let table = apply(
            base,
            vec![
                Change {
                    changed: rows(&[(None, 1)], &[20]),
                    removed: Some(keys(&[(Some("a"), 2)])),
                },
                // Removed and back in the same change: the row stands.
                Change {
                    changed: rows(&[(Some("a"), 2), (None, 1)], &[30, 21]),
                    removed: Some(keys(&[(Some("a"), 2), (Some("zz"), 9)])),
                },
                Change {
                    changed: rows(&[], &[]),
                    removed: Some(keys(&[(Some("a"), 1)])),
                },
            ],
            2,
        )
        .unwrap();
        assert_eq!(table, rows(&[(Some("a"), 2), (None, 1)], &[30, 21]));
    }

    #[test]
    fn a_change_of_other_columns_is_refused() {
        let base = rows(&[(Some("a"), 1)], &[1]);
        let other = base.project(&[0, 2]).unwrap();
        let err = apply(
            base,
            vec![Change {
                changed: other,
                removed: None,
            }],
            1,
        )
        .unwrap_err();
        assert!(
            matches!(err, ChangesMismatch::Columns { change: 1 }),
            "{err}"
        );
        assert!(err.to_string().contains("other columns"), "{err}");
    }
}

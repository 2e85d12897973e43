//! A view's rows as a persistent map, so that each checkpoint's result is
//! published without a copy and read by key without a scan.
//!
//! In: rows to add and take out, as Arrow row-format bytes. Out: a
//! [`ViewRows`] value: cloning it is O(1) and shares its structure (a
//! HAMT, `imbl`), so the sink keeps changing its own copy while readers
//! hold the one of a completed checkpoint.
//!
//! Keyed by the view's key columns (its query's upsert key: one row per
//! key) when it has them, else by the whole row (a multiset: each
//! distinct row with its count).
//!
//! ```
//! use std::sync::Arc;
//! use eddy_connectors::view::rows::ViewRows;
//!
//! let mut rows = ViewRows::default();
//! let row: Arc<[u8]> = Arc::from(&b"row-a"[..]);
//! rows.add(row.clone(), row.clone());
//! let published = rows.clone();
//! rows.add(row.clone(), row.clone());
//! assert_eq!((published.len(), rows.len()), (1, 2)); // the published copy is unchanged
//! assert!(rows.take(&row[..], &row[..]));
//! assert!(!rows.take(&b"never"[..], &b"never"[..]));
//! ```

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::{RowConverter, SortField};

/// One key's row and how many times the view holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The whole row (Arrow row format).
    pub row: Arc<[u8]>,
    /// How many times (a multiset view may hold a row more than once).
    pub count: u64,
}

/// See the module docs.
#[derive(Debug, Clone, Default)]
pub struct ViewRows {
    map: imbl::HashMap<Arc<[u8]>, Held>,
    /// Rows held, counting repeats.
    len: usize,
}

impl ViewRows {
    /// Rows held, counting repeats.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Distinct keys held.
    pub fn keys(&self) -> usize {
        self.map.len()
    }

    /// The row held under `key`.
    pub fn get(&self, key: &[u8]) -> Option<&Held> {
        self.map.get(key)
    }

    /// Every key and its row.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<[u8]>, &Held)> {
        self.map.iter()
    }

    /// Adds `row` under `key`: one more of it, or in place of another row
    /// of the key (an upsert). The held row it replaced, if any.
    pub fn add(&mut self, key: Arc<[u8]>, row: Arc<[u8]>) -> Option<Held> {
        self.len += 1;
        match self.map.get_mut(&key[..]) {
            Some(held) if held.row == row => {
                held.count += 1;
                None
            }
            Some(held) => {
                self.len -= held.count as usize;
                Some(std::mem::replace(held, Held { row, count: 1 }))
            }
            None => {
                self.map.insert(key, Held { row, count: 1 });
                None
            }
        }
    }

    /// Takes one `row` out of `key`; false when the key does not hold it
    /// (a retraction of a row never added).
    pub fn take(&mut self, key: &[u8], row: &[u8]) -> bool {
        let Some(held) = self.map.get_mut(key) else {
            return false;
        };
        if &held.row[..] != row {
            return false;
        }
        self.len -= 1;
        if held.count > 1 {
            held.count -= 1;
        } else {
            self.map.remove(key);
        }
        true
    }

    /// Holds `held` under `key` (a checkpoint read back).
    pub fn put(&mut self, key: Arc<[u8]>, held: Held) {
        self.len += held.count as usize;
        if let Some(old) = self.map.insert(key, held) {
            self.len -= old.count as usize;
        }
    }
}

/// A row's key bytes and whole-row bytes.
pub type KeyAndRow = (Arc<[u8]>, Arc<[u8]>);

/// Turns a view's rows into the bytes [`ViewRows`] holds and back: the
/// whole row, and its key (the key columns, or the whole row).
#[derive(Debug)]
pub struct RowCodec {
    schema: SchemaRef,
    rows: RowConverter,
    /// The key columns and their converter; `None`: keyed by the whole row.
    key: Option<(Vec<usize>, RowConverter)>,
}

impl RowCodec {
    /// A codec for rows of `schema`, keyed by `key` columns (none: by the
    /// whole row).
    pub fn new(schema: SchemaRef, key: Vec<usize>) -> Result<Self, ArrowError> {
        let converter = |columns: &[usize]| {
            RowConverter::new(
                columns
                    .iter()
                    .map(|&c| SortField::new(schema.field(c).data_type().clone()))
                    .collect(),
            )
        };
        let all: Vec<usize> = (0..schema.fields().len()).collect();
        let rows = converter(&all)?;
        let key = if key.is_empty() {
            None
        } else {
            let key_rows = converter(&key)?;
            Some((key, key_rows))
        };
        Ok(Self { schema, rows, key })
    }

    /// The view's columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The key columns, if the view is keyed by some.
    pub fn key_columns(&self) -> Option<&[usize]> {
        self.key.as_ref().map(|(columns, _)| columns.as_slice())
    }

    /// Each row of `columns` (the view's) as its key and row bytes.
    pub fn encode(&self, columns: &[ArrayRef]) -> Result<Vec<KeyAndRow>, ArrowError> {
        let rows = self.rows.convert_columns(columns)?;
        let keys = match &self.key {
            Some((key, converter)) => {
                let key_columns: Vec<ArrayRef> = key.iter().map(|&c| columns[c].clone()).collect();
                Some(converter.convert_columns(&key_columns)?)
            }
            None => None,
        };
        Ok((0..rows.num_rows())
            .map(|i| {
                let row: Arc<[u8]> = Arc::from(rows.row(i).as_ref());
                let key = match &keys {
                    Some(keys) => Arc::from(keys.row(i).as_ref()),
                    None => row.clone(),
                };
                (key, row)
            })
            .collect())
    }

    /// The key bytes of one key's values (in key column order).
    pub fn key_of(&self, values: &[ArrayRef]) -> Result<Vec<u8>, ArrowError> {
        let converter = match &self.key {
            Some((_, converter)) => converter,
            None => &self.rows,
        };
        let rows = converter.convert_columns(values)?;
        Ok(rows.row(0).as_ref().to_vec())
    }

    /// The rows of `held` (each as many times as it counts) as one batch.
    pub fn decode<'a>(
        &self,
        held: impl Iterator<Item = &'a Held>,
    ) -> Result<RecordBatch, ArrowError> {
        let parser = self.rows.parser();
        let rows: Vec<_> = held
            .flat_map(|h| std::iter::repeat_n(h.row.clone(), h.count as usize))
            .collect();
        let count = rows.len();
        let columns = self
            .rows
            .convert_rows(rows.iter().map(|r| parser.parse(r)))?;
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(count)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &str) -> Arc<[u8]> {
        Arc::from(text.as_bytes())
    }

    #[test]
    fn the_codec_reads_back_what_it_wrote_and_finds_a_key() {
        use datafusion::arrow::array::{Int64Array, StringArray};
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]));
        let codec = RowCodec::new(schema.clone(), vec![0]).expect("a codec");
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["a", "b"])),
            Arc::new(Int64Array::from(vec![1, 2])),
        ];
        let mut rows = ViewRows::default();
        for (key, row) in codec.encode(&columns).expect("encodes") {
            rows.add(key, row);
        }
        let key = codec
            .key_of(&[Arc::new(StringArray::from(vec!["b"]))])
            .expect("a key");
        let found = codec.decode(rows.get(&key).into_iter()).expect("decodes");
        let expected = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["b"])),
                Arc::new(Int64Array::from(vec![2])),
            ],
        )
        .expect("a batch");
        assert_eq!(found, expected);
        assert_eq!(
            codec
                .decode(rows.iter().map(|(_, h)| h))
                .expect("decodes")
                .num_rows(),
            2
        );
    }

    #[test]
    fn a_keyed_view_holds_one_row_per_key_and_counts_upserts() {
        let mut rows = ViewRows::default();
        assert!(rows.add(bytes("k1"), bytes("k1,a")).is_none());
        let replaced = rows.add(bytes("k1"), bytes("k1,b")).expect("an upsert");
        assert_eq!(replaced.row, bytes("k1,a"));
        assert_eq!((rows.len(), rows.keys()), (1, 1));
        assert!(!rows.take(b"k1", b"k1,a"), "the old row is gone");
        assert!(rows.take(b"k1", b"k1,b"));
        assert!(rows.is_empty());
    }

    #[test]
    fn a_multiset_counts_repeats_and_clones_do_not_see_later_changes() {
        let mut rows = ViewRows::default();
        rows.add(bytes("r"), bytes("r"));
        rows.add(bytes("r"), bytes("r"));
        let before = rows.clone();
        assert!(rows.take(b"r", b"r"));
        assert_eq!((before.len(), rows.len()), (2, 1));
        rows.put(
            bytes("s"),
            Held {
                row: bytes("s"),
                count: 3,
            },
        );
        assert_eq!(rows.len(), 4);
        assert_eq!(before.get(b"s"), None);
    }
}

//! Batches that hold only the bytes of their own rows, for operators that
//! keep input batches as state.
//!
//! In: a batch an operator is about to keep (a join side's buffered rows,
//! rows waiting for their watermark, a partition's rows). Out: the same
//! rows, with every string or binary view column whose data buffers are
//! mostly other rows' bytes copied into buffers of its own.
//!
//! A view column taken, filtered or sliced from a larger one (a key split's
//! `take`, a filter, a struct field of the source's batch) still points
//! into all of that one's data buffers. Kept as it is, a batch of ten rows
//! keeps the source's whole batch alive, and `get_array_memory_size` counts
//! those buffers once for every batch sharing them: Nexmark q23's append-only
//! join counted 4.2 KB a row for rows of about 500 bytes, and spilled ten
//! times sooner than it needed to. Compacting when the buffers are more than
//! twice the bytes the views use (arrow's `BatchCoalescer` rule) makes the
//! count and the memory held agree to within that factor, and copies only
//! rows that are kept.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Array, StringViewArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::state::owned_batch::owned;
//!
//! let long = |i: usize| format!("a string longer than twelve bytes, number {i}");
//! let all = StringViewArray::from_iter_values((0..1000).map(long));
//! let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8View, false)]));
//! let batch = RecordBatch::try_new(schema, vec![Arc::new(all)]).unwrap();
//! let one_row = batch.slice(7, 1);
//! let kept = owned(one_row.clone());
//! assert_eq!(kept, one_row, "the same rows");
//! assert!(kept.get_array_memory_size() * 100 < one_row.get_array_memory_size());
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StructArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;

/// `batch` with its view columns compacted where their data buffers are
/// more than twice the bytes their rows use (see the module docs); the
/// batch itself, unchanged and uncopied, when none is.
pub fn owned(batch: RecordBatch) -> RecordBatch {
    if !batch.columns().iter().any(|c| is_sparse(c.as_ref())) {
        return batch;
    }
    let columns = batch.columns().iter().map(owned_array).collect();
    // Same schema, same row count, same types: cannot fail.
    RecordBatch::try_new(batch.schema(), columns).unwrap_or(batch)
}

/// `array` compacted as [`owned`] compacts a batch's columns.
pub fn owned_array(array: &ArrayRef) -> ArrayRef {
    if !is_sparse(array.as_ref()) {
        return array.clone();
    }
    match array.data_type() {
        DataType::Utf8View => Arc::new(array.as_string_view().gc()),
        DataType::BinaryView => Arc::new(array.as_binary_view().gc()),
        DataType::Struct(fields) => {
            let parts = array.as_struct();
            let children = parts.columns().iter().map(owned_array).collect();
            Arc::new(StructArray::new(
                fields.clone(),
                children,
                parts.nulls().cloned(),
            ))
        }
        _ => array.clone(),
    }
}

/// Whether `array` (or a struct's field) is a view column whose data
/// buffers hold more than twice the bytes its rows use.
fn is_sparse(array: &dyn Array) -> bool {
    match array.data_type() {
        DataType::Utf8View => {
            let views = array.as_string_view();
            sparse(views.data_buffers(), views.total_buffer_bytes_used())
        }
        DataType::BinaryView => {
            let views = array.as_binary_view();
            sparse(views.data_buffers(), views.total_buffer_bytes_used())
        }
        DataType::Struct(_) => array
            .as_struct()
            .columns()
            .iter()
            .any(|c| is_sparse(c.as_ref())),
        _ => false,
    }
}

fn sparse(buffers: &[datafusion::arrow::buffer::Buffer], used: usize) -> bool {
    let held: usize = buffers.iter().map(|b| b.capacity()).sum();
    held > 2 * used
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringViewArray};
    use datafusion::arrow::compute::take;
    use datafusion::arrow::datatypes::{Field, Fields, Schema};

    fn long(i: usize) -> String {
        format!("row {i} with a value longer than twelve bytes")
    }

    fn strings(n: usize) -> ArrayRef {
        Arc::new(StringViewArray::from_iter_values((0..n).map(long)))
    }

    #[test]
    fn taken_view_rows_get_buffers_of_their_own() {
        let all = strings(10_000);
        let taken = take(
            &all,
            &datafusion::arrow::array::UInt32Array::from(vec![3, 9_999]),
            None,
        )
        .unwrap();
        let kept = owned_array(&taken);
        assert_eq!(kept.as_string_view().value(1), long(9_999));
        assert_eq!(kept.as_ref(), taken.as_ref());
        assert!(
            kept.get_array_memory_size() < 1_000,
            "{} bytes for two rows",
            kept.get_array_memory_size()
        );
    }

    #[test]
    fn dense_columns_and_other_types_are_kept_as_they_are() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8View, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            // Built and compacted: buffers exactly the bytes used.
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(strings(3).as_string_view().gc()),
            ],
        )
        .unwrap();
        let kept = owned(batch.clone());
        for (a, b) in kept.columns().iter().zip(batch.columns()) {
            assert!(Arc::ptr_eq(a, b), "not copied");
        }
        // Half the rows still use half the buffer: not worth a copy.
        let half = batch.slice(0, 2);
        assert!(Arc::ptr_eq(owned(half.clone()).column(1), half.column(1)));
    }

    #[test]
    fn view_fields_of_a_struct_are_compacted() {
        let fields = Fields::from(vec![
            Field::new("s", DataType::Utf8View, false),
            Field::new("n", DataType::Int64, false),
        ]);
        let events: ArrayRef = Arc::new(StructArray::new(
            fields,
            vec![
                strings(5_000),
                Arc::new(Int64Array::from_iter_values(0..5_000)),
            ],
            None,
        ));
        let one = events.slice(4_000, 1);
        let kept = owned_array(&one);
        assert_eq!(kept.as_ref(), one.as_ref());
        let text = |a: &ArrayRef| a.as_struct().column(0).get_array_memory_size();
        assert!(
            text(&kept) * 100 < text(&one),
            "{} of {}",
            text(&kept),
            text(&one)
        );
    }
}

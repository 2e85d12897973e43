//! `UNNEST`: one output row per element of a row's list columns
//! (`SELECT id, unnest(tags) AS tag FROM t`; Flink's `CROSS JOIN
//! UNNEST(t.tags) AS u(tag)`).
//!
//! In: batches with list columns. Out: per input row as many rows as its
//! longest unnested list (shorter lists padded with NULL), the other
//! columns repeated; a NULL or empty list gives no row, or one row of NULLs,
//! as the plan's [`UnnestNulls`] says. Stateless and columnar: one `take`
//! per column with indices computed from the lists' offsets.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Array, Int64Array, ListArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::unnest::{UnnestNulls, UnnestPlan};
//!
//! let list = DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true)));
//! let input = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("xs", list, true)]));
//! let output = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("x", DataType::Int64, true)]));
//! let plan = UnnestPlan { input_schema: input.clone(), output_schema: output, lists: vec![1], sources: vec![0, 1], nulls: UnnestNulls::Drop };
//! let xs = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1), Some(2)]), None, Some(vec![Some(3)])]);
//! let batch = RecordBatch::try_new(input, vec![Arc::new(Int64Array::from(vec![10, 20, 30])), Arc::new(xs)]).unwrap();
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! op.on_batch(0, batch, &mut out).unwrap();
//! let (_, rows) = out.drain().next().unwrap();
//! assert_eq!(rows.column(0).as_ref(), &Int64Array::from(vec![10, 10, 30]) as &dyn Array);
//! assert_eq!(rows.column(1).as_ref(), &Int64Array::from(vec![1, 2, 3]) as &dyn Array);
//! ```

use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{EngineError, Result};
use crate::message::LateBatch;
use crate::operator::{Collector, Distribution, Operator, OperatorPlan};

/// What a NULL or empty list gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnnestNulls {
    /// No row.
    Drop,
    /// A NULL list gives one row of NULLs; an empty list none.
    Preserve,
    /// Both give one row of NULLs.
    PreserveAndExpandEmpty,
}

/// Plan of an `unnest` node.
#[derive(Debug, Clone)]
pub struct UnnestPlan {
    /// Input schema.
    pub input_schema: SchemaRef,
    /// Output schema: per output column, the input column it comes from,
    /// a list's element type where that column is unnested.
    pub output_schema: SchemaRef,
    /// Input columns (lists) to unnest.
    pub lists: Vec<usize>,
    /// Per output column, the input column it comes from.
    pub sources: Vec<usize>,
    /// NULL and empty lists.
    pub nulls: UnnestNulls,
}

impl OperatorPlan for UnnestPlan {
    fn kind(&self) -> &'static str {
        "unnest"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new()
            .list("lists", &self.lists)
            .list("sources", &self.sources)
            .debug("nulls", self.nulls)
    }

    fn describe(&self) -> String {
        let lists: Vec<&str> = self
            .lists
            .iter()
            .map(|&i| self.input_schema.field(i).name().as_str())
            .collect();
        format!("unnest [{}], nulls {:?}", lists.join(", "), self.nulls)
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> Distribution {
        Distribution::Any
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        for &list in &self.lists {
            if !matches!(
                self.input_schema.field(list).data_type(),
                DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _)
            ) {
                return Err(EngineError::Config(format!(
                    "unnest: '{}' is not a list",
                    self.input_schema.field(list).name()
                )));
            }
        }
        Ok(Box::new(Unnest { plan: self.clone() }))
    }
}

struct Unnest {
    plan: UnnestPlan,
}

/// A list column as (offset, length) per row and its values.
struct Lists {
    starts: Vec<usize>,
    lengths: Vec<usize>,
    nulls: Vec<bool>,
    values: ArrayRef,
}

fn lists(array: &ArrayRef) -> Result<Lists> {
    let n = array.len();
    let nulls: Vec<bool> = (0..n).map(|i| array.is_null(i)).collect();
    let (starts, lengths, values): (Vec<usize>, Vec<usize>, ArrayRef) = match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let offsets = list.value_offsets();
            (
                (0..n).map(|i| offsets[i] as usize).collect(),
                (0..n)
                    .map(|i| (offsets[i + 1] - offsets[i]) as usize)
                    .collect(),
                list.values().clone(),
            )
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let offsets = list.value_offsets();
            (
                (0..n).map(|i| offsets[i] as usize).collect(),
                (0..n)
                    .map(|i| (offsets[i + 1] - offsets[i]) as usize)
                    .collect(),
                list.values().clone(),
            )
        }
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let size = *size as usize;
            (
                (0..n).map(|i| list.value_offset(i) as usize).collect(),
                vec![size; n],
                list.values().clone(),
            )
        }
        other => {
            return Err(EngineError::operator(
                "unnest",
                format!("cannot unnest a {other}"),
            ))
        }
    };
    // A NULL list has no elements, whatever its offsets say.
    let lengths = lengths
        .into_iter()
        .zip(&nulls)
        .map(|(l, &null)| if null { 0 } else { l })
        .collect();
    Ok(Lists {
        starts,
        lengths,
        nulls,
        values,
    })
}

impl Operator for Unnest {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        if let Some((rows, _)) = self.unnest(&batch)? {
            out.emit(rows);
        }
        Ok(())
    }

    /// Each output row keeps the mark of the row it came from.
    fn on_late_batch(&mut self, _input: usize, late: LateBatch, out: &mut Collector) -> Result<()> {
        if let Some((rows, repeat)) = self.unnest(late.rows())? {
            let marks = take(late.watermarks(), &repeat, None)?;
            let marks = marks
                .as_any()
                .downcast_ref::<datafusion::arrow::array::Int64Array>()
                .cloned()
                .ok_or_else(|| EngineError::operator("unnest", "marks are not BIGINT"))?;
            out.emit_late(LateBatch::new(rows, marks)?);
        }
        Ok(())
    }
}

impl Unnest {
    /// The rows of `batch` unnested, with the input row of each (`None`
    /// when there are none).
    fn unnest(&self, batch: &RecordBatch) -> Result<Option<(RecordBatch, UInt32Array)>> {
        let n = batch.num_rows();
        let unnested = self
            .plan
            .lists
            .iter()
            .map(|&c| lists(batch.column(c)))
            .collect::<Result<Vec<_>>>()?;
        // Rows per input row.
        let counts: Vec<usize> = (0..n)
            .map(|row| {
                let longest = unnested.iter().map(|l| l.lengths[row]).max().unwrap_or(0);
                let all_null = unnested.iter().all(|l| l.nulls[row]);
                match self.plan.nulls {
                    _ if longest > 0 => longest,
                    UnnestNulls::Drop => 0,
                    UnnestNulls::Preserve => usize::from(all_null),
                    UnnestNulls::PreserveAndExpandEmpty => 1,
                }
            })
            .collect();
        let total: usize = counts.iter().sum();
        if total == 0 {
            return Ok(None);
        }
        let repeat = UInt32Array::from_iter_values(
            counts
                .iter()
                .enumerate()
                .flat_map(|(row, &count)| std::iter::repeat_n(row as u32, count)),
        );
        // Per unnested list, the element each output row takes (None past
        // its end: NULL).
        let elements: Vec<UInt32Array> = unnested
            .iter()
            .map(|l| {
                counts
                    .iter()
                    .enumerate()
                    .flat_map(|(row, &count)| {
                        (0..count)
                            .map(move |j| (j < l.lengths[row]).then(|| (l.starts[row] + j) as u32))
                    })
                    .collect()
            })
            .collect();
        let columns = self
            .plan
            .sources
            .iter()
            .map(
                |&source| match self.plan.lists.iter().position(|&l| l == source) {
                    Some(k) => Ok(take(unnested[k].values.as_ref(), &elements[k], None)?),
                    None => Ok(take(batch.column(source).as_ref(), &repeat, None)?),
                },
            )
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = super::batch_of_rows(&self.plan.output_schema, columns, total)?;
        Ok(Some((rows, repeat)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, ListArray, StringArray};
    use datafusion::arrow::datatypes::{Field, Int64Type, Schema};

    use super::*;

    fn plan(nulls: UnnestNulls) -> UnnestPlan {
        let list = DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true)));
        UnnestPlan {
            input_schema: Arc::new(Schema::new(vec![
                Field::new("k", DataType::Utf8, true),
                Field::new("a", list.clone(), true),
                Field::new("b", list, true),
            ])),
            output_schema: Arc::new(Schema::new(vec![
                Field::new("k", DataType::Utf8, true),
                Field::new("a", DataType::Int64, true),
                Field::new("b", DataType::Int64, true),
            ])),
            lists: vec![1, 2],
            sources: vec![0, 1, 2],
            nulls,
        }
    }

    fn rows(nulls: UnnestNulls) -> Vec<String> {
        let plan = plan(nulls);
        let a = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![]),
            Some(vec![Some(3)]),
        ]);
        let b = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(10)]),
            None,
            None,
            Some(vec![Some(30), None, Some(32)]),
        ]);
        let batch = RecordBatch::try_new(
            plan.input_schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["w", "x", "y", "z"])),
                Arc::new(a),
                Arc::new(b),
            ],
        )
        .unwrap();
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, batch, &mut out).unwrap();
        let mut lines = Vec::new();
        for (_, batch) in out.drain() {
            let k = batch.column(0).as_string::<i32>();
            let a = batch
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let b = batch
                .column(2)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let show = |c: &Int64Array, i| {
                if c.is_null(i) {
                    "-".to_string()
                } else {
                    c.value(i).to_string()
                }
            };
            for i in 0..batch.num_rows() {
                lines.push(format!("{} {} {}", k.value(i), show(a, i), show(b, i)));
            }
        }
        lines
    }

    #[test]
    fn lists_are_zipped_to_the_longest_with_nulls() {
        assert_eq!(
            rows(UnnestNulls::Drop),
            vec!["w 1 10", "w 2 -", "z 3 30", "z - -", "z - 32"]
        );
    }

    #[test]
    fn null_and_empty_lists_follow_the_plan() {
        // x: both lists NULL; y: one empty, one NULL.
        assert_eq!(
            rows(UnnestNulls::Preserve),
            vec!["w 1 10", "w 2 -", "x - -", "z 3 30", "z - -", "z - 32"]
        );
        assert_eq!(
            rows(UnnestNulls::PreserveAndExpandEmpty),
            vec!["w 1 10", "w 2 -", "x - -", "y - -", "z 3 30", "z - -", "z - 32"]
        );
    }
}

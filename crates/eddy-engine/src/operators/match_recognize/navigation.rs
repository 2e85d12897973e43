//! Values a condition or measure reads from the rows of a (partial) match:
//! `A.price`, `LAST(A.price, 1)`, `FIRST(A.price)`, `PREV(A.price)`,
//! `SUM(A.price)`, `MATCH_ROWTIME()`, `CLASSIFIER()`.
//!
//! In: a partition's rows (their argument columns, see
//! [`super::MatchRecognizePlan::args`]), where the match starts, and the
//! variable of each of its rows so far. Out: one [`ScalarValue`] per
//! [`Navigation`].
//!
//! Semantics, as in Flink and the SQL standard's running semantics: in a
//! `DEFINE` the row being tested counts as mapped to its variable, so
//! `A.price` in `A`'s own condition is that row's price and in another
//! variable's condition the price of the last row mapped to `A`; a name
//! with no variable (`price`) is the current row. In `MEASURES` the match is
//! complete and `LAST` means its last row. `PREV` counts rows of the
//! partition back from the row its argument refers to, reaching before the
//! match's first row as the standard's physical offsets do (NULL before the
//! partition's first row). Aggregates run over the rows mapped to the
//! variable so far (every row of the match when it names none).

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;

use crate::error::{EngineError, Result};

/// The name of the `i`-th navigation's column in a condition's or the
/// measures' schema (`__nav0`, ...).
pub fn column_name(i: usize) -> String {
    format!("__nav{i}")
}

/// An aggregate over the rows mapped to a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// `COUNT(A.x)` (non-NULL values) or `COUNT(A.*)` (rows).
    Count,
    /// `SUM(A.x)`.
    Sum,
    /// `AVG(A.x)`.
    Avg,
    /// `MIN(A.x)`.
    Min,
    /// `MAX(A.x)`.
    Max,
}

/// What a navigation reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The row `n` rows before the last one mapped to the variable
    /// (`LAST(A.x, n)`; `A.x` is `n = 0`).
    Last(usize),
    /// The row `n` rows after the first one mapped to the variable
    /// (`FIRST(A.x, n)`).
    First(usize),
    /// The row `n` rows before (in the partition, so possibly before the
    /// match) the last one mapped to the variable (`PREV(A.x, n)`).
    Prev(usize),
    /// An aggregate over the rows mapped to the variable.
    Aggregate(Aggregate),
    /// The variable of the match's last row (`CLASSIFIER()`).
    Classifier,
}

/// One value a condition or measure reads.
#[derive(Debug, Clone)]
pub struct Navigation {
    /// What it reads.
    pub reach: Reach,
    /// The pattern variable it reads rows of; `None`: every row of the match.
    pub var: Option<usize>,
    /// The argument column (an index into the plan's `args`); `None` for
    /// `COUNT(*)` and `CLASSIFIER()`.
    pub arg: Option<usize>,
    /// The type of the value.
    pub data_type: DataType,
}

/// The rows of a partition a navigation reads from.
pub struct MatchRows<'a> {
    /// The partition's argument columns (rows before the match's first
    /// row too, as far back as `PREV` reaches).
    pub args: &'a [ArrayRef],
    /// Index of the match's first row in them.
    pub start: usize,
    /// The variable of each row of the match so far.
    pub path: &'a [u16],
    /// Variable names (for `CLASSIFIER()`).
    pub names: &'a [String],
}

impl MatchRows<'_> {
    fn mapped(&self, var: Option<usize>, offset: usize) -> bool {
        var.is_none_or(|v| self.path[offset] as usize == v)
    }

    fn value_at(&self, nav: &Navigation, offset: usize) -> Result<ScalarValue> {
        self.value_at_row(nav, self.start + offset)
    }

    /// The argument's value at row `row` of the partition's columns.
    fn value_at_row(&self, nav: &Navigation, row: usize) -> Result<ScalarValue> {
        let Some(arg) = nav.arg else {
            return Err(EngineError::operator(
                "match_recognize",
                "a navigation without an argument",
            ));
        };
        let value = ScalarValue::try_from_array(self.args[arg].as_ref(), row)?;
        cast(value, &nav.data_type)
    }

    /// The value `nav` reads.
    pub fn value(&self, nav: &Navigation) -> Result<ScalarValue> {
        let len = self.path.len();
        match nav.reach {
            Reach::Last(n) => match (0..len).rev().filter(|&i| self.mapped(nav.var, i)).nth(n) {
                Some(i) => self.value_at(nav, i),
                None => Ok(ScalarValue::try_from(&nav.data_type)?),
            },
            Reach::First(n) => match (0..len).filter(|&i| self.mapped(nav.var, i)).nth(n) {
                Some(i) => self.value_at(nav, i),
                None => Ok(ScalarValue::try_from(&nav.data_type)?),
            },
            Reach::Prev(n) => {
                let last = (0..len).rev().find(|&i| self.mapped(nav.var, i));
                match last.and_then(|i| (self.start + i).checked_sub(n)) {
                    Some(row) => self.value_at_row(nav, row),
                    None => Ok(ScalarValue::try_from(&nav.data_type)?),
                }
            }
            Reach::Classifier => Ok(ScalarValue::Utf8(
                self.path
                    .last()
                    .and_then(|&v| self.names.get(v as usize))
                    .cloned(),
            )),
            Reach::Aggregate(aggregate) => self.aggregate(nav, aggregate),
        }
    }

    fn aggregate(&self, nav: &Navigation, aggregate: Aggregate) -> Result<ScalarValue> {
        let rows = (0..self.path.len()).filter(|&i| self.mapped(nav.var, i));
        if aggregate == Aggregate::Count {
            let mut count = 0i64;
            for i in rows {
                let counted = match nav.arg {
                    Some(arg) => self.args[arg].is_valid(self.start + i),
                    None => true,
                };
                count += counted as i64;
            }
            return cast(ScalarValue::Int64(Some(count)), &nav.data_type);
        }
        let mut acc: Option<ScalarValue> = None;
        let mut count = 0u64;
        for i in rows {
            let value = self.value_at_raw(nav, i)?;
            if value.is_null() {
                continue;
            }
            count += 1;
            acc = Some(match (acc, aggregate) {
                (None, Aggregate::Avg) => cast(value, &DataType::Float64)?,
                (None, _) => cast(value, &nav.data_type)?,
                (Some(acc), Aggregate::Sum) => acc.add_checked(cast(value, &nav.data_type)?)?,
                (Some(acc), Aggregate::Avg) => acc.add(cast(value, &DataType::Float64)?)?,
                (Some(acc), Aggregate::Min) => {
                    let value = cast(value, &nav.data_type)?;
                    if value < acc {
                        value
                    } else {
                        acc
                    }
                }
                (Some(acc), Aggregate::Max) => {
                    let value = cast(value, &nav.data_type)?;
                    if value > acc {
                        value
                    } else {
                        acc
                    }
                }
                (Some(acc), Aggregate::Count) => acc,
            });
        }
        match (acc, aggregate) {
            (None, _) => Ok(ScalarValue::try_from(&nav.data_type)?),
            (Some(ScalarValue::Float64(Some(sum))), Aggregate::Avg) => cast(
                ScalarValue::Float64(Some(sum / count as f64)),
                &nav.data_type,
            ),
            (Some(acc), _) => Ok(acc),
        }
    }

    fn value_at_raw(&self, nav: &Navigation, offset: usize) -> Result<ScalarValue> {
        let arg = nav.arg.ok_or_else(|| {
            EngineError::operator("match_recognize", "an aggregate without an argument")
        })?;
        Ok(ScalarValue::try_from_array(
            self.args[arg].as_ref(),
            self.start + offset,
        )?)
    }
}

fn cast(value: ScalarValue, to: &DataType) -> Result<ScalarValue> {
    if &value.data_type() == to {
        Ok(value)
    } else {
        Ok(value.cast_to(to)?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::Int64Array;

    use super::*;

    fn nav(reach: Reach, var: Option<usize>, data_type: DataType) -> Navigation {
        Navigation {
            reach,
            var,
            arg: Some(0),
            data_type,
        }
    }

    #[test]
    fn navigations_read_the_rows_of_their_variable() {
        // Rows 10 20 30 40 50; the match starts at row 1: A B B A.
        let args: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![10, 20, 30, 40, 50]))];
        let names = vec!["A".to_string(), "B".to_string()];
        let rows = MatchRows {
            args: &args,
            start: 1,
            path: &[0, 1, 1, 0],
            names: &names,
        };
        let i = |reach, var| rows.value(&nav(reach, var, DataType::Int64)).unwrap();
        assert_eq!(i(Reach::Last(0), Some(0)), ScalarValue::Int64(Some(50)));
        assert_eq!(i(Reach::Last(1), Some(0)), ScalarValue::Int64(Some(20)));
        assert_eq!(i(Reach::Last(2), Some(0)), ScalarValue::Int64(None));
        assert_eq!(i(Reach::First(0), Some(1)), ScalarValue::Int64(Some(30)));
        assert_eq!(i(Reach::Last(0), None), ScalarValue::Int64(Some(50)));
        assert_eq!(i(Reach::Prev(1), Some(1)), ScalarValue::Int64(Some(30)));
        assert_eq!(i(Reach::Prev(1), Some(0)), ScalarValue::Int64(Some(40)));
        // PREV reaches before the match's first row, not before the partition's.
        assert_eq!(i(Reach::Prev(4), None), ScalarValue::Int64(Some(10)));
        assert_eq!(i(Reach::Prev(5), None), ScalarValue::Int64(None));
        assert_eq!(
            i(Reach::Aggregate(Aggregate::Sum), Some(1)),
            ScalarValue::Int64(Some(70))
        );
        assert_eq!(
            i(Reach::Aggregate(Aggregate::Count), None),
            ScalarValue::Int64(Some(4))
        );
        assert_eq!(
            i(Reach::Aggregate(Aggregate::Max), Some(0)),
            ScalarValue::Int64(Some(50))
        );
        assert_eq!(
            rows.value(&nav(
                Reach::Aggregate(Aggregate::Avg),
                Some(1),
                DataType::Float64
            ))
            .unwrap(),
            ScalarValue::Float64(Some(35.0))
        );
        assert_eq!(
            rows.value(&nav(Reach::Classifier, None, DataType::Utf8))
                .unwrap(),
            ScalarValue::Utf8(Some("A".into()))
        );
    }
}

//! Flink's string functions DataFusion lacks: `REGEXP_EXTRACT(s, regex[,
//! group])` (the group of the first match: 0, the default, is the whole
//! match; NULL when nothing matches or there is no such group) and
//! `SPLIT_INDEX(s, delimiter, i)` (the `i`-th piece, from 0, of `s` split
//! at each `delimiter`, empty pieces kept; NULL when out of range).
//!
//! In: string columns, a constant pattern, an index column. Out: a string
//! column; NULL wherever an argument is NULL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

use super::{arrays, constant_text};

fn strings(array: &Arc<dyn Array>, function: &str) -> Result<StringArray> {
    let text = cast(array, &DataType::Utf8)?;
    match text.as_any().downcast_ref::<StringArray>() {
        Some(text) => Ok(text.clone()),
        None => exec_err!("{function}: a string expected"),
    }
}

fn integers(array: &Arc<dyn Array>, function: &str) -> Result<Int64Array> {
    let n = cast(array, &DataType::Int64)?;
    match n.as_any().downcast_ref::<Int64Array>() {
        Some(n) => Ok(n.clone()),
        None => exec_err!("{function}: an integer expected"),
    }
}

/// `REGEXP_EXTRACT(s, regex[, group])`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct RegexpExtract {
    signature: Signature,
}

impl RegexpExtract {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Utf8, DataType::Utf8]),
                    TypeSignature::Exact(vec![DataType::Utf8, DataType::Utf8, DataType::Int64]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

/// The `group`-th group of `pattern`'s first match in `text`.
fn extract(pattern: &regex::Regex, text: &str, group: i64) -> Option<String> {
    let group = usize::try_from(group).ok()?;
    let captures = pattern.captures(text)?;
    captures.get(group).map(|m| m.as_str().to_string())
}

impl ScalarUDFImpl for RegexpExtract {
    fn name(&self) -> &str {
        "regexp_extract"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let function = "regexp_extract";
        let source = constant_text(&args.args[1], function, "pattern")?;
        let pattern = match regex::Regex::new(&source) {
            Ok(p) => p,
            Err(e) => return exec_err!("{function}: '{source}' is not a regular expression: {e}"),
        };
        let a = arrays(&args)?;
        let text = strings(&a[0], function)?;
        let groups = match a.get(2) {
            Some(g) => Some(integers(g, function)?),
            None => None,
        };
        let out: StringArray = (0..text.len())
            .map(|row| {
                if text.is_null(row) {
                    return None;
                }
                let group = match &groups {
                    Some(g) if g.is_null(row) => return None,
                    Some(g) => g.value(row),
                    None => 0,
                };
                extract(&pattern, text.value(row), group)
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `SPLIT_INDEX(s, delimiter, i)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct SplitIndex {
    signature: Signature,
}

impl SplitIndex {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::exact(
                vec![DataType::Utf8, DataType::Utf8, DataType::Int64],
                Volatility::Immutable,
            ),
        }
    }
}

/// The `index`-th piece of `text` split at `delimiter` (at runs of
/// whitespace when the delimiter is empty, as Flink).
fn piece(text: &str, delimiter: &str, index: i64) -> Option<String> {
    let index = usize::try_from(index).ok()?;
    if delimiter.is_empty() {
        return text.split_whitespace().nth(index).map(str::to_string);
    }
    text.split(delimiter).nth(index).map(str::to_string)
}

impl ScalarUDFImpl for SplitIndex {
    fn name(&self) -> &str {
        "split_index"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let function = "split_index";
        let a = arrays(&args)?;
        let (text, delimiter, index) = (
            strings(&a[0], function)?,
            strings(&a[1], function)?,
            integers(&a[2], function)?,
        );
        let out: StringArray = (0..text.len())
            .map(|row| {
                if text.is_null(row) || delimiter.is_null(row) || index.is_null(row) {
                    return None;
                }
                piece(text.value(row), delimiter.value(row), index.value(row))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regexp_extract_takes_a_group_of_the_first_match() {
        let p = regex::Regex::new("foo(.*?)(bar)").unwrap();
        assert_eq!(extract(&p, "foothebar", 2).as_deref(), Some("bar"));
        assert_eq!(extract(&p, "foothebar", 1).as_deref(), Some("the"));
        assert_eq!(extract(&p, "foothebar", 0).as_deref(), Some("foothebar"));
        assert_eq!(extract(&p, "foothebar", 3), None, "no such group");
        assert_eq!(extract(&p, "nothing here", 0), None);
        assert_eq!(extract(&p, "foothebar", -1), None);
    }

    #[test]
    fn split_index_counts_from_zero_and_keeps_empty_pieces() {
        assert_eq!(piece("Jack,John,Mary", ",", 2).as_deref(), Some("Mary"));
        assert_eq!(piece("a,,b", ",", 1).as_deref(), Some(""));
        assert_eq!(piece("a::b::c", "::", 1).as_deref(), Some("b"));
        assert_eq!(piece("a,b", ",", 2), None);
        assert_eq!(piece("a,b", ",", -1), None);
        assert_eq!(piece("a  b", "", 1).as_deref(), Some("b"));
    }
}

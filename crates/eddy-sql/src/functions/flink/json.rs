//! Flink's JSON functions over JSON text: `JSON_VALUE(text, path)` (the
//! scalar at the path, as text), `JSON_EXISTS(text, path)` (whether the
//! path leads anywhere), `JSON_QUERY(text, path)` (the object or array at
//! the path, as JSON text). Paths are `$`, `$.a.b`, `$['a b'][0]`.
//!
//! In: a JSON string column and a constant path. Out: a string or boolean
//! column; NULL where the text is not JSON (Flink's `NULL ON ERROR`) or the
//! path leads nowhere (`NULL ON EMPTY`).

use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{arrays, constant_text};

#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct JsonValue {
    signature: Signature,
}

impl JsonValue {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::exact(
                vec![DataType::Utf8, DataType::Utf8],
                Volatility::Immutable,
            ),
        }
    }
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PathStep {
    Key(String),
    Index(usize),
}

/// Parses `$`, `$.a.b`, `$['a b'][0]`; `None` for anything else.
fn json_path(path: &str) -> Option<Vec<PathStep>> {
    let mut rest = path.trim().strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            steps.push(PathStep::Key(after[..end].to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inside = after[..end].trim();
            let step = match inside.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
                Some(key) => PathStep::Key(key.to_string()),
                None => PathStep::Index(inside.parse().ok()?),
            };
            steps.push(step);
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// What `steps` lead to in `text`: `None` when it is not JSON or the
/// path leads nowhere.
fn json_at(text: &str, steps: &[PathStep]) -> Option<serde_json::Value> {
    let root: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut at = &root;
    for step in steps {
        at = match step {
            PathStep::Key(key) => at.get(key.as_str())?,
            PathStep::Index(i) => at.get(*i)?,
        };
    }
    Some(at.clone())
}

/// The scalar at `steps` in `text`, as Flink's JSON_VALUE returns it.
fn json_scalar(text: &str, steps: &[PathStep]) -> Option<String> {
    match json_at(text, steps)? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl ScalarUDFImpl for JsonValue {
    fn name(&self) -> &str {
        "json_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (text, steps) = text_and_path(&args, "json_value")?;
        let out: StringArray = text
            .iter()
            .map(|t| t.and_then(|t| json_scalar(t, &steps)))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// The JSON text column and the parsed constant path of a call.
fn text_and_path(
    args: &ScalarFunctionArgs,
    function: &str,
) -> Result<(StringArray, Vec<PathStep>)> {
    let path = constant_text(&args.args[1], function, "path")?;
    let Some(steps) = json_path(&path) else {
        return exec_err!(
            "{function}: '{path}' is not a JSON path such as '$.a.b' or '$.items[0]'"
        );
    };
    let a = arrays(args)?;
    let text = cast(&a[0], &DataType::Utf8)?;
    let Some(text) = text.as_any().downcast_ref::<StringArray>().cloned() else {
        return exec_err!("{function}: a string of JSON expected");
    };
    Ok((text, steps))
}

fn text_and_path_signature() -> Signature {
    Signature::exact(vec![DataType::Utf8, DataType::Utf8], Volatility::Immutable)
}

/// `JSON_EXISTS(text, path)`: whether the path leads to a value (false
/// when the text is not JSON; NULL when it is NULL).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct JsonExists {
    signature: Signature,
}

impl JsonExists {
    pub(super) fn new() -> Self {
        Self {
            signature: text_and_path_signature(),
        }
    }
}

impl ScalarUDFImpl for JsonExists {
    fn name(&self) -> &str {
        "json_exists"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (text, steps) = text_and_path(&args, "json_exists")?;
        let out: BooleanArray = text
            .iter()
            .map(|t| t.map(|t| json_at(t, &steps).is_some()))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `JSON_QUERY(text, path)`: the object or array at the path as JSON text;
/// NULL for a scalar (Flink's default `WITHOUT ARRAY WRAPPER`, `NULL ON
/// ERROR`), a path leading nowhere, or text that is not JSON.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct JsonQuery {
    signature: Signature,
}

impl JsonQuery {
    pub(super) fn new() -> Self {
        Self {
            signature: text_and_path_signature(),
        }
    }
}

/// The object or array at `steps` in `text`, as JSON text.
fn json_structure(text: &str, steps: &[PathStep]) -> Option<String> {
    match json_at(text, steps)? {
        value @ (serde_json::Value::Object(_) | serde_json::Value::Array(_)) => {
            Some(value.to_string())
        }
        _ => None,
    }
}

impl ScalarUDFImpl for JsonQuery {
    fn name(&self) -> &str {
        "json_query"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (text, steps) = text_and_path(&args, "json_query")?;
        let out: StringArray = text
            .iter()
            .map(|t| t.and_then(|t| json_structure(t, &steps)))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `JSON_ARRAY_ELEMENTS(text)`: the elements of a JSON array as a list, for
/// `UNNEST`: a string element as its text, null as NULL, anything else as
/// its JSON text (ready for `JSON_VALUE`); NULL when the text is not a JSON
/// array.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct JsonArrayElements {
    signature: Signature,
}

impl JsonArrayElements {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        }
    }
}

/// The elements of the JSON array `text` (see [`JsonArrayElements`]).
fn array_elements(text: &str) -> Option<Vec<Option<String>>> {
    match serde_json::from_str::<serde_json::Value>(text).ok()? {
        serde_json::Value::Array(items) => Some(
            items
                .into_iter()
                .map(|item| match item {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s),
                    other => Some(other.to_string()),
                })
                .collect(),
        ),
        _ => None,
    }
}

impl ScalarUDFImpl for JsonArrayElements {
    fn name(&self) -> &str {
        "json_array_elements"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::List(Arc::new(
            datafusion::arrow::datatypes::Field::new_list_field(DataType::Utf8, true),
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let texts = arrays(&args)?;
        let Some(text) = texts.first() else {
            return exec_err!("json_array_elements takes one argument");
        };
        let text = cast(text, &DataType::Utf8)?;
        let text = text.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
            datafusion::error::DataFusionError::Execution("json_array_elements: not text".into())
        })?;
        let mut builder = datafusion::arrow::array::ListBuilder::new(
            datafusion::arrow::array::StringBuilder::new(),
        );
        for value in text.iter() {
            match value.and_then(array_elements) {
                Some(items) => {
                    for item in items {
                        builder.values().append_option(item);
                    }
                    builder.append(true);
                }
                None => builder.append(false),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(builder.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_array_elements_reads_each_element() {
        assert_eq!(
            array_elements(r#"["a", 1, null, {"b": 2}]"#),
            Some(vec![
                Some("a".into()),
                Some("1".into()),
                None,
                Some(r#"{"b":2}"#.into())
            ])
        );
        assert_eq!(array_elements(r#"{"a": 1}"#), None, "not an array");
        assert_eq!(array_elements("nope"), None);
    }

    #[test]
    fn json_value_reads_scalars_at_a_path() {
        let doc = r#"{"a": {"b": [10, "x", {"c": true}]}, "k y": 1.5}"#;
        let at = |path: &str| json_scalar(doc, &json_path(path).unwrap());
        assert_eq!(at("$.a.b[0]"), Some("10".into()));
        assert_eq!(at("$.a.b[1]"), Some("x".into()));
        assert_eq!(at("$.a.b[2].c"), Some("true".into()));
        assert_eq!(at("$['k y']"), Some("1.5".into()));
        assert_eq!(at("$.a"), None, "not a scalar");
        assert_eq!(at("$.nope"), None);
        assert_eq!(json_scalar("not json", &json_path("$.a").unwrap()), None);
        assert_eq!(json_path("a.b"), None);
    }

    #[test]
    fn json_exists_and_json_query_follow_the_path() {
        let doc = r#"{"a": {"b": [1, {"c": "x"}]}, "n": null}"#;
        let steps = |path: &str| json_path(path).unwrap();
        assert!(json_at(doc, &steps("$.a.b[1].c")).is_some());
        assert!(json_at(doc, &steps("$.n")).is_some(), "a null is there");
        assert!(json_at(doc, &steps("$.a.z")).is_none());
        assert!(json_at("not json", &steps("$")).is_none());
        assert_eq!(
            json_structure(doc, &steps("$.a.b")).as_deref(),
            Some(r#"[1,{"c":"x"}]"#)
        );
        assert_eq!(json_structure(doc, &steps("$.a.b[0]")), None, "a scalar");
    }
}

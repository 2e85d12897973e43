//! Why a line arrow-json refused is bad, in words a user can act on.
//! arrow-json's errors are text only, so the line is read again here, by
//! eddy, one question at a time: is it JSON, is it an object, does a
//! NOT NULL column lack a value, which column's value does not read as its
//! type (that column alone decoded).
//!
//! In: the table's schema, the line's bytes and the decoder's error. Out:
//! the column at fault (when one is) and the reason. Only bad lines come
//! here: nothing on the path of good rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::reader::ReaderBuilder;
use serde_json::value::RawValue;

/// How much of a value a reason quotes.
const QUOTED_CHARS: usize = 60;

/// The column at fault (if one is) and why `line` is bad; `error` is the
/// decoder's, given when eddy's own reading finds nothing wrong.
pub(super) fn why_bad(
    schema: &SchemaRef,
    line: &[u8],
    error: &ArrowError,
) -> (Option<String>, String) {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return (
                None,
                format!(
                    "non-UTF-8 bytes at byte {} of the line",
                    e.valid_up_to() + 1
                ),
            )
        }
    };
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return (None, format!("not valid JSON: {e}"));
    }
    if !text.trim_start().starts_with('{') {
        return (None, "not a JSON object".to_string());
    }
    let Ok(object) = serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(text) else {
        return (
            None,
            format!("the row does not fit the table's columns: {error}"),
        );
    };
    for field in schema.fields() {
        let value = object.get(field.name()).filter(|v| v.get() != "null");
        let Some(value) = value else {
            if !field.is_nullable() {
                return (
                    Some(field.name().clone()),
                    format!(
                        "column '{}' is NOT NULL but the row has no value for it",
                        field.name()
                    ),
                );
            }
            continue;
        };
        if !reads_as(field, line) {
            return (
                Some(field.name().clone()),
                format!(
                    "column '{}': failed to parse {} as {}",
                    field.name(),
                    quoted(value.get()),
                    field.data_type()
                ),
            );
        }
    }
    (
        None,
        format!("the row does not fit the table's columns: {error}"),
    )
}

/// Whether `field`'s value in `line` decodes as its type (the field alone:
/// the decoder leaves other keys unread).
fn reads_as(field: &Field, line: &[u8]) -> bool {
    let alone = Arc::new(Schema::new(vec![field.clone().with_nullable(true)]));
    let Ok(mut decoder) = ReaderBuilder::new(alone).with_batch_size(1).build_decoder() else {
        return false;
    };
    decoder.decode(line).is_ok() && decoder.flush().is_ok()
}

/// `text` cut to [`QUOTED_CHARS`] characters.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{DataType, TimeUnit};

    use super::*;

    fn why(line: &str) -> (Option<String>, String) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("k", DataType::Utf8, false),
            Field::new("note", DataType::Utf8, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        ]));
        let error = ArrowError::JsonError("the decoder's own words".into());
        why_bad(&schema, line.as_bytes(), &error)
    }

    #[test]
    fn each_kind_of_bad_line_is_named_by_what_is_wrong() {
        let not_json = why("this is not json").1;
        assert!(
            not_json.starts_with("not valid JSON: ") && not_json.contains("at line 1 column"),
            "{not_json}"
        );
        assert!(why(r#"{"id": 1, "k": "#).1.starts_with("not valid JSON"));
        assert_eq!(why("[1, 2]").1, "not a JSON object");
        assert_eq!(why("42").1, "not a JSON object");
        let bytes = [&b"{\"id\": 1, \"k\": \""[..], &[0xff, 0xfe], b"\"}"].concat();
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
        let error = ArrowError::JsonError(String::new());
        assert_eq!(
            why_bad(&schema, &bytes, &error).1,
            "non-UTF-8 bytes at byte 17 of the line"
        );
        let missing = why(r#"{"id": 1}"#);
        assert_eq!(missing.0.as_deref(), Some("k"));
        assert_eq!(
            missing.1,
            "column 'k' is NOT NULL but the row has no value for it"
        );
        assert_eq!(why(r#"{"id": 1, "k": null}"#).0.as_deref(), Some("k"));
        // A nullable column may be missing or null.
        let typed = why(r#"{"id": 1, "k": "a", "ts": "yesterday"}"#);
        assert_eq!(typed.0.as_deref(), Some("ts"));
        assert!(
            typed
                .1
                .starts_with(r#"column 'ts': failed to parse "yesterday" as Timestamp"#),
            "{}",
            typed.1
        );
        let object = why(r#"{"id": {"x": 1}, "k": "a"}"#);
        assert_eq!(
            object.1,
            r#"column 'id': failed to parse {"x": 1} as Int64"#
        );
        let long = format!(r#"{{"id": "{}", "k": "a"}}"#, "x".repeat(100));
        assert!(why(&long)
            .1
            .ends_with(&format!("\"{}… as Int64", "x".repeat(59))));
        // Nothing eddy sees wrong: the decoder's words.
        let fine = why(r#"{"id": 1, "k": "a"}"#);
        assert_eq!(
            (fine.0, fine.1.contains("the decoder's own words")),
            (None, true)
        );
    }
}

//! Encodes record batches as JSON lines, the format of every text sink and
//! of `eddy generate`.
//!
//! One object per row, keys in column order, NULL written as `null`,
//! TIMESTAMP values as RFC 3339 UTC strings (`2023-11-14T22:13:48.057Z`),
//! BIGINT epoch-millisecond fields as plain numbers. Timestamps are written
//! by [`crate::json_timestamps`], every other column by arrow-json.

use datafusion::arrow::json::writer::LineDelimited;
use datafusion::arrow::json::WriterBuilder;
use datafusion::arrow::record_batch::RecordBatch;
use std::sync::Arc;

use crate::error::Result;
use crate::json_timestamps::TimestampEncoders;

/// Appends the JSON lines of `batch` (each ending in `\n`) to `out`.
pub fn encode_json_lines(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
    encode_json_lines_with(batch, out, true)
}

/// Like [`encode_json_lines`]; with `explicit_nulls` false, NULL fields are
/// left out of each object (one table can then carry records of several
/// shapes, each showing only its own fields).
pub fn encode_json_lines_with(
    batch: &RecordBatch,
    out: &mut Vec<u8>,
    explicit_nulls: bool,
) -> Result<()> {
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(explicit_nulls)
        .with_timestamp_format("%Y-%m-%dT%H:%M:%S%.fZ".to_string())
        .with_timestamp_tz_format("%Y-%m-%dT%H:%M:%S%.f%:z".to_string())
        .with_encoder_factory(Arc::new(TimestampEncoders))
        .build::<_, LineDelimited>(out);
    writer.write(batch)?;
    writer.finish()?;
    Ok(())
}

/// Appends `line` (compact JSON) with a space after every `:` and `,` that is
/// not inside a string: the layout of Python's `json.dumps`, which the tagged
/// stdout lines of the reference pipeline use.
pub fn spaced_json(line: &[u8], out: &mut Vec<u8>) {
    out.reserve(line.len() + line.len() / 8);
    // One pass, byte by byte: the tokens of a record line are a few bytes
    // apart, too close for a vector search per token to pay off. Runs
    // between the separators are copied whole.
    let mut copied = 0;
    let mut in_string = false;
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b'\\' if in_string => i += 1, // the escaped byte is never special
            b'"' => in_string = !in_string,
            b':' | b',' if !in_string => {
                out.extend_from_slice(&line[copied..=i]);
                out.push(b' ');
                copied = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.extend_from_slice(&line[copied.min(line.len())..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_only_outside_strings() {
        let mut out = Vec::new();
        spaced_json(br#"{"a":1,"b":"x,y: \"z\",","c":[1,2]}"#, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a": 1, "b": "x,y: \"z\",", "c": [1, 2]}"#
        );
        for (line, spaced) in [
            (r#"{"a":"\\","b":1}"#, r#"{"a": "\\", "b": 1}"#),
            (r#"{"a":"x\"#, r#"{"a": "x\"#),
            (r#"{"a":"unclosed,"#, r#"{"a": "unclosed,"#),
            ("", ""),
        ] {
            let mut out = Vec::new();
            spaced_json(line.as_bytes(), &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), spaced, "{line}");
        }
    }
}

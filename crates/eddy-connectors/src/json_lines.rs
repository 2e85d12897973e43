//! Encodes record batches as JSON lines, the format of every text sink and
//! of `eddy generate`.
//!
//! One object per row, keys in column order, NULL written as `null`,
//! TIMESTAMP values as RFC 3339 UTC strings (`2023-11-14T22:13:48.057Z`),
//! BIGINT epoch-millisecond fields as plain numbers.

use datafusion::arrow::json::writer::LineDelimited;
use datafusion::arrow::json::WriterBuilder;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;

/// Appends the JSON lines of `batch` (each ending in `\n`) to `out`.
pub fn encode_json_lines(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(true)
        .with_timestamp_format("%Y-%m-%dT%H:%M:%S%.fZ".to_string())
        .with_timestamp_tz_format("%Y-%m-%dT%H:%M:%S%.f%:z".to_string())
        .build::<_, LineDelimited>(out);
    writer.write(batch)?;
    writer.finish()?;
    Ok(())
}

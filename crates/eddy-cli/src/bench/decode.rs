//! `eddy bench decode`: eddy's NDJSON source alone, on one thread.
//!
//! In: an NDJSON file of one generated stream (orders, payments or device
//! events, told apart by the first line's keys), read into memory first.
//! Out: one JSON line: the bytes and rows decoded, and the fastest of
//! `rounds` passes in seconds, MB/s and rows/s.
//!
//! A pass is what the file source does for each chunk of `batch_size`
//! lines, on the calling thread: the lines copied out of the read buffer,
//! split, and decoded into a batch of the table's columns (strings as
//! views, as SQL tables hold them). No query runs and no thread is
//! started, so the figure moves with the decoder's own cost only, where a
//! whole query's time on a shared machine moves with everything else.

use std::io::{BufReader, Cursor, Read};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use eddy_connectors::generator::{stream_schema, GeneratedStream};
use eddy_connectors::ndjson::NdjsonSource;
use eddy_engine::source::{SourceContext, SourceReader};

use crate::error::{CliError, Result};

/// Decodes `input` `rounds` times and reports the fastest pass.
pub fn decode(input: &Path, batch_size: usize, rounds: usize) -> Result<String> {
    let bytes: Arc<[u8]> = std::fs::read(input)
        .map_err(|source| CliError::Io {
            path: input.display().to_string(),
            source,
        })?
        .into();
    let schema = sql_schema(&stream_schema(stream_of(&bytes)?));
    let mut best = f64::INFINITY;
    let mut rows = 0;
    for _ in 0..rounds.max(1) {
        let reader: Box<dyn Read + Send> = Box::new(Cursor::new(bytes.clone()));
        let started = Instant::now();
        let mut source = NdjsonSource::new(
            BufReader::with_capacity(1 << 20, reader),
            input.display().to_string(),
            schema.clone(),
            batch_size,
            0,
            false,
            &[],
        );
        let mut ctx = SourceContext::new("decode");
        rows = 0;
        while let Some(batch) = source
            .next_batch(&mut ctx)
            .map_err(|e| CliError::Usage(format!("decoding {}: {e}", input.display())))?
        {
            rows += batch.num_rows();
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    Ok(format!(
        r#"{{"bytes":{},"rows":{rows},"rounds":{},"seconds":{best:.4},"mb_per_second":{:.1},"rows_per_second":{:.0}}}"#,
        bytes.len(),
        rounds.max(1),
        bytes.len() as f64 / best / 1e6,
        rows as f64 / best,
    ))
}

/// The generated stream whose lines `bytes` holds, by its first line's
/// first key.
fn stream_of(bytes: &[u8]) -> Result<GeneratedStream> {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = String::from_utf8_lossy(&first[..first.len().min(200)]);
    [
        ("\"order_id\"", GeneratedStream::Orders),
        ("\"payment_id\"", GeneratedStream::Payments),
        ("\"device_id\"", GeneratedStream::Devices),
    ]
    .into_iter()
    .find(|(key, _)| first.trim_start_matches('{').starts_with(key))
    .map(|(_, stream)| stream)
    .ok_or_else(|| {
        CliError::Usage(format!(
            "decode needs lines of `eddy generate` (orders, payments or devices); the first line starts {first:?}"
        ))
    })
}

/// The stream's columns as a SQL table declares them: nullable, strings as
/// views.
fn sql_schema(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| {
                let data_type = match f.data_type() {
                    DataType::Utf8 => DataType::Utf8View,
                    other => other.clone(),
                };
                Field::new(f.name(), data_type, true)
            })
            .collect::<Vec<_>>(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_line_of_a_generated_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payments.ndjson");
        let lines: String = (0..5000)
            .map(|i| {
                format!(
                    "{{\"payment_id\":\"p{i}\",\"order_id\":\"o{i}\",\"paid_amount\":{i}.5,\"payment_ts\":{i},\"method\":\"card\"}}\n"
                )
            })
            .collect();
        std::fs::write(&path, lines).unwrap();
        let line = decode(&path, 2048, 2).unwrap();
        assert!(line.contains("\"rows\":5000,"), "{line}");
        std::fs::write(&path, "{\"x\":1}\n").unwrap();
        assert!(decode(&path, 2048, 1).is_err());
    }
}

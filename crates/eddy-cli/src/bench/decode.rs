//! `eddy bench decode`: eddy's NDJSON source alone, on one thread, beside
//! the ceiling a SIMD JSON parser sets.
//!
//! In: an NDJSON file of one generated stream (orders, payments or device
//! events, told apart by the first line's keys), read into memory first.
//! Out: one JSON line: the bytes and rows decoded, and the fastest of
//! `rounds` passes in seconds, MB/s and rows/s; then the same for
//! simd-json parsing the same bytes line by line into its DOM
//! (`simd_json_*`), and eddy's MB/s as a share of simd-json's; and for
//! simd-json's tape (`simd_json_tape_*`: the validated parse with no value
//! built, the stricter ceiling), and eddy's share of that.
//!
//! A pass is what the file source does for each chunk of `batch_size`
//! lines, on the calling thread: the lines copied out of the read buffer,
//! split, and decoded into a batch of the table's columns (strings as
//! views, as SQL tables hold them). No query runs and no thread is
//! started, so the figure moves with the decoder's own cost only, where a
//! whole query's time on a shared machine moves with everything else.
//!
//! The reference pass is simd-json at its best on this machine (its
//! runtime detection picks AVX2 or SSE4.2): the bytes copied once (as the
//! source copies lines out of its read buffer), each line parsed in place
//! into a `BorrowedValue` with reused buffers, no Arrow built. Its rows
//! must equal eddy's.

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
    let (simd_best, simd_rows) = simd_json_passes(&bytes, rounds)?;
    let (tape_best, tape_rows) = simd_json_tape_passes(&bytes, rounds)?;
    if simd_rows != rows || tape_rows != rows {
        return Err(CliError::Usage(format!(
            "{}: eddy decoded {rows} rows, simd-json parsed {simd_rows} lines into values and {tape_rows} into tapes",
            input.display()
        )));
    }
    let mb_per_second = |seconds: f64| bytes.len() as f64 / seconds / 1e6;
    Ok(format!(
        r#"{{"bytes":{},"rows":{rows},"rounds":{},"seconds":{best:.4},"mb_per_second":{:.1},"rows_per_second":{:.0},"simd_json_seconds":{simd_best:.4},"simd_json_mb_per_second":{:.1},"share_of_simd_json":{:.3},"simd_json_tape_seconds":{tape_best:.4},"simd_json_tape_mb_per_second":{:.1},"share_of_simd_json_tape":{:.3}}}"#,
        bytes.len(),
        rounds.max(1),
        mb_per_second(best),
        rows as f64 / best,
        mb_per_second(simd_best),
        simd_best / best,
        mb_per_second(tape_best),
        tape_best / best,
    ))
}

/// simd-json over `bytes`, line by line into its DOM: the fastest of
/// `rounds` passes in seconds, and the lines parsed.
fn simd_json_passes(bytes: &[u8], rounds: usize) -> Result<(f64, usize)> {
    let mut buffers = simd_json::Buffers::default();
    passes(bytes, rounds, |line| {
        let value = simd_json::to_borrowed_value_with_buffers(line, &mut buffers)?;
        std::hint::black_box(&value);
        Ok(())
    })
}

/// simd-json over `bytes`, line by line into its tape (every value
/// validated and located, numbers parsed, no DOM built), with its buffers
/// and tape reused: the fastest of `rounds` passes in seconds, and the
/// lines parsed.
fn simd_json_tape_passes(bytes: &[u8], rounds: usize) -> Result<(f64, usize)> {
    let mut buffers = simd_json::Buffers::default();
    let mut tape = simd_json::Tape::null();
    passes(bytes, rounds, |line| {
        let mut line_tape = std::mem::replace(&mut tape, simd_json::Tape::null()).reset();
        simd_json::fill_tape(line, &mut buffers, &mut line_tape)?;
        std::hint::black_box(&line_tape);
        tape = line_tape.reset();
        Ok(())
    })
}

/// `rounds` passes of `parse` over each line of a copy of `bytes` (copied
/// anew each pass, in the timer, as the source copies lines out of its read
/// buffer): the fastest pass in seconds, and the lines parsed.
fn passes(
    bytes: &[u8],
    rounds: usize,
    mut parse: impl FnMut(&mut [u8]) -> simd_json::Result<()>,
) -> Result<(f64, usize)> {
    let mut copy = vec![0u8; bytes.len()];
    let mut best = f64::INFINITY;
    let mut lines = 0;
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        copy.copy_from_slice(bytes);
        lines = 0;
        for (n, line) in copy.split_mut(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            parse(line).map_err(|e| CliError::Usage(format!("simd-json, line {}: {e}", n + 1)))?;
            lines += 1;
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    Ok((best, lines))
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
        // simd-json parsed the same 5000 lines (or decode had failed).
        let (_, lines) = simd_json_passes(&std::fs::read(&path).unwrap(), 1).unwrap();
        assert_eq!(lines, 5000);
        assert!(line.contains("\"share_of_simd_json\":"), "{line}");
        std::fs::write(&path, "{\"x\":1}\n").unwrap();
        assert!(decode(&path, 2048, 1).is_err());
    }
}

//! `eddy generate`: prints one of the built-in generator's streams as NDJSON,
//! as fast as possible or paced to the wall clock (`--realtime`).

use std::io::Write;

use std::time::{Duration, Instant};

use datafusion::arrow::array::Int64Array;
use eddy_connectors::generator::{stream_schema, GeneratedStream, Generator, GeneratorConfig};
use eddy_connectors::json_lines::encode_json_lines;

use crate::error::{CliError, Result};

/// Writes the stream to `out`. With `realtime`, rows are paced so that
/// event time advances with the wall clock (a live feed for `eddy run
/// --input TABLE=-`); otherwise they are written as fast as possible.
pub fn generate(
    stream: &str,
    seed: u64,
    rate: u32,
    count: Option<u64>,
    realtime: bool,
    out: &mut dyn Write,
) -> Result<()> {
    if rate == 0 {
        return Err(CliError::Usage("--rate must be at least 1".into()));
    }
    let stream: GeneratedStream = stream.parse()?;
    // Paced output goes in small batches (about 20 per second).
    let batch_size = if realtime {
        (rate as usize / 20).max(1)
    } else {
        8192
    };
    let mut generator = Generator::new(GeneratorConfig {
        stream,
        seed,
        rate,
        count,
        batch_size,
    });
    let time_column = stream_schema(stream)
        .fields()
        .iter()
        .position(|f| f.name().ends_with("_ts"))
        .unwrap_or(0);
    let started = Instant::now();
    let mut first_event: Option<i64> = None;
    let mut buffer = Vec::new();
    let io = |source| CliError::Io {
        path: "stdout".into(),
        source,
    };
    while let Some(batch) = generator.next_batch()? {
        if realtime {
            let times = batch
                .column(time_column)
                .as_any()
                .downcast_ref::<Int64Array>()
                .cloned();
            let (earliest, latest) = match times.as_ref() {
                Some(t) => (t.iter().flatten().min(), t.iter().flatten().max()),
                None => (None, None),
            };
            if let (Some(earliest), Some(latest)) = (earliest, latest) {
                // No row is written before its event time has come.
                let origin = *first_event.get_or_insert(earliest);
                let due = Duration::from_millis(latest.saturating_sub(origin).max(0) as u64);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
        buffer.clear();
        encode_json_lines(&batch, &mut buffer)?;
        let written = out
            .write_all(&buffer)
            .and_then(|_| if realtime { out.flush() } else { Ok(()) });
        match written {
            // The reader went away (`eddy generate | head`): stop quietly.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            other => other.map_err(io)?,
        }
    }
    match out.flush() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(io),
    }
}

//! `eddy generate`: prints one of the built-in generator's streams as NDJSON,
//! as fast as possible or paced to the wall clock (`--realtime`).

use std::io::Write;

use eddy_connectors::generator::pacer::Pacer;
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
    let mut pacer = realtime.then(|| Pacer::new(time_column));
    let mut buffer = Vec::new();
    let io = |source| CliError::Io {
        path: "stdout".into(),
        source,
    };
    while let Some(batch) = generator.next_batch()? {
        if let Some(pacer) = pacer.as_mut() {
            let first = pacer.origin().is_none();
            pacer.wait(&batch);
            if let (true, Some((origin, wall))) = (first, pacer.origin()) {
                // For latency measurements: how event time maps to the clock.
                eprintln!("paced: event time {origin} ms is due at wall clock {wall} ms");
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

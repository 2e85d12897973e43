//! `eddy generate`: prints one of the built-in generator's streams as NDJSON.

use std::io::Write;

use eddy_connectors::generator::{GeneratedStream, Generator, GeneratorConfig};
use eddy_connectors::json_lines::encode_json_lines;

use crate::error::{CliError, Result};

/// Writes the stream to `out`.
pub fn generate(stream: &str, seed: u64, rate: u32, count: Option<u64>, out: &mut dyn Write) -> Result<()> {
    if rate == 0 {
        return Err(CliError::Usage("--rate must be at least 1".into()));
    }
    let stream: GeneratedStream = stream.parse()?;
    let mut generator = Generator::new(GeneratorConfig { stream, seed, rate, count, batch_size: 8192 });
    let mut buffer = Vec::new();
    while let Some(batch) = generator.next_batch()? {
        buffer.clear();
        encode_json_lines(&batch, &mut buffer)?;
        out.write_all(&buffer).map_err(|source| CliError::Io { path: "stdout".into(), source })?;
    }
    out.flush().map_err(|source| CliError::Io { path: "stdout".into(), source })
}

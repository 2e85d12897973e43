//! What file sinks share (the `file` and `parquet` connectors, and
//! `--output DIR`), and how any text sink writes an updating query.
//!
//! In: result batches in the sink table's schema. Out:
//! - [`ndjson`]: one JSON object per line in a file;
//! - [`rolling`]: a directory of Parquet files (or NDJSON files, with
//!   rolling or partitioning options), rolled by rows, bytes, time and
//!   checkpoints, partitioned Hive style ([`partition`]), in a [`format`];
//! - [`encoding`]: text sinks' batches encoded on a shared pool of threads
//!   and written in order;
//! - [`file_options`]: what a file sink's options say;
//! - [`changelog`]: an updating query's rows as row kinds, Debezium events
//!   or upserts;
//! - `target`: where a rolled file set goes, a local directory or a bucket
//!   prefix ([`crate::storage`]), and how its files are staged and published.
//!
//! The file sinks are exactly-once when the job checkpoints: rows are
//! staged in hidden in-progress files and published (appended to the final
//! NDJSON file, or renamed to their final names) only when the
//! checkpoint covering them completes; [`commit`] publishes, idempotently,
//! whatever a checkpoint's sink state lists.

pub mod changelog;
pub mod commit;
pub mod encoding;
pub mod file_options;
pub mod format;
pub mod ndjson;
pub mod partition;
pub mod rolling;
pub(crate) mod target;

use std::fs::File;
use std::path::Path;

use crate::error::{ConnectorError, Result};
pub use ndjson::NdjsonSink;
pub use rolling::RollingFileSink;

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> ConnectorError {
    ConnectorError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A resumed sink whose checkpoint wrote somewhere else.
pub(crate) fn written_elsewhere(was: &Path, now: &Path) -> ConnectorError {
    ConnectorError::bad_option(
        "path",
        format!(
            "the checkpoint was writing {}, the job now writes {} (use --ignore-state to start afresh)",
            was.display(),
            now.display()
        ),
    )
}

/// A resumed sink whose checkpointed state is another kind of sink's.
pub(crate) fn another_sinks_state() -> ConnectorError {
    ConnectorError::bad_option(
        "connector",
        "the checkpoint holds another kind of sink's state",
    )
}

/// Creates the parent directory of `path` if needed.
pub(crate) fn create_parent(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
    }
    Ok(())
}

/// Creates (truncates) `path`, and its directory if needed.
pub(crate) fn create_file(path: &Path) -> Result<File> {
    create_parent(path)?;
    File::create(path).map_err(|e| io_error(path, e))
}

/// Makes a directory's entries (new names, renames) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))
}

/// Files in `dir` whose names satisfy `keep` (an absent directory has none).
pub(crate) fn files_matching(
    dir: &Path,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<std::path::PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        if keep(&entry.file_name().to_string_lossy()) {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// Removes files, failing on the first that cannot be removed.
pub(crate) fn remove_files(files: &[std::path::PathBuf]) -> Result<()> {
    for file in files {
        std::fs::remove_file(file).map_err(|e| io_error(file, e))?;
    }
    Ok(())
}

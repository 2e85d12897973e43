//! Reading NDJSON from a file or stdin (the `file` and `stdin` sources,
//! and `--input TABLE=PATH`): rows, or Debezium change events for a
//! change feed, resumed at a checkpointed byte offset.
//!
//! In: a source's [`ConnectorSpec`], the path (`-`: stdin) and its
//! checkpointed position. Out: an [`NdjsonSource`].

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

use crate::config::ConnectorConfig;
use crate::error::{ConnectorError, Result};
use crate::ndjson::source::NdjsonPosition;
use crate::ndjson::{self, NdjsonSource};
use crate::options::{OptionDecl, OptionKind, OptionValues};
use crate::storage::{Bucket, ObjectReader};

/// `format` of an NDJSON source.
pub const FORMAT: OptionDecl = OptionDecl::new(
    "format",
    OptionKind::Text,
    "json (default), or debezium-json for a change feed",
);
/// `batch_size` of a source.
pub const BATCH_SIZE: OptionDecl = OptionDecl::new(
    "batch_size",
    OptionKind::Count,
    "rows per batch (default the run's --batch-size)",
);
/// `max_line_bytes`.
pub const MAX_LINE_BYTES: OptionDecl = OptionDecl::new(
    "max_line_bytes",
    OptionKind::Count,
    "a longer line is a bad row, not read whole (default 16 MiB)",
);

/// `json.timestamp-format.standard`, Flink's JSON option naming how the
/// file spells its timestamps. eddy reads either spelling whichever is
/// named, so a Flink table's DDL runs unchanged.
pub const JSON_TIMESTAMP_FORMAT: OptionDecl = OptionDecl::new(
    "json.timestamp-format.standard",
    OptionKind::OneOf(&["SQL", "ISO-8601"]),
    "Flink's timestamp spelling: 'SQL' (2015-07-15 00:00:00.001) or 'ISO-8601' \
     (2015-07-15T00:00:00.001); eddy reads either (and a zone, Z or +01:00), whichever is named",
);

/// Checks the source's `format` against what the table was planned as: a
/// change feed reads `debezium-json`, any other table plain JSON.
pub fn check_format(spec: &ConnectorSpec) -> Result<()> {
    let change_feed = eddy_engine::changelog::is_updating(&spec.schema);
    match OptionValues::new(&spec.options).word("format").as_deref() {
        None | Some("json" | "ndjson") if !change_feed => Ok(()),
        Some(ndjson::debezium::FORMAT) if change_feed => Ok(()),
        Some(other) => Err(ConnectorError::bad_option(
            "format",
            format!(
                "'{other}' is not supported (use 'json', or '{}' for a change feed)",
                ndjson::debezium::FORMAT
            ),
        )),
        None => Err(ConnectorError::bad_option(
            "format",
            "the table was planned as a change feed without format = 'debezium-json'",
        )),
    }
}

/// The checkpointed position of a source reading `location`, refused when
/// the checkpoint read something else.
fn resumed_position(
    location: &str,
    resume: Option<&serde_json::Value>,
) -> Result<Option<NdjsonPosition>> {
    let resume: Option<NdjsonPosition> = resume
        .map(|r| serde_json::from_value(r.clone()))
        .transpose()
        .map_err(|e| ConnectorError::bad_option("path", format!("checkpointed position: {e}")))?;
    if let Some(resume) = &resume {
        if resume.path != location {
            return Err(ConnectorError::bad_option(
                "path",
                format!(
                    "the checkpoint was reading {}, the job now reads {} (use --ignore-state to start afresh)",
                    resume.path, location
                ),
            ));
        }
    }
    Ok(resume)
}

/// Opens the object at `location` in a bucket as the table's NDJSON
/// source, read by ranged requests from its start or the checkpointed
/// offset.
pub fn open_object(
    config: &ConnectorConfig,
    spec: &ConnectorSpec,
    location: &Bucket,
    resume: Option<&serde_json::Value>,
) -> Result<Box<dyn SourceReader>> {
    let shown = location.to_string();
    let resume = resumed_position(&shown, resume)?;
    let offset = resume.as_ref().map_or(0, |r| r.offset);
    let reader = ObjectReader::open(location, "", offset)?;
    if reader.size() < offset {
        return Err(ConnectorError::bad_option(
            "path",
            format!(
                "{shown} has {} bytes, but the checkpoint had read {offset} of it",
                reader.size()
            ),
        ));
    }
    ndjson_source(config, spec, Box::new(reader), shown, false, resume)
}

/// Opens `path` (`-`: stdin) as the table's NDJSON source.
pub fn open(
    config: &ConnectorConfig,
    spec: &ConnectorSpec,
    path: &str,
    resume: Option<&serde_json::Value>,
) -> Result<Box<dyn SourceReader>> {
    let location = if path == "-" {
        "stdin".to_string()
    } else {
        path.to_string()
    };
    let resume = resumed_position(&location, resume)?;
    let (reader, live): (Box<dyn std::io::Read + Send>, bool) = if path == "-" {
        (Box::new(std::io::stdin()), true)
    } else if is_fifo(path) {
        // Opening a named pipe waits for a writer: it is opened by the
        // source's own thread at its first read, so starting the job (and
        // a server's submit request) never waits on one.
        (Box::new(OpenOnFirstRead::new(path)), true)
    } else {
        let file = File::open(path).map_err(|source| ConnectorError::Io {
            path: path.to_string(),
            source,
        })?;
        let live = !file.metadata().map(|m| m.is_file()).unwrap_or(false);
        (Box::new(file), live)
    };
    let mut reader = reader;
    if let Some(resume) = &resume {
        if live {
            tracing::warn!(
                source = %spec.table,
                "{location} cannot be read again: the resumed job reads what it gives from now on (rows sent since the checkpoint are not replayed)"
            );
        } else {
            let mut file = File::open(path).map_err(|source| ConnectorError::Io {
                path: path.to_string(),
                source,
            })?;
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            if size < resume.offset {
                return Err(ConnectorError::bad_option(
                    "path",
                    format!(
                        "{path} has {size} bytes, but the checkpoint had read {} of it",
                        resume.offset
                    ),
                ));
            }
            file.seek(SeekFrom::Start(resume.offset))
                .map_err(|source| ConnectorError::Io {
                    path: path.to_string(),
                    source,
                })?;
            reader = Box::new(file);
        }
    }
    ndjson_source(config, spec, reader, location, live, resume)
}

/// The NDJSON source over `reader`, positioned at `resume`.
fn ndjson_source(
    config: &ConnectorConfig,
    spec: &ConnectorSpec,
    reader: Box<dyn std::io::Read + Send>,
    location: String,
    live: bool,
    resume: Option<NdjsonPosition>,
) -> Result<Box<dyn SourceReader>> {
    let batch_size = config.batch_size(spec)?;
    let capacity = if live { 1 << 16 } else { 1 << 20 };
    let max_line_bytes = OptionValues::new(&spec.options)
        .count(MAX_LINE_BYTES.name)?
        .unwrap_or(ndjson::source::DEFAULT_MAX_LINE_BYTES);
    let source = NdjsonSource::new(
        BufReader::with_capacity(capacity, reader),
        location,
        spec.schema.clone(),
        batch_size,
        config.decode_threads,
        live,
        &spec.unread_columns,
    )
    .with_max_line_bytes(max_line_bytes);
    Ok(Box::new(match &resume {
        Some(position) => source.starting_at(position),
        None => source,
    }))
}

/// Whether `path` is a named pipe (FIFO).
fn is_fifo(path: &str) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// A file opened when first read (a named pipe, whose opening blocks until
/// a writer comes).
struct OpenOnFirstRead {
    path: String,
    file: Option<File>,
}

impl OpenOnFirstRead {
    fn new(path: &str) -> Self {
        Self {
            path: path.to_string(),
            file: None,
        }
    }
}

impl std::io::Read for OpenOnFirstRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(File::open(&self.path)?),
        };
        std::io::Read::read(file, buf)
    }
}

//! The NDJSON file sink: one JSON object per line (NULL fields left out
//! with `omit_nulls = 'true'`). Batches are encoded on the process's
//! encoding threads and written in order ([`super::encoding`]).
//!
//! Without checkpoints the file is written as rows come (and flushed at
//! the end). With checkpoints it is exactly-once:
//!
//! ```text
//!   rows ──> .out.ndjson.00000007.inprogress      (hidden part of the current checkpoint interval)
//!   barrier n: part flushed + fsynced, listed in the checkpoint (start offset in the final file, length)
//!   checkpoint n complete: part appended to out.ndjson, fsynced, part removed
//! ```
//!
//! The final file only ever grows by whole checkpoints. Committing is
//! idempotent: a part whose bytes the final file already holds is skipped, a
//! part interrupted half-way is written again from its start offset, and a
//! final file longer than the checkpoint says (a resume from an older
//! checkpoint) is cut back. A resumed job removes parts left by the crashed
//! run; their rows are produced again.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::changelog::JsonLines;
use super::encoding::{Encode, LineOutput, OrderedEncoder};
use super::{
    another_sinks_state, create_file, create_parent, files_matching, io_error, remove_files,
    sync_dir, written_elsewhere,
};
use crate::error::{ConnectorError, Result};
use crate::sinks::commit::SinkState;

/// A staged part of an NDJSON sink's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NdjsonPart {
    /// The hidden part file.
    pub file: PathBuf,
    /// Where its bytes go in the final file.
    pub start: u64,
    /// Its length.
    pub len: u64,
    /// The checkpoint whose barrier closed it.
    pub closed_for: CheckpointId,
}

/// What an NDJSON sink pre-commits at a barrier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NdjsonSinkState {
    /// The final file.
    pub path: PathBuf,
    /// Bytes of the final file published before the pending parts.
    pub committed: u64,
    /// Parts to append, in order.
    pub pending: Vec<NdjsonPart>,
    /// Sequence number of the next part.
    pub next_seq: u64,
}

impl NdjsonSinkState {
    /// The final file's length once every pending part is appended.
    pub fn target_len(&self) -> u64 {
        self.pending
            .last()
            .map_or(self.committed, |p| p.start + p.len)
    }
}

struct OpenPart {
    file: PathBuf,
    out: BufWriter<File>,
    len: u64,
}

struct Staging {
    committed: u64,
    pending: Vec<NdjsonPart>,
    next_seq: u64,
    current: Option<OpenPart>,
}

enum Output {
    Direct(BufWriter<File>),
    Staged(Staging),
}

/// The file side of the sink: where encoded lines go, in order.
struct NdjsonOutput {
    path: PathBuf,
    output: Output,
}

impl LineOutput for NdjsonOutput {
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.output {
            Output::Direct(out) => out.write_all(bytes).map_err(|e| io_error(&self.path, e)),
            Output::Staged(staging) => {
                let part = match &mut staging.current {
                    Some(part) => part,
                    None => {
                        let prefix = part_prefix(&self.path);
                        let file = self
                            .path
                            .with_file_name(format!("{prefix}{:08}.inprogress", staging.next_seq));
                        staging.next_seq += 1;
                        let out = BufWriter::with_capacity(1 << 16, create_file(&file)?);
                        staging.current.insert(OpenPart { file, out, len: 0 })
                    }
                };
                part.len += bytes.len() as u64;
                part.out
                    .write_all(bytes)
                    .map_err(|e| io_error(&part.file, e))
            }
        }
    }
}

/// Writes JSON lines to a file, encoding batches in parallel
/// ([`super::encoding`]).
pub struct NdjsonSink {
    table: String,
    encoder: OrderedEncoder<NdjsonOutput>,
}

fn part_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    format!(".{name}.")
}

fn stale_parts(path: &Path) -> Result<Vec<PathBuf>> {
    let prefix = part_prefix(path);
    let dir = path.parent().unwrap_or(Path::new(""));
    files_matching(
        if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        },
        |name| name.starts_with(&prefix) && name.ends_with(".inprogress"),
    )
}

impl NdjsonSink {
    /// A sink for `table` writing `path`; NULL fields are written as `null`
    /// when `explicit_nulls`, left out otherwise. `Direct` creates
    /// (truncates) the file; `Transactional` stages output (see the module
    /// docs), continuing after a committed checkpoint state if given.
    pub fn open(table: &str, path: PathBuf, lines: JsonLines, mode: SinkMode<'_>) -> Result<Self> {
        let output = match mode {
            SinkMode::Direct => Output::Direct(BufWriter::new(create_file(&path)?)),
            SinkMode::Transactional { resume } => {
                create_parent(&path)?;
                remove_files(&stale_parts(&path)?)?;
                let (committed, next_seq) =
                    match resume.map(SinkState::from_snapshot).transpose()? {
                        Some(Some(SinkState::Ndjson(state))) => {
                            if state.path != path {
                                return Err(written_elsewhere(&state.path, &path));
                            }
                            (state.target_len(), state.next_seq)
                        }
                        None | Some(None) => {
                            create_file(&path)?;
                            (0, 0)
                        }
                        Some(Some(_)) => return Err(another_sinks_state()),
                    };
                Output::Staged(Staging {
                    committed,
                    pending: Vec::new(),
                    next_seq,
                    current: None,
                })
            }
        };
        let encode: Encode = Arc::new(move |batch, out| lines.encode(batch, out));
        Ok(Self {
            table: table.to_string(),
            encoder: OrderedEncoder::new(NdjsonOutput { path, output }, encode),
        })
    }

    fn fail(&self, error: ConnectorError) -> eddy_engine::EngineError {
        error.for_table(&self.table)
    }
}

impl SinkWriter for NdjsonSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        self.encoder
            .write(batch.clone())
            .map_err(|e| e.for_table(&self.table))
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        completed: CheckpointId,
    ) -> EngineResult<StateSnapshot> {
        let state = self.encoder.with_output(|o| {
            let Output::Staged(staging) = &mut o.output else {
                if let Output::Direct(out) = &mut o.output {
                    out.flush().map_err(|e| io_error(&o.path, e))?;
                }
                return Ok(None);
            };
            if let Some(mut part) = staging.current.take() {
                let durable = part
                    .out
                    .flush()
                    .and_then(|_| part.out.get_ref().sync_data());
                durable.map_err(|e| io_error(&part.file, e))?;
                let start = staging.committed + staging.pending.iter().map(|p| p.len).sum::<u64>();
                staging.pending.push(NdjsonPart {
                    file: part.file,
                    start,
                    len: part.len,
                    closed_for: checkpoint,
                });
            }
            // Parts of checkpoints known to be complete are in the final file already.
            let published: u64 = staging
                .pending
                .iter()
                .filter(|p| p.closed_for <= completed)
                .map(|p| p.len)
                .sum();
            staging.committed += published;
            staging.pending.retain(|p| p.closed_for > completed);
            Ok(Some(NdjsonSinkState {
                path: o.path.clone(),
                committed: staging.committed,
                pending: staging.pending.clone(),
                next_seq: staging.next_seq,
            }))
        });
        match state.map_err(|e| self.fail(e))? {
            Some(state) => SinkState::Ndjson(state)
                .to_snapshot()
                .map_err(|e| self.fail(e)),
            None => Ok(StateSnapshot::default()),
        }
    }

    fn flush(&mut self) -> EngineResult<()> {
        let flushed = self.encoder.with_output(|o| match &mut o.output {
            Output::Direct(out) => out.flush().map_err(|e| io_error(&o.path, e)),
            Output::Staged(_) => Ok(()),
        });
        flushed.map_err(|e| self.fail(e))
    }

    fn finish(&mut self) -> EngineResult<()> {
        self.flush()
    }
}

/// Publishes a pre-committed NDJSON sink state: appends each pending part
/// the final file does not hold yet, then cuts the file to the state's
/// length. Safe to run any number of times.
pub fn commit(state: &NdjsonSinkState) -> Result<()> {
    let path = &state.path;
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io_error(path, e))?;
    let mut len = file.metadata().map_err(|e| io_error(path, e))?.len();
    if len < state.committed {
        return Err(ConnectorError::bad_option(
            "path",
            format!(
                "{} holds {len} bytes but {} were published; it was changed outside eddy",
                path.display(),
                state.committed
            ),
        ));
    }
    for part in &state.pending {
        let end = part.start + part.len;
        if len < end {
            if len < part.start {
                return Err(ConnectorError::bad_option(
                    "path",
                    format!(
                        "{} holds {len} bytes, less than the {} published before {}",
                        path.display(),
                        part.start,
                        part.file.display()
                    ),
                ));
            }
            let mut source = File::open(&part.file).map_err(|e| io_error(&part.file, e))?;
            file.set_len(part.start).map_err(|e| io_error(path, e))?;
            file.seek(SeekFrom::Start(part.start))
                .map_err(|e| io_error(path, e))?;
            let copied = std::io::copy(&mut source, &mut file).map_err(|e| io_error(path, e))?;
            if copied != part.len {
                return Err(ConnectorError::bad_option(
                    "path",
                    format!(
                        "{} holds {copied} bytes, {} were staged",
                        part.file.display(),
                        part.len
                    ),
                ));
            }
            file.sync_data().map_err(|e| io_error(path, e))?;
            len = end;
        }
        match std::fs::remove_file(&part.file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&part.file, e)),
        }
    }
    let target = state.target_len();
    if len > target {
        file.set_len(target).map_err(|e| io_error(path, e))?;
        file.sync_data().map_err(|e| io_error(path, e))?;
    }
    sync_dir(path.parent().unwrap_or(Path::new("")))
}

//! The Parquet sink: Parquet files in a directory.
//!
//! A file is visible under its final name (`part-00000.parquet`,
//! `part-00001.parquet`, ...) only once it is complete: it is written as a
//! hidden `.part-NNNNN.parquet.inprogress` and renamed. Without checkpoints
//! the job writes one file, renamed when the job finishes or stops. With
//! checkpoints every checkpoint interval that produced rows closes a file
//! at the barrier, and the file is renamed once the checkpoint completes
//! (exactly-once). A resumed job removes in-progress files of the crashed
//! run and any final file that a checkpoint newer than the one it resumes
//! from had published.

use std::fs::File;
use std::path::{Path, PathBuf};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::{
    another_sinks_state, create_file, files_matching, io_error, remove_files, sync_dir,
    written_elsewhere,
};
use crate::error::{ConnectorError, Result};
use crate::sinks::commit::SinkState;

/// A staged Parquet file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParquetPart {
    /// Its sequence number (in both of its names).
    pub seq: u64,
    /// The checkpoint whose barrier closed it.
    pub closed_for: CheckpointId,
}

/// What a Parquet sink pre-commits at a barrier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParquetSinkState {
    /// The directory.
    pub dir: PathBuf,
    /// Closed files waiting for their checkpoint.
    pub pending: Vec<ParquetPart>,
    /// Sequence number of the next file.
    pub next_seq: u64,
}

fn final_name(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("part-{seq:05}.parquet"))
}

fn staged_name(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!(".part-{seq:05}.parquet.inprogress"))
}

fn part_seq(name: &str) -> Option<u64> {
    name.strip_prefix("part-")?
        .strip_suffix(".parquet")?
        .parse()
        .ok()
}

struct OpenFile {
    seq: u64,
    writer: ArrowWriter<File>,
}

/// Writes Parquet files into a directory.
pub struct ParquetSink {
    table: String,
    dir: PathBuf,
    schema: SchemaRef,
    staged: bool,
    current: Option<OpenFile>,
    pending: Vec<ParquetPart>,
    next_seq: u64,
}

impl ParquetSink {
    /// A sink for `table` writing into `dir` (see the module docs).
    pub fn open(table: &str, dir: &Path, schema: SchemaRef, mode: SinkMode<'_>) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        remove_files(&files_matching(dir, |n| {
            n.starts_with(".part-") && n.ends_with(".inprogress")
        })?)?;
        let mut sink = Self {
            table: table.to_string(),
            dir: dir.to_path_buf(),
            schema,
            staged: false,
            current: None,
            pending: Vec::new(),
            next_seq: 0,
        };
        match mode {
            SinkMode::Direct => {
                remove_files(&files_matching(dir, |n| part_seq(n).is_some())?)?;
                sink.start_file()?;
            }
            SinkMode::Transactional { resume } => {
                sink.staged = true;
                if let Some(state) = resume.map(SinkState::from_snapshot).transpose()?.flatten() {
                    let SinkState::Parquet(state) = state else {
                        return Err(another_sinks_state());
                    };
                    if state.dir != dir {
                        return Err(written_elsewhere(&state.dir, dir));
                    }
                    sink.next_seq = state.next_seq;
                }
                let newer = sink.next_seq;
                remove_files(&files_matching(dir, |n| {
                    part_seq(n).is_some_and(|s| s >= newer)
                })?)?;
            }
        }
        Ok(sink)
    }

    fn start_file(&mut self) -> Result<()> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let file = create_file(&staged_name(&self.dir, seq))?;
        let writer = ArrowWriter::try_new(file, self.schema.clone(), None)?;
        self.current = Some(OpenFile { seq, writer });
        Ok(())
    }

    /// Closes the open file durably; returns its sequence number.
    fn close_file(&mut self) -> Result<Option<u64>> {
        let Some(open) = self.current.take() else {
            return Ok(None);
        };
        let file = open.writer.into_inner()?;
        file.sync_all()
            .map_err(|e| io_error(&staged_name(&self.dir, open.seq), e))?;
        Ok(Some(open.seq))
    }

    fn fail(&self, error: ConnectorError) -> eddy_engine::EngineError {
        error.for_table(&self.table)
    }
}

impl SinkWriter for ParquetSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        if self.current.is_none() {
            self.start_file().map_err(|e| self.fail(e))?;
        }
        let result = match self.current.as_mut() {
            Some(open) => open.writer.write(batch).map_err(ConnectorError::from),
            None => Ok(()),
        };
        result.map_err(|e| self.fail(e))
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        completed: CheckpointId,
    ) -> EngineResult<StateSnapshot> {
        // The last file of a job that never wrote a row still carries the schema.
        if checkpoint == CheckpointId::MAX && self.next_seq == 0 && self.current.is_none() {
            self.start_file().map_err(|e| self.fail(e))?;
        }
        if let Some(seq) = self.close_file().map_err(|e| self.fail(e))? {
            self.pending.push(ParquetPart {
                seq,
                closed_for: checkpoint,
            });
        }
        self.pending.retain(|p| p.closed_for > completed);
        let state = ParquetSinkState {
            dir: self.dir.clone(),
            pending: self.pending.clone(),
            next_seq: self.next_seq,
        };
        SinkState::Parquet(state)
            .to_snapshot()
            .map_err(|e| self.fail(e))
    }

    fn finish(&mut self) -> EngineResult<()> {
        if self.staged {
            return Ok(());
        }
        let result = (|| {
            if let Some(seq) = self.close_file()? {
                let from = staged_name(&self.dir, seq);
                let to = final_name(&self.dir, seq);
                std::fs::rename(&from, &to).map_err(|e| io_error(&to, e))?;
                sync_dir(&self.dir)?;
            }
            Ok(())
        })();
        result.map_err(|e| self.fail(e))
    }
}

/// Publishes a pre-committed Parquet sink state: renames each pending file
/// to its final name (a file already renamed is left as it is).
pub fn commit(state: &ParquetSinkState) -> Result<()> {
    for part in &state.pending {
        let staged = staged_name(&state.dir, part.seq);
        let done = final_name(&state.dir, part.seq);
        if staged.exists() {
            std::fs::rename(&staged, &done).map_err(|e| io_error(&done, e))?;
        } else if !done.exists() {
            return Err(ConnectorError::bad_option(
                "path",
                format!("{} was staged but is gone", staged.display()),
            ));
        }
    }
    sync_dir(&state.dir)
}

//! The rolling file sink: a directory of files (Parquet, or NDJSON with
//! rolling or partitioning options), rolled by rows, bytes, time and
//! checkpoints, optionally partitioned Hive style.
//!
//! In: result batches. Out: complete files under
//! `DIR/<partition>/part-<UTC time opened>-<seq>.<ext>`; names sort by the
//! time a file was opened, and the sequence number (checkpointed, so it
//! continues after a restart) keeps them unique. A file is written under a
//! hidden `.part-....inprogress` name beside its final one and renamed
//! when complete:
//!
//! ```text
//!  no checkpoints: renamed when it rolls (rolling_rows / rolling_bytes / rolling_interval) or the job ends
//!  checkpoints:    closed when it rolls or at a barrier; renamed once that checkpoint completes
//! ```
//!
//! A resumed job removes in-progress files left by the crashed run, and
//! final files with a sequence number its checkpoint had not reached (output
//! a newer, unusable checkpoint had published), so that nothing is there
//! twice. `rolling_interval` is processing time, checked as rows arrive.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::format::{FileFormat, FormatWriter};
use super::partition::PartitionBy;
use super::{
    another_sinks_state, create_file, io_error, remove_files, sync_dir, written_elsewhere,
};
use crate::error::{ConnectorError, Result};
use crate::sinks::commit::SinkState;

/// When a file is closed and a new one started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RollingPolicy {
    /// After this many rows.
    pub rows: Option<u64>,
    /// After this many bytes.
    pub bytes: Option<u64>,
    /// After the file has been open this long (processing time).
    pub interval: Option<Duration>,
}

/// A closed file waiting for its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedFile {
    /// Its final path, relative to the directory.
    pub name: String,
    /// The checkpoint whose interval it belongs to.
    pub closed_for: CheckpointId,
}

/// What a rolling sink pre-commits at a barrier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSetState {
    /// The directory.
    pub dir: PathBuf,
    /// Closed files waiting for their checkpoint to complete.
    pub pending: Vec<StagedFile>,
    /// Sequence number of the next file.
    pub next_seq: u64,
}

struct OpenFile {
    name: String,
    writer: Box<dyn FormatWriter>,
    rows: u64,
    opened: Instant,
}

/// Writes a rolling, optionally partitioned set of files.
pub struct RollingFileSink {
    table: String,
    dir: PathBuf,
    format: Box<dyn FileFormat>,
    partition: PartitionBy,
    policy: RollingPolicy,
    staged: bool,
    open: BTreeMap<String, OpenFile>,
    /// Closed since the last barrier (checkpoints).
    closed: Vec<String>,
    pending: Vec<StagedFile>,
    next_seq: u64,
    wrote_any: bool,
}

/// The hidden name a file is written under.
fn in_progress(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    final_path.with_file_name(format!(".{name}.inprogress"))
}

/// The sequence number in a final file name `part-<time>-<seq>.<ext>`.
fn file_seq(name: &str) -> Option<u64> {
    let stem = name.strip_prefix("part-")?.rsplit_once('.')?.0;
    stem.rsplit_once('-')?.1.parse().ok()
}

/// Every file under `dir`, recursively (an absent directory has none).
fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        let path = entry.path();
        if entry.file_type().map_err(|e| io_error(&path, e))?.is_dir() {
            walk(&path, found)?;
        } else {
            found.push(path);
        }
    }
    Ok(())
}

/// Removes files under `dir` whose names satisfy `remove`.
fn remove_where(dir: &Path, remove: impl Fn(&str) -> bool) -> Result<()> {
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    files.retain(|file| {
        file.file_name()
            .is_some_and(|n| remove(&n.to_string_lossy()))
    });
    remove_files(&files)
}

impl RollingFileSink {
    /// A sink for `table` writing `format` files into `dir` (see the module
    /// docs).
    pub fn open(
        table: &str,
        dir: &Path,
        format: Box<dyn FileFormat>,
        partition: PartitionBy,
        policy: RollingPolicy,
        mode: SinkMode<'_>,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        remove_where(dir, |n| {
            n.starts_with(".part-") && n.ends_with(".inprogress")
        })?;
        let mut sink = Self {
            table: table.to_string(),
            dir: dir.to_path_buf(),
            format,
            partition,
            policy,
            staged: false,
            open: BTreeMap::new(),
            closed: Vec::new(),
            pending: Vec::new(),
            next_seq: 0,
            wrote_any: false,
        };
        match mode {
            SinkMode::Direct => {
                // A fresh run replaces the previous run's output.
                remove_where(dir, |n| file_seq(n).is_some())?;
            }
            SinkMode::Transactional { resume } => {
                sink.staged = true;
                if let Some(state) = resume.map(SinkState::from_snapshot).transpose()?.flatten() {
                    let SinkState::Files(state) = state else {
                        return Err(another_sinks_state());
                    };
                    if state.dir != dir {
                        return Err(written_elsewhere(&state.dir, dir));
                    }
                    sink.next_seq = state.next_seq;
                }
                let newer = sink.next_seq;
                remove_where(dir, |n| file_seq(n).is_some_and(|s| s >= newer))?;
            }
        }
        Ok(sink)
    }

    fn start_file(&mut self, partition: &str) -> Result<()> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let opened = chrono_stamp();
        let name = format!(
            "{partition}part-{opened}-{seq:06}.{}",
            self.format.extension()
        );
        let file = create_file(&in_progress(&self.dir.join(&name)))?;
        let writer = self.format.create(file)?;
        self.open.insert(
            partition.to_string(),
            OpenFile {
                name,
                writer,
                rows: 0,
                opened: Instant::now(),
            },
        );
        Ok(())
    }

    /// Closes the file of `partition` durably; without checkpoints it is
    /// published at once.
    fn close_file(&mut self, partition: &str) -> Result<()> {
        let Some(open) = self.open.remove(partition) else {
            return Ok(());
        };
        let final_path = self.dir.join(&open.name);
        let staged = in_progress(&final_path);
        let file = open.writer.close()?;
        file.sync_all().map_err(|e| io_error(&staged, e))?;
        if self.staged {
            self.closed.push(open.name);
        } else {
            std::fs::rename(&staged, &final_path).map_err(|e| io_error(&final_path, e))?;
            if let Some(parent) = final_path.parent() {
                sync_dir(parent)?;
            }
        }
        Ok(())
    }

    fn due(&self, file: &OpenFile) -> bool {
        self.policy.rows.is_some_and(|rows| file.rows >= rows)
            || self
                .policy
                .bytes
                .is_some_and(|bytes| file.writer.bytes() >= bytes)
            || self
                .policy
                .interval
                .is_some_and(|interval| file.opened.elapsed() >= interval)
    }

    fn write_part(&mut self, partition: &str, rows: &RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < rows.num_rows() {
            if !self.open.contains_key(partition) {
                self.start_file(partition)?;
            }
            let Some(file) = self.open.get_mut(partition) else {
                return Ok(());
            };
            // Split a batch so that rolling_rows is exact.
            let room = self
                .policy
                .rows
                .map_or(u64::MAX, |limit| limit.saturating_sub(file.rows).max(1));
            let take = (rows.num_rows() - offset).min(room.min(usize::MAX as u64) as usize);
            file.writer.write(&rows.slice(offset, take))?;
            file.rows += take as u64;
            offset += take;
            let due = self.open.get(partition).is_some_and(|f| self.due(f));
            if due {
                self.close_file(partition)?;
            }
        }
        Ok(())
    }

    fn fail(&self, error: ConnectorError) -> eddy_engine::EngineError {
        error.for_table(&self.table)
    }

    fn close_all(&mut self) -> Result<()> {
        let partitions: Vec<String> = self.open.keys().cloned().collect();
        for partition in partitions {
            self.close_file(&partition)?;
        }
        Ok(())
    }
}

/// The current UTC time as `YYYYMMDDTHHMMSSmmmZ` (sorts as it reads).
fn chrono_stamp() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    datafusion::arrow::temporal_conversions::timestamp_ms_to_datetime(ms)
        .map(|t| t.format("%Y%m%dT%H%M%S%3fZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

impl SinkWriter for RollingFileSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let result = (|| {
            for (partition, rows) in self.partition.split(batch)? {
                self.write_part(&partition, &rows)?;
            }
            self.wrote_any = true;
            // Files of partitions that got nothing still roll on time.
            if self.policy.interval.is_some() {
                let due: Vec<String> = self
                    .open
                    .iter()
                    .filter(|(_, f)| self.due(f))
                    .map(|(p, _)| p.clone())
                    .collect();
                for partition in due {
                    self.close_file(&partition)?;
                }
            }
            Ok(())
        })();
        result.map_err(|e| self.fail(e))
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        completed: CheckpointId,
    ) -> EngineResult<StateSnapshot> {
        let result = (|| {
            // The last file of an unpartitioned job that never wrote a row
            // still carries the schema.
            if checkpoint == CheckpointId::MAX
                && !self.wrote_any
                && self.next_seq == 0
                && matches!(self.partition, PartitionBy::None)
            {
                self.start_file("")?;
            }
            self.close_all()?;
            for name in self.closed.drain(..) {
                self.pending.push(StagedFile {
                    name,
                    closed_for: checkpoint,
                });
            }
            self.pending.retain(|p| p.closed_for > completed);
            SinkState::Files(FileSetState {
                dir: self.dir.clone(),
                pending: self.pending.clone(),
                next_seq: self.next_seq,
            })
            .to_snapshot()
        })();
        result.map_err(|e| self.fail(e))
    }

    fn finish(&mut self) -> EngineResult<()> {
        if self.staged {
            return Ok(());
        }
        let result = (|| {
            if !self.wrote_any && self.next_seq == 0 && matches!(self.partition, PartitionBy::None)
            {
                self.start_file("")?;
            }
            self.close_all()
        })();
        result.map_err(|e| self.fail(e))
    }
}

/// Publishes a pre-committed file set: renames each pending file to its
/// final name (one already renamed is left as it is).
pub fn commit(state: &FileSetState) -> Result<()> {
    let mut dirs = BTreeSet::new();
    for file in &state.pending {
        let done = state.dir.join(&file.name);
        let staged = in_progress(&done);
        if staged.exists() {
            std::fs::rename(&staged, &done).map_err(|e| io_error(&done, e))?;
        } else if !done.exists() {
            return Err(ConnectorError::bad_option(
                "path",
                format!("{} was staged but is gone", staged.display()),
            ));
        }
        if let Some(parent) = done.parent() {
            dirs.insert(parent.to_path_buf());
        }
    }
    for dir in dirs {
        sync_dir(&dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_come_out_of_final_names_only() {
        assert_eq!(
            file_seq("part-20261130T094848123Z-000042.parquet"),
            Some(42)
        );
        assert_eq!(file_seq("part-20261130T094848123Z-000042.ndjson"), Some(42));
        assert_eq!(
            file_seq(".part-20261130T094848123Z-000042.parquet.inprogress"),
            None
        );
        assert_eq!(file_seq("notes.txt"), None);
        assert_eq!(
            in_progress(Path::new("d/country=US/part-x-000001.parquet")),
            Path::new("d/country=US/.part-x-000001.parquet.inprogress")
        );
    }
}

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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::format::{FileFormat, FormatWriter};
use super::partition::PartitionBy;
use super::target::{is_in_progress, publish_all, FileTarget};
use super::{another_sinks_state, written_elsewhere};
use crate::error::{ConnectorError, Result};
use crate::sinks::commit::SinkState;
use crate::storage::Location;

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
    /// The directory: a local path or a bucket prefix (`s3://lake/x`).
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
    location: Location,
    target: FileTarget,
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

/// The sequence number in a final file name `part-<time>-<seq>.<ext>`.
fn file_seq(name: &str) -> Option<u64> {
    let stem = name.strip_prefix("part-")?.rsplit_once('.')?.0;
    stem.rsplit_once('-')?.1.parse().ok()
}

impl RollingFileSink {
    /// A sink for `table` writing `format` files into `dir` (see the module
    /// docs).
    pub fn open(
        table: &str,
        dir: &Location,
        format: Box<dyn FileFormat>,
        partition: PartitionBy,
        policy: RollingPolicy,
        mode: SinkMode<'_>,
    ) -> Result<Self> {
        let target = FileTarget::open(dir)?;
        target.remove_where(is_in_progress)?;
        let mut sink = Self {
            table: table.to_string(),
            location: dir.clone(),
            target,
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
                sink.target.remove_where(|n| file_seq(n).is_some())?;
            }
            SinkMode::Transactional { resume } => {
                sink.staged = true;
                if let Some(state) = resume.map(SinkState::from_snapshot).transpose()?.flatten() {
                    let SinkState::Files(state) = state else {
                        return Err(another_sinks_state());
                    };
                    let now = PathBuf::from(dir.to_string());
                    if state.dir != now {
                        return Err(written_elsewhere(&state.dir, &now));
                    }
                    sink.next_seq = state.next_seq;
                }
                let newer = sink.next_seq;
                sink.target
                    .remove_where(|n| file_seq(n).is_some_and(|s| s >= newer))?;
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
        let file = self.target.create(&name)?;
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
        let file = open.writer.close()?;
        self.target.close(&open.name, file, !self.staged)?;
        if self.staged {
            self.closed.push(open.name);
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
                dir: PathBuf::from(self.location.to_string()),
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

/// Publishes a pre-committed file set: gives each pending file its final
/// name (one already published is left as it is).
pub fn commit(state: &FileSetState) -> Result<()> {
    let location = Location::parse(&state.dir.to_string_lossy())?;
    let names: Vec<String> = state.pending.iter().map(|f| f.name.clone()).collect();
    publish_all(&location, &names)
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
    }
}

//! The Delta Lake sink: result rows as Parquet files in a table directory,
//! published by commits to the table's log.
//!
//! In: result batches in the sink's schema. Out: files
//! `DIR/<partition>/part-<seq>-<run>.zstd.parquet` and commits in
//! `DIR/_delta_log/`. A file is invisible to readers until a commit adds
//! it, so files are written under their final names and nothing is
//! renamed.
//!
//! ```text
//!  no checkpoints: a commit when a file rolls (target_file_size) and one at the end
//!  checkpoints:    files closed at each barrier; checkpoint n's files are one commit,
//!                  made once n is complete, carrying txn { appId: <run>, version: n }
//! ```
//!
//! **Exactly once.** A commit names the sink's run (`appId`) and the
//! checkpoint (`version`) in Delta's app-transaction action. Committing a
//! checkpoint first reads the run's last transaction from the log, so a job
//! resumed after a crash, which commits its checkpoint again, never adds
//! the same files twice. A resumed job whose run's last transaction is
//! newer than the checkpoint it resumes from (a newer checkpoint was
//! published, then could not be read back) removes that checkpoint's files
//! in one commit and goes on as a new run, so no row is there twice.
//!
//! A table that does not exist is created with the sink's schema
//! ([`super::schema`]); one that exists is appended to when its columns
//! and partitioning match, and refused before the job runs otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::log::{self, Action, Add, Remove, Snapshot, Txn};
use super::schema;
use crate::error::{ConnectorError, Result};
use crate::sinks::format::{FileFormat, FormatWriter};
use crate::sinks::partition::{directory_values, PartitionBy};
use crate::sinks::{create_file, io_error};

/// What a Delta sink's options say.
#[derive(Debug, Clone)]
pub struct DeltaOptions {
    /// The table directory.
    pub dir: PathBuf,
    /// Partition columns (by name, in directory order).
    pub partition_columns: Vec<String>,
    /// Roll a file once it holds about this many bytes.
    pub target_file_size: u64,
    /// Scale-out task number, carried in file names and the run's id.
    pub task: Option<u32>,
}

/// A file the sink wrote, ready to be added to the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFile {
    /// Relative to the table directory (not URL-encoded).
    pub path: String,
    /// Partition values.
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Bytes.
    pub size: i64,
    /// Rows.
    pub rows: u64,
}

impl DataFile {
    fn add(&self, now: i64) -> Action {
        Action::Add(Add {
            path: log::encode_path(&self.path),
            partition_values: self.partition_values.clone(),
            size: self.size,
            modification_time: now,
            data_change: true,
            stats: Some(format!("{{\"numRecords\":{}}}", self.rows)),
            deletion_vector: None,
        })
    }
}

/// A closed file waiting for its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingFile {
    /// The file.
    pub file: DataFile,
    /// The checkpoint whose interval it belongs to.
    pub closed_for: CheckpointId,
}

/// What a Delta sink pre-commits at a barrier (its checkpointed state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaSinkState {
    /// Always `delta` (tells the state from other sinks').
    pub format: String,
    /// The table directory.
    pub dir: PathBuf,
    /// The run's id: the `appId` of its commits.
    pub app_id: String,
    /// The checkpoint this state belongs to.
    pub checkpoint: CheckpointId,
    /// Files waiting for their checkpoint to complete.
    pub pending: Vec<PendingFile>,
    /// Sequence number of the next file.
    pub next_seq: u64,
}

impl DeltaSinkState {
    /// The state a snapshot holds, `None` when it holds another sink's.
    pub fn from_snapshot(snapshot: &StateSnapshot) -> Result<Option<Self>> {
        if snapshot.meta.get("format").and_then(|f| f.as_str()) != Some("delta") {
            return Ok(None);
        }
        snapshot
            .meta()
            .map(Some)
            .map_err(|e| ConnectorError::bad_option("checkpoint", e.to_string()))
    }
}

struct OpenFile {
    path: String,
    partition_values: BTreeMap<String, Option<String>>,
    writer: Box<dyn FormatWriter>,
    rows: u64,
}

/// What each sink table committed in a run (its directory and counts),
/// shared by the connector's commit hook and the sinks themselves.
pub type Committed = std::sync::Arc<std::sync::Mutex<BTreeMap<String, (PathBuf, CommitCounts)>>>;

/// Adds `counts` to what `table` committed.
pub fn count(committed: &Committed, table: &str, dir: &Path, counts: CommitCounts) {
    if let Ok(mut committed) = committed.lock() {
        let entry = committed
            .entry(table.to_string())
            .or_insert_with(|| (dir.to_path_buf(), CommitCounts::default()));
        entry.1.commits += counts.commits;
        entry.1.files += counts.files;
        entry.1.bytes += counts.bytes;
    }
}

/// Counts of what a sink committed, for the run summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitCounts {
    /// Commits made.
    pub commits: u64,
    /// Files added.
    pub files: u64,
    /// Bytes added.
    pub bytes: u64,
}

/// Writes a Delta table. See the module docs.
pub struct DeltaSink {
    table: String,
    options: DeltaOptions,
    physical: SchemaRef,
    format: Box<dyn FileFormat>,
    partition: PartitionBy,
    staged: bool,
    app_id: String,
    open: BTreeMap<String, OpenFile>,
    /// Closed since the last barrier (or, without checkpoints, the last commit).
    closed: Vec<DataFile>,
    pending: Vec<PendingFile>,
    next_seq: u64,
    /// The log as this sink last read it (direct mode commits itself).
    log: Snapshot,
    /// Where direct mode counts its commits.
    committed: Committed,
}

/// A new run's id: the table, the task and the time it started.
fn new_app_id(table: &str, task: Option<u32>) -> String {
    let task = task.map(|t| format!("-task-{t}")).unwrap_or_default();
    format!(
        "eddy-{table}{task}-{}-{}",
        log::now_ms(),
        std::process::id()
    )
}

/// Creates the table at `dir` with `schema` and `partitions` unless it
/// exists; an existing one must take the sink's rows. Returns the log.
pub fn create_or_check(
    dir: &Path,
    sink: &datafusion::arrow::datatypes::Schema,
    partitions: &[String],
) -> Result<Snapshot> {
    let schema_string = schema::to_delta(sink)?;
    let mut state = Snapshot::default();
    if log::exists(dir)? {
        state = log::snapshot(dir, None)?;
    }
    log::commit_next(dir, &mut state, |current| {
        if let Some(metadata) = &current.metadata {
            schema::check_append(
                &metadata.schema_string,
                &metadata.partition_columns,
                sink,
                partitions,
            )?;
            super::check_protocol(current, true)?;
            return Ok(None);
        }
        Ok(Some(vec![
            commit_info("CREATE TABLE", serde_json::json!({})),
            Action::Protocol(log::Protocol {
                min_reader_version: 1,
                min_writer_version: 2,
                reader_features: None,
                writer_features: None,
            }),
            Action::MetaData(log::Metadata {
                id: table_id(),
                name: None,
                description: None,
                format: log::Format {
                    provider: "parquet".into(),
                    options: BTreeMap::new(),
                },
                schema_string: schema_string.clone(),
                partition_columns: partitions.to_vec(),
                configuration: BTreeMap::new(),
                created_time: Some(log::now_ms()),
            }),
        ]))
    })?;
    Ok(state)
}

/// A table id: a random (version 4) UUID, its bits from the standard
/// library's randomly keyed hasher.
fn table_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let random = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        hasher.finish()
    };
    let bits = ((random() as u128) << 64 | random() as u128)
        & !(0xf000u128 << 64 | 0xc000u128 << 48)
        | (0x4000u128 << 64)
        | (0x8000u128 << 48);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The `commitInfo` action of a commit.
fn commit_info(operation: &str, parameters: serde_json::Value) -> Action {
    Action::CommitInfo(serde_json::json!({
        "timestamp": log::now_ms(),
        "operation": operation,
        "operationParameters": parameters,
        "engineInfo": concat!("eddy/", env!("CARGO_PKG_VERSION")),
        "isBlindAppend": true,
    }))
}

impl DeltaSink {
    /// Opens the sink for `table` (see the module docs): creates or checks
    /// the table, and on resume takes the run over from its checkpointed
    /// state.
    pub fn open(
        table: &str,
        sink_schema: &SchemaRef,
        format: Box<dyn FileFormat>,
        partition: PartitionBy,
        options: DeltaOptions,
        mode: SinkMode<'_>,
        committed: Committed,
    ) -> Result<Self> {
        let dir = options.dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let mut log = create_or_check(&dir, sink_schema, &options.partition_columns)?;
        let mut sink = Self {
            table: table.to_string(),
            physical: schema::physical_schema(&partition.file_schema(sink_schema)),
            app_id: new_app_id(table, options.task),
            options,
            format,
            partition,
            staged: false,
            open: BTreeMap::new(),
            closed: Vec::new(),
            pending: Vec::new(),
            next_seq: 0,
            log: Snapshot::default(),
            committed,
        };
        if let SinkMode::Transactional { resume } = mode {
            sink.staged = true;
            let state = resume
                .map(DeltaSinkState::from_snapshot)
                .transpose()?
                .flatten();
            if let Some(state) = state {
                if state.dir != dir {
                    return Err(crate::sinks::written_elsewhere(&state.dir, &dir));
                }
                sink.next_seq = state.next_seq;
                let resumed_at = log::txn_version(state.checkpoint);
                let committed = log.txns.get(&state.app_id).copied().unwrap_or(-1);
                if committed > resumed_at {
                    roll_back(&dir, &mut log, &state.app_id, resumed_at)?;
                } else if state.checkpoint != CheckpointId::MAX {
                    // Go on as the same run (a finished run's final
                    // checkpoint is the last any run can have: start anew).
                    sink.app_id = state.app_id;
                }
            }
        }
        sink.log = log;
        Ok(sink)
    }

    fn start_file(&mut self, partition: &str) -> Result<()> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let path = format!("{partition}part-{seq:05}-{}.zstd.parquet", self.app_id);
        let file = create_file(&self.options.dir.join(&path))?;
        let writer = self.format.create(file)?;
        self.open.insert(
            partition.to_string(),
            OpenFile {
                path,
                partition_values: directory_values(partition).into_iter().collect(),
                writer,
                rows: 0,
            },
        );
        Ok(())
    }

    fn close_file(&mut self, partition: &str) -> Result<()> {
        let Some(open) = self.open.remove(partition) else {
            return Ok(());
        };
        let full = self.options.dir.join(&open.path);
        let file = open.writer.close()?;
        file.sync_all().map_err(|e| io_error(&full, e))?;
        let size = file.metadata().map_err(|e| io_error(&full, e))?.len();
        self.closed.push(DataFile {
            path: open.path,
            partition_values: open.partition_values,
            size: size as i64,
            rows: open.rows,
        });
        Ok(())
    }

    fn close_all(&mut self) -> Result<()> {
        let partitions: Vec<String> = self.open.keys().cloned().collect();
        for partition in partitions {
            self.close_file(&partition)?;
        }
        Ok(())
    }

    /// Without checkpoints: adds the closed files to the table now.
    fn commit_closed(&mut self) -> Result<()> {
        if self.staged || self.closed.is_empty() {
            return Ok(());
        }
        let files = std::mem::take(&mut self.closed);
        let now = log::now_ms();
        let mut actions = vec![commit_info(
            "WRITE",
            serde_json::json!({ "mode": "Append" }),
        )];
        actions.extend(files.iter().map(|f| f.add(now)));
        log::commit_next(&self.options.dir, &mut self.log, |_| {
            Ok(Some(actions.clone()))
        })?;
        let counts = CommitCounts {
            commits: 1,
            files: files.len() as u64,
            bytes: files.iter().map(|f| f.size as u64).sum(),
        };
        count(&self.committed, &self.table, &self.options.dir, counts);
        Ok(())
    }

    fn write_rows(&mut self, batch: &RecordBatch) -> Result<()> {
        for (partition, rows) in self.partition.split(batch)? {
            if !self.open.contains_key(&partition) {
                self.start_file(&partition)?;
            }
            let Some(file) = self.open.get_mut(&partition) else {
                continue;
            };
            let columns = rows
                .columns()
                .iter()
                .zip(self.physical.fields())
                .map(|(c, f)| {
                    if c.data_type() == f.data_type() {
                        Ok(c.clone())
                    } else {
                        cast(c, f.data_type())
                    }
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            file.writer
                .write(&RecordBatch::try_new(self.physical.clone(), columns)?)?;
            file.rows += rows.num_rows() as u64;
            if file.writer.bytes() >= self.options.target_file_size {
                self.close_file(&partition)?;
            }
        }
        self.commit_closed()
    }
}

/// Removes the files a run added in commits after its checkpoint
/// `checkpoint` (output of a newer checkpoint the job could not resume
/// from), in one commit.
fn roll_back(dir: &Path, log: &mut Snapshot, app_id: &str, checkpoint: i64) -> Result<()> {
    let added = log::files_added_after(dir, app_id, checkpoint)?;
    let now = log::now_ms();
    log::commit_next(dir, log, |current| {
        let removes: Vec<Action> = current
            .files
            .iter()
            .filter(|f| added.contains(&f.path))
            .map(|f| {
                Action::Remove(Remove {
                    path: f.path.clone(),
                    deletion_timestamp: Some(now),
                    data_change: true,
                    partition_values: Some(f.partition_values.clone()),
                    size: Some(f.size),
                })
            })
            .collect();
        if removes.is_empty() {
            return Ok(None);
        }
        let mut actions = vec![commit_info(
            "DELETE",
            serde_json::json!({ "reason": format!("{app_id}: output of checkpoints after {checkpoint}, which the job resumed without") }),
        )];
        actions.extend(removes);
        Ok(Some(actions))
    })?;
    Ok(())
}

/// Publishes what a Delta sink's state holds: each checkpoint's files in
/// one commit, unless the run's transaction shows it committed already.
/// `log` is the table's log as last read (refreshed here). Returns the
/// commits made.
pub fn commit(state: &DeltaSinkState, log: &mut Snapshot) -> Result<CommitCounts> {
    let mut counts = CommitCounts::default();
    let mut by_checkpoint: BTreeMap<CheckpointId, Vec<&DataFile>> = BTreeMap::new();
    for pending in &state.pending {
        by_checkpoint
            .entry(pending.closed_for)
            .or_default()
            .push(&pending.file);
    }
    if by_checkpoint.is_empty() {
        return Ok(counts);
    }
    log::refresh(&state.dir, log)?;
    for (checkpoint, files) in by_checkpoint {
        let version = log::txn_version(checkpoint);
        let now = log::now_ms();
        let made = log::commit_next(&state.dir, log, |current| {
            if current
                .txns
                .get(&state.app_id)
                .is_some_and(|&v| v >= version)
            {
                return Ok(None);
            }
            let mut actions = vec![commit_info(
                "STREAMING UPDATE",
                serde_json::json!({
                    "outputMode": "Append",
                    "queryId": state.app_id,
                    "epochId": version.to_string(),
                }),
            )];
            actions.extend(files.iter().map(|f| f.add(now)));
            actions.push(Action::Txn(Txn {
                app_id: state.app_id.clone(),
                version,
                last_updated: Some(now),
            }));
            Ok(Some(actions))
        })?;
        if made.is_some() {
            counts.commits += 1;
            counts.files += files.len() as u64;
            counts.bytes += files.iter().map(|f| f.size as u64).sum::<u64>();
        }
    }
    Ok(counts)
}

impl SinkWriter for DeltaSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.write_rows(batch).map_err(|e| e.for_table(&self.table))
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        completed: CheckpointId,
    ) -> EngineResult<StateSnapshot> {
        let result = (|| {
            self.close_all()?;
            for file in self.closed.drain(..) {
                self.pending.push(PendingFile {
                    file,
                    closed_for: checkpoint,
                });
            }
            self.pending.retain(|p| p.closed_for > completed);
            StateSnapshot::with_meta(&DeltaSinkState {
                format: "delta".into(),
                dir: self.options.dir.clone(),
                app_id: self.app_id.clone(),
                checkpoint,
                pending: self.pending.clone(),
                next_seq: self.next_seq,
            })
            .map_err(|e| ConnectorError::bad_option("checkpoint", e.to_string()))
        })();
        result.map_err(|e| e.for_table(&self.table))
    }

    fn finish(&mut self) -> EngineResult<()> {
        if self.staged {
            return Ok(());
        }
        let result = (|| {
            self.close_all()?;
            self.commit_closed()
        })();
        result.map_err(|e| e.for_table(&self.table))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::basic::Compression;

    use super::*;
    use crate::sinks::format::ParquetFormat;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("country", DataType::Utf8, true),
        ]))
    }

    fn batch(ids: &[i64]) -> RecordBatch {
        let countries: Vec<Option<&str>> = ids
            .iter()
            .map(|i| if i % 2 == 0 { Some("US") } else { None })
            .collect();
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(countries)),
            ],
        )
        .unwrap()
    }

    fn open(dir: &Path, mode: SinkMode<'_>) -> DeltaSink {
        let partition = PartitionBy::parse(Some("country"), &schema()).unwrap();
        let physical = schema::physical_schema(&partition.file_schema(&schema()));
        DeltaSink::open(
            "t",
            &schema(),
            Box::new(ParquetFormat::new(&physical, Compression::SNAPPY, None)),
            partition,
            DeltaOptions {
                dir: dir.to_path_buf(),
                partition_columns: vec!["country".into()],
                target_file_size: u64::MAX,
                task: None,
            },
            mode,
            Committed::default(),
        )
        .unwrap()
    }

    fn rows(dir: &Path) -> u64 {
        log::snapshot(dir, None)
            .unwrap()
            .files
            .iter()
            .map(|f| {
                let stats: serde_json::Value =
                    serde_json::from_str(f.stats.as_deref().unwrap()).unwrap();
                stats["numRecords"].as_u64().unwrap()
            })
            .sum()
    }

    #[test]
    fn a_checkpoint_is_committed_once_however_often_it_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = open(dir.path(), SinkMode::Transactional { resume: None });
        sink.write(&batch(&[1, 2, 3])).unwrap();
        let first = sink.precommit(1, 0).unwrap();
        assert_eq!(rows(dir.path()), 0, "nothing is visible before the commit");
        let state = DeltaSinkState::from_snapshot(&first).unwrap().unwrap();
        let mut log = log::snapshot(dir.path(), None).unwrap();
        assert_eq!(commit(&state, &mut log).unwrap().commits, 1);
        // The coordinator commits again after a restart: nothing changes.
        assert_eq!(commit(&state, &mut log).unwrap().commits, 0);
        let mut fresh = log::snapshot(dir.path(), None).unwrap();
        assert_eq!(commit(&state, &mut fresh).unwrap().commits, 0);
        assert_eq!(rows(dir.path()), 3);
        assert_eq!(fresh.version, 1);

        // Resumed from checkpoint 1, the sink goes on as the same run.
        let mut resumed = open(
            dir.path(),
            SinkMode::Transactional {
                resume: Some(&first),
            },
        );
        resumed.write(&batch(&[4, 5])).unwrap();
        let second = resumed.precommit(2, 1).unwrap();
        let state = DeltaSinkState::from_snapshot(&second).unwrap().unwrap();
        assert_eq!(commit(&state, &mut fresh).unwrap().commits, 1);
        assert_eq!(rows(dir.path()), 5);
        assert_eq!(fresh.txns[&state.app_id], 2);
    }

    #[test]
    fn output_of_a_checkpoint_the_job_resumed_without_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = open(dir.path(), SinkMode::Transactional { resume: None });
        sink.write(&batch(&[1, 2])).unwrap();
        let first = sink.precommit(1, 0).unwrap();
        let mut log = log::snapshot(dir.path(), None).unwrap();
        commit(
            &DeltaSinkState::from_snapshot(&first).unwrap().unwrap(),
            &mut log,
        )
        .unwrap();
        sink.write(&batch(&[3, 4, 5])).unwrap();
        let second = sink.precommit(2, 1).unwrap();
        commit(
            &DeltaSinkState::from_snapshot(&second).unwrap().unwrap(),
            &mut log,
        )
        .unwrap();
        assert_eq!(rows(dir.path()), 5);

        // Checkpoint 2 turned out unreadable: the job resumes from 1, and
        // the rows checkpoint 2 published leave the table.
        let mut resumed = open(
            dir.path(),
            SinkMode::Transactional {
                resume: Some(&first),
            },
        );
        assert_eq!(rows(dir.path()), 2);
        // It writes them again as a new run, whose checkpoint 2 commits.
        resumed.write(&batch(&[3, 4, 5])).unwrap();
        let again = resumed.precommit(2, 1).unwrap();
        let state = DeltaSinkState::from_snapshot(&again).unwrap().unwrap();
        let first_app = DeltaSinkState::from_snapshot(&first)
            .unwrap()
            .unwrap()
            .app_id;
        assert_ne!(state.app_id, first_app);
        let mut log = log::snapshot(dir.path(), None).unwrap();
        assert_eq!(commit(&state, &mut log).unwrap().commits, 1);
        assert_eq!(rows(dir.path()), 5);
        // Opening from checkpoint 1 again removes nothing more.
        open(
            dir.path(),
            SinkMode::Transactional {
                resume: Some(&first),
            },
        );
        assert_eq!(rows(dir.path()), 5);
    }

    #[test]
    fn without_checkpoints_each_roll_and_the_end_are_commits() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = open(dir.path(), SinkMode::Direct);
        sink.options.target_file_size = 1;
        sink.write(&batch(&[1, 2, 3])).unwrap();
        let after_roll = log::snapshot(dir.path(), None).unwrap();
        assert_eq!(after_roll.version, 1, "the rolled files are one commit");
        assert_eq!(after_roll.files.len(), 2, "a file per partition");
        assert_eq!(after_roll.files[0].partition_values["country"], None);
        sink.options.target_file_size = u64::MAX;
        sink.write(&batch(&[4])).unwrap();
        sink.finish().unwrap();
        assert_eq!(log::snapshot(dir.path(), None).unwrap().version, 2);
        assert_eq!(rows(dir.path()), 4);
    }
}

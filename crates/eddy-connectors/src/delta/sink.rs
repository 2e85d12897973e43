//! The Delta Lake sink: result rows as Parquet files in a table directory,
//! published by commits to the table's log.
//!
//! In: result batches in the sink's schema (an updating query's with
//! their row kinds). Out: files
//! `DIR/<partition>/part-<seq>-<run>.zstd.parquet` and commits in
//! `DIR/_delta_log/`. A file is invisible to readers until a commit adds
//! it, so files are written under their final names and nothing is
//! renamed.
//!
//! ```text
//!  no checkpoints: a commit when a file rolls (target_file_size) and one at the end
//!  checkpoints:    files closed at each barrier; checkpoint n's files are one commit,
//!                  made once n is complete, carrying txn { appId: <run>, version: n }
//!  a PRIMARY KEY:  changes buffered; at each barrier the last change per key is a
//!                  hidden change file; once n is complete it is merged ([`merge`])
//!                  in one MERGE commit with the same txn
//! ```
//!
//! Every N commits the sink (or, with checkpoints, the commit hook) runs
//! [`maintenance`]: compaction and vacuum, when the options ask for them.
//!
//! **Exactly once.** A commit names the sink's run (`appId`) and the
//! checkpoint (`version`) in Delta's app-transaction action. Committing a
//! checkpoint first reads the run's last transaction from the log, so a job
//! resumed after a crash, which commits its checkpoint again, never adds
//! the same files twice. A resumed job whose run's last transaction is
//! newer than the checkpoint it resumes from (a newer checkpoint was
//! published, then could not be read back) takes those commits back in one
//! commit (their files out, the files their merges replaced in again) and
//! goes on as a new run, so no row is there twice.
//!
//! A table that does not exist is created with the sink's schema
//! ([`super::schema`]); one that exists is appended to when its columns
//! and partitioning match, and refused before the job runs otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::basic::Compression;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

pub use super::files::DataFile;
use super::files::DataFileWriter;
use super::log::{self, Action, Remove, Snapshot, Txn};
use super::table_store::TableStore;
use super::{maintenance, merge, schema};
use crate::error::{ConnectorError, Result};
use crate::sinks::io_error;
use crate::sinks::partition::PartitionBy;

/// What a Delta sink's options say.
#[derive(Debug, Clone)]
pub struct DeltaOptions {
    /// The table directory.
    pub dir: PathBuf,
    /// How rows split into partition directories.
    pub partition: PartitionBy,
    /// Partition columns (by name, in directory order).
    pub partition_columns: Vec<String>,
    /// Roll a file once it holds about this many bytes.
    pub target_file_size: u64,
    /// Parquet compression.
    pub compression: Compression,
    /// Rows per Parquet row group (`None`: the writer's default).
    pub row_group_size: Option<usize>,
    /// Scale-out task number, carried in file names and the run's id.
    pub task: Option<u32>,
    /// The table's primary key: changes are merged by it (empty: append).
    pub key: Vec<String>,
    /// Compact small files every this many commits.
    pub optimize_every: Option<u64>,
    /// Delete files the log removed longer ago than this (ms).
    pub vacuum_retention_ms: Option<i64>,
}

impl DeltaOptions {
    /// Options of an unpartitioned append sink into `dir` (the rest at
    /// their defaults), for tests and tools.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            partition: PartitionBy::None,
            partition_columns: Vec::new(),
            target_file_size: super::DEFAULT_TARGET_FILE_SIZE,
            compression: Compression::ZSTD(Default::default()),
            row_group_size: None,
            task: None,
            key: Vec::new(),
            optimize_every: None,
            vacuum_retention_ms: None,
        }
    }

    /// A writer of `sink`'s rows into the table's files named with `stem`.
    pub fn writer(&self, sink: &SchemaRef, stem: String) -> DataFileWriter {
        DataFileWriter::new(
            &self.dir,
            sink,
            self.partition.clone(),
            self.compression,
            self.row_group_size,
            self.target_file_size,
            stem,
        )
    }

    /// Commits between two rounds of maintenance (compaction, vacuum);
    /// `None` when neither is asked for.
    pub fn maintenance_every(&self) -> Option<u64> {
        match (self.optimize_every, self.vacuum_retention_ms) {
            (Some(n), _) => Some(n.max(1)),
            (None, Some(_)) => Some(log::CHECKPOINT_INTERVAL as u64),
            (None, None) => None,
        }
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
    /// Files waiting for their checkpoint to complete: data files to add,
    /// or, when `merge`, change files to merge.
    pub pending: Vec<PendingFile>,
    /// Sequence number of the next file.
    pub next_seq: u64,
    /// The pending files hold changes merged by the primary key.
    #[serde(default)]
    pub merge: bool,
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

/// What each sink table committed in a run (its directory and counts),
/// shared by the connector's commit hook and the sinks themselves.
pub type Committed = std::sync::Arc<std::sync::Mutex<BTreeMap<String, (PathBuf, CommitCounts)>>>;

/// Adds `counts` to what `table` committed.
pub fn count(committed: &Committed, table: &str, dir: &Path, counts: CommitCounts) {
    if let Ok(mut committed) = committed.lock() {
        let entry = committed
            .entry(table.to_string())
            .or_insert_with(|| (dir.to_path_buf(), CommitCounts::default()));
        entry.1 += counts;
    }
}

/// Counts of what a sink did to its table, for the run summary and the API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CommitCounts {
    /// Commits of the stream's rows (appends and merges).
    pub commits: u64,
    /// Files added.
    pub files: u64,
    /// Bytes added.
    pub bytes: u64,
    /// Files removed (rewritten by a merge or a compaction).
    pub removed: u64,
    /// Compactions committed.
    pub compactions: u64,
    /// Files deleted from disk by vacuum.
    pub vacuumed: u64,
}

impl std::ops::AddAssign for CommitCounts {
    fn add_assign(&mut self, other: Self) {
        self.commits += other.commits;
        self.files += other.files;
        self.bytes += other.bytes;
        self.removed += other.removed;
        self.compactions += other.compactions;
        self.vacuumed += other.vacuumed;
    }
}

/// Writes a Delta table. See the module docs.
pub struct DeltaSink {
    table: String,
    options: DeltaOptions,
    sink: SchemaRef,
    files: DataFileWriter,
    staged: bool,
    app_id: String,
    /// Merge mode: the key's column indices.
    key: Option<Vec<usize>>,
    /// Merge mode: changes since the last barrier (or commit).
    changes: Vec<RecordBatch>,
    changes_bytes: usize,
    pending: Vec<PendingFile>,
    /// The log as this sink last read it (direct mode commits itself).
    log: Snapshot,
    /// Where direct mode counts its commits.
    committed: Committed,
    /// Direct mode: commits since the last maintenance.
    since_maintenance: u64,
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
            commit_info("CREATE TABLE", serde_json::json!({}), true),
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
pub(crate) fn commit_info(operation: &str, parameters: serde_json::Value, blind: bool) -> Action {
    Action::CommitInfo(serde_json::json!({
        "timestamp": log::now_ms(),
        "operation": operation,
        "operationParameters": parameters,
        "engineInfo": concat!("eddy/", env!("CARGO_PKG_VERSION")),
        "isBlindAppend": blind,
    }))
}

/// The `remove` action of a file leaving the table.
pub(crate) fn remove(add: &log::Add, now: i64, data_change: bool) -> Action {
    Action::Remove(Remove {
        path: add.path.clone(),
        deletion_timestamp: Some(now),
        data_change,
        partition_values: Some(add.partition_values.clone()),
        size: Some(add.size),
    })
}

/// Deletes files written for a commit that was not made.
pub(crate) fn discard(dir: &Path, files: &[DataFile]) {
    let Ok(table) = TableStore::of(dir) else {
        return;
    };
    for file in files {
        let _ = table.delete(&file.path);
    }
}

impl DeltaSink {
    /// Opens the sink for `table` (see the module docs): creates or checks
    /// the table, and on resume takes the run over from its checkpointed
    /// state.
    pub fn open(
        table: &str,
        sink_schema: &SchemaRef,
        options: DeltaOptions,
        mode: SinkMode<'_>,
        committed: Committed,
    ) -> Result<Self> {
        let dir = options.dir.clone();
        if let TableStore::Local(local) = TableStore::of(&dir)? {
            std::fs::create_dir_all(&local).map_err(|e| io_error(&local, e))?;
        }
        let mut log = create_or_check(&dir, sink_schema, &options.partition_columns)?;
        let app_id = new_app_id(table, options.task);
        let key = if options.key.is_empty() {
            None
        } else {
            Some(merge::key_indices(sink_schema, &options.key)?)
        };
        let mut sink = Self {
            table: table.to_string(),
            files: options.writer(sink_schema, app_id.clone()),
            sink: sink_schema.clone(),
            app_id,
            options,
            staged: false,
            key,
            changes: Vec::new(),
            changes_bytes: 0,
            pending: Vec::new(),
            log: Snapshot::default(),
            committed,
            since_maintenance: 0,
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
                sink.files.set_next_seq(state.next_seq);
                let resumed_at = log::txn_version(state.checkpoint);
                let committed = log.txns.get(&state.app_id).copied().unwrap_or(-1);
                if committed > resumed_at {
                    roll_back(&dir, &mut log, &state.app_id, resumed_at)?;
                } else if state.checkpoint != CheckpointId::MAX {
                    // Go on as the same run (a finished run's final
                    // checkpoint is the last any run can have: start anew).
                    sink.app_id = state.app_id;
                    sink.files.set_stem(sink.app_id.clone());
                }
            }
        }
        sink.log = log;
        Ok(sink)
    }

    /// Without checkpoints, adds closed files to the table now; with
    /// them, keeps them for the next barrier.
    fn commit_files(&mut self, files: Vec<DataFile>) -> Result<()> {
        if self.staged || files.is_empty() {
            self.pending_closed(files);
            return Ok(());
        }
        let now = log::now_ms();
        let mut actions = vec![commit_info(
            "WRITE",
            serde_json::json!({ "mode": "Append" }),
            true,
        )];
        actions.extend(files.iter().map(|f| f.add(now, true)));
        log::commit_next(&self.options.dir, &mut self.log, |_| {
            Ok(Some(actions.clone()))
        })?;
        let counts = CommitCounts {
            commits: 1,
            files: files.len() as u64,
            bytes: files.iter().map(|f| f.size as u64).sum(),
            ..Default::default()
        };
        self.counted(counts)
    }

    /// Staged files closed by a roll wait for the next barrier.
    fn pending_closed(&mut self, files: Vec<DataFile>) {
        // `precommit` assigns them their checkpoint.
        self.pending
            .extend(files.into_iter().map(|file| PendingFile {
                file,
                closed_for: CheckpointId::MAX,
            }));
    }

    /// Direct mode: counts a commit and runs maintenance when it is due.
    fn counted(&mut self, counts: CommitCounts) -> Result<()> {
        count(&self.committed, &self.table, &self.options.dir, counts);
        self.since_maintenance += counts.commits;
        if let Some(every) = self.options.maintenance_every() {
            if self.since_maintenance >= every {
                self.since_maintenance = 0;
                let done = maintenance::maintain(
                    &mut self.log,
                    &self.options,
                    &self.sink,
                    &self.app_id,
                    &[],
                )?;
                count(&self.committed, &self.table, &self.options.dir, done);
            }
        }
        Ok(())
    }

    /// Direct mode, merging: applies the buffered changes now.
    fn merge_buffered(&mut self) -> Result<()> {
        let Some(key) = self.key.clone() else {
            return Ok(());
        };
        let batches = std::mem::take(&mut self.changes);
        self.changes_bytes = 0;
        let Some(changes) = merge::last_change_per_key(&self.sink, &key, &batches)? else {
            return Ok(());
        };
        let counts = merge_commit(
            &mut self.log,
            &self.options,
            &self.sink,
            &changes,
            None,
            &self.app_id,
        )?;
        self.counted(counts)
    }

    fn write_rows(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.key.is_some() {
            self.changes_bytes += batch.get_array_memory_size();
            self.changes.push(batch.clone());
            if !self.staged && self.changes_bytes as u64 >= self.options.target_file_size {
                self.merge_buffered()?;
            }
            return Ok(());
        }
        let data = eddy_engine::changelog::data_columns(batch)?;
        self.files.write(&data)?;
        let closed = self.files.take_closed();
        self.commit_files(closed)
    }

    /// At a barrier: the interval's output as pending files.
    fn stage(&mut self, checkpoint: CheckpointId) -> Result<()> {
        let Some(key) = self.key.clone() else {
            let files = self.files.finish()?;
            self.pending_closed(files);
            for pending in &mut self.pending {
                if pending.closed_for == CheckpointId::MAX {
                    pending.closed_for = checkpoint;
                }
            }
            return Ok(());
        };
        let batches = std::mem::take(&mut self.changes);
        self.changes_bytes = 0;
        let Some(changes) = merge::last_change_per_key(&self.sink, &key, &batches)? else {
            return Ok(());
        };
        let seq = self.files.next_seq();
        self.files.set_next_seq(seq + 1);
        let path = format!("{}/{}-{seq:05}.parquet", CHANGES_DIR, self.app_id);
        let size = merge::write_changes(&self.options.dir, &path, &changes)?;
        self.pending.push(PendingFile {
            file: DataFile {
                path,
                partition_values: BTreeMap::new(),
                size: size as i64,
                rows: changes.num_rows() as u64,
                stats: None,
            },
            closed_for: checkpoint,
        });
        Ok(())
    }
}

/// Where a merging sink keeps each checkpoint's changes until they are
/// merged (hidden from readers and from vacuum by its leading `_`).
pub const CHANGES_DIR: &str = "_eddy_changes";

/// Takes out what a run committed after its checkpoint `checkpoint`
/// (output of a newer checkpoint the job could not resume from), in one
/// commit: files those commits added leave, and files their merges
/// removed come back.
fn roll_back(dir: &Path, log: &mut Snapshot, app_id: &str, checkpoint: i64) -> Result<()> {
    let undone = log::actions_after(dir, app_id, checkpoint)?;
    let mut added: BTreeMap<String, ()> = BTreeMap::new();
    let mut removed: BTreeMap<String, Remove> = BTreeMap::new();
    for action in undone.actions {
        match action {
            Action::Add(add) => {
                added.insert(add.path, ());
            }
            Action::Remove(gone) if added.remove(&gone.path).is_none() => {
                removed.insert(gone.path.clone(), gone);
            }
            _ => {}
        }
    }
    if let Some(path) = added.keys().find(|p| undone.compacted.contains(*p)) {
        return Err(ConnectorError::bad_option(
            "path",
            format!(
                "{}: cannot take back the output of checkpoints after {checkpoint} ({app_id}): a compaction has since packed its file {path} with others; restore the table to the version before them",
                dir.display()
            ),
        ));
    }
    let now = log::now_ms();
    let table = TableStore::of(dir)?;
    log::commit_next(dir, log, |current| {
        let present: std::collections::HashSet<&str> =
            current.files.iter().map(|f| f.path.as_str()).collect();
        let mut actions = Vec::new();
        // A file gone already was taken back by an earlier resume.
        actions.extend(
            current
                .files
                .iter()
                .filter(|f| added.contains_key(&f.path))
                .map(|f| remove(f, now, true)),
        );
        for (path, gone) in &removed {
            if present.contains(path.as_str()) {
                continue;
            }
            let size = table.size(&log::decode_path(path)).map(|n| n as i64).map_err(|_| {
                ConnectorError::bad_option(
                    "path",
                    format!(
                        "{}: cannot take back the merges of checkpoints after {checkpoint} ({app_id}): the file they replaced, {path}, is gone (vacuumed)",
                        dir.display()
                    ),
                )
            })?;
            actions.push(Action::Add(log::Add {
                path: path.clone(),
                partition_values: gone.partition_values.clone().unwrap_or_default(),
                size: gone.size.unwrap_or(size),
                modification_time: now,
                data_change: true,
                stats: None,
                deletion_vector: None,
            }));
        }
        if actions.is_empty() {
            return Ok(None);
        }
        actions.insert(
            0,
            commit_info(
                "RESTORE",
                serde_json::json!({ "reason": format!("{app_id}: output of checkpoints after {checkpoint}, which the job resumed without") }),
                false,
            ),
        );
        Ok(Some(actions))
    })?;
    Ok(())
}

/// Merges `changes` into the table in one commit (with `txn`, unless the
/// log shows that transaction made already). Files written for an
/// attempt that lost a race to another writer are deleted, and the merge
/// is done again on the newer table.
pub fn merge_commit(
    log: &mut Snapshot,
    options: &DeltaOptions,
    sink: &SchemaRef,
    changes: &RecordBatch,
    txn: Option<Txn>,
    app_id: &str,
) -> Result<CommitCounts> {
    let dir = options.dir.clone();
    let key = merge::key_indices(sink, &options.key)?;
    let mut written: Vec<DataFile> = Vec::new();
    let mut counts = CommitCounts::default();
    let mut attempt = 0u32;
    let made = log::commit_next(&dir, log, |current| {
        discard(&dir, &written);
        written.clear();
        if let Some(txn) = &txn {
            if current
                .txns
                .get(&txn.app_id)
                .is_some_and(|&v| v >= txn.version)
            {
                return Ok(None);
            }
        }
        attempt += 1;
        let stem = format!("{app_id}-merge-{}-{attempt}", log::now_ms());
        let mut writer = options.writer(sink, stem);
        let merged = merge::merge(&dir, current, sink, &key, changes, &mut writer)?;
        written = merged.added.clone();
        let now = log::now_ms();
        let mut actions = vec![commit_info(
            "MERGE",
            serde_json::json!({
                "predicate": options.key.iter().map(|k| format!("target.{k} = source.{k}")).collect::<Vec<_>>().join(" AND "),
                "rowsReplacedOrDeleted": merged.rows_out,
                "rowsPut": merged.rows_put,
                "filesRead": merged.files_read,
                "filesSkipped": merged.files_skipped,
            }),
            false,
        )];
        actions.extend(merged.removed.iter().map(|f| remove(f, now, true)));
        actions.extend(merged.added.iter().map(|f| f.add(now, true)));
        if let Some(txn) = &txn {
            actions.push(Action::Txn(Txn {
                last_updated: Some(now),
                ..txn.clone()
            }));
        }
        counts = CommitCounts {
            commits: 1,
            files: merged.added.len() as u64,
            bytes: merged.added.iter().map(|f| f.size as u64).sum(),
            removed: merged.removed.len() as u64,
            ..Default::default()
        };
        Ok(Some(actions))
    })?;
    if made.is_none() {
        discard(&dir, &written);
        return Ok(CommitCounts::default());
    }
    Ok(counts)
}

/// Publishes what a Delta sink's state holds: each checkpoint's files in
/// one commit (appended, or merged by key), unless the run's transaction
/// shows it committed already. `log` is the table's log as last read
/// (refreshed here). Returns what was committed.
pub fn commit(
    state: &DeltaSinkState,
    log: &mut Snapshot,
    options: &DeltaOptions,
    sink: &SchemaRef,
) -> Result<CommitCounts> {
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
        let done = |log: &Snapshot| log.txns.get(&state.app_id).is_some_and(|&v| v >= version);
        if done(log) {
            continue;
        }
        if state.merge {
            let mut batches = Vec::new();
            for file in &files {
                batches.extend(merge::read_changes(&state.dir, &file.path, sink)?);
            }
            let key = merge::key_indices(sink, &options.key)?;
            let Some(changes) = merge::last_change_per_key(sink, &key, &batches)? else {
                continue;
            };
            let txn = Txn {
                app_id: state.app_id.clone(),
                version,
                last_updated: None,
            };
            let mut merge_options = options.clone();
            merge_options.dir = state.dir.clone();
            counts += merge_commit(
                log,
                &merge_options,
                sink,
                &changes,
                Some(txn),
                &state.app_id,
            )?;
            let table = TableStore::of(&state.dir)?;
            for file in &files {
                let _ = table.delete(&file.path);
            }
            continue;
        }
        let now = log::now_ms();
        let made = log::commit_next(&state.dir, log, |current| {
            if done(current) {
                return Ok(None);
            }
            let mut actions = vec![commit_info(
                "STREAMING UPDATE",
                serde_json::json!({
                    "outputMode": "Append",
                    "queryId": state.app_id,
                    "epochId": version.to_string(),
                }),
                true,
            )];
            actions.extend(files.iter().map(|f| f.add(now, true)));
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
            self.stage(checkpoint)?;
            self.pending.retain(|p| p.closed_for > completed);
            StateSnapshot::with_meta(&DeltaSinkState {
                format: "delta".into(),
                dir: self.options.dir.clone(),
                app_id: self.app_id.clone(),
                checkpoint,
                pending: self.pending.clone(),
                next_seq: self.files.next_seq(),
                merge: self.key.is_some(),
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
            if self.key.is_some() {
                return self.merge_buffered();
            }
            let files = self.files.finish()?;
            self.commit_files(files)
        })();
        result.map_err(|e| e.for_table(&self.table))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::basic::Compression;

    use super::*;

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

    fn options(dir: &Path) -> DeltaOptions {
        DeltaOptions {
            partition: PartitionBy::parse(Some("country"), &schema()).unwrap(),
            partition_columns: vec!["country".into()],
            target_file_size: u64::MAX,
            compression: Compression::SNAPPY,
            ..DeltaOptions::new(dir)
        }
    }

    fn open(dir: &Path, mode: SinkMode<'_>) -> DeltaSink {
        open_with(options(dir), mode)
    }

    fn open_with(options: DeltaOptions, mode: SinkMode<'_>) -> DeltaSink {
        DeltaSink::open("t", &schema(), options, mode, Committed::default()).unwrap()
    }

    fn commit(state: &DeltaSinkState, log: &mut Snapshot) -> Result<CommitCounts> {
        let options = if state.merge {
            merging(&state.dir)
        } else {
            options(&state.dir)
        };
        super::commit(state, log, &options, &schema())
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
        sink.files.set_target_file_size(1);
        sink.write(&batch(&[1, 2, 3])).unwrap();
        let after_roll = log::snapshot(dir.path(), None).unwrap();
        assert_eq!(after_roll.version, 1, "the rolled files are one commit");
        assert_eq!(after_roll.files.len(), 2, "a file per partition");
        assert_eq!(after_roll.files[0].partition_values["country"], None);
        sink.files.set_target_file_size(u64::MAX);
        sink.write(&batch(&[4])).unwrap();
        sink.finish().unwrap();
        assert_eq!(log::snapshot(dir.path(), None).unwrap().version, 2);
        assert_eq!(rows(dir.path()), 4);
    }

    /// The table's rows at its newest version, as (id, country) sorted.
    fn table(dir: &Path) -> Vec<(i64, Option<String>)> {
        let log = log::snapshot(dir, None).unwrap();
        let mut rows = Vec::new();
        for add in &log.files {
            let file = crate::parquet::reader::FileToRead {
                path: dir.join(log::decode_path(&add.path)),
                partition_values: add.partition_values.clone(),
                stats: None,
            };
            for batch in crate::parquet::reader::read_file(&file, &schema()).unwrap() {
                let ids = batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                let countries = batch
                    .column(1)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                for i in 0..batch.num_rows() {
                    rows.push((
                        ids.value(i),
                        countries
                            .is_valid(i)
                            .then(|| countries.value(i).to_string()),
                    ));
                }
            }
        }
        rows.sort();
        rows
    }

    /// An updating batch: (id, country, kind).
    fn changes(rows: &[(i64, Option<&str>, i8)]) -> RecordBatch {
        RecordBatch::try_new(
            eddy_engine::changelog::updating_schema(&schema(), &[]),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1))),
                Arc::new(datafusion::arrow::array::Int8Array::from_iter_values(
                    rows.iter().map(|r| r.2),
                )),
            ],
        )
        .unwrap()
    }

    fn merging(dir: &Path) -> DeltaOptions {
        DeltaOptions {
            key: vec!["id".into()],
            ..options(dir)
        }
    }

    fn us(id: i64) -> (i64, Option<String>) {
        (id, Some("US".into()))
    }

    #[test]
    fn a_merging_sink_holds_the_current_result_once_per_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = open_with(
            merging(dir.path()),
            SinkMode::Transactional { resume: None },
        );
        // +I 1, +I 2, +I 3; then 2 moves from NULL to US (-U/+U).
        sink.write(&changes(&[(1, Some("US"), 0), (2, None, 0), (3, None, 0)]))
            .unwrap();
        sink.write(&changes(&[(2, None, 1), (2, Some("US"), 2)]))
            .unwrap();
        let first = sink.precommit(1, 0).unwrap();
        assert!(
            table(dir.path()).is_empty(),
            "nothing shows before the commit"
        );
        let state = DeltaSinkState::from_snapshot(&first).unwrap().unwrap();
        assert!(state.merge);
        let mut log = log::snapshot(dir.path(), None).unwrap();
        assert_eq!(commit(&state, &mut log).unwrap().commits, 1);
        assert_eq!(table(dir.path()), vec![us(1), us(2), (3, None)]);
        // Committed again (a restart): nothing changes.
        assert_eq!(commit(&state, &mut log).unwrap().commits, 0);
        // Checkpoint 2: 1 is deleted, 3 updated, 4 inserted, a delete of
        // a key never there changes nothing.
        sink.write(&changes(&[
            (1, Some("US"), 3),
            (3, None, 1),
            (3, Some("US"), 2),
            (4, None, 0),
            (9, None, 3),
        ]))
        .unwrap();
        let second = sink.precommit(2, 1).unwrap();
        let state = DeltaSinkState::from_snapshot(&second).unwrap().unwrap();
        let counts = commit(&state, &mut log).unwrap();
        assert_eq!(counts.commits, 1);
        assert!(
            counts.removed >= 1,
            "the files holding 1 and 3 are rewritten"
        );
        assert_eq!(table(dir.path()), vec![us(2), us(3), (4, None)]);
        // The change files are gone once merged.
        let changes_dir = dir.path().join(CHANGES_DIR);
        assert_eq!(std::fs::read_dir(&changes_dir).unwrap().count(), 0);
        // Time travel to the first merge gives its result.
        let at_first = log::snapshot(dir.path(), Some(1)).unwrap();
        assert_eq!(at_first.txns[&state.app_id], 1);

        // Checkpoint 2 unreadable: resumed from 1, its merge is undone.
        open_with(
            merging(dir.path()),
            SinkMode::Transactional {
                resume: Some(&first),
            },
        );
        assert_eq!(table(dir.path()), vec![us(1), us(2), (3, None)]);
    }

    #[test]
    fn a_merging_sink_without_checkpoints_merges_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = open_with(merging(dir.path()), SinkMode::Direct);
        sink.write(&batch(&[1, 2, 3])).unwrap();
        // An append-only row of a key already there replaces it.
        sink.write(&batch(&[2])).unwrap();
        sink.write(&changes(&[(3, None, 3)])).unwrap();
        assert!(table(dir.path()).is_empty());
        sink.finish().unwrap();
        assert_eq!(table(dir.path()), vec![(1, None), us(2)]);
    }

    #[test]
    fn compaction_packs_small_files_and_vacuum_deletes_the_removed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let options = DeltaOptions {
            optimize_every: Some(4),
            target_file_size: 1 << 20,
            ..options(dir.path())
        };
        let committed = Committed::default();
        let mut sink = DeltaSink::open(
            "t",
            &schema(),
            options.clone(),
            SinkMode::Direct,
            committed.clone(),
        )
        .unwrap();
        // Each write rolls (1 byte target), so each is a commit of 2 files.
        for n in 0..4 {
            sink.files.set_target_file_size(1);
            sink.write(&batch(&[2 * n, 2 * n + 1])).unwrap();
        }
        sink.finish().unwrap();
        let log = log::snapshot(dir.path(), None).unwrap();
        assert_eq!(
            log.files.len(),
            2,
            "one file per partition after compaction"
        );
        assert!(log.files.iter().all(|f| !f.data_change));
        let ids: Vec<i64> = table(dir.path()).into_iter().map(|r| r.0).collect();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
        let counts = committed.lock().unwrap()["t"].1;
        assert_eq!(
            (counts.commits, counts.compactions, counts.removed),
            (4, 1, 8)
        );

        // Vacuum: the 8 compacted files are tombstones; with no retention
        // they go, the live files stay, and the table reads the same.
        let on_disk = |dir: &Path| {
            let mut found = Vec::new();
            super::maintenance::tests_support::data_files(dir, &mut found);
            found.len()
        };
        assert_eq!(on_disk(dir.path()), 10);
        let deleted = maintenance::vacuum(dir.path(), &log, 0, log::now_ms(), &[]).unwrap();
        assert_eq!(deleted, 8);
        assert_eq!(on_disk(dir.path()), 2);
        assert_eq!(table(dir.path()).len(), 8);
        // A file no commit added is kept while younger than an hour.
        std::fs::write(dir.path().join("part-stray.zstd.parquet"), b"x").unwrap();
        assert_eq!(
            maintenance::vacuum(dir.path(), &log, 0, log::now_ms(), &[]).unwrap(),
            0
        );
        let later = log::now_ms() + maintenance::ORPHAN_MIN_AGE_MS + 1000;
        assert_eq!(
            maintenance::vacuum(dir.path(), &log, 0, later, &[]).unwrap(),
            1
        );
    }
}

//! A Delta Lake table's transaction log (`_delta_log/`): reading a table's
//! state at a version, and committing a new version atomically.
//!
//! In: a table directory. Out: a [`Snapshot`] (protocol, metadata, the
//! files that make up the table, each application's last transaction) or a
//! new commit file `_delta_log/<version, 20 digits>.json`.
//!
//! - **Reading** replays the newest Parquet checkpoint at or before the
//!   version (named by `_last_checkpoint` or found by listing), then the
//!   JSON commits after it. Checkpoint rows are turned into the same
//!   actions as JSON commits by writing them out with arrow-json, so both
//!   paths share one set of action types.
//! - **Committing** writes the actions to a hidden file and links it to the
//!   next version's name: a hard link fails when the name exists, which is
//!   the put-if-absent the protocol asks of a log store, so two writers
//!   never both own a version. The loser reads the log again and retries.
//! - **Checkpoints**: every [`CHECKPOINT_INTERVAL`] commits eddy writes a
//!   Parquet checkpoint and `_last_checkpoint`, so readers (eddy's, Spark's,
//!   delta-rs's) replay at most that many JSON files.
//!
//! Protocol: eddy writes reader version 1 / writer version 2 tables and
//! reads tables whose reader features it knows (`timestampNtz`); a table
//! that needs deletion vectors or column mapping is refused by name.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::arrow::json::{ArrayWriter, ReaderBuilder};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use serde::{Deserialize, Serialize};

use super::table_store::TableStore;
use crate::error::{ConnectorError, Result};
use crate::sinks::io_error;

/// A version of a table (commit number).
pub type Version = i64;

/// Commits between two Parquet checkpoints of the log.
pub const CHECKPOINT_INTERVAL: Version = 10;

/// How long a removed file's tombstone stays in checkpoints: Delta's
/// default `delta.deletedFileRetentionDuration`, a week.
pub const TOMBSTONE_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

/// The table's protocol requirements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    /// Readers must know this version.
    pub min_reader_version: i32,
    /// Writers must know this version.
    pub min_writer_version: i32,
    /// Features readers must know (reader version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_features: Option<Vec<String>>,
    /// Features writers must know (writer version 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_features: Option<Vec<String>>,
}

/// `format` of a table's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Format {
    /// Always `parquet`.
    pub provider: String,
    /// Provider options (none).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

/// The table's metadata: schema, partitioning, configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The table's unique id.
    pub id: String,
    /// Its name, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The data files' format.
    pub format: Format,
    /// The schema, as Delta's JSON ([`super::schema`]).
    pub schema_string: String,
    /// Partition columns, in directory order.
    #[serde(default)]
    pub partition_columns: Vec<String>,
    /// Table properties.
    #[serde(default)]
    pub configuration: BTreeMap<String, Option<String>>,
    /// When the table was created (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_time: Option<i64>,
}

/// A data file joins the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    /// Relative to the table directory, URL-encoded.
    pub path: String,
    /// Partition column to value (`None`: NULL).
    #[serde(default)]
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Bytes.
    pub size: i64,
    /// When it was written (ms since the epoch).
    pub modification_time: i64,
    /// `false` for a compaction's rewrite of rows already in the table.
    pub data_change: bool,
    /// Per-file statistics as a JSON string (`numRecords`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    /// A deletion vector: rows of the file that are gone (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<serde_json::Value>,
}

/// A data file leaves the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    /// As in its [`Add`].
    pub path: String,
    /// When it was removed (ms since the epoch); vacuum keeps it until
    /// then plus the retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<i64>,
    /// `false` for a compaction.
    pub data_change: bool,
    /// As in its [`Add`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_values: Option<BTreeMap<String, Option<String>>>,
    /// As in its [`Add`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
}

/// An application's idempotent-write marker: the last version of its
/// stream committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Txn {
    /// The application (eddy: the sink's run).
    pub app_id: String,
    /// The last version it committed (eddy: the checkpoint).
    pub version: i64,
    /// When (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<i64>,
}

/// One line of a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Protocol requirements.
    Protocol(Protocol),
    /// Table metadata.
    MetaData(Metadata),
    /// A file joins.
    Add(Add),
    /// A file leaves.
    Remove(Remove),
    /// An application's transaction.
    Txn(Txn),
    /// Who committed what (free-form).
    CommitInfo(serde_json::Value),
}

/// A table's state at one version.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The version this state is of.
    pub version: Version,
    /// The protocol in force.
    pub protocol: Option<Protocol>,
    /// The metadata in force.
    pub metadata: Option<Metadata>,
    /// The table's files by path, in the order they were added.
    pub files: Vec<Add>,
    /// Each application's last transaction version.
    pub txns: HashMap<String, i64>,
    /// When each version was committed (ms since the epoch), for time travel.
    pub commit_times: BTreeMap<Version, i64>,
    /// Files removed and not added again, with when (ms since the epoch):
    /// vacuum deletes them once the retention has passed.
    pub tombstones: BTreeMap<String, Remove>,
}

impl Snapshot {
    fn apply(&mut self, action: Action) {
        match action {
            Action::Protocol(p) => self.protocol = Some(p),
            Action::MetaData(m) => self.metadata = Some(m),
            Action::Add(add) => {
                self.tombstones.remove(&add.path);
                self.files.retain(|f| f.path != add.path);
                self.files.push(add);
            }
            Action::Remove(remove) => {
                self.files.retain(|f| f.path != remove.path);
                self.tombstones.insert(remove.path.clone(), remove);
            }
            Action::Txn(txn) => {
                self.txns.insert(txn.app_id, txn.version);
            }
            Action::CommitInfo(_) => {}
        }
    }

    /// The metadata, or an error saying the table has none (yet).
    pub fn metadata(&self, dir: &Path) -> Result<&Metadata> {
        self.metadata.as_ref().ok_or_else(|| {
            ConnectorError::bad_option(
                "path",
                format!("{}: the Delta log holds no table metadata", dir.display()),
            )
        })
    }
}

/// The log's directory under the table.
const LOG_DIR: &str = "_delta_log";

/// The log directory of a table.
pub fn log_dir(table: &Path) -> PathBuf {
    table.join(LOG_DIR)
}

fn commit_path(table: &Path, version: Version) -> PathBuf {
    log_dir(table).join(commit_name(version))
}

/// A commit's path relative to the table.
fn commit_name(version: Version) -> String {
    format!("{LOG_DIR}/{version:020}.json")
}

/// A checkpoint's path relative to the table.
fn checkpoint_name(version: Version) -> String {
    format!("{LOG_DIR}/{version:020}.checkpoint.parquet")
}

/// What the log directory holds: commit versions and single-file
/// checkpoint versions, ascending.
fn list(table: &Path) -> Result<(Vec<Version>, Vec<Version>)> {
    let (mut commits, mut checkpoints) = (Vec::new(), Vec::new());
    for name in TableStore::of(table)?.names_in(LOG_DIR)? {
        let Some((digits, rest)) = name.split_at_checked(20) else {
            continue;
        };
        let Ok(version) = digits.parse::<Version>() else {
            continue;
        };
        match rest {
            ".json" => commits.push(version),
            ".checkpoint.parquet" => checkpoints.push(version),
            _ => {}
        }
    }
    commits.sort_unstable();
    checkpoints.sort_unstable();
    Ok((commits, checkpoints))
}

/// Whether `table` has a log with at least one commit.
pub fn exists(table: &Path) -> Result<bool> {
    let (commits, checkpoints) = list(table)?;
    Ok(!commits.is_empty() || !checkpoints.is_empty())
}

/// Reads one JSON commit.
fn read_commit(table: &Path, version: Version) -> Result<Vec<Action>> {
    let path = commit_path(table, version);
    let bytes = TableStore::of(table)?.read(&commit_name(version))?;
    let mut actions = Vec::new();
    for (n, line) in BufReader::new(&bytes[..]).lines().enumerate() {
        let line = line.map_err(|e| io_error(&path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line).map_err(|e| {
            ConnectorError::bad_option(
                "path",
                format!("{}:{}: not a Delta action: {e}", path.display(), n + 1),
            )
        })?;
        if let Some(action) = known_action(value, &path)? {
            actions.push(action);
        }
    }
    Ok(actions)
}

/// The action a JSON object holds; `None` for kinds eddy does not need
/// (`cdc`, `domainMetadata`, `checkpointMetadata`, ...).
fn known_action(value: serde_json::Value, path: &Path) -> Result<Option<Action>> {
    let serde_json::Value::Object(map) = value else {
        return Ok(None);
    };
    for (kind, body) in map {
        if body.is_null() {
            continue;
        }
        if !matches!(
            kind.as_str(),
            "protocol" | "metaData" | "add" | "remove" | "txn" | "commitInfo"
        ) {
            continue;
        }
        let one = serde_json::Value::Object([(kind.clone(), body)].into_iter().collect());
        let action = serde_json::from_value(one).map_err(|e| {
            ConnectorError::bad_option(
                "path",
                format!(
                    "{}: a '{kind}' action eddy cannot read: {e}",
                    path.display()
                ),
            )
        })?;
        return Ok(Some(action));
    }
    Ok(None)
}

/// Reads a single-file Parquet checkpoint: each row is one action.
fn read_checkpoint(table: &Path, version: Version) -> Result<Vec<Action>> {
    let path = log_dir(table).join(format!("{version:020}.checkpoint.parquet"));
    let bytes = TableStore::of(table)?.read(&checkpoint_name(version))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))?.build()?;
    let mut actions = Vec::new();
    for batch in reader {
        let batch = batch?;
        let mut writer = ArrayWriter::new(Vec::new());
        writer.write(&batch)?;
        writer.finish()?;
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&writer.into_inner())
            .map_err(|e| ConnectorError::bad_option("path", format!("{}: {e}", path.display())))?;
        for row in rows {
            if let Some(action) = known_action(row, &path)? {
                actions.push(action);
            }
        }
    }
    Ok(actions)
}

/// The table's state at `version` (the newest when `None`).
pub fn snapshot(table: &Path, version: Option<Version>) -> Result<Snapshot> {
    let (commits, checkpoints) = list(table)?;
    let newest = commits.last().copied().max(checkpoints.last().copied());
    let Some(newest) = newest else {
        return Err(ConnectorError::bad_option(
            "path",
            format!("{} is not a Delta table (no _delta_log)", table.display()),
        ));
    };
    let version = version.unwrap_or(newest);
    if version > newest || version < 0 {
        return Err(ConnectorError::bad_option(
            "version",
            format!("the table's versions end at {newest}, there is no {version}"),
        ));
    }
    let base = checkpoints.iter().rev().find(|&&c| c <= version).copied();
    let mut state = Snapshot::default();
    let mut next = 0;
    if let Some(base) = base {
        for action in read_checkpoint(table, base)? {
            state.apply(action);
        }
        state.version = base;
        next = base + 1;
    } else if commits.first() != Some(&0) {
        return Err(ConnectorError::bad_option(
            "version",
            format!(
                "{}: the log's early commits are gone (vacuumed or expired) and no checkpoint covers version {version}",
                table.display()
            ),
        ));
    }
    for &commit in commits.iter().filter(|&&c| c >= next && c <= version) {
        apply_commit(table, &mut state, commit)?;
    }
    Ok(state)
}

fn apply_commit(table: &Path, state: &mut Snapshot, commit: Version) -> Result<()> {
    let mut time = None;
    for action in read_commit(table, commit)? {
        if let Action::CommitInfo(info) = &action {
            time = info.get("timestamp").and_then(|t| t.as_i64());
        }
        state.apply(action);
    }
    let time = match time {
        Some(time) => time,
        None => TableStore::of(table)?.modified_ms(&commit_name(commit))?,
    };
    state.commit_times.insert(commit, time);
    state.version = commit;
    Ok(())
}

/// Brings `state` up to the newest version (reads only the new commits).
pub fn refresh(table: &Path, state: &mut Snapshot) -> Result<()> {
    let (commits, _) = list(table)?;
    // A state that has read nothing yet starts at the first commit.
    let read_nothing = state.metadata.is_none() && state.commit_times.is_empty();
    let after = if read_nothing { -1 } else { state.version };
    for &commit in commits.iter().filter(|&&c| c > after) {
        apply_commit(table, state, commit)?;
    }
    Ok(())
}

/// The newest version committed at or before `time` (ms since the epoch).
pub fn version_at(table: &Path, time: i64) -> Result<Version> {
    let state = snapshot(table, None)?;
    state
        .commit_times
        .iter()
        .rev()
        .find(|(_, &t)| t <= time)
        .map(|(&v, _)| v)
        .ok_or_else(|| {
            ConnectorError::bad_option(
                "timestamp",
                format!(
                    "the table's first commit in the log is later than {}",
                    crate::delta::format_ms(time)
                ),
            )
        })
}

/// What a run committed after one of its transactions.
#[derive(Debug, Default)]
pub struct ActionsAfter {
    /// The `add` and `remove` actions of the run's commits with a newer
    /// transaction, oldest first.
    pub actions: Vec<Action>,
    /// Files that compactions (`remove` without a data change) took out
    /// of the table since the first of those commits.
    pub compacted: std::collections::HashSet<String>,
}

/// What `app_id` committed with a transaction newer than `version`, read
/// back from the log's newest commit.
pub fn actions_after(table: &Path, app_id: &str, version: i64) -> Result<ActionsAfter> {
    let (commits, _) = list(table)?;
    let mut newest_first: Vec<Vec<Action>> = Vec::new();
    let mut after = ActionsAfter::default();
    let mut compacted_since = std::collections::HashSet::new();
    for &commit in commits.iter().rev() {
        let actions = read_commit(table, commit)?;
        let ours = actions.iter().find_map(|a| match a {
            Action::Txn(txn) if txn.app_id == app_id => Some(txn.version),
            _ => None,
        });
        for action in &actions {
            if let Action::Remove(r) = action {
                if !r.data_change {
                    compacted_since.insert(r.path.clone());
                }
            }
        }
        match ours {
            Some(v) if v > version => {
                after.compacted.extend(compacted_since.iter().cloned());
                newest_first.push(
                    actions
                        .into_iter()
                        .filter(|a| matches!(a, Action::Add(_) | Action::Remove(_)))
                        .collect(),
                );
            }
            Some(_) => break,
            None => {}
        }
    }
    after.actions = newest_first.into_iter().rev().flatten().collect();
    Ok(after)
}

/// The transaction version of checkpoint `checkpoint` (a finished job's
/// final checkpoint, `u64::MAX`, is the greatest).
pub fn txn_version(checkpoint: u64) -> i64 {
    i64::try_from(checkpoint).unwrap_or(i64::MAX)
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Commits `actions` as `version`. `Ok(false)` when another writer took
/// that version first (read the log again and retry).
pub fn try_commit(table: &Path, version: Version, actions: &[Action]) -> Result<bool> {
    let mut text = Vec::new();
    for action in actions {
        serde_json::to_writer(&mut text, action)
            .map_err(|e| ConnectorError::bad_option("path", e.to_string()))?;
        text.push(b'\n');
    }
    TableStore::of(table)?.put_if_absent(&commit_name(version), &text)
}

/// Commits `actions` as the version after `state`'s, retrying after
/// `state` is refreshed when another writer committed first; `prepare`
/// sees the refreshed state and returns the actions (`None`: nothing to
/// commit any more). Returns the version written.
pub fn commit_next(
    table: &Path,
    state: &mut Snapshot,
    mut prepare: impl FnMut(&Snapshot) -> Result<Option<Vec<Action>>>,
) -> Result<Option<Version>> {
    for _ in 0..1000 {
        let Some(actions) = prepare(state)? else {
            return Ok(None);
        };
        let version = if state.metadata.is_none() && !exists(table)? {
            0
        } else {
            state.version + 1
        };
        if try_commit(table, version, &actions)? {
            for action in actions {
                state.apply(action);
            }
            state.commit_times.insert(version, now_ms());
            state.version = version;
            if version > 0 && version % CHECKPOINT_INTERVAL == 0 {
                write_checkpoint(table, state)?;
            }
            return Ok(Some(version));
        }
        refresh(table, state)?;
    }
    Err(ConnectorError::bad_option(
        "path",
        format!(
            "{}: gave up committing after 1000 conflicting commits by other writers",
            table.display()
        ),
    ))
}

/// The Arrow schema of a checkpoint file (the parts eddy writes).
fn checkpoint_schema() -> SchemaRef {
    let string = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    let long = |name: &str, nullable: bool| Field::new(name, DataType::Int64, nullable);
    let map = |name: &str| {
        Field::new_map(
            name,
            "key_value",
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, true),
            false,
            true,
        )
    };
    let strings = |name: &str| {
        Field::new(
            name,
            DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
            true,
        )
    };
    let protocol = Fields::from(vec![
        Field::new("minReaderVersion", DataType::Int32, true),
        Field::new("minWriterVersion", DataType::Int32, true),
        strings("readerFeatures"),
        strings("writerFeatures"),
    ]);
    let format = Fields::from(vec![string("provider", true), map("options")]);
    let metadata = Fields::from(vec![
        string("id", true),
        string("name", true),
        string("description", true),
        Field::new("format", DataType::Struct(format), true),
        string("schemaString", true),
        strings("partitionColumns"),
        map("configuration"),
        long("createdTime", true),
    ]);
    let add = Fields::from(vec![
        string("path", true),
        map("partitionValues"),
        long("size", true),
        long("modificationTime", true),
        Field::new("dataChange", DataType::Boolean, true),
        string("stats", true),
    ]);
    let remove = Fields::from(vec![
        string("path", true),
        long("deletionTimestamp", true),
        Field::new("dataChange", DataType::Boolean, true),
        map("partitionValues"),
        long("size", true),
    ]);
    let txn = Fields::from(vec![
        string("appId", true),
        long("version", true),
        long("lastUpdated", true),
    ]);
    Arc::new(Schema::new(vec![
        Field::new("protocol", DataType::Struct(protocol), true),
        Field::new("metaData", DataType::Struct(metadata), true),
        Field::new("add", DataType::Struct(add), true),
        Field::new("remove", DataType::Struct(remove), true),
        Field::new("txn", DataType::Struct(txn), true),
    ]))
}

/// Writes `state` as a Parquet checkpoint of its version and points
/// `_last_checkpoint` at it.
pub fn write_checkpoint(table: &Path, state: &Snapshot) -> Result<()> {
    let mut lines = Vec::new();
    let mut push = |action: Action| -> Result<()> {
        serde_json::to_writer(&mut lines, &action)
            .map_err(|e| ConnectorError::bad_option("path", e.to_string()))?;
        lines.push(b'\n');
        Ok(())
    };
    if let Some(protocol) = &state.protocol {
        push(Action::Protocol(protocol.clone()))?;
    }
    if let Some(metadata) = &state.metadata {
        push(Action::MetaData(metadata.clone()))?;
    }
    let mut txns: Vec<_> = state.txns.iter().collect();
    txns.sort();
    for (app_id, &version) in txns {
        push(Action::Txn(Txn {
            app_id: app_id.clone(),
            version,
            last_updated: None,
        }))?;
    }
    for add in &state.files {
        let mut add = add.clone();
        add.deletion_vector = None;
        push(Action::Add(add))?;
    }
    // Tombstones stay in checkpoints while a reader of an older version
    // or a vacuum may still need them.
    let expired = now_ms() - TOMBSTONE_RETENTION_MS;
    for tombstone in state.tombstones.values() {
        if tombstone.deletion_timestamp.unwrap_or(i64::MAX) >= expired {
            push(Action::Remove(tombstone.clone()))?;
        }
    }
    let schema = checkpoint_schema();
    let mut decoder = ReaderBuilder::new(schema.clone())
        .with_batch_size(8192)
        .build_decoder()?;
    let mut writer = ArrowWriter::try_new(Vec::new(), schema, None)?;
    let mut rest = &lines[..];
    while !rest.is_empty() {
        let read = decoder.decode(rest)?;
        rest = &rest[read..];
        if let Some(batch) = decoder.flush()? {
            writer.write(&batch)?;
        }
        if read == 0 {
            break;
        }
    }
    if let Some(batch) = decoder.flush()? {
        writer.write(&batch)?;
    }
    let bytes = writer.into_inner()?;
    let store = TableStore::of(table)?;
    store.put(&checkpoint_name(state.version), &bytes)?;
    let size = lines.iter().filter(|&&b| b == b'\n').count();
    store.put(
        &format!("{LOG_DIR}/_last_checkpoint"),
        format!("{{\"version\":{},\"size\":{size}}}", state.version).as_bytes(),
    )
}

/// Percent-encodes a relative file path as the `path` of an action.
pub fn encode_path(relative: &str) -> String {
    let mut out = String::with_capacity(relative.len());
    for b in relative.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/' | b'=') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes an action's `path` into a relative file path.
pub fn decode_path(path: &str) -> String {
    crate::sinks::partition::unescape(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol() -> Action {
        Action::Protocol(Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        })
    }

    fn metadata() -> Action {
        Action::MetaData(Metadata {
            id: "t".into(),
            name: None,
            description: None,
            format: Format {
                provider: "parquet".into(),
                options: BTreeMap::new(),
            },
            schema_string: r#"{"type":"struct","fields":[]}"#.into(),
            partition_columns: vec!["country".into()],
            configuration: BTreeMap::new(),
            created_time: Some(1),
        })
    }

    fn add(path: &str) -> Action {
        Action::Add(Add {
            path: path.into(),
            partition_values: [("country".to_string(), Some("US".to_string()))].into(),
            size: 10,
            modification_time: 2,
            data_change: true,
            stats: Some(r#"{"numRecords":3}"#.into()),
            deletion_vector: None,
        })
    }

    #[test]
    fn commits_replay_and_a_checkpoint_reads_back_the_same_state() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path();
        let mut state = Snapshot::default();
        let first = commit_next(table, &mut state, |_| {
            Ok(Some(vec![protocol(), metadata()]))
        });
        assert_eq!(first.unwrap(), Some(0));
        for n in 1..=12 {
            let mut actions = vec![add(&format!("country=US/f{n}.parquet"))];
            if n == 5 {
                actions.push(Action::Remove(Remove {
                    path: "country=US/f2.parquet".into(),
                    deletion_timestamp: Some(3),
                    data_change: true,
                    partition_values: None,
                    size: None,
                }));
            }
            actions.push(Action::Txn(Txn {
                app_id: "app".into(),
                version: n,
                last_updated: None,
            }));
            assert_eq!(
                commit_next(table, &mut state, |_| Ok(Some(actions.clone()))).unwrap(),
                Some(n)
            );
        }
        assert!(table.join(checkpoint_name(10)).exists());
        let read = snapshot(table, None).unwrap();
        assert_eq!(read.version, 12);
        assert_eq!(read.files, state.files);
        assert_eq!(read.files.len(), 11);
        assert_eq!(read.txns["app"], 12);
        assert_eq!(read.metadata, state.metadata);
        let at_four = snapshot(table, Some(4)).unwrap();
        assert_eq!(at_four.files.len(), 4);
        assert_eq!(at_four.txns["app"], 4);
        // A second writer that lost the race sees the version taken.
        assert!(!try_commit(table, 12, &[add("x.parquet")]).unwrap());
    }

    #[test]
    fn paths_round_trip_through_url_encoding() {
        let relative = "city=S%C3%A3o Paulo/part-1.parquet";
        let encoded = encode_path(relative);
        assert_eq!(encoded, "city=S%25C3%25A3o%20Paulo/part-1.parquet");
        assert_eq!(decode_path(&encoded), relative);
        assert_eq!(decode_path("a%2"), "a%2");
    }
}

//! The state directory: where checkpoints are written, found and checked.
//!
//! ```text
//!  STATE_DIR/
//!    chk-00000012/
//!      n003-windows.arrow      one Arrow IPC file per state table of a node
//!      n007-left.arrow
//!      MANIFEST                written last: MANIFEST.tmp, fsync, rename, fsync dir
//!      COMMITTED               a finished job's checkpoint whose sinks were committed
//!    chk-00000013/ ...
//! ```
//!
//! A checkpoint exists once its `MANIFEST` does. The manifest's first line
//! carries a CRC-32 of the JSON that follows; the JSON lists every node's
//! fingerprint (see [`crate::graph::JobGraph::fingerprint`]), its runtime
//! state and small values, and each state file with its size and CRC-32.
//! Loading walks checkpoints newest first and takes the first whose
//! manifest and files all check out, warning about each one it skips, so a
//! truncated file or a flipped byte costs one checkpoint, never the job.
//! A checkpoint taken by a different query is refused with the node whose
//! state no longer fits. The two newest checkpoints are kept.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::FileWriter;
use datafusion::arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

use super::{Checkpoint, CheckpointKind, NodeCheckpoint, NodeRuntimeState};
use crate::distribute::instances::Origin;
use crate::error::{EngineError, Result};
use crate::graph::JobGraph;
use crate::identity::NamedIdentity;
use crate::key_groups::KeyGroups;
use crate::message::CheckpointId;
use crate::state::{StateSnapshot, StateTable};

/// Manifest format version.
const FORMAT: u32 = 1;
/// Completed checkpoints kept.
const KEEP: usize = 2;
const MANIFEST: &str = "MANIFEST";
const COMMITTED: &str = "COMMITTED";
/// Names the savepoint a state directory's checkpoints continue.
const RESTORED_FROM: &str = "RESTORED_FROM";
const MANIFEST_HEADER: &str = "eddy-checkpoint-manifest crc32=";

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    format: u32,
    pub(super) checkpoint: CheckpointId,
    pub(super) kind: CheckpointKind,
    /// Wall-clock time of writing, epoch ms (informational).
    created_ms: u64,
    /// Instances of each keyed operator ([`JobGraph::parallelism`]); a
    /// resumed job runs as many. Absent in manifests written before eddy
    /// recorded it (see [`Manifest::parallelism`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parallelism: Option<usize>,
    /// The key groups keyed state is spread in ([`crate::key_groups`]);
    /// absent in manifests written before eddy had them (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_groups: Option<KeyGroups>,
    /// The identities of the nodes of the graph as planned
    /// ([`JobGraph::identities`]): what a changed query's state is mapped
    /// by. Absent in manifests written before eddy recorded them (such a
    /// checkpoint resumes only the very same query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    planned: Option<Vec<String>>,
    /// The named identities of the same nodes
    /// ([`JobGraph::named_identities`]); absent in manifests written before
    /// eddy recorded them (their state moves by derived identity only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    named: Option<Vec<Option<NamedIdentity>>>,
    nodes: Vec<ManifestNode>,
}

/// How the job that took a checkpoint ran: what a job resuming from it
/// starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointLayout {
    /// Instances of each keyed operator.
    pub parallelism: usize,
    /// Key groups keyed state is spread in.
    pub key_groups: KeyGroups,
}

impl Manifest {
    /// The parallelism and key groups the checkpoint was taken with.
    pub(super) fn layout(&self) -> CheckpointLayout {
        CheckpointLayout {
            parallelism: self.parallelism(),
            key_groups: self.key_groups.unwrap_or_default(),
        }
    }

    /// The instances of each keyed operator the checkpoint was taken with.
    /// Older manifests do not record it: their key splits' fingerprints
    /// (`key_split ... over N instances`) say it, and without a split the
    /// job ran each operator once.
    fn parallelism(&self) -> usize {
        if let Some(n) = self.parallelism {
            return n.max(1);
        }
        self.nodes
            .iter()
            .filter(|node| node.fingerprint.contains("key_split"))
            .find_map(|node| {
                let (before, _) = node.fingerprint.split_once(" instances")?;
                before.rsplit(' ').next()?.parse().ok()
            })
            .unwrap_or(1)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct ManifestNode {
    fingerprint: String,
    /// The node's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// Which planned node it runs ([`Origin`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<Origin>,
    runtime: NodeRuntimeState,
    meta: serde_json::Value,
    tables: Vec<ManifestTable>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ManifestTable {
    name: String,
    file: String,
    bytes: u64,
    crc32: u32,
    rows: u64,
}

/// A state directory (`--state-dir`).
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

/// Counts and checksums what passes through to the file.
struct ChecksumWriter<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
    bytes: u64,
}

impl<W: Write> Write for ChecksumWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> EngineError {
    EngineError::Checkpoint(format!("{}: {e}", path.display()))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))
}

impl StateDir {
    /// Opens (creating it if needed) the state directory at `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| io_error(&root, e))?;
        Ok(Self { root })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the newest complete checkpoint is a finished job's. Only
    /// reads: another process may be writing the directory.
    pub fn finished(&self) -> Result<bool> {
        for (_, dir) in self.list()?.iter().rev() {
            if dir.join(MANIFEST).exists() {
                return Ok(matches!(
                    read_manifest(dir).map(|m| m.kind),
                    Ok(CheckpointKind::Finished)
                ));
            }
        }
        Ok(false)
    }

    /// Whether the newest complete checkpoint is a finished job's whose
    /// sinks were committed ([`StateDir::mark_committed`]): nothing is
    /// left to do for the job. A finished checkpoint without the mark may
    /// have had its commit cut short; starting the job commits it again.
    /// Only reads.
    pub fn finished_and_committed(&self) -> Result<bool> {
        for (_, dir) in self.list()?.iter().rev() {
            if dir.join(MANIFEST).exists() {
                return Ok(dir.join(COMMITTED).exists()
                    && matches!(
                        read_manifest(dir).map(|m| m.kind),
                        Ok(CheckpointKind::Finished)
                    ));
            }
        }
        Ok(false)
    }

    /// Records that checkpoint `id`'s sinks have been committed (written
    /// for a finished job's last checkpoint).
    pub fn mark_committed(&self, id: CheckpointId) -> Result<()> {
        let dir = self.checkpoint_dir(id);
        let path = dir.join(COMMITTED);
        File::create(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_error(&path, e))?;
        sync_dir(&dir)
    }

    /// The instances of each keyed operator and the key groups the newest
    /// readable checkpoint was taken with, `None` without one: what a job
    /// resuming from this directory starts from (see
    /// [`crate::parallel::Parallelism`]).
    pub fn checkpointed_layout(&self) -> Result<Option<CheckpointLayout>> {
        for (_, dir) in self.list()?.iter().rev() {
            if dir.join(MANIFEST).exists() {
                if let Ok(manifest) = read_manifest(dir) {
                    return Ok(Some(manifest.layout()));
                }
            }
        }
        Ok(None)
    }

    /// The directory of the newest checkpoint whose manifest reads, if any.
    pub(super) fn newest_complete(&self) -> Result<Option<PathBuf>> {
        for (_, dir) in self.list()?.iter().rev() {
            if dir.join(MANIFEST).exists() && read_manifest(dir).is_ok() {
                return Ok(Some(dir.clone()));
            }
        }
        Ok(None)
    }

    /// Whether any checkpoint is complete (has its manifest).
    pub fn has_checkpoints(&self) -> Result<bool> {
        Ok(self
            .list()?
            .iter()
            .any(|(_, dir)| dir.join(MANIFEST).exists()))
    }

    /// The savepoint this directory's checkpoints continue
    /// ([`StateDir::mark_restored_from`]), if any.
    pub fn restored_from(&self) -> Option<PathBuf> {
        std::fs::read_to_string(self.root.join(RESTORED_FROM))
            .ok()
            .map(|text| PathBuf::from(text.trim_end()))
    }

    /// Records that this directory's checkpoints continue the savepoint at
    /// `savepoint` (so that a restart with the same savepoint resumes from
    /// them rather than going back to it).
    pub fn mark_restored_from(&self, savepoint: &Path) -> Result<()> {
        let path = self.root.join(RESTORED_FROM);
        std::fs::write(&path, savepoint.display().to_string())
            .and_then(|_| File::open(&path).and_then(|f| f.sync_all()))
            .map_err(|e| io_error(&path, e))?;
        sync_dir(&self.root)
    }

    fn checkpoint_dir(&self, id: CheckpointId) -> PathBuf {
        self.root.join(format!("chk-{id:08}"))
    }

    /// Checkpoint directories (complete or not), oldest first.
    fn list(&self) -> Result<Vec<(CheckpointId, PathBuf)>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(|e| io_error(&self.root, e))? {
            let entry = entry.map_err(|e| io_error(&self.root, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if let Some(id) = name
                .strip_prefix("chk-")
                .and_then(|n| n.parse::<CheckpointId>().ok())
            {
                found.push((id, entry.path()));
            }
        }
        found.sort();
        Ok(found)
    }

    /// Removes every checkpoint (`--ignore-state`).
    pub fn clear(&self) -> Result<()> {
        for (_, dir) in self.list()? {
            std::fs::remove_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        }
        Ok(())
    }

    /// Writes `checkpoint` for `graph` durably, then drops checkpoints older
    /// than the last two. Returns the bytes written.
    pub fn write(&self, graph: &JobGraph, checkpoint: &Checkpoint) -> Result<u64> {
        let dir = self.checkpoint_dir(checkpoint.id);
        if dir.exists() {
            // Left by an earlier run that did not get past this checkpoint.
            std::fs::remove_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let mut total = 0;
        let mut nodes = Vec::with_capacity(checkpoint.nodes.len());
        for (id, node) in checkpoint.nodes.iter().enumerate() {
            let mut tables = Vec::with_capacity(node.state.tables.len());
            // A table pushed as several batches is one file of them all.
            let mut names: Vec<&str> = Vec::new();
            for table in &node.state.tables {
                if !names.contains(&table.name.as_str()) {
                    names.push(&table.name);
                }
            }
            for name in names {
                let batches: Vec<&RecordBatch> = node
                    .state
                    .tables
                    .iter()
                    .filter(|t| t.name == name)
                    .map(|t| &t.batch)
                    .collect();
                let file = format!("n{id:03}-{name}.arrow");
                let (bytes, crc32) = write_table(&dir.join(&file), &batches)?;
                total += bytes;
                tables.push(ManifestTable {
                    name: name.to_string(),
                    file,
                    bytes,
                    crc32,
                    rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
                });
            }
            nodes.push(ManifestNode {
                fingerprint: graph.fingerprint(id),
                name: Some(graph.nodes[id].name.clone()),
                origin: graph.expansion().and_then(|e| e.origins.get(id).copied()),
                runtime: node.runtime.clone(),
                meta: node.state.meta.clone(),
                tables,
            });
        }
        let created_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let manifest = Manifest {
            format: FORMAT,
            checkpoint: checkpoint.id,
            kind: checkpoint.kind,
            created_ms,
            parallelism: Some(graph.parallelism()),
            key_groups: Some(graph.key_groups()),
            planned: graph.expansion().map(|e| e.planned.identities()),
            named: graph.expansion().map(|e| e.planned.named_identities()),
            nodes,
        };
        let json = serde_json::to_vec(&manifest)
            .map_err(|e| EngineError::State(format!("manifest: {e}")))?;
        let mut text = format!("{MANIFEST_HEADER}{:08x}\n", crc32fast::hash(&json)).into_bytes();
        text.extend_from_slice(&json);
        let tmp = dir.join("MANIFEST.tmp");
        let path = dir.join(MANIFEST);
        let mut file = File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
        file.write_all(&text)
            .and_then(|_| file.sync_all())
            .map_err(|e| io_error(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io_error(&path, e))?;
        sync_dir(&dir)?;
        sync_dir(&self.root)?;
        total += text.len() as u64;
        self.retain(checkpoint.id);
        Ok(total)
    }

    /// Keeps the newest [`KEEP`] complete checkpoints up to `current`;
    /// removes older ones and incomplete ones before `current`. Failing to
    /// remove is only logged: the checkpoint itself is already safe.
    fn retain(&self, current: CheckpointId) {
        let Ok(all) = self.list() else { return };
        let mut complete_kept = 0;
        for (id, dir) in all.into_iter().rev() {
            if id > current {
                continue;
            }
            let complete = dir.join(MANIFEST).exists();
            let keep = complete && complete_kept < KEEP;
            if keep {
                complete_kept += 1;
            } else if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!("cannot remove old checkpoint {}: {e}", dir.display());
            }
        }
    }

    /// The newest usable checkpoint and what its manifest says of the
    /// graph that took it, or `None` when there is none; unusable ones are
    /// skipped and removed as [`StateDir::load_latest`] does, nothing is
    /// checked against a query.
    pub fn load_latest_taken(&self) -> Result<Option<(Checkpoint, TakenBy)>> {
        let Some((manifest, checkpoint)) = self.newest_usable()? else {
            return Ok(None);
        };
        Ok(Some((checkpoint, TakenBy::of(&self.root, manifest))))
    }

    /// The newest usable checkpoint for `graph`, or `None` when there is
    /// none. Unusable checkpoints (incomplete, truncated, corrupt) are
    /// skipped with a warning and removed, together with anything newer
    /// than the one chosen. A checkpoint of another query is an error.
    pub fn load_latest(&self, graph: &JobGraph) -> Result<Option<Checkpoint>> {
        let Some((manifest, checkpoint)) = self.newest_usable()? else {
            return Ok(None);
        };
        check_fingerprints(&self.root, graph, &manifest)?;
        Ok(Some(checkpoint))
    }

    /// The newest checkpoint that reads whole (skipping and warning about
    /// the others), with anything newer removed; `None` (and the
    /// directory cleared) when there is none.
    fn newest_usable(&self) -> Result<Option<(Manifest, Checkpoint)>> {
        let all = self.list()?;
        let mut chosen = None;
        for (id, dir) in all.iter().rev() {
            if !dir.join(MANIFEST).exists() {
                tracing::debug!(
                    "checkpoint {id} in {} is incomplete; skipped",
                    self.root.display()
                );
                continue;
            }
            match read_checkpoint(dir) {
                Ok(found) => {
                    chosen = Some(found);
                    break;
                }
                Err(reason) => {
                    tracing::warn!(
                        "checkpoint {id} in {} is unusable ({reason}); trying the one before it",
                        self.root.display()
                    );
                }
            }
        }
        let Some((manifest, checkpoint)) = chosen else {
            if all.iter().any(|(_, dir)| dir.join(MANIFEST).exists()) {
                tracing::warn!(
                    "no usable checkpoint in {}; starting afresh",
                    self.root.display()
                );
            }
            self.clear()?;
            return Ok(None);
        };
        for (id, dir) in all {
            if id > checkpoint.id {
                std::fs::remove_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
            }
        }
        Ok(Some((manifest, checkpoint)))
    }
}

/// What a checkpoint's manifest says of the graph that took it: enough to
/// check a query against it, or to map its state onto a changed one.
#[derive(Debug, Clone)]
pub struct TakenBy {
    /// Where the checkpoint (or savepoint) is, for messages.
    pub place: PathBuf,
    /// Its number.
    pub checkpoint: CheckpointId,
    /// Its parallelism and key groups.
    pub layout: CheckpointLayout,
    /// The planned graph's node identities, when recorded.
    pub planned: Option<Vec<String>>,
    /// The planned graph's named identities, when recorded.
    pub named: Option<Vec<Option<NamedIdentity>>>,
    /// Per node: its fingerprint, name and origin (when recorded).
    pub nodes: Vec<(String, Option<String>, Option<Origin>)>,
}

impl TakenBy {
    pub(super) fn of(place: &Path, manifest: Manifest) -> Self {
        Self {
            place: place.to_path_buf(),
            checkpoint: manifest.checkpoint,
            layout: manifest.layout(),
            planned: manifest.planned,
            named: manifest.named,
            nodes: manifest
                .nodes
                .into_iter()
                .map(|n| (n.fingerprint, n.name, n.origin))
                .collect(),
        }
    }

    /// An error unless `graph` is the very graph that took the checkpoint
    /// (node by node), naming the first node whose state no longer fits.
    pub fn check(&self, graph: &JobGraph) -> Result<()> {
        let fingerprints: Vec<&str> = self.nodes.iter().map(|(f, _, _)| f.as_str()).collect();
        check_fingerprint_list(&self.place, self.checkpoint, graph, &fingerprints)
    }
}

fn write_table(path: &Path, batches: &[&RecordBatch]) -> Result<(u64, u32)> {
    let Some(first) = batches.first() else {
        return Err(EngineError::State(format!(
            "{}: a table without a batch",
            path.display()
        )));
    };
    let file = File::create(path).map_err(|e| io_error(path, e))?;
    let sink = ChecksumWriter {
        inner: BufWriter::with_capacity(1 << 16, file),
        crc: crc32fast::Hasher::new(),
        bytes: 0,
    };
    let mut writer = FileWriter::try_new(sink, &first.schema()).map_err(|e| io_error(path, e))?;
    for batch in batches {
        writer.write(batch).map_err(|e| io_error(path, e))?;
    }
    writer.finish().map_err(|e| io_error(path, e))?;
    let mut sink = writer.into_inner().map_err(|e| io_error(path, e))?;
    sink.flush().map_err(|e| io_error(path, e))?;
    let (bytes, crc) = (sink.bytes, sink.crc.finalize());
    let file = sink
        .inner
        .into_inner()
        .map_err(|e| io_error(path, e.error()))?;
    file.sync_all().map_err(|e| io_error(path, e))?;
    Ok((bytes, crc))
}

/// Reads and checks a checkpoint's manifest.
pub(super) fn read_manifest(dir: &Path) -> std::result::Result<Manifest, String> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let newline = text
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("the manifest has no header line")?;
    let header =
        std::str::from_utf8(&text[..newline]).map_err(|_| "the manifest header is not text")?;
    let expected = header
        .strip_prefix(MANIFEST_HEADER)
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("the manifest header is damaged")?;
    let json = &text[newline + 1..];
    if crc32fast::hash(json) != expected {
        return Err("the manifest's checksum does not match".into());
    }
    let manifest: Manifest =
        serde_json::from_slice(json).map_err(|e| format!("the manifest cannot be read: {e}"))?;
    if manifest.format != FORMAT {
        return Err(format!(
            "manifest format {} (this eddy reads {FORMAT})",
            manifest.format
        ));
    }
    Ok(manifest)
}

/// Reads and checks a checkpoint directory; the error says what is wrong.
pub(super) fn read_checkpoint(dir: &Path) -> std::result::Result<(Manifest, Checkpoint), String> {
    let manifest = read_manifest(dir)?;
    let mut nodes = Vec::with_capacity(manifest.nodes.len());
    for node in &manifest.nodes {
        let mut tables = Vec::with_capacity(node.tables.len());
        for table in &node.tables {
            let batch = read_table(&dir.join(&table.file), table)?;
            tables.push(StateTable {
                name: table.name.clone(),
                batch,
            });
        }
        nodes.push(NodeCheckpoint {
            runtime: node.runtime.clone(),
            state: StateSnapshot {
                meta: node.meta.clone(),
                tables,
            },
        });
    }
    let checkpoint = Checkpoint {
        id: manifest.checkpoint,
        kind: manifest.kind,
        nodes,
    };
    Ok((manifest, checkpoint))
}

fn read_table(path: &Path, expected: &ManifestTable) -> std::result::Result<RecordBatch, String> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::new(f).read_to_end(&mut bytes))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 != expected.bytes {
        return Err(format!(
            "{} has {} bytes, {} were written",
            path.display(),
            bytes.len(),
            expected.bytes
        ));
    }
    if crc32fast::hash(&bytes) != expected.crc32 {
        return Err(format!("{}: checksum does not match", path.display()));
    }
    let reader = FileReader::try_new(std::io::Cursor::new(bytes), None)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let batch =
        concat_batches(&schema, &batches).map_err(|e| format!("{}: {e}", path.display()))?;
    if batch.num_rows() as u64 != expected.rows {
        return Err(format!(
            "{} holds {} rows, {} were written",
            path.display(),
            batch.num_rows(),
            expected.rows
        ));
    }
    Ok(batch)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

fn check_fingerprints(root: &Path, graph: &JobGraph, manifest: &Manifest) -> Result<()> {
    let fingerprints: Vec<&str> = manifest
        .nodes
        .iter()
        .map(|n| n.fingerprint.as_str())
        .collect();
    check_fingerprint_list(root, manifest.checkpoint, graph, &fingerprints)
}

fn check_fingerprint_list(
    root: &Path,
    checkpoint: CheckpointId,
    graph: &JobGraph,
    fingerprints: &[&str],
) -> Result<()> {
    let refuse = |detail: String| {
        Err(EngineError::Checkpoint(format!(
            "the state in {} (checkpoint {checkpoint}) was written by a different query: {detail}. \
             Run with --ignore-state to start afresh (the state and the output it covers are discarded), \
             or use another --state-dir",
            root.display(),
        )))
    };
    for (id, fingerprint) in fingerprints.iter().enumerate() {
        if id >= graph.nodes.len() {
            return refuse(format!(
                "the checkpoint has a node #{id} ({}) that the query lacks",
                first_line(fingerprint)
            ));
        }
        let now = graph.fingerprint(id);
        if now != *fingerprint {
            return refuse(format!(
                "the state of '{}' no longer fits: it was taken for\n  {}\nand the query now has\n  {}",
                graph.nodes[id].name,
                fingerprint.replace('\n', "\n  "),
                now.replace('\n', "\n  ")
            ));
        }
    }
    if graph.nodes.len() > fingerprints.len() {
        let id = fingerprints.len();
        return refuse(format!(
            "the query has a node #{id} ('{}') that the checkpoint lacks",
            graph.nodes[id].name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table pushed as several batches (a pending buffer, shared rather
    /// than copied at the snapshot) is one file, read back as one batch.
    #[test]
    fn a_table_of_several_batches_is_one_file_read_back_whole() {
        use datafusion::arrow::array::Int64Array;
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        let schema =
            std::sync::Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let batch = |values: Vec<i64>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![std::sync::Arc::new(Int64Array::from(values))],
            )
            .unwrap()
        };
        let mut snapshot = StateSnapshot::default();
        snapshot.push_batches(
            "pending",
            &schema,
            vec![batch(vec![1, 2]), batch(vec![3]), batch(vec![4, 5])],
        );
        snapshot.push_batches("empty", &schema, Vec::new());
        assert_eq!(
            snapshot.tables.len(),
            4,
            "shared as they are: three batches and an empty one"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n000-pending.arrow");
        let parts: Vec<&RecordBatch> = snapshot
            .tables
            .iter()
            .filter(|t| t.name == "pending")
            .map(|t| &t.batch)
            .collect();
        let (bytes, crc32) = write_table(&path, &parts).unwrap();
        let read = read_table(
            &path,
            &ManifestTable {
                name: "pending".into(),
                file: String::new(),
                bytes,
                crc32,
                rows: 5,
            },
        )
        .unwrap();
        let values = read
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(values.values().to_vec(), vec![1, 2, 3, 4, 5]);
        // In memory, taking the table gives the batches as one too.
        assert_eq!(snapshot.take_table("pending").unwrap().num_rows(), 5);
        assert_eq!(snapshot.take_table("empty").unwrap().num_rows(), 0);
        assert!(snapshot.take_table("pending").is_err());
    }

    fn manifest(parallelism: Option<usize>, fingerprints: &[&str]) -> Manifest {
        Manifest {
            format: FORMAT,
            checkpoint: 3,
            kind: CheckpointKind::Running,
            created_ms: 0,
            parallelism,
            key_groups: None,
            planned: None,
            named: None,
            nodes: fingerprints
                .iter()
                .map(|f| ManifestNode {
                    fingerprint: f.to_string(),
                    name: None,
                    origin: None,
                    runtime: NodeRuntimeState::default(),
                    meta: serde_json::Value::Null,
                    tables: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_instances_of_a_checkpoint_are_read_back() {
        let split = "#1 key_split hash(customer_id@0) over 4 instances <- #0";
        assert_eq!(manifest(Some(3), &[split]).parallelism(), 3);
        // Manifests from before eddy recorded it: the key split says it.
        assert_eq!(
            manifest(None, &["#0 source orders", split]).parallelism(),
            4
        );
        assert_eq!(manifest(None, &["#0 source orders"]).parallelism(), 1);
    }
}

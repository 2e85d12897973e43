//! The state directory: where checkpoints are written, found and checked.
//!
//! ```text
//!  STATE_DIR/
//!    chk-00000012/
//!      n003-windows.arrow      one Arrow IPC file per state table of a node
//!      n007-left.arrow
//!      n009-groups.arrow       a keyed table in full ...
//!      MANIFEST                written last: MANIFEST.tmp, fsync, rename, fsync dir
//!      COMMITTED               a finished job's checkpoint whose sinks were committed
//!    chk-00000013/
//!      n009-groups.changed.arrow   ... and the keys that changed since (their rows)
//!      n009-groups.removed.arrow   ... and that went; chk-00000012's file stays
//!      MANIFEST                    lists n009-groups.arrow of chk-00000012, then these
//! ```
//!
//! A checkpoint exists once its `MANIFEST` does ([`super::manifest`]: a
//! CRC-32 of its JSON, every node's fingerprint, runtime state, small
//! values, and each state file with where it lies, its size and CRC-32).
//! Loading walks checkpoints newest first and takes the first whose
//! manifest and files all check out, warning about each one it skips. A
//! truncated file or a flipped byte costs the checkpoints that read it:
//! one, or for a keyed table's full file, those back to the operator's
//! previous full snapshot (at most [`crate::state::FULL_SNAPSHOT_EVERY`]);
//! never the job, as the newest checkpoint that shares no file with the
//! newest is kept besides the newest two (of an older checkpoint they
//! read from, only the files they read stay). A checkpoint taken by a
//! different query is refused with the node whose state no longer fits.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datafusion::arrow::record_batch::RecordBatch;

use super::io_error;
pub use super::manifest::CheckpointLayout;
use super::manifest::{
    checkpoint_dir_name, read_manifest, write_manifest, Manifest, ManifestChange, ManifestFile,
    ManifestKeyed, ManifestNode, ManifestTable, MANIFEST,
};
use super::replica::StateReplica;
use super::tables::{read_checkpoint, write_table};
use super::{Checkpoint, CheckpointKind};
use crate::distribute::instances::Origin;
use crate::distribute::physical::PhysicalGraph;
use crate::error::{EngineError, Result};
use crate::graph::JobGraph;
use crate::identity::NamedIdentity;
use crate::message::CheckpointId;
use crate::state::table_file::TableFile;

/// Completed checkpoints kept (besides the one a damaged keyed table
/// would fall back to, see [`StateDir::retain`]).
const KEEP: usize = 2;
const COMMITTED: &str = "COMMITTED";
/// Names the savepoint a state directory's checkpoints continue.
const RESTORED_FROM: &str = "RESTORED_FROM";

/// A state directory (`--state-dir`): local, or the local working copy of
/// a replica in a bucket.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
    /// Per node and keyed table, what this store wrote of it last: what
    /// the node's next changes apply to. Empty for a store just opened, as
    /// a node's first snapshot in a run is always full.
    chains: Arc<Mutex<HashMap<(usize, String), Chain>>>,
    /// Where the directory is kept beyond this machine, synced at every
    /// checkpoint before it counts as written.
    replica: Option<Arc<dyn StateReplica>>,
}

/// A keyed table as written so far: its full rows and the changes since.
#[derive(Debug, Clone)]
struct Chain {
    /// The snapshot it stands at.
    serial: u64,
    key_columns: usize,
    /// Where it lies: every `dir` set.
    full: ManifestFile,
    changes: Vec<ManifestChange>,
}

impl Chain {
    /// The table's manifest entry in checkpoint `id`'s manifest.
    fn table(&self, name: &str, id: CheckpointId) -> ManifestTable {
        let local = |f: &ManifestFile| ManifestFile {
            dir: f.dir.filter(|d| *d != id),
            ..f.clone()
        };
        ManifestTable {
            name: name.to_string(),
            file: local(&self.full),
            keyed: Some(ManifestKeyed {
                key_columns: self.key_columns,
                changes: self
                    .changes
                    .iter()
                    .map(|c| ManifestChange {
                        changed: local(&c.changed),
                        removed: c.removed.as_ref().map(local),
                    })
                    .collect(),
            }),
        }
    }
}

/// Removes every file of `dir` but `names`, its manifest first: what is
/// left is read by later checkpoints, and no checkpoint of its own.
fn keep_only(dir: &Path, names: &BTreeSet<String>) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(MANIFEST)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if !names.contains(&name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Writes `batches` as `file` in `dir`; its manifest entry (in `dir`).
fn write_file(dir: &Path, file: &str, batches: &[&RecordBatch]) -> Result<ManifestFile> {
    let (bytes, crc32) = write_table(&dir.join(file), batches)?;
    Ok(ManifestFile {
        dir: None,
        file: file.to_string(),
        bytes,
        crc32,
        rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
    })
}

/// Puts a table already written to a file (a snapshot's
/// [`TableFile`]) into `dir` as `file`: a hard link when both lie on one
/// file system, else a copy, synced; its manifest entry.
fn link_file(dir: &Path, file: &str, table: &TableFile) -> Result<ManifestFile> {
    let from: &Path = table.path.as_ref();
    let to = dir.join(file);
    if std::fs::hard_link(from, &to).is_err() {
        std::fs::copy(from, &to).map_err(|e| io_error(&to, e))?;
        File::open(&to)
            .and_then(|f| f.sync_all())
            .map_err(|e| io_error(&to, e))?;
    }
    Ok(ManifestFile {
        dir: None,
        file: file.to_string(),
        bytes: table.bytes,
        crc32: table.crc32,
        rows: table.rows,
    })
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
        Ok(Self {
            root,
            chains: Arc::default(),
            replica: None,
        })
    }

    /// Opens the local working copy `root` of `replica`: filled from the
    /// replica (unless `fresh`, which clears the replica instead), and
    /// synced back at every checkpoint ([`super::replica`]).
    pub fn open_replicated(
        root: impl Into<PathBuf>,
        replica: Arc<dyn StateReplica>,
        fresh: bool,
    ) -> Result<Self> {
        let root = root.into();
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(|e| io_error(&root, e))?;
        }
        std::fs::create_dir_all(&root).map_err(|e| io_error(&root, e))?;
        if fresh {
            replica.clear()?;
        } else {
            replica.restore(&root)?;
        }
        let mut store = Self::open(root)?;
        store.replica = Some(replica);
        Ok(store)
    }

    /// Copies the directory to its replica, if it has one.
    fn sync_replica(&self) -> Result<()> {
        match &self.replica {
            Some(replica) => replica.sync(&self.root),
            None => Ok(()),
        }
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
        sync_dir(&dir)?;
        self.sync_replica()
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
        self.root.join(checkpoint_dir_name(id))
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
        match &self.replica {
            Some(replica) => replica.clear(),
            None => Ok(()),
        }
    }

    /// Writes `checkpoint` for `graph` durably, then drops the checkpoints
    /// no longer needed ([`StateDir::retain`]). Returns the bytes written.
    ///
    /// A keyed table a node handed over as changes
    /// ([`crate::state::KeyedTable`]) is written as a file of the changed
    /// rows and one of the removed keys; the manifest lists them after
    /// the files (in earlier checkpoints' directories) they apply to.
    pub fn write(&self, graph: &PhysicalGraph, checkpoint: &Checkpoint) -> Result<u64> {
        let dir = self.checkpoint_dir(checkpoint.id);
        if dir.exists() {
            // Left by an earlier run that did not get past this checkpoint.
            std::fs::remove_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let mut chains = self
            .chains
            .lock()
            .map_err(|_| EngineError::State("the checkpoint store's lock is poisoned".into()))?
            .clone();
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
                let keyed = node.state.keyed.iter().find(|k| k.table == name);
                let slot = (id, name.to_string());
                let Some((keyed, change)) = keyed.and_then(|k| Some((k, k.change.as_ref()?)))
                else {
                    let file = format!("n{id:03}-{name}.arrow");
                    let written = write_file(&dir, &file, &batches)?;
                    total += written.bytes;
                    match keyed {
                        Some(k) => chains.insert(
                            slot,
                            Chain {
                                serial: k.serial,
                                key_columns: k.key_columns,
                                full: ManifestFile {
                                    dir: Some(checkpoint.id),
                                    ..written.clone()
                                },
                                changes: Vec::new(),
                            },
                        ),
                        None => chains.remove(&slot),
                    };
                    tables.push(ManifestTable {
                        name: name.to_string(),
                        file: written,
                        keyed: None,
                    });
                    continue;
                };
                if let Some(chain) = chains.get(&slot).filter(|c| c.serial == keyed.serial) {
                    // The same snapshot again (a finished node's final
                    // state stands in every later checkpoint): its files.
                    tables.push(chain.table(name, checkpoint.id));
                    continue;
                }
                let chain = chains
                    .get_mut(&slot)
                    .filter(|c| c.serial == change.base && c.key_columns == keyed.key_columns)
                    .ok_or_else(|| {
                        EngineError::State(format!(
                            "node '{}' handed over changes to its table {name} since a snapshot \
                             the checkpoint store did not write",
                            graph.nodes.get(id).map_or("?", |n| n.name.as_str())
                        ))
                    })?;
                let changed =
                    write_file(&dir, &format!("n{id:03}-{name}.changed.arrow"), &batches)?;
                total += changed.bytes;
                let removed = if change.removed.num_rows() > 0 {
                    let file = format!("n{id:03}-{name}.removed.arrow");
                    let removed = write_file(&dir, &file, &[&change.removed])?;
                    total += removed.bytes;
                    Some(removed)
                } else {
                    None
                };
                let here = |f: ManifestFile| ManifestFile {
                    dir: Some(checkpoint.id),
                    ..f
                };
                chain.serial = keyed.serial;
                chain.changes.push(ManifestChange {
                    changed: here(changed),
                    removed: removed.map(here),
                });
                tables.push(chain.table(name, checkpoint.id));
            }
            for file in &node.state.files {
                let name = file.name.as_str();
                let slot = (id, name.to_string());
                let written = link_file(&dir, &format!("n{id:03}-{name}.arrow"), file)?;
                total += written.bytes;
                match node.state.keyed.iter().find(|k| k.table == name) {
                    Some(k) if k.change.is_none() => chains.insert(
                        slot,
                        Chain {
                            serial: k.serial,
                            key_columns: k.key_columns,
                            full: ManifestFile {
                                dir: Some(checkpoint.id),
                                ..written.clone()
                            },
                            changes: Vec::new(),
                        },
                    ),
                    Some(_) => {
                        return Err(EngineError::State(format!(
                            "node '{}' handed over changes to its table {name} as a file",
                            graph.nodes.get(id).map_or("?", |n| n.name.as_str())
                        )))
                    }
                    None => chains.remove(&slot),
                };
                tables.push(ManifestTable {
                    name: name.to_string(),
                    file: written,
                    keyed: None,
                });
            }
            nodes.push(ManifestNode {
                fingerprint: graph.fingerprint(id),
                name: Some(graph.nodes[id].name.clone()),
                origin: graph.origin(id),
                runtime: node.runtime.clone(),
                meta: node.state.meta.clone(),
                tables,
            });
        }
        let created_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let mut manifest = Manifest {
            format: 0,
            checkpoint: checkpoint.id,
            kind: checkpoint.kind,
            created_ms,
            parallelism: Some(graph.parallelism()),
            key_groups: Some(graph.key_groups()),
            planned: Some(graph.planned().identities()),
            named: Some(graph.planned().named_identities()),
            nodes,
        };
        total += write_manifest(&dir, &mut manifest)?;
        sync_dir(&self.root)?;
        // Only a written checkpoint's changes are built on.
        if let Ok(mut held) = self.chains.lock() {
            *held = chains;
        }
        self.retain(checkpoint.id);
        self.sync_replica()?;
        Ok(total)
    }

    /// Keeps, of the complete checkpoints up to `current`, the newest
    /// [`KEEP`], and the newest one that shares no file with the newest
    /// (so that a damaged file of a keyed table, which later checkpoints
    /// build on, still leaves a checkpoint to resume from). Of an older
    /// checkpoint whose files a kept one reads, only those files stay (its
    /// manifest goes: it is no checkpoint of its own any more); the rest
    /// up to `current` is removed. Failing to remove is only logged: the
    /// checkpoint itself is safe.
    fn retain(&self, current: CheckpointId) {
        let Ok(all) = self.list() else { return };
        type Files = BTreeMap<CheckpointId, BTreeSet<String>>;
        let complete: Vec<(CheckpointId, Option<Files>)> = all
            .iter()
            .rev()
            .filter(|(id, dir)| *id <= current && dir.join(MANIFEST).exists())
            .map(|(id, dir)| (*id, read_manifest(dir).ok().map(|m| m.files())))
            .collect();
        let mut kept: Vec<&(CheckpointId, Option<Files>)> = complete.iter().take(KEEP).collect();
        if let Some((newest, files)) = complete.first() {
            let oldest_read = files
                .as_ref()
                .and_then(|f| f.keys().next().copied())
                .unwrap_or(*newest);
            kept.extend(complete.iter().find(|(id, _)| *id < oldest_read));
        }
        let checkpoints: BTreeSet<CheckpointId> = kept.iter().map(|(id, _)| *id).collect();
        let mut read: Files = BTreeMap::new();
        for (_, files) in &kept {
            for (dir, names) in files.iter().flatten() {
                read.entry(*dir).or_default().extend(names.iter().cloned());
            }
        }
        for (id, dir) in all {
            if id > current || checkpoints.contains(&id) {
                continue;
            }
            let outcome = match read.get(&id) {
                None => std::fs::remove_dir_all(&dir),
                Some(names) => keep_only(&dir, names),
            };
            if let Err(e) = outcome {
                tracing::warn!("cannot remove old checkpoint {}: {e}", dir.display());
            }
        }
    }

    /// The newest usable checkpoint and what its manifest says of the
    /// graph that took it, or `None` when there is none; unusable ones are
    /// skipped and removed as [`StateDir::load_latest`] does, nothing is
    /// checked against a query.
    pub fn load_latest_taken(&self) -> Result<Option<(Checkpoint, TakenBy)>> {
        let Some((manifest, checkpoint)) = self.newest_usable(Tidy::Yes)? else {
            return Ok(None);
        };
        Ok(Some((checkpoint, TakenBy::of(&self.root, manifest))))
    }

    /// Like [`StateDir::load_latest_taken`], but removes nothing: for
    /// reading the state of a job that runs on and writes its next
    /// checkpoint meanwhile (whose directory, incomplete until its
    /// manifest is written, must not be taken for a leftover).
    pub fn peek_latest_taken(&self) -> Result<Option<(Checkpoint, TakenBy)>> {
        let Some((manifest, checkpoint)) = self.newest_usable(Tidy::No)? else {
            return Ok(None);
        };
        Ok(Some((checkpoint, TakenBy::of(&self.root, manifest))))
    }

    /// The newest usable checkpoint for `graph`, or `None` when there is
    /// none. Unusable checkpoints (incomplete, truncated, corrupt) are
    /// skipped with a warning and removed, together with anything newer
    /// than the one chosen. A checkpoint of another query is an error.
    pub fn load_latest(&self, graph: &JobGraph) -> Result<Option<Checkpoint>> {
        let Some((manifest, checkpoint)) = self.newest_usable(Tidy::Yes)? else {
            return Ok(None);
        };
        check_fingerprints(&self.root, graph, &manifest)?;
        Ok(Some(checkpoint))
    }

    /// The newest checkpoint that reads whole (skipping and warning about
    /// the others); `None` when there is none. With [`Tidy::Yes`] (a job
    /// about to resume from it) anything newer is removed, and the
    /// directory cleared when there is none.
    fn newest_usable(&self, tidy: Tidy) -> Result<Option<(Manifest, Checkpoint)>> {
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
        if tidy == Tidy::No {
            return Ok(chosen);
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

/// Whether finding the newest usable checkpoint removes what is past it
/// (a job resuming) or leaves everything as it is (a reader beside a
/// running job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tidy {
    Yes,
    No,
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
    // Checkpoints written before shapes recorded explain's text.
    let shapes = crate::identity::written_as_shapes(fingerprints.iter().copied());
    for (id, fingerprint) in fingerprints.iter().enumerate() {
        if id >= graph.nodes.len() {
            return refuse(format!(
                "the checkpoint has a node #{id} ({}) that the query lacks",
                first_line(fingerprint)
            ));
        }
        let now = if shapes {
            graph.fingerprint(id)
        } else {
            graph.legacy_fingerprint(id)
        };
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
    use std::sync::Arc;

    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

    use super::*;
    use crate::checkpoint::NodeCheckpoint;
    use crate::graph::{ConnectorSpec, Node, NodeKind};
    use crate::state::{KeyedChange, KeyedTable, StateSnapshot};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ]))
    }

    fn rows(pairs: &[(i64, i64)]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(pairs.iter().map(|p| p.0))),
                Arc::new(Int64Array::from_iter_values(pairs.iter().map(|p| p.1))),
            ],
        )
        .unwrap()
    }

    fn pairs(batch: &RecordBatch) -> Vec<(i64, i64)> {
        let column = |i: usize| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        };
        let mut pairs: Vec<(i64, i64)> = column(0).into_iter().zip(column(1)).collect();
        pairs.sort();
        pairs
    }

    fn graph() -> PhysicalGraph {
        let mut graph = JobGraph::default();
        graph.add(Node {
            name: "t".into(),
            kind: NodeKind::Sink {
                spec: ConnectorSpec {
                    table: "t".into(),
                    connector: "memory".into(),
                    options: Default::default(),
                    schema: schema(),
                    declared_at: None,
                    primary_key: Vec::new(),
                    filter: None,
                    unread_columns: Vec::new(),
                    explain: None,
                },
            },
            inputs: vec![],
            schema: schema(),
            uid: None,
        });
        PhysicalGraph::for_parallelism(Arc::new(graph), 1)
    }

    /// Checkpoint `id` of the one node: table `t` with `rows`, whole
    /// (`change` `None`) or as the change to snapshot `base` removing
    /// `removed`.
    fn checkpoint(
        id: CheckpointId,
        serial: u64,
        rows_: RecordBatch,
        change: Option<(u64, &[i64])>,
    ) -> Checkpoint {
        let mut state = StateSnapshot::default();
        state.push_table("t", rows_);
        state.keyed.push(KeyedTable {
            table: "t".into(),
            key_columns: 1,
            serial,
            change: change.map(|(base, removed)| KeyedChange {
                base,
                removed: rows(&removed.iter().map(|k| (*k, 0)).collect::<Vec<_>>())
                    .project(&[0])
                    .unwrap(),
            }),
        });
        Checkpoint {
            id,
            kind: CheckpointKind::Running,
            nodes: vec![NodeCheckpoint {
                runtime: Default::default(),
                state,
            }],
        }
    }

    fn latest(store: &StateDir) -> (CheckpointId, Vec<(i64, i64)>) {
        let (mut checkpoint, _) = store.load_latest_taken().unwrap().unwrap();
        let table = checkpoint.nodes[0].state.take_table("t").unwrap();
        (checkpoint.id, pairs(&table))
    }

    fn dirs(store: &StateDir) -> Vec<CheckpointId> {
        store
            .list()
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }

    #[test]
    fn a_keyed_table_written_as_changes_reads_back_whole_and_survives_a_damaged_file() {
        let root = tempfile::tempdir().unwrap();
        let store = StateDir::open(root.path().join("state")).unwrap();
        let graph = graph();
        let mut expected: Vec<(i64, i64)> = (0..100).map(|k| (k, 0)).collect();
        store
            .write(&graph, &checkpoint(1, 0, rows(&expected), None))
            .unwrap();
        // (rows changed, keys removed) of checkpoints 2 and 3.
        type Change<'a> = (&'a [(i64, i64)], &'a [i64]);
        let changes: [Change; 2] = [(&[(5, 1), (100, 1)], &[7]), (&[(7, 2)], &[5])];
        for (i, (changed, removed)) in changes.iter().enumerate() {
            let id = i as u64 + 2;
            store
                .write(
                    &graph,
                    &checkpoint(id, id - 1, rows(changed), Some((id - 2, removed))),
                )
                .unwrap();
            expected.retain(|(k, _)| !removed.contains(k) && !changed.iter().any(|c| c.0 == *k));
            expected.extend(changed.iter());
            expected.sort();
            assert_eq!(latest(&store), (id, expected.clone()));
        }
        // Checkpoint 3 wrote only its change; its manifest names the
        // full rows of checkpoint 1 and the change of checkpoint 2.
        let own: Vec<String> = std::fs::read_dir(store.checkpoint_dir(3))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.ends_with(".arrow"))
            .collect();
        assert_eq!(
            common_sorted(own),
            vec!["n000-t.changed.arrow", "n000-t.removed.arrow"]
        );
        assert_eq!(dirs(&store), vec![1, 2, 3], "what 3 builds on is kept");
        let held: Vec<String> = std::fs::read_dir(store.checkpoint_dir(1))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(
            held,
            vec!["n000-t.arrow"],
            "of 1 only the file 2 and 3 read, and no manifest"
        );

        // A savepoint of it holds every file it reads.
        let savepoint = store
            .savepoint(&root.path().join("savepoint"), None, Vec::new())
            .unwrap();
        let (mut saved, _) = savepoint.load_taken().unwrap();
        assert_eq!(
            pairs(&saved.nodes[0].state.take_table("t").unwrap()),
            expected
        );

        // A change to a snapshot the store did not write is refused.
        let err = store
            .write(&graph, &checkpoint(4, 9, rows(&[]), Some((7, &[]))))
            .unwrap_err()
            .to_string();
        assert!(err.contains("did not write"), "{err}");

        // Whole again at 4, changes at 5 and 6: 1-3 stay as what a damaged
        // file of 4 falls back to.
        let at_three = expected.clone();
        expected = vec![(1, 4)];
        store
            .write(&graph, &checkpoint(4, 3, rows(&expected), None))
            .unwrap();
        for id in [5, 6] {
            expected.push((id as i64, id as i64));
            store
                .write(
                    &graph,
                    &checkpoint(
                        id,
                        id - 1,
                        rows(&[(id as i64, id as i64)]),
                        Some((id - 2, &[])),
                    ),
                )
                .unwrap();
        }
        assert_eq!(latest(&store), (6, expected.clone()));
        assert_eq!(dirs(&store), vec![1, 2, 3, 4, 5, 6]);
        let full = store.checkpoint_dir(4).join("n000-t.arrow");
        let mut bytes = std::fs::read(&full).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&full, bytes).unwrap();
        assert_eq!(
            latest(&store),
            (3, at_three),
            "6, 5 and 4 read the damaged file"
        );

        // Once a newer whole table stands, the old chain goes.
        let store = StateDir::open(root.path().join("state")).unwrap();
        store
            .write(&graph, &checkpoint(4, 0, rows(&[(1, 1)]), None))
            .unwrap();
        for id in 5..=7 {
            store
                .write(
                    &graph,
                    &checkpoint(id, id - 4, rows(&[]), Some((id - 5, &[]))),
                )
                .unwrap();
        }
        store
            .write(&graph, &checkpoint(8, 4, rows(&[(2, 2)]), None))
            .unwrap();
        assert_eq!(
            dirs(&store),
            vec![4, 5, 6, 7, 8],
            "7 and 8 kept, 7 reads 4-6"
        );
        store
            .write(&graph, &checkpoint(9, 5, rows(&[]), Some((4, &[]))))
            .unwrap();
        assert_eq!(
            dirs(&store),
            vec![4, 5, 6, 7, 8, 9],
            "9 and 8 kept, and 7 (reading 4-6) as what a damaged file of 8 falls back to"
        );
        assert_eq!(latest(&store), (9, vec![(2, 2)]));
    }

    /// A table a snapshot already wrote to a file (spilled state, streamed
    /// a chunk at a time) is linked into each checkpoint that holds it,
    /// checked by its size and CRC when read back, and outlives the
    /// snapshot's own copy.
    #[test]
    fn a_table_written_as_a_file_is_linked_into_the_checkpoint_and_reads_back() {
        use crate::state::table_file::TableFileWriter;
        let root = tempfile::tempdir().unwrap();
        let store = StateDir::open(root.path().join("state")).unwrap();
        let graph = graph();
        let mut file = TableFileWriter::create(root.path(), "t", &schema()).unwrap();
        file.write(&rows(&[(1, 10), (2, 20)])).unwrap();
        file.write(&rows(&[])).unwrap();
        file.write(&rows(&[(3, 30)])).unwrap();
        let file = file.finish().unwrap();
        assert_eq!(file.rows, 3);
        let snapshot_path = file.path.to_path_buf();
        let mut state = StateSnapshot::default();
        state.files.push(file);
        let mut taken = Checkpoint {
            id: 1,
            kind: CheckpointKind::Running,
            nodes: vec![NodeCheckpoint {
                runtime: Default::default(),
                state,
            }],
        };
        store.write(&graph, &taken).unwrap();
        taken.id = 2;
        store.write(&graph, &taken).unwrap();
        drop(taken);
        assert!(!snapshot_path.exists(), "the snapshot's file goes with it");
        assert_eq!(latest(&store), (2, vec![(1, 10), (2, 20), (3, 30)]));
        // A flipped byte is caught by the CRC the writer counted.
        let written = store.checkpoint_dir(2).join("n000-t.arrow");
        let mut bytes = std::fs::read(&written).unwrap();
        bytes[100] ^= 1;
        std::fs::remove_file(&written).unwrap();
        std::fs::write(&written, bytes).unwrap();
        assert_eq!(latest(&store), (1, vec![(1, 10), (2, 20), (3, 30)]));
    }

    /// A finished node's final state stands in every later checkpoint:
    /// written once, then named again.
    #[test]
    fn the_same_snapshot_again_names_the_files_written_for_it() {
        let root = tempfile::tempdir().unwrap();
        let store = StateDir::open(root.path()).unwrap();
        let graph = graph();
        store
            .write(&graph, &checkpoint(1, 0, rows(&[(1, 1), (2, 2)]), None))
            .unwrap();
        let last = || checkpoint(2, 1, rows(&[(2, 3)]), Some((0, &[1])));
        store.write(&graph, &last()).unwrap();
        for id in 3..=5 {
            let mut again = last();
            again.id = id;
            store.write(&graph, &again).unwrap();
            let own = std::fs::read_dir(store.checkpoint_dir(id))
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".arrow")
                })
                .count();
            assert_eq!(own, 0, "checkpoint {id} writes no state file");
            assert_eq!(latest(&store), (id, vec![(2, 3)]));
        }
    }

    /// A reader beside a running job (a redeploy's preview) sees its
    /// newest complete checkpoint and leaves the one being written alone;
    /// a job resuming removes that incomplete one.
    #[test]
    fn peeking_leaves_a_checkpoint_being_written_where_resuming_removes_it() {
        let root = tempfile::tempdir().unwrap();
        let store = StateDir::open(root.path()).unwrap();
        let graph = graph();
        store
            .write(&graph, &checkpoint(1, 0, rows(&[(1, 1)]), None))
            .unwrap();
        let writing = store.checkpoint_dir(2);
        std::fs::create_dir_all(&writing).unwrap();
        std::fs::write(writing.join("n000-t.arrow"), b"half").unwrap();

        let reader = StateDir::open(root.path()).unwrap();
        let (checkpoint, taken) = reader.peek_latest_taken().unwrap().unwrap();
        assert_eq!((checkpoint.id, taken.checkpoint), (1, 1));
        assert!(writing.join("n000-t.arrow").exists(), "left as it was");
        assert_eq!(dirs(&store), vec![1, 2]);

        assert_eq!(latest(&reader), (1, vec![(1, 1)]));
        assert!(
            !writing.exists(),
            "a resume clears what is past its checkpoint"
        );
    }

    fn common_sorted(mut names: Vec<String>) -> Vec<String> {
        names.sort();
        names
    }
}

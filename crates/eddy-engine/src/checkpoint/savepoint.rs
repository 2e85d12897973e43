//! Savepoints: a job's state copied out of its state directory, to start a
//! job from later (the same query at another parallelism, on another
//! machine, after the state directory moved on or was cleared).
//!
//! ```text
//!  SAVEPOINT_DIR/
//!    SAVEPOINT              what it is: JSON, written last (atomically, with the directory)
//!    MANIFEST               the checkpoint's own (fingerprints, parallelism, key groups, checksums)
//!    n003-windows.arrow     its state files, as the checkpoint wrote them
//!    chk-00000009-n004-groups.arrow   a file of an earlier checkpoint a keyed table's changes apply to
//! ```
//!
//! In: a state directory ([`StateDir::savepoint`] copies its newest
//! complete checkpoint). Out: a directory that describes itself
//! ([`SavepointInfo`]: when, from which checkpoint, the parallelism and
//! key groups, the job's name and SQL when given), independent of the
//! state directory's rotation, and read back by a job started with it
//! ([`Savepoint::load`]; the runtime checks it against the query and
//! rescales it to the job's parallelism as it does a checkpoint). The copy
//! is made in a sibling directory and renamed into place, so a savepoint
//! exists whole or not at all.
//!
//! ```
//! use eddy_engine::checkpoint::savepoint::Savepoint;
//!
//! let dir = tempfile::tempdir().unwrap();
//! // Not a savepoint: the error says why.
//! assert!(Savepoint::open(dir.path()).is_err());
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::io_error;
use super::manifest::{checkpoint_dir_name, read_manifest, write_manifest};
use super::store::{CheckpointLayout, StateDir, TakenBy};
use super::tables::read_checkpoint;
use super::{Checkpoint, CheckpointKind};
use crate::error::{EngineError, Result};
use crate::graph::JobGraph;
use crate::message::CheckpointId;

/// The file that makes a directory a savepoint.
const SAVEPOINT: &str = "SAVEPOINT";
/// Savepoint format version.
const FORMAT: u32 = 1;

/// One SQL file of the job a savepoint was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavepointSql {
    /// The file's name.
    pub name: String,
    /// Its text.
    pub text: String,
}

/// What a savepoint holds, as its `SAVEPOINT` file says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavepointInfo {
    /// Format version.
    pub format: u32,
    /// The eddy version that wrote it.
    pub eddy_version: String,
    /// When it was taken, epoch ms.
    pub taken_ms: u64,
    /// The checkpoint it copies.
    pub checkpoint: CheckpointId,
    /// How the job stood at that checkpoint.
    pub kind: CheckpointKind,
    /// Instances of each keyed operator it was taken with.
    pub parallelism: usize,
    /// Key groups its keyed state is spread in: the most instances a job
    /// started from it may run.
    pub key_groups: u32,
    /// Bytes of state.
    pub bytes: u64,
    /// The job's name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The job's SQL files, when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sql: Vec<SavepointSql>,
}

/// A savepoint directory, checked.
#[derive(Debug, Clone)]
pub struct Savepoint {
    dir: PathBuf,
    info: SavepointInfo,
}

impl Savepoint {
    /// Opens the savepoint in `dir`; an error naming what is wrong when it
    /// is not one.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        let path = dir.join(SAVEPOINT);
        let text = std::fs::read(&path).map_err(|e| {
            EngineError::Checkpoint(format!(
                "{} is not a savepoint (no {SAVEPOINT} file: {e})",
                dir.display()
            ))
        })?;
        let info: SavepointInfo = serde_json::from_slice(&text)
            .map_err(|e| io_error(&path, format!("cannot be read: {e}")))?;
        if info.format != FORMAT {
            return Err(io_error(
                &path,
                format!(
                    "savepoint format {} (this eddy reads {FORMAT})",
                    info.format
                ),
            ));
        }
        Ok(Self { dir, info })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What it holds.
    pub fn info(&self) -> &SavepointInfo {
        &self.info
    }

    /// The parallelism and key groups it was taken with.
    pub fn layout(&self) -> Result<CheckpointLayout> {
        Ok(CheckpointLayout {
            parallelism: self.info.parallelism.max(1),
            key_groups: crate::key_groups::KeyGroups::new(self.info.key_groups)?,
        })
    }

    /// Its state, checked file by file and against `graph` (the job's
    /// graph at the savepoint's parallelism): a query whose state no
    /// longer fits is refused naming the node.
    pub fn load(&self, graph: &JobGraph) -> Result<Checkpoint> {
        let (checkpoint, taken) = self.load_taken()?;
        taken.check(graph)?;
        Ok(checkpoint)
    }

    /// Its state, checked file by file, and what it says of the graph
    /// that took it (to check a query against, or map onto a changed one).
    pub fn load_taken(&self) -> Result<(Checkpoint, TakenBy)> {
        let (manifest, checkpoint) = read_checkpoint(&self.dir).map_err(|why| {
            EngineError::Checkpoint(format!(
                "the savepoint in {} is unusable: {why}",
                self.dir.display()
            ))
        })?;
        Ok((checkpoint, TakenBy::of(&self.dir, manifest)))
    }
}

impl StateDir {
    /// Copies the newest complete checkpoint into a new savepoint at
    /// `dest` (which must not exist or be empty), recording `job` and
    /// `sql` when given. The checkpoint is read and checked first.
    pub fn savepoint(
        &self,
        dest: &Path,
        job: Option<&str>,
        sql: Vec<SavepointSql>,
    ) -> Result<Savepoint> {
        let source = self.newest_complete()?.ok_or_else(|| {
            EngineError::Checkpoint(format!(
                "{} holds no complete checkpoint to take a savepoint of",
                self.root().display()
            ))
        })?;
        if dest.exists()
            && std::fs::read_dir(dest)
                .map_err(|e| io_error(dest, e))?
                .next()
                .is_some()
        {
            return Err(io_error(dest, "exists and is not empty"));
        }
        let mut manifest = read_manifest(&source).map_err(|why| io_error(&source, why))?;
        let parent = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "savepoint".into());
        let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| io_error(&staging, e))?;
        }
        std::fs::create_dir_all(&staging).map_err(|e| io_error(&staging, e))?;
        // The checkpoint's files, and those of earlier checkpoints its keyed
        // tables' changes apply to, side by side in the savepoint.
        let mut bytes = 0;
        for node in &mut manifest.nodes {
            for table in &mut node.tables {
                for file in table.files_mut() {
                    let from = file.path(&source);
                    let name = match file.dir {
                        None => file.file.clone(),
                        Some(id) => format!("{}-{}", checkpoint_dir_name(id), file.file),
                    };
                    let to = staging.join(&name);
                    bytes += std::fs::copy(&from, &to).map_err(|e| io_error(&from, e))?;
                    std::fs::File::open(&to)
                        .and_then(|f| f.sync_all())
                        .map_err(|e| io_error(&to, e))?;
                    file.dir = None;
                    file.file = name;
                }
            }
        }
        write_manifest(&staging, &mut manifest)?;
        // What was copied must read back whole before it is called a savepoint.
        read_checkpoint(&staging).map_err(|why| io_error(&staging, why))?;
        let info = SavepointInfo {
            format: FORMAT,
            eddy_version: env!("CARGO_PKG_VERSION").to_string(),
            taken_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            checkpoint: manifest.checkpoint,
            kind: manifest.kind,
            parallelism: manifest.layout().parallelism,
            key_groups: manifest.layout().key_groups.count(),
            bytes,
            job: job.map(str::to_string),
            sql,
        };
        let text = serde_json::to_vec_pretty(&info)
            .map_err(|e| EngineError::State(format!("savepoint: {e}")))?;
        let path = staging.join(SAVEPOINT);
        std::fs::write(&path, text)
            .and_then(|_| std::fs::File::open(&path).and_then(|f| f.sync_all()))
            .map_err(|e| io_error(&path, e))?;
        if dest.exists() {
            std::fs::remove_dir(dest).map_err(|e| io_error(dest, e))?;
        }
        std::fs::rename(&staging, dest).map_err(|e| io_error(dest, e))?;
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(parent, e))?;
        Savepoint::open(dest)
    }
}

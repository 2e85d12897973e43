//! A checkpoint's manifest: what it holds and how the job that took it
//! ran, written last and atomically, so a checkpoint exists once its
//! manifest does.
//!
//! In: the state files a checkpoint wrote (and, for a keyed table written
//! as changes, the earlier checkpoints' files it builds on). Out: the
//! `MANIFEST` file: a first line carrying a CRC-32 of the JSON that
//! follows; the JSON lists every node's fingerprint (see
//! [`crate::graph::JobGraph::fingerprint`]), its runtime state and small
//! values, and each state file with where it lies, its size and CRC-32.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::damage::Damage;
use super::io_error;
use super::{CheckpointKind, NodeRuntimeState};
use crate::distribute::instances::Origin;
use crate::error::{EngineError, Result};
use crate::identity::NamedIdentity;
use crate::key_groups::KeyGroups;
use crate::message::CheckpointId;

/// Manifest format: 1 for manifests whose files all lie in their own
/// directory, 2 for one with a keyed table written as changes (which an
/// eddy that reads only 1 must refuse rather than read half of).
pub(super) const FORMAT: u32 = 2;
/// The format of manifests without changes, as every eddy reads them.
const FORMAT_PLAIN: u32 = 1;
pub(super) const MANIFEST: &str = "MANIFEST";
const MANIFEST_HEADER: &str = "eddy-checkpoint-manifest crc32=";

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(super) format: u32,
    pub(super) checkpoint: CheckpointId,
    pub(super) kind: CheckpointKind,
    /// Wall-clock time of writing, epoch ms (informational).
    pub(super) created_ms: u64,
    /// Instances of each keyed operator ([`JobGraph::parallelism`]); a
    /// resumed job runs as many. Absent in manifests written before eddy
    /// recorded it (see [`Manifest::parallelism`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) parallelism: Option<usize>,
    /// The key groups keyed state is spread in ([`crate::key_groups`]);
    /// absent in manifests written before eddy had them (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) key_groups: Option<KeyGroups>,
    /// The identities of the nodes of the graph as planned
    /// ([`JobGraph::identities`]): what a changed query's state is mapped
    /// by. Absent in manifests written before eddy recorded them (such a
    /// checkpoint resumes only the very same query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) planned: Option<Vec<String>>,
    /// The named identities of the same nodes
    /// ([`JobGraph::named_identities`]); absent in manifests written before
    /// eddy recorded them (their state moves by derived identity only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) named: Option<Vec<Option<NamedIdentity>>>,
    pub(super) nodes: Vec<ManifestNode>,
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
    pub(super) fn parallelism(&self) -> usize {
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
pub(super) struct ManifestNode {
    pub(super) fingerprint: String,
    /// The node's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<String>,
    /// Which planned node it runs ([`Origin`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) origin: Option<Origin>,
    pub(super) runtime: NodeRuntimeState,
    pub(super) meta: serde_json::Value,
    pub(super) tables: Vec<ManifestTable>,
}

/// One state table of a node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ManifestTable {
    pub(super) name: String,
    /// The file of its rows (for a keyed table written as changes: its
    /// last full rows).
    #[serde(flatten)]
    pub(super) file: ManifestFile,
    /// A keyed table written as changes: the changes to apply to `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) keyed: Option<ManifestKeyed>,
}

/// A state file, checked when read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ManifestFile {
    /// The checkpoint whose directory holds it; absent: the manifest's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) dir: Option<CheckpointId>,
    pub(super) file: String,
    pub(super) bytes: u64,
    pub(super) crc32: u32,
    pub(super) rows: u64,
}

/// A keyed table written as changes ([`super::changes`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ManifestKeyed {
    /// Its key columns: the first this many.
    pub(super) key_columns: usize,
    /// Oldest first.
    pub(super) changes: Vec<ManifestChange>,
}

/// One change of a keyed table: the rows of the keys that changed, and
/// the keys that went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ManifestChange {
    pub(super) changed: ManifestFile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) removed: Option<ManifestFile>,
}

/// The name of checkpoint `id`'s directory in a state directory.
pub(super) fn checkpoint_dir_name(id: CheckpointId) -> String {
    format!("chk-{id:08}")
}

impl ManifestFile {
    /// Where the file lies for a manifest in `dir`.
    pub(super) fn path(&self, dir: &Path) -> PathBuf {
        match self.dir {
            None => dir.join(&self.file),
            Some(id) => dir
                .parent()
                .unwrap_or(Path::new("."))
                .join(checkpoint_dir_name(id))
                .join(&self.file),
        }
    }
}

impl ManifestTable {
    /// Every file the table is read from, its full rows first.
    pub(super) fn files(&self) -> impl Iterator<Item = &ManifestFile> {
        std::iter::once(&self.file).chain(self.keyed.iter().flat_map(|k| {
            k.changes
                .iter()
                .flat_map(|c| std::iter::once(&c.changed).chain(c.removed.as_ref()))
        }))
    }

    /// The same, to rewrite where they lie.
    pub(super) fn files_mut(&mut self) -> Vec<&mut ManifestFile> {
        let mut files = vec![&mut self.file];
        if let Some(keyed) = &mut self.keyed {
            for change in &mut keyed.changes {
                files.push(&mut change.changed);
                if let Some(removed) = &mut change.removed {
                    files.push(removed);
                }
            }
        }
        files
    }
}

impl Manifest {
    /// The files it reads, by the checkpoint whose directory holds them
    /// (its own included, if only for the manifest).
    pub(super) fn files(&self) -> BTreeMap<CheckpointId, BTreeSet<String>> {
        let mut files: BTreeMap<CheckpointId, BTreeSet<String>> =
            BTreeMap::from([(self.checkpoint, BTreeSet::new())]);
        for node in &self.nodes {
            for table in &node.tables {
                for file in table.files() {
                    let dir = file.dir.unwrap_or(self.checkpoint);
                    files.entry(dir).or_default().insert(file.file.clone());
                }
            }
        }
        files
    }
}

/// Writes `manifest` into `dir` durably (a temporary file, fsync, rename,
/// fsync of the directory); returns its bytes. Its format is the lowest
/// that holds it.
pub(super) fn write_manifest(dir: &Path, manifest: &mut Manifest) -> Result<u64> {
    let changes = manifest.nodes.iter().any(|n| {
        n.tables
            .iter()
            .any(|t| t.keyed.is_some() || t.files().any(|f| f.dir.is_some()))
    });
    manifest.format = if changes { FORMAT } else { FORMAT_PLAIN };
    let json =
        serde_json::to_vec(&manifest).map_err(|e| EngineError::State(format!("manifest: {e}")))?;
    let mut text = format!("{MANIFEST_HEADER}{:08x}\n", crc32fast::hash(&json)).into_bytes();
    text.extend_from_slice(&json);
    let tmp = dir.join("MANIFEST.tmp");
    let path = dir.join(MANIFEST);
    let mut file = File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
    file.write_all(&text)
        .and_then(|_| file.sync_all())
        .map_err(|e| io_error(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io_error(&path, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))?;
    Ok(text.len() as u64)
}

/// Reads and checks a checkpoint's manifest.
pub(crate) fn read_manifest(dir: &Path) -> std::result::Result<Manifest, Damage> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read(&path).map_err(|source| Damage::Unreadable {
        path: path.clone(),
        source,
    })?;
    let header = text.iter().position(|b| *b == b'\n').and_then(|newline| {
        let header = std::str::from_utf8(&text[..newline]).ok()?;
        let expected = u32::from_str_radix(header.strip_prefix(MANIFEST_HEADER)?, 16).ok()?;
        Some((newline, expected))
    });
    let Some((newline, expected)) = header else {
        return Err(Damage::ManifestHeader { path });
    };
    let json = &text[newline + 1..];
    if crc32fast::hash(json) != expected {
        return Err(Damage::ManifestChecksum { path });
    }
    let manifest: Manifest =
        serde_json::from_slice(json).map_err(|source| Damage::ManifestText {
            path: path.clone(),
            source,
        })?;
    if manifest.format > FORMAT {
        return Err(Damage::NewerFormat {
            path,
            format: manifest.format,
            readable: FORMAT,
        });
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

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

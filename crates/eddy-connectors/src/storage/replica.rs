//! A state directory kept in a bucket (`--state-dir s3://...`): the
//! engine's [`StateReplica`] over a [`Bucket`] prefix.
//!
//! In: the local working copy's files after each checkpoint. Out: the same
//! files under the prefix (`chk-00000012/n003-windows.arrow`, ...). Each
//! file is uploaded once (checkpoint files are never rewritten in place;
//! a rewritten one has a new size or time and goes again), manifests after
//! every other file, and objects whose files retention removed are deleted
//! last. Restoring downloads every object into the empty working copy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use eddy_engine::checkpoint::replica::StateReplica;
use eddy_engine::{EngineError, Result as EngineResult};

use super::{Bucket, Lease};
use crate::error::ConnectorError;

/// The files written last in a checkpoint's directory: it exists once its
/// manifest does.
const WRITTEN_LAST: &[&str] = &["MANIFEST", "COMMITTED"];

/// What identifies one version of a local file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    modified: Option<SystemTime>,
}

/// See the module docs.
#[derive(Debug)]
pub struct BucketReplica {
    bucket: Bucket,
    /// Files in the bucket, by relative name, as the local version they
    /// were copied from.
    copied: Mutex<BTreeMap<String, Stamp>>,
    /// The lease this process must hold to write the replica, if any.
    fence: Option<Weak<Lease>>,
}

impl BucketReplica {
    /// A replica under `bucket`'s prefix.
    pub fn new(bucket: Bucket) -> Self {
        Self {
            bucket,
            copied: Mutex::new(BTreeMap::new()),
            fence: None,
        }
    }

    /// The replica, restored and written only while this process holds
    /// `lease` (asked of the bucket each time): a process that lost it
    /// (paused past it, cut off from the store) fails its checkpoint
    /// instead of writing over the state of the lease's new holder. Once
    /// the lease is let go, nothing more is written.
    pub fn fenced_by(self, lease: &Arc<Lease>) -> Self {
        Self {
            fence: Some(Arc::downgrade(lease)),
            ..self
        }
    }

    /// `Ok` unless fenced by a lease this process no longer holds.
    fn held(&self) -> EngineResult<()> {
        let Some(fence) = &self.fence else {
            return Ok(());
        };
        let lease = fence.upgrade().ok_or_else(|| {
            EngineError::Checkpoint(format!("{}: its lease was let go", self.bucket))
        })?;
        lease.check().map_err(|why| {
            EngineError::Checkpoint(format!("{}: no longer this process's: {why}", self.bucket))
        })
    }

    fn copied(&self) -> EngineResult<std::sync::MutexGuard<'_, BTreeMap<String, Stamp>>> {
        self.copied
            .lock()
            .map_err(|_| EngineError::Checkpoint("the state replica's lock is poisoned".into()))
    }
}

fn failed(error: ConnectorError) -> EngineError {
    EngineError::Checkpoint(error.to_string())
}

fn local_error(path: &Path, error: std::io::Error) -> EngineError {
    EngineError::Checkpoint(format!("{}: {error}", path.display()))
}

fn stamp(path: &Path) -> EngineResult<Stamp> {
    let meta = std::fs::metadata(path).map_err(|e| local_error(path, e))?;
    Ok(Stamp {
        size: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// Every file under `dir` as (name relative to `root` with `/`, path).
fn files(root: &Path, dir: &Path, found: &mut Vec<(String, PathBuf)>) -> EngineResult<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| local_error(dir, e))? {
        let entry = entry.map_err(|e| local_error(dir, e))?;
        let path = entry.path();
        if entry
            .file_type()
            .map_err(|e| local_error(&path, e))?
            .is_dir()
        {
            files(root, &path, found)?;
        } else {
            found.push((super::relative_name(&path, root), path));
        }
    }
    Ok(())
}

fn written_last(name: &str) -> bool {
    WRITTEN_LAST.contains(&name.rsplit('/').next().unwrap_or(name))
}

impl BucketReplica {
    /// Downloads every object under the prefix into `local` (created).
    pub fn restore_into(&self, local: &Path) -> EngineResult<()> {
        std::fs::create_dir_all(local).map_err(|e| local_error(local, e))?;
        self.restore(local)
    }

    /// Uploads every file under `local`, those named `last` (any
    /// directory) after the rest.
    pub fn upload_all(&self, local: &Path, last: &[&str]) -> EngineResult<()> {
        let mut found = Vec::new();
        files(local, local, &mut found)?;
        let is_last = |name: &str| last.contains(&name.rsplit('/').next().unwrap_or(name));
        found.sort_by(|(a, _), (b, _)| (is_last(a), a).cmp(&(is_last(b), b)));
        for (name, path) in &found {
            self.bucket.upload(path, name).map_err(failed)?;
        }
        Ok(())
    }
}

impl StateReplica for BucketReplica {
    fn describe(&self) -> String {
        self.bucket.to_string()
    }

    fn restore(&self, local: &Path) -> EngineResult<()> {
        self.held()?;
        let mut copied = self.copied()?;
        copied.clear();
        for object in self.bucket.list().map_err(failed)? {
            let Some(bytes) = self.bucket.get(&object.name).map_err(failed)? else {
                continue; // removed since it was listed
            };
            let path = local.join(&object.name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| local_error(parent, e))?;
            }
            std::fs::write(&path, bytes).map_err(|e| local_error(&path, e))?;
            copied.insert(object.name, stamp(&path)?);
        }
        Ok(())
    }

    fn clear(&self) -> EngineResult<()> {
        self.held()?;
        let mut copied = self.copied()?;
        for object in self.bucket.list().map_err(failed)? {
            self.bucket.delete(&object.name).map_err(failed)?;
        }
        copied.clear();
        Ok(())
    }

    fn sync(&self, local: &Path) -> EngineResult<()> {
        self.held()?;
        let mut copied = self.copied()?;
        let mut found = Vec::new();
        files(local, local, &mut found)?;
        found.retain(|(name, _)| !name.ends_with(".tmp"));
        // Data files first, then what makes a checkpoint exist, oldest
        // checkpoint first.
        found.sort_by(|(a, _), (b, _)| (written_last(a), a).cmp(&(written_last(b), b)));
        for (name, path) in &found {
            let now = stamp(path)?;
            if copied.get(name) == Some(&now) {
                continue;
            }
            self.bucket.upload(path, name).map_err(failed)?;
            copied.insert(name.clone(), now);
        }
        let present: std::collections::BTreeSet<&String> = found.iter().map(|(n, _)| n).collect();
        let stale: Vec<String> = copied
            .keys()
            .filter(|name| !present.contains(name))
            .cloned()
            .collect();
        // Manifests go before the files they list.
        let (mut last, first): (Vec<String>, Vec<String>) =
            stale.into_iter().partition(|name| written_last(name));
        last.extend(first);
        for name in last {
            self.bucket.delete(&name).map_err(failed)?;
            copied.remove(&name);
        }
        Ok(())
    }
}

//! Where a rolling file sink's files go, and how a closed file is staged
//! and published there.
//!
//! In: a file's final name relative to the sink's directory
//! (`country=US/part-...-000003.parquet`). Out: the file under that name,
//! published only when asked.
//!
//! ```text
//!  local directory: written as DIR/.NAME.inprogress ─ close: fsync ─ publish: rename to DIR/NAME
//!  bucket prefix:   written to a local spool file ─ close: upload as PREFIX/.NAME.inprogress
//!                   ─ publish: copy to PREFIX/NAME, delete the staged object
//! ```
//!
//! A bucket has no rename, so publishing is a server-side copy: the final
//! object appears whole (an S3 copy is atomic) or not at all, and readers
//! globbing `*.parquet` never see a staged object. Publishing is
//! idempotent: a staged file already published is left as it is.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{create_file, io_error, remove_files, sync_dir};
use crate::error::{ConnectorError, Result};
use crate::storage::{Bucket, Location};

/// The sink's directory: local, or a bucket prefix with a local spool.
pub(crate) enum FileTarget {
    /// Files written in place under hidden names.
    Dir(PathBuf),
    /// Files written locally, then uploaded.
    Bucket {
        /// The prefix the files go under.
        bucket: Bucket,
        /// The local directory files are written in before their upload
        /// (`None` for a target that only publishes).
        spool: Option<Spool>,
    },
}

/// A private local directory, removed when dropped.
pub(crate) struct Spool(PathBuf);

impl Spool {
    /// A new, empty spool directory.
    pub(crate) fn new() -> Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "eddy-spool-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        Ok(Self(dir))
    }

    /// The spool file holding `name`'s contents.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.0.join(name.replace('/', "%2F"))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The hidden name a file has until it is published.
pub(crate) fn in_progress(name: &str) -> String {
    match name.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/.{file}.inprogress"),
        None => format!(".{name}.inprogress"),
    }
}

/// Whether a file's last name component is an in-progress one.
pub(crate) fn is_in_progress(file_name: &str) -> bool {
    file_name.starts_with(".part-") && file_name.ends_with(".inprogress")
}

impl FileTarget {
    /// The target at `location`; a local directory is created.
    pub fn open(location: &Location) -> Result<Self> {
        match location {
            Location::Local(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
                Ok(Self::Dir(dir.clone()))
            }
            Location::Bucket(bucket) => Ok(Self::Bucket {
                bucket: bucket.clone(),
                spool: Some(Spool::new()?),
            }),
        }
    }

    /// The target at `location` for publishing only (no spool).
    fn for_commit(location: &Location) -> Result<Self> {
        match location {
            Location::Local(dir) => Ok(Self::Dir(dir.clone())),
            Location::Bucket(bucket) => Ok(Self::Bucket {
                bucket: bucket.clone(),
                spool: None,
            }),
        }
    }

    /// The spool file of `name`.
    fn spooled(spool: &Option<Spool>, name: &str) -> Result<PathBuf> {
        spool.as_ref().map(|s| s.file(name)).ok_or_else(|| {
            ConnectorError::bad_option("path", "a publishing-only file target writes no files")
        })
    }

    /// A new local file to write `name`'s contents into.
    pub fn create(&self, name: &str) -> Result<File> {
        match self {
            Self::Dir(dir) => create_file(&dir.join(in_progress(name))),
            Self::Bucket { spool, .. } => create_file(&Self::spooled(spool, name)?),
        }
    }

    /// Makes the closed `file` of `name` durable: staged under its hidden
    /// name, or, with `publish`, under its final one.
    pub fn close(&self, name: &str, file: File, publish: bool) -> Result<()> {
        match self {
            Self::Dir(dir) => {
                let staged = dir.join(in_progress(name));
                file.sync_all().map_err(|e| io_error(&staged, e))?;
                drop(file);
                if publish {
                    self.publish(name)?;
                }
                Ok(())
            }
            Self::Bucket { bucket, spool } => {
                drop(file);
                let local = Self::spooled(spool, name)?;
                let key = if publish {
                    name.to_string()
                } else {
                    in_progress(name)
                };
                bucket.upload(&local, &key)?;
                std::fs::remove_file(&local).map_err(|e| io_error(&local, e))
            }
        }
    }

    /// Gives the staged `name` its final name (nothing to do when that was
    /// done already).
    pub fn publish(&self, name: &str) -> Result<()> {
        let gone = |staged: &str| {
            ConnectorError::bad_option("path", format!("{staged} was staged but is gone"))
        };
        match self {
            Self::Dir(dir) => {
                let done = dir.join(name);
                let staged = dir.join(in_progress(name));
                if staged.exists() {
                    std::fs::rename(&staged, &done).map_err(|e| io_error(&done, e))?;
                    if let Some(parent) = done.parent() {
                        sync_dir(parent)?;
                    }
                } else if !done.exists() {
                    return Err(gone(&staged.display().to_string()));
                }
                Ok(())
            }
            Self::Bucket { bucket, .. } => {
                let staged = in_progress(name);
                if bucket.exists(&staged)? {
                    bucket.copy(&staged, name)?;
                    bucket.delete(&staged)
                } else if bucket.exists(name)? {
                    Ok(())
                } else {
                    Err(gone(&bucket.join(&staged).to_string()))
                }
            }
        }
    }

    /// Removes every file whose last name component satisfies `remove`.
    pub fn remove_where(&self, remove: impl Fn(&str) -> bool) -> Result<()> {
        let last = |name: &str| name.rsplit('/').next().unwrap_or(name).to_string();
        match self {
            Self::Dir(dir) => {
                let mut files = Vec::new();
                walk(dir, &mut files)?;
                files.retain(|file| {
                    file.file_name()
                        .is_some_and(|n| remove(&n.to_string_lossy()))
                });
                remove_files(&files)
            }
            Self::Bucket { bucket, .. } => {
                for object in bucket.list()? {
                    if remove(&last(&object.name)) {
                        bucket.delete(&object.name)?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Publishes the staged files `names` of the sink writing `location`.
pub(crate) fn publish_all(location: &Location, names: &[String]) -> Result<()> {
    let target = FileTarget::for_commit(location)?;
    for name in names {
        target.publish(name)?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_names_are_hidden_beside_their_final_names() {
        assert_eq!(in_progress("part-1.parquet"), ".part-1.parquet.inprogress");
        assert_eq!(
            in_progress("country=US/part-1.parquet"),
            "country=US/.part-1.parquet.inprogress"
        );
        assert!(is_in_progress(".part-1.parquet.inprogress"));
        assert!(!is_in_progress("part-1.parquet"));
    }

    #[test]
    fn a_local_file_is_published_once_and_again_harmlessly() {
        let dir = tempfile::tempdir().unwrap();
        let target = FileTarget::open(&Location::local(dir.path())).unwrap();
        let name = "k=1/part-x-000001.ndjson";
        let mut file = target.create(name).unwrap();
        std::io::Write::write_all(&mut file, b"{}\n").unwrap();
        target.close(name, file, false).unwrap();
        assert!(!dir.path().join(name).exists());
        publish_all(&Location::local(dir.path()), &[name.to_string()]).unwrap();
        publish_all(&Location::local(dir.path()), &[name.to_string()]).unwrap();
        assert_eq!(std::fs::read(dir.path().join(name)).unwrap(), b"{}\n");
        let error = publish_all(&Location::local(dir.path()), &["part-y.ndjson".into()])
            .unwrap_err()
            .to_string();
        assert!(error.contains("was staged but is gone"), "{error}");
    }
}

//! Where a Delta table lives: a local directory or a bucket prefix, and
//! the few operations the log, the sink, maintenance and the source need
//! on it.
//!
//! In: paths relative to the table (`_delta_log/00000000000000000003.json`,
//! `country=US/part-...parquet`). Out: their bytes, listings, and a commit
//! that only one writer wins: on a local disk a hard link (which fails
//! when the name exists), on a bucket a put-if-absent (`If-None-Match: *`
//! on S3), so two writers never both own a version and nothing is renamed.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{ConnectorError, Result};
use crate::parquet::input::ParquetInput;
use crate::sinks::io_error;
use crate::storage::{Bucket, Location};

/// See the module docs.
#[derive(Clone, Debug)]
pub enum TableStore {
    /// A local directory.
    Local(PathBuf),
    /// A bucket prefix.
    Bucket(Bucket),
}

/// A data file found in the table's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Its path relative to the table, `/`-separated.
    pub path: String,
    /// When it was last written (ms since the epoch).
    pub modified_ms: i64,
}

/// Writes `bytes` durably to a hidden file beside `dir/relative` (named for
/// this process and moment, so writers never share one); returns the
/// target's path and the hidden file's.
fn write_staged(dir: &Path, relative: &str, bytes: &[u8]) -> Result<(PathBuf, PathBuf)> {
    let target = dir.join(relative);
    let parent = target.parent().unwrap_or(dir).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| io_error(&parent, e))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let staged = parent.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        system_ms(std::time::SystemTime::now())
    ));
    let mut file = std::fs::File::create(&staged).map_err(|e| io_error(&staged, e))?;
    file.write_all(bytes)
        .and_then(|_| file.sync_all())
        .map_err(|e| io_error(&staged, e))?;
    Ok((target, staged))
}

fn system_ms(time: std::time::SystemTime) -> i64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

impl TableStore {
    /// The table at `location`.
    pub fn at(location: &Location) -> Self {
        match location {
            Location::Local(dir) => Self::Local(dir.clone()),
            Location::Bucket(bucket) => Self::Bucket(bucket.clone()),
        }
    }

    /// The table whose location is `dir` (a local path, or a bucket
    /// prefix as `s3://...` text, as the sink's options and state hold it).
    pub fn of(dir: &Path) -> Result<Self> {
        Location::parse(&dir.to_string_lossy()).map(|l| Self::at(&l))
    }

    /// The size of the file `relative` in bytes.
    pub fn size(&self, relative: &str) -> Result<u64> {
        match self {
            Self::Local(dir) => {
                let path = dir.join(relative);
                std::fs::metadata(&path)
                    .map(|m| m.len())
                    .map_err(|e| io_error(&path, e))
            }
            Self::Bucket(bucket) => bucket.size(relative),
        }
    }

    /// The local directory, for a local table.
    pub fn local_dir(&self) -> Option<&Path> {
        match self {
            Self::Local(dir) => Some(dir),
            Self::Bucket(_) => None,
        }
    }

    /// Where the file `relative` is, as a path the Parquet reader opens
    /// (a local path, or `s3://...`).
    pub fn file_path(&self, relative: &str) -> PathBuf {
        match self {
            Self::Local(dir) => dir.join(relative),
            Self::Bucket(bucket) => PathBuf::from(bucket.join(relative).to_string()),
        }
    }

    /// The names in the directory `relative` (not recursive); none when it
    /// does not exist.
    pub fn names_in(&self, relative: &str) -> Result<Vec<String>> {
        match self {
            Self::Local(dir) => {
                let dir = dir.join(relative);
                let entries = match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(io_error(&dir, e)),
                };
                let mut names = Vec::new();
                for entry in entries {
                    names.push(
                        entry
                            .map_err(|e| io_error(&dir, e))?
                            .file_name()
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
                Ok(names)
            }
            Self::Bucket(bucket) => Ok(bucket
                .join(relative)
                .list()?
                .into_iter()
                .filter(|o| !o.name.contains('/'))
                .map(|o| o.name)
                .collect()),
        }
    }

    /// The bytes of `relative`.
    pub fn read(&self, relative: &str) -> Result<Vec<u8>> {
        match self {
            Self::Local(dir) => {
                let path = dir.join(relative);
                std::fs::read(&path).map_err(|e| io_error(&path, e))
            }
            Self::Bucket(bucket) => bucket.get(relative)?.ok_or_else(|| {
                ConnectorError::bad_option("path", format!("{} is gone", bucket.join(relative)))
            }),
        }
    }

    /// When `relative` was last written (ms since the epoch).
    pub fn modified_ms(&self, relative: &str) -> Result<i64> {
        match self {
            Self::Local(dir) => {
                let path = dir.join(relative);
                std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .map(system_ms)
                    .map_err(|e| io_error(&path, e))
            }
            Self::Bucket(bucket) => bucket.modified_ms(relative),
        }
    }

    /// Writes `bytes` as `relative` unless it exists; `false` when it did.
    pub fn put_if_absent(&self, relative: &str, bytes: &[u8]) -> Result<bool> {
        match self {
            Self::Local(dir) => {
                let (target, staged) = write_staged(dir, relative, bytes)?;
                let linked = std::fs::hard_link(&staged, &target);
                let _ = std::fs::remove_file(&staged);
                match linked {
                    Ok(()) => {
                        crate::sinks::sync_dir(target.parent().unwrap_or(dir))?;
                        Ok(true)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(io_error(&target, e)),
                }
            }
            Self::Bucket(bucket) => bucket.put_if_absent(relative, bytes.to_vec()),
        }
    }

    /// Writes `bytes` as `relative`, replacing it whole (readers see the
    /// old bytes or the new, never a part).
    pub fn put(&self, relative: &str, bytes: &[u8]) -> Result<()> {
        match self {
            Self::Local(dir) => {
                let (target, staged) = write_staged(dir, relative, bytes)?;
                std::fs::rename(&staged, &target).map_err(|e| io_error(&target, e))?;
                crate::sinks::sync_dir(target.parent().unwrap_or(dir))
            }
            Self::Bucket(bucket) => bucket.put(relative, bytes.to_vec()),
        }
    }

    /// Removes `relative` (one already gone is fine).
    pub fn delete(&self, relative: &str) -> Result<()> {
        match self {
            Self::Local(dir) => {
                let path = dir.join(relative);
                match std::fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(io_error(&path, e)),
                }
            }
            Self::Bucket(bucket) => bucket.delete(relative),
        }
    }

    /// Opens the Parquet file `relative`.
    pub fn open_parquet(&self, relative: &str) -> Result<ParquetInput> {
        ParquetInput::open(&self.file_path(relative))
    }

    /// Every `.parquet` data file of the table (not under a name starting
    /// with `.` or `_`, so not the log).
    pub fn data_files(&self) -> Result<Vec<StoredFile>> {
        match self {
            Self::Local(dir) => {
                let mut found = Vec::new();
                if !dir.is_dir() {
                    return Ok(Vec::new());
                }
                crate::parquet::listing::walk(dir, &mut found)?;
                let mut files = Vec::new();
                for path in found {
                    let relative = crate::storage::relative_name(&path, dir);
                    let modified_ms = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .map(system_ms)
                        .map_err(|e| io_error(&path, e))?;
                    files.push(StoredFile {
                        path: relative,
                        modified_ms,
                    });
                }
                Ok(files)
            }
            Self::Bucket(bucket) => Ok(bucket
                .list()?
                .into_iter()
                .filter(|o| {
                    o.name.ends_with(".parquet")
                        && !o
                            .name
                            .split('/')
                            .any(|p| p.starts_with('.') || p.starts_with('_'))
                })
                .map(|o| StoredFile {
                    path: o.name,
                    modified_ms: o.modified_ms,
                })
                .collect()),
        }
    }
}

impl fmt::Display for TableStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local(dir) => write!(f, "{}", dir.display()),
            Self::Bucket(bucket) => write!(f, "{bucket}"),
        }
    }
}

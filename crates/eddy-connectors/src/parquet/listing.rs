//! Which files a `parquet` source reads: one file, or every Parquet file
//! under a directory, Hive-style partition values taken from the
//! directories between it and the file (`country=US/dt=2023-11-14/`).
//!
//! In: the `path` option. Out: [`FileToRead`]s in path order. Names
//! starting with `.` or `_` are skipped (in-progress files, `_SUCCESS`,
//! a Delta table's `_delta_log`), as Spark and DuckDB skip them.

use std::path::{Path, PathBuf};

use super::reader::FileToRead;
use crate::error::{ConnectorError, Result};
use crate::sinks::io_error;
use crate::sinks::partition::directory_values;
use crate::storage::Location;

/// The files a location names: [`list_files`] for a local path, the same
/// for a bucket prefix (one object, or every `.parquet` object under it).
pub fn list_location(location: &Location) -> Result<Vec<FileToRead>> {
    let bucket = match location {
        Location::Local(path) => return list_files(path),
        Location::Bucket(bucket) => bucket,
    };
    let hidden = |name: &str| {
        name.split('/')
            .any(|part| part.starts_with('.') || part.starts_with('_'))
    };
    let found: Vec<String> = bucket
        .list()?
        .into_iter()
        .map(|object| object.name)
        .filter(|name| name.ends_with(".parquet") && !hidden(name))
        .collect();
    if found.is_empty() {
        if bucket.exists("")? {
            return Ok(vec![FileToRead {
                path: PathBuf::from(bucket.to_string()),
                partition_values: Default::default(),
                stats: None,
            }]);
        }
        return Err(ConnectorError::bad_option(
            "path",
            format!("{bucket} holds no .parquet object"),
        ));
    }
    Ok(found
        .into_iter()
        .map(|name| {
            let relative = name
                .rsplit_once('/')
                .map(|(dir, _)| dir)
                .unwrap_or_default();
            FileToRead {
                partition_values: directory_values(relative).into_iter().collect(),
                path: PathBuf::from(bucket.join(&name).to_string()),
                stats: None,
            }
        })
        .collect())
}

/// The files `path` names (see the module docs).
pub fn list_files(path: &Path) -> Result<Vec<FileToRead>> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    if meta.is_file() {
        return Ok(vec![FileToRead {
            path: path.to_path_buf(),
            partition_values: Default::default(),
            stats: None,
        }]);
    }
    let mut found = Vec::new();
    walk(path, &mut found)?;
    found.sort();
    if found.is_empty() {
        return Err(ConnectorError::bad_option(
            "path",
            format!("{} holds no .parquet file", path.display()),
        ));
    }
    Ok(found
        .into_iter()
        .map(|file| {
            let relative = file
                .parent()
                .and_then(|p| p.strip_prefix(path).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let partition_values = directory_values(&relative).into_iter().collect();
            FileToRead {
                path: file,
                partition_values,
                stats: None,
            }
        })
        .collect())
}

/// The `.parquet` files under `dir`, skipping names that start with `.`
/// or `_` (a Delta log, hidden files), as Delta's readers and vacuum do.
pub(crate) fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        let path = entry.path();
        if entry.file_type().map_err(|e| io_error(&path, e))?.is_dir() {
            walk(&path, found)?;
        } else if name.ends_with(".parquet") {
            found.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hive_directories_become_partition_values() {
        let dir = tempfile::tempdir().unwrap();
        for sub in [
            "country=US/dt=2023-11-14",
            "country=S%C3%A3o/dt=__HIVE_DEFAULT_PARTITION__",
            "_delta_log",
            ".hidden",
        ] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
            std::fs::write(dir.path().join(sub).join("part-0.parquet"), b"").unwrap();
        }
        std::fs::write(dir.path().join("country=US/notes.txt"), b"").unwrap();
        let files = list_files(dir.path()).unwrap();
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(files[0].partition_values["country"].as_deref(), Some("São"));
        assert_eq!(files[0].partition_values["dt"], None);
        assert_eq!(
            files[1].partition_values["dt"].as_deref(),
            Some("2023-11-14")
        );
    }
}

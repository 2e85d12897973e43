//! Where eddy reads and writes: a local path or an object-store location
//! (`s3://`, `gs://`, `az://`/`abfss://`), one type for every path option.
//!
//! In: a path as the user wrote it (`out/`, `file:///data/x`,
//! `s3://lake/payments`). Out: a [`Location`] — a local path, used as
//! before, or a [`Bucket`] prefix whose objects are read and written
//! through the `object_store` crate (the version DataFusion uses).
//!
//! Credentials and endpoints come from the standard environment of each
//! store (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`; `GOOGLE_*`; `AZURE_*`). A custom S3
//! endpoint is addressed path-style (`http://host/bucket/key`), which is
//! what S3-compatible stores serve. A [`Location`] displays as
//! `scheme://bucket/prefix` only: no secret ever reaches a log line, an
//! error or a checkpoint.
//!
//! [`BucketReplica`] keeps a job's state directory in a bucket
//! (`--state-dir s3://...`); a [`Lease`] gives a group job's task to one
//! process at a time when the group's state is in a bucket.
//!
//! ```
//! use eddy_connectors::storage::Location;
//!
//! assert!(Location::parse("out/payments").unwrap().is_local());
//! assert!(Location::parse("file:///data/x").unwrap().is_local());
//! let lake = Location::parse("s3://lake/payments").unwrap();
//! assert_eq!(lake.to_string(), "s3://lake/payments");
//! assert_eq!(lake.join("part-1.parquet").to_string(), "s3://lake/payments/part-1.parquet");
//! ```

mod bucket;
mod io;
mod lease;
mod object_reader;
mod replica;
mod table_options;

use std::fmt;
use std::path::{Path, PathBuf};

pub use bucket::{Bucket, Object};
pub use lease::{this_process, Lease, LeaseLost, LeaseWatch};
pub use object_reader::ObjectReader;
pub use replica::BucketReplica;
pub use table_options::{configure, storage_options, STORAGE_OPTIONS, STORAGE_PREFIX};

use crate::error::{ConnectorError, Result};

/// The schemes an object-store location may have.
pub const BUCKET_SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "abfs", "abfss", "azure"];

/// A place eddy reads or writes: a local path or a prefix in a bucket.
#[derive(Clone)]
pub enum Location {
    /// A path on this machine.
    Local(PathBuf),
    /// A prefix in an object store.
    Bucket(Bucket),
}

impl Location {
    /// Reads a path option: `s3://bucket/prefix` (and the other stores'
    /// schemes) is a bucket location; `file:///x` and plain paths are local.
    pub fn parse(text: &str) -> Result<Self> {
        if let Some(path) = text.strip_prefix("file://") {
            return Ok(Self::Local(PathBuf::from(path)));
        }
        match scheme_of(text) {
            Some(scheme) if BUCKET_SCHEMES.contains(&scheme.as_str()) => {
                Bucket::open(text).map(Self::Bucket)
            }
            Some(scheme) if scheme.len() > 1 => Err(ConnectorError::bad_option(
                "path",
                format!(
                    "'{scheme}://' is not a store eddy reads or writes (use a local path, \
                     file://, s3://, gs://, az:// or abfss://)"
                ),
            )),
            _ => Ok(Self::Local(PathBuf::from(text))),
        }
    }

    /// A local path as a location.
    pub fn local(path: impl Into<PathBuf>) -> Self {
        Self::Local(path.into())
    }

    /// Whether this is a path on this machine.
    pub fn is_local(&self) -> bool {
        matches!(self, Self::Local(_))
    }

    /// The local path, if this is one.
    pub fn as_local(&self) -> Option<&Path> {
        match self {
            Self::Local(path) => Some(path),
            Self::Bucket(_) => None,
        }
    }

    /// The location of `name` under this one.
    pub fn join(&self, name: &str) -> Self {
        match self {
            Self::Local(path) => Self::Local(path.join(name)),
            Self::Bucket(bucket) => Self::Bucket(bucket.join(name)),
        }
    }

    /// The location with `suffix` added to its last component
    /// (`out.ndjson` + `.task-1` style names are built by the caller).
    pub fn with_last(&self, rename: impl FnOnce(&str) -> String) -> Self {
        match self {
            Self::Local(path) => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Self::Local(path.with_file_name(rename(&name)))
            }
            Self::Bucket(bucket) => Self::Bucket(bucket.with_last(rename)),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local(path) => write!(f, "{}", path.display()),
            Self::Bucket(bucket) => write!(f, "{bucket}"),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Location({self})")
    }
}

impl PartialEq for Location {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// `path`'s name below `root` as an object name (`a/b.parquet`: `/`
/// between components whatever the platform); empty when it is not below.
pub fn relative_name(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/")
        })
        .unwrap_or_default()
}

/// Whether `text` names a bucket location (`s3://...`, `gs://...`, ...).
pub fn is_bucket(text: &str) -> bool {
    scheme_of(text).is_some_and(|s| BUCKET_SCHEMES.contains(&s.as_str()))
}

/// The lower-cased scheme of `scheme://...`, if the text has one.
fn scheme_of(text: &str) -> Option<String> {
    let (scheme, _) = text.split_once("://")?;
    let valid = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then(|| scheme.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_buckets_are_told_apart() {
        assert!(Location::parse("out").unwrap().is_local());
        assert!(Location::parse("/tmp/out").unwrap().is_local());
        assert_eq!(
            Location::parse("file:///data/x").unwrap().as_local(),
            Some(Path::new("/data/x"))
        );
        let gs = Location::parse("gs://b/p").unwrap();
        assert!(!gs.is_local());
        assert_eq!(gs.to_string(), "gs://b/p");
        let error = Location::parse("ftp://host/x").unwrap_err().to_string();
        assert!(error.contains("'ftp://' is not a store"), "{error}");
        // A Windows drive letter is a local path, not a scheme.
        assert!(Location::parse("C://x").unwrap().is_local());
    }

    #[test]
    fn joins_and_renames_keep_the_store() {
        let lake = Location::parse("s3://lake/pay").unwrap();
        assert_eq!(
            lake.join("a/b.parquet").to_string(),
            "s3://lake/pay/a/b.parquet"
        );
        assert_eq!(
            lake.with_last(|n| format!("{n}.task-1")).to_string(),
            "s3://lake/pay.task-1"
        );
        let local = Location::local("out/x.ndjson");
        assert_eq!(
            local.with_last(|n| format!("{n}.1")).to_string(),
            "out/x.ndjson.1"
        );
    }

    #[test]
    fn credentials_in_a_url_are_refused_without_being_repeated() {
        let error = Location::parse("s3://AKIDX:hunter2@lake/pay")
            .unwrap_err()
            .to_string();
        assert!(error.contains("AWS_ACCESS_KEY_ID"), "{error}");
        assert!(
            !error.contains("hunter2") && !error.contains("AKIDX"),
            "{error}"
        );
    }
}

//! `--state-dir` as given: a local directory, or a bucket prefix
//! (`s3://lake/state/job`) that the job's checkpoints are kept in through
//! a local working copy.
//!
//! In: the flag's text. Out: the directory the engine writes
//! checkpoints into, and the replica it syncs them to
//! ([`eddy_engine::checkpoint::replica`]). A working copy is private to
//! the run and removed when it ends; the bucket holds the state.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_connectors::storage::{Bucket, BucketReplica, Location};
use eddy_engine::checkpoint::replica::StateReplica;

use eddy_cli::CliError;

/// See the module docs.
pub(crate) struct StateLocation {
    /// The directory checkpoints are written into.
    pub dir: PathBuf,
    /// The bucket they are kept in, for a bucket `--state-dir`.
    pub replica: Option<Arc<dyn StateReplica>>,
    /// That bucket prefix (a group job keeps each task's state under it).
    pub bucket: Option<Bucket>,
    /// Removes the working copy when the run ends.
    _working_copy: Option<WorkingCopy>,
}

/// A private local directory, removed when dropped.
pub(crate) struct WorkingCopy(PathBuf);

impl WorkingCopy {
    /// A new directory under the system's temporary directory.
    pub fn new(what: &str) -> Self {
        Self(std::env::temp_dir().join(format!(
            "eddy-{what}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        )))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkingCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl StateLocation {
    /// Reads `--state-dir`.
    pub fn parse(flag: &Path) -> Result<Self, CliError> {
        match Location::parse(&flag.to_string_lossy())? {
            Location::Local(dir) => Ok(Self {
                dir,
                replica: None,
                bucket: None,
                _working_copy: None,
            }),
            Location::Bucket(bucket) => {
                let copy = WorkingCopy::new("state");
                Ok(Self {
                    dir: copy.path().to_path_buf(),
                    replica: Some(Arc::new(BucketReplica::new(bucket.clone()))),
                    bucket: Some(bucket),
                    _working_copy: Some(copy),
                })
            }
        }
    }
}

/// A savepoint given as a bucket prefix (`--from-savepoint s3://...`),
/// downloaded into a private directory that lives as long as the returned
/// guard; a local one as it is.
pub(crate) fn local_savepoint(flag: &Path) -> Result<(PathBuf, Option<WorkingCopy>), CliError> {
    let Location::Bucket(bucket) = Location::parse(&flag.to_string_lossy())? else {
        return Ok((flag.to_path_buf(), None));
    };
    let copy = WorkingCopy::new("savepoint");
    BucketReplica::new(bucket).restore_into(copy.path())?;
    Ok((copy.path().to_path_buf(), Some(copy)))
}

/// Uploads the savepoint directory `local` to the empty bucket prefix
/// `dest`, its `SAVEPOINT` file last (a savepoint exists once that does).
pub(crate) fn upload_savepoint(local: &Path, dest: &Path) -> Result<(), CliError> {
    let Location::Bucket(bucket) = Location::parse(&dest.to_string_lossy())? else {
        return Ok(());
    };
    if !bucket.list()?.is_empty() {
        return Err(CliError::Usage(format!(
            "{bucket}: exists and is not empty"
        )));
    }
    BucketReplica::new(bucket).upload_all(local, &["SAVEPOINT"])?;
    Ok(())
}

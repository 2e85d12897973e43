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

use eddy_connectors::storage::{BucketReplica, Location};
use eddy_engine::checkpoint::replica::StateReplica;

use eddy_cli::CliError;

/// See the module docs.
pub(crate) struct StateLocation {
    /// The directory checkpoints are written into.
    pub dir: PathBuf,
    /// The bucket they are kept in, for a bucket `--state-dir`.
    pub replica: Option<Arc<dyn StateReplica>>,
    /// Removes the working copy when the run ends.
    _working_copy: Option<WorkingCopy>,
}

struct WorkingCopy(PathBuf);

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
                _working_copy: None,
            }),
            Location::Bucket(bucket) => {
                let dir = std::env::temp_dir().join(format!(
                    "eddy-state-{}-{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos())
                        .unwrap_or_default()
                ));
                Ok(Self {
                    dir: dir.clone(),
                    replica: Some(Arc::new(BucketReplica::new(bucket))),
                    _working_copy: Some(WorkingCopy(dir)),
                })
            }
        }
    }
}

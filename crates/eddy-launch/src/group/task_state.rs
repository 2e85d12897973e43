//! Where a group job's tasks keep their state, and how a process holds a
//! task: a directory every process of the group reaches, or a bucket.
//!
//! In: the group's state location. Out: per task, its lock, its
//! checkpoint configuration and whether it is done.
//!
//! ```text
//!  shared directory:  DIR/task-<p>/chk-…        DIR/task-<p>.lock  (an OS file lock)
//!  bucket:            s3://…/task-<p>/chk-…     s3://…/leases/task-<p>/<epoch>  (a lease)
//!                     WORK/task-<p>/            this process's working copy, restored from the bucket
//! ```
//!
//! With a bucket no two processes need a common path: a task's state is
//! restored from the bucket into the working copy of whichever process
//! takes the task, and synced back at each checkpoint before its sinks
//! commit, after the process has checked that it still holds the task's
//! lease ([`BucketReplica::fenced_by`]). A dead process's lease runs out after the
//! group's session timeout; one that stops hands it on at once.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_engine::checkpoint::store::StateDir;
use eddy_engine::checkpoint::CheckpointConfig;
use eddy_engine::EngineError;

use crate::{LaunchError, Result};
use eddy_connectors::storage::{Bucket, BucketReplica, Lease, LeaseWatch};

/// How often a task's done-ness is asked of a bucket (a listing each).
const BUCKET_DONE_EVERY: Duration = Duration::from_secs(1);

/// The shortest time to live of a task's lease: its holder renews it
/// every quarter of it and gives up after half, so a slow request or two
/// to the store does not cost a task.
const MIN_LEASE_TTL: Duration = Duration::from_secs(4);

/// A process's hold on a task: taken before the task starts, let go once
/// it has stopped (final checkpoint, sinks committed).
pub(super) enum TaskLock {
    /// An advisory lock on `DIR/task-<p>.lock`, which the OS drops with a
    /// dead process.
    File { _held: std::fs::File },
    /// A lease in the bucket.
    Lease(Arc<Lease>),
}

impl TaskLock {
    /// What holds the task, for the log.
    pub(super) fn describe(&self) -> String {
        match self {
            Self::File { .. } => "its lock file".into(),
            Self::Lease(lease) => format!("{} (lease epoch {})", lease.holder(), lease.epoch()),
        }
    }

    /// Why this process no longer holds the task, if it does not (a
    /// lease taken over, or not renewed in time).
    pub(super) fn lost(&self) -> Option<eddy_connectors::storage::LeaseLost> {
        match self {
            Self::File { .. } => None,
            Self::Lease(lease) => lease.lost(),
        }
    }
}

/// Where the tasks' state lives (see the module docs).
pub(super) enum TaskStates {
    /// `task-<p>` under a directory every process reaches.
    Shared { root: PathBuf },
    /// `task-<p>` under a bucket prefix, through working copies under
    /// `work`.
    Bucket {
        bucket: Bucket,
        work: PathBuf,
        holder: String,
        ttl: Duration,
        watches: RefCell<BTreeMap<i32, LeaseWatch>>,
        asked: RefCell<BTreeMap<i32, Instant>>,
    },
}

fn task_name(task: i32) -> String {
    format!("task-{task}")
}

impl TaskStates {
    /// The shared directory `root`.
    pub(super) fn shared(root: PathBuf) -> Self {
        Self::Shared { root }
    }

    /// The bucket prefix `bucket`, with this process's working copies
    /// under `work`; a dead holder's lease runs out after `ttl` (at
    /// least [`MIN_LEASE_TTL`]).
    pub(super) fn bucket(bucket: Bucket, work: PathBuf, ttl: Duration) -> Self {
        Self::Bucket {
            bucket,
            work,
            holder: eddy_connectors::storage::this_process(),
            ttl: ttl.max(MIN_LEASE_TTL),
            watches: RefCell::default(),
            asked: RefCell::default(),
        }
    }

    /// Takes `task`'s lock; `None` while another process holds it (a
    /// task still stopping there after a rebalance, or a dead process's
    /// lease not yet run out).
    pub(super) fn lock(&self, task: i32) -> Result<Option<TaskLock>> {
        match self {
            Self::Shared { root } => {
                Ok(lock_file(root, task)?.map(|held| TaskLock::File { _held: held }))
            }
            Self::Bucket {
                bucket,
                holder,
                ttl,
                watches,
                ..
            } => {
                let leases = bucket.join(&format!("leases/{}", task_name(task)));
                let lease = watches
                    .borrow_mut()
                    .entry(task)
                    .or_default()
                    .try_acquire(&leases, holder, *ttl)?;
                Ok(lease.map(|lease| TaskLock::Lease(Arc::new(lease))))
            }
        }
    }

    /// The checkpoint configuration of `task`, run under `lock`: the
    /// group's with the task's own directory (and, for a bucket, its
    /// working copy and the replica it syncs to while the lease holds).
    pub(super) fn checkpoints(
        &self,
        task: i32,
        lock: &TaskLock,
        group: &CheckpointConfig,
    ) -> CheckpointConfig {
        match (self, lock) {
            (Self::Bucket { bucket, work, .. }, TaskLock::Lease(lease)) => CheckpointConfig {
                state_dir: work.join(task_name(task)),
                replica: Some(Arc::new(
                    BucketReplica::new(bucket.join(&task_name(task))).fenced_by(lease),
                )),
                ..group.clone()
            },
            (Self::Shared { root }, _) | (Self::Bucket { work: root, .. }, _) => CheckpointConfig {
                state_dir: root.join(task_name(task)),
                ..group.clone()
            },
        }
    }

    /// Whether `task` is done: finished, wherever it ran, and its last
    /// checkpoint's sinks committed. Asked of a bucket at most once a
    /// second per task (`false` in between) unless `now`.
    pub(super) fn done(&self, task: i32, now: bool) -> eddy_engine::Result<bool> {
        match self {
            Self::Shared { root } => {
                StateDir::open(root.join(task_name(task)))?.finished_and_committed()
            }
            Self::Bucket {
                bucket,
                work,
                asked,
                ..
            } => {
                let at = Instant::now();
                if !now
                    && asked
                        .borrow()
                        .get(&task)
                        .is_some_and(|last| at.duration_since(*last) < BUCKET_DONE_EVERY)
                {
                    return Ok(false);
                }
                asked.borrow_mut().insert(task, at);
                done_in_bucket(
                    &bucket.join(&task_name(task)),
                    &work.join(format!(".done-{}", task_name(task))),
                )
            }
        }
    }
}

/// Whether the newest checkpoint in the task's bucket prefix is a
/// finished job's, its sinks committed: its `MANIFEST` and `COMMITTED`
/// read into `scratch` and judged as a local state directory would be.
fn done_in_bucket(task: &Bucket, scratch: &Path) -> eddy_engine::Result<bool> {
    let failed = |e: eddy_connectors::ConnectorError| EngineError::Checkpoint(e.to_string());
    let objects = task.list().map_err(failed)?;
    let Some(newest) = objects
        .iter()
        .filter_map(|o| o.name.strip_suffix("/MANIFEST"))
        .filter_map(|dir| Some((dir.strip_prefix("chk-")?.parse::<u64>().ok()?, dir)))
        .max()
        .map(|(_, dir)| dir.to_string())
    else {
        return Ok(false);
    };
    let committed = format!("{newest}/COMMITTED");
    if !objects.iter().any(|o| o.name == committed) {
        return Ok(false);
    }
    let _ = std::fs::remove_dir_all(scratch);
    let dir = scratch.join(&newest);
    std::fs::create_dir_all(&dir)
        .map_err(|e| EngineError::Checkpoint(format!("{}: {e}", dir.display())))?;
    for name in ["MANIFEST", "COMMITTED"] {
        let Some(bytes) = task.get(&format!("{newest}/{name}")).map_err(failed)? else {
            return Ok(false); // removed since it was listed
        };
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| EngineError::Checkpoint(format!("{}: {e}", path.display())))?;
    }
    let done = StateDir::open(scratch)?.finished_and_committed();
    let _ = std::fs::remove_dir_all(scratch);
    done
}

/// Takes `task`'s lock file (`ROOT/task-<p>.lock`); `None` while another
/// process (or another open of the file) holds it.
fn lock_file(root: &Path, task: i32) -> Result<Option<std::fs::File>> {
    let path = root.join(format!("{}.lock", task_name(task)));
    let io = |source| LaunchError::Io {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(root).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_held_by_one_holder_at_a_time_until_it_lets_go() {
        let root = tempfile::tempdir().unwrap();
        let first = lock_file(root.path(), 2).unwrap();
        assert!(first.is_some());
        assert!(
            lock_file(root.path(), 2).unwrap().is_none(),
            "held: another holder waits"
        );
        assert!(
            lock_file(root.path(), 1).unwrap().is_some(),
            "tasks are locked one by one"
        );
        drop(first);
        assert!(lock_file(root.path(), 2).unwrap().is_some());
    }
}

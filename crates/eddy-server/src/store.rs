//! Job definitions and states on disk, so that jobs outlive the server.
//!
//! ```text
//!  STATE_DIR/jobs/<id>/job.json   the definition (name, SQL, parameters), times, state, final counters
//!  STATE_DIR/jobs/<id>/state/     the job's checkpoints (eddy_engine::checkpoint::store)
//! ```
//!
//! `job.json` is replaced atomically (written beside, then renamed) each
//! time the job's state changes. With a state bucket
//! ([`crate::state_bucket`]) STATE_DIR is a working copy: each record is
//! written through, each job's checkpoints replicated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_engine::checkpoint::replica::StateReplica;

use eddy_engine::runtime::NodeReport;
use serde::{Deserialize, Serialize};

use crate::error::{Result, ServerError};
use crate::state_bucket::StateBucket;

/// What is kept of a job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its SQL.
    pub sql: String,
    /// Its parameters.
    pub params: BTreeMap<String, String>,
    /// Instances of each keyed operator (records written before there was a
    /// choice ran one).
    #[serde(default = "one")]
    pub parallelism: usize,
    /// The job's own budget for its operator state, bytes.
    #[serde(default)]
    pub memory_limit: Option<u64>,
    /// The consumer group of a group job.
    #[serde(default)]
    pub group: Option<String>,
    /// A group job's session timeout, ms.
    #[serde(default)]
    pub session_timeout_ms: Option<u64>,
    /// The savepoint the job started from (its id), if any.
    #[serde(default)]
    pub from_savepoint: Option<String>,
    /// Its last redeploy allowed dropping state the new SQL had no place
    /// for: its next start may drop it.
    #[serde(default)]
    pub allow_dropped_state: bool,
    /// Submission time, epoch ms.
    pub created_ms: i64,
    /// Start of its latest run, epoch ms.
    pub started_ms: Option<i64>,
    /// End, epoch ms.
    pub ended_ms: Option<i64>,
    /// Where it is in its life (`running` ones resume when the server starts).
    pub state: crate::views::JobStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// Counters when it ended.
    #[serde(default)]
    pub final_metrics: Vec<NodeReport>,
}

/// The jobs directory.
#[derive(Debug, Clone)]
pub struct JobStore {
    root: PathBuf,
    bucket: Option<Arc<StateBucket>>,
}

fn io(path: &Path, source: std::io::Error) -> ServerError {
    ServerError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl JobStore {
    /// Opens (creating) `STATE_DIR/jobs`, written through to `bucket`
    /// if given.
    pub fn open(state_dir: &Path, bucket: Option<Arc<StateBucket>>) -> Result<Self> {
        let root = state_dir.join("jobs");
        std::fs::create_dir_all(&root).map_err(|e| io(&root, e))?;
        Ok(Self { root, bucket })
    }

    /// The replica job `id` keeps its checkpoints in, with a state bucket.
    pub fn replica(&self, id: &str) -> Option<Arc<dyn StateReplica>> {
        self.bucket.as_ref().map(|bucket| bucket.checkpoints(id))
    }

    /// Job `id`'s checkpoint directory, ready to read: with a state bucket,
    /// restored from it unless the job has run here (its working copy).
    pub fn checkpoints_here(&self, id: &str) -> Result<PathBuf> {
        let dir = self.checkpoint_dir(id);
        if let Some(bucket) = &self.bucket {
            bucket.restore_checkpoints(id, &dir)?;
        }
        Ok(dir)
    }

    /// The directory of job `id`.
    pub fn job_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// Where job `id` checkpoints.
    pub fn checkpoint_dir(&self, id: &str) -> PathBuf {
        self.job_dir(id).join("state")
    }

    /// Writes `record` atomically.
    pub fn save(&self, record: &JobRecord) -> Result<()> {
        let dir = self.job_dir(&record.id);
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let text =
            serde_json::to_vec_pretty(record).map_err(|e| ServerError::Internal(e.to_string()))?;
        let tmp = dir.join("job.json.tmp");
        let path = dir.join("job.json");
        std::fs::write(&tmp, &text).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        match &self.bucket {
            Some(bucket) => bucket.put_record(&record.id, text),
            None => Ok(()),
        }
    }

    /// Every job on disk; unreadable ones are skipped with a warning.
    pub fn load_all(&self) -> Result<Vec<JobRecord>> {
        let mut records = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(|e| io(&self.root, e))? {
            let path = entry
                .map_err(|e| io(&self.root, e))?
                .path()
                .join("job.json");
            let Ok(text) = std::fs::read(&path) else {
                continue;
            };
            match serde_json::from_slice::<JobRecord>(&text) {
                Ok(record) => records.push(record),
                Err(e) => tracing::warn!(
                    "{}: unreadable job definition, skipped: {e}",
                    path.display()
                ),
            }
        }
        records.sort_by_key(|r| r.created_ms);
        Ok(records)
    }

    /// Forgets job `id` (its definition and checkpoints).
    pub fn remove(&self, id: &str) -> Result<()> {
        if let Some(bucket) = &self.bucket {
            bucket.remove_job(id)?;
        }
        let dir = self.job_dir(id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&dir, e)),
        }
    }
}

fn one() -> usize {
    1
}

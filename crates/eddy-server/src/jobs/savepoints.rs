//! The server's savepoints: `STATE_DIR/savepoints/<job id>-<taken ms>/`,
//! each a savepoint directory ([`eddy_engine::checkpoint::savepoint`]).
//!
//! In: a stopped job's state directory (a stop with `"savepoint": true`).
//! Out: [`SavepointView`]s for the API and the console, and the directory
//! a job submitted with `from_savepoint` starts from.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_engine::checkpoint::savepoint::{Savepoint, SavepointSql};
use eddy_engine::checkpoint::store::StateDir;

use crate::error::{Result, ServerError};
use crate::state_bucket::StateBucket;
use crate::views::SavepointView;

/// The savepoints directory.
#[derive(Debug, Clone)]
pub(super) struct Savepoints {
    root: PathBuf,
    /// Where each savepoint is uploaded to as well, with a state bucket.
    bucket: Option<Arc<StateBucket>>,
}

/// Whether `id` can name a savepoint (and so a directory): what the server
/// makes, `<job id>-<ms>`, letters, digits and `-` only.
fn well_formed(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl Savepoints {
    pub(super) fn new(state_dir: &Path, bucket: Option<Arc<StateBucket>>) -> Self {
        Self {
            root: state_dir.join("savepoints"),
            bucket,
        }
    }

    /// Takes a savepoint of the newest checkpoint in `checkpoints`, for the
    /// job `job_id` named `name` with SQL `sql`.
    pub(super) fn take(
        &self,
        checkpoints: &Path,
        job_id: &str,
        name: &str,
        sql: &str,
    ) -> Result<SavepointView> {
        let id = format!("{job_id}-{}", super::now_ms());
        let store = StateDir::open(checkpoints).map_err(engine)?;
        let savepoint = store
            .savepoint(
                &self.root.join(&id),
                Some(name),
                vec![SavepointSql {
                    name: format!("{name}.sql"),
                    text: sql.to_string(),
                }],
            )
            .map_err(engine)?;
        if let Some(bucket) = &self.bucket {
            bucket.put_savepoint(&id, &self.root.join(&id))?;
        }
        Ok(view(&id, &savepoint))
    }

    /// The directory of savepoint `id`; not found unless it is one.
    pub(super) fn path(&self, id: &str) -> Result<PathBuf> {
        let missing = || ServerError::NotFound(format!("savepoint {id}"));
        if !well_formed(id) {
            return Err(missing());
        }
        let dir = self.root.join(id);
        Savepoint::open(&dir).map_err(|_| missing())?;
        Ok(dir)
    }

    /// Every savepoint, oldest first (`job_id`: only that job's).
    pub(super) fn list(&self, job_id: Option<&str>) -> Vec<SavepointView> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut found: Vec<SavepointView> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let id = e.file_name().to_string_lossy().to_string();
                if !well_formed(&id)
                    || job_id.is_some_and(|job| !id.starts_with(&format!("{job}-")))
                {
                    return None;
                }
                Savepoint::open(e.path()).ok().map(|s| view(&id, &s))
            })
            .collect();
        found.sort_by(|a, b| (a.taken_ms, &a.id).cmp(&(b.taken_ms, &b.id)));
        found
    }
}

fn engine(e: eddy_engine::EngineError) -> ServerError {
    ServerError::Rejected(e.to_string())
}

fn view(id: &str, savepoint: &Savepoint) -> SavepointView {
    let info = savepoint.info();
    SavepointView {
        id: id.to_string(),
        job_id: id.split('-').next().unwrap_or_default().to_string(),
        job: info.job.clone(),
        checkpoint: info.checkpoint,
        kind: format!("{:?}", info.kind).to_lowercase(),
        taken_ms: info.taken_ms,
        parallelism: info.parallelism,
        key_groups: info.key_groups,
        bytes: info.bytes,
    }
}

//! The server's state kept in a bucket (`eddy serve --state-dir s3://...`),
//! so that a server replaced on another machine (a rescheduled pod, no
//! volume) resumes its jobs.
//!
//! In: the bucket prefix and the server's local working directory. Out:
//! the working directory filled with what the server reads at start, and
//! each change written through to the bucket:
//!
//! ```text
//!  PREFIX/jobs/<id>/job.json     put whenever the job's record changes; read at start
//!  PREFIX/jobs/<id>/state/...    the job's checkpoints: the engine's replica of the job's working copy
//!  PREFIX/savepoints/<id>/...    uploaded when taken (SAVEPOINT last); read at start
//!  PREFIX/pg/catalog.json        the PostgreSQL port's session catalog: put whenever it changes; read at start
//!  PREFIX/server/<epoch>         the lease of the one server that runs these jobs
//! ```
//!
//! Two servers on one prefix would run its jobs twice: a server holds the
//! prefix's lease while it runs, a second one waits for it and gives up
//! if its holder is alive, and every checkpoint upload is fenced by it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_connectors::storage::{Bucket, BucketReplica, Lease, LeaseWatch};
use eddy_engine::checkpoint::replica::StateReplica;

use crate::error::{Result, ServerError};

/// The time to live of the server's lease: a replaced server waits up to
/// this long for a dead predecessor's.
const SERVER_LEASE_TTL: Duration = Duration::from_secs(10);

/// The session catalog's object, and its path below the working copy.
pub const SESSION_CATALOG: &str = "pg/catalog.json";

/// See the module docs.
#[derive(Debug)]
pub struct StateBucket {
    bucket: Bucket,
    lease: Arc<Lease>,
}

fn storage(error: impl std::fmt::Display) -> ServerError {
    ServerError::Internal(error.to_string())
}

impl StateBucket {
    /// Takes the prefix's lease (waiting out a dead holder's; refusing a
    /// live one's) and copies the job records and savepoints into
    /// `local`.
    pub fn open(bucket: Bucket, local: &Path) -> Result<Self> {
        let lease = take_lease(&bucket.join("server"))?;
        let state = Self {
            bucket,
            lease: Arc::new(lease),
        };
        for object in state.bucket.list().map_err(storage)? {
            let name = object.name;
            let wanted = name.starts_with("savepoints/")
                || name == SESSION_CATALOG
                || (name.starts_with("jobs/") && name.ends_with("/job.json"));
            if !wanted {
                continue;
            }
            let Some(bytes) = state.bucket.get(&name).map_err(storage)? else {
                continue;
            };
            let path = local.join(&name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| ServerError::Io {
                    path: parent.display().to_string(),
                    source,
                })?;
            }
            std::fs::write(&path, bytes).map_err(|source| ServerError::Io {
                path: path.display().to_string(),
                source,
            })?;
        }
        Ok(state)
    }

    /// Where the state is, for messages.
    pub fn describe(&self) -> String {
        self.bucket.to_string()
    }

    /// Writes job `id`'s record.
    pub fn put_record(&self, id: &str, bytes: Vec<u8>) -> Result<()> {
        self.fenced()?;
        self.bucket
            .put(&format!("jobs/{id}/job.json"), bytes)
            .map_err(storage)
    }

    /// Writes the PostgreSQL port's session catalog.
    pub fn put_session_catalog(&self, bytes: Vec<u8>) -> Result<()> {
        self.fenced()?;
        self.bucket.put(SESSION_CATALOG, bytes).map_err(storage)
    }

    /// Removes job `id`: its record and checkpoints.
    pub fn remove_job(&self, id: &str) -> Result<()> {
        self.fenced()?;
        let job = self.bucket.join(&format!("jobs/{id}"));
        for object in job.list().map_err(storage)? {
            job.delete(&object.name).map_err(storage)?;
        }
        Ok(())
    }

    /// The replica of job `id`'s checkpoints, written while this server
    /// holds the prefix.
    pub fn checkpoints(&self, id: &str) -> Arc<dyn StateReplica> {
        Arc::new(
            BucketReplica::new(self.bucket.join(&format!("jobs/{id}/state")))
                .fenced_by(&self.lease),
        )
    }

    /// Copies job `id`'s checkpoints into `local` (created) unless it is
    /// there already: for reading the state of a job not running here.
    pub fn restore_checkpoints(&self, id: &str, local: &Path) -> Result<()> {
        if local.exists() {
            return Ok(());
        }
        std::fs::create_dir_all(local).map_err(|source| ServerError::Io {
            path: local.display().to_string(),
            source,
        })?;
        self.checkpoints(id).restore(local).map_err(storage)
    }

    /// Uploads savepoint `id` from `local`, its `SAVEPOINT` last.
    pub fn put_savepoint(&self, id: &str, local: &Path) -> Result<()> {
        self.fenced()?;
        BucketReplica::new(self.bucket.join(&format!("savepoints/{id}")))
            .upload_all(local, &["SAVEPOINT"])
            .map_err(storage)
    }

    fn fenced(&self) -> Result<()> {
        self.lease.check().map_err(|why| {
            ServerError::Rejected(format!(
                "this server no longer holds its state {}: {why}",
                self.bucket
            ))
        })
    }
}

/// Takes the lease under `leases`: at once if free, after its time to live
/// if its holder is silent; an error if it stays renewed for twice that
/// (another server is running on the same state).
fn take_lease(leases: &Bucket) -> Result<Lease> {
    let holder = eddy_connectors::storage::this_process();
    let mut watch = LeaseWatch::default();
    let started = Instant::now();
    let mut said = false;
    loop {
        if let Some(lease) = watch
            .try_acquire(leases, &holder, SERVER_LEASE_TTL)
            .map_err(storage)?
        {
            return Ok(lease);
        }
        if started.elapsed() > SERVER_LEASE_TTL * 2 {
            return Err(ServerError::Rejected(format!(
                "{leases}: another server holds this state directory and is alive; \
                 two servers on one --state-dir would run its jobs twice"
            )));
        }
        if !said {
            tracing::warn!(
                "{leases}: held by another server; waiting up to {:?} for it to run out",
                SERVER_LEASE_TTL * 2
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

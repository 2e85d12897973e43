//! What `eddy serve` is given (`--addr`, `--data-root`, `--output-root`,
//! `--state-dir`, `--group-state-dir`, `--token`, `--memory-limit`,
//! `--no-chaining`, `--workers`, `--pool-share`, `--max-jobs`, `--job-memory-limit`,
//! `--pg-addr`, `--view-refresh`), passed explicitly to
//! everything that needs it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (default `127.0.0.1:8080`).
    pub addr: SocketAddr,
    /// Sources of submitted jobs read files below this directory only.
    pub data_root: PathBuf,
    /// Sinks of submitted jobs write below this directory only.
    pub output_root: PathBuf,
    /// Job definitions and checkpoints (with `state_bucket`, this
    /// server's working copy of them).
    pub state_dir: PathBuf,
    /// A bucket prefix that holds the job definitions, checkpoints and
    /// savepoints instead (`--state-dir s3://...`), so that a server
    /// started elsewhere resumes the jobs ([`crate::state_bucket`]).
    pub state_bucket: Option<eddy_connectors::storage::Bucket>,
    /// The checkpoints of group jobs, one directory per group: shared by
    /// every server (and `eddy run --group` process) of a group, as a
    /// task moves between them by resuming from its last checkpoint
    /// (default `STATE_DIR/groups`).
    pub group_state_dir: PathBuf,
    /// A bucket prefix that holds group jobs' checkpoints instead
    /// (`--group-state-dir s3://...`), one prefix per group, for servers
    /// that share no disk; `group_state_dir` then holds this server's
    /// working copies of the tasks it runs.
    pub group_state_bucket: Option<eddy_connectors::storage::Bucket>,
    /// When set, every route but `/metrics` and `/healthz` needs
    /// `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Time between checkpoints of every job.
    pub checkpoint_interval: Duration,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Budget of all jobs' operator state together, bytes (`--memory-limit`);
    /// `None`: unbounded.
    pub memory_limit: Option<u64>,
    /// Whether submitted jobs may declare Python functions
    /// (`--allow-python-udfs`). Their modules then come only from below
    /// `data_root`, and each worker's address space is held to the job's
    /// `memory_limit` when it has one.
    pub allow_python_udfs: bool,
    /// Run every node of every job as a task of its own
    /// (`--no-chaining`; [`eddy_engine::runtime::JobConfig::disable_chaining`]).
    pub disable_chaining: bool,
    /// Worker threads the tasks of every job run on, shared by all jobs
    /// (`--workers`); `None`: one per core.
    pub workers: Option<usize>,
    /// How the workers are split (`--pool-share`): between jobs (each busy
    /// job an equal share, the default) or between tasks.
    pub pool_share: eddy_engine::runtime::Fairness,
    /// The most jobs running at once (`--max-jobs`); a submission beyond
    /// is refused (429). `None`: no cap.
    pub max_jobs: Option<usize>,
    /// The memory budget of a job submitted without a `memory_limit` of
    /// its own (`--job-memory-limit`), bytes; `None`: such a job is held
    /// only to the server's.
    pub job_memory_limit: Option<u64>,
    /// Where jobs spill state past their memory budgets, and how much
    /// each may (`--spill-dir`, default `spill` under the state
    /// directory; `--spill-disk-limit`).
    pub spill: eddy_engine::spill::SpillConfig,
    /// The PostgreSQL port (`--pg-addr`, `--pg-tls-cert`/`--pg-tls-key`);
    /// `None`: HTTP only.
    pub pg: Option<crate::pg::PgConfig>,
    /// Time between checkpoints of a job that writes a materialized view
    /// (`--view-refresh`): how stale a view read may be.
    pub view_refresh: Duration,
}

impl ServerConfig {
    /// Settings with the defaults for everything but the directories.
    pub fn new(data_root: PathBuf, output_root: PathBuf, state_dir: PathBuf) -> Self {
        let spill_dir = state_dir.join("spill");
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_root,
            output_root,
            group_state_dir: state_dir.join("groups"),
            group_state_bucket: None,
            state_bucket: None,
            state_dir,
            token: None,
            checkpoint_interval: Duration::from_secs(10),
            max_body_bytes: 1 << 20,
            memory_limit: None,
            allow_python_udfs: false,
            disable_chaining: false,
            workers: None,
            pool_share: eddy_engine::runtime::Fairness::PerJob,
            max_jobs: None,
            job_memory_limit: None,
            spill: eddy_engine::spill::SpillConfig {
                dir: Some(spill_dir),
                disk_limit: None,
            },
            pg: None,
            view_refresh: Duration::from_secs(1),
        }
    }
}

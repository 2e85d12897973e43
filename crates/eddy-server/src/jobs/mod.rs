//! The job manager: every job the server knows, running or ended.
//!
//! In: submissions (SQL, parameters, a name), stop and delete requests.
//! Out: [`JobView`]s. Planning and starting run on the caller's (blocking)
//! thread, never on the async runtime; jobs run on the engine's threads.
//!
//! ```text
//!  submit ─ compile (400 with line/column) ─ start_job (checkpoints in STATE/jobs/<id>/state)
//!         ─ job.json saved (running) ─ watcher thread: wait ─ job.json saved (finished|failed|stopped|cancelled)
//!  open (server start) ─ every job.json ─ `running` ones started again: they resume from their latest checkpoint
//! ```
//!
//! A job's record is saved under its own lock, and a deleted job is marked
//! under the same lock, so a watcher finishing late never brings a deleted
//! job back.
//!
//! Here the jobs' lifecycle (open, submit, start, stop, delete, tail);
//! [`compile`] the SQL and the engine's refusals as API errors; `report`
//! what the server reports of each job (samples, counters, summaries,
//! views); `savepoints` the savepoints a stop keeps and a submission
//! starts from; `redeploy` a job's SQL changed in place.

mod compile;
mod redeploy;
mod report;
mod savepoints;

pub use compile::compile;
use compile::{
    check_group_name, compile_record, engine_error, launch_error, sink_names, MAX_PARALLELISM,
};
use savepoints::Savepoints;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use eddy_connectors::settings::ConnectorSettings;
use eddy_connectors::stdout::StdoutTarget;
use eddy_connectors::view::ViewCatalog;
use eddy_connectors::{ConnectorConfig, Connectors, PathRoots};
use eddy_engine::checkpoint::CheckpointConfig;
use eddy_engine::distribute::physical::PhysicalGraph;
use eddy_engine::graph::{ConnectorFactory, JobGraph};
use eddy_engine::memory::MemoryBudget;
use eddy_engine::parallel::{machine_cores, Parallelism};
use eddy_engine::runtime::{JobConfig, JobState, NodeReport};
use eddy_launch::{ConnectorsFor, GroupSettings, LaunchConfig, LaunchPlan, RunningJob};

use eddy_python::PythonRuntime;

use crate::config::ServerConfig;
use crate::connectors::ServerConnectors;
use crate::error::{Result, ServerError};
use crate::state_bucket::StateBucket;
use crate::store::{JobRecord, JobStore};
use crate::tail::{TapItem, Taps};
use crate::views::{graph_view, GraphNode, JobStatus, JobView, SavepointView, SubmitRequest};

/// How long stop and delete wait for a job to end.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The current run of a job.
struct Run {
    handle: RunningJob,
    taps: Arc<Taps>,
    /// Its Python functions, if it declares any.
    python: Option<Arc<PythonRuntime>>,
}

/// A job's SQL planned to run: how to start it, the graph the console
/// shows (as run: instances, exchanges) and its sinks.
struct Planned {
    launch: LaunchPlan,
    view: PhysicalGraph,
    sinks: Vec<String>,
    python: Option<Arc<PythonRuntime>>,
}

/// A job known to the server.
pub struct ManagedJob {
    /// Its id.
    pub id: String,
    record: Mutex<(JobRecord, bool)>,
    graph: Vec<GraphNode>,
    sinks: Vec<String>,
    run: Mutex<Option<Run>>,
    samples: Mutex<report::Samples>,
}

/// See the module docs.
pub struct JobManager {
    config: Arc<ServerConfig>,
    /// The budget every job's operator state is charged to
    /// (`--memory-limit`), if any.
    memory: Option<Arc<MemoryBudget>>,
    /// The worker threads every job's tasks run on (`--workers`).
    pool: Arc<eddy_engine::runtime::WorkerPool>,
    store: JobStore,
    savepoints: Savepoints,
    jobs: RwLock<BTreeMap<String, Arc<ManagedJob>>>,
    /// Submissions admitted under `--max-jobs` and not yet running.
    starting: Mutex<usize>,
    /// Set while the server shuts down: jobs it stops stay `running` on disk.
    shutting_down: Arc<std::sync::atomic::AtomicBool>,
    /// The materialized views jobs' `view` sinks keep for readers.
    views: ViewCatalog,
    /// Where the server's state is written through to, with
    /// `--state-dir s3://...`.
    state_bucket: Option<Arc<StateBucket>>,
}

/// A place taken among the server's running jobs (`--max-jobs`) by a
/// submission that is starting; given back when it is dropped.
struct Admission<'a>(Option<&'a Mutex<usize>>);

impl Admission<'_> {
    /// The job runs: `insert` makes it count as running as its place is
    /// given back, so that no submission sees it counted twice or not at all.
    fn running(mut self, insert: impl FnOnce()) {
        match self.0.take() {
            Some(starting) => {
                let mut starting = starting.lock().unwrap_or_else(|e| e.into_inner());
                insert();
                *starting = starting.saturating_sub(1);
            }
            None => insert(),
        }
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if let Some(starting) = self.0.take() {
            let mut starting = starting.lock().unwrap_or_else(|e| e.into_inner());
            *starting = starting.saturating_sub(1);
        }
    }
}

/// Whether a job's graph writes a materialized view (a `view` sink).
fn writes_view(graph: &JobGraph) -> bool {
    graph.nodes.iter().any(|node| {
        matches!(&node.kind, eddy_engine::graph::NodeKind::Sink { spec, .. } if spec.connector == eddy_connectors::view::NAME)
    })
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl JobManager {
    /// Opens the state directory and resumes the jobs that were running.
    pub fn open(config: Arc<ServerConfig>) -> Result<Arc<Self>> {
        let state_bucket = match &config.state_bucket {
            Some(bucket) => Some(Arc::new(StateBucket::open(
                bucket.clone(),
                &config.state_dir,
            )?)),
            None => None,
        };
        let store = JobStore::open(&config.state_dir, state_bucket.clone())?;
        let pool = eddy_engine::runtime::WorkerPool::with_fairness(
            config
                .workers
                .unwrap_or_else(eddy_engine::runtime::pool::default_workers),
            config.pool_share,
        )
        .map_err(engine_error)?;
        let manager = Arc::new(Self {
            pool,
            memory: config
                .memory_limit
                .map(|limit| Arc::new(MemoryBudget::new("server", limit))),
            savepoints: Savepoints::new(&config.state_dir, state_bucket.clone()),
            state_bucket,
            config,
            store,
            jobs: RwLock::new(BTreeMap::new()),
            starting: Mutex::new(0),
            shutting_down: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            views: ViewCatalog::default(),
        });
        for record in manager.store.load_all()? {
            let resume = record.state == JobStatus::Running;
            // A group job that will not run is shown without contacting
            // its brokers: its graph without exchanges.
            let planned = if resume {
                manager.plan(&record)
            } else {
                compile_record(&manager.config, &record).map(|(graph, python)| {
                    let launch = LaunchPlan::Single(Arc::new(graph));
                    let view = launch.physical(record.parallelism);
                    Planned {
                        sinks: sink_names(&view),
                        launch,
                        view,
                        python,
                    }
                })
            };
            let (graph, sinks) = match &planned {
                Ok(p) => (
                    graph_view(&p.view, !manager.config.disable_chaining),
                    p.sinks.clone(),
                ),
                Err(_) => (Vec::new(), Vec::new()),
            };
            let job = Arc::new(ManagedJob {
                id: record.id.clone(),
                graph,
                sinks,
                record: Mutex::new((record, false)),
                run: Mutex::new(None),
                samples: Mutex::new(report::Samples::default()),
            });
            manager.insert(job.clone());
            if resume {
                let started = planned.and_then(|p| manager.start_run(&job, p.launch, p.python));
                if let Err(e) = started {
                    tracing::warn!(job = %job.id, "cannot resume: {e}");
                    manager.finish_record(&job, JobStatus::Failed, Some(e.to_string()), Vec::new());
                }
            }
        }
        Ok(manager)
    }

    fn insert(&self, job: Arc<ManagedJob>) {
        if let Ok(mut jobs) = self.jobs.write() {
            jobs.insert(job.id.clone(), job);
        }
    }

    /// Jobs running now.
    fn running_jobs(&self) -> usize {
        self.jobs.read().map_or(0, |jobs| {
            jobs.values()
                .filter(|job| {
                    job.record
                        .lock()
                        .is_ok_and(|r| r.0.state == JobStatus::Running)
                })
                .count()
        })
    }

    /// Takes a place for one more running job under `--max-jobs`, or
    /// refuses it; the place counts until the job runs or fails to start.
    fn admit(&self) -> Result<Admission<'_>> {
        let Some(max) = self.config.max_jobs else {
            return Ok(Admission(None));
        };
        let mut starting = self
            .starting
            .lock()
            .map_err(|_| ServerError::Internal("the admission count was poisoned".into()))?;
        let running = self.running_jobs();
        if running + *starting >= max {
            return Err(ServerError::AtCapacity(format!(
                "this server already runs {} job(s), its most (--max-jobs {max}); stop one, or submit to another server",
                running + *starting
            )));
        }
        *starting += 1;
        Ok(Admission(Some(&self.starting)))
    }

    fn get(&self, id: &str) -> Result<Arc<ManagedJob>> {
        self.jobs
            .read()
            .ok()
            .and_then(|jobs| jobs.get(id).cloned())
            .ok_or_else(|| ServerError::NotFound(id.to_string()))
    }

    /// The connector settings of server jobs.
    pub fn connector_config(&self) -> ConnectorConfig {
        ConnectorConfig {
            settings: ConnectorSettings::default().with(StdoutTarget::Discard),
            roots: Some(PathRoots {
                data: self.config.data_root.clone(),
                output: self.config.output_root.clone(),
                forbidden: vec![
                    self.config.state_dir.clone(),
                    self.config.group_state_dir.clone(),
                ],
            }),
            views: Some(self.views.clone()),
            ..ConnectorConfig::default()
        }
    }

    /// The materialized views the server's jobs keep.
    pub fn views(&self) -> &ViewCatalog {
        &self.views
    }

    /// The bucket the server's state is written through to, if any.
    pub fn state_bucket(&self) -> Option<Arc<StateBucket>> {
        self.state_bucket.clone()
    }

    /// Plans a job's run: compiles its SQL, lays its keyed operators out
    /// at its parallelism for the console (the run does its own) and, for
    /// a group job, plans its tasks and exchanges (which asks the brokers
    /// for the topics' partitions).
    fn plan(&self, record: &JobRecord) -> Result<Planned> {
        let (graph, python) = compile_record(&self.config, record)?;
        let sinks = sink_names(&graph);
        if let Some(group) = &record.group {
            check_group_name(group)?;
        }
        let launch = LaunchPlan::new(graph, &self.connector_config(), record.group.as_deref())
            .map_err(launch_error)?;
        Ok(Planned {
            view: launch.physical(record.parallelism),
            launch,
            sinks,
            python,
        })
    }

    /// Starts (or resumes) a run of `job`.
    fn start_run(
        &self,
        job: &Arc<ManagedJob>,
        launch: LaunchPlan,
        python: Option<Arc<PythonRuntime>>,
    ) -> Result<()> {
        let taps = Arc::new(Taps::new(job.sinks.iter().map(String::as_str)));
        let record = job
            .record
            .lock()
            .map(|r| r.0.clone())
            .map_err(|_| ServerError::Internal("job record lost".into()))?;
        let config = self.launch_config(&record, &launch, taps.clone())?;
        let handle = eddy_launch::launch(launch, config).map_err(launch_error)?;
        if let Ok(mut record) = job.record.lock() {
            record.0.state = JobStatus::Running;
            record.0.started_ms = Some(now_ms());
            record.0.ended_ms = None;
            record.0.error = None;
            self.store.save(&record.0)?;
        }
        if let Ok(mut run) = job.run.lock() {
            *run = Some(Run {
                handle: handle.clone(),
                taps,
                python: python.clone(),
            });
        }
        let (store, watched, shutting_down) =
            (self.store.clone(), job.clone(), self.shutting_down.clone());
        let ended = move |handle: RunningJob| {
            let ended = handle.wait().map_err(|e| e.to_string());
            // The job's Python workers go with its run.
            if let Some(python) = &python {
                python.release_workers();
            }
            if shutting_down.load(std::sync::atomic::Ordering::SeqCst)
                && handle.state() == JobState::Stopped
            {
                // Stopped because the server is going down: resumed on its next start.
                return;
            }
            let state = handle.state();
            let error = match (&state, ended) {
                (JobState::Failed(message), _) => Some(message.clone()),
                (_, Err(message)) => Some(message),
                _ => None,
            };
            let status = match (&state, &error) {
                (JobState::Failed(_), _) | (_, Some(_)) => JobStatus::Failed,
                (state, None) => state.into(),
            };
            Self::save_end(&store, &watched, status, error, handle.metrics());
        };
        match &handle {
            // Recorded by the job's own last thread as it ends: no thread
            // of the server's waits on it.
            RunningJob::Single(single) => {
                let run = handle.clone();
                single.on_end(move || ended(run));
            }
            RunningJob::Group(_) => {
                std::thread::Builder::new()
                    .name(format!("eddy-watch-{}", job.id))
                    .spawn(move || ended(handle))
                    .map_err(|e| {
                        ServerError::Internal(format!("cannot start a watcher thread: {e}"))
                    })?;
            }
        }
        Ok(())
    }

    /// Budgets a run is charged to: the job's own (per task for a group
    /// job) and the server's.
    fn budgets(&self, own: Option<u64>) -> Vec<Arc<MemoryBudget>> {
        own.map(|limit| Arc::new(MemoryBudget::new("job", limit)))
            .into_iter()
            .chain(self.memory.clone())
            .collect()
    }

    /// How a run of `record` is launched: the server's connectors (with
    /// the job's taps), its checkpoints (a group job's: the group's, in
    /// `GROUP_STATE_DIR/<group>`, a bucket prefix or a directory every
    /// server of the group reaches), budgets and worker pool.
    fn launch_config(
        &self,
        record: &JobRecord,
        plan: &LaunchPlan,
        taps: Arc<Taps>,
    ) -> Result<LaunchConfig> {
        let connectors_for: ConnectorsFor = Arc::new(move |config, graph| {
            Arc::new(ServerConnectors {
                inner: Connectors::new(config).sharing_decode_threads(graph),
                taps: taps.clone(),
            }) as Arc<dyn ConnectorFactory>
        });
        let job = JobConfig {
            parallelism: Parallelism::Fixed(record.parallelism),
            allow_dropped_state: record.allow_dropped_state,
            label: record.name.clone(),
            disable_chaining: self.config.disable_chaining,
            pool: Some(self.pool.clone()),
            spill: self.config.spill.clone(),
            ..JobConfig::default()
        };
        let (job, group) = match plan {
            LaunchPlan::Single(graph) => {
                // A job that keeps a materialized view checkpoints as
                // often as the view is to be fresh.
                let interval = if writes_view(graph) {
                    self.config
                        .checkpoint_interval
                        .min(self.config.view_refresh)
                } else {
                    self.config.checkpoint_interval
                };
                let checkpoints = CheckpointConfig {
                    interval,
                    replica: self.store.replica(&record.id),
                    ..CheckpointConfig::new(self.store.checkpoint_dir(&record.id))
                };
                let job = JobConfig {
                    checkpoints: Some(checkpoints),
                    from_savepoint: record
                        .from_savepoint
                        .as_deref()
                        .map(|id| self.savepoints.path(id))
                        .transpose()?,
                    memory: self.budgets(record.memory_limit),
                    ..job
                };
                (job, GroupSettings::default())
            }
            LaunchPlan::Group(plan) => {
                let group = plan.group();
                let job = JobConfig {
                    checkpoints: Some(CheckpointConfig {
                        interval: self.config.checkpoint_interval,
                        ..CheckpointConfig::new(self.config.group_state_dir.join(group))
                    }),
                    // Each task gets the job's own budget (below).
                    memory: self.memory.clone().into_iter().collect(),
                    ..job
                };
                let settings = GroupSettings {
                    state_bucket: self
                        .config
                        .group_state_bucket
                        .as_ref()
                        .map(|bucket| bucket.join(group)),
                    session_timeout: record
                        .session_timeout_ms
                        .map_or(eddy_launch::DEFAULT_SESSION_TIMEOUT, Duration::from_millis),
                    task_memory_limit: record.memory_limit,
                };
                (job, settings)
            }
        };
        Ok(LaunchConfig {
            job,
            group,
            ..LaunchConfig::new(self.connector_config(), connectors_for)
        })
    }

    fn save_end(
        store: &JobStore,
        job: &ManagedJob,
        state: JobStatus,
        error: Option<String>,
        metrics: Vec<NodeReport>,
    ) {
        if let Ok(mut record) = job.record.lock() {
            let (record, deleted) = &mut *record;
            if *deleted {
                return;
            }
            record.state = state;
            record.error = error;
            record.ended_ms = Some(now_ms());
            record.final_metrics = metrics;
            if let Err(e) = store.save(record) {
                tracing::warn!(job = %job.id, "cannot save the job's end: {e}");
            }
        }
    }

    fn finish_record(
        &self,
        job: &ManagedJob,
        state: JobStatus,
        error: Option<String>,
        metrics: Vec<NodeReport>,
    ) {
        Self::save_end(&self.store, job, state, error, metrics);
    }

    /// Compiles, checks and starts a submitted job.
    pub fn submit(&self, request: SubmitRequest) -> Result<JobView> {
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let name = request
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| format!("job-{id}"));
        let parallelism = request
            .parallelism
            .unwrap_or_else(|| machine_cores().min(MAX_PARALLELISM));
        if !(1..=MAX_PARALLELISM).contains(&parallelism) {
            return Err(ServerError::Rejected(format!(
                "parallelism must be 1 to {MAX_PARALLELISM}, not {parallelism}"
            )));
        }
        let memory_limit = request
            .memory_limit
            .as_deref()
            .map(|text| {
                eddy_engine::memory::parse_bytes(text)
                    .map_err(|e| ServerError::Rejected(format!("memory_limit: {e}")))
            })
            .transpose()?
            .or(self.config.job_memory_limit);
        if let Some(group) = &request.group {
            check_group_name(group)?;
            if request.from_savepoint.is_some() {
                return Err(ServerError::Rejected(
                    "a group job cannot start from a savepoint (its tasks keep their state in the group's directory)".into(),
                ));
            }
        } else if request.session_timeout_ms.is_some() {
            return Err(ServerError::Rejected(
                "session_timeout_ms is for group jobs (give a group)".into(),
            ));
        }
        if let Some(ms) = request.session_timeout_ms {
            if !(1_000..=300_000).contains(&ms) {
                return Err(ServerError::Rejected(format!(
                    "session_timeout_ms must be 1000 to 300000, not {ms}"
                )));
            }
        }
        if let Some(savepoint) = &request.from_savepoint {
            self.savepoints.path(savepoint)?;
        }
        let admission = self.admit()?;
        let record = JobRecord {
            id: id.clone(),
            name,
            sql: request.sql,
            params: request.params,
            parallelism,
            memory_limit,
            group: request.group,
            session_timeout_ms: request.session_timeout_ms,
            from_savepoint: request.from_savepoint,
            allow_dropped_state: false,
            created_ms: now_ms(),
            started_ms: None,
            ended_ms: None,
            state: JobStatus::Running,
            error: None,
            final_metrics: Vec::new(),
        };
        // The graph run, viewed and measured is the one with its instances
        // (and a group job's exchanges).
        let planned = self.plan(&record)?;
        let job = Arc::new(ManagedJob {
            id: id.clone(),
            graph: graph_view(&planned.view, !self.config.disable_chaining),
            sinks: planned.sinks,
            record: Mutex::new((record, false)),
            run: Mutex::new(None),
            samples: Mutex::new(report::Samples::default()),
        });
        if let Err(e) = self.start_run(&job, planned.launch, planned.python) {
            let _ = self.store.remove(&id);
            return Err(e);
        }
        admission.running(|| self.insert(job.clone()));
        Ok(self.view(&job))
    }

    /// Runs an ended job again from its last checkpoint (a materialized
    /// view's job after a server restart: its view sink publishes the
    /// checkpointed result, and a bounded job ends again at once). A job
    /// that is running, failed or cancelled is left as it is.
    pub fn reopen(&self, id: &str) -> Result<()> {
        let job = self.get(id)?;
        let record = job
            .record
            .lock()
            .map(|r| r.0.clone())
            .map_err(|_| ServerError::Internal("job record lost".into()))?;
        if !matches!(record.state, JobStatus::Finished | JobStatus::Stopped) {
            return Ok(());
        }
        let planned = self.plan(&record)?;
        self.start_run(&job, planned.launch, planned.python)
    }

    /// Checks SQL without running anything: the graph, or the error.
    pub fn validate(&self, sql: &str, params: &BTreeMap<String, String>) -> Result<Vec<GraphNode>> {
        let (graph, _) = compile(&self.config, "<sql>", sql, params, None)?;
        use eddy_engine::graph::ConnectorFactory;
        Connectors::new(self.connector_config())
            .check(&graph)
            .map_err(engine_error)?;
        Ok(graph_view(&graph, !self.config.disable_chaining))
    }

    /// Stops every running job with a final checkpoint, leaving each
    /// `running` on disk so that the next start resumes it.
    pub fn shutdown(&self) {
        self.shutting_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let jobs: Vec<Arc<ManagedJob>> = self
            .jobs
            .read()
            .map(|j| j.values().cloned().collect())
            .unwrap_or_default();
        let running: Vec<RunningJob> = jobs
            .iter()
            .filter_map(|j| j.handle())
            .filter(|h| !h.state().is_terminal())
            .collect();
        for handle in &running {
            handle.stop();
        }
        for handle in &running {
            if !handle.wait_timeout(STOP_WAIT) {
                handle.cancel();
            }
        }
    }

    /// Stops a job gracefully (final checkpoint, sinks committed) and waits
    /// for it to end; with `savepoint`, then copies that checkpoint into a
    /// savepoint (listed in the job's view).
    pub fn stop(&self, id: &str, savepoint: bool) -> Result<JobView> {
        let job = self.get(id)?;
        let record = job
            .record
            .lock()
            .map(|r| r.0.clone())
            .map_err(|_| ServerError::Internal("job record lost".into()))?;
        if savepoint && record.group.is_some() {
            return Err(ServerError::Rejected(
                "a group job's state lives with its group's tasks: no savepoint of it".into(),
            ));
        }
        if let Some(handle) = job.handle() {
            handle.stop();
            if !handle.wait_timeout(STOP_WAIT) {
                tracing::warn!(job = %id, "not stopped within {STOP_WAIT:?}; still stopping");
                if savepoint {
                    return Err(ServerError::Rejected(format!(
                        "job '{id}' did not stop within {STOP_WAIT:?}; no savepoint taken (stop it again with one)"
                    )));
                }
            }
        }
        if savepoint {
            let taken = self.savepoints.take(
                &self.store.checkpoints_here(id)?,
                id,
                &record.name,
                &record.sql,
            )?;
            tracing::info!(job = %id, "savepoint {} of checkpoint {}", taken.id, taken.checkpoint);
        }
        Ok(self.view(&job))
    }

    /// Every savepoint the server keeps, oldest first.
    pub fn savepoints(&self) -> Vec<SavepointView> {
        self.savepoints.list(None)
    }

    /// Stops a job and forgets it (its definition and checkpoints; its
    /// output files stay).
    pub fn delete(&self, id: &str) -> Result<()> {
        let job = self.get(id)?;
        if let Some(handle) = job.handle() {
            handle.stop();
            if !handle.wait_timeout(STOP_WAIT) {
                handle.cancel();
                let _ = handle.wait_timeout(STOP_WAIT);
            }
        }
        if let Ok(mut jobs) = self.jobs.write() {
            jobs.remove(id);
        }
        let mut record = job
            .record
            .lock()
            .map_err(|_| ServerError::Internal("job record lost".into()))?;
        record.1 = true;
        self.store.remove(id)
    }

    /// A tail subscription to a sink of a running job.
    pub fn tail(
        &self,
        id: &str,
        sink: &str,
    ) -> Result<(tokio::sync::broadcast::Receiver<TapItem>, u64)> {
        let job = self.get(id)?;
        let run = job
            .run
            .lock()
            .map_err(|_| ServerError::Internal("job run lost".into()))?;
        let taps = run.as_ref().map(|r| r.taps.clone());
        drop(run);
        if !job.sinks.iter().any(|s| s == sink) {
            return Err(ServerError::NotFound(format!("{id}/sinks/{sink}")));
        }
        taps.and_then(|t| t.tap(sink))
            .map(|tap| tap.subscribe())
            .ok_or_else(|| ServerError::Rejected(format!("job '{id}' is not running")))
    }
}

impl ManagedJob {
    fn handle(&self) -> Option<RunningJob> {
        self.run
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.handle.clone()))
    }

    /// Its Python functions' counts in the current run.
    pub(crate) fn python_reports(&self) -> Vec<crate::views::PythonFunctionView> {
        let python = self
            .run
            .lock()
            .ok()
            .and_then(|r| r.as_ref().and_then(|r| r.python.clone()));
        python
            .map(|p| p.reports())
            .unwrap_or_default()
            .into_iter()
            .map(|r| crate::views::PythonFunctionView {
                name: r.name,
                calls: r.calls,
                rows: r.rows,
                raised: r.raised,
                first_error: r.first_error,
            })
            .collect()
    }
}

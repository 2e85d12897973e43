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

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use eddy_connectors::sinks::StdoutTarget;
use eddy_connectors::{ConnectorConfig, Connectors, PathRoots};
use eddy_engine::checkpoint::CheckpointConfig;
use eddy_engine::graph::{JobGraph, NodeKind};
use eddy_engine::parallel::{machine_cores, Parallelism};
use eddy_engine::runtime::{start_job, JobConfig, JobHandle, JobState, NodeReport};
use eddy_engine::time::{WATERMARK_MAX, WATERMARK_MIN};
use eddy_engine::EngineError;
use eddy_sql::SqlFile;

use crate::config::ServerConfig;
use crate::connectors::ServerConnectors;
use crate::error::{Result, ServerError};
use crate::store::{JobRecord, JobStore};
use crate::tail::{TapItem, Taps};
use crate::views::{
    graph_view, CheckpointView, GraphNode, JobSummary, JobView, NodeMetrics, Sample, SourceSample,
    SubmitRequest,
};

/// Samples kept per job (one a second).
const HISTORY: usize = 600;
/// How long stop and delete wait for a job to end.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The current run of a job.
struct Run {
    handle: JobHandle,
    taps: Arc<Taps>,
}

/// Per-second figures of a running job.
#[derive(Default)]
struct Samples {
    last: Option<(Instant, Vec<u64>)>,
    rates: Vec<f64>,
    history: VecDeque<Sample>,
}

/// A job known to the server.
pub struct ManagedJob {
    /// Its id.
    pub id: String,
    record: Mutex<(JobRecord, bool)>,
    graph: Vec<GraphNode>,
    sinks: Vec<String>,
    run: Mutex<Option<Run>>,
    samples: Mutex<Samples>,
}

/// See the module docs.
pub struct JobManager {
    config: Arc<ServerConfig>,
    store: JobStore,
    jobs: RwLock<BTreeMap<String, Arc<ManagedJob>>>,
    /// Set while the server shuts down: jobs it stops stay `running` on disk.
    shutting_down: Arc<std::sync::atomic::AtomicBool>,
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// The most instances of an operator a submitted job may ask for.
const MAX_PARALLELISM: usize = 64;

/// Compiles a job's SQL.
pub fn compile(name: &str, sql: &str, params: &BTreeMap<String, String>) -> Result<JobGraph> {
    let files = [SqlFile {
        name: name.to_string(),
        text: sql.to_string(),
    }];
    Ok(eddy_sql::compile(&files, params)?.graph)
}

fn sink_names(graph: &JobGraph) -> Vec<String> {
    graph
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Sink { .. }))
        .map(|n| n.name.clone())
        .collect()
}

fn engine_error(error: EngineError) -> ServerError {
    match error {
        EngineError::Config(m) => match declared_at(&m) {
            Some((position, message)) => {
                ServerError::Sql(eddy_sql::SqlError::at(&position, message))
            }
            None => ServerError::Rejected(m),
        },
        e @ (EngineError::Connector { .. } | EngineError::State(_)) => {
            ServerError::Rejected(e.to_string())
        }
        other => ServerError::Internal(other.to_string()),
    }
}

/// A check's message about a table declared in the submitted SQL starts
/// with `<sql>:LINE:COLUMN: `; that position goes back to the client, so the
/// console can mark it like any SQL error.
fn declared_at(message: &str) -> Option<(eddy_sql::Position, &str)> {
    let rest = message.strip_prefix("<sql>:")?;
    let mut parts = rest.splitn(3, ':');
    let line = parts.next()?.parse().ok()?;
    let column = parts.next()?.parse().ok()?;
    let message = parts.next()?.trim_start();
    Some((
        eddy_sql::Position {
            file: "<sql>".into(),
            line,
            column,
        },
        message,
    ))
}

impl JobManager {
    /// Opens the state directory and resumes the jobs that were running.
    pub fn open(config: Arc<ServerConfig>) -> Result<Arc<Self>> {
        let store = JobStore::open(&config.state_dir)?;
        let manager = Arc::new(Self {
            config,
            store,
            jobs: RwLock::new(BTreeMap::new()),
            shutting_down: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        });
        for record in manager.store.load_all()? {
            let graph = compile(&record.name, &record.sql, &record.params)
                .ok()
                .map(|g| eddy_engine::parallel::expand(&g, record.parallelism));
            let resume = record.state == "running";
            let job = Arc::new(ManagedJob {
                id: record.id.clone(),
                graph: graph.as_ref().map(graph_view).unwrap_or_default(),
                sinks: graph.as_ref().map(sink_names).unwrap_or_default(),
                record: Mutex::new((record, false)),
                run: Mutex::new(None),
                samples: Mutex::new(Samples::default()),
            });
            manager.insert(job.clone());
            if resume {
                let started = graph
                    .ok_or_else(|| ServerError::Rejected("the job's SQL no longer compiles".into()))
                    .and_then(|graph| manager.start_run(&job, graph));
                if let Err(e) = started {
                    tracing::warn!(job = %job.id, "cannot resume: {e}");
                    manager.finish_record(&job, "failed", Some(e.to_string()), Vec::new());
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
            stdout: StdoutTarget::Discard,
            roots: Some(PathRoots {
                data: self.config.data_root.clone(),
                output: self.config.output_root.clone(),
                forbidden: vec![self.config.state_dir.clone()],
            }),
            ..ConnectorConfig::default()
        }
    }

    /// Starts (or resumes) a run of `job`.
    fn start_run(&self, job: &Arc<ManagedJob>, graph: JobGraph) -> Result<()> {
        let taps = Arc::new(Taps::new(job.sinks.iter().map(String::as_str)));
        let connectors = ServerConnectors {
            inner: Connectors::new(self.connector_config()),
            taps: taps.clone(),
        };
        let checkpoints = CheckpointConfig {
            state_dir: self.store.checkpoint_dir(&job.id),
            interval: self.config.checkpoint_interval,
            ignore_state: false,
        };
        let parallelism = Parallelism::Fixed(graph.parallelism());
        let handle = start_job(
            Arc::new(graph),
            Arc::new(connectors),
            &JobConfig {
                checkpoints: Some(checkpoints),
                parallelism,
            },
        )
        .map_err(engine_error)?;
        if let Ok(mut record) = job.record.lock() {
            record.0.state = "running".into();
            record.0.started_ms = Some(now_ms());
            record.0.ended_ms = None;
            record.0.error = None;
            self.store.save(&record.0)?;
        }
        if let Ok(mut run) = job.run.lock() {
            *run = Some(Run {
                handle: handle.clone(),
                taps,
            });
        }
        let (store, watched, shutting_down) =
            (self.store.clone(), job.clone(), self.shutting_down.clone());
        std::thread::Builder::new()
            .name(format!("eddy-watch-{}", job.id))
            .spawn(move || {
                let ended = handle.wait();
                if shutting_down.load(std::sync::atomic::Ordering::SeqCst)
                    && handle.state() == JobState::Stopped
                {
                    // Stopped because the server is going down: resumed on its next start.
                    return;
                }
                let state = handle.state();
                let error = match (&state, ended) {
                    (JobState::Failed(message), _) => Some(message.clone()),
                    _ => None,
                };
                Self::save_end(&store, &watched, state.name(), error, handle.metrics());
            })
            .map_err(|e| ServerError::Internal(format!("cannot start a watcher thread: {e}")))?;
        Ok(())
    }

    fn save_end(
        store: &JobStore,
        job: &ManagedJob,
        state: &str,
        error: Option<String>,
        metrics: Vec<NodeReport>,
    ) {
        if let Ok(mut record) = job.record.lock() {
            let (record, deleted) = &mut *record;
            if *deleted {
                return;
            }
            record.state = state.to_string();
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
        state: &str,
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
        // The graph run, viewed and measured is the one with its instances.
        let graph = eddy_engine::parallel::expand(
            &compile(&name, &request.sql, &request.params)?,
            parallelism,
        );
        let record = JobRecord {
            id: id.clone(),
            name,
            sql: request.sql,
            params: request.params,
            parallelism,
            created_ms: now_ms(),
            started_ms: None,
            ended_ms: None,
            state: "running".into(),
            error: None,
            final_metrics: Vec::new(),
        };
        let job = Arc::new(ManagedJob {
            id: id.clone(),
            graph: graph_view(&graph),
            sinks: sink_names(&graph),
            record: Mutex::new((record, false)),
            run: Mutex::new(None),
            samples: Mutex::new(Samples::default()),
        });
        if let Err(e) = self.start_run(&job, graph) {
            let _ = self.store.remove(&id);
            return Err(e);
        }
        self.insert(job.clone());
        Ok(self.view(&job))
    }

    /// Checks SQL without running anything: the graph, or the error.
    pub fn validate(&self, sql: &str, params: &BTreeMap<String, String>) -> Result<Vec<GraphNode>> {
        let graph = compile("<sql>", sql, params)?;
        use eddy_engine::graph::ConnectorFactory;
        Connectors::new(self.connector_config())
            .check(&graph)
            .map_err(engine_error)?;
        Ok(graph_view(&graph))
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
        let running: Vec<JobHandle> = jobs
            .iter()
            .filter_map(|j| j.handle())
            .filter(|h| !h.state().is_terminal())
            .collect();
        for handle in &running {
            handle.stop();
        }
        for handle in &running {
            if handle.wait_timeout(STOP_WAIT).is_none() {
                handle.cancel();
            }
        }
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<JobSummary> {
        let jobs: Vec<Arc<ManagedJob>> = self
            .jobs
            .read()
            .map(|j| j.values().cloned().collect())
            .unwrap_or_default();
        let mut summaries: Vec<(i64, JobSummary)> = jobs
            .iter()
            .map(|j| {
                (
                    j.record.lock().map(|r| r.0.created_ms).unwrap_or(0),
                    self.summary(j),
                )
            })
            .collect();
        summaries.sort_by_key(|(created, _)| *created);
        summaries.into_iter().map(|(_, s)| s).collect()
    }

    /// One job in full.
    pub fn job(&self, id: &str) -> Result<JobView> {
        let job = self.get(id)?;
        Ok(self.view(&job))
    }

    /// Stops a job gracefully (final checkpoint, sinks committed) and waits
    /// for it to end.
    pub fn stop(&self, id: &str) -> Result<JobView> {
        let job = self.get(id)?;
        if let Some(handle) = job.handle() {
            handle.stop();
            if handle.wait_timeout(STOP_WAIT).is_none() {
                tracing::warn!(job = %id, "not stopped within {STOP_WAIT:?}; still stopping");
            }
        }
        Ok(self.view(&job))
    }

    /// Stops a job and forgets it (its definition and checkpoints; its
    /// output files stay).
    pub fn delete(&self, id: &str) -> Result<()> {
        let job = self.get(id)?;
        if let Some(handle) = job.handle() {
            handle.stop();
            if handle.wait_timeout(STOP_WAIT).is_none() {
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

    /// Every job's live counters, for `/metrics`.
    pub fn all_metrics(&self) -> Vec<(JobSummary, Vec<NodeMetrics>)> {
        let jobs: Vec<Arc<ManagedJob>> = self
            .jobs
            .read()
            .map(|j| j.values().cloned().collect())
            .unwrap_or_default();
        jobs.iter()
            .map(|j| (self.summary(j), self.node_metrics(j)))
            .collect()
    }

    /// Takes a sample of every running job (called once a second).
    pub fn sample(&self) {
        let jobs: Vec<Arc<ManagedJob>> = self
            .jobs
            .read()
            .map(|j| j.values().cloned().collect())
            .unwrap_or_default();
        for job in jobs {
            let Some(handle) = job.handle() else { continue };
            if handle.state() != JobState::Running {
                continue;
            }
            let reports = handle.metrics();
            let now = Instant::now();
            let counts: Vec<u64> = reports.iter().map(|r| r.metrics.rows_in).collect();
            let Ok(mut samples) = job.samples.lock() else {
                continue;
            };
            let rates: Vec<f64> = match &samples.last {
                Some((at, before)) => {
                    let seconds = now.duration_since(*at).as_secs_f64().max(1e-3);
                    counts
                        .iter()
                        .zip(before)
                        .map(|(c, b)| c.saturating_sub(*b) as f64 / seconds)
                        .collect()
                }
                None => vec![0.0; counts.len()],
            };
            let wall = now_ms();
            let sources: Vec<SourceSample> = reports
                .iter()
                .zip(&rates)
                .filter(|(r, _)| r.kind == "source")
                .map(|(r, rate)| SourceSample {
                    name: r.name.clone(),
                    rows_in: r.metrics.rows_in,
                    events_per_second: *rate,
                    watermark_lag_ms: lag(wall, r.metrics.watermark),
                    late_rows: r.metrics.late_rows,
                    bad_rows: r.metrics.bad_rows,
                })
                .collect();
            let total = sources.iter().map(|s| s.events_per_second).sum();
            samples.history.push_back(Sample {
                at_ms: wall,
                events_per_second: total,
                sources,
            });
            while samples.history.len() > HISTORY {
                samples.history.pop_front();
            }
            samples.rates = rates;
            samples.last = Some((now, counts));
        }
    }

    fn node_metrics(&self, job: &ManagedJob) -> Vec<NodeMetrics> {
        let reports = match job.handle() {
            Some(handle) => handle.metrics(),
            None => job
                .record
                .lock()
                .map(|r| r.0.final_metrics.clone())
                .unwrap_or_default(),
        };
        let running = job.handle().is_some_and(|h| h.state() == JobState::Running);
        let rates = job
            .samples
            .lock()
            .map(|s| s.rates.clone())
            .unwrap_or_default();
        let wall = now_ms();
        reports
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let m = r.metrics;
                let watermark = (m.watermark != WATERMARK_MIN && m.watermark != WATERMARK_MAX)
                    .then_some(m.watermark);
                NodeMetrics {
                    id: r.id,
                    name: r.name,
                    kind: r.kind,
                    rows_in: m.rows_in,
                    rows_out: m.rows_out,
                    late_rows: m.late_rows,
                    bad_rows: m.bad_rows,
                    state_rows: m.state_rows,
                    peak_state_rows: m.peak_state_rows,
                    state_bytes: m.state_bytes,
                    watermark,
                    watermark_lag_ms: watermark.and_then(|w| lag(wall, w)),
                    events_per_second: if running {
                        rates.get(i).copied().unwrap_or(0.0)
                    } else {
                        0.0
                    },
                }
            })
            .collect()
    }

    fn summary(&self, job: &ManagedJob) -> JobSummary {
        let record = job.record.lock().map(|r| r.0.clone()).ok();
        let metrics = self.node_metrics(job);
        let sources = metrics.iter().filter(|m| m.kind == "source");
        let state = match job.handle() {
            Some(handle) => handle.state(),
            None => JobState::Running,
        };
        let (state_name, error) = match (&state, job.handle()) {
            (_, None) => {
                let r = record.as_ref();
                (
                    r.map(|r| r.state.clone()).unwrap_or_default(),
                    r.and_then(|r| r.error.clone()),
                )
            }
            (JobState::Failed(message), _) => ("failed".to_string(), Some(message.clone())),
            (other, _) => (other.name().to_string(), None),
        };
        let ended_ms = if state.is_terminal() || job.handle().is_none() {
            record
                .as_ref()
                .and_then(|r| r.ended_ms)
                .or_else(|| job.handle().map(|_| now_ms()))
        } else {
            None
        };
        JobSummary {
            id: job.id.clone(),
            name: record.as_ref().map(|r| r.name.clone()).unwrap_or_default(),
            state: state_name,
            error,
            created_at: record
                .as_ref()
                .map(|r| rfc3339(r.created_ms))
                .unwrap_or_default(),
            started_at: record.as_ref().and_then(|r| r.started_ms).map(rfc3339),
            ended_at: ended_ms.map(rfc3339),
            events_per_second: sources.clone().map(|m| m.events_per_second).sum(),
            watermark_lag_ms: sources.clone().filter_map(|m| m.watermark_lag_ms).max(),
            late_rows: sources.clone().map(|m| m.late_rows).sum(),
            bad_rows: sources.map(|m| m.bad_rows).sum(),
        }
    }

    fn view(&self, job: &ManagedJob) -> JobView {
        let record = job.record.lock().map(|r| r.0.clone()).ok();
        let checkpoints = job
            .handle()
            .map(|h| {
                let c = h.checkpoints();
                CheckpointView {
                    completed: c.completed,
                    last_id: c.last_id,
                    last_bytes: c.last_bytes,
                    last_duration_ms: c.last_duration_ms,
                    restored_from: c.restored_from,
                }
            })
            .unwrap_or_default();
        JobView {
            summary: self.summary(job),
            sql: record.as_ref().map(|r| r.sql.clone()).unwrap_or_default(),
            parallelism: record.as_ref().map_or(1, |r| r.parallelism),
            params: record.map(|r| r.params).unwrap_or_default(),
            graph: job.graph.clone(),
            metrics: self.node_metrics(job),
            checkpoints,
            sinks: job.sinks.clone(),
            history: job
                .samples
                .lock()
                .map(|s| s.history.iter().cloned().collect())
                .unwrap_or_default(),
        }
    }
}

impl ManagedJob {
    fn handle(&self) -> Option<JobHandle> {
        self.run
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.handle.clone()))
    }
}

fn lag(wall: i64, watermark: i64) -> Option<i64> {
    (watermark != WATERMARK_MIN && watermark != WATERMARK_MAX)
        .then(|| wall.saturating_sub(watermark))
}

//! What the server reports of its jobs: the per-second samples (events/s,
//! watermark lag, late and bad rows per source), each node's counters, a
//! job's summary and its full view.
//!
//! In: the jobs' live metrics (or, once ended, their records). Out: the
//! API's [`JobSummary`], [`JobView`] and [`NodeMetrics`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use eddy_engine::runtime::JobState;
use eddy_engine::time::{WATERMARK_MAX, WATERMARK_MIN};

use super::{now_ms, JobManager, ManagedJob};
use crate::error::Result;
use crate::views::{
    CheckpointView, GroupView, JobStatus, JobSummary, JobView, NodeMetrics, Sample, SourceSample,
};

/// Samples kept per job (one a second).
const HISTORY: usize = 600;

/// Per-second figures of a running job.
#[derive(Default)]
pub(super) struct Samples {
    last: Option<(Instant, Vec<u64>)>,
    rates: Vec<f64>,
    history: VecDeque<Sample>,
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

impl JobManager {
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

    /// Every job's live counters, for `/metrics`.
    pub fn all_metrics(&self) -> Vec<crate::prometheus::JobMetrics> {
        let jobs: Vec<Arc<ManagedJob>> = self
            .jobs
            .read()
            .map(|j| j.values().cloned().collect())
            .unwrap_or_default();
        jobs.iter()
            .map(|j| crate::prometheus::JobMetrics {
                job: self.summary(j),
                nodes: self.node_metrics(j),
                python_functions: j.python_reports(),
            })
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

    pub(super) fn node_metrics(&self, job: &ManagedJob) -> Vec<NodeMetrics> {
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
                    spill_disk_bytes: m.spill_disk_bytes,
                    spill_written_bytes: m.spill_written_bytes,
                    spill_read_bytes: m.spill_read_bytes,
                    watermark,
                    watermark_lag_ms: watermark.and_then(|w| lag(wall, w)),
                    events_per_second: if running {
                        rates.get(i).copied().unwrap_or(0.0)
                    } else {
                        0.0
                    },
                    connector: m.connector,
                }
            })
            .collect()
    }

    pub(super) fn summary(&self, job: &ManagedJob) -> JobSummary {
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
                    r.map_or(JobStatus::Running, |r| r.state),
                    r.and_then(|r| r.error.clone()),
                )
            }
            (JobState::Failed(message), _) => (JobStatus::Failed, Some(message.clone())),
            (other, _) => (other.into(), None),
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
            event_time: sources
                .clone()
                .filter_map(|m| m.watermark)
                .min()
                .map(rfc3339),
            late_rows: sources.clone().map(|m| m.late_rows).sum(),
            bad_rows: sources.map(|m| m.bad_rows).sum(),
            pool_ms: job.handle().map_or(0, |h| h.pool_time().as_millis() as u64),
        }
    }

    pub(super) fn view(&self, job: &ManagedJob) -> JobView {
        let record = job.record.lock().map(|r| r.0.clone()).ok();
        let checkpoints = job
            .handle()
            .map(|h| {
                let c = h.checkpoints();
                CheckpointView {
                    completed: c.completed,
                    last_id: c.last_id,
                    last_bytes: c.last_bytes,
                    total_bytes: c.total_bytes,
                    last_duration_ms: c.last_duration_ms,
                    restored_from: c.restored_from,
                }
            })
            .unwrap_or_default();
        JobView {
            summary: self.summary(job),
            sql: record.as_ref().map(|r| r.sql.clone()).unwrap_or_default(),
            parallelism: record.as_ref().map_or(1, |r| r.parallelism),
            group: job
                .handle()
                .and_then(|h| h.group())
                .map(GroupView::from)
                .or_else(|| {
                    record
                        .as_ref()
                        .and_then(|r| r.group.clone())
                        .map(|name| GroupView {
                            name,
                            tasks: 0,
                            tasks_here: Vec::new(),
                            exchanges: Vec::new(),
                        })
                }),
            params: record
                .as_ref()
                .map(|r| r.params.clone())
                .unwrap_or_default(),
            graph: job.graph.clone(),
            metrics: self.node_metrics(job),
            checkpoints,
            sinks: job.sinks.clone(),
            history: job
                .samples
                .lock()
                .map(|s| s.history.iter().cloned().collect())
                .unwrap_or_default(),
            from_savepoint: record.as_ref().and_then(|r| r.from_savepoint.clone()),
            savepoints: self.savepoints.list(Some(&job.id)),
            python_functions: job.python_reports(),
            connectors: job.handle().map(|h| h.connectors()).unwrap_or_default(),
        }
    }
}

fn lag(wall: i64, watermark: i64) -> Option<i64> {
    (watermark != WATERMARK_MIN && watermark != WATERMARK_MAX)
        .then(|| wall.saturating_sub(watermark))
}

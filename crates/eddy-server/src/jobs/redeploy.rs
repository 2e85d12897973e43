//! Redeploying a job with changed SQL (`PUT /api/v1/jobs/{id}`): stop it
//! with a final checkpoint, check the new query against that state, and
//! start it again, or refuse with the reasons and leave the job running.
//!
//! In: a job id and a [`RedeployRequest`]. Out: the job as it now runs
//! and which operators kept their state, started afresh and were dropped
//! ([`RedeployView`]); or an error, with the job running the old SQL again.
//! A preview ([`JobManager::preview_redeploy`]) says the same without
//! stopping anything.

use std::sync::{Arc, Mutex};

use eddy_engine::checkpoint::evolve;
use eddy_engine::checkpoint::store::StateDir;
use eddy_engine::graph::JobGraph;

use super::{compile_record, graph_view, report, sink_names, JobManager, ManagedJob, STOP_WAIT};
use crate::error::{Result, ServerError};
use crate::store::JobRecord;
use crate::views::{RedeployPlan, RedeployRequest, RedeployView};

impl JobManager {
    /// See the module docs.
    pub fn redeploy(&self, id: &str, request: RedeployRequest) -> Result<RedeployView> {
        let allow_dropped_state = request.allow_dropped_state;
        let (old, record, graph) = self.revised(id, request)?;
        if let Some(handle) = old.handle() {
            handle.stop();
            if !handle.wait_timeout(STOP_WAIT) {
                return Err(ServerError::Rejected(format!(
                    "job '{id}' did not stop within {STOP_WAIT:?}; nothing redeployed"
                )));
            }
        }
        let store = StateDir::open(self.store.checkpoints_here(id)?)
            .map_err(|e| ServerError::Internal(e.to_string()))?;
        let checked = evolve::preview(&store, Arc::new(graph.clone()), allow_dropped_state);
        let mapped = match checked {
            Ok(mapped) => mapped.unwrap_or_default(),
            Err(refusal) => {
                // The old SQL goes on from its final checkpoint.
                self.restart_old(&old);
                return Err(ServerError::Rejected(format!(
                    "not redeployed (job '{id}' runs its old SQL again): {refusal}"
                )));
            }
        };
        let planned = match self.plan(&record) {
            Ok(planned) => planned,
            Err(e) => {
                self.restart_old(&old);
                return Err(e);
            }
        };
        let job = Arc::new(ManagedJob {
            id: id.to_string(),
            graph: graph_view(&planned.view, !self.config.disable_chaining),
            sinks: sink_names(&graph),
            record: Mutex::new((record, false)),
            run: Mutex::new(None),
            samples: Mutex::new(report::Samples::default()),
        });
        // The old run's watcher must not write its end over the new record.
        if let Ok(mut old_record) = old.record.lock() {
            old_record.1 = true;
        }
        if let Err(e) = self.start_run(&job, planned.launch, planned.python) {
            // The new SQL cannot start (a source gone, say): the old goes on.
            if let Ok(mut old_record) = old.record.lock() {
                old_record.1 = false;
            }
            self.restart_old(&old);
            return Err(ServerError::Rejected(format!(
                "not redeployed (job '{id}' runs its old SQL again): {e}"
            )));
        }
        self.insert(job.clone());
        Ok(RedeployView {
            job: self.view(&job),
            kept: mapped.kept,
            kept_by_name: mapped.kept_by_name,
            started: mapped.fresh,
            dropped: mapped.dropped,
        })
    }

    /// What [`JobManager::redeploy`] would keep, start and drop, checked
    /// against the job's newest checkpoint while it runs on: nothing stops.
    /// A refusal is an answer here (`refused`), not an error; SQL that
    /// does not plan is an error.
    pub fn preview_redeploy(&self, id: &str, request: RedeployRequest) -> Result<RedeployPlan> {
        let allow_dropped_state = request.allow_dropped_state;
        let (_, _, graph) = self.revised(id, request)?;
        let store = StateDir::open(self.store.checkpoints_here(id)?)
            .map_err(|e| ServerError::Internal(e.to_string()))?;
        Ok(
            match evolve::preview(&store, Arc::new(graph.clone()), allow_dropped_state) {
                Ok(Some(mapped)) => RedeployPlan {
                    checkpoint: mapped.checkpoint,
                    kept: mapped.kept,
                    kept_by_name: mapped.kept_by_name,
                    started: mapped.fresh,
                    dropped: mapped.dropped,
                    refused: None,
                },
                Ok(None) => RedeployPlan {
                    started: stateful_names(&graph),
                    ..RedeployPlan::default()
                },
                Err(refusal) => RedeployPlan {
                    refused: Some(refusal.to_string()),
                    ..RedeployPlan::default()
                },
            },
        )
    }

    /// The job `id`, its record as `request` changes it, and the new SQL's
    /// graph (planned: SQL that does not plan is refused before anything
    /// stops).
    fn revised(
        &self,
        id: &str,
        request: RedeployRequest,
    ) -> Result<(Arc<ManagedJob>, JobRecord, JobGraph)> {
        let old = self.get(id)?;
        let mut record = old
            .record
            .lock()
            .map(|r| r.0.clone())
            .map_err(|_| ServerError::Internal("job record lost".into()))?;
        if record.group.is_some() {
            return Err(ServerError::Rejected(
                "a group job's state lives with its group's tasks: stop it and submit the new SQL"
                    .into(),
            ));
        }
        record.sql = request.sql;
        record.allow_dropped_state = request.allow_dropped_state;
        if let Some(params) = request.params {
            record.params = params;
        }
        if let Some(parallelism) = request.parallelism {
            if !(1..=super::MAX_PARALLELISM).contains(&parallelism) {
                return Err(ServerError::Rejected(format!(
                    "parallelism must be 1 to {}, not {parallelism}",
                    super::MAX_PARALLELISM
                )));
            }
            record.parallelism = parallelism;
        }
        let (graph, _) = compile_record(&self.config, &record)?;
        Ok((old, record, graph))
    }

    /// Starts `job` again on its own SQL, from its final checkpoint (after
    /// a refused redeploy).
    fn restart_old(&self, job: &Arc<ManagedJob>) {
        let restarted = job
            .record
            .lock()
            .map(|r| r.0.clone())
            .map_err(|_| ServerError::Internal("job record lost".into()))
            .and_then(|record| self.plan(&record))
            .and_then(|planned| self.start_run(job, planned.launch, planned.python));
        if let Err(e) = restarted {
            tracing::warn!(job = %job.id, "cannot restart after a refused redeploy: {e}");
        }
    }
}

/// The stateful nodes of `graph` (what starts afresh when there is no
/// checkpoint yet), by name.
fn stateful_names(graph: &JobGraph) -> Vec<String> {
    (0..graph.nodes.len())
        .filter(|&id| evolve::stateful(graph, id))
        .map(|id| graph.nodes[id].name.clone())
        .collect()
}

//! `eddy run`: SQL files as one streaming job on this machine, or as a
//! task of a Kafka consumer group (`--group`).
//!
//! In: the command's arguments. Out: the job's run summary on stderr; the
//! sinks' output where the SQL (or `--output`) puts it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use eddy_cli::{job, CliError, Result};
use eddy_connectors::kafka::group_job::{plain_connectors, GroupJob, GroupJobConfig, GroupPlan};
use eddy_connectors::{ConnectorConfig, OutputFormat};
use eddy_engine::checkpoint::{CheckpointConfig, DEFAULT_INTERVAL};
use eddy_engine::key_groups::KeyGroups;
use eddy_engine::memory::MemoryBudget;
use eddy_engine::parallel::{machine_cores, Parallelism};
use eddy_engine::runtime::{JobConfig, JobHandle};

use super::state_location::{local_savepoint, StateLocation};
use crate::args::{Format, RunArgs};

/// Runs the job `args` describe until its sources end or it is stopped.
pub(crate) fn run(args: RunArgs) -> Result<()> {
    let RunArgs {
        paths,
        set,
        input,
        output,
        format,
        batch_size,
        quiet,
        state_dir,
        checkpoint_interval,
        ignore_state,
        full_checkpoints,
        group,
        session_timeout,
        parallelism,
        max_parallelism,
        from_savepoint,
        allow_dropped_state,
        memory_limit,
        udf_path,
        no_chaining,
        workers,
    } = args;
    let pool = super::worker_pool(workers)?;
    let options = eddy_sql::CompileOptions {
        python: Some(eddy_python::PythonConfig {
            paths: udf_path,
            memory_limit,
            ..eddy_python::PythonConfig::from_env()
        }),
        check_python_functions: true,
        connectors: None,
    };
    let memory = || -> Vec<Arc<MemoryBudget>> {
        memory_limit
            .map(|limit| Arc::new(MemoryBudget::new("job", limit)))
            .into_iter()
            .collect()
    };
    if batch_size == 0 {
        return Err(CliError::Usage("--batch-size must be at least 1".into()));
    }
    let state = state_dir.as_deref().map(StateLocation::parse).transpose()?;
    // A savepoint in a bucket is read from a private local copy.
    let (from_savepoint, _savepoint_copy) = match from_savepoint.as_deref().map(local_savepoint) {
        Some(found) => {
            let (path, copy) = found?;
            (Some(path), copy)
        }
        None => (None, None),
    };
    let checkpoints = match (&state, checkpoint_interval) {
        (None, Some(_)) => {
            return Err(CliError::Usage(
                "--checkpoint-interval needs --state-dir".into(),
            ))
        }
        (None, None) => None,
        (Some(state), interval) => Some(CheckpointConfig {
            state_dir: state.dir.clone(),
            interval: interval.unwrap_or(DEFAULT_INTERVAL),
            ignore_state,
            incremental: !full_checkpoints,
            replica: state.replica.clone(),
        }),
    };
    let files = job::load_sql(&paths)?;
    let params = job::parse_pairs(&set, "--set")?;
    let config = ConnectorConfig {
        inputs: job::parse_pairs(&input, "--input")?,
        output_dir: output,
        output_format: match format {
            Format::Ndjson => OutputFormat::Ndjson,
            Format::Parquet => OutputFormat::Parquet,
        },
        batch_size,
        ..ConnectorConfig::default()
    };
    if let (Some(group), Some(checkpoints)) = (group, checkpoints.clone()) {
        if from_savepoint.is_some() {
            return Err(CliError::Usage(
                "--from-savepoint cannot start a group job: its state is its tasks' (task-<p> under --state-dir); run it without --group, or resume the group from its state directory".into(),
            ));
        }
        let compiled = job::compile_files_with(&files, &params, &options)?;
        let plan = GroupPlan::new(&compiled.graph, &config, &group)?;
        let group_name = group.clone();
        let group_job = GroupJob::start(
            plan,
            config,
            plain_connectors(),
            GroupJobConfig {
                group,
                // A bucket --state-dir: the tasks' state is kept there,
                // each task run in a working copy under this process's
                // own directory.
                checkpoints: CheckpointConfig {
                    replica: None,
                    ..checkpoints
                },
                state_bucket: state.as_ref().and_then(|s| s.bucket.clone()),
                session_timeout,
                task_memory_limit: memory_limit,
                task: JobConfig {
                    parallelism: chosen_parallelism(parallelism, 1),
                    key_groups: max_parallelism
                        .map(|n| KeyGroups::new(u32::from(n)))
                        .transpose()?,
                    allow_dropped_state,
                    batch_rows: batch_size,
                    disable_chaining: no_chaining,
                    pool: pool.clone(),
                    ..JobConfig::default()
                },
            },
        )?;
        let stopper = group_job.clone();
        if let Err(e) = ctrlc::set_handler(move || {
            eprintln!("stopping: the tasks take a final checkpoint and the group hands their partitions on");
            stopper.stop();
        }) {
            tracing::warn!("cannot handle Ctrl-C: {e}");
        }
        let report = group_job.wait()?;
        if report.tasks.is_empty() && report.finished {
            // Said even when quiet, as a finished job resumed alone is.
            eprintln!(
                "group {group_name}: every task of the job is already done (their checkpoints under --state-dir say so); nothing ran here"
            );
        }
        if !quiet {
            for (task, report) in &report.tasks {
                eprintln!("task-{task}:\n{}", job::summary(report));
            }
        }
        return Ok(());
    }
    let compiled = job::compile_files_with(&files, &params, &options)?;
    let python = compiled.python.clone();
    let handle = job::start_compiled(
        compiled,
        config,
        &JobConfig {
            checkpoints,
            parallelism: chosen_parallelism(parallelism, machine_cores()),
            key_groups: max_parallelism
                .map(|n| KeyGroups::new(u32::from(n)))
                .transpose()?,
            from_savepoint,
            allow_dropped_state,
            memory: memory(),
            batch_rows: batch_size,
            disable_chaining: no_chaining,
            pool,
            ..JobConfig::default()
        },
    )?;
    stop_on_signals(&handle);
    let report = handle.wait()?;
    if !quiet || report.already_finished.is_some() {
        eprintln!("{}", job::summary(&report));
        if let Some(python) = python {
            for line in job::python_summary(&python.reports()) {
                eprintln!("{line}");
            }
        }
    }
    Ok(())
}

/// Ctrl-C (or SIGTERM) once stops the job gracefully: a final checkpoint,
/// sinks committed. A second Ctrl-C cancels it.
pub(crate) fn stop_on_signals(handle: &JobHandle) {
    static SIGNALS: AtomicU32 = AtomicU32::new(0);
    let handle = handle.clone();
    let installed = ctrlc::set_handler(move || {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("stopping: committing output (and taking a final checkpoint with --state-dir); interrupt again to cancel");
            handle.stop();
        } else {
            eprintln!("cancelling");
            handle.cancel();
        }
    });
    if let Err(e) = installed {
        tracing::warn!("cannot handle Ctrl-C: {e}");
    }
}

/// `--parallelism N` when given (or `EDDY_PARALLELISM`), else the
/// checkpoint's N when resuming and `fresh` instances when not.
pub(crate) fn chosen_parallelism(given: Option<u16>, fresh: usize) -> Parallelism {
    match given {
        Some(n) => Parallelism::Fixed(n.into()),
        None => Parallelism::Resumed { fresh },
    }
}

//! `eddy run`: SQL files as one streaming job on this machine, or as a
//! task of a Kafka consumer group (`--group`).
//!
//! In: the command's arguments. Out: the job's run summary on stderr; the
//! sinks' output where the SQL (or `--output`) puts it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use eddy_cli::{job, CliError, Result};
use eddy_connectors::{ConnectorConfig, OutputFormat};
use eddy_engine::checkpoint::{CheckpointConfig, DEFAULT_INTERVAL};
use eddy_engine::key_groups::KeyGroups;
use eddy_engine::memory::MemoryBudget;
use eddy_engine::parallel::{machine_cores, Parallelism};
use eddy_engine::runtime::JobConfig;
use eddy_engine::spill::SpillConfig;
use eddy_launch::{
    launch, plain_connectors, GroupSettings, LaunchConfig, LaunchPlan, RunReport, RunningJob,
};

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
        spill_dir,
        spill_disk_limit,
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
            interval: interval.unwrap_or(DEFAULT_INTERVAL),
            ignore_state,
            incremental: !full_checkpoints,
            // A group's tasks keep their state in its bucket themselves
            // (each run in a working copy under this process's directory).
            replica: state.replica.clone().filter(|_| group.is_none()),
            ..CheckpointConfig::new(state.dir.clone())
        }),
    };
    if group.is_some() && from_savepoint.is_some() {
        return Err(CliError::Usage(
            "--from-savepoint cannot start a group job: its state is its tasks' (task-<p> under --state-dir); run it without --group, or resume the group from its state directory".into(),
        ));
    }
    let files = job::load_sql(&paths)?;
    let params = job::parse_pairs(&set, "--set")?;
    let connectors = ConnectorConfig {
        inputs: job::parse_pairs(&input, "--input")?,
        output_dir: output,
        output_format: match format {
            Format::Ndjson => OutputFormat::Ndjson,
            Format::Parquet => OutputFormat::Parquet,
        },
        batch_size,
        ..ConnectorConfig::default()
    };
    let compiled = job::compile_files_with(&files, &params, &options)?;
    let python = compiled.python.clone();
    let plan = LaunchPlan::new(compiled.graph, &connectors, group.as_deref())?;
    let grouped = matches!(plan, LaunchPlan::Group(_));
    let running = launch(
        plan,
        LaunchConfig {
            job: JobConfig {
                checkpoints,
                // A group's tasks are its parallel units: one instance
                // each unless asked.
                parallelism: chosen_parallelism(
                    parallelism,
                    if grouped { 1 } else { machine_cores() },
                ),
                key_groups: max_parallelism
                    .map(|n| KeyGroups::new(u32::from(n)))
                    .transpose()?,
                from_savepoint,
                allow_dropped_state,
                // A group job's tasks each get their own budget.
                memory: if grouped { Vec::new() } else { memory() },
                spill: SpillConfig {
                    dir: spill_dir.or_else(|| {
                        state
                            .as_ref()
                            .filter(|s| s.bucket.is_none())
                            .map(|s| s.dir.join("spill"))
                    }),
                    disk_limit: spill_disk_limit,
                },
                batch_rows: batch_size,
                disable_chaining: no_chaining,
                pool,
                ..JobConfig::default()
            },
            group: GroupSettings {
                state_bucket: state.as_ref().and_then(|s| s.bucket.clone()),
                session_timeout,
                task_memory_limit: memory_limit,
            },
            ..LaunchConfig::new(connectors, plain_connectors())
        },
    )?;
    stop_on_signals(&running);
    match running.wait()? {
        RunReport::Single(report) => {
            if !quiet || report.already_finished.is_some() {
                eprintln!("{}", job::summary(&report));
                if let Some(python) = python {
                    for line in job::python_summary(&python.reports()) {
                        eprintln!("{line}");
                    }
                }
            }
        }
        RunReport::Group(report) => {
            if report.tasks.is_empty() && report.finished {
                // Said even when quiet, as a finished job resumed alone is.
                eprintln!(
                    "group {}: every task of the job is already done (their checkpoints under --state-dir say so); nothing ran here",
                    group.as_deref().unwrap_or_default()
                );
            }
            if !quiet {
                for (task, report) in &report.tasks {
                    eprintln!("task-{task}:\n{}", job::summary(report));
                }
            }
        }
    }
    Ok(())
}

/// Ctrl-C (or SIGTERM) once stops the job gracefully: a final checkpoint,
/// sinks committed (a group job's tasks here: the group hands their
/// partitions on). A second Ctrl-C cancels it.
pub(crate) fn stop_on_signals(handle: &RunningJob) {
    static SIGNALS: AtomicU32 = AtomicU32::new(0);
    let handle = handle.clone();
    let installed = ctrlc::set_handler(move || {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            match handle {
                RunningJob::Single(_) => eprintln!("stopping: committing output (and taking a final checkpoint with --state-dir); interrupt again to cancel"),
                RunningJob::Group(_) => eprintln!("stopping: the tasks take a final checkpoint and the group hands their partitions on"),
            }
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

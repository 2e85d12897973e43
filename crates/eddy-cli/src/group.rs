//! `eddy run --group NAME`: scale-out over a Kafka consumer group.
//!
//! In: the job's SQL, its connector settings and a shared state directory.
//! Out: the job run as tasks, one per partition number of its (co-
//! partitioned) Kafka topics, on whichever processes of the group hold
//! that partition number; the reports of the tasks this process ran.
//!
//! ```text
//!  process 1: GroupMember ── assigned {0, 2} ──> task-0 (partition 0 of every topic, state DIR/task-0)
//!                                           └──> task-2
//!  process 2: GroupMember ── assigned {1}    ──> task-1
//! ```
//!
//! A task is a whole job: its Kafka sources read one partition, its state
//! lives in `STATE_DIR/task-<p>` (shared by every process: a task moves by
//! resuming from its last checkpoint), its Kafka sinks' transactional ids
//! and its file sinks' names carry `task-<p>`. When the group rebalances
//! (a process joins, leaves or dies) every task is stopped with a final
//! checkpoint before the partitions are handed out again, so no two
//! processes run a task at once; a dead process's tasks resume from their
//! last checkpoint on the survivors, losing and repeating nothing in
//! exactly-once sinks. Each key's rows are in one task: those of an
//! operator keyed by the topics' key (`key_column`) are in one partition
//! number already; an operator keyed otherwise gets its rows through an
//! exchange topic keyed by its own key
//! ([`eddy_engine::distribute::exchanges`]), which every
//! task writes and each reads its partition of. So results equal a single
//! process's.
//!
//! The process ends when every task of the job has finished (bounded
//! sources, `stop = 'latest'`) or on Ctrl-C / SIGTERM.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_connectors::kafka::exchange::KafkaExchanges;
use eddy_connectors::kafka::group::{ensure_topic, partition_counts, GroupMember};
use eddy_connectors::{ConnectorConfig, Connectors};
use eddy_engine::checkpoint::store::StateDir;
use eddy_engine::checkpoint::CheckpointConfig;
use eddy_engine::distribute::exchanges::{self, PartitionedSource};
use eddy_engine::memory::MemoryBudget;
use eddy_engine::parallel::Parallelism;
use eddy_engine::runtime::{start_job, JobConfig, JobHandle, JobReport};
use eddy_sql::SqlFile;

use crate::error::{CliError, Result};
use crate::job;

/// How a group run is set up.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// The consumer group's name.
    pub group: String,
    /// The shared state directory and checkpoint interval.
    pub checkpoints: CheckpointConfig,
    /// How long the group waits for a silent process before handing its
    /// partitions to the others.
    pub session_timeout: Duration,
    /// Instances of each keyed operator in each task.
    pub parallelism: Parallelism,
    /// Each task's budget for its operator state, bytes.
    pub memory_limit: Option<u64>,
}

/// What a group run did in this process.
#[derive(Debug, Default)]
pub struct GroupReport {
    /// Each task run here, with how it ended (a task stopped by a
    /// rebalance and started again appears once per run).
    pub tasks: Vec<(i32, JobReport)>,
}

type Tasks = Arc<Mutex<BTreeMap<i32, JobHandle>>>;

/// Stops every running task with a final checkpoint and waits for them.
fn stop_all(tasks: &Tasks, reports: &Mutex<Vec<(i32, JobReport)>>) -> Result<()> {
    let running: Vec<(i32, JobHandle)> = match tasks.lock() {
        Ok(mut t) => std::mem::take(&mut *t).into_iter().collect(),
        Err(_) => return Ok(()),
    };
    for (_, handle) in &running {
        handle.stop();
    }
    for (p, handle) in running {
        let report = handle.wait()?;
        if let Ok(mut reports) = reports.lock() {
            reports.push((p, report));
        }
    }
    Ok(())
}

fn task_state_dir(root: &Path, task: i32) -> std::path::PathBuf {
    root.join(format!("task-{task}"))
}

/// Runs the job's tasks that the group gives this process; see the module docs.
pub fn run_group(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    connectors: ConnectorConfig,
    config: &GroupConfig,
    stop: Arc<AtomicBool>,
) -> Result<GroupReport> {
    if config.checkpoints.ignore_state {
        return Err(CliError::Usage(
            "--ignore-state cannot be used with --group (other processes share the state directory); remove the directory instead".into(),
        ));
    }
    let compiled = job::compile_files(files, params)?;
    let sources = Connectors::new(connectors.clone())
        .kafka_sources(&compiled.graph)
        .map_err(|e| CliError::Usage(format!("--group: {e}")))?;
    let Some(servers) = sources.first().map(|s| s.servers.clone()) else {
        return Err(CliError::Usage(
            "--group needs a job that reads Kafka topics (connector = 'kafka' or --input TABLE=kafka://...)".into(),
        ));
    };
    if let Some(other) = sources.iter().find(|s| s.servers != servers) {
        return Err(CliError::Usage(format!(
            "--group: every Kafka source must use the same cluster ({servers} and {})",
            other.servers
        )));
    }
    let topics: Vec<String> = sources
        .iter()
        .map(|s| s.topic.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let counts = partition_counts(&servers, &topics).map_err(|e| CliError::Usage(e.to_string()))?;
    let partitions = counts.first().copied().unwrap_or(0);
    if partitions == 0 || counts.iter().any(|&c| c != partitions) {
        let listed: Vec<String> = topics
            .iter()
            .zip(&counts)
            .map(|(t, c)| format!("{t}: {c}"))
            .collect();
        return Err(CliError::Usage(format!(
            "--group runs one task per partition number, so the job's topics must have equal partition counts (co-partitioned); they have {}",
            listed.join(", ")
        )));
    }
    let partitioned: Vec<PartitionedSource> = sources
        .iter()
        .map(|s| PartitionedSource {
            table: s.table.clone(),
            key_column: s.key_column.clone(),
        })
        .collect();
    let exchange_topics = KafkaExchanges {
        servers: servers.clone(),
        group: config.group.clone(),
    };
    let task_graph = exchanges::plan(&compiled.graph, &partitioned, &exchange_topics, partitions)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    for exchange in &task_graph.exchanges {
        tracing::info!(
            "exchange: {} gets its rows by {} through topic '{}'",
            exchange.consumer,
            if exchange.keys.is_empty() {
                "one task (not keyed)".to_string()
            } else {
                exchange.keys.join(", ")
            },
            exchange.topic
        );
        ensure_topic(&servers, &exchange.topic, partitions)
            .map_err(|e| CliError::Usage(format!("--group: {e}")))?;
    }
    let task_graph = Arc::new(task_graph.graph);
    let root = config.checkpoints.state_dir.clone();
    let tasks: Tasks = Arc::new(Mutex::new(BTreeMap::new()));
    let reports = Arc::new(Mutex::new(Vec::new()));
    let member = {
        let (tasks, reports) = (tasks.clone(), reports.clone());
        GroupMember::join(
            &servers,
            &config.group,
            &topics,
            config.session_timeout,
            move || {
                if let Err(e) = stop_all(&tasks, &reports) {
                    tracing::error!("stopping tasks for a rebalance: {e}");
                }
            },
        )
        .map_err(|e| CliError::Usage(e.to_string()))?
    };
    let finished =
        |p: i32| -> Result<bool> { Ok(StateDir::open(task_state_dir(&root, p))?.finished()?) };
    loop {
        if stop.load(Ordering::SeqCst) {
            stop_all(&tasks, &reports)?;
            break;
        }
        if let Some(assigned) = member.poll(Duration::from_millis(200)) {
            tracing::info!(group = %config.group, "assigned partitions {assigned:?}");
            let mut running = tasks
                .lock()
                .map_err(|_| CliError::Usage("task table poisoned".into()))?;
            for &p in &assigned {
                if running.contains_key(&p) || finished(p)? {
                    continue;
                }
                let mut task_connectors = connectors.clone();
                task_connectors.kafka_partitions = Some(vec![p]);
                task_connectors.task = Some(p as u32);
                let checkpoints = CheckpointConfig {
                    state_dir: task_state_dir(&root, p),
                    ..config.checkpoints.clone()
                };
                let handle = start_job(
                    task_graph.clone(),
                    Arc::new(Connectors::new(task_connectors)),
                    &JobConfig {
                        checkpoints: Some(checkpoints),
                        parallelism: config.parallelism,
                        memory: config
                            .memory_limit
                            .map(|limit| Arc::new(MemoryBudget::new(format!("task-{p}"), limit)))
                            .into_iter()
                            .collect(),
                        label: format!("task-{p}"),
                        ..JobConfig::default()
                    },
                )?;
                running.insert(p, handle);
            }
        }
        // Tasks that ended on their own (bounded input, or a failure).
        let ended: Vec<(i32, JobHandle)> = {
            let mut running = tasks
                .lock()
                .map_err(|_| CliError::Usage("task table poisoned".into()))?;
            let done: Vec<i32> = running
                .iter()
                .filter(|(_, h)| h.state().is_terminal())
                .map(|(&p, _)| p)
                .collect();
            done.into_iter()
                .filter_map(|p| running.remove(&p).map(|h| (p, h)))
                .collect()
        };
        for (p, handle) in ended {
            match handle.wait() {
                Ok(report) => {
                    if let Ok(mut r) = reports.lock() {
                        r.push((p, report));
                    }
                }
                Err(e) => {
                    stop_all(&tasks, &reports)?;
                    member.leave();
                    return Err(CliError::Usage(format!("task-{p}: {e}")));
                }
            }
        }
        let mut all_finished = true;
        for p in 0..partitions as i32 {
            if !finished(p)? {
                all_finished = false;
                break;
            }
        }
        if all_finished {
            break;
        }
    }
    member.leave();
    let tasks = std::mem::take(
        &mut *reports
            .lock()
            .map_err(|_| CliError::Usage("reports poisoned".into()))?,
    );
    Ok(GroupReport { tasks })
}

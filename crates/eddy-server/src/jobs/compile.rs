//! A submitted job's SQL compiled, and the engine's refusals turned into
//! the API's errors (a table check's position, carried in
//! [`EngineError::Table`], goes back to the client as an SQL error there).
//!
//! In: SQL text and parameters; an engine or group-job error. Out: a job
//! graph; a [`ServerError`].

use std::collections::BTreeMap;

use eddy_engine::graph::{JobGraph, NodeKind};
use eddy_engine::EngineError;
use eddy_launch::LaunchError;
use std::sync::Arc;

use eddy_python::{PythonConfig, PythonRuntime};
use eddy_sql::{CompileOptions, SqlFile};

use crate::config::ServerConfig;
use crate::store::JobRecord;

use crate::error::{Result, ServerError};

/// The most instances of an operator a submitted job may ask for.
pub(super) const MAX_PARALLELISM: usize = 64;

/// Compiles a job's SQL. Python functions are refused unless the server
/// allows them; then their modules come from below its data root only, and
/// each worker is held to `memory_limit` (the job's, if it has one).
pub fn compile(
    config: &ServerConfig,
    name: &str,
    sql: &str,
    params: &BTreeMap<String, String>,
    memory_limit: Option<u64>,
) -> Result<(JobGraph, Option<Arc<PythonRuntime>>)> {
    let files = [SqlFile {
        name: name.to_string(),
        text: sql.to_string(),
    }];
    let mut job = eddy_sql::compile_with(&files, params, &compile_options(config, memory_limit))?;
    eddy_connectors::registry::Registry::standard().drop_unused_filters(&mut job.graph);
    eddy_connectors::view::key_by_upsert_key(&mut job.graph);
    Ok((job.graph, job.python))
}

/// Compiles a stored job's SQL (its name, parameters and memory limit).
pub(super) fn compile_record(
    config: &ServerConfig,
    record: &JobRecord,
) -> Result<(JobGraph, Option<Arc<PythonRuntime>>)> {
    compile(
        config,
        &record.name,
        &record.sql,
        &record.params,
        record.memory_limit,
    )
}

/// How the server compiles submitted SQL.
pub fn compile_options(config: &ServerConfig, memory_limit: Option<u64>) -> CompileOptions {
    CompileOptions {
        check_python_functions: true,
        connectors: Some(Arc::new(eddy_connectors::Registry::standard())),
        python: config.allow_python_udfs.then(|| {
            let root = std::fs::canonicalize(&config.data_root)
                .unwrap_or_else(|_| config.data_root.clone());
            PythonConfig {
                paths: vec![root.clone()],
                root: Some(root),
                memory_limit,
                ..PythonConfig::from_env()
            }
        }),
    }
}

pub(super) fn sink_names(graph: &JobGraph) -> Vec<String> {
    graph
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Sink { .. }))
        .map(|n| n.name.clone())
        .collect()
}

pub(super) fn engine_error(error: EngineError) -> ServerError {
    match error {
        // A table's problem goes back as an SQL error at its declaration,
        // so the console marks it like any other.
        EngineError::Table {
            at: Some(at),
            table,
            message,
        } => ServerError::Sql(eddy_sql::SqlError::at(
            &at,
            format!("table '{table}': {message}"),
        )),
        e @ (EngineError::Table { .. }
        | EngineError::Config(_)
        | EngineError::Connector { .. }
        | EngineError::State(_)
        // A checkpoint the job cannot resume (another query's, state it
        // has no place for): the submission's doing, not the server's.
        | EngineError::Checkpoint(_)) => ServerError::Rejected(e.to_string()),
        other => ServerError::Internal(other.to_string()),
    }
}

/// A launch's refusal as the API's error: the engine's as
/// [`engine_error`] says, a group job's (no Kafka source, topics not
/// co-partitioned, an exchange topic with another partition count, a
/// broker not reachable) the submission's.
pub(super) fn launch_error(error: LaunchError) -> ServerError {
    match error {
        LaunchError::Engine(e) => engine_error(e),
        LaunchError::Task { source, .. } => engine_error(*source),
        other => ServerError::Rejected(other.to_string()),
    }
}

/// Checks a group's name: it names a directory of the group state.
pub(super) fn check_group_name(group: &str) -> Result<()> {
    let fine = !group.is_empty()
        && group.len() <= 200
        && !group.starts_with('.')
        && group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if fine {
        Ok(())
    } else {
        Err(ServerError::Rejected(format!(
            "group '{group}': a group's name is 1 to 200 letters, digits, '.', '_' or '-' (not starting with '.')"
        )))
    }
}

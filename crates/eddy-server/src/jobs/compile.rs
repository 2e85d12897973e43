//! A submitted job's SQL compiled, and the engine's refusals turned into
//! the API's errors (a table check's `<sql>:LINE:COLUMN:` position goes back
//! to the client as an SQL error at that place).
//!
//! In: SQL text and parameters; an engine error. Out: a job graph; a
//! [`ServerError`].

use std::collections::BTreeMap;

use eddy_engine::graph::{JobGraph, NodeKind};
use eddy_engine::EngineError;
use eddy_sql::SqlFile;

use crate::error::{Result, ServerError};

/// The most instances of an operator a submitted job may ask for.
pub(super) const MAX_PARALLELISM: usize = 64;

/// Compiles a job's SQL.
pub fn compile(name: &str, sql: &str, params: &BTreeMap<String, String>) -> Result<JobGraph> {
    let files = [SqlFile {
        name: name.to_string(),
        text: sql.to_string(),
    }];
    Ok(eddy_sql::compile(&files, params)?.graph)
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

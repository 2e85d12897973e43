//! Errors as PostgreSQL clients read them: a SQLSTATE code, a message,
//! and where eddy's planner names one, the position in the client's
//! statement (1-based characters, as `psql` draws its caret).
//!
//! In: the server's errors, DataFusion's, and the port's own. Out:
//! [`PgWireError::UserError`]s.

use datafusion::error::DataFusionError;
use datafusion_postgres::pgwire::error::{ErrorInfo, PgWireError};

use super::commands::Placed;
use crate::error::ServerError;

/// The SQLSTATE codes the port answers with.
pub mod code {
    /// `syntax_error`.
    pub const SYNTAX_ERROR: &str = "42601";
    /// `syntax_error_or_access_rule_violation`: a statement eddy refuses.
    pub const REFUSED: &str = "42000";
    /// `undefined_table`.
    pub const UNDEFINED_TABLE: &str = "42P01";
    /// `undefined_column`.
    pub const UNDEFINED_COLUMN: &str = "42703";
    /// `undefined_function`.
    pub const UNDEFINED_FUNCTION: &str = "42883";
    /// `duplicate_object` (`duplicate_table` is `42P07`; one code for any name).
    pub const DUPLICATE_OBJECT: &str = "42P07";
    /// `feature_not_supported`.
    pub const NOT_SUPPORTED: &str = "0A000";
    /// `query_canceled` (a wait ran out).
    pub const CANCELED: &str = "57014";
    /// `too_many_connections`-like capacity refusals: `configuration_limit_exceeded`.
    pub const AT_CAPACITY: &str = "53400";
    /// `data_exception`.
    pub const DATA_EXCEPTION: &str = "22000";
    /// `object_not_in_prerequisite_state`: a view whose job is starting.
    pub const NOT_READY: &str = "55000";
    /// `internal_error`.
    pub const INTERNAL: &str = "XX000";
}

/// An error with `code` and `message`.
pub fn user(code: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        code.into(),
        message.into(),
    )))
}

fn with(code: &str, message: String, position: Option<usize>, hint: Option<String>) -> PgWireError {
    let mut info = ErrorInfo::new("ERROR".into(), code.into(), message);
    info.position = position.map(|p| p.to_string());
    info.hint = hint;
    PgWireError::UserError(Box::new(info))
}

/// A job the port submitted was refused.
pub(super) fn from_server(error: ServerError, placed: &Placed) -> PgWireError {
    match error {
        ServerError::Sql(eddy_sql::SqlError::At { position, message }) => {
            match placed.position(position.line, position.column) {
                Some(at) => with(code::REFUSED, message, Some(at), None),
                // In a declaration made earlier: say which.
                None => with(
                    code::REFUSED,
                    format!(
                        "{message} (in the declarations this session's jobs start with, line {})",
                        position.line
                    ),
                    None,
                    Some("DROP and declare again the table, view or function it names".into()),
                ),
            }
        }
        ServerError::Sql(e) => user(code::REFUSED, e.to_string()),
        ServerError::Rejected(message) => user(code::REFUSED, message),
        ServerError::AtCapacity(message) => user(code::AT_CAPACITY, message),
        ServerError::NotFound(what) => user(code::UNDEFINED_TABLE, format!("no job '{what}'")),
        other => user(code::INTERNAL, other.to_string()),
    }
}

/// A query DataFusion refused.
pub(super) fn from_query(error: PgWireError) -> PgWireError {
    let PgWireError::ApiError(inner) = error else {
        return error;
    };
    let Some(df) = inner.downcast_ref::<DataFusionError>() else {
        return PgWireError::ApiError(inner);
    };
    let root = df.find_root();
    let code = match root {
        DataFusionError::SQL(..) => code::SYNTAX_ERROR,
        DataFusionError::SchemaError(e, _) => match e.as_ref() {
            datafusion::common::SchemaError::FieldNotFound { .. } => code::UNDEFINED_COLUMN,
            _ => code::REFUSED,
        },
        DataFusionError::NotImplemented(_) => code::NOT_SUPPORTED,
        DataFusionError::Plan(_) => code::REFUSED,
        DataFusionError::External(e) if e.is::<super::tables::ViewDropped>() => {
            code::UNDEFINED_TABLE
        }
        DataFusionError::ArrowError(..) | DataFusionError::Execution(_) => code::DATA_EXCEPTION,
        _ => code::INTERNAL,
    };
    user(code, root.to_string())
}

/// A query reads a relation that is not there; `declared` when it is a
/// table of the session catalog (a stream, whose rows are not kept).
pub(super) fn missing_relation(name: &str, declared: bool) -> PgWireError {
    if declared {
        return with(
            code::UNDEFINED_TABLE,
            format!(
                "\"{name}\" is a streaming table, not a materialized view: its rows are not kept"
            ),
            None,
            Some(format!(
                "CREATE MATERIALIZED VIEW v AS SELECT ... FROM {name}; then SELECT from v"
            )),
        );
    }
    with(
        code::UNDEFINED_TABLE,
        format!("relation \"{name}\" does not exist"),
        None,
        Some("SHOW VIEWS lists the materialized views".into()),
    )
}

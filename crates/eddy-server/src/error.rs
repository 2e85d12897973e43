//! The server's error type and its HTTP form: a JSON body
//! `{"error": "...", "line": n, "column": n}` (position only for SQL errors)
//! with the status that fits.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// Errors of the job manager and the API.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The submitted SQL does not compile.
    #[error("{0}")]
    Sql(#[from] eddy_sql::SqlError),
    /// The job cannot start as submitted (a path outside the roots, say).
    #[error("{0}")]
    Rejected(String),
    /// No job has this id.
    #[error("no job '{0}'")]
    NotFound(String),
    /// No materialized view has this name.
    #[error("no materialized view '{0}'")]
    NoView(String),
    /// A wait the request asked for ran out.
    #[error("{0}")]
    Timeout(String),
    /// The server runs as many jobs as it may (`--max-jobs`).
    #[error("{0}")]
    AtCapacity(String),
    /// The request lacks the right token.
    #[error("this server needs 'Authorization: Bearer <token>'")]
    Unauthorized,
    /// Reading or writing the server's own files failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or address involved.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Result alias of this crate.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

/// An error as the API returns it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
    /// For SQL errors: the 1-based line in the submitted SQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// For SQL errors: the 1-based column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
}

impl ServerError {
    /// The status and body of this error.
    pub fn body(&self) -> (StatusCode, ErrorBody) {
        let plain = |status, error: String| {
            (
                status,
                ErrorBody {
                    error,
                    line: None,
                    column: None,
                },
            )
        };
        match self {
            ServerError::Sql(eddy_sql::SqlError::At { position, message }) => (
                StatusCode::BAD_REQUEST,
                ErrorBody {
                    error: message.clone(),
                    line: Some(position.line),
                    column: Some(position.column),
                },
            ),
            ServerError::Sql(other) => plain(StatusCode::BAD_REQUEST, other.to_string()),
            ServerError::Rejected(message) => plain(StatusCode::BAD_REQUEST, message.clone()),
            ServerError::NotFound(_) | ServerError::NoView(_) => {
                plain(StatusCode::NOT_FOUND, self.to_string())
            }
            ServerError::Timeout(message) => plain(StatusCode::REQUEST_TIMEOUT, message.clone()),
            ServerError::AtCapacity(message) => {
                plain(StatusCode::TOO_MANY_REQUESTS, message.clone())
            }
            ServerError::Unauthorized => plain(StatusCode::UNAUTHORIZED, self.to_string()),
            ServerError::Io { .. } | ServerError::Internal(_) => {
                plain(StatusCode::INTERNAL_SERVER_ERROR, self.to_string())
            }
        }
    }
}

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        let (status, body) = self.body();
        (status, Json(body)).into_response()
    }
}

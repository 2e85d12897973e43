//! The CLI's error type: everything a command can fail with, printed as
//! `error: ...` with a non-zero exit code.

/// Errors of `eddy` commands.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The SQL did not compile.
    #[error("{0}")]
    Sql(#[from] eddy_sql::SqlError),
    /// The job failed while running.
    #[error("{0}")]
    Engine(#[from] eddy_engine::EngineError),
    /// The job could not be launched, or its group failed (an engine
    /// error of a job run whole is [`CliError::Engine`]).
    #[error("{0}")]
    Launch(eddy_launch::LaunchError),
    /// A connector failed outside a job (e.g. `eddy generate`).
    #[error("{0}")]
    Connector(#[from] eddy_connectors::ConnectorError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A server said no, or could not be reached.
    #[error("{0}")]
    Server(String),
    /// The server failed.
    #[error("{0}")]
    Serve(#[from] eddy_server::ServerError),
    /// A flag has a bad value.
    #[error("{0}")]
    Usage(String),
    /// Two engines' results of a benchmark query differ (`eddy bench compare`).
    #[error("{0}")]
    Differs(String),
    /// DataFusion failed (batch queries of `eddy bench`).
    #[error("{0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
}

impl From<eddy_launch::LaunchError> for CliError {
    fn from(error: eddy_launch::LaunchError) -> Self {
        match error {
            eddy_launch::LaunchError::Engine(e) => Self::Engine(e),
            other => Self::Launch(other),
        }
    }
}

/// Result alias of the CLI.
pub type Result<T, E = CliError> = std::result::Result<T, E>;

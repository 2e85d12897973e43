//! The SQL front end's error type. Every user-facing error carries the file,
//! line and column it refers to and prints as `file:line:column: message`.

pub use eddy_engine::position::Position;

/// Errors found while reading, parsing and planning SQL.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// A user error at a known position.
    #[error("{position}: {message}")]
    At {
        /// Where.
        position: Position,
        /// What.
        message: String,
    },
    /// A user error about the job as a whole (e.g. an unused `--set`).
    #[error("{0}")]
    Job(String),
    /// The statements planned, but none of them is a query: only tables,
    /// views and settings (an error for a job; a SQL shell keeps them).
    #[error("nothing to run: no INSERT INTO or SELECT statement")]
    NothingToRun,
    /// An internal inconsistency while building the graph.
    #[error("internal planner error: {0}")]
    Internal(String),
    /// The engine refused what the planner built (a graph it cannot run,
    /// an operator's options), kept typed.
    #[error(transparent)]
    Engine(#[from] eddy_engine::EngineError),
}

/// Result alias of this crate.
pub type Result<T, E = SqlError> = std::result::Result<T, E>;

impl SqlError {
    /// A user error at `position`.
    pub fn at(position: &Position, message: impl Into<String>) -> Self {
        Self::At {
            position: position.clone(),
            message: message.into(),
        }
    }

    /// The message without the position.
    pub fn message(&self) -> String {
        match self {
            SqlError::At { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

//! The launcher's one error type.

use eddy_connectors::ConnectorError;
use eddy_engine::EngineError;

/// Why a job could not be launched, or why a group job failed.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The engine refused or failed the job (one run on this machine).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A connector failed: the Kafka group's membership, a topic, a
    /// bucket's lease.
    #[error(transparent)]
    Connector(#[from] ConnectorError),
    /// A group job (scale-out over a Kafka consumer group) cannot run as
    /// asked.
    #[error("group '{group}': {message}")]
    Group {
        /// The consumer group's name.
        group: String,
        /// Why.
        message: String,
    },
    /// A task of a group job failed.
    #[error("task-{task}: {source}")]
    Task {
        /// The task's number (its partition number).
        task: i32,
        /// What failed.
        source: Box<EngineError>,
    },
    /// Reading or writing a file (a task's lock) failed.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Results of the launcher.
pub type Result<T> = std::result::Result<T, LaunchError>;

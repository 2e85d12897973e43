//! The engine's error type. Everything that can go wrong while a job runs
//! (an operator failing on a batch, a connector failing to read or write, a
//! node disconnecting) becomes an [`EngineError`].

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;

/// Errors raised by the dataflow runtime and its operators.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An Arrow kernel failed on a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] ArrowError),
    /// A DataFusion expression or accumulator failed on a batch.
    #[error("datafusion: {0}")]
    DataFusion(#[from] DataFusionError),
    /// A source or sink failed (I/O, bad configuration discovered at open time).
    #[error("{node}: {message}")]
    Connector {
        /// The node (table) the connector belongs to.
        node: String,
        /// What went wrong.
        message: String,
    },
    /// An operator met input it cannot process.
    #[error("{operator}: {message}")]
    Operator {
        /// The operator's name.
        operator: String,
        /// What went wrong.
        message: String,
    },
    /// The graph itself is malformed (a planner bug, not a user error).
    #[error("invalid job graph: {0}")]
    Graph(String),
    /// The job was cancelled because another node failed.
    #[error("cancelled")]
    Cancelled,
}

/// Result alias used throughout the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

impl EngineError {
    /// Shorthand for an [`EngineError::Connector`].
    pub fn connector(node: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Connector { node: node.into(), message: message.into() }
    }

    /// Shorthand for an [`EngineError::Operator`].
    pub fn operator(operator: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Operator { operator: operator.into(), message: message.into() }
    }
}

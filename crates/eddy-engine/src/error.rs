//! The engine's error type. Everything that can go wrong while a job runs
//! (an operator failing on a batch, a connector failing to read or write, a
//! checkpoint that cannot be written or restored) becomes an
//! [`EngineError`].

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
    /// A source with `bad_rows = 'fail'` met a bad row.
    #[error("bad row at {location} (bad_rows = 'fail'): {reason}")]
    BadRow {
        /// The source table.
        source_table: String,
        /// `path:line` (or what the connector knows of the row's position).
        location: String,
        /// Why the row is bad.
        reason: String,
    },
    /// The job cannot start as configured (an `--input` naming no source,
    /// say). Found before anything runs.
    #[error("{0}")]
    Config(String),
    /// A table cannot be read or written as declared (an unknown option, a
    /// path outside a server's roots). Found before anything runs; `at`
    /// is where the table is declared.
    #[error("{}table '{table}': {message}", crate::position::prefix(at.as_ref()))]
    Table {
        /// Where the table is declared.
        at: Option<crate::position::Position>,
        /// The table.
        table: String,
        /// What is wrong.
        message: String,
    },
    /// Operator state passed a memory budget ([`crate::memory`]).
    #[error(
        "over the {budget}'s memory budget: operator state holds {} of {} ({largest} holds {}); \
         raise the limit (--memory-limit), give the state a TTL (SET 'table.exec.state.ttl' = '...'), \
         or bound the keys the query keeps",
        crate::memory::format_bytes(*used), crate::memory::format_bytes(*limit), crate::memory::format_bytes(*held)
    )]
    MemoryBudget {
        /// Whose budget (`job`, `server`).
        budget: String,
        /// Its limit, bytes.
        limit: u64,
        /// What all its holders hold, bytes.
        used: u64,
        /// The node holding most.
        largest: String,
        /// What that node holds, bytes.
        held: u64,
    },
    /// Spilled state could not be written or read ([`crate::spill`]).
    #[error("spilling operator state: could not {doing} {place}: {reason}")]
    Spill {
        /// What was being done (`open`, `write to`, ...).
        doing: &'static str,
        /// The spill store's directory.
        place: String,
        /// The store's or the file system's error.
        reason: String,
    },
    /// The job's spilled state passed its disk limit.
    #[error(
        "spilled operator state takes {} on disk, past the job's spill disk limit of {}; \
         raise it (--spill-disk-limit), raise --memory-limit, or give the state a TTL",
        crate::memory::format_bytes(*used), crate::memory::format_bytes(*limit)
    )]
    SpillDiskLimit {
        /// Bytes on disk.
        used: u64,
        /// The limit, bytes.
        limit: u64,
    },
    /// A MATCH_RECOGNIZE pattern cannot be compiled.
    #[error("{0}")]
    Pattern(#[from] crate::operators::match_recognize::pattern::PatternRefusal),
    /// Checkpointed state could not be encoded, decoded or applied.
    #[error("checkpoint state: {0}")]
    State(String),
    /// A checkpoint's state table does not fit the operator's declaration.
    #[error("checkpoint state: {0}")]
    StateTable(#[from] crate::state::declared::TableMismatch),
    /// The state directory cannot be used (I/O, a checkpoint of another
    /// query).
    #[error("{0}")]
    Checkpoint(String),
    /// The graph itself is malformed (a planner bug, not a user error).
    #[error("invalid job graph: {0}")]
    Graph(String),
    /// The job failed; the message is the error of the node that ended it.
    #[error("{0}")]
    Failed(String),
    /// The job was cancelled ([`crate::runtime::JobHandle::cancel`]).
    #[error("the job was cancelled")]
    Cancelled,
    /// A node gave up because the job is ending (another node failed, or
    /// the job was cancelled); never a job's own result.
    #[error("aborted")]
    Aborted,
}

/// Result alias used throughout the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

impl EngineError {
    /// Shorthand for an [`EngineError::Connector`].
    pub fn connector(node: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Connector {
            node: node.into(),
            message: message.into(),
        }
    }

    /// Shorthand for an [`EngineError::Operator`].
    pub fn operator(operator: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Operator {
            operator: operator.into(),
            message: message.into(),
        }
    }
}

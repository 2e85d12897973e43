//! Errors of the connectors crate. They cross into the engine as
//! [`eddy_engine::EngineError::Connector`], naming the table.

use eddy_engine::EngineError;

/// A connector could not be opened or failed while reading or writing.
#[derive(Debug, thiserror::Error)]
pub enum ConnectorError {
    /// `connector = '...'` names nothing eddy knows.
    #[error("unknown connector '{connector}'{hint} ({role}s: {known})")]
    UnknownConnector {
        /// The name given.
        connector: String,
        /// `source` or `sink`.
        role: &'static str,
        /// `; did you mean '...'?`, or empty.
        hint: String,
        /// The connectors that can play the role, comma-separated.
        known: String,
    },
    /// The connector exists but cannot be read (or written).
    #[error("connector '{connector}': it cannot be a {role} ({role}s: {known})")]
    NotInRole {
        /// The name given.
        connector: String,
        /// `source` or `sink`.
        role: &'static str,
        /// The connectors that can play the role, comma-separated.
        known: String,
    },
    /// An option the connector does not take (a typo, usually).
    #[error("unknown option '{option}' for a {connector} {role}{hint} (valid options: {valid})")]
    UnknownOption {
        /// The option given.
        option: String,
        /// The table's connector.
        connector: String,
        /// `source` or `sink`.
        role: &'static str,
        /// `; did you mean '...'?`, or empty.
        hint: String,
        /// Every valid option, comma-separated.
        valid: String,
    },
    /// An option is missing or has a bad value.
    #[error("{}option '{option}': {reason}", eddy_engine::position::prefix(at.as_ref()))]
    BadOption {
        /// The option's name.
        option: String,
        /// Why it is wrong.
        reason: String,
        /// Where the table is declared, when known.
        at: Option<eddy_engine::position::Position>,
    },
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or stream involved.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An object-store request failed (after the client's retries).
    #[error("{location}: {source}")]
    Storage {
        /// The object or prefix (`s3://bucket/key`, never credentials).
        location: String,
        /// The store client's error.
        source: object_store::Error,
    },
    /// A source's position in a checkpoint cannot be read back (a
    /// checkpoint another version or connector wrote).
    #[error("its checkpointed position {position} cannot be read: {reason}")]
    Position {
        /// The position as the checkpoint holds it.
        position: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// Encoding or decoding with Arrow failed.
    #[error("{0}")]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    /// The engine refused (a sink's state it cannot read back).
    #[error("{0}")]
    Engine(#[from] EngineError),
    /// Writing Parquet failed.
    #[error("{0}")]
    Parquet(#[from] datafusion::parquet::errors::ParquetError),
    /// A group job (scale-out over a Kafka consumer group) cannot run as
    /// asked.
    #[error("group '{group}': {message}")]
    Group {
        /// The consumer group's name.
        group: String,
        /// Why.
        message: String,
    },
    /// A Kafka client call failed.
    #[error("kafka: {context}: {source}")]
    Kafka {
        /// What eddy was doing (`reading topic 'orders'`).
        context: String,
        /// The client's error.
        source: rdkafka::error::KafkaError,
    },
    /// PostgreSQL refused, failed, or holds something eddy cannot read.
    #[error("postgresql: {context}: {message}")]
    Postgres {
        /// What eddy was doing (`creating slot 'orders_slot'`).
        context: String,
        /// What went wrong (the server's message, or eddy's).
        message: String,
    },
}

/// Result alias of this crate.
pub type Result<T, E = ConnectorError> = std::result::Result<T, E>;

impl ConnectorError {
    /// Converts into the engine's error, naming the table.
    pub fn for_table(self, table: &str) -> EngineError {
        EngineError::connector(table, self.to_string())
    }

    /// Names where the table is declared (`file:line:col`) in an option
    /// error, so that it points at the SQL to fix.
    pub fn declared_at(self, spec: &eddy_engine::graph::ConnectorSpec) -> Self {
        match self {
            Self::BadOption { option, reason, .. } if spec.declared_at.is_some() => {
                Self::BadOption {
                    option,
                    reason,
                    at: spec.declared_at.clone(),
                }
            }
            other => other,
        }
    }

    /// Shorthand for [`ConnectorError::Position`].
    pub fn position(position: &serde_json::Value, reason: impl std::fmt::Display) -> Self {
        Self::Position {
            position: position.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Shorthand for [`ConnectorError::Kafka`].
    pub fn kafka(context: impl Into<String>, source: rdkafka::error::KafkaError) -> Self {
        Self::Kafka {
            context: context.into(),
            source,
        }
    }

    /// Shorthand for [`ConnectorError::Postgres`]; a driver's error shows
    /// the server's own message (and its detail and hint when it has them).
    pub fn postgres(context: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self::Postgres {
            context: context.into(),
            message: message.to_string(),
        }
    }

    /// Shorthand for [`ConnectorError::BadOption`].
    pub fn bad_option(option: &str, reason: impl Into<String>) -> Self {
        Self::BadOption {
            option: option.to_string(),
            reason: reason.into(),
            at: None,
        }
    }
}

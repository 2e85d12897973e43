//! Kafka: `connector = 'kafka'` sources and sinks (through librdkafka).
//!
//! - [`KafkaConnector`]: the connector (options, opening, commits);
//! - [`config`]: the tables' options, typed; [`flink_names`]: Flink's
//!   option names read as eddy's;
//! - [`source`]: a topic's partitions read as splits, each with its own
//!   watermark, offsets kept in checkpoints;
//! - [`sink`]: JSON records, exactly once through transactions tied to
//!   checkpoints, or at least once;
//! - [`exchange`]: the topics a job scaled out over a consumer group moves
//!   rows through to the task owning their key (Arrow rows, watermark
//!   markers per writing task);
//! - [`group`], [`offsets`]: group membership for scale-out (the group
//!   jobs `eddy_launch::group` runs over it), and committing checkpointed
//!   offsets for monitoring.

pub mod config;
mod connector;
pub mod exchange;
pub mod flink_names;
pub mod group;
pub mod offsets;
pub mod sink;
pub mod source;

use rdkafka::client::ClientContext;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// The client context of eddy's consumers: the client's errors go to the
/// log as warnings (it retries them itself), except a partition's end,
/// which is news, not an error.
#[derive(Debug, Default, Clone, Copy)]
pub struct QuietContext;

impl ClientContext for QuietContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if !is_end_of_partition(&error) {
            tracing::warn!("kafka: {error}: {reason}");
        }
    }
}

impl ConsumerContext for QuietContext {}

/// A partition's end reported as an error (it is not one).
pub(crate) fn is_end_of_partition(error: &KafkaError) -> bool {
    matches!(
        error,
        KafkaError::PartitionEOF(_) | KafkaError::Global(RDKafkaErrorCode::PartitionEOF)
    )
}

pub use config::{Delivery, KafkaSinkConfig, KafkaSourceConfig, StartAt, StopAt};
pub use connector::{address_options, KafkaConnector, KafkaTopicRef, TaskPartitions, SCHEME};
pub use sink::{KafkaCommits, KafkaSink, KafkaSinkState};
pub use source::{KafkaPosition, KafkaSource, PartitionOffset};

//! A Kafka source's checkpointed offsets, committed to its consumer group
//! once the checkpoint is complete.
//!
//! In: a source's configuration and the position its completed checkpoint
//! holds. Out: the offsets committed under the source's
//! `group_id`, so the usual Kafka tools show the job's lag. The checkpoint
//! stays the only record eddy resumes from; these commits are never read.

use std::collections::HashMap;
use std::sync::Mutex;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::config::KafkaSourceConfig;
use super::source::KafkaPosition;
use super::QuietContext;
use crate::error::{ConnectorError, Result};

/// One committing client per cluster and group.
#[derive(Default)]
pub struct GroupOffsets {
    clients: Mutex<HashMap<String, BaseConsumer<QuietContext>>>,
}

impl std::fmt::Debug for GroupOffsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupOffsets").finish_non_exhaustive()
    }
}

impl GroupOffsets {
    /// Commits `position` under the source's group.
    pub fn commit(&self, config: &KafkaSourceConfig, position: &KafkaPosition) -> Result<()> {
        let servers = config.client.get("bootstrap.servers").unwrap_or_default();
        let group = config.client.get("group.id").unwrap_or_default();
        let key = format!("{servers}\u{0}{group}");
        let mut clients = self
            .clients
            .lock()
            .map_err(|_| ConnectorError::bad_option("group_id", "offset committer poisoned"))?;
        if !clients.contains_key(&key) {
            let client: BaseConsumer<QuietContext> = config
                .client
                .create_with_context(QuietContext)
                .map_err(|e| {
                    ConnectorError::kafka(format!("connecting to commit group '{group}'"), e)
                })?;
            clients.insert(key.clone(), client);
        }
        let Some(client) = clients.get(&key) else {
            return Ok(());
        };
        let mut offsets = TopicPartitionList::new();
        for o in &position.offsets {
            offsets
                .add_partition_offset(&position.topic, o.partition, Offset::Offset(o.offset))
                .map_err(|e| ConnectorError::kafka("committing offsets", e))?;
        }
        client.commit(&offsets, CommitMode::Sync).map_err(|e| {
            ConnectorError::kafka(format!("committing offsets of group '{group}'"), e)
        })?;
        Ok(())
    }
}

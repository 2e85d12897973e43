//! Consumer-group membership for scale-out: which partitions of a job's
//! topics this process runs.
//!
//! In: the group's name and the job's source topics (co-partitioned: equal
//! partition counts). Out: the partition numbers assigned to this process
//! after each rebalance. The member never reads records (it pauses what it
//! is given): each assigned partition number is a task, a whole pipeline
//! instance reading that partition of every topic, with state of its own.
//!
//! The range assignor gives a member the same partition numbers of every
//! topic when the topics have equal partition counts. With its eager
//! protocol every member gives up all partitions before any is handed out
//! again; `on_revoke` runs then and must stop the tasks (with a final
//! checkpoint) before it returns, so that no two processes ever run one
//! task at a time.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::ClientConfig;

use crate::error::{ConnectorError, Result};

/// What the member's context saw.
struct GroupContext {
    assigned: Mutex<Option<BTreeSet<i32>>>,
    on_revoke: Box<dyn Fn() + Send + Sync>,
}

impl ClientContext for GroupContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if !super::is_end_of_partition(&error) {
            tracing::warn!("kafka group: {error}: {reason}");
        }
    }
}

impl ConsumerContext for GroupContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = rebalance {
            (self.on_revoke)();
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(partitions) => {
                if let Err(e) = consumer.pause(partitions) {
                    tracing::warn!("kafka group: cannot pause the assigned partitions: {e}");
                }
                let numbers = partitions
                    .elements()
                    .iter()
                    .map(|e| e.partition())
                    .collect();
                if let Ok(mut assigned) = self.assigned.lock() {
                    *assigned = Some(numbers);
                }
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::warn!("kafka group: rebalance failed: {e}"),
        }
    }
}

/// This process's membership of a consumer group.
pub struct GroupMember {
    consumer: BaseConsumer<GroupContext>,
    group: String,
}

impl std::fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMember")
            .field("group", &self.group)
            .finish()
    }
}

impl GroupMember {
    /// Joins `group` on `servers` for `topics`; `on_revoke` runs (and must
    /// return only once the process's tasks have stopped) whenever the
    /// group takes the partitions back for a rebalance.
    pub fn join(
        servers: &str,
        group: &str,
        topics: &[String],
        session_timeout: Duration,
        on_revoke: impl Fn() + Send + Sync + 'static,
    ) -> Result<Self> {
        let context = GroupContext {
            assigned: Mutex::new(None),
            on_revoke: Box::new(on_revoke),
        };
        let consumer: BaseConsumer<GroupContext> = ClientConfig::new()
            .set("bootstrap.servers", servers)
            .set("group.id", group)
            .set("client.id", format!("eddy-group-{group}"))
            .set("enable.auto.commit", "false")
            .set("partition.assignment.strategy", "range")
            .set(
                "session.timeout.ms",
                session_timeout.as_millis().to_string(),
            )
            .set(
                "heartbeat.interval.ms",
                (session_timeout.as_millis() / 4).max(100).to_string(),
            )
            .create_with_context(context)
            .map_err(|e| ConnectorError::kafka(format!("joining group '{group}'"), e))?;
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&names)
            .map_err(|e| ConnectorError::kafka(format!("joining group '{group}'"), e))?;
        Ok(Self {
            consumer,
            group: group.to_string(),
        })
    }

    /// Serves the group for up to `timeout`; the partition numbers assigned
    /// to this process when a rebalance has just handed them out.
    pub fn poll(&self, timeout: Duration) -> Option<BTreeSet<i32>> {
        match self.consumer.poll(timeout) {
            Some(Err(e)) if !super::is_end_of_partition(&e) => {
                tracing::warn!(group = %self.group, "kafka group: {e}");
            }
            _ => {}
        }
        self.consumer
            .context()
            .assigned
            .lock()
            .ok()
            .and_then(|mut a| a.take())
    }

    /// Leaves the group (its partitions go to the other members at once).
    pub fn leave(self) {
        self.consumer.unsubscribe();
        let _ = self.consumer.poll(Duration::from_millis(100));
    }
}

/// The partition count of each of `topics`.
pub fn partition_counts(servers: &str, topics: &[String]) -> Result<Vec<usize>> {
    let consumer: BaseConsumer<super::QuietContext> = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create_with_context(super::QuietContext)
        .map_err(|e| ConnectorError::kafka("connecting", e))?;
    let mut counts = Vec::new();
    for topic in topics {
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(|e| ConnectorError::kafka(format!("looking up topic '{topic}'"), e))?;
        counts.push(
            metadata
                .topics()
                .iter()
                .filter(|t| t.name() == topic.as_str() && t.error().is_none())
                .map(|t| t.partitions().len())
                .sum(),
        );
    }
    Ok(counts)
}

/// Makes sure `topic` exists with `partitions` partitions (an exchange
/// topic of a group job): creates it (replicated as the cluster's default
/// says); one that exists with another count is an error. It is created
/// first and looked up only if it exists, as a look-up may create a
/// missing topic with the broker's default partition count.
pub fn ensure_topic(servers: &str, topic: &str, partitions: usize) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create()
        .map_err(|e| ConnectorError::kafka("connecting", e))?;
    let count = i32::try_from(partitions)
        .map_err(|_| ConnectorError::bad_option("topic", "too many partitions"))?;
    let new = NewTopic::new(topic, count, TopicReplication::Fixed(-1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = futures::executor::block_on(admin.create_topics(&[new], &options))
        .map_err(|e| ConnectorError::kafka(format!("creating topic '{topic}'"), e))?;
    for result in results {
        match result {
            Ok(_) => {
                tracing::info!("created exchange topic '{topic}' ({partitions} partitions)");
            }
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                let existing = partition_counts(servers, &[topic.to_string()])?;
                let n = existing.first().copied().unwrap_or(0);
                if n != partitions {
                    return Err(ConnectorError::bad_option(
                        "topic",
                        format!(
                            "exchange topic '{topic}' has {n} partitions but the group runs {partitions} tasks (it was made for other input topics: delete it, or give the group another name)"
                        ),
                    ));
                }
            }
            Err((name, code)) => {
                return Err(ConnectorError::kafka(
                    format!("creating topic '{name}'"),
                    KafkaError::AdminOp(code),
                ))
            }
        }
    }
    Ok(())
}

//! Planning a group job before the group is joined: the Kafka topics the
//! job reads (on one cluster, co-partitioned), the task count, and each
//! task's graph with its exchanges cut in.
//!
//! In: the job's graph, its connector settings, the group's name. Out: a
//! [`GroupPlan`], or why the job cannot run as a group job.

use std::collections::BTreeSet;

use eddy_engine::distribute::exchanges::{self, Exchange, PartitionedSource};
use eddy_engine::graph::JobGraph;

use crate::{LaunchError, Result};
use eddy_connectors::kafka::exchange::KafkaExchanges;
use eddy_connectors::kafka::group::partition_counts;
use eddy_connectors::{ConnectorConfig, Connectors};

/// What a group job runs, planned before the group is joined: the
/// topics, the task count, and each task's graph with its exchanges cut
/// in.
#[derive(Debug, Clone)]
pub struct GroupPlan {
    pub(super) group: String,
    pub(super) servers: String,
    pub(super) topics: Vec<String>,
    pub(super) partitions: usize,
    pub(super) task_graph: exchanges::TaskGraph,
}

impl GroupPlan {
    /// Plans `graph` as a group job of `group`. Errors: the job reads no
    /// Kafka topic, its topics are on several clusters or are not
    /// co-partitioned, the exchanges cannot be planned.
    pub fn new(graph: &JobGraph, connectors: &ConnectorConfig, group: &str) -> Result<Self> {
        let refused = |message: String| LaunchError::Group {
            group: group.to_string(),
            message,
        };
        let sources = Connectors::new(connectors.clone()).kafka_sources(graph)?;
        let Some(servers) = sources.first().map(|s| s.servers.clone()) else {
            return Err(refused(
                "a group job needs a job that reads Kafka topics (connector = 'kafka' or --input TABLE=kafka://...)".into(),
            ));
        };
        if let Some(other) = sources.iter().find(|s| s.servers != servers) {
            return Err(refused(format!(
                "every Kafka source must use the same cluster ({servers} and {})",
                other.servers
            )));
        }
        let topics: Vec<String> = sources
            .iter()
            .map(|s| s.topic.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let counts = partition_counts(&servers, &topics)?;
        let partitions = counts.first().copied().unwrap_or(0);
        if partitions == 0 || counts.iter().any(|&c| c != partitions) {
            let listed: Vec<String> = topics
                .iter()
                .zip(&counts)
                .map(|(t, c)| format!("{t}: {c}"))
                .collect();
            return Err(refused(format!(
                "a group runs one task per partition number, so the job's topics must have equal partition counts (co-partitioned); they have {}",
                listed.join(", ")
            )));
        }
        let partitioned: Vec<PartitionedSource> = sources
            .iter()
            .map(|s| PartitionedSource {
                table: s.table.clone(),
                key_column: s.key_column.clone(),
            })
            .collect();
        let exchange_topics = KafkaExchanges {
            servers: servers.clone(),
            group: group.to_string(),
        };
        let task_graph = exchanges::plan(graph, &partitioned, &exchange_topics, partitions)
            .map_err(|e| refused(e.to_string()))?;
        Ok(Self {
            group: group.to_string(),
            servers,
            topics,
            partitions,
            task_graph,
        })
    }

    /// The consumer group it was planned for.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The graph each task runs (the job's, with the exchanges cut in).
    pub fn task_graph(&self) -> &JobGraph {
        &self.task_graph.graph
    }

    /// The exchanges cut into each task's graph.
    pub fn exchanges(&self) -> &[Exchange] {
        &self.task_graph.exchanges
    }

    /// The job's task count (the topics' partition count).
    pub fn partitions(&self) -> usize {
        self.partitions
    }
}

//! Where a job scaled out over a consumer group needs exchanges, and the
//! task graph with them in.
//!
//! In: the job's graph, its Kafka sources (with their `key_column`), the
//! group's name and its task count. Out: a [`TaskGraph`]: the graph every
//! task runs, with each exchange cut in, and the exchange topics to create.
//!
//! A task holds one partition number of every input topic, so a stateful
//! operator keyed by the topics' key sees all rows of its keys there. One
//! keyed otherwise (or not keyed: a global aggregate) would see a part of
//! them; its inputs are cut, as Kafka Streams repartitions:
//!
//! ```text
//!  before:  payments ─> calc ──hash(method)──> window_aggregate ─> sink
//!  after:   payments ─> calc ─> exchange sink (topic G.exchange.window_aggregate-3.0, hashed by method)
//!           exchange source (that topic, partition p) ──hash(method)──> window_aggregate ─> sink
//! ```
//!
//! Every task writes every partition of the exchange topic and reads its
//! own, so each key's rows meet in one task; the exchange carries
//! watermarks (see `eddy_connectors::kafka::exchange`). Operators after an
//! exchange are checked again against the exchange's key, so a query keyed
//! three ways gets two exchanges.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use eddy_connectors::kafka::exchange::{is_key_only, KEY_ONLY_PREFIX};
use eddy_connectors::KafkaTopicRef;
use eddy_engine::graph::{ConnectorSpec, Edge, JobGraph, Node, NodeId, NodeKind, Partitioning};
use eddy_engine::operators::calc::{CalcPlan, CalcStep};
use eddy_engine::source::{BadRowPolicy, SourceColumn, SourceLayout};

use crate::error::{CliError, Result};

/// An exchange: the rows into one input of a keyed operator go through a
/// topic of the group's partition count, hashed by the operator's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The topic.
    pub topic: String,
    /// The operator whose input it feeds, and which input.
    pub consumer: String,
    /// The columns hashed (empty: every row to partition 0).
    pub keys: Vec<String>,
}

/// The graph each task of a group runs.
#[derive(Debug, Clone)]
pub struct TaskGraph {
    /// The job's graph with every exchange cut in.
    pub graph: JobGraph,
    /// The exchanges, in the order they were cut.
    pub exchanges: Vec<Exchange>,
}

/// Which rows a node's output is spread by: the domain (0 = the input
/// topics' partitions, n = the n-th set of exchanges) and the columns
/// known to be the partitioning key there.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spread {
    domain: usize,
    keys: BTreeSet<String>,
}

/// An input edge to cut, and the key columns its rows hash by.
struct Cut {
    consumer: NodeId,
    input: usize,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
}

fn hashed_exprs(edge: &Edge) -> Vec<Arc<dyn PhysicalExpr>> {
    match &edge.partitioning {
        Partitioning::Hash(exprs) => exprs.clone(),
        Partitioning::Forward => Vec::new(),
    }
}

fn column_names(exprs: &[Arc<dyn PhysicalExpr>]) -> BTreeSet<String> {
    exprs
        .iter()
        .filter_map(|e| e.downcast_ref::<Column>())
        .map(|c| c.name().to_string())
        .collect()
}

/// A topic-name-safe form of a node's name.
fn topic_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Plans the task graph; see the module docs. `servers` is the cluster
/// the exchange topics live on, `tasks` the group's task count.
pub fn plan(
    graph: &JobGraph,
    sources: &[KafkaTopicRef],
    group: &str,
    servers: &str,
    tasks: usize,
) -> Result<TaskGraph> {
    let mut spread: Vec<Spread> = Vec::with_capacity(graph.nodes.len());
    let mut cuts: Vec<Cut> = Vec::new();
    let mut domains = 1;
    for (id, node) in graph.nodes.iter().enumerate() {
        let inputs: Vec<&Spread> = node.inputs.iter().map(|e| &spread[e.from]).collect();
        let same_domain = inputs.windows(2).all(|w| w[0].domain == w[1].domain);
        let here = match &node.kind {
            NodeKind::Source { spec, .. } => {
                let Some(topic) = sources.iter().find(|s| s.table == spec.table) else {
                    return Err(CliError::Usage(format!(
                        "--group: table {} is not read from Kafka, so every task would read all of it; read it from a topic (connector = 'kafka' or --input {}=kafka://...)",
                        spec.table, spec.table
                    )));
                };
                Spread {
                    domain: 0,
                    keys: topic.key_column.iter().cloned().collect(),
                }
            }
            NodeKind::Sink { .. } => inputs.first().map_or(
                Spread {
                    domain: 0,
                    keys: BTreeSet::new(),
                },
                |s| (*s).clone(),
            ),
            NodeKind::Operator(plan) if matches!(plan.kind(), "calc" | "union") => {
                if !same_domain {
                    return Err(CliError::Usage(format!(
                        "--group: {} joins streams that are spread over the tasks by different keys; key the operators before it alike",
                        node.name
                    )));
                }
                let mut keys = inputs.first().map(|s| s.keys.clone()).unwrap_or_default();
                for other in inputs.iter().skip(1) {
                    keys = keys.intersection(&other.keys).cloned().collect();
                }
                Spread {
                    domain: inputs.first().map_or(0, |s| s.domain),
                    keys,
                }
            }
            NodeKind::Operator(_) => {
                let names: Vec<BTreeSet<String>> = node
                    .inputs
                    .iter()
                    .map(|e| column_names(&hashed_exprs(e)))
                    .collect();
                let keyed_alike = same_domain
                    && node.inputs.iter().zip(&names).zip(&inputs).all(
                        |((edge, names), spread)| {
                            !hashed_exprs(edge).is_empty()
                                && names.iter().any(|n| spread.keys.contains(n))
                        },
                    );
                let own: BTreeSet<String> = names.iter().flatten().cloned().collect();
                if keyed_alike {
                    Spread {
                        domain: inputs.first().map_or(0, |s| s.domain),
                        keys: own,
                    }
                } else {
                    for (input, edge) in node.inputs.iter().enumerate() {
                        cuts.push(Cut {
                            consumer: id,
                            input,
                            exprs: hashed_exprs(edge),
                        });
                    }
                    domains += 1;
                    Spread {
                        domain: domains - 1,
                        keys: own,
                    }
                }
            }
        };
        spread.push(here);
    }
    cut_in(graph, cuts, group, servers, tasks)
}

/// Cuts every edge of `cuts` into an exchange sink and source.
fn cut_in(
    graph: &JobGraph,
    cuts: Vec<Cut>,
    group: &str,
    servers: &str,
    tasks: usize,
) -> Result<TaskGraph> {
    let mut out = graph.clone();
    let mut exchanges = Vec::with_capacity(cuts.len());
    let mut sources = Vec::with_capacity(cuts.len());
    for cut in &cuts {
        let consumer = &graph.nodes[cut.consumer];
        let edge = &consumer.inputs[cut.input];
        let topic = format!(
            "{}.exchange.{}.{}",
            topic_part(group),
            topic_part(&consumer.name),
            cut.input
        );
        let table = format!("exchange:{}.{}", consumer.name, cut.input);
        let schema = graph.port_schema(edge.from, edge.port);
        // Keys that are columns hash as they are; others are computed by a
        // calc into key-only columns the exchange does not send.
        let mut keys = Vec::with_capacity(cut.exprs.len());
        let mut computed: Vec<(Arc<dyn PhysicalExpr>, String)> = Vec::new();
        for expr in &cut.exprs {
            match expr.downcast_ref::<Column>() {
                Some(c) => keys.push(c.name().to_string()),
                None => {
                    let name = format!("{KEY_ONLY_PREFIX}{}", computed.len());
                    keys.push(name.clone());
                    computed.push((expr.clone(), name));
                }
            }
        }
        let (sink_from, sink_port, sink_schema) = if computed.is_empty() {
            (edge.from, edge.port, schema.clone())
        } else {
            let mut fields: Vec<Field> =
                schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            let mut exprs: Vec<Arc<dyn PhysicalExpr>> = schema
                .fields()
                .iter()
                .enumerate()
                .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>)
                .collect();
            for (expr, name) in &computed {
                let data_type = expr.data_type(&schema).map_err(|e| {
                    CliError::Usage(format!("--group: the key of {}: {e}", consumer.name))
                })?;
                fields.push(Field::new(name, data_type, true));
                exprs.push(expr.clone());
            }
            let with_keys: SchemaRef = Arc::new(Schema::new(fields));
            let mut calc = CalcPlan::new(schema.clone());
            calc.push(CalcStep::Project {
                exprs,
                schema: with_keys.clone(),
            });
            let id = out.add(Node {
                name: format!("calc#{}", out.nodes.len()),
                kind: NodeKind::Operator(Arc::new(calc)),
                inputs: vec![Edge {
                    from: edge.from,
                    port: edge.port,
                    partitioning: Partitioning::Forward,
                }],
                schema: with_keys.clone(),
            });
            (id, 0, with_keys)
        };
        let options = |extra: &[(&str, String)]| -> BTreeMap<String, String> {
            let mut options: BTreeMap<String, String> = [
                ("bootstrap_servers", servers.to_string()),
                ("topic", topic.clone()),
                (
                    "format",
                    eddy_connectors::kafka::exchange::FORMAT.to_string(),
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            options.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
            options
        };
        out.add(Node {
            name: table.clone(),
            kind: NodeKind::Sink {
                spec: ConnectorSpec {
                    table: table.clone(),
                    connector: "kafka".into(),
                    options: options(&[
                        ("partition_columns", keys.join(",")),
                        ("partitions", tasks.to_string()),
                        ("delivery", "exactly_once".into()),
                    ]),
                    schema: sink_schema.clone(),
                    declared_at: String::new(),
                },
            },
            inputs: vec![Edge {
                from: sink_from,
                port: sink_port,
                partitioning: Partitioning::Forward,
            }],
            schema: sink_schema,
        });
        let layout = SourceLayout {
            physical_schema: schema.clone(),
            output_schema: schema.clone(),
            columns: (0..schema.fields().len())
                .map(SourceColumn::Physical)
                .collect(),
            event_time: None,
            idle_timeout: None,
            bad_rows: BadRowPolicy::Fail,
            change_feed_key: None,
        };
        sources.push(Node {
            name: table.clone(),
            kind: NodeKind::Source {
                spec: ConnectorSpec {
                    table,
                    connector: "kafka".into(),
                    options: options(&[("producers", tasks.to_string())]),
                    schema: schema.clone(),
                    declared_at: String::new(),
                },
                layout,
            },
            inputs: Vec::new(),
            schema,
        });
        exchanges.push(Exchange {
            topic,
            consumer: format!("{} input {}", consumer.name, cut.input),
            keys: keys
                .iter()
                .zip(&cut.exprs)
                .map(|(k, e)| {
                    if is_key_only(k) {
                        e.to_string()
                    } else {
                        k.clone()
                    }
                })
                .collect(),
        });
    }
    // Sources go first (they have no inputs); each insertion moves every
    // node up by one, the consumers and the sources put in before included.
    for (inserted, (cut, source)) in cuts.iter().zip(sources).enumerate() {
        out.insert_first(source);
        let consumer = cut.consumer + inserted + 1;
        out.nodes[consumer].inputs[cut.input].from = 0;
        out.nodes[consumer].inputs[cut.input].port = 0;
    }
    Ok(TaskGraph {
        graph: out,
        exchanges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_sql::SqlFile;

    const PAYMENTS: &str = "CREATE TABLE payments (
           order_id VARCHAR, method VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL,
           event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
           WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
         ) WITH (connector = 'kafka', bootstrap_servers = 'localhost:9092', topic = 'payments');
         CREATE TABLE out (k VARCHAR, n BIGINT) WITH (connector = 'blackhole');";

    fn graph(query: &str) -> JobGraph {
        let files = [SqlFile {
            name: "job.sql".into(),
            text: format!("{PAYMENTS}\n{query}"),
        }];
        eddy_sql::compile(&files, &BTreeMap::new()).unwrap().graph
    }

    fn payments_keyed_by(key: &str) -> Vec<KafkaTopicRef> {
        vec![KafkaTopicRef {
            table: "payments".into(),
            servers: "localhost:9092".into(),
            topic: "payments".into(),
            key_column: Some(key.into()),
        }]
    }

    const BY_METHOD: &str = "INSERT INTO out SELECT method, count(*)
         FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
         GROUP BY method, window_start, window_end;";

    #[test]
    fn an_operator_keyed_by_the_topics_key_needs_no_exchange() {
        let plan = plan(
            &graph(BY_METHOD),
            &payments_keyed_by("method"),
            "g",
            "b:1",
            4,
        )
        .unwrap();
        assert!(plan.exchanges.is_empty());
        assert_eq!(plan.graph.nodes.len(), graph(BY_METHOD).nodes.len());
    }

    #[test]
    fn an_operator_keyed_otherwise_reads_an_exchange_its_input_writes() {
        let original = graph(BY_METHOD);
        let plan = plan(
            &original,
            &payments_keyed_by("order_id"),
            "my group",
            "b:1",
            4,
        )
        .unwrap();
        assert_eq!(plan.exchanges.len(), 1);
        let exchange = &plan.exchanges[0];
        assert_eq!(exchange.keys, vec!["method".to_string()]);
        assert!(
            exchange
                .topic
                .starts_with("my-group.exchange.window_aggregate-"),
            "{}",
            exchange.topic
        );
        // A source put first, a sink added: two nodes more.
        let nodes = &plan.graph.nodes;
        assert_eq!(nodes.len(), original.nodes.len() + 2);
        let NodeKind::Source { spec, layout } = &nodes[0].kind else {
            panic!("the exchange source is not first");
        };
        assert_eq!(spec.options["producers"], "4");
        assert!(
            layout.event_time.is_none(),
            "its watermark comes from markers"
        );
        let NodeKind::Sink { spec } = &nodes[nodes.len() - 1].kind else {
            panic!("the exchange sink is not last");
        };
        assert_eq!(spec.options["partition_columns"], "method");
        assert_eq!(spec.options["topic"], exchange.topic);
        // The window now reads the exchange source, still hashed by method.
        let window = nodes
            .iter()
            .find(|n| n.name.starts_with("window_aggregate"))
            .unwrap();
        assert_eq!(window.inputs[0].from, 0);
        assert!(matches!(
            window.inputs[0].partitioning,
            Partitioning::Hash(_)
        ));
        // Edges still point backwards.
        for (id, node) in nodes.iter().enumerate() {
            assert!(node.inputs.iter().all(|e| e.from < id), "{}", node.name);
        }
    }

    #[test]
    fn a_table_not_read_from_kafka_is_refused_with_the_fix() {
        let err = plan(&graph(BY_METHOD), &[], "g", "b:1", 4)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("table payments is not read from Kafka"),
            "{err}"
        );
    }
}

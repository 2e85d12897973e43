//! Where a job scaled out over tasks needs exchanges, and the task graph
//! with them in.
//!
//! In: the job's graph, how its sources are partitioned
//! ([`PartitionedSource`]: a task reads one partition number of every
//! source, keyed by a column or not), the task count, and the connector
//! that carries exchanges ([`ExchangeTopics`]; Kafka's in
//! `eddy_connectors::kafka::exchange`). Out: a [`TaskGraph`]: the graph
//! every task runs, with each exchange cut in, and the exchanges to create.
//!
//! A task holds one partition number of every input, so an operator that
//! declares [`Distribution::Keyed`] by the inputs' key sees all rows of
//! its keys there. One keyed otherwise (or [`Distribution::Single`]: a
//! global aggregate) would see a part of them; its inputs are cut, as
//! Kafka Streams repartitions:
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

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::error::{EngineError, Result};
use crate::graph::{ConnectorSpec, Edge, JobGraph, Node, NodeId, NodeKind};
use crate::operators::calc::{CalcPlan, CalcStep};
use crate::source::{BadRowPolicy, SourceColumn, SourceLayout};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;

/// Prefix of the columns an exchange's writer adds for a key that is an
/// expression, not a column: the writer hashes them and does not send them.
pub const KEY_ONLY_PREFIX: &str = "__eddy_key_";

/// Whether a column is an exchange's computed key, not a row's column.
pub fn is_key_only(name: &str) -> bool {
    name.starts_with(KEY_ONLY_PREFIX)
}

/// A source as the tasks read it: each task one partition number of it,
/// the rows of a partition sharing `key_column`'s hash when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionedSource {
    /// The source table.
    pub table: String,
    /// The column the source is partitioned by.
    pub key_column: Option<String>,
}

/// The connector that carries exchanges between tasks: every task writes
/// every partition of an exchange and reads its own.
pub trait ExchangeTopics {
    /// The name of the exchange into input `input` of `consumer` (a Kafka
    /// topic's name).
    fn name(&self, consumer: &str, input: usize) -> String;
    /// The sink table writing rows of `schema` into exchange `name`,
    /// partitioned by the hash of `keys` (columns of `schema`; none: every
    /// row to partition 0) over `tasks` partitions.
    fn sink(&self, name: &str, keys: &[String], tasks: usize) -> ConnectorSpec;
    /// The source table reading a task's partition of exchange `name`,
    /// written by `tasks` tasks.
    fn source(&self, name: &str, tasks: usize) -> ConnectorSpec;
}

/// An exchange: the rows into one input of a keyed operator go through a
/// topic of the group's partition count, hashed by the operator's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The topic ([`ExchangeTopics::name`]).
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

/// What input `input` of `node` needs its rows hashed by (none: one
/// task, or any).
fn hashed_exprs(node: &Node, input: usize) -> Vec<Arc<dyn PhysicalExpr>> {
    node.kind.input_distribution(input).keys().to_vec()
}

fn column_names(exprs: &[Arc<dyn PhysicalExpr>]) -> BTreeSet<String> {
    exprs
        .iter()
        .filter_map(|e| e.downcast_ref::<Column>())
        .map(|c| c.name().to_string())
        .collect()
}

/// Plans the task graph; see the module docs. `tasks` is the task count.
pub fn plan(
    graph: &JobGraph,
    sources: &[PartitionedSource],
    topics: &dyn ExchangeTopics,
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
                    return Err(EngineError::Config(format!(
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
            NodeKind::Operator(plan) if plan.distribution().is_any() => {
                if !same_domain {
                    return Err(EngineError::Config(format!(
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
                let names: Vec<BTreeSet<String>> = (0..node.inputs.len())
                    .map(|input| column_names(&hashed_exprs(node, input)))
                    .collect();
                let keyed_alike = same_domain
                    && names
                        .iter()
                        .zip(&inputs)
                        .enumerate()
                        .all(|(input, (names, spread))| {
                            !hashed_exprs(node, input).is_empty()
                                && names.iter().any(|n| spread.keys.contains(n))
                        });
                let own: BTreeSet<String> = names.iter().flatten().cloned().collect();
                if keyed_alike {
                    Spread {
                        domain: inputs.first().map_or(0, |s| s.domain),
                        keys: own,
                    }
                } else {
                    for input in 0..node.inputs.len() {
                        cuts.push(Cut {
                            consumer: id,
                            input,
                            exprs: hashed_exprs(node, input),
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
    cut_in(graph, cuts, topics, tasks)
}

/// Cuts every edge of `cuts` into an exchange sink and source.
fn cut_in(
    graph: &JobGraph,
    cuts: Vec<Cut>,
    topics: &dyn ExchangeTopics,
    tasks: usize,
) -> Result<TaskGraph> {
    let mut out = graph.clone();
    let mut exchanges = Vec::with_capacity(cuts.len());
    let mut sources = Vec::with_capacity(cuts.len());
    for cut in &cuts {
        let consumer = &graph.nodes[cut.consumer];
        let edge = &consumer.inputs[cut.input];
        let topic = topics.name(&consumer.name, cut.input);
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
                    EngineError::Config(format!("--group: the key of {}: {e}", consumer.name))
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
                inputs: vec![Edge::new(edge.from, edge.port)],
                schema: with_keys.clone(),
                uid: None,
            });
            (id, 0, with_keys)
        };
        out.add(Node {
            name: table.clone(),
            kind: NodeKind::Sink {
                spec: ConnectorSpec {
                    table: table.clone(),
                    schema: sink_schema.clone(),
                    ..topics.sink(&topic, &keys, tasks)
                },
            },
            inputs: vec![Edge::new(sink_from, sink_port)],
            schema: sink_schema,
            uid: None,
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
                    schema: schema.clone(),
                    ..topics.source(&topic, tasks)
                },
                layout,
            },
            inputs: Vec::new(),
            schema,
            uid: None,
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

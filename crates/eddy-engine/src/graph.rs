//! The job graph: an immutable DAG of sources, operators and sinks that the
//! SQL planner builds and the runtime executes.
//!
//! Nodes are stored in topological order (every edge points from a lower to
//! a higher index). An [`Edge`] names the producing node, the producer's
//! output port (0 = main, [`crate::operator::LATE_PORT`] = a source's late
//! rows, [`crate::operator::BAD_PORT`] = its bad rows). How rows are
//! routed when the consumer runs as several parallel instances is the
//! consumer's own declaration ([`JobGraph::input_distribution`]), so the
//! edges carry none. Nothing in a graph holds per-run state:
//! sources and sinks are opened through a [`ConnectorFactory`] and operators
//! are created from their [`OperatorPlan`] when a job starts, so the same
//! graph can be explained, run, and run again.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{EngineError, Result};
use crate::operator::OperatorPlan;
use crate::sink::{SinkMode, SinkWriter};
use crate::source::{ChangeMetadata, SourceLayout, SourceReader};
use crate::state::StateSnapshot;

/// Index of a node in [`JobGraph::nodes`].
pub type NodeId = usize;

/// A connector as declared in `CREATE TABLE ... WITH (connector = ..., ...)`.
#[derive(Debug, Clone)]
pub struct ConnectorSpec {
    /// The table's name.
    pub table: String,
    /// The `connector` option (`file`, `generator`, `stdout`, `ndjson`, ...).
    pub connector: String,
    /// All other options, keys lower-cased.
    pub options: BTreeMap<String, String>,
    /// Sources: the physical columns the connector must produce.
    /// Sinks: the columns the sink receives.
    pub schema: SchemaRef,
    /// Where the table is declared, for errors; `None` for tables the
    /// engine adds (a group job's exchanges).
    pub declared_at: Option<crate::position::Position>,
    /// The table's `PRIMARY KEY (...)` columns (empty: none declared). A
    /// sink that merges by key (Delta) applies changes by it.
    pub primary_key: Vec<String>,
    /// Sources: a condition every row the job uses from this table meets
    /// (the planner's pushed-down `WHERE`), so a connector that can tell
    /// from statistics that a file or row group holds no such row may skip
    /// it. Advisory: the query still filters what the source returns.
    pub filter: Option<SourceFilter>,
    /// Sources: physical columns (indices into [`ConnectorSpec::schema`])
    /// that no query of the job reads, nor the table's event time, primary
    /// key or computed columns (empty: every column is read). Advisory, like
    /// `filter`: a connector may leave their values undecoded and hand
    /// on blanks in their place (an empty string, zero, `false`), once it
    /// has checked each value is of its column's type, so which rows are
    /// bad does not change. The rows then go straight to the queries'
    /// projections, which drop these columns.
    pub unread_columns: Vec<usize>,
    /// Sinks: what the connector adds to the sink's `eddy explain` line (a
    /// Kafka sink's topic and delivery guarantee), asked of it when the
    /// plan is compiled ([`ConnectorFacts::explain_sink`]); `None`: nothing.
    pub explain: Option<String>,
}

/// A source's pushed-down condition (see [`ConnectorSpec::filter`]).
///
/// Skipping rows must change no result: not which rows are late, nor
/// which are bad. A connector that skips rows hands their
/// `observed_columns` over ([`crate::source::SourceContext::skipped`]),
/// and the source judges them as if it had read them (their event times
/// count toward the watermark; one a computed column fails on, or without
/// a usable event time, is reported bad), sending none on.
#[derive(Debug, Clone)]
pub struct SourceFilter {
    /// The condition, over [`ConnectorSpec::schema`] (the physical columns).
    pub predicate: Arc<dyn PhysicalExpr>,
    /// The condition as SQL, for `eddy explain` and logs.
    pub text: String,
    /// The physical columns the table's event time and computed columns
    /// are made from (empty: the table has neither, and skipped rows need
    /// no decoding).
    pub observed_columns: Vec<usize>,
}

/// Opens the connectors a graph names. Overrides such as `--input` and
/// `--output` live in the factory's own configuration.
pub trait ConnectorFactory: Send + Sync {
    /// Checks the factory's configuration against a graph before the job
    /// starts (an override naming no table, say). Every front end gets the
    /// same checks because the runtime calls this.
    fn check(&self, _graph: &JobGraph) -> Result<()> {
        Ok(())
    }
    /// Opens a source reader for `spec`; `resume` is the reader's
    /// [`SourceReader::position`] from the checkpoint the job resumes from
    /// (`Null` from a reader that has no position: the connector decides
    /// whether it can go on, and must not silently start over).
    fn open_source(
        &self,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>>;
    /// Opens a sink writer for `spec`.
    fn open_sink(&self, spec: &ConnectorSpec, mode: SinkMode<'_>) -> Result<Box<dyn SinkWriter>>;
    /// Opens a table a lookup join reads by key ([`crate::lookup`]).
    fn open_lookup(
        &self,
        table: &crate::lookup::LookupTable,
    ) -> Result<Box<dyn crate::lookup::LookupSource>> {
        Err(EngineError::Config(format!(
            "table '{}' (connector '{}') cannot be read by key",
            table.spec.table, table.spec.connector
        )))
    }
    /// Publishes what a transactional sink pre-committed (its
    /// [`SinkWriter::precommit`] state) once the checkpoint holding it is
    /// complete. Must be idempotent: a resumed job commits its checkpoint
    /// again.
    fn commit_sink(&self, _spec: &ConnectorSpec, _state: &StateSnapshot) -> Result<()> {
        Ok(())
    }

    /// What the connectors did beyond rows (a Delta sink's commits, files
    /// and bytes), as lines for the job's report; none by default.
    fn report(&self) -> Vec<String> {
        Vec::new()
    }

    /// Tells a source's connector that a checkpoint holding its reader at
    /// `position` is complete (a Kafka source commits the offsets to its
    /// consumer group, for monitoring; the checkpoint stays the record of
    /// progress). A failure here is logged, not fatal.
    fn source_checkpointed(&self, _spec: &ConnectorSpec, _position: &serde_json::Value) {}
}

/// What a front end asks of the connectors while it plans, before any
/// connector opens (the connectors' registry answers).
pub trait ConnectorFacts: Send + Sync + std::fmt::Debug {
    /// Whether a table of `connector` joined `FOR SYSTEM_TIME AS OF` a
    /// processing-time column is read by key as probe rows come (a
    /// database table: [`crate::lookup`]) rather than streamed in whole.
    fn looked_up_by_key(&self, connector: &str) -> bool;

    /// Whether a source table of `connector` with `options` reads a
    /// table's changes keyed by its primary key — upserts and deletes by
    /// key, as a database's change stream gives them — which the planner
    /// turns into a changelog (a `changelog_normalize` step behind the
    /// source); `false`: rows as its format reads them.
    fn reads_changes_by_key(&self, _connector: &str, _options: &BTreeMap<String, String>) -> bool {
        false
    }

    /// Whether a record of `connector` carries a key beside its value (a
    /// Kafka record), which an upsert format (`upsert-json`) reads as the
    /// row's primary key.
    fn records_have_keys(&self, _connector: &str) -> bool {
        false
    }

    /// The metadata a table of `connector` can declare as columns
    /// (`METADATA FROM 'key'`), by key, beyond its format's (a Debezium
    /// envelope's); none by default.
    fn metadata_keys(&self, _connector: &str) -> &'static [(&'static str, ChangeMetadata)] {
        &[]
    }

    /// What a sink's connector adds about it to `eddy explain`'s line
    /// (a Kafka sink's topic and delivery guarantee); none by default.
    fn explain_sink(&self, _spec: &ConnectorSpec) -> Option<String> {
        None
    }
}

impl NodeKind {
    /// Where a node of this kind needs the rows of its input `input`; see
    /// [`JobGraph::input_distribution`].
    pub fn input_distribution(&self, input: usize) -> crate::operator::Distribution {
        match self {
            NodeKind::Operator(plan) => plan.required_input_distribution(input),
            NodeKind::Source { .. } | NodeKind::Sink { .. } => crate::operator::Distribution::Any,
        }
    }

    /// The keys input `input` is hashed by, as DataFusion writes them
    /// (none unless hashed).
    pub fn input_keys(&self, input: usize) -> Vec<String> {
        self.input_distribution(input)
            .keys()
            .iter()
            .map(|k| k.to_string())
            .collect()
    }
}

/// One input of a node.
#[derive(Debug, Clone)]
pub struct Edge {
    /// The producing node.
    pub from: NodeId,
    /// The producer's output port.
    pub port: usize,
}

impl Edge {
    /// The edge from `from`'s output port `port`. How its rows are routed
    /// to parallel instances of the node reading it is that node's
    /// declaration ([`JobGraph::input_distribution`]), not the edge's.
    pub fn new(from: NodeId, port: usize) -> Self {
        Self { from, port }
    }
}

/// What a node does.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// Reads a table's connector and turns rows into a stream.
    Source {
        /// The connector to open.
        spec: ConnectorSpec,
        /// Computed columns, event time and lateness.
        layout: SourceLayout,
    },
    /// Transforms its inputs.
    Operator(Arc<dyn OperatorPlan>),
    /// Writes its inputs through a connector.
    Sink {
        /// The connector to open.
        spec: ConnectorSpec,
    },
}

/// A node of the job graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Human name: the table for sources and sinks, `kind#id` for operators.
    pub name: String,
    /// What the node does.
    pub kind: NodeKind,
    /// Its inputs, in input-index order.
    pub inputs: Vec<Edge>,
    /// Schema of what the node emits on port 0 (a sink: what it receives).
    pub schema: SchemaRef,
    /// The name the user gave the query this operator was planned for:
    /// `uid <name>` for a statement with a `/*+ uid('<name>') */` hint,
    /// `view <name>` for a view's operators; `None` otherwise (and for
    /// sources and sinks, which are named by their tables). A changed
    /// query's state is mapped by it where the derived identity no longer
    /// matches (see [`JobGraph::named_identities`]).
    pub uid: Option<String>,
}

/// A dataflow graph in topological order, as planned (what runs is a
/// [`crate::distribute::physical::PhysicalGraph`] made from it).
#[derive(Debug, Clone, Default)]
pub struct JobGraph {
    /// The nodes; edges point from lower to higher indices.
    pub nodes: Vec<Node>,
}

impl JobGraph {
    /// Appends a node and returns its id. Inputs must already exist.
    pub fn add(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Where `node` needs the rows of its input `input`
    /// ([`OperatorPlan::required_input_distribution`]); a sink takes them
    /// as they come ([`Distribution::Any`]).
    ///
    /// [`Distribution::Any`]: crate::operator::Distribution::Any
    pub fn input_distribution(&self, node: NodeId, input: usize) -> crate::operator::Distribution {
        self.nodes[node].kind.input_distribution(input)
    }

    /// The schema of what `node` emits on `port` (a source's late port
    /// adds `watermark_ms` and `lag_ms`; its bad port is the bad-row table).
    pub fn port_schema(&self, node: NodeId, port: usize) -> SchemaRef {
        let n = &self.nodes[node];
        match (&n.kind, port) {
            (NodeKind::Source { layout, .. }, crate::operator::LATE_PORT) => layout.late_schema(),
            (NodeKind::Source { .. }, crate::operator::BAD_PORT) => {
                crate::source::bad_rows::bad_row_schema()
            }
            _ => n.schema.clone(),
        }
    }

    /// Puts a node with no inputs (a source) first, so that any node can
    /// read it; every other node's id moves up by one. Returns its id (0).
    pub fn insert_first(&mut self, node: Node) -> NodeId {
        debug_assert!(node.inputs.is_empty(), "a node put first has no inputs");
        for other in &mut self.nodes {
            for edge in &mut other.inputs {
                edge.from += 1;
            }
        }
        self.nodes.insert(0, node);
        0
    }

    /// Consumers of `(node, port)`: `(consumer, input index)` pairs.
    pub fn consumers(&self, node: NodeId, port: usize) -> Vec<(NodeId, usize)> {
        let mut out = Vec::new();
        for (id, n) in self.nodes.iter().enumerate() {
            for (input, edge) in n.inputs.iter().enumerate() {
                if edge.from == node && edge.port == port {
                    out.push((id, input));
                }
            }
        }
        out
    }

    /// Number of output ports a node has.
    pub fn port_count(&self, node: NodeId) -> usize {
        match &self.nodes[node].kind {
            NodeKind::Source { .. } => 3,
            NodeKind::Operator(plan) => plan.output_ports(),
            NodeKind::Sink { .. } => 0,
        }
    }

    /// Removes nodes whose output nobody consumes (operators only; sources
    /// and sinks stay), renumbering edges. Used after planning.
    pub fn prune_dead_operators(&mut self) {
        loop {
            let dead: Option<NodeId> = (0..self.nodes.len()).rev().find(|&id| {
                matches!(self.nodes[id].kind, NodeKind::Operator(_))
                    && !self
                        .nodes
                        .iter()
                        .any(|n| n.inputs.iter().any(|e| e.from == id))
            });
            let Some(dead) = dead else { return };
            self.nodes.remove(dead);
            for node in &mut self.nodes {
                for edge in &mut node.inputs {
                    if edge.from > dead {
                        edge.from -= 1;
                    }
                }
            }
        }
    }

    /// One node as `eddy explain` prints it: what it does, where its inputs
    /// come from, and its schema, interval literals written as SQL writes
    /// them ([`crate::interval_text`]).
    pub fn describe_node(&self, id: NodeId) -> String {
        crate::interval_text::readable_intervals(&self.numbered_text(id))
    }

    /// [`JobGraph::describe_node`] with names as DataFusion gives them.
    fn numbered_text(&self, id: NodeId) -> String {
        format!("#{id} {}", self.node_text(id, &|from| format!("#{from}")))
    }

    /// [`JobGraph::describe_node`] without the node's own number, each
    /// input named by `input`.
    pub(crate) fn node_text(&self, id: NodeId, input: &dyn Fn(NodeId) -> String) -> String {
        self.text_of(&self.nodes[id], input)
    }

    /// [`JobGraph::node_text`] of `node`, a node of this graph or one in
    /// its place.
    pub(crate) fn text_of(&self, node: &Node, input: &dyn Fn(NodeId) -> String) -> String {
        let what = match &node.kind {
            NodeKind::Source { spec, layout } => {
                let time = match layout.event_time {
                    Some(et) => format!(
                        ", event time {} (watermark = max - {}ms, allowed lateness {}ms)",
                        layout.output_schema.field(et.column).name(),
                        et.bound_ms,
                        et.allowed_lateness_ms
                    ),
                    None => ", no event time".to_string(),
                };
                let filter = match &spec.filter {
                    Some(filter) => format!(", pushed filter: {}", filter.text),
                    None => String::new(),
                };
                format!(
                    "source {} [connector={}{}{}]",
                    spec.table, spec.connector, time, filter
                )
            }
            NodeKind::Operator(plan) => {
                format!("{} {}", plan.kind(), plan.describe())
            }
            NodeKind::Sink { spec } => match &spec.explain {
                Some(detail) => {
                    format!(
                        "sink {} [connector={}, {detail}]",
                        spec.table, spec.connector
                    )
                }
                None => format!("sink {} [connector={}]", spec.table, spec.connector),
            },
        };
        let inputs: Vec<String> = node
            .inputs
            .iter()
            .enumerate()
            .map(|(index, e)| {
                let port = match (&self.nodes[e.from].kind, e.port) {
                    (_, 0) => String::new(),
                    (NodeKind::Source { .. }, crate::operator::LATE_PORT) => ".late".into(),
                    (NodeKind::Source { .. }, _) => ".bad".into(),
                    // An operator's other ports (a key split's instances).
                    (_, port) => format!(".{port}"),
                };
                let keys = node.kind.input_keys(index);
                let part = match keys.is_empty() {
                    true => String::new(),
                    false => format!(" hash({})", keys.join(", ")),
                };
                format!("{}{}{}", input(e.from), port, part)
            })
            .collect();
        let arrow = if inputs.is_empty() {
            String::new()
        } else {
            format!(" <- {}", inputs.join(", "))
        };
        let cols: Vec<String> = node
            .schema
            .fields()
            .iter()
            .filter(|f| !crate::changelog::is_row_kind_field(f))
            .map(|f| format!("{}: {}", f.name(), f.data_type()))
            .collect();
        // Append-only nodes say nothing; updating ones say so, with their
        // upsert key.
        let mode = if crate::changelog::is_updating(&node.schema) {
            let key = crate::changelog::upsert_key(&node.schema);
            if key.is_empty() {
                "\n     changelog: updating (+I -U +U -D)".to_string()
            } else {
                format!(
                    "\n     changelog: updating (+I -U +U -D), upsert key ({})",
                    key.join(", ")
                )
            }
        } else {
            String::new()
        };
        format!("{what}{arrow}\n     schema: {}{mode}", cols.join(", "))
    }

    /// What a node's checkpointed state depends on: its description, its
    /// inputs and schema and, for connectors, every option. A resumed job
    /// refuses state whose fingerprint differs from the node's.
    pub fn fingerprint(&self, id: NodeId) -> String {
        format!(
            "{}{}",
            self.shape_of(&self.nodes[id], &|from| format!("#{from}")),
            self.options_text(id)
        )
    }

    /// [`JobGraph::fingerprint`] as checkpoints written before shapes
    /// recorded it: `eddy explain`'s text of the node. Only compared with
    /// such checkpoints, so that they still restore.
    pub fn legacy_fingerprint(&self, id: NodeId) -> String {
        format!("{}{}", self.numbered_text(id), self.options_text(id))
    }

    /// `node`'s shape ([`crate::shape`]): what its state depends on, as
    /// data, each input named by `input`.
    pub(crate) fn shape_of(&self, node: &Node, input: &dyn Fn(NodeId) -> String) -> String {
        let what = match &node.kind {
            NodeKind::Source { spec, layout } => {
                let time = match layout.event_time {
                    Some(et) => format!(
                        "event_time={} bound_ms={} allowed_lateness_ms={}",
                        layout.output_schema.field(et.column).name(),
                        et.bound_ms,
                        et.allowed_lateness_ms
                    ),
                    None => "event_time=-".to_string(),
                };
                let filter = spec.filter.as_ref().map_or("-", |f| f.text.as_str());
                format!(
                    "source {} connector={}; {time}; filter={filter}",
                    spec.table, spec.connector
                )
            }
            NodeKind::Operator(plan) => {
                let tables: Vec<String> = match plan.state_tables() {
                    Ok(specs) => specs.iter().map(crate::shape::table_shape).collect(),
                    Err(e) => vec![format!("error: {e}")],
                };
                format!(
                    "operator {} {{{}}}; state [{}]",
                    plan.kind(),
                    plan.parameters().text(),
                    tables.join(", ")
                )
            }
            NodeKind::Sink { spec } => format!("sink {} connector={}", spec.table, spec.connector),
        };
        let inputs: Vec<String> = node
            .inputs
            .iter()
            .enumerate()
            .map(|(index, e)| {
                let keys = node.kind.input_keys(index);
                format!("{}.{} hash({})", input(e.from), e.port, keys.join(", "))
            })
            .collect();
        let columns: Vec<String> = node
            .schema
            .fields()
            .iter()
            .map(|f| format!("{} {}", f.name(), f.data_type()))
            .collect();
        let key = if crate::changelog::is_updating(&node.schema) {
            format!(
                "; upsert key ({})",
                crate::changelog::upsert_key(&node.schema).join(", ")
            )
        } else {
            String::new()
        };
        format!(
            "{}{what}; inputs [{}]; columns [{}]{key}",
            crate::shape::SHAPE_MARK,
            inputs.join(", "),
            columns.join(", ")
        )
    }

    /// A connector's options as a fingerprint lists them (nothing for an
    /// operator). A table's `storage.` options (endpoints, credentials)
    /// say how its data is reached, not what the state holds: they are
    /// left out, and so is a `password` (a database connector's), so
    /// rotating a credential keeps the state, and no secret is written
    /// into a checkpoint.
    pub(crate) fn options_text(&self, id: NodeId) -> String {
        match &self.nodes[id].kind {
            NodeKind::Source { spec, .. } | NodeKind::Sink { spec } => {
                let options: Vec<String> = spec
                    .options
                    .iter()
                    .filter(|(k, _)| !k.starts_with("storage.") && k.as_str() != "password")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                format!("\n     options: {}", options.join(", "))
            }
            NodeKind::Operator(_) => String::new(),
        }
    }

    /// Renders the graph for `eddy explain`: its nodes, then the tasks
    /// they run as ([`crate::chains`]).
    pub fn explain(&self) -> String {
        let mut out = String::new();
        for id in 0..self.nodes.len() {
            let _ = writeln!(out, "{}", self.describe_node(id));
            // Not part of the description: naming a query keeps its
            // derived identities (and so its state) as they were.
            if let Some(uid) = &self.nodes[id].uid {
                let _ = writeln!(out, "     named: {uid}");
            }
            // Nor this: which columns queries read leaves the state as it is.
            if let NodeKind::Source { spec, .. } = &self.nodes[id].kind {
                if !spec.unread_columns.is_empty() {
                    let names: Vec<&str> = spec
                        .unread_columns
                        .iter()
                        .filter_map(|&c| spec.schema.fields().get(c).map(|f| f.name().as_str()))
                        .collect();
                    let _ = writeln!(out, "     columns no query reads: {}", names.join(", "));
                }
            }
        }
        out.push_str(&crate::chains::Chains::of(self).explain(self));
        out
    }
}

/// Validates the topological order invariant.
pub fn check_topological(graph: &JobGraph) -> Result<()> {
    for (id, node) in graph.nodes.iter().enumerate() {
        for edge in &node.inputs {
            if edge.from >= id {
                return Err(crate::error::EngineError::Graph(format!(
                    "node #{id} reads from #{} which is not before it",
                    edge.from
                )));
            }
        }
    }
    Ok(())
}

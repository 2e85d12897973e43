//! Operator chaining: which nodes of a job graph run together as one task.
//!
//! In: a [`JobGraph`] as it runs (after [`crate::distribute`], so every edge
//! goes from one node to one node: key splits route rows to instances).
//! Out: [`Chains`], the graph's nodes cut into tasks.
//!
//! A node is chained to the node before it when that node is its only
//! input and it is that node's only consumer (on all its ports):
//!
//! ```text
//!   source ─> calc ─> window_aggregate ─> calc ─> sink      one task
//!   source ─┬> calc ─> sink                                  source: two consumers,
//!           └> late ─> sink                                  so three tasks
//!   a ─┐
//!      ├> interval_join ─> sink                              a join has two inputs:
//!   b ─┘                                                     it heads its own task
//! ```
//!
//! A task runs its chain on one thread: the first node reads its inputs
//! from channels, and each node hands what it emits (batches, watermarks,
//! idle markers, barriers, the end) to the next by a function call, not
//! through a channel. Every node keeps its own lifecycle, metrics and
//! checkpointed state under its own id, so checkpoints, `eddy explain`'s
//! node numbers and the API's graph keep their shape. Barriers need no
//! alignment inside a chain: a chained node has one input.

use std::fmt::Write;

use crate::graph::{JobGraph, NodeId, NodeKind};

/// The tasks a graph runs as: chains of nodes, each a path in the graph.
///
/// ```
/// use std::sync::Arc;
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use eddy_engine::chains::Chains;
/// use eddy_engine::graph::{ConnectorSpec, Edge, JobGraph, Node, NodeKind};
/// use eddy_engine::source::{BadRowPolicy, SourceColumn, SourceLayout};
///
/// let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
/// let spec = |table: &str| ConnectorSpec {
///     table: table.into(),
///     connector: "memory".into(),
///     options: Default::default(),
///     schema: schema.clone(),
///     declared_at: None,
///     primary_key: Vec::new(),
///     filter: None,
///     unread_columns: Vec::new(),
///     explain: None,
/// };
/// let layout = SourceLayout {
///     physical_schema: schema.clone(),
///     output_schema: schema.clone(),
///     columns: vec![SourceColumn::Physical(0)],
///     event_time: None,
///     idle_timeout: None,
///     bad_rows: BadRowPolicy::Fail,
///     change_feed_key: None,
/// };
/// let mut graph = JobGraph::default();
/// let source = graph.add(Node {
///     name: "numbers".into(),
///     kind: NodeKind::Source { spec: spec("numbers"), layout },
///     inputs: vec![],
///     schema: schema.clone(),
///     uid: None,
/// });
/// for sink in ["a", "b"] {
///     graph.add(Node {
///         name: sink.into(),
///         kind: NodeKind::Sink { spec: spec(sink) },
///         inputs: vec![Edge::new(source, 0)],
///         schema: schema.clone(),
///         uid: None,
///     });
/// }
/// // Two consumers of one source: nothing is chained.
/// assert_eq!(Chains::of(&graph).tasks(), &[vec![0], vec![1], vec![2]]);
/// graph.nodes.pop();
/// // One consumer: source and sink run as one task.
/// assert_eq!(Chains::of(&graph).tasks(), &[vec![0, 1]]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chains {
    /// The tasks in the order of their first node; each lists its nodes
    /// from the one that reads channels to the last.
    tasks: Vec<Vec<NodeId>>,
    /// Per node, the node chained after it.
    next: Vec<Option<NodeId>>,
    /// Per node, the task it runs in.
    task_of: Vec<usize>,
}

impl Chains {
    /// The chains of `graph`: every node chained that can be.
    pub fn of(graph: &JobGraph) -> Self {
        Self::with(graph, |_| true)
    }

    /// Every node a task of its own (chaining turned off).
    pub fn unchained(graph: &JobGraph) -> Self {
        Self::with(graph, |_| false)
    }

    /// The chains of `graph` where only nodes `chainable` accepts are
    /// chained to anything (a node finished in the run a job resumes from
    /// does not run, so it is kept out).
    pub fn with(graph: &JobGraph, chainable: impl Fn(NodeId) -> bool) -> Self {
        let n = graph.nodes.len();
        let mut consumers = vec![0usize; n];
        for node in &graph.nodes {
            for edge in &node.inputs {
                if let Some(count) = consumers.get_mut(edge.from) {
                    *count += 1;
                }
            }
        }
        let mut next = vec![None; n];
        let mut chained_after = vec![false; n];
        for (id, node) in graph.nodes.iter().enumerate() {
            let [edge] = &node.inputs[..] else { continue };
            let from = edge.from;
            let joinable = matches!(node.kind, NodeKind::Operator(_) | NodeKind::Sink { .. })
                && from < id
                && !matches!(graph.nodes[from].kind, NodeKind::Sink { .. })
                && consumers[from] == 1
                && chainable(from)
                && chainable(id);
            if joinable {
                next[from] = Some(id);
                chained_after[id] = true;
            }
        }
        let mut tasks = Vec::new();
        let mut task_of = vec![0; n];
        for head in (0..n).filter(|&id| !chained_after[id]) {
            let mut task = vec![head];
            let mut at = head;
            while let Some(following) = next[at] {
                task.push(following);
                at = following;
            }
            for &id in &task {
                task_of[id] = tasks.len();
            }
            tasks.push(task);
        }
        Self {
            tasks,
            next,
            task_of,
        }
    }

    /// The tasks, each its nodes in the order batches pass through them.
    pub fn tasks(&self) -> &[Vec<NodeId>] {
        &self.tasks
    }

    /// The task `node` runs in (an index into [`Chains::tasks`]).
    pub fn task_of(&self, node: NodeId) -> usize {
        self.task_of.get(node).copied().unwrap_or_default()
    }

    /// The node chained after `node`: the one it hands its output to by call.
    pub fn next(&self, node: NodeId) -> Option<NodeId> {
        self.next.get(node).copied().flatten()
    }

    /// Whether `node` is called by the node before it rather than reading
    /// channels.
    pub fn is_chained(&self, node: NodeId) -> bool {
        self.tasks
            .get(self.task_of(node))
            .is_some_and(|task| task.first() != Some(&node))
    }

    /// The tasks as `eddy explain` lists them.
    pub fn explain(&self, graph: &JobGraph) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} node(s) run as {} task(s); a chain (->) passes batches by call:",
            graph.nodes.len(),
            self.tasks.len()
        );
        for (index, task) in self.tasks.iter().enumerate() {
            let nodes: Vec<String> = task
                .iter()
                .map(|&id| format!("#{id} {}", graph.nodes[id].name))
                .collect();
            let _ = writeln!(out, "  task {index}: {}", nodes.join(" -> "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

    use super::*;
    use crate::graph::{ConnectorSpec, Edge, Node};
    use crate::operators::union::UnionPlan;
    use crate::source::{BadRowPolicy, SourceColumn, SourceLayout};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]))
    }

    fn spec(table: &str) -> ConnectorSpec {
        ConnectorSpec {
            table: table.into(),
            connector: "memory".into(),
            options: Default::default(),
            schema: schema(),
            declared_at: None,
            primary_key: Vec::new(),
            filter: None,
            unread_columns: Vec::new(),
            explain: None,
        }
    }

    fn edge(from: NodeId, port: usize) -> Edge {
        Edge::new(from, port)
    }

    fn source(graph: &mut JobGraph, name: &str) -> NodeId {
        let layout = SourceLayout {
            physical_schema: schema(),
            output_schema: schema(),
            columns: vec![SourceColumn::Physical(0)],
            event_time: None,
            idle_timeout: None,
            bad_rows: BadRowPolicy::Fail,
            change_feed_key: None,
        };
        graph.add(Node {
            name: name.into(),
            kind: NodeKind::Source {
                spec: spec(name),
                layout,
            },
            inputs: vec![],
            schema: schema(),
            uid: None,
        })
    }

    fn union(graph: &mut JobGraph, inputs: Vec<Edge>) -> NodeId {
        let id = graph.nodes.len();
        graph.add(Node {
            name: format!("union#{id}"),
            kind: NodeKind::Operator(Arc::new(UnionPlan::new(schema(), inputs.len()))),
            inputs,
            schema: schema(),
            uid: None,
        })
    }

    fn sink(graph: &mut JobGraph, name: &str, from: Edge) -> NodeId {
        graph.add(Node {
            name: name.into(),
            kind: NodeKind::Sink { spec: spec(name) },
            inputs: vec![from],
            schema: schema(),
            uid: None,
        })
    }

    #[test]
    fn a_straight_line_is_one_task() {
        let mut graph = JobGraph::default();
        let s = source(&mut graph, "in");
        let a = union(&mut graph, vec![edge(s, 0)]);
        let b = union(&mut graph, vec![edge(a, 0)]);
        let out = sink(&mut graph, "out", edge(b, 0));
        let chains = Chains::of(&graph);
        assert_eq!(chains.tasks(), &[vec![s, a, b, out]]);
        assert_eq!(chains.next(s), Some(a));
        assert_eq!(chains.next(out), None);
        assert!(chains.is_chained(b));
        assert!(!chains.is_chained(s));
        assert_eq!(
            chains.explain(&graph),
            "4 node(s) run as 1 task(s); a chain (->) passes batches by call:\n  \
             task 0: #0 in -> #1 union#1 -> #2 union#2 -> #3 out\n"
        );
        assert_eq!(Chains::unchained(&graph).tasks().len(), 4);
    }

    #[test]
    fn fan_out_fan_in_and_side_ports_break_chains() {
        let mut graph = JobGraph::default();
        let a = source(&mut graph, "a");
        let b = source(&mut graph, "b");
        // a's main port and its late port are both read: a has two consumers.
        let calc = union(&mut graph, vec![edge(a, 0)]);
        let late = sink(&mut graph, "late", edge(a, crate::operator::LATE_PORT));
        // Two inputs: the union heads a task of its own, with its sink.
        let both = union(&mut graph, vec![edge(calc, 0), edge(b, 0)]);
        let out = sink(&mut graph, "out", edge(both, 0));
        let chains = Chains::of(&graph);
        assert_eq!(
            chains.tasks(),
            &[vec![a], vec![b], vec![calc], vec![late], vec![both, out]]
        );
        assert_eq!(chains.task_of(out), 4);
    }

    #[test]
    fn nodes_kept_out_are_not_chained() {
        let mut graph = JobGraph::default();
        let s = source(&mut graph, "in");
        let a = union(&mut graph, vec![edge(s, 0)]);
        let b = union(&mut graph, vec![edge(a, 0)]);
        let out = sink(&mut graph, "out", edge(b, 0));
        let chains = Chains::with(&graph, |id| id != a);
        assert_eq!(chains.tasks(), &[vec![s], vec![a], vec![b, out]]);
    }
}

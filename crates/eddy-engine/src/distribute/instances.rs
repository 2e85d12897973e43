//! Parallel operator instances: a job graph with every keyed operator run
//! as N instances, each owning the keys that hash to it.
//!
//! In: a job graph and N. Out: the graph to run, in which each operator
//! that declares [`Distribution::Keyed`] and whose inputs are all hash
//! edges (`Partitioning::Hash`, from `OperatorPlan::partition_keys`) is
//! replaced by
//!
//! ```text
//!  producer ─> key_split ─ port 0 ────> operator/0 ───┐
//!              (hash(keys) % N)  ...                    ├─> union ─> consumers
//!                        └ port N-1 ─> operator/N-1 ─┘
//! ```
//!
//! Everything else (sources, sinks, stateless calcs, unions, operators
//! that are not keyed, such as a global aggregate) stays one instance.
//! Each piece is an ordinary node, so watermarks, idle and end markers and
//! checkpoint barriers reach every instance through the split (which
//! broadcasts them on every port), the union's watermark is the least of
//! its instances', and each instance checkpoints its own state. The same N
//! must be used to resume a checkpoint (the graph differs otherwise, and
//! the state directory refuses it). The split hashes each row once, by the
//! operator's keys ([`crate::partition`]); an operator with two inputs (a
//! join) gets a split per input, hashing each side by its own keys, and
//! operators keyed alike on the same stream share one split.
//!
//! ```
//! use eddy_engine::graph::JobGraph;
//! use eddy_engine::distribute::instances::expand;
//!
//! let graph = JobGraph::default();
//! assert_eq!(expand(&graph, 4).nodes.len(), 0); // nothing keyed, nothing added
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use crate::graph::{Edge, JobGraph, Node, NodeId, NodeKind, Partitioning};
use crate::operator::{Distribution, OperatorPlan};
use crate::operators::key_split::KeySplitPlan;
use crate::operators::union::UnionPlan;

/// Whether `node` runs as N instances: a stateful operator whose every
/// input is hashed by a non-empty key.
fn runs_in_parallel(node: &Node) -> bool {
    match &node.kind {
        NodeKind::Operator(plan) if plan.distribution() == Distribution::Keyed => {
            !node.inputs.is_empty()
                && node.inputs.iter().all(
                    |e| matches!(&e.partitioning, Partitioning::Hash(keys) if !keys.is_empty()),
                )
        }
        _ => false,
    }
}

/// `graph` with every keyed operator run as `parallelism` instances; see
/// the module docs. `parallelism` 0 or 1 returns the graph as it is.
pub fn expand(graph: &JobGraph, parallelism: usize) -> JobGraph {
    if parallelism <= 1 {
        return graph.clone();
    }
    let instances = u32::try_from(parallelism).unwrap_or(u32::MAX);
    let mut out = JobGraph::default();
    // Where each old node's output is now (a parallel node's: its union).
    let mut moved: Vec<(NodeId, bool)> = Vec::with_capacity(graph.nodes.len());
    // Splits made so far, by what they read and hash: two operators keyed
    // alike on one stream share a split, and each row is hashed once.
    let mut made: HashMap<(NodeId, usize, String), NodeId> = HashMap::new();
    let remap = |moved: &[(NodeId, bool)], edge: &Edge| {
        let (from, parallel) = moved[edge.from];
        Edge {
            from,
            port: if parallel { 0 } else { edge.port },
            partitioning: edge.partitioning.clone(),
        }
    };
    for node in &graph.nodes {
        if !runs_in_parallel(node) {
            let mut copy = node.clone();
            copy.inputs = node.inputs.iter().map(|e| remap(&moved, e)).collect();
            moved.push((out.add(copy), false));
            continue;
        }
        // One split per input, each instance reading its port of each.
        let mut splits = Vec::with_capacity(node.inputs.len());
        for (input, edge) in node.inputs.iter().enumerate() {
            let Partitioning::Hash(keys) = &edge.partitioning else {
                continue;
            };
            let schema = graph.port_schema(edge.from, edge.port);
            let mut feed = remap(&moved, edge);
            feed.partitioning = Partitioning::Forward;
            let plan = KeySplitPlan::new(schema.clone(), keys.clone(), instances);
            let id = *made
                .entry((feed.from, feed.port, plan.describe()))
                .or_insert_with(|| {
                    out.add(Node {
                        name: format!("{}/split.in{input}", node.name),
                        kind: NodeKind::Operator(Arc::new(plan)),
                        inputs: vec![feed],
                        schema,
                    })
                });
            splits.push((id, edge.partitioning.clone()));
        }
        let mut copies = Vec::with_capacity(parallelism);
        for index in 0..instances {
            let inputs = splits
                .iter()
                .map(|(split, partitioning)| Edge {
                    from: *split,
                    port: index as usize,
                    partitioning: partitioning.clone(),
                })
                .collect();
            copies.push(out.add(Node {
                name: format!("{}/{index}", node.name),
                kind: node.kind.clone(),
                inputs,
                schema: node.schema.clone(),
            }));
        }
        let union = out.add(Node {
            name: format!("{}/union", node.name),
            kind: NodeKind::Operator(Arc::new(UnionPlan::new(node.schema.clone(), copies.len()))),
            inputs: copies
                .iter()
                .map(|&from| Edge {
                    from,
                    port: 0,
                    partitioning: Partitioning::Forward,
                })
                .collect(),
            schema: node.schema.clone(),
        });
        moved.push((union, true));
    }
    out.set_parallelism(parallelism);
    out
}

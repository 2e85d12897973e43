//! Parallel operator instances: a job graph with every keyed operator run
//! as N instances, each owning the keys that hash to it.
//!
//! In: a job graph and N. Out: the graph to run, in which each operator
//! that declares its inputs hashed ([`Distribution::Hash`], from
//! `OperatorPlan::required_input_distribution`) is replaced by
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
//! its instances', and each instance checkpoints its own state. The split
//! sends each row to the instance that owns its key group
//! ([`crate::key_groups`]), hashing it once by the operator's keys
//! ([`crate::partition`]), so a checkpoint taken at one N resumes at
//! another: [`crate::rescale`] maps the old graph's state onto the new one
//! by each node's [`Origin`]. An operator with two inputs (a
//! join) gets a split per input, hashing each side by its own keys, and
//! operators keyed alike on the same stream share one split.
//!
//! The pass's result is a [`PhysicalGraph`], a type of its own: the graph
//! as planned goes in, and a physical graph cannot be expanded again
//! (another N is planned from its plan, [`PhysicalGraph::replanned`]).
//!
//! ```
//! use std::sync::Arc;
//! use eddy_engine::graph::JobGraph;
//! use eddy_engine::distribute::physical::PhysicalGraph;
//!
//! let physical = PhysicalGraph::for_parallelism(Arc::new(JobGraph::default()), 4);
//! assert_eq!(physical.nodes.len(), 0); // nothing keyed, nothing added
//! assert_eq!(physical.parallelism(), 4);
//! ```

use std::collections::HashMap;
use std::sync::Arc;

#[cfg(doc)]
use crate::distribute::physical::PhysicalGraph;
use crate::graph::{Edge, JobGraph, Node, NodeId, NodeKind};
use crate::key_groups::KeyGroups;
use crate::operator::{Distribution, OperatorPlan};
use crate::operators::key_split::KeySplitPlan;
use crate::operators::union::UnionPlan;

/// Whether `node` runs as N instances: an operator that needs every
/// input hashed by a key.
fn runs_in_parallel(node: &Node) -> bool {
    matches!(node.kind, NodeKind::Operator(_))
        && !node.inputs.is_empty()
        && (0..node.inputs.len()).all(|input| node.kind.input_distribution(input).is_hash())
}

/// Where a node of an expanded graph comes from, by the node of the graph
/// as planned it stands for. Two expansions of one planned graph give
/// their nodes the same origins whatever their N, which is how state
/// moves from one to the other ([`crate::rescale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The planned node itself (run once).
    Planned(NodeId),
    /// The key split of input `input` of keyed node `of` (shared with
    /// operators keyed alike on the same stream, named by the first).
    Split {
        /// The keyed node.
        of: NodeId,
        /// Its input.
        input: usize,
    },
    /// Instance `index` of keyed node `of`.
    Instance {
        /// The keyed node.
        of: NodeId,
        /// Which instance.
        index: u32,
    },
    /// The union of keyed node `of`'s instances.
    Union {
        /// The keyed node.
        of: NodeId,
    },
}

/// The nodes of `planned` with every keyed operator run as `parallelism`
/// instances owning ranges of `key_groups` (see the module docs), and
/// each node's origin; with `parallelism` 0 or 1 the nodes are the
/// planned ones. [`PhysicalGraph::new`] is the way in.
pub(crate) fn expand(
    planned: &JobGraph,
    parallelism: usize,
    key_groups: KeyGroups,
) -> (JobGraph, Vec<Origin>) {
    let parallelism = parallelism.max(1);
    if parallelism == 1 {
        // A keyed node is its own one instance: its state moves as such
        // to a job run wider.
        let origins = planned
            .nodes
            .iter()
            .enumerate()
            .map(|(id, node)| match runs_in_parallel(node) {
                true => Origin::Instance { of: id, index: 0 },
                false => Origin::Planned(id),
            })
            .collect();
        return (planned.clone(), origins);
    }
    let instances = u32::try_from(parallelism).unwrap_or(u32::MAX);
    let mut out = JobGraph::default();
    let mut origins = Vec::new();
    // Where each old node's output is now (a parallel node's: its union).
    let mut moved: Vec<(NodeId, bool)> = Vec::with_capacity(planned.nodes.len());
    // Splits made so far, by what they read and hash: two operators keyed
    // alike on one stream share a split, and each row is hashed once.
    let mut made: HashMap<(NodeId, usize, String), NodeId> = HashMap::new();
    let remap = |moved: &[(NodeId, bool)], edge: &Edge| {
        let (from, parallel) = moved[edge.from];
        Edge::new(from, if parallel { 0 } else { edge.port })
    };
    for (id, node) in planned.nodes.iter().enumerate() {
        if !runs_in_parallel(node) {
            let mut copy = node.clone();
            copy.inputs = node.inputs.iter().map(|e| remap(&moved, e)).collect();
            moved.push((out.add(copy), false));
            origins.push(Origin::Planned(id));
            continue;
        }
        // One split per input, each instance reading its port of each.
        let mut splits = Vec::with_capacity(node.inputs.len());
        for (input, edge) in node.inputs.iter().enumerate() {
            let Distribution::Hash(keys) = node.kind.input_distribution(input) else {
                continue;
            };
            let schema = planned.port_schema(edge.from, edge.port);
            let feed = remap(&moved, edge);
            let plan = KeySplitPlan::new(schema.clone(), keys, instances, key_groups);
            let split = *made
                .entry((feed.from, feed.port, plan.describe()))
                .or_insert_with(|| {
                    origins.push(Origin::Split { of: id, input });
                    out.add(Node {
                        name: format!("{}/split.in{input}", node.name),
                        kind: NodeKind::Operator(Arc::new(plan)),
                        inputs: vec![feed],
                        schema,
                        uid: None,
                    })
                });
            splits.push(split);
        }
        let mut copies = Vec::with_capacity(parallelism);
        for index in 0..instances {
            let inputs = splits
                .iter()
                .map(|&split| Edge::new(split, index as usize))
                .collect();
            copies.push(out.add(Node {
                name: format!("{}/{index}", node.name),
                kind: node.kind.clone(),
                inputs,
                schema: node.schema.clone(),
                uid: node.uid.clone(),
            }));
            origins.push(Origin::Instance { of: id, index });
        }
        let union = out.add(Node {
            name: format!("{}/union", node.name),
            kind: NodeKind::Operator(Arc::new(UnionPlan::new(node.schema.clone(), copies.len()))),
            inputs: copies.iter().map(|&from| Edge::new(from, 0)).collect(),
            schema: node.schema.clone(),
            uid: None,
        });
        origins.push(Origin::Union { of: id });
        moved.push((union, true));
    }
    (out, origins)
}

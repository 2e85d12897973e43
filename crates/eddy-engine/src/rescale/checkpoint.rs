//! A whole checkpoint moved from one expansion of a job's graph to another
//! (N instances of each keyed operator to M).
//!
//! In: the graph the checkpoint was taken with, the graph to run (both
//! expanded from one planned graph over the same key groups), and the
//! checkpoint. Out: the checkpoint in the second graph's node order.
//!
//! Nodes are matched by their [`Origin`]: a node that runs once, a key
//! split and a union keep their state (a union's per-input clock is
//! widened or narrowed to its new inputs); instance `j` of a keyed
//! operator gets the state of every old instance whose key groups overlap
//! its own, split by key ([`crate::operator::OperatorPlan::rescale_state`]).
//! Watermarks are the least of the parts' (they saw the same markers), a
//! part's counters go to the new instance that owns its first key group.

use std::collections::HashMap;

use super::{InstanceState, KeyRange};
use crate::checkpoint::{ClockState, NodeCheckpoint, NodeRuntimeState};
use crate::distribute::instances::Origin;
use crate::distribute::physical::PhysicalGraph;
use crate::error::{EngineError, Result};
use crate::graph::{JobGraph, NodeKind};
use crate::metrics::MetricsSnapshot;

/// `nodes` (a checkpoint's, taken with `from`; `None` for a node that
/// starts afresh) laid out for `to`; see the module docs.
pub fn rescale(
    from: &PhysicalGraph,
    to: &PhysicalGraph,
    nodes: Vec<Option<NodeCheckpoint>>,
) -> Result<Vec<Option<NodeCheckpoint>>> {
    let (old, new) = (from, to);
    if old.key_groups() != new.key_groups() {
        return Err(EngineError::Checkpoint(format!(
            "the checkpoint spreads keys over {} key groups, the job {}",
            old.key_groups(),
            new.key_groups()
        )));
    }
    if nodes.len() != old.origins().len() {
        return Err(EngineError::Checkpoint(format!(
            "the checkpoint has {} nodes, its graph {}",
            nodes.len(),
            old.origins().len()
        )));
    }
    let groups = new.key_groups();
    let (n, m) = (old.parallelism() as u32, new.parallelism() as u32);
    // Nodes that start afresh (new in a changed query) have no entry.
    let mut by_origin: HashMap<Origin, NodeCheckpoint> = old
        .origins()
        .iter()
        .copied()
        .zip(nodes)
        .filter_map(|(origin, node)| Some((origin, node?)))
        .collect();
    let mut nodes = Vec::with_capacity(new.origins().len());
    for (id, origin) in new.origins().iter().enumerate() {
        nodes.push(rescaled_node(
            to,
            id,
            origin,
            &mut by_origin,
            (n, m),
            groups,
        )?);
    }
    Ok(nodes)
}

/// Node `id` of `to` (its origin `origin`) laid out from the old nodes'
/// states `by_origin` (taken at `n` instances, run at `m` now); see the
/// module docs. `None`: it starts afresh.
fn rescaled_node(
    to: &JobGraph,
    id: usize,
    origin: &Origin,
    by_origin: &mut HashMap<Origin, NodeCheckpoint>,
    (n, m): (u32, u32),
    groups: crate::key_groups::KeyGroups,
) -> Result<Option<NodeCheckpoint>> {
    {
        let node = match *origin {
            Origin::Instance { of, index } => {
                let range = KeyRange::of_instance(groups, index, m);
                let mut parts = Vec::new();
                let mut runtimes = Vec::new();
                for (old_index, counted) in groups.handed_over(index, m, n) {
                    let key = Origin::Instance {
                        of,
                        index: old_index,
                    };
                    let Some(part) = by_origin.get(&key) else {
                        continue;
                    };
                    runtimes.push((part.runtime.clone(), counted));
                    // A finished instance checkpoints no state: nothing to hand over.
                    if !part.state.is_empty() {
                        parts.push(InstanceState {
                            state: part.state.clone(),
                            counted,
                        });
                    }
                }
                if runtimes.is_empty() {
                    // A keyed operator new to the job.
                    return Ok(None);
                }
                let NodeKind::Operator(plan) = &to.nodes[id].kind else {
                    return Err(missing(to, id));
                };
                let state = if parts.is_empty() {
                    crate::state::StateSnapshot::default()
                } else {
                    plan.rescale_state(parts, &range).map_err(|e| {
                        EngineError::Checkpoint(format!(
                            "{}: its state cannot move from {n} to {m} instances: {e}",
                            to.nodes[id].name
                        ))
                    })?
                };
                NodeCheckpoint {
                    runtime: merged_runtime(&runtimes, to.nodes[id].inputs.len()),
                    state,
                }
            }
            // A job run as one instance had no splits or unions: theirs
            // follow from the instance's clock.
            Origin::Split { of, input } if !by_origin.contains_key(origin) => {
                let Some(instance) = by_origin.get(&Origin::Instance { of, index: 0 }) else {
                    return Ok(None);
                };
                let mut runtime = instance.runtime.clone();
                runtime.metrics = MetricsSnapshot::default();
                if let Some(clock) = runtime.clock.as_mut() {
                    let at =
                        |v: &[i64]| v.get(input).copied().unwrap_or(crate::time::WATERMARK_MIN);
                    let watermark = at(&clock.watermarks);
                    clock.ended = vec![clock.ended.get(input).copied().unwrap_or(false)];
                    clock.idle = vec![clock.idle.get(input).copied().unwrap_or(false)];
                    clock.watermarks = vec![watermark];
                    clock.current = watermark;
                    runtime.forwarded = watermark;
                }
                NodeCheckpoint {
                    runtime,
                    state: Default::default(),
                }
            }
            Origin::Union { of } if !by_origin.contains_key(origin) => {
                let Some(instance) = by_origin.get(&Origin::Instance { of, index: 0 }) else {
                    return Ok(None);
                };
                let (forwarded, finished) = (instance.runtime.forwarded, instance.runtime.finished);
                let inputs = to.nodes[id].inputs.len();
                NodeCheckpoint {
                    runtime: NodeRuntimeState {
                        finished,
                        metrics: MetricsSnapshot::default(),
                        clock: Some(ClockState {
                            watermarks: vec![forwarded; inputs],
                            ended: vec![finished; inputs],
                            idle: vec![false; inputs],
                            current: forwarded,
                        }),
                        forwarded,
                    },
                    state: Default::default(),
                }
            }
            Origin::Union { .. } => {
                // Its inputs are the instances: each new one starts where
                // the least advanced old one stood.
                let Some(mut node) = by_origin.remove(origin) else {
                    return Ok(None);
                };
                if let Some(clock) = node.runtime.clock.as_mut() {
                    let least = clock.watermarks.iter().copied().min();
                    clock.watermarks = least.into_iter().collect();
                    clock.ended = vec![clock.ended.iter().all(|e| *e)];
                    clock.idle = vec![clock.idle.iter().all(|e| *e)];
                }
                let inputs = to.nodes[id].inputs.len();
                node.runtime = merged_runtime(&[(node.runtime.clone(), true)], inputs);
                node
            }
            _ => return Ok(by_origin.remove(origin)),
        };
        Ok(Some(node))
    }
}

/// The states of planned node `of`, which ran once when the checkpoint
/// was taken (`single`) and runs keyed in `to` now (its operator's
/// distribution became keyed): spread over its instances by key as a
/// resume from one instance to `to`'s number, its splits and union
/// following from it. By node of `to`.
pub fn spread_single(
    of: usize,
    single: NodeCheckpoint,
    to: &PhysicalGraph,
) -> Result<Vec<(usize, NodeCheckpoint)>> {
    let new = to;
    let m = new.parallelism() as u32;
    let by_origin = HashMap::from([(Origin::Instance { of, index: 0 }, single)]);
    let mut spread = Vec::new();
    for (id, origin) in new.origins().iter().enumerate() {
        let mine = match *origin {
            Origin::Instance { of: o, .. }
            | Origin::Split { of: o, .. }
            | Origin::Union { of: o } => o == of,
            Origin::Planned(_) => false,
        };
        if !mine {
            continue;
        }
        // Instances first (their keys from the one), then the splits and
        // union (from instance 0's clock, left in place).
        if let Some(node) = rescaled_node(
            to,
            id,
            origin,
            &mut by_origin.clone(),
            (1, m),
            new.key_groups(),
        )? {
            spread.push((id, node));
        }
    }
    Ok(spread)
}

fn missing(graph: &JobGraph, id: usize) -> EngineError {
    EngineError::Checkpoint(format!(
        "{}: the checkpoint has no state for it",
        graph.nodes[id].name
    ))
}

/// One runtime state from several (the old instances a new one takes keys
/// from, or a union changing its number of inputs) for a node with
/// `inputs` inputs: every input's watermark the least of all, finished
/// when all were, the counters of the counted ones.
fn merged_runtime(parts: &[(NodeRuntimeState, bool)], inputs: usize) -> NodeRuntimeState {
    let least_of = |f: &dyn Fn(&ClockState) -> Option<i64>| {
        parts
            .iter()
            .filter_map(|(r, _)| r.clock.as_ref().and_then(f))
            .min()
    };
    let clock = parts
        .iter()
        .any(|(r, _)| r.clock.is_some())
        .then(|| ClockState {
            watermarks: (0..inputs)
                .map(|i| {
                    least_of(&|c: &ClockState| {
                        c.watermarks.get(i).or(c.watermarks.first()).copied()
                    })
                    .unwrap_or(crate::time::WATERMARK_MIN)
                })
                .collect(),
            ended: (0..inputs)
                .map(|i| {
                    parts.iter().all(|(r, _)| {
                        r.clock.as_ref().is_none_or(|c| {
                            c.ended
                                .get(i)
                                .copied()
                                .unwrap_or(c.ended.iter().all(|e| *e))
                        })
                    })
                })
                .collect(),
            idle: (0..inputs)
                .map(|i| {
                    parts.iter().all(|(r, _)| {
                        r.clock.as_ref().is_none_or(|c| {
                            c.idle.get(i).copied().unwrap_or(c.idle.iter().all(|e| *e))
                        })
                    })
                })
                .collect(),
            current: least_of(&|c: &ClockState| Some(c.current))
                .unwrap_or(crate::time::WATERMARK_MIN),
        });
    let mut metrics = MetricsSnapshot {
        rows_in_by_input: vec![0; inputs],
        watermark: parts
            .iter()
            .map(|(r, _)| r.metrics.watermark)
            .min()
            .unwrap_or(crate::time::WATERMARK_MIN),
        ..MetricsSnapshot::default()
    };
    for (runtime, counted) in parts {
        let from = &runtime.metrics;
        metrics.state_rows += from.state_rows;
        metrics.state_bytes += from.state_bytes;
        if !counted {
            continue;
        }
        metrics.rows_in += from.rows_in;
        metrics.rows_out += from.rows_out;
        metrics.late_rows += from.late_rows;
        metrics.bad_rows += from.bad_rows;
        metrics.peak_state_rows = metrics.peak_state_rows.max(from.peak_state_rows);
        metrics.peak_state_bytes = metrics.peak_state_bytes.max(from.peak_state_bytes);
        if from.rows_in_by_input.len() == inputs {
            for (sum, v) in metrics
                .rows_in_by_input
                .iter_mut()
                .zip(&from.rows_in_by_input)
            {
                *sum += v;
            }
        } else if let Some(first) = metrics.rows_in_by_input.first_mut() {
            *first += from.rows_in;
        }
    }
    NodeRuntimeState {
        finished: parts.iter().all(|(r, _)| r.finished),
        metrics,
        clock,
        forwarded: parts
            .iter()
            .map(|(r, _)| r.forwarded)
            .min()
            .unwrap_or(crate::time::WATERMARK_MIN),
    }
}

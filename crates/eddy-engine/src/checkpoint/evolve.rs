//! Query evolution: a checkpoint taken by one version of a job's query,
//! resumed by another (a query or sink added or removed, a threshold
//! changed).
//!
//! In: what the checkpoint's manifest says of the graph that took it
//! ([`TakenBy`]: the planned graph's node identities, each node's origin),
//! its state, and the new query's graph expanded as the checkpoint was
//! taken. Out: each new node's state, or `None` for a node that starts
//! afresh, and what was kept, started and dropped.
//!
//! State moves by identity ([`JobGraph::identities`]): a node that
//! computes the same thing from the same inputs keeps its state, whatever
//! its place in the graph; a new node (a new query or sink, or one whose
//! definition or anything upstream changed) starts afresh, reading its
//! sources from where they stand; a source new to the job reads from its
//! beginning. A node of the checkpoint that the query no longer has loses
//! its state, which is refused unless allowed (`--allow-dropped-state`),
//! naming each such node, so that a changed window width is never silently
//! a new window from nothing. A node no derived identity matches moves by
//! its named identity ([`crate::identity`]) where its state still fits:
//! a sink or source by its table while its options are unchanged and its
//! columns only added, an operator of a query named by a `/*+ uid('...')
//! */` hint or a view while its own definition is unchanged (a threshold
//! upstream changed); a named one that no longer fits is named with why.
//! Checkpoints written before eddy recorded identities resume only the
//! very same query.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::store::{StateDir, TakenBy};
use super::{Checkpoint, NodeCheckpoint};
use crate::distribute::instances::Origin;
use crate::distribute::physical::PhysicalGraph;
use crate::error::{EngineError, Result};
use crate::graph::{JobGraph, NodeKind};
use crate::identity::NamedIdentity;

/// A checkpoint mapped onto a changed query.
#[derive(Debug, Default)]
pub struct Mapped {
    /// Each node's state in the new graph; `None`: it starts afresh.
    pub nodes: Vec<Option<NodeCheckpoint>>,
    /// Stateful nodes that keep their state, by name.
    pub kept: Vec<String>,
    /// Stateful nodes that start afresh (new, or changed), by name.
    pub fresh: Vec<String>,
    /// The checkpoint mapped (`None` for an old manifest's, resumed as
    /// it is).
    pub checkpoint: Option<crate::message::CheckpointId>,
    /// Of the kept, those whose state moved by their named identity (what
    /// feeds them changed, they did not), by name.
    pub kept_by_name: Vec<String>,
    /// Nodes of the checkpoint whose state was dropped, by name and what
    /// they were.
    pub dropped: Vec<String>,
}

/// Whether a node keeps state worth naming when it starts afresh.
pub fn stateful(graph: &JobGraph, id: usize) -> bool {
    match &graph.nodes[id].kind {
        NodeKind::Operator(plan) => !plan.distribution().is_any(),
        NodeKind::Source { .. } | NodeKind::Sink { .. } => true,
    }
}

/// `checkpoint`, taken by the graph `taken` describes, for `to` (the new
/// query's graph, expanded to the checkpoint's parallelism); see the
/// module docs.
pub fn map_state(
    taken: &TakenBy,
    checkpoint: Checkpoint,
    to: &PhysicalGraph,
    allow_dropped: bool,
) -> Result<Mapped> {
    let origins: Option<Vec<Origin>> = taken.nodes.iter().map(|(_, _, o)| *o).collect();
    let (Some(old_planned), Some(old_origins)) = (&taken.planned, origins) else {
        taken.check(to)?;
        return Ok(Mapped {
            nodes: checkpoint.nodes.into_iter().map(Some).collect(),
            ..Mapped::default()
        });
    };
    // Old planned node -> new planned node, by identity (the k-th of
    // several alike to the k-th), then by name where it still fits.
    // A checkpoint written before shapes named its nodes by explain's
    // text: the new graph's are compared in the same form.
    let shapes = crate::identity::written_as_shapes(old_planned.iter().map(String::as_str));
    let new_planned = if shapes {
        to.planned().identities()
    } else {
        to.planned().legacy_identities()
    };
    let mut by_identity: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (id, identity) in new_planned.iter().enumerate() {
        by_identity.entry(identity).or_default().push_back(id);
    }
    let mut moved: Vec<Option<usize>> = old_planned
        .iter()
        .map(|identity| {
            by_identity
                .get_mut(identity.as_str())
                .and_then(VecDeque::pop_front)
        })
        .collect();
    let (misfits, named_moves) = match &taken.named {
        Some(old_named) => move_by_name(old_named, to.planned(), shapes, &mut moved),
        None => Default::default(),
    };
    let translate = |origin: Origin| -> Option<Origin> {
        let to = |of: usize| moved.get(of).copied().flatten();
        Some(match origin {
            Origin::Planned(of) => Origin::Planned(to(of)?),
            Origin::Split { of, input } => Origin::Split { of: to(of)?, input },
            Origin::Instance { of, index } => Origin::Instance { of: to(of)?, index },
            Origin::Union { of } => Origin::Union { of: to(of)? },
        })
    };
    let mut states: HashMap<Origin, NodeCheckpoint> = HashMap::new();
    let mut names: HashMap<Origin, &str> = HashMap::new();
    let mut dropped = Vec::new();
    for ((node, origin), (fingerprint, name, _)) in checkpoint
        .nodes
        .into_iter()
        .zip(old_origins)
        .zip(&taken.nodes)
    {
        match translate(origin) {
            Some(origin) => {
                names.insert(origin, name.as_deref().unwrap_or("?"));
                states.insert(origin, node);
            }
            None if !node.state.is_empty() => {
                let name = name.as_deref().unwrap_or("?");
                dropped.push(match misfits.get(&planned_node(origin)) {
                    Some(why) => format!("'{name}' (its state no longer fits: {why})"),
                    None => format!(
                        "'{name}' ({})",
                        first_line(fingerprint)
                            .split_once(' ')
                            .map_or(fingerprint.as_str(), |(_, what)| what)
                    ),
                })
            }
            None => {}
        }
    }
    // A node that ran once when the checkpoint was taken and runs keyed
    // now (its operator's distribution became keyed): its state is spread
    // over its instances by key.
    let present: HashSet<Origin> = to.origins().iter().copied().collect();
    let now_keyed: Vec<usize> = states
        .keys()
        .filter_map(|origin| match *origin {
            Origin::Planned(of)
                if !present.contains(origin)
                    && present.contains(&Origin::Instance { of, index: 0 }) =>
            {
                Some(of)
            }
            _ => None,
        })
        .collect();
    for of in now_keyed {
        if let Some(single) = states.remove(&Origin::Planned(of)) {
            for (id, node) in crate::rescale::checkpoint::spread_single(of, single, to)? {
                states.insert(to.origins()[id], node);
            }
        }
    }
    // State with no place in the new graph is never lost silently.
    for (origin, node) in &states {
        if !present.contains(origin) && !node.state.is_empty() {
            dropped.push(format!(
                "'{}' (it no longer runs as it did when the checkpoint was taken)",
                names.get(origin).copied().unwrap_or("?")
            ));
        }
    }
    if !dropped.is_empty() && !allow_dropped {
        return Err(EngineError::Checkpoint(format!(
            "the query changed since checkpoint {} in {}, and the state of {} has no place in it \
             (removed, or changed: a node keeps its state while it computes the same thing \
             from the same inputs or, in a query named by a uid hint or a view, while its own \
             definition is unchanged; a sink or source while its options are and its columns \
             are only added). Run with --allow-dropped-state to drop that state and go on \
             (what the rest keeps is kept), or --ignore-state to start afresh",
            taken.checkpoint,
            taken.place.display(),
            dropped.join(", ")
        )));
    }
    let (mut kept, mut fresh, mut kept_by_name) = (Vec::new(), Vec::new(), Vec::new());
    let nodes = to
        .origins()
        .iter()
        .enumerate()
        .map(|(id, origin)| {
            let state = states.remove(origin);
            if stateful(to, id) {
                let name = to.nodes[id].name.clone();
                match state {
                    Some(_) => {
                        if named_moves.contains(&planned_node(*origin))
                            && !kept_by_name.contains(&name)
                        {
                            kept_by_name.push(name.clone());
                        }
                        kept.push(name)
                    }
                    None => fresh.push(name),
                }
            }
            state
        })
        .collect();
    Ok(Mapped {
        nodes,
        checkpoint: Some(taken.checkpoint),
        kept,
        fresh,
        kept_by_name,
        dropped,
    })
}

/// What resuming `planned` (a job's graph as planned) from the newest
/// checkpoint in `store` keeps, starts afresh and drops, found without
/// running or removing anything, so beside a running job too (the node
/// states are left out); `None` without a
/// checkpoint; the error a resume would fail with.
pub fn preview(
    store: &StateDir,
    planned: Arc<JobGraph>,
    allow_dropped: bool,
) -> Result<Option<Mapped>> {
    let Some((checkpoint, taken)) = store.peek_latest_taken()? else {
        return Ok(None);
    };
    let taken_with = PhysicalGraph::new(planned, taken.layout.parallelism, taken.layout.key_groups);
    let mut mapped = map_state(&taken, checkpoint, &taken_with, allow_dropped)?;
    mapped.nodes.clear();
    Ok(Some(mapped))
}

/// Old planned nodes that no derived identity matched, moved to the new
/// planned node of the same name where their state fits it
/// ([`NamedIdentity::fits`]); returns, by old planned node, why the state
/// of each named one that does not fit cannot move.
fn move_by_name(
    old_named: &[Option<NamedIdentity>],
    planned: &JobGraph,
    shapes: bool,
    moved: &mut [Option<usize>],
) -> (HashMap<usize, String>, HashSet<usize>) {
    let new_named = if shapes {
        planned.named_identities()
    } else {
        planned.legacy_named_identities()
    };
    let taken: HashSet<usize> = moved.iter().flatten().copied().collect();
    let mut by_name: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (id, named) in new_named.iter().enumerate() {
        if let (Some(named), false) = (named, taken.contains(&id)) {
            by_name
                .entry(named.name.as_str())
                .or_default()
                .push_back(id);
        }
    }
    let (mut misfits, mut named_moves) = (HashMap::new(), HashSet::new());
    for (old, slot) in moved.iter_mut().enumerate() {
        let Some(Some(was)) = old_named.get(old).filter(|_| slot.is_none()) else {
            continue;
        };
        let Some(id) = by_name
            .get_mut(was.name.as_str())
            .and_then(VecDeque::pop_front)
        else {
            continue;
        };
        let Some(now) = &new_named[id] else { continue };
        match was.fits(now) {
            Ok(()) => {
                *slot = Some(id);
                named_moves.insert(id);
            }
            Err(why) => {
                misfits.insert(old, format!("{}, {why}", was.name));
            }
        }
    }
    (misfits, named_moves)
}

/// The planned node an expanded node runs.
fn planned_node(origin: Origin) -> usize {
    match origin {
        Origin::Planned(of)
        | Origin::Split { of, .. }
        | Origin::Instance { of, .. }
        | Origin::Union { of } => of,
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_expr::PhysicalExpr;

    use super::*;
    use crate::checkpoint::manifest::CheckpointLayout;
    use crate::checkpoint::CheckpointKind;
    use crate::graph::{ConnectorSpec, Edge, Node, NodeId};
    use crate::key_groups::KeyGroups;
    use crate::operator::{Collector, OperatorPlan};
    use crate::operators::probe_join::ProbeJoin;
    use crate::operators::temporal_join::TemporalJoinPlan;
    use crate::source::{BadRowPolicy, SourceColumn, SourceLayout};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("v", DataType::Int64, true),
        ]))
    }

    fn rows(keys: &[&str], times: &[i64]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(keys.to_vec())),
                Arc::new(TimestampMillisecondArray::from(times.to_vec())),
                Arc::new(Int64Array::from(times.to_vec())),
            ],
        )
        .unwrap()
    }

    fn source(graph: &mut JobGraph, name: &str) -> NodeId {
        let layout = SourceLayout {
            physical_schema: schema(),
            output_schema: schema(),
            columns: (0..3).map(SourceColumn::Physical).collect(),
            event_time: None,
            idle_timeout: None,
            bad_rows: BadRowPolicy::Fail,
            change_feed_key: None,
        };
        graph.add(Node {
            name: name.into(),
            kind: NodeKind::Source {
                spec: ConnectorSpec {
                    table: name.into(),
                    connector: "memory".into(),
                    options: Default::default(),
                    schema: schema(),
                    declared_at: None,
                    primary_key: Vec::new(),
                    filter: None,
                    unread_columns: Vec::new(),
                    explain: None,
                },
                layout,
            },
            inputs: vec![],
            schema: schema(),
            uid: None,
        })
    }

    /// A temporal join took its checkpoint when it ran once (before it ran
    /// keyed): resumed where it runs keyed, its probes and versions are
    /// spread over its instances by key, none lost and none twice, at one
    /// instance and at two.
    #[test]
    fn a_node_that_ran_once_and_runs_keyed_now_spreads_its_state_over_its_instances() {
        let key: Vec<Arc<dyn PhysicalExpr>> = vec![col("k", &schema()).unwrap()];
        let plan = TemporalJoinPlan {
            join: ProbeJoin {
                left_outer: true,
                left_schema: schema(),
                right_schema: schema(),
                output_schema: Arc::new(Schema::new(
                    [schema().fields().to_vec(), schema().fields().to_vec()].concat(),
                )),
                left_keys: key.clone(),
                right_keys: key.clone(),
                residual: None,
            },
            left_time: 1,
            right_time: 1,
            allowed_lateness_ms: 0,
        };
        let mut graph = JobGraph::default();
        let left = source(&mut graph, "l");
        let right = source(&mut graph, "r");
        let hashed = |from| Edge::new(from, 0);
        let join = graph.add(Node {
            name: "join".into(),
            kind: NodeKind::Operator(Arc::new(plan.clone())),
            inputs: vec![hashed(left), hashed(right)],
            schema: plan.output_schema(),
            uid: None,
        });
        // Its state as one instance: versions and waiting probes of 8 keys.
        let keys: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(1, rows(&keys, &[10; 8]), &mut out).unwrap();
        op.on_batch(0, rows(&keys, &[20; 8]), &mut out).unwrap();
        let single = NodeCheckpoint {
            state: op.snapshot().unwrap(),
            ..NodeCheckpoint::default()
        };
        let groups = KeyGroups::default();
        let taken = TakenBy {
            place: "checkpoint".into(),
            checkpoint: 1,
            layout: CheckpointLayout {
                parallelism: 2,
                key_groups: groups,
            },
            planned: Some(graph.identities()),
            named: None,
            nodes: (0..graph.nodes.len())
                .map(|id| (graph.fingerprint(id), None, Some(Origin::Planned(id))))
                .collect(),
        };
        let mut nodes = vec![NodeCheckpoint::default(); graph.nodes.len()];
        nodes[join] = single;
        let checkpoint = Checkpoint {
            id: 1,
            kind: CheckpointKind::Running,
            nodes,
        };
        let graph = Arc::new(graph);
        for parallelism in [1, 2] {
            let to = PhysicalGraph::new(graph.clone(), parallelism, groups);
            let mapped = map_state(&taken, checkpoint.clone(), &to, false).unwrap();
            assert!(mapped.dropped.is_empty(), "{:?}", mapped.dropped);
            let declared = crate::state::declared::of_plan(&plan).unwrap();
            let (mut probes, mut versions) = (0, 0);
            for (id, node) in to.nodes.iter().enumerate() {
                if !matches!(&node.kind, NodeKind::Operator(p) if p.kind() == "temporal_join") {
                    continue;
                }
                let mut state = mapped.nodes[id].clone().expect("an instance's state").state;
                crate::state::declared::check_restored(&declared, &state).unwrap();
                plan.create().unwrap().restore(state.clone()).unwrap();
                probes += state.take(&declared[0]).unwrap().num_rows();
                versions += state.take(&declared[1]).unwrap().num_rows();
            }
            assert_eq!((probes, versions), (8, 8), "at {parallelism} instance(s)");
        }
    }
}

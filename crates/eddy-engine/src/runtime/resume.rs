//! What state a job starts from: its state directory's newest checkpoint,
//! or a savepoint; taken by which graph, at which parallelism; mapped onto
//! the job's (possibly changed) query and spread over its instances.
//!
//! In: the job's settings and its state directory. Out: where to resume
//! ([`Source`], with the parallelism and key groups it was taken with),
//! then each node's state for the graph to run ([`Restored`]).
//!
//! ```text
//!  --from-savepoint, and the directory has no checkpoints of its own ─> the savepoint
//!  otherwise ─> the directory's newest usable checkpoint (or none: afresh)
//!  its state ─ evolve::map_state (by node identity, at its N) ─ rescale (to the job's N) ─> per node
//! ```

use std::path::Path;
use std::sync::Arc;

use crate::checkpoint::evolve;
use crate::checkpoint::savepoint::Savepoint;
use crate::checkpoint::store::{CheckpointLayout, StateDir};
use crate::checkpoint::{CheckpointKind, NodeCheckpoint};
use crate::distribute::physical::PhysicalGraph;
use crate::error::{EngineError, Result};
use crate::key_groups::KeyGroups;
use crate::message::CheckpointId;

/// Where a job's state comes from.
pub(super) struct Source {
    /// The savepoint it starts from, if it does.
    pub(super) savepoint: Option<Savepoint>,
    /// How the state to resume was taken (`None`: the job starts afresh).
    pub(super) layout: Option<CheckpointLayout>,
}

/// A checkpoint laid out for the graph the job runs.
pub(super) struct Restored {
    pub(super) id: CheckpointId,
    pub(super) kind: CheckpointKind,
    /// Each node's state; `None` for a node that starts afresh (new in a
    /// changed query).
    pub(super) nodes: Vec<Option<NodeCheckpoint>>,
}

/// Whether two paths name the same directory (as given, or resolved).
fn same_path(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// Where the state to resume comes from: the state directory's newest
/// checkpoint, or `from_savepoint` when the directory has none of its own
/// (a restart of a job started from the savepoint resumes from the
/// checkpoints it has taken since; a directory holding another run's
/// checkpoints is refused).
pub(super) fn source(from_savepoint: Option<&Path>, store: Option<&StateDir>) -> Result<Source> {
    let savepoint = match (from_savepoint, store) {
        (None, _) => None,
        (Some(path), Some(store)) if store.has_checkpoints()? => {
            let continues = store
                .restored_from()
                .is_some_and(|from| same_path(&from, path));
            if !continues {
                return Err(EngineError::Checkpoint(format!(
                    "{} already holds checkpoints of a job not started from the savepoint {}: \
                     start from the savepoint with an empty state directory or --ignore-state, \
                     or resume those checkpoints without --from-savepoint",
                    store.root().display(),
                    path.display()
                )));
            }
            tracing::info!(
                "the checkpoints in {} continue the savepoint {}: resuming from them",
                store.root().display(),
                path.display()
            );
            None
        }
        (Some(path), _) => Some(Savepoint::open(path)?),
    };
    let layout = match (&savepoint, store) {
        (Some(savepoint), _) => Some(savepoint.layout()?),
        (None, Some(store)) => store.checkpointed_layout()?,
        (None, None) => None,
    };
    Ok(Source { savepoint, layout })
}

/// The state `source` holds, laid out for `graph` (expanded to the job's
/// parallelism over `key_groups`): read and checked, mapped onto the job's
/// query by node identity at the parallelism it was taken with, then spread
/// over the job's (`rescaled_from`: the N it was taken with, when it
/// differs). `None`: nothing to resume.
pub(super) fn restore(
    source: &Source,
    store: Option<&StateDir>,
    graph: &Arc<PhysicalGraph>,
    key_groups: KeyGroups,
    rescaled_from: Option<usize>,
    allow_dropped_state: bool,
) -> Result<Option<Restored>> {
    let loaded = match (&source.savepoint, store) {
        (Some(savepoint), _) => {
            tracing::info!(
                "starting from the savepoint {} (checkpoint {} of {})",
                savepoint.dir().display(),
                savepoint.info().checkpoint,
                savepoint.info().job.as_deref().unwrap_or("a job")
            );
            Some(savepoint.load_taken()?)
        }
        (None, Some(store)) => store.load_latest_taken()?,
        (None, None) => None,
    };
    let Some((checkpoint, taken)) = loaded else {
        return Ok(None);
    };
    let taken_with = match rescaled_from {
        Some(taken) => Arc::new(graph.replanned(taken, key_groups)),
        None => graph.clone(),
    };
    let (id, kind) = (checkpoint.id, checkpoint.kind);
    let mapped = evolve::map_state(&taken, checkpoint, &taken_with, allow_dropped_state)?;
    if !mapped.dropped.is_empty() {
        tracing::warn!(
            "the query changed: dropped the state of {} (--allow-dropped-state)",
            mapped.dropped.join(", ")
        );
    }
    if !mapped.kept_by_name.is_empty() {
        tracing::info!(
            "the query changed: {} keep(s) its state by name (a uid, a view or its table; what feeds it changed, it did not)",
            mapped.kept_by_name.join(", ")
        );
    }
    if !mapped.fresh.is_empty() {
        tracing::info!(
            "the query changed: {} start(s) afresh (new or changed since the checkpoint), the rest keep their state",
            mapped.fresh.join(", ")
        );
    }
    let nodes = match rescaled_from {
        Some(_) => crate::rescale::checkpoint::rescale(&taken_with, graph, mapped.nodes)?,
        None => mapped.nodes,
    };
    if let (Some(savepoint), Some(store)) = (&source.savepoint, store) {
        store.mark_restored_from(savepoint.dir())?;
    }
    Ok(Some(Restored { id, kind, nodes }))
}

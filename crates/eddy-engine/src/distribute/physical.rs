//! The physical graph: what a job runs, as against what was planned.
//!
//! In: a graph as planned ([`JobGraph`], what the SQL planner and a group
//! job's task planner make), the job's parallelism and key groups. Out: a
//! [`PhysicalGraph`] — the nodes to run (each keyed operator as N
//! instances behind a key split, [`crate::distribute::instances`]), the
//! plan they were made from, and each node's [`Origin`] in it.
//!
//! The two are types of their own so that the pass runs once per launch
//! and on a plan only: [`PhysicalGraph::new`] takes the plan, the runtime
//! takes the plan and makes the physical graph once it knows the layout
//! (a checkpoint's parallelism and key groups), and the graph a
//! checkpoint was taken with at another N is planned from the same plan
//! ([`PhysicalGraph::replanned`]), never from nodes already expanded.
//!
//! A physical graph reads as the graph of the nodes it runs (it
//! dereferences to that [`JobGraph`]), so the runtime, the checkpoint
//! store and `eddy explain` walk its nodes as any graph's.
//!
//! ```
//! use std::sync::Arc;
//! use eddy_engine::distribute::physical::PhysicalGraph;
//! use eddy_engine::graph::JobGraph;
//! use eddy_engine::key_groups::KeyGroups;
//!
//! let plan = Arc::new(JobGraph::default());
//! let physical = PhysicalGraph::new(plan.clone(), 4, KeyGroups::for_parallelism(4));
//! assert_eq!(physical.parallelism(), 4);
//! assert!(Arc::ptr_eq(physical.planned(), &plan));
//! assert_eq!(physical.replanned(2, KeyGroups::for_parallelism(2)).parallelism(), 2);
//! ```

use std::ops::Deref;
use std::sync::Arc;

use crate::distribute::instances::{self, Origin};
use crate::graph::{JobGraph, NodeId};
use crate::key_groups::KeyGroups;

/// See the module docs.
#[derive(Debug)]
pub struct PhysicalGraph {
    /// The nodes to run.
    run: JobGraph,
    /// The graph as planned they were made from.
    planned: Arc<JobGraph>,
    /// Instances of each keyed operator.
    parallelism: usize,
    /// Key groups the instances own ranges of.
    key_groups: KeyGroups,
    /// Each node's origin in `planned`, in node order.
    origins: Vec<Origin>,
}

impl PhysicalGraph {
    /// `planned` with every keyed operator run as `parallelism` instances
    /// (0 counts as 1) owning ranges of `key_groups`.
    pub fn new(planned: Arc<JobGraph>, parallelism: usize, key_groups: KeyGroups) -> Self {
        let parallelism = parallelism.max(1);
        let (run, origins) = instances::expand(&planned, parallelism, key_groups);
        Self {
            run,
            planned,
            parallelism,
            key_groups,
            origins,
        }
    }

    /// [`PhysicalGraph::new`] over the default key groups for that N
    /// ([`KeyGroups::for_parallelism`]).
    pub fn for_parallelism(planned: Arc<JobGraph>, parallelism: usize) -> Self {
        Self::new(
            planned,
            parallelism,
            KeyGroups::for_parallelism(parallelism.max(1)),
        )
    }

    /// The same plan at another parallelism or key groups (the graph a
    /// checkpoint was taken with, the job's own layout).
    pub fn replanned(&self, parallelism: usize, key_groups: KeyGroups) -> Self {
        Self::new(self.planned.clone(), parallelism, key_groups)
    }

    /// Whether this graph runs with `parallelism` over `key_groups`.
    pub fn laid_out_as(&self, parallelism: usize, key_groups: KeyGroups) -> bool {
        self.parallelism == parallelism.max(1) && self.key_groups == key_groups
    }

    /// The graph as planned.
    pub fn planned(&self) -> &Arc<JobGraph> {
        &self.planned
    }

    /// Instances each keyed operator runs as.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// The key groups this graph's keyed state is spread in
    /// ([`crate::key_groups`]).
    pub fn key_groups(&self) -> KeyGroups {
        self.key_groups
    }

    /// Each node's origin in the plan, in node order.
    pub fn origins(&self) -> &[Origin] {
        &self.origins
    }

    /// Where node `id` comes from (`None`: no such node).
    pub fn origin(&self, id: NodeId) -> Option<Origin> {
        self.origins.get(id).copied()
    }
}

impl Deref for PhysicalGraph {
    type Target = JobGraph;

    /// The nodes to run.
    fn deref(&self) -> &JobGraph {
        &self.run
    }
}

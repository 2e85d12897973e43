//! The distribution pass: where each operator's rows must be when a job
//! runs spread out, from what each operator declares
//! ([`OperatorPlan::distribution`]: any instance, keyed, or one), turned
//! into the graph to run.
//!
//! - [`instances`]: within one process, `--parallelism N` — every keyed
//!   operator becomes N instances behind a key split, joined by a union;
//! - [`exchanges`]: over tasks (`--group`: a task per partition number of
//!   the job's topics) — an operator keyed otherwise than its input's
//!   partitioning reads its rows through an exchange the connector carries
//!   ([`exchanges::ExchangeTopics`]), so each key's rows meet in one task.
//!
//! A group job gets both: the task graph is cut first, and each task then
//! runs its keyed operators as N instances. Both read the same
//! declarations, so an operator that is stateless ([`Distribution::Any`])
//! is never split or cut, and one whose state is not keyed
//! ([`Distribution::Single`]) always runs as one.
//!
//! In: a job graph. Out: the graph with splits or exchanges in.
//!
//! [`OperatorPlan::distribution`]: crate::operator::OperatorPlan::distribution
//! [`Distribution::Any`]: crate::operator::Distribution::Any
//! [`Distribution::Single`]: crate::operator::Distribution::Single

pub mod exchanges;
pub mod instances;
pub mod physical;

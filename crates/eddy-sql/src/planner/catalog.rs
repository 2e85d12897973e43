//! What a job's statements declared, as the planner reads it while it
//! builds the graph.
//!
//! In: each `CREATE TABLE`, `CREATE VIEW`, `INSERT` and query as
//! `Compiler::add_statement` reads it. Out: the declarations the
//! planning of the outputs looks up — tables (with connectors, or memory
//! tables and what is inserted into them), views, lifted
//! `MATCH_RECOGNIZE`s, the outputs to plan, the sinks written and the
//! `uid` hints given. The graph being built, and what was planned of
//! these so far, are the `Compiler`'s own; where the statement being
//! planned was written is its [`super::statement_text::StatementText`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::match_recognize::MatchView;
use super::memory_table::MemoryTable;
use super::{Output, View};
use crate::ddl::TableDef;
use crate::error::Position;

/// See the module docs.
#[derive(Default)]
pub(super) struct Catalog {
    /// Tables by name (a query's own stdout sink too).
    pub tables: BTreeMap<String, TableDef>,
    /// Views by name, planned where first read.
    pub views: BTreeMap<String, View>,
    /// Tables without a connector, and what is inserted into each.
    pub memory_tables: BTreeMap<String, MemoryTable>,
    /// `MATCH_RECOGNIZE`s lifted, by the hidden table that took each
    /// one's place (see `match_recognize`).
    pub match_views: HashMap<String, MatchView>,
    /// The queries that write sinks, in the order written.
    pub outputs: Vec<Output>,
    /// The sinks written.
    pub sinks: BTreeSet<String>,
    /// `uid` hints given so far, with where.
    pub uids: HashMap<String, Position>,
}

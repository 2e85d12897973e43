//! Where a statement was written, for the planner while it plans it.
//!
//! In: a parsed statement and the map of its (substituted) text back to
//! its file. Out: a [`StatementText`] — that map, the statement's words
//! (so an error points at the keyword of its construct) and its
//! `FOR SYSTEM_TIME AS OF` clauses (which joins are temporal).
//!
//! A view, an insert into a memory table and a lifted `MATCH_RECOGNIZE`
//! keep their statement's text and are planned within it
//! (`Compiler::within`), wherever they are first read: errors inside a
//! view point into the view, not into the query reading it.

use crate::dialect::statements::{ParsedStatement, Words};
use crate::dialect::temporal_joins::TemporalJoin;
use crate::params::SourceMap;

/// See the module docs.
#[derive(Debug, Clone, Default)]
pub(super) struct StatementText {
    /// Maps positions in the statement's (substituted) text back to its
    /// file.
    pub map: SourceMap,
    /// The statement's words, to point errors at their construct.
    pub words: Words,
    /// Its `FOR SYSTEM_TIME AS OF` clauses.
    pub temporal: Vec<TemporalJoin>,
}

impl StatementText {
    /// `parsed`'s text, its positions mapped by `map`.
    pub fn of(parsed: &ParsedStatement, map: &SourceMap) -> Self {
        Self {
            map: map.clone(),
            words: parsed.words.clone(),
            temporal: parsed.temporal_joins.clone(),
        }
    }
}

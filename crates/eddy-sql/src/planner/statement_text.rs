//! Where a statement was written, for the planner while it plans it.
//!
//! In: a parsed statement and the map of its (substituted) text back to
//! its file. Out: a [`StatementText`] — where the statement begins, that
//! map, the statement's words (so an error points at the keyword of its
//! construct) and its `FOR SYSTEM_TIME AS OF` clauses (which joins are
//! temporal).
//!
//! Every planning step takes the text of the statement it plans as an
//! argument (`cx`). A view, an insert into a memory table and a lifted
//! `MATCH_RECOGNIZE` keep their statement's text and are planned with it,
//! wherever they are first read: errors inside a view point into the
//! view, not into the query reading it.

use crate::dialect::statements::{ParsedStatement, Words};
use crate::dialect::temporal_joins::TemporalJoin;
use crate::error::Position;
use crate::params::SourceMap;

/// See the module docs.
#[derive(Debug, Clone)]
pub(super) struct StatementText {
    /// Where the statement begins: an error with no better place points
    /// here.
    pub at: Position,
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
            at: parsed.position.clone(),
            map: map.clone(),
            words: parsed.words.clone(),
            temporal: parsed.temporal_joins.clone(),
        }
    }

    /// Where the first of `words` (upper case) is written in the
    /// statement: an error about a construct points at it (`GROUP`,
    /// `OVER`, `JOIN`, ...), else at the statement's start.
    pub fn anchor(&self, words: &[&str]) -> Position {
        self.words
            .find(words)
            .cloned()
            .unwrap_or_else(|| self.at.clone())
    }
}

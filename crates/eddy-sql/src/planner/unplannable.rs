//! Constructs DataFusion's planner has no plan for, found in the syntax
//! tree before planning: a `PIVOT`, a `JSON_TABLE`, a `MATCH_RECOGNIZE`
//! where eddy does not lift it. DataFusion refuses such a relation with its
//! whole syntax tree in debug form (kilobytes); named here by the tree's
//! own variant, the error says which construct and where it is.
//!
//! In: a parsed statement. Out: the first such construct and its span, or
//! none.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Spanned, Statement, TableFactor, Visit, Visitor};
use datafusion::sql::sqlparser::tokenizer::Span;

/// The first relation of `statement` DataFusion cannot plan: what to call
/// it and where it is.
pub(super) fn unplannable_relation(statement: &Statement) -> Option<(&'static str, Span)> {
    match statement.visit(&mut Finder) {
        ControlFlow::Break(found) => Some(found),
        ControlFlow::Continue(()) => None,
    }
}

/// What a relation is called when DataFusion cannot plan it (`None`: it can).
fn construct(factor: &TableFactor) -> Option<&'static str> {
    match factor {
        TableFactor::Table { .. }
        | TableFactor::Derived { .. }
        | TableFactor::Function { .. }
        | TableFactor::UNNEST { .. }
        | TableFactor::NestedJoin { .. } => None,
        TableFactor::TableFunction { .. } => Some("TABLE(...) over a function"),
        TableFactor::JsonTable { .. } => Some("JSON_TABLE"),
        TableFactor::OpenJsonTable { .. } => Some("OPENJSON"),
        TableFactor::Pivot { .. } => Some("PIVOT"),
        TableFactor::Unpivot { .. } => Some("UNPIVOT"),
        TableFactor::MatchRecognize { .. } => {
            Some("MATCH_RECOGNIZE (row pattern recognition) here")
        }
        TableFactor::XmlTable { .. } => Some("XMLTABLE"),
        TableFactor::SemanticView { .. } => Some("SEMANTIC_VIEW"),
    }
}

struct Finder;

impl Visitor for Finder {
    type Break = (&'static str, Span);

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<Self::Break> {
        match construct(factor) {
            Some(name) => ControlFlow::Break((name, factor.span())),
            None => ControlFlow::Continue(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn found(sql: &str) -> Option<(&'static str, u64, u64)> {
        let statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        unplannable_relation(&statement)
            .map(|(name, span)| (name, span.start.line, span.start.column))
    }

    #[test]
    fn names_the_first_relation_datafusion_cannot_plan_and_where() {
        assert_eq!(
            found("SELECT a FROM t JOIN (SELECT b FROM u) s ON a = b"),
            None
        );
        assert_eq!(
            found("SELECT *\nFROM t PIVOT (sum(a) FOR b IN (1, 2)) AS p"),
            Some(("PIVOT", 2, 6))
        );
        // Inside a subquery too.
        let (name, line, _) =
            found("SELECT * FROM (SELECT * FROM t UNPIVOT (v FOR k IN (a, b)) AS u)").unwrap();
        assert_eq!((name, line), ("UNPIVOT", 1));
    }
}

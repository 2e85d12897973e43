//! The statements drivers send about their own session: `SAVEPOINT`,
//! `RELEASE SAVEPOINT` and `ROLLBACK TO SAVEPOINT` inside a transaction
//! (psycopg fetches type information under a savepoint; SQLAlchemy nests
//! transactions with them), and `DEALLOCATE [ALL]` (psycopg after a
//! rollback).
//!
//! In: those statements. Out: their command tags. `DEALLOCATE name`
//! forgets that prepared statement; `DEALLOCATE ALL` is accepted as is (a
//! driver re-preparing a name replaces the statement it had). A query over views
//! changes nothing, so there is nothing to undo: a savepoint only has to
//! be accepted. After a failed statement the transaction stays failed
//! until `ROLLBACK` (the protocol layer keeps a failed transaction's
//! state), so `ROLLBACK TO SAVEPOINT` then says so instead of pretending
//! to recover. `BEGIN`, `COMMIT` and `ROLLBACK` are `datafusion-postgres`'s
//! transaction hook's.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::{DFSchema, ParamValues};
use datafusion::logical_expr::{EmptyRelation, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::pgwire::api::results::{Response, Tag};
use datafusion_postgres::pgwire::api::store::PortalStore;
use datafusion_postgres::pgwire::api::ClientInfo;
use datafusion_postgres::pgwire::error::PgWireResult;
use datafusion_postgres::pgwire::messages::response::TransactionStatus;
use datafusion_postgres::QueryHook;

use super::errors::{self, code};

/// Accepts savepoints and `DEALLOCATE`: see the module docs.
#[derive(Debug)]
pub struct SessionStatements;

impl SessionStatements {
    fn is_ours(statement: &Statement) -> bool {
        matches!(
            statement,
            Statement::Savepoint { .. }
                | Statement::ReleaseSavepoint { .. }
                | Statement::Deallocate { .. }
                | Statement::Rollback {
                    savepoint: Some(_),
                    ..
                }
        )
    }

    /// `DEALLOCATE`: forgets the statement named, if not ALL.
    fn deallocate(statement: &Statement, client: &dyn HookClient) -> Option<Response> {
        let Statement::Deallocate { name, .. } = statement else {
            return None;
        };
        if name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all") {
            return Some(Response::Execution(Tag::new("DEALLOCATE ALL")));
        }
        client.portal_store().rm_statement(&name.value);
        Some(Response::Execution(Tag::new("DEALLOCATE")))
    }

    /// The answer to `statement` if it is one of these, in either protocol.
    fn respond(statement: &Statement, client: &dyn HookClient) -> Option<PgWireResult<Response>> {
        if let Some(response) = Self::deallocate(statement, client) {
            return Some(Ok(response));
        }
        Self::answer(statement, client.transaction_status())
    }

    fn answer(statement: &Statement, status: TransactionStatus) -> Option<PgWireResult<Response>> {
        let tag = match statement {
            Statement::Savepoint { .. } => "SAVEPOINT",
            Statement::ReleaseSavepoint { .. } => "RELEASE",
            Statement::Rollback {
                savepoint: Some(_), ..
            } => "ROLLBACK",
            _ => return None,
        };
        if status == TransactionStatus::Error {
            return Some(Err(errors::user(
                code::NOT_SUPPORTED,
                "the transaction failed and eddy does not roll back to a savepoint: ROLLBACK the whole transaction",
            )));
        }
        Some(Ok(Response::Execution(Tag::new(tag))))
    }
}

#[async_trait]
impl QueryHook for SessionStatements {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        _context: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        Self::respond(statement, client)
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        _context: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        if !Self::is_ours(statement) {
            return None;
        }
        Some(Ok(LogicalPlan::EmptyRelation(EmptyRelation {
            produce_one_row: false,
            schema: Arc::new(DFSchema::empty()),
        })))
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        _context: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        Self::respond(statement, client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn answer(sql: &str, status: TransactionStatus) -> Option<Result<String, String>> {
        let statement = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_statement()
            .unwrap();
        SessionStatements::answer(&statement, status).map(|response| match response {
            Ok(Response::Execution(tag)) => Ok(format!("{tag:?}")),
            Ok(_) => Ok("other".into()),
            Err(e) => Err(e.to_string()),
        })
    }

    #[test]
    fn savepoints_are_accepted_in_a_transaction() {
        let ok = |sql| {
            answer(sql, TransactionStatus::Transaction)
                .unwrap()
                .unwrap()
        };
        assert!(ok("SAVEPOINT \"_pg3_1\"").contains("SAVEPOINT"));
        assert!(ok("RELEASE SAVEPOINT \"_pg3_1\"").contains("RELEASE"));
        assert!(ok("RELEASE \"_pg3_1\"").contains("RELEASE"));
        assert!(ok("ROLLBACK TO SAVEPOINT \"_pg3_1\"").contains("ROLLBACK"));
        assert_eq!(
            answer("ROLLBACK", TransactionStatus::Transaction),
            None,
            "a whole rollback is the transaction hook's"
        );
        assert_eq!(answer("SELECT 1", TransactionStatus::Transaction), None);
    }

    #[test]
    fn a_failed_transaction_is_not_rolled_back_to_a_savepoint() {
        let refused = answer("ROLLBACK TO SAVEPOINT a", TransactionStatus::Error)
            .unwrap()
            .unwrap_err();
        assert!(
            refused.contains("ROLLBACK the whole transaction"),
            "{refused}"
        );
    }
}

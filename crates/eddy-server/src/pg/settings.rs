//! The server settings a PostgreSQL client or BI tool asks about at
//! connect, answered as a PostgreSQL 16 server would: `SHOW name` here,
//! `current_setting(name)` and `version()` in [`super::functions`].
//!
//! In: the name of a setting (`SHOW standard_conforming_strings`,
//! `current_setting('search_path')`). Out: its value as text. Drivers
//! decide how to talk from these (SQLAlchemy parses the major version out
//! of `version()` and refuses a server it cannot read; JDBC and psycopg
//! read `standard_conforming_strings` to quote strings), so a setting
//! eddy leaves out is one a tool fails on.
//!
//! A setting the client changed with `SET` (kept in its connection's
//! metadata) is answered by `datafusion-postgres`'s own hook, which runs
//! after this one.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::ParamValues;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::pgwire::api::results::{
    DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response,
};
use datafusion_postgres::pgwire::api::{ClientInfo, Type};
use datafusion_postgres::pgwire::error::PgWireResult;
use datafusion_postgres::QueryHook;

/// The PostgreSQL version eddy's port speaks (its protocol and catalog).
pub const SERVER_VERSION: &str = "16.6";

/// Each setting eddy answers, by its lower-case name.
const SETTINGS: &[(&str, &str)] = &[
    ("server_version", SERVER_VERSION),
    ("server_version_num", "160006"),
    ("server_encoding", "UTF8"),
    ("client_encoding", "UTF8"),
    ("standard_conforming_strings", "on"),
    ("integer_datetimes", "on"),
    ("max_identifier_length", "63"),
    ("max_index_keys", "32"),
    ("block_size", "8192"),
    ("lc_collate", "C"),
    ("lc_ctype", "C"),
    ("datestyle", "ISO, MDY"),
    ("intervalstyle", "postgres"),
    ("timezone", "UTC"),
    ("search_path", "\"$user\", public"),
    ("default_transaction_read_only", "off"),
    ("transaction_read_only", "off"),
    ("default_transaction_isolation", "read committed"),
    ("is_superuser", "off"),
    ("application_name", ""),
    ("extra_float_digits", "1"),
    ("statement_timeout", "0"),
    ("lock_timeout", "0"),
    ("idle_in_transaction_session_timeout", "0"),
    ("bytea_output", "hex"),
];

/// The value of setting `name` (any case), if eddy has it.
pub fn setting(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    SETTINGS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, value)| *value)
}

/// Answers `SHOW name` for eddy's settings, unless the client `SET` it.
#[derive(Debug)]
pub struct ShowSettings;

impl ShowSettings {
    fn answer(statement: &Statement, client: &dyn ClientInfo) -> Option<PgWireResult<Response>> {
        let Statement::ShowVariable { variable } = statement else {
            return None;
        };
        let [name] = variable.as_slice() else {
            return None;
        };
        let name = name.value.to_ascii_lowercase();
        if client.metadata().contains_key(&name) {
            return None;
        }
        let value = setting(&name)?;
        Some(one_value(&name, value).map(Response::Query))
    }
}

/// A one-row, one-column text result.
fn one_value(name: &str, value: &str) -> PgWireResult<QueryResponse> {
    let fields = Arc::new(vec![FieldInfo::new(
        name.to_string(),
        None,
        None,
        Type::TEXT,
        FieldFormat::Text,
    )]);
    let mut encoder = DataRowEncoder::new(fields.clone());
    encoder.encode_field(&Some(value))?;
    let row = encoder.take_row();
    Ok(QueryResponse::new(
        fields,
        Box::pin(futures::stream::once(async move { Ok(row) })),
    ))
}

#[async_trait]
impl QueryHook for ShowSettings {
    async fn handle_simple_query(
        &self,
        statement: &Statement,
        _context: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        Self::answer(statement, client)
    }

    async fn handle_extended_parse_query(
        &self,
        _statement: &Statement,
        _context: &SessionContext,
        _client: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        // datafusion-postgres's SET/SHOW hook plans every SHOW alike.
        None
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        _plan: &LogicalPlan,
        _params: &ParamValues,
        _context: &SessionContext,
        client: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        Self::answer(statement, client)
    }
}

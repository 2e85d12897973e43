//! One client's conversation on the PostgreSQL port: the simple and the
//! extended query protocol, each statement sent to eddy's commands or to
//! DataFusion (which answers queries over the views, `pg_catalog`,
//! `information_schema` and `SET`/`SHOW` of the usual settings, through
//! `datafusion-postgres`), and the password check.
//!
//! In: Query, Parse/Bind/Describe/Execute messages. Out: rows in the text
//! or binary format the client asked for, command tags, errors with
//! SQLSTATE codes.
//!
//! ```text
//!  text ─ statements::split ─┬─ command ─> Commands::run ─> tag
//!                            └─ query ─ relations checked ─ min epoch waited for ─> DataFusion ─> rows
//! ```
//!
//! In the extended protocol a command is parsed to a statement without a
//! plan (it has no parameters and returns no rows) and run at Execute.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion_postgres::pgwire::api::auth::cleartext::CleartextPasswordAuthStartupHandler;
use datafusion_postgres::pgwire::api::auth::noop::NoopStartupHandler;
use datafusion_postgres::pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use datafusion_postgres::pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use datafusion_postgres::pgwire::api::portal::{Format, Portal};
use datafusion_postgres::pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use datafusion_postgres::pgwire::api::results::{FieldInfo, Response};
use datafusion_postgres::pgwire::api::stmt::QueryParser;
use datafusion_postgres::pgwire::api::store::PortalStore;
use datafusion_postgres::pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionManager, PgWireServerHandlers, Type,
};
use datafusion_postgres::pgwire::error::{PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::PgWireBackendMessage;
use datafusion_postgres::{DfSessionService, Parser};
use eddy_connectors::view::ViewCatalog;
use futures::Sink;

use super::catalog::SessionCatalog;
use super::commands::{Commands, MIN_EPOCH};
use super::errors::{self, code};
use super::like_escape;
use super::point_query::PointQuery;
use super::statements::{self, Statement};

/// What DataFusion keeps of a prepared statement: its text, and its
/// parsed form and plan (none for eddy's commands).
type DfStatement = (
    String,
    Option<(
        datafusion::sql::sqlparser::ast::Statement,
        datafusion::logical_expr::LogicalPlan,
    )>,
);

/// How long a query waits for `eddy.min_epoch` unless the client set a
/// `statement_timeout`.
const DEFAULT_EPOCH_WAIT: Duration = Duration::from_secs(30);

/// How long a query waits for a view whose job is starting.
const VIEW_START_WAIT: Duration = Duration::from_secs(30);

/// Every client's handlers: see the module docs.
pub struct PgHandlers {
    session: Arc<PgSession>,
    startup: AnyStartup,
    cancel: Arc<DefaultCancelHandler>,
}

/// Accepts every client (a server without `--token`).
pub struct OpenStartup {
    connections: Arc<ConnectionManager>,
}

impl NoopStartupHandler for OpenStartup {
    fn connection_manager(&self) -> Option<Arc<ConnectionManager>> {
        Some(self.connections.clone())
    }
}

/// The password of every user is the server's `--token`.
pub struct TokenAuth {
    token: String,
}

impl Debug for TokenAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuth")
            .field("token", &"<redacted>")
            .finish()
    }
}

#[async_trait]
impl AuthSource for TokenAuth {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Ok(Password::new(None, self.token.as_bytes().to_vec()))
    }
}

impl PgHandlers {
    /// Handlers over `context` (views, system tables, `pg_catalog`) and
    /// eddy's commands; clients give `token` as their password when set.
    pub fn new(
        context: Arc<SessionContext>,
        commands: Commands,
        catalog: Arc<SessionCatalog>,
        views: ViewCatalog,
        token: Option<String>,
    ) -> Self {
        let hooks: Vec<Arc<dyn datafusion_postgres::QueryHook>> = vec![
            Arc::new(super::settings::ShowSettings),
            Arc::new(super::session_statements::SessionStatements),
            Arc::new(datafusion_postgres::hooks::cursor::CursorStatementHook),
            Arc::new(datafusion_postgres::hooks::set_show::SetShowHook),
            Arc::new(datafusion_postgres::hooks::transactions::TransactionStatementHook),
        ];
        let df = Arc::new(DfSessionService::new_with_hooks(context.clone(), hooks));
        let relations = Arc::new(Relations {
            context,
            catalog,
            views: views.clone(),
        });
        let session = Arc::new(PgSession {
            parser: Arc::new(EddyParser {
                inner: ExtendedQueryHandler::query_parser(df.as_ref()),
                relations: relations.clone(),
            }),
            df,
            commands: Arc::new(commands),
            relations,
            views,
        });
        let connections = Arc::new(ConnectionManager::new());
        let startup = match token {
            Some(token) => AnyStartup::Token(Arc::new(
                CleartextPasswordAuthStartupHandler::new(
                    TokenAuth { token },
                    DefaultServerParameterProvider::default(),
                )
                .with_connection_manager(connections.clone()),
            )),
            None => AnyStartup::Open(Arc::new(OpenStartup {
                connections: connections.clone(),
            })),
        };
        Self {
            session,
            startup,
            cancel: Arc::new(DefaultCancelHandler::new(connections)),
        }
    }
}

/// The startup handler a connection gets: the password check with the
/// server's token, or none.
#[derive(Clone)]
pub enum AnyStartup {
    /// With `--token`.
    Token(Arc<CleartextPasswordAuthStartupHandler<TokenAuth, DefaultServerParameterProvider>>),
    /// Without.
    Open(Arc<OpenStartup>),
}

#[async_trait]
impl StartupHandler for AnyStartup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: datafusion_postgres::pgwire::messages::PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self {
            Self::Token(handler) => handler.on_startup(client, message).await,
            Self::Open(handler) => handler.on_startup(client, message).await,
        }
    }
}

impl PgWireServerHandlers for PgHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.session.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.session.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::new(self.startup.clone())
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.cancel.clone()
    }
}

/// See the module docs.
pub struct PgSession {
    df: Arc<DfSessionService>,
    parser: Arc<EddyParser>,
    commands: Arc<Commands>,
    relations: Arc<Relations>,
    views: ViewCatalog,
}

fn split(text: &str) -> PgWireResult<Vec<Statement>> {
    statements::split(text).map_err(|e| errors::user(code::SYNTAX_ERROR, e.message))
}

/// What a query may read: the views, eddy's system tables and the
/// catalogs drivers ask for.
pub struct Relations {
    context: Arc<SessionContext>,
    catalog: Arc<SessionCatalog>,
    views: ViewCatalog,
}

impl Relations {
    /// Checks the relations a query reads before DataFusion plans it: a
    /// declared table is a stream (say what to do instead), an unknown
    /// name is PostgreSQL's `undefined_table`, a view whose job is still
    /// starting (after a restart) is waited for. Returns the views read.
    pub async fn check(&self, text: &str) -> PgWireResult<Vec<String>> {
        let Ok(parsed) = DFParser::parse_sql_with_dialect(text, &PostgreSqlDialect {}) else {
            // DataFusion's own parse reports the syntax error.
            return Ok(Vec::new());
        };
        let state = self.context.state();
        let mut read = Vec::new();
        for statement in parsed {
            let Ok(references) = state.resolve_table_references(&statement) else {
                continue;
            };
            for reference in references {
                let in_public = reference
                    .schema()
                    .is_none_or(|s| s.eq_ignore_ascii_case("public"));
                if !in_public {
                    continue;
                }
                let name = reference.table();
                if let Some(view) = self.view_named(name).await? {
                    read.push(view);
                } else if !(reference.schema().is_none() && is_catalog_table(&state, name)) {
                    return Err(errors::missing_relation(
                        name,
                        self.catalog.table(name).is_some(),
                    ));
                }
            }
        }
        Ok(read)
    }

    /// The view `name` reads, waiting (up to [`VIEW_START_WAIT`]) for one
    /// the session catalog has whose job has not declared it yet.
    async fn view_named(&self, name: &str) -> PgWireResult<Option<String>> {
        let find = || {
            self.views
                .names()
                .into_iter()
                .find(|v| v == name || v.eq_ignore_ascii_case(name))
        };
        if let Some(view) = find() {
            return Ok(Some(view));
        }
        if self.catalog.view(name).is_none() {
            return Ok(None);
        }
        let started = std::time::Instant::now();
        while started.elapsed() < VIEW_START_WAIT {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if let Some(view) = find() {
                return Ok(Some(view));
            }
        }
        Err(errors::user(
            code::NOT_READY,
            format!("materialized view \"{name}\" is starting; its job has not opened it in {VIEW_START_WAIT:?} (SHOW JOBS)"),
        ))
    }
}

impl PgSession {
    /// Waits until each view read has published `eddy.min_epoch`.
    async fn wait_for_epoch<C: ClientInfo>(
        &self,
        client: &C,
        views: &[String],
    ) -> PgWireResult<()> {
        let Some(epoch) = min_epoch(client) else {
            return Ok(());
        };
        let timeout = client
            .metadata()
            .get("statement_timeout")
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|t| *t > 0)
            .map_or(DEFAULT_EPOCH_WAIT, Duration::from_millis);
        for view in views {
            let catalog = self.views.clone();
            let name = view.clone();
            let reached =
                tokio::task::spawn_blocking(move || catalog.wait_for(&name, epoch, timeout))
                    .await
                    .map_err(|e| errors::user(code::INTERNAL, e.to_string()))?;
            if reached.is_none() {
                let now = self.views.snapshot(view).map_or(0, |s| s.epoch);
                return Err(errors::user(
                    code::CANCELED,
                    format!("view \"{view}\" is at epoch {now}; epoch {epoch} (eddy.min_epoch) did not come in {timeout:?}"),
                ));
            }
        }
        Ok(())
    }
}

/// The epoch the client waits for (`SET eddy.min_epoch`), if any.
fn min_epoch<C: ClientInfo>(client: &C) -> Option<u64> {
    client
        .metadata()
        .get(MIN_EPOCH)
        .and_then(|e| e.parse::<u64>().ok())
        .filter(|e| *e > 0)
}

/// Whether an unqualified name is one DataFusion finds without a schema:
/// a `pg_catalog` table (found by the compatibility layer) or a function
/// called in FROM (`generate_series(...)`, or `string_to_array(...)`,
/// which the compatibility layer rewrites). `information_schema` tables
/// are qualified.
fn is_catalog_table(state: &datafusion::execution::SessionState, name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("pg_")
        || state.table_functions().contains_key(&lower)
        || state.scalar_functions().contains_key(&lower)
        || state
            .catalog_list()
            .catalog(&state.config().options().catalog.default_catalog)
            .and_then(|c| c.schema("pg_catalog"))
            .is_some_and(|s| s.table_exist(&lower))
}

#[async_trait]
impl SimpleQueryHandler for PgSession {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut responses = Vec::new();
        for statement in split(query)? {
            match statement {
                Statement::Query(text) => {
                    let text = like_escape::rewrite(&text);
                    let views = self.relations.check(&text).await?;
                    self.wait_for_epoch(client, &views).await?;
                    let answered = SimpleQueryHandler::do_query(self.df.as_ref(), client, &text)
                        .await
                        .map_err(errors::from_query)?;
                    responses.extend(answered);
                }
                command => {
                    responses.push(self.commands.run(command, client.metadata_mut()).await?);
                }
            }
        }
        Ok(responses)
    }
}

/// Parses eddy's commands itself and hands queries to DataFusion's parser.
pub struct EddyParser {
    inner: Arc<Parser>,
    relations: Arc<Relations>,
}

#[async_trait]
impl QueryParser for EddyParser {
    type Statement = DfStatement;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut statements = split(sql)?;
        if statements.len() > 1 {
            return Err(errors::user(
                code::SYNTAX_ERROR,
                "cannot insert multiple commands into a prepared statement",
            ));
        }
        match statements.pop() {
            None => Ok(None),
            Some(Statement::Query(text)) => {
                let text = like_escape::rewrite(&text);
                self.relations.check(&text).await?;
                self.inner
                    .parse_sql(client, &text, types)
                    .await
                    .map_err(errors::from_query)
            }
            // Run at Execute, from its text.
            Some(_) => Ok(Some((sql.to_string(), None))),
        }
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        self.inner.get_parameter_types(stmt)
    }

    fn get_result_schema(
        &self,
        stmt: &Self::Statement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        self.inner.get_result_schema(stmt, column_format)
    }
}

#[async_trait]
impl ExtendedQueryHandler for PgSession {
    type Statement = DfStatement;
    type QueryParser = EddyParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (text, parsed) = &portal.statement.statement;
        if parsed.is_none() {
            if let Some(command) = split(text)?.pop() {
                if !matches!(command, Statement::Query(_)) {
                    return self.commands.run(command, client.metadata_mut()).await;
                }
            }
        }
        // Parse checked the relations; they are read again only to know
        // which views to wait for. A view dropped since fails its scan
        // (42P01).
        if min_epoch(client).is_some() {
            let views = self.relations.check(text).await?;
            self.wait_for_epoch(client, &views).await?;
        }
        if let Some((_, plan)) = parsed {
            if let Some(point) = PointQuery::of(plan) {
                if let Some(response) = point.answer(portal, client.metadata())? {
                    return Ok(response);
                }
            }
        }
        ExtendedQueryHandler::do_query(self.df.as_ref(), client, portal, max_rows)
            .await
            .map_err(errors::from_query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_not_in_debug_output() {
        let auth = TokenAuth {
            token: "s3cret-value".into(),
        };
        let shown = format!("{auth:?}");
        assert!(!shown.contains("s3cret-value"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}

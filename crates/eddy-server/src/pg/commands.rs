//! eddy's own commands on the PostgreSQL port: DDL kept in the session
//! catalog, materialized views and `INSERT INTO` started as jobs of the
//! server, drops, and `SET eddy.min_epoch`.
//!
//! In: a [`Statement`] other than a query. Out: the command tag a client
//! expects, or an error with its SQLSTATE and, where eddy's planner names
//! one, the position in the client's statement.
//!
//! ```text
//!  CREATE MATERIALIZED VIEW v AS q ─> job SQL = declared DDL
//!                                              + CREATE TABLE v WITH ('connector' = 'view')
//!                                              + INSERT INTO v q
//!                                  ─> JobManager::submit ─> the view sink declares v ─> CREATE MATERIALIZED VIEW
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion_postgres::pgwire::api::results::{Response, Tag};
use datafusion_postgres::pgwire::error::PgWireResult;
use eddy_connectors::view::ViewCatalog;

use super::catalog::{Declared, MaterializedView, SessionCatalog};
use super::errors::{self, code};
use super::statements::{ObjectKind, Statement};
use crate::error::ServerError;
use crate::jobs::JobManager;
use crate::views::{JobStatus, SubmitRequest};

/// Client metadata key of `SET eddy.min_epoch`.
pub const MIN_EPOCH: &str = "eddy.min_epoch";

/// How long `CREATE MATERIALIZED VIEW` waits for its job to declare the view.
const VIEW_START_WAIT: Duration = Duration::from_secs(30);

/// See the module docs.
pub struct Commands {
    manager: Arc<JobManager>,
    catalog: Arc<SessionCatalog>,
    views: ViewCatalog,
}

/// Where a job's SQL puts the client's statement: the declared DDL and
/// any lines eddy adds come first.
pub(super) struct Placed {
    sql: String,
    /// Lines before the client's text.
    lines_before: usize,
    /// Characters of the client's text before the text placed (a view's
    /// query follows `CREATE MATERIALIZED VIEW v AS `).
    offset: usize,
    text: String,
}

impl Commands {
    /// Commands over the server's jobs and views.
    pub fn new(manager: Arc<JobManager>, catalog: Arc<SessionCatalog>, views: ViewCatalog) -> Self {
        Self {
            manager,
            catalog,
            views,
        }
    }

    /// Runs one command.
    pub async fn run(
        &self,
        statement: Statement,
        metadata: &mut std::collections::HashMap<String, String>,
    ) -> PgWireResult<Response> {
        let tag = statement.tag();
        match statement {
            Statement::Declare {
                kind,
                name,
                if_not_exists,
                sql,
                at,
            } => self.declare(kind, name, if_not_exists, sql, at).await?,
            Statement::CreateMaterializedView {
                name,
                if_not_exists,
                query,
                query_at,
            } => {
                self.create_view(name, if_not_exists, query, query_at)
                    .await?;
            }
            Statement::Drop {
                kind,
                name,
                if_exists,
            } => self.drop(kind, name, if_exists).await?,
            Statement::Insert { sql, at } => {
                let placed = self.place(at, &sql, "");
                self.submit(format!("insert {}", first_line(&sql)), placed)
                    .await?;
                return Ok(Response::Execution(
                    Tag::new("INSERT").with_oid(0).with_rows(0),
                ));
            }
            Statement::SetMinEpoch(epoch) => {
                metadata.insert(MIN_EPOCH.to_string(), epoch.to_string());
            }
            Statement::Query(_) => {
                return Err(errors::user(
                    code::INTERNAL,
                    "a query reached the command runner",
                ))
            }
        }
        Ok(Response::Execution(Tag::new(tag)))
    }

    /// The job SQL for `text` (`offset` characters into the client's
    /// text), placed after the declared DDL and `header`.
    fn place(&self, offset: usize, text: &str, header: &str) -> Placed {
        let ddl = self.catalog.ddl();
        let lines_before = ddl.lines().count() + header.lines().count();
        Placed {
            sql: format!("{ddl}{header}{text};\n"),
            lines_before,
            offset,
            text: text.to_string(),
        }
    }

    async fn declare(
        &self,
        kind: ObjectKind,
        name: String,
        if_not_exists: bool,
        sql: String,
        at: usize,
    ) -> PgWireResult<()> {
        if let Err(taken) = self.catalog.check_free(kind, &name) {
            return if if_not_exists {
                Ok(())
            } else {
                Err(errors::user(code::DUPLICATE_OBJECT, taken.to_string()))
            };
        }
        // The declarations so far and this one must plan: nothing runs yet.
        let placed = self.place(at, &sql, "");
        let manager = self.manager.clone();
        let checked = {
            let sql = placed.sql.clone();
            blocking(move || manager.validate(&sql, &BTreeMap::new())).await?
        };
        match checked {
            Ok(_) => {}
            Err(ServerError::Sql(eddy_sql::SqlError::NothingToRun)) => {}
            Err(e) => return Err(errors::from_server(e, &placed)),
        }
        self.catalog
            .declare(Declared { kind, name, sql })
            .map_err(|e| errors::user(code::DUPLICATE_OBJECT, e.to_string()))
    }

    async fn create_view(
        &self,
        name: String,
        if_not_exists: bool,
        query: String,
        query_at: usize,
    ) -> PgWireResult<()> {
        if let Err(taken) = self.catalog.check_free(ObjectKind::MaterializedView, &name) {
            return if if_not_exists {
                Ok(())
            } else {
                Err(errors::user(code::DUPLICATE_OBJECT, taken.to_string()))
            };
        }
        if self.views.snapshot(&name).is_some() {
            return Err(errors::user(
                code::DUPLICATE_OBJECT,
                format!("a job of this server already writes view \"{name}\""),
            ));
        }
        let header =
            format!("CREATE TABLE {name} WITH ('connector' = 'view');\nINSERT INTO {name}\n");
        let placed = self.place(query_at, &query, &header);
        let job = self.submit(format!("view {name}"), placed).await?;
        if let Err(e) = self.catalog.add_view(MaterializedView {
            name: name.clone(),
            job: job.clone(),
            query,
        }) {
            self.forget_job(job).await;
            return Err(errors::user(code::DUPLICATE_OBJECT, e.to_string()));
        }
        // The job's view sink declares the view as it opens: from then on
        // a SELECT reads it (empty until its first checkpoint completes).
        let deadline = Instant::now() + VIEW_START_WAIT;
        loop {
            if self.views.snapshot(&name).is_some() {
                return Ok(());
            }
            let job_view = {
                let manager = self.manager.clone();
                let job = job.clone();
                blocking(move || manager.job(&job)).await?
            };
            let failed = match &job_view {
                Ok(view) if view.summary.state == JobStatus::Running => None,
                Ok(view) => Some(
                    view.summary
                        .error
                        .clone()
                        .unwrap_or_else(|| format!("its job {}", view.summary.state.name())),
                ),
                Err(e) => Some(e.to_string()),
            };
            if let Some(why) = failed.or_else(|| {
                (Instant::now() > deadline)
                    .then(|| format!("its job did not start in {VIEW_START_WAIT:?}"))
            }) {
                let _ = self.catalog.remove_view(&name);
                self.forget_job(job).await;
                return Err(errors::user(
                    code::INTERNAL,
                    format!("materialized view \"{name}\" could not start: {why}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn drop(&self, kind: ObjectKind, name: String, if_exists: bool) -> PgWireResult<()> {
        let missing = || {
            if if_exists {
                Ok(())
            } else {
                Err(errors::user(
                    if kind == ObjectKind::Function {
                        code::UNDEFINED_FUNCTION
                    } else {
                        code::UNDEFINED_TABLE
                    },
                    SessionCatalog::missing(kind, &name).to_string(),
                ))
            }
        };
        if kind != ObjectKind::MaterializedView {
            return match self.catalog.drop_declared(kind, &name) {
                Ok(true) => Ok(()),
                Ok(false) => missing(),
                Err(e) => Err(errors::user(code::INTERNAL, e.to_string())),
            };
        }
        let Some(view) = self.catalog.view(&name) else {
            return missing();
        };
        self.forget_job(view.job).await;
        self.views.remove(&view.name);
        self.catalog
            .remove_view(&view.name)
            .map_err(|e| errors::user(code::INTERNAL, e.to_string()))
    }

    /// Starts `placed` as a job named `name`; its id.
    async fn submit(&self, name: String, placed: Placed) -> PgWireResult<String> {
        let manager = self.manager.clone();
        let request = SubmitRequest {
            name: Some(name),
            sql: placed.sql.clone(),
            params: BTreeMap::new(),
            parallelism: None,
            memory_limit: None,
            group: None,
            session_timeout_ms: None,
            from_savepoint: None,
        };
        match blocking(move || manager.submit(request)).await? {
            Ok(view) => Ok(view.summary.id),
            Err(e) => Err(errors::from_server(e, &placed)),
        }
    }

    /// Stops and deletes a job (a dropped view's).
    async fn forget_job(&self, job: String) {
        let manager = self.manager.clone();
        let deleted = blocking(move || manager.delete(&job)).await;
        if let Ok(Err(e)) = deleted {
            tracing::warn!("dropping a view's job: {e}");
        }
    }
}

impl Placed {
    /// The 1-based character position in the client's text of
    /// `line`:`column` of the job SQL, if it falls in the client's text.
    pub fn position(&self, line: u64, column: u64) -> Option<usize> {
        let line = (line as usize).checked_sub(self.lines_before + 1)?;
        let mut offset = 0;
        for (i, text) in self.text.split('\n').enumerate() {
            if i == line {
                let chars_before: usize = self.text[..offset].chars().count();
                return Some(self.offset + chars_before + column as usize);
            }
            offset += text.len() + 1;
        }
        None
    }
}

fn first_line(sql: &str) -> String {
    let line = sql.lines().next().unwrap_or_default();
    line.chars().take(60).collect()
}

/// Runs `f` on a blocking thread (planning and starting jobs never run on
/// the async runtime).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> PgWireResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| errors::user(code::INTERNAL, e.to_string()))
}

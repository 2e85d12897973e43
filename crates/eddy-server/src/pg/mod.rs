//! `eddy serve --pg-addr`: the PostgreSQL wire protocol, so `psql`, every
//! PostgreSQL driver and BI tools query eddy's materialized views and
//! manage its jobs with SQL.
//!
//! In: TCP (or TLS) connections speaking PostgreSQL's protocol. Out: the
//! results of queries over the views as of their latest completed
//! checkpoint, and jobs started, listed and dropped on the server's
//! [`JobManager`].
//!
//! ```text
//!  client ─ TLS? ─ password = --token ─ PgSession (session.rs)
//!            ├─ CREATE TABLE/VIEW/FUNCTION ─ SessionCatalog (catalog.rs)
//!            ├─ CREATE MATERIALIZED VIEW / INSERT INTO / DROP ─ Commands (commands.rs) ─ JobManager
//!            └─ SELECT / SHOW / SET ─ DataFusion over ViewSchema + eddy.jobs/views + pg_catalog (tables.rs)
//! ```
//!
//! [`statements`] tells the two kinds of statement apart; [`errors`] gives
//! each error its SQLSTATE.

pub mod catalog;
pub mod commands;
pub mod errors;
pub mod functions;
pub mod information_schema;
pub mod like_escape;
pub mod point_query;
pub mod session;
pub mod session_statements;
pub mod settings;
pub mod statements;
pub mod tables;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_postgres::datafusion_pg_catalog::setup_pg_catalog;
use datafusion_postgres::pgwire::tokio::tokio_rustls::rustls;
use datafusion_postgres::pgwire::tokio::{process_socket, TlsAcceptor};
use eddy_connectors::view::ViewCatalog;

use crate::error::{Result, ServerError};
use crate::jobs::JobManager;
use catalog::SessionCatalog;
use commands::Commands;
use session::PgHandlers;

/// How the port is served.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// Address to listen on.
    pub addr: SocketAddr,
    /// A PEM certificate chain and its PKCS#8 key: clients may then ask
    /// for TLS (`sslmode=require`).
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// The catalog a connection's queries run against.
fn context(
    manager: Arc<JobManager>,
    catalog: Arc<SessionCatalog>,
    views: ViewCatalog,
) -> Result<Arc<SessionContext>> {
    let internal = |e: &dyn std::fmt::Display| ServerError::Internal(format!("--pg-addr: {e}"));
    let context = SessionContext::new_with_config(
        SessionConfig::new()
            // The port's own information_schema (PostgreSQL's type names).
            .with_information_schema(false)
            .with_default_catalog_and_schema("eddy", "public"),
    );
    functions::register(&context);
    let root = context
        .catalog("eddy")
        .ok_or_else(|| internal(&"no default catalog"))?;
    root.register_schema("public", Arc::new(tables::ViewSchema::new(views.clone())))
        .map_err(|e| internal(&e))?;
    let system = MemorySchemaProvider::new();
    system
        .register_table("jobs".into(), tables::jobs_table(manager))
        .map_err(|e| internal(&e))?;
    system
        .register_table("views".into(), tables::views_table(catalog, views))
        .map_err(|e| internal(&e))?;
    root.register_schema("eddy", Arc::new(system))
        .map_err(|e| internal(&e))?;
    root.register_schema(
        information_schema::NAME,
        Arc::new(information_schema::InformationSchema::new("eddy", &root)),
    )
    .map_err(|e| internal(&e))?;
    setup_pg_catalog(&context, "eddy", EmptyContextProvider).map_err(|e| internal(&e))?;
    Ok(Arc::new(context))
}

fn tls_acceptor(cert: &PathBuf, key: &PathBuf) -> Result<TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |path: &PathBuf, e: &dyn std::fmt::Display| ServerError::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
    };
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, &e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, &e))?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| bad(cert, &e))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Binds the port and serves it on the runtime; the address bound.
pub async fn start(
    config: &PgConfig,
    state_dir: &std::path::Path,
    token: Option<String>,
    manager: Arc<JobManager>,
    views: ViewCatalog,
) -> Result<SocketAddr> {
    let catalog = Arc::new(
        SessionCatalog::open(state_dir, manager.state_bucket())
            .map_err(|e| ServerError::Internal(e.to_string()))?,
    );
    let tls = match &config.tls {
        Some((cert, key)) => Some(tls_acceptor(cert, key)?),
        None => None,
    };
    // The views of jobs that ended (a bounded source read to its end)
    // answer again from their last checkpoint.
    for view in catalog.views() {
        let (manager, job) = (manager.clone(), view.job.clone());
        let reopened = tokio::task::spawn_blocking(move || manager.reopen(&job))
            .await
            .map_err(|e| ServerError::Internal(e.to_string()))?;
        if let Err(e) = reopened {
            tracing::warn!(view = %view.name, "cannot reopen the view's job: {e}");
        }
    }
    let context = context(manager.clone(), catalog.clone(), views.clone())?;
    let commands = Commands::new(manager, catalog.clone(), views.clone());
    let handlers = Arc::new(PgHandlers::new(context, commands, catalog, views, token));
    let io = |e: std::io::Error| ServerError::Io {
        path: config.addr.to_string(),
        source: e,
    };
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((socket, peer)) => {
                    let handlers = handlers.clone();
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        if let Err(e) = process_socket(socket, tls, handlers).await {
                            tracing::debug!(%peer, "PostgreSQL connection: {e}");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("PostgreSQL port: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(addr)
}

//! # eddy-server
//!
//! `eddy serve`: the long-running form of eddy. Jobs are submitted over an
//! HTTP API, run on the engine's threads, checkpoint into the server's state
//! directory, and outlive the server process: a server restarted after a
//! crash resumes every job that was running from its latest checkpoint.
//!
//! ```text
//!  HTTP (axum) ──> api ──> jobs::JobManager ──> eddy_sql::compile ──> eddy_engine::start_job ──> JobHandle
//!                   │            │ store: STATE/jobs/<id>/job.json (definition, state), .../state (checkpoints)
//!                   │            └ sampler: events/s, watermark lag, history for charts
//!                   ├─ tail: sink rows over Server-Sent Events (a broadcast per sink; slow readers skip)
//!                   ├─ prometheus: GET /metrics
//!                   └─ openapi: GET /api/v1/openapi.json (utoipa, from the handlers' types)
//! ```
//!
//! - [`config`]: what `eddy serve` is given;
//! - [`error`]: the crate's error type and how it becomes an HTTP response;
//! - [`jobs`]: the job manager; [`store`]: job definitions on disk;
//!   [`state_bucket`]: the same kept in a bucket (`--state-dir s3://...`);
//! - [`connectors`]: the server's connector factory (path roots, sink taps);
//! - [`tail`], [`prometheus`], [`api`], [`openapi`]: the HTTP side;
//! - [`web`]: the web console, embedded in the binary.

pub mod api;
pub mod config;
pub mod connectors;
pub mod error;
pub mod jobs;
pub mod materialized;
pub mod openapi;
pub mod pg;
pub mod prometheus;
pub mod state_bucket;
pub mod store;
pub mod tail;
pub mod views;
pub mod web;

use std::sync::Arc;

pub use config::ServerConfig;
pub use error::{Result, ServerError};

/// The addresses a server listens on.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The HTTP API and console.
    pub http: std::net::SocketAddr,
    /// The PostgreSQL port, when there is one.
    pub pg: Option<std::net::SocketAddr>,
}

/// Starts the job manager (resuming jobs of an earlier run) and serves the
/// API until `shutdown` resolves; `ready` gets the addresses bound (useful
/// with port 0). On shutdown every running job is stopped with a final
/// checkpoint and stays `running` on disk, so the next start resumes it.
pub async fn serve(
    config: ServerConfig,
    ready: impl FnOnce(Bound),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let io = |e: std::io::Error| ServerError::Io {
        path: config.addr.to_string(),
        source: e,
    };
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let config = Arc::new(config);
    let manager = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || jobs::JobManager::open(config))
            .await
            .map_err(|e| ServerError::Internal(e.to_string()))??
    };
    let sampler = manager.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            sampler.sample();
        }
    });
    let pg = match &config.pg {
        Some(pg) => Some(
            pg::start(
                pg,
                &config.state_dir,
                config.token.clone(),
                manager.clone(),
                manager.views().clone(),
            )
            .await?,
        ),
        None => None,
    };
    let app = api::router(api::AppState {
        manager: manager.clone(),
        config,
    });
    ready(Bound { http: addr, pg });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    tokio::task::spawn_blocking(move || manager.shutdown())
        .await
        .map_err(|e| ServerError::Internal(e.to_string()))?;
    served.map_err(|e| ServerError::Io {
        path: addr.to_string(),
        source: e,
    })
}

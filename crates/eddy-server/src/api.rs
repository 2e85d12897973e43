//! The HTTP routes (axum). Everything under `/api/v1` speaks JSON and, when
//! the server has a token, needs `Authorization: Bearer <token>` (or
//! `?token=`, for browsers' event streams);
//! `/metrics` and `/healthz` are open. Handlers hand work that plans or
//! waits to blocking threads, so the async runtime only moves bytes.
//!
//! | route | does |
//! |---|---|
//! | `POST /api/v1/jobs` | submit a job: 201 with the job, 400 with `line`/`column` for bad SQL |
//! | `GET /api/v1/jobs` | list jobs |
//! | `GET /api/v1/jobs/{id}` | one job: graph, metrics, checkpoints, history |
//! | `PUT /api/v1/jobs/{id}` | redeploy with new SQL, keeping the state of what did not change |
//! | `POST /api/v1/jobs/{id}/redeploy/preview` | what a redeploy would keep, start and drop (nothing stops) |
//! | `POST /api/v1/jobs/{id}/stop` | stop gracefully (final checkpoint, sinks committed); `{"savepoint": true}` keeps a savepoint of it |
//! | `GET /api/v1/views` | the materialized views (`view` sinks; `CREATE MATERIALIZED VIEW` over `--pg-addr`) |
//! | `GET /api/v1/views/{name}` | a view's rows as of its latest completed checkpoint (`?limit=`, `?min_epoch=`) |
//! | `GET /api/v1/savepoints` | the savepoints kept (`from_savepoint` in a submission starts from one) |
//! | `DELETE /api/v1/jobs/{id}` | stop and forget |
//! | `GET /api/v1/jobs/{id}/sinks/{sink}/tail` | a sink's rows as Server-Sent Events |
//! | `POST /api/v1/validate` | the operator graph, or the errors |
//! | `GET /api/v1/openapi.json` | this API as OpenAPI 3 |
//! | `GET /metrics` | Prometheus text |
//! | `GET /healthz` | `ok` |
//! | `GET /`, `GET /assets/*` | the web console |
//! | `GET /api/v1/examples` | the reference pipeline's queries, for the console's editor |

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use utoipa::OpenApi;

use crate::config::ServerConfig;
use crate::error::{ErrorBody, Result, ServerError};
use crate::jobs::JobManager;
use crate::openapi::ApiDoc;
use crate::views::{
    JobSummary, JobView, RedeployPlan, RedeployRequest, RedeployView, SavepointView, StopRequest,
    SubmitRequest, ValidateRequest, ValidateResponse,
};

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    /// The jobs.
    pub manager: Arc<JobManager>,
    /// The server's settings.
    pub config: Arc<ServerConfig>,
}

/// All routes.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/api/v1/jobs", get(list_jobs).post(submit_job))
        .route(
            "/api/v1/jobs/{id}",
            get(get_job).put(redeploy_job).delete(delete_job),
        )
        .route("/api/v1/jobs/{id}/stop", post(stop_job))
        .route("/api/v1/jobs/{id}/redeploy/preview", post(preview_redeploy))
        .route("/api/v1/savepoints", get(list_savepoints))
        .route("/api/v1/views", get(crate::materialized::list_views))
        .route("/api/v1/views/{name}", get(crate::materialized::get_view))
        .route("/api/v1/jobs/{id}/sinks/{sink}/tail", get(tail))
        .route("/api/v1/validate", post(validate))
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/api/v1/examples", get(crate::web::list_examples))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let limit = state.config.max_body_bytes;
    Router::new()
        .merge(api)
        .route("/", get(crate::web::index))
        .route("/assets/js/{name}", get(crate::web::script))
        .route("/assets/style.css", get(crate::web::style))
        .route("/metrics", get(metrics))
        .route("/healthz", get(health))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(token) = &state.config.token {
        let header = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        // Browsers' EventSource cannot set headers: `?token=` works too.
        let query = request
            .uri()
            .query()
            .unwrap_or_default()
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="));
        if header != Some(token.as_str()) && query != Some(token.as_str()) {
            return ServerError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(ErrorBody {
            error: "no such route".into(),
            line: None,
            column: None,
        }),
    )
        .into_response()
}

/// A JSON body whose rejections (malformed JSON, a missing field, too
/// large) come back as JSON errors with their status.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request(
        request: Request,
        state: &S,
    ) -> std::result::Result<Self, Self::Rejection> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => {
                let body = ErrorBody {
                    error: rejection.body_text(),
                    line: None,
                    column: None,
                };
                Err((rejection.status(), Json(body)).into_response())
            }
        }
    }
}

/// Runs blocking work (planning, waiting for a job) off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ServerError::Internal(e.to_string()))?
}

/// Submits a job: compiles its SQL, checks its paths, starts it.
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs", request_body = SubmitRequest,
    responses(
        (status = 201, description = "The job, started", body = JobView),
        (status = 400, description = "Bad SQL (with line and column), a path outside the roots, ...", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 429, description = "The server already runs its most jobs (--max-jobs)", body = ErrorBody),
    ),
    security(("token" = [])))]
pub async fn submit_job(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<SubmitRequest>,
) -> Result<(StatusCode, Json<JobView>)> {
    let manager = state.manager.clone();
    let view = blocking(move || manager.submit(request)).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Lists every job, oldest first.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    responses((status = 200, description = "The jobs", body = [JobSummary]), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_jobs(State(state): State<AppState>) -> Json<Vec<JobSummary>> {
    Json(state.manager.list())
}

/// One job: state, graph, live metrics, checkpoints, history.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, body = JobView), (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobView>> {
    Ok(Json(state.manager.job(&id)?))
}

/// Stops a job gracefully: a final checkpoint, sinks committed; with
/// `{"savepoint": true}`, a savepoint of that checkpoint too (listed in the
/// job and under `/api/v1/savepoints`).
#[utoipa::path(post, path = "/api/v1/jobs/{id}/stop", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    request_body(content = Option<StopRequest>, description = "Optional: `{\"savepoint\": true}`"),
    responses((status = 200, description = "The job after the stop", body = JobView), (status = 400, description = "A malformed body, or no savepoint could be taken", body = ErrorBody), (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn stop_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<JobView>> {
    let request: StopRequest = if body.iter().all(u8::is_ascii_whitespace) {
        StopRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ServerError::Rejected(format!("stop: {e}")))?
    };
    let manager = state.manager.clone();
    Ok(Json(
        blocking(move || manager.stop(&id, request.savepoint)).await?,
    ))
}

/// Redeploys a job with new SQL: a final checkpoint, the new plan checked
/// against it, the job started again keeping the state of every operator
/// that still computes the same thing; or refused (the job runs its old
/// SQL again) naming the operators whose state would be lost.
#[utoipa::path(put, path = "/api/v1/jobs/{id}", tag = "jobs", request_body = RedeployRequest,
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "Redeployed: the job and its operators kept, started and dropped", body = RedeployView),
        (status = 400, description = "Bad SQL, or state the new SQL has no place for (the job goes on with its old SQL)", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn redeploy_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(request): ApiJson<RedeployRequest>,
) -> Result<Json<RedeployView>> {
    let manager = state.manager.clone();
    Ok(Json(
        blocking(move || manager.redeploy(&id, request)).await?,
    ))
}

/// What redeploying a job with new SQL would do, checked against its
/// newest checkpoint while it runs on: the operators that would keep their
/// state (by identity, or by name), start afresh or be dropped, or why it
/// would be refused. Nothing stops.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/redeploy/preview", tag = "jobs", request_body = RedeployRequest,
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "What the redeploy would do (or why it would be refused)", body = RedeployPlan),
        (status = 400, description = "Bad SQL or parallelism", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn preview_redeploy(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(request): ApiJson<RedeployRequest>,
) -> Result<Json<RedeployPlan>> {
    let manager = state.manager.clone();
    Ok(Json(
        blocking(move || manager.preview_redeploy(&id, request)).await?,
    ))
}

/// Every savepoint the server keeps, oldest first.
#[utoipa::path(get, path = "/api/v1/savepoints", tag = "jobs",
    responses((status = 200, description = "The savepoints", body = [SavepointView]), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_savepoints(State(state): State<AppState>) -> Json<Vec<SavepointView>> {
    Json(state.manager.savepoints())
}

/// Stops a job and forgets it (its output files stay).
#[utoipa::path(delete, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 204, description = "Forgotten"), (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn delete_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let manager = state.manager.clone();
    blocking(move || manager.delete(&id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Checks SQL without running it: its operator graph, or its errors.
#[utoipa::path(post, path = "/api/v1/validate", tag = "jobs", request_body = ValidateRequest,
    responses((status = 200, description = "Valid with its graph, or invalid with errors", body = ValidateResponse),
              (status = 401, body = ErrorBody), (status = 413, body = ErrorBody)),
    security(("token" = [])))]
pub async fn validate(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<ValidateRequest>,
) -> Result<Json<ValidateResponse>> {
    let manager = state.manager.clone();
    let checked = blocking(move || manager.validate(&request.sql, &request.params)).await;
    Ok(Json(match checked {
        Ok(graph) => ValidateResponse {
            valid: true,
            graph,
            errors: Vec::new(),
        },
        Err(ServerError::Internal(e)) => return Err(ServerError::Internal(e)),
        Err(e) => ValidateResponse {
            valid: false,
            graph: Vec::new(),
            errors: vec![e.body().1],
        },
    }))
}

/// A sink's rows as they are written, as Server-Sent Events: `row` (one
/// row's JSON), `skipped` (`{"rows": n}` a slow reader missed), `end`.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/sinks/{sink}/tail", tag = "jobs",
    params(("id" = String, Path, description = "Job id"), ("sink" = String, Path, description = "Sink table")),
    responses((status = 200, description = "An event stream", content_type = "text/event-stream", body = String),
              (status = 400, description = "The job is not running", body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn tail(
    State(state): State<AppState>,
    Path((id, sink)): Path<(String, String)>,
) -> Result<Response> {
    let (receiver, start) = state.manager.tail(&id, &sink)?;
    Ok(Sse::new(crate::tail::events(receiver, start))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Every job's metrics in the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "jobs",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain", body = String)))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let text = crate::prometheus::render(&state.manager.all_metrics());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "jobs", responses((status = 200, description = "ok", body = String)))]
pub async fn health() -> &'static str {
    "ok"
}

async fn openapi_json() -> Response {
    match ApiDoc::openapi().to_json() {
        Ok(text) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
        Err(e) => ServerError::Internal(e.to_string()).into_response(),
    }
}

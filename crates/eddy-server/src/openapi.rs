//! The OpenAPI 3 document of the API, generated from the handlers'
//! annotations and the views' types (utoipa), served at
//! `GET /api/v1/openapi.json`.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::views::{
    CheckpointView, GraphEdge, GraphNode, GroupView, JobStatus, JobSummary, JobView, NodeMetrics,
    PythonFunctionView, RedeployPlan, RedeployRequest, RedeployView, Sample, SavepointView,
    SourceSample, StopRequest, SubmitRequest, ValidateRequest, ValidateResponse,
};

/// The API document.
#[derive(OpenApi)]
#[openapi(
    info(title = "eddy", description = "Submit, watch and stop eddy's streaming SQL jobs."),
    paths(
        crate::api::submit_job,
        crate::api::list_jobs,
        crate::api::get_job,
        crate::api::stop_job,
        crate::api::list_savepoints,
        crate::materialized::list_views,
        crate::materialized::get_view,
        crate::api::redeploy_job,
        crate::api::preview_redeploy,
        crate::api::delete_job,
        crate::api::validate,
        crate::api::tail,
        crate::api::metrics,
        crate::api::health,
        crate::web::list_examples,
    ),
    components(schemas(
        SubmitRequest, ValidateRequest, ValidateResponse, JobStatus, JobSummary, JobView, GraphNode, GraphEdge,
        NodeMetrics, CheckpointView, PythonFunctionView, GroupView, Sample, SourceSample, ErrorBody, crate::web::Example,
        StopRequest, SavepointView, RedeployRequest, RedeployView, RedeployPlan,
        crate::materialized::ViewSummary, crate::materialized::ViewRows
    )),
    modifiers(&BearerToken),
    tags((name = "jobs", description = "Streaming jobs"), (name = "views", description = "Materialized views"))
)]
pub struct ApiDoc;

/// Declares the bearer token (`eddy serve --token`).
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        if let Some(components) = openapi.components.as_mut() {
            components.add_security_scheme(
                "token",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
        }
    }
}

//! The web console: `web/` (one HTML page, a stylesheet, and `web/js/`'s
//! ES modules: `main.js` routes and starts the page, `core.js` holds the
//! state and the API client, one module a view), embedded in the binary at
//! build time and served at `/` and `/assets/`;
//! and `GET /api/v1/examples`, the reference pipeline's queries for its
//! editor. No build step, no request leaves the server.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

const INDEX: &str = include_str!("../../../web/index.html");
/// The script modules, by name (`/assets/js/<name>`).
const MODULES: [(&str, &str); 9] = [
    ("main.js", include_str!("../../../web/js/main.js")),
    ("core.js", include_str!("../../../web/js/core.js")),
    ("format.js", include_str!("../../../web/js/format.js")),
    ("jobs.js", include_str!("../../../web/js/jobs.js")),
    ("views.js", include_str!("../../../web/js/views.js")),
    ("editor.js", include_str!("../../../web/js/editor.js")),
    ("job.js", include_str!("../../../web/js/job.js")),
    ("tail.js", include_str!("../../../web/js/tail.js")),
    ("redeploy.js", include_str!("../../../web/js/redeploy.js")),
];
const STYLE: &str = include_str!("../../../web/style.css");

const SOURCES: &str = include_str!("../../../queries/00_sources.sql");
const ENRICHMENT: &str = include_str!("../../../queries/10_enrichment.sql");
const PAYMENT_METRICS: &str = include_str!("../../../queries/20_payment_metrics.sql");
const DEVICE_METRICS: &str = include_str!("../../../queries/30_device_metrics.sql");
const PAYMENT_ANOMALIES: &str = include_str!("../../../queries/40_payment_anomalies.sql");
const DEVICE_ANOMALIES: &str = include_str!("../../../queries/50_device_anomalies.sql");
const LATE_EVENTS: &str = include_str!("../../../queries/60_late_events.sql");
const HEALTH_ALERTS: &str = include_str!("../../../queries/70_health_alerts.sql");
const PYTHON_FUNCTIONS: &str = include_str!("../../../examples/python/payment_scores.sql");

/// A query the editor offers to start from.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Example {
    /// What it is.
    pub name: String,
    /// Its SQL (with the source declarations it needs).
    pub sql: String,
}

/// The reference pipeline, whole and stage by stage (each stage with the
/// files it reads from).
pub fn examples() -> Vec<Example> {
    let stages: [(&str, &[&str]); 9] = [
        (
            "Reference pipeline (every stage)",
            &[
                SOURCES,
                ENRICHMENT,
                PAYMENT_METRICS,
                DEVICE_METRICS,
                PAYMENT_ANOMALIES,
                DEVICE_ANOMALIES,
                LATE_EVENTS,
                HEALTH_ALERTS,
            ],
        ),
        (
            "Enrichment: payments joined with orders",
            &[SOURCES, ENRICHMENT],
        ),
        (
            "Payment metrics per tumbling window",
            &[SOURCES, ENRICHMENT, PAYMENT_METRICS],
        ),
        (
            "Device metrics per sliding window",
            &[SOURCES, DEVICE_METRICS],
        ),
        (
            "Payment anomalies",
            &[SOURCES, ENRICHMENT, PAYMENT_ANOMALIES],
        ),
        ("Device anomalies", &[SOURCES, DEVICE_ANOMALIES]),
        ("Late events", &[SOURCES, LATE_EVENTS]),
        ("Pipeline health alerts", &[SOURCES, HEALTH_ALERTS]),
        (
            "Python functions (a server started with --allow-python-udfs)",
            &[SOURCES, PYTHON_FUNCTIONS],
        ),
    ];
    stages
        .iter()
        .map(|(name, files)| Example {
            name: name.to_string(),
            sql: files.join("\n"),
        })
        .collect()
}

/// `GET /api/v1/examples`.
#[utoipa::path(get, path = "/api/v1/examples", tag = "jobs",
    responses((status = 200, description = "Queries to start from", body = [Example]), (status = 401, body = crate::error::ErrorBody)),
    security(("token" = [])))]
pub async fn list_examples() -> Json<Vec<Example>> {
    Json(examples())
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /assets/js/{name}`: one of the script modules.
pub async fn script(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    match MODULES.iter().find(|(n, _)| *n == name) {
        Some((_, body)) => asset("text/javascript; charset=utf-8", body),
        None => (axum::http::StatusCode::NOT_FOUND, "no such script").into_response(),
    }
}

/// `GET /assets/style.css`.
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module a module imports is served (a module added to `web/js/`
    /// but not to [`MODULES`] would break the page).
    #[test]
    fn every_imported_module_is_served() {
        for (name, body) in MODULES {
            for line in body.lines().filter(|l| l.starts_with("import ")) {
                let imported = line
                    .rsplit("'./")
                    .next()
                    .and_then(|rest| rest.split('\'').next())
                    .unwrap_or_default();
                assert!(
                    MODULES.iter().any(|(n, _)| *n == imported),
                    "{name} imports {imported}, which is not served"
                );
            }
        }
        let served: Vec<&str> = MODULES.iter().map(|(n, _)| *n).collect();
        let mut on_disk: Vec<String> =
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/js"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
        on_disk.sort();
        let mut served_sorted = served.clone();
        served_sorted.sort();
        assert_eq!(on_disk, served_sorted, "web/js and MODULES differ");
    }

    #[test]
    fn every_example_compiles() {
        for example in examples() {
            let files = [eddy_sql::SqlFile {
                name: example.name.clone(),
                text: example.sql.clone(),
            }];
            if let Err(e) = eddy_sql::compile(&files, &Default::default()) {
                panic!("{}: {e}", example.name);
            }
        }
    }
}

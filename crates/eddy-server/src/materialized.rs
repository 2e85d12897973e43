//! Materialized views over HTTP: `GET /api/v1/views` lists them, `GET
//! /api/v1/views/{name}` returns one's rows as of its latest completed
//! checkpoint (the same snapshot a SELECT over the PostgreSQL port reads).
//!
//! In: the server's [`ViewCatalog`]. Out: JSON ([`ViewSummary`],
//! [`ViewRows`]), rows encoded by arrow-json.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::json::writer::JsonArray;
use datafusion::arrow::json::WriterBuilder;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_connectors::view::ViewSnapshot;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::AppState;
use crate::error::{ErrorBody, Result, ServerError};

/// The most a wait for `min_epoch` lasts.
const MAX_EPOCH_WAIT: Duration = Duration::from_secs(30);

/// One materialized view.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ViewSummary {
    /// Its name.
    pub name: String,
    /// The checkpoint its rows are the result of (0: none completed yet).
    pub epoch: u64,
    /// Rows it holds.
    pub rows: usize,
    /// The columns it is keyed by (its query's key: one row each, found
    /// with `?key=`); none for a view of whole rows.
    pub key: Option<Vec<String>>,
    /// When its rows were published (RFC 3339), once they were.
    pub published_at: Option<String>,
    /// Its columns.
    pub columns: Vec<String>,
}

/// A view's rows.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ViewRows {
    /// What the view is now.
    #[serde(flatten)]
    pub view: ViewSummary,
    /// Its rows (at most `limit`), one JSON object each.
    #[schema(value_type = Vec<Object>)]
    pub data: serde_json::Value,
}

/// `GET /api/v1/views/{name}` parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ViewQuery {
    /// At most this many rows (default 1000).
    pub limit: Option<usize>,
    /// Wait (up to 30 s) until the view has published this checkpoint.
    pub min_epoch: Option<u64>,
    /// Only the row of this key (a view keyed by one column: its value;
    /// by several: the values comma-separated, in key order), found
    /// without a scan.
    pub key: Option<String>,
    /// The server's token, where a header cannot be set.
    pub token: Option<String>,
}

fn summary(name: &str, snapshot: &ViewSnapshot) -> ViewSummary {
    ViewSummary {
        name: name.to_string(),
        epoch: snapshot.epoch,
        rows: snapshot.rows(),
        key: snapshot.key_columns().map(|columns| {
            columns
                .iter()
                .map(|&c| snapshot.schema.field(c).name().clone())
                .collect()
        }),
        published_at: (snapshot.epoch > 0)
            .then(|| chrono::DateTime::from_timestamp_millis(snapshot.published_ms))
            .flatten()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        columns: snapshot
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
    }
}

/// Every materialized view of the server.
#[utoipa::path(get, path = "/api/v1/views", tag = "views",
    responses((status = 200, description = "The views", body = [ViewSummary]), (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_views(State(state): State<AppState>) -> Json<Vec<ViewSummary>> {
    let views = state.manager.views();
    Json(
        views
            .names()
            .iter()
            .filter_map(|name| views.snapshot(name).map(|s| summary(name, &s)))
            .collect(),
    )
}

/// One view's rows as of its latest completed checkpoint.
#[utoipa::path(get, path = "/api/v1/views/{name}", tag = "views",
    params(("name" = String, Path, description = "The view's name"), ViewQuery),
    responses(
        (status = 200, description = "The view's rows", body = ViewRows),
        (status = 400, description = "A bad parameter", body = ErrorBody),
        (status = 404, description = "No such view", body = ErrorBody),
        (status = 408, description = "min_epoch did not come in 30 s", body = ErrorBody),
        (status = 401, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_view(
    State(state): State<AppState>,
    Path(name): Path<String>,
    query: std::result::Result<Query<ViewQuery>, QueryRejection>,
) -> Result<Json<ViewRows>> {
    let Query(query) = query.map_err(|e| ServerError::Rejected(e.body_text()))?;
    let views = state.manager.views().clone();
    let Some(snapshot) = views.snapshot(&name) else {
        return Err(ServerError::NoView(name));
    };
    let snapshot = match query.min_epoch.filter(|e| *e > snapshot.epoch) {
        None => snapshot,
        Some(epoch) => {
            let waited = {
                let (views, name) = (views.clone(), name.clone());
                tokio::task::spawn_blocking(move || views.wait_for(&name, epoch, MAX_EPOCH_WAIT))
                    .await
                    .map_err(|e| ServerError::Internal(e.to_string()))?
            };
            waited.ok_or_else(|| {
                ServerError::Timeout(format!(
                    "view {name} did not reach epoch {epoch} in {MAX_EPOCH_WAIT:?}"
                ))
            })?
        }
    };
    if let Some(key) = &query.key {
        let data = match key_row(&snapshot, key)? {
            Some(row) => rows_json(&[row], usize::MAX)?,
            None => serde_json::Value::Array(Vec::new()),
        };
        return Ok(Json(ViewRows {
            view: summary(&name, &snapshot),
            data,
        }));
    }
    let limit = query.limit.unwrap_or(1000);
    let batches = snapshot
        .batches()
        .map_err(|e| ServerError::Internal(e.to_string()))?;
    Ok(Json(ViewRows {
        view: summary(&name, &snapshot),
        data: rows_json(&batches, limit)?,
    }))
}

/// The row of `key` (values as text, comma-separated) in a keyed view.
fn key_row(snapshot: &ViewSnapshot, key: &str) -> Result<Option<RecordBatch>> {
    let Some(columns) = snapshot.key_columns() else {
        return Err(ServerError::Rejected(
            "key: this view has no key (its query is not keyed: a GROUP BY, a Top-N or a change feed is)".into(),
        ));
    };
    let values: Vec<&str> = if columns.len() == 1 {
        vec![key]
    } else {
        key.split(',').collect()
    };
    if values.len() != columns.len() {
        return Err(ServerError::Rejected(format!(
            "key: the view's key has {} columns, {} values given",
            columns.len(),
            values.len()
        )));
    }
    let arrays = columns
        .iter()
        .zip(values)
        .map(|(&c, value)| {
            let field = snapshot.schema.field(c);
            let text: ArrayRef = Arc::new(StringArray::from(vec![value]));
            cast(&text, field.data_type()).map_err(|e| {
                ServerError::Rejected(format!(
                    "key: '{value}' is not a {}: {e}",
                    field.data_type()
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    snapshot
        .lookup(&arrays)
        .map_err(|e| ServerError::Internal(e.to_string()))
}

/// At most `limit` rows of `batches` as a JSON array of objects.
fn rows_json(batches: &[RecordBatch], limit: usize) -> Result<serde_json::Value> {
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, JsonArray>(Vec::new());
    let mut left = limit;
    for batch in batches {
        if left == 0 {
            break;
        }
        let take = batch.num_rows().min(left);
        writer
            .write(&batch.slice(0, take))
            .map_err(|e| ServerError::Internal(e.to_string()))?;
        left -= take;
    }
    writer
        .finish()
        .map_err(|e| ServerError::Internal(e.to_string()))?;
    let bytes = writer.into_inner();
    if bytes.is_empty() {
        return Ok(serde_json::Value::Array(Vec::new()));
    }
    serde_json::from_slice(&bytes).map_err(|e| ServerError::Internal(e.to_string()))
}

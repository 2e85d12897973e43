//! `eddy submit`, `eddy jobs`, `eddy job`, `eddy stop`, `eddy health`: thin
//! clients of a running `eddy serve` (`--server`, default
//! `http://127.0.0.1:8080`; `--token` or `EDDY_TOKEN`), printing what the
//! API returns as tables a person can read. Answers are read as the
//! server's own view types (`eddy_server::views`), so a field the server
//! renames fails to compile here, not to print.

use eddy_server::views::{JobSummary, JobView, SubmitRequest};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::error::{CliError, Result};

/// A connection to a server.
#[derive(Debug)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            base: base.trim_end_matches('/').to_string(),
            token,
            agent,
        }
    }

    fn answer(
        &self,
        path: &str,
        response: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value> {
        let what = format!("{}{path}", self.base);
        let mut response = response.map_err(|e| CliError::Server(format!("{what}: {e}")))?;
        let status = response.status();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| CliError::Server(format!("{what}: {e}")))?;
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(value);
        }
        let message = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("request failed")
            .to_string();
        let at = match (
            value.get("line").and_then(Value::as_u64),
            value.get("column").and_then(Value::as_u64),
        ) {
            (Some(line), Some(column)) => format!(" (line {line}, column {column})"),
            _ => String::new(),
        };
        Err(CliError::Server(format!(
            "{} {}{at}: {message}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        )))
    }

    fn authorized<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) => request.header("Authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Value> {
        let request = self.authorized(self.agent.get(format!("{}{path}", self.base)));
        self.answer(path, request.call())
    }

    /// `GET path`, read as the server's type `T`.
    pub fn get_as<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.read(path, self.get(path)?)
    }

    /// `POST path` with a JSON body, the answer read as the server's type `T`.
    pub fn post_as<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T> {
        self.read(path, self.post(path, body)?)
    }

    fn read<T: DeserializeOwned>(&self, path: &str, value: Value) -> Result<T> {
        serde_json::from_value(value).map_err(|e| {
            CliError::Server(format!(
                "{}{path}: an answer this eddy ({}) does not read: {e}",
                self.base,
                env!("CARGO_PKG_VERSION")
            ))
        })
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        let request = self.authorized(self.agent.post(format!("{}{path}", self.base)));
        self.answer(path, request.send_json(body))
    }

    /// `GET path` read as it comes (a tail's Server-Sent Events); an
    /// error answer is an error, as for [`Client::get`].
    pub fn stream(&self, path: &str) -> Result<ureq::BodyReader<'static>> {
        let request = self.authorized(self.agent.get(format!("{}{path}", self.base)));
        let response = request
            .call()
            .map_err(|e| CliError::Server(format!("{}{path}: {e}", self.base)))?;
        if !response.status().is_success() {
            self.answer(path, Ok(response))?;
            return Err(CliError::Server(format!("{}{path}: no stream", self.base)));
        }
        Ok(response.into_body().into_reader())
    }

    /// The server's URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Result<Value> {
        let request = self.authorized(self.agent.delete(format!("{}{path}", self.base)));
        self.answer(path, request.call())
    }
}

/// An optional value, `-` when absent.
fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

/// A rate, whole when it is.
fn rate(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

/// Lays rows out under a header, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(header.iter().map(|h| h.to_string()).collect())];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

/// Submits SQL as a job (the API's own submission); returns what to print.
pub fn submit(client: &Client, request: &SubmitRequest) -> Result<String> {
    let body = serde_json::to_value(request).map_err(|e| CliError::Server(e.to_string()))?;
    let job: JobView = client.post_as("/api/v1/jobs", &body)?;
    Ok(format!(
        "submitted job {} ({}): {}",
        job.summary.id,
        job.summary.name,
        job.summary.state.name()
    ))
}

/// The job list as a table.
pub fn jobs(client: &Client) -> Result<String> {
    let list: Vec<JobSummary> = client.get_as("/api/v1/jobs")?;
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|j| {
            vec![
                j.id.clone(),
                j.name.clone(),
                j.state.name().to_string(),
                or_dash(j.started_at.as_ref()),
                rate(j.events_per_second),
                or_dash(j.watermark_lag_ms),
                j.late_rows.to_string(),
                j.bad_rows.to_string(),
            ]
        })
        .collect();
    Ok(table(
        &[
            "ID",
            "NAME",
            "STATE",
            "STARTED",
            "EVENTS/S",
            "WM LAG MS",
            "LATE",
            "BAD",
        ],
        &rows,
    ))
}

/// One job: its summary and a table of its nodes.
pub fn job(client: &Client, id: &str) -> Result<String> {
    let job: JobView = client.get_as(&format!("/api/v1/jobs/{id}"))?;
    let summary = &job.summary;
    let mut out = vec![
        format!("job {} ({})", summary.id, summary.name),
        format!("state: {}", summary.state.name()),
    ];
    if let Some(error) = &summary.error {
        out.push(format!("error: {error}"));
    }
    out.push(format!(
        "created {}, started {}, ended {}",
        summary.created_at,
        or_dash(summary.started_at.as_ref()),
        or_dash(summary.ended_at.as_ref())
    ));
    let checkpoints = &job.checkpoints;
    out.push(format!(
        "checkpoints: {} this run, last #{} ({} bytes)",
        checkpoints.completed,
        or_dash(checkpoints.last_id),
        checkpoints.last_bytes
    ));
    let rows: Vec<Vec<String>> = job
        .metrics
        .iter()
        .map(|n| {
            vec![
                n.id.to_string(),
                n.name.clone(),
                n.kind.clone(),
                n.rows_in.to_string(),
                n.rows_out.to_string(),
                n.late_rows.to_string(),
                n.bad_rows.to_string(),
                n.state_rows.to_string(),
                n.state_bytes.to_string(),
                rate(n.events_per_second),
            ]
        })
        .collect();
    out.push(String::new());
    out.push(table(
        &[
            "#",
            "NODE",
            "KIND",
            "IN",
            "OUT",
            "LATE",
            "BAD",
            "STATE",
            "STATE BYTES",
            "EVENTS/S",
        ],
        &rows,
    ));
    Ok(out.join("\n"))
}

/// Stops a job; returns what to print.
pub fn stop(client: &Client, id: &str, savepoint: bool) -> Result<String> {
    let job: JobView = client.post_as(
        &format!("/api/v1/jobs/{id}/stop"),
        &json!({ "savepoint": savepoint }),
    )?;
    let mut said = format!("job {}: {}", job.summary.id, job.summary.state.name());
    if savepoint {
        if let Some(taken) = job.savepoints.last() {
            said.push_str(&format!(
                "\nsavepoint {} (checkpoint {}, {} instance(s), up to {}): start a job from it with --from-savepoint {}",
                taken.id, taken.checkpoint, taken.parallelism, taken.key_groups, taken.id
            ));
        }
    }
    Ok(said)
}

//! `eddy submit`, `eddy jobs`, `eddy job`, `eddy stop`, `eddy health`: thin
//! clients of a running `eddy serve` (`--server`, default
//! `http://127.0.0.1:8080`; `--token` or `EDDY_TOKEN`), printing what the
//! API returns as tables a person can read.

use std::collections::BTreeMap;

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

fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(other) => other.to_string(),
    }
}

fn number(value: &Value, key: &str) -> String {
    match value.get(key).and_then(Value::as_f64) {
        Some(n) if n.fract() == 0.0 => format!("{n:.0}"),
        Some(n) => format!("{n:.1}"),
        None => "-".into(),
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

/// A job to submit (the fields of the API's submission).
#[derive(Debug, Clone, Default)]
pub struct Submission {
    /// Its name (default: the server picks one).
    pub name: Option<String>,
    /// Its SQL.
    pub sql: String,
    /// `${NAME}` parameters.
    pub params: BTreeMap<String, String>,
    /// Instances of each keyed operator.
    pub parallelism: Option<usize>,
    /// The Kafka consumer group of a group job.
    pub group: Option<String>,
    /// A savepoint of the server to start from.
    pub from_savepoint: Option<String>,
}

/// Submits SQL as a job; returns what to print.
pub fn submit(client: &Client, job: Submission) -> Result<String> {
    let Submission {
        name,
        sql,
        params,
        parallelism,
        group,
        from_savepoint,
    } = job;
    let job = client.post(
        "/api/v1/jobs",
        &json!({ "name": name, "sql": sql, "params": params, "parallelism": parallelism, "group": group, "from_savepoint": from_savepoint }),
    )?;
    Ok(format!(
        "submitted job {} ({}): {}",
        text(&job, "id"),
        text(&job, "name"),
        text(&job, "state")
    ))
}

/// The job list as a table.
pub fn jobs(client: &Client) -> Result<String> {
    let list = client.get("/api/v1/jobs")?;
    let rows: Vec<Vec<String>> = list
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|j| {
                    vec![
                        text(j, "id"),
                        text(j, "name"),
                        text(j, "state"),
                        text(j, "started_at"),
                        number(j, "events_per_second"),
                        number(j, "watermark_lag_ms"),
                        number(j, "late_rows"),
                        number(j, "bad_rows"),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
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
    let job = client.get(&format!("/api/v1/jobs/{id}"))?;
    let mut out = vec![
        format!("job {} ({})", text(&job, "id"), text(&job, "name")),
        format!("state: {}", text(&job, "state")),
    ];
    if let Some(error) = job.get("error").and_then(Value::as_str) {
        out.push(format!("error: {error}"));
    }
    out.push(format!(
        "created {}, started {}, ended {}",
        text(&job, "created_at"),
        text(&job, "started_at"),
        text(&job, "ended_at")
    ));
    if let Some(c) = job.get("checkpoints") {
        out.push(format!(
            "checkpoints: {} this run, last #{} ({} bytes)",
            number(c, "completed"),
            text(c, "last_id"),
            number(c, "last_bytes")
        ));
    }
    let rows: Vec<Vec<String>> = job
        .get("metrics")
        .and_then(Value::as_array)
        .map(|nodes| {
            nodes
                .iter()
                .map(|n| {
                    vec![
                        number(n, "id"),
                        text(n, "name"),
                        text(n, "kind"),
                        number(n, "rows_in"),
                        number(n, "rows_out"),
                        number(n, "late_rows"),
                        number(n, "bad_rows"),
                        number(n, "state_rows"),
                        number(n, "state_bytes"),
                        number(n, "events_per_second"),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
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
    let job = client.post(
        &format!("/api/v1/jobs/{id}/stop"),
        &json!({ "savepoint": savepoint }),
    )?;
    let mut said = format!("job {}: {}", text(&job, "id"), text(&job, "state"));
    if savepoint {
        if let Some(taken) = job["savepoints"].as_array().and_then(|s| s.last()) {
            said.push_str(&format!(
                "\nsavepoint {} (checkpoint {}, {} instance(s), up to {}): start a job from it with --from-savepoint {}",
                text(taken, "id"),
                taken["checkpoint"],
                taken["parallelism"],
                taken["key_groups"],
                text(taken, "id")
            ));
        }
    }
    Ok(said)
}

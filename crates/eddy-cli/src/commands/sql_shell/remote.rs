//! The shell against a server (`eddy sql --server URL`): statements run as
//! the server's jobs, through its API.
//!
//! In: the session's SQL (definitions and the statement, as one text).
//! Out: what to print; a SELECT's rows, read from the server's tail of its
//! result (`GET /api/v1/jobs/{id}/sinks/{sink}/tail`, Server-Sent Events)
//! into a live table. A SELECT's job is stopped and forgotten when it ends
//! or on Ctrl-C; an INSERT's job runs on until `STOP JOB <id>`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;

use eddy_cli::client::{self, Client};
use eddy_cli::{CliError, Result};
use eddy_server::views::JobView;
use serde_json::json;

use super::live::{draw_until_end, LiveTable};
use super::session::REFRESH;

/// A connection to a server, checked to answer.
pub(super) struct Remote {
    client: Client,
}

/// One Server-Sent Event: its name and data.
type Event = (String, String);

impl Remote {
    /// Connects to the server at `url` (its health route must answer).
    pub(super) fn connect(url: &str, token: Option<String>) -> Result<Self> {
        let client = Client::new(url, token.filter(|t| !t.is_empty()));
        client
            .get("/healthz")
            .map_err(|e| CliError::Server(format!("cannot reach the server: {e}")))?;
        Ok(Self { client })
    }

    /// The server's URL.
    pub(super) fn url(&self) -> &str {
        self.client.base()
    }

    fn submit(&self, name: &str, sql: &str, params: &BTreeMap<String, String>) -> Result<String> {
        let job: JobView = self.client.post_as(
            "/api/v1/jobs",
            &json!({ "name": name, "sql": sql, "params": params }),
        )?;
        Ok(job.summary.id)
    }

    /// Submits an INSERT's job.
    pub(super) fn insert(&self, sql: &str, params: &BTreeMap<String, String>) -> Result<String> {
        let id = self.submit("sql-shell", sql, params)?;
        Ok(format!(
            "started job {id} on {}; SHOW JOBS lists it, STOP JOB {id} stops it",
            self.url()
        ))
    }

    /// The server's jobs.
    pub(super) fn jobs(&self) -> Result<String> {
        client::jobs(&self.client)
    }

    /// Stops the server's job `id`.
    pub(super) fn stop(&self, id: &str) -> Result<String> {
        client::stop(&self.client, id, false)
    }

    /// Runs a SELECT on the server and draws its result, tailed, in place
    /// on `out` until it ends or Ctrl-C; then stops and forgets its job.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn select(
        &self,
        sql: &str,
        params: &BTreeMap<String, String>,
        sink: &str,
        mut table: LiveTable,
        rows: usize,
        interrupted: &AtomicBool,
        out: &mut impl Write,
    ) -> Result<()> {
        let id = self.submit("sql-shell-select", sql, params)?;
        let events = match self
            .client
            .stream(&format!("/api/v1/jobs/{id}/sinks/{sink}/tail"))
        {
            Ok(stream) => stream,
            Err(e) => {
                // A job that failed at once says why; else the tail's error.
                let why = self.error(&id);
                self.forget(&id);
                return Err(match why {
                    Some(why) => CliError::Usage(format!("the query failed: {why}")),
                    None => e,
                });
            }
        };
        let (sender, receiver) = mpsc::channel::<Event>();
        std::thread::spawn(move || read_events(BufReader::new(events), sender));
        let mut ended = false;
        draw_until_end(out, &mut table, rows, interrupted, |table| {
            let deadline = std::time::Instant::now() + REFRESH;
            loop {
                let wait = deadline.saturating_duration_since(std::time::Instant::now());
                match receiver.recv_timeout(wait) {
                    Ok((event, data)) => {
                        ended |= event == "end";
                        table.apply_event(&event, &data);
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        ended = true;
                        break;
                    }
                }
            }
            ended.then(|| self.state(&id))
        });
        let failed = (self.state(&id) == "failed")
            .then(|| self.error(&id))
            .flatten();
        self.forget(&id);
        match failed {
            Some(why) => Err(CliError::Usage(format!("the query failed: {why}"))),
            None => Ok(()),
        }
    }

    /// The job's error, if it failed.
    fn error(&self, id: &str) -> Option<String> {
        self.client
            .get_as::<JobView>(&format!("/api/v1/jobs/{id}"))
            .ok()
            .and_then(|job| job.summary.error)
    }

    /// The job's state as the server says it.
    fn state(&self, id: &str) -> String {
        self.client
            .get_as::<JobView>(&format!("/api/v1/jobs/{id}"))
            .map_or_else(
                |_| "unknown".into(),
                |job| job.summary.state.name().to_string(),
            )
    }

    /// Stops job `id` (if it runs) and deletes it from the server.
    fn forget(&self, id: &str) {
        let _ = self
            .client
            .post(&format!("/api/v1/jobs/{id}/stop"), &json!({}));
        if let Err(e) = self.client.delete(&format!("/api/v1/jobs/{id}")) {
            tracing::warn!("cannot delete the SELECT's job {id} from the server: {e}");
        }
    }
}

/// Reads Server-Sent Events (`event:` and `data:` lines, a blank line
/// ending each) and sends them on until the stream or the receiver ends.
fn read_events(reader: impl BufRead, sender: mpsc::Sender<Event>) {
    let (mut event, mut data) = (String::from("message"), String::new());
    for line in reader.lines() {
        let Ok(line) = line else { return };
        if line.is_empty() && data.is_empty() && event == "message" {
            // A comment or keep-alive: no event.
        } else if line.is_empty() {
            let done = std::mem::replace(&mut event, "message".into());
            if sender.send((done, std::mem::take(&mut data))).is_err() {
                return;
            }
        } else if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_string();
        } else if let Some(value) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_sent_events_are_read_with_their_names() {
        let text = "event: from\ndata: {\"row\":0}\n\nevent: row\ndata: {\"n\":1}\n\n: a comment\n\nevent: end\ndata: {}\n\n";
        let (sender, receiver) = mpsc::channel();
        read_events(text.as_bytes(), sender);
        let events: Vec<Event> = receiver.iter().collect();
        assert_eq!(
            events,
            vec![
                ("from".into(), "{\"row\":0}".into()),
                ("row".into(), "{\"n\":1}".into()),
                ("end".into(), "{}".into()),
            ]
        );
    }
}

//! `eddy serve` over real HTTP: a server process started on a free port,
//! driven with an HTTP client.
//!
//! - the reference pipeline submitted as SQL runs to `finished`, with its
//!   graph and metrics (every sink's row count equals the golden output's);
//! - a sink tailed over Server-Sent Events while a generator job runs;
//! - a stopped job's output committed; a deleted job forgotten;
//! - a server killed with SIGKILL during a checkpointed job, restarted: the
//!   job resumes and finishes with exact output;
//! - errors: bad SQL (400 with line and column), unknown ids (404),
//!   oversized bodies (413), paths outside the roots (400), a group job
//!   without a Kafka source (400), a missing or wrong token (401);
//!   `/metrics` and the OpenAPI document.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// An HTTP client of a server, with or without a token.
#[derive(Clone)]
struct Api {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

/// A running `eddy serve`.
struct Server {
    child: Child,
    api: Api,
}

impl std::ops::Deref for Server {
    type Target = Api;
    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

use common::{server_dirs as dirs, ServerDirs as Dirs};

impl Server {
    fn start(dirs: &Dirs, token: Option<&str>) -> Self {
        Self::start_with(dirs, token, &[])
    }

    /// [`Server::start`] with more arguments to `eddy serve`.
    fn start_with(dirs: &Dirs, token: Option<&str>, more: &[&str]) -> Self {
        let mut command = common::serve_command(&dirs.data, &dirs.output, &dirs.state, "200ms");
        if let Some(token) = token {
            command.args(["--token", token]);
        }
        command.args(more);
        let (child, base) = common::spawn_server(command);
        // A fresh connection per request: a connection the server closed
        // after an error answer (a body it would not read) is never reused.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_connections(0)
            .build()
            .into();
        Server {
            child,
            api: Api {
                base,
                agent,
                token: token.map(str::to_string),
            },
        }
    }
}

impl Api {
    fn with_token(&self, token: Option<&str>) -> Api {
        Api {
            token: token.map(str::to_string),
            ..self.clone()
        }
    }

    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let response = match (method, body) {
            ("GET", _) => {
                let mut r = self.agent.get(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            ("DELETE", _) => {
                let mut r = self.agent.delete(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            ("PUT", body) => {
                let mut r = self.agent.put(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.send_json(body.cloned().unwrap_or(json!({})))
            }
            (_, body) => {
                let mut r = self.agent.post(&url);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.send_json(body.cloned().unwrap_or(json!({})))
            }
        };
        let mut response = response.unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn get(&self, path: &str) -> (u16, Value) {
        self.request("GET", path, None)
    }

    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.request("POST", path, Some(body))
    }

    fn submit(&self, name: &str, sql: &str) -> String {
        let (status, job) = self.post("/api/v1/jobs", &json!({ "name": name, "sql": sql }));
        assert_eq!(status, 201, "{job}");
        job["id"].as_str().unwrap().to_string()
    }

    /// Polls a job until `done` holds for it.
    fn wait_for(
        &self,
        id: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let (status, job) = self.get(&format!("/api/v1/jobs/{id}"));
            assert_eq!(status, 200, "{job}");
            if done(&job) {
                return job;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} not {what} within {timeout:?}: {job}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Sends a request over a plain socket (writing as much of the body as the
/// server takes) and returns the response's status code.
fn raw_status(base: &str, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> u16 {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    // Read while writing: the answer can come before the body is sent.
    let mut reading = stream.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = reading.read(&mut chunk) {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&chunk[..n]);
        }
        answer
    });
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body); // the server may stop reading early
    let answer = reader.join().unwrap();
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"))
}

fn node<'a>(job: &'a Value, name: &str) -> &'a Value {
    job["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

fn reference_sql() -> String {
    let files = eddy_cli::job::load_sql(&[common::repo_root().join("queries")]).unwrap();
    files
        .into_iter()
        .map(|f| f.text)
        .collect::<Vec<_>>()
        .join("\n;\n")
}

#[test]
fn the_reference_pipeline_runs_to_finished_with_its_graph_and_metrics() {
    let dirs = dirs();
    let server = Server::start(&dirs, None);
    let id = server.submit("reference", &reference_sql());
    let job = server.wait_for(&id, "finished", Duration::from_secs(60), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "finished", "{job}");
    assert_eq!(job["name"], "reference");
    // Submitted without `parallelism`: one instance per core of the server.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(job["parallelism"], cores.min(64));
    let kinds: HashSet<&str> = job["graph"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    for kind in [
        "source",
        "interval_join",
        "window_aggregate",
        "over",
        "union",
        "calc",
        "sink",
    ] {
        assert!(kinds.contains(kind), "graph has a {kind} node");
    }
    // Each node says whether it keeps state (from the operator's declared
    // distribution), so the console needs no list of operator kinds.
    for node in job["graph"].as_array().unwrap() {
        let stateful = matches!(
            node["kind"].as_str().unwrap(),
            "interval_join" | "window_aggregate" | "over" | "window_rank" | "session_aggregate"
        );
        assert_eq!(node["stateful"], stateful, "{node}");
    }
    // Every sink wrote exactly what the golden output holds.
    let golden =
        std::fs::read_to_string(common::repo_root().join("tests/golden/reference.out")).unwrap();
    let tags = [
        ("ENRICHED", "enriched_payments"),
        ("METRICS", "payment_metrics"),
        ("ANOMALY", "payment_anomalies"),
        ("DEVICE_METRICS", "device_metrics"),
        ("DEVICE_ANOMALY", "device_anomalies"),
        ("LATE_EVENT", "late_events"),
        ("HEALTH_ALERT", "health_alerts"),
    ];
    for (tag, sink) in tags {
        let expected = golden
            .lines()
            .filter(|l| l.starts_with(&format!("{tag}> ")))
            .count() as u64;
        assert_eq!(
            node(&job, sink)["rows_in"].as_u64(),
            Some(expected),
            "{sink}"
        );
    }
    assert!(node(&job, "devices")["late_rows"].as_u64().unwrap() >= 1);
    assert!(
        job["checkpoints"]["last_id"].as_u64().is_some(),
        "a finished job has its final checkpoint"
    );
    let (_, list) = server.get("/api/v1/jobs");
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["state"], "finished");

    // The same job with two instances of each keyed operator: its graph and
    // metrics show the instances, and its sinks write the same rows.
    let (status, submitted) = server.post(
        "/api/v1/jobs",
        &json!({ "name": "reference-2", "sql": reference_sql(), "parallelism": 2 }),
    );
    assert_eq!(status, 201, "{submitted}");
    let id = submitted["id"].as_str().unwrap().to_string();
    let parallel = server.wait_for(&id, "finished", Duration::from_secs(60), |j| {
        j["state"] != "running"
    });
    assert_eq!(parallel["state"], "finished", "{parallel}");
    assert_eq!(parallel["parallelism"], 2);
    let names: Vec<&str> = parallel["graph"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("interval_join#") && n.ends_with("/1")),
        "{names:?}"
    );
    for (_, sink) in tags {
        assert_eq!(
            node(&parallel, sink)["rows_in"],
            node(&job, sink)["rows_in"],
            "{sink}"
        );
    }
    for wrong in [0, 65] {
        let (status, error) = server.post(
            "/api/v1/jobs",
            &json!({ "sql": reference_sql(), "parallelism": wrong }),
        );
        assert_eq!(status, 400, "{error}");
    }
}

const ENDLESS: &str = "
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = 'generator', stream = 'orders', count = '${COUNT:1000000000}', batch_size = '500');
CREATE TABLE copy (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE)
  WITH (connector = 'ndjson', path = 'copy.ndjson');
INSERT INTO copy SELECT order_id, customer_id, order_amount FROM orders;
";

/// `eddy ARGS --server BASE --token TOKEN`: its stdout, or its stderr as
/// the error.
fn eddy_client(server: &Api, args: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(args)
        .args(["--server", &server.base])
        .args(
            server
                .token
                .as_deref()
                .map(|t| ["--token", t])
                .into_iter()
                .flatten(),
        )
        .env_remove("EDDY_TOKEN")
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_cli_submits_lists_shows_and_stops_a_servers_jobs() {
    let dirs = dirs();
    let server = Server::start(&dirs, Some("cli-token"));
    let file = dirs.data.join("endless.sql");
    std::fs::write(&file, ENDLESS).unwrap();
    let submitted = eddy_client(
        &server,
        &["submit", "--name", "from-cli", file.to_str().unwrap()],
    )
    .unwrap();
    // "submitted job ID (from-cli): running"
    let id = submitted
        .strip_prefix("submitted job ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{submitted}"))
        .to_string();
    assert!(submitted.contains("(from-cli): running"), "{submitted}");

    let jobs = eddy_client(&server, &["jobs"]).unwrap();
    let row = jobs
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{jobs}"));
    assert!(
        row.contains("from-cli") && row.contains("running"),
        "{jobs}"
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let shown = loop {
        let shown = eddy_client(&server, &["job", &id]).unwrap();
        if !shown.contains("checkpoints: 0 this run") {
            break shown;
        }
        assert!(Instant::now() < deadline, "no checkpoint: {shown}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        shown.starts_with(&format!("job {id} (from-cli)\nstate: running")),
        "{shown}"
    );
    let copy = shown
        .lines()
        .find(|l| l.contains("copy"))
        .unwrap_or_else(|| panic!("the sink's node: {shown}"));
    let rows_in: u64 = copy.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(rows_in > 0, "{shown}");

    let stopped = eddy_client(&server, &["stop", &id, "--savepoint"]).unwrap();
    assert!(
        stopped.starts_with(&format!("job {id}: stopped")),
        "{stopped}"
    );
    assert!(
        stopped.contains("savepoint ") && stopped.contains("--from-savepoint"),
        "{stopped}"
    );

    let refused = eddy_client(&server.with_token(Some("wrong")), &["jobs"]).unwrap_err();
    assert!(refused.contains("401"), "{refused}");
}

#[test]
fn a_sink_is_tailed_over_server_sent_events_and_a_stopped_job_has_committed_output() {
    let dirs = dirs();
    let server = Server::start(&dirs, None);
    // The job also writes a Delta table, whose commits the job view counts.
    let with_lake = format!(
        "{ENDLESS}
         CREATE TABLE lake (order_id VARCHAR, order_amount DOUBLE) WITH (connector = 'delta', path = 'lake');
         INSERT INTO lake SELECT order_id, order_amount FROM orders;"
    );
    let id = server.submit("endless", &with_lake);
    let response = server
        .agent
        .get(format!("{}/api/v1/jobs/{id}/sinks/copy/tail", server.base))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(response
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut reader = BufReader::new(response.into_body().into_reader());
    let mut rows = Vec::new();
    let mut event = String::new();
    let mut line = String::new();
    while rows.len() < 20 {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the stream ended early"
        );
        let line = line.trim_end();
        if let Some(name) = line.strip_prefix("event: ") {
            event = name.to_string();
        } else if let Some(data) = line.strip_prefix("data: ") {
            if event == "row" {
                let row: Value = serde_json::from_str(data).unwrap();
                assert!(
                    row["order_id"].as_str().unwrap().starts_with("order-"),
                    "{row}"
                );
                rows.push(row);
            }
        }
    }
    drop(reader);
    // The generated stream's event time is long past: the job says how far
    // it has come (the console shows that instead of a lag of years).
    let running = server.wait_for(&id, "sampled", Duration::from_secs(20), |j| {
        j["event_time"].is_string()
    });
    let event_time = running["event_time"].as_str().unwrap();
    assert!(
        event_time.ends_with('Z') && event_time.len() >= 20,
        "{running}"
    );

    let committing = server.wait_for(&id, "a Delta commit", Duration::from_secs(20), |j| {
        j["connectors"][0]
            .as_str()
            .is_some_and(|l| l.starts_with("delta sink lake: ") && !l.contains(": 0 commits"))
    });
    assert!(
        committing["connectors"][0]
            .as_str()
            .unwrap()
            .contains(&dirs.output.join("lake").display().to_string()),
        "{committing}"
    );

    let (status, stopped) = server.post(&format!("/api/v1/jobs/{id}/stop"), &json!({}));
    assert_eq!(status, 200);
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    let written = node(&stopped, "copy")["rows_in"].as_u64().unwrap();
    let commits = |j: &Value| -> u64 {
        let line = j["connectors"][0].as_str().unwrap();
        line["delta sink lake: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(commits(&stopped) >= commits(&committing), "{stopped}");
    eprintln!("{}", stopped["connectors"][0]);
    let log = std::fs::read_dir(dirs.output.join("lake/_delta_log"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".json")
        })
        .count() as u64;
    assert_eq!(
        log,
        commits(&stopped) + 1,
        "every commit but the table's creation is counted: {stopped}"
    );
    let text = std::fs::read_to_string(dirs.output.join("copy.ndjson")).unwrap();
    assert_eq!(
        text.lines().count() as u64,
        written,
        "everything the sink got before the stop is committed"
    );

    let (status, _) = server.request("DELETE", &format!("/api/v1/jobs/{id}"), None);
    assert_eq!(status, 204);
    assert_eq!(server.get(&format!("/api/v1/jobs/{id}")).0, 404);
    assert!(
        !dirs.state.join("jobs").join(&id).exists(),
        "a deleted job's state is gone"
    );
}

#[test]
fn a_server_killed_during_a_job_resumes_it_after_a_restart() {
    let dirs = dirs();
    let sql = ENDLESS.replace("${COUNT:1000000000}", "3000000");
    let id = {
        let mut server = Server::start(&dirs, None);
        let id = server.submit("survivor", &sql);
        server.wait_for(&id, "checkpointed", Duration::from_secs(60), |j| {
            j["checkpoints"]["completed"].as_u64().unwrap_or(0) >= 2
        });
        server.child.kill().unwrap(); // SIGKILL
        server.child.wait().unwrap();
        id
    };
    let server = Server::start(&dirs, None);
    let job = server.wait_for(&id, "finished", Duration::from_secs(120), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "finished", "{job}");
    assert!(
        job["checkpoints"]["restored_from"].as_u64().is_some(),
        "the job resumed from a checkpoint: {job}"
    );
    let text = std::fs::read_to_string(dirs.output.join("copy.ndjson")).unwrap();
    let ids: Vec<&str> = text.lines().map(|l| l.split('"').nth(3).unwrap()).collect();
    assert_eq!(ids.len(), 3_000_000, "every row written");
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        3_000_000,
        "no row written twice"
    );
    assert_eq!(
        node(&job, "orders")["rows_in"],
        3_000_000,
        "counters continue across the restart"
    );
}

#[test]
fn errors_come_back_with_their_status() {
    let dirs = dirs();
    std::fs::write(dirs.data.join("in.ndjson"), "{\"k\":\"a\"}\n").unwrap();
    let server = Server::start(&dirs, Some("s3cret"));

    // Bad SQL: 400 naming line and column; nothing started.
    let (status, error) = server.post("/api/v1/jobs", &json!({ "sql": "CREATE TABLE t (k VARCHAR) WITH (connector = 'generator');\nSELECT nope\n  FROM t;" }));
    assert_eq!(status, 400, "{error}");
    assert_eq!(
        (error["line"].as_u64(), error["column"].as_u64()),
        (Some(2), Some(8)),
        "{error}"
    );
    assert!(error["error"].as_str().unwrap().contains("nope"), "{error}");
    let (_, list) = server.get("/api/v1/jobs");
    assert_eq!(list, json!([]));

    // Validation: the graph, or the errors.
    let (status, valid) = server.post("/api/v1/validate", &json!({ "sql": ENDLESS }));
    assert_eq!(status, 200);
    assert_eq!(valid["valid"], true);
    assert_eq!(valid["graph"].as_array().unwrap().len(), 3, "{valid}");
    assert!(
        valid["graph"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["updating"] == false),
        "{valid}"
    );
    // An updating query: its nodes say so, with their upsert key.
    let counts = "CREATE TABLE orders (customer_id VARCHAR) WITH (connector = 'generator', stream = 'orders');\n\
                  SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id;";
    let (_, valid) = server.post(
        "/api/v1/validate",
        &json!({ "sql": counts, "parallelism": 1 }),
    );
    let aggregate = valid["graph"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "updating_aggregate")
        .unwrap_or_else(|| panic!("{valid}"))
        .clone();
    assert_eq!(aggregate["updating"], true, "{aggregate}");
    assert_eq!(
        aggregate["upsert_key"],
        json!(["customer_id"]),
        "{aggregate}"
    );
    let (_, invalid) = server.post("/api/v1/validate", &json!({ "sql": "SELECT FROM WHERE" }));
    assert_eq!(invalid["valid"], false);
    assert!(invalid["errors"][0]["line"].as_u64().is_some(), "{invalid}");
    // A misspelt option is marked where its table is declared.
    let typo = "-- orders\nCREATE TABLE t (k VARCHAR) WITH (connector = 'generator', stream = 'orders', rat = '5');\nSELECT k FROM t;";
    let (_, invalid) = server.post("/api/v1/validate", &json!({ "sql": typo }));
    assert_eq!(invalid["valid"], false);
    assert_eq!(
        (
            invalid["errors"][0]["line"].as_u64(),
            invalid["errors"][0]["column"].as_u64()
        ),
        (Some(2), Some(1)),
        "{invalid}"
    );
    assert!(
        invalid["errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("unknown option 'rat' for a generator source; did you mean 'rate'?"),
        "{invalid}"
    );

    // Paths outside the roots.
    for (sql, path) in [
        ("CREATE TABLE t (k VARCHAR) WITH (connector = 'file', path = '../../../etc/passwd'); SELECT k FROM t;", "../../../etc/passwd"),
        ("CREATE TABLE t (k VARCHAR) WITH (connector = 'file', path = 'in.ndjson');
          CREATE TABLE o (k VARCHAR) WITH (connector = 'ndjson', path = '/tmp/elsewhere.ndjson'); INSERT INTO o SELECT k FROM t;", "/tmp/elsewhere.ndjson"),
        ("CREATE TABLE t (k VARCHAR) WITH (connector = 'file', path = '../state/jobs'); SELECT k FROM t;", "../state/jobs"),
    ] {
        let (status, error) = server.post("/api/v1/jobs", &json!({ "sql": sql }));
        assert_eq!(status, 400, "{error}");
        assert!(error["error"].as_str().unwrap().contains(path), "{error}");
    }

    // Group jobs: a job without a Kafka source cannot be scaled out over
    // a consumer group; a session timeout is for group jobs only.
    let (status, error) = server.post(
        "/api/v1/jobs",
        &json!({ "sql": ENDLESS, "group": "spread" }),
    );
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("group 'spread': a group job needs a job that reads Kafka topics"),
        "{error}"
    );
    let (status, error) = server.post(
        "/api/v1/jobs",
        &json!({ "sql": ENDLESS, "session_timeout_ms": 2000 }),
    );
    assert_eq!(status, 400, "{error}");
    let (_, list) = server.get("/api/v1/jobs");
    assert_eq!(list, json!([]), "refused jobs are not kept");

    // Unknown ids.
    assert_eq!(server.get("/api/v1/jobs/nope").0, 404);
    assert_eq!(server.post("/api/v1/jobs/nope/stop", &json!({})).0, 404);
    assert_eq!(server.request("DELETE", "/api/v1/jobs/nope", None).0, 404);
    assert_eq!(server.get("/api/v1/jobs/nope/sinks/x/tail").0, 404);

    // Oversized bodies: the server answers 413 and hangs up without reading
    // them, so the request is written by hand and the answer read back.
    let huge = serde_json::to_vec(&json!({ "sql": "x".repeat(2 << 20) })).unwrap();
    assert_eq!(
        raw_status(&server.base, "POST", "/api/v1/jobs", Some("s3cret"), &huge),
        413
    );

    // Malformed bodies are JSON errors too.
    let (status, error) = server.post("/api/v1/jobs", &json!({ "no_sql": 1 }));
    assert_eq!(status, 422, "{error}");
    assert!(error["error"].as_str().is_some());

    // Tokens.
    let anonymous = server.with_token(None);
    assert_eq!(anonymous.get("/api/v1/jobs").0, 401);
    assert_eq!(server.with_token(Some("nope")).get("/api/v1/jobs").0, 401);
    assert_eq!(anonymous.get("/metrics").0, 200, "/metrics needs no token");
    assert_eq!(anonymous.get("/healthz").0, 200);

    // The OpenAPI document describes every route.
    let (status, openapi) = server.get("/api/v1/openapi.json");
    assert_eq!(status, 200);
    assert!(openapi["openapi"].as_str().unwrap().starts_with("3."));
    for path in [
        "/api/v1/jobs",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{id}/stop",
        "/api/v1/validate",
        "/api/v1/jobs/{id}/sinks/{sink}/tail",
        "/metrics",
    ] {
        assert!(openapi["paths"].get(path).is_some(), "{path} is documented");
    }
}

#[test]
fn metrics_are_prometheus_text_labelled_by_job_and_node() {
    let dirs = dirs();
    let server = Server::start(&dirs, None);
    let id = server.submit("small", &ENDLESS.replace("${COUNT:1000000000}", "5000"));
    server.wait_for(&id, "finished", Duration::from_secs(60), |j| {
        j["state"] == "finished"
    });
    let mut response = server
        .agent
        .get(format!("{}/metrics", server.base))
        .call()
        .unwrap();
    assert!(response
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = response.body_mut().read_to_string().unwrap();
    assert!(text.contains("# TYPE eddy_rows_in_total counter"), "{text}");
    let line = format!("eddy_rows_in_total{{job=\"{id}\",job_name=\"small\",node=\"orders\",kind=\"source\"}} 5000");
    assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    // The job's time on the worker pool, in seconds there and in
    // milliseconds in its view.
    let prefix = format!("eddy_job_pool_seconds_total{{job=\"{id}\",job_name=\"small\"}} ");
    let seconds: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("missing {prefix} in\n{text}"))
        .parse()
        .unwrap();
    let (_, view) = server.get(&format!("/api/v1/jobs/{id}"));
    let pool_ms = view["pool_ms"].as_u64().unwrap();
    assert!(pool_ms > 0, "{view}");
    assert!(
        (seconds * 1000.0 - pool_ms as f64).abs() <= 1.0,
        "{seconds} s, {pool_ms} ms"
    );
}

#[test]
fn a_server_stopped_with_sigterm_stops_its_jobs_and_resumes_them_on_restart() {
    let dirs = dirs();
    let sql = ENDLESS.replace("${COUNT:1000000000}", "2000000");
    let (id, rows_before) = {
        let mut server = Server::start(&dirs, None);
        let id = server.submit("graceful", &sql);
        server.wait_for(&id, "reading", Duration::from_secs(60), |j| {
            node(j, "orders")["rows_in"].as_u64().unwrap_or(0) > 0
        });
        let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = server.child.wait().unwrap();
        assert!(
            status.success(),
            "the server exits cleanly on SIGTERM: {status}"
        );
        let rows = std::fs::read_to_string(dirs.output.join("copy.ndjson"))
            .unwrap()
            .lines()
            .count();
        (id, rows)
    };
    assert!(rows_before > 0, "the stop committed what was read");
    let server = Server::start(&dirs, None);
    let job = server.wait_for(&id, "finished", Duration::from_secs(120), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "finished", "{job}");
    assert!(
        job["checkpoints"]["restored_from"].as_u64().is_some(),
        "resumed from the final checkpoint: {job}"
    );
    let text = std::fs::read_to_string(dirs.output.join("copy.ndjson")).unwrap();
    assert_eq!(text.lines().count(), 2_000_000);
    assert_eq!(
        text.lines().collect::<HashSet<_>>().len(),
        2_000_000,
        "no row twice"
    );
}

/// A job's own memory budget, and the server's for all jobs: the job that
/// passes one in an operator that cannot spill (a global DISTINCT
/// aggregate: one group) fails with the budget and its operator in its error, and the server
/// goes on; one whose aggregate spills finishes, its spilled bytes in its
/// metrics.
#[test]
fn memory_budgets_fail_the_job_that_passes_them() {
    const KEYS: &str = "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
           WITH (connector = 'generator', stream = 'orders', count = '20000000');
         CREATE TABLE distinct_orders (n BIGINT) WITH (connector = 'blackhole');
         INSERT INTO distinct_orders SELECT count(DISTINCT order_id) AS n FROM orders;";
    let dirs = dirs();
    let server = Server::start_with(&dirs, None, &["--memory-limit", "4MiB"]);
    let (status, error) = server.post(
        "/api/v1/jobs",
        &json!({ "name": "bad", "sql": KEYS, "memory_limit": "plenty" }),
    );
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("memory_limit"),
        "{error}"
    );
    for (name, limit, budget) in [("own", Some("1MiB"), "job"), ("shared", None, "server")] {
        let (status, job) = server.post(
            "/api/v1/jobs",
            &json!({ "name": name, "sql": KEYS, "memory_limit": limit, "parallelism": 1 }),
        );
        assert_eq!(status, 201, "{job}");
        let id = job["id"].as_str().unwrap();
        let job = server.wait_for(id, "ended", Duration::from_secs(60), |j| {
            j["state"] != "running"
        });
        assert_eq!(job["state"], "failed", "{job}");
        let error = job["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("over the {budget}'s memory budget")),
            "{error}"
        );
        assert!(
            error.contains(&format!("({name}/updating_aggregate#")),
            "{error}"
        );
    }
    const SPILLS: &str = "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
           WITH (connector = 'generator', stream = 'orders', count = '200000');
         CREATE TABLE per_order (order_id VARCHAR, n BIGINT) WITH (connector = 'blackhole');
         INSERT INTO per_order SELECT order_id, count(*) AS n FROM orders GROUP BY order_id;";
    let (status, job) = server.post(
        "/api/v1/jobs",
        &json!({ "name": "spills", "sql": SPILLS, "memory_limit": "1MiB", "parallelism": 1 }),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap();
    let job = server.wait_for(id, "ended", Duration::from_secs(120), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "finished", "{job}");
    let aggregate = job["metrics"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["kind"] == "updating_aggregate"))
        .unwrap_or_else(|| panic!("no aggregate in {job}"));
    assert!(
        aggregate["spill_written_bytes"].as_u64().unwrap() > 1 << 20,
        "{aggregate}"
    );
    assert!(
        aggregate["state_bytes"].as_u64().unwrap() <= 1 << 20,
        "{aggregate}"
    );
    let (status, _) = server.get("/healthz");
    assert_eq!(status, 200);
}

#[test]
fn a_server_refuses_jobs_past_its_cap_and_holds_each_to_the_default_budget() {
    const LIVE: &str = "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
           WITH (connector = 'generator', stream = 'orders', rate = '5', realtime = 'true');
         CREATE TABLE sink (order_id VARCHAR) WITH (connector = 'blackhole');
         INSERT INTO sink SELECT order_id FROM orders;";
    const KEYS: &str = "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
           WITH (connector = 'generator', stream = 'orders', count = '20000000');
         CREATE TABLE distinct_orders (n BIGINT) WITH (connector = 'blackhole');
         INSERT INTO distinct_orders SELECT count(DISTINCT order_id) AS n FROM orders;";
    let dirs = dirs();
    let server = Server::start_with(
        &dirs,
        None,
        &["--max-jobs", "2", "--job-memory-limit", "1MiB"],
    );
    let first = server.submit("first", LIVE);
    // Held to the default budget, the job of many keys fails; an ended
    // job does not count against the cap.
    let keys = server.submit("keys", KEYS);
    let job = server.wait_for(&keys, "ended", Duration::from_secs(60), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "failed", "{job}");
    let error = job["error"].as_str().unwrap();
    assert!(error.contains("over the job's memory budget"), "{error}");
    let second = server.submit("second", LIVE);
    let (status, refused) = server.post("/api/v1/jobs", &json!({ "name": "third", "sql": LIVE }));
    assert_eq!(status, 429, "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("--max-jobs 2") && message.contains("runs 2 job(s)"),
        "{message}"
    );
    let (status, listed) = server.get("/api/v1/jobs");
    assert_eq!(status, 200);
    assert_eq!(
        listed.as_array().unwrap().len(),
        3,
        "nothing kept of the refused job: {listed}"
    );
    let (status, _) = server.post(&format!("/api/v1/jobs/{first}/stop"), &json!({}));
    assert_eq!(status, 200);
    server.wait_for(&first, "stopped", Duration::from_secs(30), |j| {
        j["state"] != "running"
    });
    // The stopped job's place comes back; under a loaded machine not
    // always by the time its state reads stopped, so the submission is
    // retried for a while (each refusal must still be the cap's).
    let deadline = Instant::now() + Duration::from_secs(20);
    let third = loop {
        let (status, job) = server.post("/api/v1/jobs", &json!({ "name": "third", "sql": LIVE }));
        if status == 201 {
            break job["id"].as_str().unwrap().to_string();
        }
        assert_eq!(status, 429, "{job}");
        assert!(Instant::now() < deadline, "still refused: {job}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for id in [second, third] {
        let (status, _) = server.post(&format!("/api/v1/jobs/{id}/stop"), &json!({}));
        assert_eq!(status, 200);
    }
}

#[test]
fn a_job_reading_a_named_pipe_is_submitted_without_waiting_for_a_writer() {
    let dirs = dirs();
    let fifo = dirs.data.join("feed.pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let server = Server::start(&dirs, None);
    // A writer comes 6 s from now; submitting must not wait for it.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(6));
            std::fs::write(&fifo, "{\"k\": \"a\"}\n{\"k\": \"b\"}\n").unwrap();
        })
    };
    let asked = Instant::now();
    let id = server.submit(
        "pipe",
        "CREATE TABLE feed (k VARCHAR) WITH (connector = 'file', path = 'feed.pipe');
         CREATE TABLE out (k VARCHAR) WITH (connector = 'ndjson', path = 'pipe.ndjson');
         INSERT INTO out SELECT upper(k) FROM feed;",
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "submitting took {:?}",
        asked.elapsed()
    );
    let (status, job) = server.get(&format!("/api/v1/jobs/{id}"));
    assert_eq!(
        (status, job["state"].as_str()),
        (200, Some("running")),
        "{job}"
    );
    // The writer's rows go through and the job ends with the pipe.
    writer.join().unwrap();
    let job = server.wait_for(&id, "finished", Duration::from_secs(30), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "finished", "{job}");
    let written = std::fs::read_to_string(dirs.output.join("pipe.ndjson")).unwrap();
    assert_eq!(written, "{\"k\":\"A\"}\n{\"k\":\"B\"}\n");
}

/// A file's lines, sorted (parallel instances interleave their rows).
fn sorted_lines(path: &std::path::Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// What `eddy run` of `sql` writes into `sink_file`, sorted: the output of
/// an uninterrupted run.
fn uninterrupted(sql: &str, sink_file: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.sql");
    std::fs::write(&path, sql).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["run", "--quiet", "--output"])
        .arg(dir.path().join("out"))
        .arg(&path)
        .output()
        .unwrap();
    common::assert_success(&out, "the uninterrupted run");
    sorted_lines(&dir.path().join("out").join(sink_file))
}

/// Per-customer windows over a bounded generated stream, paced (about 3 s
/// of wall clock): keyed state that a savepoint carries.
const WINDOWED: &str = "
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = 'generator', stream = 'orders', count = '12000', rate = '4000', realtime = 'true',
        batch_size = '200');
CREATE TABLE per_customer (window_start TIMESTAMP, customer_id VARCHAR, n BIGINT, total DOUBLE)
  WITH (connector = 'ndjson', path = 'per_customer.ndjson');
INSERT INTO per_customer
SELECT window_start, customer_id, count(*), sum(order_amount)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, customer_id;
";

#[test]
fn a_job_stopped_with_a_savepoint_starts_again_from_it_at_another_parallelism() {
    let expected = uninterrupted(WINDOWED, "per_customer.ndjson");

    let dirs = dirs();
    let server = Server::start(&dirs, None);
    let (status, job) = server.post(
        "/api/v1/jobs",
        &json!({ "name": "windows", "sql": WINDOWED, "parallelism": 2 }),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    server.wait_for(&id, "checkpointed", Duration::from_secs(30), |j| {
        j["checkpoints"]["completed"].as_u64() >= Some(1)
    });
    let (status, stopped) = server.post(
        &format!("/api/v1/jobs/{id}/stop"),
        &json!({ "savepoint": true }),
    );
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(
        stopped["state"], "stopped",
        "paced at 4,000 rows a second, 12,000 rows: {stopped}"
    );
    let savepoint = &stopped["savepoints"][0];
    assert_eq!(savepoint["job_id"], id.as_str(), "{stopped}");
    assert_eq!(savepoint["parallelism"], 2, "{savepoint}");
    assert_eq!(savepoint["key_groups"], 128, "{savepoint}");
    let (status, listed) = server.get("/api/v1/savepoints");
    assert_eq!(status, 200);
    assert_eq!(listed[0]["id"], savepoint["id"], "{listed}");

    // A job from it, at 3 instances, goes on where the first stopped.
    let (status, resumed) = server.post(
        "/api/v1/jobs",
        &json!({ "name": "windows again", "sql": WINDOWED, "parallelism": 3, "from_savepoint": savepoint["id"] }),
    );
    assert_eq!(status, 201, "{resumed}");
    let again = resumed["id"].as_str().unwrap().to_string();
    assert_eq!(resumed["from_savepoint"], savepoint["id"]);
    let done = server.wait_for(&again, "finished", Duration::from_secs(60), |j| {
        j["state"] == "finished"
    });
    assert_eq!(
        done["checkpoints"]["restored_from"], savepoint["checkpoint"],
        "{done}"
    );
    assert_eq!(
        sorted_lines(&dirs.output.join("per_customer.ndjson")),
        expected,
        "the output of the job stopped and the one started from its savepoint, together"
    );

    // A misspelt key is refused, not ignored (the job would start afresh,
    // the stop would take no savepoint).
    let (status, body) = server.post(
        "/api/v1/jobs",
        &json!({ "sql": WINDOWED, "from_savepiont": savepoint["id"] }),
    );
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("from_savepiont"),
        "{body}"
    );
    let (status, body) = server.post(
        &format!("/api/v1/jobs/{again}/stop"),
        &json!({ "savepiont": true }),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("savepiont"),
        "{body}"
    );

    // A savepoint that is not there, and a malformed stop body.
    let (status, body) = server.post(
        "/api/v1/jobs",
        &json!({ "sql": WINDOWED, "from_savepoint": "../jobs" }),
    );
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        raw_status(
            &server.base,
            "POST",
            &format!("/api/v1/jobs/{again}/stop"),
            None,
            b"{savepoint"
        ),
        400
    );
}

/// Windows per country over a paced stream (about 5 s of wall clock).
const PER_COUNTRY: &str = "
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = 'generator', stream = 'orders', count = '20000', rate = '4000', realtime = 'true',
        batch_size = '200');
CREATE TABLE per_country (window_start TIMESTAMP, country VARCHAR, n BIGINT)
  WITH (connector = 'ndjson', path = 'per_country.ndjson');
INSERT INTO per_country
SELECT window_start, country, count(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, country;
";

#[test]
fn a_job_redeployed_with_new_sql_keeps_the_state_of_what_did_not_change() {
    let expected = uninterrupted(PER_COUNTRY, "per_country.ndjson");

    let dirs = dirs();
    let server = Server::start(&dirs, None);
    let (status, job) = server.post(
        "/api/v1/jobs",
        &json!({ "name": "countries", "sql": PER_COUNTRY, "parallelism": 2 }),
    );
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    let checkpointed = |j: &Value| j["checkpoints"]["completed"].as_u64() >= Some(1);
    server.wait_for(&id, "checkpointed", Duration::from_secs(30), checkpointed);

    // Another window width: a preview says it would be refused, and why,
    // while the job runs on; SQL that does not plan is an error.
    let wider = PER_COUNTRY.replace("INTERVAL '10' SECOND))", "INTERVAL '20' SECOND))");
    let preview = format!("/api/v1/jobs/{id}/redeploy/preview");
    let (status, plan) = server.post(&preview, &json!({ "sql": wider }));
    assert_eq!(status, 200, "{plan}");
    let why = plan["refused"].as_str().unwrap_or_default();
    assert!(why.contains("tumble(10000ms)"), "{plan}");
    let (status, bad) = server.post(&preview, &json!({ "sql": "SELECT nope FROM orders;" }));
    assert_eq!(status, 400, "{bad}");
    let (_, running) = server.get(&format!("/api/v1/jobs/{id}"));
    assert_eq!(running["state"], "running", "a preview stops nothing");

    // Redeployed anyway: refused naming the window, and the job runs its
    // old SQL again.
    let (status, refused) = server.request(
        "PUT",
        &format!("/api/v1/jobs/{id}"),
        Some(&json!({ "sql": wider })),
    );
    assert_eq!(status, 400, "{refused}");
    let why = refused["error"].as_str().unwrap();
    assert!(
        why.contains("runs its old SQL again")
            && why.contains("window_aggregate")
            && why.contains("tumble(10000ms)"),
        "{why}"
    );
    server.wait_for(&id, "running again", Duration::from_secs(30), |j| {
        j["state"] == "running" && checkpointed(j)
    });

    // A new sink beside it, at 3 instances: the window keeps its state.
    let grown = format!(
        "{PER_COUNTRY}
CREATE TABLE big (order_id VARCHAR, order_amount DOUBLE) WITH (connector = 'ndjson', path = 'big.ndjson');
INSERT INTO big SELECT order_id, order_amount FROM orders WHERE order_amount > 130;"
    );
    let (status, plan) = server.post(&preview, &json!({ "sql": grown, "parallelism": 3 }));
    assert_eq!(status, 200, "{plan}");
    assert!(
        plan["refused"].is_null() && plan["dropped"] == json!([]),
        "{plan}"
    );
    assert!(plan["checkpoint"].as_u64() >= Some(1), "{plan}");
    assert!(
        plan["started"].as_array().unwrap().contains(&json!("big"))
            && plan["kept"]
                .as_array()
                .unwrap()
                .contains(&json!("per_country")),
        "{plan}"
    );
    let (status, redeployed) = server.request(
        "PUT",
        &format!("/api/v1/jobs/{id}"),
        Some(&json!({ "sql": grown, "parallelism": 3 })),
    );
    assert_eq!(status, 200, "{redeployed}");
    let kept: Vec<&str> = redeployed["kept"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let started: Vec<&str> = redeployed["started"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        kept.iter().any(|n| n.starts_with("window_aggregate"))
            && kept.contains(&"per_country")
            && kept.contains(&"orders"),
        "{redeployed}"
    );
    assert!(started.contains(&"big"), "{redeployed}");
    assert_eq!(redeployed["job"]["parallelism"], 3);
    server.wait_for(&id, "finished", Duration::from_secs(60), |j| {
        j["state"] == "finished"
    });
    assert!(
        sorted_lines(&dirs.output.join("per_country.ndjson")) == expected,
        "the unchanged query's output is exact across the refusal and the redeploy"
    );
    assert!(!sorted_lines(&dirs.output.join("big.ndjson")).is_empty());
}

#[test]
fn python_functions_need_the_servers_consent_and_a_crashing_one_fails_only_its_job() {
    const LIVE: &str = "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
           WITH (connector = 'generator', stream = 'orders', rate = '50');
         CREATE TABLE out (customer_id VARCHAR) WITH (connector = 'blackhole');
         INSERT INTO out SELECT customer_id FROM orders;";
    let crashing = |body: &str| {
        format!(
            "CREATE FUNCTION f(x DOUBLE) RETURNS DOUBLE LANGUAGE PYTHON AS {body};
             CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
               WITH (connector = 'generator', stream = 'orders', rate = '50');
             CREATE TABLE out (v DOUBLE) WITH (connector = 'blackhole');
             INSERT INTO out SELECT f(order_amount) FROM orders;"
        )
    };
    let segfault = crashing("$$\nimport ctypes\ndef f(x):\n    return ctypes.string_at(0)\n$$");

    let dirs = dirs();
    {
        let server = Server::start(&dirs, None);
        let (status, error) =
            server.post("/api/v1/jobs", &json!({ "name": "py", "sql": segfault }));
        assert_eq!(status, 400, "{error}");
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .contains("Python functions are off in this server (an operator turns them on with eddy serve --allow-python-udfs)"),
            "{error}"
        );
    }

    let server = Server::start_with(&dirs, None, &["--allow-python-udfs"]);
    let live = server.submit("live", LIVE);
    let crash = server.submit("crash", &segfault);
    let job = server.wait_for(&crash, "failed", Duration::from_secs(60), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "failed", "{job}");
    let error = job["error"].as_str().unwrap();
    assert!(
        error.contains("python function f: the Python worker ended while it ran (signal 11"),
        "{error}"
    );
    // A module below the data root is imported, and the job view counts
    // each function's rows and those that raised; a module from elsewhere
    // (the standard library) is refused when the job is submitted.
    std::fs::write(
        dirs.data.join("rules.py"),
        "def f(x):\n    if x > 100:\n        raise ValueError('big')\n    return x * 2\n",
    )
    .unwrap();
    let module = server.submit("module", &crashing("'rules:f'"));
    let job = server.wait_for(&module, "finished", Duration::from_secs(60), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "finished", "{job}");
    let functions = &job["python_functions"];
    assert_eq!(functions[0]["name"], "f", "{functions}");
    let (rows, raised) = (
        functions[0]["rows"].as_u64().unwrap(),
        functions[0]["raised"].as_u64().unwrap(),
    );
    assert!(rows > 1000 && raised > 0 && raised < rows, "{functions}");
    assert_eq!(
        functions[0]["first_error"], "ValueError: big",
        "{functions}"
    );
    // /metrics counts them too.
    let mut response = server
        .agent
        .get(format!("{}/metrics", server.base))
        .call()
        .unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    let line = format!(
        "eddy_python_raised_total{{job=\"{module}\",job_name=\"module\",function=\"f\"}} {raised}"
    );
    assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    let (status, error) = server.post(
        "/api/v1/jobs",
        &json!({ "name": "outside", "sql": crashing("'math:fabs'") }),
    );
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("python function f: module math is not below the server's function root"),
        "{error}"
    );
    // The ended jobs' workers are gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while python_workers_of(server.child.id()) > 0 {
        assert!(
            Instant::now() < deadline,
            "Python workers outlive their jobs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The other job and the server are unharmed.
    let job = server.wait_for(&live, "finished", Duration::from_secs(60), |j| {
        j["state"] != "running"
    });
    assert_eq!(job["state"], "finished", "{job}");
    let (status, _) = server.get("/healthz");
    assert_eq!(status, 200);
}

/// The Python worker processes whose parent is `pid`.
fn python_workers_of(pid: u32) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid ...
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(pid) && String::from_utf8_lossy(&cmdline).contains("eddy-python-worker") {
            n += 1;
        }
    }
    n
}

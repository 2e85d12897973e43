//! `eddy bench views`: point queries against a materialized view of a
//! running server, over its PostgreSQL port (a prepared statement with a
//! parameter) or over HTTP (`GET /api/v1/views/{name}?key=`).
//!
//! In: where the server listens, the view and its integer key column, the
//! key range, a target rate (0: as fast as the clients go), clients and
//! seconds. Out: one JSON line of queries, the rate reached, rows found,
//! errors and latency percentiles in ms. At a target rate each query has a
//! scheduled start and its latency counts from it, so a stall delays the
//! queries behind it in the figures too (no coordinated omission).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use crate::error::{CliError, Result};

/// What to load.
#[derive(Debug, Clone)]
pub struct ViewLoad {
    /// `pg` or `http`.
    pub protocol: String,
    /// The PostgreSQL port (pg).
    pub pg: Option<SocketAddr>,
    /// The HTTP API (http).
    pub server: String,
    /// The password / bearer token.
    pub token: Option<String>,
    /// The view.
    pub view: String,
    /// Its key column, an integer.
    pub key_column: String,
    /// Keys are drawn from 0 to this.
    pub keys: u64,
    /// Queries a second in all (0: closed loop).
    pub qps: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// How long.
    pub seconds: u64,
}

/// One client's tally.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    found: u64,
    errors: u64,
    first_error: Option<String>,
}

/// Why a point query failed (the client library's own error).
type AskError = Box<dyn std::error::Error + Send + Sync>;

/// A client that asks for one key's row: how many rows came back.
trait PointQuery: Send {
    fn ask(&mut self, key: i64) -> std::result::Result<u64, AskError>;
}

struct Pg {
    client: postgres::Client,
    statement: postgres::Statement,
}

impl PointQuery for Pg {
    fn ask(&mut self, key: i64) -> std::result::Result<u64, AskError> {
        let rows = self.client.query(&self.statement, &[&key])?;
        Ok(rows.len() as u64)
    }
}

struct Http {
    agent: ureq::Agent,
    url: String,
    token: Option<String>,
}

impl PointQuery for Http {
    fn ask(&mut self, key: i64) -> std::result::Result<u64, AskError> {
        let mut request = self.agent.get(format!("{}{key}", self.url));
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let body: serde_json::Value = request.call()?.body_mut().read_json()?;
        Ok(body["data"].as_array().map_or(0, |rows| rows.len() as u64))
    }
}

fn connect(load: &ViewLoad) -> Result<Box<dyn PointQuery>> {
    match load.protocol.as_str() {
        "pg" => {
            let addr = load
                .pg
                .ok_or_else(|| CliError::Usage("bench views --protocol pg needs --pg".into()))?;
            let mut config = postgres::Config::new();
            config
                .host(&addr.ip().to_string())
                .port(addr.port())
                .user("eddy")
                .dbname("eddy");
            if let Some(token) = &load.token {
                config.password(token);
            }
            let fail = |e: postgres::Error| CliError::Usage(format!("PostgreSQL {addr}: {e}"));
            let mut client = config.connect(postgres::NoTls).map_err(fail)?;
            let statement = client
                .prepare(&format!(
                    "SELECT * FROM {} WHERE {} = $1",
                    load.view, load.key_column
                ))
                .map_err(fail)?;
            Ok(Box::new(Pg { client, statement }))
        }
        "http" => Ok(Box::new(Http {
            agent: ureq::Agent::config_builder()
                .http_status_as_error(true)
                .build()
                .into(),
            url: format!(
                "{}/api/v1/views/{}?key=",
                load.server.trim_end_matches('/'),
                load.view
            ),
            token: load.token.clone(),
        })),
        other => Err(CliError::Usage(format!(
            "bench views --protocol: pg or http, not {other}"
        ))),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// Runs the load; one JSON line.
pub fn views(load: &ViewLoad) -> Result<String> {
    let clients = load.clients.max(1);
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        connections.push(connect(load)?);
    }
    let interval =
        (load.qps > 0).then(|| Duration::from_secs_f64(clients as f64 / load.qps as f64));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(load.seconds);
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let workers: Vec<_> = connections
            .into_iter()
            .enumerate()
            .map(|(i, mut connection)| {
                scope.spawn(move || {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(i as u64 + 1);
                    let mut tally = Tally::default();
                    // Clients start spread over one interval.
                    let mut next = started
                        + interval.map_or(Duration::ZERO, |d| d * i as u32 / clients as u32);
                    loop {
                        let now = Instant::now();
                        if now >= deadline {
                            break;
                        }
                        let scheduled = match interval {
                            Some(interval) => {
                                if next > now {
                                    std::thread::sleep(next - now);
                                }
                                let at = next;
                                next += interval;
                                at
                            }
                            None => now,
                        };
                        let key = rng.random_range(0..load.keys.max(1)) as i64;
                        match connection.ask(key) {
                            Ok(rows) => tally.found += rows,
                            Err(e) => {
                                tally.errors += 1;
                                tally.first_error.get_or_insert(e.to_string());
                            }
                        }
                        tally.latencies.push(scheduled.elapsed());
                    }
                    tally
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut latencies: Vec<Duration> = tallies
        .iter()
        .flat_map(|t| t.latencies.iter().copied())
        .collect();
    latencies.sort_unstable();
    let queries = latencies.len();
    Ok(serde_json::json!({
        "bench": "views",
        "protocol": load.protocol,
        "target_qps": load.qps,
        "clients": clients,
        "seconds": elapsed,
        "queries": queries,
        "qps": queries as f64 / elapsed,
        "found": tallies.iter().map(|t| t.found).sum::<u64>(),
        "errors": tallies.iter().map(|t| t.errors).sum::<u64>(),
        "first_error": tallies.iter().find_map(|t| t.first_error.clone()),
        "p50_ms": percentile(&latencies, 0.50),
        "p99_ms": percentile(&latencies, 0.99),
        "p999_ms": percentile(&latencies, 0.999),
        "max_ms": latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    })
    .to_string())
}

//! `eddy bench api`: load on a running server.
//!
//! In: a server's URL (and token), clients and seconds. Out: one JSON line
//! of requests, errors, jobs and `GET /api/v1/jobs/{id}` latency
//! percentiles.

use std::time::Instant;

use crate::error::Result;

/// The job each load client submits: a generator of `rows` orders copied
/// to a stdout sink (rows only counted, and tailed).
const API_LOAD_SQL: &str = "
CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT)
  WITH (connector = 'generator', stream = 'orders', count = '${ROWS}', batch_size = '1000');
SELECT order_id, order_amount FROM orders;
";

/// Latency figures of the API load benchmark.
fn percentile(sorted: &[std::time::Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// `eddy bench api`: `clients` threads for `seconds` against a running
/// server, each looping: submit a job, poll `GET /api/v1/jobs/{id}` while it
/// runs (timed), read 100 rows of its tail, delete it. Prints one JSON line:
/// requests, errors, jobs, and the GET latency percentiles in ms.
pub fn api(server: &str, token: Option<String>, clients: usize, seconds: u64) -> Result<String> {
    use crate::client::Client;
    use std::io::BufRead;
    let deadline = Instant::now() + std::time::Duration::from_secs(seconds);
    let results: Vec<(Vec<std::time::Duration>, u64, u64, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                let token = token.clone();
                scope.spawn(move || {
                    let client = Client::new(server, token.clone());
                    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
                    let (mut latencies, mut requests, mut errors, mut jobs) = (Vec::new(), 0u64, 0u64, 0u64);
                    while Instant::now() < deadline {
                        let body = serde_json::json!({ "name": "load", "sql": API_LOAD_SQL, "params": { "ROWS": "3000000" } });
                        requests += 1;
                        let Ok(job) = client.post("/api/v1/jobs", &body) else {
                            errors += 1;
                            continue;
                        };
                        jobs += 1;
                        let id = job["id"].as_str().unwrap_or_default().to_string();
                        let mut tail = agent.get(format!("{server}/api/v1/jobs/{id}/sinks/query1/tail"));
                        if let Some(token) = &token {
                            tail = tail.header("Authorization", format!("Bearer {token}"));
                        }
                        requests += 1;
                        match tail.call() {
                            Ok(response) if response.status().is_success() => {
                                let reader = std::io::BufReader::new(response.into_body().into_reader());
                                let _ = reader.lines().map_while(|l| l.ok()).filter(|l| l.starts_with("data: ")).take(100).count();
                            }
                            _ => errors += 1,
                        }
                        for _ in 0..20 {
                            let started = Instant::now();
                            requests += 1;
                            match client.get(&format!("/api/v1/jobs/{id}")) {
                                Ok(job) => {
                                    latencies.push(started.elapsed());
                                    if job["state"] != "running" {
                                        break;
                                    }
                                }
                                Err(_) => errors += 1,
                            }
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                        requests += 1;
                        if client.delete(&format!("/api/v1/jobs/{id}")).is_err() {
                            errors += 1;
                        }
                    }
                    (latencies, requests, errors, jobs)
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    });
    let mut latencies: Vec<std::time::Duration> =
        results.iter().flat_map(|r| r.0.iter().copied()).collect();
    latencies.sort();
    let requests: u64 = results.iter().map(|r| r.1).sum();
    let errors: u64 = results.iter().map(|r| r.2).sum();
    let jobs: u64 = results.iter().map(|r| r.3).sum();
    Ok(format!(
        "{{\"clients\":{clients},\"seconds\":{seconds},\"requests\":{requests},\"errors\":{errors},\"jobs\":{jobs},\"get_job_samples\":{},\"get_job_p50_ms\":{:.2},\"get_job_p99_ms\":{:.2},\"get_job_max_ms\":{:.2}}}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0)
    ))
}

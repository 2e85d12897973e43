//! `GET /metrics`: every job's per-node counters in the Prometheus text
//! exposition format (version 0.0.4), labelled `job` (the id), `job_name`,
//! `node` and `kind` (a connector's own figures as `eddy_connector_value`,
//! labelled `metric` too); and its Python functions' counters, labelled
//! `job`, `job_name` and `function`.

use std::fmt::Write as _;

use crate::views::{JobStatus, JobSummary, NodeMetrics, PythonFunctionView};

/// What `/metrics` shows of one job.
#[derive(Debug, Clone)]
pub struct JobMetrics {
    /// The job.
    pub job: JobSummary,
    /// Its nodes' counters.
    pub nodes: Vec<NodeMetrics>,
    /// Its Python functions' counters.
    pub python_functions: Vec<PythonFunctionView>,
}

/// A counter of Python functions.
struct PythonFamily {
    name: &'static str,
    help: &'static str,
    value: fn(&PythonFunctionView) -> u64,
}

const PYTHON_FAMILIES: [PythonFamily; 3] = [
    PythonFamily {
        name: "eddy_python_calls_total",
        help: "Requests a Python function's workers answered (a batch each).",
        value: |f| f.calls,
    },
    PythonFamily {
        name: "eddy_python_rows_total",
        help: "Rows a Python function was called on.",
        value: |f| f.rows,
    },
    PythonFamily {
        name: "eddy_python_raised_total",
        help: "Rows whose Python call raised (their value NULL, on_error = 'null').",
        value: |f| f.raised,
    },
];

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&NodeMetrics) -> Option<f64>,
}

const FAMILIES: [Family; 12] = [
    Family {
        name: "eddy_rows_in_total",
        kind: "counter",
        help: "Rows a node received (sources: rows read).",
        value: |m| Some(m.rows_in as f64),
    },
    Family {
        name: "eddy_rows_out_total",
        kind: "counter",
        help: "Rows a node emitted.",
        value: |m| Some(m.rows_out as f64),
    },
    Family {
        name: "eddy_late_rows_total",
        kind: "counter",
        help: "Late rows: behind the watermark (sources), dropped where their state was final (operators).",
        value: |m| Some(m.late_rows as f64),
    },
    Family {
        name: "eddy_bad_rows_total",
        kind: "counter",
        help: "Malformed input rows.",
        value: |m| Some(m.bad_rows as f64),
    },
    Family {
        name: "eddy_state_rows",
        kind: "gauge",
        help: "Rows or groups held in operator state.",
        value: |m| Some(m.state_rows as f64),
    },
    Family {
        name: "eddy_state_bytes",
        kind: "gauge",
        help: "Approximate bytes held in operator state.",
        value: |m| Some(m.state_bytes as f64),
    },
    Family {
        name: "eddy_spill_disk_bytes",
        kind: "gauge",
        help: "Bytes of operator state spilled to disk past the memory budget.",
        value: |m| Some(m.spill_disk_bytes as f64),
    },
    Family {
        name: "eddy_spill_written_bytes_total",
        kind: "counter",
        help: "Bytes of operator state written to disk.",
        value: |m| Some(m.spill_written_bytes as f64),
    },
    Family {
        name: "eddy_spill_read_bytes_total",
        kind: "counter",
        help: "Bytes of spilled operator state read back.",
        value: |m| Some(m.spill_read_bytes as f64),
    },
    Family {
        name: "eddy_watermark_ms",
        kind: "gauge",
        help: "The node's watermark, epoch milliseconds.",
        value: |m| m.watermark.map(|w| w as f64),
    },
    Family {
        name: "eddy_watermark_lag_ms",
        kind: "gauge",
        help: "Wall-clock time minus the watermark.",
        value: |m| m.watermark_lag_ms.map(|w| w as f64),
    },
    Family {
        name: "eddy_events_per_second",
        kind: "gauge",
        help: "Rows received per second.",
        value: |m| Some(m.events_per_second),
    },
];

/// Renders the exposition.
pub fn render(jobs: &[JobMetrics]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP eddy_job_running Whether a job is running (1) or ended (0)."
    );
    let _ = writeln!(out, "# TYPE eddy_job_running gauge");
    for JobMetrics { job, .. } in jobs {
        let running = if job.state == JobStatus::Running {
            1
        } else {
            0
        };
        let _ = writeln!(
            out,
            "eddy_job_running{{job=\"{}\",job_name=\"{}\",state=\"{}\"}} {running}",
            escape(&job.id),
            escape(&job.name),
            job.state.name()
        );
    }
    let _ = writeln!(
        out,
        "# HELP eddy_job_pool_seconds_total Time a job's tasks have spent on the worker pool's threads in its current run."
    );
    let _ = writeln!(out, "# TYPE eddy_job_pool_seconds_total counter");
    for JobMetrics { job, .. } in jobs {
        let _ = writeln!(
            out,
            "eddy_job_pool_seconds_total{{job=\"{}\",job_name=\"{}\"}} {}",
            escape(&job.id),
            escape(&job.name),
            job.pool_ms as f64 / 1000.0
        );
    }
    for family in &FAMILIES {
        let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
        for JobMetrics { job, nodes, .. } in jobs {
            for node in nodes {
                if let Some(value) = (family.value)(node) {
                    let _ = writeln!(
                        out,
                        "{}{{job=\"{}\",job_name=\"{}\",node=\"{}\",kind=\"{}\"}} {value}",
                        family.name,
                        escape(&job.id),
                        escape(&job.name),
                        escape(&node.name),
                        escape(&node.kind)
                    );
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP eddy_connector_value A connector's own figure, named by `metric` (a PostgreSQL source's lag_bytes, lag_ms, slot_confirmed_lsn)."
    );
    let _ = writeln!(out, "# TYPE eddy_connector_value gauge");
    for JobMetrics { job, nodes, .. } in jobs {
        for node in nodes {
            for (metric, value) in &node.connector {
                let _ = writeln!(
                    out,
                    "eddy_connector_value{{job=\"{}\",job_name=\"{}\",node=\"{}\",kind=\"{}\",metric=\"{}\"}} {value}",
                    escape(&job.id),
                    escape(&job.name),
                    escape(&node.name),
                    escape(&node.kind),
                    escape(metric)
                );
            }
        }
    }
    for family in &PYTHON_FAMILIES {
        let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} counter", family.name);
        for JobMetrics {
            job,
            python_functions,
            ..
        } in jobs
        {
            for function in python_functions {
                let _ = writeln!(
                    out,
                    "{}{{job=\"{}\",job_name=\"{}\",function=\"{}\"}} {}",
                    family.name,
                    escape(&job.id),
                    escape(&job.name),
                    escape(&function.name),
                    (family.value)(function)
                );
            }
        }
    }
    out
}

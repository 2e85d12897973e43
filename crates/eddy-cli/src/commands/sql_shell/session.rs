//! The shell's session: the tables, views and settings defined so far, and
//! the jobs its `INSERT`s started.
//!
//! In: one statement at a time. Out: what to print; a `SELECT` runs as a
//! job whose rows are drawn as a live table until it ends or Ctrl-C.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_cli::{job, CliError, Result};
use eddy_connectors::stdout::StdoutTarget;
use eddy_connectors::ConnectorConfig;
use eddy_engine::parallel::Parallelism;
use eddy_engine::runtime::{JobConfig, JobHandle, JobState};
use eddy_sql::SqlFile;

use super::live::LiveTable;

/// How often a live table is redrawn.
const REFRESH: Duration = Duration::from_millis(250);

/// A job an `INSERT` started.
struct BackgroundJob {
    statement: String,
    handle: JobHandle,
}

/// See the module docs.
pub(super) struct Session {
    /// `CREATE TABLE`, `CREATE VIEW` and `SET` statements, in order.
    catalog: Vec<String>,
    params: BTreeMap<String, String>,
    /// Where `INSERT` jobs' file sinks write.
    output: PathBuf,
    /// Rows a live table shows.
    rows: usize,
    jobs: Vec<BackgroundJob>,
}

impl Session {
    pub(super) fn new(params: BTreeMap<String, String>, output: PathBuf, rows: usize) -> Self {
        Self {
            catalog: Vec::new(),
            params,
            output,
            rows,
            jobs: Vec::new(),
        }
    }

    /// The session's statements followed by `statement`, as one file.
    fn files(&self, statement: &str) -> Vec<SqlFile> {
        let mut text = String::new();
        for defined in &self.catalog {
            text.push_str(defined);
            text.push_str(";\n");
        }
        text.push_str(statement);
        text.push(';');
        vec![SqlFile {
            name: "<shell>".into(),
            text,
        }]
    }

    /// Adds a `CREATE` or `SET` statement once the session with it plans.
    pub(super) fn define(&mut self, statement: &str) -> Result<String> {
        match job::compile_files(&self.files(statement), &self.params) {
            // Definitions alone run nothing: planned that far, they are fine.
            Err(e) if e.to_string().contains("nothing to run") => {}
            Err(e) => return Err(e),
            Ok(_) => {
                return Err(CliError::Usage(
                    "only CREATE and SET statements are kept in the session; run queries with SELECT or INSERT".into(),
                ))
            }
        }
        self.catalog.push(statement.to_string());
        Ok(format!(
            "ok ({} definitions in the session)",
            self.catalog.len()
        ))
    }

    /// The plan of a `SELECT` or `INSERT` (without running it).
    pub(super) fn explain(&self, statement: &str) -> Result<String> {
        let compiled = job::compile_files(&self.files(statement), &self.params)?;
        Ok(compiled.graph.explain())
    }

    /// Starts an `INSERT` as a job that runs while the shell goes on.
    pub(super) fn insert(&mut self, statement: &str) -> Result<String> {
        let handle = job::start(
            &self.files(statement),
            &self.params,
            ConnectorConfig {
                output_dir: Some(self.output.clone()),
                stdout: StdoutTarget::Discard,
                ..ConnectorConfig::default()
            },
            &JobConfig {
                parallelism: Parallelism::Fixed(1),
                ..JobConfig::default()
            },
        )?;
        self.jobs.push(BackgroundJob {
            statement: statement.to_string(),
            handle,
        });
        Ok(format!(
            "started job {} (files under {}); SHOW JOBS lists it, STOP JOB {} stops it",
            self.jobs.len(),
            self.output.display(),
            self.jobs.len()
        ))
    }

    /// The session's definitions, their first lines.
    pub(super) fn show_tables(&self) -> String {
        if self.catalog.is_empty() {
            return "nothing defined yet (CREATE TABLE ... ;)".into();
        }
        self.catalog
            .iter()
            .map(|s| s.lines().next().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The jobs `INSERT`s started, a line each.
    pub(super) fn show_jobs(&self) -> String {
        if self.jobs.is_empty() {
            return "no jobs (INSERT INTO starts one)".into();
        }
        let mut table = comfy_table::Table::new();
        table
            .load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
            .set_header(vec!["job", "state", "rows written", "statement"]);
        for (i, job) in self.jobs.iter().enumerate() {
            let written: u64 = job
                .handle
                .metrics()
                .iter()
                .filter(|n| n.kind == "sink")
                .map(|n| n.metrics.rows_in)
                .sum();
            let first = job.statement.lines().next().unwrap_or_default();
            table.add_row(vec![
                (i + 1).to_string(),
                job.handle.state().name().to_string(),
                written.to_string(),
                first.chars().take(60).collect(),
            ]);
        }
        table.to_string()
    }

    /// Stops job `number` (1-based) gracefully and waits for it.
    pub(super) fn stop_job(&mut self, number: usize) -> Result<String> {
        let job = number
            .checked_sub(1)
            .and_then(|i| self.jobs.get(i))
            .ok_or_else(|| CliError::Usage(format!("no job {number} (SHOW JOBS lists them)")))?;
        job.handle.stop();
        let ended = job.handle.wait_timeout(Duration::from_secs(10)).is_some();
        Ok(format!(
            "job {number}: {}{}",
            job.handle.state().name(),
            if ended { "" } else { " (still stopping)" }
        ))
    }

    /// Runs a `SELECT` and draws its result in place on `out` until it
    /// ends or `interrupted` is set (Ctrl-C); then stops it.
    pub(super) fn select(
        &self,
        statement: &str,
        interrupted: &AtomicBool,
        out: &mut impl Write,
    ) -> Result<()> {
        // The result's columns in the query's order.
        let compiled = job::compile_files(&self.files(statement), &self.params)?;
        let columns: Vec<String> = compiled
            .graph
            .nodes
            .iter()
            .find(|n| matches!(n.kind, eddy_engine::graph::NodeKind::Sink { .. }))
            .map(|sink| {
                sink.schema
                    .fields()
                    .iter()
                    .filter(|f| !eddy_engine::changelog::is_row_kind_field(f))
                    .map(|f| f.name().clone())
                    .collect()
            })
            .unwrap_or_default();
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let handle = job::start(
            &self.files(statement),
            &self.params,
            // No output directory: a bare SELECT then prints (to the buffer).
            ConnectorConfig {
                stdout: StdoutTarget::Buffer(buffer.clone()),
                ..ConnectorConfig::default()
            },
            &JobConfig {
                parallelism: Parallelism::Fixed(1),
                ..JobConfig::default()
            },
        )?;
        interrupted.store(false, Ordering::SeqCst);
        let _ = writeln!(out, "(Ctrl-C stops the query and returns to the prompt)");
        let mut table = LiveTable::with_columns(columns);
        let mut pending = Vec::new();
        let mut drawn = 0;
        loop {
            let ended = handle.wait_timeout(REFRESH).is_some();
            if let Ok(mut bytes) = buffer.lock() {
                pending.append(&mut bytes);
            }
            if let Some(end) = pending.iter().rposition(|b| *b == b'\n') {
                let complete: Vec<u8> = pending.drain(..=end).collect();
                for line in String::from_utf8_lossy(&complete).lines() {
                    table.apply(line);
                }
            }
            let stop = interrupted.load(Ordering::SeqCst);
            let state = if ended {
                handle.state().name().to_string()
            } else if stop {
                "stopped".to_string()
            } else {
                "running".to_string()
            };
            let text = format!("{}\nquery {state}", table.render(self.rows));
            // Back over what was drawn, then the table as it stands.
            if drawn > 0 {
                let _ = write!(out, "\x1b[{drawn}F\x1b[J");
            }
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
            drawn = text.lines().count();
            if ended {
                break;
            }
            if stop {
                handle.cancel();
                let _ = handle.wait_timeout(Duration::from_secs(5));
                break;
            }
        }
        if let JobState::Failed(why) = handle.state() {
            return Err(CliError::Usage(format!("the query failed: {why}")));
        }
        Ok(())
    }
}

//! The shell's session: the tables, views and settings defined so far, and
//! the jobs its `INSERT`s started.
//!
//! In: one statement at a time. Out: what to print; a `SELECT` runs as a
//! job whose rows are drawn as a live table until it ends or Ctrl-C.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_cli::{job, CliError, Result};
use eddy_connectors::settings::ConnectorSettings;
use eddy_connectors::stdout::StdoutTarget;
use eddy_connectors::ConnectorConfig;
use eddy_engine::parallel::Parallelism;
use eddy_engine::runtime::{JobConfig, JobHandle, JobState};
use eddy_sql::SqlFile;

use super::live::{draw_until_end, LiveTable};
use super::remote::Remote;

/// How often a live table is redrawn.
pub(super) const REFRESH: Duration = Duration::from_millis(250);

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
    /// With `--server`: where INSERTs, SELECTs and job commands go.
    remote: Option<Remote>,
}

impl Session {
    pub(super) fn new(
        params: BTreeMap<String, String>,
        output: PathBuf,
        rows: usize,
        remote: Option<Remote>,
    ) -> Self {
        Self {
            catalog: Vec::new(),
            params,
            output,
            rows,
            jobs: Vec::new(),
            remote,
        }
    }

    /// The session's statements followed by `statement`, as one text.
    fn text(&self, statement: &str) -> String {
        let mut text = String::new();
        for defined in &self.catalog {
            text.push_str(defined);
            text.push_str(";\n");
        }
        text.push_str(statement);
        text.push(';');
        text
    }

    /// [`Session::text`] as one file.
    fn files(&self, statement: &str) -> Vec<SqlFile> {
        vec![SqlFile {
            name: "<shell>".into(),
            text: self.text(statement),
        }]
    }

    /// Adds a `CREATE` or `SET` statement once the session with it plans.
    pub(super) fn define(&mut self, statement: &str) -> Result<String> {
        match job::compile_files(&self.files(statement), &self.params) {
            // Definitions alone run nothing: planned that far, they are fine.
            Err(CliError::Sql(eddy_sql::SqlError::NothingToRun)) => {}
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

    /// Starts an `INSERT` as a job that runs while the shell goes on (on
    /// the server, with `--server`).
    pub(super) fn insert(&mut self, statement: &str) -> Result<String> {
        if let Some(remote) = &self.remote {
            // Planned here first: a mistake is shown at once, with its line.
            job::compile_files(&self.files(statement), &self.params)?;
            return remote.insert(&self.text(statement), &self.params);
        }
        let handle = job::start(
            &self.files(statement),
            &self.params,
            ConnectorConfig {
                output_dir: Some(self.output.clone()),
                settings: ConnectorSettings::default().with(StdoutTarget::Discard),
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

    /// The jobs `INSERT`s started, a line each (the server's jobs, with
    /// `--server`).
    pub(super) fn show_jobs(&self) -> Result<String> {
        if let Some(remote) = &self.remote {
            return remote.jobs();
        }
        Ok(self.local_jobs())
    }

    fn local_jobs(&self) -> String {
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

    /// Stops job `job` (its number, 1-based; a server's job id with
    /// `--server`) gracefully and waits for it.
    pub(super) fn stop_job(&mut self, job: &str) -> Result<String> {
        if let Some(remote) = &self.remote {
            return remote.stop(job);
        }
        let number: usize = job
            .parse()
            .map_err(|_| CliError::Usage(format!("STOP JOB takes a job's number, not '{job}'")))?;
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
        let sink = compiled
            .graph
            .nodes
            .iter()
            .find(|n| matches!(n.kind, eddy_engine::graph::NodeKind::Sink { .. }));
        let columns: Vec<String> = sink
            .map(|sink| {
                sink.schema
                    .fields()
                    .iter()
                    .filter(|f| !eddy_engine::changelog::is_row_kind_field(f))
                    .map(|f| f.name().clone())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(remote) = &self.remote {
            let sink = sink.map(|s| s.name.clone()).unwrap_or_default();
            let table = LiveTable::with_columns(columns);
            return remote.select(
                &self.text(statement),
                &self.params,
                &sink,
                table,
                self.rows,
                interrupted,
                out,
            );
        }
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let handle = job::start(
            &self.files(statement),
            &self.params,
            // No output directory: a bare SELECT then prints (to the buffer).
            ConnectorConfig {
                settings: ConnectorSettings::default().with(StdoutTarget::Buffer(buffer.clone())),
                ..ConnectorConfig::default()
            },
            &JobConfig {
                parallelism: Parallelism::Fixed(1),
                ..JobConfig::default()
            },
        )?;
        let mut table = LiveTable::with_columns(columns);
        let mut pending = Vec::new();
        let stopped = draw_until_end(out, &mut table, self.rows, interrupted, |table| {
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
            ended.then(|| handle.state().name().to_string())
        });
        if stopped {
            handle.cancel();
            let _ = handle.wait_timeout(Duration::from_secs(5));
        }
        if let JobState::Failed(why) = handle.state() {
            return Err(CliError::Usage(format!("the query failed: {why}")));
        }
        Ok(())
    }
}
